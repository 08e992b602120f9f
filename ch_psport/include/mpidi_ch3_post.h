/*
 * mpidi_ch3_post.h — the progress entry points CH3 calls through macros.
 */
#ifndef MPIDI_CH3_POST_H_INCLUDED
#define MPIDI_CH3_POST_H_INCLUDED

#define MPIDI_CH3_Progress_start(state_)                                                           \
    ((state_)->ch.completion_count = MPIDI_CH3I_progress_completion_count)
#define MPIDI_CH3_Progress_end(state_) ((void)(state_))

/* One pass (blocking 0), or poll until a request completes (blocking 1; state required). */
int MPIDI_CH3I_Progress(int blocking, MPID_Progress_state *state);

#define MPIDI_CH3_Progress_test()      MPIDI_CH3I_Progress(0, NULL)
#define MPIDI_CH3_Progress_wait(state) MPIDI_CH3I_Progress(1, (state))
#define MPIDI_CH3_Progress_poke()      MPIDI_CH3I_Progress(0, NULL)

/*
 * Send an eager-short message (data_sz bytes at buf, at most MPIDI_EAGER_SHORT_SIZE; matched by
 * rank, tag and context_id) to vc as a packet of the given type: CH3's eager-short packet,
 * made here in the form the channel's wire carries it (psport_send.c).  CH3's
 * MPIDI_CH3_EagerContigShortSend calls it (patches/short-send.patch).  *sreq_p: NULL when the
 * message went at once; else a request the caller owns, complete once it went.
 */
struct MPIDI_VC;
int MPIDI_CH3I_Send_short(struct MPIDI_VC *vc, int type, const void *buf, intptr_t data_sz,
                          int rank, int tag, int context_id, MPIR_Request **sreq_p);
#define MPIDI_CH3_iStartShort MPIDI_CH3I_Send_short

#endif /* MPIDI_CH3_POST_H_INCLUDED */
