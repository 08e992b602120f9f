/*
 * lost — an eager message the NIC cannot deliver is an MPI error, not a hang
 * (ch_psport/src/psport_progress.c, lost_sends).  Two ranks on two nodes:
 *
 *   lost DIR
 *
 * Rank 1 creates DIR/ready after a barrier and sleeps 30 s in no MPI call (so nothing on its
 * node answers once the test stopped that node's psid).  Rank 0 waits for DIR/go (the test
 * stopped the psid of rank 1's node, which hosts its NIC), sends 8 bytes to rank 1 (an eager
 * message: complete when posted) and waits for an answer that cannot come.  Its node's NIC
 * gives the peer up after PSP_PEER_TIMEOUT_MS and fails the message back; rank 0 must then
 * stop with MPI's fatal error naming rank 1.  If MPI_Recv returns, rank 0 prints "not ok"
 * and exits 1.
 */
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

static int exists(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2 || argc != 2) {
        if (rank == 0)
            fprintf(stderr, "usage: mpirun -np 2 -hosts A,B lost DIR\n");
        MPI_Finalize();
        return 2;
    }
    const char *dir = argv[1];
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        char path[4096];
        snprintf(path, sizeof path, "%s/ready", dir);
        FILE *f = fopen(path, "w");
        if (f)
            fclose(f);
        sleep(30);
        MPI_Finalize();
        return 0;
    }
    for (int i = 0; i < 3000 && !exists(dir, "go"); i++)
        usleep(10000);
    if (!exists(dir, "go")) {
        printf("not ok - lost: no %s/go after 30 s\n", dir);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    char msg[8] = "psport!", answer[8];
    MPI_Send(msg, (int)sizeof msg, MPI_CHAR, 1, 0, MPI_COMM_WORLD);
    MPI_Recv(answer, (int)sizeof answer, MPI_CHAR, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    printf("not ok - lost: MPI_Recv returned though rank 1 never answered\n");
    MPI_Finalize();
    return 1;
}
