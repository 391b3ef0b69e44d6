/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_bind.c — libFuzzer target for sn_bind_check(), the source-binding
 * verdict of a VM port's frame (untrusted guest bytes).
 *
 * Input: one flags byte (bit 0: allowed_macs [52:54:00:12:34:56], bit 1:
 * allowed_ips [10.0.0.0/24, 2001:db8::/64]; bits 2..4: segments - 1),
 * one cut byte per extra segment, then the frame (at least the 14-byte
 * Ethernet header, which the switch wants in the first segment). The
 * frame is split at the cuts into mbufs of exactly their length (ASan
 * sees any read past a segment), empty ones included. The verdict must
 * equal that of an independent model of the rules of sn_bind.h on the
 * contiguous frame: so it does not depend on the split, every ND option
 * up to the end of the frame is checked, and a frame with more VLAN tags
 * than are walked is refused. Any difference aborts.
 */
#define ALLOW_EXPERIMENTAL_API
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <rte_mbuf.h>

#include "sn_bind.h"
#include "sn_mac_impl.h"

#define FAIL(...) do { fprintf(stderr, "fuzz_bind: " __VA_ARGS__); abort(); } while (0)
#define MAXSEG 8

static const uint8_t VM_MAC[6] = { 0x52, 0x54, 0x00, 0x12, 0x34, 0x56 };

static uint16_t be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static bool v4_ok(const uint8_t *a)
{
	return (a[0] | a[1] | a[2] | a[3]) == 0 || (a[0] == 10 && a[1] == 0 && a[2] == 0);
}

static bool v6_ok(const uint8_t *a, const uint8_t *mac, bool unspec_ok)
{
	static const uint8_t zero[16], net[8] = { 0x20, 0x01, 0x0d, 0xb8 };
	const uint8_t ll[16] = { 0xfe, 0x80, 0, 0, 0, 0, 0, 0, mac[0] ^ 2, mac[1], mac[2], 0xff,
				 0xfe, mac[3], mac[4], mac[5] };

	return (unspec_ok && !memcmp(a, zero, 16)) || !memcmp(a, ll, 16) || !memcmp(a, net, 8);
}

static enum sn_bind_verdict model_nd(const uint8_t *f, uint32_t len, uint32_t off,
				     const uint8_t *mac)
{
	uint32_t body;

	if (off + 4 > len)
		return SN_BIND_SPOOFED_ND;
	if (f[off] != 133 && f[off] != 135 && f[off] != 136)
		return SN_BIND_OK;
	if (len - off > 1280)
		return SN_BIND_SPOOFED_ND;
	body = f[off] == 133 ? 8 : 24;
	if (off + body > len)
		return SN_BIND_SPOOFED_ND;
	if (f[off] == 136 && !v6_ok(f + off + 8, mac, false))
		return SN_BIND_SPOOFED_ND;
	for (uint32_t p = off + body; p + 2 <= len;) {
		uint32_t l = 8u * f[p + 1];

		if (l == 0 || p + l > len)
			return SN_BIND_SPOOFED_ND;
		if ((f[p] == 1 || f[p] == 2) && memcmp(f + p + 2, mac, 6))
			return SN_BIND_SPOOFED_ND;
		p += l;
	}
	return SN_BIND_OK;
}

/* The rules of sn_bind.h on a contiguous frame f of len (>= 14) bytes. */
static enum sn_bind_verdict model(bool macs, bool ips, const uint8_t *f, uint32_t len)
{
	const uint8_t *mac = f + 6;
	uint32_t off = 14, type = be16(f + 12), next;

	if (macs && memcmp(mac, VM_MAC, 6))
		return SN_BIND_SPOOFED;
	if (!ips)
		return SN_BIND_OK;
	for (unsigned n = 0; type == 0x8100 || type == 0x88a8; n++) {
		if (n == 2 || off + 4 > len)
			return SN_BIND_SPOOFED;
		type = be16(f + off + 2);
		off += 4;
	}
	switch (type) {
	case 0x0800:
		return off + 20 <= len && v4_ok(f + off + 12) ? SN_BIND_OK : SN_BIND_SPOOFED;
	case 0x0806:
		return off + 28 <= len && !memcmp(f + off + 8, mac, 6) && v4_ok(f + off + 14) ?
		       SN_BIND_OK : SN_BIND_SPOOFED_ARP;
	case 0x86dd:
		break;
	default:
		return SN_BIND_OK;
	}
	if (off + 40 > len || !v6_ok(f + off + 8, mac, true))
		return SN_BIND_SPOOFED;
	next = f[off + 6];
	off += 40;
	for (unsigned n = 0; n < 8 && (next == 0 || next == 43 || next == 60); n++) {
		if (off + 2 > len)
			return SN_BIND_SPOOFED_ND;
		next = f[off];
		off += 8u * (f[off + 1] + 1u);
	}
	if (next == 44)
		return off + 1 > len || f[off] == 58 ? SN_BIND_SPOOFED_ND : SN_BIND_OK;
	if (next == 0 || next == 43 || next == 60)
		return SN_BIND_SPOOFED_ND;
	return next == 58 ? model_nd(f, len, off, mac) : SN_BIND_OK;
}

static struct sn_bind binds[4];

static void bind_init(void)
{
	json_t *m = json_pack("[s]", "52:54:00:12:34:56");
	json_t *i = json_pack("[s, s]", "10.0.0.0/24", "2001:db8::/64");
	char err[160];

	for (unsigned k = 0; k < 4; k++)
		if (sn_bind_from_json(&binds[k], k & 1 ? m : NULL, k & 2 ? i : NULL, "", err,
				      sizeof(err)))
			FAIL("binding %u: %s\n", k, err);
	json_decref(m);
	json_decref(i);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool init;
	struct rte_mbuf mb[MAXSEG];
	uint8_t *seg[MAXSEG] = { 0 };
	uint32_t cut[MAXSEG + 1], nseg, len;
	const uint8_t *frame;
	struct rte_ether_hdr eth;
	enum sn_bind_verdict v, want;
	uint64_t dkey, skey;
	unsigned flags;

	if (!init) {
		bind_init();
		init = true;
	}
	if (size < 1)
		return 0;
	flags = data[0];
	nseg = (flags >> 2 & 7) + 1;
	if (size < 1 + (nseg - 1) + 14)
		return 0;
	frame = data + 1 + (nseg - 1);
	len = (uint32_t)(size - 1 - (nseg - 1));
	if (len > 65535)
		return 0;
	/* Cuts: sorted offsets, the first segment holding the Ethernet header. */
	cut[0] = 0;
	for (uint32_t i = 1; i < nseg; i++) {
		uint32_t c = 14 + (uint32_t)((uint64_t)data[i] * (len - 14) / 255);

		cut[i] = c < cut[i - 1] ? cut[i - 1] : c;
	}
	cut[nseg] = len;
	memset(mb, 0, sizeof(mb));
	for (uint32_t i = 0; i < nseg; i++) {
		uint32_t sl = cut[i + 1] - cut[i];

		seg[i] = malloc(sl ? sl : 1);
		if (!seg[i])
			abort();
		memcpy(seg[i], frame + cut[i], sl);
		mb[i].buf_addr = seg[i];
		mb[i].buf_len = (uint16_t)(sl ? sl : 1);
		mb[i].data_len = (uint16_t)sl;
		mb[i].nb_segs = 1;
		mb[i].next = i + 1 < nseg ? &mb[i + 1] : NULL;
	}
	mb[0].nb_segs = (uint16_t)nseg;
	mb[0].pkt_len = len;
	memcpy(&eth, frame, sizeof(eth));
	sn_mac_keys(&eth, &dkey, &skey);
	v = sn_bind_check(&binds[flags & 3], &mb[0], skey);
	want = model(flags & 1, flags & 2, frame, len);
	if (v != want)
		FAIL("flags %#x, %u segments, %u bytes: verdict %d, model %d\n", flags, nseg, len, v,
		     want);
	for (uint32_t i = 0; i < nseg; i++)
		free(seg[i]);
	return 0;
}
