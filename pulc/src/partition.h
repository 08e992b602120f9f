/*
 * partition.h — the partition of a job: the subset of the cluster's nodes it may spawn on.
 *
 * The client (libpulc) reads the partition from the environment with pulc_partition_from_env:
 * PSP_PARTITION, else PSP_HOSTFILE, else the batch system's SLURM_JOB_NODELIST or PBS_NODEFILE.
 * The result is a list of host names, node ids or IPv4 addresses, one per line; the resolver
 * (psid) maps it onto node ids of the nodes file with pulc_partition_resolve.
 *
 * Hostlist syntax (Slurm's): items separated by commas (or white space); each item is a name
 * with zero or more bracket ranges, expanded as a cartesian product with the leftmost range
 * varying slowest, zero padding kept as written:
 *     n[1-3,5]            n1 n2 n3 n5
 *     n[08-10]            n08 n09 n10
 *     rack[1-2]-n[01-02]  rack1-n01 rack1-n02 rack2-n01 rack2-n02
 *     198.18.0.[2-3]      198.18.0.2 198.18.0.3
 */
#ifndef PSPORT_PULC_PARTITION_H
#define PSPORT_PULC_PARTITION_H

#include <stddef.h>
#include <stdint.h>

#include "nodes.h"

/* Largest number of hosts a hostlist or a partition may name. */
#define PULC_HOSTLIST_MAX 65536

/*
 * Expand the hostlist expr into *hosts (an array of *n strings, duplicates kept, in the order
 * written).  The array and its strings are malloc'd and belong to the caller, who frees them
 * with pulc_hostlist_free.  Returns 0; -EINVAL with "position P: what is wrong" in err (P is
 * the 1-based character position in expr) on an empty list or item, unbalanced or nested
 * brackets, a bad or reversed range, or more than PULC_HOSTLIST_MAX hosts; -ENOMEM.  On error
 * *hosts is NULL and *n is 0.
 */
int pulc_hostlist_expand(const char *expr, char ***hosts, size_t *n, char *err, size_t errlen);

/* Free what pulc_hostlist_expand returned (NULL is fine). */
void pulc_hostlist_free(char **hosts, size_t n);

/*
 * The partition from the environment: the first of these that is set and non-empty
 *     PSP_PARTITION       node ids, id ranges ("0-2"), host names or IPv4 addresses, separated
 *                         by commas or spaces; hostlist syntax too ("n[1-4]", "[0-3]")
 *     PSP_HOSTFILE        a file: one host per line, '#' comments, blank lines skipped, a
 *                         "slots=N" / "max_slots=N" word or a ":N" suffix ignored
 *     SLURM_JOB_NODELIST  hostlist syntax
 *     PBS_NODEFILE        a file: one host per line (repeated per slot)
 * (PSP_PARTITION and PSP_HOSTFILE through the settings table, the others with getenv.)
 *
 * Returns 1 with *list = the entries, each once, in first-seen order, separated by '\n'
 * (no trailing newline; malloc'd, the caller frees it) and *source = the variable's name
 * (static storage).  Returns 0 with *list = NULL and *source = NULL when none is set.
 * Errors, with a message in err that starts with the variable's name:
 *     -errno   a file cannot be read ("PSP_HOSTFILE /x: No such file or directory ...")
 *     -EINVAL  bad syntax ("SLURM_JOB_NODELIST: position 4: ...",
 *              "PSP_HOSTFILE /x: line 3: ..."), a reversed id range, no hosts at all,
 *              more than PULC_HOSTLIST_MAX entries
 *     -ENOMEM
 */
int pulc_partition_from_env(char **list, const char **source, char *err, size_t errlen);

/*
 * Mark the nodes of list (as made by pulc_partition_from_env: entries separated by newlines;
 * blank lines and surrounding white space are ignored) in member[0 .. member_len), which is
 * cleared first; member_len must be at least nodes->count.  An entry of digits is a node id;
 * a dotted IPv4 address means every node with that address (test clusters on one host share
 * one); anything else is a host name resolved with getaddrinfo (AF_INET) to the nodes with
 * one of its addresses.  source names where list came from, for messages (NULL: "the
 * partition").  Nothing is kept; no memory changes hands.
 *
 * Returns the number of member nodes (> 0).  Errors, with a message in err:
 *     -ENXIO   an entry is not a node: "host 'x' (from PSP_PARTITION) is not a node of this
 *              cluster: nodes file has ids 0..N-1 ..."
 *     -EINVAL  list has no entries, or member_len < nodes->count
 */
int pulc_partition_resolve(const char *list, const char *source, const struct psp_nodes *nodes,
                           uint8_t *member, size_t member_len, char *err, size_t errlen);

#endif
