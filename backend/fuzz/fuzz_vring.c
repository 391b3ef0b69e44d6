/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_vring.c — libFuzzer target for sn_vring, the split-virtqueue parser.
 *
 * Fake guest memory: four malloc'd regions, the first two guest-physically
 * contiguous (so buffers can straddle them), a gap, and one holding the
 * rings. The input is: one config byte (queue size 2..256, header 10/12,
 * EVENT_IDX, small or default packet bound); a count and up to 16
 * descriptors; a count and up to 255 bytes for the start of region 2 (where
 * indirect tables tend to point); then a program of guest and device
 * operations: post heads, rewrite descriptors and memory, jump avail idx,
 * set used_event / avail flags, build plausible direct chains and indirect
 * tables (so long valid chains occur), pop, complete (oldest, or any id),
 * flush, toggle kicks. Descriptor addresses and lengths are folded into the
 * interesting range unless their top bit is set, so both near misses and
 * wild values occur.
 *
 * Invariants checked against a model of the held set (any failure aborts):
 * never a crash or hang; every popped head is valid, was not already held,
 * and is completed exactly once (the end drains with sn_vring_oldest_held);
 * completing anything not held is refused and counted; the oldest held id
 * matches pop order; every returned iovec lies inside one guest region and
 * their sum is the packet length within the bound; bad entries carry no
 * segments; counters add up (popped + bad = returned, bad = sum of chain
 * causes, skipped heads + returned = avail entries consumed); flushed used
 * entries are exactly the completions made, in order.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sn_vring.h"

#define FAIL(...) do { fprintf(stderr, "fuzz_vring: " __VA_ARGS__); abort(); } while (0)

#define NREG 4
static const uint64_t reg_gpa[NREG] = { 0x0000, 0x1000, 0x3000, 0x8000 };
static const uint64_t reg_size[NREG] = { 0x1000, 0x1000, 0x1000, 0x2000 };
#define DESC_GPA  0x8000u
#define AVAIL_GPA 0x9000u
#define USED_GPA  0x9240u
#define MAXQ      256u
#define MAXREC    4096u
#define ORDER_CAP (MAXQ * 16u)
#define IND_OFF   0x400u   /* indirect tables built in region 2 */
#define IND_MAX   ((0x1000u - IND_OFF) / 16u)

struct input {
	const uint8_t *p;
	size_t n;
};

static uint8_t take(struct input *in)
{
	if (in->n == 0)
		return 0;
	in->n--;
	return *in->p++;
}

static uint64_t take_n(struct input *in, int bytes)
{
	uint64_t v = 0;

	for (int i = 0; i < bytes; i++)
		v |= (uint64_t)take(in) << (8 * i);
	return v;
}

struct fz {
	unsigned char *reg[NREG];
	struct sn_vring_mem mem;
	struct sn_vring_desc *desc;
	struct sn_vring_avail *avail;
	struct sn_vring_used *used;
	struct sn_vring *vr;
	uint32_t size, max_pkt;
	uint16_t hdr_len, avail_idx;
	/* Model. */
	uint8_t held[MAXQ];
	uint32_t held_seq[MAXQ];   /* pop seq of the live hold, 0 if none */
	struct ord { uint16_t id; uint32_t seq; } order[ORDER_CAP];
	uint32_t order_n, order_first, seq;
	uint64_t returned, skipped_seen, completions;
	uint16_t used_pub;
	struct sn_vring_used_elem rec[MAXREC]; /* completions since last flush */
	uint32_t nrec;
};

static void *hva(struct fz *f, uint64_t gpa)
{
	for (int i = 0; i < NREG; i++)
		if (gpa >= reg_gpa[i] && gpa - reg_gpa[i] < reg_size[i])
			return f->reg[i] + (gpa - reg_gpa[i]);
	FAIL("hva %#llx\n", (unsigned long long)gpa);
}

static int in_guest(struct fz *f, const void *p, size_t len)
{
	uintptr_t a = (uintptr_t)p;

	for (int i = 0; i < NREG; i++) {
		uintptr_t b = (uintptr_t)f->reg[i];

		if (a >= b && len <= reg_size[i] && a - b <= reg_size[i] - len)
			return 1;
	}
	return 0;
}

static void fold_desc(struct sn_vring_desc *d)
{
	if (!(d->addr >> 63))
		d->addr &= 0xffff;
	if (!(d->len >> 31))
		d->len &= 0x1fff;
}

static void put_desc(struct fz *f, uint32_t i, struct input *in)
{
	struct sn_vring_desc d;

	d.addr = take_n(in, 8);
	d.len = (uint32_t)take_n(in, 4);
	d.flags = (uint16_t)(take(in) & 7);
	d.next = take(in);
	fold_desc(&d);
	f->desc[i] = d;
}

static uint64_t chain_errs(const struct sn_vring_stats *st)
{
	uint64_t s = 0;

	for (int e = 1; e < SN_VRING_E__CHAIN_MAX; e++)
		s += st->err[e];
	return s;
}

static void check_stats(struct fz *f)
{
	const struct sn_vring_stats *st = sn_vring_stats(f->vr);
	uint32_t held = 0;

	for (uint32_t i = 0; i < f->size; i++)
		held += f->held[i];
	if (st->popped + st->bad != f->returned)
		FAIL("popped %llu + bad %llu != returned %llu\n",
		     (unsigned long long)st->popped, (unsigned long long)st->bad,
		     (unsigned long long)f->returned);
	if (st->bad != chain_errs(st))
		FAIL("bad != sum of chain causes\n");
	if (st->held != held || st->held_max < st->held || st->held_max > f->size)
		FAIL("held %u model %u max %u\n", st->held, held, st->held_max);
	if (st->completed != f->completions)
		FAIL("completed\n");
	if (st->completed + st->held != f->returned)
		FAIL("popped heads not completed exactly once\n");
	if (st->err[SN_VRING_OK] != 0 || st->notify > st->flushes)
		FAIL("counters\n");
}

/* Oldest held id in pop order: order[] holds (id, pop seq) and an entry is
 * live iff the id is still held from that very pop. */
static uint32_t model_oldest(struct fz *f)
{
	while (f->order_first < f->order_n) {
		struct ord *o = &f->order[f->order_first];

		if (f->held_seq[o->id] == o->seq)
			return o->id;
		f->order_first++;
	}
	return UINT32_MAX;
}

static void model_pop(struct fz *f, uint16_t id)
{
	uint32_t k = 0;

	if (f->order_n == ORDER_CAP) {
		for (uint32_t j = f->order_first; j < f->order_n; j++)
			if (f->held_seq[f->order[j].id] == f->order[j].seq)
				f->order[k++] = f->order[j];
		f->order_n = k;
		f->order_first = 0;
	}
	f->held_seq[id] = ++f->seq;
	f->held[id] = 1;
	f->order[f->order_n].id = id;
	f->order[f->order_n].seq = f->seq;
	f->order_n++;
}

static void op_pop(struct fz *f, uint32_t max)
{
	static struct sn_vring_pkt out[8];
	const struct sn_vring_stats *st = sn_vring_stats(f->vr);
	uint64_t skip0 = st->err[SN_VRING_E_HEAD_OOB] + st->err[SN_VRING_E_HEAD_BUSY];
	uint16_t la0, la1, lu;
	bool broken = sn_vring_is_broken(f->vr);
	uint32_t n;

	sn_vring_get_base(f->vr, &la0, &lu);
	n = sn_vring_tx_pop(f->vr, out, max);
	sn_vring_get_base(f->vr, &la1, &lu);
	if (n > max || (broken && (n != 0 || la1 != la0)))
		FAIL("pop n=%u max=%u broken=%d\n", n, max, broken);
	if ((uint16_t)(la1 - la0) != n + (st->err[SN_VRING_E_HEAD_OOB] +
					  st->err[SN_VRING_E_HEAD_BUSY] - skip0))
		FAIL("avail entries consumed != returned + skipped\n");
	for (uint32_t i = 0; i < n; i++) {
		struct sn_vring_pkt *p = &out[i];
		uint64_t sum = 0;

		if (p->head >= f->size || f->held[p->head])
			FAIL("head %u returned while invalid/held\n", p->head);
		model_pop(f, p->head);
		f->returned++;
		if (p->err >= SN_VRING_E__CHAIN_MAX)
			FAIL("err %d is not a chain cause\n", p->err);
		if (p->err != SN_VRING_OK) {
			if (p->nseg != 0 || p->len != 0)
				FAIL("bad entry with segments\n");
			continue;
		}
		if (p->nseg == 0 || p->nseg > SN_VRING_MAX_SEGS)
			FAIL("nseg %u\n", p->nseg);
		for (uint32_t s = 0; s < p->nseg; s++) {
			if (p->iov[s].iov_len == 0 ||
			    !in_guest(f, p->iov[s].iov_base, p->iov[s].iov_len))
				FAIL("iov %u outside guest memory\n", s);
			sum += p->iov[s].iov_len;
		}
		if (sum != p->len || p->len == 0 || p->len > f->max_pkt)
			FAIL("len %u sum %llu\n", p->len, (unsigned long long)sum);
		if (f->hdr_len == 10 && p->hdr.num_buffers != 0)
			FAIL("10-byte header leaked num_buffers\n");
	}
}

static void op_complete(struct fz *f, uint32_t id, uint32_t len)
{
	uint64_t bc = sn_vring_stats(f->vr)->err[SN_VRING_E_BAD_COMPLETION];
	uint64_t ooo = sn_vring_stats(f->vr)->out_of_order;
	int valid = id < f->size && f->held[id];
	uint32_t oldest = model_oldest(f);
	int rc;

	if (sn_vring_oldest_held(f->vr) != (oldest == UINT32_MAX ? -ENOENT : (int)oldest))
		FAIL("oldest held %d, model %u\n", sn_vring_oldest_held(f->vr), oldest);
	rc = sn_vring_used_put(f->vr, id, len);
	if (valid) {
		if (rc != 0)
			FAIL("put of held id %u refused\n", id);
		if (sn_vring_stats(f->vr)->out_of_order != ooo + (id != oldest))
			FAIL("out_of_order\n");
		f->held[id] = 0;
		f->held_seq[id] = 0;
		f->completions++;
		if (f->nrec < MAXREC) {
			f->rec[f->nrec].id = id;
			f->rec[f->nrec].len = len;
		}
		f->nrec++;
	} else if (rc != -EINVAL ||
		   sn_vring_stats(f->vr)->err[SN_VRING_E_BAD_COMPLETION] != bc + 1) {
		FAIL("put of id %u not held: rc %d\n", id, rc);
	}
}

static void op_flush(struct fz *f)
{
	uint16_t before = f->used_pub, la, lu;
	uint32_t k, first;

	sn_vring_used_flush(f->vr);
	f->used_pub = (uint16_t)(f->used_pub + f->nrec);
	if (f->used->idx != f->used_pub)
		FAIL("used idx %u model %u\n", f->used->idx, f->used_pub);
	sn_vring_get_base(f->vr, &la, &lu);
	if (lu != f->used_pub)
		FAIL("base used idx\n");
	/* Entries written since the last flush, the last `size` of them
	 * (more overwrite each other, which only a guest that reposted heads
	 * without reaping them can cause). */
	if (f->nrec <= MAXREC) {
		first = f->nrec > f->size ? f->nrec - f->size : 0;
		for (k = first; k < f->nrec; k++) {
			struct sn_vring_used_elem *e =
				&f->used->ring[(uint16_t)(before + k) & (f->size - 1)];

			if (e->id != f->rec[k].id || e->len != f->rec[k].len)
				FAIL("used entry %u\n", k);
		}
	}
	f->nrec = 0;
}

/* k linked descriptors t[s], t[s+1], ... (mod n) over the data regions,
 * the first one just long enough for the header; all inside one region. */
static void make_chain(struct fz *f, struct input *in, struct sn_vring_desc *t,
		       uint32_t s, uint32_t k, uint32_t n)
{
	uint8_t tail = take(in);

	for (uint32_t j = 0; j < k; j++) {
		struct sn_vring_desc *d = &t[(s + j) % n];

		uint32_t page = take(in) % 0x30;

		page += page >= 0x20 ? 0x10 : 0; /* skip the gap at 0x2000 */
		d->addr = (uint64_t)page * 0x100 + (j & 0x3f);
		d->len = j == 0 ? f->hdr_len + (tail & 1) : 1u + take(in) % 0x80;
		d->flags = SN_VRING_DESC_F_NEXT;
		d->next = (uint16_t)((s + j + 1) % n);
	}
	if (!(tail & 2))
		t[(s + k - 1) % n].flags = 0; /* else it continues, maybe looping */
}

static void guest_post(struct fz *f, uint16_t head)
{
	f->avail->ring[f->avail_idx & (f->size - 1)] = head;
	f->avail_idx++;
	f->avail->idx = f->avail_idx;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct fz f;
	struct input in = { data, size };
	struct sn_vring_config c;
	uint8_t cfgb = take(&in);
	uint32_t steps = 0;

	memset(&f, 0, sizeof(f));
	for (int i = 0; i < NREG; i++) {
		f.reg[i] = aligned_alloc(64, reg_size[i]);
		if (f.reg[i] == NULL)
			abort();
		memset(f.reg[i], 0x5a, reg_size[i]);
		f.mem.regions[i].guest_phys_addr = reg_gpa[i];
		f.mem.regions[i].size = reg_size[i];
		f.mem.regions[i].host_user_addr = (uintptr_t)f.reg[i];
	}
	f.mem.nregions = NREG;
	f.size = 2u << (cfgb & 7);
	f.hdr_len = (cfgb & 8) ? 10 : 12;
	f.max_pkt = (cfgb & 32) ? 256 : SN_VRING_DEF_MAX_PKT;
	f.desc = hva(&f, DESC_GPA);
	f.avail = hva(&f, AVAIL_GPA);
	f.used = hva(&f, USED_GPA);
	memset(f.desc, 0, 16 * MAXQ);
	memset(f.avail, 0, 6 + 2 * MAXQ);
	memset(f.used, 0, 6 + 8 * MAXQ);
	for (uint32_t i = 0, k = take(&in) % 17; i < k && i < f.size; i++)
		put_desc(&f, i, &in);
	for (uint32_t i = 0, k = take(&in); i < k; i++)
		f.reg[2][i] = take(&in);

	c = (struct sn_vring_config){ .desc = f.desc, .avail = f.avail,
		.used = f.used, .size = f.size, .hdr_len = f.hdr_len,
		.event_idx = (cfgb & 16) != 0,
		.max_pkt_len = (cfgb & 32) ? 256 : 0 };
	f.vr = sn_vring_create(&c, &f.mem);
	if (f.vr == NULL)
		FAIL("create\n");

	while (in.n > 0 && steps++ < 4096) {
		uint8_t op = take(&in);

		switch (op % 14) {
		case 0:
		case 1:
			op_pop(&f, take(&in) % 9);
			break;
		case 2:
		case 3: {
			uint16_t h = (uint16_t)take_n(&in, 2);

			guest_post(&f, (h & 0x8000) ? h : (uint16_t)(h % (f.size + 2)));
			break;
		}
		case 4: {
			int id = sn_vring_oldest_held(f.vr);

			if (id >= 0)
				op_complete(&f, (uint32_t)id, take(&in));
			break;
		}
		case 5:
			op_complete(&f, (uint32_t)take_n(&in, 2) % (f.size + 3), take(&in));
			break;
		case 6:
			op_flush(&f);
			break;
		case 7:
			put_desc(&f, take(&in) % f.size, &in);
			break;
		case 8: /* any guest byte in the data regions */
			f.reg[take(&in) % 3][take_n(&in, 2) & 0xfff] = take(&in);
			break;
		case 9: /* avail idx moved arbitrarily */
			f.avail_idx = (uint16_t)(f.avail_idx + take(&in) * (op >> 4));
			f.avail->idx = f.avail_idx;
			break;
		case 10:
			f.avail->ring[f.size] = (uint16_t)take_n(&in, 2); /* used_event */
			f.avail->flags = take(&in) & 1;
			break;
		case 11:
			sn_vring_kick_enable(f.vr, take(&in) & 1);
			break;
		case 12: /* a plausible direct chain, possibly closed into a loop */
			make_chain(&f, &in, f.desc, take(&in) % f.size,
				   1 + take(&in) % f.size, f.size);
			break;
		case 13: { /* a plausible indirect table in region 2 */
			struct sn_vring_desc t[IND_MAX], *d;
			uint32_t k = 1 + take(&in) % IND_MAX;

			make_chain(&f, &in, t, 0, k, k);
			memcpy(f.reg[2] + IND_OFF, t, k * sizeof(t[0]));
			d = &f.desc[take(&in) % f.size];
			d->addr = reg_gpa[2] + IND_OFF;
			d->len = k * 16;
			d->flags = SN_VRING_DESC_F_INDIRECT;
			break;
		}
		}
		check_stats(&f);
	}

	/* Device stop: drop-complete everything held, publish, verify. */
	for (int id; (id = sn_vring_oldest_held(f.vr)) >= 0;)
		op_complete(&f, (uint32_t)id, 0);
	op_flush(&f);
	check_stats(&f);
	if (sn_vring_stats(f.vr)->held != 0)
		FAIL("held after drain\n");
	sn_vring_free(f.vr);
	for (int i = 0; i < NREG; i++)
		free(f.reg[i]);
	return 0;
}
