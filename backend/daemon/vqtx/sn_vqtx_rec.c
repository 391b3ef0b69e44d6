/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_vqtx_rec.c — the durable record of a deferred TX queue: which heads
 * are outstanding, so that a daemon restarted after a crash completes each
 * of them exactly once and resumes at the true avail index (Carousel §5.2
 * holds descriptors; this is what makes holding them survive the holder).
 *
 * Why. After the back-end dies without answering GET_VRING_BASE, QEMU
 * (7.2: the vhost-user net device keeps no inflight area) restarts the
 * ring at last_avail = used->idx. Deferred completions are out of order,
 * so the outstanding heads are not a tail of the ring: heads below that
 * index would never come back and completed ones above it would be popped
 * again. The record says which ones are out.
 *
 * What. One file per TX queue (state_dir/<port>.txq<i>.rec), mapped
 * MAP_SHARED: the page cache keeps every store even when the process is
 * SIGKILLed, and the datapath writes it without a system call:
 *   pop:     set the popped heads' bits, then store last_avail;
 *   publish: (the used->idx store of sn_vring_used_flush) clear the bits of
 *            the entries just published, then store used_pub.
 * The used ring itself is the write-ahead log of completions: on
 * reconnect, with U the guest's used->idx, the entries in [used_pub, U)
 * were published before a crash could update the record, so their bits
 * are cleared first; what remains is exactly the outstanding set, with
 * popcount == last_avail - U. Stores are ordered by program order (release
 * on the two indexes); a process killed between two of them leaves a
 * record whose check fails, never one that lies.
 *
 * Validated, never trusted: magic, version, queue index, ring size and the
 * three ring addresses must match the ring the front-end just described,
 * the used_pub..U and U..last_avail spans must fit the ring, the guest's
 * avail->idx must be at most a ring ahead of last_avail, and the count of
 * set bits must equal last_avail - U. Anything else: logged, counted
 * (record_rejected) and ignored; the queue starts from the front-end's
 * base as without a record.
 *
 * Threads: set_record and remove on MAIN before the port is published /
 * after it is gone; recover and begin on VHOST in sn_vqtx_start (the
 * worker does not touch the queue then); the per-frame hooks
 * (sn_vqtx_impl.h) on the owning WORKER only. No one else writes the file
 * while the daemon runs: schednicd holds an exclusive flock on
 * state_dir/schednicd.lock from start to exit (app/main.c), and a second
 * daemon given the same state_dir refuses to start.
 */
#include "sn_vqtx_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>


#include "sn_log.h"

#define REC_MAGIC   0x51524e53u   /* "SNRQ" */
#define REC_VERSION 1u

static_assert(sizeof(struct sn_vqtx_rec) <= SN_VQTX_REC_BYTES, "record fits its file");

int sn_vqtx_set_record(struct sn_vqtx *q, const char *path)
{
	struct stat st;
	void *m;
	int fd;

	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		goto err;
	if (fstat(fd, &st))
		goto err_fd;
	if (!S_ISREG(st.st_mode)) {
		errno = EINVAL;
		goto err_fd;
	}
	/* Any other size is not ours: start from zeros (magic 0: no record). */
	if (st.st_size != SN_VQTX_REC_BYTES &&
	    (ftruncate(fd, 0) || ftruncate(fd, SN_VQTX_REC_BYTES)))
		goto err_fd;
	/* Blocks for the whole file now: a store into a hole of a full
	 * tmpfs would raise SIGBUS on the worker. */
	errno = posix_fallocate(fd, 0, SN_VQTX_REC_BYTES);
	if (errno)
		goto err_fd;
	m = mmap(NULL, SN_VQTX_REC_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		goto err_fd;
	close(fd);
	q->rec_path = strdup(path);
	if (!q->rec_path) {
		munmap(m, SN_VQTX_REC_BYTES);
		errno = ENOMEM;
		goto err;
	}
	q->rec = m;
	return 0;

err_fd:
	close(fd);
err:
	sn_log_err("vqtx: record %s: %s (the queue runs without one)", path, strerror(errno));
	return -errno;
}

void sn_vqtx_rec_close(struct sn_vqtx *q)
{
	if (q->rec)
		munmap(q->rec, SN_VQTX_REC_BYTES);
	q->rec = NULL;
	free(q->rec_path);
	q->rec_path = NULL;
}

void sn_vqtx_rec_remove(struct sn_vqtx *q)
{
	if (q && q->rec_path && unlink(q->rec_path) && errno != ENOENT)
		sn_log_err("vqtx: cannot remove record %s: %s", q->rec_path, strerror(errno));
}

static unsigned bits_count(const struct sn_vqtx_rec *r, uint32_t size)
{
	unsigned n = 0;

	for (uint32_t w = 0; w < size / 64 + (size % 64 != 0); w++)
		n += (unsigned)__builtin_popcountll(r->bits[w]);
	return n;
}

/* Bits at or above size must be clear (a head is < size). */
static bool bits_in_range(const struct sn_vqtx_rec *r, uint32_t size)
{
	for (uint32_t w = size / 64; w < SN_VRING_MAX_SIZE / 64; w++) {
		uint64_t keep = (w == size / 64 && size % 64) ? (1ULL << (size % 64)) - 1 : 0;

		if (r->bits[w] & ~keep)
			return false;
	}
	return true;
}

#define REJECT(...) do { SN_LOG_RL(SN_LOG_WARNING, "vqtx: record rejected, " __VA_ARGS__); \
			 ctr_inc(&q->st.record_rejected); return -EINVAL; } while (0)

int sn_vqtx_rec_recover(struct sn_vqtx *q, const struct sn_vqtx_rec_ring *ring,
			uint16_t *last_avail, uint32_t *n)
{
	struct sn_vqtx_rec *r = q->rec;
	const char *p = q->rec_path;
	uint16_t u = ring->used_idx, pub, la, span;
	unsigned set;

	*n = 0;
	if (!r || __atomic_load_n(&r->magic, __ATOMIC_ACQUIRE) == 0)
		return 0;                      /* a new file: nothing recorded */
	if (ring->size == 0 || ring->size > SN_VRING_MAX_SIZE || (ring->size & (ring->size - 1)))
		return 0;                      /* sn_vring_create refuses the ring */
	pub = __atomic_load_n(&r->used_pub, __ATOMIC_ACQUIRE);
	la = __atomic_load_n(&r->last_avail, __ATOMIC_ACQUIRE);
	if (r->magic != REC_MAGIC || r->version != REC_VERSION)
		REJECT("%s: not a record of this version", p);
	/* Nothing outstanding (a clean stop, or nothing was held): the
	 * front-end's base is right whatever the ring; no check needed. */
	if (pub == la && bits_count(r, SN_VRING_MAX_SIZE) == 0)
		return 0;
	if (r->vring != q->vring || r->size != ring->size)
		REJECT("%s: vring %u size %u, the ring is vring %u size %u", p, r->vring, r->size,
		       q->vring, ring->size);
	if (memcmp(r->gpa, ring->gpa, sizeof(r->gpa)))
		REJECT("%s: another ring (addresses differ)", p);
	if (!bits_in_range(r, ring->size))
		REJECT("%s: a head beyond the ring size", p);
	span = (uint16_t)(u - pub);
	if (span > ring->size || (uint16_t)(la - u) > ring->size ||
	    (uint16_t)(la - pub) < span)
		REJECT("%s: used idx %u outside [%u, %u]", p, u, pub, la);
	/* QEMU restarts a ring it could not stop at its used index. */
	if (ring->base != u)
		REJECT("%s: front-end base %u is not its used idx %u", p, ring->base, u);
	if ((uint16_t)(ring->avail_idx - la) > ring->size)
		REJECT("%s: avail idx %u more than a ring ahead of %u", p, ring->avail_idx, la);
	/* The write-ahead part: entries published before the record said so. */
	for (uint16_t i = pub; i != u; i++) {
		uint32_t id = __atomic_load_n(&ring->used->ring[i & (ring->size - 1)].id,
					      __ATOMIC_RELAXED);

		if (id >= ring->size)
			REJECT("%s: used entry %u names head %u", p, i, id);
		r->bits[id / 64] &= ~(1ULL << (id % 64));
	}
	__atomic_store_n(&r->used_pub, u, __ATOMIC_RELEASE);
	set = bits_count(r, ring->size);
	if (set != (uint16_t)(la - u))
		REJECT("%s: %u heads recorded, the indexes say %u", p, set,
		       (unsigned)(uint16_t)(la - u));
	*n = set;
	*last_avail = la;
	return 1;
}

uint32_t sn_vqtx_rec_complete_all(struct sn_vqtx *q)
{
	const struct sn_vqtx_rec *r = q->rec;
	uint32_t n = 0;

	for (uint32_t id = 0; id <= q->rec_mask; id++) {
		if (!(r->bits[id / 64] & (1ULL << (id % 64))))
			continue;
		if (sn_vring_hold(q->vr, id) == 0 && sn_vring_used_put(q->vr, id, 0) == 0)
			n++;
	}
	if (n) {
		q->dirty = true;
		ctr_set(&q->st.recovered_after_restart, q->st.recovered_after_restart + n);
	}
	return n;
}

void sn_vqtx_rec_begin(struct sn_vqtx *q, const struct sn_vqtx_rec_ring *ring,
		       uint16_t last_avail, uint16_t used_pub, bool keep_bits)
{
	struct sn_vqtx_rec *r = q->rec;

	if (!r)
		return;
	/* magic 0 while the header changes: a crash here leaves no record */
	__atomic_store_n(&r->magic, 0, __ATOMIC_RELEASE);
	r->version = REC_VERSION;
	r->vring = q->vring;
	r->size = ring->size;
	memcpy(r->gpa, ring->gpa, sizeof(r->gpa));
	if (!keep_bits)
		memset(r->bits, 0, sizeof(r->bits));
	r->last_avail = last_avail;
	r->used_pub = used_pub;
	q->rec_mask = ring->size - 1;
	__atomic_store_n(&r->magic, REC_MAGIC, __ATOMIC_RELEASE);
}

void sn_vqtx_rec_published(struct sn_vqtx *q, uint16_t from, uint16_t to)
{
	struct sn_vqtx_rec *r = q->rec;
	/* The ring's current address: a memory hotplug may have moved the
	 * rings to a newer map and unmapped the one the start used. */
	const struct sn_vring_used *used = sn_vring_used_ring(q->vr);

	for (uint16_t i = from; i != to; i++) {
		uint32_t id = __atomic_load_n(&used->ring[i & q->rec_mask].id,
					      __ATOMIC_RELAXED) & q->rec_mask;

		r->bits[id / 64] &= ~(1ULL << (id % 64));
	}
	/* Release: the bits are clear before used_pub says so. */
	__atomic_store_n(&r->used_pub, to, __ATOMIC_RELEASE);
}
