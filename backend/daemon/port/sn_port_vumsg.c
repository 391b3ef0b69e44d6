/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_port_vumsg.c — the memory-table check of the pre-message hook
 * (sn_port_memhook.c).
 *
 * DPDK 22.11's vhost_user_set_mem_table() frees the current table before
 * it maps the new regions one by one, and maps each region file whole
 * (mmap_offset + memory_size rounded up to the file's block size) with
 * PROT_READ | PROT_WRITE, MAP_SHARED, checking nothing against the file.
 * So a table it cannot map (a region of size 0, an offset that wraps, an
 * fd that is not a mappable read-write file) fails with the old table
 * gone and the vrings' addresses pointing into it, and a region that
 * reaches past the end of its file maps fine and then faults (SIGBUS) in
 * whoever touches the pages beyond it: the library translating a ring,
 * the worker reading a frame. Both kill the daemon on a front-end's
 * word; this check refuses such a table before the library sees it.
 *
 * A region passes when its size is > 0, mmap_offset + memory_size,
 * guest_phys_addr + memory_size and userspace_addr + memory_size do not
 * wrap, guest_phys_addr, userspace_addr and mmap_offset are 4 KiB
 * aligned, its guest-physical range overlaps no other region's, and its fd
 * is a regular file (memfd, tmpfs, hugetlbfs) opened read-write, not
 * sealed against writes, at least mmap_offset + memory_size bytes long,
 * and mappable as the library maps it (a trial mmap of the same length,
 * flags and protection, unmapped at once: a file system may still refuse
 * a shared writable map of a file that passes every other test).
 * The message must carry 1..8 regions, the payload bytes for them and
 * one fd per region. A front-end that shrinks a file after the table was
 * applied is not caught here (doc/isolation.md).
 *
 * SET_LOG_BASE and SET_INFLIGHT_FD carry one fd the library maps shared
 * read-write with sizes from the message, checking nothing against the
 * file: the dirty log as mmap(0, mmap_size + mmap_offset, .., fd, 0),
 * written during a migration; the inflight area as mmap(0, mmap_size,
 * .., fd, mmap_offset), written at once (each queue's desc_num). A file
 * shorter than that faults (SIGBUS) in the writer. Either passes when
 * its payload is exactly the library's struct (16 and 24 bytes), it
 * carries one fd, mmap_size > 0, mmap_offset + mmap_size does not wrap
 * and the fd passes the region fd test above for that end. The library
 * then writes each queue's desc_num (bytes 10..11 of its area, areas of
 * sn_vumsg_inflight_pervq() bytes one after the other) for num_queues
 * queues, indexing its 256-entry queue array with each: a SET_INFLIGHT_FD
 * also needs num_queues <= 256 and the last queue's desc_num inside
 * mmap_size.
 *
 * GET_INFLIGHT_FD asks the library for an inflight area of num_queues
 * queues of queue_size descriptors: it creates a memfd of that size and
 * zeroes it on its one message thread, unchecked, so num_queues and
 * queue_size at 65535 make 64 GiB of shared memory (a front-end that
 * sends it blocks every port's vhost-user messages for minutes and can
 * exhaust the host's memory). It passes when its payload is the library's
 * struct, num_queues is 1..SN_VUMSG_INFLIGHT_QUEUES_MAX (a port's vrings)
 * and queue_size 1..SN_VUMSG_INFLIGHT_QSIZE_MAX: at most 16 MiB (packed
 * rings: 32 bytes per descriptor).
 */
#include "sn_port_vumsg.h"

#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

/* Regions start on pages in the guest, the front-end and the file (as
 * every front-end maps them): a ring or buffer address then has the same
 * alignment in our mappings as in the guest. */
#define PAGE 4096u

#ifndef F_GET_SEALS
#define F_GET_SEALS 1034
#endif
#ifndef F_SEAL_WRITE
#define F_SEAL_WRITE 0x0008
#endif
#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif

static const char *fd_bad(int fd, uint64_t end)
{
	struct stat st;
	int fl, seals;
	void *map;

	if (fd < 0 || fstat(fd, &st) != 0)
		return "fd";
	if (!S_ISREG(st.st_mode))
		return "fd type (not a regular file)";
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || (fl & O_ACCMODE) != O_RDWR)
		return "fd mode (not read-write)";
	seals = fcntl(fd, F_GET_SEALS);
	if (seals > 0 && (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE)))
		return "fd seals (write-sealed)";
	if (st.st_size < 0 || (uint64_t)st.st_size < end)
		return "mmap_offset + memory_size (beyond the end of the file)";
	/* The library's length: end rounded up to the file's block size. */
	if (st.st_blksize > 0)
		end = (end + (uint64_t)st.st_blksize - 1) / (uint64_t)st.st_blksize *
		      (uint64_t)st.st_blksize;
	if (end > SIZE_MAX)
		return "mmap_offset + memory_size (too large to map)";
	map = mmap(NULL, (size_t)end, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		return "fd (the file cannot be mapped shared read-write)";
	munmap(map, (size_t)end);
	return NULL;
}

/* See sn_port_vumsg.h. */
const char *sn_vumsg_mem_table_bad(const struct sn_vumsg *m, uint32_t *region)
{
	struct sn_vumsg_region r[SN_VUMSG_MAX_REGIONS];
	uint32_t n, size = m->size;
	int fd_num = m->fd_num;

	*region = 0;
	if (size < 8)
		return "size";
	n = m->payload.memory.nregions;
	if (n == 0 || n > SN_VUMSG_MAX_REGIONS)
		return "nregions";
	if (size < 8 + sizeof(r[0]) * n)
		return "size";               /* regions the message does not carry */
	if (fd_num != (int)n)
		return "fd count";
	memcpy(r, m->payload.memory.regions, sizeof(r[0]) * n);
	for (uint32_t i = 0; i < n; i++) {
		const char *why;

		*region = i;
		if (r[i].memory_size == 0)
			return "memory_size";
		if (r[i].mmap_offset >= -r[i].memory_size)
			return "mmap_offset";    /* mmap_offset + memory_size wraps */
		if (r[i].guest_phys_addr + r[i].memory_size < r[i].guest_phys_addr)
			return "guest_phys_addr";
		if (r[i].userspace_addr + r[i].memory_size < r[i].userspace_addr)
			return "userspace_addr";
		if ((r[i].guest_phys_addr | r[i].userspace_addr | r[i].mmap_offset) & (PAGE - 1))
			return "alignment (guest_phys_addr, userspace_addr, mmap_offset not 4 KiB aligned)";
		for (uint32_t j = 0; j < i; j++)
			if (r[i].guest_phys_addr < r[j].guest_phys_addr + r[j].memory_size &&
			    r[j].guest_phys_addr < r[i].guest_phys_addr + r[i].memory_size)
				return "guest_phys_addr (overlaps another region)";
		if ((why = fd_bad(m->fds[i], r[i].mmap_offset + r[i].memory_size)))
			return why;
	}
	return NULL;
}

/* See sn_port_vumsg.h. */
const char *sn_vumsg_fd_msg_bad(const struct sn_vumsg *m, bool packed)
{
	uint64_t size, off;

	if (m->request == SN_VUMSG_SET_LOG_BASE) {
		if (m->size != sizeof(m->payload.log))
			return "size";
		size = m->payload.log.mmap_size;
		off = m->payload.log.mmap_offset;
	} else if (m->request == SN_VUMSG_SET_INFLIGHT_FD) {
		if (m->size != sizeof(m->payload.inflight))
			return "size";
		size = m->payload.inflight.mmap_size;
		off = m->payload.inflight.mmap_offset;
	} else {
		return NULL;
	}
	if (m->fd_num != 1)
		return "fd count";
	if (size == 0)
		return "mmap_size";
	if (off >= -size)
		return "mmap_offset";        /* mmap_offset + mmap_size wraps */
	if (m->request == SN_VUMSG_SET_INFLIGHT_FD && m->payload.inflight.num_queues) {
		uint16_t nq = m->payload.inflight.num_queues;

		if (nq > 256)
			return "num_queues (more than the library's 256 queues)";
		if ((nq - 1u) * sn_vumsg_inflight_pervq(m->payload.inflight.queue_size, packed) +
		    12 > size)
			return "mmap_size (shorter than num_queues areas of queue_size)";
	}
	return fd_bad(m->fds[0], off + size);
}

/* See sn_port_vumsg.h. */
const char *sn_vumsg_get_inflight_bad(const struct sn_vumsg *m)
{
	if (m->request != SN_VUMSG_GET_INFLIGHT_FD)
		return NULL;
	if (m->size != sizeof(m->payload.inflight))
		return "size";
	if (m->payload.inflight.num_queues == 0 ||
	    m->payload.inflight.num_queues > SN_VUMSG_INFLIGHT_QUEUES_MAX)
		return "num_queues (a port has at most 16 vrings)";
	if (m->payload.inflight.queue_size == 0 ||
	    m->payload.inflight.queue_size > SN_VUMSG_INFLIGHT_QSIZE_MAX)
		return "queue_size (a virtio ring has at most 32768 descriptors)";
	return NULL;
}
