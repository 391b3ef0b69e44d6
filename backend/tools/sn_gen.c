/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_gen.c — sn-gen: single-threaded DPDK traffic generator + sink + echo
 * peer for the schednic datapath tests and benchmark.
 *
 * This file is the shell around the loops of sn_genrun.c: command line,
 * EAL bring-up (no hugepages, unique --file-prefix, one lcore pinned to
 * --cpu), one net_virtio_user port per --port (a real virtio driver that
 * none of us wrote, talking vhost-user to the switch under test), the JSON
 * summary on stdout, and a clean exit on SIGINT/SIGTERM/--duration that
 * removes the DPDK runtime directory (/var/run/dpdk/<prefix>).
 */
#include "sn_gen.h"
#include "sn_genlat.h"
#include "sn_genpkt.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_kvargs.h>
#include <rte_lcore.h>
#include <rte_dev.h>

#define GEN_VERSION "0.1.0"

volatile sig_atomic_t sn_gen_stop;

static void on_signal(int sig)
{
	(void)sig;
	sn_gen_stop = 1;
}

static void usage(FILE *out)
{
	fprintf(out,
"usage: sn-gen bench|count|echo --port PATH[,DEVARGS] --port ... [options]\n"
"\n"
"One single-threaded DPDK process owning every net_virtio_user port.\n"
"  bench  send --size frames src port -> dst port as fast as possible, drain\n"
"         all ports, report Mpps over --duration after --warmup\n"
"  count  send exactly --count frames per flow (sequence + pattern), drain,\n"
"         report tx/rx/out-of-order/bad exactly\n"
"  echo   answer ARP and ICMP echo for --echo-ip on port --echo-port\n"
"\n"
"Ports and traffic:\n"
"  --port PATH[,K=V...]   vhost-user socket of one peer port (repeat; index =\n"
"                         order); K=V are extra net_virtio_user devargs\n"
"                         (default mac=02:53:47:00:00:<index+1>)\n"
"  --server               sn-gen listens on the sockets (virtio_user server=1);\n"
"                         default: connect to the switch's sockets\n"
"  --queue-size N         virtqueue size (default 1024)\n"
"  --queues N             queue pairs per port, 1..8 (virtio_user queues=N;\n"
"                         default 1); flow i sends on TX queue i mod N (bench:\n"
"                         one burst per TX queue in turn), every RX queue is\n"
"                         drained; fewer if the switch port does not offer MQ\n"
"                         (reported as ports[].queues)\n"
"  --flow SPEC            src=I,dst=J|MAC[,count=N][,smac=MAC][,phase=K][,size=B]\n"
"                         [,udp=SRCIP:SPORT-DSTIP:DPORT][,sports=N][,lat=1] (lat=1: one-\n"
"                         way latency per frame, driver TX -> sink RX, TSC)\n"
"                         [,udp6=SRC6.SPORT-DST6.DPORT] the same over IPv6 (at\n"
"                         least 62 B)\n"
"                         (sports=N: frame k of a udp= flow has source port\n"
"                         SPORT + k mod N: N 5-tuples, a flow-table spray)\n"
"                         (udp=: IPv4/UDP frames of\n"
"                         that 5-tuple, count mode only; a sn-gen sink counts\n"
"                         them as foreign)\n"
"                         [,arp=SPA-TPA] ARP requests from that sender IP\n"
"                         (sender MAC = source MAC; foreign to a sink)\n"
"                         [,nd=ns|na/SRC6/TARGET6/LLA] IPv6 neighbour\n"
"                         solicitations / advertisements from SRC6 for\n"
"                         TARGET6 with link-layer address option LLA (86 B;\n"
"                         foreign to a sink)\n"
"                         [,smacs=N] source MAC of frame k: smac's last\n"
"                         three bytes + k mod N (a MAC spray)\n"
"                         (repeat; default src=0,dst=1)\n"
"  --count N              frames per flow without count= (default 1000)\n"
"  --size B               frame size without FCS, 60..1514 (default 64)\n"
"  --burst N              frames per tx burst, 1..64 (default 32)\n"
"  --rate PPS             count mode pacing, all flows of a phase (default 0 =\n"
"                         unlimited)\n"
"  --gap-us N             count mode: pause N us after each burst (default 0)\n"
"  --sample-ms N          sampling sink: every N ms (1..10000) append one JSON\n"
"                         line {\"t_ns\", \"rx_bytes\": [per port], \"flow_rx_bytes\":\n"
"                         [per flow]} to --sample-file; t_ns = CLOCK_MONOTONIC\n"
"                         of the sample (rates: delta bytes / delta t_ns)\n"
"  --sample-file PATH     where the samples go (default: stderr)\n"
"  --lat-file PATH        at exit, one JSON line per lat=1 flow: {\"flow\",\n"
"                         \"tx_us\": [send time per seq], \"lat_us\": [one-way\n"
"                         latency per seq, null = lost], \"gap_us\": [time the\n"
"                         sink had not polled before reading it]}; flows[]\n"
"                         get \"latency\": {samples, lost, p50/p90/p99/max_us}\n"
"  --no-learn             no initial broadcast from each port's MAC\n"
"  --marker               write the deferred-completion opt-in marker\n"
"                         (num_buffers = 0x5344) in every TX virtio-net header,\n"
"                         as the patched guest driver does (bench mode: once\n"
"                         per frame as it is built, not in a TX callback)\n"
"  --hdr-write            bench mode: store num_buffers in every frame's TX\n"
"                         virtio-net header as it is built (0, or the marker\n"
"                         with --marker), as a guest kernel writes its header\n"
"                         for every frame; without it (and without --marker)\n"
"                         the PMD leaves an unchanged header line unwritten\n"
"  --tx-free-thresh N     TX queues' tx_free_thresh (default 0 = the PMD's,\n"
"                         min(size/4, 32)): the virtio PMD reclaims completed\n"
"                         TX descriptors in bulk once more than size - N are\n"
"                         used, else one per frame when the ring is full\n"
"Timing:\n"
"  --duration S           bench window / echo run time / count cap (0 = none)\n"
"  --warmup S             bench warmup (default 2)\n"
"  --grace S              count: drain time after the last frame (default 1)\n"
"  --phase-gap S          count: drain between phases (default 0.2)\n"
"  --settle S             wait after links are up (default 0.5)\n"
"  --connect-timeout S    wait for links (default 20)\n"
"  --sync DIR             count/echo: create DIR/ready, wait for DIR/go-learn,\n"
"                         DIR/go-<phase>; create DIR/sent-*, DIR/done; then\n"
"                         drain until SIGINT/SIGTERM (instead of timing)\n"
"Echo:\n"
"  --echo-ip A.B.C.D      IPv4 address to answer for\n"
"  --echo-port I          port index (default 0)\n"
"EAL:\n"
"  --cpu N                CPU of the single lcore (default 0)\n"
"  --mem MB               --no-huge memory (default 256)\n"
"  --file-prefix P        default sn-gen-<pid>\n"
"  --log-level L          EAL log level (default notice)\n"
"  -h, --help\n"
"Prints one JSON object on stdout. Exit 0 on success, 1 on error, 2 on usage.\n");
}

static int parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	char *end;

	if (s == NULL || *s == '\0' || *s == '-')
		return -EINVAL;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno != 0 || *end != '\0' || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

static int parse_secs(const char *s, double *out)
{
	char *end;

	errno = 0;
	double v = strtod(s, &end);
	if (errno != 0 || end == s || *end != '\0' || !(v >= 0) || v > 1e6)
		return -EINVAL;
	*out = v;
	return 0;
}

/* "A:P" -> host-order address and port. */
static int parse_ipport(const char *s, size_t n, uint32_t *ip, uint16_t *port)
{
	char buf[32], *colon;
	struct in_addr a;
	uint64_t p;

	if (n >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, n);
	buf[n] = '\0';
	colon = strchr(buf, ':');
	if (!colon)
		return -EINVAL;
	*colon = '\0';
	if (inet_pton(AF_INET, buf, &a) != 1 || parse_u64(colon + 1, 65535, &p) != 0)
		return -EINVAL;
	*ip = ntohl(a.s_addr);
	*port = (uint16_t)p;
	return 0;
}

static int parse_udp(const char *v, struct sn_gen_flow *f)
{
	const char *dash = strchr(v, '-');

	if (!dash || parse_ipport(v, (size_t)(dash - v), &f->ip_src, &f->udp_sport) ||
	    parse_ipport(dash + 1, strlen(dash + 1), &f->ip_dst, &f->udp_dport))
		return -EINVAL;
	f->udp = 4;
	return 0;
}

/* "ADDR6.PORT" (the port after the last dot, as tcpdump prints it). */
static int parse_ip6port(const char *s, size_t n, uint8_t ip[16], uint16_t *port)
{
	char buf[INET6_ADDRSTRLEN + 8], *dot;
	uint64_t p;

	if (n >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, n);
	buf[n] = '\0';
	dot = strrchr(buf, '.');
	if (!dot)
		return -EINVAL;
	*dot = '\0';
	if (inet_pton(AF_INET6, buf, ip) != 1 || parse_u64(dot + 1, 65535, &p) != 0)
		return -EINVAL;
	*port = (uint16_t)p;
	return 0;
}

static int parse_udp6(const char *v, struct sn_gen_flow *f)
{
	const char *dash = strchr(v, '-');

	if (f->udp || !dash || parse_ip6port(v, (size_t)(dash - v), f->ip6_src, &f->udp_sport) ||
	    parse_ip6port(dash + 1, strlen(dash + 1), f->ip6_dst, &f->udp_dport))
		return -EINVAL;
	f->udp = 6;
	return 0;
}

/* "ns|na/SRC6/TARGET6/LLA" into f (nd=). */
static int parse_nd(const char *v, struct sn_gen_flow *f)
{
	char buf[160], *part[4];
	unsigned n = 0;

	if (f->udp || f->arp || strlen(v) >= sizeof(buf))
		return -1;
	snprintf(buf, sizeof(buf), "%s", v);
	part[n++] = buf;
	for (char *c = buf; *c; c++) {
		if (*c != '/')
			continue;
		if (n == 4)
			return -1;
		*c = '\0';
		part[n++] = c + 1;
	}
	if (n != 4 || inet_pton(AF_INET6, part[1], f->nd_src) != 1 ||
	    inet_pton(AF_INET6, part[2], f->nd_tgt) != 1 ||
	    rte_ether_unformat_addr(part[3], &f->nd_lla) != 0)
		return -1;
	if (!strcmp(part[0], "ns"))
		f->nd = 135;
	else if (!strcmp(part[0], "na"))
		f->nd = 136;
	else
		return -1;
	return 0;
}

static int parse_flow(struct sn_gen *g, struct sn_gen_flow *f, const char *text,
		      uint64_t default_count)
{
	static const char *const keys[] = {"src", "dst", "count", "smac", "phase", "udp", "udp6",
					   "size", "lat", "arp", "smacs", "sports", "nd", NULL};
	struct rte_kvargs *kv = rte_kvargs_parse(text, keys);
	const char *v;
	uint64_t n;
	int rc = -EINVAL;

	if (kv == NULL) {
		fprintf(stderr, "sn-gen: --flow %s: unknown or malformed key\n", text);
		return -EINVAL;
	}
	memset(f, 0, sizeof(*f));
	f->count = default_count;
	f->dst_port = -1;
	v = rte_kvargs_get(kv, "src");
	if (v == NULL || parse_u64(v, g->nports - 1, &n) != 0) {
		fprintf(stderr, "sn-gen: --flow %s: src must be a port index < %u\n", text, g->nports);
		goto out;
	}
	f->src = (int)n;
	v = rte_kvargs_get(kv, "dst");
	if (v == NULL) {
		fprintf(stderr, "sn-gen: --flow %s: dst missing\n", text);
		goto out;
	}
	if (parse_u64(v, g->nports - 1, &n) == 0)
		f->dst_port = (int)n;
	else if (rte_ether_unformat_addr(v, &f->dst) != 0) {
		fprintf(stderr, "sn-gen: --flow %s: dst must be a port index or a MAC\n", text);
		goto out;
	}
	if ((v = rte_kvargs_get(kv, "count")) != NULL && parse_u64(v, UINT64_MAX / 2, &f->count) != 0) {
		fprintf(stderr, "sn-gen: --flow %s: bad count\n", text);
		goto out;
	}
	if ((v = rte_kvargs_get(kv, "smac")) != NULL) {
		if (rte_ether_unformat_addr(v, &f->smac) != 0) {
			fprintf(stderr, "sn-gen: --flow %s: bad smac\n", text);
			goto out;
		}
		f->has_smac = 1;
	}
	if ((v = rte_kvargs_get(kv, "phase")) != NULL) {
		if (parse_u64(v, 1000, &n) != 0) {
			fprintf(stderr, "sn-gen: --flow %s: phase must be 0..1000\n", text);
			goto out;
		}
		f->phase = (unsigned int)n;
	}
	if ((v = rte_kvargs_get(kv, "size")) != NULL) {
		if (parse_u64(v, SN_GENPKT_MAX_SIZE, &n) != 0 || n < SN_GENPKT_MIN_SIZE) {
			fprintf(stderr, "sn-gen: --flow %s: size must be %u..%u\n", text,
				SN_GENPKT_MIN_SIZE, SN_GENPKT_MAX_SIZE);
			goto out;
		}
		f->size = (uint16_t)n;
	}
	if ((v = rte_kvargs_get(kv, "udp")) != NULL && parse_udp(v, f) != 0) {
		fprintf(stderr, "sn-gen: --flow %s: udp must be SRCIP:SPORT-DSTIP:DPORT\n", text);
		goto out;
	}
	if ((v = rte_kvargs_get(kv, "udp6")) != NULL && parse_udp6(v, f) != 0) {
		fprintf(stderr, "sn-gen: --flow %s: udp6 must be SRC6.SPORT-DST6.DPORT (not with "
			"udp)\n", text);
		goto out;
	}
	if ((v = rte_kvargs_get(kv, "arp")) != NULL) {
		const char *dash = strchr(v, '-');
		uint16_t unused;
		char a[64];

		if (f->udp || !dash || (size_t)(dash - v) >= sizeof(a) - 3 ||
		    strlen(dash + 1) >= sizeof(a) - 3) {
			fprintf(stderr, "sn-gen: --flow %s: arp must be SPA-TPA (not with udp)\n", text);
			goto out;
		}
		/* parse_ipport wants IP:PORT */
		snprintf(a, sizeof(a), "%.*s:0", (int)(dash - v), v);
		if (parse_ipport(a, strlen(a), &f->ip_src, &unused)) {
			fprintf(stderr, "sn-gen: --flow %s: arp must be SPA-TPA\n", text);
			goto out;
		}
		snprintf(a, sizeof(a), "%s:0", dash + 1);
		if (parse_ipport(a, strlen(a), &f->ip_dst, &unused)) {
			fprintf(stderr, "sn-gen: --flow %s: arp must be SPA-TPA\n", text);
			goto out;
		}
		f->arp = 1;
	}
	if ((v = rte_kvargs_get(kv, "nd")) != NULL && parse_nd(v, f) != 0) {
		fprintf(stderr, "sn-gen: --flow %s: nd must be ns|na/SRC6/TARGET6/LLA "
			"(not with udp or arp)\n", text);
		goto out;
	}
	if ((v = rte_kvargs_get(kv, "smacs")) != NULL) {
		if (parse_u64(v, 1u << 24, &n) != 0 || n == 0) {
			fprintf(stderr, "sn-gen: --flow %s: smacs must be 1..16777216\n", text);
			goto out;
		}
		f->smacs = (uint32_t)n;
	}
	if ((v = rte_kvargs_get(kv, "sports")) != NULL) {
		if (!f->udp || parse_u64(v, 65536 - f->udp_sport, &n) != 0 || n == 0) {
			fprintf(stderr, "sn-gen: --flow %s: sports needs udp= or udp6= and must be 1..%u\n",
				text, f->udp ? 65536u - f->udp_sport : 0u);
			goto out;
		}
		f->udp_sports = (uint16_t)RTE_MIN(n, (uint64_t)UINT16_MAX);
	}
	if ((v = rte_kvargs_get(kv, "lat")) != NULL && strcmp(v, "0") != 0) {
		if (strcmp(v, "1") != 0 || sn_genlat_init(f) != 0) {
			fprintf(stderr, "sn-gen: --flow %s: lat must be 0 or 1, count 1..%u\n", text,
				SN_GENLAT_MAX_COUNT);
			goto out;
		}
	}
	rc = 0;
out:
	rte_kvargs_free(kv);
	return rc;
}

enum {
	OPT_PORT = 256, OPT_SERVER, OPT_QSIZE, OPT_FLOW, OPT_COUNT, OPT_SIZE, OPT_BURST,
	OPT_RATE, OPT_NOLEARN, OPT_DURATION, OPT_WARMUP, OPT_GRACE, OPT_PHASEGAP,
	OPT_SETTLE, OPT_CONNECT, OPT_SYNC, OPT_ECHOIP, OPT_ECHOPORT, OPT_CPU, OPT_MEM,
	OPT_PREFIX, OPT_LOGLEVEL, OPT_GAP, OPT_MARKER, OPT_QUEUES, OPT_SAMPLEMS,
	OPT_SAMPLEFILE, OPT_LATFILE, OPT_TXFREE, OPT_HDRWRITE,
};

struct cli {
	int server, marker;
	uint64_t qsize, count, cpu, mem;
	const char *prefix, *loglevel;
	const char *flows[SN_GEN_MAX_FLOWS];
	unsigned int nflows;
};

/* Returns 0, or 2 for a usage error (message printed), or 1 after --help. */
static int parse_cli(int argc, char **argv, struct sn_gen *g, struct cli *c)
{
	static const struct option opts[] = {
		{"port", required_argument, NULL, OPT_PORT},
		{"server", no_argument, NULL, OPT_SERVER},
		{"queue-size", required_argument, NULL, OPT_QSIZE},
		{"flow", required_argument, NULL, OPT_FLOW},
		{"count", required_argument, NULL, OPT_COUNT},
		{"size", required_argument, NULL, OPT_SIZE},
		{"burst", required_argument, NULL, OPT_BURST},
		{"rate", required_argument, NULL, OPT_RATE},
		{"no-learn", no_argument, NULL, OPT_NOLEARN},
		{"duration", required_argument, NULL, OPT_DURATION},
		{"warmup", required_argument, NULL, OPT_WARMUP},
		{"grace", required_argument, NULL, OPT_GRACE},
		{"phase-gap", required_argument, NULL, OPT_PHASEGAP},
		{"settle", required_argument, NULL, OPT_SETTLE},
		{"connect-timeout", required_argument, NULL, OPT_CONNECT},
		{"sync", required_argument, NULL, OPT_SYNC},
		{"echo-ip", required_argument, NULL, OPT_ECHOIP},
		{"echo-port", required_argument, NULL, OPT_ECHOPORT},
		{"cpu", required_argument, NULL, OPT_CPU},
		{"mem", required_argument, NULL, OPT_MEM},
		{"file-prefix", required_argument, NULL, OPT_PREFIX},
		{"log-level", required_argument, NULL, OPT_LOGLEVEL},
		{"gap-us", required_argument, NULL, OPT_GAP},
		{"marker", no_argument, NULL, OPT_MARKER},
		{"queues", required_argument, NULL, OPT_QUEUES},
		{"sample-ms", required_argument, NULL, OPT_SAMPLEMS},
		{"sample-file", required_argument, NULL, OPT_SAMPLEFILE},
		{"lat-file", required_argument, NULL, OPT_LATFILE},
		{"tx-free-thresh", required_argument, NULL, OPT_TXFREE},
		{"hdr-write", no_argument, NULL, OPT_HDRWRITE},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	uint64_t n;
	int o, bad = 0;
	const char *echo_ip = NULL;

	while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (o) {
		case OPT_PORT: {
			if (g->nports == SN_GEN_MAX_PORTS) {
				fprintf(stderr, "sn-gen: at most %d ports\n", SN_GEN_MAX_PORTS);
				return 2;
			}
			struct sn_gen_port *p = &g->ports[g->nports++];
			const char *comma = strchr(optarg, ',');
			size_t plen = comma ? (size_t)(comma - optarg) : strlen(optarg);
			if (plen == 0 || plen >= sizeof(p->path) ||
			    (comma && strlen(comma + 1) >= sizeof(p->extra))) {
				fprintf(stderr, "sn-gen: --port %s: bad or too long\n", optarg);
				return 2;
			}
			memcpy(p->path, optarg, plen);
			p->path[plen] = '\0';
			if (comma)
				snprintf(p->extra, sizeof(p->extra), "%s", comma + 1);
			break;
		}
		case OPT_SERVER: c->server = 1; break;
		case OPT_QSIZE: bad |= parse_u64(optarg, 4096, &c->qsize) || !rte_is_power_of_2((uint32_t)c->qsize); break;
		case OPT_FLOW:
			if (c->nflows == SN_GEN_MAX_FLOWS) {
				fprintf(stderr, "sn-gen: at most %d flows\n", SN_GEN_MAX_FLOWS);
				return 2;
			}
			c->flows[c->nflows++] = optarg;
			break;
		case OPT_COUNT: bad |= parse_u64(optarg, UINT64_MAX / 2, &c->count) != 0; break;
		case OPT_SIZE:
			bad |= parse_u64(optarg, SN_GENPKT_MAX_SIZE, &n) != 0 || n < SN_GENPKT_MIN_SIZE;
			g->size = (uint16_t)n;
			break;
		case OPT_BURST:
			bad |= parse_u64(optarg, SN_GEN_BURST_MAX, &n) != 0 || n == 0;
			g->burst = (uint16_t)n;
			break;
		case OPT_RATE: bad |= parse_u64(optarg, 1000000000, &g->rate_pps) != 0; break;
		case OPT_NOLEARN: g->learn = 0; break;
		case OPT_MARKER: c->marker = 1; g->marker = 1; break;
		case OPT_HDRWRITE: g->hdr_write = 1; break;
		case OPT_TXFREE:
			bad |= parse_u64(optarg, 4093, &n) != 0;
			g->tx_free_thresh = (uint16_t)n;
			break;
		case OPT_DURATION: bad |= parse_secs(optarg, &g->duration_s) != 0; break;
		case OPT_WARMUP: bad |= parse_secs(optarg, &g->warmup_s) != 0; break;
		case OPT_GRACE: bad |= parse_secs(optarg, &g->grace_s) != 0; break;
		case OPT_PHASEGAP: bad |= parse_secs(optarg, &g->phase_gap_s) != 0; break;
		case OPT_SETTLE: bad |= parse_secs(optarg, &g->settle_s) != 0; break;
		case OPT_CONNECT: bad |= parse_secs(optarg, &g->connect_s) != 0; break;
		case OPT_SYNC: g->sync_dir = optarg; break;
		case OPT_ECHOIP: echo_ip = optarg; break;
		case OPT_ECHOPORT:
			bad |= parse_u64(optarg, SN_GEN_MAX_PORTS - 1, &n) != 0;
			g->echo_port = (int)n;
			break;
		case OPT_CPU: bad |= parse_u64(optarg, 1023, &c->cpu) != 0; break;
		case OPT_MEM: bad |= parse_u64(optarg, 65536, &c->mem) != 0 || c->mem < 64; break;
		case OPT_PREFIX: c->prefix = optarg; break;
		case OPT_LOGLEVEL: c->loglevel = optarg; break;
		case OPT_GAP: bad |= parse_u64(optarg, 10000000, &g->gap_us) != 0; break;
		case OPT_QUEUES:
			bad |= parse_u64(optarg, SN_GEN_MAX_QUEUES, &n) != 0 || n == 0;
			g->queues = (uint16_t)n;
			break;
		case OPT_SAMPLEMS:
			bad |= parse_u64(optarg, 10000, &g->sample_ms) != 0 || g->sample_ms == 0;
			break;
		case OPT_SAMPLEFILE: g->sample_path = optarg; break;
		case OPT_LATFILE: g->lat_path = optarg; break;
		case 'h': usage(stdout); return 1;
		default: usage(stderr); return 2;
		}
		if (bad) {
			fprintf(stderr, "sn-gen: bad value for --%s: %s\n",
				opts[o - OPT_PORT].name, optarg);
			return 2;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "sn-gen: exactly one mode (bench, count, echo) expected\n");
		return 2;
	}
	const char *mode = argv[optind];
	if (strcmp(mode, "bench") == 0)
		g->mode = SN_GEN_BENCH;
	else if (strcmp(mode, "count") == 0)
		g->mode = SN_GEN_COUNT;
	else if (strcmp(mode, "echo") == 0)
		g->mode = SN_GEN_ECHO;
	else {
		fprintf(stderr, "sn-gen: unknown mode '%s'\n", mode);
		return 2;
	}
	if (g->nports == 0 || (g->mode != SN_GEN_ECHO && g->nports < 2 && c->nflows == 0)) {
		fprintf(stderr, "sn-gen: %s needs --port (two for the default flow)\n", mode);
		return 2;
	}
	if (g->mode == SN_GEN_ECHO) {
		struct in_addr a;
		if (echo_ip == NULL || inet_pton(AF_INET, echo_ip, &a) != 1) {
			fprintf(stderr, "sn-gen: echo needs --echo-ip A.B.C.D\n");
			return 2;
		}
		g->echo_ip = a.s_addr;
		if ((unsigned int)g->echo_port >= g->nports) {
			fprintf(stderr, "sn-gen: --echo-port out of range\n");
			return 2;
		}
	}
	if (g->hdr_write && g->mode != SN_GEN_BENCH) {
		fprintf(stderr, "sn-gen: --hdr-write is a bench mode option\n");
		return 2;
	}
	if (g->mode == SN_GEN_BENCH && g->duration_s <= 0) {
		fprintf(stderr, "sn-gen: bench needs --duration > 0\n");
		return 2;
	}
	return 0;
}

static int build_eal_args(const struct cli *c, char *store, size_t cap,
			  char **argv, int *argc)
{
	size_t used = 0;
	int n = 0;

#define ARG(...) do {                                                         \
		int w_ = snprintf(store + used, cap - used, __VA_ARGS__);     \
		if (w_ < 0 || (size_t)w_ >= cap - used)                       \
			return -E2BIG;                                        \
		argv[n++] = store + used;                                     \
		used += (size_t)w_ + 1;                                       \
	} while (0)
	ARG("sn-gen");
	ARG("--no-huge");
	ARG("-m");
	ARG("%lu", (unsigned long)c->mem);
	ARG("--no-pci");
	ARG("--file-prefix");
	if (c->prefix)
		ARG("%s", c->prefix);
	else
		ARG("sn-gen-%d", (int)getpid());
	ARG("--lcores");
	ARG("0@%lu", (unsigned long)c->cpu);
	ARG("--log-level");
	ARG("%s", c->loglevel ? c->loglevel : "notice");
#undef ARG
	*argc = n;
	return 0;
}

/* --marker: the virtio PMD builds a frame's virtio-net header (12 bytes
 * with VERSION_1) in the mbuf headroom right before the data when it can
 * push it there (one segment, refcnt 1 — every sn-gen frame) and writes
 * every field but num_buffers; put the opt-in marker of
 * guest-driver-patch/README.md there first. */
static uint16_t marker_cb(uint16_t port, uint16_t queue, struct rte_mbuf **pkts,
			  uint16_t n, void *arg)
{
	(void)port, (void)queue, (void)arg;
	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		uint16_t v = rte_cpu_to_le_16(SN_GEN_MARKER_MAGIC);

		if (rte_pktmbuf_headroom(m) >= SN_GEN_VNET_HDR_LEN)
			memcpy(rte_pktmbuf_mtod_offset(m, uint8_t *, -2), &v, sizeof(v));
	}
	return n;
}

/* Probe port i as net_virtio_user<i> after EAL init (rte_dev_probe, not
 * --vdev), so that a signal interrupting a server-mode port's blocking
 * accept() stops us instead of moving on to the next port's accept(). */
static int port_setup(struct sn_gen *g, const struct cli *c, unsigned int i)
{
	struct sn_gen_port *p = &g->ports[i];
	struct rte_eth_conf conf;
	char name[RTE_ETH_NAME_MAX_LEN], args[700], mac[32] = "";
	int rc;

	if (sn_gen_stop)
		return -EINTR;
	if (strstr(p->extra, "mac=") == NULL)
		snprintf(mac, sizeof(mac), ",mac=02:53:47:00:00:%02x", i + 1);
	snprintf(name, sizeof(name), "net_virtio_user%u", i);
	if (snprintf(args, sizeof(args), "%s,path=%s,queues=%u,queue_size=%lu,server=%d%s%s%s",
		     name, p->path, (unsigned)g->queues, (unsigned long)c->qsize, c->server, mac,
		     p->extra[0] ? "," : "", p->extra) >= (int)sizeof(args))
		return -E2BIG;
	if ((rc = rte_dev_probe(args)) != 0 ||
	    (rc = rte_eth_dev_get_port_by_name(name, &p->id)) != 0) {
		fprintf(stderr, "sn-gen: port %u (%s) did not probe%s\n", i, p->path,
			sn_gen_stop ? " (interrupted)" : "");
		return rc < 0 ? rc : -ENODEV;
	}
	uint16_t qsize = (uint16_t)c->qsize;
	struct rte_eth_txconf txc;

	memset(&conf, 0, sizeof(conf));
	memset(&txc, 0, sizeof(txc));
	p->nq = g->queues;
	{
		/* virtio-user in server mode re-accepts a restarted vhost backend
		 * from its link-state interrupt (engineer F, restart tests). */
		struct rte_eth_dev_info info;

		if (rte_eth_dev_info_get(p->id, &info) == 0) {
			txc = info.default_txconf;
			if (info.dev_flags && (*info.dev_flags & RTE_ETH_DEV_INTR_LSC))
				conf.intr_conf.lsc = 1;
			/* A backend without MQ: the driver offers one pair. */
			p->nq = (uint16_t)RTE_MIN(RTE_MIN(p->nq, info.max_rx_queues),
						  info.max_tx_queues);
			if (p->nq == 0)
				p->nq = 1;
		}
	}
	if ((rc = rte_eth_dev_configure(p->id, p->nq, p->nq, &conf)) != 0) {
		fprintf(stderr, "sn-gen: port %u (%s) configure: %s\n", i, p->path, rte_strerror(-rc));
		return rc;
	}
	/* --tx-free-thresh: the virtio PMD rejects >= size - 3. */
	if (g->tx_free_thresh && g->tx_free_thresh >= qsize - 3) {
		fprintf(stderr, "sn-gen: --tx-free-thresh %u: must be < queue size - 3 (%u)\n",
			g->tx_free_thresh, qsize - 3);
		return -EINVAL;
	}
	txc.tx_free_thresh = g->tx_free_thresh;
	for (uint16_t q = 0; q < p->nq; q++)
		if ((rc = rte_eth_rx_queue_setup(p->id, q, qsize, rte_socket_id(), NULL, g->mp)) != 0 ||
		    (rc = rte_eth_tx_queue_setup(p->id, q, qsize, rte_socket_id(),
						 g->tx_free_thresh ? &txc : NULL)) != 0) {
			fprintf(stderr, "sn-gen: port %u (%s) queue %u: %s\n", i, p->path, q,
				rte_strerror(-rc));
			return rc;
		}
	if ((rc = rte_eth_dev_start(p->id)) != 0 ||
	    (rc = rte_eth_macaddr_get(p->id, &p->mac)) != 0) {
		fprintf(stderr, "sn-gen: port %u (%s) setup: %s\n", i, p->path, rte_strerror(-rc));
		return rc;
	}
	for (uint16_t q = 0; c->marker && q < p->nq; q++)  /* every TX queue */
		if (!(p->marker_cb[q] = rte_eth_add_tx_callback(p->id, q, marker_cb, NULL))) {
			fprintf(stderr, "sn-gen: port %u: cannot add the marker tx callback (queue %u)\n",
				i, q);
			return -ENOTSUP;
		}
	return 0;
}

static json_t *mac_json(const struct rte_ether_addr *a)
{
	char buf[RTE_ETHER_ADDR_FMT_SIZE];

	rte_ether_format_addr(buf, sizeof(buf), a);
	return json_string(buf);
}

static void report(const struct sn_gen *g, int rc)
{
	static const char *const modes[] = {"bench", "count", "echo"};
	json_t *root = json_object(), *ports = json_array(), *flows = json_array();

	for (unsigned int i = 0; i < g->nports; i++) {
		const struct sn_gen_port *p = &g->ports[i];
		json_array_append_new(ports, json_pack(
			"{s:i, s:s, s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
			"index", (int)i, "path", p->path, "mac", mac_json(&p->mac),
			"tx_packets", (json_int_t)p->tx_packets, "tx_bytes", (json_int_t)p->tx_bytes,
			"rx_packets", (json_int_t)p->rx_packets, "rx_bytes", (json_int_t)p->rx_bytes,
			"tx_learn", (json_int_t)p->tx_learn, "rx_learn", (json_int_t)p->rx_learn,
			"rx_data", (json_int_t)p->rx_data, "rx_foreign", (json_int_t)p->rx_foreign,
			"rx_bad", (json_int_t)p->rx_bad, "echo_arp", (json_int_t)p->echo_arp,
			"echo_icmp", (json_int_t)p->echo_icmp,
			"echo_tx_fail", (json_int_t)p->echo_tx_fail,
			"link_downs", (json_int_t)p->link_downs));
		json_t *po = json_array_get(ports, json_array_size(ports) - 1);
		json_t *rq = json_array(), *tq = json_array();
		for (unsigned int q = 0; q < p->nq; q++) {
			json_array_append_new(rq, json_integer((json_int_t)p->rx_q[q]));
			json_array_append_new(tq, json_integer((json_int_t)p->tx_q[q]));
		}
		json_object_set_new(po, "queues", json_integer(p->nq));
		json_object_set_new(po, "rx_by_queue", rq);
		json_object_set_new(po, "tx_by_queue", tq);
	}
	for (unsigned int i = 0; g->mode == SN_GEN_COUNT && i < g->nflows; i++) {
		const struct sn_gen_flow *f = &g->flows[i];
		json_t *by = json_array();
		for (unsigned int p = 0; p < g->nports; p++)
			json_array_append_new(by, json_integer((json_int_t)f->rx_by_port[p]));
		json_array_append_new(flows, json_pack(
			"{s:i, s:o, s:o, s:o, s:i, s:I, s:I, s:I, s:o, s:I, s:I}",
			"src", f->src,
			"dst_port", f->dst_port >= 0 ? json_integer(f->dst_port) : json_null(),
			"dst", mac_json(&f->dst),
			"smac", mac_json(f->has_smac ? &f->smac : &g->ports[f->src].mac),
			"phase", (int)f->phase, "count", (json_int_t)f->count,
			"tx", (json_int_t)f->sent, "rx", (json_int_t)f->rx, "rx_by_port", by,
			"rx_ooo", (json_int_t)f->rx_ooo, "rx_bad", (json_int_t)f->rx_bad));
		if (f->lat_tx)
			json_object_set_new(json_array_get(flows, json_array_size(flows) - 1),
					    "latency", sn_genlat_summary(g, f));
	}
	json_object_set_new(root, "mode", json_string(modes[g->mode]));
	json_object_set_new(root, "ok", json_boolean(rc == 0));
	json_object_set_new(root, "completed", json_boolean(g->completed));
	json_object_set_new(root, "run_id", json_integer(g->run_id));
	json_object_set_new(root, "size", json_integer(g->size));
	json_object_set_new(root, "elapsed_s", json_real(g->elapsed_s));
	json_object_set_new(root, "alloc_fail", json_integer((json_int_t)g->alloc_fail));
	json_object_set_new(root, "ports", ports);
	json_object_set_new(root, "flows", flows);
	if (g->mode == SN_GEN_BENCH) {
		double w = g->bench_window_s > 0 ? g->bench_window_s : 1;
		json_object_set_new(root, "bench", json_pack("{s:f, s:f, s:I, s:I, s:f, s:f, s:I, s:I, s:I, s:I, s:I}",
			"warmup_s", g->warmup_s, "window_s", g->bench_window_s,
			"tx_packets", (json_int_t)g->bench_tx, "rx_packets", (json_int_t)g->bench_rx,
			"tx_mpps", (double)g->bench_tx / w / 1e6,
			"rx_mpps", (double)g->bench_rx / w / 1e6,
			"loops", (json_int_t)g->bench_loops, "tx_calls", (json_int_t)g->bench_tx_calls,
			"tx_zero_calls", (json_int_t)g->bench_tx_zero,
			"rx_empty_polls", (json_int_t)g->bench_rx_empty,
			"hdr_stores", (json_int_t)g->bench_hdr_stores));
	}
	json_dumpf(root, stdout, JSON_COMPACT);
	fputc('\n', stdout);
	fflush(stdout);
	json_decref(root);
}

/* Remove the EAL runtime dir (flat: config, fbarray, mp socket, telemetry). */
static void remove_runtime_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, ".."))
			unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
	if (rmdir(dir) != 0 && errno != ENOENT)
		fprintf(stderr, "sn-gen: cannot remove %s: %s\n", dir, strerror(errno));
}

int main(int argc, char **argv)
{
	static struct sn_gen g;
	struct cli c = {.qsize = 1024, .count = 1000, .mem = 256};
	char store[8192], *eal_argv[64], rundir[PATH_MAX] = "";
	int eal_argc, rc;

	g.size = 64;
	g.burst = 32;
	g.queues = 1;
	g.learn = 1;
	g.warmup_s = 2;
	g.grace_s = 1;
	g.phase_gap_s = 0.2;
	g.settle_s = 0.5;
	g.connect_s = 20;
	if ((rc = parse_cli(argc, argv, &g, &c)) != 0)
		return rc == 1 ? 0 : 2;
	if (build_eal_args(&c, store, sizeof(store), eal_argv, &eal_argc) != 0) {
		fprintf(stderr, "sn-gen: arguments too long\n");
		return 2;
	}
	/* No SA_RESTART: a virtio-user server port blocks in accept() during
	 * the EAL probe until its peer connects; SIGTERM must interrupt it. */
	struct sigaction sa = {.sa_handler = on_signal};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	rc = rte_eal_init(eal_argc, eal_argv);
	snprintf(rundir, sizeof(rundir), "%s", rte_eal_get_runtime_dir());
	if (rc < 0) {
		fprintf(stderr, "sn-gen: EAL init failed: %s\n", rte_strerror(rte_errno));
		rc = -rte_errno;
		goto out_files;
	}
	g.run_id = (uint32_t)getpid();
	g.hz = rte_get_tsc_hz();
	rc = -ENOMEM;
	g.mp = rte_pktmbuf_pool_create("sn_gen_mp", 8192 * g.nports - 1, 256, 0,
				       RTE_MBUF_DEFAULT_BUF_SIZE, rte_socket_id());
	if (g.mp == NULL) {
		fprintf(stderr, "sn-gen: mempool: %s\n", rte_strerror(rte_errno));
		goto out_eal;
	}
	for (unsigned int i = 0; i < g.nports; i++)
		if ((rc = port_setup(&g, &c, i)) != 0)
			goto out_ports;
	g.nflows = c.nflows;
	for (unsigned int i = 0; i < c.nflows; i++)
		if ((rc = parse_flow(&g, &g.flows[i], c.flows[i], c.count)) != 0)
			goto out_ports;
	if (g.nflows == 0 && g.nports >= 2) {
		g.nflows = 1;
		g.flows[0] = (struct sn_gen_flow){.src = 0, .dst_port = 1, .count = c.count};
	}
	for (unsigned int i = 0; i < g.nflows; i++)
		if (g.flows[i].dst_port >= 0)
			g.flows[i].dst = g.ports[g.flows[i].dst_port].mac;
	if (g.mode == SN_GEN_BENCH && g.nflows == 0) {
		fprintf(stderr, "sn-gen: bench needs a flow\n");
		rc = -EINVAL;
		goto out_ports;
	}
	rc = sn_gen_run(&g);
	report(&g, rc);
	if (g.lat_path) {
		int r = sn_genlat_write(&g, g.lat_path);

		if (r)
			fprintf(stderr, "sn-gen: --lat-file %s: %s\n", g.lat_path, strerror(-r));
	}
out_ports:
	for (unsigned int i = 0; i < g.nflows; i++)
		sn_genlat_free(&g.flows[i]);
	for (unsigned int i = 0; i < g.nports; i++) {
		struct sn_gen_port *p = &g.ports[i];
		if (p->npend)
			rte_pktmbuf_free_bulk(p->pend, p->npend);
		p->npend = 0;
	}
	uint16_t pid;
	RTE_ETH_FOREACH_DEV(pid) {
		rte_eth_dev_stop(pid);
		rte_eth_dev_close(pid);
	}
	rte_mempool_free(g.mp);
out_eal:
	rte_eal_cleanup();
out_files:
	if (c.server)
		for (unsigned int i = 0; i < g.nports; i++) {
			struct stat st;
			if (lstat(g.ports[i].path, &st) == 0 && S_ISSOCK(st.st_mode))
				unlink(g.ports[i].path);
		}
	if (rundir[0])
		remove_runtime_dir(rundir);
	return rc == 0 ? 0 : 1;
}
