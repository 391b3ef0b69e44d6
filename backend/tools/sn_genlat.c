/* SPDX-License-Identifier: BSD-3-Clause */
/* sn_genlat.c — latency records of `lat=1` flows (see sn_genlat.h). */
#include "sn_genlat.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

int sn_genlat_init(struct sn_gen_flow *f)
{
	if (f->count == 0 || f->count > SN_GENLAT_MAX_COUNT)
		return -EINVAL;
	f->lat_tx = calloc(f->count, sizeof(*f->lat_tx));
	f->lat_rx = calloc(f->count, sizeof(*f->lat_rx));
	f->lat_gap = calloc(f->count, sizeof(*f->lat_gap));
	if (!f->lat_tx || !f->lat_rx || !f->lat_gap) {
		sn_genlat_free(f);
		return -ENOMEM;
	}
	return 0;
}

void sn_genlat_free(struct sn_gen_flow *f)
{
	free(f->lat_tx);
	free(f->lat_rx);
	free(f->lat_gap);
	f->lat_tx = f->lat_rx = f->lat_gap = NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static double us(const struct sn_gen *g, uint64_t cycles)
{
	return (double)cycles * 1e6 / (double)g->hz;
}

json_t *sn_genlat_summary(const struct sn_gen *g, const struct sn_gen_flow *f)
{
	uint64_t n = 0, lost = 0, *v;
	json_t *o;

	v = malloc(sizeof(*v) * (f->sent ? f->sent : 1));
	if (!v)
		return NULL;
	for (uint64_t s = 0; s < f->sent && s < f->count; s++) {
		if (f->lat_rx[s])
			v[n++] = f->lat_rx[s] - f->lat_tx[s];
		else
			lost++;
	}
	qsort(v, n, sizeof(*v), cmp_u64);
	/* nearest-rank percentiles */
#define PCT(p) (n ? us(g, v[(n * (p) + 99) / 100 - 1]) : 0.0)
	o = json_pack("{s:I, s:I, s:f, s:f, s:f, s:f}", "samples", (json_int_t)n,
		      "lost", (json_int_t)lost, "p50_us", PCT(50), "p90_us", PCT(90),
		      "p99_us", PCT(99), "max_us", n ? us(g, v[n - 1]) : 0.0);
#undef PCT
	free(v);
	return o;
}

int sn_genlat_write(const struct sn_gen *g, const char *path)
{
	uint64_t t0 = UINT64_MAX;
	FILE *out;
	int rc = 0;

	for (unsigned int i = 0; i < g->nflows; i++)
		if (g->flows[i].lat_tx && g->flows[i].sent && g->flows[i].lat_tx[0] < t0)
			t0 = g->flows[i].lat_tx[0];
	out = fopen(path, "w");
	if (!out)
		return -errno;
	for (unsigned int i = 0; i < g->nflows; i++) {
		const struct sn_gen_flow *f = &g->flows[i];
		json_t *tx, *lat, *gap;

		if (!f->lat_tx)
			continue;
		tx = json_array();
		lat = json_array();
		gap = json_array();
		for (uint64_t s = 0; s < f->sent && s < f->count; s++) {
			json_array_append_new(tx, json_real(us(g, f->lat_tx[s] - t0)));
			json_array_append_new(lat, f->lat_rx[s] ?
					      json_real(us(g, f->lat_rx[s] - f->lat_tx[s])) :
					      json_null());
			json_array_append_new(gap, f->lat_rx[s] ? json_real(us(g, f->lat_gap[s])) :
					      json_null());
		}
		json_t *o = json_pack("{s:i, s:o, s:o, s:o}", "flow", (int)i, "tx_us", tx,
				      "lat_us", lat, "gap_us", gap);

		if (!o || json_dumpf(o, out, JSON_COMPACT) != 0 || fputc('\n', out) == EOF)
			rc = -EIO;
		json_decref(o);
	}
	if (fclose(out) != 0 && rc == 0)
		rc = -errno;
	return rc;
}
