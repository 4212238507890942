/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of dataplane/pool.c, port.c, lcore.c and telemetry.c over real ethdev ports made in this
 * process: ring PMD ports (rte_eth_from_rings: the test fills their RX rings and drains their TX rings
 * itself) and a net_null vdev. Frames go through dp_rx_poll, the TX buffer and dp_tx_drain_poll or
 * dp_tx_flush exactly as on a polling lcore.
 *
 * Every reply that leaves a TX ring is compared byte for byte with the reply the same frame gets from
 * dp_packet_handle on a reference lcore of the same configuration (dp_test.c's EXPECT_REPLY, which
 * checks every Eth/IPv4/UDP field and the protocol header), so the pollers are held to what the packet
 * unit tests already prove, and the counters are compared with the reference's as well as with
 * numbers worked out here.
 */
#include <limits.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>

#include <rte_bus_vdev.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "../bw_cunit.h"
#include "defs.h" /* dp_port_csum_offloads */
#include "dp_test.h"

#define T_RX_RING_SIZE 128          /* room for every frame a case injects at once */
#define T_TX_RING_SIZE 128          /* room for every reply a case expects */
#define T_TX_RING_SMALL_SIZE 16     /* holds 15 (a ring keeps one slot free) */
#define T_DRAIN_US 100000           /* DP_TX_DRAIN_US_MAX: nothing here depends on it being short */
#define T_DRAIN_MARGIN_US 20000
#define T_FRAMES_MAX 64
#define T_REPLY_MAX 1600            /* a reply at MTU 1500 */

/* The main test port: a ring PMD port with one queue pair, started in the port suite, used by the
 * poller and telemetry suites, stopped and closed by the last suite. */
static struct rte_ring *g_rx_ring;
static struct rte_ring *g_tx_ring;
static int g_port = -1;
static struct rte_ether_addr g_port_mac;
static struct dp_config g_cfg;      /* MTU 1500, drain period T_DRAIN_US */
static struct dp_lcore g_lc;        /* the polling lcore of g_port, queue 0 */
static struct dp_lcore g_ref;       /* reference: the same config, driven through dp_packet_handle */
static struct rte_ether_addr g_target_mac; /* the port a case sends to; g_ref.mac follows it */

/* What one injected frame must become. */
struct expected {
	struct frame req;
	bool reply;
	uint32_t len;                  /* of the reply */
	uint8_t b[T_REPLY_MAX];
};
static struct expected g_exp[T_FRAMES_MAX];
static unsigned int g_nb_exp;
static struct msg g_m;

/* By index with a padded name, by name, and a scalar: a 209-byte body the echo model returns. */
static const struct tensor_spec g_tensors[] = {
	{ .index = 0, .dtype = BW_DTYPE_FLOAT, .rank = 2, .dims = { 1, 4 }, .name = "input_ids" },
	{ .index = BW_TENSOR_BY_NAME, .dtype = BW_DTYPE_INT64, .rank = 1, .dims = { 3 }, .name = "mask" },
	{ .index = 2, .dtype = BW_DTYPE_BOOL, .rank = 0 },
};

/* ---- helpers ---------------------------------------------------------------------------------- */

/* A ring PMD port whose RX and TX rings the test owns. \return the port id or -1. */
static int ring_port_create(const char *name, unsigned int rx_size, unsigned int tx_size, struct rte_ring **rx,
			    struct rte_ring **tx)
{
	char ring_name[RTE_RING_NAMESIZE];
	int port;

	snprintf(ring_name, sizeof(ring_name), "%s_rx", name);
	*rx = rte_ring_create(ring_name, rx_size, (int)rte_socket_id(), RING_F_SP_ENQ | RING_F_SC_DEQ);
	snprintf(ring_name, sizeof(ring_name), "%s_tx", name);
	*tx = rte_ring_create(ring_name, tx_size, (int)rte_socket_id(), RING_F_SP_ENQ | RING_F_SC_DEQ);
	if (*rx == NULL || *tx == NULL)
		return -1;
	port = rte_eth_from_rings(name, rx, 1, tx, 1, rte_socket_id());
	if (port < 0)
		fprintf(stderr, "rte_eth_from_rings(%s): %s\n", name, rte_strerror(rte_errno));
	return port;
}

static void ring_free(struct rte_ring **r)
{
	struct rte_mbuf *m;

	if (*r == NULL)
		return;
	while (rte_ring_dequeue(*r, (void **)&m) == 0)
		rte_pktmbuf_free(m);
	rte_ring_free(*r);
	*r = NULL;
}

/* Puts a copy of the frame on a port's RX ring, as a NIC would have received it. */
static void rx_inject(struct rte_ring *rx, const struct frame *f, int line)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(g_pool);

	if (m == NULL) {
		t_check(false, __FILE__, line, "mbuf pool empty");
		return;
	}
	RTE_VERIFY(f->len <= rte_pktmbuf_tailroom(m));
	memcpy(rte_pktmbuf_mtod(m, void *), f->b, f->len);
	m->data_len = (uint16_t)f->len;
	m->pkt_len = f->len;
	m->ol_flags = T_RX_OL_FLAGS;
	t_check(rte_ring_enqueue(rx, m) == 0, __FILE__, line, "RX ring full");
}

/* Addresses a frame built by dp_test.c (to g_our_mac) to the port under test. */
static void frame_to_port(struct frame *f, const struct rte_ether_addr *mac)
{
	f_eth(f)->dst_addr = *mac;
}

/* Records what the frame must become, proved on the reference lcore: a reply with this status
 * (checked field by field by EXPECT_REPLY and kept for a byte comparison) or a drop for this reason. */
static void expect_reply(const struct frame *f, enum bw_status status, int line)
{
	struct expected *e = &g_exp[g_nb_exp++];
	const struct bw_hdr *h;

	RTE_VERIFY(g_nb_exp <= T_FRAMES_MAX);
	e->req = *f;
	e->reply = true;
	h = expect_reply_at(&g_ref, f, status, __FILE__, line);
	if (h == NULL || g_reply == NULL) {
		e->len = 0;
		return;
	}
	e->len = rte_pktmbuf_pkt_len(g_reply);
	RTE_VERIFY(e->len <= sizeof(e->b));
	memcpy(e->b, rte_pktmbuf_mtod(g_reply, const void *), e->len);
	t_reply_release();
}

static void expect_drop(const struct frame *f, enum dp_drop_reason reason, int line)
{
	struct expected *e = &g_exp[g_nb_exp++];

	RTE_VERIFY(g_nb_exp <= T_FRAMES_MAX);
	e->req = *f;
	e->reply = false;
	e->len = 0;
	expect_outcome_at(&g_ref, f, EXPECT_DROP, (int)reason, __FILE__, line);
}

/* The frames the cases inject, each recorded in g_exp in order. */
static void add_ping(uint32_t body_len)
{
	struct frame f;

	frame_ping(&f, &g_m, body_len, 0);
	frame_to_port(&f, &g_target_mac);
	expect_reply(&f, BW_STATUS_OK, __LINE__);
}

static void add_infer(uint32_t model_id, enum bw_status status)
{
	struct frame f;

	msg_init(&g_m, BW_OP_INFER, model_id);
	msg_tensors(&g_m, g_tensors, RTE_DIM(g_tensors));
	frame_msg(&f, &g_m);
	frame_to_port(&f, &g_target_mac);
	expect_reply(&f, status, __LINE__);
}

/* One bad frame of four kinds, in turn: another MAC, a broken UDP checksum, a bad magic, another port. */
static void add_bad(unsigned int kind)
{
	static const struct rte_ether_addr other_mac = { .addr_bytes = { 0x02, 0x62, 0x77, 0x00, 0x00, 0x99 } };
	struct frame f;

	frame_ping(&f, &g_m, 16, 0);
	frame_to_port(&f, &g_target_mac);
	switch (kind % 4) {
	case 0:
		frame_to_port(&f, &other_mac);
		expect_drop(&f, DP_DROP_ETH_WRONG_DST, __LINE__);
		break;
	case 1:
		f_udp(&f)->dgram_cksum ^= rte_cpu_to_be_16(0x0101);
		expect_drop(&f, DP_DROP_UDP_BAD_CSUM, __LINE__);
		break;
	case 2:
		f_bw(&f)->magic ^= 0xffu;
		frame_fix(&f);
		expect_drop(&f, DP_DROP_PROTO_BAD_MAGIC, __LINE__);
		break;
	default:
		f_udp(&f)->dst_port = rte_cpu_to_be_16(BW_UDP_PORT_DEFAULT + 1);
		frame_fix(&f);
		expect_drop(&f, DP_DROP_UDP_WRONG_PORT, __LINE__);
		break;
	}
}

/* Starts a case that sends to the port with this MAC. */
static void expected_reset(const struct rte_ether_addr *mac)
{
	g_target_mac = *mac;
	g_ref.mac = *mac;
	g_nb_exp = 0;
	memset(&g_ref.stats, 0, sizeof(g_ref.stats));
}

static unsigned int expected_replies(void)
{
	unsigned int n = 0;

	for (unsigned int i = 0; i < g_nb_exp; i++)
		n += g_exp[i].reply;
	return n;
}

static void inject_all(struct rte_ring *rx)
{
	for (unsigned int i = 0; i < g_nb_exp; i++)
		rx_inject(rx, &g_exp[i].req, __LINE__);
}

/*
 * Dequeues count replies from a TX ring and compares them, in order, with the expected replies
 * starting at the reply numbered first (drops skipped); frees them. \return bytes dequeued.
 */
static uint64_t tx_collect(const struct dp_lcore *lc, struct rte_ring *tx, unsigned int first, unsigned int count,
			   int line)
{
	unsigned int k = 0, i;
	uint64_t bytes = 0;

	for (i = 0; i < g_nb_exp && k < first + count; i++) {
		const struct expected *e = &g_exp[i];
		struct rte_mbuf *m;

		if (!e->reply)
			continue;
		if (k++ < first)
			continue;
		if (rte_ring_dequeue(tx, (void **)&m) != 0) {
			t_check(false, __FILE__, line, "TX ring empty at reply %u of %u", k - 1, first + count);
			return bytes;
		}
		bytes += rte_pktmbuf_pkt_len(m);
		t_check(m->nb_segs == 1 && m->data_len == m->pkt_len, __FILE__, line, "reply %u: %u segments",
			k - 1, m->nb_segs);
		t_check(m->ol_flags == 0, __FILE__, line, "reply %u: ol_flags 0x%" PRIx64, k - 1, m->ol_flags);
		ipv4_reply_check_at(lc, &e->req, m, IPPROTO_UDP, __FILE__, line);
		t_check(rte_pktmbuf_pkt_len(m) == e->len &&
				memcmp(rte_pktmbuf_mtod(m, const void *), e->b, e->len) == 0,
			__FILE__, line, "reply %u (%u bytes) differs from dp_packet_handle's (%u bytes)", k - 1,
			rte_pktmbuf_pkt_len(m), e->len);
		rte_pktmbuf_free(m);
	}
	return bytes;
}

static uint64_t expected_rx_bytes(void)
{
	uint64_t n = 0;

	for (unsigned int i = 0; i < g_nb_exp; i++)
		n += g_exp[i].req.len;
	return n;
}

static uint64_t expected_tx_bytes(unsigned int first, unsigned int count)
{
	unsigned int k = 0;
	uint64_t n = 0;

	for (unsigned int i = 0; i < g_nb_exp; i++) {
		if (!g_exp[i].reply)
			continue;
		if (k >= first && k < first + count)
			n += g_exp[i].len;
		k++;
	}
	return n;
}

/* Polls RX until it reports IDLE. \return the number of BUSY polls. */
static unsigned int rx_poll_all(struct dp_lcore *lc)
{
	unsigned int busy = 0;

	while (dp_rx_poll(lc) == PLAT_POLL_BUSY && busy < 1000)
		busy++;
	return busy;
}

/* The request, reply and drop counters equal the reference lcore's, which saw the same frames. */
static void stats_match_reference(const struct dp_lcore *lc, int line)
{
	t_check(lc->stats.requests == g_ref.stats.requests, __FILE__, line, "requests %" PRIu64 ", reference %" PRIu64,
		lc->stats.requests, g_ref.stats.requests);
	for (unsigned int k = 0; k < BW_STATUS_COUNT; k++)
		t_check(lc->stats.replies[k] == g_ref.stats.replies[k], __FILE__, line,
			"replies[%s] %" PRIu64 ", reference %" PRIu64, bw_status_name(k), lc->stats.replies[k],
			g_ref.stats.replies[k]);
	for (unsigned int k = 0; k < DP_DROP_COUNT; k++) {
		if (k == DP_DROP_TX_FULL)
			continue; /* the reference never transmits */
		t_check(lc->stats.drops[k] == g_ref.stats.drops[k], __FILE__, line,
			"drops[%s] %" PRIu64 ", reference %" PRIu64, dp_drop_reason_name((enum dp_drop_reason)k),
			lc->stats.drops[k], g_ref.stats.drops[k]);
	}
}

static uint64_t drops_total(const struct dp_lcore_stats *s)
{
	uint64_t n = 0;

	for (unsigned int k = 0; k < DP_DROP_COUNT; k++)
		n += s->drops[k];
	return n;
}

/* ---- dp_pool_create --------------------------------------------------------------------------- */

static void test_mbuf_data_room(void)
{
	static const uint16_t mtus[] = { DP_MTU_MIN, 1500, 4000, 9000, DP_MTU_MAX };

	/* Ethernet header, a VLAN tag, the MTU and the CRC, rounded up to 1 KiB, after the headroom. */
	CU_ASSERT_EQUAL(dp_mbuf_data_room(1500), RTE_PKTMBUF_HEADROOM + 2048);
	CU_ASSERT_EQUAL(dp_mbuf_data_room(9000), RTE_PKTMBUF_HEADROOM + 9216); /* af_packet's framesz=9216 */
	for (unsigned int i = 0; i < RTE_DIM(mtus); i++) {
		uint32_t room = dp_mbuf_data_room(mtus[i]);

		CU_ASSERT(room >= RTE_PKTMBUF_HEADROOM + RTE_ETHER_HDR_LEN + 4u + mtus[i] + RTE_ETHER_CRC_LEN);
		CU_ASSERT((room - RTE_PKTMBUF_HEADROOM) % 1024 == 0);
	}
}

/* A pool from dp_pool_create: data room for the MTU, its cache, and at least one mbuf for every place
 * one can wait. Freed before returning: dp_pool_create names its pool after the socket. */
static void pool_check(const struct dp_config *cfg, unsigned int nb_queues, int line)
{
	unsigned int needed = nb_queues * (cfg->rx_desc + cfg->tx_desc + 2 * DP_RX_BURST + DP_MBUF_CACHE_SIZE * 3 / 2 +
					   dp_reasm_mbufs(cfg)) + cfg->mbufs_held;
	struct rte_mempool *mp = dp_pool_create(cfg, SOCKET_ID_ANY, nb_queues);

	if (mp == NULL) {
		t_check(false, __FILE__, line, "dp_pool_create: %s", rte_strerror(rte_errno));
		return;
	}
	t_check(rte_pktmbuf_data_room_size(mp) == dp_mbuf_data_room(cfg->mtu), __FILE__, line,
		"data room %u for MTU %u", rte_pktmbuf_data_room_size(mp), cfg->mtu);
	t_check(mp->size >= needed, __FILE__, line, "%u mbufs, %u needed", mp->size, needed);
	t_check(mp->size < 2 * needed + 1, __FILE__, line, "%u mbufs for %u needed: more than the next 2^n-1",
		mp->size, needed);
	t_check(mp->cache_size == DP_MBUF_CACHE_SIZE, __FILE__, line, "cache %u", mp->cache_size);
	t_check(rte_mempool_avail_count(mp) == mp->size, __FILE__, line, "%u of %u available",
		rte_mempool_avail_count(mp), mp->size);
	rte_mempool_free(mp);
}

static void test_pool_create(void)
{
	struct dp_config cfg;

	dp_config_defaults(&cfg);
	/* the default reassembly room is one 16 MiB request at MTU 1500: 11716 + 1024 */
	CU_ASSERT_EQUAL(dp_reasm_mbufs(&cfg), 12740);
	cfg.reasm_mbufs = 64;                          /* small, for the test's memory */
	pool_check(&cfg, 1, __LINE__);                 /* 2560 + 4096 = 6656 -> 8191 */
	cfg.rx_desc = 256;
	cfg.tx_desc = 512;
	cfg.mbufs_held = 1000;
	pool_check(&cfg, 6, __LINE__);                 /* 6 * 1280 + 1000 = 8680 -> 16383 */
	cfg.mbufs_held = 0;
	pool_check(&cfg, 4, __LINE__);                 /* 5120 -> 8191 */
	cfg.mtu = 9000;
	cfg.rx_desc = 128;
	cfg.tx_desc = 128;
	cfg.mbufs_held = 100;
	pool_check(&cfg, 1, __LINE__);                 /* 768 + 100 -> 1023 of 10 KiB rooms */
	/* exactly 2^n - 1 needed: no rounding past it */
	cfg.mtu = 1500;
	cfg.mbufs_held = 1023 - 768;
	{
		struct rte_mempool *mp = dp_pool_create(&cfg, SOCKET_ID_ANY, 1);

		CU_ASSERT_PTR_NOT_NULL_FATAL(mp);
		CU_ASSERT_EQUAL(mp->size, 1023);
		rte_mempool_free(mp);
	}
}

/* ---- dp_port_init ----------------------------------------------------------------------------- */

/* dp_port_init with every queue on g_pool and this lcore's socket. */
static int port_init(uint16_t port, uint16_t nb_queues, const struct dp_config *cfg)
{
	struct rte_mempool *pools[DP_MAX_POLL_LCORES];
	int sockets[DP_MAX_POLL_LCORES];

	RTE_VERIFY(nb_queues <= DP_MAX_POLL_LCORES);
	for (uint16_t q = 0; q < nb_queues; q++) {
		pools[q] = g_pool;
		sockets[q] = (int)rte_socket_id();
	}
	return dp_port_init(port, nb_queues, cfg, pools, sockets);
}

static void test_port_init_ring(void)
{
	struct rte_eth_dev_info info;
	struct rte_eth_link link;
	struct rte_eth_conf conf = {0};
	uint16_t mtu = 0;

	CU_ASSERT_FATAL(g_port >= 0);
	CU_ASSERT_EQUAL_FATAL(port_init((uint16_t)g_port, 1, &g_cfg), 0);
	CU_ASSERT_EQUAL(rte_eth_dev_get_mtu((uint16_t)g_port, &mtu), 0);
	CU_ASSERT_EQUAL(mtu, g_cfg.mtu);
	CU_ASSERT_EQUAL(rte_eth_link_get_nowait((uint16_t)g_port, &link), 0);
	CU_ASSERT_EQUAL(link.link_status, RTE_ETH_LINK_UP);
	/* started: ethdev refuses to configure a started port */
	CU_ASSERT_EQUAL(rte_eth_dev_configure((uint16_t)g_port, 1, 1, &conf), -EBUSY);
	CU_ASSERT_EQUAL(rte_eth_dev_info_get((uint16_t)g_port, &info), 0);
	CU_ASSERT_EQUAL(rte_eth_macaddr_get((uint16_t)g_port, &g_port_mac), 0);
}

/* The ring port offers as many queue pairs as it was given rings: one. */
static void test_port_init_queues(void)
{
	struct rte_ring *rx, *tx;
	struct rte_eth_dev_info info;
	int port = ring_port_create("bwq", 64, 64, &rx, &tx);

	CU_ASSERT_FATAL(port >= 0);
	CU_ASSERT_EQUAL(rte_eth_dev_info_get((uint16_t)port, &info), 0);
	CU_ASSERT_EQUAL(info.max_rx_queues, 1);
	CU_ASSERT_EQUAL(info.max_tx_queues, 1);
	CU_ASSERT_EQUAL(port_init((uint16_t)port, 2, &g_cfg), -EINVAL);
	CU_ASSERT_EQUAL(port_init((uint16_t)port, 0, &g_cfg), -EINVAL);
	dp_port_fini((uint16_t)port);
	CU_ASSERT(!rte_eth_dev_is_valid_port((uint16_t)port));
	ring_free(&rx);
	ring_free(&tx);
}

/* The ring PMD reports no MTU limits of its own, so ethdev 22.11's defaults apply: 46 (a minimum
 * Ethernet frame less header and CRC) up to 65535 (from its unbounded max_rx_pktlen). batchwire's own
 * range, DP_MTU_MIN..DP_MTU_MAX, lies inside: what lies outside either is refused. */
static void test_port_init_mtu_range(void)
{
	struct rte_ring *rx, *tx;
	struct rte_eth_dev_info info;
	struct dp_config cfg = g_cfg;
	int port = ring_port_create("bwmtu", 64, 64, &rx, &tx);

	CU_ASSERT_FATAL(port >= 0);
	CU_ASSERT_EQUAL_FATAL(rte_eth_dev_info_get((uint16_t)port, &info), 0);
	CU_ASSERT_EQUAL(info.min_mtu, RTE_ETHER_MIN_LEN - RTE_ETHER_HDR_LEN - RTE_ETHER_CRC_LEN);
	CU_ASSERT(info.min_mtu <= DP_MTU_MIN && info.max_mtu >= DP_MTU_MAX);
	cfg.mtu = (uint16_t)(info.min_mtu - 1);
	CU_ASSERT_EQUAL(port_init((uint16_t)port, 1, &cfg), -EINVAL);
	cfg.mtu = 0;
	CU_ASSERT_EQUAL(port_init((uint16_t)port, 1, &cfg), -EINVAL);
	cfg.mtu = DP_MTU_MIN - 1; /* the device would take it, batchwire does not */
	CU_ASSERT_EQUAL(port_init((uint16_t)port, 1, &cfg), -EINVAL);
	cfg.mtu = DP_MTU_MAX + 1;
	CU_ASSERT_EQUAL(port_init((uint16_t)port, 1, &cfg), -EINVAL);
	/* the edges themselves are accepted */
	cfg.mtu = DP_MTU_MIN;
	CU_ASSERT_EQUAL(port_init((uint16_t)port, 1, &cfg), 0);
	dp_port_fini((uint16_t)port);
	ring_free(&rx);
	ring_free(&tx);
	port = ring_port_create("bwmtu2", 64, 64, &rx, &tx);
	CU_ASSERT_FATAL(port >= 0);
	cfg.mtu = DP_MTU_MAX;
	CU_ASSERT_EQUAL(port_init((uint16_t)port, 1, &cfg), 0);
	dp_port_fini((uint16_t)port);
	ring_free(&rx);
	ring_free(&tx);
}

static void test_port_init_invalid_port(void)
{
	uint16_t unused = RTE_MAX_ETHPORTS - 1;

	CU_ASSERT_FATAL(!rte_eth_dev_is_valid_port(unused));
	CU_ASSERT_EQUAL(port_init(unused, 1, &g_cfg), -ENODEV);
	CU_ASSERT_EQUAL(port_init(RTE_MAX_ETHPORTS, 1, &g_cfg), -ENODEV);
	CU_ASSERT_EQUAL(port_init(UINT16_MAX, 1, &g_cfg), -ENODEV);
}

/* net_null offers many queues and RSS: two queue pairs at MTU 9000 come up, and each queue's RX
 * takes its mbufs from its own pool (net_null allocates every frame it "receives"). */
static void test_port_init_null_multiqueue(void)
{
	struct dp_config cfg = g_cfg;
	struct rte_mempool *pools[2];
	int sockets[2] = { (int)rte_socket_id(), (int)rte_socket_id() };
	struct rte_eth_dev_info info;
	struct rte_mbuf *pkts[4];
	uint16_t port, mtu = 0, n;

	CU_ASSERT_EQUAL_FATAL(rte_vdev_init("net_null_bwtest", NULL), 0);
	CU_ASSERT_EQUAL_FATAL(rte_eth_dev_get_port_by_name("net_null_bwtest", &port), 0);
	CU_ASSERT_EQUAL(rte_eth_dev_info_get(port, &info), 0);
	CU_ASSERT(info.max_rx_queues >= 2 && info.max_tx_queues >= 2);
	cfg.mtu = 9000;
	pools[0] = rte_pktmbuf_pool_create("bwtest_q0", 255, 0, 0, dp_mbuf_data_room(cfg.mtu), sockets[0]);
	pools[1] = rte_pktmbuf_pool_create("bwtest_q1", 255, 0, 0, dp_mbuf_data_room(cfg.mtu), sockets[1]);
	CU_ASSERT_FATAL(pools[0] != NULL && pools[1] != NULL);
	CU_ASSERT_EQUAL(dp_port_init(port, 2, &cfg, pools, sockets), 0);
	CU_ASSERT_EQUAL(rte_eth_dev_get_mtu(port, &mtu), 0);
	CU_ASSERT_EQUAL(mtu, 9000);
	for (uint16_t q = 0; q < 2; q++) {
		n = rte_eth_rx_burst(port, q, pkts, RTE_DIM(pkts));
		CU_ASSERT(n > 0);
		for (uint16_t i = 0; i < n; i++) {
			CU_ASSERT(pkts[i]->pool == pools[q]);
			rte_pktmbuf_free(pkts[i]);
		}
	}
	dp_port_fini(port);
	CU_ASSERT(!rte_eth_dev_is_valid_port(port));
	CU_ASSERT_EQUAL(rte_vdev_uninit("net_null_bwtest"), 0);
	CU_ASSERT_EQUAL(rte_mempool_avail_count(pools[0]), 255);
	CU_ASSERT_EQUAL(rte_mempool_avail_count(pools[1]), 255);
	rte_mempool_free(pools[0]);
	rte_mempool_free(pools[1]);
}

/* ---- pollers ---------------------------------------------------------------------------------- */

static void test_lcore_init(void)
{
	CU_ASSERT_EQUAL_FATAL(dp_lcore_init(&g_lc, rte_lcore_id(), (uint16_t)g_port, 0, (int)rte_socket_id(), &g_cfg,
					    &g_stub_ops),
			      0);
	CU_ASSERT_PTR_NULL(g_lc.model_lcore); /* the model layer's to set */
	g_lc.model_lcore = &g_lc; /* echo answers at once, through this lcore's TX queue */
	CU_ASSERT_PTR_NOT_NULL(g_lc.tx_buffer);
	CU_ASSERT(rte_is_same_ether_addr(&g_lc.mac, &g_port_mac));
	CU_ASSERT_EQUAL(g_lc.port_id, g_port);
	CU_ASSERT_EQUAL(g_lc.queue_id, 0);
	CU_ASSERT(g_lc.cfg == &g_cfg);
	/* the ring PMD offers no checksum offloads: the lcore computes and verifies them */
	CU_ASSERT(!g_lc.tx_csum_offload);
	CU_ASSERT(!g_lc.rx_csum_offload);
	CU_ASSERT(g_lc.tx_drain_tsc > 0);
	CU_ASSERT_EQUAL(g_lc.tx_drain_tsc, plat_us_to_tsc(T_DRAIN_US));
	/* an invalid port is refused before anything is allocated */
	{
		struct dp_lcore lc;

		CU_ASSERT(dp_lcore_init(&lc, 0, RTE_MAX_ETHPORTS - 1, 0, 0, &g_cfg, &g_stub_ops) < 0);
		CU_ASSERT_PTR_NULL(lc.tx_buffer);
		/* so is a queue the port was not configured with */
		CU_ASSERT_EQUAL(dp_lcore_init(&lc, 0, (uint16_t)g_port, 1, 0, &g_cfg, &g_stub_ops), -EINVAL);
		CU_ASSERT_PTR_NULL(lc.tx_buffer);
	}
}

/*
 * PINGs, INFERs (one to an unknown model: an error reply) and bad frames through one RX burst: all
 * replies wait in the TX buffer until dp_tx_flush, then leave in order, each the reply
 * dp_packet_handle gives; every counter exact; every mbuf back in the pool.
 */
static void test_poll_one_burst(void)
{
	unsigned int avail = rte_mempool_avail_count(g_pool), replies, frames;
	uint64_t tx_bytes;

	memset(&g_lc.stats, 0, sizeof(g_lc.stats));
	expected_reset(&g_port_mac);
	for (unsigned int i = 0; i < 6; i++) {
		add_ping(i * 100);
		add_infer(STUB_MODEL_ECHO, BW_STATUS_OK);
		if (i % 2 == 1)
			add_bad(i / 2);
	}
	add_infer(STUB_MODEL_UNKNOWN, BW_STATUS_NOT_FOUND);
	add_bad(3);
	replies = expected_replies();
	frames = g_nb_exp;
	CU_ASSERT_EQUAL_FATAL(frames, 17);
	CU_ASSERT_EQUAL_FATAL(replies, 13);

	inject_all(g_rx_ring);
	CU_ASSERT_EQUAL(dp_rx_poll(&g_lc), PLAT_POLL_BUSY);
	CU_ASSERT_EQUAL(rte_ring_count(g_rx_ring), 0);
	CU_ASSERT_EQUAL(dp_rx_poll(&g_lc), PLAT_POLL_IDLE);
	/* fewer than a burst of replies: all still buffered */
	CU_ASSERT_EQUAL(rte_ring_count(g_tx_ring), 0);
	dp_tx_flush(&g_lc);
	CU_ASSERT_EQUAL(rte_ring_count(g_tx_ring), replies);
	tx_bytes = tx_collect(&g_lc, g_tx_ring, 0, replies, __LINE__);
	CU_ASSERT_EQUAL(rte_ring_count(g_tx_ring), 0);
	dp_tx_flush(&g_lc); /* nothing left to send */
	CU_ASSERT_EQUAL(rte_ring_count(g_tx_ring), 0);

	CU_ASSERT_EQUAL(g_lc.stats.rx_packets, frames);
	CU_ASSERT_EQUAL(g_lc.stats.rx_bytes, expected_rx_bytes());
	CU_ASSERT_EQUAL(g_lc.stats.tx_packets, replies);
	CU_ASSERT_EQUAL(g_lc.stats.tx_bytes, expected_tx_bytes(0, replies));
	CU_ASSERT_EQUAL(g_lc.stats.tx_bytes, tx_bytes);
	CU_ASSERT_EQUAL(g_lc.stats.requests, 13);
	CU_ASSERT_EQUAL(g_lc.stats.replies[BW_STATUS_OK], 12);
	CU_ASSERT_EQUAL(g_lc.stats.replies[BW_STATUS_NOT_FOUND], 1);
	CU_ASSERT_EQUAL(g_lc.stats.drops[DP_DROP_ETH_WRONG_DST], 1);
	CU_ASSERT_EQUAL(g_lc.stats.drops[DP_DROP_UDP_BAD_CSUM], 1);
	CU_ASSERT_EQUAL(g_lc.stats.drops[DP_DROP_PROTO_BAD_MAGIC], 1);
	CU_ASSERT_EQUAL(g_lc.stats.drops[DP_DROP_UDP_WRONG_PORT], 1);
	CU_ASSERT_EQUAL(g_lc.stats.drops[DP_DROP_TX_FULL], 0);
	CU_ASSERT_EQUAL(drops_total(&g_lc.stats), 4);
	CU_ASSERT_EQUAL(g_lc.stats.arp_replies, 0);
	CU_ASSERT_EQUAL(g_lc.stats.icmp_echo_replies, 0);
	stats_match_reference(&g_lc, __LINE__);
	CU_ASSERT_EQUAL(rte_mempool_avail_count(g_pool), avail);
}

/*
 * 40 replies and 5 drops: two RX bursts (32 + 13). The TX buffer sends by itself when 32 replies are
 * in it, so 32 are on the TX ring before any drain; the other 8 wait for the drain poller, which does
 * not flush before its period (made unreachable here, so the check cannot depend on timing) and does
 * flush once the period has passed.
 */
static void test_poll_over_one_burst(void)
{
	unsigned int avail = rte_mempool_avail_count(g_pool), replies, frames;
	uint64_t period = g_lc.tx_drain_tsc;

	memset(&g_lc.stats, 0, sizeof(g_lc.stats));
	expected_reset(&g_port_mac);
	for (unsigned int i = 0; i < 40; i++) {
		if (i % 8 == 3)
			add_bad(i / 8);
		if (i % 2 == 0)
			add_ping(i * 7);
		else
			add_infer(STUB_MODEL_ECHO, BW_STATUS_OK);
	}
	replies = expected_replies();
	frames = g_nb_exp;
	CU_ASSERT_EQUAL_FATAL(frames, 45);
	CU_ASSERT_EQUAL_FATAL(replies, 40);

	inject_all(g_rx_ring);
	CU_ASSERT_EQUAL(rx_poll_all(&g_lc), 2);
	CU_ASSERT_EQUAL(rte_ring_count(g_rx_ring), 0);
	CU_ASSERT_EQUAL(rte_ring_count(g_tx_ring), DP_RX_BURST);
	CU_ASSERT_EQUAL(g_lc.stats.tx_packets, replies);

	/* a period no clock reaches: nothing is flushed */
	g_lc.tx_drain_tsc = UINT64_MAX;
	CU_ASSERT_EQUAL(dp_tx_drain_poll(&g_lc), PLAT_POLL_IDLE);
	CU_ASSERT_EQUAL(rte_ring_count(g_tx_ring), DP_RX_BURST);
	g_lc.tx_drain_tsc = period;

	/* the replies sent so far are the first 32, in order */
	tx_collect(&g_lc, g_tx_ring, 0, DP_RX_BURST, __LINE__);

	rte_delay_us_block(T_DRAIN_US + T_DRAIN_MARGIN_US);
	CU_ASSERT_EQUAL(dp_tx_drain_poll(&g_lc), PLAT_POLL_BUSY);
	CU_ASSERT_EQUAL(rte_ring_count(g_tx_ring), replies - DP_RX_BURST);
	tx_collect(&g_lc, g_tx_ring, DP_RX_BURST, replies - DP_RX_BURST, __LINE__);
	/* the buffer is empty now: a drain poll, due or not, has nothing to send */
	CU_ASSERT_EQUAL(dp_tx_drain_poll(&g_lc), PLAT_POLL_IDLE);
	rte_delay_us_block(T_DRAIN_US + T_DRAIN_MARGIN_US);
	CU_ASSERT_EQUAL(dp_tx_drain_poll(&g_lc), PLAT_POLL_IDLE);
	CU_ASSERT_EQUAL(rte_ring_count(g_tx_ring), 0);

	CU_ASSERT_EQUAL(g_lc.stats.rx_packets, frames);
	CU_ASSERT_EQUAL(g_lc.stats.rx_bytes, expected_rx_bytes());
	CU_ASSERT_EQUAL(g_lc.stats.tx_packets, replies);
	CU_ASSERT_EQUAL(g_lc.stats.tx_bytes, expected_tx_bytes(0, replies));
	CU_ASSERT_EQUAL(g_lc.stats.requests, 40);
	CU_ASSERT_EQUAL(g_lc.stats.replies[BW_STATUS_OK], 40);
	CU_ASSERT_EQUAL(drops_total(&g_lc.stats), 5);
	CU_ASSERT_EQUAL(g_lc.stats.drops[DP_DROP_TX_FULL], 0);
	stats_match_reference(&g_lc, __LINE__);
	CU_ASSERT_EQUAL(rte_mempool_avail_count(g_pool), avail);
}

/*
 * A TX ring that holds 15 and is never drained: of 40 replies, the buffer's send at 32 places 15 and
 * gives 17 back; the flush of the last 8 places none. The 25 refused are counted as tx_full drops,
 * taken back out of tx_packets and tx_bytes, and freed.
 */
static void test_tx_full(void)
{
	struct rte_ring *rx = NULL, *tx = NULL;
	struct dp_lcore lc;
	unsigned int avail, replies, capacity;
	int port;

	port = ring_port_create("bwtxfull", T_RX_RING_SIZE, T_TX_RING_SMALL_SIZE, &rx, &tx);
	CU_ASSERT_FATAL(port >= 0);
	capacity = rte_ring_get_capacity(tx);
	CU_ASSERT_EQUAL_FATAL(capacity, T_TX_RING_SMALL_SIZE - 1);
	CU_ASSERT_EQUAL_FATAL(port_init((uint16_t)port, 1, &g_cfg), 0);
	CU_ASSERT_EQUAL_FATAL(dp_lcore_init(&lc, rte_lcore_id(), (uint16_t)port, 0, (int)rte_socket_id(), &g_cfg,
					    &g_stub_ops),
			      0);
	lc.model_lcore = &lc;
	avail = rte_mempool_avail_count(g_pool);

	expected_reset(&lc.mac);
	for (unsigned int i = 0; i < 40; i++)
		add_ping(64);
	replies = expected_replies();
	CU_ASSERT_EQUAL_FATAL(replies, 40);
	inject_all(rx);
	CU_ASSERT_EQUAL(rx_poll_all(&lc), 2);
	CU_ASSERT_EQUAL(rte_ring_count(tx), capacity);
	CU_ASSERT_EQUAL(lc.stats.drops[DP_DROP_TX_FULL], DP_RX_BURST - capacity);
	dp_tx_flush(&lc);
	CU_ASSERT_EQUAL(rte_ring_count(tx), capacity);

	CU_ASSERT_EQUAL(lc.stats.rx_packets, replies);
	CU_ASSERT_EQUAL(lc.stats.requests, replies);
	CU_ASSERT_EQUAL(lc.stats.replies[BW_STATUS_OK], replies);
	CU_ASSERT_EQUAL(lc.stats.drops[DP_DROP_TX_FULL], replies - capacity);
	CU_ASSERT_EQUAL(drops_total(&lc.stats), replies - capacity);
	CU_ASSERT_EQUAL(lc.stats.tx_packets, capacity);
	CU_ASSERT_EQUAL(lc.stats.tx_bytes, expected_tx_bytes(0, capacity));
	stats_match_reference(&lc, __LINE__);
	/* the first 15 replies made it, in order */
	tx_collect(&lc, tx, 0, capacity, __LINE__);
	CU_ASSERT_EQUAL(rte_ring_count(tx), 0);
	CU_ASSERT_EQUAL(rte_mempool_avail_count(g_pool), avail);

	dp_lcore_fini(&lc);
	CU_ASSERT_PTR_NULL(lc.tx_buffer);
	dp_port_fini((uint16_t)port);
	ring_free(&rx);
	ring_free(&tx);
}

/* The checksum offloads a port gets: IPv4 and UDP together on each side, or neither. */
static void test_port_csum_offloads(void)
{
	const uint64_t tx = RTE_ETH_TX_OFFLOAD_IPV4_CKSUM | RTE_ETH_TX_OFFLOAD_UDP_CKSUM;
	const uint64_t rx = RTE_ETH_RX_OFFLOAD_IPV4_CKSUM | RTE_ETH_RX_OFFLOAD_UDP_CKSUM;
	struct rte_eth_dev_info info = { 0 };
	struct dp_csum_offloads c;

	c = dp_port_csum_offloads(&info);
	CU_ASSERT_EQUAL(c.tx, 0);
	CU_ASSERT_EQUAL(c.rx, 0);
	/* both, among other capabilities: exactly the two checksums */
	info.tx_offload_capa = tx | RTE_ETH_TX_OFFLOAD_TCP_CKSUM | RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE;
	info.rx_offload_capa = rx | RTE_ETH_RX_OFFLOAD_TCP_CKSUM;
	c = dp_port_csum_offloads(&info);
	CU_ASSERT_EQUAL(c.tx, tx);
	CU_ASSERT_EQUAL(c.rx, rx);
	/* one of the two on a side: neither there, the other side unaffected */
	info.tx_offload_capa = RTE_ETH_TX_OFFLOAD_IPV4_CKSUM;
	info.rx_offload_capa = rx;
	c = dp_port_csum_offloads(&info);
	CU_ASSERT_EQUAL(c.tx, 0);
	CU_ASSERT_EQUAL(c.rx, rx);
	info.tx_offload_capa = tx;
	info.rx_offload_capa = RTE_ETH_RX_OFFLOAD_UDP_CKSUM;
	c = dp_port_csum_offloads(&info);
	CU_ASSERT_EQUAL(c.tx, tx);
	CU_ASSERT_EQUAL(c.rx, 0);
}

/* ---- telemetry -------------------------------------------------------------------------------- */

static struct dp_lcore *g_telemetry_lcores[] = { &g_lc };

/* Every counter of every lcore goes into the sum once; the totals add every status and reason. */
static void test_lcores_stats_sum(void)
{
	static struct dp_lcore a, b;
	struct dp_lcore *const lcores[] = { &a, &b };
	struct dp_lcore_stats sum;
	struct plat_poll_stats poll;
	unsigned int k, bad = 0;

	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	a.stats = (struct dp_lcore_stats){ .rx_packets = 1, .rx_bytes = 2, .tx_packets = 3, .tx_bytes = 4,
					   .arp_replies = 5, .icmp_echo_replies = 6, .requests = 7 };
	b.stats = (struct dp_lcore_stats){ .rx_packets = 10, .rx_bytes = 20, .tx_packets = 30, .tx_bytes = 40,
					   .arp_replies = 50, .icmp_echo_replies = 60, .requests = 70 };
	for (k = 0; k < BW_STATUS_COUNT; k++) {
		a.stats.replies[k] = k + 1;
		b.stats.replies[k] = 100 * (k + 1);
	}
	for (k = 0; k < DP_DROP_COUNT; k++) {
		a.stats.drops[k] = 2 * k + 1;
		b.stats.drops[k] = 1000;
	}
	a.poll = (struct plat_poll_stats){ .iterations = 9, .busy_iterations = 8 };
	b.poll = (struct plat_poll_stats){ .iterations = 90, .busy_iterations = 80 };
	memset(&poll, 0xff, sizeof(poll)); /* overwritten, not added to */

	dp_lcores_stats_sum(lcores, RTE_DIM(lcores), &sum, &poll);
	CU_ASSERT_EQUAL(sum.rx_packets, 11);
	CU_ASSERT_EQUAL(sum.rx_bytes, 22);
	CU_ASSERT_EQUAL(sum.tx_packets, 33);
	CU_ASSERT_EQUAL(sum.tx_bytes, 44);
	CU_ASSERT_EQUAL(sum.arp_replies, 55);
	CU_ASSERT_EQUAL(sum.icmp_echo_replies, 66);
	CU_ASSERT_EQUAL(sum.requests, 77);
	for (k = 0; k < BW_STATUS_COUNT; k++)
		bad += sum.replies[k] != 101 * (k + 1);
	for (k = 0; k < DP_DROP_COUNT; k++)
		bad += sum.drops[k] != 2 * k + 1 + 1000;
	CU_ASSERT_EQUAL(bad, 0);
	CU_ASSERT_EQUAL(poll.iterations, 99);
	CU_ASSERT_EQUAL(poll.busy_iterations, 88);
	CU_ASSERT_EQUAL(dp_stats_replies_total(&sum), 101ull * BW_STATUS_COUNT * (BW_STATUS_COUNT + 1) / 2);
	CU_ASSERT_EQUAL(dp_stats_drops_total(&sum), (uint64_t)DP_DROP_COUNT * DP_DROP_COUNT + 1000ull * DP_DROP_COUNT);
	/* one lcore, no poll counts wanted; none at all: zeros */
	dp_lcores_stats_sum(lcores, 1, &sum, NULL);
	CU_ASSERT_EQUAL(sum.requests, 7);
	CU_ASSERT_EQUAL(dp_stats_drops_total(&sum), (uint64_t)DP_DROP_COUNT * DP_DROP_COUNT);
	dp_lcores_stats_sum(lcores, 0, &sum, &poll);
	CU_ASSERT_EQUAL(sum.rx_packets, 0);
	CU_ASSERT_EQUAL(dp_stats_replies_total(&sum), 0);
	CU_ASSERT_EQUAL(poll.iterations, 0);
}

/*
 * Registration only stores callbacks in rte_telemetry's table; --no-telemetry stops the socket
 * thread, not the table, so registering behaves the same with or without it. No public API runs a
 * command in-process, so the callbacks themselves are not exercised here.
 */
static void test_telemetry_register(void)
{
	int ret;

	CU_ASSERT_EQUAL(dp_telemetry_register(g_telemetry_lcores, RTE_DIM(g_telemetry_lcores), NULL), 0);
	/* DPDK 22.11's rte_telemetry_register_cmd does not look for an existing command: a second
	 * registration of the same names succeeds (returns 0) and adds a duplicate entry to its table. */
	ret = dp_telemetry_register(g_telemetry_lcores, RTE_DIM(g_telemetry_lcores), NULL);
	CU_ASSERT_EQUAL(ret, 0);
	/* the key table's commands: their help fits what DPDK keeps (a long one is refused, -EINVAL) */
	CU_ASSERT_EQUAL(dp_telemetry_auth(NULL), 0);
}

/* ---- shutdown --------------------------------------------------------------------------------- */

static void test_port_fini(void)
{
	struct rte_mbuf *m;

	CU_ASSERT_FATAL(g_port >= 0);
	dp_lcore_fini(&g_lc);
	CU_ASSERT_PTR_NULL(g_lc.tx_buffer);
	CU_ASSERT(rte_eth_dev_is_valid_port((uint16_t)g_port));
	dp_port_fini((uint16_t)g_port);
	/* closed: the port id is released */
	CU_ASSERT(!rte_eth_dev_is_valid_port((uint16_t)g_port));
	/* the ring PMD attached to our rings and leaves them to us */
	m = rte_pktmbuf_alloc(g_pool);
	CU_ASSERT_PTR_NOT_NULL_FATAL(m);
	CU_ASSERT_EQUAL(rte_ring_enqueue(g_tx_ring, m), 0);
	CU_ASSERT_EQUAL(rte_ring_dequeue(g_tx_ring, (void **)&m), 0);
	rte_pktmbuf_free(m);
	g_port = -1;
}

/* ---- environment ------------------------------------------------------------------------------ */

static int env_init(const char *prog)
{
	char args[][64] = { "", "--no-huge", "-m", "256", "--no-pci", "--no-telemetry", "-l", "0",
			    "--log-level=*:error", "--file-prefix", "" };
	char *argv[RTE_DIM(args)];

	snprintf(args[0], sizeof(args[0]), "%s", prog);
	snprintf(args[RTE_DIM(args) - 1], sizeof(args[0]), "bwtest-dpl-%d", (int)getpid());
	for (unsigned int i = 0; i < RTE_DIM(args); i++)
		argv[i] = args[i];
	if (rte_eal_init((int)RTE_DIM(argv), argv) < 0) {
		fprintf(stderr, "rte_eal_init: %s\n", rte_strerror(rte_errno));
		return -1;
	}
	if (plat_clock_init() != 0) {
		fprintf(stderr, "plat_clock_init failed\n");
		rte_eal_cleanup();
		return -1;
	}
	dp_config_defaults(&g_cfg);
	g_cfg.ipv4_addr = rte_cpu_to_be_32(T_OUR_IP);
	g_cfg.mtu = 1500;
	g_cfg.tx_drain_us = T_DRAIN_US;
	/* dp_test.c's helpers (t_run, rx_inject here) take mbufs from g_pool */
	g_pool = dp_pool_create(&g_cfg, (int)rte_socket_id(), 1);
	if (g_pool == NULL) {
		fprintf(stderr, "dp_pool_create: %s\n", rte_strerror(rte_errno));
		rte_eal_cleanup();
		return -1;
	}
	t_lcore_init(&g_ref, &g_cfg);
	g_port = ring_port_create("bwlcore", T_RX_RING_SIZE, T_TX_RING_SIZE, &g_rx_ring, &g_tx_ring);
	return 0;
}

static void env_fini(void)
{
	char runtime_dir[PATH_MAX];

	snprintf(runtime_dir, sizeof(runtime_dir), "%s", rte_eal_get_runtime_dir());
	t_reply_release();
	if (g_port >= 0) { /* a failed case left it open */
		dp_lcore_fini(&g_lc);
		dp_port_fini((uint16_t)g_port);
	}
	ring_free(&g_rx_ring);
	ring_free(&g_tx_ring);
	rte_mempool_free(g_pool);
	g_pool = NULL;
	rte_eal_cleanup();
	plat_runtime_dir_remove(runtime_dir);
}

static CU_TestInfo g_pool_tests[] = {
	{ "dp_mbuf_data_room: a frame at the MTU fits, rounded to 1 KiB", test_mbuf_data_room },
	{ "dp_pool_create: data room, cache, a mbuf for every place one waits", test_pool_create },
	CU_TEST_INFO_NULL,
};

static CU_TestInfo g_port_tests[] = {
	{ "ring port, 1 queue: started at the MTU", test_port_init_ring },
	{ "more queues than the device has (or none): -EINVAL", test_port_init_queues },
	{ "MTU outside the device's range: -EINVAL", test_port_init_mtu_range },
	{ "invalid port id: -ENODEV", test_port_init_invalid_port },
	{ "net_null, 2 queues, MTU 9000: started, each queue on its own pool", test_port_init_null_multiqueue },
	{ "dp_port_csum_offloads: IPv4 and UDP checksums together or neither", test_port_csum_offloads },
	CU_TEST_INFO_NULL,
};

static CU_TestInfo g_poll_tests[] = {
	{ "dp_lcore_init on the started ring port", test_lcore_init },
	{ "one burst: replies buffered until flushed, counters exact", test_poll_one_burst },
	{ "two bursts: 32 sent by the buffer, the rest by the drain poller", test_poll_over_one_burst },
	{ "TX ring full: tx_full drops, tx counters taken back, no mbuf leak", test_tx_full },
	CU_TEST_INFO_NULL,
};

static CU_TestInfo g_telemetry_tests[] = {
	{ "dp_telemetry_register: once, and again", test_telemetry_register },
	{ "dp_lcores_stats_sum: every counter of every lcore; the totals", test_lcores_stats_sum },
	CU_TEST_INFO_NULL,
};

static CU_TestInfo g_fini_tests[] = {
	{ "dp_port_fini stops and closes the port", test_port_fini },
	CU_TEST_INFO_NULL,
};

int main(int argc, char **argv)
{
	static CU_SuiteInfo suites[] = {
		{ .pName = "dataplane: mbuf pool", .pTests = g_pool_tests },
		{ .pName = "dataplane: port", .pTests = g_port_tests },
		{ .pName = "dataplane: pollers", .pTests = g_poll_tests },
		{ .pName = "dataplane: telemetry", .pTests = g_telemetry_tests },
		{ .pName = "dataplane: shutdown", .pTests = g_fini_tests },
		CU_SUITE_INFO_NULL,
	};
	int status;

	(void)argc;
	if (env_init(argv[0]) != 0)
		return 1;
	status = bw_cunit_run(suites);
	env_fini();
	return status;
}
