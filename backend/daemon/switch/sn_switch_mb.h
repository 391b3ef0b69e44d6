/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_switch_mb.h — the arithmetic of an immediate port's mbuf charge
 * (see "Immediate ports' mbufs" in sn_switch_poll.c): how many frames a
 * poll may dequeue under the port's room, and which frames of a dequeued
 * burst the units taken for it cover. Pure over a quota room and the
 * burst's mbufs, so that it is tested without a vhost device
 * (tests/test_switch_mb.c).
 */
#ifndef SN_SWITCH_MB_H
#define SN_SWITCH_MB_H

#include <stdint.h>

#include <rte_mbuf.h>

/* The frames of *hint segments each that room holds, at most max; at
 * least one while there is any room: the hint is learnt only from
 * dequeues, so a queue kept from dequeuing would keep a stale hint, and
 * stall, for ever. A room below one frame of the hint halves the hint
 * (never below 1); a frame larger than the room is then dropped by
 * sn_switch_mb_cover(). 0: no room, not polled. */
static inline uint16_t sn_switch_mb_budget(uint16_t *hint, uint32_t room, uint16_t max)
{
	uint32_t fit;

	if (*hint < 1)
		*hint = 1;
	fit = room / *hint;
	if (fit == 0 && room > 0) {
		fit = 1;
		if (*hint > 1)
			*hint /= 2;
	}
	return fit < max ? (uint16_t)fit : max;
}

/* The segments of pkts[0, n): the units the burst needs. */
static inline uint32_t sn_switch_mb_need(struct rte_mbuf *const *pkts, uint16_t n)
{
	uint32_t need = 0;

	for (uint16_t j = 0; j < n; j++)
		need += pkts[j]->nb_segs;
	return need;
}

/* Of pkts[0, n), keep in order at the front the frames whose segments
 * fit in granted units, first come first covered (a frame too large for
 * what is left is passed over, a later smaller one may still fit); the
 * others go to pkts[k, n) for the caller to free and count. Returns k;
 * *used: the units the kept frames hold (<= granted). */
static inline uint16_t sn_switch_mb_cover(struct rte_mbuf **pkts, uint16_t n, uint32_t granted,
					  uint32_t *used)
{
	uint32_t left = granted;
	uint16_t k = 0;

	for (uint16_t j = 0; j < n; j++) {
		struct rte_mbuf *m = pkts[j];

		if (m->nb_segs <= left) {   /* kept: swapped ahead of those passed over */
			left -= m->nb_segs;
			pkts[j] = pkts[k];
			pkts[k++] = m;
		}
	}
	*used = granted - left;
	return k;
}

/* The units a worker keeps charged for held frames of a port: held x
 * hold, where hold is the most segments of any frame charged since the
 * port last held none (sn_switch_mb_learn()). The decaying hint sizes
 * dequeues only: were the charge held x hint, a guest could queue large
 * frames, decay the hint with small ones, and have the large ones
 * charged as small while they wait. held x hold is never below what the
 * held frames use; it may be above (mixed sizes), which slows only the
 * port itself. */
static inline uint64_t sn_switch_mb_want(uint64_t held, uint16_t *hold)
{
	if (!held)
		*hold = 0;
	return held * (*hold ? *hold : 1);
}

/* A dequeued burst whose largest frame has segs segments: the hint
 * follows it (halving at most per burst), hold keeps the maximum. */
static inline void sn_switch_mb_learn(uint16_t *hint, uint16_t *hold, uint16_t segs)
{
	*hint = segs >= *hint / 2 ? segs : (uint16_t)(*hint / 2);
	if (segs > *hold)
		*hold = segs;
}

#endif
