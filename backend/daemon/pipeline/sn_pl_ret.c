/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_pl_ret.c — the return mailbox (arbiter -> worker) and the drops of either half. */
#include "sn_pl_internal.h"

/* Arbiter half: hand m back to the worker with a verdict. The return
 * mailbox is SPSC (this thread -> worker); when it is full the frame is
 * parked (pend has room for every frame the arbiter can hold) and the
 * arbiter stops scanning until sn_pl_ret_flush() emptied the park. */
void sn_pl_ret_push(struct sn_pipeline *pl, struct rte_mbuf *m, uint8_t kind, uint8_t cause)
{
	struct meta *md = meta_of(pl, m);

	md->ret_kind = kind;
	md->ret_cause = cause;
	ctr_add(&owner_of(pl, m)->ps[md->src].a_returning, 1);
	if (pl->n_pend || sn_mbox_insert(owner_of(pl, m)->ret, m)) {
		SN_VERIFY(pl->n_pend < pl->pend_cap);
		pl->pend[pl->n_pend++] = m;
	}
}

/* Arbiter half: 1 while frames stay parked. */
int sn_pl_ret_flush(struct sn_pipeline *pl)
{
	uint32_t i = 0;

	while (i < pl->n_pend && sn_mbox_insert(owner_of(pl, pl->pend[i])->ret, pl->pend[i]) == 0)
		i++;
	memmove(pl->pend, pl->pend + i, (pl->n_pend - i) * sizeof(pl->pend[0]));
	pl->n_pend -= i;
	return pl->n_pend != 0;
}

/* Arbiter half: count and free, or return a frame the worker must free. */
void sn_pl_a_drop(struct sn_pipeline *pl, struct rte_mbuf *m, enum sn_pipeline_drop cause)
{
	struct meta *md = meta_of(pl, m);
	uint64_t pop;

	if (pl->arb_remote && sn_vqtx_of(m, &pop)) {
		sn_pl_ret_push(pl, m, RET_DROP, (uint8_t)cause);
		return;
	}
	ctr_add(&owner_of(pl, m)->ps[md->src].ast.drop[cause], 1);
	rte_pktmbuf_free(m);
}

void sn_pl_deferred_drop_slow(struct sn_pipeline *pl, struct rte_mbuf *m,
					      bool arb, struct sn_vqtx *q,
					      enum sn_vqtx_verdict v)
{
	const enum sn_pipeline_drop cause = v == SN_VQTX_STOPPING ? SN_PL_DROP_SRC_STOP
								  : SN_PL_DROP_HOLD;

	if (arb && pl->arb_remote) {
		sn_pl_ret_push(pl, m, RET_DROP, (uint8_t)cause);
		return;
	}
	if (cause == SN_PL_DROP_SRC_STOP)
		sn_vqtx_count_forced(q);
	else
		sn_vqtx_count_timeout(q);
	if (arb)
		sn_pl_a_drop(pl, m, cause);
	else
		drop(pl, m, cause);
}

/* Worker half: one frame a remote arbiter handed back ("Two halves"). */
void sn_pl_ret_handle(struct sn_pipeline *pl, struct rte_mbuf *m)
{
	struct meta *md = meta_of(pl, m);
	struct pstate *ps = &pl->ps[md->src];
	struct sn_vqtx *q;
	uint64_t pop;

	switch (md->ret_kind) {
	case RET_GSO:
		sn_pl_uplink_tx(pl, &m, 1, false, NULL);
		break;
	case RET_DROP:
		q = sn_vqtx_of(m, &pop);
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
	ctr_add(&ps->w_returned, 1);
}

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
