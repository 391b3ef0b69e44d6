/* SPDX-License-Identifier: BSD-3-Clause */
/* trace_twheel.c — `sn-trace twheel`: timestamping + timing wheel on a trace.
 *
 *   sn-trace twheel --config FILE --trace FILE     (FILE may be "-" = stdin)
 *
 * Config: one directive per line, '#' starts a comment.
 *   granularity_ns N          slot width (required)
 *   slots N                   pow2 slot count (required); horizon = N * g
 *   pool_nodes N              global pool size in nodes (default 65536)
 *   node_items N              items per node, 2^k-1 in 7..1023 (default 7)
 *   horizon clamp|reject      beyond-horizon policy (default clamp)
 *   start_ns N                wheel and policy start time (default 0)
 *   policy ID RATE_BPS [BURST_BYTES]       ID 0..65535, rate 1e3..4e11
 *   flow ID POLICY_ID...      policies the flow crosses (1..8); a flow with
 *                             no flow line uses the policy with its own ID
 * Trace: one packet per line, "ARRIVAL_NS FLOW_ID LEN", arrivals
 *   non-decreasing, LEN >= 1; '#' comments and blank lines ignored.
 *
 * Run: for each packet, first release everything due before it (extract at
 * each next_due() <= arrival, then at the arrival), then stamp it with
 * sn_tstamp_consolidate_peek over the flow's policies and insert it; the
 * policies are charged (commit) only if the wheel accepts it. After the
 * trace, extract at next_due() until empty. Output, in release order:
 *   rel  IDX FLOW LEN ARRIVAL TS RELEASE_NS
 *   drop IDX FLOW LEN ARRIVAL TS range|nobufs
 * IDX is the packet's 0-based index in the trace; then a "# stats" line.
 * Exit 0, or 2 on bad usage / input (message on stderr).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sn_tstamp.h"
#include "sn_twheel.h"

#define MAX_IDS        65536
#define MAX_FLOW_POLS  8
#define BURST          64

int sn_trace_twheel_main(int argc, char **argv);

struct flow {
	unsigned n;
	struct sn_tstamp *pol[MAX_FLOW_POLS];
};

struct pkt {
	uint64_t arrival, ts;
	uint32_t flow, len;
};

struct ctx {
	struct sn_twheel_params wp;
	int reject;
	struct sn_tstamp *pol[MAX_IDS];
	struct flow *flow[MAX_IDS];
	struct pkt *pkts;
	size_t npkts, cap;
};

static int parse_u64(const char **s, uint64_t *out)
{
	const char *p = *s;
	char *end;

	while (*p == ' ' || *p == '\t')
		p++;
	if (*p < '0' || *p > '9')
		return -1;
	errno = 0;
	*out = strtoull(p, &end, 10);
	if (errno)
		return -1;
	*s = end;
	return 0;
}

static int at_end(const char *s)
{
	while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n')
		s++;
	return *s == 0 || *s == '#';
}

static int word(const char **s, const char *w)
{
	const char *p = *s;
	size_t n = strlen(w);

	while (*p == ' ' || *p == '\t')
		p++;
	if (strncmp(p, w, n) || (p[n] && p[n] != ' ' && p[n] != '\t' && p[n] != '\n' &&
				 p[n] != '\r' && p[n] != '#'))
		return 0;
	*s = p + n;
	return 1;
}

static FILE *open_in(const char *path)
{
	return strcmp(path, "-") ? fopen(path, "r") : stdin;
}

static int bad(const char *file, unsigned line, const char *what)
{
	fprintf(stderr, "sn-trace twheel: %s:%u: %s\n", file, line, what);
	return -1;
}

static int read_config(struct ctx *c, const char *path)
{
	FILE *f = open_in(path);
	char buf[1024];
	unsigned ln = 0;
	uint64_t v, v2, v3;
	int rc = 0;

	if (!f) {
		fprintf(stderr, "sn-trace twheel: %s: %s\n", path, strerror(errno));
		return -1;
	}
	c->wp.pool_nodes = 1u << 16;
	c->wp.node_items = SN_TWHEEL_NODE_ITEMS_MIN;
	while (rc == 0 && fgets(buf, sizeof(buf), f)) {
		const char *s = buf;

		ln++;
		if (at_end(s))
			continue;
		if (word(&s, "granularity_ns")) {
			if (parse_u64(&s, &v) || !at_end(s) || v == 0)
				rc = bad(path, ln, "granularity_ns wants N >= 1");
			c->wp.granularity_ns = v;
		} else if (word(&s, "slots")) {
			if (parse_u64(&s, &v) || !at_end(s) || !sn_is_pow2(v) || v < 2 ||
			    v > SN_TWHEEL_MAX_SLOTS)
				rc = bad(path, ln, "slots wants a power of two >= 2");
			c->wp.slots = (uint32_t)v;
		} else if (word(&s, "pool_nodes")) {
			if (parse_u64(&s, &v) || !at_end(s) || v == 0 || v > (1u << 31))
				rc = bad(path, ln, "pool_nodes wants 1..2^31");
			c->wp.pool_nodes = (uint32_t)v;
		} else if (word(&s, "node_items")) {
			if (parse_u64(&s, &v) || !at_end(s) || v < SN_TWHEEL_NODE_ITEMS_MIN ||
			    v > SN_TWHEEL_NODE_ITEMS_MAX || !sn_is_pow2(v + 1))
				rc = bad(path, ln, "node_items wants 2^k-1 in 7..1023");
			c->wp.node_items = (uint32_t)v;
		} else if (word(&s, "start_ns")) {
			if (parse_u64(&s, &v) || !at_end(s) || v >= (1ull << 62))
				rc = bad(path, ln, "start_ns wants N < 2^62");
			c->wp.start_ns = v;
		} else if (word(&s, "horizon")) {
			if (word(&s, "clamp") && at_end(s))
				c->reject = 0;
			else if (word(&s, "reject") && at_end(s))
				c->reject = 1;
			else
				rc = bad(path, ln, "horizon wants clamp or reject");
		} else if (word(&s, "policy")) {
			v3 = 0;
			if (parse_u64(&s, &v) || v >= MAX_IDS || parse_u64(&s, &v2) ||
			    (!at_end(s) && parse_u64(&s, &v3)) || !at_end(s) || v3 > UINT32_MAX) {
				rc = bad(path, ln, "policy wants ID RATE_BPS [BURST_BYTES]");
			} else if (c->pol[v]) {
				rc = bad(path, ln, "policy defined twice");
			} else if (!(c->pol[v] = malloc(sizeof(struct sn_tstamp)))) {
				rc = bad(path, ln, "out of memory");
			} else if (sn_tstamp_init(c->pol[v], v2, (uint32_t)v3, c->wp.start_ns)) {
				rc = bad(path, ln, "policy: rate 1e3..4e11 bit/s, burst <= 2^30");
			}
		} else if (word(&s, "flow")) {
			struct flow *fl;

			if (parse_u64(&s, &v) || v >= MAX_IDS || c->flow[v]) {
				rc = bad(path, ln, "flow wants a new ID 0..65535");
				continue;
			}
			fl = c->flow[v] = calloc(1, sizeof(*fl));
			if (!fl) {
				rc = bad(path, ln, "out of memory");
				continue;
			}
			while (rc == 0 && !at_end(s)) {
				if (parse_u64(&s, &v2) || v2 >= MAX_IDS || !c->pol[v2] ||
				    fl->n == MAX_FLOW_POLS)
					rc = bad(path, ln, "flow: up to 8 defined policy IDs");
				else
					fl->pol[fl->n++] = c->pol[v2];
			}
			if (rc == 0 && fl->n == 0)
				rc = bad(path, ln, "flow needs at least one policy");
		} else {
			rc = bad(path, ln, "unknown directive");
		}
	}
	if (rc == 0 && (!c->wp.granularity_ns || !c->wp.slots))
		rc = bad(path, ln, "granularity_ns and slots are required");
	/* Policies start at start_ns even if declared before it. */
	for (unsigned i = 0; rc == 0 && i < MAX_IDS; i++)
		if (c->pol[i])
			(void)sn_tstamp_init(c->pol[i], c->pol[i]->rate, c->pol[i]->burst,
					     c->wp.start_ns);
	if (f != stdin)
		fclose(f);
	return rc;
}

static int read_trace(struct ctx *c, const char *path)
{
	FILE *f = open_in(path);
	char buf[512];
	unsigned ln = 0;
	uint64_t last = 0;
	int rc = 0;

	if (!f) {
		fprintf(stderr, "sn-trace twheel: %s: %s\n", path, strerror(errno));
		return -1;
	}
	while (rc == 0 && fgets(buf, sizeof(buf), f)) {
		const char *s = buf;
		uint64_t a, fl, len;

		ln++;
		if (at_end(s))
			continue;
		if (parse_u64(&s, &a) || parse_u64(&s, &fl) || parse_u64(&s, &len) || !at_end(s) ||
		    fl >= MAX_IDS || len == 0 || len > UINT32_MAX || a >= (1ull << 62)) {
			rc = bad(path, ln, "want ARRIVAL_NS FLOW_ID LEN (LEN >= 1)");
			break;
		}
		if (a < last || a < c->wp.start_ns) {
			rc = bad(path, ln, "arrivals must be non-decreasing and >= start_ns");
			break;
		}
		if (!c->flow[fl] && !c->pol[fl]) {
			rc = bad(path, ln, "flow has no flow line and no policy of the same ID");
			break;
		}
		last = a;
		if (c->npkts == c->cap) {
			size_t ncap = c->cap ? 2 * c->cap : 4096;
			struct pkt *np = realloc(c->pkts, ncap * sizeof(*np));

			if (!np) {
				rc = bad(path, ln, "out of memory");
				break;
			}
			c->pkts = np;
			c->cap = ncap;
		}
		c->pkts[c->npkts++] = (struct pkt){ .arrival = a, .ts = 0, .flow = (uint32_t)fl,
						    .len = (uint32_t)len };
	}
	if (f != stdin)
		fclose(f);
	return rc;
}

static void release_at(struct ctx *c, struct sn_twheel *w, uint64_t now)
{
	void *out[BURST];
	unsigned n;

	do {
		n = sn_twheel_extract(w, now, out, BURST);
		for (unsigned i = 0; i < n; i++) {
			size_t idx = (size_t)(uintptr_t)out[i] - 1;
			const struct pkt *p = &c->pkts[idx];

			printf("rel %zu %u %u %lu %lu %lu\n", idx, p->flow, p->len,
			       (unsigned long)p->arrival, (unsigned long)p->ts, (unsigned long)now);
		}
	} while (n == BURST);
}

static void run(struct ctx *c, struct sn_twheel *w)
{
	struct sn_tstamp_next nx[MAX_FLOW_POLS];
	uint64_t now = c->wp.start_ns;

	for (size_t i = 0; i < c->npkts; i++) {
		struct pkt *p = &c->pkts[i];
		struct flow self, *fl = c->flow[p->flow];
		uint64_t due;
		int rc;

		while ((due = sn_twheel_next_due(w)) <= p->arrival) {
			now = SN_MAX(now, due);
			release_at(c, w, now);
		}
		now = p->arrival;
		release_at(c, w, now);
		if (!fl) {
			self.n = 1;
			self.pol[0] = c->pol[p->flow];
			fl = &self;
		}
		p->ts = sn_tstamp_consolidate_peek(fl->pol, fl->n, now, p->len, nx);
		rc = sn_twheel_insert(w, (void *)(uintptr_t)(i + 1), p->ts,
				      c->reject ? SN_TWHEEL_REJECT : SN_TWHEEL_CLAMP);
		if (rc == 0)
			sn_tstamp_consolidate_commit(fl->pol, fl->n, nx);
		else
			printf("drop %zu %u %u %lu %lu %s\n", i, p->flow, p->len,
			       (unsigned long)p->arrival, (unsigned long)p->ts,
			       rc == -ERANGE ? "range" : "nobufs");
	}
	while (!sn_twheel_empty(w)) {
		now = SN_MAX(now, sn_twheel_next_due(w));
		release_at(c, w, now);
	}
}

static void usage(FILE *f)
{
	fprintf(f, "usage: sn-trace twheel --config FILE --trace FILE   (\"-\" = stdin)\n"
		   "formats: see the top of backend/core/tools/trace_twheel.c\n");
}

int sn_trace_twheel_main(int argc, char **argv)
{
	const char *cfg = NULL, *trace = NULL;
	struct sn_twheel_stats st;
	struct sn_twheel *w = NULL;
	struct ctx *c;
	int rc = 2;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--config") && i + 1 < argc) {
			cfg = argv[++i];
		} else if (!strcmp(argv[i], "--trace") && i + 1 < argc) {
			trace = argv[++i];
		} else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else {
			usage(stderr);
			return 2;
		}
	}
	if (!cfg || !trace || (!strcmp(cfg, "-") && !strcmp(trace, "-"))) {
		usage(stderr);
		return 2;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		fprintf(stderr, "sn-trace twheel: out of memory\n");
		return 2;
	}
	if (read_config(c, cfg) || read_trace(c, trace))
		goto out_free;
	w = sn_twheel_create(&c->wp);
	if (!w) {
		fprintf(stderr, "sn-trace twheel: sn_twheel_create: %s\n", strerror(errno));
		goto out_free;
	}
	printf("# twheel granularity_ns %lu slots %u horizon %s packets %zu\n",
	       (unsigned long)c->wp.granularity_ns, c->wp.slots, c->reject ? "reject" : "clamp",
	       c->npkts);
	run(c, w);
	sn_twheel_stats_get(w, &st);
	printf("# stats inserted %lu extracted %lu past %lu clamped %lu drop_range %lu "
	       "drop_nobufs %lu\n", (unsigned long)st.inserted, (unsigned long)st.extracted,
	       (unsigned long)st.past, (unsigned long)st.clamped, (unsigned long)st.drop_range,
	       (unsigned long)st.drop_nobufs);
	rc = 0;
	sn_twheel_free(w);
out_free:
	for (unsigned i = 0; i < MAX_IDS; i++) {
		free(c->pol[i]);
		free(c->flow[i]);
	}
	free(c->pkts);
	free(c);
	return rc;
}
