/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_pl_ret.c — the return mailbox (arbiter -> worker, PSPAT's arbiter
 * never frees what only the worker may free) and the arbiter half's drops.
 *
 * A remote arbiter must not free a deferred-completion frame (its free
 * callback writes the worker-owned used ring, sn_vqtx.h) nor segment a
 * guest GSO frame (the switch's hook runs on the worker). It hands such a
 * frame back to the worker that submitted it, with a verdict in its meta
 * (sent / drop cause / transmit-GSO / copied: a stock guest's frame past
 * its hold limit that the arbiter copied and sent, sn_vqtx_copy_out),
 * through that worker's SPSC return mailbox; the worker frees or
 * transmits it in run(). If the mailbox is
 * full the frame is parked and the arbiter stops scanning until the park
 * is empty again (backpressure, nothing lost). A returned frame stays
 * counted in src_held() until the worker freed it.
 */
#include "sn_pl_internal.h"

/* Arbiter half: hand m back to its worker with a verdict; parked (pend
 * has room for every frame the arbiter can hold) while the park is not
 * empty or the mailbox is full. */
void sn_pl_ret_push(struct sn_pl_arb *a, struct rte_mbuf *m, uint8_t kind, uint8_t cause)
{
	struct meta *md = meta_at(a->meta_off, m);

	md->ret_kind = kind;
	md->ret_cause = cause;
	ctr_add(&a->ctr[md->wk][md->src].returning, 1);
	if (a->n_pend || sn_mbox_insert(a->ret[md->wk], m)) {
		SN_VERIFY(a->n_pend < a->pend_cap);
		a->pend[a->n_pend++] = m;
	}
}

/* Arbiter half: move parked frames to their mailboxes, in order; 1 while
 * some stay parked. */
int sn_pl_ret_flush(struct sn_pl_arb *a)
{
	uint32_t i = 0;

	while (i < a->n_pend &&
	       sn_mbox_insert(a->ret[meta_at(a->meta_off, a->pend[i])->wk], a->pend[i]) == 0)
		i++;
	memmove(a->pend, a->pend + i, (a->n_pend - i) * sizeof(a->pend[0]));
	a->n_pend -= i;
	return a->n_pend != 0;
}

/* Arbiter half: count and free, or return a frame the worker must free. */
void sn_pl_a_drop(struct sn_pl_arb *a, struct rte_mbuf *m, enum sn_pipeline_drop cause)
{
	uint64_t pop;

	if (a->remote && sn_vqtx_of(m, &pop)) {
		sn_pl_ret_push(a, m, RET_DROP, (uint8_t)cause);
		return;
	}
	ctr_add(&actr_of(a, m)->st.drop[cause], 1);
	rte_pktmbuf_free(m);
}

/* The stock-guest fallback of a frame found past its deadline (see
 * deferred_drop): true if it was dropped for want of an mbuf. */
static bool copy_late(struct sn_pl_arb *a, struct rte_mbuf **mp)
{
	struct rte_mbuf *m = *mp, *c;

	if (a && a->remote) {
		/* the copy here, the original's free on its worker */
		c = rte_pktmbuf_copy(m, m->pool, 0, UINT32_MAX);
		sn_pl_ret_push(a, m, RET_COPIED, c ? 0 : 1);
		*mp = c;
		return c == NULL;
	}
	c = sn_vqtx_copy_out(m);
	*mp = c;
	return c == NULL;
}

__rte_noinline bool sn_pl_deferred_drop_slow(struct sn_pipeline *pl, struct sn_pl_arb *a,
					     struct rte_mbuf **mp, struct sn_vqtx *q,
					     enum sn_vqtx_verdict v)
{
	const enum sn_pipeline_drop cause = v == SN_VQTX_STOPPING ? SN_PL_DROP_SRC_STOP
								  : SN_PL_DROP_HOLD;
	struct rte_mbuf *m = *mp;

	if (cause == SN_PL_DROP_HOLD && sn_vqtx_is_stock(m)) {
		struct sn_pipeline_port_stats *st = side_st(pl, a, m);

		if (!copy_late(a, mp))
			return false;
		if (!(a && a->remote))
			ctr_add(&st->drop[SN_PL_DROP_NO_MBUF], 1);
		return true;
	}
	if (a && a->remote) {
		sn_pl_ret_push(a, m, RET_DROP, (uint8_t)cause);
		return true;
	}
	if (cause == SN_PL_DROP_SRC_STOP)
		sn_vqtx_count_forced(q);
	else
		sn_vqtx_count_timeout(q);
	if (a)
		sn_pl_a_drop(a, m, cause);
	else
		drop(pl, m, cause);
	return true;
}

/* Worker half: one frame the arbiter handed back. */
void sn_pl_ret_handle(struct sn_pipeline *pl, struct rte_mbuf *m)
{
	struct meta *md = meta_of(pl, m);
	struct wslot *ps = &pl->ps[md->src];
	struct sn_vqtx *q;
	uint64_t pop;

	switch (md->ret_kind) {
	case RET_GSO:
		sn_pl_uplink_tx(pl, NULL, &m, 1, NULL);
		break;
	case RET_COPIED:   /* stock-guest fallback: copied (cause 0) or not */
		q = sn_vqtx_of(m, &pop);
		if (q)
			sn_vqtx_count_copied(q, md->ret_cause == 0);
		if (md->ret_cause == 0)
			rte_pktmbuf_free(m);
		else
			drop(pl, m, SN_PL_DROP_NO_MBUF);
		break;
	case RET_DROP:
		q = sn_vqtx_of(m, &pop);
		if (md->ret_cause & RET_PURGED) {
			md->ret_cause &= (uint8_t)~RET_PURGED;
			if (q)
				sn_vqtx_count_purged(q, SN_VQTX_PURGED_SCHED);
		}
		if (q && md->ret_cause == SN_PL_DROP_SRC_STOP)
			sn_vqtx_count_forced(q);
		else if (q && md->ret_cause == SN_PL_DROP_HOLD)
			sn_vqtx_count_timeout(q);
		drop(pl, m, (enum sn_pipeline_drop)md->ret_cause);
		break;
	default:   /* RET_SENT: its copy went out; complete it */
		rte_pktmbuf_free(m);
		break;
	}
	/* After the free: src_held() keeps the port held until the
	 * descriptor is completed. */
	ctr_add(&ps->returned, 1);
}

/* Worker half: take back everything in the return mailbox. */
void sn_pl_ret_service(struct sn_pipeline *pl)
{
	void *items[BATCH];
	uint32_t got;

	do {
		got = sn_mbox_extract_burst(pl->ret, items, BATCH);
		if (got)
			seq_counting(pl);   /* drops, GSO uplink copies */
		for (uint32_t i = 0; i < got; i++)
			sn_pl_ret_handle(pl, items[i]);
	} while (got == BATCH);
}
