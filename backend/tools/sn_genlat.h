/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_genlat.h — one-way latency of marked sn-gen flows (`--flow ...,lat=1`),
 * for the isolation / T-WFI experiment (PSPAT §6.6: the VICTIM's packets
 * are stamped when submitted and read again by the receiver on the same
 * host, same clock).
 *
 * No frame format change: frames of a flow leave in sequence order, so the
 * sender records the TSC at which the driver accepted frame `seq`
 * (rte_eth_tx_burst returned) in tx[seq], and the sink, which sees `seq` in
 * the frame header, records its own TSC in rx[seq]. Both run on sn-gen's
 * one lcore: no sharing, no barriers. A flow's arrays hold `count` entries
 * (count <= SN_GENLAT_MAX_COUNT), allocated at parse time.
 */
#ifndef SN_GENLAT_H
#define SN_GENLAT_H

#include <stdint.h>

#include <jansson.h>

#include "sn_gen.h"

#define SN_GENLAT_MAX_COUNT (1u << 22)

/* Allocate the arrays of flow f (f->count entries). 0 or -errno. */
int sn_genlat_init(struct sn_gen_flow *f);
void sn_genlat_free(struct sn_gen_flow *f);

/* The driver accepted frames first_seq .. first_seq + n - 1 of f at tsc. */
static inline void sn_genlat_sent(struct sn_gen_flow *f, uint64_t first_seq, uint16_t n,
				  uint64_t tsc)
{
	for (uint16_t i = 0; i < n && first_seq + i < f->count; i++)
		f->lat_tx[first_seq + i] = tsc;
}

/* Frame seq of f was read at tsc by a poll that came `gap` cycles after
 * the previous one (the first copy counts). */
static inline void sn_genlat_received(struct sn_gen_flow *f, uint64_t seq, uint64_t tsc,
				      uint64_t gap)
{
	if (seq < f->count && f->lat_tx[seq] && !f->lat_rx[seq]) {
		f->lat_rx[seq] = tsc;
		f->lat_gap[seq] = gap;
	}
}

/* {"samples", "lost", "p50_us", "p90_us", "p99_us", "max_us"} over every
 * frame sent so far (lost: sent, not received). NULL on ENOMEM. */
json_t *sn_genlat_summary(const struct sn_gen *g, const struct sn_gen_flow *f);

/* Write one JSON line per latency flow to path: {"flow": i, "tx_us": [...],
 * "lat_us": [...], "gap_us": [...]} in sequence order over the frames
 * sent; tx_us = send time in us since the first frame of any latency flow,
 * lat_us = one-way latency in us, null if not received, gap_us = how long
 * the sink had not polled before the poll that read the frame (the frame
 * arrived within that gap: lat_us - gap_us bounds its latency from below,
 * without the sink's own descheduling). 0 or -errno. */
int sn_genlat_write(const struct sn_gen *g, const char *path);

#endif /* SN_GENLAT_H */
