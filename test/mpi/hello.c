/*
 * hello — every rank says where it runs; then an allreduce of the ranks checks that the
 * processes really talk (exit 1 if the sum is wrong).
 */
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int rank, size, len;
    char host[MPI_MAX_PROCESSOR_NAME];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_processor_name(host, &len);
    printf("hello from rank %d of %d on %s (pid %d)\n", rank, size, host, (int)getpid());
    long sum = 0, mine = rank;
    MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    int bad = sum != (long)size * (size - 1) / 2;
    if (rank == 0)
        printf("allreduce of ranks: %ld (%s)\n", sum, bad ? "WRONG" : "right");
    MPI_Finalize();
    return bad;
}
