/* SPDX-License-Identifier: GPL-2.0 */
/*
 * psport.h - the psport kernel module's internals: one NIC instance per interface (a misc
 * device, the firmware's memory image, the message area, the link and the firmware thread).
 */
#ifndef PSPORT_KMOD_LINUX_H
#define PSPORT_KMOD_LINUX_H

#include <linux/atomic.h>
#include <linux/miscdevice.h>
#include <linux/mutex.h>
#include <linux/netdevice.h>
#include <linux/skbuff.h>
#include <linux/wait.h>

#include "mcp.h"
#include "psport_abi.h"

#define PSK_MAX_NICS	4	/* interfaces one module drives */
#define PSK_MAX_NODES	PSK_NODES_MAX	/* nodes with a MAC (macs parameter) */
#define PSK_RXQ_MAX	1024	/* frames waiting for the firmware before the link drops */
#define PSK_TXQ_MAX	256	/* frames one firmware pass may queue */
#define ETH_P_PSPORT	0x88B5	/* MCP_ETHERTYPE of mcp/link/link.h */

/* Link counters (printed when the module unloads; the firmware counts in the image). */
struct psk_link_stats {
	u64 rx_frames;		/* frames handed to the firmware */
	atomic64_t rx_queue_full; /* dropped: the firmware was PSK_RXQ_MAX frames behind */
	atomic64_t rx_ignored;	/* dropped: not for this host (another MAC), or no memory */
	u64 rx_truncated;	/* longer than a receive buffer (the firmware counts them) */
	u64 tx_frames;		/* handed to dev_queue_xmit() and taken */
	u64 tx_dropped;		/* dev_queue_xmit() refused them (full queue, link down) */
	u64 tx_nomem;		/* no skb (the firmware sends again later) */
	u64 tx_noroute;		/* to a node without a MAC in the macs parameter */
};

/*
 * The firmware's link (mcp/lanai.h) over one Ethernet interface: frames with EtherType
 * 0x88B5 arrive through a packet_type handler into rxq, leave through dev_queue_xmit().
 * tx/flush/rx run under the NIC lock; rxq has its own lock (the handler runs in softirq).
 */
struct psk_link {
	struct lanai_link l;		/* first member: the firmware's view */
	struct psk_nic *nic;
	struct net_device *dev;		/* held; NULL once the interface is gone */
	struct packet_type pt;
	bool pt_added;
	struct sk_buff_head rxq;
	struct sk_buff_head txq;	/* only under the NIC lock */
	struct psk_link_stats st;
};

enum psk_area_state { PSK_AREA_NONE, PSK_AREA_FORMATTING, PSK_AREA_READY };

/* One NIC: /dev/psport (index 0) or /dev/psport<index>. */
struct psk_nic {
	int index;
	char name[16];			/* device and thread name */
	u16 node;
	struct miscdevice misc;
	bool misc_added;

	struct mcp_image *img;		/* vmalloc_user(): mapped at PSK_MMAP_IMAGE */
	size_t img_size;
	struct file *area;		/* shmem file: mapped at PSK_MMAP_AREA */
	size_t area_size;

	struct mutex lock;		/* the NIC lock: firmware passes, clients, area state */
	struct mcp_nic mcp;		/* the executor handle of the firmware thread */
	struct psk_link link;
	struct task_struct *thread;
	atomic_t kick;			/* work for the thread: frames arrived, doorbell */
	wait_queue_head_t kwq;		/* the thread sleeps here */
	wait_queue_head_t rxwq;		/* PSK_IOC_WAIT sleepers */
	wait_queue_head_t areawq;	/* attachers waiting for the area's format */
	wait_queue_head_t stallwq;	/* PSK_WAIT_STALL sleepers (clients' drainers) */
	u32 stall_seq;			/* bumped when the host queue stalls */
	u32 stall_tail;			/* host queue position the stall clock watches */
	u64 stall_since;		/* when frames began to wait at stall_tail */

	enum psk_area_state area_state;	/* under lock */
	void *formatter;		/* the descriptor formatting the area */
	unsigned int clients;		/* attached descriptors (under lock) */
};

/* psport_link.c */
int psk_link_init(struct psk_nic *nic, struct net_device *dev);
void psk_link_start(struct psk_nic *nic);
void psk_link_stop(struct psk_nic *nic);
void psk_link_dev_gone(struct psk_nic *nic);
int psk_link_set_macs(char **macs, int n, char *why, size_t whylen);
void psk_link_nodes(struct psk_nodes *out);

/* psport_main.c: module parameters the NIC code reads */
extern unsigned int psk_tick_us;	/* firmware thread's tick while connections are busy */
extern unsigned int psk_stall_us;	/* host queue untouched this long: wake a drainer */
extern unsigned int psk_area_mb;	/* message area size */
extern unsigned int psk_frame_size;	/* payload bytes per frame (capped by the MTU) */
extern unsigned short psk_contexts;	/* NIC contexts (attached processes) */
extern unsigned short psk_window;	/* frames in flight to a peer, 0: automatic */
extern unsigned short psk_max_nodes;	/* node ids 0 .. max_nodes-1 */

/* psport_main.c: the misc device of a NIC (fops) */
int psk_dev_register(struct psk_nic *nic);

/* psport_nic.c */
struct psk_nic *psk_nic_create(int index, const char *ifname, u16 node, char *why,
			       size_t whylen);
void psk_nic_destroy(struct psk_nic *nic);
void psk_nic_kick(struct psk_nic *nic);
u16 psk_nic_contexts_used(struct psk_nic *nic);

#endif
