/*
 * pulc_test_roles.h — roles of the processes in the libpulc tests (test_pulc_portd,
 * test_pulc_streams): receivers attach to the peer node's psid when PULC_TEST_PEER_SOCKET and
 * PULC_TEST_PEER_NODE are set (so their traffic crosses the NIC), or to the peer node's
 * kernel module device with PULC_TEST_PEER_DEVICE (test/kmod: two NICs of the module in one
 * guest); senders attach to this node's; a pipe tells senders when the receiver's port is open.
 */
#ifndef PSPORT_TEST_PULC_TEST_ROLES_H
#define PSPORT_TEST_PULC_TEST_ROLES_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pulc.h"

/* Where receivers live: the peer node if given, else this node. */
static inline uint16_t peer_node(void)
{
    const char *s = getenv("PULC_TEST_PEER_NODE");
    return s ? (uint16_t)atoi(s) : (uint16_t)PSP_GetNodeID();
}

/* Whether receivers live on another node. */
static inline int peer_is_remote(void)
{
    return getenv("PULC_TEST_PEER_NODE") != NULL;
}

/* Make this process a receiver: attach to the peer's psid or device (before any other PSP_*
 * call). */
static inline void as_receiver(void)
{
    const char *s = getenv("PULC_TEST_PEER_SOCKET");
    if (s && *s)
        setenv("PSP_PSID_SOCKET", s, 1);
    s = getenv("PULC_TEST_PEER_DEVICE");
    if (s && *s)
        setenv("PSP_DEVICE", s, 1);
    int rc = PSP_Init();
    if (rc) {
        fprintf(stderr, "PSP_Init (receiver): %s\n", PSP_StrError(rc));
        exit(3);
    }
}

/* Attach as a sender (to this node) and return the receivers' node.  A sender left waiting
 * for a receiver that failed ends after two minutes. */
static inline uint16_t as_sender(void)
{
    alarm(120);
    int rc = PSP_Init();
    if (rc) {
        fprintf(stderr, "PSP_Init (sender): %s\n", PSP_StrError(rc));
        exit(3);
    }
    return peer_node();
}

/* Receivers say when their port is open: a remote sender's message to a port not yet open is
 * refused asynchronously, so senders wait for this instead of retrying. */
static int ready_pipe[2] = {-1, -1};

static inline void ready_make(void)
{
    if (pipe(ready_pipe) != 0)
        exit(4);
}

/* The receiver: its port is open; let n senders go. */
static inline void ready_post(int n)
{
    for (int i = 0; i < n; i++)
        if (write(ready_pipe[1], "r", 1) != 1)
            exit(4);
}

/* A sender: wait until the receiver's port is open (EOF: the receiver is gone). */
static inline void ready_wait(void)
{
    close(ready_pipe[1]);
    char c;
    if (read(ready_pipe[0], &c, 1) != 1)
        exit(4);
}

/* Wait for a forked process: its exit code (0 ok), 128 + signal, or -1. */
static inline int reap(pid_t pid)
{
    int st;
    if (waitpid(pid, &st, 0) != pid)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

#endif
