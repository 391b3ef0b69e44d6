/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_mbox.c — creation and release of PSPAT mailboxes.
 *
 * The algorithm (PSPAT, Rizzo et al., Computer Communications 2018,
 * §4.1: lap-tagged slots, lazy per-line release, one-line producer
 * look-ahead) lives inline in sn_mbox.h because every insert and extract
 * is on the datapath; this file only sizes, aligns and zeroes the memory. A zeroed slot array is the "every line released,
 * nothing to read" state for both sides.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sn_mbox.h"

struct sn_mbox *sn_mbox_create(uint32_t size, void *udata)
{
	struct sn_mbox *mb;
	size_t bytes;

	if (!sn_is_pow2(size) || size < SN_MBOX_MIN_SIZE || size > SN_MBOX_MAX_SIZE) {
		errno = EINVAL;
		return NULL;
	}
	bytes = sizeof(*mb) + (size_t)size * sizeof(mb->slots[0]);
	/* aligned_alloc wants a multiple of the alignment: size is a multiple
	 * of SN_MBOX_LINE_SLOTS, so the slot array is whole lines. */
	mb = aligned_alloc(SN_CACHE_LINE, bytes);
	if (mb == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	memset(mb, 0, bytes);
	mb->size = size;
	mb->mask = size - 1;
	mb->shift = (uint32_t)__builtin_ctz(size);
	mb->udata = udata;
	mb->prod_tail = 0;
	mb->prod_lim = 0;     /* first insert performs the room check */
	mb->cons_head = 0;
	atomic_init(&mb->bp, 0u);
	atomic_init(&mb->ovf, 0u);
	return mb;
}

void sn_mbox_free(struct sn_mbox *mb)
{
	free(mb);
}
