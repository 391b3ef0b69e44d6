/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_pl_purge.c — a stopping deferred-completion source leaves the
 * pipeline at once (Carousel §5.2: a descriptor is completed when its frame
 * left; a frame whose device stops leaves by being dropped).
 *
 * A frame of a deferred source (sn_vqtx.h) is a guest buffer, and the
 * device stop (sn_vqtx_stop) must not wait for it to come out of the
 * shaper on its own: behind a slow uplink or a deep scheduler class that
 * takes as long as the queue takes to drain at link rate. So while the
 * stop is pending the worker purges its frames from every queue they can
 * sit in, each dropped as src_stopped and counted as forced (and purged)
 * by its queue:
 *  - the timing wheel (worker): every frame taken out in release order,
 *    the stopping ones dropped, the others inserted again at their own
 *    release time (meta.ts), so each port and flow stays in order;
 *  - the client mailboxes and the scheduler classes (arbiter half): the
 *    worker asks with a purge sequence (w->purge_req, release) that the
 *    arbiter half answers at its next round (a->purge_ack[k], release):
 *    it takes every frame of a stopping queue out of every class of its
 *    sets (sn_sched_class_purge) and drops it as its drops go (a remote
 *    arbiter returns it through the return mailbox as RET_DROP, which the
 *    worker frees in its next run). Mailbox frames reach the scheduler at
 *    the next scan, within microseconds; the worker asks again while the
 *    port still holds frames and the last request is answered, so a frame
 *    read after a purge is taken by the next one;
 *  - the switch's backlogs are purged by the switch (bl_purge_queue).
 * The stop is acknowledged when sn_pipeline_src_held() of the port is 0,
 * or when none of the stopping queue's own frames is out
 * (sn_vqtx_frames_out; copies of a stock guest's frames, sn_vqtx_copy_out,
 * still count in src_held but reference no descriptor).
 */
#include "sn_pl_internal.h"

/* A wheel purge takes the whole wheel out: at most once per this period
 * while a port that is stopping still has frames in it (frames of its
 * other queues, which are not stopping, stay). */
#define WHEEL_PURGE_EVERY_NS 1000000ull

/* Worker half: the frames of stopping queues out of pl's wheel; returns
 * how many were dropped. */
static uint64_t purge_wheel(struct sn_pipeline *pl)
{
	uint64_t n = sn_twheel_count(pl->wheel), k = 0, dropped = 0;
	unsigned got;

	SN_VERIFY(n == pl->wheel_n);
	/* restamp_buf holds pool_nodes frames, which the pool size bounds */
	if (n == 0 || n > pl->pool_nodes)
		return 0;
	while (k < n && (got = sn_twheel_extract(pl->wheel, UINT64_MAX >> 2, pl->restamp_buf + k,
						 (unsigned)RTE_MIN(n - k, (uint64_t)BATCH))) > 0)
		k += got;
	SN_VERIFY(sn_twheel_rewind(pl->wheel, pl->now) == 0);
	for (uint64_t i = 0; i < k; i++) {
		struct rte_mbuf *m = pl->restamp_buf[i];
		struct sn_vqtx *q;

		if (sn_vqtx_verdict(m, &q) == SN_VQTX_STOPPING) {
			sn_vqtx_count_purged(q, SN_VQTX_PURGED_WHEEL);
			sn_vqtx_count_forced(q);
			drop_taken(pl, m, SN_PL_DROP_SRC_STOP);
			dropped++;
			continue;
		}
		/* Its own release time, which the rewind kept in reach: clamp
		 * only guards the horizon's rounding. */
		if (sn_twheel_insert(pl->wheel, m, meta_of(pl, m)->ts, SN_TWHEEL_CLAMP))
			drop_taken(pl, m, SN_PL_DROP_POOL);
	}
	return dropped;
}

/* Arbiter half: take() of sn_sched_class_purge. */
static bool take_stopping(void *item, uint32_t len, void *arg)
{
	struct arbset *as = arg;
	struct sn_pl_arb *a = as->a;
	struct rte_mbuf *m = item;
	struct actr *c = actr_of(a, m);
	struct sn_vqtx *q;

	(void)len;
	if (sn_vqtx_verdict(m, &q) != SN_VQTX_STOPPING)
		return false;
	if (a->remote) {
		/* the worker counts it (sn_pl_ret_handle) */
		sn_pl_ret_push(a, m, RET_DROP, SN_PL_DROP_SRC_STOP | RET_PURGED);
	} else {
		a->local->held--;
		sn_vqtx_count_purged(q, SN_VQTX_PURGED_SCHED);
		(void)sn_pl_deferred_drop_slow(a->local, a, &m, q, SN_VQTX_STOPPING);
	}
	/* As arb_drop(): after the drop or the return (src_held). */
	__atomic_store_n(&c->st.qfq_backlog, c->st.qfq_backlog - 1, __ATOMIC_RELEASE);
	return true;
}

static void purge_aset(struct arbset *as)
{
	struct sn_sched *sch;

	if (!as)
		return;
	sch = sn_arbiter_sched(as->arb);
	for (unsigned s = 0; s < sn_config_port_slots; s++)
		if (as->weight[s] && sn_sched_class_backlog(sch, s))
			sn_sched_class_purge(sch, s, take_stopping, as);
}

static void purge_arb(struct sn_pl_arb *a)
{
	purge_aset(a->aset_old);
	purge_aset(a->aset);
}

void sn_pl_purge_take(struct sn_pl_arb *a)
{
	bool asked = false;
	uint32_t req[SN_PIPELINE_WORKERS_MAX];

	for (unsigned k = 0; k < a->n_wk; k++) {
		/* Acquire pairs with the worker's release in
		 * sn_pipeline_src_purge(): its stop_req load came before. */
		req[k] = __atomic_load_n(&a->sh->wk[k]->purge_req, __ATOMIC_ACQUIRE);
		asked |= req[k] != a->purge_ack[k];
	}
	if (!asked)
		return;
	purge_arb(a);
	for (unsigned k = 0; k < a->n_wk; k++)
		/* Release: the drops and returns above come first. */
		__atomic_store_n(&a->purge_ack[k], req[k], __ATOMIC_RELEASE);
}

uint64_t sn_pipeline_src_purge(struct sn_pipeline *pl, const struct sn_port *in)
{
	struct wslot *ps = &pl->ps[in->slot];
	uint64_t held;

	if (ps->gen != in->gen)
		return 0;
	if (ps->st.wheel_depth && (pl->now - ps->purge_ns >= WHEEL_PURGE_EVERY_NS ||
				   !ps->purge_ns)) {
		seq_counting(pl);
		ps->purge_ns = pl->now ? pl->now : 1;
		purge_wheel(pl);
	}
	held = sn_pipeline_src_held(pl, in);
	if (held == 0) {
		ps->purge_ns = 0;
		return 0;
	}
	if (!pl->split) {
		/* Layout 1core: the arbiter half is ours. */
		seq_counting(pl);
		purge_arb(pl->arb);
		return sn_pipeline_src_held(pl, in);
	}
	/* Acquire pairs with the arbiter half's release of purge_ack. */
	if (__atomic_load_n(&pl->arb->purge_ack[pl->wk_id], __ATOMIC_ACQUIRE) == pl->purge_req)
		/* Release pairs with the acquire in sn_pl_purge_take(). */
		__atomic_store_n(&pl->purge_req, pl->purge_req + 1, __ATOMIC_RELEASE);
	return held;
}
