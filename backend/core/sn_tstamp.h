/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_tstamp.h — Carousel timestamping: per-policy rate, exact in integers.
 *
 * A policy (a pacing rate, a per-flow or per-VM rate limit, a core's share
 * of an aggregate limit) turns a packet into its Earliest Release Time.
 * With LTS the policy's last timestamp (a virtual finish time):
 *
 *     LTS' = max(LTS + len/rate, now - burst/rate)
 *     ts   = max(ceil(LTS'), now)
 *
 * With burst = 0 this is Carousel §5.1.1 exactly: ts = max(LTS + len/rate,
 * now). A non-zero burst lets the policy run up to `burst` bytes ahead of
 * its rate after an idle period. Packets stamped into any interval of
 * length T total at most rate*(T + 1 ns) + burst + one packet. A packet
 * crossing several policies takes the max of their timestamps
 * (consolidation; the slowest policy dominates, like token buckets in
 * series).
 *
 * LTS is kept as an exact rational: integer ns plus rem/rate ns
 * (0 <= rem < rate, rate in bit/s), so the sum of any number of increments
 * len*8e9/rate is exact: no drift, ever. The per-packet path uses only
 * 64-bit integer multiplies, adds and one divide by the rate; 128-bit
 * arithmetic only for packets over SN_TSTAMP_FAST_LEN and at configuration.
 * Time is ns on one monotonic clock, below 2^63.
 *
 * Concurrency: a policy object is owned by one thread (the worker core
 * whose shaper uses it; an aggregate limit spread over cores is split into
 * per-core policies by the NBA). No locks, no barriers. Changing rate or
 * burst is done by that same thread.
 *
 * Errors: 0 / -errno.
 */
#ifndef SN_TSTAMP_H
#define SN_TSTAMP_H

#include <stdint.h>

#include "sn_common.h"

#define SN_TSTAMP_RATE_MIN  1000ull              /* 1 kbit/s */
#define SN_TSTAMP_RATE_MAX  400000000000ull      /* 400 Gbit/s */
#define SN_TSTAMP_BURST_MAX (1u << 30)           /* bytes */
#define SN_TSTAMP_FAST_LEN  (1u << 24)           /* 64-bit path up to here */
#define SN_TSTAMP_NS_BITS   8000000000ull        /* bits per byte * ns per s */

struct sn_tstamp {
	/* Per packet: state and precomputed per-byte cost. */
	uint64_t lts;        /* whole ns of the last timestamp LTS */
	uint64_t lts_rem;    /* fraction of LTS, in 1/rate ns: 0 <= lts_rem < rate */
	uint64_t rate;       /* bit/s */
	uint64_t ns_byte;    /* floor(8e9 / rate): whole ns per byte */
	uint64_t rem_byte;   /* 8e9 % rate */
	uint64_t burst_ns;   /* burst*8e9 = burst_ns*rate + burst_rem */
	uint64_t burst_rem;
	uint32_t burst;      /* bytes */
	uint32_t pad_;
};
static_assert(sizeof(struct sn_tstamp) == SN_CACHE_LINE, "one cache line per policy");

/* Initialize with rate (SN_TSTAMP_RATE_MIN..MAX bit/s) and burst
 * (0..SN_TSTAMP_BURST_MAX bytes); LTS starts at max(0, now - burst/rate).
 * -EINVAL. */
int sn_tstamp_init(struct sn_tstamp *p, uint64_t rate_bps, uint32_t burst_bytes, uint64_t now);
/* Change rate / burst, keeping LTS (its fraction is rounded up to the next
 * whole ns, the only rounding ever applied). -EINVAL; p unchanged then. */
int sn_tstamp_set(struct sn_tstamp *p, uint64_t rate_bps, uint32_t burst_bytes);
/* Next LTS of a policy, computed but not yet committed. */
struct sn_tstamp_next {
	uint64_t lts, lts_rem;
};

/* LTS' for a packet longer than SN_TSTAMP_FAST_LEN (128-bit arithmetic). */
void sn_tstamp_advance_slow_(const struct sn_tstamp *p, uint32_t len,
			     struct sn_tstamp_next *nx);

/* sn_tstamp_peek() in two steps, for a burst
 * of packets stamped at one `now`: the floor now - burst/rate (it depends
 * on p's burst and rate and on now only) once, then each packet with
 * sn_tstamp_peek_at(). sn_tstamp_peek() is exactly these two steps. */
struct sn_tstamp_floor {
	uint64_t ns, rem;    /* now - burst/rate as ns + rem/rate, clamped at 0 */
};

static inline void sn_tstamp_floor_at(const struct sn_tstamp *p, uint64_t now,
				      struct sn_tstamp_floor *f)
{
	if (p->burst_rem == 0) {
		f->ns = now - SN_MIN(now, p->burst_ns);
		f->rem = 0;
	} else if (now > p->burst_ns) {
		f->ns = now - p->burst_ns - 1;
		f->rem = p->rate - p->burst_rem;
	} else {
		f->ns = 0;
		f->rem = 0;
	}
}

/* sn_tstamp_peek() with the floor f of p at now (sn_tstamp_floor_at). */
static inline uint64_t sn_tstamp_peek_at(const struct sn_tstamp *p, uint64_t now,
					 const struct sn_tstamp_floor *f, uint32_t len,
					 struct sn_tstamp_next *nx)
{
	if (sn_likely(len <= SN_TSTAMP_FAST_LEN)) {
		/* len*8e9/rate = len*ns_byte + len*rem_byte/rate; with
		 * len <= 2^24 and rem < rate <= 4e11 the sum fits 64 bits. */
		uint64_t num = p->lts_rem + (uint64_t)len * p->rem_byte;

		nx->lts = p->lts + (uint64_t)len * p->ns_byte + num / p->rate;
		nx->lts_rem = num % p->rate;
	} else {
		sn_tstamp_advance_slow_(p, len, nx);
	}
	if (nx->lts < f->ns || (nx->lts == f->ns && nx->lts_rem < f->rem)) {
		nx->lts = f->ns;
		nx->lts_rem = f->rem;
	}
	return SN_MAX(nx->lts + (nx->lts_rem != 0), now);
}

/* A run of packets stamped at one `now`, in
 * closed form. For packets of lengths l_1..l_k (`first` = l_1, `bytes` =
 * l_1 + .. + l_k, at most SN_TSTAMP_FAST_LEN), calling sn_tstamp_peek_at()
 * and sn_tstamp_commit() for each in turn takes the LTS from x_0 through
 * x_i = max(x_{i-1} + c_i, f), c_i = l_i*8e9/rate >= 0 and f the floor,
 * hence x_k = max(x_0 + C(1..k), f + C(2..k)) with C(a..b) the sum of
 * c_a..c_b (the floor term f + C(i+1..k) is largest for i = 1). Both terms
 * are one exact rational step each (the sum of the increments as an
 * integer plus a remainder below rate, as in sn_tstamp_peek_at()), so *nx
 * is bit for bit the LTS the per-packet steps leave, from two independent
 * divides instead of k chained ones. Returns the run's last timestamp,
 * its largest (stamps never decrease along a run). Commit *nx with
 * sn_tstamp_commit() once the whole run is accepted. */
static inline uint64_t sn_tstamp_peek_run(const struct sn_tstamp *p, uint64_t now,
					  const struct sn_tstamp_floor *f, uint32_t first,
					  uint32_t bytes, struct sn_tstamp_next *nx)
{
	const uint64_t rest = (uint64_t)(bytes - first);
	/* as in sn_tstamp_peek_at(): bytes <= 2^24 and both remainders
	 * below rate <= 4e11 keep the numerators within 64 bits */
	const uint64_t num = p->lts_rem + (uint64_t)bytes * p->rem_byte;
	const uint64_t fnum = f->rem + rest * p->rem_byte;
	const uint64_t fns = f->ns + rest * p->ns_byte + fnum / p->rate;
	const uint64_t frem = fnum % p->rate;

	nx->lts = p->lts + (uint64_t)bytes * p->ns_byte + num / p->rate;
	nx->lts_rem = num % p->rate;
	if (nx->lts < fns || (nx->lts == fns && nx->lts_rem < frem)) {
		nx->lts = fns;
		nx->lts_rem = frem;
	}
	return SN_MAX(nx->lts + (nx->lts_rem != 0), now);
}

/* Timestamp of a packet of `len` bytes arriving at `now` through p, and
 * p's LTS after it into *nx, without changing p. Commit with
 * sn_tstamp_commit once the packet is accepted (queued); a packet dropped
 * instead (beyond horizon, pool full) is not charged to the policy, so an
 * overloaded policy keeps its rate instead of running away from now. */
static inline uint64_t sn_tstamp_peek(const struct sn_tstamp *p, uint64_t now, uint32_t len,
				      struct sn_tstamp_next *nx)
{
	struct sn_tstamp_floor f;

	sn_tstamp_floor_at(p, now, &f);
	return sn_tstamp_peek_at(p, now, &f, len, nx);
}

static inline void sn_tstamp_commit(struct sn_tstamp *p, const struct sn_tstamp_next *nx)
{
	p->lts = nx->lts;
	p->lts_rem = nx->lts_rem;
}

/* Peek and commit: advances p's LTS and returns the packet's timestamp
 * (>= now). */
static inline uint64_t sn_tstamp_stamp(struct sn_tstamp *p, uint64_t now, uint32_t len)
{
	struct sn_tstamp_next nx;
	uint64_t ts = sn_tstamp_peek(p, now, len, &nx);

	sn_tstamp_commit(p, &nx);
	return ts;
}

/* Consolidation (Carousel §5.1.1): the timestamp of a packet crossing the
 * n policies pol[] is the largest of their timestamps; `now` if n == 0.
 * The _peek form fills nx[0..n-1] for sn_tstamp_consolidate_commit (each
 * policy accounts the packet against its own rate); the plain form commits
 * at once. */
static inline uint64_t sn_tstamp_consolidate_peek(struct sn_tstamp *const *pol, unsigned n,
						  uint64_t now, uint32_t len,
						  struct sn_tstamp_next *nx)
{
	uint64_t ts = now;

	for (unsigned i = 0; i < n; i++) {
		uint64_t t = sn_tstamp_peek(pol[i], now, len, &nx[i]);

		ts = SN_MAX(ts, t);
	}
	return ts;
}

static inline void sn_tstamp_consolidate_commit(struct sn_tstamp *const *pol, unsigned n,
						const struct sn_tstamp_next *nx)
{
	for (unsigned i = 0; i < n; i++)
		sn_tstamp_commit(pol[i], &nx[i]);
}

static inline uint64_t sn_tstamp_consolidate(struct sn_tstamp *const *pol, unsigned n,
					     uint64_t now, uint32_t len)
{
	uint64_t ts = now;

	for (unsigned i = 0; i < n; i++) {
		uint64_t t = sn_tstamp_stamp(pol[i], now, len);

		ts = SN_MAX(ts, t);
	}
	return ts;
}

#endif /* SN_TSTAMP_H */
