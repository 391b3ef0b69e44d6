/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_vufront.h — sn-vufront, the test-only vhost-user front-end: guest
 * memory layout, front-end state, and the vhost-user side
 * (sn_vufront_vu.c) used by the scenarios (sn_vufront.c).
 */
#ifndef SN_VUFRONT_H
#define SN_VUFRONT_H

#include <stdbool.h>
#include <stdint.h>

#include "sn_vring.h"

/* Guest memory: two regions, contiguous in GPA, separate memfds/mappings;
 * a third one (GPA2) is added by the "hotplug" scenario. */
#define REG_SIZE  (1u << 20)
#define GPA0      0x100000ull
#define GPA1      (GPA0 + REG_SIZE)
#define GPA2      (GPA1 + REG_SIZE)
#define NREG_MAX  3
#define GPA_OOB   0x40000000ull      /* in no region */
/* Region 0 layout (offsets). Region 1 holds frames, 2 KiB each. */
#define TX_DESC   0x0000u
#define TX_AVAIL  0x1000u
#define TX_USED   0x2000u
#define RX_DESC   0x4000u
#define RX_AVAIL  0x5000u
#define RX_USED   0x6000u
#define IND_OFF   0x8000u            /* indirect tables, 0x1000 apart */
#define HDR_OFF   0x10000u           /* virtio-net headers, 16 B apart */
#define FRAME_SZ  2048u
#define BIG_OFF   0x80000u           /* region 1: the oversized buffer */
#define BIG_LEN   70000u
#define FRAME_LEN 60u
#define MAX_Q     256u
#define MAX_SEEN  4096u
#define MAX_PRINT 64u
/* Dirty log: the TX used ring straddles a page boundary (entries 128..
 * on the next page), the bitmap covers LOG_BYTES * 8 pages of 4 KiB. */
#define TX_USED_LOG 0x2c00u
#define LOG_PAGE  4096u
#define LOG_BYTES 4096u

/* One front-end: its connection, memory and TX ring, and what it saw.
 * Single-threaded: the only concurrent party is the back-end (device). */
struct sn_vufront {
	int sock, kickfd[2], callfd[2], memfd[NREG_MAX];
	unsigned char *base[NREG_MAX];
	uint32_t nreg;               /* regions in the memory table sent */
	bool frames_in_r2;           /* new frames go to region 2 (hotplug) */
	uint32_t q;
	uint16_t hdr_len;
	uint64_t features;
	struct sn_vring_desc *desc;
	struct sn_vring_avail *avail;
	struct sn_vring_used *used;
	uint16_t nd;                 /* next free descriptor of the batch */
	uint16_t avail_idx, used_seen;
	uint32_t nbuf;               /* frame buffers handed out (mod q) */
	double timeout_s;
	unsigned char dst[6], src[6];
	/* What was posted and seen. */
	uint32_t chains, skipped, expect;
	uint32_t nbad;
	uint16_t bad[MAX_Q * 2];
	uint32_t nseen;
	struct sn_vring_used_elem seen[MAX_SEEN];
	uint32_t used_total;
	bool timed_out;
	double wait_ms;
	/* Live migration (scenarios dirty_log and rarp): migration set
	 * before negotiating means protocol features LOG_SHMFD and RARP, as
	 * QEMU negotiates them; the bitmap this front-end shares
	 * (SET_LOG_BASE, sn_vufront_log_*); the dirty-log check's JSON object
	 * and verdict. */
	bool migration;
	int logfd;
	uint64_t *log;
	bool log_failed;
	char log_json[1024];
	/* Scenarios across a back-end restart (sn_vufront_restart.c). */
	const char *path;            /* the back-end's socket */
	const char *go_file;         /* --go-file */
	uint32_t rounds;             /* --rounds */
	uint16_t tx_base;            /* SET_VRING_BASE of the TX ring */
	bool restart_ok;
};

/* Print "sn-vufront: what: strerror(errno)" and exit(3). */
void sn_vufront_die(const char *what) __attribute__((noreturn));
double sn_vufront_now(void);          /* CLOCK_MONOTONIC seconds */
void sn_vufront_nap_us(long us);

/* Create and map the two memfd regions, point desc/avail/used at the TX
 * ring. Exits (3) on failure. */
void sn_vufront_map(struct sn_vufront *f);
/* Connect to the back-end's server socket, retrying while it does not
 * exist yet, until f->timeout_s; every later reply waits at most that
 * long. Exits (3) on failure. */
void sn_vufront_connect(struct sn_vufront *f, const char *path);
/* SET_OWNER, features (VERSION_1 only), SET_MEM_TABLE (both regions),
 * then NUM/BASE/ADDR/KICK/CALL for vrings 0 (RX) and 1 (TX), size f->q. */
void sn_vufront_negotiate(struct sn_vufront *f);
/* Memory hotplug: create region 2 and send SET_MEM_TABLE with all
 * three regions, as QEMU does after a DIMM hotplug (the back-end's library
 * unmaps and remaps every region), then wait for a GET_FEATURES reply: the
 * back-end handles messages in order, so the table is applied then. */
void sn_vufront_hotplug(struct sn_vufront *f);
/* SET_MEM_TABLE with the current table again (unchanged: the back-end has
 * nothing to remap), then the same GET_FEATURES wait. */
void sn_vufront_resend_table(struct sn_vufront *f);
/* GET_VRING_BASE (device stop): the back-end's next avail index. */
uint32_t sn_vufront_get_base(struct sn_vufront *f, uint32_t index);

/* Dirty log, as QEMU starts a live migration: with f->migration set
 * before sn_vufront_negotiate() (which then also negotiates
 * VHOST_USER_F_PROTOCOL_FEATURES with LOG_SHMFD and RARP and enables the
 * rings),
 * share a zeroed memfd bitmap (SET_LOG_BASE), SET_FEATURES with
 * VHOST_F_LOG_ALL, SET_VRING_ADDR with VHOST_VRING_F_LOG (log address =
 * the used ring's GPA) for both rings, then wait for a GET_FEATURES
 * reply (every message applied). Exits (3) if the back-end lacks them. */
void sn_vufront_log_start(struct sn_vufront *f);
/* The bitmap's bit of guest page pg (relaxed), and clearing the whole
 * bitmap (atomic exchanges, as QEMU's sync). */
bool sn_vufront_log_test(const struct sn_vufront *f, uint64_t pg);
void sn_vufront_log_clear(struct sn_vufront *f);
/* A new bitmap (SET_LOG_BASE again, as QEMU resizes the log). */
void sn_vufront_log_resize(struct sn_vufront *f);
/* GPA of the TX used ring. */
uint64_t sn_vufront_used_gpa(const struct sn_vufront *f);
/* VHOST_USER_SEND_RARP with mac and the given payload size (8 is
 * well-formed), as the destination QEMU announces a migrated guest, then
 * the GET_FEATURES wait. */
void sn_vufront_send_rarp(struct sn_vufront *f, const unsigned char mac[6], uint32_t size);
/* sn_vufront_restart.c: the "restart" and "sink" scenarios, and the
 * "restart" object of the result line (after "stop"). */
void sn_vufront_sc_restart(struct sn_vufront *f, uint32_t count);
void sn_vufront_sc_sink(struct sn_vufront *f, uint32_t count);
void sn_vufront_restart_json(const struct sn_vufront *f);

/* sn_vufront_many.c: "sn-vufront many ...", the many-connection mode
 * (argv[0] = "many"); returns the exit status. */
int sn_vufront_many(int argc, char **argv);
/* sn_vufront_fuzz.c: "sn-vufront fuzz ...", the black-box message fuzzer
 * (argv[0] = "fuzz"); returns the exit status. */
int sn_vufront_fuzz(int argc, char **argv);

#endif /* SN_VUFRONT_H */
