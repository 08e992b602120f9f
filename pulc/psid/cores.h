/*
 * pulc/psid/cores.h — the node's cores as hwloc sees them, for binding tasks
 * (mpirun -bind-to core: PSP_BIND_CPU=<rank on this node>).
 */
#ifndef PSID_CORES_H
#define PSID_CORES_H

#include <sched.h>

/* Reads the topology once (hwloc; on failure one "core" per online CPU, with a warning).
 * Returns the number of cores found (at least 1). */
int psid_cores_init(void);

/* The CPUs of core index % number of cores (all its hardware threads, only those psid may
 * use) into *set.  Owned by the caller; psid_cores_init() must have run. */
void psid_core_cpuset(int index, cpu_set_t *set);

#endif
