/* SPDX-License-Identifier: BSD-3-Clause */
/* sn-bench — micro-benchmarks of the scheduling core against baselines
 * measured in the same run (binary heap, DRR, rte_ring, linear scan).
 *
 *   sn-bench [--json] [--reps N] [--quick] [--filter SUBSTR | --filter NAME$]
 *
 * Prints a table, or with --json one object:
 *   {"machine": {...}, "command": "...", "results": [{"name", "ns_per_op", "mops", ...}]}
 * Numbers are medians of --reps repetitions. Use them as ratios against the
 * baselines of the same run: these machines are shared and noisy.
 */
#include "sn_bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#define MAX_RESULTS 128

static struct {
	char name[96];
	double ns_per_op;
	double mops;
	char note[64];
} results[MAX_RESULTS];
static int n_results;
static int reps = 5;
static double scale = 1.0;
static const char *filter;
static volatile uint64_t sink_v;

int sn_bench_reps(void) { return reps; }
double sn_bench_scale(void) { return scale; }
void sn_bench_sink(uint64_t v) { sink_v += v; }

int sn_bench_selected(const char *name)
{
	size_t n;

	if (!filter)
		return 1;
	n = strlen(filter);
	if (n && filter[n - 1] == '$')   /* "NAME$": exactly this case */
		return strlen(name) == n - 1 && !strncmp(name, filter, n - 1);
	return strstr(name, filter) != NULL;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

double sn_bench_median(double *v, int n)
{
	if (n <= 0)
		return 0;
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void sn_bench_report(const char *name, double ns_per_op, double mops, const char *note)
{
	if (n_results == MAX_RESULTS) {
		fprintf(stderr, "sn-bench: too many results\n");
		exit(1);
	}
	snprintf(results[n_results].name, sizeof(results[0].name), "%s", name);
	results[n_results].ns_per_op = ns_per_op;
	results[n_results].mops = mops > 0 ? mops : (ns_per_op > 0 ? 1e3 / ns_per_op : 0);
	snprintf(results[n_results].note, sizeof(results[0].note), "%s", note ? note : "");
	n_results++;
	fprintf(stderr, "  %-48s %10.2f ns/op %10.2f Mops %s\n", name, ns_per_op,
		results[n_results - 1].mops, note ? note : "");
}

static void cpu_model(char *buf, size_t len)
{
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[256];

	snprintf(buf, len, "unknown");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "model name", 10)) {
			char *p = strchr(line, ':');
			if (p) {
				p += 2;
				p[strcspn(p, "\n")] = 0;
				snprintf(buf, len, "%s", p);
			}
			break;
		}
	}
	fclose(f);
}

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			printf("\\u%04x", *s);
		else
			putchar(*s);
	}
	putchar('"');
}

static void usage(FILE *f)
{
	fprintf(f, "usage: sn-bench [--json] [--reps N] [--quick] [--filter SUBSTR]\n"
		   "  --filter SUBSTR  run the cases whose name contains SUBSTR;\n"
		   "                   a trailing '$' (NAME$) selects exactly NAME\n");
}

int main(int argc, char **argv)
{
	int json = 0;
	char cmd[512] = "";
	size_t off = 0;

	for (int i = 0; i < argc; i++)
		off += (size_t)snprintf(cmd + off, off < sizeof(cmd) ? sizeof(cmd) - off : 0,
					"%s%s", i ? " " : "", argv[i]);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = 1;
		} else if (!strcmp(argv[i], "--quick")) {
			scale = 0.05;
			reps = 3;
		} else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
			char *end;
			long r = strtol(argv[++i], &end, 10);
			if (*end || r < 1 || r > 1000) {
				fprintf(stderr, "sn-bench: --reps wants 1..1000\n");
				return 2;
			}
			reps = (int)r;
		} else if (!strcmp(argv[i], "--filter") && i + 1 < argc) {
			filter = argv[++i];
		} else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else {
			usage(stderr);
			return 2;
		}
	}

	fprintf(stderr, "sn-bench: %d reps per case, scale %.2f\n", reps, scale);
	sn_bench_twheel();
	sn_bench_sched();
	sn_bench_tstamp();
	sn_bench_mbox();
	sn_bench_arbiter();

	if (json) {
		char cpu[160];
		struct utsname u;

		cpu_model(cpu, sizeof(cpu));
		uname(&u);
		printf("{\"machine\": {\"cpu\": ");
		json_str(cpu);
		printf(", \"online_cpus\": %ld, \"kernel\": ", sysconf(_SC_NPROCESSORS_ONLN));
		json_str(u.release);
		printf("}, \"command\": ");
		json_str(cmd);
		printf(", \"reps\": %d, \"results\": [", reps);
		for (int i = 0; i < n_results; i++) {
			printf("%s\n  {\"name\": ", i ? "," : "");
			json_str(results[i].name);
			printf(", \"ns_per_op\": %.3f, \"mops\": %.3f", results[i].ns_per_op,
			       results[i].mops);
			if (results[i].note[0]) {
				printf(", \"note\": ");
				json_str(results[i].note);
			}
			printf("}");
		}
		printf("\n]}\n");
	} else {
		printf("%-48s %12s %10s\n", "name", "ns/op", "Mops");
		for (int i = 0; i < n_results; i++)
			printf("%-48s %12.2f %10.2f %s\n", results[i].name, results[i].ns_per_op,
			       results[i].mops, results[i].note);
	}
	return 0;
}
