/*
 * pmi_server.h — the PMI-1 wire protocol, server side, as MPICH's built-in "simple" PMI client
 * speaks it (connecting to PMI_PORT and identifying itself with PMI_ID).
 *
 * One struct pmi_server per job: the key-value space, the barrier, and a line buffer per
 * rank's connection.  The caller owns the sockets: it feeds bytes read from a connection to
 * pmi_server_input() and writes what the server queued (pmi_server_output()).  Commands:
 * initack, init, get_maxes, get_appnum, get_universe_size, get_my_kvsname, put, get (rc -1
 * for a missing key), barrier_in (answered when every rank is in), finalize, abort, and a
 * refusal (rc -1) for spawn and name publishing.
 */
#ifndef PSPORT_MPIRUN_PMI_SERVER_H
#define PSPORT_MPIRUN_PMI_SERVER_H

#include <stddef.h>

struct pmi_server;

/* What a connection's input asked the job to do. */
enum pmi_event {
    PMI_EV_NONE = 0,
    PMI_EV_ABORT = 1,    /* a rank called PMI_Abort: *code and the message are set */
    PMI_EV_FINALIZE = 2, /* the rank finalized */
    PMI_EV_ERROR = 3,    /* malformed input or an unknown PMI_ID: close the connection */
};

/*
 * A server for `size` ranks of job kvsname, with PMI_process_mapping = mapping (copied).
 * Returns NULL when out of memory.
 */
struct pmi_server *pmi_server_new(int size, const char *kvsname, const char *mapping);

/* Free the server and everything it queued. */
void pmi_server_free(struct pmi_server *s);

/* A new connection: returns its handle (>= 0) or -1. */
int pmi_server_connect(struct pmi_server *s);

/* The connection closed: forget it (its rank may connect again). */
void pmi_server_disconnect(struct pmi_server *s, int conn);

/*
 * Bytes read from connection conn.  Complete lines are served; replies (also to other
 * connections, when a barrier completes) are queued.  Returns an enum pmi_event; for
 * PMI_EV_ABORT *code gets the exit code and *msg the message (valid until the next call).
 */
int pmi_server_input(struct pmi_server *s, int conn, const char *data, size_t len, int *code,
                     const char **msg);

/* Bytes queued for connection conn: *len of them at the returned pointer (NULL if none). */
const char *pmi_server_output(struct pmi_server *s, int conn, size_t *len);

/* n bytes of conn's queued output were written. */
void pmi_server_consumed(struct pmi_server *s, int conn, size_t n);

/* The rank of connection conn (-1 until it identified itself). */
int pmi_server_rank(const struct pmi_server *s, int conn);

/* Ranks that finalized so far. */
int pmi_server_finalized(const struct pmi_server *s);

/*
 * 1 when rank announced itself (initack: it called PMI_Init, as MPI_Init does) and has not
 * finalized: a rank that exits so left MPI without MPI_Finalize.  Else 0 (also out of range).
 */
int pmi_server_unfinished(const struct pmi_server *s, int rank);

/*
 * PMI_process_mapping for ranks placed on nodes: node_of[r] is the node (any id) of rank r.
 * Writes "(vector,(start,count,ppn),...)" into buf (n bytes): nodes numbered in order of first
 * appearance, runs of nodes with the same number of consecutive ranks merged.  Returns 0,
 * or -1 if buf is too small.
 */
int pmi_process_mapping(const int *node_of, int size, char *buf, size_t n);

#endif
