/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Fuzz target for segmented messages (dataplane/reasm.c, and request.c and packet.c around it): the
 * input is a script of operations on one polling lcore of a ring PMD port. Segments are built from
 * a few bytes each (which of 4 clients, which of 4 request_ids, opcode, model, seg_count, seg_index,
 * slice, last slice, and perturbations of the fields every segment must repeat) and go through
 * dp_packet_handle at the script's clock; other operations advance the clock and run
 * dp_reasm_expire, answer requests a "later" model holds, or send a well-formed message whole.
 * After every operation the TX ring is drained and every reply checked: well-formed Eth/IPv4/UDP
 * with checksums, within the MTU, a v1 reply header, an error as one datagram of 1..200 bytes, and
 * the body of an OK reply exactly what it must be (bodies are a function of total_body_len and the
 * offset, so an echo is checkable byte by byte). At the end everything is answered and expired
 * (the clock far ahead), and the process aborts if any mbuf is not back in the pool or a gauge is
 * not 0.
 *
 * It builds its own frames and stub model layer rather than dp_test.c's, which need CUnit.
 *
 * The lcore is small so that every limit is reachable: MTU 1500, max_message_bytes 16384,
 * reassembly_messages 4, reassembly_mbufs 24. Models: 0 echo (2 priority levels), 1 replies in
 * pages of its own (dp_request_reply_pages, request_max 8192), 2 echo held until the script
 * answers it, 3 fails INTERNAL; 42 does not exist.
 *
 * Build: meson builds it as tests/dataplane/fuzz_reasm with clang (-fsanitize=fuzzer,address,
 * undefined) when clang is installed; `meson test -C BUILD --suite fuzz` runs it for 20 s.
 * A long run, from the build directory, with a corpus kept between runs:
 *
 *     mkdir -p fuzz-reasm-corpus
 *     ./tests/dataplane/fuzz_reasm -max_total_time=3600 -timeout=10 -print_final_stats=1 fuzz-reasm-corpus
 *
 * (-jobs=N -workers=N runs N processes; each initialises EAL with its own --file-prefix.) A crash
 * leaves crash-<sha1> in the working directory; replay it with `./tests/dataplane/fuzz_reasm
 * crash-<sha1>`. Without libFuzzer (gcc), compile with -DBW_FUZZ_STANDALONE for a main() that
 * replays the files named on its command line, or with none runs BW_FUZZ_RUNS random scripts
 * from a fixed seed.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <rte_udp.h>

#include <batchwire/inputs.h> /* bw_splitmix64, for the stand-alone driver's scripts */

#include "defs.h"

#define F_OUR_IP RTE_IPV4(10, 0, 0, 1)
#define F_MTU 1500
#define F_SLICE_MAX (F_MTU - 20 - 8 - (uint32_t)sizeof(struct bw_hdr)) /* 1432 */
#define F_MSG_MAX 16384
#define F_REASM_MSGS 4
#define F_REASM_MBUFS 24
#define F_POOL_MBUFS 1023
#define F_RING_SIZE 1024
#define F_PAGES_REQUEST_MAX 8192
#define F_LATER_MAX 8           /* requests the "later" model holds at once */
#define F_OP_LEN 6              /* bytes per operation */
#define F_LEN_MAX 1900          /* a slice: past the MTU on purpose, inside an mbuf */
#define F_TENSOR_HDR 56u        /* a descriptor and the padded name "t" */

enum f_model {
	F_MODEL_ECHO = 0,
	F_MODEL_PAGES = 1,
	F_MODEL_LATER = 2,
	F_MODEL_FAIL = 3,
	F_MODEL_NONE = 42,
};

static const struct rte_ether_addr g_mac = { .addr_bytes = { 0x02, 0x62, 0x77, 0x00, 0x00, 0x01 } };
static const struct rte_ether_addr g_peer = { .addr_bytes = { 0x02, 0x62, 0x77, 0x00, 0x00, 0x02 } };
static const uint32_t g_client_ip[4] = { RTE_IPV4(10, 0, 0, 2), RTE_IPV4(10, 0, 0, 3), RTE_IPV4(10, 0, 0, 2),
					 RTE_IPV4(172, 16, 0, 9) };
static const uint16_t g_client_port[4] = { 40000, 40000, 40001, 7 };
static const uint64_t g_rids[4] = { 1, 2, 0x8000000000000000ull, 1ull << 32 };
static const uint32_t g_slices[8] = { 256, 257, 300, 512, 1000, 1431, 1432, 255 };

static struct rte_mempool *g_pool;
static struct rte_ring *g_rx, *g_tx;
static struct dp_config g_cfg;
static struct dp_lcore g_lc;
static uint64_t g_now;
static unsigned int g_pool_full;

/* ---- what must hold ---------------------------------------------------------------------------- */

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "fuzz_reasm: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	abort();
}

/* Byte i of every body of total bytes this script sends: a valid one-tensor INFER body (uint8
 * [1, total - 56], named "t") when total allows, then a pattern. An echo must return exactly it. */
static uint8_t body_byte(uint32_t total, uint32_t i)
{
	if (total >= F_TENSOR_HDR && i < F_TENSOR_HDR) {
		uint8_t desc[F_TENSOR_HDR];
		uint32_t dims[2] = { 1, total - F_TENSOR_HDR };

		bw_tensor_desc_write(desc, 0, BW_DTYPE_UINT8, 2, dims, "t", 1, total - F_TENSOR_HDR);
		return desc[i];
	}
	return (uint8_t)(i * 7u + total * 13u + 1u);
}

/* Byte i of a reply body of total bytes the "pages" model writes. */
static uint8_t pages_byte(uint32_t total, uint32_t i)
{
	return (uint8_t)(i * 131u + total + 5u);
}

/* The pages model's reply length for a request body of len bytes: 0 to past one page. */
static uint32_t pages_reply_len(uint32_t len)
{
	return (len * 5u + 3u) % 6000u;
}

/* One reply datagram off the TX ring: everything checkable about it, or abort. */
static void reply_check(const struct rte_mbuf *m)
{
	const uint8_t *p = rte_pktmbuf_mtod(m, const uint8_t *);
	const struct rte_ether_hdr *eth = (const void *)p;
	const struct rte_ipv4_hdr *ip = (const void *)(p + DP_L2_LEN);
	const struct rte_udp_hdr *udp = (const void *)(p + DP_L2_LEN + DP_L3_LEN);
	const struct bw_hdr *h = (const void *)(p + DP_UDP_HDRS_LEN);
	const uint8_t *body = (const uint8_t *)(h + 1);
	uint32_t len = rte_pktmbuf_pkt_len(m), slice, off;

	if (m->nb_segs != 1 || m->data_len != len)
		fail("reply in %u mbufs", m->nb_segs);
	if (len < DP_UDP_HDRS_LEN + sizeof(*h) || len > DP_L2_LEN + F_MTU)
		fail("reply frame of %u bytes", len);
	if (!rte_is_same_ether_addr(&eth->src_addr, &g_mac) || !rte_is_same_ether_addr(&eth->dst_addr, &g_peer))
		fail("reply Ethernet addresses");
	if (ip->version_ihl != RTE_IPV4_VHL_DEF || rte_be_to_cpu_16(ip->total_length) != len - DP_L2_LEN ||
	    rte_raw_cksum(ip, DP_L3_LEN) != 0xffff || ip->src_addr != g_cfg.ipv4_addr || ip->next_proto_id != IPPROTO_UDP)
		fail("reply IPv4 header");
	if (rte_be_to_cpu_16(udp->dgram_len) != len - DP_L2_LEN - DP_L3_LEN ||
	    udp->src_port != rte_cpu_to_be_16(g_cfg.udp_port) || rte_ipv4_udptcp_cksum_verify(ip, udp) != 0)
		fail("reply UDP header");
	if (h->magic != BW_PROTO_MAGIC || h->version != BW_PROTO_VERSION || !(h->opcode & BW_OP_REPLY) || h->flags != 0 ||
	    h->body_len != len - DP_UDP_HDRS_LEN - sizeof(*h))
		fail("reply header: opcode 0x%02x body_len %u in %u bytes", h->opcode, h->body_len, len);
	if (h->status >= BW_STATUS_COUNT)
		fail("reply status %u", h->status);
	if (h->status != BW_STATUS_OK) {
		/* the message may be empty: it is cut to what the request carried (no reply larger than it) */
		if (h->seg_count != 1 || h->seg_index != 0 || h->total_body_len != h->body_len || h->num_tensors != 0 ||
		    h->body_len > DP_ERROR_MSG_MAX || memchr(body, '\0', h->body_len) != NULL)
			fail("error reply %s: segment %u of %u, %u of %u bytes", bw_status_name(h->status), h->seg_index,
			     h->seg_count, h->body_len, h->total_body_len);
		return;
	}
	if (h->seg_count == 0 || h->seg_index >= h->seg_count || h->body_len > h->total_body_len)
		fail("OK reply: segment %u of %u, %u of %u bytes", h->seg_index, h->seg_count, h->body_len, h->total_body_len);
	if ((h->opcode & ~BW_OP_REPLY) == BW_OP_MODEL_INFO)
		return;
	/* where this slice sits in the reply body: every slice but the last is as long as the others */
	if (h->seg_count == 1) {
		slice = h->body_len;
		if (h->body_len != h->total_body_len)
			fail("OK reply of one datagram: %u of %u bytes", h->body_len, h->total_body_len);
	} else if (h->seg_index + 1u < h->seg_count) {
		slice = h->body_len;
	} else {
		if ((h->total_body_len - h->body_len) % (h->seg_count - 1u) != 0)
			fail("OK reply: a last slice of %u does not cut %u into %u", h->body_len, h->total_body_len,
			     h->seg_count);
		slice = (h->total_body_len - h->body_len) / (h->seg_count - 1u);
	}
	off = (uint32_t)h->seg_index * slice;
	for (uint32_t i = 0; i < h->body_len; i++) {
		bool pages = (h->opcode & ~BW_OP_REPLY) == BW_OP_INFER && h->model_id == F_MODEL_PAGES;
		uint8_t want = pages ? pages_byte(h->total_body_len, off + i) : body_byte(h->total_body_len, off + i);

		if (body[i] != want)
			fail("OK reply (opcode 0x%02x model %u) segment %u of %u: byte %u of %u is 0x%02x, expected 0x%02x",
			     h->opcode, h->model_id, h->seg_index, h->seg_count, off + i, h->total_body_len, body[i], want);
	}
}

static void tx_drain(void)
{
	struct rte_mbuf *m = NULL;

	dp_tx_flush(&g_lc);
	while (rte_ring_dequeue(g_tx, (void **)&m) == 0) {
		reply_check(m);
		rte_pktmbuf_free(m);
	}
}

/* ---- the stub model layer ---------------------------------------------------------------------- */

struct later {
	struct rte_mbuf *mbuf;
	struct bw_hdr *hdr;
	struct dp_msg *msg;
	uint32_t len;
	uint16_t tensors;
};
static struct later g_later[F_LATER_MAX];
static unsigned int g_nb_later;

static const uint32_t g_model_ids[] = { F_MODEL_ECHO, F_MODEL_PAGES, F_MODEL_LATER, F_MODEL_FAIL };

static const void *stub_lookup(void *ctx, uint32_t id, const char *name, uint32_t name_len)
{
	(void)ctx;
	if (id == BW_MODEL_ID_ANY)
		return name_len == 4 && memcmp(name, "echo", 4) == 0 ? &g_model_ids[0] : NULL;
	for (unsigned int i = 0; i < RTE_DIM(g_model_ids); i++)
		if (g_model_ids[i] == id)
			return &g_model_ids[i];
	return NULL;
}

static uint32_t stub_priority_levels(const void *model)
{
	return *(const uint32_t *)model == F_MODEL_ECHO ? 2 : 1;
}

static int stub_describe(const void *model, uint8_t *buf, uint32_t cap)
{
	struct bw_model_info info = { .model_id = *(const uint32_t *)model, .priority_levels = 1 };

	if (cap < sizeof(info))
		return -EMSGSIZE;
	memcpy(buf, &info, sizeof(info));
	return (int)sizeof(info);
}

static uint32_t stub_request_max(const void *model)
{
	return *(const uint32_t *)model == F_MODEL_PAGES ? F_PAGES_REQUEST_MAX : 0;
}

static void later_complete(unsigned int i)
{
	struct later l = g_later[i];

	g_later[i] = g_later[--g_nb_later];
	dp_request_complete(&g_lc, l.mbuf, l.hdr, l.msg, BW_STATUS_OK, l.len, l.tensors, NULL);
}

static enum bw_status stub_infer(void *lcore, const void *model, struct dp_request *req, uint32_t body_cap, char *msg,
				 size_t msg_cap)
{
	struct dp_lcore *lc = lcore;
	const struct bw_pages *pages;
	uint32_t len;
	int rc;

	switch (*(const uint32_t *)model) {
	case F_MODEL_ECHO:
		if (req->msg == NULL && req->body_len > body_cap)
			return BW_STATUS_RESOURCE_EXHAUSTED;
		req->held = true;
		dp_request_complete(lc, req->mbuf, req->hdr, req->msg, BW_STATUS_OK, req->body_len, req->num_tensors, NULL);
		return BW_STATUS_OK;
	case F_MODEL_PAGES:
		len = pages_reply_len(req->body_len);
		rc = dp_request_reply_pages(lc, req, len, &pages);
		if (rc != 0) {
			snprintf(msg, msg_cap, "no reply pages: %d", rc);
			return BW_STATUS_RESOURCE_EXHAUSTED;
		}
		if (pages == NULL || (uint64_t)pages->page_len * pages->nb_pages < len)
			fail("dp_request_reply_pages gave %u pages of %u for %u bytes", pages ? pages->nb_pages : 0,
			     pages ? pages->page_len : 0, len);
		for (uint32_t i = 0; i < len; i++)
			pages->page[i / pages->page_len][i % pages->page_len] = pages_byte(len, i);
		req->held = true;
		dp_request_complete(lc, req->mbuf, req->hdr, req->msg, BW_STATUS_OK, len, 0, NULL);
		return BW_STATUS_OK;
	case F_MODEL_LATER:
		if (req->msg == NULL && req->body_len > body_cap)
			return BW_STATUS_RESOURCE_EXHAUSTED;
		if (g_nb_later == F_LATER_MAX)
			later_complete(0);
		req->held = true;
		g_later[g_nb_later++] = (struct later){ req->mbuf, req->hdr, req->msg, req->body_len, req->num_tensors };
		return BW_STATUS_OK;
	default:
		snprintf(msg, msg_cap, "model failed");
		return BW_STATUS_INTERNAL;
	}
}

static const struct dp_model_ops g_ops = {
	.lookup = stub_lookup,
	.priority_levels = stub_priority_levels,
	.describe = stub_describe,
	.request_max = stub_request_max,
	.infer = stub_infer,
};

/* ---- segments ---------------------------------------------------------------------------------- */

/* A request datagram from client c: hdr, then len body bytes of a body of total bytes from offset
 * off; checksums set. */
static void frame_send(unsigned int c, const struct bw_hdr *hdr, uint32_t off, uint32_t len, uint32_t total)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(g_pool);
	uint32_t l4 = (uint32_t)sizeof(struct rte_udp_hdr) + (uint32_t)sizeof(*hdr) + len;
	struct rte_ether_hdr *eth;
	struct rte_ipv4_hdr *ip;
	struct rte_udp_hdr *udp;
	uint8_t *body;
	enum dp_verdict v;

	if (m == NULL)
		fail("mbuf pool empty: %u free of %u", rte_mempool_avail_count(g_pool), g_pool_full);
	eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	ip = (struct rte_ipv4_hdr *)(eth + 1);
	udp = (struct rte_udp_hdr *)(ip + 1);
	memset(eth, 0, DP_UDP_HDRS_LEN);
	eth->dst_addr = g_mac;
	eth->src_addr = g_peer;
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	ip->version_ihl = RTE_IPV4_VHL_DEF;
	ip->total_length = rte_cpu_to_be_16((uint16_t)(DP_L3_LEN + l4));
	ip->time_to_live = 64;
	ip->next_proto_id = IPPROTO_UDP;
	ip->src_addr = rte_cpu_to_be_32(g_client_ip[c]);
	ip->dst_addr = g_cfg.ipv4_addr;
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	udp->src_port = rte_cpu_to_be_16(g_client_port[c]);
	udp->dst_port = rte_cpu_to_be_16(g_cfg.udp_port);
	udp->dgram_len = rte_cpu_to_be_16((uint16_t)l4);
	memcpy(udp + 1, hdr, sizeof(*hdr));
	body = (uint8_t *)(udp + 1) + sizeof(*hdr);
	for (uint32_t i = 0; i < len; i++)
		body[i] = body_byte(total, off + i);
	m->data_len = (uint16_t)(DP_L2_LEN + DP_L3_LEN + l4);
	m->pkt_len = m->data_len;
	udp->dgram_cksum = rte_ipv4_udptcp_cksum(ip, udp);

	g_lc.burst_tsc = g_now;
	v = dp_packet_handle(&g_lc, m);
	if (v == DP_VERDICT_REPLY)
		dp_tx_enqueue(&g_lc, m);
	else if (v == DP_VERDICT_DROP)
		rte_pktmbuf_free(m);
}

/* A segment as the operation's bytes describe it. */
static void op_segment(const uint8_t *b)
{
	static const uint8_t opcodes[4] = { BW_OP_PING, BW_OP_INFER, BW_OP_INFER, BW_OP_MODEL_INFO };
	unsigned int client = b[1] & 3u;
	uint16_t count = (uint16_t)(1 + (b[2] & 15u));
	uint16_t index = (uint16_t)((b[2] >> 4) % count);
	uint32_t slice = g_slices[b[3] & 7u];
	uint32_t last = 1 + (uint32_t)(b[3] >> 3) * slice / 32u;
	uint32_t total = slice * (count - 1u) + last, len = index + 1u < count ? slice : last;
	struct bw_hdr h = {
		.magic = BW_PROTO_MAGIC,
		.version = BW_PROTO_VERSION,
		.opcode = opcodes[(b[1] >> 4) & 3u],
		.request_id = g_rids[(b[1] >> 2) & 3u],
		.model_id = g_model_ids[(b[1] >> 6) & 3u],
	};

	if (b[4] & 0x80) /* far past max_message_bytes, seg_count unchanged */
		total += F_MSG_MAX;
	h.num_tensors = h.opcode == BW_OP_INFER ? 1 : 0;
	h.deadline_us = (b[4] & 0x01) ? 200u + 100u * (b[5] & 7u) : BW_DEADLINE_NONE;
	if (b[4] & 0x02)
		h.priority = 1 + (b[5] >> 7);
	if (b[4] & 0x04)
		h.num_tensors ^= 1;
	if (b[4] & 0x08)
		total += 1 + ((b[5] >> 3) & 3u);
	if (b[4] & 0x10)
		len = (b[5] & 0x08) ? len + 1 + ((b[5] >> 4) & 7u) : len - RTE_MIN(len, 1u + ((b[5] >> 4) & 7u));
	if (b[4] & 0x20)
		h.model_id = F_MODEL_NONE;
	if (b[4] & 0x40)
		count = (uint16_t)(count + 1 + (b[5] & 1u));
	if (count == 1)
		total = len; /* one datagram: total_body_len must be body_len */
	len = RTE_MIN(len, (uint32_t)F_LEN_MAX);
	h.seg_index = index;
	h.seg_count = count;
	h.body_len = len;
	h.total_body_len = total;
	frame_send(client, &h, (uint32_t)index * slice, len, total);
}

/* A well-formed message sent whole, in order or reversed. */
static void op_message(const uint8_t *b)
{
	uint16_t count = (uint16_t)(2 + (b[2] & 7u));
	uint32_t slice = g_slices[b[3] % 7u];
	uint32_t last = 1 + (uint32_t)b[4] * slice / 256u, total = slice * (count - 1u) + last;
	struct bw_hdr h = {
		.magic = BW_PROTO_MAGIC,
		.version = BW_PROTO_VERSION,
		.opcode = (b[1] & 0x10) ? BW_OP_INFER : BW_OP_PING,
		.request_id = g_rids[(b[1] >> 2) & 3u],
		.model_id = g_model_ids[(b[1] >> 6) & 3u],
		.num_tensors = (b[1] & 0x10) ? 1 : 0,
		.deadline_us = (b[5] & 1) ? 1000 : BW_DEADLINE_NONE,
		.seg_count = count,
		.total_body_len = total,
	};

	for (uint16_t i = 0; i < count; i++) {
		uint16_t k = (b[5] & 2) ? (uint16_t)(count - 1 - i) : i;

		h.seg_index = k;
		h.body_len = k + 1u < count ? slice : last;
		frame_send(b[1] & 3u, &h, (uint32_t)k * slice, h.body_len, total);
	}
}

static void op_run(const uint8_t *b)
{
	switch (b[0] & 7u) {
	case 4: /* the clock: up to about 1 s at once, then the expiry scan */
		g_now += plat_us_to_tsc(((uint32_t)b[1] | (uint32_t)b[2] << 8) * 16u);
		dp_reasm_expire(&g_lc, g_now);
		break;
	case 5:
		if (g_nb_later > 0)
			later_complete(b[1] % g_nb_later);
		break;
	case 6:
		op_message(b);
		break;
	case 7: /* a burst's worth of time: the same instant again */
		dp_reasm_expire(&g_lc, g_now);
		break;
	default:
		op_segment(b);
		break;
	}
	tx_drain();
}

/* Everything answered, everything expired: nothing may be left. */
static void script_end(void)
{
	const struct dp_lcore_stats *s = &g_lc.stats;

	while (g_nb_later > 0)
		later_complete(0);
	tx_drain();
	g_now += plat_us_to_tsc(UINT32_MAX + UINT64_C(1));
	dp_reasm_expire(&g_lc, g_now);
	tx_drain();
	if (dp_reasm_expire(&g_lc, g_now) != 0)
		fail("entries left after expiring everything");
	if (s->reasm_messages != 0 || s->reasm_segments != 0 || s->reasm_bytes != 0 || s->held_messages != 0 ||
	    s->held_mbufs != 0)
		fail("gauges not 0 at the end: reasm_messages %" PRIu64 " reasm_segments %" PRIu64 " reasm_bytes %" PRIu64
		     " held_messages %" PRIu64 " held_mbufs %" PRIu64,
		     s->reasm_messages, s->reasm_segments, s->reasm_bytes, s->held_messages, s->held_mbufs);
	if (rte_mempool_avail_count(g_pool) != g_pool_full)
		fail("%u of %u mbufs back in the pool at the end", rte_mempool_avail_count(g_pool), g_pool_full);
}

/* ---- environment ------------------------------------------------------------------------------- */

static char g_runtime_dir[PATH_MAX];

/* What the scripts of this process reached, summed: a run that never makes a message whole, or
 * never meets a limit, says so here. */
static void reach_print(void)
{
	const struct dp_lcore_stats *s = &g_lc.stats;

	fprintf(stderr, "fuzz_reasm: segments_in %" PRIu64 " messages_reassembled %" PRIu64 " segments_out %" PRIu64,
		s->segments_in, s->messages_reassembled, s->segments_out);
	for (unsigned int k = 0; k < DP_REASM_REASON_COUNT; k++)
		fprintf(stderr, " %s %" PRIu64, dp_reasm_reason_name((enum dp_reasm_reason)k), s->reasm[k]);
	for (unsigned int k = 0; k < BW_STATUS_COUNT; k++)
		fprintf(stderr, " %s %" PRIu64, bw_status_name(k), s->replies[k]);
	fprintf(stderr, "\n");
}

static void env_fini(void)
{
	reach_print();
	dp_lcore_fini(&g_lc);
	rte_eal_cleanup();
	plat_runtime_dir_remove(g_runtime_dir); /* private to the process */
}

static int env_init(void)
{
	char args[][64] = { "fuzz_reasm", "--no-huge", "-m", "256", "--no-pci", "--no-telemetry", "-l", "0",
			    "--log-level=*:error", "--file-prefix", "" };
	char *argv[RTE_DIM(args)], err[256];
	struct rte_mempool *pools[1];
	int sockets[1], port;

	snprintf(args[RTE_DIM(args) - 1], sizeof(args[0]), "bwfuzz-reasm-%d", (int)getpid());
	for (unsigned int i = 0; i < RTE_DIM(args); i++)
		argv[i] = args[i];
	if (rte_eal_init((int)RTE_DIM(argv), argv) < 0) {
		fprintf(stderr, "rte_eal_init: %s\n", rte_strerror(rte_errno));
		return -1;
	}
	snprintf(g_runtime_dir, sizeof(g_runtime_dir), "%s", rte_eal_get_runtime_dir());
	if (plat_clock_init() != 0)
		return -1;
	dp_config_defaults(&g_cfg);
	g_cfg.ipv4_addr = rte_cpu_to_be_32(F_OUR_IP);
	g_cfg.mtu = F_MTU;
	g_cfg.msg_max = F_MSG_MAX;
	g_cfg.reasm_msgs = F_REASM_MSGS;
	g_cfg.reasm_mbufs = F_REASM_MBUFS;
	if (dp_config_finalize(&g_cfg, err, sizeof(err)) != 0) {
		fprintf(stderr, "dp_config_finalize: %s\n", err);
		return -1;
	}
	g_pool = rte_pktmbuf_pool_create("bwfuzz", F_POOL_MBUFS, 0, 0, dp_mbuf_data_room(F_MTU), (int)rte_socket_id());
	g_rx = rte_ring_create("bwfuzz_rx", F_RING_SIZE, (int)rte_socket_id(), RING_F_SP_ENQ | RING_F_SC_DEQ);
	g_tx = rte_ring_create("bwfuzz_tx", F_RING_SIZE, (int)rte_socket_id(), RING_F_SP_ENQ | RING_F_SC_DEQ);
	if (g_pool == NULL || g_rx == NULL || g_tx == NULL)
		return -1;
	port = rte_eth_from_rings("bwfuzz", &g_rx, 1, &g_tx, 1, rte_socket_id());
	if (port < 0)
		return -1;
	pools[0] = g_pool;
	sockets[0] = (int)rte_socket_id();
	if (dp_port_init((uint16_t)port, 1, &g_cfg, pools, sockets) != 0 ||
	    dp_lcore_init(&g_lc, rte_lcore_id(), (uint16_t)port, 0, (int)rte_socket_id(), &g_cfg, &g_ops) != 0)
		return -1;
	g_lc.model_lcore = &g_lc;
	g_lc.mac = g_mac;
	g_pool_full = rte_mempool_avail_count(g_pool);
	g_now = UINT64_C(1) << 40;
	atexit(env_fini);
	return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	if (env_init() != 0) {
		fprintf(stderr, "fuzz_reasm: environment set-up failed\n");
		exit(1);
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	for (size_t at = 0; at + F_OP_LEN <= size; at += F_OP_LEN)
		op_run(data + at);
	script_end();
	return 0;
}

#ifdef BW_FUZZ_STANDALONE
#define BW_FUZZ_RUNS 20000
#define BW_FUZZ_INPUT_MAX 4096

int main(int argc, char **argv)
{
	static uint8_t buf[BW_FUZZ_INPUT_MAX];
	uint64_t s = 0x5eed;

	LLVMFuzzerInitialize(&argc, &argv);
	for (int i = 1; i < argc; i++) {
		FILE *f = fopen(argv[i], "rb");
		size_t n;

		if (f == NULL) {
			perror(argv[i]);
			return 1;
		}
		n = fread(buf, 1, sizeof(buf), f);
		fclose(f);
		LLVMFuzzerTestOneInput(buf, n);
	}
	if (argc > 1)
		return 0;
	for (unsigned int run = 0; run < BW_FUZZ_RUNS; run++) {
		size_t n = (size_t)(bw_splitmix64(&s) % BW_FUZZ_INPUT_MAX);

		for (size_t k = 0; k < n; k++)
			buf[k] = (uint8_t)bw_splitmix64(&s);
		LLVMFuzzerTestOneInput(buf, n);
	}
	printf("fuzz_reasm: %u random scripts, every mbuf back, every gauge 0\n", BW_FUZZ_RUNS);
	return 0;
}
#endif
