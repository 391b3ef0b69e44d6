/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_fdrop.c — fair packet dropping.
 *
 * Follows V. Addanki, L. Linguaglossa, J. Roberts, D. Rossi, "Controlling
 * software router resource sharing by fair packet dropping", IFIP
 * Networking 2018: Algorithms 1 and 2, §III-E adaptive threshold, §IV-B
 * flow table.
 *
 * The shadow system is per-flow head-of-line processor sharing: every
 * backlogged flow (the ActiveList B) has a virtual queue vq that the
 * capacity C drains, split equally between the flows in B. A packet of a
 * flow whose vq exceeds θ is dropped, otherwise vq grows by its length.
 * Over time the kept traffic is what a fair queueing server of rate C
 * would serve (max-min fair rates), while the real queue stays FIFO.
 *
 * Algorithm 1 drains with a loop: share = credit/|B| for every flow,
 * flows that empty return their surplus, repeat. We compute the same
 * result in O(log |B|) per emptied flow: all flows in B drain at the same
 * speed, so we keep one virtual clock V (total service given to each
 * backlogged flow) and store per flow its finish tag F = V + vq in a
 * min-heap. Serving `credit` raises V; each flow whose F is reached leaves
 * B, which speeds up the others (the paper's redistribution of surplus).
 *
 * Arithmetic is integer and exact: virtual amounts are in units * 1e9, so
 * credit = capacity [units/s] * dt [ns] needs no division; the remainder
 * of the per-flow split is carried to the next call. V and F wrap modulo
 * 2^64 and are compared wrap-safely (a vq stays far below 2^63).
 *
 * Flow table (the paper's is 4K rows x 4 records, 12-bit row + 8-bit tag):
 * rows of 4 16-byte records (one cache line), the full 32-bit hash as
 * identity, two candidate rows per flow (two-choice hashing), so a row
 * overflow needs 8 colliding active flows. Only flows in B hold a record;
 * a new flow that finds none is dropped and counted (TABLE_FULL).
 *
 * Algorithm 2 (CPU sharing): a processed batch's measured cycles are
 * apportioned over its kept packets by weight, and each flow's vq is
 * corrected by (real cost - cost charged at admission). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sn_common.h"
#include "sn_fdrop.h"

#define FP            1000000000ULL     /* fixed point: units * 1e9 */
#define VQ_MAX        (1ULL << 62)      /* clamp of one flow's vq (fixed point) */
#define ROW_WAYS      4
#define DEF_ROWS      4096u
#define DEF_ALPHA_PPM 500000u
#define DEF_BETA_PPM  1200000u

/* A flow in the ActiveList. hidx == 0: free record. */
struct fd_rec {
	uint32_t hash;
	uint32_t hidx;    /* heap index + 1 */
	uint64_t F;       /* finish tag: V + vq (fixed point, wraps) */
};
static_assert(sizeof(struct fd_rec) == 16, "4 records per cache line");

struct fd_row {
	struct fd_rec rec[ROW_WAYS];
} SN_CACHE_ALIGNED;
static_assert(sizeof(struct fd_row) == SN_CACHE_LINE, "one row per line");

struct sn_fdrop {
	/* Hot: every packet */
	uint64_t V;            /* virtual service per backlogged flow */
	uint64_t theta;        /* fixed point */
	uint64_t last_ns;
	uint64_t rem;          /* undistributed credit, < n */
	uint32_t n;            /* |B| */
	uint32_t row_mask;
	uint32_t row_bits;
	uint32_t max_active;
	struct fd_row *rows;
	struct fd_rec **heap;  /* min-heap on F */
	uint64_t capacity;
	int started;

	/* Read mostly: adaptive threshold */
	uint64_t theta_min, theta_max;  /* fixed point; 0/0 = fixed */
	double alpha, beta;

	struct sn_fdrop_stats st;
};

struct sn_fdrop *sn_fdrop_create(const struct sn_fdrop_cfg *cfg)
{
	struct sn_fdrop *fd;
	uint32_t rows;

	if (!cfg || cfg->capacity == 0 || cfg->theta == 0 || cfg->theta > SN_FDROP_MAX_THETA)
		goto err_inval;
	rows = cfg->n_rows ? cfg->n_rows : DEF_ROWS;
	if (!sn_is_pow2(rows) || rows > SN_FDROP_MAX_ROWS)
		goto err_inval;
	if (cfg->theta_min || cfg->theta_max) {
		if (!cfg->theta_min || cfg->theta_min > cfg->theta ||
		    cfg->theta > cfg->theta_max || cfg->theta_max > SN_FDROP_MAX_THETA)
			goto err_inval;
	}
	if ((cfg->alpha_ppm && cfg->alpha_ppm >= 1000000u) ||
	    (cfg->beta_ppm && cfg->beta_ppm <= 1000000u))
		goto err_inval;

	fd = calloc(1, sizeof(*fd));
	if (!fd)
		goto err_nomem;
	fd->row_mask = rows - 1;
	fd->row_bits = (uint32_t)__builtin_ctz(rows);
	fd->max_active = cfg->max_active ? cfg->max_active : rows * ROW_WAYS;
	if (fd->max_active > rows * ROW_WAYS)
		fd->max_active = rows * ROW_WAYS;
	fd->rows = aligned_alloc(SN_CACHE_LINE, sizeof(*fd->rows) * rows);
	if (!fd->rows)
		goto err_rows;
	memset(fd->rows, 0, sizeof(*fd->rows) * rows);
	fd->heap = calloc(fd->max_active, sizeof(*fd->heap));
	if (!fd->heap)
		goto err_heap;
	fd->capacity = cfg->capacity;
	fd->theta = cfg->theta * FP;
	fd->theta_min = cfg->theta_min * FP;
	fd->theta_max = cfg->theta_max * FP;
	fd->alpha = (cfg->alpha_ppm ? cfg->alpha_ppm : DEF_ALPHA_PPM) / 1e6;
	fd->beta = (cfg->beta_ppm ? cfg->beta_ppm : DEF_BETA_PPM) / 1e6;
	return fd;

err_heap:
	free(fd->rows);
err_rows:
	free(fd);
err_nomem:
	errno = ENOMEM;
	return NULL;
err_inval:
	errno = EINVAL;
	return NULL;
}

void sn_fdrop_free(struct sn_fdrop *fd)
{
	if (!fd)
		return;
	free(fd->heap);
	free(fd->rows);
	free(fd);
}

/* ---- min-heap of finish tags ---- */

static inline int f_less(const struct fd_rec *a, const struct fd_rec *b)
{
	return sn_time_before(a->F, b->F);
}

static inline void heap_set(struct sn_fdrop *fd, uint32_t i, struct fd_rec *r)
{
	fd->heap[i] = r;
	r->hidx = i + 1;
}

static void sift_up(struct sn_fdrop *fd, uint32_t i)
{
	struct fd_rec *r = fd->heap[i];

	while (i > 0) {
		uint32_t p = (i - 1) / 2;
		if (!f_less(r, fd->heap[p]))
			break;
		heap_set(fd, i, fd->heap[p]);
		i = p;
	}
	heap_set(fd, i, r);
}

static void sift_down(struct sn_fdrop *fd, uint32_t i)
{
	struct fd_rec *r = fd->heap[i];

	for (;;) {
		uint32_t c = 2 * i + 1;
		if (c >= fd->n)
			break;
		if (c + 1 < fd->n && f_less(fd->heap[c + 1], fd->heap[c]))
			c++;
		if (!f_less(fd->heap[c], r))
			break;
		heap_set(fd, i, fd->heap[c]);
		i = c;
	}
	heap_set(fd, i, r);
}

/* Take r out of B and free its record. */
static void heap_remove(struct sn_fdrop *fd, struct fd_rec *r)
{
	uint32_t i = r->hidx - 1;

	SN_VERIFY(r->hidx && i < fd->n && fd->heap[i] == r);
	fd->n--;
	if (i != fd->n) {
		heap_set(fd, i, fd->heap[fd->n]);
		if (i > 0 && f_less(fd->heap[i], fd->heap[(i - 1) / 2]))
			sift_up(fd, i);
		else
			sift_down(fd, i);
	}
	r->hidx = 0;
}

/* ---- flow table ---- */

static inline uint32_t row2(const struct sn_fdrop *fd, uint32_t h)
{
	/* Independent bits for the second choice (multiplicative hash of
	 * the hash, top bits). */
	return fd->row_bits ? (uint32_t)(h * 0x9E3779B1u) >> (32 - fd->row_bits) : 0;
}

static struct fd_rec *lookup(const struct sn_fdrop *fd, uint32_t h)
{
	struct fd_row *r1 = &fd->rows[h & fd->row_mask];
	struct fd_row *r2 = &fd->rows[row2(fd, h)];

	for (int w = 0; w < ROW_WAYS; w++)
		if (r1->rec[w].hidx && r1->rec[w].hash == h)
			return &r1->rec[w];
	for (int w = 0; w < ROW_WAYS; w++)
		if (r2->rec[w].hidx && r2->rec[w].hash == h)
			return &r2->rec[w];
	return NULL;
}

/* A free record in the emptier of the two rows, or NULL. */
static struct fd_rec *rec_alloc(struct sn_fdrop *fd, uint32_t h)
{
	struct fd_row *rows[2] = { &fd->rows[h & fd->row_mask], &fd->rows[row2(fd, h)] };
	struct fd_rec *best = NULL;
	int best_free = 0;

	if (fd->n >= fd->max_active)
		return NULL;
	for (int k = 0; k < 2; k++) {
		struct fd_rec *f = NULL;
		int nfree = 0;
		for (int w = 0; w < ROW_WAYS; w++)
			if (!rows[k]->rec[w].hidx) {
				nfree++;
				if (!f)
					f = &rows[k]->rec[w];
			}
		if (nfree > best_free) {
			best_free = nfree;
			best = f;
		}
	}
	return best;
}

/* Enter B with virtual queue vq (fixed point, > 0). */
static int activate(struct sn_fdrop *fd, uint32_t h, uint64_t vq)
{
	struct fd_rec *r = rec_alloc(fd, h);

	if (!r)
		return -ENOSPC;
	r->hash = h;
	r->F = fd->V + vq;
	heap_set(fd, fd->n, r);
	fd->n++;
	sift_up(fd, fd->n - 1);
	if (fd->n > fd->st.active_max)
		fd->st.active_max = fd->n;
	return 0;
}

/* ---- Algorithm 1 ---- */

static void drain_all(struct sn_fdrop *fd)
{
	while (fd->n) {
		struct fd_rec *r = fd->heap[0];
		if (sn_time_after(r->F, fd->V))
			fd->V = r->F;
		heap_remove(fd, r);
		fd->st.drained++;
	}
	fd->rem = 0;
}

void sn_fdrop_advance(struct sn_fdrop *fd, uint64_t now_ns)
{
	uint64_t dt, credit;

	if (sn_unlikely(!fd->started)) {
		fd->started = 1;
		fd->last_ns = now_ns;
		return;
	}
	if (!sn_time_after(now_ns, fd->last_ns))
		return;
	dt = now_ns - fd->last_ns;
	fd->last_ns = now_ns;
	if (!fd->n)
		return;                 /* idle: service is not banked */
	if (__builtin_mul_overflow(fd->capacity, dt, &credit) ||
	    __builtin_add_overflow(credit, fd->rem, &credit)) {
		drain_all(fd);
		return;
	}
	fd->rem = 0;
	while (fd->n && credit) {
		struct fd_rec *top = fd->heap[0];
		uint64_t per = top->F - fd->V, need;   /* > 0 for flows in B */

		if (__builtin_mul_overflow(per, (uint64_t)fd->n, &need) || need > credit) {
			fd->V += credit / fd->n;
			fd->rem = credit % fd->n;
			return;
		}
		credit -= need;
		fd->V = top->F;
		/* every flow whose tag is reached leaves B (line 12) */
		while (fd->n && !sn_time_after(fd->heap[0]->F, fd->V)) {
			heap_remove(fd, fd->heap[0]);
			fd->st.drained++;
		}
	}
}

enum sn_fdrop_verdict sn_fdrop_admit(struct sn_fdrop *fd, uint32_t hash, uint32_t len)
{
	struct fd_rec *r;

	if (sn_unlikely(len == 0 || len > SN_FDROP_MAX_LEN)) {
		fd->st.dropped[SN_FDROP_C_INVALID]++;
		return SN_FDROP_DROP;
	}
	r = lookup(fd, hash);
	if (r) {
		if (r->F - fd->V > fd->theta) {
			fd->st.dropped[SN_FDROP_C_FAIR]++;
			return SN_FDROP_DROP;
		}
		r->F += (uint64_t)len * FP;
		sift_down(fd, r->hidx - 1);
	} else {
		if (activate(fd, hash, (uint64_t)len * FP)) {
			fd->st.dropped[SN_FDROP_C_TABLE_FULL]++;
			return SN_FDROP_DROP;
		}
		fd->st.new_flows++;
	}
	fd->st.kept++;
	return SN_FDROP_KEEP;
}

enum sn_fdrop_verdict sn_fdrop_decide(struct sn_fdrop *fd, uint32_t hash,
				      uint32_t len, uint64_t now_ns)
{
	sn_fdrop_advance(fd, now_ns);
	return sn_fdrop_admit(fd, hash, len);
}

uint32_t sn_fdrop_batch(struct sn_fdrop *fd, uint64_t now_ns, const uint32_t *hash,
			const uint32_t *len, uint32_t n, uint8_t *verdict)
{
	uint32_t kept = 0;

	sn_fdrop_advance(fd, now_ns);
	for (uint32_t i = 0; i < n; i++) {
		verdict[i] = (uint8_t)sn_fdrop_admit(fd, hash[i], len[i]);
		kept += verdict[i] == SN_FDROP_KEEP;
	}
	return kept;
}

/* ---- Algorithm 2 ---- */

int sn_fdrop_account(struct sn_fdrop *fd, const struct sn_fdrop_done *pkts,
		     uint32_t n, uint64_t cycles)
{
	uint64_t sumw = 0;

	for (uint32_t i = 0; i < n; i++)
		sumw += pkts[i].weight;
	if (n && !sumw)
		return -EINVAL;
	for (uint32_t i = 0; i < n; i++) {
		double cost = (double)pkts[i].weight / (double)sumw * (double)cycles * (double)FP;
		double delta = cost - (double)pkts[i].charged * (double)FP;
		struct fd_rec *r = lookup(fd, pkts[i].hash);

		if (cost > (double)VQ_MAX)
			delta = (double)VQ_MAX;
		if (r) {
			uint64_t vq = r->F - fd->V;
			if (delta < 0 && (double)vq <= -delta) {
				heap_remove(fd, r);
				fd->st.drained++;
			} else if (delta < 0) {
				r->F -= (uint64_t)-delta;
				sift_up(fd, r->hidx - 1);
			} else {
				uint64_t d = (uint64_t)delta;
				r->F = fd->V + SN_MIN(vq + d, VQ_MAX);
				sift_down(fd, r->hidx - 1);
			}
		} else if (delta >= 1.0) {
			if (activate(fd, pkts[i].hash, (uint64_t)delta)) {
				fd->st.corrections_lost++;
				continue;
			}
		}
		fd->st.corrections++;
	}
	return 0;
}

void sn_fdrop_adapt(struct sn_fdrop *fd, int batch_full)
{
	double t;

	if (!fd->theta_max)
		return;
	t = (double)fd->theta * (batch_full ? fd->alpha : fd->beta);
	if (t < (double)fd->theta_min)
		t = (double)fd->theta_min;
	if (t > (double)fd->theta_max)
		t = (double)fd->theta_max;
	fd->theta = (uint64_t)t;
	if (batch_full)
		fd->st.theta_down++;
	else
		fd->st.theta_up++;
}

uint64_t sn_fdrop_vq(const struct sn_fdrop *fd, uint32_t hash)
{
	const struct fd_rec *r = lookup(fd, hash);

	return r ? (r->F - fd->V) / FP : 0;
}

void sn_fdrop_stats(const struct sn_fdrop *fd, struct sn_fdrop_stats *out)
{
	*out = fd->st;
	out->theta = fd->theta / FP;
	out->active = fd->n;
}
