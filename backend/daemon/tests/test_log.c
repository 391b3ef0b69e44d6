/* SPDX-License-Identifier: BSD-3-Clause */
/* test_log.c — the log module: the journal check, the per-source rate
 * limit (one thread and four racing), and the lines that reach stderr in
 * journal mode from schednic's own calls and from DPDK's stream hook (no
 * EAL: sn_eal_log_message() is called as the stream would). */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sn_eal_log.h"
#include "sn_log.h"

#include "sn_check.h"

static void journal_check(void)
{
	struct stat st = { 0 };
	char js[64];

	st.st_dev = 2049;
	st.st_ino = 123456;
	snprintf(js, sizeof(js), "%llu:%llu", 2049ULL, 123456ULL);
	CHECK(sn_log_is_journal(js, &st));
	CHECK(!sn_log_is_journal(NULL, &st));
	CHECK(!sn_log_is_journal("", &st));
	CHECK(!sn_log_is_journal("2049:123457", &st));
	CHECK(!sn_log_is_journal("2050:123456", &st));
	CHECK(!sn_log_is_journal("2049:123456x", &st));
	CHECK(!sn_log_is_journal("2049", &st));
	CHECK(!sn_log_is_journal("a:b", &st));
}

/* Burst 3 per 10 s: 3 lines, then refusals counted; the next window lets
 * 3 through again, the first reporting the 2 refused. */
static void rate_limit(void)
{
	struct sn_log_rl rl = { 0 };
	uint64_t sup = 99;
	unsigned ok = 0;

	for (unsigned i = 0; i < 5; i++)
		ok += sn_log_rl_allow(&rl, 100, 3, 10, &sup);
	CHECK(ok == 3 && sup == 0);
	CHECK(!sn_log_rl_allow(&rl, 109, 3, 10, &sup));      /* same window [100, 110) */
	CHECK(sn_log_rl_allow(&rl, 110, 3, 10, &sup) && sup == 3);
	CHECK(sn_log_rl_allow(&rl, 111, 3, 10, &sup) && sup == 0);
	CHECK(sn_log_rl_allow(&rl, 119, 3, 10, &sup) && sup == 0);
	CHECK(!sn_log_rl_allow(&rl, 119, 3, 10, &sup));
	/* a window far later (the 32-bit window index wraps: still new) */
	CHECK(sn_log_rl_allow(&rl, 119 + 10ULL * (1ULL << 32) + 10, 3, 10, &sup) && sup == 1);
	printf("rate limit: 3 of 5 in a window, the next one reports the rest\n");
}

/* Four threads, 20000 calls each in one window: exactly burst go out and
 * every other call is counted once. */
#define THREADS 4
#define CALLS 20000u
static struct sn_log_rl race_rl;
static uint64_t race_ok[THREADS];

static void *racer(void *arg)
{
	const uintptr_t k = (uintptr_t)arg;
	uint64_t sup;

	for (unsigned i = 0; i < CALLS; i++)
		race_ok[k] += sn_log_rl_allow(&race_rl, 500, 100, 10, &sup);
	return NULL;
}

static void rate_limit_race(void)
{
	pthread_t t[THREADS];
	uint64_t ok = 0, sup = 0;

	for (uintptr_t k = 0; k < THREADS; k++)
		CHECK(pthread_create(&t[k], NULL, racer, (void *)k) == 0);
	for (unsigned k = 0; k < THREADS; k++) {
		pthread_join(t[k], NULL);
		ok += race_ok[k];
	}
	CHECK(ok == 100);
	CHECK(sn_log_rl_allow(&race_rl, 510, 100, 10, &sup));
	CHECK(sup == (uint64_t)THREADS * CALLS - 100);
	printf("rate limit, %d threads x %u calls: %" PRIu64 " through, %" PRIu64 " counted\n",
	       THREADS, CALLS, ok, sup);
}

/* stderr into a temp file named by JOURNAL_STREAM (before this process's
 * first line: the mode is decided then): "<N>" prefixes. */
static void journal_lines(void)
{
	static const char want[] =
		"<6>schednicd: port vm0: up\n<4>schednicd: quota: 7\n"
		"<3>schednicd: EAL init failed: x\n<6>VHOST_CONFIG: a\n<6>VHOST_CONFIG: b\n"
		"<3>VHOST_CONFIG: bad\n<4>EAL: no newline\n";
	char path[] = "/tmp/sn-test-log-XXXXXX", js[64], buf[65536];
	struct stat st;
	int fd = mkstemp(path), saved = dup(STDERR_FILENO);
	FILE *f;
	size_t n;
	unsigned vhost = 0, first = 0;
	const uint64_t w0 = sn_log_now_s() / SN_LOG_RL_WINDOW_S;

	CHECK(fd >= 0 && saved >= 0 && fstat(fd, &st) == 0);
	snprintf(js, sizeof(js), "%llu:%llu", (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino);
	setenv("JOURNAL_STREAM", js, 1);
	CHECK(dup2(fd, STDERR_FILENO) == STDERR_FILENO);
	sn_log("port %s: up", "vm0");
	sn_log_warn("quota: %u", 7u);
	sn_log_err("EAL init failed: %s", "x");
	/* one DPDK message of two lines at RTE_LOG_INFO (7), one at ERR (4),
	 * one without its newline */
	sn_eal_log_message(37, 7, "VHOST_CONFIG: a\nVHOST_CONFIG: b\n", 32);
	sn_eal_log_message(37, 4, "VHOST_CONFIG: bad\n", 18);
	sn_eal_log_message(1, 5, "EAL: no newline", 15);
	/* a flood of one type and severity: SN_EAL_LOG_BURST of it go out */
	for (unsigned i = 0; i < 3 * SN_EAL_LOG_BURST; i++)
		sn_eal_log_message(40, 7, "VHOST_DATA: flood\n", 18);
	fflush(stderr);
	CHECK(dup2(saved, STDERR_FILENO) == STDERR_FILENO);
	close(saved);
	f = fdopen(fd, "r");
	CHECK(f && fseek(f, 0, SEEK_SET) == 0);
	n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	buf[n] = '\0';
	CHECK(!strncmp(buf, want, strlen(want)));
	if (strncmp(buf, want, strlen(want)))
		fprintf(stderr, "got:\n%.300s\n", buf);
	for (char *p = buf; (p = strstr(p, "<6>VHOST_DATA: flood\n")) != NULL; p++)
		vhost++;
	first = sn_log_now_s() / SN_LOG_RL_WINDOW_S == w0;
	if (first)   /* the flood stayed in one window */
		CHECK(vhost == SN_EAL_LOG_BURST);
	else
		CHECK(vhost >= SN_EAL_LOG_BURST && vhost <= 2 * SN_EAL_LOG_BURST);
	printf("journal lines: %zu bytes, %u of %u flood lines through\n", n, vhost,
	       3 * SN_EAL_LOG_BURST);
	if (f)
		fclose(f);
	unlink(path);
}

int main(void)
{
	journal_check();
	rate_limit();
	rate_limit_race();
	journal_lines();
	return sn_check_exit("test_log");
}
