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

#endif /* MPIDI_CH3_POST_H_INCLUDED */
