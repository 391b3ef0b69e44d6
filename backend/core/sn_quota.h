/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_quota.h — per-owner budgets on one shared pool.
 *
 * A pool of `total` units (mbufs, held descriptors, backlog entries, timing
 * wheel nodes, flow or MAC table entries) is drawn by `owners` owners (port
 * slots). Each owner has a reserved minimum `min`, units only it may draw,
 * and a cap `max` on everything it holds. The pool's units beyond the sum of
 * the reserves are shared, first come first served, by owners above their
 * reserve and below their cap. So an owner always gets its reserve however
 * the others behave, and no owner holds more than its cap: one tenant at its
 * budget loses its own units, never another's (the isolation of CPU and
 * bandwidth of fair dropping, Addanki et al., carried over to buffers).
 *
 * Accounting: per owner, `used` and `min` share one 64-bit word, changed
 * only by compare-and-swap, so each take, give and set knows the owner's
 * exact use before and after it. The units an owner holds beyond its
 * reserve (its excess, max(0, used - min)) are the ones it takes from the
 * shared part; `shared` is the sum of every owner's excess, each operation
 * adding the change of excess it made. A take that would push `shared` past
 * the shared part (total - sum of reserves) gets only what fits.
 *
 * Concurrency: sn_quota_take, sn_quota_give and the readers may be called
 * from any thread at any time, also on the same owner (a port whose queues
 * sit on several lcores takes on each; another lcore gives when the units
 * leave). No locks: per-owner CAS loops and relaxed atomic adds on
 * `shared`; the units counted are not memory, so no operation orders other
 * memory (callers that hand objects between threads order them
 * themselves). A concurrent take may be refused while another take's
 * overshoot of `shared` is being returned: refusals are conservative,
 * grants never exceed a cap or the pool. sn_quota_set: one thread at a time
 * (MAIN), concurrently with takes and gives. sn_quota_create / free: no
 * other call on the instance in flight.
 *
 * Errors: the constructor returns NULL and sets errno; sn_quota_set returns
 * 0 or -errno. Giving back more than an owner holds is an invariant
 * violation and aborts.
 */
#ifndef SN_QUOTA_H
#define SN_QUOTA_H

#include <stdbool.h>
#include <stdint.h>

#define SN_QUOTA_OWNERS_MAX 4096u
#define SN_QUOTA_TOTAL_MAX  (1u << 30)

struct sn_quota;

struct sn_quota_owner_stats {
	uint32_t used;       /* units held now */
	uint32_t min, max;   /* reserve and cap */
	uint64_t hits;       /* takes granted less than asked (refused units > 0) */
	uint64_t refused;    /* units asked and not granted */
};

/* A pool of `total` units (1..SN_QUOTA_TOTAL_MAX) for `owners` owners
 * (1..SN_QUOTA_OWNERS_MAX), every owner with reserve 0 and cap `total`.
 * NULL + errno (EINVAL, ENOMEM). */
struct sn_quota *sn_quota_create(uint32_t owners, uint32_t total);
void sn_quota_free(struct sn_quota *q);   /* NULL: no-op */

/* One thread at a time (MAIN): set owner's reserve and cap. The owner may
 * hold more than a new cap: it then takes nothing until it is back below.
 * 0; -EINVAL (owner out of range, min > max, max > total); -ENOSPC (the
 * reserves would exceed the pool, or a raised reserve does not fit beside
 * the excess the owners hold now, which would let grants overdraw the
 * pool: nothing changed; retry once units came back). */
int sn_quota_set(struct sn_quota *q, uint32_t owner, uint32_t min, uint32_t max);

/* Any thread: draw up to `want` units for owner; returns the units granted
 * (0..want). A grant below `want` counts one hit and the refused units. */
uint32_t sn_quota_take(struct sn_quota *q, uint32_t owner, uint32_t want);
/* Any thread: return n units owner holds (n <= its use, else abort). */
void sn_quota_give(struct sn_quota *q, uint32_t owner, uint32_t n);

/* Any thread, relaxed reads (a snapshot may be torn between fields). */
uint32_t sn_quota_used(const struct sn_quota *q, uint32_t owner);
/* Units a take by owner would get now, if nothing else moved. */
uint32_t sn_quota_room(const struct sn_quota *q, uint32_t owner);
void sn_quota_owner_stats(const struct sn_quota *q, uint32_t owner,
			  struct sn_quota_owner_stats *out);
uint32_t sn_quota_total(const struct sn_quota *q);
uint32_t sn_quota_reserved(const struct sn_quota *q);   /* sum of reserves */
uint32_t sn_quota_shared_used(const struct sn_quota *q); /* sum of excesses */
uint32_t sn_quota_owners(const struct sn_quota *q);

#endif /* SN_QUOTA_H */
