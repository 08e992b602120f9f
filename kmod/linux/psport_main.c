// SPDX-License-Identifier: GPL-2.0
/*
 * psport_main.c - the psport kernel module: module parameters, the misc devices /dev/psport
 * (and /dev/psport1.. for further interfaces) and the device ABI of kmod/psport_abi.h.
 *
 *   modprobe psport ifname=eth0 node=0 macs=52:54:00:00:00:01,52:54:00:00:00:02 users=0,1000
 *
 * A process opens the device, asks INFO, ATTACHes (the module checks the user and the process
 * limit as psid does, takes a NIC context for it, and tells the first attacher to format the
 * message area), maps the image at PSK_MMAP_IMAGE and the area at PSK_MMAP_AREA, posts sends
 * into its context's ring and rings the doorbell (KICK); it sleeps in WAIT.  Closing the
 * descriptor (exit, kill) detaches the context: the firmware frees it once its last sends are
 * acknowledged or failed.  The module cannot be unloaded while a descriptor or an image
 * mapping exists (each holds a module reference).
 */
#include <linux/cred.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/uidgid.h>

#include "mcp_host.h"
#include "psport.h"

static char *ifname[PSK_MAX_NICS];
static int n_ifname;
module_param_array(ifname, charp, &n_ifname, 0444);
MODULE_PARM_DESC(ifname, "interfaces, one NIC each: the first is /dev/psport, then /dev/psport1, ...");

static ushort node[PSK_MAX_NICS];
static int n_node;
module_param_array(node, ushort, &n_node, 0444);
MODULE_PARM_DESC(node, "node id of each NIC (as many as ifname)");

static char *macs[PSK_MAX_NODES];
static int n_macs;
module_param_array(macs, charp, &n_macs, 0444);
MODULE_PARM_DESC(macs, "MAC address of node 0, 1, ... (aa:bb:cc:dd:ee:ff, '-' for none)");

static char *users = "0";
module_param(users, charp, 0444);
MODULE_PARM_DESC(users, "uids that may attach, comma separated (root always may); empty: any user; default: root only");

static unsigned int max_clients = 64;
module_param(max_clients, uint, 0444);
MODULE_PARM_DESC(max_clients, "largest number of attached processes per NIC");

unsigned short psk_contexts = 64; /* as PSP_CONTEXTS in the settings table */
module_param_named(contexts, psk_contexts, ushort, 0444);
MODULE_PARM_DESC(contexts, "NIC contexts per NIC (1..64)");

unsigned short psk_max_nodes = 256;
module_param_named(max_nodes, psk_max_nodes, ushort, 0444);
MODULE_PARM_DESC(max_nodes, "node ids are 0 .. max_nodes-1");

unsigned int psk_frame_size = 4096;
module_param_named(frame_size, psk_frame_size, uint, 0444);
MODULE_PARM_DESC(frame_size, "payload bytes per frame (at most the MTU minus 32)");

unsigned short psk_window; /* 0: automatic, as PSP_WINDOW=auto */
module_param_named(window, psk_window, ushort, 0444);
MODULE_PARM_DESC(window, "frames in flight to one peer (1..64); 0 (default): enough frames for 96 KiB, at least 8; the slot counts follow it");

unsigned int psk_area_mb = 80;
module_param_named(area_mb, psk_area_mb, uint, 0444);
MODULE_PARM_DESC(area_mb, "message area per NIC, MiB (allocated as it is used)");

unsigned int psk_tick_us = 100;
module_param_named(tick_us, psk_tick_us, uint, 0444);
MODULE_PARM_DESC(tick_us, "firmware thread tick while connections have work, microseconds");

unsigned int psk_stall_us = 2000;
module_param_named(stall_us, psk_stall_us, uint, 0444);
MODULE_PARM_DESC(stall_us, "frames untaken this long in the host queue wake a client's drainer, microseconds");

#define PSK_MAX_USERS 64
static u32 psk_users[PSK_MAX_USERS];
static int psk_nusers;

static struct psk_nic *psk_nics[PSK_MAX_NICS];
static DEFINE_MUTEX(psk_nics_lock);

/* What a descriptor of the device holds. */
struct psk_file {
	struct psk_nic *nic;
	bool attached;
	bool cancelled;		/* PSK_IOC_CANCEL: stall waits end */
	int ctx;
	u32 generation;
};

/* The users parameter, parsed: 0 or -EINVAL. */
static int psk_parse_users(void)
{
	char *list, *p, *tok;
	int rc = 0;

	psk_nusers = 0;
	if (!users || !users[0])
		return 0;
	list = kstrdup(users, GFP_KERNEL);
	if (!list)
		return -ENOMEM;
	p = list;
	while ((tok = strsep(&p, ",")) != NULL) {
		if (!tok[0])
			continue;
		if (psk_nusers == PSK_MAX_USERS || kstrtou32(tok, 10, &psk_users[psk_nusers])) {
			pr_err("psport: users=%s: give at most %d numeric uids, comma separated\n",
			       users, PSK_MAX_USERS);
			rc = -EINVAL;
			break;
		}
		psk_nusers++;
	}
	kfree(list);
	return rc;
}

/*
 * psid's rule: root always, else any user when the list is empty, else the listed uids.  The
 * default list is "0" (root only), not psid's empty one: an attached process can write the
 * image the kernel firmware works on (README.md, "Trust").
 */
static bool psk_user_allowed(void)
{
	kuid_t uid = current_euid();
	int i;

	if (uid_eq(uid, GLOBAL_ROOT_UID) || !psk_nusers)
		return true;
	for (i = 0; i < psk_nusers; i++)
		if (uid_eq(uid, make_kuid(&init_user_ns, psk_users[i])))
			return true;
	return false;
}

static int psk_open(struct inode *inode, struct file *f)
{
	struct miscdevice *misc = f->private_data;
	struct psk_file *pf;

	pf = kzalloc(sizeof(*pf), GFP_KERNEL);
	if (!pf)
		return -ENOMEM;
	pf->nic = container_of(misc, struct psk_nic, misc);
	pf->ctx = -1;
	f->private_data = pf;
	return stream_open(inode, f);
}

static int psk_release(struct inode *inode, struct file *f)
{
	struct psk_file *pf = f->private_data;
	struct psk_nic *nic = pf->nic;

	mutex_lock(&nic->lock);
	if (pf->attached) {
		/* posted sends still go out; the firmware frees the context afterwards */
		mcp_ctx_detach(nic->img, pf->ctx);
		nic->clients--;
	}
	if (nic->formatter == pf) {
		/* it never said AREA_READY: the next attacher formats the area again */
		nic->formatter = NULL;
		if (nic->area_state == PSK_AREA_FORMATTING)
			nic->area_state = PSK_AREA_NONE;
		wake_up_all(&nic->areawq);
	}
	mutex_unlock(&nic->lock);
	if (pf->attached)
		psk_nic_kick(nic);
	kfree(pf);
	return 0;
}

/* INFO into a struct psk_info of size bytes: the caller's ABI may know fewer fields (or more),
 * and it learns the module's version from the first one either way. */
static long psk_info(struct psk_nic *nic, void __user *arg, size_t size)
{
	struct psk_info in;

	memset(&in, 0, sizeof(in));
	in.abi_version = PSK_ABI_VERSION;
	in.mcp_abi_version = MCP_ABI_VERSION;
	in.provider = PSK_PROVIDER_KERNEL;
	in.flags = 0;	/* no PSK_INFO_HOST_POLL: only the kernel thread runs the firmware */
	in.image_size = nic->img_size;
	in.area_size = nic->area_size;
	in.node_id = nic->node;
	mutex_lock(&nic->lock);
	in.max_nodes = nic->img->cfg.max_nodes;
	in.contexts = nic->img->cfg.contexts;
	in.contexts_used = psk_nic_contexts_used(nic);
	in.slot_size = mcp_max_payload(nic->img);
	in.window = nic->img->cfg.window;
	in.send_slots = nic->img->cfg.send_slots;
	in.recv_slots = nic->img->cfg.recv_slots;
	in.hostq_slots = nic->img->cfg.hostq_slots;
	mutex_unlock(&nic->lock);
	in.max_clients = max_clients;
	strscpy(in.link_kind, "eth", sizeof(in.link_kind));
	return copy_to_user(arg, &in, min(size, sizeof(in))) ? -EFAULT : 0;
}

/* The area is formatted, or this caller formats it.  Called and returns with nic->lock. */
static int psk_area_claim(struct psk_nic *nic, struct psk_file *pf, u32 *flags)
{
	long left;

	for (;;) {
		if (nic->area_state == PSK_AREA_READY)
			return 0;
		if (nic->area_state == PSK_AREA_NONE) {
			nic->area_state = PSK_AREA_FORMATTING;
			nic->formatter = pf;
			*flags |= PSK_ATTACH_FORMAT_AREA;
			return 0;
		}
		mutex_unlock(&nic->lock);
		left = wait_event_interruptible_timeout(nic->areawq,
				READ_ONCE(nic->area_state) != PSK_AREA_FORMATTING, 30 * HZ);
		mutex_lock(&nic->lock);
		if (left < 0)
			return -EINTR;
		if (left == 0 && nic->area_state == PSK_AREA_FORMATTING)
			return -ETIMEDOUT;
	}
}

static long psk_attach(struct psk_file *pf, void __user *arg)
{
	struct psk_nic *nic = pf->nic;
	struct psk_attach at;
	int rc, ctx;

	if (copy_from_user(&at, arg, sizeof(at)))
		return -EFAULT;
	if (at.abi_version != PSK_ABI_VERSION)
		return -EPROTO;
	if (!psk_user_allowed())
		return -EACCES;
	at.flags = 0;
	mutex_lock(&nic->lock);
	if (pf->attached) {
		rc = -EBUSY;
		goto out;
	}
	if (nic->clients >= max_clients) {
		rc = -EUSERS;
		goto out;
	}
	rc = psk_area_claim(nic, pf, &at.flags);
	if (rc)
		goto out;
	ctx = mcp_ctx_attach(nic->img, (u32)task_tgid_vnr(current));
	if (ctx < 0) {
		rc = ctx;
		if (nic->formatter == pf) {
			nic->formatter = NULL;
			nic->area_state = PSK_AREA_NONE;
			wake_up_all(&nic->areawq);
		}
		goto out;
	}
	pf->attached = true;
	pf->ctx = ctx;
	pf->generation = mcp_ctx(nic->img, ctx)->generation;
	nic->clients++;
	at.context = ctx;
	at.generation = pf->generation;
	rc = 0;
out:
	mutex_unlock(&nic->lock);
	if (rc)
		return rc;
	/* attached even if the copy fails: closing the descriptor detaches */
	return copy_to_user(arg, &at, sizeof(at)) ? -EFAULT : 0;
}

static long psk_wait(struct psk_file *pf, void __user *arg)
{
	struct psk_nic *nic = pf->nic;
	unsigned long timeout;
	struct psk_wait w;
	long left;

	if (copy_from_user(&w, arg, sizeof(w)))
		return -EFAULT;
	timeout = msecs_to_jiffies(min_t(u32, w.timeout_ms, 60000));
	if (!(w.flags & PSK_WAIT_STALL)) {
		left = wait_event_interruptible_timeout(nic->rxwq,
				READ_ONCE(nic->img->rx_event) != w.seen, timeout);
		if (left < 0)
			return -EINTR;
		return left ? 0 : -ETIMEDOUT;
	}
	left = wait_event_interruptible_timeout(nic->stallwq,
			READ_ONCE(nic->stall_seq) != w.seen || READ_ONCE(pf->cancelled), timeout);
	w.seen = READ_ONCE(nic->stall_seq);
	if (copy_to_user(arg, &w, sizeof(w)))
		return -EFAULT;
	if (READ_ONCE(pf->cancelled))
		return -ECANCELED;
	if (left < 0)
		return -EINTR;
	return left ? 0 : -ETIMEDOUT;
}

static long psk_settle(struct psk_nic *nic, void __user *arg)
{
	struct psk_settle s;

	if (copy_from_user(&s, arg, sizeof(s)))
		return -EFAULT;
	mutex_lock(&nic->lock);
	s.position = mcp_recv_settle(nic->img, s.pos);
	mutex_unlock(&nic->lock);
	return copy_to_user(arg, &s, sizeof(s)) ? -EFAULT : 0;
}

static long psk_nodes(void __user *arg)
{
	struct psk_nodes *n = kmalloc(sizeof(*n), GFP_KERNEL);
	long rc;

	if (!n)
		return -ENOMEM;
	psk_link_nodes(n);
	rc = copy_to_user(arg, n, sizeof(*n)) ? -EFAULT : 0;
	kfree(n);
	return rc;
}

static long psk_ioctl(struct file *f, unsigned int cmd, unsigned long arg)
{
	struct psk_file *pf = f->private_data;
	struct psk_nic *nic = pf->nic;
	void __user *uarg = (void __user *)arg;
	long rc = 0;

	/* INFO of a client built for another ABI (its struct, hence its command number, has
	 * another size): answered, so that its ATTACH can name both versions (EPROTO) instead of
	 * the client failing here with "not a psport device". */
	if (cmd != PSK_IOC_INFO && _IOC_TYPE(cmd) == PSK_IOC_MAGIC &&
	    _IOC_NR(cmd) == _IOC_NR(PSK_IOC_INFO) && _IOC_DIR(cmd) == _IOC_READ &&
	    _IOC_SIZE(cmd) >= sizeof(psk_u32))
		return psk_info(nic, uarg, _IOC_SIZE(cmd));
	switch (cmd) {
	case PSK_IOC_INFO:
		return psk_info(nic, uarg, sizeof(struct psk_info));
	case PSK_IOC_ATTACH:
		return psk_attach(pf, uarg);
	case PSK_IOC_NODES:
		return psk_nodes(uarg);
	}
	if (!pf->attached)
		return -EPERM;
	switch (cmd) {
	case PSK_IOC_WAIT:
		return psk_wait(pf, uarg);
	case PSK_IOC_CANCEL:
		WRITE_ONCE(pf->cancelled, true);
		wake_up_all(&nic->stallwq);
		return 0;
	case PSK_IOC_KICK:
		psk_nic_kick(nic);
		return 0;
	case PSK_IOC_WAKE:
		__atomic_add_fetch(&nic->img->rx_event, 1u, __ATOMIC_RELEASE);
		wake_up_all(&nic->rxwq);
		return 0;
	case PSK_IOC_AREA_READY:
		mutex_lock(&nic->lock);
		if (nic->formatter == pf && nic->area_state == PSK_AREA_FORMATTING) {
			nic->area_state = PSK_AREA_READY;
			nic->formatter = NULL;
			wake_up_all(&nic->areawq);
		} else {
			rc = -EINVAL;
		}
		mutex_unlock(&nic->lock);
		return rc;
	case PSK_IOC_SETTLE:
		return psk_settle(nic, uarg);
	}
	return -ENOTTY;
}

/*
 * PSK_MMAP_IMAGE: the image (vmalloc'ed, mapped page by page).  PSK_MMAP_AREA: the message
 * area; the mapping becomes one of the shmem file, so futexes in it work between processes.
 * Shared mappings only; writable ones need an attached descriptor, read-only ones an allowed
 * user.
 */
static int psk_mmap(struct file *f, struct vm_area_struct *vma)
{
	struct psk_file *pf = f->private_data;
	struct psk_nic *nic = pf->nic;
	unsigned long area_pgoff = PSK_MMAP_AREA >> PAGE_SHIFT;
	unsigned long pages = vma_pages(vma), rel;

	/* MAP_SHARED (VM_MAYSHARE: mmap clears VM_SHARED for read-only descriptors) */
	if (!(vma->vm_flags & VM_MAYSHARE))
		return -EINVAL;
	if (!pf->attached) {
		if ((vma->vm_flags & VM_WRITE) || !psk_user_allowed())
			return -EACCES;
		vma->vm_flags &= ~VM_MAYWRITE;
	}
	if (vma->vm_pgoff < area_pgoff)
		return remap_vmalloc_range(vma, nic->img, vma->vm_pgoff);
	rel = vma->vm_pgoff - area_pgoff;
	if (rel > (nic->area_size >> PAGE_SHIFT) || pages > (nic->area_size >> PAGE_SHIFT) - rel)
		return -EINVAL;
	vma_set_file(vma, nic->area);
	vma->vm_pgoff = rel;
	return call_mmap(nic->area, vma);
}

static const struct file_operations psk_fops = {
	.owner = THIS_MODULE,
	.open = psk_open,
	.release = psk_release,
	.unlocked_ioctl = psk_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.mmap = psk_mmap,
	.llseek = no_llseek,
};

/* Register nic's misc device (mode 0666: ATTACH checks the user). */
int psk_dev_register(struct psk_nic *nic)
{
	int rc;

	nic->misc.minor = MISC_DYNAMIC_MINOR;
	nic->misc.name = nic->name;
	nic->misc.fops = &psk_fops;
	nic->misc.mode = 0666;
	rc = misc_register(&nic->misc);
	if (!rc)
		nic->misc_added = true;
	return rc;
}

static int psk_netdev_event(struct notifier_block *nb, unsigned long event, void *ptr)
{
	struct net_device *dev = netdev_notifier_info_to_dev(ptr);
	int i;

	if (event != NETDEV_UNREGISTER)
		return NOTIFY_DONE;
	mutex_lock(&psk_nics_lock);
	for (i = 0; i < PSK_MAX_NICS; i++) {
		if (psk_nics[i] && READ_ONCE(psk_nics[i]->link.dev) == dev) {
			pr_warn("%s: interface %s goes away: its sends fail from now on\n",
				psk_nics[i]->name, dev->name);
			psk_link_dev_gone(psk_nics[i]);
		}
	}
	mutex_unlock(&psk_nics_lock);
	return NOTIFY_DONE;
}

static struct notifier_block psk_netdev_nb = {
	.notifier_call = psk_netdev_event,
};

static void psk_destroy_all(void)
{
	int i;

	mutex_lock(&psk_nics_lock);
	for (i = PSK_MAX_NICS - 1; i >= 0; i--) {
		if (psk_nics[i]) {
			psk_nic_destroy(psk_nics[i]);
			psk_nics[i] = NULL;
		}
	}
	mutex_unlock(&psk_nics_lock);
}

static int __init psk_init(void)
{
	char why[160];
	int i, rc;

	if (n_ifname == 0) {
		pr_err("psport: no interface: load with ifname=<if> node=<id> macs=<mac of node 0>,...\n");
		return -EINVAL;
	}
	if (n_node != n_ifname) {
		pr_err("psport: give one node id per interface (ifname has %d, node %d)\n",
		       n_ifname, n_node);
		return -EINVAL;
	}
	rc = psk_parse_users();
	if (rc)
		return rc;
	rc = psk_link_set_macs(macs, n_macs, why, sizeof(why));
	if (rc) {
		pr_err("psport: %s\n", why);
		return rc;
	}
	if (n_macs > psk_max_nodes) {
		pr_err("psport: macs names %d nodes but max_nodes is %u\n", n_macs, psk_max_nodes);
		return -EINVAL;
	}
	rc = register_netdevice_notifier(&psk_netdev_nb);
	if (rc)
		return rc;
	for (i = 0; i < n_ifname; i++) {
		struct psk_nic *nic;

		if (node[i] >= psk_max_nodes) {
			pr_err("psport: node %u of %s is not below max_nodes %u\n", node[i],
			       ifname[i], psk_max_nodes);
			rc = -EINVAL;
			goto fail;
		}
		mutex_lock(&psk_nics_lock);
		nic = psk_nic_create(i, ifname[i], node[i], why, sizeof(why));
		if (!IS_ERR(nic))
			psk_nics[i] = nic;
		mutex_unlock(&psk_nics_lock);
		if (IS_ERR(nic)) {
			pr_err("psport: %s (node %u): %s\n", ifname[i], node[i], why);
			rc = PTR_ERR(nic);
			goto fail;
		}
		pr_info("%s: node %u on %s, %u contexts, %u-byte slots, image %zu bytes, area %zu MiB, users '%s'\n",
			nic->name, nic->node, ifname[i], nic->img->cfg.contexts,
			mcp_max_payload(nic->img), nic->img_size, nic->area_size >> 20, users);
	}
	return 0;

fail:
	psk_destroy_all();
	unregister_netdevice_notifier(&psk_netdev_nb);
	return rc;
}

static void __exit psk_exit(void)
{
	/* NICs first: unregistering the notifier replays NETDEV_UNREGISTER for every device */
	psk_destroy_all();
	unregister_netdevice_notifier(&psk_netdev_nb);
}

module_init(psk_init);
module_exit(psk_exit);
MODULE_DESCRIPTION("psport: the ParaStation NIC firmware (MCP) over Ethernet, mapped into processes");
MODULE_LICENSE("GPL");
