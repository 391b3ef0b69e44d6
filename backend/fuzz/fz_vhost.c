/* SPDX-License-Identifier: BSD-3-Clause */
/* fz_vhost.c — the fake rte_vhost device API of the fuzz targets
 * (contract in fz_vhost.h). Only the functions our daemon code calls are
 * defined; their semantics follow DPDK 22.11 lib/vhost/vhost.c as far as
 * our code can observe them.
 */
#include "fz_vhost.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

struct fz_vhost_dev fz_vhost_devs[FZ_VHOST_DEVS];

static struct fz_vhost_dev *dev(int vid)
{
	if (vid < 0 || vid >= FZ_VHOST_DEVS || !fz_vhost_devs[vid].used)
		return NULL;
	return &fz_vhost_devs[vid];
}

int fz_vhost_dev_init(int vid, const char *ifname)
{
	struct fz_vhost_dev *d;

	if (vid < 0 || vid >= FZ_VHOST_DEVS)
		return -EINVAL;
	d = &fz_vhost_devs[vid];
	memset(d, 0, sizeof(*d));
	for (int i = 0; i < FZ_VHOST_FDS; i++) {
		d->fd[i] = memfd_create("fz-guest", MFD_CLOEXEC);
		if (d->fd[i] < 0 || ftruncate(d->fd[i], FZ_VHOST_FD_SIZE) != 0)
			goto fail;
		d->guest[i] = mmap(NULL, FZ_VHOST_FD_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED,
				   d->fd[i], 0);
		if (d->guest[i] == MAP_FAILED) {
			d->guest[i] = NULL;
			goto fail;
		}
	}
	snprintf(d->ifname, sizeof(d->ifname), "%s", ifname);
	d->used = true;
	return 0;
fail:
	d->used = true;
	fz_vhost_dev_fini(vid);
	return -ENOMEM;
}

static void lib_unmap(struct fz_vhost_dev *d)
{
	for (int i = 0; i < FZ_VHOST_FDS; i++) {
		if (d->lib_map[i])
			munmap(d->lib_map[i], FZ_VHOST_FD_SIZE);
		d->lib_map[i] = NULL;
	}
}

void fz_vhost_dev_fini(int vid)
{
	struct fz_vhost_dev *d = dev(vid);

	if (!d)
		return;
	lib_unmap(d);
	for (int i = 0; i < FZ_VHOST_FDS; i++) {
		if (d->guest[i])
			munmap(d->guest[i], FZ_VHOST_FD_SIZE);
		if (d->fd[i] > 0)
			close(d->fd[i]);
	}
	memset(d, 0, sizeof(*d));
}

static bool region_ok(const struct fz_vhost_region *r)
{
	return r->file < FZ_VHOST_FDS && r->size > 0 && r->off <= FZ_VHOST_FD_SIZE &&
	       r->size <= FZ_VHOST_FD_SIZE - r->off;
}

int fz_vhost_set_mem(int vid)
{
	struct fz_vhost_dev *d = dev(vid);

	if (!d)
		return -1;
	lib_unmap(d);
	if (d->nregions > FZ_VHOST_REGIONS)
		return -1;
	for (uint32_t i = 0; i < d->nregions; i++) {
		const struct fz_vhost_region *r = &d->reg[i];
		void *a;

		if (!region_ok(r)) {
			d->nregions = 0;
			return -1;
		}
		if (d->lib_map[r->file])
			continue;
		a = mmap(NULL, FZ_VHOST_FD_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED,
			 d->fd[r->file], 0);
		if (a == MAP_FAILED) {
			lib_unmap(d);
			d->nregions = 0;
			return -1;
		}
		d->lib_map[r->file] = a;
	}
	return 0;
}

static const struct fz_vhost_region *region_of(const struct fz_vhost_dev *d, uint64_t gpa,
					       uint64_t len)
{
	for (uint32_t i = 0; i < d->nregions; i++) {
		const struct fz_vhost_region *r = &d->reg[i];

		if (gpa >= r->gpa && gpa - r->gpa < r->size && len <= r->size - (gpa - r->gpa))
			return r;
	}
	return NULL;
}

void *fz_vhost_guest(int vid, uint64_t gpa, uint64_t len)
{
	struct fz_vhost_dev *d = dev(vid);
	const struct fz_vhost_region *r = d ? region_of(d, gpa, len) : NULL;

	return r ? d->guest[r->file] + r->off + (gpa - r->gpa) : NULL;
}

uint64_t fz_vhost_lib_hva(int vid, uint64_t gpa, uint64_t len)
{
	struct fz_vhost_dev *d = dev(vid);
	const struct fz_vhost_region *r = d ? region_of(d, gpa, len) : NULL;

	if (!r || !d->lib_map[r->file])
		return 0;
	return (uint64_t)(uintptr_t)d->lib_map[r->file] + r->off + (gpa - r->gpa);
}

/* ---- The rte_vhost API our code calls ---- */

int rte_vhost_get_negotiated_features(int vid, uint64_t *features)
{
	struct fz_vhost_dev *d = dev(vid);

	if (!d)
		return -1;
	*features = d->features;
	return 0;
}

int rte_vhost_get_vhost_vring(int vid, uint16_t vring_idx, struct rte_vhost_vring *vring)
{
	struct fz_vhost_dev *d = dev(vid);

	if (!d || vring_idx >= d->nvrings || vring_idx >= FZ_VHOST_VRINGS)
		return -1;
	memset(vring, 0, sizeof(*vring));
	vring->size = (uint16_t)d->vr[vring_idx].size;
	if (d->vr[vring_idx].wild) {
		vring->desc = (void *)(uintptr_t)d->vr[vring_idx].desc;
		vring->avail = (void *)(uintptr_t)d->vr[vring_idx].avail;
		vring->used = (void *)(uintptr_t)d->vr[vring_idx].used;
	} else {
		vring->desc = (void *)(uintptr_t)fz_vhost_lib_hva(vid, d->vr[vring_idx].desc,
								  16ULL * vring->size);
		vring->avail = (void *)(uintptr_t)fz_vhost_lib_hva(vid, d->vr[vring_idx].avail,
								   6ULL + 2ULL * vring->size);
		vring->used = (void *)(uintptr_t)fz_vhost_lib_hva(vid, d->vr[vring_idx].used,
								  6ULL + 8ULL * vring->size);
		if (!vring->desc || !vring->avail || !vring->used)
			return -1;   /* the library does not start such a ring */
	}
	vring->callfd = -1;
	vring->kickfd = -1;
	return 0;
}

int rte_vhost_get_vring_base(int vid, uint16_t queue_id, uint16_t *last_avail_idx,
			     uint16_t *last_used_idx)
{
	struct fz_vhost_dev *d = dev(vid);

	if (!d || queue_id >= d->nvrings || queue_id >= FZ_VHOST_VRINGS)
		return -1;
	*last_avail_idx = d->vr[queue_id].last_avail;
	*last_used_idx = d->vr[queue_id].last_used;
	return 0;
}

int rte_vhost_set_vring_base(int vid, uint16_t queue_id, uint16_t last_avail_idx,
			     uint16_t last_used_idx)
{
	struct fz_vhost_dev *d = dev(vid);

	if (!d || queue_id >= d->nvrings || queue_id >= FZ_VHOST_VRINGS)
		return -1;
	d->vr[queue_id].last_avail = last_avail_idx;
	d->vr[queue_id].last_used = last_used_idx;
	d->set_base++;
	return 0;
}

int rte_vhost_vring_call(int vid, uint16_t vring_idx)
{
	struct fz_vhost_dev *d = dev(vid);

	if (!d || vring_idx >= d->nvrings)
		return -1;
	d->calls++;
	return 0;
}

void rte_vhost_log_used_vring(int vid, uint16_t vring_idx, uint64_t offset, uint64_t len)
{
	struct fz_vhost_dev *d = dev(vid);

	(void)offset;
	(void)len;
	if (d && vring_idx < d->nvrings)
		d->log_writes++;
}

int rte_vhost_get_mem_table(int vid, struct rte_vhost_memory **mem)
{
	struct fz_vhost_dev *d = dev(vid);
	struct rte_vhost_memory *m;

	if (!d)
		return -1;
	m = calloc(1, sizeof(*m) + sizeof(m->regions[0]) * (d->nregions ? d->nregions : 1));
	if (!m) {
		d->get_mem_fail++;
		return -1;
	}
	m->nregions = d->nregions;
	for (uint32_t i = 0; i < d->nregions; i++) {
		const struct fz_vhost_region *r = &d->reg[i];

		m->regions[i].guest_phys_addr = r->gpa;
		m->regions[i].guest_user_addr = r->uaddr;
		m->regions[i].size = r->size;
		m->regions[i].mmap_addr = d->lib_map[r->file];
		m->regions[i].mmap_size = FZ_VHOST_FD_SIZE;
		m->regions[i].host_user_addr = (uint64_t)(uintptr_t)d->lib_map[r->file] + r->off;
		m->regions[i].fd = d->fd[r->file];
	}
	*mem = m;
	return 0;
}

int rte_vhost_get_ifname(int vid, char *buf, size_t len)
{
	struct fz_vhost_dev *d = dev(vid);

	if (!d || len == 0)
		return -1;
	snprintf(buf, len, "%s", d->ifname);
	return 0;
}

uint16_t rte_vhost_get_vring_num(int vid)
{
	struct fz_vhost_dev *d = dev(vid);

	return d ? d->nvrings : 0;
}

int rte_vhost_enable_guest_notification(int vid, uint16_t queue_id, int enable)
{
	struct fz_vhost_dev *d = dev(vid);

	if (!d || queue_id >= d->nvrings)
		return -1;
	if (!enable)
		d->notify_off |= 1ULL << (queue_id & 63);
	return 0;
}

int rte_vhost_extern_callback_register(int vid, struct rte_vhost_user_extern_ops const *const ops,
				       void *ctx)
{
	struct fz_vhost_dev *d = dev(vid);

	(void)ctx;
	if (!d)
		return -1;
	d->ext = ops;
	return 0;
}
