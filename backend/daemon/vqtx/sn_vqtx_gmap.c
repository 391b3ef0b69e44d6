/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_vqtx_gmap.c — our own MAP_SHARED mappings of a guest's memory
 * regions (sn_vqtx.h "Guest memory mapped by us"): the library may unmap
 * its own at a SET_MEM_TABLE while the device runs, ours stay until no
 * frame or ring uses them. sn_vqtx_remap() hands a new table to the
 * running queue's worker (sn_vqtx_take_map), which retires the older maps
 * once the frames popped through them are all freed.
 */
#include "sn_vqtx_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <rte_vhost.h>

#include "sn_log.h"

/* At most this many maps per queue (current + retained): a remap beyond
 * it is refused (sn_vqtx_remap -EBUSY) until older ones drain. */
#define SN_VQTX_MAPS_MAX 8u

void sn_vqtx_gmap_free(struct sn_vqtx_gmap *g)
{
	if (!g)
		return;
	for (uint32_t i = 0; i < g->nmap; i++)
		munmap(g->addr[i], g->len[i]);
	free(g);
}

/* Every map of a list (older links), newest first. */
void sn_vqtx_gmap_free_list(struct sn_vqtx_gmap *g)
{
	while (g) {
		struct sn_vqtx_gmap *o = g->older;

		sn_vqtx_gmap_free(g);
		g = o;
	}
}

struct sn_vqtx_gmap *sn_vqtx_gmap_new(int vid)
{
	struct rte_vhost_memory *mem = NULL;
	struct sn_vqtx_gmap *g = calloc(1, sizeof(*g));
	int err = EINVAL;

	if (!g) {
		errno = ENOMEM;
		return NULL;
	}
	if (rte_vhost_get_mem_table(vid, &mem) || mem->nregions > SN_VRING_MAX_REGIONS)
		goto fail;
	for (uint32_t i = 0; i < mem->nregions; i++) {
		const struct rte_vhost_mem_region *r = &mem->regions[i];
		uint64_t base = (uint64_t)(uintptr_t)r->mmap_addr, off;
		void *a;

		/* The library maps each region's file from offset 0 and puts
		 * the region at host_user_addr inside that mapping. */
		if (r->fd < 0 || base == 0 || r->host_user_addr < base)
			goto fail;
		off = r->host_user_addr - base;
		if (off > r->mmap_size || r->size > r->mmap_size - off)
			goto fail;
		a = mmap(NULL, r->mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
		if (a == MAP_FAILED) {
			err = errno;
			goto fail;
		}
		/* Guest RAM stays out of our core dumps (as the library's own
		 * mappings in later DPDK versions); advisory. */
		(void)madvise(a, r->mmap_size, MADV_DONTDUMP);
		g->addr[g->nmap] = a;
		g->len[g->nmap] = r->mmap_size;
		g->nmap++;
		g->lib_hva[i] = r->host_user_addr;
		g->uaddr[i] = r->guest_user_addr;
		g->mem.regions[i].guest_phys_addr = r->guest_phys_addr;
		g->mem.regions[i].size = r->size;
		g->mem.regions[i].host_user_addr = (uint64_t)(uintptr_t)a + off;
	}
	g->mem.nregions = mem->nregions;
	free(mem);
	return g;
fail:
	free(mem);
	sn_vqtx_gmap_free(g);
	errno = err;
	return NULL;
}

const struct sn_vring_mem *sn_vqtx_gmap_mem(const struct sn_vqtx_gmap *g)
{
	return &g->mem;
}

void sn_vqtx_gmap_lib_mem(const struct sn_vqtx_gmap *g, struct sn_vring_mem *out)
{
	*out = g->mem;
	for (uint32_t i = 0; i < g->mem.nregions; i++)
		out->regions[i].host_user_addr = g->lib_hva[i];
}

/* The guest-physical address of the library's host address p (len bytes
 * inside one region of g), or UINT64_MAX. */
uint64_t sn_vqtx_gmap_lib_gpa(const struct sn_vqtx_gmap *g, const void *p, uint64_t len)
{
	uint64_t a = (uint64_t)(uintptr_t)p;

	for (uint32_t i = 0; i < g->mem.nregions; i++) {
		uint64_t lo = g->lib_hva[i], sz = g->mem.regions[i].size;

		if (a >= lo && a - lo <= sz && len <= sz - (a - lo))
			return g->mem.regions[i].guest_phys_addr + (a - lo);
	}
	return UINT64_MAX;
}

/* [gpa, gpa + len) in our mapping g, or NULL. */
static void *gmap_gpa(const struct sn_vqtx_gmap *g, uint64_t gpa, uint64_t len)
{
	return gpa == UINT64_MAX ? NULL : sn_vring_mem_hva(&g->mem, gpa, len);
}

/* Our regions are the library's (same guest-physical address and size),
 * mapped elsewhere: through the guest-physical address. */
void *sn_vqtx_gmap_xlate(const struct sn_vqtx_gmap *g, const void *p, uint64_t len)
{
	return gmap_gpa(g, sn_vqtx_gmap_lib_gpa(g, p, len), len);
}

void sn_vqtx_note_table(struct sn_vqtx *q, const struct sn_vqtx_gmap *g)
{
	struct sn_vqtx_gmap_id *t = &q->last_tab;

	memset(t, 0, sizeof(*t));
	for (uint32_t i = 0; g && i < g->mem.nregions; i++) {
		t->gpa[i] = g->mem.regions[i].guest_phys_addr;
		t->size[i] = g->mem.regions[i].size;
		t->lib_hva[i] = g->lib_hva[i];
		t->uaddr[i] = g->uaddr[i];
		t->n = i + 1;
	}
}

/* The library's current table of vid is the last one this thread mapped
 * (the library skips a SET_MEM_TABLE whose regions keep guest-physical
 * address, size and front-end address; the hook still runs). */
static bool table_current(const struct sn_vqtx_gmap_id *t, int vid)
{
	struct rte_vhost_memory *mem = NULL;
	bool same = false;

	if (t->n && rte_vhost_get_mem_table(vid, &mem) == 0 && mem->nregions == t->n) {
		same = true;
		for (uint32_t i = 0; i < mem->nregions; i++)
			if (mem->regions[i].guest_phys_addr != t->gpa[i] ||
			    mem->regions[i].size != t->size[i] ||
			    mem->regions[i].host_user_addr != t->lib_hva[i] ||
			    mem->regions[i].guest_user_addr != t->uaddr[i])
				same = false;
	}
	free(mem);
	return same;
}

int sn_vqtx_remap(struct sn_vqtx *q, int vid)
{
	struct sn_vqtx_gmap *g, *old;

	if (!q->vr || q->vid != vid)
		return -ENODEV;
	if (table_current(&q->last_tab, vid))
		return 1;
	if (__atomic_load_n(&q->nmaps, __ATOMIC_RELAXED) >= SN_VQTX_MAPS_MAX)
		return -EBUSY;
	g = sn_vqtx_gmap_new(vid);
	if (!g)
		return -errno;
	__atomic_fetch_add(&q->nmaps, 1, __ATOMIC_RELAXED);
	sn_vqtx_note_table(q, g);
	/* Release pairs with the worker's acquire exchange in take_map(): it
	 * sees the map's contents. A map the worker had not taken yet is
	 * ours again (the exchange gives each pointer to one side only). */
	old = __atomic_exchange_n(&q->next_map, g, __ATOMIC_ACQ_REL);
	if (old) {
		sn_vqtx_gmap_free(old);    /* the worker never saw it */
		__atomic_fetch_sub(&q->nmaps, 1, __ATOMIC_RELAXED);
	}
	return 0;
}

/* Worker: unmap every older map but the rings' (no frame of an older
 * generation is outstanding any more). */
void sn_vqtx_retire(struct sn_vqtx *q)
{
	struct sn_vqtx_gmap *g = q->map->older;
	uint32_t freed = 0;

	q->map->older = NULL;
	while (g) {
		struct sn_vqtx_gmap *o = g->older;

		if (g == q->ring_map) {
			g->older = NULL;
			q->map->older = g;
		} else {
			sn_vqtx_gmap_free(g);
			freed++;
		}
		g = o;
	}
	__atomic_fetch_sub(&q->nmaps, freed, __ATOMIC_RELAXED);
}

/* Worker, ring live: switch to a newer table handed over by sn_vqtx_remap().
 * The rings move to it when they lie inside it (the driver does not move
 * them while the device runs; the library re-translates its own copies).
 * The current map joins the older ones until the frames popped through
 * them are all freed. A table the ring refuses (sn_vring_set_mem:
 * overlapping regions) is kept on the older list, unused, and the queue
 * goes on with its current table. */
void sn_vqtx_take_map(struct sn_vqtx *q)
{
	struct sn_vqtx_gmap *g = __atomic_exchange_n(&q->next_map, NULL, __ATOMIC_ACQ_REL);
	void *desc, *avail, *used;

	if (!g)
		return;
	if (sn_vring_set_mem(q->vr, &g->mem) != 0) {
		SN_LOG_RL(SN_LOG_WARNING, "vqtx: vid %d: new guest memory table refused (kept the current "
			  "one)", q->vid);
		g->older = q->map->older;
		q->map->older = g;
		return;
	}
	desc = gmap_gpa(g, q->ring_gpa[0], 16ULL * q->size);
	avail = gmap_gpa(g, q->ring_gpa[1], 6ULL + 2ULL * q->size);
	used = gmap_gpa(g, q->ring_gpa[2], 6ULL + 8ULL * q->size);
	if (desc && avail && used && sn_vring_set_rings(q->vr, desc, avail, used) == 0) {
		q->ring_map = g;
		q->avail = avail;
	}
	g->older = q->map;
	q->map = g;
	q->mgen++;
	q->old_out = q->outstanding;  /* every frame out now came through an older map */
	if (q->old_out == 0)
		sn_vqtx_retire(q);
	ctr_inc(&q->st.mem_remaps);
}
