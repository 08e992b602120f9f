/*
 * mpidi_ch3_pre.h — what the psport channel adds to CH3's types before mpidpre.h defines
 * them: its fields in a VC and a request, its progress state, its three packet types.
 *
 * The channel moves CH3 packets over one PULC port-D endpoint per process (ch_psport/
 * README.md).  Dynamic processes (MPI_Comm_spawn, connect/accept) are compiled out: those
 * calls fail with MPI_ERR_SPAWN.
 */
#ifndef MPIDI_CH3_PRE_H_INCLUDED
#define MPIDI_CH3_PRE_H_INCLUDED

#include <stdint.h>

/* Only MPI_COMM_WORLD's process group: no spawn, no ports (psport_dynamic.c). */
#define MPIDI_CH3_HAS_NO_DYNAMIC_PROCESS

/* The process group's connection data lives in the PMI key-value space. */
#define MPIDI_DEV_IMPLEMENTS_KVS

/*
 * The channel's packets, for its rendezvous (psport_rndv.c): RTS carries the match and
 * where the sender's data is; CTS names the receiver's rawdata registration for the next piece
 * of the message (between nodes; pieces of PSP_RNDV_CHUNK bytes: a registration is < 4 GiB);
 * DONE tells the sender that a receiver on its node has copied the data.
 */
#define MPIDI_CH3_PKT_ENUM MPIDI_CH3I_PKT_PSP_RTS, MPIDI_CH3I_PKT_PSP_CTS, MPIDI_CH3I_PKT_PSP_DONE

/* clang-format off */
#define MPIDI_CH3_PKT_DEFS                                                                       \
    typedef struct MPIDI_CH3I_Pkt_psp_rts {                                                      \
        MPIDI_CH3_Pkt_type_t type;                                                               \
        MPIDI_Message_match match;                                                               \
        MPI_Request sender_req_id;                                                               \
        intptr_t data_sz;                                                                        \
        int32_t pid;    /* the sender's process (read from on its node) */                       \
        uint64_t addr;  /* its contiguous data */                                                \
    } MPIDI_CH3I_Pkt_psp_rts_t;                                                                  \
    typedef struct MPIDI_CH3I_Pkt_psp_cts {                                                      \
        MPIDI_CH3_Pkt_type_t type;                                                               \
        MPI_Request sender_req_id;                                                               \
        uint32_t len;   /* bytes to write (less than data_sz when the receive truncates) */      \
        uint32_t raw_port, raw_index, raw_nonce; /* the receiver's PSP_RawHandle */              \
        uint32_t last;  /* 1: the last piece (the send completes with it) */                     \
        uint64_t offset; /* where in the message the piece starts */                             \
    } MPIDI_CH3I_Pkt_psp_cts_t;                                                                  \
    typedef struct MPIDI_CH3I_Pkt_psp_done {                                                     \
        MPIDI_CH3_Pkt_type_t type;                                                               \
        MPI_Request sender_req_id;                                                               \
    } MPIDI_CH3I_Pkt_psp_done_t;
/* clang-format on */

#define MPIDI_CH3_PKT_DECL                                                                         \
    MPIDI_CH3I_Pkt_psp_rts_t psp_rts;                                                              \
    MPIDI_CH3I_Pkt_psp_cts_t psp_cts;                                                              \
    MPIDI_CH3I_Pkt_psp_done_t psp_done;

typedef struct {
    int unused; /* the channel keeps nothing per communicator */
} MPIDI_CH3I_CH_comm_t;

/* Per VC: the peer's port and the sequence numbers that keep its packets in order. */
typedef struct MPIDI_CH3I_VC {
    uint32_t port;      /* the peer's PULC port id (node << 16 | number); 0: not known yet */
    uint32_t send_seq;  /* sequence number of our next message to it */
    uint32_t claim_seq; /* sequence number of its next message the receive side records */
    int recv_busy; /* 1: a message of its is being received into CH3's iov, 2: its next message is
                    * still arriving (for one progress pass): either way later ones wait */
} MPIDI_CH3I_VC;

#define MPIDI_CH3_VC_DECL struct MPIDI_CH3I_VC ch;

/* Per request: a rendezvous announced by our RTS (to be answered by our protocol). */
struct MPIDI_CH3I_Request {
    int psp_rndv;     /* 1: dev.sender_req_id names a sender waiting in psport_rndv.c */
    int32_t rndv_pid; /* the sender's pid and data address, from its RTS */
    uint64_t rndv_addr;
    void *part; /* partitioned requests (psport_part.c): their state; a round's data: that state */
};

#define MPIDI_CH3_REQUEST_DECL       struct MPIDI_CH3I_Request ch;
#define MPIDI_CH3_REQUEST_INIT(req_) ((req_)->ch.psp_rndv = 0, (req_)->ch.part = NULL)

/* Progress: a waiter is done when the completion count moved. */
typedef struct MPIDI_CH3I_Progress_state {
    unsigned int completion_count;
} MPIDI_CH3I_Progress_state;

#define MPIDI_CH3_PROGRESS_STATE_DECL MPIDI_CH3I_Progress_state ch;

extern volatile unsigned int MPIDI_CH3I_progress_completion_count;

#endif /* MPIDI_CH3_PRE_H_INCLUDED */
