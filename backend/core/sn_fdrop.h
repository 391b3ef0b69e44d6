/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_fdrop.h — fair packet dropping (Addanki, Linguaglossa, Roberts, Rossi:
 * "Controlling software router resource sharing by fair packet dropping").
 *
 * A shadow per-flow fair queueing system decides which packets to drop so
 * that an overloaded resource — link bandwidth in bytes/s, or CPU in
 * cycles/s — is shared max-min fairly between flows, without scheduling
 * the real packets (the real queue stays FIFO, batches stay batches).
 *
 * Units: one "unit" is whatever the shared resource is counted in: bytes
 * for a link, cycles (or any cost unit) for a CPU. `capacity` is in units
 * per second, packet lengths/costs and thresholds are in units, times in
 * nanoseconds.
 *
 * Usage per polled batch (Algorithm 1, batch-compatible):
 *     sn_fdrop_advance(fd, now);                 lines 3-15, once per batch
 *     for each packet: sn_fdrop_admit(fd, hash, len) -> KEEP / DROP
 * or sn_fdrop_batch() which does both; sn_fdrop_decide() is the
 * one-packet form (advance + admit). For CPU sharing, after the batch was
 * processed, sn_fdrop_account() apportions the measured cycles over the
 * kept packets (Algorithm 2) and sn_fdrop_adapt() moves the threshold
 * (α if the polled batch was full, β otherwise).
 *
 * Concurrency: an instance is single-threaded (one per worker core or per
 * arbiter). Exactly one thread may call any function on it; no locks, no
 * barriers. Different instances are independent.
 *
 * Errors: the constructor returns NULL and sets errno; the rest return
 * 0/-errno, or a verdict. Every drop is counted under its cause.
 */
#ifndef SN_FDROP_H
#define SN_FDROP_H

#include <stdint.h>

#define SN_FDROP_MAX_LEN    (1u << 24)          /* units, per packet */
#define SN_FDROP_MAX_THETA  (1ULL << 32)        /* units */
#define SN_FDROP_MAX_ROWS   (1u << 24)

struct sn_fdrop_cfg {
	uint64_t capacity;    /* units per second, > 0 */
	uint32_t n_rows;      /* flow table rows of 4 records, pow2 (0 = 4096) */
	uint32_t max_active;  /* ActiveList capacity (0 = 4 * n_rows) */
	uint64_t theta;       /* drop threshold θ, units, 1..SN_FDROP_MAX_THETA */
	uint64_t theta_min;   /* adaptive bounds; both 0 = θ fixed */
	uint64_t theta_max;
	uint32_t alpha_ppm;   /* θ *= α when the batch was full (0 = 0.5) */
	uint32_t beta_ppm;    /* θ *= β otherwise (0 = 1.2) */
};

enum sn_fdrop_verdict {
	SN_FDROP_KEEP = 0,
	SN_FDROP_DROP = 1,
};

enum sn_fdrop_cause {
	SN_FDROP_C_FAIR = 0,     /* virtual queue above θ (the algorithm's drop) */
	SN_FDROP_C_TABLE_FULL,   /* new flow, no free record / ActiveList full */
	SN_FDROP_C_INVALID,      /* len 0 or > SN_FDROP_MAX_LEN */
	SN_FDROP_C_MAX,
};

struct sn_fdrop_stats {
	uint64_t kept;
	uint64_t new_flows;          /* kept packets that (re)entered the ActiveList */
	uint64_t dropped[SN_FDROP_C_MAX];
	uint64_t drained;            /* flows that left the ActiveList by draining */
	uint64_t corrections;        /* Algorithm 2 per-packet corrections applied */
	uint64_t corrections_lost;   /* positive correction, no room to track it */
	uint64_t theta_down, theta_up;
	uint64_t theta;              /* current θ, units (rounded down) */
	uint32_t active;             /* flows in the ActiveList now */
	uint32_t active_max;         /* high-water mark */
};

/* One processed packet for Algorithm 2: its flow, its relative cost
 * weight w_type (e.g. expected cycles of its type) and the cost it was
 * charged by sn_fdrop_admit (its `len`). */
struct sn_fdrop_done {
	uint32_t hash;
	uint32_t weight;
	uint32_t charged;
};

struct sn_fdrop;

/* NULL + errno: EINVAL bad cfg, ENOMEM. */
struct sn_fdrop *sn_fdrop_create(const struct sn_fdrop_cfg *cfg);
void sn_fdrop_free(struct sn_fdrop *fd);

/* Algorithm 1 lines 3-15: serve every virtual queue its max-min share of
 * capacity * (now - last call). The first call only sets the clock; a
 * time earlier than the last one is ignored. */
void sn_fdrop_advance(struct sn_fdrop *fd, uint64_t now_ns);

/* Algorithm 1 lines 16-27 for one packet of flow `hash` costing `len`
 * units, at the time of the last advance. */
enum sn_fdrop_verdict sn_fdrop_admit(struct sn_fdrop *fd, uint32_t hash, uint32_t len);

/* advance(now) + admit. */
enum sn_fdrop_verdict sn_fdrop_decide(struct sn_fdrop *fd, uint32_t hash,
				      uint32_t len, uint64_t now_ns);

/* A batch with one time update: verdict[i] for each packet; returns the
 * number kept. */
uint32_t sn_fdrop_batch(struct sn_fdrop *fd, uint64_t now_ns, const uint32_t *hash,
			const uint32_t *len, uint32_t n, uint8_t *verdict);

/* Algorithm 2: `cycles` units were spent processing the batch whose kept
 * packets are pkts[0..n-1]; packet i really cost w_i / sum(w) * cycles and
 * its flow's virtual queue is corrected by (cost - charged).
 * -EINVAL if n > 0 and every weight is 0. */
int sn_fdrop_account(struct sn_fdrop *fd, const struct sn_fdrop_done *pkts,
		     uint32_t n, uint64_t cycles);

/* Adaptive threshold (§III-E): θ *= α if batch_full, else θ *= β, clamped
 * to [theta_min, theta_max]. No-op when θ is fixed. */
void sn_fdrop_adapt(struct sn_fdrop *fd, int batch_full);

/* Virtual queue of a flow now (units, rounded down; 0 if not active). */
uint64_t sn_fdrop_vq(const struct sn_fdrop *fd, uint32_t hash);

void sn_fdrop_stats(const struct sn_fdrop *fd, struct sn_fdrop_stats *out);

#endif /* SN_FDROP_H */
