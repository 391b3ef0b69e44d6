/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_vhost_msg.c — libFuzzer target for our side of the vhost-user
 * message flow: the device callbacks of port/sn_port_vhost.c
 * (new_connection, new_device, destroy_device, destroy_connection,
 * vring_state_changed) and the message hooks of sn_port_memhook.c and
 * sn_port_migrate.c (the memory-table check, remaps of the deferred TX
 * queues, the dirty-log pause around SET_LOG_BASE, SEND_RARP).
 *
 * Debian's librte_vhost is not instrumented, and the library itself is
 * not linked: this covers our code only. The callbacks and hooks run
 * against the fake device API of fz_vhost.c (four devices, memfd guest
 * memory, vrings inside it) and a registry built here as sn_port.c
 * builds it (ports found by socket path, the vid -> port hook table):
 * three ports, one deferred with two queue pairs, one immediate, one
 * deferred with one. The input is a program of (operation, fields):
 * connect, start, stop and close a device (its socket path one of the
 * ports' or an unknown one; its vring count, memory table and ring
 * addresses chosen by the input, so starts can fail), enable and disable
 * vrings (any index), and messages through the library's order (pre
 * hook, the table applied, post hook) in the library's message context
 * (struct sn_vumsg: the message, then its fds): SET_MEM_TABLE (valid,
 * changed, sizes and offsets from the input, overlapping, short, wrong
 * region or fd counts, each region's fd a guest file, an eventfd, a
 * read-only or write-sealed file, or none), SET_LOG_BASE and
 * SET_INFLIGHT_FD (sizes, offsets, payload size and fds from the input,
 * each fd of the same kinds), SEND_RARP (any
 * size and MAC), any other request code. The worker index of every queue
 * is "gone", so a device stop tears its queues down on this thread (no
 * worker to wait for).
 *
 * Invariants (abort on failure): no crash; a SET_MEM_TABLE the pre hook
 * lets through is one DPDK 22.11 either refuses before unmapping the
 * current table (fd or region count) or maps in full: every region's fd
 * mmaps read-write shared up to mmap_offset + memory_size and the file
 * has a byte at the region's end (pread, so a miss fails instead of
 * faulting), no two regions overlap in guest-physical memory; a
 * SET_LOG_BASE or SET_INFLIGHT_FD it lets through has the library's
 * payload size and one fd, and maps as the library maps it either not at
 * all or with a byte of the file at its end (and, for SET_INFLIGHT_FD,
 * holds the desc_num the library writes for each of num_queues queues); after an
 * applied table our own map of the library's table (sn_vqtx_gmap_new, as
 * a remap makes it) has the same regions, and bytes the guest writes at
 * each region's ends read the same through it; a refused table leaves
 * the device's table as it was (still mapped the same way), has its fds
 * closed by the hook and is counted once on the port (mem_table_rejected,
 * as is a refused SET_LOG_BASE or SET_INFLIGHT_FD);
 * every connection to a port has the message hooks (also a second one
 * while the port runs another device); the hook table has at most one
 * entry per vid and per port; up =
 * running and vrings 0 and 1 enabled; a port not running has no TX queue
 * started and its queues' rings stopped; a running port's vid is a device
 * whose path is the port's; a started TX queue's ring is live;
 * rarp_learned = announce callbacks that succeeded <= rarp_received; at
 * the end, after every device is stopped and closed, the hook table is
 * empty and no guest memory map of ours is left (mem_maps 0); the queues
 * free (ASan). The EAL's runtime directory is removed at exit.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <rte_eal.h>
#include <rte_lcore.h>

#include "fz_vhost.h"
#include "sn_port_internal.h"
#include "sn_port_vumsg.h"
#include "sn_vqtx.h"

#define FAIL(...) do { fprintf(stderr, "fuzz_vhost_msg: " __VA_ARGS__); abort(); } while (0)

#define NPORTS 3
#define SLOTS  4

unsigned sn_config_port_slots = SLOTS;
struct sn_ports *sn_ports_global;

struct input {
	const uint8_t *p;
	size_t n;
};

static uint8_t take(struct input *in)
{
	if (in->n == 0)
		return 0;
	in->n--;
	return *in->p++;
}

static uint64_t take_n(struct input *in, int bytes)
{
	uint64_t v = 0;

	for (int i = 0; i < bytes; i++)
		v |= (uint64_t)take(in) << (8 * i);
	return v;
}

static const char *const paths[NPORTS + 1] = { "/fz/p0.sock", "/fz/p1.sock", "/fz/p2.sock",
					       "/fz/unknown.sock" };

static struct {
	struct sn_ports reg;
	struct sn_port *port[NPORTS];
	struct sn_port *slot[SLOTS];
	struct { int vid; struct sn_port *p; } hook[SLOTS];
	bool connected[FZ_VHOST_DEVS];
	/* The library's RUNNING flag: new_device returned 0 and no
	 * destroy_device since (it calls new_device only without it, and
	 * destroy_device only with it). */
	bool running[FZ_VHOST_DEVS];
	uint64_t announce_ok, announce_calls, bad_tables[NPORTS];
	int announce_rc;
} S;

/* Region fds that are not guest files (region_fd()), made once. */
static struct {
	int eventfd, sealed;
} S_fds;

static int announce(void *arg, const struct sn_port *p, const uint8_t mac[6])
{
	(void)arg;
	(void)p;
	(void)mac;
	S.announce_calls++;
	if (S.announce_rc == 0)
		S.announce_ok++;
	return S.announce_rc;
}

static char eal_dir[128];

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

/* The EAL's runtime directory of this process goes with it. */
static void eal_dir_remove(void)
{
	rte_eal_cleanup();
	nftw(eal_dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char prefix[64];
	char *eal[] = { "fuzz_vhost_msg", "--no-huge", "-m", "64", "--no-pci", "--no-shconf",
			"--no-telemetry", "-l", "0", "--log-level=error", "--file-prefix", prefix };
	cpu_set_t cpus;

	(void)argc;
	(void)argv;
	snprintf(prefix, sizeof(prefix), "sn-fuzz-%d", (int)getpid());
	CPU_ZERO(&cpus);
	sched_getaffinity(0, sizeof(cpus), &cpus);
	if (rte_eal_init((int)(sizeof(eal) / sizeof(eal[0])), eal) < 0)
		FAIL("rte_eal_init failed\n");
	sched_setaffinity(0, sizeof(cpus), &cpus);
	snprintf(eal_dir, sizeof(eal_dir), "%s", rte_eal_get_runtime_dir());
	atexit(eal_dir_remove);
	S_fds.eventfd = eventfd(0, EFD_CLOEXEC);
	S_fds.sealed = memfd_create("fz-sealed", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (S_fds.eventfd < 0 || S_fds.sealed < 0 || ftruncate(S_fds.sealed, FZ_VHOST_FD_SIZE) ||
	    fcntl(S_fds.sealed, F_ADD_SEALS, F_SEAL_WRITE))
		FAIL("region fds: %s\n", strerror(errno));
	for (int v = 0; v < FZ_VHOST_DEVS; v++)
		if (fz_vhost_dev_init(v, paths[0]))
			FAIL("fake device %d\n", v);
	/* No worker runs: a stop tears the queue down on the calling thread. */
	sn_vqtx_worker_enter(0);
	sn_vqtx_worker_exit(0);
	return 0;
}

static struct sn_port *port_new(unsigned i, unsigned nq, bool deferred)
{
	struct sn_port *p = aligned_alloc(RTE_CACHE_LINE_SIZE, sizeof(*p));

	if (!p)
		FAIL("alloc\n");
	memset(p, 0, sizeof(*p));
	snprintf(p->name, sizeof(p->name), "p%u", i);
	snprintf(p->path, sizeof(p->path), "%s", paths[i]);
	p->type = SN_PORT_VHOST;
	p->slot = (uint16_t)i;
	p->nq = (uint16_t)nq;
	p->vid = -1;
	p->uplink_vid = -1;
	for (unsigned q = 0; deferred && q < nq; q++) {
		p->q[q].vq = sn_vqtx_create(q ? 0 : 500, (uint16_t)q);
		if (!p->q[q].vq)
			FAIL("sn_vqtx_create\n");
	}
	p->vq = p->q[0].vq;
	return p;
}

static void registry_new(void)
{
	memset(&S, 0, sizeof(S));
	pthread_mutex_init(&S.reg.lock, NULL);
	pthread_mutex_init(&S.reg.hook_lock, NULL);
	S.reg.slot = S.slot;
	S.reg.hook = (void *)S.hook;
	S.port[0] = port_new(0, 2, true);
	S.port[1] = port_new(1, 1, false);
	S.port[2] = port_new(2, 1, true);
	for (unsigned i = 0; i < NPORTS; i++)
		S.slot[i] = S.port[i];
	sn_ports_global = &S.reg;
	sn_ports_set_announce(&S.reg, announce, NULL);
}

static void registry_free(void)
{
	for (unsigned i = 0; i < NPORTS; i++) {
		for (unsigned q = 0; q < S.port[i]->nq; q++)
			sn_vqtx_free(S.port[i]->q[q].vq);
		sn_vqtx_gmap_free(S.port[i]->rxmap);
		free(S.port[i]);
	}
	sn_ports_global = NULL;
	pthread_mutex_destroy(&S.reg.lock);
	pthread_mutex_destroy(&S.reg.hook_lock);
}

/* ---- The fake devices ---- */

static void device_config(int vid, struct input *in)
{
	struct fz_vhost_dev *d = &fz_vhost_devs[vid];
	uint8_t c = take(in), r = take(in);

	snprintf(d->ifname, sizeof(d->ifname), "%s", paths[c & 3]);
	d->features = (c & 4 ? 1ULL << 32 : 0) | (c & 8 ? 1ULL << 26 : 0) |
		      (c >= 0xf0 ? 1ULL << 29 : 0);       /* EVENT_IDX: refused */
	d->nvrings = (uint16_t)(2u << ((c >> 4) & 3));   /* 2, 4, 8, 16 */
	if (d->nvrings > FZ_VHOST_VRINGS)
		d->nvrings = FZ_VHOST_VRINGS;
	d->nregions = 2;
	d->reg[0] = (struct fz_vhost_region){ 0, 0x10000, 0x7f0000000000, 0, 0 };
	d->reg[1] = (struct fz_vhost_region){ 0x10000, 0x10000, 0x7f0000010000, 1, 0 };
	if (r & 1)   /* rings' region elsewhere or missing */
		d->reg[0].gpa = r & 2 ? 0x40000 : 0x20000;
	for (int v = 0; v < FZ_VHOST_VRINGS; v++) {
		d->vr[v].size = 16u << (r >> 6);
		d->vr[v].desc = 0x1000u * (uint32_t)v;
		d->vr[v].avail = 0x1000u * (uint32_t)v + 0x400;
		d->vr[v].used = 0x1000u * (uint32_t)v + 0x800;
		d->vr[v].last_avail = d->vr[v].last_used = 0;
		d->vr[v].wild = (r & 4) && v == 1;
	}
	for (int f = 0; f < FZ_VHOST_FDS; f++)
		memset(d->guest[f], 0, 0x10000);
	if (fz_vhost_set_mem(vid))
		FAIL("fake table\n");
	d->ext = NULL;
}

static int vid_of(struct input *in)
{
	return take(in) % FZ_VHOST_DEVS;
}

/* The region fds of a SET_MEM_TABLE: each a new descriptor, as the
 * library receives them (the message owns them). Kinds: 0-3 the device's
 * guest file k, 4 an eventfd (no file), 5 guest file 0 opened read-only,
 * 6 a write-sealed memfd, 7 no fd (-1). */
static int region_fd(int vid, uint8_t kind)
{
	struct fz_vhost_dev *d = &fz_vhost_devs[vid];
	char path[64];
	int fd;

	switch (kind & 7) {
	case 4:
		fd = dup(S_fds.eventfd);
		break;
	case 5:
		snprintf(path, sizeof(path), "/proc/self/fd/%d", d->fd[0]);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		break;
	case 6:
		fd = dup(S_fds.sealed);
		break;
	case 7:
		return -1;
	default:
		fd = dup(d->fd[kind & 3]);
		break;
	}
	if (fd < 0)
		FAIL("region fd: %s\n", strerror(errno));
	return fd;
}

/* The device file fd is (same inode), or -1. */
static int file_of(int vid, int fd)
{
	struct stat a, b;

	if (fd < 0 || fstat(fd, &a))
		return -1;
	for (int k = 0; k < FZ_VHOST_FDS; k++)
		if (!fstat(fz_vhost_devs[vid].fd[k], &b) && a.st_dev == b.st_dev &&
		    a.st_ino == b.st_ino)
			return k;
	return -1;
}

/* What DPDK 22.11's vhost_user_set_mem_table does with a table the pre
 * hook let through, done for real on its fds: refuse it before unmapping
 * (fd count, more than 8 regions), or else drop the current table and map
 * each region's file read-write shared from offset 0 up to its end. The
 * table must map, and every byte of every region must be backed by its
 * file (a page past the end faults whoever touches it): read through
 * pread, which fails instead of faulting. Returns false for a refusal
 * before unmapping; aborts on a table that would fail or fault after it. */
static bool library_maps(int vid, const struct sn_vumsg *m)
{
	struct fz_vhost_dev *d = &fz_vhost_devs[vid];
	uint32_t n = m->payload.memory.nregions;

	if ((uint32_t)m->fd_num != n || n > 8)
		return false;
	if (m->size < 8 + 32 * n)
		FAIL("a SET_MEM_TABLE shorter than its %u regions passed the pre hook\n", n);
	for (uint32_t i = 0; i < n; i++) {
		struct sn_vumsg_region r;
		uint64_t end;
		unsigned char b;
		void *a;
		int k;

		memcpy(&r, &m->payload.memory.regions[i], sizeof(r));
		end = r.mmap_offset + r.memory_size;
		if (r.memory_size == 0 || end < r.mmap_offset)
			FAIL("region %u: size %#llx offset %#llx passed the pre hook\n", i,
			     (unsigned long long)r.memory_size, (unsigned long long)r.mmap_offset);
		a = mmap(NULL, end, PROT_READ | PROT_WRITE, MAP_SHARED, m->fds[i], 0);
		if (a == MAP_FAILED)
			FAIL("region %u: the library cannot map fd %d (%s) after unmapping the "
			     "current table\n", i, m->fds[i], strerror(errno));
		munmap(a, end);
		if (pread(m->fds[i], &b, 1, (off_t)(end - 1)) != 1)
			FAIL("region %u: offset %#llx + size %#llx reaches past the end of its "
			     "file (the library faults on it)\n", i,
			     (unsigned long long)r.mmap_offset, (unsigned long long)r.memory_size);
		for (uint32_t j = 0; j < i; j++)
			if (r.guest_phys_addr < d->reg[j].gpa + d->reg[j].size &&
			    d->reg[j].gpa < r.guest_phys_addr + r.memory_size)
				FAIL("regions %u and %u overlap in guest-physical memory\n", j, i);
		if ((k = file_of(vid, m->fds[i])) < 0)
			FAIL("region %u: a mappable file not the guest's passed\n", i);
		d->reg[i] = (struct fz_vhost_region){ r.guest_phys_addr, r.memory_size,
						      r.userspace_addr, (uint32_t)k,
						      r.mmap_offset };
	}
	d->nregions = n;
	if (fz_vhost_set_mem(vid))
		FAIL("the fake library failed a table the real one maps\n");
	return true;
}

/* What DPDK 22.11 does with a SET_LOG_BASE (mmap(0, mmap_size +
 * mmap_offset, .., fd, 0)) or SET_INFLIGHT_FD (mmap(0, mmap_size, .., fd,
 * mmap_offset)) the pre hook let through, done for real on its fd: refuse
 * a payload of the wrong size or fd count, or a map that fails (the
 * library answers a failure and keeps its state), else map it, and every
 * byte of the map must be backed by the file (the library writes it).
 * Returns false for a refusal; aborts on a map that would fault. */
static bool library_maps_fd(int vid, const struct sn_vumsg *m)
{
	uint64_t size = m->payload.log.mmap_size, off = m->payload.log.mmap_offset, end;
	unsigned char b;
	void *a;

	if (m->fd_num != 1 || m->size != (m->request == 6 ? 16u : 24u))
		FAIL("request %u: size %u, %d fds passed the pre hook\n", m->request, m->size,
		     m->fd_num);
	if (size == 0 || off >= -size)
		FAIL("request %u: size %#llx offset %#llx passed the pre hook\n", m->request,
		     (unsigned long long)size, (unsigned long long)off);
	if (m->request == 32 && m->payload.inflight.num_queues) {
		uint16_t nq = m->payload.inflight.num_queues;
		uint64_t features = 0;

		rte_vhost_get_negotiated_features(vid, &features);
		if (nq > 256 || (nq - 1u) * sn_vumsg_inflight_pervq(m->payload.inflight.queue_size,
								     features & (1ull << 34)) + 12 > size)
			FAIL("SET_INFLIGHT_FD: %u queues of %u descriptors passed the pre hook with "
			     "mmap_size %#llx (the library writes past its map)\n", nq,
			     m->payload.inflight.queue_size, (unsigned long long)size);
	}
	end = off + size;
	if (m->request == 6)
		a = mmap(NULL, end, PROT_READ | PROT_WRITE, MAP_SHARED, m->fds[0], 0);
	else
		a = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, m->fds[0], (off_t)off);
	if (a == MAP_FAILED)
		return false;
	munmap(a, m->request == 6 ? end : size);
	if (pread(m->fds[0], &b, 1, (off_t)(end - 1)) != 1)
		FAIL("request %u: offset %#llx + size %#llx reaches past the end of its file "
		     "(the library faults on it)\n", m->request, (unsigned long long)off,
		     (unsigned long long)size);
	return true;
}

/* Our own view of guest memory made from the library's table (what
 * sn_vqtx_remap hands a started queue) equals the table the library
 * applied: same regions, and a byte the guest writes at each region's
 * start and end reads the same through our mapping. */
static void check_gmap(int vid)
{
	struct fz_vhost_dev *d = &fz_vhost_devs[vid];
	struct sn_vqtx_gmap *g = sn_vqtx_gmap_new(vid);
	const struct sn_vring_mem *mem;

	if (!g)
		FAIL("no map of an applied table of %u regions: %s\n", d->nregions,
		     strerror(errno));
	mem = sn_vqtx_gmap_mem(g);
	if (mem->nregions != d->nregions)
		FAIL("our map has %u regions, the library %u\n", mem->nregions, d->nregions);
	for (uint32_t i = 0; i < d->nregions; i++) {
		const struct sn_vring_region *r = &mem->regions[i];
		uint64_t at[2] = { 0, d->reg[i].size - 1 };

		if (r->guest_phys_addr != d->reg[i].gpa || r->size != d->reg[i].size)
			FAIL("our region %u [%#llx +%#llx], the library's [%#llx +%#llx]\n", i,
			     (unsigned long long)r->guest_phys_addr, (unsigned long long)r->size,
			     (unsigned long long)d->reg[i].gpa, (unsigned long long)d->reg[i].size);
		for (int e = 0; e < 2; e++) {
			unsigned char *guest = d->guest[d->reg[i].file] + d->reg[i].off + at[e];
			unsigned char v = (unsigned char)(0x5a + i + e), *ours;

			unsigned char old = *guest;

			*guest = v;
			ours = (unsigned char *)(uintptr_t)(r->host_user_addr + at[e]);
			if (*ours != v)
				FAIL("region %u byte %#llx: the guest wrote %#x, our map reads %#x\n",
				     i, (unsigned long long)at[e], v, *ours);
			*guest = old;
		}
	}
	sn_vqtx_gmap_free(g);
}

static struct sn_port *hooked(int vid)
{
	for (unsigned i = 0; i < SLOTS; i++)
		if (S.hook[i].p && S.hook[i].vid == vid)
			return S.hook[i].p;
	return NULL;
}

/* The port a refused table of vid counts on: its hook entry's, or else a
 * hooked port on the device's socket path (a second connection to a
 * running port has hooks but no entry). */
static struct sn_port *counted_on(int vid)
{
	struct sn_port *p = hooked(vid);

	for (unsigned i = 0; !p && i < SLOTS; i++)
		if (S.hook[i].p && !strcmp(S.hook[i].p->path, fz_vhost_devs[vid].ifname))
			p = S.hook[i].p;
	return p;
}

static void message(struct input *in)
{
	int vid = vid_of(in);
	struct fz_vhost_dev *d = &fz_vhost_devs[vid];
	struct sn_vumsg m;
	uint8_t kind = take(in);
	uint32_t req, size, n = 0;
	struct sn_port *hp = counted_on(vid);
	struct fz_vhost_region before[FZ_VHOST_REGIONS];
	uint32_t nbefore = d->nregions;
	int fds[SN_VUMSG_MAX_REGIONS], nfds = 0;
	enum rte_vhost_msg_result rc;

	memset(&m, 0, sizeof(m));
	memcpy(before, d->reg, sizeof(before));
	switch (kind % 5) {
	case 0: case 1:   /* SET_MEM_TABLE */
		req = 5;
		n = take(in) % 10;
		m.payload.memory.nregions = n;
		for (uint32_t i = 0; i < n && i < SN_VUMSG_MAX_REGIONS; i++) {
			struct sn_vumsg_region r;
			uint8_t c = take(in);

			r.guest_phys_addr = (uint64_t)(c & 7) * 0x10000u;
			r.memory_size = c & 0x80 ? take_n(in, 8) : 0x10000u >> ((c >> 3) & 3);
			r.userspace_addr = 0x7f0000000000 + r.guest_phys_addr;
			r.mmap_offset = c & 0x40 ? take_n(in, 8) : 0;
			memcpy(&m.payload.memory.regions[i], &r, sizeof(r));
		}
		/* One fd per region, its kind from the input, unless the count
		 * is changed too. */
		nfds = (int)(n < SN_VUMSG_MAX_REGIONS ? n : SN_VUMSG_MAX_REGIONS);
		if (kind & 0x40)
			nfds = take(in) % (SN_VUMSG_MAX_REGIONS + 1);
		for (int i = 0; i < nfds; i++)
			fds[i] = m.fds[i] = region_fd(vid, take(in));
		m.fd_num = nfds;
		size = kind & 0x80 ? take(in) : 8 + 32 * (n < 8 ? n : 8);
		break;
	case 2: {  /* SET_LOG_BASE, or SET_INFLIGHT_FD: one fd the library maps */
		uint8_t c = take(in);

		req = kind & 0x20 ? 32 : 6;
		m.payload.log.mmap_size = c & 0x80 ? take_n(in, 8) : 0x1000u << (c & 7);
		m.payload.log.mmap_offset = c & 0x40 ? take_n(in, 8) : (c & 0x20 ? 0x1000u : 0);
		if (req == 32 && (c & 0x10)) {
			m.payload.inflight.num_queues = (uint16_t)take_n(in, 2);
			m.payload.inflight.queue_size = (uint16_t)take_n(in, 2);
		}
		nfds = kind & 0x40 ? take(in) % 3 : 1;
		for (int i = 0; i < nfds; i++)
			fds[i] = m.fds[i] = region_fd(vid, take(in));
		m.fd_num = nfds;
		size = kind & 0x80 ? take(in) % 32 : (req == 6 ? 16 : 24);
		break;
	}
	case 3:
		req = 19;  /* SEND_RARP */
		size = kind & 0x80 ? take(in) % 16 : 8;
		for (int i = 0; i < 8; i++)
			m.payload.bytes[i] = take(in);
		S.announce_rc = kind & 0x40 ? -ENOENT : 0;
		break;
	default:
		req = take(in);
		size = take(in) % 64;
		for (uint32_t i = 0; i < size; i++)
			m.payload.bytes[i] = take(in);
		break;
	}
	m.request = req;
	m.flags = 1;
	m.size = size;
	if (!d->ext) {   /* the library calls no hook of a device without them */
		for (int i = 0; i < nfds; i++)
			if (fds[i] >= 0)
				close(fds[i]);
		return;
	}
	rc = d->ext->pre_msg_handle(vid, &m);
	if (req == 31) {
		/* GET_INFLIGHT_FD: through only with the library's payload
		 * size, 1..16 queues and rings of 1..32768 descriptors */
		const uint16_t nq = m.payload.inflight.num_queues, qs = m.payload.inflight.queue_size;
		const bool ok = size == 24 && nq >= 1 && nq <= SN_VUMSG_INFLIGHT_QUEUES_MAX &&
				qs >= 1 && qs <= SN_VUMSG_INFLIGHT_QSIZE_MAX;

		if (rc != (ok ? RTE_VHOST_MSG_RESULT_NOT_HANDLED : RTE_VHOST_MSG_RESULT_ERR))
			FAIL("GET_INFLIGHT_FD %u x %u (size %u): pre hook answered %d\n", nq, qs,
			     size, (int)rc);
		if (rc == RTE_VHOST_MSG_RESULT_ERR && m.fd_num != 0)
			FAIL("refused GET_INFLIGHT_FD: fd_num %d left\n", m.fd_num);
		if (rc == RTE_VHOST_MSG_RESULT_ERR && hp)
			S.bad_tables[hp->slot]++;   /* counted in mem_table_rejected */
		for (int i = 0; i < nfds; i++)
			if (fds[i] >= 0 && rc != RTE_VHOST_MSG_RESULT_ERR)
				close(fds[i]);
		return;
	}
	if (rc == RTE_VHOST_MSG_RESULT_ERR && (req == 5 || req == 6 || req == 32)) {
		/* Refused: the library neither applies it nor calls the post
		 * hook, and leaves closing the fds to the hook. */
		if (m.fd_num != 0)
			FAIL("refused table: fd_num %d left\n", m.fd_num);
		for (int i = 0; i < nfds; i++)
			if (fds[i] >= 0 && (fcntl(fds[i], F_GETFD) != -1 || errno != EBADF))
				FAIL("refused table: fd %d of region %d left open\n", fds[i], i);
		if (hp)
			S.bad_tables[hp->slot]++;
		if (d->nregions != nbefore || memcmp(before, d->reg, sizeof(before)))
			FAIL("refused table changed the device's table\n");
		if (d->nregions)
			check_gmap(vid);   /* the current table still maps */
		return;
	}
	if (rc != RTE_VHOST_MSG_RESULT_NOT_HANDLED)
		FAIL("pre hook answered %d to request %u\n", (int)rc, req);
	if (req == 5) {
		bool applied = library_maps(vid, &m);

		for (int i = 0; i < nfds; i++)   /* the library's now, or closed by it */
			if (fds[i] >= 0)
				close(fds[i]);
		if (!applied)
			return;   /* refused by the library: no post hook */
	}
	if (req == 6 || req == 32) {
		bool applied = library_maps_fd(vid, &m);

		for (int i = 0; i < nfds; i++)
			if (fds[i] >= 0)
				close(fds[i]);
		if (!applied)
			return;
	}
	if (d->ext->post_msg_handle(vid, &m) != RTE_VHOST_MSG_RESULT_NOT_HANDLED)
		FAIL("post hook handled request %u\n", req);
	if (req == 5)
		check_gmap(vid);
}

/* ---- Invariants ---- */

static void check(void)
{
	for (int v = 0; v < FZ_VHOST_DEVS; v++)
		for (unsigned i = 0; S.connected[v] && i < NPORTS; i++)
			if (!strcmp(fz_vhost_devs[v].ifname, S.port[i]->path) && !fz_vhost_devs[v].ext)
				FAIL("vid %d of port %u has no message hooks (its tables go unchecked)\n",
				     v, i);
	for (unsigned i = 0; i < SLOTS; i++)
		for (unsigned j = i + 1; j < SLOTS; j++)
			if (S.hook[i].p && S.hook[j].p &&
			    (S.hook[i].vid == S.hook[j].vid || S.hook[i].p == S.hook[j].p))
				FAIL("hook[] entries %u and %u share a vid or a port\n", i, j);
	for (unsigned i = 0; i < NPORTS; i++) {
		struct sn_port *p = S.port[i];
		bool up = p->running && (p->vring_on & 3u) == 3u;

		if (p->up != up)
			FAIL("port %u: up %u, running %u, vrings %#x\n", i, p->up, p->running,
			     p->vring_on);
		if (p->txq_started >> p->nq)
			FAIL("port %u: started queue beyond nq\n", i);
		if (!p->running && (p->txq_started || p->txq_ready || p->rxview_on))
			FAIL("port %u: not running with queues started %#x ready %#x view %u\n", i,
			     p->txq_started, p->txq_ready, p->rxview_on);
		if (p->running && (p->vid < 0 || p->vid >= FZ_VHOST_DEVS ||
				   strcmp(fz_vhost_devs[p->vid].ifname, p->path)))
			FAIL("port %u: running on vid %d of another path\n", i, p->vid);
		for (unsigned q = 0; q < p->nq; q++) {
			bool live = p->q[q].vq && sn_vqtx_ring_size(p->q[q].vq) != 0;

			if (!!(p->txq_started & (1u << q)) != live)
				FAIL("port %u queue %u: started %u, ring live %u\n", i, q,
				     !!(p->txq_started & (1u << q)), live);
		}
		if (p->rarp_learned > p->rarp_received)
			FAIL("port %u: rarp learned > received\n", i);
		if (p->mem_table_rejected != S.bad_tables[i])
			FAIL("port %u: mem_table_rejected %llu, expected %llu\n", i,
			     (unsigned long long)p->mem_table_rejected,
			     (unsigned long long)S.bad_tables[i]);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = { data, size };
	const struct rte_vhost_device_ops *ops = &sn_port_vhost_ops;
	uint32_t steps = 0;
	uint64_t learned = 0;

	registry_new();
	for (int v = 0; v < FZ_VHOST_DEVS; v++) {
		struct input none = { NULL, 0 };

		device_config(v, &none);
	}
	while (in.n && steps++ < 256) {
		uint8_t op = take(&in);
		int vid;

		switch (op % 8) {
		case 0:   /* a front-end connects: its device is set up anew */
			vid = vid_of(&in);
			if (S.connected[vid])
				break;
			device_config(vid, &in);
			/* Refused (-1), the library closes the connection at once,
			 * without destroy_connection. */
			S.connected[vid] = ops->new_connection(vid) == 0;
			if (!S.connected[vid])
				fz_vhost_devs[vid].ext = NULL;
			break;
		case 1: case 2:   /* the device is ready */
			vid = vid_of(&in);
			if (S.connected[vid] && !S.running[vid])
				S.running[vid] = ops->new_device(vid) == 0;
			break;
		case 3:
			vid = vid_of(&in);
			if (S.running[vid])
				ops->destroy_device(vid);
			S.running[vid] = false;
			break;
		case 4:
			vid = vid_of(&in);
			if (S.connected[vid]) {
				if (S.running[vid])
					ops->destroy_device(vid);
				S.running[vid] = false;
				ops->destroy_connection(vid);
				fz_vhost_devs[vid].ext = NULL;
				S.connected[vid] = false;
			}
			break;
		case 5: {
			uint16_t q = take(&in);

			vid = vid_of(&in);
			if (S.connected[vid])
				ops->vring_state_changed(vid, q % 40, op & 0x80 ? 0 : 1);
			break;
		}
		default:
			message(&in);
			break;
		}
		check();
	}
	for (int v = 0; v < FZ_VHOST_DEVS; v++) {
		if (!S.connected[v])
			continue;
		if (S.running[v])
			ops->destroy_device(v);
		S.running[v] = false;
		ops->destroy_connection(v);
		fz_vhost_devs[v].ext = NULL;
		S.connected[v] = false;
	}
	check();
	for (unsigned i = 0; i < SLOTS; i++)
		if (S.hook[i].p)
			FAIL("hook[%u] left for vid %d\n", i, S.hook[i].vid);
	for (unsigned i = 0; i < NPORTS; i++) {
		learned += S.port[i]->rarp_learned;
		for (unsigned q = 0; q < S.port[i]->nq; q++) {
			struct sn_vqtx_stats st;

			if (!S.port[i]->q[q].vq)
				continue;
			sn_vqtx_stats_read(S.port[i]->q[q].vq, &st);
			if (st.mem_maps)
				FAIL("port %u queue %u: %llu guest memory maps left\n", i, q,
				     (unsigned long long)st.mem_maps);
		}
	}
	if (getenv("FUZZ_VHOST_MSG_VERBOSE"))   /* what one input did (seed checks) */
		for (unsigned i = 0; i < NPORTS; i++) {
			struct sn_vqtx_stats st = { 0 };

			if (S.port[i]->vq)
				sn_vqtx_stats_read(S.port[i]->vq, &st);
			fprintf(stderr, "fuzz_vhost_msg: port %u: rarp %llu/%llu tables refused %llu "
				"remaps %llu stop waits %llu\n", i,
				(unsigned long long)S.port[i]->rarp_learned,
				(unsigned long long)S.port[i]->rarp_received,
				(unsigned long long)S.port[i]->mem_table_rejected,
				(unsigned long long)st.mem_remaps,
				(unsigned long long)st.stop_wait_us_max);
		}
	if (learned != S.announce_ok)
		FAIL("rarp_learned %llu, announce succeeded %llu\n", (unsigned long long)learned,
		     (unsigned long long)S.announce_ok);
	registry_free();
	return 0;
}
