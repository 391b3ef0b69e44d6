/* SPDX-License-Identifier: BSD-3-Clause */
/* test_port_quota.c — the ports' budgets (sn_port_quota.c): the "auto"
 * formulas, the order policy entry > config > auto, and the mbuf quota's
 * reserves and caps per port slot (a hand-built registry, no EAL). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sn_port_internal.h"
#include "sn_port_quota.h"
#include "sn_quota.h"

#include "sn_check.h"

/* sn_config.c's, without the parser: the default slot count */
unsigned sn_config_port_slots = SN_CONFIG_MAX_PORTS_DEF + 1;

static const uint32_t *g_pol;

static const uint32_t *policy_of(void *arg, const char *name)
{
	(void)arg;
	return !strcmp(name, "vm1") ? g_pol : NULL;
}

static struct sn_port *port(const char *name, enum sn_port_type type, uint16_t slot,
			    uint16_t nq)
{
	struct sn_port *p = calloc(1, sizeof(*p));

	snprintf(p->name, sizeof(p->name), "%s", name);
	p->type = type;
	p->slot = slot;
	p->nq = nq;
	return p;
}

static const struct sn_port_quota_env env0 = {
	.mbuf_total = 10000, .uplink_mbufs = 1056, .max_ports = 64, .burst = 32,
	.auto_backlog = 960, .auto_wheel = 4096, .auto_flows = 12288, .auto_macs = 128,
	.mac_table_size = 4096,
};

static void test_auto(void)
{
	struct sn_port *p = port("vm0", SN_PORT_VHOST, 0, 1), *p2 = port("vm2", SN_PORT_VHOST, 1, 2);
	struct sn_port *up = port("uplink", SN_PORT_UPLINK, 2, 1);
	struct sn_port_quota q;
	uint32_t min;

	sn_port_quota_resolve(&env0, p, NULL, &q, &min);
	/* reserve two bursts per queue; cap half of what 64 reserves leave */
	CHECK(min == 64);
	CHECK(q.mbufs == (10000 - 64 * 64) / 2);
	CHECK(q.held == q.mbufs);
	CHECK(q.backlog == 960 && q.wheel == 4096 && q.flows == 12288 && q.macs == 128);
	sn_port_quota_resolve(&env0, p2, NULL, &q, &min);
	CHECK(min == 128 && q.held == q.mbufs / 2);
	/* a pool too small for 64 reserves of two bursts: half of it for
	 * the reserves (7 each), half of the rest the cap */
	struct sn_port_quota_env small = env0;
	small.mbuf_total = 1000;
	sn_port_quota_resolve(&small, p, NULL, &q, &min);
	CHECK(min == 7 && q.mbufs == (1000 - 64 * 7) / 2 && q.held == q.mbufs);
	/* a reserve given: the cap is at least the reserve plus two bursts */
	small.mbufs_reserve = 900;
	sn_port_quota_resolve(&small, p, NULL, &q, &min);
	CHECK(min == 900 && q.mbufs == 964);
	/* the uplink: its RX share, no reserve, the whole MAC table */
	sn_port_quota_resolve(&env0, up, NULL, &q, &min);
	CHECK(q.mbufs == 1056 && min == 0 && q.macs == 4096);
	free(p);
	free(p2);
	free(up);
}

static void test_order(void)
{
	struct sn_port *p = port("vm1", SN_PORT_VHOST, 0, 1);
	struct sn_port_quota_env env = env0;
	const uint32_t pol[SN_QK_MAX] = { [SN_QK_MBUFS] = 300, [SN_QK_MACS] = 7 };
	struct sn_port_quota q;
	uint32_t min;

	env.limit[SN_QK_MBUFS] = 1000;
	env.limit[SN_QK_FLOWS] = 99;
	env.mbufs_reserve = 40;
	sn_port_quota_resolve(&env, p, pol, &q, &min);
	CHECK(q.mbufs == 300 && q.macs == 7);     /* the policy's */
	CHECK(q.flows == 99);                     /* the config's */
	CHECK(q.backlog == 960);                  /* auto */
	CHECK(q.held == 300 && min == 40);
	/* a reserve above the cap is the cap */
	env.mbufs_reserve = 500;
	sn_port_quota_resolve(&env, p, pol, &q, &min);
	CHECK(min == 300);
	free(p);
}

static void test_registry(void)
{
	struct sn_ports reg;
	struct sn_port *a = port("vm0", SN_PORT_VHOST, 0, 1), *b = port("vm1", SN_PORT_VHOST, 1, 1);
	struct sn_port_quota_env env = env0;
	const uint32_t pol[SN_QK_MAX] = { [SN_QK_MBUFS] = 200 };
	struct sn_quota_owner_stats os;

	memset(&reg, 0, sizeof(reg));
	reg.slot = calloc(sn_config_port_slots, sizeof(reg.slot[0]));
	env.mbuf_total = 100;
	env.mbufs_reserve = 64;
	CHECK(sn_ports_quota_setup(&reg, &(struct sn_port_quota_env){ 0 }, NULL, NULL) == -EINVAL);
	CHECK(sn_ports_quota_setup(&reg, &env, policy_of, NULL) == 0);
	g_pol = pol;
	reg.slot[0] = a;
	reg.slot[1] = b;
	sn_ports_quota_port(&reg, a);
	sn_quota_owner_stats(reg.mbufq, 0, &os);
	CHECK(os.min == 64 && os.max == 100);     /* capped at the pool */
	/* the second reserve does not fit whole: lowered to what is left */
	sn_ports_quota_port(&reg, b);
	sn_quota_owner_stats(reg.mbufq, 1, &os);
	CHECK(os.min == 36 && os.max == 100 && b->quota.mbufs == 100);
	/* a new policy: applied to every port */
	g_pol = NULL;
	sn_ports_quota_apply(&reg);
	CHECK(b->quota.held == 64 + 64 && b->quota.mbufs == 100);   /* auto 128, the pool at most */
	sn_ports_quota_release(&reg, a);
	sn_quota_owner_stats(reg.mbufq, 0, &os);
	CHECK(os.min == 0);
	sn_ports_quota_fini(&reg);
	CHECK(sn_ports_mbuf_quota(&reg) == NULL);
	free(reg.slot);
	free(a);
	free(b);
}

/* A reserve that cannot be raised while units beyond the reserves are out
 * (the pool would be overdrawn): the cap still applies, the reserve stays,
 * and the port's limit is the cap the quota enforces. */
static void test_reserve_busy(void)
{
	struct sn_ports reg;
	struct sn_port *b = port("vm0", SN_PORT_VHOST, 1, 1);
	struct sn_port_quota_env env = env0;
	struct sn_quota_owner_stats os;

	memset(&reg, 0, sizeof(reg));
	reg.slot = calloc(sn_config_port_slots, sizeof(reg.slot[0]));
	env.mbuf_total = 100;
	env.mbufs_reserve = 40;
	env.limit[SN_QK_MBUFS] = 50;
	CHECK(sn_ports_quota_setup(&reg, &env, NULL, NULL) == 0);
	/* slot 5 (a deleted port's frames still out) holds 90 shared units */
	CHECK(sn_quota_take(reg.mbufq, 5, 90) == 90);
	reg.slot[1] = b;
	sn_ports_quota_port(&reg, b);
	sn_quota_owner_stats(reg.mbufq, 1, &os);
	CHECK(os.min == 0 && os.max == 50 && b->quota.mbufs == 50);
	CHECK(sn_quota_take(reg.mbufq, 1, 60) <= 10);   /* capped; the pool's rest */
	sn_quota_give(reg.mbufq, 1, sn_quota_used(reg.mbufq, 1));
	/* the units back: the next resolution reserves */
	sn_quota_give(reg.mbufq, 5, 90);
	sn_ports_quota_port(&reg, b);
	sn_quota_owner_stats(reg.mbufq, 1, &os);
	CHECK(os.min == 40 && os.max == 50 && b->quota.mbufs == 50);
	sn_ports_quota_fini(&reg);
	free(reg.slot);
	free(b);
}

/* A deleted port's frames still out keep its slot's units: the slot is not
 * handed to a new port before they are back, so their late gives never
 * land on another port's budget. */
static void test_slot_reuse(void)
{
	struct sn_ports reg;
	struct sn_port *a = port("vm0", SN_PORT_VHOST, 0, 1);

	memset(&reg, 0, sizeof(reg));
	reg.slot = calloc(sn_config_port_slots, sizeof(reg.slot[0]));
	CHECK(sn_ports_quota_setup(&reg, &env0, NULL, NULL) == 0);
	CHECK(sn_ports_quota_pick_slot(&reg) == 0);
	reg.slot[0] = a;
	sn_ports_quota_port(&reg, a);
	CHECK(sn_quota_take(reg.mbufq, 0, 10) == 10);   /* frames out */
	sn_ports_quota_release(&reg, a);                /* deleted */
	reg.slot[0] = NULL;
	CHECK(sn_ports_quota_pick_slot(&reg) == 1);
	for (unsigned i = 1; i < sn_config_port_slots; i++)
		reg.slot[i] = a;                        /* every other slot taken */
	CHECK(sn_ports_quota_pick_slot(&reg) == -EAGAIN);
	sn_quota_give(reg.mbufq, 0, 10);                /* the late frames freed */
	CHECK(sn_ports_quota_pick_slot(&reg) == 0);
	reg.slot[0] = a;
	CHECK(sn_ports_quota_pick_slot(&reg) == -ENOSPC);
	sn_ports_quota_fini(&reg);
	free(reg.slot);
	free(a);
}

/* port.add: the reserve of a port's actual queue count must fit beside
 * the reserves in force, else the add is refused (not lowered). */
static void test_admit(void)
{
	struct sn_ports reg;
	struct sn_port *a = port("vm0", SN_PORT_VHOST, 0, 8), *b = port("vm2", SN_PORT_VHOST, 1, 8);
	struct sn_port *c = port("vm3", SN_PORT_VHOST, 1, 1);
	struct sn_port_quota_env env = env0;
	struct sn_quota_owner_stats os;

	memset(&reg, 0, sizeof(reg));
	reg.slot = calloc(sn_config_port_slots, sizeof(reg.slot[0]));
	env.mbuf_total = 1000;
	env.max_ports = 4;               /* two bursts (64) per queue fit */
	CHECK(sn_ports_quota_setup(&reg, &env, NULL, NULL) == 0);
	CHECK(sn_ports_quota_admit(&reg, a) == 0);
	reg.slot[0] = a;
	sn_ports_quota_port(&reg, a);
	sn_quota_owner_stats(reg.mbufq, 0, &os);
	CHECK(os.min == 8 * 64);         /* its eight queues' reserve */
	CHECK(sn_ports_quota_admit(&reg, b) == -ENOBUFS);   /* 512 > 488 left */
	CHECK(sn_ports_quota_admit(&reg, c) == 0);
	sn_ports_quota_fini(&reg);
	free(reg.slot);
	free(a);
	free(b);
	free(c);
}

int main(void)
{
	test_auto();
	test_order();
	test_registry();
	test_reserve_busy();
	test_slot_reuse();
	test_admit();
	return sn_check_exit("port_quota");
}
