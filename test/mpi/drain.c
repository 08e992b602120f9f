/*
 * drain — a large MPI_Send between two nodes returns only when its frames have left the NIC
 * (ch_psport/README.md): PULC takes the data at once, most frames behind the peer's send
 * window, and a rank that computed after MPI_Send returned left them to psid's NIC thread.
 * Rank 1 (on another node than rank 0) tells rank 0 its node; rank 0 sends 16 KiB (eager),
 * 1 MiB and 4 MiB (rendezvous) and asks PULC, right after each MPI_Send returned, whether frames
 * to that node still wait (PSP_SendWaiting).  Every byte is checked at rank 1.  Rank 0 prints
 * "ok - drain: ..." / "not ok - drain: ..." per size; exit 1 on any failure.
 * Build: mpicc -I$PREFIX/include drain.c -L$PREFIX/lib -lpulc.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pulc.h"

static unsigned char pat(long msg, long k)
{
    return (unsigned char)((msg * 40503u + k * 13u + (k >> 9)) & 0xff);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        if (rank == 0)
            fprintf(stderr, "drain: run with 2 ranks on 2 nodes\n");
        MPI_Finalize();
        return 2;
    }
    static const long sizes[] = {16l << 10, 1l << 20, 4l << 20};
    const int n = (int)(sizeof sizes / sizeof sizes[0]);
    unsigned char *buf = malloc(4l << 20);
    int node = PSP_GetNodeID(), peer_node = -1, bad = 0;
    if (!buf)
        MPI_Abort(MPI_COMM_WORLD, 3);
    MPI_Sendrecv(&node, 1, MPI_INT, 1 - rank, 1, &peer_node, 1, MPI_INT, 1 - rank, 1,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (peer_node == node) {
        if (rank == 0)
            printf("not ok - drain: both ranks on node %d (needs -hosts 0,1)\n", node);
        MPI_Finalize();
        return 1;
    }
    for (int i = 0; i < n; i++) {
        int waiting = 0, wrong = 0;
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            for (long k = 0; k < sizes[i]; k++)
                buf[k] = pat(i, k);
            MPI_Send(buf, (int)sizes[i], MPI_BYTE, 1, 2, MPI_COMM_WORLD);
            waiting = PSP_SendWaiting(PSP_PORTID(peer_node, 1));
        } else {
            memset(buf, 0, (size_t)sizes[i]);
            MPI_Recv(buf, (int)sizes[i], MPI_BYTE, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            for (long k = 0; k < sizes[i] && !wrong; k++)
                wrong = buf[k] != pat(i, k);
        }
        int worst[2] = {waiting, wrong}, all[2];
        MPI_Allreduce(worst, all, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (rank == 0) {
            if (all[0] || all[1])
                printf("not ok - drain: %ld B: %s\n", sizes[i],
                       all[0] ? "frames still waited in the NIC when MPI_Send returned"
                              : "wrong bytes at the receiver");
            else
                printf("ok - drain: %ld B: nothing waited in the NIC when MPI_Send returned, "
                       "every byte arrived\n",
                       sizes[i]);
        }
        bad |= all[0] | all[1];
    }
    free(buf);
    MPI_Finalize();
    return bad;
}
