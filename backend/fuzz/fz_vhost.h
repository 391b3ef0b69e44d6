/* SPDX-License-Identifier: BSD-3-Clause */
/* fz_vhost.h — a fake of the rte_vhost device API for the libFuzzer
 * targets that drive our vhost-side code (fuzz_vqtx.c, fuzz_vhost_msg.c).
 *
 * The targets link this file instead of librte_vhost: every rte_vhost_*
 * function our code calls (sn_vqtx*.c, port/sn_port_vhost.c) is defined
 * here against a table of fake devices, one per vid. A device has a
 * negotiated feature word, vrings (guest-physical ring addresses, size,
 * base) and a memory table of memfd regions which the "library" maps
 * itself, as rte_vhost does (the host_user_addr our code translates from).
 * The guest's own view of each region is a second mapping of the same
 * memfd (fz_vhost_guest), so the library's mapping can be replaced
 * (fz_vhost_set_mem: what SET_MEM_TABLE does) while the guest and our
 * code keep theirs.
 *
 * Single-threaded but for fuzz_vqtx's stop thread, which only calls
 * rte_vhost_set_vring_base (the fields it writes are read by the fuzz
 * thread after the join).
 */
#ifndef FZ_VHOST_H
#define FZ_VHOST_H

#include <stdbool.h>
#include <stdint.h>

#include <rte_vhost.h>

#define FZ_VHOST_DEVS    4
#define FZ_VHOST_VRINGS  8
#define FZ_VHOST_FDS     4           /* memfd backing files per device */
#define FZ_VHOST_FD_SIZE 0x10000u    /* bytes per memfd */
#define FZ_VHOST_REGIONS 8

struct fz_vhost_region {
	uint64_t gpa, size, uaddr;
	uint32_t file;                   /* index into the device's memfds */
	uint64_t off;                    /* region start in that file */
};

struct fz_vhost_dev {
	bool used;
	char ifname[64];
	uint64_t features;
	uint16_t nvrings;
	struct {
		uint64_t desc, avail, used; /* guest-physical */
		uint32_t size;
		uint16_t last_avail, last_used;
		/* Ring pointers handed out as they are, not translated
		 * (wild library addresses: our code must reject them). */
		bool wild;
	} vr[FZ_VHOST_VRINGS];
	int fd[FZ_VHOST_FDS];
	unsigned char *guest[FZ_VHOST_FDS];  /* the guest's mapping of each file */
	uint32_t nregions;
	struct fz_vhost_region reg[FZ_VHOST_REGIONS];
	void *lib_map[FZ_VHOST_FDS];     /* the library's mappings (whole files) */
	const struct rte_vhost_user_extern_ops *ext;
	/* What our code did to the device. */
	uint64_t calls, log_writes, set_base, notify_off, get_mem_fail;
};

extern struct fz_vhost_dev fz_vhost_devs[FZ_VHOST_DEVS];

/* Create device vid (0 <= vid < FZ_VHOST_DEVS) with its memfds, unmapped
 * table. 0 or -errno. */
int fz_vhost_dev_init(int vid, const char *ifname);
/* Close the files and every mapping of vid. */
void fz_vhost_dev_fini(int vid);
/* Apply the device's reg[0..nregions) as the library's table (unmaps the
 * old mappings first, as rte_vhost does on SET_MEM_TABLE). 0 or -1 (a
 * region outside its file: the library would reject the table, and the
 * old one is gone, as in rte_vhost). */
int fz_vhost_set_mem(int vid);
/* The guest's view of [gpa, gpa + len) under the current table, or NULL. */
void *fz_vhost_guest(int vid, uint64_t gpa, uint64_t len);
/* The library's host address of gpa under the current table (0: none). */
uint64_t fz_vhost_lib_hva(int vid, uint64_t gpa, uint64_t len);

#endif /* FZ_VHOST_H */
