// SPDX-License-Identifier: GPL-2.0
/*
 * psport_link.c - the firmware's link (mcp/lanai.h) over an Ethernet interface.
 *
 * On the wire: [dst MAC][src MAC][EtherType 0x88B5][firmware frame], as the user-space eth
 * link (mcp/link/link_eth.c) sends them, so a module node and a psid node with PSP_LINK=eth
 * understand each other.  Received frames are queued by a packet_type handler (softirq) and
 * taken by the firmware thread; frames to send are copied into skbs by tx() and handed to
 * dev_queue_xmit() by flush().  Node ids map to MAC addresses through the macs parameter.
 */
#include <linux/etherdevice.h>
#include <linux/if_ether.h>
#include <linux/kernel.h>

#include "psport.h"

static u8 psk_macs[PSK_MAX_NODES][ETH_ALEN];
static DECLARE_BITMAP(psk_has_mac, PSK_MAX_NODES);

/*
 * Parse the macs parameter: entry i is node i's MAC ("aa:bb:cc:dd:ee:ff", or "-" for a node
 * without one).  Returns 0 or -EINVAL with the reason in why.
 */
int psk_link_set_macs(char **macs, int n, char *why, size_t whylen)
{
	int i;

	bitmap_zero(psk_has_mac, PSK_MAX_NODES);
	if (n > PSK_MAX_NODES) {
		snprintf(why, whylen, "macs: at most %d entries", PSK_MAX_NODES);
		return -EINVAL;
	}
	for (i = 0; i < n; i++) {
		if (!strcmp(macs[i], "-") || !macs[i][0])
			continue;
		if (!mac_pton(macs[i], psk_macs[i])) {
			snprintf(why, whylen,
				 "macs: entry %d ('%s') is not a MAC address aa:bb:cc:dd:ee:ff",
				 i, macs[i]);
			return -EINVAL;
		}
		set_bit(i, psk_has_mac);
	}
	return 0;
}

/* The node table for PSK_IOC_NODES. */
void psk_link_nodes(struct psk_nodes *out)
{
	int i;

	memset(out, 0, sizeof(*out));
	for_each_set_bit(i, psk_has_mac, PSK_MAX_NODES) {
		memcpy(out->node[i].mac, psk_macs[i], ETH_ALEN);
		out->node[i].present = 1;
		out->count = i + 1;
	}
}

/* Runs in softirq: queue a frame of our EtherType for the firmware thread. */
static int psk_rcv(struct sk_buff *skb, struct net_device *dev, struct packet_type *pt,
		   struct net_device *orig_dev)
{
	struct psk_link *lk = container_of(pt, struct psk_link, pt);

	if (skb->pkt_type == PACKET_OTHERHOST || skb->pkt_type == PACKET_LOOPBACK ||
	    skb->pkt_type == PACKET_OUTGOING) {
		atomic64_inc(&lk->st.rx_ignored);
		kfree_skb(skb);
		return NET_RX_DROP;
	}
	skb = skb_share_check(skb, GFP_ATOMIC);
	if (!skb) {
		atomic64_inc(&lk->st.rx_ignored);
		return NET_RX_DROP;
	}
	if (skb_queue_len(&lk->rxq) >= PSK_RXQ_MAX) {
		atomic64_inc(&lk->st.rx_queue_full);
		kfree_skb(skb);
		return NET_RX_DROP;
	}
	skb_queue_tail(&lk->rxq, skb);
	psk_nic_kick(lk->nic);
	return NET_RX_SUCCESS;
}

/* lanai tx: copy the frame into an skb addressed to node dst and queue it. */
static int psk_tx(struct lanai_link *l, uint16_t dst, const void *frame, uint32_t len)
{
	struct psk_link *lk = container_of(l, struct psk_link, l);
	struct net_device *dev = lk->dev;
	struct sk_buff *skb;
	int hlen, tlen;

	if (dst >= PSK_MAX_NODES || !test_bit(dst, psk_has_mac)) {
		lk->st.tx_noroute++;
		return -EHOSTUNREACH;
	}
	if (!dev)
		return -ENETDOWN;
	if (len > READ_ONCE(dev->mtu))
		return -EMSGSIZE;
	if (skb_queue_len(&lk->txq) >= PSK_TXQ_MAX)
		return -EAGAIN;
	hlen = LL_RESERVED_SPACE(dev);
	tlen = dev->needed_tailroom;
	skb = alloc_skb(hlen + len + tlen, GFP_NOWAIT | __GFP_NOWARN);
	if (!skb) {
		lk->st.tx_nomem++;
		return -EAGAIN;
	}
	skb_reserve(skb, hlen);
	skb_reset_network_header(skb);
	skb_put_data(skb, frame, len);
	skb->dev = dev;
	skb->protocol = htons(ETH_P_PSPORT);
	if (dev_hard_header(skb, dev, ETH_P_PSPORT, psk_macs[dst], NULL, len) < 0) {
		kfree_skb(skb);
		lk->st.tx_dropped++;
		return -EAGAIN;
	}
	__skb_queue_tail(&lk->txq, skb);
	return 0;
}

/* lanai flush: hand every queued frame to the device; a refused one counts as lost. */
static int psk_flush(struct lanai_link *l)
{
	struct psk_link *lk = container_of(l, struct psk_link, l);
	struct sk_buff *skb;
	int n = 0;

	while ((skb = __skb_dequeue(&lk->txq))) {
		if (dev_queue_xmit(skb) == NET_XMIT_SUCCESS)
			lk->st.tx_frames++;
		else
			lk->st.tx_dropped++;
		n++;
	}
	return n;
}

/*
 * lanai rx: copy up to n queued frames into bufs.  A frame longer than cap is reported as
 * cap + 1 (the firmware counts it malformed); a minimum-size frame, possibly padded on the
 * wire, is trimmed to the length its firmware header announces.
 */
static int psk_rx(struct lanai_link *l, void *const *bufs, uint32_t cap, uint32_t *lens, int n)
{
	struct psk_link *lk = container_of(l, struct psk_link, l);
	struct sk_buff *skb;
	int got = 0;

	while (got < n && (skb = skb_dequeue(&lk->rxq))) {
		u32 len = skb->len;

		if (len == ETH_ZLEN - ETH_HLEN && len >= MCP_WIRE_HDR) {
			u8 b[2];

			if (!skb_copy_bits(skb, 20, b, 2) && MCP_WIRE_HDR + (b[0] | b[1] << 8) < len)
				len = MCP_WIRE_HDR + (b[0] | b[1] << 8);
		}
		if (len > cap) {
			lk->st.rx_truncated++;
			if (skb_copy_bits(skb, 0, bufs[got], cap))
				memset(bufs[got], 0, cap);
			lens[got] = cap + 1;
		} else {
			if (skb_copy_bits(skb, 0, bufs[got], len))
				len = 0; /* cannot happen: len <= skb->len */
			lens[got] = len;
		}
		lk->st.rx_frames++;
		consume_skb(skb);
		got++;
	}
	return got;
}

/* lanai close: nothing of its own to release (psk_link_stop() drops the queues). */
static void psk_close(struct lanai_link *l)
{
}

static const struct lanai_link_ops psk_link_ops = {
	.tx = psk_tx,
	.flush = psk_flush,
	.rx = psk_rx,
	.close = psk_close,
};

/* Set up nic's link on dev (held by the caller, whose reference the link takes over). */
int psk_link_init(struct psk_nic *nic, struct net_device *dev)
{
	struct psk_link *lk = &nic->link;

	lk->nic = nic;
	lk->dev = dev;
	lk->l.ops = &psk_link_ops;
	lk->l.kind = "eth";
	lk->l.max_frame = dev->mtu;
	lk->l.node = nic->node;
	lk->l.max_nodes = psk_max_nodes;
	skb_queue_head_init(&lk->rxq);
	skb_queue_head_init(&lk->txq);
	lk->pt.type = htons(ETH_P_PSPORT);
	lk->pt.dev = dev;
	lk->pt.func = psk_rcv;
	return 0;
}

/* Start receiving: frames of our EtherType on the interface reach the firmware. */
void psk_link_start(struct psk_nic *nic)
{
	struct psk_link *lk = &nic->link;

	mutex_lock(&nic->lock);
	if (lk->dev && !lk->pt_added) {
		dev_add_pack(&lk->pt);
		lk->pt_added = true;
	}
	mutex_unlock(&nic->lock);
}

/* Detach from the interface (module unload or the interface goes away); caller holds lock. */
static void psk_link_release(struct psk_link *lk)
{
	if (lk->pt_added) {
		dev_remove_pack(&lk->pt);	/* waits until no handler runs */
		lk->pt_added = false;
	}
	skb_queue_purge(&lk->rxq);
	__skb_queue_purge(&lk->txq);
	if (lk->dev) {
		dev_put(lk->dev);
		lk->dev = NULL;
	}
}

/* The interface is being unregistered: let it go (sends fail with -ENETDOWN from now on). */
void psk_link_dev_gone(struct psk_nic *nic)
{
	mutex_lock(&nic->lock);
	psk_link_release(&nic->link);
	mutex_unlock(&nic->lock);
}

/* Stop the link for good (the firmware thread is stopped already). */
void psk_link_stop(struct psk_nic *nic)
{
	mutex_lock(&nic->lock);
	psk_link_release(&nic->link);
	mutex_unlock(&nic->lock);
}
