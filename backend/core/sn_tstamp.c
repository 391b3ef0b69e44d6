/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_tstamp.c — Carousel timestamping: configuration and the slow path.
 *
 * Follows A. Saeed, N. Dukkipati, V. Valancius, V. The Lam, C. Contavalli,
 * A. Vahdat, "Carousel: Scalable Traffic Shaping at End Hosts", ACM SIGCOMM
 * 2017, §5.1.1. Every shaping policy, pacing or rate limit alike, keeps the
 * last timestamp it issued and advances it by len/rate per packet; a
 * packet's Earliest Release Time is the max over the policies it crosses,
 * and the timing wheel releases it then. Shaping is thus reduced to
 * arithmetic on one word per policy, with no per-policy queue.
 *
 * The arithmetic must be exact: a per-packet increment of len*8e9/rate ns
 * is rarely an integer (64 B at 400 Gbit/s is 1.28 ns), and truncating it
 * would make a policy faster than configured by up to 1 ns per packet, a
 * 78 % error at that rate; rounding up makes it slower. We carry the
 * remainder instead: LTS = lts + lts_rem/rate with 0 <= lts_rem < rate,
 * and per byte 8e9 = ns_byte*rate + rem_byte. Adding len bytes is
 *     num = lts_rem + len*rem_byte;  lts += len*ns_byte + num/rate;
 *     lts_rem = num % rate
 * which is exact for every packet and every sum of packets. Bounds: with
 * rate <= 4e11 and len <= 2^24, num < (2^24 + 1)*4e11 < 2^63, and
 * len*ns_byte <= 2^24 * 8e6 (at 1 kbit/s) < 2^47, so 64 bits suffice on
 * the fast path; longer packets, and burst conversion at configuration,
 * use unsigned __int128. The output timestamp is ceil(LTS): a release at
 * the timestamp never runs ahead of the exact schedule. */
#include "sn_tstamp.h"

#include <errno.h>
#include <string.h>

static int params_ok(uint64_t rate_bps, uint32_t burst_bytes)
{
	return rate_bps >= SN_TSTAMP_RATE_MIN && rate_bps <= SN_TSTAMP_RATE_MAX &&
	       burst_bytes <= SN_TSTAMP_BURST_MAX;
}

static void apply(struct sn_tstamp *p, uint64_t rate_bps, uint32_t burst_bytes)
{
	unsigned __int128 b = (unsigned __int128)burst_bytes * SN_TSTAMP_NS_BITS;

	p->rate = rate_bps;
	p->ns_byte = SN_TSTAMP_NS_BITS / rate_bps;
	p->rem_byte = SN_TSTAMP_NS_BITS % rate_bps;
	p->burst = burst_bytes;
	p->burst_ns = (uint64_t)(b / rate_bps);
	p->burst_rem = (uint64_t)(b % rate_bps);
}

int sn_tstamp_init(struct sn_tstamp *p, uint64_t rate_bps, uint32_t burst_bytes, uint64_t now)
{
	if (!p || !params_ok(rate_bps, burst_bytes))
		return -EINVAL;
	memset(p, 0, sizeof(*p));
	apply(p, rate_bps, burst_bytes);
	/* LTS starts at max(0, now - burst/rate): the full burst is available.
	 * A zero-length stamp from LTS = 0 computes exactly that floor. */
	(void)sn_tstamp_stamp(p, now, 0);
	return 0;
}

int sn_tstamp_set(struct sn_tstamp *p, uint64_t rate_bps, uint32_t burst_bytes)
{
	if (!p || !params_ok(rate_bps, burst_bytes))
		return -EINVAL;
	p->lts += p->lts_rem != 0;
	p->lts_rem = 0;
	apply(p, rate_bps, burst_bytes);
	return 0;
}

void sn_tstamp_advance_slow_(const struct sn_tstamp *p, uint32_t len,
			     struct sn_tstamp_next *nx)
{
	unsigned __int128 num = (unsigned __int128)len * SN_TSTAMP_NS_BITS + p->lts_rem;

	nx->lts = p->lts + (uint64_t)(num / p->rate);
	nx->lts_rem = (uint64_t)(num % p->rate);
}
