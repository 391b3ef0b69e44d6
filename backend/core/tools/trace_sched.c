/* SPDX-License-Identifier: BSD-3-Clause */
/* trace_sched.c — `sn-trace sched [FILE|-]`: replay a packet trace through
 * one sn_sched instance (QFQ, DRR or FIFO) in front of an emulated link and
 * print when every packet leaves, for tests/core/test_ref_sched.py to check
 * against an independent fluid (GPS) reference.
 *
 * Input (FILE, or stdin when absent or "-"); '#' starts a comment.
 * Configuration lines first, then events in non-decreasing time order:
 *   algo qfq|drr|fifo
 *   rate <link bits/s>                  (required, 1 .. 10^12)
 *   overhead <bytes>                    per-packet framing, default 0
 *   quantum <bytes>                     DRR quantum per unit weight (0 = 1514)
 *   queue_len <items>                   per-class queue, default 65536
 *   max_classes <n>                     default 1024
 *   class <id> <weight> <lmax>          class present from time 0
 *   p <arrival_ns> <class> <len>        packet; ids 0, 1, 2 ... in file order
 *   a <time_ns> <class> <weight> <lmax> class add
 *   c <time_ns> <class> <weight> <lmax> class change (weight and/or lmax)
 *   d <time_ns> <class>                 class delete (queued packets dropped)
 *
 * Link emulation (PSPAT Fig. 5, exact): the link is free at time link_free;
 * whenever it is free and the scheduler is backlogged it dequeues one
 * packet, which occupies it for (len + overhead) * 8 * 10^9 / rate ns.
 * Times are kept as ns * rate in 128-bit integers, so there is no rounding
 * and no drift. A dequeue due at the same instant as an event happens
 * before the event.
 *
 * Output, one line per packet as it leaves or is dropped, and one per
 * class event:
 *   <id> <class> <len> <arrival_ns> <departure_ns> <departure_x_rate>
 *        departure = end of transmission; departure_ns is its floor, the
 *        exact value is departure_x_rate / rate ns.
 *   <id> <class> <len> <arrival_ns> drop <noclass|msgsize|nobufs|del>
 *   op <a|c|d> <time_ns> <class> <return code>
 * Exit status: 0 on success, 2 on bad input (message on stderr).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sn_common.h"
#include "sn_sched.h"

__extension__ typedef unsigned __int128 u128;

int sn_trace_sched_main(int argc, char **argv);

struct pkt {
	uint64_t arrival;
	uint32_t cls;
	uint32_t len;
};

struct trace {
	struct sn_sched *s;
	struct pkt *pkts;
	size_t npkts, cap;
	uint64_t rate;
	uint64_t overhead;
	u128 link_free;              /* ns * rate */
	FILE *out;
	struct pre_class {
		uint32_t id, w, lmax;
	} *pre;                      /* "class" lines, added at the first event */
	size_t npre;
};

static void print_u128(FILE *f, u128 v)
{
	char buf[48];
	int i = sizeof(buf) - 1;

	buf[i] = '\0';
	do {
		buf[--i] = (char)('0' + (int)(v % 10));
		v /= 10;
	} while (v);
	fputs(&buf[i], f);
}

static void on_drop(void *item, uint32_t len, void *arg)
{
	struct trace *t = arg;
	size_t id = (size_t)(uintptr_t)item - 1;

	fprintf(t->out, "%zu %u %u %" PRIu64 " drop del\n", id, t->pkts[id].cls, len,
		t->pkts[id].arrival);
}

/* Transmit while the link is free at or before `until` (ns * rate). */
static int run_link(struct trace *t, u128 until, int drain)
{
	while (sn_sched_backlog(t->s) && (drain || t->link_free <= until)) {
		uint32_t len, cls, plen;
		void *item;
		size_t id;

		if (sn_sched_peek_len(t->s, &plen))
			sn_die("peek failed with backlog");
		item = sn_sched_dequeue(t->s, &len, &cls);
		if (!item || len != plen)
			sn_die("dequeue disagrees with peek/backlog");
		id = (size_t)(uintptr_t)item - 1;
		if (id >= t->npkts || t->pkts[id].cls != cls || t->pkts[id].len != len)
			sn_die("dequeued item %zu does not match the trace", id);
		t->link_free += (u128)(len + t->overhead) * 8u * 1000000000u;
		fprintf(t->out, "%zu %u %u %" PRIu64 " %" PRIu64 " ", id, cls, len,
			t->pkts[id].arrival, (uint64_t)(t->link_free / t->rate));
		print_u128(t->out, t->link_free);
		fputc('\n', t->out);
	}
	if (!sn_sched_backlog(t->s) && t->link_free < until)
		t->link_free = until;
	return 0;
}

static int bad(unsigned long lineno, const char *what)
{
	fprintf(stderr, "sn-trace sched: line %lu: %s\n", lineno, what);
	return 2;
}

static int add_pkt(struct trace *t, uint64_t at, uint32_t cls, uint32_t len)
{
	if (t->npkts == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 4096;
		struct pkt *p = realloc(t->pkts, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		t->pkts = p;
		t->cap = cap;
	}
	t->pkts[t->npkts++] = (struct pkt){ .arrival = at, .cls = cls, .len = len };
	return 0;
}

static const char *drop_reason(int rc)
{
	switch (rc) {
	case -ENOENT: return "noclass";
	case -EMSGSIZE: return "msgsize";
	case -ENOBUFS: return "nobufs";
	default: return "error";
	}
}

static int replay(FILE *in, struct trace *t)
{
	struct sn_sched_params p = { .algo = SN_SCHED_QFQ, .max_classes = 1024,
				     .queue_len = 65536 };
	char line[512], word[32];
	unsigned long lineno = 0;
	uint64_t last = 0, u64v;
	uint32_t cls, w, lm, len;
	int configured = 0, rc;

	while (fgets(line, sizeof(line), in)) {
		char *hash = strchr(line, '#');
		int n;

		lineno++;
		if (hash)
			*hash = '\0';
		if (sscanf(line, "%31s%n", word, &n) != 1)
			continue;
		if (!configured && strcmp(word, "p") && strcmp(word, "a") &&
		    strcmp(word, "c") && strcmp(word, "d")) {
			if (!strcmp(word, "algo")) {
				char name[16];

				if (sscanf(line + n, "%15s", name) != 1 ||
				    sn_sched_algo_parse(name, &p.algo))
					return bad(lineno, "algo must be qfq, drr or fifo");
			} else if (!strcmp(word, "rate")) {
				if (sscanf(line + n, "%" SCNu64, &t->rate) != 1 || !t->rate ||
				    t->rate > 1000000000000ull)
					return bad(lineno, "rate must be 1 .. 10^12 bit/s");
			} else if (!strcmp(word, "overhead")) {
				if (sscanf(line + n, "%" SCNu64, &t->overhead) != 1 || t->overhead > 65536)
					return bad(lineno, "bad overhead");
			} else if (!strcmp(word, "quantum")) {
				if (sscanf(line + n, "%" SCNu32, &p.drr_quantum) != 1)
					return bad(lineno, "bad quantum");
			} else if (!strcmp(word, "queue_len")) {
				if (sscanf(line + n, "%" SCNu32, &p.queue_len) != 1)
					return bad(lineno, "bad queue_len");
			} else if (!strcmp(word, "max_classes")) {
				if (sscanf(line + n, "%" SCNu32, &p.max_classes) != 1)
					return bad(lineno, "bad max_classes");
			} else if (!strcmp(word, "class")) {
				struct pre_class *np = realloc(t->pre, (t->npre + 1) * sizeof(*np));

				if (!np)
					return bad(lineno, "out of memory");
				t->pre = np;
				np = &t->pre[t->npre];
				if (sscanf(line + n, "%" SCNu32 " %" SCNu32 " %" SCNu32,
					   &np->id, &np->w, &np->lmax) != 3)
					return bad(lineno, "class <id> <weight> <lmax>");
				t->npre++;
			} else {
				return bad(lineno, "unknown configuration keyword");
			}
			continue;
		}
		if (!configured) {
			if (!t->rate)
				return bad(lineno, "rate missing");
			t->s = sn_sched_create(&p);
			if (!t->s)
				return bad(lineno, strerror(errno));
			for (size_t i = 0; i < t->npre; i++) {
				const struct pre_class *pc = &t->pre[i];

				rc = sn_sched_class_add(t->s, pc->id, pc->w, pc->lmax);
				if (rc) {
					fprintf(stderr, "sn-trace sched: class %u: %s\n", pc->id,
						strerror(-rc));
					return 2;
				}
			}
			configured = 1;
		}
		if (sscanf(line + n, "%" SCNu64, &u64v) != 1)
			return bad(lineno, "event time missing");
		if (u64v < last)
			return bad(lineno, "events out of time order");
		if (u64v > UINT64_MAX / 2)
			return bad(lineno, "time too large");
		last = u64v;
		run_link(t, (u128)u64v * t->rate, 0);
		if (!strcmp(word, "p")) {
			if (sscanf(line + n, "%*s %" SCNu32 " %" SCNu32, &cls, &len) != 2)
				return bad(lineno, "p <arrival_ns> <class> <len>");
			if (add_pkt(t, u64v, cls, len))
				return bad(lineno, "out of memory");
			rc = sn_sched_enqueue(t->s, cls, (void *)(uintptr_t)t->npkts, len);
			if (rc)
				fprintf(t->out, "%zu %u %u %" PRIu64 " drop %s\n", t->npkts - 1, cls,
					len, u64v, drop_reason(rc));
		} else if (!strcmp(word, "a") || !strcmp(word, "c")) {
			if (sscanf(line + n, "%*s %" SCNu32 " %" SCNu32 " %" SCNu32, &cls, &w, &lm) != 3)
				return bad(lineno, "a|c <time_ns> <class> <weight> <lmax>");
			rc = word[0] == 'a' ? sn_sched_class_add(t->s, cls, w, lm)
					    : sn_sched_class_change(t->s, cls, w, lm);
			fprintf(t->out, "op %s %" PRIu64 " %u %d\n", word, u64v, cls, rc);
		} else if (!strcmp(word, "d")) {
			if (sscanf(line + n, "%*s %" SCNu32, &cls) != 1)
				return bad(lineno, "d <time_ns> <class>");
			rc = sn_sched_class_del(t->s, cls, on_drop, t);
			fprintf(t->out, "op d %" PRIu64 " %u %d\n", u64v, cls, rc);
		} else {
			return bad(lineno, "unknown event");
		}
	}
	if (!configured)
		return bad(lineno, "no events");
	run_link(t, 0, 1);
	return 0;
}

int sn_trace_sched_main(int argc, char **argv)
{
	struct trace t = { .out = stdout };
	FILE *in = stdin;
	int rc;

	if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		printf("usage: sn-trace sched [FILE|-]   (formats: backend/core/tools/trace_sched.c)\n");
		return 0;
	}
	if (argc > 2) {
		fprintf(stderr, "usage: sn-trace sched [FILE|-]\n");
		return 2;
	}
	if (argc == 2 && strcmp(argv[1], "-")) {
		in = fopen(argv[1], "r");
		if (!in) {
			fprintf(stderr, "sn-trace sched: %s: %s\n", argv[1], strerror(errno));
			return 2;
		}
	}
	rc = replay(in, &t);
	if (in != stdin)
		fclose(in);
	sn_sched_free(t.s);
	free(t.pkts);
	free(t.pre);
	if (fflush(stdout))
		rc = 2;
	return rc;
}
