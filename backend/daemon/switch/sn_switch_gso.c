/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_switch_gso.c — the switch's ethdev egress (the uplink): plain frames
 * in bursts, guest TSO frames segmented in software.
 *
 * A guest with virtio-net offloads hands us TSO frames
 * (RTE_MBUF_F_TX_TCP_SEG + tso_segsz, up to 64 KiB, multi-segment) with a
 * partial checksum. vhost destinations take them as they are (the enqueue
 * writes a virtio-net GSO header: VM->VM stays fast). An ethdev gets them
 * segmented here with librte_gso (TCP/IPv4; both checksums of every
 * segment computed here), because net_tap in DPDK 22.11 advertises TCP_TSO
 * but rejects every TSO frame whose mss + l2/l3/l4 headers exceed its MTU
 * (it compares an L2 size with an L3 MTU: mss 1448 + 66 > 1500), and a
 * rejected frame stops its whole tx burst. vhost ports do not offer
 * TSO6/UFO (sn_port.c), which rte_gso cannot do. A GSO frame we cannot
 * segment (TSO6/UFO anyway, headers not in the first segment, absurd mss,
 * out of mbufs) is dropped and counted as gso_failed on the egress port.
 * The counters are described in doc/rpc.md (stats.get).
 */
/* rte_ipv4_udptcp_cksum_mbuf() (multi-segment TCP checksum) is
 * experimental in DPDK 22.11. */
#define ALLOW_EXPERIMENTAL_API
#include "sn_switch_impl.h"

#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_gso.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_tcp.h>

#include "sn_log.h"

#define GSO_SEG_MAX 128  /* segments per GSO frame (64 KiB at mss >= 512) */
#define GSO_FLAGS SN_SWITCH_GSO_FLAGS

void sn_switch_diag(unsigned *budget, const char *port, const char *what,
		    const struct rte_mbuf *m)
{
	if (*budget == 0)
		return;
	(*budget)--;
	sn_log_warn("port %s: %s: pkt_len %u data_len %u segs %u ol_flags 0x%llx l2/l3/l4 %u/%u/%u "
		    "tso_segsz %u",
	       port, what, m->pkt_len, m->data_len, m->nb_segs, (unsigned long long)m->ol_flags,
	       (unsigned)m->l2_len, (unsigned)m->l3_len, (unsigned)m->l4_len, (unsigned)m->tso_segsz);
}

/* tx_prepare fixes offload headers (no-op for most PMDs); frames it
 * rejects are dropped like unsent ones. Returns the sent prefix length. */
static uint16_t eth_tx(struct sn_switch *sw, const struct sn_port *p,
		       struct rte_mbuf **pkts, uint16_t n)
{
	uint16_t k = rte_eth_tx_prepare(p->eth_port, sw->txq, pkts, n);

	if (k < n)
		sn_switch_diag(&sw->diag_txfail, p->name, "tx_prepare rejected", pkts[k]);
	k = rte_eth_tx_burst(p->eth_port, sw->txq, pkts, k);
	return k;
}

/* A segment of a TCP/IPv4 frame, headers alone in its first mbuf: compute
 * both checksums (rte_gso leaves them stale) and clear every offload flag
 * so the PMD sends it as is. */
static void tcp4_finish(struct rte_mbuf *seg)
{
	struct rte_ipv4_hdr *ip = rte_pktmbuf_mtod_offset(seg, struct rte_ipv4_hdr *, seg->l2_len);
	struct rte_tcp_hdr *tcp = rte_pktmbuf_mtod_offset(seg, struct rte_tcp_hdr *,
							  seg->l2_len + seg->l3_len);

	ip->hdr_checksum = 0;
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	tcp->cksum = 0;
	tcp->cksum = rte_ipv4_udptcp_cksum_mbuf(seg, ip, seg->l2_len + seg->l3_len);
	seg->ol_flags &= ~(GSO_FLAGS | RTE_MBUF_F_TX_L4_MASK | RTE_MBUF_F_TX_IP_CKSUM |
			   RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IPV6);
}

/* Software-segment one guest TSO frame m (shared: other destinations of a
 * flood still read it, so its data and ol_flags are left as they were) and
 * send the segments. Returns 1 = every segment sent, 0 = not all sent
 * (ring full), -1 = cannot segment. Never takes m's reference. */
int sn_switch_gso_tx(struct sn_switch *sw, const struct sn_port *p, struct rte_mbuf *m)
{
	struct rte_mbuf *segs[GSO_SEG_MAX];
	const struct rte_ipv4_hdr *ip;
	unsigned hdr = (unsigned)m->l2_len + m->l3_len + m->l4_len;
	uint64_t ol = m->ol_flags;
	int n;
	uint16_t k;

	/* Untrusted guest metadata: only TCP/IPv4 with every header in the
	 * first segment (rte_gso copies them from there). */
	if ((ol & GSO_FLAGS) != RTE_MBUF_F_TX_TCP_SEG || !(ol & RTE_MBUF_F_TX_IPV4) ||
	    m->l2_len < RTE_ETHER_HDR_LEN || m->l3_len < sizeof(struct rte_ipv4_hdr) ||
	    m->l4_len < sizeof(struct rte_tcp_hdr) || m->data_len < hdr ||
	    m->tso_segsz == 0 || hdr + m->tso_segsz > UINT16_MAX)
		return -1;
	ip = rte_pktmbuf_mtod_offset(m, const struct rte_ipv4_hdr *, m->l2_len);
	if (ip->next_proto_id != IPPROTO_TCP || rte_ipv4_hdr_len(ip) != m->l3_len)
		return -1;
	sw->gso.gso_size = (uint16_t)(hdr + m->tso_segsz);
	n = rte_gso_segment(m, &sw->gso, segs, GSO_SEG_MAX);
	m->ol_flags = ol;   /* rte_gso clears TCP_SEG on its input */
	if (n == 0) {
		/* Fits in one segment (or an IP fragment): a private copy,
		 * since the checksums are written in place. */
		segs[0] = rte_pktmbuf_copy(m, sw->mp, 0, UINT32_MAX);
		if (!segs[0])
			return -1;
		n = 1;
	}
	if (n < 0)
		return -1;
	for (int i = 0; i < n; i++)
		tcp4_finish(segs[i]);
	k = eth_tx(sw, p, segs, (uint16_t)n);
	for (int i = k; i < n; i++)
		rte_pktmbuf_free(segs[i]);
	return k == n ? 1 : 0;
}

/* An ethdev destination: plain frames in bursts, GSO frames segmented one
 * at a time. Counters are per switch frame (a GSO frame is one tx packet
 * when every segment went out, else one ring_full drop), so the stats.get
 * conservation rule holds. Frees every staged reference. */
void sn_switch_flush_eth(struct sn_switch *sw, struct sn_port *p, struct sn_switch_stage *s)
{
	uint64_t sent = 0, bytes = 0, full = 0, gso_failed = 0;
	uint16_t run = 0;
	bool blocked = false;   /* the PMD refused a frame: skip the rest */

	for (uint16_t i = 0; i <= s->n; i++) {
		struct rte_mbuf *m = i < s->n ? s->pkts[i] : NULL;
		int rc;

		if (m && !(m->ol_flags & GSO_FLAGS))
			continue;
		if (i > run) {   /* the run of plain frames [run, i) */
			uint16_t n = i - run;
			uint16_t k = blocked ? 0 : eth_tx(sw, p, &s->pkts[run], n);

			for (uint16_t j = 0; j < k; j++)
				bytes += s->pkts[run + j]->pkt_len;
			for (uint16_t j = k; j < n; j++)
				rte_pktmbuf_free(s->pkts[run + j]);
			if (k < n && !blocked)
				sn_switch_diag(&sw->diag_txfail, p->name, "tx_burst refused", s->pkts[run + k]);
			sent += k;
			full += n - k;
			blocked = blocked || k < n;
		}
		run = i + 1;
		if (!m)
			break;
		rc = blocked ? 0 : sn_switch_gso_tx(sw, p, m);
		if (rc == 1) {
			sent++;
			bytes += m->pkt_len;
		} else if (rc == 0) {
			full++;
			blocked = true;
		} else {
			gso_failed++;
			sn_switch_diag(&sw->diag_txfail, p->name, "cannot segment", m);
		}
		rte_pktmbuf_free(m);    /* segments hold their own references */
	}
	sn_port_ctr_add(&p->st.tx_packets, sent);
	sn_port_ctr_add(&p->st.tx_bytes, bytes);
	if (full)
		sn_port_ctr_add(&p->st.drop[SN_DROP_RING_FULL], full);
	if (gso_failed)
		sn_port_ctr_add(&p->st.drop[SN_DROP_GSO_FAILED], gso_failed);
}
