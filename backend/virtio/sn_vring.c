/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_vring.c — hardened split-virtqueue TX parser (virtio 1.1 §2.7).
 *
 * Deferred completions (A. Saeed, N. Dukkipati, V. Valancius, V. The Lam,
 * C. Contavalli, A. Vahdat, "Carousel: Scalable Traffic Shaping at End
 * Hosts", ACM SIGCOMM 2017, §5.2) return a guest's TX descriptor only
 * once its packet has left, so the backend walks the guest's split
 * virtqueue itself instead of letting DPDK copy and complete at dequeue,
 * as SPDK's lib/vhost does on top of rte_vhost. This file is the walker
 * (avail ring, descriptor chains, guest memory translation, prefetch);
 * sn_vring_used.c writes the used ring, out of order. Both are free of
 * DPDK so they can be unit-tested and fuzzed alone.
 *
 * Guest memory is hostile. Three rules follow:
 *  1. Every guest-shared field is loaded exactly once into a local before it
 *     is validated (descriptors are copied whole, then checked), so a guest
 *     rewriting a descriptor mid-walk can change what we read but never make
 *     a validated value differ from the one we use (no TOCTOU).
 *  2. Every walk is bounded: a per-chain visited bitmap catches loops on
 *     the first revisit, the descriptor count is bounded by the queue size
 *     and by a fixed walk budget, the avail window by the queue size.
 *  3. Every head we take is either returned (as a packet or as a bad entry
 *     the caller completes with length 0) or, when no valid completion
 *     exists (head out of range, head already held), skipped; each outcome
 *     other than a good packet has its own counter. An avail idx that jumps
 *     by more than the queue size cannot be interpreted at all: the ring is
 *     marked broken and not read again (the daemon resets the device).
 */
#include <errno.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "sn_vring_impl.h"

/* Descriptors visited per chain: payload segments, up to hdr_len header-only
 * descriptors (each at least 1 byte) and one indirect pointer. */
#define WALK_MAX (SN_VRING_MAX_SEGS + 16u)
#define VISIT_IND 0x10000u

static const char *const err_names[SN_VRING_E__MAX] = {
	[SN_VRING_OK] = "ok",
	[SN_VRING_E_DESC_OOB] = "desc_oob",
	[SN_VRING_E_LOOP] = "loop",
	[SN_VRING_E_CHAIN_TOO_LONG] = "chain_too_long",
	[SN_VRING_E_TOO_MANY_SEGS] = "too_many_segs",
	[SN_VRING_E_ADDR_OOB] = "addr_oob",
	[SN_VRING_E_CROSS_REGION] = "cross_region",
	[SN_VRING_E_ZERO_LEN] = "zero_len",
	[SN_VRING_E_OVERSIZED] = "oversized",
	[SN_VRING_E_TOO_SHORT] = "too_short",
	[SN_VRING_E_BAD_INDIRECT] = "bad_indirect",
	[SN_VRING_E_WRITE_ONLY] = "write_only",
	[SN_VRING_E_HEAD_OOB] = "head_oob",
	[SN_VRING_E_HEAD_BUSY] = "head_busy",
	[SN_VRING_E_AVAIL_JUMP] = "avail_jump",
	[SN_VRING_E_BAD_COMPLETION] = "bad_completion",
};

const char *sn_vring_err_name(enum sn_vring_err e)
{
	if ((unsigned)e >= SN_VRING_E__MAX)
		return "?";
	return err_names[e];
}

static int mem_valid(const struct sn_vring_mem *mem)
{
	uint32_t i, j;

	if (mem->nregions > SN_VRING_MAX_REGIONS)
		return 0;
	for (i = 0; i < mem->nregions; i++) {
		const struct sn_vring_region *r = &mem->regions[i];

		if (r->size == 0 || r->host_user_addr == 0 ||
		    r->size - 1 > UINT64_MAX - r->guest_phys_addr ||
		    r->size - 1 > UINT64_MAX - r->host_user_addr ||
		    r->host_user_addr + (r->size - 1) > UINTPTR_MAX)
			return 0;
		for (j = 0; j < i; j++) {
			const struct sn_vring_region *q = &mem->regions[j];

			if (r->guest_phys_addr - q->guest_phys_addr < q->size ||
			    q->guest_phys_addr - r->guest_phys_addr < r->size)
				return 0;
		}
	}
	return 1;
}

int sn_vring_set_mem(struct sn_vring *vr, const struct sn_vring_mem *mem)
{
	if (mem == NULL || !mem_valid(mem))
		return -EINVAL;
	vr->mem = *mem;
	vr->hot_region = 0;
	return 0;
}

int sn_vring_set_rings(struct sn_vring *vr, void *desc, void *avail, void *used)
{
	if (desc == NULL || avail == NULL || used == NULL || ((uintptr_t)desc & 15) != 0 ||
	    ((uintptr_t)avail & 1) != 0 || ((uintptr_t)used & 3) != 0)
		return -EINVAL;
	vr->desc = desc;
	vr->avail = avail;
	vr->used = used;
	vr->used_event = &vr->avail->ring[vr->size];
	vr->avail_event = (uint16_t *)(void *)&vr->used->ring[vr->size];
	return 0;
}

struct sn_vring *sn_vring_create(const struct sn_vring_config *cfg,
				 const struct sn_vring_mem *mem)
{
	static const struct sn_vring_mem no_mem;
	struct sn_vring *vr;
	size_t words, off, len;
	char *blk;

	if (cfg == NULL || cfg->desc == NULL || cfg->avail == NULL ||
	    cfg->used == NULL || cfg->size == 0 || cfg->size > SN_VRING_MAX_SIZE ||
	    (cfg->size & (cfg->size - 1)) != 0 ||
	    (cfg->hdr_len != 10 && cfg->hdr_len != 12) ||
	    ((uintptr_t)cfg->desc & 15) != 0 || ((uintptr_t)cfg->avail & 1) != 0 ||
	    ((uintptr_t)cfg->used & 3) != 0 || (mem != NULL && !mem_valid(mem))) {
		errno = EINVAL;
		return NULL;
	}
	words = (cfg->size + 63) / 64;
	off = sizeof(*vr); /* a multiple of its 64-byte alignment */
	len = off + 2 * words * 8 + 2 * cfg->size * 2 + cfg->size;
	len = (len + 63) & ~(size_t)63;
	blk = aligned_alloc(64, len);
	if (blk == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	memset(blk, 0, len);
	vr = (struct sn_vring *)blk;
	vr->visit_direct = (uint64_t *)(blk + off);
	vr->visit_ind = vr->visit_direct + words;
	vr->prev = (uint16_t *)(vr->visit_ind + words);
	vr->next = vr->prev + cfg->size;
	vr->held = (uint8_t *)(vr->next + cfg->size);

	vr->desc = cfg->desc;
	vr->avail = cfg->avail;
	vr->used = cfg->used;
	vr->used_event = &vr->avail->ring[cfg->size];
	vr->avail_event = (uint16_t *)(void *)&vr->used->ring[cfg->size];
	vr->size = cfg->size;
	vr->mask = cfg->size - 1;
	vr->max_pkt_len = cfg->max_pkt_len ? cfg->max_pkt_len : SN_VRING_DEF_MAX_PKT;
	vr->last_avail = cfg->last_avail_idx;
	vr->used_shadow = cfg->last_used_idx;
	vr->used_pub = cfg->last_used_idx;
	vr->hdr_len = cfg->hdr_len;
	vr->event_idx = cfg->event_idx;
	vr->held_first = vr->held_last = SN_VRING_NIL;
	vr->mem = mem != NULL ? *mem : no_mem;
	return vr;
}

void sn_vring_free(struct sn_vring *vr)
{
	free(vr);
}

/* The region of mem that holds guest-physical gpa, or NULL. Regions do not
 * overlap (mem_valid), so the first hit is the only one. The full scan of
 * the general translation (sn_vring_gpa_to_hva); the pop's translation and
 * the prefetch hints try the memo first (mem_region_hint). */
static inline const struct sn_vring_region *mem_region(const struct sn_vring_mem *mem,
						       uint64_t gpa)
{
	for (uint32_t i = 0; i < mem->nregions; i++)
		if (gpa - mem->regions[i].guest_phys_addr < mem->regions[i].size)
			return &mem->regions[i];
	return NULL;
}

/* mem_region() trying region *hint first and leaving the region found in
 * *hint. A guest's buffers mostly lie in one region (its RAM above 4 GiB,
 * or sn-gen's one hugepage-less heap) while the table holds several: the
 * full scan costs ~12 instructions per lookup, two lookups per frame. The
 * same result as mem_region(): regions do not overlap, so the region
 * holding gpa is the only hit. *hint is any value (checked against
 * nregions); sn_vring_set_mem() resets it. */
static inline const struct sn_vring_region *mem_region_hint(const struct sn_vring_mem *mem,
							    uint64_t gpa, uint32_t *hint)
{
	const uint32_t h = *hint;
	const struct sn_vring_region *r;

	if (h < mem->nregions && gpa - mem->regions[h].guest_phys_addr < mem->regions[h].size)
		return &mem->regions[h];
	r = mem_region(mem, gpa);
	if (r != NULL)
		*hint = (uint32_t)(r - mem->regions);
	return r;
}

void *sn_vring_mem_hva(const struct sn_vring_mem *mem, uint64_t gpa, uint64_t len)
{
	const struct sn_vring_region *r = mem_region(mem, gpa);

	if (r != NULL && len <= r->size - (gpa - r->guest_phys_addr))
		return (void *)(uintptr_t)(r->host_user_addr + (gpa - r->guest_phys_addr));
	return NULL;
}

/* A buffer that lies in the hot region (see mem_region_hint), inline;
 * anything else through sn_vring_gpa_to_hva(). Same results. */
static inline void *gpa_to_hva_hot(struct sn_vring *vr, uint64_t gpa, uint64_t len,
				   enum sn_vring_err *err)
{
	const struct sn_vring_region *r = mem_region_hint(&vr->mem, gpa, &vr->hot_region);

	if (r != NULL && len <= r->size - (gpa - r->guest_phys_addr))
		return (void *)(uintptr_t)(r->host_user_addr + (gpa - r->guest_phys_addr));
	return sn_vring_gpa_to_hva(vr, gpa, len, err);
}

void *sn_vring_gpa_to_hva(const struct sn_vring *vr, uint64_t gpa,
			  uint64_t len, enum sn_vring_err *err)
{
	const struct sn_vring_region *r = mem_region(&vr->mem, gpa);

	if (r != NULL && len <= r->size - (gpa - r->guest_phys_addr))
		return (void *)(uintptr_t)(r->host_user_addr + (gpa - r->guest_phys_addr));
	*err = SN_VRING_E_ADDR_OOB;
	if (r == NULL || len - 1 > UINT64_MAX - gpa)
		return NULL;
	/* starts in r, ends past it: in another region, or outside memory */
	if (mem_region(&vr->mem, gpa + (len - 1)) != NULL)
		*err = SN_VRING_E_CROSS_REGION;
	return NULL;
}

/* Copy one descriptor out of guest memory exactly once. memcpy because an
 * indirect table need not be aligned; the compiler-only fence after it
 * forbids the compiler from re-loading guest memory in place of the copy
 * (what READ_ONCE does in Linux): all later checks and uses see *d. No CPU
 * ordering is needed here: the acquire on avail->idx already ordered us
 * after the driver's descriptor writes. */
static inline void read_desc(const void *src, struct sn_vring_desc *d)
{
	memcpy(d, src, sizeof(*d));
	atomic_signal_fence(memory_order_seq_cst);
}

static inline int bit_test_set(uint64_t *bm, uint32_t i)
{
	uint64_t m = 1ULL << (i & 63);
	int was = (bm[i >> 6] & m) != 0;

	bm[i >> 6] |= m;
	return was;
}

static inline uint32_t min_u32(uint32_t a, uint32_t b)
{
	return a < b ? a : b;
}

struct walk {
	uint32_t nvis;
	uint32_t vis[WALK_MAX];
};

static enum sn_vring_err walk_chain(struct sn_vring *vr, uint16_t head,
				    struct sn_vring_pkt *p, struct walk *w)
{
	const unsigned char *tab = (const unsigned char *)vr->desc;
	uint64_t *visit = vr->visit_direct;
	uint32_t n = vr->size, idx = head, ndesc = 0, hdr_got = 0, ind = 0;
	uint64_t total = 0;
	struct sn_vring_desc d;
	enum sn_vring_err e = SN_VRING_OK;
	unsigned char *host;

	for (;;) {
		if (idx >= n)
			return SN_VRING_E_DESC_OOB;
		if (bit_test_set(visit, idx))
			return SN_VRING_E_LOOP;
		w->vis[w->nvis++] = idx | ind;
		if (w->nvis == WALK_MAX)
			return SN_VRING_E_TOO_MANY_SEGS;
		read_desc(tab + (size_t)idx * sizeof(d), &d);

		if (d.flags & SN_VRING_DESC_F_INDIRECT) {
			/* §2.7.5.3: not nested, not with NEXT, whole entries,
			 * no longer than the queue. WRITE is ignored on it. */
			if (ind || (d.flags & SN_VRING_DESC_F_NEXT) || d.len == 0 ||
			    d.len % sizeof(d) != 0 || d.len / sizeof(d) > vr->size)
				return SN_VRING_E_BAD_INDIRECT;
			tab = sn_vring_gpa_to_hva(vr, d.addr, d.len, &e);
			if (tab == NULL)
				return SN_VRING_E_BAD_INDIRECT;
			n = d.len / sizeof(d);
			visit = vr->visit_ind;
			ind = VISIT_IND;
			idx = 0;
			continue;
		}
		/* §2.7.5.3.1: a chain (its buffer descriptors, direct or
		 * indirect) is no longer than the queue. */
		if (++ndesc > vr->size)
			return SN_VRING_E_CHAIN_TOO_LONG;
		if (d.flags & SN_VRING_DESC_F_WRITE)
			return SN_VRING_E_WRITE_ONLY;
		if (d.len == 0)
			return SN_VRING_E_ZERO_LEN;
		total += d.len;
		if (total > (uint64_t)vr->hdr_len + vr->max_pkt_len)
			return SN_VRING_E_OVERSIZED;
		host = sn_vring_gpa_to_hva(vr, d.addr, d.len, &e);
		if (host == NULL)
			return e;
		if (hdr_got < vr->hdr_len) {
			uint32_t k = min_u32(d.len, vr->hdr_len - hdr_got);

			memcpy((unsigned char *)&p->hdr + hdr_got, host, k);
			hdr_got += k;
			host += k;
			d.len -= k;
		}
		if (d.len != 0) {
			if (p->nseg == SN_VRING_MAX_SEGS)
				return SN_VRING_E_TOO_MANY_SEGS;
			p->iov[p->nseg].iov_base = host;
			p->iov[p->nseg].iov_len = d.len;
			p->nseg++;
		}
		if (!(d.flags & SN_VRING_DESC_F_NEXT))
			break;
		idx = d.next;
	}
	if (total <= vr->hdr_len)
		return SN_VRING_E_TOO_SHORT;
	p->len = (uint32_t)(total - vr->hdr_len);
	return SN_VRING_OK;
}

/* The pop loop's copy of what it reads per frame: its stores to the
 * caller's packets may alias the ring's fields as far as the compiler
 * knows, which would reload them for every frame (~15 instructions).
 * hot: region vr->hot_region (mem_region_hint's memo) copied, size 0 when
 * the memo names no region; refreshed after every translation that moves
 * the memo. Valid for one sn_vring_tx_pop() (the table does not change
 * during it). */
struct pop_view {
	const struct sn_vring_desc *desc;
	uint32_t hdr_len, max_pkt_len;
	struct sn_vring_region hot;
};

static inline void pop_view_hot(const struct sn_vring *vr, struct pop_view *v)
{
	const uint32_t h = vr->hot_region;

	if (h < vr->mem.nregions)
		v->hot = vr->mem.regions[h];
	else
		v->hot = (struct sn_vring_region){ 0 };
}

/* The common frame: one direct, read-only descriptor holding the whole
 * virtio-net header and the payload (Linux and DPDK drivers push the
 * header in front of a linear frame). Decided on one copy of the
 * descriptor, like walk_chain(): a chain cannot loop or be too long with a
 * single descriptor, so the visited bitmap is not needed. Returns false
 * (nothing written) when the chain needs the full walk. The translation
 * is gpa_to_hva_hot()'s: the hot region from v first (the same test as
 * mem_region_hint's memo and gpa_to_hva_hot's length check), else
 * gpa_to_hva_hot() itself, then v's copy of a memo it moved. */
static inline __attribute__((always_inline)) bool parse_single(struct sn_vring *vr,
								 struct pop_view *v,
								 uint16_t head,
								 struct sn_vring_pkt *p)
{
	const uint32_t hdr_len = v->hdr_len;
	struct sn_vring_desc d;
	enum sn_vring_err e;
	unsigned char *host;
	uint64_t off;

	read_desc(&v->desc[head], &d);
	if ((d.flags & (SN_VRING_DESC_F_NEXT | SN_VRING_DESC_F_INDIRECT |
			SN_VRING_DESC_F_WRITE)) != 0 ||
	    d.len <= hdr_len || d.len - hdr_len > v->max_pkt_len)
		return false;
	off = d.addr - v->hot.guest_phys_addr;
	if (off < v->hot.size && d.len <= v->hot.size - off) {
		host = (unsigned char *)(uintptr_t)(v->hot.host_user_addr + off);
	} else {
		host = gpa_to_hva_hot(vr, d.addr, d.len, &e);
		pop_view_hot(vr, v);
		if (host == NULL)
			return false;
	}
	if (hdr_len == sizeof(p->hdr)) {
		memcpy(&p->hdr, host, sizeof(p->hdr));
	} else {
		memcpy(&p->hdr, host, 10);
		p->hdr.num_buffers = 0;
	}
	p->head = head;
	p->nseg = 1;
	p->len = d.len - hdr_len;
	p->err = SN_VRING_OK;
	p->iov[0].iov_base = host + hdr_len;
	p->iov[0].iov_len = d.len - hdr_len;
	return true;
}

/* The general parse: every chain parse_single() declines (the pop loop
 * tries parse_single() inline first, this out-of-line call only after). */
static __attribute__((noinline)) void parse_chain(struct sn_vring *vr, uint16_t head,
						  struct sn_vring_pkt *p)
{
	struct walk w;
	uint32_t i, v;

	memset(&p->hdr, 0, sizeof(p->hdr));
	p->head = head;
	p->nseg = 0;
	p->len = 0;
	w.nvis = 0;
	p->err = walk_chain(vr, head, p, &w);
	for (i = 0; i < w.nvis; i++) {
		v = w.vis[i];
		if (v & VISIT_IND)
			vr->visit_ind[(v & 0xffffu) >> 6] = 0;
		else
			vr->visit_direct[v >> 6] = 0;
	}
	if (p->err != SN_VRING_OK) {
		p->nseg = 0;
		p->len = 0;
		vr->st.err[p->err]++;
		vr->st.bad++;
	} else {
		vr->st.popped++;
	}
}

/* Memory-level parallelism for a burst of k heads. The parse
 * below walks one chain after another, and every descriptor, virtio-net
 * header and first frame line it (or the switch after it) reads was
 * written by the driver on another core: a cross-core miss each, taken one
 * at a time. Two cheap passes first ask for all of them at once: the k
 * descriptors, then, from each descriptor's address, the header line and
 * the first payload line. Hints only: the values read here are never used
 * for anything but a prefetch address (the parse reads and validates every
 * descriptor again, once, as rule 1 requires), and a prefetch of any
 * address cannot fault. */
#define PREFETCH_MAX 64u

/* Host address of guest-physical gpa for a prefetch, or NULL (no length
 * check: a hint, see above). */
static inline const unsigned char *hint_hva(const struct sn_vring_mem *mem, uint64_t gpa,
					    uint32_t *hint)
{
	const struct sn_vring_region *r = mem_region_hint(mem, gpa, hint);

	return r != NULL ? (const unsigned char *)(uintptr_t)(r->host_user_addr +
							      (gpa - r->guest_phys_addr)) : NULL;
}

/* Two passes over k avail entries from `from`: ask for their descriptors,
 * then for the two lines at the start of each one's buffer. A buffer
 * starting in region `hot` (size 0: none) is translated from those three
 * values, others through the memo hint. */
static inline void prefetch_bufs(const struct sn_vring_desc *desc,
				 const struct sn_vring_avail *avail, uint32_t mask,
				 const struct sn_vring_mem *mem, uint16_t hdr_len,
				 uint16_t from, uint32_t k, int rw, uint32_t hint,
				 const struct sn_vring_region *hot)
{
	uint16_t heads[PREFETCH_MAX];
	uint32_t i;

	if (k > PREFETCH_MAX)
		k = PREFETCH_MAX;
	for (i = 0; i < k; i++) {
		heads[i] = __atomic_load_n(&avail->ring[(uint16_t)(from + i) & mask],
					   __ATOMIC_RELAXED) & mask;
		__builtin_prefetch(&desc[heads[i]]);
	}
	for (i = 0; i < k; i++) {
		const uint64_t gpa = __atomic_load_n(&desc[heads[i]].addr, __ATOMIC_RELAXED);
		const unsigned char *h = gpa - hot->guest_phys_addr < hot->size ?
			(const unsigned char *)(uintptr_t)(hot->host_user_addr +
							   (gpa - hot->guest_phys_addr)) :
			hint_hva(mem, gpa, &hint);

		if (h == NULL)
			continue;
		if (rw) {
			__builtin_prefetch(h, 1);
			__builtin_prefetch(h + hdr_len, 1);
		} else {
			__builtin_prefetch(h);
			__builtin_prefetch(h + hdr_len);
		}
	}
}

/* v: the pop's view (its hot region) */
static void prefetch_burst(const struct sn_vring *vr, const struct pop_view *v, uint32_t k)
{
	/* a copy of the hint: a prefetch's guess does not move the parse's */
	prefetch_bufs(vr->desc, vr->avail, vr->mask, &vr->mem, vr->hdr_len, vr->last_avail, k, 0,
		      vr->hot_region, &v->hot);
}

int sn_vring_rxview_init(struct sn_vring_rxview *v, const void *desc, const void *avail,
			 uint32_t size, uint16_t hdr_len, const struct sn_vring_mem *mem)
{
	if (desc == NULL || avail == NULL || size == 0 || size > SN_VRING_MAX_SIZE ||
	    (size & (size - 1)) != 0 || ((uintptr_t)desc & 15) != 0 ||
	    ((uintptr_t)avail & 1) != 0 || mem == NULL || !mem_valid(mem))
		return -EINVAL;
	v->desc = desc;
	v->avail = avail;
	v->mask = size - 1;
	v->hdr_len = hdr_len;
	v->mem = *mem;
	return 0;
}

void sn_vring_rx_prefetch(const struct sn_vring_rxview *v, uint16_t next_avail, uint32_t n)
{
	const struct sn_vring_region none = { 0 };

	prefetch_bufs(v->desc, v->avail, v->mask, &v->mem, v->hdr_len, next_avail, n, 1, 0, &none);
}

uint32_t sn_vring_tx_pop(struct sn_vring *vr, struct sn_vring_pkt *out,
			 uint32_t max)
{
	uint16_t avail_idx, navail, head;
	uint32_t cnt = 0;
	/* The loop's state in locals (see struct pop_view), stored back
	 * after it: the avail index, the held list's tail (a pop only appends
	 * to it; the held count and its held_max test once at the end: the
	 * count only grows here) and the counters. held[] is stored per
	 * frame: a head repeated within the burst must find itself held. */
	struct pop_view v;
	const uint16_t *ring;
	uint16_t *prev, *next, last, hl;
	uint8_t *held;
	uint32_t mask, size, popped = 0, oob = 0, busy = 0;

	if (vr->broken || max == 0)
		return 0;
	/* Acquire pairs with the driver's write barrier before its avail->idx
	 * store (virtio_wmb in Linux virtqueue_add_split): the ring entries
	 * and descriptors it posted are visible to the loads below. */
	avail_idx = __atomic_load_n(&vr->avail->idx, __ATOMIC_ACQUIRE);
	navail = (uint16_t)(avail_idx - vr->last_avail);
	if (navail > vr->size) {
		vr->broken = true;
		vr->st.err[SN_VRING_E_AVAIL_JUMP]++;
		return 0;
	}
	v.desc = vr->desc;
	v.hdr_len = vr->hdr_len;
	v.max_pkt_len = vr->max_pkt_len;
	pop_view_hot(vr, &v);
	if (navail > 1 && max > 1)
		prefetch_burst(vr, &v, navail < max ? navail : max);
	ring = vr->avail->ring;
	mask = vr->mask;
	size = vr->size;
	prev = vr->prev;
	next = vr->next;
	held = vr->held;
	last = vr->last_avail;
	hl = vr->held_last;
	while (navail != 0 && cnt < max) {
		head = __atomic_load_n(&ring[last & mask], __ATOMIC_RELAXED);
		last++;
		navail--;
		if (head >= size) {
			oob++;
			continue;
		}
		if (held[head]) {
			busy++;
			continue;
		}
		if (parse_single(vr, &v, head, &out[cnt]))
			popped++;
		else
			parse_chain(vr, head, &out[cnt]);
		cnt++;
		/* append head to the held list (pop order) */
		held[head] = 1;
		next[head] = SN_VRING_NIL;
		prev[head] = hl;
		if (hl == SN_VRING_NIL)
			vr->held_first = head;
		else
			next[hl] = head;
		hl = head;
	}
	vr->last_avail = last;
	vr->held_last = hl;
	vr->st.popped += popped;
	vr->st.err[SN_VRING_E_HEAD_OOB] += oob;
	vr->st.err[SN_VRING_E_HEAD_BUSY] += busy;
	vr->st.held += cnt;
	if (vr->st.held > vr->st.held_max)
		vr->st.held_max = vr->st.held;
	if (vr->kick_on && vr->event_idx)
		__atomic_store_n(vr->avail_event, vr->last_avail, __ATOMIC_RELAXED);
	return cnt;
}
