/* SPDX-License-Identifier: BSD-3-Clause */
/* fz_vqtx_guest.c — fuzz_vqtx's fake guest: it builds TX descriptor
 * chains in the fake device's memory (fz_vhost.c), direct and indirect, of
 * up to 64 segments, well-formed or bad in one of nine ways, plus hostile
 * avail entries (a head posted again without a fresh chain: still held,
 * or completed and its descriptors since reused; a head out of range);
 * it publishes the avail index and reads the used ring as a driver does.
 * For each
 * well-formed chain it records what the device must pop (each segment's
 * length and the guest's view of its buffer), so the worker side can check
 * every popped frame byte for byte, and it checks each used entry against
 * what it posted (every head completed once per post).
 */
#include <string.h>

#include "fz_vqtx.h"

void fzg_table_a(struct fz_vhost_dev *d)
{
	d->nregions = 2;
	d->reg[0] = (struct fz_vhost_region){ .gpa = 0, .size = 0x10000, .uaddr = 0x7f0000000000,
					      .file = 0, .off = 0 };
	d->reg[1] = (struct fz_vhost_region){ .gpa = R1_GPA, .size = 0x10000,
					      .uaddr = 0x7f0000010000, .file = 1, .off = 0 };
	F.frames_gpa = R1_GPA;
}

static int16_t free_desc(uint32_t from)
{
	for (uint32_t k = 0; k < F.size; k++) {
		uint32_t i = (from + k) & (F.size - 1);

		if (F.desc_owner[i] < 0)
			return (int16_t)i;
	}
	return -1;
}

/* A payload buffer of len bytes in the frames region, with a pattern. */
static uint64_t payload(uint32_t len)
{
	uint32_t off = (F.buf_ctr++ * 192u) % (0x10000u - 4096u);
	unsigned char *p = fz_vhost_guest(VID, F.frames_gpa + off, len);

	if (p)
		memset(p, (int)(F.buf_ctr & 0xff), len);
	return F.frames_gpa + off;
}

/* One segment descriptor: good (v 0, 5, 6: recorded in e), or bad as
 * variant v (1..4, 7). */
static void seg(struct sn_vring_desc *d, uint8_t v, uint32_t len, struct expect *e)
{
	d->flags = 0;
	switch (v) {
	case 1: d->addr = 0x7f000000; d->len = len; break;            /* outside memory */
	case 2: d->addr = payload(16); d->len = 0; break;              /* zero length */
	case 3: d->addr = payload(len); d->len = len; d->flags = SN_VRING_DESC_F_WRITE; break;
	case 4: d->addr = R1_GPA - 8; d->len = 64; break;              /* across regions */
	case 7: d->addr = payload(64); d->len = 70000; break;          /* oversized */
	default:
		d->addr = payload(len);
		d->len = len;
		e->buf[e->nseg] = fz_vhost_guest(VID, d->addr, len);
		e->len[e->nseg++] = (uint16_t)len;
		return;
	}
	e->valid = false;
}

static void header(uint16_t head, uint64_t *gpa)
{
	struct sn_virtio_net_hdr *h = (void *)(F.g0 + HDR_OFF + 16u * head);

	memset(h, 0, 16);
	h->num_buffers = SN_VQTX_OPTIN_MAGIC;  /* marked: the opt-in (12-byte header) */
	*gpa = HDR_OFF + 16u * head;
}

/* Room in the avail ring: entries not yet taken by the device stay fewer
 * than the ring size (the guest model peeks at the device's avail index;
 * a driver knows it from its free descriptors, which the hostile
 * out-of-range and duplicate entries below do not use). */
static bool avail_room(void)
{
	uint16_t a = (uint16_t)F.consumed, u;

	if (F.started)
		sn_vring_get_base(F.q->vr, &a, &u);
	return (uint16_t)(F.avail_pos - a) < F.size;
}

static void avail_put(uint16_t head)
{
	F.avail->ring[F.avail_pos & (F.size - 1)] = head;
	F.avail_pos++;
}

void fzg_post(struct input *in, bool indirect)
{
	uint8_t c = take(in);
	uint32_t nseg = 1 + take(in) % MAXSEG;
	uint8_t badsel = take(in);
	uint8_t bad = badsel < 24 ? (uint8_t)(1 + badsel % 9) : 0;   /* 8, 9: next, loop */
	int16_t head = free_desc(c);
	struct expect *e;
	uint64_t hgpa;

	if (!avail_room())
		return;
	if (c >= 0xf8) {   /* hostile: a head posted again, or out of range */
		uint16_t h = c & 1 ? (uint16_t)(F.size + (c & 7)) : (uint16_t)(take(in) % F.size);

		if (h < F.size) {
			F.dup[h] = true;
			F.posts[h]++;
			/* No fresh chain behind it: a head already completed
			 * pops as whatever its descriptors hold now (freed, or
			 * reused by another chain), so what it pops as is not
			 * known, nor what its pending post pops as. */
			F.exp[h].valid = false;
		}
		avail_put(h);
		return;
	}
	if (head < 0 || F.dup[head])
		return;
	e = &F.exp[head];
	/* a table the device refused or kept leaves the guest and the device with
	 * different maps: what such a chain pops as is not known */
	e->valid = bad == 0 && !F.table_bad && !F.map_stale;
	e->nseg = 0;
	header((uint16_t)head, &hgpa);
	if (indirect) {
		int t = -1;
		struct sn_vring_desc *tab;

		for (uint32_t i = 0; i < IND_N && t < 0; i++)
			if (F.table_owner[i] < 0)
				t = (int)i;
		if (t < 0)
			return;
		tab = (void *)(F.g0 + IND_OFF + 0x400u * (uint32_t)t);
		tab[0] = (struct sn_vring_desc){ hgpa, F.hdr_len, SN_VRING_DESC_F_NEXT, 1 };
		for (uint32_t i = 1; i <= nseg && i < 64; i++) {
			seg(&tab[i], bad && i == nseg / 2 + 1 && bad < 8 ? bad : 0,
			    1 + take16(in) % 1500u, e);
			tab[i].flags |= i < nseg && i < 63 ? SN_VRING_DESC_F_NEXT : 0;
			tab[i].next = (uint16_t)(i + 1);
		}
		F.desc[head] = (struct sn_vring_desc){ IND_OFF + 0x400u * (uint32_t)t,
						       16u * (nseg + 1 < 64 ? nseg + 1 : 64),
						       SN_VRING_DESC_F_INDIRECT, 0 };
		if (bad == 8)
			F.desc[head].len += 3;                          /* len % 16 */
		else if (bad == 9)
			tab[1].flags |= SN_VRING_DESC_F_INDIRECT;       /* nested */
		F.table_owner[t] = head;
		F.desc_owner[head] = head;
	} else {
		int16_t prev = head, d;

		F.desc[head] = (struct sn_vring_desc){ hgpa, F.hdr_len, 0, 0 };
		F.desc_owner[head] = head;
		for (uint32_t i = 0; i < nseg; i++) {
			d = free_desc((uint32_t)prev + 1);
			if (d < 0)
				break;
			F.desc_owner[d] = head;
			seg(&F.desc[d], bad && i == nseg / 2 && bad < 8 ? bad : 0,
			    1 + take16(in) % 1500u, e);
			F.desc[prev].flags |= SN_VRING_DESC_F_NEXT;
			F.desc[prev].next = (uint16_t)d;
			prev = d;
		}
		if (bad == 8) {                                          /* next out of range */
			F.desc[prev].flags |= SN_VRING_DESC_F_NEXT;
			F.desc[prev].next = (uint16_t)(F.size + 1);
		} else if (bad == 9) {                                   /* loop */
			F.desc[prev].flags |= SN_VRING_DESC_F_NEXT;
			F.desc[prev].next = (uint16_t)head;
		}
	}
	F.posts[head]++;
	F.pos[head] = F.avail_pos;
	avail_put((uint16_t)head);
}

void fzg_publish(void)
{
	__atomic_store_n(&F.avail->idx, (uint16_t)F.avail_pos, __ATOMIC_RELEASE);
}

void fzg_forget_expect(void)
{
	for (uint32_t h = 0; h < MAXQ; h++)
		F.exp[h].valid = false;
}

void fzg_check_frame(uint16_t h, const struct rte_mbuf *m)
{
	const struct expect *e = &F.exp[h];
	uint32_t k = 0, len = 0;

	if (!e->valid)
		return;
	for (const struct rte_mbuf *s = m; s; s = s->next, k++) {
		if (k >= e->nseg)
			FAIL("head %u popped with %u+ segments, posted %u\n", h, k + 1, e->nseg);
		if (s->data_len != e->len[k])
			FAIL("head %u segment %u: %u bytes, posted %u\n", h, k, s->data_len,
			     e->len[k]);
		if (memcmp(rte_pktmbuf_mtod(s, const void *), e->buf[k], e->len[k]))
			FAIL("head %u segment %u: bytes differ from the guest's buffer\n", h, k);
		len += s->data_len;
	}
	if (k != e->nseg || m->pkt_len != len)
		FAIL("head %u popped %u segments %u bytes, posted %u segments %u bytes\n", h, k,
		     m->pkt_len, e->nseg, len);
}

static void release_head(uint16_t h)
{
	for (uint32_t i = 0; i < F.size; i++)
		if (F.desc_owner[i] == (int16_t)h)
			F.desc_owner[i] = -1;
	for (uint32_t i = 0; i < IND_N; i++)
		if (F.table_owner[i] == (int16_t)h)
			F.table_owner[i] = -1;
}

void fzg_collect(void)
{
	uint16_t u = __atomic_load_n(&F.used->idx, __ATOMIC_ACQUIRE);

	while (F.used_seen != u) {
		uint32_t id = F.used->ring[F.used_seen & (F.size - 1)].id;

		F.used_seen++;
		F.used_total++;
		if (id >= F.size)
			FAIL("used id %u >= size %u\n", id, F.size);
		if (F.done[id] >= F.posts[id])
			FAIL("head %u completed %u times, posted %u\n", id, F.done[id] + 1,
			     F.posts[id]);
		if (!F.dup[id] && F.started)
			for (uint32_t i = 0; i < F.nh; i++)
				if (!F.h[i].copy && F.h[i].head == id && F.h[i].epoch == F.q->epoch)
					FAIL("head %u completed while the worker holds it\n", id);
		F.done[id]++;
		if (F.done[id] == F.posts[id]) {
			F.dup[id] = false;
			release_head((uint16_t)id);
		}
	}
}
