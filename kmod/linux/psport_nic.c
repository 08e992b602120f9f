// SPDX-License-Identifier: GPL-2.0
/*
 * psport_nic.c - one NIC of the module: the firmware's memory image (formatted here, mapped
 * into processes), the message area (a shmem file, so the robust mutexes and futexes libpulc
 * keeps in it work between processes), the link, and the kernel thread that runs the firmware.
 *
 * The thread is the only executor: it runs mcp_poll() under the NIC lock whenever frames
 * arrive or a process rings the doorbell (PSK_IOC_KICK), every psk_tick_us while connections
 * have work (retransmission and ACK timers), every psk_stall_us / 2 while frames wait in the
 * host queue of an attached node, and every PSK_IDLE_MS otherwise.  It wakes the processes sleeping in PSK_IOC_WAIT when it delivered
 * something to the host queue, and the clients' drainers (PSK_WAIT_STALL) when frames have
 * waited there for psk_stall_us without any process taking one (psid's NIC thread does that
 * job in the user-space provider).
 */
#include <linux/delay.h>
#include <linux/kthread.h>
#include <linux/random.h>
#include <linux/sched.h>
#include <linux/shmem_fs.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>

#include "mcp_host.h"
#include "psport.h"

#define PSK_IDLE_MS 100	/* thread tick when no connection has work */

/* Frames arrived or sends were posted: run the firmware soon. */
void psk_nic_kick(struct psk_nic *nic)
{
	atomic_set(&nic->kick, 1);
	wake_up(&nic->kwq);
}

/* Contexts not FREE (attached, or closing while their last sends drain). */
u16 psk_nic_contexts_used(struct psk_nic *nic)
{
	u16 n = 0;
	unsigned int c;

	for (c = 0; c < nic->img->cfg.contexts; c++)
		n += MCP_LOAD_ACQ(&mcp_ctx(nic->img, c)->state) != MCP_CTX_FREE;
	return n;
}

/* One firmware pass under the NIC lock; wakes PSK_IOC_WAIT sleepers if it delivered. */
static int psk_nic_pass(struct psk_nic *nic)
{
	u32 ev0, ev1;
	int work;

	mutex_lock(&nic->lock);
	ev0 = READ_ONCE(nic->img->rx_event);
	work = mcp_poll(&nic->mcp, ktime_get_ns());
	ev1 = READ_ONCE(nic->img->rx_event);
	mutex_unlock(&nic->lock);
	if (ev0 != ev1)
		wake_up_all(&nic->rxwq);
	return work;
}

/* Whether a connection has work that timers drive (pending sends, ACKs, an open SYN). */
static bool psk_nic_busy(struct psk_nic *nic)
{
	const u64 *act = MCP_AT(nic->img, nic->img->off_active);
	unsigned int w, words = (nic->img->cfg.max_nodes + 63) / 64;

	for (w = 0; w < words; w++)
		if (READ_ONCE(act[w]))
			return true;
	return false;
}

/*
 * The stall clock: frames wait in the host queue and its consumer position has not moved
 * for psk_stall_us -> wake the drainers (again every psk_stall_us while it lasts).  Returns
 * whether frames wait.
 */
static bool psk_nic_stall_check(struct psk_nic *nic)
{
	struct mcp_image *img = nic->img;
	u32 tail = MCP_LOAD_ACQ(&img->hostq_tail);
	bool waiting = MCP_LOAD_ACQ(&mcp_hostq(img, tail % img->cfg.hostq_slots)->full);
	u64 now = ktime_get_ns();

	if (!waiting || tail != nic->stall_tail) {
		nic->stall_tail = tail;
		nic->stall_since = now;
	} else if (now - nic->stall_since >= (u64)psk_stall_us * NSEC_PER_USEC) {
		nic->stall_since = now;
		WRITE_ONCE(nic->stall_seq, nic->stall_seq + 1);
		wake_up_all(&nic->stallwq);
	}
	return waiting;
}

static int psk_nic_thread(void *arg)
{
	struct psk_nic *nic = arg;

	while (!kthread_should_stop()) {
		ktime_t tick;

		bool waiting;

		atomic_set(&nic->kick, 0);
		if (psk_nic_pass(nic) > 0) {
			psk_nic_stall_check(nic);
			cond_resched();
			continue;
		}
		waiting = psk_nic_stall_check(nic);
		if (psk_nic_busy(nic))
			tick = ns_to_ktime((u64)psk_tick_us * NSEC_PER_USEC);
		else if (waiting && READ_ONCE(nic->clients))
			/* the stall clock runs: a drainer may have to be woken */
			tick = ns_to_ktime((u64)psk_stall_us * NSEC_PER_USEC / 2);
		else
			/* nothing to time (frames nobody is attached to take wait for the next) */
			tick = ms_to_ktime(PSK_IDLE_MS);
		wait_event_interruptible_hrtimeout(nic->kwq,
						   atomic_read(&nic->kick) || kthread_should_stop(),
						   tick);
	}
	return 0;
}

/*
 * Create NIC index on interface ifname as node `node`: image, area, link, thread, and the
 * misc device (last: it appears when everything works).  Returns the NIC or an ERR_PTR with
 * the reason in why.
 */
struct psk_nic *psk_nic_create(int index, const char *ifname, u16 node, char *why, size_t whylen)
{
	struct mcp_config cfg;
	struct net_device *dev;
	struct psk_nic *nic;
	const char *bad;
	size_t size;
	int rc;

	dev = dev_get_by_name(&init_net, ifname);
	if (!dev) {
		snprintf(why, whylen, "no network interface '%s' (see 'ip link')", ifname);
		return ERR_PTR(-ENODEV);
	}
	if (dev->mtu < MCP_WIRE_HDR + 64) {
		snprintf(why, whylen, "the MTU %u of %s is too small for psport frames", dev->mtu,
			 ifname);
		dev_put(dev);
		return ERR_PTR(-EINVAL);
	}
	nic = kzalloc(sizeof(*nic), GFP_KERNEL);
	if (!nic) {
		dev_put(dev);
		return ERR_PTR(-ENOMEM);
	}
	nic->index = index;
	nic->node = node;
	if (index == 0)
		snprintf(nic->name, sizeof(nic->name), "psport");
	else
		snprintf(nic->name, sizeof(nic->name), "psport%d", index);
	mutex_init(&nic->lock);
	init_waitqueue_head(&nic->kwq);
	init_waitqueue_head(&nic->rxwq);
	init_waitqueue_head(&nic->areawq);
	init_waitqueue_head(&nic->stallwq);
	psk_link_init(nic, dev);	/* the link owns the reference from here on */

	mcp_config_default(&cfg, node);
	cfg.max_nodes = psk_max_nodes;
	cfg.contexts = psk_contexts;
	cfg.slot_size = min_t(u32, psk_frame_size, dev->mtu - MCP_WIRE_HDR);
	/* a window that covers the round trip, unless the window parameter names one; the
	 * slot counts follow the window in force */
	if (psk_window > MCP_MAX_WINDOW) {
		snprintf(why, whylen, "window=%u: must be 1..%u (0: automatic)",
			 (unsigned int)psk_window, MCP_MAX_WINDOW);
		rc = -EINVAL;
		goto fail;
	}
	if (psk_window) {
		cfg.window = psk_window;
		mcp_config_autosize(&cfg, MCP_AUTO_SEND_SLOTS | MCP_AUTO_RECV_SLOTS);
	} else {
		mcp_config_autosize(&cfg, MCP_AUTO_ALL);
	}
	cfg.seed = get_random_u64();
	rc = mcp_config_check(&cfg, &bad);
	if (rc) {
		snprintf(why, whylen, "firmware configuration: %s", bad);
		goto fail;
	}
	size = PAGE_ALIGN(mcp_image_size(&cfg));
	nic->img = vmalloc_user(size);
	if (!nic->img) {
		snprintf(why, whylen, "no memory for the %zu-byte NIC image", size);
		rc = -ENOMEM;
		goto fail;
	}
	nic->img_size = size;
	rc = mcp_image_format(nic->img, size, &cfg);
	if (rc) {
		snprintf(why, whylen, "cannot format the NIC image (%d)", rc);
		goto fail;
	}
	mcp_nic_init(&nic->mcp, nic->img, &nic->link.l);

	nic->area_size = (size_t)psk_area_mb << 20;
	nic->area = shmem_file_setup("psport-area", nic->area_size, VM_NORESERVE);
	if (IS_ERR(nic->area)) {
		rc = PTR_ERR(nic->area);
		nic->area = NULL;
		snprintf(why, whylen, "cannot create the %zu-byte message area (%d)",
			 nic->area_size, rc);
		goto fail;
	}

	nic->thread = kthread_run(psk_nic_thread, nic, "%s", nic->name);
	if (IS_ERR(nic->thread)) {
		rc = PTR_ERR(nic->thread);
		nic->thread = NULL;
		snprintf(why, whylen, "cannot start the firmware thread (%d)", rc);
		goto fail;
	}
	psk_link_start(nic);
	rc = psk_dev_register(nic);
	if (rc) {
		snprintf(why, whylen, "cannot register the misc device %s (%d)", nic->name, rc);
		goto fail;
	}
	return nic;

fail:
	psk_nic_destroy(nic);
	return ERR_PTR(rc);
}

/* Tear a NIC down: device, link, thread, memory.  No descriptor may be open (module refs). */
void psk_nic_destroy(struct psk_nic *nic)
{
	struct psk_link_stats *st = &nic->link.st;

	if (nic->misc_added)
		misc_deregister(&nic->misc);
	if (nic->thread)
		kthread_stop(nic->thread);
	psk_link_stop(nic);
	pr_info("%s: stopped; link rx %llu frames (%lld queue full, %lld ignored, %llu truncated), tx %llu frames (%llu dropped, %llu no memory, %llu no route)\n",
		nic->name, st->rx_frames, (long long)atomic64_read(&st->rx_queue_full),
		(long long)atomic64_read(&st->rx_ignored), st->rx_truncated, st->tx_frames,
		st->tx_dropped, st->tx_nomem, st->tx_noroute);
	if (nic->area)
		fput(nic->area);
	vfree(nic->img);
	kfree(nic);
}
