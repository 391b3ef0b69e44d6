/* SPDX-License-Identifier: BSD-3-Clause */
/* fz_vqtx.h — the state fuzz_vqtx.c shares with its fake guest
 * (fz_vqtx_guest.c): one input's guest model (the rings it writes, the
 * chains it posted and what each should pop as), the worker's frames and
 * the expected counters. One fuzz thread reads and writes it (the stop
 * thread of fuzz_vqtx.c touches none of it).
 */
#ifndef FZ_VQTX_H
#define FZ_VQTX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <rte_mbuf.h>

#include "fz_vhost.h"
#include "sn_vqtx_impl.h"

#define FAIL(...) do { fprintf(stderr, "fuzz_vqtx: " __VA_ARGS__); abort(); } while (0)

#define VID      0
#define VRING    1                 /* TX queue 0 */
#define MAXQ     256u
#define MAXHELD  512u
#define MAXSEG   64u               /* payload segments per posted chain */
#define DESC_OFF  0x0000u          /* file 0: rings, tables, headers */
#define AVAIL_OFF 0x1000u
#define USED_OFF  0x2000u
#define IND_OFF   0x4000u          /* 16 indirect tables of 64 entries */
#define IND_N     16u
#define HDR_OFF   0x8000u          /* 16 bytes per head */
#define R1_GPA    0x10000u         /* frames region, contiguous with region 0 */

struct input {
	const uint8_t *p;
	size_t n;
};

static inline uint8_t take(struct input *in)
{
	if (in->n == 0)
		return 0;
	in->n--;
	return *in->p++;
}

static inline uint32_t take16(struct input *in)
{
	return take(in) | (uint32_t)take(in) << 8;
}

struct held {
	struct rte_mbuf *m;
	uint32_t refs;             /* our references */
	uint32_t epoch;            /* q->epoch when popped */
	uint16_t head;
	uint16_t nseg;             /* mbufs charged to the port's quota */
	bool copy;                 /* a plain copy (copy_out): no guest buffer */
};

/* What a well-formed chain must pop as: its payload segments in order, as
 * the guest's view of each buffer (same memfd as the daemon's map). */
struct expect {
	bool valid;                /* cleared when the chain or the map changed */
	uint8_t nseg;
	uint16_t len[MAXSEG];
	const unsigned char *buf[MAXSEG];
};

struct fz {
	struct sn_vqtx *q;
	struct rte_mempool *mp;
	unsigned char *g0;         /* guest view of file 0 */
	struct sn_vring_desc *desc;
	struct sn_vring_avail *avail;
	struct sn_vring_used *used;
	uint32_t size;
	uint16_t hdr_len;
	uint64_t features;
	bool started;
	uint64_t now;
	uint64_t frames_gpa;       /* where the guest puts payloads now */
	uint32_t buf_ctr;
	/* Guest model. */
	uint32_t avail_pos;        /* entries written (32-bit) */
	uint32_t consumed;         /* entries the device took, as of the last base */
	uint16_t used_seen;
	uint32_t posts[MAXQ], done[MAXQ], pos[MAXQ];
	bool dup[MAXQ];
	int16_t desc_owner[MAXQ];  /* head owning descriptor i, -1 free */
	int16_t table_owner[IND_N];
	struct expect exp[MAXQ];
	bool broken;               /* avail jump: the end check is off */
	bool table_bad;            /* the table has no ring region or overlaps */
	bool map_stale;            /* the queue kept an older table than the guest's */
	/* A stop gave up waiting for the worker's ack (its wait was short,
	 * or the fuzz thread was descheduled for all of it). By
	 * design the chains still held then are never completed (and entries
	 * written but not published stay so): the checks that depend on them
	 * (drain_and_check) become bounds, and the input is counted in
	 * fz_abandoned and reported at exit. */
	bool abandoned;
	/* Budgets: the port's mbuf quota (this queue is owner 0, another
	 * port owner 1 drawing `other` units) and the held cap. */
	struct sn_quota *mq;
	uint32_t mq_total;
	uint32_t other;
	uint32_t held_cap;
	/* Worker's frames. */
	struct held h[MAXHELD];
	uint32_t nh;
	/* Stop snapshot of the used ring. */
	bool snap;
	unsigned char used_snap[6 + 8 * MAXQ];
	/* Expected counters. */
	uint64_t popped, used_total, forced, late, timeouts, copies;
};

extern struct fz F;

/* ---- The fake guest (fz_vqtx_guest.c) ---- */

/* The first memory table: rings (file 0) and frames (file 1). */
void fzg_table_a(struct fz_vhost_dev *d);
/* Post a chain (direct or indirect, good or bad as the input says). */
void fzg_post(struct input *in, bool indirect);
/* Publish the avail index (release, as a driver). */
void fzg_publish(void);
/* Read the used ring; each entry names a head posted more often than it
 * was completed, never one the worker holds in the live connection. */
void fzg_collect(void);
/* The chains' memory or descriptors changed under them: what a posted
 * chain pops as is no longer known. */
void fzg_forget_expect(void);
/* Check one popped frame of head h against the chain posted there. */
void fzg_check_frame(uint16_t h, const struct rte_mbuf *m);

#endif /* FZ_VQTX_H */
