/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_vufront_many.c — sn-vufront's many-connection mode: one process is
 * the idle guest of many vhost-user ports at once.
 *
 *   sn-vufront many (--socket PATH ... | --pattern P --count N | --dir DIR)
 *                   [--queue-size Q] [--timeout S] [--ready-file PATH] [--probe K]
 *
 * It connects to every socket (a list; a pattern whose "%u" is replaced by
 * 0 .. N-1; or every unix socket in a directory, in name order),
 * negotiates each as sn_vufront_negotiate() does (VERSION_1, both rings of
 * size Q, nothing posted, so the back-end sees a connected, idle VM), then
 * prints one JSON line ({"mode":"many","connected":N,"setup_ms":...}),
 * creates the ready file if asked, and stays connected until SIGTERM or
 * SIGINT (exit 0; the back-end sees every connection close).
 *
 * Probe (--probe K): on each SIGUSR1, one frame (addressed to its own
 * source MAC, so the back-end drops it as a hairpin and sends it nowhere)
 * is posted on connection K's TX ring without a kick (the back-end polls),
 * and the time until its used entry appears is printed as
 * {"probe_ms":...}: the first-frame latency of a quiet ring.
 *
 * Resources per connection: the socket stays open; the two memfd regions
 * (1 MiB each, of which only the ring pages are ever touched) stay mapped
 * but their fds and the four eventfds are closed once negotiated (the
 * back-end holds its own copies). RLIMIT_NOFILE is raised to its hard
 * limit first, so N = 500 fits in one process.
 *
 * Exit status: 0 after the signal, 2 = usage, 3 = a connection or
 * negotiation failed (sn_vufront_die names it).
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "sn_vufront.h"

#define MANY_MAX 4096u
#define PATH_MAX_LEN 108u            /* sun_path */

/* SIGTERM or SIGINT arrived (they are blocked: taken by sigsuspend, or
 * seen pending between two connections). */
static bool stop_pending(void)
{
	sigset_t p;

	return sigpending(&p) == 0 && (sigismember(&p, SIGTERM) == 1 || sigismember(&p, SIGINT) == 1);
}

static volatile sig_atomic_t last_signal;

static void on_signal(int sig)
{
	last_signal = sig;
}

#define PROBE_MAC  "\x02\x53\x56\x00\x00\x5a"
#define PROBE_LEN  60u

/* Post one frame on f's TX ring, spin until its used entry, print the
 * wait. Descriptor 0 and the start of region 1 are reused each time (the
 * previous probe's entry came back, or the probe timed out and exits). */
static void probe(struct sn_vufront *f)
{
	unsigned char *buf = f->base[1];
	uint16_t u0 = __atomic_load_n(&f->used->idx, __ATOMIC_ACQUIRE);
	double t0, t;

	memset(buf, 0, f->hdr_len + PROBE_LEN);
	memcpy(buf + f->hdr_len, PROBE_MAC, 6);
	memcpy(buf + f->hdr_len + 6, PROBE_MAC, 6);
	buf[f->hdr_len + 12] = 0x88;        /* IEEE local experimental ethertype */
	buf[f->hdr_len + 13] = 0xb5;
	f->desc[0] = (struct sn_vring_desc){ .addr = GPA1, .len = f->hdr_len + PROBE_LEN };
	f->avail->ring[f->avail_idx & (f->q - 1)] = 0;
	f->avail_idx++;
	t0 = sn_vufront_now();
	/* Release pairs with the back-end's acquire load of avail->idx. */
	__atomic_store_n(&f->avail->idx, f->avail_idx, __ATOMIC_RELEASE);
	while (__atomic_load_n(&f->used->idx, __ATOMIC_ACQUIRE) == u0) {
		if (sn_vufront_now() - t0 > f->timeout_s) {
			printf("{\"probe_ms\":null,\"timeout\":true}\n");
			fflush(stdout);
			exit(1);
		}
	}
	t = sn_vufront_now();
	printf("{\"probe_ms\":%.3f}\n", (t - t0) * 1e3);
	fflush(stdout);
}

static void many_usage(FILE *o)
{
	fprintf(o,
"usage: sn-vufront many (--socket PATH ... | --pattern P --count N | --dir DIR)\n"
"                       [--queue-size Q] [--timeout S] [--ready-file PATH] [--probe K]\n"
"  Connects to every vhost-user server socket given, negotiates each with\n"
"  empty rings (an idle VM per socket), prints one JSON line, then stays\n"
"  connected until SIGTERM/SIGINT.\n"
"  --socket PATH     a socket (repeatable)\n"
"  --pattern P       sockets P with %%u replaced by 0 .. N-1 (with --count N)\n"
"  --dir DIR         every unix socket in DIR, in name order\n"
"  --queue-size Q    ring size, power of two 2..%u (default 256)\n"
"  --timeout S       per connection: connect retries and replies (default 10)\n"
"  --ready-file PATH created once every connection is negotiated\n"
"  --probe K         on each SIGUSR1, post one frame on connection K (0-based)\n"
"                    and print {\"probe_ms\":...}, the time until it completed\n"
"  at most %u sockets\n", MAX_Q, MANY_MAX);
}

struct many {
	char **path;
	unsigned n;
};

static void add_path(struct many *m, const char *p)
{
	if (m->n >= MANY_MAX) {
		fprintf(stderr, "sn-vufront many: more than %u sockets\n", MANY_MAX);
		exit(2);
	}
	if (strlen(p) >= PATH_MAX_LEN) {
		fprintf(stderr, "sn-vufront many: socket path too long: %s\n", p);
		exit(2);
	}
	m->path[m->n] = strdup(p);
	if (!m->path[m->n])
		sn_vufront_die("strdup");
	m->n++;
}

/* P with its one "%u" replaced by i. */
static void add_pattern(struct many *m, const char *pat, unsigned long count)
{
	const char *at = strstr(pat, "%u");
	char buf[PATH_MAX_LEN + 16];

	if (!at || strstr(at + 2, "%u") || strchr(pat, '%') != at) {
		fprintf(stderr, "sn-vufront many: --pattern needs exactly one %%u: %s\n", pat);
		exit(2);
	}
	for (unsigned long i = 0; i < count; i++) {
		int k = snprintf(buf, sizeof(buf), "%.*s%lu%s", (int)(at - pat), pat, i, at + 2);

		if (k < 0 || (size_t)k >= sizeof(buf)) {
			fprintf(stderr, "sn-vufront many: socket path too long: %s\n", pat);
			exit(2);
		}
		add_path(m, buf);
	}
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void add_dir(struct many *m, const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	unsigned first = m->n;
	char buf[PATH_MAX_LEN + 256];
	struct stat st;

	if (!d)
		sn_vufront_die(dir);
	while ((de = readdir(d)) != NULL) {
		int k = snprintf(buf, sizeof(buf), "%s/%s", dir, de->d_name);

		if (k < 0 || (size_t)k >= sizeof(buf) || stat(buf, &st) || !S_ISSOCK(st.st_mode))
			continue;
		add_path(m, buf);
	}
	closedir(d);
	qsort(m->path + first, m->n - first, sizeof(*m->path), cmp_str);
}

static void raise_nofile(unsigned n)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		sn_vufront_die("getrlimit");
	if (rl.rlim_cur >= (rlim_t)n + 64)
		return;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl))
		sn_vufront_die("setrlimit RLIMIT_NOFILE");
	if (rl.rlim_cur < (rlim_t)n + 16) {
		fprintf(stderr, "sn-vufront many: RLIMIT_NOFILE hard limit %llu is too low for %u "
			"connections\n", (unsigned long long)rl.rlim_max, n);
		exit(3);
	}
}

/* Negotiated: only the socket needs to stay open. */
static void close_extra_fds(struct sn_vufront *f)
{
	for (int r = 0; r < 2; r++) {
		close(f->kickfd[r]);
		close(f->callfd[r]);
		close(f->memfd[r]);
		f->kickfd[r] = f->callfd[r] = f->memfd[r] = -1;
	}
}

int sn_vufront_many(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "pattern", required_argument, NULL, 'p' },
		{ "count", required_argument, NULL, 'c' },
		{ "dir", required_argument, NULL, 'D' },
		{ "queue-size", required_argument, NULL, 'q' },
		{ "timeout", required_argument, NULL, 't' },
		{ "ready-file", required_argument, NULL, 'r' },
		{ "probe", required_argument, NULL, 'P' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct many m = { .path = calloc(MANY_MAX, sizeof(char *)) };
	const char *pattern = NULL, *ready = NULL;
	unsigned long count = 0, q = 256, probe_k = ULONG_MAX;
	double timeout = 10, t0;
	struct sn_vufront **fr;
	struct sigaction sa = { .sa_handler = on_signal };
	sigset_t block, old;
	char *end;
	int opt;

	if (!m.path)
		sn_vufront_die("calloc");
	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 's': add_path(&m, optarg); break;
		case 'p': pattern = optarg; break;
		case 'c':
			count = strtoul(optarg, &end, 10);
			if (end == optarg || *end || count == 0 || count > MANY_MAX)
				goto bad_value;
			break;
		case 'D': add_dir(&m, optarg); break;
		case 'q':
			q = strtoul(optarg, &end, 10);
			if (end == optarg || *end || q < 2 || q > MAX_Q || (q & (q - 1)))
				goto bad_value;
			break;
		case 't':
			timeout = strtod(optarg, &end);
			if (end == optarg || *end || !(timeout > 0 && timeout < 3600))
				goto bad_value;
			break;
		case 'r': ready = optarg; break;
		case 'P':
			probe_k = strtoul(optarg, &end, 10);
			if (end == optarg || *end || probe_k >= MANY_MAX)
				goto bad_value;
			break;
		case 'h': many_usage(stdout); return 0;
		default: many_usage(stderr); return 2;
		}
	}
	if (pattern && !count) {
		fprintf(stderr, "sn-vufront many: --pattern needs --count\n");
		return 2;
	}
	if (pattern)
		add_pattern(&m, pattern, count);
	if (optind != argc || m.n == 0 || (probe_k != ULONG_MAX && probe_k >= m.n)) {
		many_usage(stderr);
		return 2;
	}
	sigemptyset(&sa.sa_mask);
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGUSR1);
	if (sigaction(SIGTERM, &sa, NULL) || sigaction(SIGINT, &sa, NULL) ||
	    sigaction(SIGUSR1, &sa, NULL) ||
	    sigprocmask(SIG_BLOCK, &block, &old))
		sn_vufront_die("sigaction");
	raise_nofile(m.n);
	fr = calloc(m.n, sizeof(*fr));
	if (!fr)
		sn_vufront_die("calloc");
	t0 = sn_vufront_now();
	for (unsigned i = 0; i < m.n; i++) {
		struct sn_vufront *f;

		if (stop_pending())
			return 0;
		f = calloc(1, sizeof(*f));
		if (!f)
			sn_vufront_die("calloc");
		f->timeout_s = timeout;
		f->q = (uint32_t)q;
		f->path = m.path[i];
		sn_vufront_map(f);
		sn_vufront_connect(f, m.path[i]);
		sn_vufront_negotiate(f);
		close_extra_fds(f);
		fr[i] = f;
	}
	printf("{\"mode\":\"many\",\"connected\":%u,\"queue_size\":%lu,\"setup_ms\":%.1f}\n", m.n,
	       q, (sn_vufront_now() - t0) * 1e3);
	fflush(stdout);
	if (ready) {
		FILE *rf = fopen(ready, "w");

		if (!rf || fclose(rf))
			sn_vufront_die(ready);
	}
	for (;;) {
		sigsuspend(&old);   /* returns after the handler ran */
		if (last_signal != SIGUSR1)
			break;
		if (probe_k != ULONG_MAX)
			probe(fr[probe_k]);
	}
	for (unsigned i = 0; i < m.n; i++)
		close(fr[i]->sock);
	return 0;

bad_value:
	fprintf(stderr, "sn-vufront many: bad value for --%s: %s\n",
		opt == 'c' ? "count" : opt == 'q' ? "queue-size" : opt == 'P' ? "probe" : "timeout",
		optarg);
	return 2;
}
