/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_arbiter.c — PSPAT arbiter: do_scan() and leaky-bucket link emulation.
 *
 * Follows L. Rizzo, P. Valente, G. Lettieri, V. Maffione, "PSPAT: software
 * packet scheduling at hardware speed", Computer Communications 2018,
 * §3.4 and Fig. 5.
 *
 * Input. Each client list is drained completely (bounded by its size);
 * every mailbox taken from it is marked active, and so is the one it
 * replaces as "last" (items inserted before the newer append are visible
 * once the newer entry is: the producer wrote them first, and the list's
 * release/acquire pair orders them). The last entry is reactivated every
 * scan — PSPAT's "trim leaving the last entry", which is what lets a busy
 * client skip the list append. Active mailboxes are read up to Δ_A items
 * each; one that still had items stays active, the others leave the set
 * until a list names them again. An append lost to a full list raises the
 * list's overflow flag, and the next scan activates every client once.
 *
 * Link. link_idle is the time the emulated link finishes the last item
 * released, i.e. when the next one may start. While link_idle <= now (an
 * item may start at exactly now; PSPAT writes "<" on a coarser clock) the
 * scheduler picks the next item and link_idle advances by
 * (len + overhead) * 8e9 / link_bps ns. The loop runs inside the scheduler
 * (sn_sched_dequeue_burst), given the number of bytes that may still start
 * by now (link_budget, exact), and link_idle advances once per burst by
 * the bytes taken: the same items, the same link_idle. The advance is
 * exact: the integer quotient is added and the remainder (in units of
 * 1/link_bps ns) carried, so release times never drift from the ideal
 * line. The division uses a precomputed reciprocal and an exact correction
 * step (two multiplies, no divide instruction: lengths vary per packet).
 *
 * Idle credit. When the scheduler has run empty, the link went idle at
 * that scan's now (Fig. 5 line 14: link_idle = t_now of the scan that
 * found the scheduler empty), so items found by the next scan may start
 * from there: a burst arriving between two scans leaves in one scan
 * rather than one item now and the rest a scan later (at 400 Gbit/s an
 * 88-byte item is 1.76 ns of link, so without the credit a 1-core worker
 * would release 1 and 63 items in alternate iterations). The credit is
 * capped by idle_credit_ns (0: none), so a long gap between scans (a
 * sleeping arbiter) earns no more than that. Scans that come late while
 * backlogged let the link catch up by at most slack_ns: beyond that
 * link_idle resets to now, so a stalled arbiter never bursts more than
 * slack_ns worth of traffic.
 *
 * Everything here runs on the arbiter thread; the only shared memory is the
 * mailboxes and lists, whose contract is in sn_mbox.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sn_arbiter.h"

#define DEFAULT_READ_LIMIT    64u
#define DEFAULT_CLIST_SIZE    256u
#define DEFAULT_RELEASE_BURST 64u
#define DRAIN_CHUNK           64u

struct sn_arbiter_client {
	struct sn_mbox *mb;
	uint32_t class_id;
	uint32_t index;
	uint8_t active;          /* in arb->active[] */
	uint8_t dead;            /* deleted; kept for stale client-list entries */
};

struct sn_arbiter {
	/* Hot: every scan. */
	struct sn_sched *sched;
	uint64_t link_idle;      /* ns */
	uint64_t link_rem;       /* fraction of a ns, in 1/link_bps ns */
	uint64_t link_bps;
	uint64_t slack_ns;
	uint64_t idle_credit_ns;
	uint64_t empty_at;       /* now of the last scan that found the scheduler empty */
	int link_was_idle;       /* the scheduler ran empty in an earlier scan */
	uint32_t overhead;
	uint32_t read_limit;
	uint64_t inv_bps;        /* floor((2^64 - 1) / link_bps), for exact division */
	uint32_t (*item_len)(const void *item, void *arg);
	uint32_t len_offset;
	void (*release)(void *const *items, uint32_t n, void *arg);
	void (*drop)(void *item, enum sn_arbiter_drop cause, void *arg);
	int (*oversize)(uint32_t class_id, uint32_t len, void *arg);
	void *cb_arg;

	uint32_t n_active;
	uint32_t *active;        /* client indices */
	uint32_t n_clients;      /* registered so far, dead included */
	uint32_t max_clients;
	struct sn_arbiter_client *clients;
	uint32_t n_clists;
	uint32_t clist_size;
	struct sn_mbox **clists;

	uint32_t release_burst;
	uint32_t n_rel;
	void **rel;
	uint32_t *lens;          /* release_burst lengths (sn_sched_dequeue_burst) */

	/* local_pass: a local burst that found the scheduler empty,
	 * held in rel[0 .. lp_n) with its lengths in lens[] until the next
	 * scan passes it through the scheduler (sn_sched_pass_burst) or
	 * anything that reads or changes the scheduler first puts it there
	 * (lp_flush). Counted in the stats as enqueued when held. */
	int local_pass;          /* local_only, and the algorithm has a pass */
	uint32_t lp_n;
	uint32_t lp_lo, lp_hi;   /* its least and greatest length */
	struct sn_arbiter_client *lp_c;

	uint64_t last_in;        /* items read in the last scan */
	uint64_t last_released;
	struct sn_arbiter_stats st;
};

static int link_params_ok(uint64_t bps, uint32_t overhead)
{
	return bps >= 1 && bps <= SN_ARBITER_MAX_LINK_BPS &&
	       overhead <= SN_ARBITER_MAX_OVERHEAD;
}

struct sn_arbiter *sn_arbiter_create(const struct sn_arbiter_params *p, uint64_t now_ns)
{
	struct sn_arbiter *arb;
	uint32_t i;
	int err = ENOMEM;

	if (p == NULL || !p->release || !p->drop ||
	    !link_params_ok(p->link_bps, p->overhead_bytes) ||
	    p->read_limit > SN_ARBITER_MAX_READ_LIMIT || p->max_clients == 0 ||
	    p->max_clients > (1u << 24) || p->n_clists == 0 || p->n_clists > 4096 ||
	    p->release_burst > 4096 || p->idle_credit_ns > SN_ARBITER_MAX_IDLE_CREDIT_NS ||
	    (p->clist_size && (!sn_is_pow2(p->clist_size) || p->clist_size < SN_MBOX_MIN_SIZE))) {
		errno = EINVAL;
		return NULL;
	}
	arb = calloc(1, sizeof(*arb));
	if (arb == NULL)
		goto fail;
	arb->link_idle = now_ns;
	arb->empty_at = now_ns;
	arb->link_was_idle = 1;
	arb->link_bps = p->link_bps;
	arb->inv_bps = UINT64_MAX / p->link_bps;
	arb->overhead = p->overhead_bytes;
	arb->slack_ns = p->slack_ns;
	arb->idle_credit_ns = p->idle_credit_ns;
	arb->read_limit = p->read_limit ? p->read_limit : DEFAULT_READ_LIMIT;
	arb->item_len = p->item_len;
	arb->len_offset = p->len_offset;
	arb->release = p->release;
	arb->drop = p->drop;
	arb->oversize = p->oversize;
	arb->cb_arg = p->cb_arg;
	arb->max_clients = p->max_clients;
	arb->n_clists = p->n_clists;
	arb->clist_size = p->clist_size ? p->clist_size : DEFAULT_CLIST_SIZE;
	arb->release_burst = p->release_burst ? p->release_burst : DEFAULT_RELEASE_BURST;

	arb->active = calloc(p->max_clients, sizeof(*arb->active));
	arb->clients = calloc(p->max_clients, sizeof(*arb->clients));
	arb->clists = calloc(p->n_clists, sizeof(*arb->clists));
	arb->rel = calloc(arb->release_burst, sizeof(*arb->rel));
	arb->lens = calloc(arb->release_burst, sizeof(*arb->lens));
	if (!arb->active || !arb->clients || !arb->clists || !arb->rel || !arb->lens)
		goto fail_free;
	for (i = 0; i < arb->n_clists; i++) {
		arb->clists[i] = sn_mbox_create(arb->clist_size, NULL);
		if (arb->clists[i] == NULL) {
			err = errno;
			goto fail_free;
		}
	}
	arb->sched = sn_sched_create(&p->sched);
	if (arb->sched == NULL) {
		err = errno;
		goto fail_free;
	}
	/* only an algorithm with a pass holds local bursts */
	arb->local_pass = p->local_only && sn_sched_has_pass(arb->sched);
	return arb;

fail_free:
	sn_arbiter_free(arb);
fail:
	errno = err;
	return NULL;
}

void sn_arbiter_free(struct sn_arbiter *arb)
{
	uint32_t i;

	if (arb == NULL)
		return;
	if (arb->clists)
		for (i = 0; i < arb->n_clists; i++)
			sn_mbox_free(arb->clists[i]);
	if (arb->clients)
		for (i = 0; i < arb->n_clients; i++)
			sn_mbox_free(arb->clients[i].mb);
	if (arb->sched)
		sn_sched_free(arb->sched);
	free(arb->clists);
	free(arb->clients);
	free(arb->active);
	free(arb->rel);
	free(arb->lens);
	free(arb);
}

static uint32_t enqueue_chunk(struct sn_arbiter *arb, struct sn_arbiter_client *c,
			      void *const *buf, uint32_t k);

/* The held local burst into the scheduler, as sn_arbiter_enqueue_local
 * would have put it there (its counters were taken when it was held).
 * Drop callbacks of that enqueue (none: the burst was admitted whole)
 * must not call enqueue_local (rel is its source). */
static void lp_flush(struct sn_arbiter *arb)
{
	uint32_t n = arb->lp_n;

	arb->lp_n = 0;
	for (uint32_t i = 0; i < n; i += DRAIN_CHUNK)
		(void)enqueue_chunk(arb, arb->lp_c, arb->rel + i, SN_MIN(n - i, DRAIN_CHUNK));
}

/* Items in the scheduler, the held local burst included. */
static inline uint64_t backlog(const struct sn_arbiter *arb)
{
	return sn_sched_backlog(arb->sched) + arb->lp_n;
}

struct sn_sched *sn_arbiter_sched(struct sn_arbiter *arb)
{
	lp_flush(arb);
	return arb->sched;
}

struct sn_arbiter_client *sn_arbiter_client_add(struct sn_arbiter *arb, uint32_t class_id,
						uint32_t mbox_size)
{
	struct sn_arbiter_client *c;

	if (arb->n_clients == arb->max_clients) {
		errno = ENOSPC;
		return NULL;
	}
	c = &arb->clients[arb->n_clients];
	memset(c, 0, sizeof(*c));
	c->mb = sn_mbox_create(mbox_size, c);
	if (c->mb == NULL)
		return NULL;             /* errno from sn_mbox_create */
	c->class_id = class_id;
	c->index = arb->n_clients++;
	return c;
}

static int client_ok(const struct sn_arbiter *arb, const struct sn_arbiter_client *c)
{
	return c != NULL && c >= arb->clients && c < arb->clients + arb->n_clients && !c->dead;
}

int sn_arbiter_client_set_class(struct sn_arbiter *arb, struct sn_arbiter_client *c,
				uint32_t class_id)
{
	if (!client_ok(arb, c))
		return -EINVAL;
	lp_flush(arb);
	c->class_id = class_id;
	return 0;
}

struct sn_mbox *sn_arbiter_client_mbox(const struct sn_arbiter_client *c) { return c->mb; }

struct sn_mbox *sn_arbiter_clist(const struct sn_arbiter *arb, uint32_t core)
{
	return core < arb->n_clists ? arb->clists[core] : NULL;
}

static void flush_release(struct sn_arbiter *arb)
{
	if (arb->n_rel) {
		arb->release(arb->rel, arb->n_rel, arb->cb_arg);
		arb->n_rel = 0;
	}
}

static void drop_item(struct sn_arbiter *arb, struct sn_arbiter_client *c, void *item,
		      enum sn_arbiter_drop cause)
{
	arb->st.dropped[cause]++;
	sn_mbox_bp_set(c->mb);
	arb->drop(item, cause, arb->cb_arg);
}

int sn_arbiter_client_del(struct sn_arbiter *arb, struct sn_arbiter_client *c)
{
	void *item;
	uint32_t i;

	if (!client_ok(arb, c))
		return -EINVAL;
	lp_flush(arb);
	while ((item = sn_mbox_extract(c->mb)) != NULL)
		drop_item(arb, c, item, SN_ARBITER_DROP_CLIENT_GONE);
	if (c->active) {
		for (i = 0; i < arb->n_active; i++)
			if (arb->active[i] == c->index) {
				arb->active[i] = arb->active[--arb->n_active];
				break;
			}
		c->active = 0;
	}
	c->dead = 1;
	return 0;
}

static inline void activate(struct sn_arbiter *arb, struct sn_arbiter_client *c)
{
	if (!c->active && !c->dead) {
		c->active = 1;
		arb->active[arb->n_active++] = c->index;
	}
}

static inline struct sn_arbiter_client *mbox_client(struct sn_mbox *mb)
{
	return (struct sn_arbiter_client *)sn_mbox_udata(mb);
}

static enum sn_arbiter_drop drop_cause(int r)
{
	return r == -ENOBUFS ? SN_ARBITER_DROP_QFULL :
	       r == -EMSGSIZE ? SN_ARBITER_DROP_BADLEN : SN_ARBITER_DROP_NOCLASS;
}

/* lens[i] = the length of buf[i], from the callback (fn) or the item at
 * len_offset; with range, *lo / *hi get the least and the greatest (in the
 * same pass: the local burst's admission test). */
static inline __attribute__((always_inline)) void
lens_loop(const struct sn_arbiter *arb, void *const *buf, uint32_t *lens, uint32_t k,
	  const bool range, const bool fn, uint32_t *lo, uint32_t *hi)
{
	/* read once, not per item (the store to lens[i] may alias them) */
	uint32_t (*const len_fn)(const void *, void *) = arb->item_len;
	void *const cb_arg = arb->cb_arg;
	const uint32_t off = arb->len_offset;
	uint32_t mn = UINT32_MAX, mx = 0;

	for (uint32_t i = 0; i < k; i++) {
		uint32_t l;

		if (fn)
			l = len_fn(buf[i], cb_arg);
		else
			memcpy(&l, (const char *)buf[i] + off, sizeof(l));
		lens[i] = l;
		if (range) {
			mn = SN_MIN(mn, l);
			mx = SN_MAX(mx, l);
		}
	}
	if (range) {
		*lo = mn;
		*hi = mx;
	}
}

/* lens_loop with the source chosen once (two loops, not a test per item:
 * the compiler kept that test in the loop) */
static inline __attribute__((always_inline)) void
item_lens(const struct sn_arbiter *arb, void *const *buf, uint32_t *lens, uint32_t k,
	  const bool range, uint32_t *lo, uint32_t *hi)
{
	if (arb->item_len)
		lens_loop(arb, buf, lens, k, range, true, lo, hi);
	else
		lens_loop(arb, buf, lens, k, range, false, lo, hi);
}

/* Feed k (<= DRAIN_CHUNK) items of client c into its scheduler class as
 * bursts; an item the scheduler refuses is dropped and counted, except
 * that one too long for its class is retried once if oversize() raised
 * the class lmax (see sn_arbiter_params.oversize). Returns how many went
 * into the scheduler. Shared by the mailbox drain and the local enqueue. */
static uint32_t enqueue_chunk(struct sn_arbiter *arb, struct sn_arbiter_client *c,
			      void *const *buf, uint32_t k)
{
	uint32_t lens[DRAIN_CHUNK];
	uint32_t enq = 0, class_id = c->class_id, i, retried;

	item_lens(arb, buf, lens, k, false, NULL, NULL);
	for (i = 0, retried = UINT32_MAX; i < k;) {
		int r = 0;
		uint32_t got = sn_sched_enqueue_burst(arb->sched, class_id, buf + i,
						      lens + i, k - i, &r);

		enq += got;
		i += got;
		if (i == k)
			break;
		if (r == -EMSGSIZE && arb->oversize && retried != i &&
		    arb->oversize(class_id, lens[i], arb->cb_arg) == 0) {
			arb->st.lmax_raises++;
			retried = i;
			continue;
		}
		drop_item(arb, c, buf[i++], drop_cause(r));
	}
	return enq;
}

/* Read up to read_limit items of one client into the scheduler; returns
 * how many were read. */
static uint32_t drain_client(struct sn_arbiter *arb, struct sn_arbiter_client *c)
{
	void *buf[DRAIN_CHUNK];
	uint32_t total = 0, enq = 0;

	while (total < arb->read_limit) {
		uint32_t want = SN_MIN(arb->read_limit - total, DRAIN_CHUNK);
		uint32_t k = sn_mbox_extract_burst(c->mb, buf, want);

		/* a mailbox item despite local_only: a held local burst came
		 * first (enqueue_local's call) */
		if (k && arb->lp_n)
			lp_flush(arb);
		enq += enqueue_chunk(arb, c, buf, k);
		total += k;
		if (k < want)
			break;
	}
	arb->st.enqueued += enq;
	return total;
}

static void scan_inputs(struct sn_arbiter *arb)
{
	uint64_t in = 0;
	uint32_t l, i;

	for (l = 0; l < arb->n_clists; l++) {
		struct sn_mbox *cl = arb->clists[l], *m;
		uint32_t n = 0;

		if (sn_mbox_cl_overflowed(cl)) {
			arb->st.clist_overflows++;
			for (i = 0; i < arb->n_clients; i++)
				activate(arb, &arb->clients[i]);
		}

		/* Bounded: a producer appending forever cannot stall the scan. */
		while (n++ < arb->clist_size) {
			struct sn_mbox *prev = sn_mbox_cl_last(cl);

			m = sn_mbox_cl_next(cl);
			if (m == NULL)
				break;
			if (prev != NULL && prev != m)
				activate(arb, mbox_client(prev));
		}
		m = sn_mbox_cl_last(cl);
		if (m != NULL)
			activate(arb, mbox_client(m));
	}
	/* The slots a producer just wrote miss in our cache: start loading the
	 * next client's line while draining this one (its cons_head is ours,
	 * so the prefetch reads only arbiter-private state). */
	if (arb->n_active)
		sn_mbox_prefetch_consumer(arb->clients[arb->active[0]].mb);
	for (i = 0; i < arb->n_active;) {
		struct sn_arbiter_client *c = &arb->clients[arb->active[i]];
		uint32_t k;

		if (i + 1 < arb->n_active)
			sn_mbox_prefetch_consumer(arb->clients[arb->active[i + 1]].mb);
		k = drain_client(arb, c);
		in += k;
		if (k == arb->read_limit) {
			arb->st.read_limit_hits++;
			i++;
		} else {
			c->active = 0;
			arb->active[i] = arb->active[--arb->n_active];
		}
	}
	arb->st.items_in += in;
	arb->last_in = in;
}

/* link_idle += bytes * 8e9 / link_bps, exactly, on the caller's copies
 * (*idle, *rem) of link_idle / link_rem. bytes is one burst: below
 * link_budget's cap 2^31 plus the one item that crosses the budget, so
 * num < 2^64 and the reciprocal estimate is at most 2 below the true
 * quotient. */
static inline void link_advance(const struct sn_arbiter *arb, uint64_t *idle, uint64_t *rem,
				uint64_t bytes)
{
	uint64_t num = bytes * 8000000000ull;
	uint64_t q = (uint64_t)(((unsigned __int128)num * arb->inv_bps) >> 64);
	uint64_t r = num - q * arb->link_bps;

	while (sn_unlikely(r >= arb->link_bps)) {
		q++;
		r -= arb->link_bps;
	}
	*idle += q;
	*rem += r;
	if (*rem >= arb->link_bps) {
		*rem -= arb->link_bps;
		(*idle)++;
	}
}

#define LINK_BUDGET_MAX (1ull << 31)

/* Bytes the link may start before it is busy past now. With D = now - idle
 * (>= 0), the next item may start while floor((rem + 8e9 * taken) / bps)
 * <= D, i.e. while 8e9 * taken < X = (D + 1) * bps - rem, i.e. while
 * taken < ceil(X / 8e9): that is the budget of sn_sched_dequeue_burst, so
 * a burst releases exactly the items the one-at-a-time loop would. Capped
 * at 2^31, more than any burst can take (4096 items of 64 KiB + 1 KiB), so
 * that link_advance's numerator fits 64 bits. */
static inline uint64_t link_budget(const struct sn_arbiter *arb, uint64_t idle, uint64_t rem,
				   uint64_t now)
{
	unsigned __int128 x = (unsigned __int128)(now - idle + 1) * arb->link_bps - rem;

	if (x >= (unsigned __int128)LINK_BUDGET_MAX * 8000000000ull)
		return LINK_BUDGET_MAX;
	return ((uint64_t)x + 8000000000ull - 1) / 8000000000ull;
}

uint32_t sn_arbiter_do_scan(struct sn_arbiter *arb, uint64_t now)
{
	uint64_t released = 0, bytes = 0, idle, rem;
	uint32_t n_rel, burst = arb->release_burst;

	arb->st.scans++;
	scan_inputs(arb);

	if (arb->link_was_idle) {
		/* Fig. 5 line 14: the link went idle at the scan that found
		 * the scheduler empty, at most idle_credit_ns ago. */
		uint64_t start = arb->empty_at;

		if (sn_time_before(start + arb->idle_credit_ns, now))
			start = now - arb->idle_credit_ns;
		if (sn_time_before(arb->link_idle, start)) {
			arb->link_idle = start;
			arb->link_rem = 0;
		}
		arb->link_was_idle = 0;
	} else if (sn_time_before(arb->link_idle + arb->slack_ns, now)) {
		/* Counted only when it cost backlogged traffic some credit. */
		if (backlog(arb))
			arb->st.link_resets++;
		arb->link_idle = now;
		arb->link_rem = 0;
	}
	/* The link state and the release batch live in locals for the loop:
	 * the callbacks cannot see them before flush_release(). */
	idle = arb->link_idle;
	rem = arb->link_rem;
	n_rel = arb->n_rel;
	while (!sn_time_after(idle, now)) {
		uint64_t budget = link_budget(arb, idle, rem, now), taken;
		uint32_t k;

		/* Guard: the held burst passes only if the scheduler would
		 * still take it whole into an empty scheduler (nothing that
		 * changed it got past lp_flush); else it is enqueued. */
		if (arb->lp_n && !sn_sched_pass_ok(arb->sched, arb->lp_c->class_id, arb->lp_n,
						   arb->lp_lo, arb->lp_hi))
			lp_flush(arb);
		if (arb->lp_n) {
			/* the held local burst (rel[0 .. lp_n), n_rel 0)
			 * through the empty scheduler: what enqueue + this
			 * dequeue would give, without the class ring. */
			SN_VERIFY(n_rel == 0);
			k = sn_sched_pass_burst(arb->sched, arb->lp_c->class_id, arb->rel,
						arb->lens, arb->lp_n, burst, budget,
						arb->overhead, &taken);
			arb->lp_n = 0;
			arb->st.passed += k;
		} else {
			k = sn_sched_dequeue_burst(arb->sched, arb->rel + n_rel, arb->lens,
						   burst - n_rel, budget, arb->overhead, &taken);
		}

		link_advance(arb, &idle, &rem, taken);
		bytes += taken - (uint64_t)k * arb->overhead;
		released += k;
		n_rel += k;
		if (n_rel == burst) {
			arb->n_rel = n_rel;
			flush_release(arb);
			n_rel = 0;
		} else if (taken < budget) {
			arb->link_was_idle = 1;  /* the scheduler ran empty */
			arb->empty_at = now;
			break;
		}
	}
	arb->link_idle = idle;
	arb->link_rem = rem;
	arb->n_rel = n_rel;
	lp_flush(arb);     /* the link was busy: it waits in the scheduler */
	flush_release(arb);
	arb->st.released += released;
	arb->st.released_bytes += bytes;
	arb->last_released = released;
	return (uint32_t)released;
}

int sn_arbiter_set_link(struct sn_arbiter *arb, uint64_t link_bps, uint32_t overhead_bytes)
{
	if (!link_params_ok(link_bps, overhead_bytes))
		return -EINVAL;
	arb->link_bps = link_bps;
	arb->overhead = overhead_bytes;
	arb->link_rem = 0;
	arb->inv_bps = UINT64_MAX / link_bps;
	return 0;
}

uint64_t sn_arbiter_link_idle(const struct sn_arbiter *arb) { return arb->link_idle; }

uint64_t sn_arbiter_backlog(const struct sn_arbiter *arb) { return backlog(arb); }

void sn_arbiter_get_stats(const struct sn_arbiter *arb, struct sn_arbiter_stats *out)
{
	*out = arb->st;
}

const char *sn_arbiter_drop_name(enum sn_arbiter_drop cause)
{
	switch (cause) {
	case SN_ARBITER_DROP_QFULL:       return "queue_full";
	case SN_ARBITER_DROP_NOCLASS:     return "no_class";
	case SN_ARBITER_DROP_BADLEN:      return "bad_length";
	case SN_ARBITER_DROP_CLIENT_GONE: return "client_gone";
	case SN_ARBITER_DROP_NCAUSES:     break;
	}
	return "unknown";
}

uint64_t sn_arbiter_idle_ns(const struct sn_arbiter *arb, struct sn_arbiter_idle *pol,
			    uint64_t now)
{
	if (backlog(arb)) {
		/* Case (i): the link is busy until a known time. */
		uint64_t wait = sn_time_after(arb->link_idle, now) ? arb->link_idle - now : 0;

		pol->idle_since = now;
		return wait >= pol->min_sleep_ns ? SN_MIN(wait, pol->max_sleep_ns) : 0;
	}
	if (arb->last_in || arb->last_released || pol->idle_since == 0) {
		pol->idle_since = now;
		return 0;
	}
	/* Case (ii): nothing to do; spin for a while, then poll slowly. */
	if (now - pol->idle_since < pol->spin_ns)
		return 0;
	return pol->max_sleep_ns;
}

/* ---- Items of a client on the arbiter thread, without the mailbox.
 * The body is drain_client()'s for chunks that are already in hand. */
uint32_t sn_arbiter_enqueue_local(struct sn_arbiter *arb, struct sn_arbiter_client *c,
				  void *const *items, uint32_t n)
{
	uint32_t total = 0, in_sched = 0;

	/* a burst that finds the scheduler empty, and that it would take
	 * whole, is held for the next scan (see struct sn_arbiter). */
	if (arb->local_pass && arb->lp_n == 0 && arb->n_rel == 0 && n && n <= arb->release_burst &&
	    client_ok(arb, c) && sn_sched_backlog(arb->sched) == 0) {
		uint32_t lo, hi;

		item_lens(arb, items, arb->lens, n, true, &lo, &hi);
		if (sn_sched_pass_ok(arb->sched, c->class_id, n, lo, hi)) {
			memcpy(arb->rel, items, n * sizeof(*items));
			arb->lp_n = n;
			arb->lp_c = c;
			arb->lp_lo = lo;
			arb->lp_hi = hi;
			arb->st.enqueued += n;
			arb->st.items_in += n;
			return n;
		}
	}
	lp_flush(arb);
	while (total < n) {
		uint32_t k = SN_MIN(n - total, DRAIN_CHUNK);
		uint32_t enq = enqueue_chunk(arb, c, items + total, k);

		arb->st.enqueued += enq;
		arb->st.items_in += k;
		in_sched += enq;
		total += k;
	}
	return in_sched;
}
