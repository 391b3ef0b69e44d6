/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_bind.c — source-address binding: parsing, reporting, the per-frame
 * check. The contract is sn_bind.h's.
 */
/* rte_seqlock (sn_mac_impl.h, for sn_mac_keys) is experimental in 22.11. */
#define ALLOW_EXPERIMENTAL_API
#include "sn_bind.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_arp.h>
#include <rte_byteorder.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>

#include "sn_mac_impl.h"

#define ICMP6_RS 133
#define ICMP6_NS 135
#define ICMP6_NA 136
#define ND_OPT_SLLA 1
#define ND_OPT_TLLA 2

__attribute__((format(printf, 3, 4)))
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static uint64_t key_of(const uint8_t mac[6])
{
	struct rte_ether_hdr eth = { 0 };
	uint64_t d, s;

	memcpy(eth.src_addr.addr_bytes, mac, 6);
	sn_mac_keys(&eth, &d, &s);
	return s;
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Exactly "xx:xx:xx:xx:xx:xx" of hex digits: no sign, space or "0x" (what
 * sscanf's %x would let through). */
static int parse_mac(const char *s, uint8_t out[6])
{
	if (strlen(s) != 17)
		return -1;
	for (unsigned i = 0; i < 6; i++) {
		int hi = hex_digit(s[3 * i]), lo = hex_digit(s[3 * i + 1]);

		if (hi < 0 || lo < 0 || (i < 5 && s[3 * i + 2] != ':'))
			return -1;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

/* "addr" or "addr/len": family, address bytes, prefix length. */
static int parse_prefix(const char *s, int *af, uint8_t addr[16], unsigned *len)
{
	char buf[INET6_ADDRSTRLEN + 5];
	char *slash, *end;
	unsigned long l;

	if (strlen(s) >= sizeof(buf))
		return -1;
	snprintf(buf, sizeof(buf), "%s", s);
	slash = strchr(buf, '/');
	if (slash)
		*slash = '\0';
	if (inet_pton(AF_INET, buf, addr) == 1)
		*af = AF_INET;
	else if (inet_pton(AF_INET6, buf, addr) == 1)
		*af = AF_INET6;
	else
		return -1;
	*len = *af == AF_INET ? 32 : 128;
	if (slash) {
		if (slash[1] < '0' || slash[1] > '9')
			return -1;
		errno = 0;
		l = strtoul(slash + 1, &end, 10);
		if (errno || *end || l > *len)
			return -1;
		*len = (unsigned)l;
	}
	return 0;
}

static bool v6_in(const struct sn_bind_v6 *p, const uint8_t a[16])
{
	unsigned full = p->len / 8, rest = p->len % 8;

	if (memcmp(p->addr, a, full))
		return false;
	return !rest || ((p->addr[full] ^ a[full]) & (uint8_t)(0xff << (8 - rest))) == 0;
}

static int add_mac(struct sn_bind *b, const json_t *v, size_t i, const char *field, char *err,
		   size_t errlen)
{
	uint8_t mac[6];

	if (!json_is_string(v) || parse_mac(json_string_value(v), mac))
		return fail(err, errlen, "%sallowed_macs[%zu]: must be a MAC \"xx:xx:xx:xx:xx:xx\"",
			    field, i);
	if (mac[0] & 1)
		return fail(err, errlen, "%sallowed_macs[%zu]: %s is a multicast address", field, i,
			    json_string_value(v));
	if (!(mac[0] | mac[1] | mac[2] | mac[3] | mac[4] | mac[5]))
		return fail(err, errlen, "%sallowed_macs[%zu]: the zero MAC is no source", field, i);
	for (unsigned k = 0; k < b->n_macs; k++)
		if (!memcmp(b->mac[k], mac, 6))
			return fail(err, errlen, "%sallowed_macs[%zu]: %s listed twice", field, i,
				    json_string_value(v));
	memcpy(b->mac[b->n_macs], mac, 6);
	b->mac_key[b->n_macs++] = key_of(mac);
	return 0;
}

static int add_ip(struct sn_bind *b, const json_t *v, size_t i, const char *field, char *err,
		  size_t errlen)
{
	uint8_t a[16] = { 0 };
	unsigned len;
	int af;

	if (!json_is_string(v) || parse_prefix(json_string_value(v), &af, a, &len))
		return fail(err, errlen, "%sallowed_ips[%zu]: must be an IPv4 or IPv6 address or "
			    "prefix (\"10.0.0.5\", \"10.0.0.0/24\", \"2001:db8::/64\")", field, i);
	if (af == AF_INET) {
		uint32_t net, mask = len ? ~0u << (32 - len) : 0;

		memcpy(&net, a, 4);
		net = rte_be_to_cpu_32(net);
		if (net & ~mask)
			return fail(err, errlen, "%sallowed_ips[%zu]: %s has host bits set", field, i,
				    json_string_value(v));
		b->v4[b->n_v4] = net;
		b->v4_mask[b->n_v4] = mask;
		b->v4_len[b->n_v4++] = (uint8_t)len;
	} else {
		struct sn_bind_v6 *p = &b->v6[b->n_v6];

		memcpy(p->addr, a, 16);
		p->len = (uint8_t)len;
		for (unsigned bit = len; bit < 128; bit++)
			if (a[bit / 8] & (0x80 >> (bit % 8)))
				return fail(err, errlen, "%sallowed_ips[%zu]: %s has host bits set",
					    field, i, json_string_value(v));
		b->n_v6++;
	}
	return 0;
}

int sn_bind_from_json(struct sn_bind *b, const json_t *macs, const json_t *ips,
		      const char *field, char *err, size_t errlen)
{
	size_t i;
	json_t *v;
	int rc;

	memset(b, 0, sizeof(*b));
	if (macs && (!json_is_array(macs) || json_array_size(macs) > SN_BIND_MACS_MAX))
		return fail(err, errlen, "%sallowed_macs: must be an array of at most %d MACs",
			    field, SN_BIND_MACS_MAX);
	if (ips && (!json_is_array(ips) || json_array_size(ips) > SN_BIND_IPS_MAX))
		return fail(err, errlen, "%sallowed_ips: must be an array of at most %d prefixes",
			    field, SN_BIND_IPS_MAX);
	json_array_foreach(macs, i, v)
		if ((rc = add_mac(b, v, i, field, err, errlen)))
			return rc;
	json_array_foreach(ips, i, v)
		if ((rc = add_ip(b, v, i, field, err, errlen)))
			return rc;
	return 0;
}

json_t *sn_bind_to_json(const struct sn_bind *b)
{
	json_t *o = json_object(), *macs = json_array(), *ips = json_array();
	char buf[INET6_ADDRSTRLEN + 5];

	if (!o || !macs || !ips || json_object_set(o, "allowed_macs", macs) ||
	    json_object_set(o, "allowed_ips", ips))
		goto err;
	for (unsigned i = 0; i < b->n_macs; i++) {
		const uint8_t *m = b->mac[i];

		snprintf(buf, sizeof(buf), "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3],
			 m[4], m[5]);
		if (json_array_append_new(macs, json_string(buf)))
			goto err;
	}
	for (unsigned i = 0; i < b->n_v4 + b->n_v6; i++) {
		char a[INET6_ADDRSTRLEN];
		unsigned len;

		if (i < b->n_v4) {
			uint32_t net = rte_cpu_to_be_32(b->v4[i]);

			inet_ntop(AF_INET, &net, a, sizeof(a));
			len = b->v4_len[i];
		} else {
			inet_ntop(AF_INET6, b->v6[i - b->n_v4].addr, a, sizeof(a));
			len = b->v6[i - b->n_v4].len;
		}
		snprintf(buf, sizeof(buf), "%s/%u", a, len);
		if (json_array_append_new(ips, json_string(buf)))
			goto err;
	}
	json_decref(macs);
	json_decref(ips);
	return o;
err:
	json_decref(o);
	json_decref(macs);
	json_decref(ips);
	return NULL;
}

bool sn_bind_has_key(const struct sn_bind *b, uint64_t skey)
{
	for (unsigned i = 0; i < b->n_macs; i++)
		if (b->mac_key[i] == skey)
			return true;
	return false;
}

static bool v4_ok(const struct sn_bind *b, uint32_t be_addr, bool zero_ok)
{
	uint32_t a = rte_be_to_cpu_32(be_addr);

	if (zero_ok && a == 0)
		return true;
	for (unsigned i = 0; i < b->n_v4; i++)
		if ((a & b->v4_mask[i]) == b->v4[i])
			return true;
	return false;
}

/* An IPv6 source (or an advertised target) of a frame from mac. */
static bool v6_ok(const struct sn_bind *b, const uint8_t a[16], const uint8_t mac[6],
		  bool unspec_ok)
{
	static const uint8_t unspec[16];
	const uint8_t ll[16] = { 0xfe, 0x80, 0, 0, 0, 0, 0, 0, mac[0] ^ 0x02, mac[1], mac[2],
				 0xff, 0xfe, mac[3], mac[4], mac[5] };

	if ((unspec_ok && !memcmp(a, unspec, 16)) || !memcmp(a, ll, 16))
		return true;
	for (unsigned i = 0; i < b->n_v6; i++)
		if (v6_in(&b->v6[i], a))
			return true;
	return false;
}

/* ICMPv6 at off: neighbour discovery checks (type 133, 135, 136). Every
 * option up to the end of the frame is walked (at most SN_BIND_ND_MAX / 8
 * of them): one with a zero length or reaching past the frame is
 * malformed, and refused like a spoofed one; so is a longer message. */
static enum sn_bind_verdict check_nd(const struct sn_bind *b, const struct rte_mbuf *m,
				     uint32_t off, const uint8_t mac[6])
{
	uint8_t hbuf[24], obuf[8];
	const uint8_t *h = rte_pktmbuf_read(m, off, 4, hbuf), *o;
	uint32_t body;

	if (!h)
		return SN_BIND_SPOOFED_ND;
	if (h[0] != ICMP6_RS && h[0] != ICMP6_NS && h[0] != ICMP6_NA)
		return SN_BIND_OK;
	if (m->pkt_len - off > SN_BIND_ND_MAX)
		return SN_BIND_SPOOFED_ND;
	body = h[0] == ICMP6_RS ? 8 : 24;    /* header + reserved (+ target) */
	h = rte_pktmbuf_read(m, off, body, hbuf);
	if (!h)
		return SN_BIND_SPOOFED_ND;
	if (h[0] == ICMP6_NA && !v6_ok(b, h + 8, mac, false))
		return SN_BIND_SPOOFED_ND;
	for (uint32_t p = off + body; p + 2 <= m->pkt_len;) {
		uint32_t l;

		o = rte_pktmbuf_read(m, p, 2, obuf);
		if (!o)
			return SN_BIND_SPOOFED_ND;
		l = 8u * o[1];
		if (!l || l > m->pkt_len - p)
			return SN_BIND_SPOOFED_ND;
		if (o[0] == ND_OPT_SLLA || o[0] == ND_OPT_TLLA) {
			o = rte_pktmbuf_read(m, p, 8, obuf);
			if (!o || memcmp(o + 2, mac, 6))
				return SN_BIND_SPOOFED_ND;
		}
		p += l;
	}
	return SN_BIND_OK;
}

static enum sn_bind_verdict check_ipv6(const struct sn_bind *b, const struct rte_mbuf *m,
				       uint32_t off, const uint8_t mac[6])
{
	struct rte_ipv6_hdr hbuf;
	const struct rte_ipv6_hdr *ip = rte_pktmbuf_read(m, off, sizeof(hbuf), &hbuf);
	uint8_t next;

	if (!ip || !v6_ok(b, ip->src_addr, mac, true))
		return SN_BIND_SPOOFED;
	next = ip->proto;
	off += sizeof(*ip);
	/* Hop-by-hop, routing, destination options: ND may hide behind them. */
	for (unsigned n = 0; n < 8 && (next == 0 || next == 43 || next == 60); n++) {
		uint8_t ebuf[2];
		const uint8_t *e = rte_pktmbuf_read(m, off, 2, ebuf);

		if (!e)
			return SN_BIND_SPOOFED_ND;
		next = e[0];
		off += 8u * (e[1] + 1u);
	}
	if (next == 44) {      /* fragment: an ICMPv6 fragment may be ND */
		uint8_t fbuf[1];
		const uint8_t *f = rte_pktmbuf_read(m, off, 1, fbuf);

		return !f || f[0] == IPPROTO_ICMPV6 ? SN_BIND_SPOOFED_ND : SN_BIND_OK;
	}
	if (next == 0 || next == 43 || next == 60)
		return SN_BIND_SPOOFED_ND;   /* more than 8 extension headers */
	return next == IPPROTO_ICMPV6 ? check_nd(b, m, off, mac) : SN_BIND_OK;
}

static bool is_vlan(uint16_t type)
{
	return type == RTE_ETHER_TYPE_VLAN || type == RTE_ETHER_TYPE_QINQ;
}

enum sn_bind_verdict sn_bind_check(const struct sn_bind *b, const struct rte_mbuf *m,
				   uint64_t skey)
{
	/* Guest frames may start at any address: headers are read as bytes
	 * (the DPDK header structs of Ethernet and ARP are 2-byte aligned). */
	const uint8_t *eth = rte_pktmbuf_mtod(m, const uint8_t *);
	const uint8_t *mac = eth + 6;
	uint32_t off = RTE_ETHER_HDR_LEN;
	uint16_t type = (uint16_t)(eth[12] << 8 | eth[13]);

	if (b->n_macs && !sn_bind_has_key(b, skey))
		return SN_BIND_SPOOFED;
	if (!b->n_v4 && !b->n_v6)
		return SN_BIND_OK;
	for (unsigned n = 0; is_vlan(type); n++) {
		struct rte_vlan_hdr vbuf;
		const struct rte_vlan_hdr *v = rte_pktmbuf_read(m, off, sizeof(vbuf), &vbuf);

		/* A third tag: what it hides is not checked, so it is refused. */
		if (!v || n == SN_BIND_VLAN_MAX)
			return SN_BIND_SPOOFED;
		type = rte_be_to_cpu_16(v->eth_proto);
		off += sizeof(*v);
	}
	if (type == RTE_ETHER_TYPE_IPV4) {
		struct rte_ipv4_hdr hbuf;
		const struct rte_ipv4_hdr *ip = rte_pktmbuf_read(m, off, sizeof(hbuf), &hbuf);

		return ip && v4_ok(b, ip->src_addr, true) ? SN_BIND_OK : SN_BIND_SPOOFED;
	}
	if (type == RTE_ETHER_TYPE_ARP) {
		uint8_t abuf[sizeof(struct rte_arp_hdr)];
		const uint8_t *a = rte_pktmbuf_read(m, off, sizeof(abuf), abuf);
		uint32_t sip;

		if (!a)
			return SN_BIND_SPOOFED_ARP;
		memcpy(&sip, a + offsetof(struct rte_arp_hdr, arp_data.arp_sip), sizeof(sip));
		if (memcmp(a + offsetof(struct rte_arp_hdr, arp_data.arp_sha), mac, 6) ||
		    !v4_ok(b, sip, true))
			return SN_BIND_SPOOFED_ARP;
		return SN_BIND_OK;
	}
	if (type == RTE_ETHER_TYPE_IPV6)
		return check_ipv6(b, m, off, mac);
	return SN_BIND_OK;
}
