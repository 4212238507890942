/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit tests of the ARP responder and ICMP echo in dataplane/packet.c. */
#include <string.h>

#include <CUnit/CUnit.h>

#include <rte_common.h>
#include <rte_mbuf.h>

#include "dp_test.h"

static struct frame g_f;

/* ---- ARP -------------------------------------------------------------------------------------- */

/* The reply to an ARP request req, kept at its received length. */
static void arp_reply_check(const struct frame *req)
{
	const struct rte_ether_hdr *eth = rte_pktmbuf_mtod(g_reply, const struct rte_ether_hdr *);
	const struct rte_arp_hdr *arp = (const struct rte_arp_hdr *)(eth + 1);
	const struct rte_arp_hdr *rq = f_arp(req);

	CU_ASSERT(rte_pktmbuf_pkt_len(g_reply) == req->len);
	CU_ASSERT(rte_is_same_ether_addr(&eth->dst_addr, &g_peer_mac));
	CU_ASSERT(rte_is_same_ether_addr(&eth->src_addr, &g_our_mac));
	CU_ASSERT(eth->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP));
	CU_ASSERT(arp->arp_hardware == rte_cpu_to_be_16(RTE_ARP_HRD_ETHER));
	CU_ASSERT(arp->arp_protocol == rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4));
	CU_ASSERT(arp->arp_hlen == RTE_ETHER_ADDR_LEN && arp->arp_plen == 4);
	CU_ASSERT(arp->arp_opcode == rte_cpu_to_be_16(RTE_ARP_OP_REPLY));
	CU_ASSERT(rte_is_same_ether_addr(&arp->arp_data.arp_sha, &g_our_mac));
	CU_ASSERT(arp->arp_data.arp_sip == rte_cpu_to_be_32(T_OUR_IP));
	CU_ASSERT(rte_is_same_ether_addr(&arp->arp_data.arp_tha, &rq->arp_data.arp_sha));
	CU_ASSERT(arp->arp_data.arp_tip == rq->arp_data.arp_sip);
	CU_ASSERT(g_reply->ol_flags == 0);
}

static void test_arp_request_for_us(void)
{
	frame_arp(&g_f, RTE_ARP_OP_REQUEST, T_OUR_IP);
	EXPECT_OUTCOME(&g_lc_jumbo, &g_f, EXPECT_ARP_REPLY);
	if (g_reply != NULL)
		arp_reply_check(&g_f);
	/* padded to the Ethernet minimum, unicast to us (a cache refresh) */
	frame_arp(&g_f, RTE_ARP_OP_REQUEST, T_OUR_IP);
	f_eth(&g_f)->dst_addr = g_our_mac;
	memset(g_f.b + g_f.len, 0, 18);
	g_f.len = 60;
	EXPECT_OUTCOME(&g_lc_jumbo, &g_f, EXPECT_ARP_REPLY);
	if (g_reply != NULL)
		arp_reply_check(&g_f);
	t_reply_release();
}

static void test_arp_not_for_us(void)
{
	frame_arp(&g_f, RTE_ARP_OP_REQUEST, T_OTHER_IP);
	EXPECT_DROP(&g_lc_jumbo, &g_f, DP_DROP_ARP_NOT_FOR_US);
	frame_arp(&g_f, RTE_ARP_OP_REPLY, T_OUR_IP);
	EXPECT_DROP(&g_lc_jumbo, &g_f, DP_DROP_ARP_NOT_FOR_US);
	frame_arp(&g_f, RTE_ARP_OP_REVREQUEST, T_OUR_IP);
	EXPECT_DROP(&g_lc_jumbo, &g_f, DP_DROP_ARP_NOT_FOR_US);
}

static void test_arp_invalid(void)
{
	uint32_t len;

	frame_arp(&g_f, RTE_ARP_OP_REQUEST, T_OUR_IP);
	f_arp(&g_f)->arp_hlen = 8;
	EXPECT_DROP(&g_lc_jumbo, &g_f, DP_DROP_ARP_INVALID);
	frame_arp(&g_f, RTE_ARP_OP_REQUEST, T_OUR_IP);
	f_arp(&g_f)->arp_plen = 16;
	EXPECT_DROP(&g_lc_jumbo, &g_f, DP_DROP_ARP_INVALID);
	frame_arp(&g_f, RTE_ARP_OP_REQUEST, T_OUR_IP);
	f_arp(&g_f)->arp_hardware = rte_cpu_to_be_16(6); /* IEEE 802 */
	EXPECT_DROP(&g_lc_jumbo, &g_f, DP_DROP_ARP_INVALID);
	frame_arp(&g_f, RTE_ARP_OP_REQUEST, T_OUR_IP);
	f_arp(&g_f)->arp_protocol = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV6);
	EXPECT_DROP(&g_lc_jumbo, &g_f, DP_DROP_ARP_INVALID);
	/* cut anywhere inside the ARP header (the rest of the request waits in the tailroom) */
	frame_arp(&g_f, RTE_ARP_OP_REQUEST, T_OUR_IP);
	for (len = T_ETH_LEN; len < g_f.len; len++) {
		struct outcome o = t_run(&g_lc_jumbo, &g_f, len, 0);

		t_check(outcome_is(&o, EXPECT_DROP, DP_DROP_ARP_INVALID), __FILE__, __LINE__,
			"ARP cut to %u bytes: %s", len, outcome_str(&o));
	}
}

/* ---- ICMP ------------------------------------------------------------------------------------- */

/* The echo reply to req: IPv4 turned around, type 0, same identifier, sequence and payload, valid
 * checksum over the whole message. */
static void icmp_reply_check(const struct dp_lcore *lc, const struct frame *req, int line)
{
	const struct rte_ipv4_hdr *rq_ip = f_ip(req);
	uint32_t l4_len = rte_be_to_cpu_16(rq_ip->total_length) - rte_ipv4_hdr_len(rq_ip);
	const struct rte_icmp_hdr *icmp;

	if (g_reply == NULL)
		return;
	icmp = rte_pktmbuf_mtod_offset(g_reply, const struct rte_icmp_hdr *, T_ETH_LEN + T_IP_LEN);
	ipv4_reply_check_at(lc, req, g_reply, IPPROTO_ICMP, __FILE__, line);
	t_check(rte_pktmbuf_pkt_len(g_reply) == T_ETH_LEN + T_IP_LEN + l4_len, __FILE__, line,
		"echo reply of %u bytes to %u bytes of ICMP", rte_pktmbuf_pkt_len(g_reply), l4_len);
	t_check(icmp->icmp_type == RTE_IP_ICMP_ECHO_REPLY && icmp->icmp_code == 0, __FILE__, line, "type %u code %u",
		icmp->icmp_type, icmp->icmp_code);
	t_check(icmp->icmp_ident == f_icmp(req)->icmp_ident && icmp->icmp_seq_nb == f_icmp(req)->icmp_seq_nb,
		__FILE__, line, "identifier and sequence echoed");
	t_check(memcmp(icmp + 1, f_icmp(req) + 1, l4_len - sizeof(*icmp)) == 0, __FILE__, line, "payload echoed");
	t_check(rte_raw_cksum(icmp, l4_len) == 0xffff, __FILE__, line, "ICMP checksum valid");
	t_check(g_reply->ol_flags == (lc->tx_csum_offload ? RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM : 0), __FILE__,
		line, "ol_flags 0x%" PRIx64, g_reply->ol_flags);
}

static void test_icmp_echo(void)
{
	static const uint32_t payloads[] = { 56, 0, 7, 1472, 8000 };
	unsigned int i;

	for (i = 0; i < RTE_DIM(payloads); i++) {
		frame_icmp_echo(&g_f, payloads[i]);
		EXPECT_OUTCOME(&g_lc_jumbo, &g_f, EXPECT_ICMP_REPLY);
		icmp_reply_check(&g_lc_jumbo, &g_f, __LINE__);
	}
	t_reply_release();
}

/*
 * ICMP and ARP replies past their rate are not sent and are counted by reason: at 50 a second the
 * burst is 6, then one more each 1/50 s of the polling lcore's clock (here a 1 GHz one, moved by
 * hand). The limit is per lcore and by time, never by peer.
 */
static void rate_check(struct dp_rate *rate, void (*make)(void), enum expect_kind kind, enum dp_drop_reason reason)
{
	const uint64_t hz = 1000000000ull, start = g_lc_jumbo.burst_tsc;

	dp_rate_init(rate, 50, hz);
	for (unsigned int i = 0; i < 6; i++) {
		make();
		EXPECT_OUTCOME(&g_lc_jumbo, &g_f, kind);
	}
	make();
	EXPECT_DROP(&g_lc_jumbo, &g_f, reason);
	g_lc_jumbo.burst_tsc += hz / 50;
	make();
	EXPECT_OUTCOME(&g_lc_jumbo, &g_f, kind);
	make();
	EXPECT_DROP(&g_lc_jumbo, &g_f, reason);
	g_lc_jumbo.burst_tsc += hz; /* a second idle refills the burst, no more */
	for (unsigned int i = 0; i < 6; i++) {
		make();
		EXPECT_OUTCOME(&g_lc_jumbo, &g_f, kind);
	}
	make();
	EXPECT_DROP(&g_lc_jumbo, &g_f, reason);
	dp_rate_init(rate, 0, hz);
	g_lc_jumbo.burst_tsc = start;
	t_reply_release();
}

static void make_echo(void)
{
	frame_icmp_echo(&g_f, 56);
}

static void make_arp(void)
{
	frame_arp(&g_f, RTE_ARP_OP_REQUEST, T_OUR_IP);
}

static void test_rate_limits(void)
{
	rate_check(&g_lc_jumbo.icmp_rate, make_echo, EXPECT_ICMP_REPLY, DP_DROP_RATE_ICMP);
	rate_check(&g_lc_jumbo.arp_rate, make_arp, EXPECT_ARP_REPLY, DP_DROP_RATE_ARP);
}

/* Options are not echoed, and padding is not part of the echo. */
static void test_icmp_echo_options_padding(void)
{
	static struct frame plain;

	frame_icmp_echo(&plain, 40);
	frame_ipv4(&g_f, IPPROTO_ICMP, f_l4(&plain), plain.len - T_ETH_LEN - T_IP_LEN, 8);
	EXPECT_OUTCOME(&g_lc_jumbo, &g_f, EXPECT_ICMP_REPLY);
	icmp_reply_check(&g_lc_jumbo, &g_f, __LINE__);

	frame_icmp_echo(&g_f, 4); /* 46 bytes, padded to 60 */
	memset(g_f.b + g_f.len, 0xaa, 14);
	g_f.len = 60;
	EXPECT_OUTCOME(&g_lc_jumbo, &g_f, EXPECT_ICMP_REPLY);
	icmp_reply_check(&g_lc_jumbo, &g_f, __LINE__);
	t_reply_release();
}

static void test_icmp_tx_offload(void)
{
	static struct dp_lcore lc;

	t_lcore_init(&lc, g_lc_jumbo.cfg);
	lc.tx_csum_offload = true;
	frame_icmp_echo(&g_f, 33);
	EXPECT_OUTCOME(&lc, &g_f, EXPECT_ICMP_REPLY);
	icmp_reply_check(&lc, &g_f, __LINE__);
	/* ARP has no checksum to offload */
	frame_arp(&g_f, RTE_ARP_OP_REQUEST, T_OUR_IP);
	EXPECT_OUTCOME(&lc, &g_f, EXPECT_ARP_REPLY);
	if (g_reply != NULL)
		arp_reply_check(&g_f);
	t_reply_release();
}

static void test_icmp_invalid(void)
{
	uint32_t l4;

	frame_icmp_echo(&g_f, 56);
	f_icmp(&g_f)->icmp_cksum ^= 0x0100;
	EXPECT_DROP(&g_lc_jumbo, &g_f, DP_DROP_ICMP_INVALID);
	frame_icmp_echo(&g_f, 8000);
	((uint8_t *)(f_icmp(&g_f) + 1))[7999] ^= 1;
	EXPECT_DROP(&g_lc_jumbo, &g_f, DP_DROP_ICMP_INVALID);
	for (l4 = 0; l4 < sizeof(struct rte_icmp_hdr); l4++) {
		frame_icmp_echo(&g_f, 0);
		frame_set_l4_len(&g_f, l4);
		EXPECT_DROP(&g_lc_jumbo, &g_f, DP_DROP_ICMP_INVALID);
	}
}

static void test_icmp_unsupported(void)
{
	static const struct {
		uint8_t type, code;
	} msgs[] = { { 13, 0 }, { RTE_IP_ICMP_ECHO_REPLY, 0 }, { RTE_IP_ICMP_ECHO_REQUEST, 1 }, { 3, 3 }, { 255, 0 } };
	unsigned int i;

	for (i = 0; i < RTE_DIM(msgs); i++) {
		frame_icmp_echo(&g_f, 12);
		f_icmp(&g_f)->icmp_type = msgs[i].type;
		f_icmp(&g_f)->icmp_code = msgs[i].code;
		frame_fix(&g_f);
		EXPECT_DROP(&g_lc_jumbo, &g_f, DP_DROP_ICMP_UNSUPPORTED);
	}
}

/* docs/protocol.md: "A server never sends a reply larger than its own configured MTU allows." An echo
 * request that arrived larger than the MTU (a PMD that does not enforce it) is dropped: ip_over_mtu. */
static void test_icmp_echo_over_mtu(void)
{
	frame_icmp_echo(&g_f, 1500 - T_IP_LEN - sizeof(struct rte_icmp_hdr));
	EXPECT_OUTCOME(&g_lc_small, &g_f, EXPECT_ICMP_REPLY);
	icmp_reply_check(&g_lc_small, &g_f, __LINE__);
	frame_icmp_echo(&g_f, 1500 - T_IP_LEN - sizeof(struct rte_icmp_hdr) + 1);
	EXPECT_DROP(&g_lc_small, &g_f, DP_DROP_IP_OVER_MTU);
	frame_icmp_echo(&g_f, 8000);
	EXPECT_DROP(&g_lc_small, &g_f, DP_DROP_IP_OVER_MTU);
	t_reply_release();
}

CU_TestInfo g_arp_tests[] = {
	{ "arp: request for us answered", test_arp_request_for_us },
	{ "arp: other address, reply, RARP: arp_not_for_us", test_arp_not_for_us },
	{ "arp: hlen/plen/htype/ptype/truncated: arp_invalid", test_arp_invalid },
	CU_TEST_INFO_NULL,
};

CU_TestInfo g_icmp_tests[] = {
	{ "icmp: echo (0..8000 bytes) answered", test_icmp_echo },
	{ "icmp: options stripped, padding ignored", test_icmp_echo_options_padding },
	{ "icmp/arp: tx checksum offload flags", test_icmp_tx_offload },
	{ "icmp: bad checksum, truncated: icmp_invalid", test_icmp_invalid },
	{ "icmp: not an echo request: icmp_unsupported", test_icmp_unsupported },
	{ "icmp: echo larger than the MTU: ip_over_mtu", test_icmp_echo_over_mtu },
	{ "icmp, arp: replies past their rate dropped: rate_icmp, rate_arp", test_rate_limits },
	CU_TEST_INFO_NULL,
};
