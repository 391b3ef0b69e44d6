/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_vufront_vu.c — the vhost-user protocol side of sn-vufront (the
 * front-end role QEMU plays; QEMU docs/interop/vhost-user.rst, DPDK
 * lib/vhost/vhost_user.h): messages over the unix socket with file
 * descriptors by SCM_RIGHTS, short reads/writes resumed, every reply
 * waited for at most the front-end's timeout (SO_RCVTIMEO).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "sn_vufront.h"

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
	VU_SET_LOG_BASE = 6,
	VU_GET_PROTOCOL_FEATURES = 15,
	VU_SET_PROTOCOL_FEATURES = 16,
	VU_SET_VRING_ENABLE = 18,
	VU_SEND_RARP = 19,
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
		struct { uint64_t size, offset; } log;
	} p;
} __attribute__((packed));
#define VU_HDR 12u
#define F_PROTOCOL_FEATURES 30
#define F_LOG_ALL           26
#define PF_LOG_SHMFD        1
#define PF_RARP             2
#define VRING_F_LOG         0
_Static_assert(sizeof(struct vu_msg) == VU_HDR + 8 + 32 * VU_MAX_REGIONS,
	       "vhost-user header + largest payload (memory table)");

void sn_vufront_die(const char *what)
{
	fprintf(stderr, "sn-vufront: %s: %s\n", what, errno ? strerror(errno) : "protocol error");
	exit(3);
}

double sn_vufront_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void sn_vufront_nap_us(long us)
{
	struct timespec ts = { .tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000 };

	nanosleep(&ts, NULL);
}

/* ---- vhost-user messaging ---- */

static void log_negotiate(struct sn_vufront *f, uint64_t offered);

static void vu_send(struct sn_vufront *f, struct vu_msg *m, const int *fds, int nfds)
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
			sn_vufront_die("sendmsg to the back-end");
		}
		off += (size_t)n;
	}
}

static void read_full(struct sn_vufront *f, void *buf, size_t len, const char *what)
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
			sn_vufront_die(what);
		}
		off += (size_t)n;
	}
}

static void vu_reply(struct sn_vufront *f, uint32_t request, struct vu_msg *m, uint32_t want)
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

static void vu_u64(struct sn_vufront *f, uint32_t req, uint64_t v, const int *fds, int nfds)
{
	struct vu_msg m = { .request = req, .size = 8 };

	m.p.u64 = v;
	vu_send(f, &m, fds, nfds);
}

static void vu_state(struct sn_vufront *f, uint32_t req, uint32_t index, uint32_t num)
{
	struct vu_msg m = { .request = req, .size = 8 };

	m.p.state.index = index;
	m.p.state.num = num;
	vu_send(f, &m, NULL, 0);
}

uint32_t sn_vufront_get_base(struct sn_vufront *f, uint32_t index)
{
	struct vu_msg m;

	vu_state(f, VU_GET_VRING_BASE, index, 0);
	vu_reply(f, VU_GET_VRING_BASE, &m, 8);
	if (m.p.state.index != index) {
		errno = 0;
		sn_vufront_die("GET_VRING_BASE reply for another ring");
	}
	return m.p.state.num;
}

void sn_vufront_connect(struct sn_vufront *f, const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv;
	double deadline = sn_vufront_now() + f->timeout_s;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "sn-vufront: socket path too long: %s\n", path);
		exit(2);
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	for (;;) {
		f->sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (f->sock < 0)
			sn_vufront_die("socket");
		if (connect(f->sock, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			break;
		if ((errno != ENOENT && errno != ECONNREFUSED) || sn_vufront_now() > deadline) {
			fprintf(stderr, "sn-vufront: connect %s: %s\n", path, strerror(errno));
			exit(3);
		}
		close(f->sock);
		sn_vufront_nap_us(50000);
	}
	tv.tv_sec = (time_t)f->timeout_s;
	tv.tv_usec = (suseconds_t)((f->timeout_s - (double)tv.tv_sec) * 1e6);
	if (setsockopt(f->sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
	    setsockopt(f->sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)))
		sn_vufront_die("setsockopt timeout");
}

void sn_vufront_map(struct sn_vufront *f)
{
	for (int i = 0; i < 2; i++) {
		f->memfd[i] = memfd_create(i ? "sn-vufront-r1" : "sn-vufront-r0", MFD_CLOEXEC);
		if (f->memfd[i] < 0)
			sn_vufront_die("memfd_create");
		if (ftruncate(f->memfd[i], REG_SIZE))
			sn_vufront_die("ftruncate memfd");
		f->base[i] = mmap(NULL, REG_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED,
				  f->memfd[i], 0);
		if (f->base[i] == MAP_FAILED)
			sn_vufront_die("mmap memfd");
	}
	f->desc = (struct sn_vring_desc *)(void *)(f->base[0] + TX_DESC);
	f->avail = (struct sn_vring_avail *)(void *)(f->base[0] + TX_AVAIL);
	f->used = (struct sn_vring_used *)(void *)(f->base[0] +
						   (f->migration ? TX_USED_LOG : TX_USED));
}

static uint64_t va(const struct sn_vufront *f, unsigned off)
{
	return (uint64_t)(uintptr_t)(f->base[0] + off);
}

/* SET_MEM_TABLE with the first f->nreg regions, contiguous from GPA0.
 * With three regions the new one is listed first: the back-end's library
 * maps regions in message order after unmapping the old ones, so region
 * 0's mapping cannot come back at its old address by chance (a back-end
 * still reading the library's old addresses would then read the wrong
 * bytes). */
static void send_mem_table(struct sn_vufront *f)
{
	struct vu_msg m = { .request = VU_SET_MEM_TABLE,
			    .size = 8 + f->nreg * (uint32_t)sizeof(struct vu_region) };
	int fds[NREG_MAX];

	m.p.mem.nregions = f->nreg;
	m.p.mem.padding = 0;
	for (uint32_t k = 0; k < f->nreg; k++) {
		uint32_t i = f->nreg == 3 ? (k + 2) % 3 : k;   /* 2, 0, 1 */

		m.p.mem.r[k].gpa = GPA0 + (uint64_t)i * REG_SIZE;
		m.p.mem.r[k].size = REG_SIZE;
		m.p.mem.r[k].uaddr = (uint64_t)(uintptr_t)f->base[i];
		m.p.mem.r[k].mmap_offset = 0;
		fds[k] = f->memfd[i];
	}
	vu_send(f, &m, fds, (int)f->nreg);
}

void sn_vufront_hotplug(struct sn_vufront *f)
{
	f->memfd[2] = memfd_create("sn-vufront-r2", MFD_CLOEXEC);
	if (f->memfd[2] < 0)
		sn_vufront_die("memfd_create");
	if (ftruncate(f->memfd[2], REG_SIZE))
		sn_vufront_die("ftruncate memfd");
	f->base[2] = mmap(NULL, REG_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, f->memfd[2], 0);
	if (f->base[2] == MAP_FAILED)
		sn_vufront_die("mmap memfd");
	f->nreg = 3;
	sn_vufront_resend_table(f);
}

void sn_vufront_resend_table(struct sn_vufront *f)
{
	struct vu_msg m;

	send_mem_table(f);
	m = (struct vu_msg){ .request = VU_GET_FEATURES, .size = 0 };
	vu_send(f, &m, NULL, 0);
	vu_reply(f, VU_GET_FEATURES, &m, 8);
}

void sn_vufront_negotiate(struct sn_vufront *f)
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
	if (f->migration)
		log_negotiate(f, offered);
	vu_u64(f, VU_SET_FEATURES, f->features, NULL, 0);

	f->nreg = 2;
	send_mem_table(f);

	for (uint32_t r = 0; r < 2; r++) {
		vu_state(f, VU_SET_VRING_NUM, r, f->q);
		vu_state(f, VU_SET_VRING_BASE, r, r == 1 ? f->tx_base : 0);
		m = (struct vu_msg){ .request = VU_SET_VRING_ADDR, .size = 40 };
		m.p.addr.index = r;
		m.p.addr.flags = 0;
		m.p.addr.desc = va(f, ring_off[r][0]);
		m.p.addr.avail = va(f, ring_off[r][1]);
		m.p.addr.used = r ? (uint64_t)(uintptr_t)f->used : va(f, ring_off[r][2]);
		m.p.addr.log = 0;
		vu_send(f, &m, NULL, 0);
		f->kickfd[r] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		f->callfd[r] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (f->kickfd[r] < 0 || f->callfd[r] < 0)
			sn_vufront_die("eventfd");
		vu_u64(f, VU_SET_VRING_KICK, r, &f->kickfd[r], 1);
		vu_u64(f, VU_SET_VRING_CALL, r, &f->callfd[r], 1);
		if (f->migration)    /* protocol features: rings start disabled */
			vu_state(f, VU_SET_VRING_ENABLE, r, 1);
	}
}


/* ---- Dirty log (live migration, as QEMU drives it) ---- */

/* Between GET_FEATURES and SET_FEATURES: VHOST_USER_F_PROTOCOL_FEATURES
 * with LOG_SHMFD and RARP only (no REPLY_ACK: replies come only where the
 * protocol always has one). */
static void log_negotiate(struct sn_vufront *f, uint64_t offered)
{
	struct vu_msg m = { .request = VU_GET_PROTOCOL_FEATURES, .size = 0 };

	if (!(offered & (1ULL << F_PROTOCOL_FEATURES)) || !(offered & (1ULL << F_LOG_ALL))) {
		fprintf(stderr, "sn-vufront: back-end offers no PROTOCOL_FEATURES/LOG_ALL "
			"(%#llx)\n", (unsigned long long)offered);
		exit(3);
	}
	f->features |= 1ULL << F_PROTOCOL_FEATURES;
	vu_send(f, &m, NULL, 0);
	vu_reply(f, VU_GET_PROTOCOL_FEATURES, &m, 8);
	if ((m.p.u64 & ((1ULL << PF_LOG_SHMFD) | (1ULL << PF_RARP))) !=
	    ((1ULL << PF_LOG_SHMFD) | (1ULL << PF_RARP))) {
		fprintf(stderr, "sn-vufront: back-end lacks protocol feature LOG_SHMFD or RARP\n");
		exit(3);
	}
	vu_u64(f, VU_SET_PROTOCOL_FEATURES, (1ULL << PF_LOG_SHMFD) | (1ULL << PF_RARP), NULL, 0);
}

uint64_t sn_vufront_used_gpa(const struct sn_vufront *f)
{
	return GPA0 + (uint64_t)((const unsigned char *)f->used - f->base[0]);
}

void sn_vufront_log_start(struct sn_vufront *f)
{
	static const unsigned ring_off[2][3] = {
		{ RX_DESC, RX_AVAIL, RX_USED }, { TX_DESC, TX_AVAIL, 0 } };
	struct vu_msg m = { .request = VU_SET_LOG_BASE, .size = 16 };

	f->logfd = memfd_create("sn-vufront-log", MFD_CLOEXEC);
	if (f->logfd < 0)
		sn_vufront_die("memfd_create log");
	if (ftruncate(f->logfd, LOG_BYTES))
		sn_vufront_die("ftruncate log");
	f->log = mmap(NULL, LOG_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, f->logfd, 0);
	if (f->log == MAP_FAILED)
		sn_vufront_die("mmap log");
	m.p.log.size = LOG_BYTES;
	m.p.log.offset = 0;
	vu_send(f, &m, &f->logfd, 1);
	vu_reply(f, VU_SET_LOG_BASE, &m, 0);
	vu_u64(f, VU_SET_FEATURES, f->features | (1ULL << F_LOG_ALL), NULL, 0);
	for (uint32_t r = 0; r < 2; r++) {
		uint64_t used = r ? (uint64_t)(uintptr_t)f->used : va(f, RX_USED);

		m = (struct vu_msg){ .request = VU_SET_VRING_ADDR, .size = 40 };
		m.p.addr.index = r;
		m.p.addr.flags = 1u << VRING_F_LOG;
		m.p.addr.desc = va(f, ring_off[r][0]);
		m.p.addr.avail = va(f, ring_off[r][1]);
		m.p.addr.used = used;
		m.p.addr.log = GPA0 + (used - va(f, 0));
		vu_send(f, &m, NULL, 0);
	}
	m = (struct vu_msg){ .request = VU_GET_FEATURES, .size = 0 };
	vu_send(f, &m, NULL, 0);
	vu_reply(f, VU_GET_FEATURES, &m, 8);
}

bool sn_vufront_log_test(const struct sn_vufront *f, uint64_t pg)
{
	if (pg >= 8ull * LOG_BYTES)
		return false;
	return (__atomic_load_n(&f->log[pg / 64], __ATOMIC_RELAXED) >> (pg % 64)) & 1;
}

void sn_vufront_log_clear(struct sn_vufront *f)
{
	for (size_t i = 0; i < LOG_BYTES / sizeof(uint64_t); i++)
		(void)__atomic_exchange_n(&f->log[i], 0, __ATOMIC_ACQ_REL);
}

void sn_vufront_send_rarp(struct sn_vufront *f, const unsigned char mac[6], uint32_t size)
{
	struct vu_msg m = { .request = VU_SEND_RARP, .size = size };

	m.p.u64 = 0;
	memcpy(&m.p.u64, mac, 6);
	vu_send(f, &m, NULL, 0);
	m = (struct vu_msg){ .request = VU_GET_FEATURES, .size = 0 };
	vu_send(f, &m, NULL, 0);
	vu_reply(f, VU_GET_FEATURES, &m, 8);
}

void sn_vufront_log_resize(struct sn_vufront *f)
{
	struct vu_msg m = { .request = VU_SET_LOG_BASE, .size = 16 };
	int fd = memfd_create("sn-vufront-log", MFD_CLOEXEC);
	uint64_t *log;

	if (fd < 0 || ftruncate(fd, LOG_BYTES))
		sn_vufront_die("memfd log");
	log = mmap(NULL, LOG_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (log == MAP_FAILED)
		sn_vufront_die("mmap log");
	m.p.log.size = LOG_BYTES;
	m.p.log.offset = 0;
	vu_send(f, &m, &fd, 1);
	vu_reply(f, VU_SET_LOG_BASE, &m, 0);
	munmap(f->log, LOG_BYTES);
	close(f->logfd);
	f->log = log;
	f->logfd = fd;
}
