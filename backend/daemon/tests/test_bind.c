/* SPDX-License-Identifier: BSD-3-Clause */
/* test_bind.c — source-address binding (sn_bind.h) without EAL: parsing
 * and its messages (naming the field and element), the report, and the
 * verdict for crafted frames in a heap buffer posing as a one-segment
 * mbuf: source MAC, IPv4 and its DHCP exception, ARP sender addresses and
 * probes, VLAN tags, IPv6 sources with the DAD and EUI-64 link-local
 * exceptions, neighbour discovery options and targets, fragmented ICMPv6,
 * truncated headers. Exit status 1 if any check failed.
 */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <rte_arp.h>
#include <rte_byteorder.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>

#include "sn_bind.h"

#include "sn_check.h"

static const uint8_t VM_MAC[6] = { 0x52, 0x54, 0x00, 0x12, 0x34, 0x56 };
static const uint8_t OTHER_MAC[6] = { 0x52, 0x54, 0x00, 0x99, 0x99, 0x99 };

static uint8_t buf[2048];
static struct rte_mbuf mb;

/* A frame of len bytes of buf from src (its Ethernet header filled). */
static struct rte_mbuf *frame(const uint8_t src[6], uint16_t type, size_t len)
{
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)buf;

	memset(&mb, 0, sizeof(mb));
	mb.buf_addr = buf;
	mb.buf_len = sizeof(buf);
	mb.data_len = (uint16_t)len;
	mb.pkt_len = (uint32_t)len;
	mb.nb_segs = 1;
	memset(eth->dst_addr.addr_bytes, 0xff, 6);
	memcpy(eth->src_addr.addr_bytes, src, 6);
	eth->ether_type = rte_cpu_to_be_16(type);
	return &mb;
}

static uint64_t key(const uint8_t mac[6])
{
	uint64_t k = 0;

	for (unsigned i = 0; i < 6; i++)
		k |= (uint64_t)mac[i] << (8 * i);
	return k | (1ULL << 63);   /* SN_MAC_VALID, as sn_mac_keys() computes */
}

static enum sn_bind_verdict check(const struct sn_bind *b, struct rte_mbuf *m)
{
	const uint8_t *src = buf + 6;

	return sn_bind_check(b, m, key(src));
}

static int parse(struct sn_bind *b, const char *macs, const char *ips, char *err, size_t n)
{
	json_t *jm = macs ? json_loads(macs, JSON_DECODE_ANY, NULL) : NULL;
	json_t *ji = ips ? json_loads(ips, JSON_DECODE_ANY, NULL) : NULL;
	int rc = sn_bind_from_json(b, jm, ji, "ports[0].", err, n);

	json_decref(jm);
	json_decref(ji);
	return rc;
}

static void expect_error(const char *macs, const char *ips, const char *want)
{
	struct sn_bind b;
	char err[200] = "";

	if (parse(&b, macs, ips, err, sizeof(err)) == 0 || !strstr(err, want)) {
		fprintf(stderr, "macs %s ips %s: got \"%s\", want \"%s\"\n", macs, ips, err, want);
		CHECK(!"error naming the field");
	}
}

static void test_parse(void)
{
	struct sn_bind b;
	char err[200];
	json_t *j;
	char *s;

	CHECK(parse(&b, "[\"52:54:00:12:34:56\", \"02:00:00:00:00:01\"]",
		    "[\"10.0.0.5\", \"10.1.0.0/16\", \"2001:db8::/64\"]", err, sizeof(err)) == 0);
	CHECK(b.n_macs == 2 && b.n_v4 == 2 && b.n_v6 == 1 && sn_bind_active(&b));
	CHECK(sn_bind_has_key(&b, key(VM_MAC)) && !sn_bind_has_key(&b, key(OTHER_MAC)));
	j = sn_bind_to_json(&b);
	s = j ? json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT) : NULL;
	printf("report: %s\n", s ? s : "(null)");
	CHECK(s && !strcmp(s, "{\"allowed_ips\":[\"10.0.0.5/32\",\"10.1.0.0/16\",\"2001:db8::/64\"],"
				"\"allowed_macs\":[\"52:54:00:12:34:56\",\"02:00:00:00:00:01\"]}"));
	free(s);
	json_decref(j);
	CHECK(parse(&b, NULL, NULL, err, sizeof(err)) == 0 && !sn_bind_active(&b));
	CHECK(parse(&b, "[]", "[]", err, sizeof(err)) == 0 && !sn_bind_active(&b));

	expect_error("[\"52:54:00:12:34\"]", NULL, "ports[0].allowed_macs[0]: must be a MAC");
	expect_error("[\"52:54:00:12:34:56\", \"52-54-00-12-34-57\"]", NULL,
		     "ports[0].allowed_macs[1]: must be a MAC");
	expect_error("[\"52:54:00:12:34:5g\"]", NULL, "allowed_macs[0]: must be a MAC");
	/* Exactly two hex digits per byte: what sscanf's %x would also take. */
	expect_error("[\" 2:54:00:12:34:56\"]", NULL, "ports[0].allowed_macs[0]: must be a MAC");
	expect_error("[\"-2:54:00:12:34:56\"]", NULL, "ports[0].allowed_macs[0]: must be a MAC");
	expect_error("[\"+2:54:00:12:34:56\"]", NULL, "ports[0].allowed_macs[0]: must be a MAC");
	expect_error("[\"52:54:00:12:34: 6\"]", NULL, "ports[0].allowed_macs[0]: must be a MAC");
	expect_error("[\"52:54:00:12:0x:56\"]", NULL, "ports[0].allowed_macs[0]: must be a MAC");
	expect_error("[\"52:54:00:12:34:5 \"]", NULL, "ports[0].allowed_macs[0]: must be a MAC");
	CHECK(parse(&b, "[\"52:54:00:AB:cd:Ef\"]", NULL, err, sizeof(err)) == 0 && b.n_macs == 1 &&
	      b.mac[0][3] == 0xab && b.mac[0][4] == 0xcd && b.mac[0][5] == 0xef);
	expect_error("[\"01:00:5e:00:00:01\"]", NULL, "allowed_macs[0]: 01:00:5e:00:00:01 is a multicast");
	expect_error("[\"00:00:00:00:00:00\"]", NULL, "allowed_macs[0]: the zero MAC");
	expect_error("[\"52:54:00:12:34:56\", \"52:54:00:12:34:56\"]", NULL, "allowed_macs[1]: "
		     "52:54:00:12:34:56 listed twice");
	expect_error("[1]", NULL, "allowed_macs[0]: must be a MAC");
	expect_error("\"52:54:00:12:34:56\"", NULL, "ports[0].allowed_macs: must be an array");
	expect_error(NULL, "[\"10.0.0.1/24\"]", "ports[0].allowed_ips[0]: 10.0.0.1/24 has host bits");
	expect_error(NULL, "[\"10.0.0.0/33\"]", "allowed_ips[0]: must be an IPv4 or IPv6");
	expect_error(NULL, "[\"10.0.0.0/\"]", "allowed_ips[0]: must be an IPv4 or IPv6");
	expect_error(NULL, "[\"10.0.0.0/-1\"]", "allowed_ips[0]: must be an IPv4 or IPv6");
	expect_error(NULL, "[\"10.0.0.0\", \"fe80::1/10\"]", "allowed_ips[1]: fe80::1/10 has host");
	expect_error(NULL, "[\"host.example\"]", "allowed_ips[0]: must be an IPv4 or IPv6");
	expect_error(NULL, "[\"1.2.3.4\",\"1.2.3.4\",\"1.2.3.4\",\"1.2.3.4\",\"1.2.3.4\",\"1.2.3.4\","
		     "\"1.2.3.4\",\"1.2.3.4\",\"1.2.3.4\",\"1.2.3.4\",\"1.2.3.4\",\"1.2.3.4\","
		     "\"1.2.3.4\",\"1.2.3.4\",\"1.2.3.4\",\"1.2.3.4\",\"1.2.3.4\"]",
		     "allowed_ips: must be an array of at most 16");
}

static struct rte_mbuf *ipv4(const uint8_t src[6], const char *ip, size_t len)
{
	struct rte_mbuf *m = frame(src, RTE_ETHER_TYPE_IPV4, len);
	struct rte_ipv4_hdr *h = (struct rte_ipv4_hdr *)(buf + 14);

	memset(h, 0, sizeof(*h));
	h->version_ihl = RTE_IPV4_VHL_DEF;
	inet_pton(AF_INET, ip, &h->src_addr);
	return m;
}

static struct rte_mbuf *arp(const uint8_t src[6], const uint8_t sha[6], const char *spa)
{
	struct rte_mbuf *m = frame(src, RTE_ETHER_TYPE_ARP, 60);
	struct rte_arp_hdr *a = (struct rte_arp_hdr *)(buf + 14);

	memset(a, 0, sizeof(*a));
	memcpy(a->arp_data.arp_sha.addr_bytes, sha, 6);
	inet_pton(AF_INET, spa, &a->arp_data.arp_sip);
	return m;
}

static void test_mac_ipv4_arp(void)
{
	struct sn_bind b;
	char err[200];

	CHECK(parse(&b, "[\"52:54:00:12:34:56\"]", NULL, err, sizeof(err)) == 0);
	CHECK(check(&b, frame(VM_MAC, 0x88b5, 60)) == SN_BIND_OK);
	CHECK(check(&b, frame(OTHER_MAC, 0x88b5, 60)) == SN_BIND_SPOOFED);
	CHECK(check(&b, ipv4(VM_MAC, "192.0.2.1", 60)) == SN_BIND_OK);   /* no IP binding */

	CHECK(parse(&b, "[\"52:54:00:12:34:56\"]", "[\"10.0.0.5\", \"10.1.0.0/16\"]", err,
		    sizeof(err)) == 0);
	CHECK(check(&b, ipv4(VM_MAC, "10.0.0.5", 60)) == SN_BIND_OK);
	CHECK(check(&b, ipv4(VM_MAC, "10.1.200.7", 60)) == SN_BIND_OK);
	CHECK(check(&b, ipv4(VM_MAC, "10.0.0.6", 60)) == SN_BIND_SPOOFED);
	CHECK(check(&b, ipv4(VM_MAC, "10.2.0.1", 60)) == SN_BIND_SPOOFED);
	CHECK(check(&b, ipv4(VM_MAC, "0.0.0.0", 60)) == SN_BIND_OK);      /* DHCP */
	CHECK(check(&b, ipv4(VM_MAC, "10.0.0.5", 14 + 19)) == SN_BIND_SPOOFED); /* cut */
	CHECK(check(&b, ipv4(OTHER_MAC, "10.0.0.5", 60)) == SN_BIND_SPOOFED);
	CHECK(check(&b, arp(VM_MAC, VM_MAC, "10.0.0.5")) == SN_BIND_OK);
	CHECK(check(&b, arp(VM_MAC, VM_MAC, "0.0.0.0")) == SN_BIND_OK);    /* probe */
	CHECK(check(&b, arp(VM_MAC, VM_MAC, "10.0.0.1")) == SN_BIND_SPOOFED_ARP);
	/* A guest buffer at an odd address: headers are read as bytes (the
	 * UBSan build of the unit tests fails on a misaligned member load). */
	{
		struct rte_mbuf *m = arp(VM_MAC, VM_MAC, "10.0.0.1");

		memmove(buf + 1, buf, 60);
		m->data_off = 1;
		CHECK(sn_bind_check(&b, m, key(buf + 1 + 6)) == SN_BIND_SPOOFED_ARP);
		m = arp(VM_MAC, VM_MAC, "10.0.0.5");
		memmove(buf + 1, buf, 60);
		m->data_off = 1;
		CHECK(sn_bind_check(&b, m, key(buf + 1 + 6)) == SN_BIND_OK);
	}
	CHECK(check(&b, arp(VM_MAC, OTHER_MAC, "10.0.0.5")) == SN_BIND_SPOOFED_ARP);
	{
		/* 802.1Q-tagged IPv4: the tag is looked through. */
		struct rte_mbuf *m = frame(VM_MAC, RTE_ETHER_TYPE_VLAN, 64);
		struct rte_vlan_hdr *v = (struct rte_vlan_hdr *)(buf + 14);
		struct rte_ipv4_hdr *h = (struct rte_ipv4_hdr *)(v + 1);

		v->vlan_tci = rte_cpu_to_be_16(5);
		v->eth_proto = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
		memset(h, 0, sizeof(*h));
		inet_pton(AF_INET, "10.9.9.9", &h->src_addr);
		CHECK(check(&b, m) == SN_BIND_SPOOFED);
		inet_pton(AF_INET, "10.0.0.5", &h->src_addr);
		CHECK(check(&b, m) == SN_BIND_OK);
	}
	{
		/* Two tags are looked through; a third hides an unchecked header. */
		struct rte_mbuf *m = frame(VM_MAC, RTE_ETHER_TYPE_QINQ, 72);
		struct rte_vlan_hdr *v = (struct rte_vlan_hdr *)(buf + 14);
		struct rte_ipv4_hdr *h = (struct rte_ipv4_hdr *)(v + 2);

		v[0].eth_proto = rte_cpu_to_be_16(RTE_ETHER_TYPE_VLAN);
		v[1].eth_proto = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
		memset(h, 0, sizeof(*h));
		inet_pton(AF_INET, "10.0.0.5", &h->src_addr);
		CHECK(check(&b, m) == SN_BIND_OK);
		inet_pton(AF_INET, "10.9.9.9", &h->src_addr);
		CHECK(check(&b, m) == SN_BIND_SPOOFED);
		h = (struct rte_ipv4_hdr *)(v + 3);
		v[1].eth_proto = rte_cpu_to_be_16(RTE_ETHER_TYPE_VLAN);
		v[2].eth_proto = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
		memset(h, 0, sizeof(*h));
		inet_pton(AF_INET, "10.0.0.5", &h->src_addr);
		CHECK(check(&b, m) == SN_BIND_SPOOFED);
	}
	/* IPv4 prefixes only: any IPv6 source but the exceptions is spoofed. */
	{
		struct rte_mbuf *m = frame(VM_MAC, RTE_ETHER_TYPE_IPV6, 80);
		struct rte_ipv6_hdr *h = (struct rte_ipv6_hdr *)(buf + 14);

		memset(h, 0, sizeof(*h));
		h->proto = IPPROTO_UDP;
		inet_pton(AF_INET6, "2001:db8::5", h->src_addr);
		CHECK(check(&b, m) == SN_BIND_SPOOFED);
	}
}

/* An IPv6 frame from VM_MAC, source src, then next-header `proto` and
 * `plen` payload bytes at buf + 54 (filled by the caller). */
static struct rte_mbuf *ipv6(const char *src, uint8_t proto, size_t plen)
{
	struct rte_mbuf *m = frame(VM_MAC, RTE_ETHER_TYPE_IPV6, 54 + plen);
	struct rte_ipv6_hdr *h = (struct rte_ipv6_hdr *)(buf + 14);

	memset(h, 0, sizeof(*h));
	h->vtc_flow = rte_cpu_to_be_32(6u << 28);
	h->payload_len = rte_cpu_to_be_16((uint16_t)plen);
	h->proto = proto;
	h->hop_limits = 255;
	inet_pton(AF_INET6, src, h->src_addr);
	memset(buf + 54, 0, plen);
	return m;
}

/* Neighbour discovery message `type` at buf + off: target tgt (NS/NA),
 * one link-layer option (opt 1 or 2) with mac, or none (opt 0). */
static size_t nd(size_t off, uint8_t type, const char *tgt, uint8_t opt, const uint8_t mac[6])
{
	size_t body = type == 133 ? 8 : 24;

	buf[off] = type;
	if (tgt)
		inet_pton(AF_INET6, tgt, buf + off + 8);
	if (opt) {
		buf[off + body] = opt;
		buf[off + body + 1] = 1;
		memcpy(buf + off + body + 2, mac, 6);
		body += 8;
	}
	return body;
}

static void test_ipv6_nd(void)
{
	struct sn_bind b;
	char err[200];
	size_t n;

	CHECK(parse(&b, NULL, "[\"2001:db8::/64\"]", err, sizeof(err)) == 0);
	CHECK(check(&b, ipv6("2001:db8::5", IPPROTO_UDP, 8)) == SN_BIND_OK);
	CHECK(check(&b, ipv6("2001:db8:1::5", IPPROTO_UDP, 8)) == SN_BIND_SPOOFED);
	CHECK(check(&b, ipv6("::", IPPROTO_UDP, 8)) == SN_BIND_OK);              /* DAD */
	CHECK(check(&b, ipv6("fe80::5054:ff:fe12:3456", IPPROTO_UDP, 8)) == SN_BIND_OK);
	CHECK(check(&b, ipv6("fe80::5054:ff:fe99:9999", IPPROTO_UDP, 8)) == SN_BIND_SPOOFED);
	CHECK(check(&b, ipv4(VM_MAC, "10.0.0.5", 60)) == SN_BIND_SPOOFED);     /* no v4 prefix */
	CHECK(check(&b, arp(VM_MAC, VM_MAC, "10.0.0.5")) == SN_BIND_SPOOFED_ARP);

	/* NS from its own address with its own / a foreign source LLA. */
	ipv6("2001:db8::5", IPPROTO_ICMPV6, 32);
	n = nd(54, 135, "2001:db8::1", 1, VM_MAC);
	CHECK(n == 32 && check(&b, &mb) == SN_BIND_OK);
	ipv6("2001:db8::5", IPPROTO_ICMPV6, 32);
	nd(54, 135, "2001:db8::1", 1, OTHER_MAC);
	CHECK(check(&b, &mb) == SN_BIND_SPOOFED_ND);
	/* DAD: NS from :: without options passes. */
	ipv6("::", IPPROTO_ICMPV6, 24);
	nd(54, 135, "2001:db8::5", 0, NULL);
	CHECK(check(&b, &mb) == SN_BIND_OK);
	/* NA: the target must be its own; the target LLA its MAC. */
	ipv6("2001:db8::5", IPPROTO_ICMPV6, 32);
	nd(54, 136, "2001:db8::5", 2, VM_MAC);
	CHECK(check(&b, &mb) == SN_BIND_OK);
	ipv6("2001:db8::5", IPPROTO_ICMPV6, 32);
	nd(54, 136, "2001:db8:ffff::1", 2, VM_MAC);
	CHECK(check(&b, &mb) == SN_BIND_SPOOFED_ND);
	ipv6("2001:db8::5", IPPROTO_ICMPV6, 32);
	nd(54, 136, "2001:db8::5", 2, OTHER_MAC);
	CHECK(check(&b, &mb) == SN_BIND_SPOOFED_ND);
	/* RS from the link-local address with a foreign source LLA. */
	ipv6("fe80::5054:ff:fe12:3456", IPPROTO_ICMPV6, 16);
	nd(54, 133, NULL, 1, OTHER_MAC);
	CHECK(check(&b, &mb) == SN_BIND_SPOOFED_ND);
	/* A zero-length option is malformed; a truncated NA too. */
	ipv6("2001:db8::5", IPPROTO_ICMPV6, 32);
	nd(54, 136, "2001:db8::5", 2, VM_MAC);
	buf[54 + 24 + 1] = 0;
	CHECK(check(&b, &mb) == SN_BIND_SPOOFED_ND);
	ipv6("2001:db8::5", IPPROTO_ICMPV6, 12);
	buf[54] = 136;
	CHECK(check(&b, &mb) == SN_BIND_SPOOFED_ND);
	/* Options past the first 256 bytes are checked too: 40 padding
	 * options (type 0xfe, 8 bytes each), then a foreign target LLA. */
	ipv6("2001:db8::5", IPPROTO_ICMPV6, 24 + 40 * 8 + 8);
	nd(54, 136, "2001:db8::5", 0, NULL);
	for (unsigned i = 0; i < 40; i++) {
		buf[54 + 24 + 8 * i] = 0xfe;
		buf[54 + 24 + 8 * i + 1] = 1;
	}
	buf[54 + 24 + 320] = 2;
	buf[54 + 24 + 320 + 1] = 1;
	memcpy(buf + 54 + 24 + 320 + 2, OTHER_MAC, 6);
	CHECK(check(&b, &mb) == SN_BIND_SPOOFED_ND);
	memcpy(buf + 54 + 24 + 320 + 2, VM_MAC, 6);
	CHECK(check(&b, &mb) == SN_BIND_OK);
	/* An option reaching past the frame is malformed. */
	buf[54 + 24 + 320 + 1] = 2;
	CHECK(check(&b, &mb) == SN_BIND_SPOOFED_ND);
	/* A message of SN_BIND_ND_MAX bytes of valid options passes, a longer
	 * one is refused whatever its options. */
	ipv6("2001:db8::5", IPPROTO_ICMPV6, SN_BIND_ND_MAX);
	nd(54, 136, "2001:db8::5", 0, NULL);
	for (unsigned i = 0; i < (SN_BIND_ND_MAX - 24) / 8; i++) {
		buf[54 + 24 + 8 * i] = 0xfe;
		buf[54 + 24 + 8 * i + 1] = 1;
	}
	CHECK(check(&b, &mb) == SN_BIND_OK);
	ipv6("2001:db8::5", IPPROTO_ICMPV6, SN_BIND_ND_MAX + 8);
	nd(54, 136, "2001:db8::5", 0, NULL);
	for (unsigned i = 0; i < (SN_BIND_ND_MAX + 8 - 24) / 8; i++) {
		buf[54 + 24 + 8 * i] = 0xfe;
		buf[54 + 24 + 8 * i + 1] = 1;
	}
	CHECK(check(&b, &mb) == SN_BIND_SPOOFED_ND);
	/* Echo requests are not ND. */
	ipv6("2001:db8::5", IPPROTO_ICMPV6, 8);
	buf[54] = 128;
	CHECK(check(&b, &mb) == SN_BIND_OK);
	/* ND behind a destination-options header is still checked ... */
	ipv6("2001:db8::5", 60, 8 + 32);
	buf[54] = IPPROTO_ICMPV6;   /* next header */
	buf[55] = 0;                /* 8 bytes */
	nd(62, 136, "2001:db8:ffff::1", 2, VM_MAC);
	CHECK(check(&b, &mb) == SN_BIND_SPOOFED_ND);
	/* ... and ICMPv6 in a fragment is refused, other fragments pass. */
	ipv6("2001:db8::5", 44, 8 + 32);
	buf[54] = IPPROTO_ICMPV6;
	CHECK(check(&b, &mb) == SN_BIND_SPOOFED_ND);
	buf[54] = IPPROTO_UDP;
	CHECK(check(&b, &mb) == SN_BIND_OK);
}

int main(void)
{
	test_parse();
	test_mac_ipv4_arp();
	test_ipv6_nd();
	return sn_check_exit("test_bind");
}
