/* SPDX-License-Identifier: BSD-3-Clause */
/* sn-trace — trace-driven driver of the scheduling core.
 *
 * `sn-trace <module> [args]` reads a packet trace and a configuration
 * (formats documented by each tools/trace_<module>.c) and prints what the
 * module under test did, for the independent Python reference models in
 * tests/core/ to check.
 */
#include <stdio.h>
#include <string.h>

int sn_trace_sched_main(int argc, char **argv);
int sn_trace_twheel_main(int argc, char **argv);
int sn_trace_nba_main(int argc, char **argv);
int sn_trace_fdrop_main(int argc, char **argv);

static const struct {
	const char *name;
	int (*main)(int argc, char **argv);
	const char *what;
} modes[] = {
	{ "sched",  sn_trace_sched_main,  "QFQ / DRR / FIFO with link emulation: departure times" },
	{ "twheel", sn_trace_twheel_main, "timing wheel + timestamping: release times" },
	{ "nba",    sn_trace_nba_main,    "NIC-level bandwidth allocator: per-core allocations" },
	{ "fdrop",  sn_trace_fdrop_main,  "fair dropping: per-flow delivered / dropped" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: sn-trace <module> [args]   (sn-trace <module> --help)\nmodules:\n");
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
		fprintf(f, "  %-7s %s\n", modes[i].name, modes[i].what);
}

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
		if (!strcmp(argv[1], modes[i].name))
			return modes[i].main(argc - 1, argv + 1);
	fprintf(stderr, "sn-trace: unknown module '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
