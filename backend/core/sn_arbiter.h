/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_arbiter.h — the PSPAT arbiter: client mailboxes -> scheduler -> link.
 *
 * One arbiter owns one scheduler (sn_sched.h), a set of clients (one input
 * mailbox + class id each) and one client list per producer core. Its one
 * job, sn_arbiter_do_scan(now), is PSPAT Fig. 5:
 *   1. drain the client lists and the mailboxes they name, at most
 *      `read_limit` (Δ_A) items per mailbox per scan, into the scheduler;
 *   2. emulate the link: while link_idle <= now, dequeue one item and
 *      advance link_idle by its transmission time at link_bps, counting
 *      overhead_bytes of framing per item;
 *   3. hand released items to the `release` callback (in order, in batches)
 *      and return how many were released.
 *
 * Output is a callback, not a TX mailbox: the caller chooses whether
 * release() transmits directly (arbiter = dispatcher, PSPAT §3.3), pushes to
 * a dispatcher's sn_mbox (PSPAT's TX mailboxes), or pushes each item back
 * to a "granted" sn_mbox of the worker that owns it, which transmits and
 * completes it itself (the arbiter only decides the order).
 * Items the scheduler refuses are never lost: they go to `drop` with a
 * cause, are counted, and the client's backpressure flag is set (an item
 * refused as too long is first offered to `oversize`, which may raise its
 * class's lmax so that it goes in after all).
 *
 * Concurrency contract. Two roles: the arbiter thread (a dedicated thread,
 * or a worker loop that calls do_scan between its own work) and client
 * threads.
 *
 *   calls                           caller          mutual exclusion needed
 *   ------------------------------  --------------  -------------------------
 *   sn_arbiter_submit(clist, mbox)  client thread   with other submits to the
 *                                                   same mbox, and to the
 *                                                   same clist
 *   every other sn_arbiter_*        arbiter thread  among themselves (one
 *                                                   arbiter thread at a time)
 *
 * submit() runs concurrently with the arbiter's calls without locks; the
 * only shared memory is the client mailboxes and lists, whose barriers
 * are listed in sn_mbox.h. A client that moves to another core simply
 * submits through that core's list. The arbiter thread may change only
 * with an external happens-before between the old and the new one.
 *
 * Liveness: a client is scanned while it is the last entry taken from any
 * client list, for one scan after being replaced there, and for as long as
 * a scan hits its read limit. A client list append fails only if the list
 * is full; the list's overflow flag then makes the next scan visit every
 * client once (sn_mbox_cl_overflowed). So an item submitted before a scan
 * starts is read by that scan unless Δ_A items precede it in its mailbox;
 * with read_limit >= the mailbox capacity, everything submitted before
 * do_scan begins is in the scheduler before it dequeues (PSPAT §3.4).
 */
#ifndef SN_ARBITER_H
#define SN_ARBITER_H

#include <stdbool.h>
#include <stdint.h>

#include "sn_mbox.h"
#include "sn_sched.h"

enum sn_arbiter_drop {
	SN_ARBITER_DROP_QFULL = 0,   /* class queue full (scheduler -ENOBUFS) */
	SN_ARBITER_DROP_NOCLASS,     /* client's class does not exist */
	SN_ARBITER_DROP_BADLEN,      /* length 0 or above the class lmax */
	SN_ARBITER_DROP_CLIENT_GONE, /* left in a mailbox at sn_arbiter_client_del */
	SN_ARBITER_DROP_NCAUSES
};

#define SN_ARBITER_MAX_READ_LIMIT 4096u
#define SN_ARBITER_MAX_OVERHEAD   1024u
#define SN_ARBITER_MAX_LINK_BPS   (1ull << 50) /* ~1.1 Pbit/s */
#define SN_ARBITER_MAX_IDLE_CREDIT_NS 1000000000ull /* 1 s */

struct sn_arbiter_params {
	struct sn_sched_params sched;  /* the scheduler the arbiter creates */
	uint64_t link_bps;             /* emulated link rate, 1 .. SN_ARBITER_MAX_LINK_BPS */
	uint32_t overhead_bytes;       /* added to every item (24 = Ethernet preamble+FCS+IFG) */
	uint64_t slack_ns;             /* link_idle may lag now by this much before a reset */
	/* After the scheduler ran empty, the link restarts at the now of the
	 * scan that found it empty (PSPAT Fig. 5 line 14), but at most this
	 * long before the scan that finds traffic again (0: at that scan;
	 * at most SN_ARBITER_MAX_IDLE_CREDIT_NS). */
	uint64_t idle_credit_ns;
	uint32_t read_limit;           /* Δ_A: items per mailbox per scan (0 = 64) */
	uint32_t max_clients;          /* >= 1 */
	uint32_t n_clists;             /* client lists, one per producer core, >= 1 */
	uint32_t clist_size;           /* slots per client list (0 = 256), pow2 */
	uint32_t release_burst;        /* items per release() call (0 = 64) */

	/* Length in bytes of an item (called once per item, arbiter thread).
	 * NULL: the length is the uint32_t at byte offset len_offset inside
	 * the item (e.g. a packet buffer's length field), read directly. */
	uint32_t (*item_len)(const void *item, void *arg);
	uint32_t len_offset;
	/* Released items, in transmission order; ownership passes to the callee. */
	void (*release)(void *const *items, uint32_t n, void *arg);
	/* An item the scheduler refused; ownership passes to the callee. */
	void (*drop)(void *item, enum sn_arbiter_drop cause, void *arg);
	/* Optional (NULL: such items are BADLEN drops). The scheduler refused
	 * an item of len bytes as longer than the lmax of class_id. The callee
	 * may raise that class's lmax (sn_sched_class_change on
	 * sn_arbiter_sched(), arbiter thread) and return 0: the item is then
	 * offered once more (counted in lmax_raises); any other return, or a
	 * second refusal, drops it as BADLEN. QFQ's slot sizes, and with them
	 * its sharing error and T-WFI, scale with lmax (6 L_k / (phi_k B),
	 * PSPAT eq. 2): this lets classes start at the MTU and pay for large
	 * frames only once they send one, as Linux sch_qfq grows lmax on
	 * enqueue. Called between enqueues of one client burst; items keep
	 * their order. */
	int (*oversize)(uint32_t class_id, uint32_t len, void *arg);
	void *cb_arg;
	/* Every item comes through sn_arbiter_enqueue_local (no
	 * producer uses a mailbox: PSPAT's single-core case). Then a local
	 * burst that finds the scheduler empty, and that the scheduler would
	 * take whole, waits in the arbiter until the next do_scan, which
	 * passes it through the scheduler without its class queue
	 * (sn_sched_pass_burst: the same items out, the same scheduler
	 * state). Anything that reads or changes the scheduler first
	 * (sn_arbiter_sched, client_del, client_set_class, another
	 * enqueue_local) puts the burst into it, as enqueue_local would have;
	 * sn_arbiter_backlog and the stats count it as queued. A mailbox item
	 * despite this flag: the scan puts the held burst into the scheduler
	 * before it reads the mailbox, the order of the calls. */
	bool local_only;
};

struct sn_arbiter_stats {
	uint64_t scans;
	uint64_t items_in;          /* read from client mailboxes */
	uint64_t enqueued;          /* accepted by the scheduler */
	uint64_t released;          /* handed to release() */
	uint64_t released_bytes;    /* their lengths, without overhead */
	uint64_t dropped[SN_ARBITER_DROP_NCAUSES];
	uint64_t link_resets;       /* link_idle lagged > slack_ns with backlog */
	uint64_t read_limit_hits;   /* a mailbox still had items after Δ_A reads */
	uint64_t clist_overflows;   /* full client list seen: all clients scanned */
	uint64_t lmax_raises;       /* oversize() raised a class lmax, item retried */
	uint64_t passed;            /* released without entering a class queue
				     * (local_only: a burst through the empty
				     * scheduler, sn_sched_pass_burst) */
};

struct sn_arbiter;
struct sn_arbiter_client;

/* NULL + errno: EINVAL (bad params; missing release/drop), ENOMEM,
 * or the scheduler's errno. `now_ns` starts the link clock. */
struct sn_arbiter *sn_arbiter_create(const struct sn_arbiter_params *p, uint64_t now_ns);
/* Frees clients, mailboxes, lists and the scheduler. Items still queued
 * anywhere are not touched (drain first with sn_arbiter_client_del). */
void sn_arbiter_free(struct sn_arbiter *arb);

/* The scheduler, for class add/del/change (arbiter thread only). It
 * puts a held local burst into it first (local_only), so the pointer is
 * for the change at hand: not kept across sn_arbiter_enqueue_local or
 * sn_arbiter_do_scan (a scan re-checks, but a class deleted through a kept
 * pointer under a held burst is not what it re-checks for). */
struct sn_sched *sn_arbiter_sched(struct sn_arbiter *arb);

/* Register a client whose items go to `class_id`, with an input mailbox of
 * mbox_size slots. NULL + errno (EINVAL, ENOSPC when max_clients are
 * registered, ENOMEM). */
struct sn_arbiter_client *sn_arbiter_client_add(struct sn_arbiter *arb, uint32_t class_id,
						uint32_t mbox_size);
/* Move a client to another class; later items go there. */
int sn_arbiter_client_set_class(struct sn_arbiter *arb, struct sn_arbiter_client *c,
				uint32_t class_id);
/* Unregister a client whose producer has stopped for good: items left in
 * its mailbox go to drop(CLIENT_GONE). Its memory is kept until
 * sn_arbiter_free (client lists may still name its mailbox), so the handle
 * must not be used again. 0 or -EINVAL. */
int sn_arbiter_client_del(struct sn_arbiter *arb, struct sn_arbiter_client *c);

/* The client's input mailbox and the client list of producer core `core`
 * (NULL if out of range): what the client's thread passes to submit. */
struct sn_mbox *sn_arbiter_client_mbox(const struct sn_arbiter_client *c);
struct sn_mbox *sn_arbiter_clist(const struct sn_arbiter *arb, uint32_t core);

/* Producer side (client thread, see the contract above): queue one item
 * for the arbiter. 0, -ENOBUFS (mailbox full: the item stays the
 * caller's; PSPAT's immediate backpressure), -EINVAL (NULL/odd pointer).
 * A full client list is not an error for the caller (see "Liveness"). */
static inline int sn_arbiter_submit(struct sn_mbox *clist, struct sn_mbox *mbox, void *item)
{
	int r = sn_mbox_insert(mbox, item);

	if (r == 0)
		(void)sn_mbox_cl_append(clist, mbox);
	return r;
}

/* Arbiter thread only: n items of client c go
 * into the scheduler directly, as a scan would read them from c's mailbox
 * (same order, same drop causes and counters: items_in, enqueued, dropped,
 * lmax_raises). For a client whose producer IS the arbiter thread (a
 * worker loop that also runs do_scan, PSPAT's single-core case): the
 * mailbox hop only copies pointers there. c's mailbox must be empty (its
 * items would otherwise be overtaken). Across clients, items enter in the
 * order of the calls (a scan visits its active clients in its own order).
 * Every item is enqueued or goes to drop(); returns the number enqueued.
 * With local_only, a burst that finds the scheduler empty and that it
 * would take whole is held for the next do_scan instead (see
 * sn_arbiter_params.local_only): counted and reported as enqueued. */
uint32_t sn_arbiter_enqueue_local(struct sn_arbiter *arb, struct sn_arbiter_client *c,
				  void *const *items, uint32_t n);
/* One arbiter round at time now_ns (monotonic ns, same clock as create).
 * Returns the number of items released to release() during this call. */
uint32_t sn_arbiter_do_scan(struct sn_arbiter *arb, uint64_t now_ns);

/* Change the emulated link (keeps link_idle; the sub-ns remainder restarts). */
int sn_arbiter_set_link(struct sn_arbiter *arb, uint64_t link_bps, uint32_t overhead_bytes);
/* When the link becomes free for the next item (ns). */
uint64_t sn_arbiter_link_idle(const struct sn_arbiter *arb);
/* Items queued in the scheduler (a held local burst included). */
uint64_t sn_arbiter_backlog(const struct sn_arbiter *arb);
void sn_arbiter_get_stats(const struct sn_arbiter *arb, struct sn_arbiter_stats *out);
const char *sn_arbiter_drop_name(enum sn_arbiter_drop cause);

/* Spin-then-sleep idle policy (PSPAT §3.5). After each do_scan, ask how
 * long the caller may sleep before the next one: 0 = scan again now.
 *  - backlog waiting for the link: sleep until link_idle (capped at
 *    max_sleep_ns) if that is at least min_sleep_ns away (the known time of
 *    case (i)), else 0;
 *  - no backlog but the last scan read or released items: 0, and the idle
 *    clock restarts;
 *  - nothing queued and nothing new: spin (0) for spin_ns, then sleep
 *    max_sleep_ns at a time (clients do not notify, so the sleep is a
 *    bounded poll interval; max_sleep_ns bounds the added latency). */
struct sn_arbiter_idle {
	uint64_t spin_ns;       /* PSPAT suggests 20-50 us */
	uint64_t min_sleep_ns;  /* shorter waits are spun (sleep cost > wait) */
	uint64_t max_sleep_ns;  /* longest sleep when idle */
	uint64_t idle_since;    /* state: keep 0 initially */
};
uint64_t sn_arbiter_idle_ns(const struct sn_arbiter *arb, struct sn_arbiter_idle *pol,
			    uint64_t now_ns);

#endif /* SN_ARBITER_H */
