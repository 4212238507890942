/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of dataplane/packet.c through dp_packet_handle: Ethernet, IPv4 and UDP validation with
 * every drop reason, frames cut at every length, IP options and Ethernet padding, checksum offload
 * flags. Each case checks the verdict, that exactly the expected counter rose, and the bytes of any
 * reply. ARP and ICMP are in test_arp_icmp.c, protocol v1 in test_request.c; main() runs them all.
 */
#include <string.h>

#include <CUnit/Basic.h>

#include <rte_common.h>
#include <rte_mbuf.h>

#include "../bw_cunit.h"
#include "dp_test.h"

static struct frame g_f;
static struct msg g_m;

/* A request to the echo model big enough to exercise jumbo frames: 4000 + 3000 + 800 bytes of payload. */
static const struct tensor_spec g_jumbo_tensors[] = {
	{ .index = 0, .dtype = BW_DTYPE_FLOAT, .rank = 2, .dims = { 1, 1000 }, .name = "pixels" },
	{ .index = 1, .dtype = BW_DTYPE_UINT8, .rank = 1, .dims = { 3000 } },
	{ .index = BW_TENSOR_BY_NAME, .dtype = BW_DTYPE_INT64, .rank = 3, .dims = { 1, 10, 10 }, .name = "mask" },
};

static void test_drop_reason_names(void)
{
	int i, j;

	for (i = 0; i < DP_DROP_COUNT; i++) {
		const char *name = dp_drop_reason_name((enum dp_drop_reason)i);

		CU_ASSERT_PTR_NOT_NULL_FATAL(name);
		CU_ASSERT(name[0] != '\0');
		CU_ASSERT(strcmp(name, "unknown") != 0);
		for (j = 0; j < i; j++)
			CU_ASSERT(strcmp(name, dp_drop_reason_name((enum dp_drop_reason)j)) != 0);
	}
	CU_ASSERT_STRING_EQUAL(dp_drop_reason_name(DP_DROP_COUNT), "unknown");
	CU_ASSERT_STRING_EQUAL(dp_drop_reason_name(DP_DROP_IP_BAD_CSUM), "ip_bad_csum");
}

/* Frames cut in transit (the IP and UDP lengths still claim the whole datagram): every length from 0
 * to one byte short is dropped, for the reason of the layer it ends in. The rest of the frame sits
 * in the mbuf's tailroom, so reading past the packet would find a valid request and answer it. */
static void test_cut_at_every_length(void)
{
	struct outcome o;
	uint32_t len, bad = 0, first_bad = 0;
	char first[200] = "";

	msg_init(&g_m, BW_OP_INFER, STUB_MODEL_ECHO);
	msg_tensors(&g_m, g_jumbo_tensors, RTE_DIM(g_jumbo_tensors));
	frame_msg(&g_f, &g_m);
	CU_ASSERT(g_f.len > 8000);
	CU_ASSERT_PTR_NOT_NULL(EXPECT_REPLY(&g_lc_jumbo, &g_f, BW_STATUS_OK));

	for (len = 0; len < g_f.len; len++) {
		enum dp_drop_reason want = len < T_ETH_LEN ? DP_DROP_ETH_TRUNCATED : DP_DROP_IP_TRUNCATED;

		o = t_run(&g_lc_jumbo, &g_f, len, 0);
		if (!outcome_is(&o, EXPECT_DROP, (int)want) && bad++ == 0) {
			first_bad = len;
			snprintf(first, sizeof(first), "want %s, got %s", dp_drop_reason_name(want), outcome_str(&o));
		}
	}
	t_check(bad == 0, __FILE__, __LINE__, "%u of %u lengths handled wrongly; first at %u bytes: %s", bad,
		g_f.len, first_bad, first);
}

static void test_multi_segment(void)
{
	struct rte_mbuf *head = rte_pktmbuf_alloc(g_pool), *tail = rte_pktmbuf_alloc(g_pool);
	uint64_t drops_before = 0, drops_after = 0;
	uint64_t multi = g_lc_jumbo.stats.drops[DP_DROP_MULTI_SEGMENT];
	int i;

	CU_ASSERT_FATAL(head != NULL && tail != NULL);
	frame_ping(&g_f, &g_m, 64, 0);
	memcpy(rte_pktmbuf_append(head, 60), g_f.b, 60);
	memcpy(rte_pktmbuf_append(tail, (uint16_t)(g_f.len - 60)), g_f.b + 60, g_f.len - 60);
	CU_ASSERT_FATAL(rte_pktmbuf_chain(head, tail) == 0);
	for (i = 0; i < DP_DROP_COUNT; i++)
		drops_before += g_lc_jumbo.stats.drops[i];
	CU_ASSERT(dp_packet_handle(&g_lc_jumbo, head) == DP_VERDICT_DROP);
	for (i = 0; i < DP_DROP_COUNT; i++)
		drops_after += g_lc_jumbo.stats.drops[i];
	CU_ASSERT(g_lc_jumbo.stats.drops[DP_DROP_MULTI_SEGMENT] == multi + 1);
	CU_ASSERT(drops_after == drops_before + 1);
	rte_pktmbuf_free(head);
}

/* ---- Ethernet --------------------------------------------------------------------------------- */

static void test_eth_dst(void)
{
	static const struct rte_ether_addr other = { .addr_bytes = { 0x02, 0x62, 0x77, 0x00, 0x00, 0x09 } };
	static const struct rte_ether_addr multicast = { .addr_bytes = { 0x01, 0x00, 0x5e, 0x00, 0x00, 0x01 } };

	frame_ping(&g_f, &g_m, 8, 0);
	f_eth(&g_f)->dst_addr = other;
	EXPECT_DROP(&g_lc_jumbo, &g_f, DP_DROP_ETH_WRONG_DST);
	f_eth(&g_f)->dst_addr = multicast;
	EXPECT_DROP(&g_lc_jumbo, &g_f, DP_DROP_ETH_WRONG_DST);
	memset(&f_eth(&g_f)->dst_addr, 0xff, sizeof(struct rte_ether_addr));
	CU_ASSERT_PTR_NOT_NULL(EXPECT_REPLY(&g_lc_jumbo, &g_f, BW_STATUS_OK));
}

/* A source MAC a reply cannot go back to alone (broadcast, multicast, zero): dropped, ARP included. */
static void test_eth_src(void)
{
	static const struct rte_ether_addr bad[] = {
		{ .addr_bytes = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff } },
		{ .addr_bytes = { 0x01, 0x00, 0x5e, 0x00, 0x00, 0x01 } },
		{ .addr_bytes = { 0x33, 0x33, 0x00, 0x00, 0x00, 0x01 } },
		{ .addr_bytes = { 0x00, 0x00, 0x00, 0x00, 0x00, 0x00 } },
	};

	for (unsigned int i = 0; i < RTE_DIM(bad); i++) {
		frame_ping(&g_f, &g_m, 8, 0);
		f_eth(&g_f)->src_addr = bad[i];
		EXPECT_DROP(&g_lc_jumbo, &g_f, DP_DROP_ETH_BAD_SRC);
		frame_arp(&g_f, RTE_ARP_OP_REQUEST, T_OUR_IP);
		f_eth(&g_f)->src_addr = bad[i];
		EXPECT_DROP(&g_lc_jumbo, &g_f, DP_DROP_ETH_BAD_SRC);
	}
}

static void test_eth_unknown_type(void)
{
	static const uint16_t types[] = { RTE_ETHER_TYPE_IPV6, RTE_ETHER_TYPE_VLAN, RTE_ETHER_TYPE_LLDP, 0x0000 };
	unsigned int i;

	for (i = 0; i < RTE_DIM(types); i++) {
		frame_ping(&g_f, &g_m, 8, 0);
		f_eth(&g_f)->ether_type = rte_cpu_to_be_16(types[i]);
		EXPECT_DROP(&g_lc_jumbo, &g_f, DP_DROP_ETH_UNKNOWN_TYPE);
	}
}

/* Padding past the IPv4 total length (Ethernet pads frames to 60 bytes) is not part of the datagram. */
static void test_eth_padding(void)
{
	const struct bw_hdr *h;

	frame_ping(&g_f, &g_m, 2, 0); /* a 42-byte UDP payload */
	memset(g_f.b + g_f.len, 0xee, 30);
	g_f.len += 30;
	h = EXPECT_REPLY(&g_lc_jumbo, &g_f, BW_STATUS_OK);
	CU_ASSERT_FATAL(h != NULL);
	CU_ASSERT(rte_pktmbuf_pkt_len(g_reply) == T_UDP_HDRS_LEN + T_BW_LEN + 2);
	CU_ASSERT(h->body_len == 2 && memcmp(reply_body(h), msg_body(&g_m), 2) == 0);
}

/* ---- IPv4 ------------------------------------------------------------------------------------- */

static void test_ip_bad_csum(void)
{
	frame_ping(&g_f, &g_m, 8, 0);
	f_ip(&g_f)->hdr_checksum ^= rte_cpu_to_be_16(0x0100);
	EXPECT_DROP(&g_lc_jumbo, &g_f, DP_DROP_IP_BAD_CSUM);
	/* options are covered by the checksum too */
	frame_ping(&g_f, &g_m, 8, 8);
	((uint8_t *)(f_ip(&g_f) + 1))[5] = 0;
	EXPECT_DROP(&g_lc_jumbo, &g_f, DP_DROP_IP_BAD_CSUM);
}

static void test_ip_fragment(void)
{
	static const uint16_t frag[] = { RTE_IPV4_HDR_MF_FLAG, 1, RTE_IPV4_HDR_MF_FLAG | 185, 1 | RTE_IPV4_HDR_DF_FLAG,
					 RTE_IPV4_HDR_OFFSET_MASK };
	unsigned int i;

	for (i = 0; i < RTE_DIM(frag); i++) {
		frame_ping(&g_f, &g_m, 8, 0);
		f_ip(&g_f)->fragment_offset = rte_cpu_to_be_16(frag[i]);
		frame_fix(&g_f);
		EXPECT_DROP(&g_lc_jumbo, &g_f, DP_DROP_IP_FRAGMENT);
	}
	/* DF alone is no fragment, and the reply keeps DF as the request had it (checked either way) */
	frame_ping(&g_f, &g_m, 8, 0);
	f_ip(&g_f)->fragment_offset = 0;
	frame_fix(&g_f);
	CU_ASSERT_PTR_NOT_NULL(EXPECT_REPLY(&g_lc_jumbo, &g_f, BW_STATUS_OK));
}

static void test_ip_wrong_dst(void)
{
	frame_ping(&g_f, &g_m, 8, 0);
	f_ip(&g_f)->dst_addr = rte_cpu_to_be_32(T_OTHER_IP);
	frame_fix(&g_f);
	EXPECT_DROP(&g_lc_jumbo, &g_f, DP_DROP_IP_WRONG_DST);
	f_ip(&g_f)->dst_addr = RTE_BE32(0xffffffff);
	frame_fix(&g_f);
	EXPECT_DROP(&g_lc_jumbo, &g_f, DP_DROP_IP_WRONG_DST);
}

/* Sources no reply may go to: dropped, UDP and ICMP alike, before any reply is built. */
static void test_ip_martian_src(void)
{
	static const uint32_t martians[] = { RTE_IPV4(0, 0, 0, 0), RTE_IPV4(0, 1, 2, 3), RTE_IPV4(127, 0, 0, 1),
					     RTE_IPV4(224, 0, 0, 1), RTE_IPV4(239, 255, 255, 250), RTE_IPV4(240, 0, 0, 1),
					     RTE_IPV4(255, 255, 255, 255), T_OUR_IP };
	static const uint32_t fine[] = { RTE_IPV4(1, 0, 0, 1), RTE_IPV4(126, 255, 255, 255), RTE_IPV4(128, 0, 0, 1),
					 RTE_IPV4(223, 255, 255, 254), T_OTHER_IP };

	for (unsigned int i = 0; i < RTE_DIM(martians); i++) {
		frame_ping(&g_f, &g_m, 8, 0);
		f_ip(&g_f)->src_addr = rte_cpu_to_be_32(martians[i]);
		frame_fix(&g_f);
		EXPECT_DROP(&g_lc_jumbo, &g_f, DP_DROP_IP_MARTIAN_SRC);
		frame_icmp_echo(&g_f, 16);
		f_ip(&g_f)->src_addr = rte_cpu_to_be_32(martians[i]);
		frame_fix(&g_f);
		EXPECT_DROP(&g_lc_jumbo, &g_f, DP_DROP_IP_MARTIAN_SRC);
	}
	for (unsigned int i = 0; i < RTE_DIM(fine); i++) {
		frame_ping(&g_f, &g_m, 8, 0);
		f_ip(&g_f)->src_addr = rte_cpu_to_be_32(fine[i]);
		frame_fix(&g_f);
		CU_ASSERT_PTR_NOT_NULL(EXPECT_REPLY(&g_lc_jumbo, &g_f, BW_STATUS_OK));
	}
	t_reply_release();
}

static void test_allowlist_parse(void)
{
	static struct dp_allowlist list;
	char err[128], text[DP_ALLOW_MAX * 20];
	static const char *const bad[] = { "", ",", "10.0.0.0/8,", "10.0.0.0/33", "10.0.0.0/", "10.0.0.0/8x",
					   "10.0.0.0/-1", "10.0.0", "host", "10.0.0.1/8", "1.2.3.4/100", "any,10.0.0.0/8" };

	CU_ASSERT_EQUAL(dp_allowlist_parse("any", &list, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(list.count, 0);
	CU_ASSERT_EQUAL(dp_allowlist_parse(" 10.0.0.0/8 , 192.168.1.7,0.0.0.0/0", &list, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL_FATAL(list.count, 3);
	CU_ASSERT_EQUAL(list.prefixes[0].addr, RTE_IPV4(10, 0, 0, 0));
	CU_ASSERT_EQUAL(list.prefixes[0].depth, 8);
	CU_ASSERT_EQUAL(list.prefixes[1].addr, RTE_IPV4(192u, 168u, 1u, 7u));
	CU_ASSERT_EQUAL(list.prefixes[1].depth, 32);
	CU_ASSERT_EQUAL(list.prefixes[2].depth, 0);
	CU_ASSERT_EQUAL(dp_allowlist_format(&list, text, sizeof(text)), 0);
	CU_ASSERT_STRING_EQUAL(text, "10.0.0.0/8,192.168.1.7/32,0.0.0.0/0");
	CU_ASSERT_EQUAL(dp_allowlist_format(&list, text, 10), -ENOSPC);
	for (unsigned int i = 0; i < RTE_DIM(bad); i++) {
		err[0] = '\0';
		CU_ASSERT_EQUAL(dp_allowlist_parse(bad[i], &list, err, sizeof(err)), -EINVAL);
		CU_ASSERT(err[0] != '\0');
	}
	CU_ASSERT_EQUAL(dp_allowlist_parse("10.1.2.3/8", &list, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "10.0.0.0/8"));
	/* one more than fits */
	size_t off = 0;
	for (unsigned int i = 0; i <= DP_ALLOW_MAX; i++)
		off += (size_t)snprintf(text + off, sizeof(text) - off, "%s10.0.%u.0/24", i ? "," : "", i);
	CU_ASSERT_EQUAL(dp_allowlist_parse(text, &list, err, sizeof(err)), -EINVAL);
	text[strlen(text) - strlen(",10.0.64.0/24")] = '\0';
	CU_ASSERT_EQUAL(dp_allowlist_parse(text, &list, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(list.count, DP_ALLOW_MAX);
}

/* Only the peer may use the echo model; every other model is open. */
static bool peer_only_echo(const void *model, rte_be32_t src)
{
	return model != g_stub_ops.lookup(g_stub_ops.ctx, STUB_MODEL_ECHO, NULL, 0) ||
	       src == rte_cpu_to_be_32(T_PEER_IP);
}

/* A request dropped after its header was read: counted as a request and as the drop, nothing sent. */
static void expect_request_dropped(struct dp_lcore *lc, const struct frame *f, enum dp_drop_reason reason, int line)
{
	struct outcome o = t_run(lc, f, f->len, T_RX_OL_FLAGS);

	t_check(o.verdict == DP_VERDICT_DROP && o.drop == (int)reason && o.status == -1 && o.requests == 1,
		__FILE__, line, "expected a request dropped as %s; got %s", dp_drop_reason_name(reason), outcome_str(&o));
}

/* A source outside the global list gets nothing back, over IP or ARP; one outside a model's list
 * nothing for that model (no error reply: it learns nothing), and the rest as before. */
static void test_allowlist(void)
{
	static struct dp_allowlist list;
	static struct dp_lcore lc;
	static struct dp_model_ops ops;
	struct rte_lpm *lpm;
	char err[128];

	CU_ASSERT_EQUAL_FATAL(dp_allowlist_parse("10.0.0.2,192.168.0.0/16", &list, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL_FATAL(dp_allow_create(&list, "t_allow", SOCKET_ID_ANY, &lpm), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(lpm);
	CU_ASSERT(dp_allowed(lpm, rte_cpu_to_be_32(T_PEER_IP)));
	CU_ASSERT(dp_allowed(lpm, rte_cpu_to_be_32(RTE_IPV4(192u, 168u, 200u, 1u))));
	CU_ASSERT(!dp_allowed(lpm, rte_cpu_to_be_32(T_OTHER_IP)));
	CU_ASSERT(!dp_allowed(lpm, rte_cpu_to_be_32(RTE_IPV4(192u, 169u, 0u, 1u))));
	CU_ASSERT(dp_allowed(NULL, rte_cpu_to_be_32(T_OTHER_IP)));
	CU_ASSERT_EQUAL(dp_allow_create(&(struct dp_allowlist){ .count = 0 }, "t_allow_any", SOCKET_ID_ANY, &lpm), 0);
	CU_ASSERT_PTR_NULL(lpm);
	CU_ASSERT_EQUAL_FATAL(dp_allow_create(&list, "t_allow2", SOCKET_ID_ANY, &lpm), 0);

	t_lcore_init(&lc, g_lc_jumbo.cfg);
	lc.allow = lpm;
	frame_ping(&g_f, &g_m, 8, 0); /* from the peer: allowed */
	CU_ASSERT_PTR_NOT_NULL(EXPECT_REPLY(&lc, &g_f, BW_STATUS_OK));
	f_ip(&g_f)->src_addr = rte_cpu_to_be_32(T_OTHER_IP);
	frame_fix(&g_f);
	EXPECT_DROP(&lc, &g_f, DP_DROP_SRC_NOT_ALLOWED);
	frame_icmp_echo(&g_f, 16);
	f_ip(&g_f)->src_addr = rte_cpu_to_be_32(T_OTHER_IP);
	frame_fix(&g_f);
	EXPECT_DROP(&lc, &g_f, DP_DROP_SRC_NOT_ALLOWED);
	frame_arp(&g_f, RTE_ARP_OP_REQUEST, T_OUR_IP);
	f_arp(&g_f)->arp_data.arp_sip = rte_cpu_to_be_32(T_OTHER_IP);
	EXPECT_DROP(&lc, &g_f, DP_DROP_SRC_NOT_ALLOWED);
	/* a bad request from an unlisted source is not answered either: no error reply */
	frame_ping(&g_f, &g_m, 8, 0);
	f_bw(&g_f)->version = 9;
	f_ip(&g_f)->src_addr = rte_cpu_to_be_32(T_OTHER_IP);
	frame_fix(&g_f);
	EXPECT_DROP(&lc, &g_f, DP_DROP_SRC_NOT_ALLOWED);
	rte_lpm_free(lpm);

	/* per model: the lcore open to all, the echo model to the peer only */
	ops = g_stub_ops;
	ops.source_allowed = peer_only_echo;
	t_lcore_init(&lc, g_lc_jumbo.cfg);
	lc.models = &ops;
	msg_init(&g_m, BW_OP_INFER, STUB_MODEL_ECHO);
	msg_tensors(&g_m, g_jumbo_tensors, 1);
	frame_msg(&g_f, &g_m);
	CU_ASSERT_PTR_NOT_NULL(EXPECT_REPLY(&lc, &g_f, BW_STATUS_OK));
	f_ip(&g_f)->src_addr = rte_cpu_to_be_32(T_OTHER_IP);
	frame_fix(&g_f);
	expect_request_dropped(&lc, &g_f, DP_DROP_MODEL_NOT_ALLOWED, __LINE__);
	static const uint8_t pad[256];
	msg_init(&g_m, BW_OP_MODEL_INFO, STUB_MODEL_ECHO);
	msg_body_set(&g_m, pad, sizeof(pad));
	frame_msg(&g_f, &g_m);
	f_ip(&g_f)->src_addr = rte_cpu_to_be_32(T_OTHER_IP);
	frame_fix(&g_f);
	expect_request_dropped(&lc, &g_f, DP_DROP_MODEL_NOT_ALLOWED, __LINE__);
	/* the model's list does not hide the others, nor PING */
	frame_ping(&g_f, &g_m, 8, 0);
	f_ip(&g_f)->src_addr = rte_cpu_to_be_32(T_OTHER_IP);
	frame_fix(&g_f);
	CU_ASSERT_PTR_NOT_NULL(EXPECT_REPLY(&lc, &g_f, BW_STATUS_OK));
	msg_init(&g_m, BW_OP_INFER, STUB_MODEL_UNKNOWN);
	frame_msg(&g_f, &g_m);
	f_ip(&g_f)->src_addr = rte_cpu_to_be_32(T_OTHER_IP);
	frame_fix(&g_f);
	CU_ASSERT_PTR_NOT_NULL(EXPECT_REPLY(&lc, &g_f, BW_STATUS_NOT_FOUND));
	t_reply_release();
}

static void test_ip_bad_hdr_len(void)
{
	uint8_t ihl;

	for (ihl = 0; ihl < 5; ihl++) {
		frame_ping(&g_f, &g_m, 8, 0);
		f_ip(&g_f)->version_ihl = (uint8_t)(0x40 | ihl);
		EXPECT_DROP(&g_lc_jumbo, &g_f, DP_DROP_IP_BAD_HDR_LEN);
	}
	/* IHL 15 (60 bytes) in a 48-byte IPv4 packet: the header itself is cut */
	frame_icmp_echo(&g_f, 20);
	f_ip(&g_f)->version_ihl = 0x4f;
	EXPECT_DROP(&g_lc_jumbo, &g_f, DP_DROP_IP_TRUNCATED);
}

static void test_ip_bad_version(void)
{
	static const uint8_t versions[] = { 6, 0, 5, 15 };
	unsigned int i;

	for (i = 0; i < RTE_DIM(versions); i++) {
		frame_ping(&g_f, &g_m, 8, 0);
		f_ip(&g_f)->version_ihl = (uint8_t)(versions[i] << 4 | 5);
		frame_fix(&g_f);
		EXPECT_DROP(&g_lc_jumbo, &g_f, DP_DROP_IP_BAD_VERSION);
	}
}

static void test_ip_bad_total_len(void)
{
	static const uint16_t totals[] = { 0, 8, 19 };
	unsigned int i;

	for (i = 0; i < RTE_DIM(totals); i++) {
		frame_ping(&g_f, &g_m, 8, 0);
		f_ip(&g_f)->total_length = rte_cpu_to_be_16(totals[i]);
		frame_fix(&g_f);
		EXPECT_DROP(&g_lc_jumbo, &g_f, DP_DROP_IP_BAD_TOTAL_LEN);
	}
	/* below the header length with options */
	frame_ping(&g_f, &g_m, 8, 8);
	f_ip(&g_f)->total_length = rte_cpu_to_be_16(24);
	frame_fix(&g_f);
	EXPECT_DROP(&g_lc_jumbo, &g_f, DP_DROP_IP_BAD_TOTAL_LEN);
	/* above what the frame holds */
	frame_ping(&g_f, &g_m, 8, 0);
	f_ip(&g_f)->total_length = rte_cpu_to_be_16((uint16_t)(g_f.len - T_ETH_LEN + 1));
	frame_fix(&g_f);
	EXPECT_DROP(&g_lc_jumbo, &g_f, DP_DROP_IP_TRUNCATED);
}

static void test_ip_unknown_proto(void)
{
	static const uint8_t protos[] = { IPPROTO_TCP, IPPROTO_SCTP, IPPROTO_IGMP, 0, 255 };
	unsigned int i;

	for (i = 0; i < RTE_DIM(protos); i++) {
		frame_ipv4(&g_f, protos[i], NULL, 40, 0);
		EXPECT_DROP(&g_lc_jumbo, &g_f, DP_DROP_IP_UNKNOWN_PROTO);
	}
}

/* A request with IP options gets a reply without them (IHL 5), its checksums over the new header. */
static void test_ip_options_stripped(void)
{
	static const uint32_t opt_lens[] = { 4, 8, 40 };
	const struct bw_hdr *h;
	unsigned int i;

	for (i = 0; i < RTE_DIM(opt_lens); i++) {
		frame_ping(&g_f, &g_m, 100, opt_lens[i]);
		CU_ASSERT(g_f.len == T_UDP_HDRS_LEN + opt_lens[i] + T_BW_LEN + 100);
		h = EXPECT_REPLY(&g_lc_jumbo, &g_f, BW_STATUS_OK);
		CU_ASSERT_FATAL(h != NULL);
		CU_ASSERT(rte_pktmbuf_pkt_len(g_reply) == T_UDP_HDRS_LEN + T_BW_LEN + 100);
		CU_ASSERT(h->body_len == 100 && memcmp(reply_body(h), msg_body(&g_m), 100) == 0);
	}
	/* an INFER too */
	msg_init(&g_m, BW_OP_INFER, STUB_MODEL_ECHO);
	msg_tensors(&g_m, g_jumbo_tensors, RTE_DIM(g_jumbo_tensors));
	frame_udp(&g_f, g_m.b, g_m.len, 4);
	h = EXPECT_REPLY(&g_lc_jumbo, &g_f, BW_STATUS_OK);
	CU_ASSERT(h != NULL && h->num_tensors == RTE_DIM(g_jumbo_tensors) && h->body_len == g_m.len - T_BW_LEN &&
		  memcmp(reply_body(h), msg_body(&g_m), h->body_len) == 0);
	/* and an error reply (the PING's 32 bytes of body room for its message) */
	frame_ping(&g_f, &g_m, 32, 12);
	f_bw(&g_f)->num_tensors = 1;
	frame_fix(&g_f);
	CU_ASSERT_PTR_NOT_NULL(EXPECT_REPLY(&g_lc_jumbo, &g_f, BW_STATUS_INVALID_ARGUMENT));
}

/* ---- UDP -------------------------------------------------------------------------------------- */

static void test_udp_csum(void)
{
	frame_ping(&g_f, &g_m, 8, 0);
	f_udp(&g_f)->dgram_cksum ^= rte_cpu_to_be_16(0x0001);
	EXPECT_DROP(&g_lc_jumbo, &g_f, DP_DROP_UDP_BAD_CSUM);
	/* a payload byte changed after the checksum was computed */
	frame_ping(&g_f, &g_m, 8, 0);
	msg_body(&g_m)[3] ^= 0x40;
	f_bw(&g_f)->request_id ^= 0x40;
	EXPECT_DROP(&g_lc_jumbo, &g_f, DP_DROP_UDP_BAD_CSUM);
	/* 0: the sender did not checksum (RFC 768); the reply carries a computed one */
	frame_ping(&g_f, &g_m, 8, 0);
	f_udp(&g_f)->dgram_cksum = 0;
	CU_ASSERT_PTR_NOT_NULL(EXPECT_REPLY(&g_lc_jumbo, &g_f, BW_STATUS_OK));
}

static void test_udp_bad_len(void)
{
	static const int deltas[] = { -1, 1, -8, 100 };
	unsigned int i;

	for (i = 0; i < RTE_DIM(deltas); i++) {
		frame_ping(&g_f, &g_m, 16, 0);
		f_udp(&g_f)->dgram_len = rte_cpu_to_be_16((uint16_t)(rte_be_to_cpu_16(f_udp(&g_f)->dgram_len) + deltas[i]));
		frame_fix(&g_f);
		EXPECT_DROP(&g_lc_jumbo, &g_f, DP_DROP_UDP_BAD_LEN);
	}
}

static void test_udp_truncated(void)
{
	uint32_t l4;

	for (l4 = 0; l4 < T_UDP_LEN; l4++) {
		frame_ping(&g_f, &g_m, 8, 0);
		frame_set_l4_len(&g_f, l4);
		EXPECT_DROP(&g_lc_jumbo, &g_f, DP_DROP_UDP_TRUNCATED);
	}
}

static void test_udp_wrong_port(void)
{
	static const uint16_t ports[] = { BW_UDP_PORT_DEFAULT + 1, 0, 53, 0xffff };
	unsigned int i;

	for (i = 0; i < RTE_DIM(ports); i++) {
		frame_ping(&g_f, &g_m, 8, 0);
		f_udp(&g_f)->dst_port = rte_cpu_to_be_16(ports[i]);
		frame_fix(&g_f);
		EXPECT_DROP(&g_lc_jumbo, &g_f, DP_DROP_UDP_WRONG_PORT);
	}
}

/* ---- checksum offloads ------------------------------------------------------------------------ */

/* The NIC's verdict is taken when it gives one; without one (UNKNOWN, NONE) the software checks. */
static void test_rx_csum_offload(void)
{
	static struct dp_lcore lc;
	struct outcome o;

	t_lcore_init(&lc, g_lc_jumbo.cfg);
	lc.rx_csum_offload = true;
	frame_ping(&g_f, &g_m, 8, 0);
	o = t_run(&lc, &g_f, g_f.len, RTE_MBUF_F_RX_IP_CKSUM_GOOD | RTE_MBUF_F_RX_L4_CKSUM_GOOD);
	CU_ASSERT(outcome_is(&o, EXPECT_PROTO_REPLY, BW_STATUS_OK));
	o = t_run(&lc, &g_f, g_f.len, RTE_MBUF_F_RX_IP_CKSUM_BAD | RTE_MBUF_F_RX_L4_CKSUM_GOOD);
	CU_ASSERT(outcome_is(&o, EXPECT_DROP, DP_DROP_IP_BAD_CSUM));
	o = t_run(&lc, &g_f, g_f.len, RTE_MBUF_F_RX_IP_CKSUM_GOOD | RTE_MBUF_F_RX_L4_CKSUM_BAD);
	CU_ASSERT(outcome_is(&o, EXPECT_DROP, DP_DROP_UDP_BAD_CSUM));

	f_ip(&g_f)->hdr_checksum ^= 0xff;
	o = t_run(&lc, &g_f, g_f.len, RTE_MBUF_F_RX_IP_CKSUM_UNKNOWN);
	CU_ASSERT(outcome_is(&o, EXPECT_DROP, DP_DROP_IP_BAD_CSUM));
	o = t_run(&lc, &g_f, g_f.len, RTE_MBUF_F_RX_IP_CKSUM_NONE);
	CU_ASSERT(outcome_is(&o, EXPECT_DROP, DP_DROP_IP_BAD_CSUM));

	frame_ping(&g_f, &g_m, 8, 0);
	f_udp(&g_f)->dgram_cksum ^= 0xff;
	o = t_run(&lc, &g_f, g_f.len, RTE_MBUF_F_RX_IP_CKSUM_GOOD | RTE_MBUF_F_RX_L4_CKSUM_UNKNOWN);
	CU_ASSERT(outcome_is(&o, EXPECT_DROP, DP_DROP_UDP_BAD_CSUM));
	o = t_run(&lc, &g_f, g_f.len, RTE_MBUF_F_RX_IP_CKSUM_GOOD | RTE_MBUF_F_RX_L4_CKSUM_NONE);
	CU_ASSERT(outcome_is(&o, EXPECT_DROP, DP_DROP_UDP_BAD_CSUM));
	t_reply_release();
}

/* With TX offload the reply asks the NIC for both checksums: IPv4 checksum 0, UDP pseudo-header sum
 * (expect_reply checks both when the lcore offloads). */
static void test_tx_csum_offload(void)
{
	static struct dp_lcore lc;

	t_lcore_init(&lc, g_lc_jumbo.cfg);
	lc.tx_csum_offload = true;
	frame_ping(&g_f, &g_m, 24, 4);
	CU_ASSERT_PTR_NOT_NULL(EXPECT_REPLY(&lc, &g_f, BW_STATUS_OK));
	f_bw(&g_f)->version = 9;
	frame_fix(&g_f);
	CU_ASSERT_PTR_NOT_NULL(EXPECT_REPLY(&lc, &g_f, BW_STATUS_INVALID_ARGUMENT));
	t_reply_release();
}

static CU_TestInfo g_packet_tests[] = {
	{ "drop reason names are distinct", test_drop_reason_names },
	{ "frame cut at every length: eth/ip_truncated", test_cut_at_every_length },
	{ "chained mbuf: multi_segment", test_multi_segment },
	{ "eth: wrong/multicast dst dropped, broadcast accepted", test_eth_dst },
	{ "eth: broadcast, multicast, zero source: eth_bad_src", test_eth_src },
	{ "eth: IPv6/VLAN/LLDP: eth_unknown_type", test_eth_unknown_type },
	{ "eth: padding past the datagram is trimmed", test_eth_padding },
	{ "ip: bad header checksum", test_ip_bad_csum },
	{ "ip: fragments dropped, DF accepted", test_ip_fragment },
	{ "ip: wrong destination", test_ip_wrong_dst },
	{ "ip: martian sources (0/8, 127/8, 224/4, 240/4, our own): ip_martian_src", test_ip_martian_src },
	{ "allowlist: parse and format, every malformed element", test_allowlist_parse },
	{ "allowlist: global (IP, ARP) and per model: dropped unanswered", test_allowlist },
	{ "ip: IHL below 5, IHL past the frame", test_ip_bad_hdr_len },
	{ "ip: version not 4", test_ip_bad_version },
	{ "ip: total length below IHL or past the frame", test_ip_bad_total_len },
	{ "ip: TCP/SCTP/IGMP: ip_unknown_proto", test_ip_unknown_proto },
	{ "ip: options stripped from the reply", test_ip_options_stripped },
	{ "udp: bad checksum dropped, checksum 0 accepted", test_udp_csum },
	{ "udp: length disagrees with IP", test_udp_bad_len },
	{ "udp: shorter than its header", test_udp_truncated },
	{ "udp: wrong port", test_udp_wrong_port },
	{ "rx checksum offload flags", test_rx_csum_offload },
	{ "tx checksum offload flags", test_tx_csum_offload },
	CU_TEST_INFO_NULL,
};

int main(int argc, char **argv)
{
	static CU_SuiteInfo suites[] = {
		{ .pName = "dataplane: Ethernet/IPv4/UDP", .pTests = g_packet_tests },
		{ .pName = "dataplane: ARP", .pTests = g_arp_tests },
		{ .pName = "dataplane: ICMP", .pTests = g_icmp_tests },
		{ .pName = "dataplane: protocol v1", .pTests = g_request_tests },
		{ .pName = "dataplane: MTU 1500", .pTests = g_small_mtu_tests },
		{ .pName = "dataplane: authentication", .pInitFunc = t_auth_suite_init, .pTests = g_auth_tests },
		CU_SUITE_INFO_NULL,
	};
	int status;

	(void)argc;
	if (t_env_init(argv[0]) != 0)
		return 1;
	status = bw_cunit_run(suites);
	t_env_fini();
	return status;
}
