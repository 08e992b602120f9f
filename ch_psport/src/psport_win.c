/*
 * psport_win.c — RMA: the channel keeps CH3's window functions and hooks (RMA packets
 * travel like any other CH3 packet) and, as its packets arrive in order per sender, tells
 * CH3 that a flush is ordered behind the operations before it.
 */
#include "mpidi_ch3_impl.h"
#include "mpidrma.h"

int MPIDI_CH3_Win_fns_init(MPIDI_CH3U_Win_fns_t *win_fns)
{
    (void)win_fns;
    return MPI_SUCCESS;
}

int MPIDI_CH3_Win_hooks_init(MPIDI_CH3U_Win_hooks_t *win_hooks)
{
    (void)win_hooks;
    return MPI_SUCCESS;
}

int MPIDI_CH3_Win_pkt_orderings_init(MPIDI_CH3U_Win_pkt_ordering_t *win_pkt_orderings)
{
    win_pkt_orderings->am_flush_ordered = 1;
    return MPI_SUCCESS;
}
