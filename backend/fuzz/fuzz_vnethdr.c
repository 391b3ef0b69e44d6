/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_vnethdr.c — libFuzzer target for sn_vnethdr_parse(), the check of a
 * guest's TX virtio-net header against its frame.
 *
 * Input: 12 bytes of virtio-net header, one byte giving the number of
 * payload segments (1..8), one cut byte per extra segment, then the frame.
 * The frame is split at the cuts into separately allocated segments of
 * exactly their length (ASan sees any read past a segment), empty ones
 * included, and parsed. The result (return value and every field of the
 * offload metadata) must equal that of an independent model of the rules
 * of sn_vnethdr.h evaluated on the contiguous frame: so the parse does not
 * depend on how the frame is split, and everything it accepts is
 * consistent with the bytes (headers inside the frame, csum_start and
 * csum_offset on the L4 checksum, GSO only TCP/IPv4 with NEEDS_CSUM and
 * headers + gso_size <= 64 KiB). DATA_VALID must change nothing. Any
 * difference aborts.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_mbuf_core.h>

#include "sn_vnethdr.h"

#define FAIL(...) do { fprintf(stderr, "fuzz_vnethdr: " __VA_ARGS__); abort(); } while (0)
#define MAXSEG 8

static uint16_t be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/* The rules of sn_vnethdr.h on a contiguous frame f of len bytes. */
static int model(const struct sn_virtio_net_hdr *h, const uint8_t *f, uint32_t len,
		 struct sn_vnethdr_offl *o)
{
	uint8_t flags = h->flags & ~SN_VNET_F_DATA_VALID, proto;
	uint32_t l2 = 14, l3, l4, et;

	memset(o, 0, sizeof(*o));
	if (flags == 0 && h->gso_type == SN_VNET_GSO_NONE)
		return 0;
	if (flags != SN_VNET_F_NEEDS_CSUM || len < 14)
		return -EINVAL;
	et = be16(f + 12);
	if (et == 0x8100) {
		if (len < 18)
			return -EINVAL;
		et = be16(f + 16);
		l2 = 18;
	}
	if (et == 0x0800) {
		if (len < l2 + 20 || f[l2] >> 4 != 4 || (f[l2] & 15) < 5)
			return -EINVAL;
		l3 = (f[l2] & 15) * 4u;
		proto = f[l2 + 9];
		o->ol_flags = RTE_MBUF_F_TX_IPV4;
	} else if (et == 0x86dd) {
		if (len < l2 + 40)
			return -EINVAL;
		l3 = 40;
		proto = f[l2 + 6];
		o->ol_flags = RTE_MBUF_F_TX_IPV6;
	} else {
		return -EINVAL;
	}
	if (h->csum_start != l2 + l3)
		return -EINVAL;
	if (proto == 6) {
		if (h->csum_offset != 16 || len < l2 + l3 + 20)
			return -EINVAL;
		l4 = (f[l2 + l3 + 12] >> 4) * 4u;
		if (l4 < 20)
			return -EINVAL;
		o->ol_flags |= RTE_MBUF_F_TX_TCP_CKSUM;
	} else if (proto == 17) {
		if (h->csum_offset != 6)
			return -EINVAL;
		l4 = 8;
		o->ol_flags |= RTE_MBUF_F_TX_UDP_CKSUM;
	} else {
		return -EINVAL;
	}
	if (l2 + l3 + l4 > len)
		return -EINVAL;
	o->l2 = (uint16_t)l2;
	o->l3 = (uint16_t)l3;
	o->l4 = (uint16_t)l4;
	if (h->gso_type == SN_VNET_GSO_NONE)
		return 0;
	if (h->gso_type != SN_VNET_GSO_TCPV4 || proto != 6 || et != 0x0800 || h->gso_size == 0 ||
	    l2 + l3 + l4 + h->gso_size > 65535)
		return -EINVAL;
	o->ol_flags |= RTE_MBUF_F_TX_TCP_SEG;
	o->segsz = h->gso_size;
	return 0;
}

static void check(const char *what, int rc, const struct sn_vnethdr_offl *o, int mrc,
		  const struct sn_vnethdr_offl *m)
{
	if (rc != mrc)
		FAIL("%s: returned %d, model %d\n", what, rc, mrc);
	if (rc != 0 && rc != -EINVAL)
		FAIL("%s: returned %d (not 0 / -EINVAL)\n", what, rc);
	if (rc == 0 && (o->ol_flags != m->ol_flags || o->l2 != m->l2 || o->l3 != m->l3 ||
			o->l4 != m->l4 || o->segsz != m->segsz))
		FAIL("%s: ol_flags %#llx l2 %u l3 %u l4 %u segsz %u, model %#llx %u %u %u %u\n",
		     what, (unsigned long long)o->ol_flags, o->l2, o->l3, o->l4, o->segsz,
		     (unsigned long long)m->ol_flags, m->l2, m->l3, m->l4, m->segsz);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sn_vring_pkt p;
	struct sn_vnethdr_offl o, m;
	uint32_t cut[MAXSEG + 1], nseg, len;
	const uint8_t *frame;
	uint8_t *seg[MAXSEG] = { 0 };
	int rc, mrc;

	if (size < sizeof(p.hdr) + 1)
		return 0;
	memset(&p, 0, sizeof(p));
	memcpy(&p.hdr, data, sizeof(p.hdr));
	nseg = data[sizeof(p.hdr)] % MAXSEG + 1;
	data += sizeof(p.hdr) + 1;
	size -= sizeof(p.hdr) + 1;
	if (size < nseg - 1)
		return 0;
	frame = data + (nseg - 1);
	len = (uint32_t)(size - (nseg - 1));
	if (len > 65535)
		return 0;
	/* Cuts: sorted offsets into the frame (a cut byte is a fraction of it). */
	cut[0] = 0;
	for (uint32_t i = 1; i < nseg; i++) {
		uint32_t c = (uint32_t)((uint64_t)data[i - 1] * len / 255);

		cut[i] = c < cut[i - 1] ? cut[i - 1] : c;
	}
	cut[nseg] = len;
	for (uint32_t i = 0; i < nseg; i++) {
		size_t sl = cut[i + 1] - cut[i];

		seg[i] = malloc(sl ? sl : 1);
		if (!seg[i])
			abort();
		memcpy(seg[i], frame + cut[i], sl);
		p.iov[i].iov_base = seg[i];
		p.iov[i].iov_len = sl;
	}
	p.nseg = (uint16_t)nseg;
	p.len = len;

	rc = sn_vnethdr_parse(&p, &o);
	mrc = model(&p.hdr, frame, len, &m);
	check("parse", rc, &o, mrc, &m);
	if (sn_vnethdr_none(&p) != ((p.hdr.flags & ~SN_VNET_F_DATA_VALID) == 0 &&
				    p.hdr.gso_type == SN_VNET_GSO_NONE))
		FAIL("sn_vnethdr_none disagrees with the header\n");
	if (sn_vnethdr_none(&p) && (rc != 0 || o.ol_flags != 0))
		FAIL("a header asking for nothing gave rc %d ol_flags %#llx\n", rc,
		     (unsigned long long)o.ol_flags);
	/* DATA_VALID is ignored on TX. */
	p.hdr.flags ^= SN_VNET_F_DATA_VALID;
	rc = sn_vnethdr_parse(&p, &o);
	check("parse with DATA_VALID flipped", rc, &o, mrc, &m);
	for (uint32_t i = 0; i < nseg; i++)
		free(seg[i]);
	return 0;
}
