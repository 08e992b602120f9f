/*
 * psport_init.c — bring the channel up and down: attach to PULC, open this process's port-D
 * endpoint, publish its id as the business card, set up VCs (rendezvous functions, eager
 * limit), and look up a peer's port from its card when first needed.
 */
#include "mpidi_ch3_impl.h"

#include <stdlib.h>

#include "settings.h"

PSP_Port *MPIDI_CH3I_port;
int MPIDI_CH3I_node = -1;
MPIDI_CH3_PktHandler_Fcn *MPIDI_CH3I_pktArray[MPIDI_CH3_PKT_END_ALL];

/* CH3 asks channels to name the interface version they implement. */
char MPIDI_CH3_ABIVersion[] = "1.1";

/* Whether the user set MPICH's own eager CVAR (any of the names MPICH reads it under). */
static int cvar_eager_set(void)
{
    static const char *const names[] = {"MPIR_CVAR_CH3_EAGER_MAX_MSG_SIZE",
                                        "MPICH_CH3_EAGER_MAX_MSG_SIZE",
                                        "MPIR_PARAM_CH3_EAGER_MAX_MSG_SIZE"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = getenv(names[i]);
        if (v && *v)
            return 1;
    }
    return 0;
}

int MPIDI_CH3I_Eager_limit(char *err, size_t errlen)
{
    if (cvar_eager_set()) { /* MPICH's setting, when given, is what the user meant */
        if (MPIR_CVAR_CH3_EAGER_MAX_MSG_SIZE >= 0 && MPIR_CVAR_CH3_EAGER_MAX_MSG_SIZE <= 1 << 30)
            return MPIR_CVAR_CH3_EAGER_MAX_MSG_SIZE;
        snprintf(err, errlen, "MPIR_CVAR_CH3_EAGER_MAX_MSG_SIZE=%d: must be 0..%d",
                 MPIR_CVAR_CH3_EAGER_MAX_MSG_SIZE, 1 << 30);
        return -1;
    }
    uint64_t v;
    if (psp_setting_u64("PSP_EAGER_MAX", 0, 1u << 30, &v, err, errlen))
        return -1;
    return (int)v;
}

int MPIDI_CH3_VC_Init(MPIDI_VC_t *vc)
{
    vc->ch.port = 0;
    vc->ch.send_seq = 0;
    vc->ch.claim_seq = 0;
    vc->ch.recv_busy = 0;
    vc->rndvSend_fn = MPIDI_CH3I_Rndv_send;
    vc->rndvRecv_fn = MPIDI_CH3I_Rndv_recv;
    char err[256];
    int eager = MPIDI_CH3I_Eager_limit(err, sizeof err);
    if (eager < 0) /* reported by MPIDI_CH3_Init; the VC gets the table's default meanwhile */
        eager = (int)strtol(psp_setting_find("PSP_EAGER_MAX")->def, NULL, 10);
    /* CH3 compares payload + eager packet header with this. */
    vc->eager_max_msg_sz = eager + (int)sizeof(MPIDI_CH3_Pkt_eager_send_t);
    return MPI_SUCCESS;
}

int MPIDI_CH3_VC_Destroy(MPIDI_VC_t *vc)
{
    (void)vc;
    return MPI_SUCCESS;
}

int MPIDI_CH3_PG_Init(MPIDI_PG_t *pg)
{
    (void)pg;
    return MPI_SUCCESS;
}

int MPIDI_CH3_PG_Destroy(MPIDI_PG_t *pg)
{
    (void)pg;
    return MPI_SUCCESS;
}

int MPIDI_CH3_Get_business_card(int myRank, char *value, int length)
{
    (void)myRank;
    PSP_PortId id = MPIDI_CH3I_port ? PSP_GetPortId(MPIDI_CH3I_port) : 0;
    int n = snprintf(value, (size_t)length, "%u:%u", (unsigned)PSP_PORTID_NODE(id),
                     (unsigned)PSP_PORTID_NUMBER(id));
    return n < 0 || n >= length ? MPI_ERR_OTHER : MPI_SUCCESS;
}

int MPIDI_CH3I_VC_port(MPIDI_VC_t *vc, PSP_PortId *id)
{
    int mpi_errno = MPI_SUCCESS;
    if (!vc->ch.port) {
        char card[64];
        unsigned node, number;
        mpi_errno = MPIDI_PG_GetConnString(vc->pg, vc->pg_rank, card, sizeof card);
        MPIR_ERR_CHECK(mpi_errno);
        if (sscanf(card, "%u:%u", &node, &number) != 2 || node > 0xffff || number == 0 ||
            number > 0xffff)
            MPIR_ERR_SETANDJUMP2(mpi_errno, MPI_ERR_OTHER, "**psport_card", "**psport_card %d %s",
                                 vc->pg_rank, card);
        vc->ch.port = PSP_PORTID(node, number);
    }
    *id = vc->ch.port;
fn_fail:
    return mpi_errno;
}

int MPIDI_CH3_Init(int has_parent, MPIDI_PG_t *pg, int pg_rank)
{
    int mpi_errno = MPI_SUCCESS;
    char err[256], card[64];
    (void)has_parent; /* no spawn: never a parent */

    if (MPIDI_CH3I_Eager_limit(err, sizeof err) < 0 || MPIDI_CH3I_Rndv_init(err, sizeof err) < 0)
        MPIR_ERR_SETANDJUMP1(mpi_errno, MPI_ERR_OTHER, "**psport_setting", "**psport_setting %s",
                             err);

    mpi_errno = MPIDI_CH3_PktHandler_Init(MPIDI_CH3I_pktArray, MPIDI_CH3_PKT_END_ALL);
    MPIR_ERR_CHECK(mpi_errno);
    MPIDI_CH3I_pktArray[MPIDI_CH3I_PKT_PSP_RTS] = MPIDI_CH3I_Pkt_rts;
    MPIDI_CH3I_pktArray[MPIDI_CH3I_PKT_PSP_CTS] = MPIDI_CH3I_Pkt_cts;
    MPIDI_CH3I_pktArray[MPIDI_CH3I_PKT_PSP_DONE] = MPIDI_CH3I_Pkt_done;

    /* A process alone in its job has nobody to talk to: it needs no psid. */
    if (MPIDI_PG_Get_size(pg) > 1) {
        int rc = PSP_OpenPort(PSP_ANYPORT, PSP_PORT_D, &MPIDI_CH3I_port);
        if (rc)
            MPIR_ERR_SETANDJUMP1(mpi_errno, MPI_ERR_OTHER, "**psport_init", "**psport_init %s",
                                 PSP_StrError(rc));
        MPIDI_CH3I_node = PSP_GetNodeID();
        mpi_errno = MPIDI_CH3I_Recv_init();
        MPIR_ERR_CHECK(mpi_errno);
    }
    mpi_errno = MPIDI_CH3_Get_business_card(pg_rank, card, sizeof card);
    MPIR_ERR_CHECK(mpi_errno);
    /* Collective: put our card, commit, PMI barrier. */
    mpi_errno = MPIDI_PG_SetConnInfo(pg_rank, card);
    MPIR_ERR_CHECK(mpi_errno);
fn_fail:
    return mpi_errno;
}

int MPIDI_CH3_InitCompleted(void)
{
    return MPI_SUCCESS;
}

int MPIDI_CH3_Finalize(void)
{
    int mpi_errno = MPI_SUCCESS;
    if (!MPIDI_CH3I_port)
        return MPI_SUCCESS;
    /* Every send must be in the NIC's or the receiver's hands before the port goes (closing
     * it cancels what PULC still queues). */
    while (MPIDI_CH3I_Send_pending()) {
        int made = 0;
        int rc = PSP_Progress();
        if (rc < 0)
            MPIR_ERR_SETANDJUMP1(mpi_errno, MPI_ERR_OTHER, "**psport_pulc", "**psport_pulc %s",
                                 PSP_StrError(rc));
        mpi_errno = MPIDI_CH3I_Send_progress(&made);
        MPIR_ERR_CHECK(mpi_errno);
    }
    MPIDI_CH3I_Recv_finalize();
    MPIDI_CH3I_Buf_finalize();
    MPIDI_CH3I_Progress_finalize();
    PSP_ClosePort(MPIDI_CH3I_port);
    MPIDI_CH3I_port = NULL;
    PSP_Finalize();
fn_fail:
    return mpi_errno;
}

/* Called by CH3's close protocol once both sides said goodbye: nothing of ours to tear down
 * (PULC connections are implicit), so tell CH3 the connection is gone. */
int MPIDI_CH3_Connection_terminate(MPIDI_VC_t *vc)
{
    return MPIDI_CH3U_Handle_connection(vc, MPIDI_VC_EVENT_TERMINATED);
}
