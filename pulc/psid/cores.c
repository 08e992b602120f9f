/*
 * pulc/psid/cores.c — the node's cores for -bind-to core.  hwloc gives the cores (a core with
 * two hardware threads is one binding target, as hwloc-bind core:N); their CPU sets are taken
 * once at start, restricted to the CPUs psid itself may run on (a cgroup or taskset limits
 * the ranks as it limits psid).
 */
#include "cores.h"

#include <hwloc.h>
#include <hwloc/glibc-sched.h>
#include <stdlib.h>
#include <unistd.h>

#include "log.h"
#include "tool.h"

static cpu_set_t *cores;
static int ncores;

/* Without a usable topology: every CPU psid may use is a core. */
static void cores_from_affinity(void)
{
    cpu_set_t mine;
    if (sched_getaffinity(0, sizeof mine, &mine) != 0) {
        CPU_ZERO(&mine);
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        for (long c = 0; c < (n > 0 ? n : 1) && c < CPU_SETSIZE; c++)
            CPU_SET((int)c, &mine);
    }
    ncores = 0;
    cores = calloc((size_t)CPU_COUNT(&mine) + 1, sizeof *cores);
    if (!cores)
        psp_fail_exit("out of memory");
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &mine)) {
            CPU_ZERO(&cores[ncores]);
            CPU_SET(c, &cores[ncores]);
            ncores++;
        }
    if (ncores == 0) { /* cannot happen: we run somewhere */
        CPU_ZERO(&cores[0]);
        CPU_SET(0, &cores[0]);
        ncores = 1;
    }
}

int psid_cores_init(void)
{
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) != 0 || hwloc_topology_load(topo) != 0) {
        PSP_WARN("hwloc cannot read this node's topology: binding to CPUs in order instead");
        cores_from_affinity();
        return ncores;
    }
    int n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    hwloc_cpuset_t allowed = hwloc_bitmap_alloc();
    if (n <= 0 || !allowed || hwloc_get_cpubind(topo, allowed, HWLOC_CPUBIND_PROCESS) != 0) {
        PSP_WARN("hwloc finds no cores on this node: binding to CPUs in order instead");
        hwloc_bitmap_free(allowed);
        hwloc_topology_destroy(topo);
        cores_from_affinity();
        return ncores;
    }
    cores = calloc((size_t)n, sizeof *cores);
    if (!cores)
        psp_fail_exit("out of memory");
    hwloc_cpuset_t set = hwloc_bitmap_alloc();
    for (int i = 0; i < n; i++) {
        hwloc_obj_t core = hwloc_get_obj_by_type(topo, HWLOC_OBJ_CORE, (unsigned)i);
        hwloc_bitmap_and(set, core->cpuset, allowed);
        if (hwloc_bitmap_iszero(set))
            continue; /* a core psid may not use */
        CPU_ZERO(&cores[ncores]);
        hwloc_cpuset_to_glibc_sched_affinity(topo, set, &cores[ncores], sizeof cores[ncores]);
        ncores++;
    }
    hwloc_bitmap_free(set);
    hwloc_bitmap_free(allowed);
    hwloc_topology_destroy(topo);
    if (ncores == 0) {
        free(cores);
        cores_from_affinity();
    }
    PSP_DEBUG_LOG("%d cores for -bind-to core", ncores);
    return ncores;
}

void psid_core_cpuset(int index, cpu_set_t *set)
{
    *set = cores[(index < 0 ? -index : index) % ncores];
}
