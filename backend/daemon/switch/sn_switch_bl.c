/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_switch_bl.c — the backlogs of a worker (sn_switch.c, "Deferred-
 * completion ports"): deferred frames waiting for a full vhost
 * destination, FIFO per destination, with the source slot of each frame
 * beside it, so that each source's entries over all backlogs of the
 * worker (bl_src) stay within its backlog quota (sn_switch.h) and leave
 * its count on every path out: delivered, dropped, expired, purged.
 * Worker only. */
#include "sn_switch_impl.h"

#include <assert.h>
#include <stdbool.h>
#include <string.h>

#include <rte_mbuf.h>

#include "sn_port.h"
#include "sn_vqtx.h"

#define SN_MIN_U(a, b) ((a) < (b) ? (a) : (b))
#define BACKLOG_MAX SN_SWITCH_BACKLOG_MAX

static_assert(SN_PORT_SLOTS_MAX <= 64 * 64, "bl_any: one bit per bl_busy word");

void sn_switch_bl_push(struct sn_switch *sw, struct sn_switch_backlog *b, const struct sn_port *dst,
		       struct rte_mbuf *m, uint16_t src, uint64_t deadline)
{
	uint32_t i;

	sw->bl_busy[dst->slot / 64] |= 1ULL << (dst->slot % 64);
	sw->bl_any |= 1ULL << (dst->slot / 64);
	if (b->n == 0) {
		b->gen = dst->gen;
		b->head = 0;
		b->next_check = UINT64_MAX;
	}
	rte_pktmbuf_refcnt_update(m, 1);   /* every segment, see stage_add() */
	i = (b->head + b->n++) & (BACKLOG_MAX - 1);
	b->m[i] = m;
	b->src[i] = src;
	sw->bl_src[src]++;
	if (deadline < b->next_check)
		b->next_check = deadline;
}

/* After a partial enqueue of a[0, cnt) reordered it (MQ: taken frames
 * first, the rest grouped by RX queue), put each frame's source slot back
 * beside it: om / os are the frames and sources before the enqueue. Only
 * on a full multiqueue destination. */
static void bl_resync_src(struct rte_mbuf **a, uint16_t *sa, uint16_t cnt,
			  struct rte_mbuf *const *om, const uint16_t *os)
{
	bool used[SN_CONFIG_BURST_MAX] = { false };

	for (uint16_t j = 0; j < cnt; j++)
		for (uint16_t i = 0; i < cnt; i++)
			if (!used[i] && om[i] == a[j]) {
				used[i] = true;
				sa[j] = os[i];
				break;
			}
}

/* See sn_switch_impl.h. */
void sn_switch_bl_drain(struct sn_switch *sw, struct sn_switch_backlog *b, struct sn_port *p)
{
	while (b->n) {
		uint16_t cnt = (uint16_t)SN_MIN_U(SN_MIN_U(b->n, BACKLOG_MAX - b->head),
						  SN_CONFIG_BURST_MAX);
		struct rte_mbuf **a = &b->m[b->head];
		uint16_t *sa = &b->src[b->head];
		struct rte_mbuf *om[SN_CONFIG_BURST_MAX];
		uint16_t os[SN_CONFIG_BURST_MAX];
		uint64_t bytes = 0;
		uint16_t k;

		memcpy(om, a, cnt * sizeof(a[0]));
		memcpy(os, sa, cnt * sizeof(sa[0]));
		k = sn_port_vhost_enqueue_bytes(p, a, cnt, &bytes);  /* MQ: reorders a */
		/* all taken: every source in os leaves; else MQ may have
		 * regrouped the frames by RX queue, even with none taken */
		if (k < cnt && memcmp(a, om, cnt * sizeof(a[0])))
			bl_resync_src(a, sa, cnt, om, os);
		for (uint16_t j = 0; j < k; j++)
			sw->bl_src[sa[j]]--;
		sn_port_ctr_add(&p->st.tx_packets, k);
		sn_port_ctr_add(&p->st.tx_bytes, bytes);
		rte_pktmbuf_free_bulk(a, k);
		b->head = (b->head + k) & (BACKLOG_MAX - 1);
		b->n -= k;
		if (k < cnt)
			break;
	}
}

/* Drop the frames for which drop(m) holds (freeing completes them); the
 * rest keeps its order. Returns how many were dropped. */
static unsigned bl_filter(struct sn_switch *sw, struct sn_switch_backlog *b,
			  bool (*drop)(struct rte_mbuf *, void *), void *arg)
{
	uint32_t keep = 0, n = b->n, dropped = 0;
	uint64_t next = UINT64_MAX;

	for (uint32_t i = 0; i < n; i++) {
		struct rte_mbuf *m = b->m[(b->head + i) & (BACKLOG_MAX - 1)];
		const uint16_t src = b->src[(b->head + i) & (BACKLOG_MAX - 1)];
		uint64_t pop;

		if (drop(m, arg)) {
			rte_pktmbuf_free(m);
			sw->bl_src[src]--;
			dropped++;
			continue;
		}
		if (sn_vqtx_of(m, &pop)) {
			uint64_t d = sn_vqtx_deadline(sn_vqtx_of(m, &pop), pop);

			next = d < next ? d : next;
		}
		b->src[(b->head + keep) & (BACKLOG_MAX - 1)] = src;
		b->m[(b->head + keep++) & (BACKLOG_MAX - 1)] = m;
	}
	b->n = keep;
	b->next_check = next;
	return dropped;
}

static bool drop_all(struct rte_mbuf *m, void *arg)
{
	(void)m, (void)arg;
	return true;
}

/* The destination port was deleted: no port counter is left to count the
 * frame on, so it is counted on its source queue (every backlogged frame is
 * a deferred one: sn_vqtx_of is never NULL here, see flush()). */
static bool drop_dest_deleted(struct rte_mbuf *m, void *arg)
{
	uint64_t pop;
	struct sn_vqtx *q = sn_vqtx_of(m, &pop);

	(void)arg;
	if (q)
		sn_vqtx_count_dest_deleted(q);
	return true;
}

static bool drop_expired(struct rte_mbuf *m, void *arg)
{
	uint64_t pop, now = *(const uint64_t *)arg;
	struct sn_vqtx *q = sn_vqtx_of(m, &pop);

	if (!q || sn_vqtx_deadline(q, pop) > now)
		return false;
	sn_vqtx_count_timeout(q);
	return true;
}

/* The stock-guest fallback (sn_vqtx_copy_out): a frame of a guest that
 * did not opt in, past its hold limit, is copied in its place and goes on
 * waiting (its descriptor is completed); without an mbuf for the copy it
 * is dropped (counted as copy_no_mbuf). Before drop_expired, which then
 * finds only opted-in frames past their limit. */
static void bl_copy_expired(struct sn_switch *sw, struct sn_switch_backlog *b, uint64_t now)
{
	uint32_t keep = 0, n = b->n;

	for (uint32_t i = 0; i < n; i++) {
		struct rte_mbuf *m = b->m[(b->head + i) & (BACKLOG_MAX - 1)];
		const uint16_t src = b->src[(b->head + i) & (BACKLOG_MAX - 1)];
		uint64_t pop;
		struct sn_vqtx *q = sn_vqtx_of(m, &pop);

		if (q && sn_vqtx_is_stock(m) && sn_vqtx_deadline(q, pop) <= now) {
			m = sn_vqtx_copy_out(m);
			if (!m) {
				sw->bl_src[src]--;
				continue;
			}
		}
		b->src[(b->head + keep) & (BACKLOG_MAX - 1)] = src;
		b->m[(b->head + keep++) & (BACKLOG_MAX - 1)] = m;
	}
	b->n = keep;
}

static bool drop_of_queue(struct rte_mbuf *m, void *arg)
{
	uint64_t pop;

	if (sn_vqtx_of(m, &pop) != arg)
		return false;
	sn_vqtx_count_forced(arg);
	sn_vqtx_count_purged(arg, SN_VQTX_PURGED_BACKLOG);
	return true;
}

/* sn_switch_bl_service() for the backlogs of bl_busy[w]. */
static void bl_service_word(struct sn_switch *sw, const struct sn_port_table *t, uint64_t now,
			    unsigned w)
{
	for (uint64_t busy = sw->bl_busy[w]; busy; busy &= busy - 1) {
		unsigned i = w * 64 + (unsigned)__builtin_ctzll(busy);
		struct sn_switch_backlog *b = &sw->bl[i];
		struct sn_port *p;

		if (!b->n) {
			sw->bl_busy[w] &= ~(1ULL << (i % 64));
			continue;
		}
		p = t->by_slot[i];
		if (!p || p->gen != b->gen) {
			bl_filter(sw, b, drop_dest_deleted, NULL);  /* port deleted */
			continue;
		}
		if (!sn_port_is_up(p)) {
			sn_port_ctr_add(&p->st.drop[SN_DROP_PORT_DOWN], bl_filter(sw, b, drop_all, NULL));
			continue;
		}
		sn_switch_bl_drain(sw, b, p);
		if (b->n && now >= b->next_check) {
			bl_copy_expired(sw, b, now);
			bl_filter(sw, b, drop_expired, &now);
		}
	}
}

/* Every iteration: deliver, expire, or drop backlogs of vanished or down
 * destinations. */
void sn_switch_bl_service(struct sn_switch *sw, const struct sn_port_table *t, uint64_t now)
{
	for (uint64_t words = sw->bl_any; words; words &= words - 1) {
		unsigned w = (unsigned)__builtin_ctzll(words);

		bl_service_word(sw, t, now, w);
		if (!sw->bl_busy[w])
			sw->bl_any &= ~(1ULL << w);
	}
}

/* A deferred port is stopping: none of its frames may stay with us. */
void sn_switch_bl_purge_queue(struct sn_switch *sw, struct sn_vqtx *q)
{
	for (uint64_t words = sw->bl_any; words; words &= words - 1) {
		unsigned w = (unsigned)__builtin_ctzll(words);

		for (uint64_t busy = sw->bl_busy[w]; busy; busy &= busy - 1) {
			unsigned i = w * 64 + (unsigned)__builtin_ctzll(busy);

			if (sw->bl[i].n)
				bl_filter(sw, &sw->bl[i], drop_of_queue, q);
		}
	}
}

void sn_switch_bl_drop_all(struct sn_switch *sw, struct sn_switch_backlog *b)
{
	bl_filter(sw, b, drop_all, NULL);
}

uint32_t sn_switch_backlog_quota_auto(unsigned n_slots, unsigned burst)
{
	const uint32_t reserve = 2u * (burst ? burst : 1);

	if (n_slots <= 2 || reserve >= BACKLOG_MAX / 2)
		return n_slots <= 2 ? BACKLOG_MAX : BACKLOG_MAX / 2;
	return BACKLOG_MAX - reserve;
}
