/*
 * psport_dynamic.c — dynamic processes are not supported by this channel: CH3's spawn is
 * compiled out (MPIDI_CH3_HAS_NO_DYNAMIC_PROCESS), and the port functions below make
 * MPI_Open_port, MPI_Close_port, MPI_Comm_accept and MPI_Comm_connect fail at once, on every
 * rank, with an error of class MPI_ERR_SPAWN.  (MPI_Comm_spawn fails likewise through
 * ch_psport/patches/spawn-error-class.patch.)
 */
#include "mpidi_ch3_impl.h"

static int unsupported(const char *what)
{
    return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, what, __LINE__, MPI_ERR_SPAWN,
                                "**psport_dynamic", "**psport_dynamic %s", what);
}

static int open_port(MPIR_Info *info, char *port_name)
{
    (void)info;
    (void)port_name;
    return unsupported("MPI_Open_port");
}

static int close_port(const char *port_name)
{
    (void)port_name;
    return unsupported("MPI_Close_port");
}

static int comm_accept(const char *port_name, MPIR_Info *info, int root, MPIR_Comm *comm,
                       MPIR_Comm **newcomm)
{
    (void)port_name, (void)info, (void)root, (void)comm;
    *newcomm = NULL;
    return unsupported("MPI_Comm_accept");
}

static int comm_connect(const char *port_name, MPIR_Info *info, int root, MPIR_Comm *comm,
                        MPIR_Comm **newcomm)
{
    (void)port_name, (void)info, (void)root, (void)comm;
    *newcomm = NULL;
    return unsupported("MPI_Comm_connect");
}

int MPIDI_CH3_PortFnsInit(MPIDI_PortFns *fns)
{
    fns->OpenPort = open_port;
    fns->ClosePort = close_port;
    fns->CommAccept = comm_accept;
    fns->CommConnect = comm_connect;
    return MPI_SUCCESS;
}

int MPIDI_CH3_Connect_to_root(const char *port_name, MPIDI_VC_t **new_vc)
{
    (void)port_name;
    *new_vc = NULL;
    return unsupported("MPI_Comm_connect");
}
