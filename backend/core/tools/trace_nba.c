/* SPDX-License-Identifier: BSD-3-Clause */
/* trace_nba.c — `sn-trace nba`: drive sn_nba from a text trace.
 *
 * Input (stdin), one command per line; blank lines and lines starting
 * with '#' are ignored; numbers are unsigned decimal:
 *
 *   config cores=N aggregate=BYTES_PER_S [period=NS] [stale=NS]
 *          [headroom_ppm=P] [saturation_ppm=P|off] [growth_ppm=P]
 *       must come first, exactly once. headroom_ppm=0 really means none.
 *   report CORE BYTES TS_NS [BACKLOG]
 *                             core CORE's cumulative byte count at TS_NS
 *                             and its backlog in bytes (default 0)
 *   update NOW_NS             sn_nba_update(nba, NOW_NS)
 *   aggregate BYTES_PER_S     sn_nba_set_aggregate
 *
 * Output (stdout): one JSON object per `update` line, on one line:
 *   {"now": NOW_NS, "recomputed": 0|1, "epoch": E,
 *    "demand": [bytes/s per core], "state": ["idle"|"active"|"saturated"],
 *    "grant": [bytes/s per core]}
 * demand/state are the allocator's view after its last recomputation.
 *
 * Exit status: 0 ok, 2 bad usage or bad input (message on stderr names
 * the line).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace_util.h"

#include "sn_nba.h"

#define MAX_TOK 16

int sn_trace_nba_main(int argc, char **argv);


static int parse_config(char **tok, int n, struct sn_nba_cfg *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	for (int i = 1; i < n; i++) {
		char *eq = strchr(tok[i], '=');
		int rc;

		if (!eq)
			return -EINVAL;
		*eq++ = '\0';
		if (!strcmp(tok[i], "cores"))
			rc = trace_parse_u32(eq, &cfg->n_cores);
		else if (!strcmp(tok[i], "aggregate"))
			rc = trace_parse_u64(eq, &cfg->aggregate_bps);
		else if (!strcmp(tok[i], "period"))
			rc = trace_parse_u64(eq, &cfg->period_ns);
		else if (!strcmp(tok[i], "stale"))
			rc = trace_parse_u64(eq, &cfg->stale_ns);
		else if (!strcmp(tok[i], "headroom_ppm")) {
			rc = trace_parse_u32(eq, &cfg->headroom_ppm);
			if (!rc && cfg->headroom_ppm == 0)
				cfg->flags |= SN_NBA_F_NO_HEADROOM;
		} else if (!strcmp(tok[i], "saturation_ppm")) {
			if (!strcmp(eq, "off")) {
				cfg->saturation_ppm = SN_NBA_SAT_OFF;
				rc = 0;
			} else {
				rc = trace_parse_u32(eq, &cfg->saturation_ppm);
			}
		} else if (!strcmp(tok[i], "growth_ppm"))
			rc = trace_parse_u32(eq, &cfg->growth_ppm);
		else
			rc = -EINVAL;
		if (rc) {
			fprintf(stderr, "sn-trace nba: bad config key/value '%s=%s'\n", tok[i], eq);
			return rc;
		}
	}
	return 0;
}

static void print_update(struct sn_nba *nba, uint32_t n, uint64_t now, int rc)
{
	static const char *const names[] = { "idle", "active", "saturated" };
	struct sn_nba_core_stats st;

	printf("{\"now\": %" PRIu64 ", \"recomputed\": %d, \"epoch\": %" PRIu64 ", \"demand\": [",
	       now, rc, sn_nba_epoch(nba));
	for (uint32_t i = 0; i < n; i++) {
		sn_nba_core_stats(nba, i, &st);
		printf("%s%.17g", i ? ", " : "", st.demand_bps);
	}
	printf("], \"state\": [");
	for (uint32_t i = 0; i < n; i++) {
		sn_nba_core_stats(nba, i, &st);
		printf("%s\"%s\"", i ? ", " : "", names[st.state]);
	}
	printf("], \"grant\": [");
	for (uint32_t i = 0; i < n; i++)
		printf("%s%" PRIu64, i ? ", " : "", sn_nba_grant(nba, i));
	printf("]}\n");
}

int sn_trace_nba_main(int argc, char **argv)
{
	char line[1024], *tok[MAX_TOK];
	struct sn_nba *nba = NULL;
	struct sn_nba_cfg cfg;
	unsigned long lineno = 0;
	int ret = 0;

	if (argc > 1) {
		int help = !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h");
		fprintf(help ? stdout : stderr,
			"usage: sn-trace nba < trace   (format: see backend/core/tools/trace_nba.c)\n");
		return help ? 0 : 2;
	}
	while (fgets(line, sizeof(line), stdin)) {
		uint64_t a, b, c, q = 0;
		int n;

		lineno++;
		if (!strchr(line, '\n') && !feof(stdin)) {
			fprintf(stderr, "sn-trace nba: line %lu too long\n", lineno);
			goto bad;
		}
		n = trace_split(line, tok, MAX_TOK);
		if (n == 0 || tok[0][0] == '#')
			continue;
		if (!strcmp(tok[0], "config")) {
			if (nba || parse_config(tok, n, &cfg))
				goto bad;
			nba = sn_nba_create(&cfg);
			if (!nba) {
				fprintf(stderr, "sn-trace nba: line %lu: config rejected: %s\n",
					lineno, strerror(errno));
				goto bad;
			}
			continue;
		}
		if (!nba) {
			fprintf(stderr, "sn-trace nba: line %lu: config must come first\n", lineno);
			goto bad;
		}
		if (!strcmp(tok[0], "report") && (n == 4 || n == 5) && !trace_parse_u64(tok[1], &a) &&
		    !trace_parse_u64(tok[2], &b) && !trace_parse_u64(tok[3], &c) && a < cfg.n_cores &&
		    (n == 4 || !trace_parse_u64(tok[4], &q))) {
			sn_nba_report(nba, (uint32_t)a, b, n == 5 ? q : 0, c);
		} else if (!strcmp(tok[0], "update") && n == 2 && !trace_parse_u64(tok[1], &a)) {
			print_update(nba, cfg.n_cores, a, sn_nba_update(nba, a));
		} else if (!strcmp(tok[0], "aggregate") && n == 2 && !trace_parse_u64(tok[1], &a) &&
			   !sn_nba_set_aggregate(nba, a)) {
			continue;
		} else {
			fprintf(stderr, "sn-trace nba: line %lu: bad command\n", lineno);
			goto bad;
		}
	}
	goto out;
bad:
	ret = 2;
out:
	sn_nba_free(nba);
	return ret;
}
