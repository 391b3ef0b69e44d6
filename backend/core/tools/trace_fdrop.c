/* SPDX-License-Identifier: BSD-3-Clause */
/* trace_fdrop.c — `sn-trace fdrop`: fair dropping in front of a simulated
 * link or CPU, driven by a packet trace.
 *
 * Input (stdin); blank lines and '#' lines are ignored; unsigned decimals.
 * First a configuration line:
 *
 *   config mode=link|cpu capacity=UNITS_PER_S theta=UNITS
 *          [theta_min=UNITS theta_max=UNITS alpha_ppm=P beta_ppm=P]
 *          [rows=N] [max_active=N] [fair=1|0] [buffer=PKTS] [batch=N]
 *          [drop_cost=UNITS] [batch_cost=UNITS] [charge=UNITS] [account=1|0]
 *
 * then one packet per line, arrival times non-decreasing:
 *
 *   ARRIVAL_NS FLOW LEN [CYCLES]
 *
 * FLOW is a flow number (< 2^20); the tool hashes it like an RSS hash.
 *
 * mode=link (bandwidth sharing, §III-D): units are bytes; the dropper sits
 * before a FIFO of `buffer` packets (0 = unbounded; tail drop when full)
 * served at `capacity` bytes/s. batch=N (default 1) groups N consecutive
 * arrivals: one sn_fdrop_advance at the last arrival of the group, then
 * every packet is admitted and enters the FIFO at that time.
 *
 * mode=cpu (CPU sharing, §III-E, Fig. 2): units are cycles; CYCLES is the
 * packet's processing cost (default LEN). Packets wait in an input buffer
 * of `buffer` packets (default 512, tail drop); a CPU of `capacity`
 * cycles/s polls up to `batch` (default 256) packets at a time; for each
 * packet Algorithm 1 runs at its arrival time charging CYCLES; a kept
 * packet costs CYCLES, a dropped one drop_cost, plus batch_cost per poll.
 * After the batch, Algorithm 2 apportions the batch's cycles over its
 * kept packets (weight = CYCLES) and θ adapts (α if the batch was full,
 * β otherwise) when theta_min/theta_max are given. charge=N makes
 * Algorithm 1 charge a flat N per packet (a cost estimate that ignores
 * the packet's type), leaving Algorithm 2 to correct it; account=0 turns
 * Algorithm 2 off.
 *
 * fair=0 turns the dropper off (tail drop only, the paper's TD baseline).
 *
 * Output (stdout), one JSON object:
 *   {"mode": "link"|"cpu", "start_ns": T0, "end_ns": T1, "busy_ns": B,
 *    "flows": [{"flow": F, "offered_pkts": n, "offered_units": u,
 *               "delivered_pkts": n, "delivered_units": u,
 *               "delivered_cycles": c, "drop_fair": n, "drop_tail": n,
 *               "drop_other": n}, ...],        (other: table full, invalid)
 *    "fdrop": {"kept": n, "new_flows": n, "drop_fair": n,
 *              "drop_table_full": n, "drop_invalid": n, "drained": n,
 *              "corrections": n, "corrections_lost": n, "theta": u,
 *              "theta_down": n, "theta_up": n, "active_max": n}}
 * T0/T1 are the first and last arrival; busy_ns is the time the link or
 * CPU was busy. Exit status 0, or 2 on bad usage / input (stderr names the
 * line).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace_util.h"

#include "sn_fdrop.h"

#define MAX_TOK   24
#define MAX_FLOW  (1u << 20)

int sn_trace_fdrop_main(int argc, char **argv);

struct pkt {
	uint64_t t;
	uint32_t flow;
	uint32_t len;
	uint32_t cycles;
};

struct flow_acc {
	uint64_t off_pkts, off_units, del_pkts, del_units, del_cycles;
	uint64_t drop_fair, drop_tail, drop_other;
};

struct sim {
	int cpu;
	int fair;
	uint64_t capacity;
	uint32_t buffer, batch;
	uint64_t drop_cost, batch_cost;
	uint32_t charge;      /* cpu: flat Algorithm 1 charge, 0 = CYCLES */
	int account;          /* cpu: run Algorithm 2 */
	struct sn_fdrop_cfg fcfg;
	struct sn_fdrop *fd;
	struct flow_acc *acc;
	uint32_t n_flows;     /* acc[] entries used: max flow + 1 */
	uint64_t busy_ns;
	/* real FIFO / input buffer: ring of packets or of finish times */
	struct pkt *q;
	double *fin;
	uint32_t qcap, qhead, qlen;
	double last_fin;
	uint64_t fair_seen;   /* fair drops already attributed to a flow */
};


/* RSS-like spread of small flow numbers over the table (murmur3 fmix). */
static uint32_t flow_hash(uint32_t f)
{
	f ^= f >> 16;
	f *= 0x85ebca6bu;
	f ^= f >> 13;
	f *= 0xc2b2ae35u;
	f ^= f >> 16;
	return f;
}

static int parse_config(char **tok, int n, struct sim *s)
{
	uint32_t fair = 1, account = 1;
	int have_batch = 0, have_buffer = 0;

	memset(s, 0, sizeof(*s));
	for (int i = 1; i < n; i++) {
		char *eq = strchr(tok[i], '=');
		const char *k = tok[i];
		int rc = -EINVAL;

		if (!eq)
			goto bad_kv;
		*eq++ = '\0';
		if (!strcmp(k, "mode")) {
			rc = 0;
			if (!strcmp(eq, "cpu"))
				s->cpu = 1;
			else if (strcmp(eq, "link"))
				rc = -EINVAL;
		} else if (!strcmp(k, "capacity")) {
			rc = trace_parse_u64(eq, &s->fcfg.capacity);
		} else if (!strcmp(k, "theta")) {
			rc = trace_parse_u64(eq, &s->fcfg.theta);
		} else if (!strcmp(k, "theta_min")) {
			rc = trace_parse_u64(eq, &s->fcfg.theta_min);
		} else if (!strcmp(k, "theta_max")) {
			rc = trace_parse_u64(eq, &s->fcfg.theta_max);
		} else if (!strcmp(k, "alpha_ppm")) {
			rc = trace_parse_u32(eq, &s->fcfg.alpha_ppm);
		} else if (!strcmp(k, "beta_ppm")) {
			rc = trace_parse_u32(eq, &s->fcfg.beta_ppm);
		} else if (!strcmp(k, "rows")) {
			rc = trace_parse_u32(eq, &s->fcfg.n_rows);
		} else if (!strcmp(k, "max_active")) {
			rc = trace_parse_u32(eq, &s->fcfg.max_active);
		} else if (!strcmp(k, "fair")) {
			rc = trace_parse_u32(eq, &fair);
			if (!rc && fair > 1)
				rc = -EINVAL;
		} else if (!strcmp(k, "buffer")) {
			rc = trace_parse_u32(eq, &s->buffer);
			have_buffer = 1;
		} else if (!strcmp(k, "batch")) {
			rc = trace_parse_u32(eq, &s->batch);
			have_batch = 1;
			if (!rc && s->batch == 0)
				rc = -EINVAL;
		} else if (!strcmp(k, "drop_cost")) {
			rc = trace_parse_u64(eq, &s->drop_cost);
		} else if (!strcmp(k, "batch_cost")) {
			rc = trace_parse_u64(eq, &s->batch_cost);
		} else if (!strcmp(k, "charge")) {
			rc = trace_parse_u32(eq, &s->charge);
		} else if (!strcmp(k, "account")) {
			rc = trace_parse_u32(eq, &account);
			if (!rc && account > 1)
				rc = -EINVAL;
		}
		if (rc) {
bad_kv:
			fprintf(stderr, "sn-trace fdrop: bad config item '%s%s%s'\n", k,
				eq ? "=" : "", eq ? eq : "");
			return -EINVAL;
		}
	}
	s->fair = (int)fair;
	s->account = (int)account;
	s->capacity = s->fcfg.capacity;
	if (!have_batch)
		s->batch = s->cpu ? 256 : 1;
	if (!have_buffer)
		s->buffer = s->cpu ? 512 : 0;
	if (s->cpu && s->buffer == 0) {
		fprintf(stderr, "sn-trace fdrop: cpu mode needs buffer > 0\n");
		return -EINVAL;
	}
	return 0;
}

static struct flow_acc *acc_of(struct sim *s, uint32_t flow)
{
	if (flow >= s->n_flows) {
		uint32_t n = flow + 1;
		struct flow_acc *a = realloc(s->acc, sizeof(*a) * n);
		if (!a)
			return NULL;
		memset(a + s->n_flows, 0, sizeof(*a) * (n - s->n_flows));
		s->acc = a;
		s->n_flows = n;
	}
	return &s->acc[flow];
}

/* ---- link mode: FIFO of finish times served at capacity ---- */

static int link_grow(struct sim *s)
{
	uint32_t ncap = s->qcap ? s->qcap * 2 : 1024;
	double *f = malloc(sizeof(*f) * ncap);

	if (!f)
		return -ENOMEM;
	for (uint32_t i = 0; i < s->qlen; i++)
		f[i] = s->fin[(s->qhead + i) % s->qcap];
	free(s->fin);
	s->fin = f;
	s->qcap = ncap;
	s->qhead = 0;
	return 0;
}

/* A packet kept by the dropper reaches the FIFO at time t. */
static int link_enqueue(struct sim *s, const struct pkt *p, double t, struct flow_acc *a)
{
	while (s->qlen && s->fin[s->qhead] <= t) {
		s->qhead = (s->qhead + 1) % s->qcap;
		s->qlen--;
	}
	if (s->buffer && s->qlen >= s->buffer) {
		a->drop_tail++;
		return 0;
	}
	if (s->qlen == s->qcap && link_grow(s))
		return -ENOMEM;
	double start = s->last_fin > t ? s->last_fin : t;
	double svc = (double)p->len * 1e9 / (double)s->capacity;
	s->last_fin = start + svc;
	s->busy_ns += (uint64_t)svc;
	s->fin[(s->qhead + s->qlen) % s->qcap] = s->last_fin;
	s->qlen++;
	a->del_pkts++;
	a->del_units += p->len;
	a->del_cycles += p->cycles;
	return 0;
}

/* Per-flow drop cause from the module's cause counters. */
static void count_drop(struct sim *s, struct flow_acc *a)
{
	struct sn_fdrop_stats st;

	sn_fdrop_stats(s->fd, &st);
	if (st.dropped[SN_FDROP_C_FAIR] != s->fair_seen) {
		s->fair_seen = st.dropped[SN_FDROP_C_FAIR];
		a->drop_fair++;
	} else {
		a->drop_other++;
	}
}

static int link_batch(struct sim *s, struct pkt *b, uint32_t n)
{
	uint64_t t = b[n - 1].t;

	if (s->fair)
		sn_fdrop_advance(s->fd, t);
	for (uint32_t i = 0; i < n; i++) {
		struct flow_acc *a = &s->acc[b[i].flow];
		if (s->fair && sn_fdrop_admit(s->fd, flow_hash(b[i].flow), b[i].len) == SN_FDROP_DROP) {
			count_drop(s, a);
			continue;
		}
		if (link_enqueue(s, &b[i], (double)t, a))
			return -ENOMEM;
	}
	return 0;
}

/* ---- cpu mode: input buffer, batched polling, Algorithms 1 + 2 ---- */

struct cpu_state {
	double now;                   /* simulated CPU clock, ns */
	struct sn_fdrop_done *done;
};

static void cpu_arrive(struct sim *s, const struct pkt *p)
{
	struct flow_acc *a = &s->acc[p->flow];

	if (s->qlen >= s->buffer) {
		a->drop_tail++;
		return;
	}
	s->q[(s->qhead + s->qlen) % s->qcap] = *p;
	s->qlen++;
}

/* One poll: process up to `batch` buffered packets; advances the clock. */
static void cpu_poll(struct sim *s, struct cpu_state *c)
{
	uint32_t k = s->qlen < s->batch ? s->qlen : s->batch, nd = 0;
	uint64_t cycles = s->batch_cost;

	for (uint32_t i = 0; i < k; i++) {
		const struct pkt *p = &s->q[(s->qhead + i) % s->qcap];
		struct flow_acc *a = &s->acc[p->flow];
		uint32_t h = flow_hash(p->flow);
		uint32_t charged = s->charge ? s->charge : p->cycles;

		if (s->fair && sn_fdrop_decide(s->fd, h, charged, p->t) == SN_FDROP_DROP) {
			count_drop(s, a);
			cycles += s->drop_cost;
			continue;
		}
		cycles += p->cycles;
		a->del_pkts++;
		a->del_units += p->len;
		a->del_cycles += p->cycles;
		c->done[nd].hash = h;
		c->done[nd].weight = p->cycles;
		c->done[nd].charged = charged;
		nd++;
	}
	s->qhead = (s->qhead + k) % s->qcap;
	s->qlen -= k;
	if (s->fair) {
		if (s->account)
			sn_fdrop_account(s->fd, c->done, nd, cycles);
		sn_fdrop_adapt(s->fd, k == s->batch);
	}
	double dt = (double)cycles * 1e9 / (double)s->capacity;
	c->now += dt;
	s->busy_ns += (uint64_t)dt;
}

static void print_result(struct sim *s, uint64_t t0, uint64_t t1)
{
	struct sn_fdrop_stats st;
	int first = 1;

	printf("{\"mode\": \"%s\", \"start_ns\": %" PRIu64 ", \"end_ns\": %" PRIu64
	       ", \"busy_ns\": %" PRIu64 ", \"flows\": [",
	       s->cpu ? "cpu" : "link", t0, t1, s->busy_ns);
	for (uint32_t f = 0; f < s->n_flows; f++) {
		const struct flow_acc *a = &s->acc[f];
		if (!a->off_pkts)
			continue;
		printf("%s\n  {\"flow\": %u, \"offered_pkts\": %" PRIu64 ", \"offered_units\": %" PRIu64
		       ", \"delivered_pkts\": %" PRIu64 ", \"delivered_units\": %" PRIu64
		       ", \"delivered_cycles\": %" PRIu64 ", \"drop_fair\": %" PRIu64
		       ", \"drop_tail\": %" PRIu64 ", \"drop_other\": %" PRIu64 "}",
		       first ? "" : ",", f, a->off_pkts, a->off_units, a->del_pkts, a->del_units,
		       a->del_cycles, a->drop_fair, a->drop_tail, a->drop_other);
		first = 0;
	}
	sn_fdrop_stats(s->fd, &st);
	printf("],\n \"fdrop\": {\"kept\": %" PRIu64 ", \"new_flows\": %" PRIu64
	       ", \"drop_fair\": %" PRIu64 ", \"drop_table_full\": %" PRIu64
	       ", \"drop_invalid\": %" PRIu64 ", \"drained\": %" PRIu64
	       ", \"corrections\": %" PRIu64 ", \"corrections_lost\": %" PRIu64
	       ", \"theta\": %" PRIu64 ", \"theta_down\": %" PRIu64 ", \"theta_up\": %" PRIu64
	       ", \"active_max\": %u}}\n",
	       st.kept, st.new_flows, st.dropped[SN_FDROP_C_FAIR],
	       st.dropped[SN_FDROP_C_TABLE_FULL], st.dropped[SN_FDROP_C_INVALID], st.drained,
	       st.corrections, st.corrections_lost, st.theta, st.theta_down, st.theta_up,
	       st.active_max);
}

int sn_trace_fdrop_main(int argc, char **argv)
{
	char line[1024], *tok[MAX_TOK];
	struct sim s;
	struct cpu_state c = { 0 };
	struct pkt *pend = NULL;      /* link mode: current batch */
	uint32_t npend = 0;
	unsigned long lineno = 0;
	uint64_t t0 = 0, tlast = 0;
	int configured = 0, ret = 0, have_pkt = 0;

	memset(&s, 0, sizeof(s));
	if (argc > 1) {
		int help = !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h");
		fprintf(help ? stdout : stderr,
			"usage: sn-trace fdrop < trace   (format: see backend/core/tools/trace_fdrop.c)\n");
		return help ? 0 : 2;
	}
	while (fgets(line, sizeof(line), stdin)) {
		struct pkt p;
		uint64_t v[4] = { 0, 0, 0, 0 };
		int n;

		lineno++;
		if (!strchr(line, '\n') && !feof(stdin)) {
			fprintf(stderr, "sn-trace fdrop: line %lu too long\n", lineno);
			goto bad;
		}
		n = trace_split(line, tok, MAX_TOK);
		if (n == 0 || tok[0][0] == '#')
			continue;
		if (!strcmp(tok[0], "config")) {
			if (configured || parse_config(tok, n, &s))
				goto bad;
			s.fd = sn_fdrop_create(&s.fcfg);
			if (!s.fd) {
				fprintf(stderr, "sn-trace fdrop: line %lu: config rejected: %s\n",
					lineno, strerror(errno));
				goto bad;
			}
			s.qcap = s.cpu ? s.buffer : 0;
			if (s.cpu) {
				s.q = calloc(s.qcap, sizeof(*s.q));
				c.done = calloc(s.batch, sizeof(*c.done));
			}
			pend = calloc(s.batch, sizeof(*pend));
			if (!pend || (s.cpu && (!s.q || !c.done)))
				goto nomem;
			configured = 1;
			continue;
		}
		if (!configured) {
			fprintf(stderr, "sn-trace fdrop: line %lu: config must come first\n", lineno);
			goto bad;
		}
		if ((n != 3 && n != 4) || trace_parse_u64(tok[0], &v[0]) || trace_parse_u64(tok[1], &v[1]) ||
		    trace_parse_u64(tok[2], &v[2]) || (n == 4 && trace_parse_u64(tok[3], &v[3])) ||
		    v[1] >= MAX_FLOW || v[2] > UINT32_MAX || v[3] > UINT32_MAX ||
		    (have_pkt && v[0] < tlast)) {
			fprintf(stderr, "sn-trace fdrop: line %lu: bad packet line "
				"(ARRIVAL_NS FLOW LEN [CYCLES], times non-decreasing)\n", lineno);
			goto bad;
		}
		p.t = v[0];
		p.flow = (uint32_t)v[1];
		p.len = (uint32_t)v[2];
		p.cycles = n == 4 ? (uint32_t)v[3] : p.len;
		if (!have_pkt) {
			t0 = p.t;
			c.now = (double)p.t;
			have_pkt = 1;
		}
		tlast = p.t;
		struct flow_acc *a = acc_of(&s, p.flow);
		if (!a)
			goto nomem;
		a->off_pkts++;
		a->off_units += p.len;
		if (!s.cpu) {
			pend[npend++] = p;
			if (npend == s.batch) {
				if (link_batch(&s, pend, npend))
					goto nomem;
				npend = 0;
			}
			continue;
		}
		/* cpu: let the CPU catch up to this arrival, then buffer it */
		while (s.qlen && c.now <= (double)p.t)
			cpu_poll(&s, &c);
		if (!s.qlen && c.now < (double)p.t)
			c.now = (double)p.t;
		cpu_arrive(&s, &p);
	}
	if (!configured) {
		fprintf(stderr, "sn-trace fdrop: no config line\n");
		goto bad;
	}
	if (!s.cpu && npend && link_batch(&s, pend, npend))
		goto nomem;
	while (s.cpu && s.qlen)
		cpu_poll(&s, &c);
	print_result(&s, t0, tlast);
	goto out;
nomem:
	fprintf(stderr, "sn-trace fdrop: out of memory\n");
bad:
	ret = 2;
out:
	free(pend);
	free(c.done);
	free(s.q);
	free(s.fin);
	free(s.acc);
	sn_fdrop_free(s.fd);
	return ret;
}
