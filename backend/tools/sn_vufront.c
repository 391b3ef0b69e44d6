/* sn_vufront.c — sn-vufront: a minimal vhost-user front-end (the role QEMU
 * plays) that posts crafted split-ring TX descriptors. Test-only.
 *
 * Design. Issue 5 asks that the hardened ring parser (sn_vring, the
 * "untrusted guest input" rules of Carousel §5.2's deferred completions
 * made safe) be tested against the running daemon, not only in a fake
 * memory. This program is the guest: it connects to a schednicd server
 * port, negotiates the vhost-user protocol (QEMU docs/interop/vhost-user.rst;
 * no protocol features, so rings start enabled at SET_VRING_KICK, and no
 * EVENT_IDX), shares two memfd regions that are contiguous in guest-physical
 * space but mapped separately (so a buffer can cross regions), lays out the
 * RX (0) and TX (1) split rings in them (virtio 1.1 §2.7) and runs one
 * scenario: a batch of chains (well-formed or malformed on purpose) is
 * published on the TX avail ring, kicked, and the used ring is watched until
 * the expected entries arrive or a timeout expires. One JSON line on stdout
 * says what was seen. The daemon's side of the contract: every chain-level
 * error comes back as a used entry with length 0; ring-level errors (bad or
 * busy head, avail jump) have nothing to complete and are only counted.
 *
 * Concurrency with the daemon (the device) follows the driver side of
 * virtio 1.1 §2.7.13: descriptors and avail ring entries are written first,
 * then avail->idx with release (pairs with the acquire load of avail->idx in
 * sn_vring_tx_pop); used->idx is loaded with acquire (pairs with the release
 * store in sn_vring_used_flush) before the used entries are read.
 *
 * Exit status: 0 = expectations met, 1 = not met (timeout, a bad chain not
 * completed with length 0), 2 = usage, 3 = protocol or system error.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "sn_vring.h"

/* vhost-user requests (vhost-user.rst "Front-end message types"). */
enum {
	VU_GET_FEATURES = 1,
	VU_SET_FEATURES = 2,
	VU_SET_OWNER = 3,
	VU_SET_MEM_TABLE = 5,
	VU_SET_VRING_NUM = 8,
	VU_SET_VRING_ADDR = 9,
	VU_SET_VRING_BASE = 10,
	VU_GET_VRING_BASE = 11,
	VU_SET_VRING_KICK = 12,
	VU_SET_VRING_CALL = 13,
};
#define VU_VERSION      0x1u
#define VU_REPLY        0x4u
#define VU_MAX_REGIONS  8
#define F_VERSION_1     32

struct vu_region {
	uint64_t gpa, size, uaddr, mmap_offset;
};
struct vu_msg {
	uint32_t request, flags, size;
	union {
		uint64_t u64;
		struct { uint32_t index, num; } state;
		struct { uint32_t index, flags; uint64_t desc, used, avail, log; } addr;
		struct { uint32_t nregions, padding; struct vu_region r[VU_MAX_REGIONS]; } mem;
	} p;
} __attribute__((packed));
#define VU_HDR 12u

/* Guest memory: two regions, contiguous in GPA, separate memfds/mappings. */
#define REG_SIZE  (1u << 20)
#define GPA0      0x100000ull
#define GPA1      (GPA0 + REG_SIZE)
#define GPA_OOB   0x40000000ull      /* in no region */
/* Region 0 layout (offsets). Region 1 holds frames, 2 KiB each. */
#define TX_DESC   0x0000u
#define TX_AVAIL  0x1000u
#define TX_USED   0x2000u
#define RX_DESC   0x4000u
#define RX_AVAIL  0x5000u
#define RX_USED   0x6000u
#define IND_OFF   0x8000u            /* indirect tables, 0x1000 apart */
#define HDR_OFF   0x10000u           /* virtio-net headers, 16 B apart */
#define FRAME_SZ  2048u
#define BIG_OFF   0x80000u           /* region 1: the oversized buffer */
#define BIG_LEN   70000u
#define FRAME_LEN 60u
#define MAX_Q     256u
#define MAX_SEEN  4096u
#define MAX_PRINT 64u

struct fe {
	int sock, kickfd[2], callfd[2], memfd[2];
	unsigned char *base[2];
	uint32_t q;
	uint16_t hdr_len;
	uint64_t features;
	struct sn_vring_desc *desc;
	struct sn_vring_avail *avail;
	struct sn_vring_used *used;
	uint16_t nd;                 /* next free descriptor of the batch */
	uint16_t avail_idx, used_seen;
	uint32_t nbuf;               /* frame buffers handed out (mod q) */
	double timeout_s;
	unsigned char dst[6], src[6];
	/* What was posted and seen. */
	uint32_t chains, skipped, expect;
	uint32_t nbad;
	uint16_t bad[MAX_Q * 2];
	uint32_t nseen;
	struct sn_vring_used_elem seen[MAX_SEEN];
	uint32_t used_total;
	bool timed_out;
	double wait_ms;
};

static void die(const char *what)
{
	fprintf(stderr, "sn-vufront: %s: %s\n", what, errno ? strerror(errno) : "protocol error");
	exit(3);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void nap_us(long us)
{
	struct timespec ts = { .tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000 };

	nanosleep(&ts, NULL);
}

/* ---- vhost-user messaging ---- */

static void vu_send(struct fe *f, struct vu_msg *m, const int *fds, int nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * VU_MAX_REGIONS)];
		struct cmsghdr align;
	} ctl;
	size_t len = VU_HDR + m->size, off = 0;
	const char *bytes = (const char *)m;

	m->flags = VU_VERSION;
	while (off < len) {
		struct iovec iov = { .iov_base = (void *)(bytes + off), .iov_len = len - off };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
		ssize_t n;

		if (off == 0 && nfds > 0) {
			struct cmsghdr *c;

			memset(&ctl, 0, sizeof(ctl));
			mh.msg_control = ctl.buf;
			mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
			c = CMSG_FIRSTHDR(&mh);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
			memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
		}
		n = sendmsg(f->sock, &mh, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("sendmsg to the back-end");
		}
		off += (size_t)n;
	}
}

static void read_full(struct fe *f, void *buf, size_t len, const char *what)
{
	size_t off = 0;

	while (off < len) {
		ssize_t n = recv(f->sock, (char *)buf + off, len - off, 0);

		if (n == 0) {
			errno = 0;
			fprintf(stderr, "sn-vufront: %s: back-end closed the connection\n", what);
			exit(3);
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				fprintf(stderr, "sn-vufront: %s: no reply within %.1f s\n", what,
					f->timeout_s);
				exit(3);
			}
			die(what);
		}
		off += (size_t)n;
	}
}

static void vu_reply(struct fe *f, uint32_t request, struct vu_msg *m, uint32_t want)
{
	read_full(f, m, VU_HDR, "reply header");
	if (m->request != request || !(m->flags & VU_REPLY) || m->size != want ||
	    want > sizeof(m->p)) {
		errno = 0;
		fprintf(stderr, "sn-vufront: bad reply to request %u: request %u flags %#x size %u\n",
			request, m->request, m->flags, m->size);
		exit(3);
	}
	read_full(f, &m->p, want, "reply payload");
}

static void vu_u64(struct fe *f, uint32_t req, uint64_t v, const int *fds, int nfds)
{
	struct vu_msg m = { .request = req, .size = 8 };

	m.p.u64 = v;
	vu_send(f, &m, fds, nfds);
}

static void vu_state(struct fe *f, uint32_t req, uint32_t index, uint32_t num)
{
	struct vu_msg m = { .request = req, .size = 8 };

	m.p.state.index = index;
	m.p.state.num = num;
	vu_send(f, &m, NULL, 0);
}

static uint32_t vu_get_base(struct fe *f, uint32_t index)
{
	struct vu_msg m;

	vu_state(f, VU_GET_VRING_BASE, index, 0);
	vu_reply(f, VU_GET_VRING_BASE, &m, 8);
	if (m.p.state.index != index) {
		errno = 0;
		die("GET_VRING_BASE reply for another ring");
	}
	return m.p.state.num;
}

static void connect_backend(struct fe *f, const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv;
	double deadline = now_s() + f->timeout_s;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "sn-vufront: socket path too long: %s\n", path);
		exit(2);
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	for (;;) {
		f->sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (f->sock < 0)
			die("socket");
		if (connect(f->sock, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			break;
		if ((errno != ENOENT && errno != ECONNREFUSED) || now_s() > deadline) {
			fprintf(stderr, "sn-vufront: connect %s: %s\n", path, strerror(errno));
			exit(3);
		}
		close(f->sock);
		nap_us(50000);
	}
	tv.tv_sec = (time_t)f->timeout_s;
	tv.tv_usec = (suseconds_t)((f->timeout_s - (double)tv.tv_sec) * 1e6);
	if (setsockopt(f->sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
	    setsockopt(f->sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)))
		die("setsockopt timeout");
}

static void map_memory(struct fe *f)
{
	for (int i = 0; i < 2; i++) {
		f->memfd[i] = memfd_create(i ? "sn-vufront-r1" : "sn-vufront-r0", MFD_CLOEXEC);
		if (f->memfd[i] < 0)
			die("memfd_create");
		if (ftruncate(f->memfd[i], REG_SIZE))
			die("ftruncate memfd");
		f->base[i] = mmap(NULL, REG_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED,
				  f->memfd[i], 0);
		if (f->base[i] == MAP_FAILED)
			die("mmap memfd");
	}
	f->desc = (struct sn_vring_desc *)(void *)(f->base[0] + TX_DESC);
	f->avail = (struct sn_vring_avail *)(void *)(f->base[0] + TX_AVAIL);
	f->used = (struct sn_vring_used *)(void *)(f->base[0] + TX_USED);
}

static uint64_t va(const struct fe *f, unsigned off)
{
	return (uint64_t)(uintptr_t)(f->base[0] + off);
}

static void negotiate(struct fe *f)
{
	static const unsigned ring_off[2][3] = {
		{ RX_DESC, RX_AVAIL, RX_USED }, { TX_DESC, TX_AVAIL, TX_USED } };
	struct vu_msg m = { .request = VU_SET_OWNER, .size = 0 };
	uint64_t offered;

	vu_send(f, &m, NULL, 0);
	m = (struct vu_msg){ .request = VU_GET_FEATURES, .size = 0 };
	vu_send(f, &m, NULL, 0);
	vu_reply(f, VU_GET_FEATURES, &m, 8);
	offered = m.p.u64;
	/* Only VERSION_1: no EVENT_IDX, no protocol features (rings then start
	 * enabled at SET_VRING_KICK), no IOMMU, no offloads. */
	f->features = offered & (1ULL << F_VERSION_1);
	f->hdr_len = f->features ? 12 : 10;
	vu_u64(f, VU_SET_FEATURES, f->features, NULL, 0);

	m = (struct vu_msg){ .request = VU_SET_MEM_TABLE, .size = 8 + 2 * sizeof(struct vu_region) };
	m.p.mem.nregions = 2;
	m.p.mem.padding = 0;
	for (int i = 0; i < 2; i++) {
		m.p.mem.r[i].gpa = i ? GPA1 : GPA0;
		m.p.mem.r[i].size = REG_SIZE;
		m.p.mem.r[i].uaddr = (uint64_t)(uintptr_t)f->base[i];
		m.p.mem.r[i].mmap_offset = 0;
	}
	vu_send(f, &m, f->memfd, 2);

	for (uint32_t r = 0; r < 2; r++) {
		vu_state(f, VU_SET_VRING_NUM, r, f->q);
		vu_state(f, VU_SET_VRING_BASE, r, 0);
		m = (struct vu_msg){ .request = VU_SET_VRING_ADDR, .size = 40 };
		m.p.addr.index = r;
		m.p.addr.flags = 0;
		m.p.addr.desc = va(f, ring_off[r][0]);
		m.p.addr.avail = va(f, ring_off[r][1]);
		m.p.addr.used = va(f, ring_off[r][2]);
		m.p.addr.log = 0;
		vu_send(f, &m, NULL, 0);
		f->kickfd[r] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		f->callfd[r] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (f->kickfd[r] < 0 || f->callfd[r] < 0)
			die("eventfd");
		vu_u64(f, VU_SET_VRING_KICK, r, &f->kickfd[r], 1);
		vu_u64(f, VU_SET_VRING_CALL, r, &f->callfd[r], 1);
	}
}

/* ---- Ring building (driver side) ---- */

static uint16_t put_desc(struct fe *f, uint64_t addr, uint32_t len, uint16_t flags,
			 uint16_t next)
{
	struct sn_vring_desc *d;

	if (f->nd >= f->q) {
		fprintf(stderr, "sn-vufront: scenario needs more than %u descriptors\n", f->q);
		exit(2);
	}
	d = &f->desc[f->nd];
	d->addr = addr;
	d->len = len;
	d->flags = flags;
	d->next = next;
	return f->nd++;
}

/* A frame in region 1 and its header slot in region 0; returns slot k. */
static uint32_t new_frame(struct fe *f)
{
	uint32_t k = f->nbuf++ % f->q;
	unsigned char *fr = f->base[1] + (size_t)k * FRAME_SZ;

	memset(f->base[0] + HDR_OFF + 16 * k, 0, 16);
	memset(fr, 0, FRAME_LEN);
	memcpy(fr, f->dst, 6);
	memcpy(fr + 6, f->src, 6);
	fr[12] = 0x88;               /* IEEE local experimental ethertype */
	fr[13] = 0xb5;
	fr[14] = (unsigned char)k;
	return k;
}

static uint64_t hdr_gpa(uint32_t k) { return GPA0 + HDR_OFF + 16ull * k; }
static uint64_t frame_gpa(uint32_t k) { return GPA1 + (uint64_t)k * FRAME_SZ; }

static uint16_t chain_good(struct fe *f)
{
	uint32_t k = new_frame(f);
	uint16_t h = f->nd;

	put_desc(f, hdr_gpa(k), f->hdr_len, SN_VRING_DESC_F_NEXT, (uint16_t)(h + 1));
	put_desc(f, frame_gpa(k), FRAME_LEN, 0, 0);
	return h;
}

/* An indirect table at IND_OFF + t * 0x1000; returns its host pointer. */
static struct sn_vring_desc *ind_table(struct fe *f, unsigned t)
{
	return (struct sn_vring_desc *)(void *)(f->base[0] + IND_OFF + 0x1000u * t);
}

static uint64_t ind_gpa(unsigned t) { return GPA0 + IND_OFF + 0x1000ull * t; }

static uint16_t chain_good_indirect(struct fe *f)
{
	uint32_t k = new_frame(f);
	struct sn_vring_desc *t = ind_table(f, 3);

	t[0] = (struct sn_vring_desc){ hdr_gpa(k), f->hdr_len, SN_VRING_DESC_F_NEXT, 1 };
	t[1] = (struct sn_vring_desc){ frame_gpa(k), FRAME_LEN, 0, 0 };
	return put_desc(f, ind_gpa(3), 32, SN_VRING_DESC_F_INDIRECT, 0);
}

static void add_head(struct fe *f, uint16_t head, bool bad, bool completes)
{
	f->avail->ring[(uint16_t)(f->avail_idx + f->chains + f->skipped) & (f->q - 1)] = head;
	if (completes)
		f->chains++;
	else
		f->skipped++;
	if (bad)
		f->bad[f->nbad++] = head;
}

/* Publish the batch and kick. */
static void publish(struct fe *f)
{
	uint64_t one = 1;
	uint16_t n = (uint16_t)(f->chains + f->skipped);

	f->expect += f->chains;
	/* Release pairs with the acquire load of avail->idx in
	 * sn_vring_tx_pop(): descriptors and ring entries are visible first. */
	f->avail_idx = (uint16_t)(f->avail_idx + n);
	__atomic_store_n(&f->avail->idx, f->avail_idx, __ATOMIC_RELEASE);
	if (write(f->kickfd[1], &one, sizeof(one)) != sizeof(one))
		die("kick");
	f->chains = f->skipped = 0;
}

static uint16_t used_idx(const struct fe *f)
{
	/* Acquire pairs with the release store of used->idx in
	 * sn_vring_used_flush(): the entries below it are visible. */
	return __atomic_load_n(&f->used->idx, __ATOMIC_ACQUIRE);
}

static void collect(struct fe *f)
{
	uint16_t u = used_idx(f);

	while (f->used_seen != u) {
		const struct sn_vring_used_elem *e = &f->used->ring[f->used_seen & (f->q - 1)];

		if (f->nseen < MAX_SEEN)
			f->seen[f->nseen++] = *e;
		f->used_seen++;
		f->used_total++;
	}
}

/* Wait until every chain published so far has its used entry. */
static void wait_used(struct fe *f)
{
	double t0 = now_s(), deadline = t0 + f->timeout_s;

	for (;;) {
		collect(f);
		if (f->used_total >= f->expect)
			break;
		if (now_s() > deadline) {
			f->timed_out = true;
			break;
		}
		nap_us(200);
	}
	f->wait_ms += (now_s() - t0) * 1e3;
}

/* ---- Scenarios ---- */

struct scenario {
	const char *name;
	uint32_t q;                  /* default queue size */
	void (*run)(struct fe *f, uint32_t count);
	void (*after_wait)(struct fe *f); /* after --wait-file, or NULL */
};

/* Bad chain(s) built by the caller, then one good chain on the same ring:
 * the queue must go on serving after a malformed chain. */
static void finish_with_good(struct fe *f)
{
	add_head(f, chain_good(f), false, true);
	publish(f);
	wait_used(f);
}

static void sc_good(struct fe *f, uint32_t count)
{
	while (count) {
		uint32_t n = count < f->q / 2 ? count : f->q / 2;

		f->nd = 0;
		for (uint32_t i = 0; i < n; i++)
			add_head(f, chain_good(f), false, true);
		publish(f);
		wait_used(f);
		if (f->timed_out)
			return;
		count -= n;
	}
}

static void sc_hold(struct fe *f, uint32_t count)
{
	uint32_t n = count < f->q / 2 ? count : f->q / 2;

	for (uint32_t i = 0; i < n; i++)
		add_head(f, chain_good(f), false, true);
	publish(f);
	f->expect = 0;               /* held on purpose: nothing awaited */
	collect(f);
}

static void sc_desc_oob(struct fe *f, uint32_t count)
{
	(void)count;
	add_head(f, put_desc(f, hdr_gpa(new_frame(f)), f->hdr_len, SN_VRING_DESC_F_NEXT,
			     (uint16_t)(f->q + 5)), true, true);
	finish_with_good(f);
}

static void sc_loop(struct fe *f, uint32_t count)
{
	uint32_t k = new_frame(f);
	uint16_t h = f->nd;

	(void)count;
	put_desc(f, hdr_gpa(k), f->hdr_len, SN_VRING_DESC_F_NEXT, (uint16_t)(h + 1));
	put_desc(f, frame_gpa(k), FRAME_LEN, SN_VRING_DESC_F_NEXT, h);
	add_head(f, h, true, true);
	finish_with_good(f);
}

/* Header, then an indirect table of q one-byte buffers: q + 1 buffer
 * descriptors in one chain (§2.7.5.3.1 bounds a chain by the queue size). */
static void sc_chain_too_long(struct fe *f, uint32_t count)
{
	uint32_t k = new_frame(f);
	struct sn_vring_desc *t = ind_table(f, 0);
	uint16_t h = f->nd;

	(void)count;
	for (uint32_t i = 0; i < f->q; i++)
		t[i] = (struct sn_vring_desc){ frame_gpa(k) + i, 1,
			i + 1 < f->q ? SN_VRING_DESC_F_NEXT : 0, (uint16_t)(i + 1) };
	put_desc(f, hdr_gpa(k), f->hdr_len, SN_VRING_DESC_F_NEXT, (uint16_t)(h + 1));
	put_desc(f, ind_gpa(0), f->q * 16, SN_VRING_DESC_F_INDIRECT, 0);
	add_head(f, h, true, true);
	finish_with_good(f);
}

/* Header, then SN_VRING_MAX_SEGS + 1 one-byte payload descriptors. */
static void sc_too_many_segs(struct fe *f, uint32_t count)
{
	uint32_t k = new_frame(f), nseg = SN_VRING_MAX_SEGS + 1;
	uint16_t h = f->nd;

	(void)count;
	put_desc(f, hdr_gpa(k), f->hdr_len, SN_VRING_DESC_F_NEXT, (uint16_t)(h + 1));
	for (uint32_t i = 0; i < nseg; i++)
		put_desc(f, frame_gpa(k) + i, 1, i + 1 < nseg ? SN_VRING_DESC_F_NEXT : 0,
			 (uint16_t)(f->nd + 1));
	add_head(f, h, true, true);
	finish_with_good(f);
}

static void sc_addr_oob(struct fe *f, uint32_t count)
{
	(void)count;
	add_head(f, put_desc(f, GPA_OOB, f->hdr_len + FRAME_LEN, 0, 0), true, true);
	finish_with_good(f);
}

/* One buffer over the boundary of the two regions (contiguous in GPA). */
static void sc_cross_region(struct fe *f, uint32_t count)
{
	(void)count;
	add_head(f, put_desc(f, GPA1 - 32, f->hdr_len + FRAME_LEN, 0, 0), true, true);
	finish_with_good(f);
}

static void sc_zero_len(struct fe *f, uint32_t count)
{
	uint32_t k = new_frame(f);
	uint16_t h = f->nd;

	(void)count;
	put_desc(f, hdr_gpa(k), f->hdr_len, SN_VRING_DESC_F_NEXT, (uint16_t)(h + 1));
	put_desc(f, frame_gpa(k), 0, 0, 0);
	add_head(f, h, true, true);
	finish_with_good(f);
}

static void sc_oversized(struct fe *f, uint32_t count)
{
	uint32_t k = new_frame(f);
	uint16_t h = f->nd;

	(void)count;
	put_desc(f, hdr_gpa(k), f->hdr_len, SN_VRING_DESC_F_NEXT, (uint16_t)(h + 1));
	put_desc(f, GPA1 + BIG_OFF, BIG_LEN, 0, 0);
	add_head(f, h, true, true);
	finish_with_good(f);
}

static void sc_too_short(struct fe *f, uint32_t count)
{
	(void)count;
	add_head(f, put_desc(f, hdr_gpa(new_frame(f)), f->hdr_len, 0, 0), true, true);
	finish_with_good(f);
}

static void sc_write_only(struct fe *f, uint32_t count)
{
	uint32_t k = new_frame(f);
	uint16_t h = f->nd;

	(void)count;
	put_desc(f, hdr_gpa(k), f->hdr_len, SN_VRING_DESC_F_NEXT, (uint16_t)(h + 1));
	put_desc(f, frame_gpa(k), FRAME_LEN, SN_VRING_DESC_F_WRITE, 0);
	add_head(f, h, true, true);
	finish_with_good(f);
}

/* Six kinds of bad indirect descriptor (§2.7.5.3), then a good indirect
 * chain and a good direct one. */
#define BAD_INDIRECT_KINDS 6
static void sc_bad_indirect(struct fe *f, uint32_t count)
{
	struct sn_vring_desc *nest = ind_table(f, 1);
	uint16_t h;

	(void)count;
	memset(ind_table(f, 0), 0, 0x1000);
	/* length not a multiple of 16 */
	add_head(f, put_desc(f, ind_gpa(0), 24, SN_VRING_DESC_F_INDIRECT, 0), true, true);
	/* table longer than the queue */
	add_head(f, put_desc(f, ind_gpa(0), (f->q + 1) * 16, SN_VRING_DESC_F_INDIRECT, 0),
		 true, true);
	/* nested: the table's entry is itself indirect */
	nest[0] = (struct sn_vring_desc){ ind_gpa(0), 16, SN_VRING_DESC_F_INDIRECT, 0 };
	add_head(f, put_desc(f, ind_gpa(1), 16, SN_VRING_DESC_F_INDIRECT, 0), true, true);
	/* INDIRECT together with NEXT */
	h = f->nd;
	put_desc(f, ind_gpa(0), 32, SN_VRING_DESC_F_INDIRECT | SN_VRING_DESC_F_NEXT,
		 (uint16_t)(h + 1));
	put_desc(f, frame_gpa(new_frame(f)), FRAME_LEN, 0, 0);
	add_head(f, h, true, true);
	/* table outside guest memory */
	add_head(f, put_desc(f, GPA_OOB, 32, SN_VRING_DESC_F_INDIRECT, 0), true, true);
	/* zero-length table */
	add_head(f, put_desc(f, ind_gpa(0), 0, SN_VRING_DESC_F_INDIRECT, 0), true, true);
	add_head(f, chain_good_indirect(f), false, true);
	finish_with_good(f);
}

/* An avail entry naming a descriptor past the table: nothing to complete. */
static void sc_head_oob(struct fe *f, uint32_t count)
{
	(void)count;
	add_head(f, (uint16_t)(f->q + 3), false, false);
	finish_with_good(f);
}

/* The same head twice in one batch: the second is busy (held). */
static void sc_head_busy(struct fe *f, uint32_t count)
{
	uint16_t h = chain_good(f);

	(void)count;
	add_head(f, h, false, true);
	add_head(f, h, false, false);
	publish(f);
	wait_used(f);
}

/* A good frame first (the queue is running), then avail->idx moved by more
 * than the queue size: the ring cannot be read any more. Nothing comes back
 * for the jump. */
static void sc_avail_jump(struct fe *f, uint32_t count)
{
	uint64_t one = 1;

	(void)count;
	add_head(f, chain_good(f), false, true);
	publish(f);
	wait_used(f);
	if (f->timed_out)
		return;
	f->avail_idx = (uint16_t)(f->avail_idx + f->q + 5);
	__atomic_store_n(&f->avail->idx, f->avail_idx, __ATOMIC_RELEASE);
	if (write(f->kickfd[1], &one, sizeof(one)) != sizeof(one))
		die("kick");
}

/* After the jump was seen (--wait-file): the guest "repents", puts
 * avail->idx back one past the last good entry with a good chain there, and
 * watches for 1 s. A device that stopped the queue takes nothing (expected:
 * no new used entry, and GET_VRING_BASE still reports the pre-jump index). */
static void avail_jump_repent(struct fe *f)
{
	uint64_t one = 1;
	double deadline = now_s() + 1.0;
	uint16_t idx = (uint16_t)(f->avail_idx - f->q - 5);

	f->nd = 0;
	f->avail->ring[idx & (f->q - 1)] = chain_good(f);
	f->avail_idx = (uint16_t)(idx + 1);
	__atomic_store_n(&f->avail->idx, f->avail_idx, __ATOMIC_RELEASE);
	if (write(f->kickfd[1], &one, sizeof(one)) != sizeof(one))
		die("kick");
	while (now_s() < deadline) {
		collect(f);
		nap_us(1000);
	}
}

/* The guest rewrites a posted descriptor while the device may be reading
 * it: length 0, address outside memory, a loop back to the head, each
 * undone again at once, round and round until the chain is completed
 * (rounds start at different rewrites; which one the device copies is a
 * race). Whatever
 * the device copied is either a good frame or one chain-level error
 * (zero_len, addr_oob, loop); each chain is completed exactly once. */
static void sc_rewrite(struct fe *f, uint32_t count)
{
	for (uint32_t it = 0; it < count && !f->timed_out; it++) {
		struct sn_vring_desc orig;
		double t0 = now_s(), deadline = t0 + f->timeout_s;
		uint16_t h;
		uint32_t m = it;         /* rounds start at different rewrites */

		f->nd = 0;
		h = chain_good(f);
		orig = f->desc[h + 1];
		add_head(f, h, false, true);
		publish(f);
		for (;;) {
			struct sn_vring_desc *d = &f->desc[h + 1];

			/* odd steps rewrite, even steps restore the original */
			switch ((m & 1) ? (m >> 1) % 3 : 3) {
			case 0: __atomic_store_n(&d->len, 0, __ATOMIC_RELAXED); break;
			case 1: __atomic_store_n(&d->addr, GPA_OOB, __ATOMIC_RELAXED); break;
			case 2: __atomic_store_n(&d->next, h, __ATOMIC_RELAXED);
				__atomic_store_n(&d->flags, SN_VRING_DESC_F_NEXT, __ATOMIC_RELAXED);
				break;
			default: __atomic_store_n(&d->flags, 0, __ATOMIC_RELAXED);
				__atomic_store_n(&d->next, 0, __ATOMIC_RELAXED);
				__atomic_store_n(&d->addr, orig.addr, __ATOMIC_RELAXED);
				__atomic_store_n(&d->len, orig.len, __ATOMIC_RELAXED);
				break;
			}
			m++;
			collect(f);
			if (f->used_total >= f->expect)
				break;
			if ((m & 1023) == 0) {
				if (now_s() > deadline) {
					f->timed_out = true;
					break;
				}
				nap_us(20);
			}
		}
		f->desc[h + 1] = orig;
		f->wait_ms += (now_s() - t0) * 1e3;
	}
}

static const struct scenario scenarios[] = {
	{ "good", 128, sc_good },
	{ "hold", 256, sc_hold },
	{ "desc_oob", 128, sc_desc_oob },
	{ "loop", 128, sc_loop },
	/* 64: q + 1 buffers must stay under the parser's walk budget
	 * (SN_VRING_MAX_SEGS + 16 visits), else too_many_segs fires first. */
	{ "chain_too_long", 64, sc_chain_too_long },
	{ "too_many_segs", 128, sc_too_many_segs },
	{ "addr_oob", 128, sc_addr_oob },
	{ "cross_region", 128, sc_cross_region },
	{ "zero_len", 128, sc_zero_len },
	{ "oversized", 128, sc_oversized },
	{ "too_short", 128, sc_too_short },
	{ "bad_indirect", 128, sc_bad_indirect },
	{ "write_only", 128, sc_write_only },
	{ "head_oob", 128, sc_head_oob },
	{ "head_busy", 128, sc_head_busy },
	{ "avail_jump", 128, sc_avail_jump, avail_jump_repent },
	{ "rewrite", 128, sc_rewrite },
};

/* ---- main ---- */

static int parse_mac(const char *s, unsigned char *mac)
{
	unsigned v[6];
	char tail;

	if (sscanf(s, "%2x:%2x:%2x:%2x:%2x:%2x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
		   &tail) != 6)
		return -1;
	for (int i = 0; i < 6; i++)
		mac[i] = (unsigned char)v[i];
	return 0;
}

static int parse_ulong(const char *s, unsigned long max, unsigned long *out)
{
	char *end;

	errno = 0;
	*out = strtoul(s, &end, 10);
	return (errno || end == s || *end || *out > max) ? -1 : 0;
}

static void usage(FILE *o)
{
	fprintf(o,
"usage: sn-vufront --socket PATH --scenario NAME [options]\n"
"  Connects to a vhost-user back-end (server socket) as the front-end, posts\n"
"  crafted TX descriptors, prints one JSON line of what the used ring showed.\n"
"  --scenario NAME   good hold desc_oob loop chain_too_long too_many_segs\n"
"                    addr_oob cross_region zero_len oversized too_short\n"
"                    bad_indirect write_only head_oob head_busy avail_jump rewrite\n"
"  --count N         frames for good/hold, rounds for rewrite (default 8)\n"
"  --queue-size N    TX/RX ring size, power of two 2..%u (default per scenario)\n"
"  --dst MAC         destination of the frames (default ff:ff:ff:ff:ff:ff)\n"
"  --src MAC         source (default 02:53:56:00:00:01)\n"
"  --timeout S       per wait: connect, reply, used entries (default 10)\n"
"  --wait-file PATH  after the scenario, wait (timeout) until PATH exists\n"
"  --no-stop         exit without GET_VRING_BASE (abrupt disconnect)\n", MAX_Q);
}

static void print_result(const struct fe *f, const char *name, const char *stop, bool ok)
{
	printf("{\"scenario\":\"%s\",\"queue_size\":%u,\"hdr_len\":%u,\"features\":\"%#" PRIx64
	       "\",\"expect_used\":%u,\"used_total\":%u,\"used_idx\":%u,\"used\":[",
	       name, f->q, f->hdr_len, f->features, f->expect, f->used_total, used_idx(f));
	for (uint32_t i = 0; i < f->nseen && i < MAX_PRINT; i++)
		printf("%s{\"id\":%u,\"len\":%u}", i ? "," : "", f->seen[i].id, f->seen[i].len);
	printf("],\"bad_heads\":[");
	for (uint32_t i = 0; i < f->nbad; i++)
		printf("%s%u", i ? "," : "", f->bad[i]);
	printf("],\"timeout\":%s,\"wait_ms\":%.3f,\"stop\":%s,\"ok\":%s}\n",
	       f->timed_out ? "true" : "false", f->wait_ms, stop, ok ? "true" : "false");
	fflush(stdout);
}

/* Every bad head came back, with length 0. */
static bool bad_completed(const struct fe *f)
{
	for (uint32_t i = 0; i < f->nbad; i++) {
		bool found = false;

		for (uint32_t j = 0; j < f->nseen; j++)
			if (f->seen[j].id == f->bad[i] && f->seen[j].len == 0)
				found = true;
		if (!found)
			return false;
	}
	return true;
}

static void wait_file(const struct fe *f, const char *path)
{
	double deadline = now_s() + f->timeout_s;
	struct stat st;

	while (stat(path, &st) != 0) {
		if (now_s() > deadline) {
			fprintf(stderr, "sn-vufront: %s did not appear within %.1f s\n", path,
				f->timeout_s);
			exit(1);
		}
		nap_us(10000);
	}
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "scenario", required_argument, NULL, 'S' },
		{ "count", required_argument, NULL, 'c' },
		{ "queue-size", required_argument, NULL, 'q' },
		{ "dst", required_argument, NULL, 'd' },
		{ "src", required_argument, NULL, 'm' },
		{ "timeout", required_argument, NULL, 't' },
		{ "wait-file", required_argument, NULL, 'w' },
		{ "no-stop", no_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static struct fe f;          /* large: keep it off the stack */
	const struct scenario *sc = NULL;
	const char *path = NULL, *name = NULL, *wfile = NULL;
	unsigned long count = 8, q = 0, v;
	bool no_stop = false, ok;
	char stop[96] = "null";
	char *end;
	int opt;

	f.timeout_s = 10;
	memset(f.dst, 0xff, 6);
	memcpy(f.src, (const unsigned char[6]){ 0x02, 0x53, 0x56, 0, 0, 1 }, 6);
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 's': path = optarg; break;
		case 'S': name = optarg; break;
		case 'c':
			if (parse_ulong(optarg, 1000000, &count) || count == 0)
				goto bad_value;
			break;
		case 'q':
			if (parse_ulong(optarg, MAX_Q, &q) || q < 2 || (q & (q - 1)))
				goto bad_value;
			break;
		case 'd': if (parse_mac(optarg, f.dst)) goto bad_value; break;
		case 'm': if (parse_mac(optarg, f.src)) goto bad_value; break;
		case 't':
			f.timeout_s = strtod(optarg, &end);
			if (end == optarg || *end || !(f.timeout_s > 0 && f.timeout_s < 3600))
				goto bad_value;
			break;
		case 'w': wfile = optarg; break;
		case 'n': no_stop = true; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!path || !name || optind != argc) {
		usage(stderr);
		return 2;
	}
	for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++)
		if (strcmp(scenarios[i].name, name) == 0)
			sc = &scenarios[i];
	if (!sc) {
		fprintf(stderr, "sn-vufront: unknown scenario '%s'\n", name);
		return 2;
	}
	f.q = q ? (uint32_t)q : sc->q;

	map_memory(&f);
	connect_backend(&f, path);
	negotiate(&f);
	sc->run(&f, (uint32_t)count);
	if (wfile) {
		wait_file(&f, wfile);
		if (sc->after_wait)
			sc->after_wait(&f);
	}
	collect(&f);
	if (!no_stop) {
		/* Device stop, as QEMU does it: the back-end must complete or
		 * drop-complete everything it holds before it answers. */
		uint32_t tx = vu_get_base(&f, 1), rx = vu_get_base(&f, 0);

		v = used_idx(&f);
		snprintf(stop, sizeof(stop), "{\"tx_base\":%u,\"rx_base\":%u,\"used_idx\":%lu}",
			 tx, rx, v);
	}
	ok = !f.timed_out && bad_completed(&f) && f.used_total >= f.expect;
	print_result(&f, sc->name, stop, ok);
	close(f.sock);
	return ok ? 0 : 1;

bad_value:
	fprintf(stderr, "sn-vufront: bad value for --%s: %s\n",
		opt == 'c' ? "count" : opt == 'q' ? "queue-size" : opt == 't' ? "timeout" :
		opt == 'd' ? "dst" : "src", optarg);
	return 2;
}
