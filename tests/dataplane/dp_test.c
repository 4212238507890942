/* SPDX-License-Identifier: BSD-3-Clause */
/* The dataplane tests' fixture: environment, stub model layer, frame and request builders, checks. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_mbuf.h>

#include <batchwire/err.h>

#include "../../dataplane/defs.h" /* dp_request_reply: answering held requests without a TX queue */
#include "dp_test.h"

const struct rte_ether_addr g_our_mac = { .addr_bytes = { 0x02, 0x62, 0x77, 0x00, 0x00, 0x01 } };
const struct rte_ether_addr g_peer_mac = { .addr_bytes = { 0x02, 0x62, 0x77, 0x00, 0x00, 0x02 } };
struct rte_mempool *g_pool;
struct dp_lcore g_lc_jumbo;
struct dp_lcore g_lc_small;
struct rte_mbuf *g_reply;
struct stub_state g_stub;

static struct dp_config g_cfg_jumbo;
static struct dp_config g_cfg_small;

#define T_POOL_MBUFS 63 /* the tests hold at most a couple at a time */

/* ---- environment ------------------------------------------------------------------------------ */

void t_lcore_init(struct dp_lcore *lc, const struct dp_config *cfg)
{
	memset(lc, 0, sizeof(*lc));
	lc->cfg = cfg;
	lc->mac = g_our_mac;
	lc->models = &g_stub_ops;
	lc->model_lcore = &g_stub;
	lc->burst_tsc = T_BURST_TSC;
	if (dp_reasm_create(lc, SOCKET_ID_ANY) != 0) {
		fprintf(stderr, "dp_reasm_create failed\n");
		abort();
	}
}

int t_env_init(const char *prog)
{
	char args[][64] = { "", "--no-huge", "-m", "256", "--no-pci", "--no-telemetry", "-l", "0",
			    "--log-level=*:error", "--file-prefix", "" };
	char *argv[RTE_DIM(args)];
	unsigned int i;

	snprintf(args[0], sizeof(args[0]), "%s", prog);
	snprintf(args[RTE_DIM(args) - 1], sizeof(args[0]), "bwtest-dp-%d", (int)getpid());
	for (i = 0; i < RTE_DIM(args); i++)
		argv[i] = args[i];
	if (rte_eal_init((int)RTE_DIM(argv), argv) < 0) {
		fprintf(stderr, "rte_eal_init: %s\n", rte_strerror(rte_errno));
		return -1;
	}
	g_pool = rte_pktmbuf_pool_create("bwtest_dp", T_POOL_MBUFS, 0, 0, dp_mbuf_data_room(BW_MTU_MAX),
					 SOCKET_ID_ANY);
	if (g_pool == NULL) {
		fprintf(stderr, "mbuf pool: %s\n", rte_strerror(rte_errno));
		rte_eal_cleanup();
		return -1;
	}
	dp_config_defaults(&g_cfg_jumbo);
	g_cfg_jumbo.ipv4_addr = rte_cpu_to_be_32(T_OUR_IP);
	g_cfg_jumbo.mtu = BW_MTU_MAX;
	g_cfg_small = g_cfg_jumbo;
	g_cfg_small.mtu = 1500;
	t_lcore_init(&g_lc_jumbo, &g_cfg_jumbo);
	t_lcore_init(&g_lc_small, &g_cfg_small);
	return 0;
}

void t_env_fini(void)
{
	char runtime_dir[PATH_MAX];

	snprintf(runtime_dir, sizeof(runtime_dir), "%s", rte_eal_get_runtime_dir());
	t_reply_release();
	rte_mempool_free(g_pool);
	rte_eal_cleanup();
	plat_runtime_dir_remove(runtime_dir);
}

void t_check(bool ok, const char *file, int line, const char *fmt, ...)
{
	char text[512];
	va_list ap;

	if (ok) {
		CU_assertImplementation(CU_TRUE, (unsigned int)line, "", file, "", CU_FALSE);
		return;
	}
	va_start(ap, fmt);
	bw_verr(text, sizeof(text), 0, fmt, ap);
	va_end(ap);
	CU_assertImplementation(CU_FALSE, (unsigned int)line, text, file, "", CU_FALSE);
}

/* An assertion in a check helper, reported at the line of the case that called it. */
#define CHECK(cond) t_check((cond), file, line, "%s", #cond)

/* ---- stub model layer ------------------------------------------------------------------------- */

struct stub_model {
	uint32_t id;
	const char *name;
	uint32_t levels;
};

static const struct stub_model g_models[] = {
	{ STUB_MODEL_ECHO, "echo", STUB_ECHO_LEVELS },
	{ STUB_MODEL_BROKEN, "broken", 1 },
	{ STUB_MODEL_BIG, "big", 1 },
	{ STUB_MODEL_ROGUE, "rogue", 1 },
	{ STUB_MODEL_LIAR, "liar", 1 },
	{ STUB_MODEL_WIDE, "wide", 1 },
};

static void stub_cap_check(uint32_t cap)
{
	t_check(g_stub.cap_limit == 0 || cap <= g_stub.cap_limit, __FILE__, __LINE__,
		"body_cap %u given to the model exceeds the MTU's room %u", cap, g_stub.cap_limit);
}

static const void *stub_lookup(void *ctx, uint32_t id, const char *name, uint32_t name_len)
{
	unsigned int i;

	CU_ASSERT(ctx == &g_stub);
	for (i = 0; i < RTE_DIM(g_models); i++) {
		const struct stub_model *sm = &g_models[i];

		if (id != BW_MODEL_ID_ANY ? id == sm->id
					  : name_len == strlen(sm->name) && memcmp(name, sm->name, name_len) == 0)
			return sm;
	}
	return NULL;
}

static uint32_t stub_priority_levels(const void *model)
{
	return ((const struct stub_model *)model)->levels;
}

static int stub_describe(const void *model, uint8_t *buf, uint32_t cap)
{
	const struct stub_model *sm = model;
	struct bw_model_info info = {
		.model_id = sm->id,
		.name_len = (uint16_t)strlen(sm->name),
		.flags = BW_MODEL_F_ANY_TENSORS,
		.priority_levels = (uint16_t)sm->levels,
	};
	uint32_t i;

	g_stub.describe_calls++;
	g_stub.describe_cap = cap;
	stub_cap_check(cap);
	switch (sm->id) {
	case STUB_MODEL_ECHO:
		if (cap < STUB_ECHO_DESC_LEN)
			return -EMSGSIZE;
		memset(buf, 0, STUB_ECHO_DESC_LEN);
		memcpy(buf, &info, sizeof(info));
		memcpy(buf + sizeof(info), sm->name, info.name_len);
		return (int)STUB_ECHO_DESC_LEN;
	case STUB_MODEL_BIG:
		if (cap < STUB_BIG_DESC_LEN)
			return -EMSGSIZE;
		for (i = 0; i < STUB_BIG_DESC_LEN; i++)
			buf[i] = (uint8_t)(i * 13u + 5u);
		return (int)STUB_BIG_DESC_LEN;
	default:
		return -EMSGSIZE;
	}
}

/*
 * Echo takes the request and answers it from its own mbuf (the output is the input, already in
 * place). Its per-lcore context says how: &g_stub (t_lcore_init's lcores, which have no TX queue):
 * held for t_run to answer, as the app's batcher would later; an lcore with a TX queue sets itself
 * (model_lcore = the dp_lcore): answered at once through dp_request_complete.
 */
static enum bw_status stub_infer(void *ctx, const void *model, struct dp_request *req, uint32_t body_cap, char *msg,
				 size_t msg_cap)
{
	const struct stub_model *sm = model;
	uint16_t i;

	CU_ASSERT(ctx == &g_stub || ((struct dp_lcore *)ctx)->model_lcore == ctx);
	g_stub.infer_calls++;
	g_stub.infer_cap = body_cap;
	g_stub.arrival_tsc = req->arrival_tsc;
	g_stub.mbuf = req->mbuf;
	g_stub.hdr_off = (int32_t)((const uint8_t *)req->hdr - req->body);
	g_stub.num_tensors = req->num_tensors;
	for (i = 0; i < req->num_tensors && i < BW_MAX_TENSORS; i++) {
		g_stub.desc_off[i] = (int32_t)((const uint8_t *)req->tensors[i].desc - req->body);
		g_stub.name_off[i] = (int32_t)((const uint8_t *)req->tensors[i].name - req->body);
		g_stub.data_off[i] = (int32_t)(req->tensors[i].data - req->body);
	}
	stub_cap_check(body_cap);
	if (sm->id == STUB_MODEL_BROKEN) {
		snprintf(msg, msg_cap, "%s", STUB_BROKEN_MSG);
		return BW_STATUS_INTERNAL;
	}
	if (sm->id == STUB_MODEL_BIG)
		return BW_STATUS_OK; /* without req->held: nobody would ever answer it */
	if (sm->id == STUB_MODEL_ROGUE) {
		req->held = true;
		g_stub.rogue_mbuf = req->mbuf;
		snprintf(msg, msg_cap, "output too large for the reply");
		return BW_STATUS_RESOURCE_EXHAUSTED;
	}
	/* a segmented request is echoed in its own pages, one datagram's in its own room */
	if (req->msg == NULL && req->hdr->body_len > body_cap) {
		snprintf(msg, msg_cap, "echo output of %u bytes exceeds the %u bytes of room", req->hdr->body_len,
			 body_cap);
		return BW_STATUS_RESOURCE_EXHAUSTED;
	}
	req->held = true;
	if (ctx != &g_stub) {
		dp_request_complete(ctx, req->mbuf, req->hdr, req->msg, BW_STATUS_OK,
				    sm->id == STUB_MODEL_LIAR ? body_cap + 1 : req->body_len, req->num_tensors, NULL);
		return BW_STATUS_OK;
	}
	g_stub.held_mbuf = req->mbuf;
	g_stub.held_hdr = req->hdr;
	g_stub.held_tensors = req->num_tensors;
	g_stub.held_reply_len = sm->id == STUB_MODEL_LIAR ? body_cap + 1 : sm->id == STUB_MODEL_WIDE ? STUB_WIDE_REPLY : 0;
	return BW_STATUS_OK;
}

const struct dp_model_ops g_stub_ops = {
	.lookup = stub_lookup,
	.priority_levels = stub_priority_levels,
	.describe = stub_describe,
	.infer = stub_infer,
	.ctx = &g_stub,
};

/* ---- frames ----------------------------------------------------------------------------------- */

void frame_fix(struct frame *f)
{
	struct rte_ipv4_hdr *ip = f_ip(f);
	uint32_t ihl = (ip->version_ihl & 0xfu) * 4u, total, l4_len;

	if (f_eth(f)->ether_type != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4) || ihl < T_IP_LEN ||
	    T_ETH_LEN + ihl > f->len)
		return;
	ip->hdr_checksum = 0;
	ip->hdr_checksum = (uint16_t)~rte_raw_cksum(ip, ihl);
	total = rte_be_to_cpu_16(ip->total_length);
	if (total < ihl || T_ETH_LEN + total > f->len)
		return;
	l4_len = total - ihl;
	if (ip->next_proto_id == IPPROTO_UDP && l4_len >= T_UDP_LEN) {
		f_udp(f)->dgram_cksum = 0;
		f_udp(f)->dgram_cksum = rte_ipv4_udptcp_cksum(ip, f_udp(f));
	} else if (ip->next_proto_id == IPPROTO_ICMP && l4_len >= sizeof(struct rte_icmp_hdr)) {
		f_icmp(f)->icmp_cksum = 0;
		f_icmp(f)->icmp_cksum = (uint16_t)~rte_raw_cksum(f_icmp(f), l4_len);
	}
}

void frame_ipv4(struct frame *f, uint8_t proto, const void *l4, uint32_t l4_len, uint32_t opt_len)
{
	struct rte_ipv4_hdr *ip = f_ip(f);
	uint32_t ihl = T_IP_LEN + opt_len;

	RTE_VERIFY(opt_len % 4 == 0 && opt_len <= 40 && T_ETH_LEN + ihl + l4_len <= sizeof(f->b));
	memset(f->b, 0, T_ETH_LEN + ihl);
	f_eth(f)->dst_addr = g_our_mac;
	f_eth(f)->src_addr = g_peer_mac;
	f_eth(f)->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	ip->version_ihl = (uint8_t)(0x40 | ihl / 4);
	ip->total_length = rte_cpu_to_be_16((uint16_t)(ihl + l4_len));
	ip->packet_id = rte_cpu_to_be_16(0x1234);
	ip->fragment_offset = rte_cpu_to_be_16(RTE_IPV4_HDR_DF_FLAG);
	ip->time_to_live = 17;
	ip->next_proto_id = proto;
	ip->src_addr = rte_cpu_to_be_32(T_PEER_IP);
	ip->dst_addr = rte_cpu_to_be_32(T_OUR_IP);
	memset(ip + 1, 1, opt_len); /* NOP options */
	if (l4 != NULL)
		memcpy(f->b + T_ETH_LEN + ihl, l4, l4_len);
	else
		memset(f->b + T_ETH_LEN + ihl, 0, l4_len);
	f->len = T_ETH_LEN + ihl + l4_len;
	frame_fix(f);
}

void frame_udp(struct frame *f, const void *payload, uint32_t len, uint32_t opt_len)
{
	struct rte_udp_hdr *udp;

	frame_ipv4(f, IPPROTO_UDP, NULL, T_UDP_LEN + len, opt_len);
	udp = f_udp(f);
	udp->src_port = rte_cpu_to_be_16(T_PEER_PORT);
	udp->dst_port = rte_cpu_to_be_16(BW_UDP_PORT_DEFAULT);
	udp->dgram_len = rte_cpu_to_be_16((uint16_t)(T_UDP_LEN + len));
	memcpy(udp + 1, payload, len);
	frame_fix(f);
}

void frame_icmp_echo(struct frame *f, uint32_t payload_len)
{
	struct rte_icmp_hdr *icmp;
	uint32_t i;

	frame_ipv4(f, IPPROTO_ICMP, NULL, (uint32_t)sizeof(*icmp) + payload_len, 0);
	icmp = f_icmp(f);
	icmp->icmp_type = RTE_IP_ICMP_ECHO_REQUEST;
	icmp->icmp_ident = rte_cpu_to_be_16(0x4242);
	icmp->icmp_seq_nb = rte_cpu_to_be_16(7);
	for (i = 0; i < payload_len; i++)
		((uint8_t *)(icmp + 1))[i] = (uint8_t)(i * 7u + 3u);
	frame_fix(f);
}

void frame_arp(struct frame *f, uint16_t op, uint32_t target_ip)
{
	struct rte_arp_hdr *arp = f_arp(f);

	memset(f->b, 0, T_ETH_LEN + sizeof(*arp));
	memset(&f_eth(f)->dst_addr, 0xff, sizeof(f_eth(f)->dst_addr));
	f_eth(f)->src_addr = g_peer_mac;
	f_eth(f)->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP);
	arp->arp_hardware = rte_cpu_to_be_16(RTE_ARP_HRD_ETHER);
	arp->arp_protocol = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	arp->arp_hlen = RTE_ETHER_ADDR_LEN;
	arp->arp_plen = sizeof(uint32_t);
	arp->arp_opcode = rte_cpu_to_be_16(op);
	arp->arp_data.arp_sha = g_peer_mac;
	arp->arp_data.arp_sip = rte_cpu_to_be_32(T_PEER_IP);
	arp->arp_data.arp_tip = rte_cpu_to_be_32(target_ip);
	f->len = T_ETH_LEN + (uint32_t)sizeof(*arp);
}

void frame_set_l4_len(struct frame *f, uint32_t l4_len)
{
	struct rte_ipv4_hdr *ip = f_ip(f);
	uint32_t ihl = (ip->version_ihl & 0xfu) * 4u;

	ip->total_length = rte_cpu_to_be_16((uint16_t)(ihl + l4_len));
	if (ip->next_proto_id == IPPROTO_UDP && l4_len >= T_UDP_LEN)
		f_udp(f)->dgram_len = rte_cpu_to_be_16((uint16_t)l4_len);
	f->len = T_ETH_LEN + ihl + l4_len;
	frame_fix(f);
}

/* ---- protocol v1 requests --------------------------------------------------------------------- */

void msg_init(struct msg *m, uint8_t opcode, uint32_t model_id)
{
	static uint64_t next_id = 0x0123456789ab0000ULL;
	struct bw_hdr *h = msg_hdr(m);

	memset(h, 0, sizeof(*h));
	h->magic = BW_PROTO_MAGIC;
	h->version = BW_PROTO_VERSION;
	h->opcode = opcode;
	h->request_id = ++next_id;
	h->model_id = model_id;
	h->deadline_us = 5000;
	h->seg_count = 1;
	m->len = T_BW_LEN;
}

void msg_set_body_len(struct msg *m, uint32_t len)
{
	msg_hdr(m)->body_len = len;
	msg_hdr(m)->total_body_len = len;
}

void msg_body_set(struct msg *m, const void *body, uint32_t len)
{
	RTE_VERIFY(T_BW_LEN + len <= sizeof(m->b));
	memcpy(msg_body(m), body, len);
	msg_set_body_len(m, len);
	m->len = T_BW_LEN + len;
}

void msg_tensors(struct msg *m, const struct tensor_spec *t, unsigned int n)
{
	uint8_t *body = msg_body(m);
	uint32_t off = 0, i, j;

	RTE_VERIFY(n <= BW_MAX_TENSORS);
	for (i = 0; i < n; i++) {
		struct bw_tensor_desc *d = (struct bw_tensor_desc *)(body + off);
		uint32_t name_len = t[i].name != NULL ? (uint32_t)strlen(t[i].name) : 0;
		uint64_t bytes = bw_dtype_size(t[i].dtype);

		memset(d, 0, sizeof(*d));
		d->index = t[i].index;
		d->dtype = t[i].dtype;
		d->rank = t[i].rank;
		d->name_len = (uint16_t)name_len;
		for (j = 0; j < t[i].rank && j < BW_MAX_RANK; j++) {
			d->dims[j] = t[i].dims[j];
			bytes *= t[i].dims[j];
		}
		d->data_len = (uint32_t)bytes;
		m->desc_off[i] = off;
		off += (uint32_t)sizeof(*d);
		m->name_off[i] = off;
		memset(body + off, 0, bw_pad8(name_len));
		memcpy(body + off, t[i].name != NULL ? t[i].name : "", name_len);
		off += bw_pad8(name_len);
	}
	for (i = 0; i < n; i++) {
		uint32_t len = ((struct bw_tensor_desc *)(body + m->desc_off[i]))->data_len;

		RTE_VERIFY(T_BW_LEN + off + len <= sizeof(m->b));
		m->data_off[i] = off;
		for (j = 0; j < len; j++)
			body[off + j] = (uint8_t)(i * 31u + j * 7u + 1u);
		off += len;
	}
	msg_hdr(m)->num_tensors = (uint16_t)n;
	msg_set_body_len(m, off);
	m->len = T_BW_LEN + off;
}

void frame_msg(struct frame *f, const struct msg *m)
{
	frame_udp(f, m->b, m->len, 0);
}

void frame_ping(struct frame *f, struct msg *m, uint32_t body_len, uint32_t opt_len)
{
	uint32_t i;

	msg_init(m, BW_OP_PING, 0);
	RTE_VERIFY(T_BW_LEN + body_len <= sizeof(m->b));
	for (i = 0; i < body_len; i++)
		msg_body(m)[i] = (uint8_t)(i * 11u + 9u);
	msg_set_body_len(m, body_len);
	m->len = T_BW_LEN + body_len;
	frame_udp(f, m->b, m->len, opt_len);
}

/* ---- running a frame -------------------------------------------------------------------------- */

void t_reply_release(void)
{
	rte_pktmbuf_free(g_reply);
	g_reply = NULL;
}

/* The index of the one counter that rose by exactly 1; -1 when none moved, -2 otherwise. */
static int single_rise(const uint64_t *before, const uint64_t *after, unsigned int n)
{
	int found = -1;
	unsigned int i;

	for (i = 0; i < n; i++) {
		if (after[i] == before[i])
			continue;
		if (found != -1 || after[i] - before[i] != 1)
			return -2;
		found = (int)i;
	}
	return found;
}

struct outcome t_run(struct dp_lcore *lc, const struct frame *f, uint32_t len, uint64_t rx_ol_flags)
{
	struct dp_lcore_stats before = lc->stats;
	const struct dp_lcore_stats *after = &lc->stats;
	struct outcome o;
	struct rte_mbuf *m;

	t_reply_release();
	m = rte_pktmbuf_alloc(g_pool);
	RTE_VERIFY(m != NULL && len <= f->len && f->len <= rte_pktmbuf_tailroom(m));
	memcpy(rte_pktmbuf_mtod(m, void *), f->b, f->len);
	m->data_len = (uint16_t)len;
	m->pkt_len = len;
	m->ol_flags = rx_ol_flags;
	g_stub.cap_limit = lc->cfg->mtu - T_IP_LEN - T_UDP_LEN - T_BW_LEN;

	g_stub.held_mbuf = NULL;
	g_stub.rogue_mbuf = NULL;
	o.verdict = dp_packet_handle(lc, m);
	if (o.verdict == DP_VERDICT_HELD && g_stub.held_mbuf == m) {
		/* the stub took it: its answer, in place, as dp_request_complete would send it (and count) */
		lc->stats.held_requests--;
		dp_request_reply(lc, m, g_stub.held_hdr, BW_STATUS_OK,
				 g_stub.held_reply_len != 0 ? g_stub.held_reply_len : g_stub.held_hdr->body_len,
				 g_stub.held_tensors, NULL);
		g_stub.held_mbuf = NULL;
		o.verdict = DP_VERDICT_REPLY;
	}

	o.drop = single_rise(before.drops, after->drops, DP_DROP_COUNT);
	o.status = single_rise(before.replies, after->replies, BW_STATUS_COUNT);
	o.requests = after->requests - before.requests;
	o.arp_replies = after->arp_replies - before.arp_replies;
	o.icmp_replies = after->icmp_echo_replies - before.icmp_echo_replies;
	o.io_moved = after->rx_packets != before.rx_packets || after->rx_bytes != before.rx_bytes ||
		     after->tx_packets != before.tx_packets || after->tx_bytes != before.tx_bytes;
	if (o.verdict == DP_VERDICT_REPLY)
		g_reply = m;
	else
		rte_pktmbuf_free(m);
	return o;
}

bool outcome_is(const struct outcome *o, enum expect_kind kind, int code)
{
	bool reply = o->verdict == DP_VERDICT_REPLY && o->drop == -1;

	if (o->io_moved)
		return false;
	switch (kind) {
	case EXPECT_DROP:
		return o->verdict == DP_VERDICT_DROP && o->drop == code && o->status == -1 && o->requests == 0 &&
		       o->arp_replies == 0 && o->icmp_replies == 0;
	case EXPECT_PROTO_REPLY:
		return reply && o->status == code && o->requests == 1 && o->arp_replies == 0 && o->icmp_replies == 0;
	case EXPECT_ARP_REPLY:
		return reply && o->status == -1 && o->requests == 0 && o->arp_replies == 1 && o->icmp_replies == 0;
	case EXPECT_ICMP_REPLY:
		return reply && o->status == -1 && o->requests == 0 && o->arp_replies == 0 && o->icmp_replies == 1;
	}
	return false;
}

static const char *rise_name(int idx, const char *(*name)(int))
{
	return idx == -1 ? "-" : idx == -2 ? "(several)" : name(idx);
}

static const char *drop_name(int idx)
{
	return dp_drop_reason_name((enum dp_drop_reason)idx);
}

static const char *status_name(int idx)
{
	return bw_status_name((uint32_t)idx);
}

const char *outcome_str(const struct outcome *o)
{
	static char text[160];

	snprintf(text, sizeof(text), "%s, drop %s, reply %s, requests +%" PRIu64 ", arp +%" PRIu64
		 ", icmp +%" PRIu64 "%s", o->verdict == DP_VERDICT_REPLY ? "REPLY" : "DROP",
		 rise_name(o->drop, drop_name), rise_name(o->status, status_name), o->requests, o->arp_replies,
		 o->icmp_replies, o->io_moved ? ", rx/tx counters moved" : "");
	return text;
}

static const char *const g_kind_names[] = {
	[EXPECT_DROP] = "drop",
	[EXPECT_PROTO_REPLY] = "protocol reply",
	[EXPECT_ARP_REPLY] = "ARP reply",
	[EXPECT_ICMP_REPLY] = "ICMP echo reply",
};

void expect_outcome_at(struct dp_lcore *lc, const struct frame *f, enum expect_kind kind, int code,
		       const char *file, int line)
{
	struct outcome o = t_run(lc, f, f->len, T_RX_OL_FLAGS);

	t_check(outcome_is(&o, kind, code), file, line, "expected %s %s; got %s", g_kind_names[kind],
		kind == EXPECT_DROP ? drop_name(code) : kind == EXPECT_PROTO_REPLY ? status_name(code) : "",
		outcome_str(&o));
}

/* A valid UTF-8 sequence (structure only: lead and continuation bytes). */
static bool utf8_valid(const uint8_t *p, uint32_t len)
{
	uint32_t i = 0, n, j;

	while (i < len) {
		n = p[i] < 0x80 ? 0 : (p[i] & 0xe0) == 0xc0 ? 1 : (p[i] & 0xf0) == 0xe0 ? 2 : (p[i] & 0xf8) == 0xf0 ? 3 : 9;
		if (n == 9 || (n > 0 && i + n >= len))
			return false;
		for (j = 1; j <= n; j++)
			if ((p[i + j] & 0xc0) != 0x80)
				return false;
		i += n + 1;
	}
	return true;
}

bool reply_msg_has(const struct bw_hdr *h, const char *text)
{
	return h != NULL && memmem(reply_body(h), h->body_len, text, strlen(text)) != NULL;
}

void ipv4_reply_check_at(const struct dp_lcore *lc, const struct frame *req, const struct rte_mbuf *m,
			 uint8_t proto, const char *file, int line)
{
	const struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, const struct rte_ether_hdr *);
	const struct rte_ipv4_hdr *ip = (const struct rte_ipv4_hdr *)(eth + 1);
	uint32_t len = rte_pktmbuf_pkt_len(m);

	CHECK(m->nb_segs == 1 && m->data_len == len);
	t_check(len <= T_ETH_LEN + lc->cfg->mtu, file, line, "reply frame of %u bytes exceeds MTU %u", len,
		lc->cfg->mtu);
	if (len < T_ETH_LEN + T_IP_LEN) {
		t_check(false, file, line, "reply of %u bytes has no room for an IPv4 header", len);
		return;
	}
	CHECK(rte_is_same_ether_addr(&eth->dst_addr, &f_eth(req)->src_addr));
	CHECK(rte_is_same_ether_addr(&eth->src_addr, &lc->mac));
	CHECK(eth->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4));
	CHECK(ip->version_ihl == RTE_IPV4_VHL_DEF);
	CHECK(rte_be_to_cpu_16(ip->total_length) == len - T_ETH_LEN);
	CHECK(ip->time_to_live == 64);
	CHECK(ip->next_proto_id == proto);
	CHECK(ip->src_addr == lc->cfg->ipv4_addr && ip->src_addr == f_ip(req)->dst_addr);
	CHECK(ip->dst_addr == f_ip(req)->src_addr);
	CHECK(ip->fragment_offset == (f_ip(req)->fragment_offset & rte_cpu_to_be_16(RTE_IPV4_HDR_DF_FLAG)));
	if (lc->tx_csum_offload)
		CHECK(ip->hdr_checksum == 0);
	else
		CHECK(rte_raw_cksum(ip, T_IP_LEN) == 0xffff);
}

/* Every Eth/IPv4/UDP field of a reply to req, and its protocol header. */
static const struct bw_hdr *udp_reply_check(const struct dp_lcore *lc, const struct frame *req,
					    const struct rte_mbuf *m, enum bw_status status, const char *file,
					    int line)
{
	const uint8_t *p = rte_pktmbuf_mtod(m, const uint8_t *);
	const struct rte_ipv4_hdr *ip = (const struct rte_ipv4_hdr *)(p + T_ETH_LEN);
	const struct rte_udp_hdr *udp = (const struct rte_udp_hdr *)(p + T_ETH_LEN + T_IP_LEN);
	const struct bw_hdr *h = (const struct bw_hdr *)(p + T_UDP_HDRS_LEN);
	const struct bw_hdr *rq = f_bw(req);
	uint32_t len = rte_pktmbuf_pkt_len(m);

	ipv4_reply_check_at(lc, req, m, IPPROTO_UDP, file, line);
	if (len < T_UDP_HDRS_LEN + T_BW_LEN) {
		t_check(false, file, line, "reply of %u bytes has no room for a protocol header", len);
		return NULL;
	}
	CHECK(udp->src_port == f_udp(req)->dst_port);
	CHECK(udp->dst_port == f_udp(req)->src_port);
	CHECK(rte_be_to_cpu_16(udp->dgram_len) == len - T_ETH_LEN - T_IP_LEN);
	if (lc->tx_csum_offload) {
		CHECK(m->ol_flags == (RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM | RTE_MBUF_F_TX_UDP_CKSUM));
		CHECK(m->l2_len == T_ETH_LEN && m->l3_len == T_IP_LEN);
		CHECK(udp->dgram_cksum == rte_ipv4_phdr_cksum(ip, m->ol_flags));
	} else {
		CHECK(m->ol_flags == 0);
		CHECK(udp->dgram_cksum != 0 && rte_ipv4_udptcp_cksum_verify(ip, udp) == 0);
	}

	CHECK(h->magic == BW_PROTO_MAGIC);
	CHECK(h->version == BW_PROTO_VERSION);
	t_check(h->opcode == (rq->opcode | BW_OP_REPLY), file, line, "reply opcode 0x%02x to request opcode 0x%02x",
		h->opcode, rq->opcode);
	t_check(h->status == status, file, line, "reply status %s (message '%.*s'), expected %s",
		bw_status_name(h->status), (int)RTE_MIN(len - T_UDP_HDRS_LEN - T_BW_LEN, 200u),
		(const char *)(h + 1), bw_status_name(status));
	CHECK(h->request_id == rq->request_id);
	CHECK(h->flags == 0 || (h->flags == BW_FLAG_DRAINING && h->opcode == (BW_OP_PING | BW_OP_REPLY)));
	CHECK(h->seg_index == 0 && h->seg_count == 1);
	CHECK(h->body_len == len - T_UDP_HDRS_LEN - T_BW_LEN);
	CHECK(h->total_body_len == h->body_len);
	if (status != BW_STATUS_OK) {
		CHECK(h->num_tensors == 0);
		/* a message, cut to what the request carried: no reply is larger than its request */
		int64_t req_body = (int64_t)rte_be_to_cpu_16(f_udp(req)->dgram_len) - T_UDP_LEN - T_BW_LEN;

		CHECK(h->body_len <= DP_ERROR_MSG_MAX && (int64_t)h->body_len <= (req_body > 0 ? req_body : 0));
		CHECK(memchr(h + 1, '\0', h->body_len) == NULL);
		t_check(utf8_valid((const uint8_t *)(h + 1), h->body_len), file, line,
			"error message is not valid UTF-8: '%.*s'", (int)RTE_MIN(h->body_len, 200u), (const char *)(h + 1));
	}
	return h;
}

const struct bw_hdr *expect_reply_at(struct dp_lcore *lc, const struct frame *f, enum bw_status status,
				     const char *file, int line)
{
	struct outcome o = t_run(lc, f, f->len, T_RX_OL_FLAGS);

	t_check(outcome_is(&o, EXPECT_PROTO_REPLY, (int)status), file, line, "expected reply %s; got %s",
		bw_status_name(status), outcome_str(&o));
	if (o.verdict != DP_VERDICT_REPLY)
		return NULL;
	return udp_reply_check(lc, f, g_reply, status, file, line);
}
