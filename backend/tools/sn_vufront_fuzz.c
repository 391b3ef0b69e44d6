/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_vufront_fuzz.c — "sn-vufront fuzz": a black-box vhost-user message
 * fuzzer against a running back-end (schednicd's server port).
 *
 * Each connection starts, most of the time, with a plausible set-up
 * (SET_OWNER, features, a memory table, both rings, kicks) so that the
 * device runs, then sends a random sequence: SET_FEATURES (renegotiated,
 * with bits the back-end did not offer), SET_OWNER, GET_FEATURES,
 * protocol features, SET_MEM_TABLE repeated with random region tables
 * over real memfds and wrong fd counts, SET_VRING_NUM / ADDR / BASE /
 * KICK / CALL / ENABLE while running, GET_VRING_BASE, SET_LOG_BASE,
 * SEND_RARP, random request codes and flags, truncated and oversized
 * messages, scribbles on the rings in guest memory; then disconnects and
 * connects again. Region sizes stay inside their files unless
 * --bad-regions, and region fds are the memfds unless --bad-fds (the
 * daemon refuses those tables: doc/isolation.md). Replies are read and
 * discarded without blocking.
 *
 * Prints one JSON line: messages sent per type, connections, those the
 * back-end closed. Exit 0 if the back-end kept every connection or closed
 * it cleanly and still accepts one at the end; 1 if it stopped accepting
 * connections (crashed or hung); 2 usage; 3 system error.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "sn_vufront.h"

#define NFILES    4
#define FILE_SIZE (1u << 20)
#define MAX_FDS   10
#define NREQ      41          /* request codes 0..40 named below or not */

static const char *const req_name[NREQ] = {
	[1] = "GET_FEATURES", [2] = "SET_FEATURES", [3] = "SET_OWNER", [4] = "RESET_OWNER",
	[5] = "SET_MEM_TABLE", [6] = "SET_LOG_BASE", [7] = "SET_LOG_FD", [8] = "SET_VRING_NUM",
	[9] = "SET_VRING_ADDR", [10] = "SET_VRING_BASE", [11] = "GET_VRING_BASE",
	[12] = "SET_VRING_KICK", [13] = "SET_VRING_CALL", [14] = "SET_VRING_ERR",
	[15] = "GET_PROTOCOL_FEATURES", [16] = "SET_PROTOCOL_FEATURES", [17] = "GET_QUEUE_NUM",
	[18] = "SET_VRING_ENABLE", [19] = "SEND_RARP", [20] = "NET_SET_MTU",
};

struct fz {
	const char *path;
	int sock;
	uint64_t rng;
	int memfd[NFILES];
	unsigned char *mem[NFILES];
	uint64_t sent[NREQ + 1];      /* [NREQ]: codes >= NREQ */
	uint64_t truncated, oversized, connections, closed_by_backend, msgs;
	bool closed;
	/* --bad-fds: an eventfd (not mappable) and a read-only fd of a
	 * memfd (not mappable read-write); else -1. */
	int badfd[2];
	bool bad_regions;             /* --bad-regions: some past their file's end */
};

static uint64_t rnd(struct fz *z)
{
	/* xorshift64*: reproducible from --seed */
	z->rng ^= z->rng >> 12;
	z->rng ^= z->rng << 25;
	z->rng ^= z->rng >> 27;
	return z->rng * 2685821657736338717ULL;
}

static uint32_t below(struct fz *z, uint32_t n)
{
	return (uint32_t)(rnd(z) % n);
}

static bool try_connect(struct fz *z, double timeout_s)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	double deadline = sn_vufront_now() + timeout_s;
	struct timeval tv = { .tv_sec = 1 };

	memcpy(sa.sun_path, z->path, strlen(z->path) + 1);
	for (;;) {
		z->sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (z->sock < 0)
			sn_vufront_die("socket");
		if (connect(z->sock, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			break;
		close(z->sock);
		z->sock = -1;
		if (sn_vufront_now() > deadline)
			return false;
		sn_vufront_nap_us(20000);
	}
	setsockopt(z->sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	z->closed = false;
	z->connections++;
	return true;
}

/* Read whatever the back-end sent (replies), without waiting; notice a close. */
static void drain(struct fz *z)
{
	char buf[4096];

	while (!z->closed) {
		ssize_t n = recv(z->sock, buf, sizeof(buf), MSG_DONTWAIT);

		if (n > 0)
			continue;
		if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
			z->closed = true;
			z->closed_by_backend++;
		}
		if (n < 0 && errno == EINTR)
			continue;
		break;
	}
}

/* Send hdr + payload (len bytes of the wire message) with fds. */
static void send_raw(struct fz *z, const void *msg, size_t len, const int *fds, int nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * MAX_FDS)];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { .iov_base = (void *)msg, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (z->closed)
		return;
	if (nfds > 0) {
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
	do
		n = sendmsg(z->sock, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		z->closed = true;
		z->closed_by_backend++;
		return;
	}
	z->msgs++;
	drain(z);
}

struct msg {
	uint32_t request, flags, size;
	unsigned char p[8 + 32 * 9];  /* one region more than the library takes */
} __attribute__((packed));

static void count(struct fz *z, uint32_t req)
{
	z->sent[req < NREQ ? req : NREQ]++;
}

static void send_msg(struct fz *z, uint32_t req, const void *payload, uint32_t size,
		     const int *fds, int nfds)
{
	struct msg m = { .request = req, .flags = 1, .size = size };

	if (size > sizeof(m.p))
		size = sizeof(m.p);
	if (payload)
		memcpy(m.p, payload, size);
	if (below(z, 16) == 0)
		m.flags |= 0x8;                      /* NEED_REPLY */
	count(z, req);
	send_raw(z, &m, 12 + size, fds, nfds);
}

static void u64_msg(struct fz *z, uint32_t req, uint64_t v, const int *fds, int nfds)
{
	send_msg(z, req, &v, 8, fds, nfds);
}

static void state_msg(struct fz *z, uint32_t req, uint32_t index, uint32_t num)
{
	uint32_t s[2] = { index, num };

	send_msg(z, req, s, 8, NULL, 0);
}

static uint64_t uaddr(struct fz *z, unsigned f)
{
	return (uint64_t)(uintptr_t)z->mem[f];
}

/* A table of n regions (random layout, sizes inside their files unless
 * --bad-regions), fd count possibly wrong. */
static void mem_table(struct fz *z, bool plausible)
{
	unsigned char pl[8 + 32 * 9];
	uint32_t n = plausible ? 2 : below(z, 10);
	int fds[MAX_FDS];
	int nfds;

	memset(pl, 0, sizeof(pl));
	memcpy(pl, &n, 4);
	for (uint32_t i = 0; i < n && i < 9; i++) {
		uint64_t r[4];
		unsigned f = plausible ? i : below(z, NFILES);
		uint64_t off = plausible ? 0 : (uint64_t)below(z, 4) * 0x40000u;

		r[0] = plausible ? GPA0 + (uint64_t)i * FILE_SIZE : (uint64_t)below(z, 8) * 0x80000u;
		r[1] = plausible || below(z, 8) ? FILE_SIZE - off : (uint64_t)below(z, 3) * 0x1000u;
		if (z->bad_regions && !plausible && below(z, 8) == 0)   /* past the file's end */
			r[1] = below(z, 2) ? FILE_SIZE - off + 0x1000u * (1 + below(z, 16))
					   : 1ULL << (32 + below(z, 12));
		r[2] = uaddr(z, f) + off;
		r[3] = off;
		memcpy(pl + 8 + 32 * i, r, sizeof(r));
		fds[i] = z->memfd[f];
		if (z->badfd[0] >= 0 && !plausible && below(z, 16) == 0)
			fds[i] = z->badfd[below(z, 2)];
	}
	nfds = (int)(n < MAX_FDS ? n : MAX_FDS);
	if (!plausible && below(z, 4) == 0)
		nfds = (int)below(z, MAX_FDS + 1);    /* wrong fd count */
	for (int i = (int)n; i < nfds; i++)
		fds[i] = z->memfd[below(z, NFILES)];
	send_msg(z, 5, pl, 8 + 32 * (n < 9 ? n : 9), fds, nfds);
}

static void vring_addr(struct fz *z, uint32_t index, bool plausible)
{
	uint64_t a[5];   /* index|flags, desc, used, avail, log */
	uint32_t idx_flags[2] = { index, plausible ? 0 : below(z, 2) };
	unsigned char pl[40];
	uint64_t base = uaddr(z, 0) + (uint64_t)index * 0x8000u;

	a[1] = plausible || below(z, 4) ? base : rnd(z);
	a[2] = plausible || below(z, 4) ? base + 0x2000 : uaddr(z, below(z, NFILES)) + below(z, FILE_SIZE);
	a[3] = plausible || below(z, 4) ? base + 0x1000 : rnd(z) & 0xffffffffffffULL;
	a[4] = GPA0 + 0x2000;
	memcpy(pl, idx_flags, 8);
	memcpy(pl + 8, &a[1], 32);
	send_msg(z, 9, pl, 40, NULL, 0);
}

static void eventfd_msg(struct fz *z, uint32_t req, uint32_t index, bool nofd)
{
	int fd = nofd ? -1 : eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);

	u64_msg(z, req, index | (nofd ? 0x100u : 0), fd >= 0 ? &fd : NULL, fd >= 0);
	if (fd >= 0)
		close(fd);
}

static const uint64_t feat_bits[] = { 0, 5, 11, 12, 15, 17, 26, 28, 29, 30, 32, 33, 34, 35 };

static uint64_t features(struct fz *z, bool plausible)
{
	uint64_t f = 1ULL << 32;

	if (plausible)
		return f;
	for (unsigned i = 0; i < sizeof(feat_bits) / sizeof(feat_bits[0]); i++)
		if (below(z, 3) == 0)
			f |= 1ULL << feat_bits[i];
	if (below(z, 8) == 0)
		f = rnd(z);
	return f;
}

static void setup(struct fz *z)
{
	u64_msg(z, 3, 0, NULL, 0);
	send_msg(z, 1, NULL, 0, NULL, 0);
	u64_msg(z, 2, features(z, true), NULL, 0);
	mem_table(z, true);
	for (uint32_t v = 0; v < 2; v++) {
		state_msg(z, 8, v, 256);
		state_msg(z, 10, v, 0);
		vring_addr(z, v, true);
		eventfd_msg(z, 13, v, false);
		eventfd_msg(z, 12, v, false);
	}
}

static void one(struct fz *z)
{
	uint32_t k = below(z, 22);
	uint32_t v = below(z, 8) ? below(z, 2) : below(z, 300);

	switch (k) {
	case 0: u64_msg(z, 2, features(z, false), NULL, 0); break;
	case 1: u64_msg(z, 3, 0, NULL, 0); break;
	case 2: send_msg(z, 1, NULL, 0, NULL, 0); break;
	case 3: send_msg(z, 15, NULL, 0, NULL, 0); break;
	case 4: u64_msg(z, 16, below(z, 2) ? rnd(z) : (1u << 1) | (1u << 2), NULL, 0); break;
	case 5: case 6: mem_table(z, below(z, 4) == 0); break;
	case 7: state_msg(z, 8, v, below(z, 4) ? 1u << below(z, 16) : (uint32_t)rnd(z)); break;
	case 8: vring_addr(z, v, below(z, 2)); break;
	case 9: state_msg(z, 10, v, below(z, 2) ? 0 : (uint32_t)rnd(z)); break;
	case 10: state_msg(z, 11, v, 0); break;
	case 11: eventfd_msg(z, 12, v, below(z, 4) == 0); break;
	case 12: eventfd_msg(z, 13, v, below(z, 4) == 0); break;
	case 13: state_msg(z, 18, v, below(z, 2)); break;
	case 14: {   /* SET_LOG_BASE: size, offset; one fd */
		uint64_t l[2] = { below(z, 2) ? 4096 : rnd(z) & 0xfffff, below(z, 4) ? 0 : rnd(z) };
		int fd = z->memfd[NFILES - 1];

		send_msg(z, 6, l, below(z, 4) ? 16 : below(z, 24), &fd, 1);
		break;
	}
	case 15: {   /* SEND_RARP */
		unsigned char mac[8] = { 0x02, 0x53, 0x56, 0, 0, (unsigned char)below(z, 256), 0, 0 };

		send_msg(z, 19, mac, below(z, 4) ? 8 : below(z, 16), NULL, 0);
		break;
	}
	case 16: {   /* random request code, flags and payload */
		struct msg m;

		for (size_t i = 0; i < sizeof(m); i++)
			((unsigned char *)&m)[i] = (unsigned char)rnd(z);
		m.request = below(z, 2) ? below(z, NREQ + 20) : (uint32_t)rnd(z);
		m.size = below(z, 64);
		count(z, m.request);
		send_raw(z, &m, 12 + m.size, NULL, 0);
		break;
	}
	case 17: {   /* truncated: the header promises more than follows */
		struct msg m = { .request = 1 + below(z, 20), .flags = 1, .size = 8 + below(z, 64) };

		memset(m.p, 0, sizeof(m.p));
		z->truncated++;
		count(z, m.request);
		send_raw(z, &m, 12 + below(z, m.size), NULL, 0);
		break;
	}
	case 18: {   /* oversized size field */
		struct msg m = { .request = 1 + below(z, 20), .flags = 1,
				 .size = below(z, 2) ? 0xffffffffu : 4096 + below(z, 65536) };

		memset(m.p, 0, sizeof(m.p));
		z->oversized++;
		count(z, m.request);
		send_raw(z, &m, sizeof(m), NULL, 0);
		break;
	}
	case 19: {   /* scribble on the rings (guest memory) */
		unsigned char *p = z->mem[0] + below(z, 0x10000);

		*p = (unsigned char)rnd(z);
		break;
	}
	default: state_msg(z, 18, v, 1); break;
	}
}

static int usage(FILE *o, int rc)
{
	fprintf(o,
"usage: sn-vufront fuzz --socket PATH [--seconds N] [--seed K] [--bad-fds]\n"
"                        [--bad-regions]\n"
"  Connects to a vhost-user back-end as the front-end and sends random but\n"
"  plausible message sequences for N seconds (default 10), reconnecting\n"
"  after each; prints one JSON line (messages per type). Exit 0 if the\n"
"  back-end kept or cleanly closed every connection and still accepts one.\n"
"  --bad-fds: memory regions sometimes backed by an eventfd or a read-only\n"
"  fd, which cannot be mapped read-write.\n"
"  --bad-regions: regions sometimes reach past the end of their file.\n"
"  Both are tables DPDK 22.11's vhost library fails or faults on; the\n"
"  daemon refuses them (mem_table_rejected).\n");
	return rc;
}

int sn_vufront_fuzz(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "seconds", required_argument, NULL, 'n' },
		{ "seed", required_argument, NULL, 'k' },
		{ "bad-fds", no_argument, NULL, 'b' },
		{ "bad-regions", no_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static struct fz z;
	double secs = 10, t_end;
	unsigned long long seed = 1;
	char *end;
	int opt;
	bool ok = true, first = true, bad_fds = false;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 's': z.path = optarg; break;
		case 'n':
			secs = strtod(optarg, &end);
			if (end == optarg || *end || !(secs > 0 && secs <= 86400))
				return usage(stderr, 2);
			break;
		case 'k':
			errno = 0;
			seed = strtoull(optarg, &end, 0);
			if (errno || end == optarg || *end)
				return usage(stderr, 2);
			break;
		case 'b': bad_fds = true; break;
		case 'r': z.bad_regions = true; break;
		case 'h': return usage(stdout, 0);
		default: return usage(stderr, 2);
		}
	}
	if (!z.path || optind != argc || strlen(z.path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return usage(stderr, 2);
	z.rng = seed * 0x9e3779b97f4a7c15ULL + 1;
	for (int i = 0; i < NFILES; i++) {
		z.memfd[i] = memfd_create("sn-vufront-fuzz", MFD_CLOEXEC);
		if (z.memfd[i] < 0 || ftruncate(z.memfd[i], FILE_SIZE))
			sn_vufront_die("memfd");
		z.mem[i] = mmap(NULL, FILE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, z.memfd[i], 0);
		if (z.mem[i] == MAP_FAILED)
			sn_vufront_die("mmap memfd");
	}
	z.badfd[0] = z.badfd[1] = -1;
	if (bad_fds) {
		char ro[64];

		snprintf(ro, sizeof(ro), "/proc/self/fd/%d", z.memfd[0]);
		z.badfd[0] = eventfd(0, EFD_CLOEXEC);
		z.badfd[1] = open(ro, O_RDONLY | O_CLOEXEC);
		if (z.badfd[0] < 0 || z.badfd[1] < 0)
			sn_vufront_die("bad fds");
	}
	t_end = sn_vufront_now() + secs;
	while (sn_vufront_now() < t_end) {
		uint32_t n = 1 + below(&z, 200);

		if (!try_connect(&z, first ? 10.0 : 5.0)) {
			fprintf(stderr, "sn-vufront fuzz: %s no longer accepts connections\n", z.path);
			ok = false;
			break;
		}
		first = false;
		if (below(&z, 8))
			setup(&z);
		for (uint32_t i = 0; i < n && !z.closed && sn_vufront_now() < t_end; i++)
			one(&z);
		close(z.sock);
		/* Let the back-end see the close before the next connection. */
		sn_vufront_nap_us(2000);
	}
	if (ok && !try_connect(&z, 5.0)) {
		fprintf(stderr, "sn-vufront fuzz: %s no longer accepts connections\n", z.path);
		ok = false;
	} else if (ok) {
		close(z.sock);
	}
	printf("{\"ok\":%s,\"seed\":%llu,\"seconds\":%.1f,\"connections\":%llu,"
	       "\"closed_by_backend\":%llu,\"messages\":%llu,\"truncated\":%llu,\"oversized\":%llu,"
	       "\"sent\":{", ok ? "true" : "false", seed, secs,
	       (unsigned long long)z.connections, (unsigned long long)z.closed_by_backend,
	       (unsigned long long)z.msgs, (unsigned long long)z.truncated,
	       (unsigned long long)z.oversized);
	for (unsigned r = 0, c = 0; r <= NREQ; r++) {
		if (!z.sent[r])
			continue;
		if (r < NREQ && req_name[r])
			printf("%s\"%s\":%llu", c++ ? "," : "", req_name[r],
			       (unsigned long long)z.sent[r]);
		else if (r < NREQ)
			printf("%s\"req%u\":%llu", c++ ? "," : "", r, (unsigned long long)z.sent[r]);
		else
			printf("%s\"other\":%llu", c++ ? "," : "", (unsigned long long)z.sent[r]);
	}
	printf("}}\n");
	return ok ? 0 : 1;
}
