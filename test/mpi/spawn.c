/*
 * spawn — dynamic processes are not supported on ch3:psport: MPI_Comm_spawn, MPI_Open_port
 * and MPI_Comm_connect must fail at once with an error of class MPI_ERR_SPAWN (and the job
 * must go on working).  Exit 0 when they do.
 */
#include <mpi.h>
#include <stdio.h>

static int check(const char *what, int rc, int rank)
{
    int cls = MPI_SUCCESS;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &cls);
    if (cls == MPI_ERR_SPAWN)
        return 0;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    msg[0] = 0;
    if (rc != MPI_SUCCESS)
        MPI_Error_string(rc, msg, &len);
    fprintf(stderr, "rank %d: %s: error class %d, want MPI_ERR_SPAWN (%d): %s\n", rank, what, cls,
            MPI_ERR_SPAWN, msg);
    return 1;
}

int main(int argc, char **argv)
{
    int rank, bad = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm inter;
    int errs[1];
    char *args[] = {NULL};
    bad |= check("MPI_Comm_spawn",
                 MPI_Comm_spawn("true", args, 1, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter, errs),
                 rank);
    char port[MPI_MAX_PORT_NAME];
    bad |= check("MPI_Open_port", MPI_Open_port(MPI_INFO_NULL, port), rank);
    bad |= check("MPI_Comm_connect",
                 MPI_Comm_connect("psport-none", MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter), rank);
    int all = 0;
    MPI_Allreduce(&bad, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0)
        printf("spawn/ports %s MPI_ERR_SPAWN on every rank\n",
               all ? "did NOT fail with" : "fail with");
    MPI_Finalize();
    return all;
}
