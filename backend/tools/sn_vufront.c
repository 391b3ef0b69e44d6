/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_vufront.c — sn-vufront: a minimal vhost-user front-end (the role QEMU
 * plays) that posts crafted split-ring TX descriptors. Test-only.
 *
 * Design. The hardened ring parser (sn_vring: the "untrusted guest input"
 * rules of Carousel §5.2's deferred completions made safe) is tested here
 * against the running daemon, not only in a fake memory. This program is
 * the guest: it connects to a schednicd server
 * port, negotiates the vhost-user protocol (QEMU docs/interop/vhost-user.rst;
 * no protocol features, so rings start enabled at SET_VRING_KICK, and no
 * EVENT_IDX), shares two memfd regions that are contiguous in guest-physical
 * space but mapped separately (so a buffer can cross regions), lays out the
 * RX (0) and TX (1) split rings in them (virtio 1.1 §2.7) and runs one
 * scenario: a batch of chains (well-formed or malformed on purpose) is
 * published on the TX avail ring, kicked, and the used ring is watched until
 * the expected entries arrive or a timeout expires. One JSON line on stdout
 * says what was seen. The daemon's side of the contract: every chain-level
 * error comes back as a used entry with length 0; ring-level errors (bad or
 * busy head, avail jump) have nothing to complete and are only counted.
 *
 * Concurrency with the daemon (the device) follows the driver side of
 * virtio 1.1 §2.7.13: descriptors and avail ring entries are written first,
 * then avail->idx with release (pairs with the acquire load of avail->idx in
 * sn_vring_tx_pop); used->idx is loaded with acquire (pairs with the release
 * store in sn_vring_used_flush) before the used entries are read.
 *
 * Exit status: 0 = expectations met, 1 = not met (timeout, a bad chain not
 * completed with length 0), 2 = usage, 3 = protocol or system error.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "sn_vufront.h"

/* ---- Ring building (driver side) ---- */

static uint16_t put_desc(struct sn_vufront *f, uint64_t addr, uint32_t len, uint16_t flags,
			 uint16_t next)
{
	struct sn_vring_desc *d;

	if (f->nd >= f->q) {
		fprintf(stderr, "sn-vufront: scenario needs more than %u descriptors\n", f->q);
		exit(2);
	}
	d = &f->desc[f->nd];
	d->addr = addr;
	d->len = len;
	d->flags = flags;
	d->next = next;
	return f->nd++;
}

/* A frame in region 1 and its header slot in region 0; returns slot k. */
static uint32_t new_frame(struct sn_vufront *f)
{
	uint32_t k = f->nbuf++ % f->q;
	unsigned char *fr = f->base[f->frames_in_r2 ? 2 : 1] + (size_t)k * FRAME_SZ;

	memset(f->base[0] + HDR_OFF + 16 * k, 0, 16);
	memset(fr, 0, FRAME_LEN);
	memcpy(fr, f->dst, 6);
	memcpy(fr + 6, f->src, 6);
	fr[12] = 0x88;               /* IEEE local experimental ethertype */
	fr[13] = 0xb5;
	fr[14] = (unsigned char)k;
	return k;
}

static uint64_t hdr_gpa(uint32_t k) { return GPA0 + HDR_OFF + 16ull * k; }
static uint64_t frame_gpa(uint32_t k) { return GPA1 + (uint64_t)k * FRAME_SZ; }

static uint16_t chain_good(struct sn_vufront *f)
{
	uint32_t k = new_frame(f);
	uint16_t h = f->nd;

	put_desc(f, hdr_gpa(k), f->hdr_len, SN_VRING_DESC_F_NEXT, (uint16_t)(h + 1));
	put_desc(f, f->frames_in_r2 ? GPA2 + (uint64_t)k * FRAME_SZ : frame_gpa(k), FRAME_LEN,
		 0, 0);
	return h;
}

/* An indirect table at IND_OFF + t * 0x1000; returns its host pointer. */
static struct sn_vring_desc *ind_table(struct sn_vufront *f, unsigned t)
{
	return (struct sn_vring_desc *)(void *)(f->base[0] + IND_OFF + 0x1000u * t);
}

static uint64_t ind_gpa(unsigned t) { return GPA0 + IND_OFF + 0x1000ull * t; }

static uint16_t chain_good_indirect(struct sn_vufront *f)
{
	uint32_t k = new_frame(f);
	struct sn_vring_desc *t = ind_table(f, 3);

	t[0] = (struct sn_vring_desc){ hdr_gpa(k), f->hdr_len, SN_VRING_DESC_F_NEXT, 1 };
	t[1] = (struct sn_vring_desc){ frame_gpa(k), FRAME_LEN, 0, 0 };
	return put_desc(f, ind_gpa(3), 32, SN_VRING_DESC_F_INDIRECT, 0);
}

static void add_head(struct sn_vufront *f, uint16_t head, bool bad, bool completes)
{
	f->avail->ring[(uint16_t)(f->avail_idx + f->chains + f->skipped) & (f->q - 1)] = head;
	if (completes)
		f->chains++;
	else
		f->skipped++;
	if (bad)
		f->bad[f->nbad++] = head;
}

/* Publish the batch and kick. */
static void publish(struct sn_vufront *f)
{
	uint64_t one = 1;
	uint16_t n = (uint16_t)(f->chains + f->skipped);

	f->expect += f->chains;
	/* Release pairs with the acquire load of avail->idx in
	 * sn_vring_tx_pop(): descriptors and ring entries are visible first. */
	f->avail_idx = (uint16_t)(f->avail_idx + n);
	__atomic_store_n(&f->avail->idx, f->avail_idx, __ATOMIC_RELEASE);
	if (write(f->kickfd[1], &one, sizeof(one)) != sizeof(one))
		sn_vufront_die("kick");
	f->chains = f->skipped = 0;
}

static uint16_t used_idx(const struct sn_vufront *f)
{
	/* Acquire pairs with the release store of used->idx in
	 * sn_vring_used_flush(): the entries below it are visible. */
	return __atomic_load_n(&f->used->idx, __ATOMIC_ACQUIRE);
}

static void collect(struct sn_vufront *f)
{
	uint16_t u = used_idx(f);

	while (f->used_seen != u) {
		const struct sn_vring_used_elem *e = &f->used->ring[f->used_seen & (f->q - 1)];

		if (f->nseen < MAX_SEEN)
			f->seen[f->nseen++] = *e;
		f->used_seen++;
		f->used_total++;
	}
}

/* Wait until every chain published so far has its used entry. */
static void wait_used(struct sn_vufront *f)
{
	double t0 = sn_vufront_now(), deadline = t0 + f->timeout_s;

	for (;;) {
		collect(f);
		if (f->used_total >= f->expect)
			break;
		if (sn_vufront_now() > deadline) {
			f->timed_out = true;
			break;
		}
		sn_vufront_nap_us(200);
	}
	f->wait_ms += (sn_vufront_now() - t0) * 1e3;
}

/* ---- Scenarios ---- */

struct scenario {
	const char *name;
	uint32_t q;                  /* default queue size */
	void (*run)(struct sn_vufront *f, uint32_t count);
	void (*after_wait)(struct sn_vufront *f); /* after --wait-file, or NULL */
};

/* Bad chain(s) built by the caller, then one good chain on the same ring:
 * the queue must go on serving after a malformed chain. */
static void finish_with_good(struct sn_vufront *f)
{
	add_head(f, chain_good(f), false, true);
	publish(f);
	wait_used(f);
}

static void sc_good(struct sn_vufront *f, uint32_t count)
{
	while (count) {
		uint32_t n = count < f->q / 2 ? count : f->q / 2;

		f->nd = 0;
		for (uint32_t i = 0; i < n; i++)
			add_head(f, chain_good(f), false, true);
		publish(f);
		wait_used(f);
		if (f->timed_out)
			return;
		count -= n;
	}
}

/* Memory hotplug while the device runs. count good frames in
 * region 1; then region 2 is added (sn_vufront_hotplug: the back-end's
 * library remaps every region); then count frames with buffers in the new
 * region, then the same table is sent again (unchanged) and count more
 * frames go in region 1. Every chain must come back; the test checks the
 * back-end's counters (no addr_oob, one remap) and the sink (3 * count). */
static void sc_hotplug(struct sn_vufront *f, uint32_t count)
{
	sc_good(f, count);
	if (f->timed_out)
		return;
	sn_vufront_hotplug(f);
	f->frames_in_r2 = true;
	sc_good(f, count);
	f->frames_in_r2 = false;
	if (f->timed_out)
		return;
	sn_vufront_resend_table(f);  /* unchanged: nothing to remap */
	sc_good(f, count);
}

static void sc_hold(struct sn_vufront *f, uint32_t count)
{
	uint32_t n = count < f->q / 2 ? count : f->q / 2;

	for (uint32_t i = 0; i < n; i++)
		add_head(f, chain_good(f), false, true);
	publish(f);
	f->expect = 0;               /* held on purpose: nothing awaited */
	collect(f);
}

/* A hostile tenant holding mbufs: q chains, each a header carrying the
 * opt-in marker (held as long as the back-end likes, not copied out) and
 * an indirect table of SN_VRING_MAX_SEGS payload segments of FLOOD_SEG
 * bytes (one frame of 64 mbufs on the back-end's side), each chain posted
 * again as soon as it is used, until --timeout (nothing awaited, no
 * failure). */
#define FLOOD_OFF 0x20000u           /* region 0: the flood's indirect tables */
#define FLOOD_TBL 0x800u             /* one table of 65 descriptors each */
#define FLOOD_SEG 16u

static void sc_flood64(struct sn_vufront *f, uint32_t count)
{
	const double end = sn_vufront_now() + f->timeout_s;

	(void)count;
	_Static_assert(FLOOD_OFF + FLOOD_TBL * MAX_Q <= REG_SIZE, "flood tables fit region 0");
	_Static_assert((SN_VRING_MAX_SEGS + 1) * 16 <= FLOOD_TBL, "a flood table fits its slot");
	_Static_assert(SN_VRING_MAX_SEGS * FLOOD_SEG <= FRAME_SZ, "a flood frame fits its slot");
	for (uint32_t i = 0; i < f->q; i++) {
		uint32_t k = new_frame(f);
		struct sn_vring_desc *t = (struct sn_vring_desc *)(void *)
			(f->base[0] + FLOOD_OFF + FLOOD_TBL * i);

		/* num_buffers: the guest's opt-in marker (sn_vqtx.h), so the
		 * back-end holds the frames rather than copying them out */
		memcpy(f->base[0] + HDR_OFF + 16 * k + 10, (const uint8_t[2]){ 0x44, 0x53 }, 2);
		t[0] = (struct sn_vring_desc){ hdr_gpa(k), f->hdr_len, SN_VRING_DESC_F_NEXT, 1 };
		for (uint16_t j = 1; j <= SN_VRING_MAX_SEGS; j++)
			t[j] = (struct sn_vring_desc){ frame_gpa(k) + (j - 1u) * FLOOD_SEG, FLOOD_SEG,
				j < SN_VRING_MAX_SEGS ? SN_VRING_DESC_F_NEXT : 0, (uint16_t)(j + 1) };
		add_head(f, put_desc(f, GPA0 + FLOOD_OFF + FLOOD_TBL * i,
				     (SN_VRING_MAX_SEGS + 1) * 16, SN_VRING_DESC_F_INDIRECT, 0),
			 false, true);
	}
	publish(f);
	while (sn_vufront_now() < end) {
		const uint16_t u = used_idx(f);

		for (; f->used_seen != u; f->used_seen++, f->used_total++)
			add_head(f, (uint16_t)f->used->ring[f->used_seen & (f->q - 1)].id, false, true);
		if (f->chains)
			publish(f);
		sn_vufront_nap_us(100);
	}
	f->expect = 0;               /* held on purpose: nothing awaited */
}

static void sc_desc_oob(struct sn_vufront *f, uint32_t count)
{
	(void)count;
	add_head(f, put_desc(f, hdr_gpa(new_frame(f)), f->hdr_len, SN_VRING_DESC_F_NEXT,
			     (uint16_t)(f->q + 5)), true, true);
	finish_with_good(f);
}

static void sc_loop(struct sn_vufront *f, uint32_t count)
{
	uint32_t k = new_frame(f);
	uint16_t h = f->nd;

	(void)count;
	put_desc(f, hdr_gpa(k), f->hdr_len, SN_VRING_DESC_F_NEXT, (uint16_t)(h + 1));
	put_desc(f, frame_gpa(k), FRAME_LEN, SN_VRING_DESC_F_NEXT, h);
	add_head(f, h, true, true);
	finish_with_good(f);
}

/* Header, then an indirect table of q one-byte buffers: q + 1 buffer
 * descriptors in one chain (§2.7.5.3.1 bounds a chain by the queue size). */
static void sc_chain_too_long(struct sn_vufront *f, uint32_t count)
{
	uint32_t k = new_frame(f);
	struct sn_vring_desc *t = ind_table(f, 0);
	uint16_t h = f->nd;

	(void)count;
	for (uint32_t i = 0; i < f->q; i++)
		t[i] = (struct sn_vring_desc){ frame_gpa(k) + i, 1,
			i + 1 < f->q ? SN_VRING_DESC_F_NEXT : 0, (uint16_t)(i + 1) };
	put_desc(f, hdr_gpa(k), f->hdr_len, SN_VRING_DESC_F_NEXT, (uint16_t)(h + 1));
	put_desc(f, ind_gpa(0), f->q * 16, SN_VRING_DESC_F_INDIRECT, 0);
	add_head(f, h, true, true);
	finish_with_good(f);
}

/* Header, then SN_VRING_MAX_SEGS + 1 one-byte payload descriptors. */
static void sc_too_many_segs(struct sn_vufront *f, uint32_t count)
{
	uint32_t k = new_frame(f), nseg = SN_VRING_MAX_SEGS + 1;
	uint16_t h = f->nd;

	(void)count;
	put_desc(f, hdr_gpa(k), f->hdr_len, SN_VRING_DESC_F_NEXT, (uint16_t)(h + 1));
	for (uint32_t i = 0; i < nseg; i++)
		put_desc(f, frame_gpa(k) + i, 1, i + 1 < nseg ? SN_VRING_DESC_F_NEXT : 0,
			 (uint16_t)(f->nd + 1));
	add_head(f, h, true, true);
	finish_with_good(f);
}

static void sc_addr_oob(struct sn_vufront *f, uint32_t count)
{
	(void)count;
	add_head(f, put_desc(f, GPA_OOB, f->hdr_len + FRAME_LEN, 0, 0), true, true);
	finish_with_good(f);
}

/* One buffer over the boundary of the two regions (contiguous in GPA). */
static void sc_cross_region(struct sn_vufront *f, uint32_t count)
{
	(void)count;
	add_head(f, put_desc(f, GPA1 - 32, f->hdr_len + FRAME_LEN, 0, 0), true, true);
	finish_with_good(f);
}

static void sc_zero_len(struct sn_vufront *f, uint32_t count)
{
	uint32_t k = new_frame(f);
	uint16_t h = f->nd;

	(void)count;
	put_desc(f, hdr_gpa(k), f->hdr_len, SN_VRING_DESC_F_NEXT, (uint16_t)(h + 1));
	put_desc(f, frame_gpa(k), 0, 0, 0);
	add_head(f, h, true, true);
	finish_with_good(f);
}

static void sc_oversized(struct sn_vufront *f, uint32_t count)
{
	uint32_t k = new_frame(f);
	uint16_t h = f->nd;

	(void)count;
	put_desc(f, hdr_gpa(k), f->hdr_len, SN_VRING_DESC_F_NEXT, (uint16_t)(h + 1));
	put_desc(f, GPA1 + BIG_OFF, BIG_LEN, 0, 0);
	add_head(f, h, true, true);
	finish_with_good(f);
}

static void sc_too_short(struct sn_vufront *f, uint32_t count)
{
	(void)count;
	add_head(f, put_desc(f, hdr_gpa(new_frame(f)), f->hdr_len, 0, 0), true, true);
	finish_with_good(f);
}

static void sc_write_only(struct sn_vufront *f, uint32_t count)
{
	uint32_t k = new_frame(f);
	uint16_t h = f->nd;

	(void)count;
	put_desc(f, hdr_gpa(k), f->hdr_len, SN_VRING_DESC_F_NEXT, (uint16_t)(h + 1));
	put_desc(f, frame_gpa(k), FRAME_LEN, SN_VRING_DESC_F_WRITE, 0);
	add_head(f, h, true, true);
	finish_with_good(f);
}

/* Six kinds of bad indirect descriptor (§2.7.5.3), then a good indirect
 * chain and a good direct one. */
#define BAD_INDIRECT_KINDS 6
static void sc_bad_indirect(struct sn_vufront *f, uint32_t count)
{
	struct sn_vring_desc *nest = ind_table(f, 1);
	uint16_t h;

	(void)count;
	memset(ind_table(f, 0), 0, 0x1000);
	/* length not a multiple of 16 */
	add_head(f, put_desc(f, ind_gpa(0), 24, SN_VRING_DESC_F_INDIRECT, 0), true, true);
	/* table longer than the queue */
	add_head(f, put_desc(f, ind_gpa(0), (f->q + 1) * 16, SN_VRING_DESC_F_INDIRECT, 0),
		 true, true);
	/* nested: the table's entry is itself indirect */
	nest[0] = (struct sn_vring_desc){ ind_gpa(0), 16, SN_VRING_DESC_F_INDIRECT, 0 };
	add_head(f, put_desc(f, ind_gpa(1), 16, SN_VRING_DESC_F_INDIRECT, 0), true, true);
	/* INDIRECT together with NEXT */
	h = f->nd;
	put_desc(f, ind_gpa(0), 32, SN_VRING_DESC_F_INDIRECT | SN_VRING_DESC_F_NEXT,
		 (uint16_t)(h + 1));
	put_desc(f, frame_gpa(new_frame(f)), FRAME_LEN, 0, 0);
	add_head(f, h, true, true);
	/* table outside guest memory */
	add_head(f, put_desc(f, GPA_OOB, 32, SN_VRING_DESC_F_INDIRECT, 0), true, true);
	/* zero-length table */
	add_head(f, put_desc(f, ind_gpa(0), 0, SN_VRING_DESC_F_INDIRECT, 0), true, true);
	add_head(f, chain_good_indirect(f), false, true);
	finish_with_good(f);
}

/* An avail entry naming a descriptor past the table: nothing to complete. */
static void sc_head_oob(struct sn_vufront *f, uint32_t count)
{
	(void)count;
	add_head(f, (uint16_t)(f->q + 3), false, false);
	finish_with_good(f);
}

/* The same head twice in one batch: the second is busy (held). */
static void sc_head_busy(struct sn_vufront *f, uint32_t count)
{
	uint16_t h = chain_good(f);

	(void)count;
	add_head(f, h, false, true);
	add_head(f, h, false, false);
	publish(f);
	wait_used(f);
}

/* A good frame first (the queue is running), then avail->idx moved by more
 * than the queue size: the ring cannot be read any more. Nothing comes back
 * for the jump. */
static void sc_avail_jump(struct sn_vufront *f, uint32_t count)
{
	uint64_t one = 1;

	(void)count;
	add_head(f, chain_good(f), false, true);
	publish(f);
	wait_used(f);
	if (f->timed_out)
		return;
	f->avail_idx = (uint16_t)(f->avail_idx + f->q + 5);
	__atomic_store_n(&f->avail->idx, f->avail_idx, __ATOMIC_RELEASE);
	if (write(f->kickfd[1], &one, sizeof(one)) != sizeof(one))
		sn_vufront_die("kick");
}

/* After the jump was seen (--wait-file): the guest "repents", puts
 * avail->idx back one past the last good entry with a good chain there, and
 * watches for 1 s. A device that stopped the queue takes nothing (expected:
 * no new used entry, and GET_VRING_BASE still reports the pre-jump index). */
static void avail_jump_repent(struct sn_vufront *f)
{
	uint64_t one = 1;
	double deadline = sn_vufront_now() + 1.0;
	uint16_t idx = (uint16_t)(f->avail_idx - f->q - 5);

	f->nd = 0;
	f->avail->ring[idx & (f->q - 1)] = chain_good(f);
	f->avail_idx = (uint16_t)(idx + 1);
	__atomic_store_n(&f->avail->idx, f->avail_idx, __ATOMIC_RELEASE);
	if (write(f->kickfd[1], &one, sizeof(one)) != sizeof(one))
		sn_vufront_die("kick");
	while (sn_vufront_now() < deadline) {
		collect(f);
		sn_vufront_nap_us(1000);
	}
}

/* The guest rewrites a posted descriptor while the device may be reading
 * it: length 0, address outside memory, a loop back to the head, each
 * undone again at once, round and round until the chain is completed
 * (rounds start at different rewrites; which one the device copies is a
 * race). Whatever
 * the device copied is either a good frame or one chain-level error
 * (zero_len, addr_oob, loop); each chain is completed exactly once. */
static void sc_rewrite(struct sn_vufront *f, uint32_t count)
{
	for (uint32_t it = 0; it < count && !f->timed_out; it++) {
		struct sn_vring_desc orig;
		double t0 = sn_vufront_now(), deadline = t0 + f->timeout_s;
		uint16_t h;
		uint32_t m = it;         /* rounds start at different rewrites */

		f->nd = 0;
		h = chain_good(f);
		orig = f->desc[h + 1];
		add_head(f, h, false, true);
		publish(f);
		for (;;) {
			struct sn_vring_desc *d = &f->desc[h + 1];

			/* odd steps rewrite, even steps restore the original */
			switch ((m & 1) ? (m >> 1) % 3 : 3) {
			case 0: __atomic_store_n(&d->len, 0, __ATOMIC_RELAXED); break;
			case 1: __atomic_store_n(&d->addr, GPA_OOB, __ATOMIC_RELAXED); break;
			case 2: __atomic_store_n(&d->next, h, __ATOMIC_RELAXED);
				__atomic_store_n(&d->flags, SN_VRING_DESC_F_NEXT, __ATOMIC_RELAXED);
				break;
			default: __atomic_store_n(&d->flags, 0, __ATOMIC_RELAXED);
				__atomic_store_n(&d->next, 0, __ATOMIC_RELAXED);
				__atomic_store_n(&d->addr, orig.addr, __ATOMIC_RELAXED);
				__atomic_store_n(&d->len, orig.len, __ATOMIC_RELAXED);
				break;
			}
			m++;
			collect(f);
			if (f->used_total >= f->expect)
				break;
			if ((m & 1023) == 0) {
				if (sn_vufront_now() > deadline) {
					f->timed_out = true;
					break;
				}
				sn_vufront_nap_us(20);
			}
		}
		f->desc[h + 1] = orig;
		f->wait_ms += (sn_vufront_now() - t0) * 1e3;
	}
}

/* ---- Dirty log (live migration) ---- */

/* Pages of the TX used ring the back-end wrote while the used index went
 * from u0 to u1 (the index word and entries u0..u1-1) whose bit is not
 * set in the bitmap: appended to miss (at most nmax), returns the number
 * of pages written; *nmiss counts the unmarked ones. */
static unsigned log_missing(const struct sn_vufront *f, uint16_t u0, uint16_t u1,
			    uint64_t *written, unsigned nmax, unsigned *nmiss)
{
	const uint64_t used = sn_vufront_used_gpa(f);
	unsigned n = 0;

	*nmiss = 0;
	for (uint32_t k = 0; k <= (uint16_t)(u1 - u0); k++) {
		/* k == span: the index word; else entry u0 + k */
		uint64_t lo = k == (uint16_t)(u1 - u0) ? used + 2 :
			      used + 4 + 8ull * ((uint16_t)(u0 + k) & (f->q - 1));
		uint64_t pgs[2] = { lo / LOG_PAGE, (lo + (k == (uint16_t)(u1 - u0) ? 1 : 7)) /
						   LOG_PAGE };

		if (u1 == u0)
			break;
		for (unsigned j = 0; j < 2; j++) {
			bool dup = false;

			for (unsigned i = 0; i < n; i++)
				dup |= written[i] == pgs[j];
			if (dup || n >= nmax)
				continue;
			written[n++] = pgs[j];
		}
	}
	for (unsigned i = 0; i < n; i++)
		if (!sn_vufront_log_test(f, written[i]))
			(*nmiss)++;
	return n;
}

/* One phase's check as JSON (appended to f->log_json); wait_s: how long
 * the bitmap may lag the used index (0: it must already be marked). */
static void log_phase(struct sn_vufront *f, const char *name, uint16_t u0, uint16_t u1,
		      double wait_s)
{
	uint64_t written[16];
	unsigned n, nmiss;
	double deadline = sn_vufront_now() + wait_s;
	size_t len = strlen(f->log_json);
	char pages[256] = "";

	for (;;) {
		n = log_missing(f, u0, u1, written, 16, &nmiss);
		if (nmiss == 0 || sn_vufront_now() >= deadline)
			break;
		sn_vufront_nap_us(1000);
	}
	for (unsigned i = 0, off = 0; i < n && off < sizeof(pages) - 40; i++)
		off += (unsigned)snprintf(pages + off, sizeof(pages) - off, "%s[%" PRIu64 ",%s]",
					  i ? "," : "", written[i],
					  sn_vufront_log_test(f, written[i]) ? "true" : "false");
	if (u1 == u0 || nmiss)
		f->log_failed = true;
	snprintf(f->log_json + len, sizeof(f->log_json) - len,
		 "%s\"%s\":{\"used_from\":%u,\"used_to\":%u,\"pages\":[%s],\"unmarked\":%u}",
		 len ? "," : "", name, u0, u1, pages, nmiss);
}

/* The dirty log of a live migration, read as QEMU reads it. Phase
 * "running": count frames are posted (the test makes the back-end hold
 * them), then logging starts (sn_vufront_log_start) and the bitmap is
 * cleared; the back-end completes them while logging (its hold limit):
 * every page of the used ring it wrote since must get its bit. Phase
 * "stop": the bitmap cleared again, count more frames posted and the
 * device stopped at once (GET_VRING_BASE on both rings, as QEMU's
 * vhost_dev_stop before its last bitmap sync): the back-end
 * drop-completes what it holds before replying, and those pages must be
 * marked by then. The queue is sized so that the second phase's entries
 * cross into the used ring's second page. Needs --no-stop (the scenario
 * stops the device itself). */
static void sc_dirty_log(struct sn_vufront *f, uint32_t count)
{
	uint32_t n = count < f->q / 2 ? count : f->q / 2;
	uint16_t u0, u1, a0, base;

	for (uint32_t i = 0; i < n; i++)
		add_head(f, chain_good(f), false, true);
	publish(f);
	sn_vufront_log_start(f);
	sn_vufront_log_clear(f);
	u0 = used_idx(f);
	wait_used(f);
	u1 = used_idx(f);
	log_phase(f, "running", u0, u1, 2.0);
	if (f->timed_out)
		return;

	sn_vufront_log_clear(f);
	u0 = used_idx(f);
	a0 = f->avail_idx;
	f->nd = 0;
	for (uint32_t i = 0; i < n; i++)
		add_head(f, chain_good(f), false, true);
	publish(f);
	sn_vufront_nap_us(300000);   /* taken by the back-end, still held */
	base = (uint16_t)sn_vufront_get_base(f, 1);
	(void)sn_vufront_get_base(f, 0);
	/* Only the chains the back-end took are owed a used entry. */
	f->expect -= n - (uint16_t)(base - a0);
	collect(f);
	u1 = used_idx(f);
	if (u1 != base)
		f->log_failed = true;   /* a chain taken and not completed */
	log_phase(f, "stop", u0, u1, 0);
}

/* The announce of a migrated guest (VHOST_USER_SEND_RARP, as the
 * destination QEMU sends it for a guest without GUEST_ANNOUNCE) for the
 * --src MAC, after one frame from another MAC so the device runs; then
 * two malformed ones the back-end must ignore: a multicast MAC and a
 * payload of 4 bytes. The test then checks where the switch sends
 * frames for that MAC (--wait-file). */
static void sc_rarp(struct sn_vufront *f, uint32_t count)
{
	static const unsigned char mcast[6] = { 0x01, 0x00, 0x5e, 0, 0, 1 };
	unsigned char mac[6];

	(void)count;
	memcpy(mac, f->src, 6);
	f->src[5] ^= 0x80;           /* the frame is not from the announced MAC */
	add_head(f, chain_good(f), false, true);
	publish(f);
	wait_used(f);
	memcpy(f->src, mac, 6);
	sn_vufront_send_rarp(f, mac, 8);
	sn_vufront_send_rarp(f, mcast, 8);
	sn_vufront_send_rarp(f, mac, 4);
}

/* The bitmap replaced while the back-end logs into it (QEMU's log
 * resize; any front-end may do it): count rounds of a batch of good
 * frames, each completed by the back-end while four SET_LOG_BASE replace
 * the bitmap. Then one more batch must be logged in the last bitmap
 * ("after", as the "running" phase of dirty_log). */
static void sc_log_resize(struct sn_vufront *f, uint32_t count)
{
	uint16_t u0;

	sn_vufront_log_start(f);
	for (uint32_t r = 0; r < count && !f->timed_out; r++) {
		f->nd = 0;
		for (uint32_t i = 0; i < f->q / 2; i++)
			add_head(f, chain_good(f), false, true);
		publish(f);
		for (int k = 0; k < 4; k++)
			sn_vufront_log_resize(f);
		wait_used(f);
	}
	if (f->timed_out)
		return;
	sn_vufront_log_clear(f);
	u0 = used_idx(f);
	f->nd = 0;
	for (uint32_t i = 0; i < f->q / 2; i++)
		add_head(f, chain_good(f), false, true);
	publish(f);
	wait_used(f);
	log_phase(f, "after", u0, used_idx(f), 2.0);
}

static const struct scenario scenarios[] = {
	{ "good", 128, sc_good },
	{ "hold", 256, sc_hold },
	{ "flood64", 256, sc_flood64 },
	{ "desc_oob", 128, sc_desc_oob },
	{ "loop", 128, sc_loop },
	/* 64: q + 1 buffers must stay under the parser's walk budget
	 * (SN_VRING_MAX_SEGS + 16 visits), else too_many_segs fires first. */
	{ "chain_too_long", 64, sc_chain_too_long },
	{ "too_many_segs", 128, sc_too_many_segs },
	{ "addr_oob", 128, sc_addr_oob },
	{ "cross_region", 128, sc_cross_region },
	{ "zero_len", 128, sc_zero_len },
	{ "oversized", 128, sc_oversized },
	{ "too_short", 128, sc_too_short },
	{ "bad_indirect", 128, sc_bad_indirect },
	{ "write_only", 128, sc_write_only },
	{ "head_oob", 128, sc_head_oob },
	{ "head_busy", 128, sc_head_busy },
	{ "avail_jump", 128, sc_avail_jump, avail_jump_repent },
	{ "rewrite", 128, sc_rewrite },
	{ "hotplug", 128, sc_hotplug },
	{ "dirty_log", 256, sc_dirty_log },
	{ "rarp", 128, sc_rarp },
	{ "log_resize", 128, sc_log_resize },
	{ "restart", 256, sn_vufront_sc_restart },
	{ "sink", 256, sn_vufront_sc_sink },
};

/* ---- main ---- */

static int parse_mac(const char *s, unsigned char *mac)
{
	unsigned v[6];
	char tail;

	if (sscanf(s, "%2x:%2x:%2x:%2x:%2x:%2x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
		   &tail) != 6)
		return -1;
	for (int i = 0; i < 6; i++)
		mac[i] = (unsigned char)v[i];
	return 0;
}

static int parse_ulong(const char *s, unsigned long max, unsigned long *out)
{
	char *end;

	errno = 0;
	*out = strtoul(s, &end, 10);
	return (errno || end == s || *end || *out > max) ? -1 : 0;
}

static void usage(FILE *o)
{
	fprintf(o,
"usage: sn-vufront --socket PATH --scenario NAME [options]\n"
"       sn-vufront many ... (idle guests of many sockets: sn-vufront many --help)\n"
"       sn-vufront fuzz ... (random vhost-user messages: sn-vufront fuzz --help)\n"
"  Connects to a vhost-user back-end (server socket) as the front-end, posts\n"
"  crafted TX descriptors, prints one JSON line of what the used ring showed.\n"
"  --scenario NAME   good hold desc_oob loop chain_too_long too_many_segs\n"
"                    flood64 (64-segment chains reposted until --timeout)\n"
"                    addr_oob cross_region zero_len oversized too_short\n"
"                    bad_indirect write_only head_oob head_busy avail_jump rewrite\n"
"                    hotplug (memory hotplug while running)\n"
"                    dirty_log (live migration's dirty log: see sc_dirty_log;\n"
"                    with --no-stop), rarp (SEND_RARP for the --src MAC),\n"
"                    log_resize (SET_LOG_BASE while logging, --count rounds)\n"
"                    restart sink (across a back-end restart: sn_vufront_restart.c)\n"
"  --count N         frames for good/hold (hotplug: per phase), rounds for rewrite\n"
"                    (default 8)\n"
"  --queue-size N    TX/RX ring size, power of two 2..%u (default per scenario)\n"
"  --dst MAC         destination of the frames (default ff:ff:ff:ff:ff:ff)\n"
"  --src MAC         source (default 02:53:56:00:00:01)\n"
"  --timeout S       per wait: connect, reply, used entries (default 10)\n"
"  --wait-file PATH  after the scenario, wait (timeout) until PATH exists\n"
"  --no-stop         exit without GET_VRING_BASE (abrupt disconnect)\n"
"  --check-after-stop MS  after GET_VRING_BASE of the TX ring, keep the memory\n"
"                    mapped MS ms and fail (exit 1) if the used ring changed\n"
"  --rounds N        restart: back-end restarts to go through (default 1)\n"
"  --go-file PATH    restart: round k starts when PATH.k exists; sink: exit\n"
"                    when PATH exists\n", MAX_Q);
}

static void print_result(const struct sn_vufront *f, const char *name, const char *stop, bool ok)
{
	printf("{\"scenario\":\"%s\",\"queue_size\":%u,\"hdr_len\":%u,\"features\":\"%#" PRIx64
	       "\",\"expect_used\":%u,\"used_total\":%u,\"used_idx\":%u,\"used\":[",
	       name, f->q, f->hdr_len, f->features, f->expect, f->used_total, used_idx(f));
	for (uint32_t i = 0; i < f->nseen && i < MAX_PRINT; i++)
		printf("%s{\"id\":%u,\"len\":%u}", i ? "," : "", f->seen[i].id, f->seen[i].len);
	printf("],\"bad_heads\":[");
	for (uint32_t i = 0; i < f->nbad; i++)
		printf("%s%u", i ? "," : "", f->bad[i]);
	printf("],\"timeout\":%s,\"wait_ms\":%.3f,\"stop\":%s", f->timed_out ? "true" : "false",
	       f->wait_ms, stop);
	if (f->log_json[0])
		printf(",\"dirty_log\":{%s}", f->log_json);
	if (f->rounds && strcmp(name, "restart") == 0)
		sn_vufront_restart_json(f);
	printf(",\"ok\":%s}\n", ok ? "true" : "false");
	fflush(stdout);
}

/* Every bad head came back, with length 0. */
static bool bad_completed(const struct sn_vufront *f)
{
	for (uint32_t i = 0; i < f->nbad; i++) {
		bool found = false;

		for (uint32_t j = 0; j < f->nseen; j++)
			if (f->seen[j].id == f->bad[i] && f->seen[j].len == 0)
				found = true;
		if (!found)
			return false;
	}
	return true;
}

/* --check-after-stop: nothing may be written to the TX used ring once
 * GET_VRING_BASE of the TX ring was answered (the device gave the ring
 * back). The used ring (flags, idx, every element) is snapshotted at the
 * reply and compared ms later with the memory still mapped. Returns true
 * if unchanged; a change is reported loudly on stderr. */
static uint64_t used_snap[(4 + 8 * MAX_Q + 7) / 8];

static void after_stop_snapshot(const struct sn_vufront *f)
{
	memcpy(used_snap, (const void *)f->used, 4 + 8ull * f->q);
}

static bool after_stop_unchanged(const struct sn_vufront *f, unsigned long ms, char *out,
				 size_t outlen)
{
	const unsigned char *now = (const unsigned char *)f->used;
	const unsigned char *was = (const unsigned char *)used_snap;
	size_t n = 4 + 8ull * f->q, diff = 0, first = SIZE_MAX;

	sn_vufront_nap_us((long)ms * 1000);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	for (size_t i = 0; i < n; i++)
		if (__atomic_load_n(&now[i], __ATOMIC_RELAXED) != was[i]) {
			diff++;
			if (first == SIZE_MAX)
				first = i;
		}
	snprintf(out, outlen, "{\"ms\":%lu,\"bytes_changed\":%zu}", ms, diff);
	if (diff) {
		uint16_t idx_was, idx_now;

		memcpy(&idx_was, was + 2, 2);
		memcpy(&idx_now, now + 2, 2);
		fprintf(stderr, "sn-vufront: FAIL: %zu bytes of the TX used ring changed within "
			"%lu ms after GET_VRING_BASE was answered (first at offset %zu; used idx "
			"%u -> %u)\n", diff, ms, first, idx_was, idx_now);
	}
	return diff == 0;
}

static void wait_file(const struct sn_vufront *f, const char *path)
{
	double deadline = sn_vufront_now() + f->timeout_s;
	struct stat st;

	while (stat(path, &st) != 0) {
		if (sn_vufront_now() > deadline) {
			fprintf(stderr, "sn-vufront: %s did not appear within %.1f s\n", path,
				f->timeout_s);
			exit(1);
		}
		sn_vufront_nap_us(10000);
	}
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "scenario", required_argument, NULL, 'S' },
		{ "count", required_argument, NULL, 'c' },
		{ "queue-size", required_argument, NULL, 'q' },
		{ "dst", required_argument, NULL, 'd' },
		{ "src", required_argument, NULL, 'm' },
		{ "timeout", required_argument, NULL, 't' },
		{ "wait-file", required_argument, NULL, 'w' },
		{ "no-stop", no_argument, NULL, 'n' },
		{ "check-after-stop", required_argument, NULL, 'a' },
		{ "rounds", required_argument, NULL, 'r' },
		{ "go-file", required_argument, NULL, 'g' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static struct sn_vufront f;          /* large: keep it off the stack */
	const struct scenario *sc = NULL;
	const char *path = NULL, *name = NULL, *wfile = NULL;
	unsigned long count = 8, q = 0, v, check_ms = 0;
	bool no_stop = false, ok, after_ok = true;
	char stop[192] = "null", after[64] = "null";
	char *end;
	int opt;

	if (argc > 1 && strcmp(argv[1], "many") == 0)
		return sn_vufront_many(argc - 1, argv + 1);
	if (argc > 1 && strcmp(argv[1], "fuzz") == 0)
		return sn_vufront_fuzz(argc - 1, argv + 1);
	f.timeout_s = 10;
	f.rounds = 1;
	memset(f.dst, 0xff, 6);
	memcpy(f.src, (const unsigned char[6]){ 0x02, 0x53, 0x56, 0, 0, 1 }, 6);
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 's': path = optarg; break;
		case 'S': name = optarg; break;
		case 'c':
			if (parse_ulong(optarg, 1000000, &count) || count == 0)
				goto bad_value;
			break;
		case 'q':
			if (parse_ulong(optarg, MAX_Q, &q) || q < 2 || (q & (q - 1)))
				goto bad_value;
			break;
		case 'd': if (parse_mac(optarg, f.dst)) goto bad_value; break;
		case 'm': if (parse_mac(optarg, f.src)) goto bad_value; break;
		case 't':
			f.timeout_s = strtod(optarg, &end);
			if (end == optarg || *end || !(f.timeout_s > 0 && f.timeout_s < 3600))
				goto bad_value;
			break;
		case 'w': wfile = optarg; break;
		case 'n': no_stop = true; break;
		case 'a':
			if (parse_ulong(optarg, 600000, &check_ms) || check_ms == 0)
				goto bad_value;
			break;
		case 'r':
			if (parse_ulong(optarg, 100000, &v) || v == 0)
				goto bad_value;
			f.rounds = (uint32_t)v;
			break;
		case 'g': f.go_file = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!path || !name || optind != argc) {
		usage(stderr);
		return 2;
	}
	for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++)
		if (strcmp(scenarios[i].name, name) == 0)
			sc = &scenarios[i];
	if (!sc) {
		fprintf(stderr, "sn-vufront: unknown scenario '%s'\n", name);
		return 2;
	}
	f.q = q ? (uint32_t)q : sc->q;
	f.migration = sc->run == sc_dirty_log || sc->run == sc_rarp || sc->run == sc_log_resize;
	f.path = path;

	sn_vufront_map(&f);
	sn_vufront_connect(&f, path);
	sn_vufront_negotiate(&f);
	sc->run(&f, (uint32_t)count);
	if (wfile) {
		wait_file(&f, wfile);
		if (sc->after_wait)
			sc->after_wait(&f);
	}
	collect(&f);
	if (!no_stop) {
		/* Device stop, as QEMU does it: the back-end must complete or
		 * drop-complete everything it holds before it answers. */
		uint32_t tx = sn_vufront_get_base(&f, 1), rx;

		if (check_ms)
			after_stop_snapshot(&f);
		rx = sn_vufront_get_base(&f, 0);
		if (check_ms)
			after_ok = after_stop_unchanged(&f, check_ms, after, sizeof(after));
		v = used_idx(&f);
		snprintf(stop, sizeof(stop), "{\"tx_base\":%u,\"rx_base\":%u,\"used_idx\":%lu,"
			 "\"after\":%s}", tx, rx, v, after);
	}
	ok = !f.timed_out && bad_completed(&f) && f.used_total >= f.expect && !f.log_failed &&
	     after_ok;
	if (sc->run == sn_vufront_sc_restart || sc->run == sn_vufront_sc_sink)
		ok = f.restart_ok;
	print_result(&f, sc->name, stop, ok);
	close(f.sock);
	return ok ? 0 : 1;

bad_value:
	fprintf(stderr, "sn-vufront: bad value for --%s: %s\n",
		opt == 'c' ? "count" : opt == 'q' ? "queue-size" : opt == 't' ? "timeout" :
		opt == 'r' ? "rounds" :
		opt == 'd' ? "dst" : opt == 'a' ? "check-after-stop" : "src", optarg);
	return 2;
}
