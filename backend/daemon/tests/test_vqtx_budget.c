/* SPDX-License-Identifier: BSD-3-Clause */
/* test_vqtx_budget.c — the descriptors a deferred queue's poll may take
 * under its budgets (vqtx_budget, sn_vqtx_impl.h) over a hand-built queue
 * and a real mbuf quota: no EAL, no vhost device.
 *
 * Properties: the held cap bounds the pop to its room and stops it at the
 * cap; the mbuf room bounds it to the frames of seg_hint segments it
 * holds; a room smaller than one frame of seg_hint segments still lets one
 * frame be popped (the hint is learnt only from pops: a queue that may not
 * pop would keep a stale hint for ever), and the hint decays there; no
 * mbuf room, no pop; each budget counts one hit per run of polls it
 * limited, not one per poll.
 */
#include <stdlib.h>
#include <string.h>

#include "sn_quota.h"
#include "sn_vqtx_impl.h"

#include "sn_check.h"

/* What sn_vqtx.c defines in the daemon. */
struct sn_vqtx_worker sn_vqtx_workers[SN_VQTX_WORKERS_MAX];
__thread struct sn_vqtx_worker *sn_vqtx_self __attribute__((tls_model("initial-exec")));

static void test_held_cap(void)
{
	struct sn_vqtx q;
	uint32_t cap = 10;

	memset(&q, 0, sizeof(q));
	q.held_cap = &cap;
	CHECK(vqtx_budget(&q, 8) == 8 && q.st.quota_held == 0);
	q.outstanding = 6;
	CHECK(vqtx_budget(&q, 8) == 4);
	q.outstanding = 10;
	CHECK(vqtx_budget(&q, 8) == 0);
	cap = 4;                        /* lowered below what is held */
	CHECK(vqtx_budget(&q, 8) == 0);
	/* one hit per run of limited polls, however long the run */
	CHECK(q.st.quota_held == 1);
	q.outstanding = 0;
	cap = 10;
	CHECK(vqtx_budget(&q, 8) == 8 && q.st.quota_held == 1);
	q.outstanding = 10;
	for (int i = 0; i < 50; i++)
		CHECK(vqtx_budget(&q, 8) == 0);
	CHECK(q.st.quota_held == 2);
}

static void test_mbuf_room(void)
{
	struct sn_quota *mq = sn_quota_create(2, 64);
	struct sn_vqtx q;

	CHECK(mq && sn_quota_set(mq, 0, 0, 40) == 0);
	memset(&q, 0, sizeof(q));
	q.mq = mq;
	CHECK(vqtx_budget(&q, 32) == 32);
	q.seg_hint = 8;                 /* 40 units hold 5 frames of 8 */
	CHECK(vqtx_budget(&q, 32) == 5 && q.st.quota_mbufs == 1);
	/* the room below one frame of the hint: a cap of 4, or units taken */
	CHECK(sn_quota_set(mq, 0, 0, 4) == 0);
	for (int i = 0; i < 100; i++)   /* nothing else would change the hint */
		CHECK(vqtx_budget(&q, 32) == 1);
	CHECK(q.seg_hint < 8 && q.st.quota_mbufs == 1);   /* one run of limited polls */
	CHECK(sn_quota_set(mq, 0, 0, 40) == 0 && sn_quota_take(mq, 0, 37) == 37);
	q.seg_hint = 8;
	CHECK(vqtx_budget(&q, 32) == 1);
	/* no room at all: no pop */
	sn_quota_take(mq, 0, 3);
	CHECK(vqtx_budget(&q, 32) == 0);
	sn_quota_give(mq, 0, 40);
	sn_quota_free(mq);
}

int main(void)
{
	test_held_cap();
	test_mbuf_room();
	return sn_check_exit("vqtx_budget");
}
