/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_vufront_restart.c — sn-vufront scenarios that outlive the back-end:
 * the guest side of a daemon restart with descriptors held (doc/deferred.md,
 * "After a crash or restart").
 *
 * "restart": each round posts count one-descriptor frames (virtio-net
 * header and frame in one buffer, a 32-bit sequence number after the
 * Ethernet header), even ones to --dst (a peer that takes nothing: the
 * back-end holds them), odd ones to the front-end's own source MAC (the
 * switch drops them at once: completed out of order before the held
 * ones). It reports the held set ({"event":"held"} on stdout), keeps its
 * memory and rings, and waits for the back-end to go away (SIGTERM or
 * SIGKILL of the daemon). Then it reconnects as QEMU does when it could
 * not ask GET_VRING_BASE: same memory, same rings, SET_VRING_BASE = its
 * used->idx. Every head outstanding before must come back exactly once,
 * and a further count frames must be taken and completed (the queue
 * works). The front-end keeps its own book per head: a used entry for a
 * head it does not consider outstanding is a duplicate; a head still out
 * at the end is lost. Round k starts when --go-file PATH.k exists (if
 * given).
 *
 * "sink": a peer that posts no RX buffers and reconnects whenever the
 * back-end goes away, until --go-file PATH exists.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "sn_vufront.h"

struct rs_head {
	uint32_t seq;
	bool out;                    /* posted, not yet seen in the used ring */
	bool before;                 /* posted before the back-end went away */
	bool self;                   /* to our own MAC: completed at once */
};

static struct {
	struct rs_head h[MAX_Q];
	uint32_t next_head, seq;
	uint32_t posted, completed, dup, recovered, out, before_out, self_out;
} rs;

static bool file_exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0;
}

/* The back-end closed the connection (recv sees EOF or an error). */
static bool peer_gone(const struct sn_vufront *f)
{
	struct pollfd p = { .fd = f->sock, .events = POLLIN };
	char c;

	if (poll(&p, 1, 0) <= 0)
		return false;
	if (p.revents & (POLLHUP | POLLERR))
		return true;
	return recv(f->sock, &c, 1, MSG_PEEK | MSG_DONTWAIT) <= 0;
}

static void rs_collect(struct sn_vufront *f)
{
	uint16_t u = __atomic_load_n(&f->used->idx, __ATOMIC_ACQUIRE);

	while (f->used_seen != u) {
		uint32_t id = f->used->ring[f->used_seen & (f->q - 1)].id;

		f->used_seen++;
		f->used_total++;
		if (id >= f->q || !rs.h[id].out) {
			rs.dup++;
			continue;
		}
		rs.h[id].out = false;
		rs.out--;
		if (rs.h[id].self) {
			rs.h[id].self = false;
			rs.self_out--;
		}
		rs.completed++;
		if (rs.h[id].before) {
			rs.h[id].before = false;
			rs.before_out--;
			rs.recovered++;
		}
	}
}

/* One frame on a free head: header and frame in one buffer of region 1. */
static bool rs_post(struct sn_vufront *f, const unsigned char *dst)
{
	uint32_t h = rs.next_head, k;
	unsigned char *b;

	for (k = 0; k < f->q && rs.h[h].out; k++)
		h = (h + 1) % f->q;
	if (k == f->q)
		return false;
	rs.next_head = (h + 1) % f->q;
	b = f->base[1] + (size_t)h * FRAME_SZ;
	memset(b, 0, f->hdr_len + FRAME_LEN);
	memcpy(b + f->hdr_len, dst, 6);
	memcpy(b + f->hdr_len + 6, f->src, 6);
	b[f->hdr_len + 12] = 0x88;
	b[f->hdr_len + 13] = 0xb5;
	rs.h[h].seq = ++rs.seq;
	memcpy(b + f->hdr_len + 14, &rs.h[h].seq, 4);
	f->desc[h] = (struct sn_vring_desc){ GPA1 + (uint64_t)h * FRAME_SZ,
					     f->hdr_len + FRAME_LEN, 0, 0 };
	rs.h[h].out = true;
	rs.out++;
	if ((rs.h[h].self = dst == f->src))
		rs.self_out++;
	rs.posted++;
	f->avail->ring[f->avail_idx & (f->q - 1)] = (uint16_t)h;
	f->avail_idx++;
	return true;
}

static void rs_kick(struct sn_vufront *f)
{
	uint64_t one = 1;

	/* Release pairs with the back-end's acquire load of avail->idx. */
	__atomic_store_n(&f->avail->idx, f->avail_idx, __ATOMIC_RELEASE);
	if (write(f->kickfd[1], &one, sizeof(one)) != sizeof(one) && errno != EAGAIN)
		sn_vufront_die("kick");
}

static void event(const struct sn_vufront *f, const char *what, uint32_t round)
{
	printf("{\"event\":\"%s\",\"round\":%u,\"posted\":%u,\"completed\":%u,\"outstanding\":%u,"
	       "\"duplicates\":%u,\"recovered\":%u,\"used_idx\":%u,\"avail_idx\":%u}\n", what, round,
	       rs.posted, rs.completed, rs.out, rs.dup, rs.recovered,
	       __atomic_load_n(&f->used->idx, __ATOMIC_RELAXED), f->avail_idx);
	fflush(stdout);
}

/* Wait (collecting) until done(f) or the timeout; false on timeout. */
static bool rs_wait(struct sn_vufront *f, bool (*done)(struct sn_vufront *f))
{
	double deadline = sn_vufront_now() + f->timeout_s;

	for (;;) {
		rs_collect(f);
		if (done(f))
			return true;
		if (sn_vufront_now() > deadline) {
			f->timed_out = true;
			return false;
		}
		sn_vufront_nap_us(500);
	}
}

static bool none_out(struct sn_vufront *f) { (void)f; return rs.out == 0; }
static bool before_done(struct sn_vufront *f) { (void)f; return rs.before_out == 0; }
static bool gone(struct sn_vufront *f) { return peer_gone(f); }

/* The held set: every frame to our own MAC back, and completions still
 * for 300 ms. */
static bool settled(struct sn_vufront *f)
{
	static uint32_t last = UINT32_MAX;
	static double since;
	double now = sn_vufront_now();

	(void)f;
	if (rs.completed != last || rs.self_out) {
		last = rs.completed;
		since = now;
		return false;
	}
	return now - since >= 0.3;
}

/* The connection answers a GET_FEATURES: a dying back-end's listener can
 * still accept a connection it then resets. */
static bool answers(const struct sn_vufront *f)
{
	const uint32_t req[3] = { 1 /* GET_FEATURES */, 1 /* version 1 */, 0 };
	unsigned char rep[20];
	struct pollfd p = { .fd = f->sock, .events = POLLIN };
	size_t got = 0;

	if (send(f->sock, req, sizeof(req), MSG_NOSIGNAL) != (ssize_t)sizeof(req))
		return false;
	while (got < sizeof(rep)) {
		ssize_t n;

		if (poll(&p, 1, 2000) <= 0)
			return false;
		n = recv(f->sock, rep + got, sizeof(rep) - got, 0);
		if (n <= 0)
			return false;
		got += (size_t)n;
	}
	return true;
}

/* Reconnect as QEMU does after losing its back-end: the same memory and
 * rings, the TX ring restarted at its used index. */
static void rs_reconnect(struct sn_vufront *f)
{
	double deadline = sn_vufront_now() + f->timeout_s;

	close(f->sock);
	for (int r = 0; r < 2; r++) {
		close(f->kickfd[r]);
		close(f->callfd[r]);
	}
	f->tx_base = __atomic_load_n(&f->used->idx, __ATOMIC_ACQUIRE);
	for (;;) {
		sn_vufront_nap_us(100000);
		sn_vufront_connect(f, f->path);
		if (answers(f))
			break;
		close(f->sock);
		if (sn_vufront_now() > deadline) {
			fprintf(stderr, "sn-vufront: %s accepts but does not answer\n", f->path);
			exit(3);
		}
	}
	sn_vufront_negotiate(f);
}

static void wait_go(const struct sn_vufront *f, uint32_t round)
{
	char path[4096];
	double deadline = sn_vufront_now() + f->timeout_s;

	if (!f->go_file)
		return;
	snprintf(path, sizeof(path), "%s.%u", f->go_file, round);
	while (!file_exists(path)) {
		if (sn_vufront_now() > deadline) {
			fprintf(stderr, "sn-vufront: %s did not appear\n", path);
			exit(1);
		}
		sn_vufront_nap_us(10000);
	}
}

void sn_vufront_sc_restart(struct sn_vufront *f, uint32_t count)
{
	if (count > f->q - 1)
		count = f->q - 1;
	for (uint32_t k = 0; k < f->rounds && !f->timed_out; k++) {
		wait_go(f, k);
		for (uint32_t i = 0; i < count; i++)
			rs_post(f, (i & 1) ? f->src : f->dst);
		rs_kick(f);
		if (!rs_wait(f, settled))
			break;
		rs.before_out = 0;
		for (uint32_t h = 0; h < f->q; h++)
			if ((rs.h[h].before = rs.h[h].out))
				rs.before_out++;
		event(f, "held", k);
		if (!rs_wait(f, gone))
			break;
		rs_collect(f);
		rs_reconnect(f);
		event(f, "reconnected", k);
		if (!rs_wait(f, before_done))
			break;
		for (uint32_t i = 0; i < count; i++)
			rs_post(f, f->src);
		rs_kick(f);
		if (!rs_wait(f, none_out))
			break;
		event(f, "round", k);
	}
	f->expect = 0;
	f->restart_ok = !f->timed_out && rs.dup == 0 && rs.out == 0;
}

void sn_vufront_restart_json(const struct sn_vufront *f)
{
	printf(",\"restart\":{\"posted\":%u,\"completed\":%u,\"duplicates\":%u,\"lost\":%u,"
	       "\"recovered\":%u,\"last_seq\":%u}", rs.posted, rs.completed, rs.dup, rs.out,
	       rs.recovered, rs.seq);
	(void)f;
}

void sn_vufront_sc_sink(struct sn_vufront *f, uint32_t count)
{
	(void)count;
	f->expect = 0;
	while (!(f->go_file && file_exists(f->go_file))) {
		if (peer_gone(f))
			rs_reconnect(f);
		sn_vufront_nap_us(10000);
	}
	f->restart_ok = true;
}
