/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_pl_stats.c — counters: publication and the *_stats readers. */
#include "sn_pl_internal.h"

/* Arbiter half: its arbiter's counters, for sn_pipeline_arbiter_stats(). */
void sn_pl_publish_arb_stats(struct sn_pl_arb *a)
{
	struct sn_arbiter_stats as;
	const uint64_t *src = (const uint64_t *)&as;
	uint64_t *dst = (uint64_t *)&a->arb_st;

	static_assert(sizeof(as) % sizeof(uint64_t) == 0, "stats are u64 fields");
	sn_arbiter_get_stats(a->aset->arb, &as);
	for (size_t i = 0; i < sizeof(as) / sizeof(uint64_t); i++)
		ctr_set(&dst[i], src[i]);
	ctr_set(&a->arb_backlog, sn_arbiter_backlog(a->aset->arb));
}

/* Worker half: fair dropping stats (its state is the worker's). */
void sn_pl_publish_fair_stats(struct sn_pipeline *pl)
{
	struct sn_fdrop_stats f;

	if (!pl->fd)
		return;
	sn_fdrop_stats(pl->fd, &f);
	ctr_set(&pl->fair_st.kept, f.kept);
	ctr_set(&pl->fair_st.dropped, f.dropped[SN_FDROP_C_FAIR]);
	ctr_set(&pl->fair_st.table_full, f.dropped[SN_FDROP_C_TABLE_FULL] +
		f.dropped[SN_FDROP_C_INVALID]);
	ctr_set(&pl->fair_st.active, f.active);
	ctr_set(&pl->fair_st.theta, f.theta);
}

int sn_pipeline_port_stats(const struct sn_pipeline *pl, const struct sn_port *p,
			   struct sn_pipeline_port_stats *out)
{
	uint64_t *dst = (uint64_t *)out;
	bool found = false;

	static_assert(sizeof(*out) % sizeof(uint64_t) == 0, "stats are u64 fields");
	memset(out, 0, sizeof(*out));
	for (unsigned k = 0; k < pl->n_wk; k++) {
		const struct wslot *ps = &pl->sh->wk[k]->ps[p->slot];
		const uint64_t *w = (const uint64_t *)&ps->st;
		const uint64_t *a = (const uint64_t *)&pl->arb->ctr[k][p->slot].st;

		/* gen/shaped are worker-private; a relaxed read is enough for
		 * a report (a stale answer is as good as one a moment
		 * earlier). A worker that has not applied the port yet adds
		 * nothing. */
		if (__atomic_load_n(&ps->gen, __ATOMIC_RELAXED) != p->gen ||
		    !__atomic_load_n(&ps->shaped, __ATOMIC_RELAXED))
			continue;
		found = true;
		/* Each counter is the sum over the workers of the worker's
		 * and the arbiter's copy (modulo 2^64: qfq_backlog is +1 on
		 * one side, -1 on the other); rate_bps and weight are the
		 * policy's, the same in every worker. */
		for (size_t i = 0; i < sizeof(*out) / sizeof(uint64_t); i++) {
			uint64_t v = __atomic_load_n(&w[i], __ATOMIC_RELAXED) +
				     __atomic_load_n(&a[i], __ATOMIC_RELAXED);

			if (&dst[i] == &out->rate_bps || &dst[i] == &out->weight ||
			    &dst[i] == &out->in_rate_bps || &dst[i] == &out->in_peak_bps)
				dst[i] = v;
			else
				dst[i] += v;
		}
		out->flow_entries += sn_classify_port_flows(pl->sh->wk[k]->cls, p->slot);
		out->quota_flows += sn_classify_quota_flows(pl->sh->wk[k]->cls, p->slot);
	}
	return found ? 0 : -ENOENT;
}

void sn_pipeline_arbiter_stats(const struct sn_pipeline *pl, struct sn_arbiter_stats *out,
			       uint64_t *backlog)
{
	const uint64_t *src = (const uint64_t *)&pl->arb->arb_st;
	uint64_t *dst = (uint64_t *)out;

	for (size_t i = 0; i < sizeof(*out) / sizeof(uint64_t); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
	*backlog = __atomic_load_n(&pl->arb->arb_backlog, __ATOMIC_RELAXED);
}

void sn_pipeline_thread_stats(const struct sn_pipeline *pl, struct sn_pipeline_thread_stats *worker,
			      struct sn_pipeline_thread_stats *arbiter)
{
	memset(worker, 0, sizeof(*worker));
	for (unsigned k = 0; k < pl->n_wk; k++) {   /* summed over the workers */
		const struct sn_pipeline *w = pl->sh->wk[k];

		worker->loops += __atomic_load_n(&w->wts.loops, __ATOMIC_RELAXED);
		worker->sleeps += __atomic_load_n(&w->wts.sleeps, __ATOMIC_RELAXED);
		worker->sleep_ns += __atomic_load_n(&w->wts.sleep_ns, __ATOMIC_RELAXED);
	}
	arbiter->loops = __atomic_load_n(&pl->arb->ats.loops, __ATOMIC_RELAXED);
	arbiter->sleeps = __atomic_load_n(&pl->arb->ats.sleeps, __ATOMIC_RELAXED);
	arbiter->sleep_ns = __atomic_load_n(&pl->arb->ats.sleep_ns, __ATOMIC_RELAXED);
}

void sn_pipeline_worker_thread_stats(const struct sn_pipeline *pl, unsigned k,
				     struct sn_pipeline_thread_stats *out)
{
	const struct sn_pipeline *w = sn_pipeline_worker(pl, k);

	memset(out, 0, sizeof(*out));
	if (!w)
		return;
	out->loops = __atomic_load_n(&w->wts.loops, __ATOMIC_RELAXED);
	out->sleeps = __atomic_load_n(&w->wts.sleeps, __ATOMIC_RELAXED);
	out->sleep_ns = __atomic_load_n(&w->wts.sleep_ns, __ATOMIC_RELAXED);
}

void sn_pipeline_uplink_tx(const struct sn_pipeline *pl, struct sn_pipeline_uplink_tx *out)
{
	out->tx_packets = __atomic_load_n(&pl->arb->up.tx_packets, __ATOMIC_RELAXED);
	out->tx_bytes = __atomic_load_n(&pl->arb->up.tx_bytes, __ATOMIC_RELAXED);
	out->ring_full = __atomic_load_n(&pl->arb->up.ring_full, __ATOMIC_RELAXED);
}

uint64_t sn_pipeline_clock_ns(const struct sn_pipeline *pl)
{
	return __atomic_load_n(&pl->clock_ns, __ATOMIC_RELAXED);
}

uint64_t sn_pipeline_arbiter_clock_ns(const struct sn_pipeline *pl)
{
	return __atomic_load_n(&pl->arb->clock_ns, __ATOMIC_RELAXED);
}

const struct sn_classify *sn_pipeline_classify(const struct sn_pipeline *pl)
{
	return pl->cls;
}

const struct sn_classify *sn_pipeline_classify_of(const struct sn_pipeline *pl, unsigned k)
{
	return k < pl->n_wk ? pl->sh->wk[k]->cls : NULL;
}

void sn_pipeline_class_uplink(const struct sn_pipeline *pl, uint16_t slot, unsigned cls,
			      uint64_t *packets, uint64_t *bytes)
{
	*packets = *bytes = 0;
	if (slot >= sn_config_port_slots || cls >= SN_POLICY_CLASSES_MAX)
		return;
	*packets = __atomic_load_n(&pl->arb->slot[slot].clup[cls][0], __ATOMIC_RELAXED);
	*bytes = __atomic_load_n(&pl->arb->slot[slot].clup[cls][1], __ATOMIC_RELAXED);
}

void sn_pipeline_fair_stats(const struct sn_pipeline *pl, struct sn_pipeline_fair_stats *out)
{
	memset(out, 0, sizeof(*out));
	/* One fair dropper per worker: counters summed, on/theta the same. */
	for (unsigned k = 0; k < pl->n_wk; k++) {
		const struct sn_pipeline_fair_stats *f = &pl->sh->wk[k]->fair_st;

		out->on = __atomic_load_n(&f->on, __ATOMIC_RELAXED);
		out->theta = __atomic_load_n(&f->theta, __ATOMIC_RELAXED);
		out->kept += __atomic_load_n(&f->kept, __ATOMIC_RELAXED);
		out->dropped += __atomic_load_n(&f->dropped, __ATOMIC_RELAXED);
		out->table_full += __atomic_load_n(&f->table_full, __ATOMIC_RELAXED);
		out->active += __atomic_load_n(&f->active, __ATOMIC_RELAXED);
	}
}

uint64_t sn_pipeline_run_seq(const struct sn_pipeline *pl)
{
	return __atomic_load_n(&pl->run_seq, __ATOMIC_ACQUIRE);
}
