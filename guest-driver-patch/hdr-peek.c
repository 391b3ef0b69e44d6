/* SPDX-License-Identifier: GPL-2.0 */
/*
 * hdr-peek: show the virtio-net headers a guest puts on its TX ring, as a
 * vhost-user backend sees them. Test helper for the opt-in marker of
 * virtio_net-deferred.patch (README.md "Opt-in through stock QEMU 7.2 / libvirt 9.0"): an independent reader on
 * the device side, built on DPDK's rte_vhost, no schednic code.
 *
 * Usage: hdr-peek SOCKET COUNT TIMEOUT_S [EAL args...]
 * Serves SOCKET (vhost-user server; QEMU connects as client), waits until
 * the guest has made COUNT TX buffers available, prints one line per buffer
 *     hdr <i> flags=0x.. gso_type=.. num_buffers=0x....
 * and exits 0; exits 1 on timeout. It only reads: the avail ring and the
 * descriptors are never consumed and no used entry is written, so the
 * guest's TX queue just fills (a few packets) until QEMU is stopped.
 * Read-only peeking pairs with the driver's virtio_wmb() before publishing
 * avail->idx: read idx, then rte_rmb(), then ring and descriptors.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <linux/virtio_ring.h>
#include <rte_atomic.h>
#include <rte_eal.h>
#include <rte_vhost.h>

#define TXQ 1 /* virtqueue 1 = transmitq0 */

static volatile int g_vid = -1;

static int new_device(int vid)
{
	g_vid = vid;
	return 0;
}

static void destroy_device(int vid)
{
	(void)vid;
	g_vid = -1;
}

static const struct rte_vhost_device_ops ops = {
	.new_device = new_device,
	.destroy_device = destroy_device,
};

static long parse_long(const char *s, const char *what)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v <= 0 || v > INT_MAX) {
		fprintf(stderr, "hdr-peek: bad %s '%s'\n", what, s);
		exit(2);
	}
	return v;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *gpa(struct rte_vhost_memory *mem, uint64_t addr, uint64_t need)
{
	uint64_t len = need;
	uint64_t va = rte_vhost_va_from_guest_pa(mem, addr, &len);

	return va && len >= need ? (void *)(uintptr_t)va : NULL;
}

/* The 12-byte virtio_net_hdr_v1 starts the first descriptor of the chain
 * (possibly inside an indirect table). */
static int print_hdr(struct rte_vhost_memory *mem, const struct rte_vhost_vring *vr,
		     unsigned int i, uint16_t head)
{
	const struct vring_desc *d;
	const uint8_t *h;
	uint16_t nb;

	if (head >= vr->size)
		return -EINVAL;
	d = &vr->desc[head];
	if (d->flags & VRING_DESC_F_INDIRECT) {
		d = gpa(mem, d->addr, sizeof(*d));
		if (d == NULL)
			return -EFAULT;
	}
	if (d->len < 12)
		return -EMSGSIZE;
	h = gpa(mem, d->addr, 12);
	if (h == NULL)
		return -EFAULT;
	memcpy(&nb, h + 10, sizeof(nb)); /* VERSION_1: little endian */
	printf("hdr %u flags=0x%02x gso_type=%u num_buffers=0x%04x\n", i, h[0], h[1], nb);
	return 0;
}

int main(int argc, char **argv)
{
	struct rte_vhost_memory *mem = NULL;
	struct rte_vhost_vring vr;
	const char *path;
	long count, timeout;
	double deadline;
	uint64_t features = 0;
	int ret;

	if (argc < 4) {
		fprintf(stderr, "usage: hdr-peek SOCKET COUNT TIMEOUT_S [EAL args...]\n");
		return 2;
	}
	path = argv[1];
	count = parse_long(argv[2], "count");
	timeout = parse_long(argv[3], "timeout");
	argv[3] = argv[0];
	if (rte_eal_init(argc - 3, argv + 3) < 0) {
		fprintf(stderr, "hdr-peek: rte_eal_init failed\n");
		return 2;
	}
	if (rte_vhost_driver_register(path, 0) ||
	    rte_vhost_driver_callback_register(path, &ops) ||
	    rte_vhost_driver_start(path)) {
		fprintf(stderr, "hdr-peek: cannot serve %s\n", path);
		ret = 2;
		goto out_eal;
	}
	ret = 1;
	deadline = now_s() + timeout;
	while (now_s() < deadline) {
		int vid = g_vid;
		uint16_t avail;

		usleep(20000);
		if (vid < 0 || rte_vhost_get_vhost_vring(vid, TXQ, &vr) || vr.desc == NULL ||
		    vr.avail == NULL)
			continue;
		avail = *(volatile uint16_t *)&vr.avail->idx;
		if (avail < count)
			continue;
		rte_rmb(); /* pairs with the driver's virtio_wmb() before avail->idx */
		if (rte_vhost_get_mem_table(vid, &mem)) {
			fprintf(stderr, "hdr-peek: no memory table\n");
			ret = 2;
			break;
		}
		rte_vhost_get_negotiated_features(vid, &features);
		printf("features 0x%016" PRIx64 " ring %u avail %u\n", features, vr.size, avail);
		ret = 0;
		for (unsigned int i = 0; i < (unsigned int)count; i++) {
			int err = print_hdr(mem, &vr, i, vr.avail->ring[i % vr.size]);

			if (err) {
				fprintf(stderr, "hdr-peek: buffer %u: %s\n", i, strerror(-err));
				ret = 2;
				break;
			}
		}
		free(mem);
		break;
	}
	if (ret == 1)
		fprintf(stderr, "hdr-peek: fewer than %ld TX buffers within %lds\n", count, timeout);
	fflush(stdout);
	rte_vhost_driver_unregister(path);
out_eal:
	rte_eal_cleanup();
	return ret;
}
