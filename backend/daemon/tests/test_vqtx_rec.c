/* SPDX-License-Identifier: BSD-3-Clause */
/* test_vqtx_rec.c — unit tests of the durable record of a deferred TX
 * queue (sn_vqtx_rec.c) over a hand-built queue, a real sn_vring on a fake
 * guest ring and a record file in a temp directory: no EAL, no vhost
 * device.
 *
 * Properties: a new file records nothing; pops set bits and the avail
 * index; a publication clears the published heads; entries published
 * after the record's last update (a crash between the used->idx store and
 * the record's) are folded in at recovery; a valid record names exactly
 * the outstanding heads and the avail index, and completing them leaves
 * it empty; a record with nothing outstanding is never rejected; every
 * mismatch (ring addresses, size, front-end base, a head beyond the ring,
 * a used entry naming one, too many or too few heads, avail too far
 * ahead, not a record) is rejected and counted, the record unchanged.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sn_vqtx_impl.h"

#include "sn_check.h"

#define RING 8u
#define MEM  0x4000u

static unsigned char *mem;
static struct sn_vring_mem table;
static struct sn_vring_used *used;
static struct sn_vring_avail *avail;

static struct sn_vring *ring_at(uint16_t last_avail, uint16_t last_used)
{
	struct sn_vring_config c = { .size = RING, .hdr_len = 12,
				     .last_avail_idx = last_avail, .last_used_idx = last_used };

	c.desc = mem;
	c.avail = avail;
	c.used = used;
	return sn_vring_create(&c, &table);
}

static struct sn_vqtx_rec_ring ring_desc(uint16_t used_idx, uint16_t avail_idx, uint16_t base)
{
	struct sn_vqtx_rec_ring r = { .size = RING, .gpa = { 0x0, 0x80, 0x400 },
				      .used_idx = used_idx, .avail_idx = avail_idx,
				      .base = base, .used = used };
	return r;
}

static void pop(struct sn_vqtx *q, const uint16_t *heads, uint32_t n, uint16_t last_avail)
{
	struct sn_vring_pkt p[RING];

	for (uint32_t i = 0; i < n; i++)
		p[i].head = heads[i];
	rec_popped(q, p, n, last_avail);
}

static void use(uint16_t at, uint32_t id)
{
	used->ring[at % RING].id = id;
	used->ring[at % RING].len = 0;
}

static unsigned outstanding(const struct sn_vqtx *q)
{
	unsigned n = 0;

	for (unsigned w = 0; w < SN_VRING_MAX_SIZE / 64; w++)
		n += (unsigned)__builtin_popcountll(q->rec->bits[w]);
	return n;
}

int main(void)
{
	char dir[] = "/tmp/sn-test-rec-XXXXXX", path[64];
	static struct sn_vqtx q;
	struct sn_vqtx_rec_ring rr;
	struct sn_vqtx_rec saved;
	uint16_t la = 0;
	uint32_t n = 0;

	mem = aligned_alloc(64, MEM);
	CHECK(mem && mkdtemp(dir));
	memset(mem, 0, MEM);
	table.nregions = 1;
	table.regions[0].size = MEM;
	table.regions[0].host_user_addr = (uintptr_t)mem;
	avail = (void *)(mem + 0x80);
	used = (void *)(mem + 0x400);
	snprintf(path, sizeof(path), "%s/p.txq0.rec", dir);
	q.vring = 1;

	/* A new file: nothing recorded. */
	CHECK(sn_vqtx_set_record(&q, path) == 0 && q.rec);
	rr = ring_desc(0, 0, 0);
	CHECK(sn_vqtx_rec_recover(&q, &rr, &la, &n) == 0 && q.st.record_rejected == 0);
	q.vr = ring_at(0, 0);
	sn_vqtx_rec_begin(&q, &rr, 0, 0, false);

	/* Pops of heads 0..4, completions of 1 and 3 published. */
	pop(&q, (const uint16_t[]){ 0, 1, 2, 3, 4 }, 5, 5);
	CHECK(q.rec->last_avail == 5 && outstanding(&q) == 5);
	use(0, 1);
	use(1, 3);
	used->idx = 2;
	sn_vqtx_rec_published(&q, 0, 2);
	CHECK(q.rec->used_pub == 2 && outstanding(&q) == 3);
	/* Head 0 completed and published, then the process died before the
	 * record said so: the used ring is the log. */
	use(2, 0);
	used->idx = 3;
	avail->idx = 5;
	memcpy(&saved, q.rec, sizeof(saved));
	sn_vring_free(q.vr);
	q.vr = NULL;

	/* Every mismatch is rejected, counted, and leaves the record as it was. */
	struct { struct sn_vqtx_rec_ring r; void (*spoil)(struct sn_vqtx *q); } bad[] = {
		{ ring_desc(3, 5, 3), NULL },   /* ring addresses differ (below) */
		{ ring_desc(3, 5, 3), NULL },   /* size differs */
		{ ring_desc(3, 5, 0), NULL },   /* the front-end's base is not its used idx */
		{ ring_desc(3, 5 + RING + 1, 3), NULL },  /* avail more than a ring ahead */
		{ ring_desc(6, 6, 6), NULL },   /* used idx beyond last_avail */
	};
	bad[0].r.gpa[1] = 0x88;
	bad[1].r.size = RING * 2;
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memcpy(q.rec, &saved, sizeof(saved));
		CHECK(sn_vqtx_rec_recover(&q, &bad[i].r, &la, &n) == -EINVAL);
		CHECK(q.st.record_rejected == i + 1);
	}
	memcpy(q.rec, &saved, sizeof(saved));
	q.rec->bits[0] |= 1ULL << RING;           /* a head beyond the ring */
	rr = ring_desc(3, 5, 3);
	CHECK(sn_vqtx_rec_recover(&q, &rr, &la, &n) == -EINVAL);
	memcpy(q.rec, &saved, sizeof(saved));
	q.rec->bits[0] |= 1ULL << 6;              /* one head too many */
	CHECK(sn_vqtx_rec_recover(&q, &rr, &la, &n) == -EINVAL);
	memcpy(q.rec, &saved, sizeof(saved));
	use(2, RING + 3);                         /* a used entry naming no head */
	CHECK(sn_vqtx_rec_recover(&q, &rr, &la, &n) == -EINVAL);
	use(2, 0);
	memcpy(q.rec, &saved, sizeof(saved));
	q.rec->magic ^= 1;                        /* not a record */
	CHECK(sn_vqtx_rec_recover(&q, &rr, &la, &n) == -EINVAL);
	CHECK(q.st.record_rejected == 9);

	/* The valid record: heads 2 and 4 out, resume at 5. */
	memcpy(q.rec, &saved, sizeof(saved));
	CHECK(sn_vqtx_rec_recover(&q, &rr, &la, &n) == 1 && la == 5 && n == 2);
	CHECK(q.rec->used_pub == 3 && outstanding(&q) == 2);
	CHECK((q.rec->bits[0] & 0xff) == ((1u << 2) | (1u << 4)));
	q.vr = ring_at(la, rr.used_idx);
	sn_vqtx_rec_begin(&q, &rr, la, rr.used_idx, true);
	CHECK(sn_vqtx_rec_complete_all(&q) == 2 && q.st.recovered_after_restart == 2);
	CHECK(sn_vring_stats(q.vr)->held == 0 && sn_vring_stats(q.vr)->completed == 2);
	sn_vring_used_flush(q.vr);
	CHECK(used->idx == 5 && used->ring[3].id + used->ring[4].id == 2 + 4);
	sn_vqtx_rec_published(&q, 3, 5);
	CHECK(outstanding(&q) == 0 && q.rec->used_pub == 5 && q.rec->last_avail == 5);

	/* Nothing outstanding: never rejected, whatever the ring. */
	rr = ring_desc(0, 0, 0);
	rr.gpa[0] = 0x1234;
	CHECK(sn_vqtx_rec_recover(&q, &rr, &la, &n) == 0 && q.st.record_rejected == 9);

	sn_vring_free(q.vr);
	sn_vqtx_rec_remove(&q);
	CHECK(access(path, F_OK) != 0);
	sn_vqtx_rec_close(&q);
	CHECK(rmdir(dir) == 0);
	free(mem);
	printf("test_vqtx_rec: ok\n");
	return 0;
}
