/* SPDX-License-Identifier: BSD-3-Clause */
/* test_switch_mb.c — an immediate port's mbuf charge (sn_switch_mb.h)
 * over hand-built mbufs: no EAL, no vhost device.
 *
 * Properties: the dequeue is bounded by the frames of the hint that the
 * room holds; a room below one frame of the hint still lets one frame be
 * dequeued and the hint decays there (a policy cap below a TSO guest's
 * frame never stalls its queue); no room, no dequeue; a burst is charged
 * its segments, and the units granted cover its frames first come first
 * covered, the rest set apart to be dropped, so that a burst of large
 * frames never holds more than was granted.
 */
#include <string.h>

#include "sn_switch_mb.h"

#include "sn_check.h"

static void test_budget(void)
{
	uint16_t hint = 1;

	CHECK(sn_switch_mb_budget(&hint, 1000, 32) == 32 && hint == 1);
	hint = 8;                       /* 40 units hold 5 frames of 8 */
	CHECK(sn_switch_mb_budget(&hint, 40, 32) == 5 && hint == 8);
	/* a cap below one frame of the hint: one frame per poll, the hint
	 * decays to what the room holds rather than stalling the queue */
	hint = 33;
	for (int i = 0; i < 100; i++)   /* nothing else would change the hint */
		CHECK(sn_switch_mb_budget(&hint, 20, 32) >= 1);
	CHECK(hint <= 20 && hint >= 1);
	CHECK(sn_switch_mb_budget(&hint, 20, 32) == 20 / hint);
	/* no room at all: no dequeue, the hint kept */
	hint = 33;
	CHECK(sn_switch_mb_budget(&hint, 0, 32) == 0 && hint == 33);
	hint = 0;                       /* a fresh slot */
	CHECK(sn_switch_mb_budget(&hint, 5, 32) == 5 && hint == 1);
}

static void test_cover(void)
{
	struct rte_mbuf m[32], *pkts[32];
	uint32_t used = 0;
	uint16_t k;

	/* 32 TSO frames of 33 segments against a room of 194 */
	memset(m, 0, sizeof(m));
	for (int i = 0; i < 32; i++) {
		m[i].nb_segs = 33;
		pkts[i] = &m[i];
	}
	CHECK(sn_switch_mb_need(pkts, 32) == 32 * 33);
	k = sn_switch_mb_cover(pkts, 32, 194, &used);
	CHECK(k == 5 && used == 5 * 33);
	for (int i = 0; i < 5; i++)     /* the first ones, in order */
		CHECK(pkts[i] == &m[i]);
	/* every frame is still in pkts, each once: the rest to be freed */
	for (int i = 0; i < 32; i++) {
		int seen = 0;

		for (int j = 0; j < 32; j++)
			seen += pkts[j] == &m[i];
		CHECK(seen == 1);
	}
	/* a frame too large for what is left is passed over, a later
	 * smaller one still fits */
	m[0].nb_segs = 2;
	m[1].nb_segs = 5;
	m[2].nb_segs = 1;
	for (int i = 0; i < 3; i++)
		pkts[i] = &m[i];
	k = sn_switch_mb_cover(pkts, 3, 4, &used);
	CHECK(k == 2 && used == 3 && pkts[0] == &m[0] && pkts[1] == &m[2] && pkts[2] == &m[1]);
	/* all granted: all kept; none granted: none */
	CHECK(sn_switch_mb_cover(pkts, 3, 8, &used) == 3 && used == 8);
	CHECK(sn_switch_mb_cover(pkts, 3, 0, &used) == 0 && used == 0);
}

/* Large frames held, then small bursts decay the hint: the charge for
 * the held frames stays at their size until the port holds none. */
static void test_hold(void)
{
	uint16_t hint = 1, hold = 0;

	sn_switch_mb_learn(&hint, &hold, 33);
	CHECK(hint == 33 && hold == 33);
	CHECK(sn_switch_mb_want(10, &hold) == 330);
	for (int i = 0; i < 8; i++)
		sn_switch_mb_learn(&hint, &hold, 1);
	CHECK(hint == 1);
	CHECK(sn_switch_mb_want(10, &hold) == 330);
	CHECK(sn_switch_mb_want(0, &hold) == 0 && hold == 0);
	sn_switch_mb_learn(&hint, &hold, 1);
	CHECK(sn_switch_mb_want(10, &hold) == 10);
}

int main(void)
{
	test_hold();
	test_budget();
	test_cover();
	return sn_check_exit("switch_mb");
}
