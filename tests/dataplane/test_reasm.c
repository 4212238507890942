/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of dataplane/reasm.c (docs/protocol.md "Segmentation") through the code that calls it:
 * segment datagrams built here (Eth/IPv4/UDP with checksums, the 40-byte header, the slice) go through
 * dp_packet_handle at an arrival time the case chooses (lc->burst_tsc), or through a ring PMD port's RX
 * ring and dp_rx_poll; every reply leaves through the port's TX ring, where it is taken apart.
 *
 * The lcores are real ones (dp_lcore_init on a started ring port), so segmented replies and the
 * answers reassembly sends itself (DEADLINE_EXCEEDED from dp_reasm_expire) really go out. The stub
 * model layer's echo answers at once through dp_request_complete (model_lcore is the lcore itself).
 *
 * Every case checks exact counters (segments, reassembled, each discard reason, each reply status),
 * exact reply bytes, and ends the same way: whatever the table still holds expires without a word,
 * nothing is left unsent or unclaimed, the gauges are 0 and every mbuf is back in the pool.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <batchwire/inputs.h> /* bw_splitmix64: a fixed seed gives the same case on every machine */

#include "../bw_cunit.h"
#include "defs.h" /* dp_tx_enqueue: a verdict REPLY is sent as dp_rx_poll sends it */
#include "dp_test.h"

#define T_SLICE_1500 1432u      /* the largest slice at MTU 1500: 1500 - 20 - 8 - 40 */
#define T_SLICE_9000 8932u      /* at MTU 9000 */
#define T_RING_SIZE 4096        /* RX and TX: the largest message here (2351 segments) and its reply */
#define T_POOL_MBUFS 4095
#define T_BODY_SLACK 9000u      /* a segment made longer than its message reads past the body */
#define T_CLIENTS 8
#define T_FAR_US (UINT32_MAX + UINT64_C(1)) /* past any message's clock: deadline_us is 32 bits */
#define T_ARRIVAL_TSC UINT64_C(0x100000000000) /* the arrival time of cases that script the clock */
#define T_TIMEOUT_US (DP_REASM_TIMEOUT_MS_DEFAULT * UINT64_C(1000)) /* reassembly_timeout_ms by default */

static struct rte_ring *g_rx;
static struct rte_ring *g_tx;
static int g_port = -1;
static struct dp_config g_cfg_1500; /* defaults at MTU 1500 */
static struct dp_config g_cfg_9000; /* defaults at MTU 9000 */
static struct dp_lcore g_lc1500;
static struct dp_lcore g_lc9000;

/* Sources of requests, host byte order: four addresses, two ports each. */
struct client {
	uint32_t ip;
	uint16_t port;
};
static const struct client g_clients[T_CLIENTS] = {
	{ RTE_IPV4(10, 0, 0, 2), 40000 }, { RTE_IPV4(10, 0, 0, 2), 40001 }, { RTE_IPV4(10, 0, 0, 3), 40000 },
	{ RTE_IPV4(10, 0, 0, 3), 40001 }, { RTE_IPV4(10, 0, 0, 4), 40000 }, { RTE_IPV4(10, 0, 0, 4), 40001 },
	{ RTE_IPV4(10, 0, 0, 5), 40000 }, { RTE_IPV4(192, 168, 7, 9), 65535 },
};

/* ---- failure messages ------------------------------------------------------------------------- */

static char g_ctx[160]; /* the case running, named in every failure */

static void ctx_set(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void ctx_set(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(g_ctx, sizeof(g_ctx), fmt, ap);
	va_end(ap);
}

/* An assertion reported at line, its message (after the case's name) formatted only on failure. */
static void check_at(bool ok, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void check_at(bool ok, int line, const char *fmt, ...)
{
	char text[400];
	va_list ap;

	if (ok) {
		t_check(true, __FILE__, line, "%s", "");
		return;
	}
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	t_check(false, __FILE__, line, "%s: %s", g_ctx, text);
}
#define CHECKF(cond, ...) check_at((cond), __LINE__, __VA_ARGS__)

/* ---- messages --------------------------------------------------------------------------------- */

/* A segmented request as its client cuts it. */
struct tmsg {
	struct bw_hdr hdr;          /* what every segment says; seg_index and body_len are per segment */
	uint32_t slice;             /* every slice but the last */
	uint8_t *body;              /* total_body_len bytes, then T_BODY_SLACK */
	const struct client *from;
};

static uint16_t tmsg_count(const struct tmsg *t)
{
	return t->hdr.seg_count;
}

static uint32_t tmsg_total(const struct tmsg *t)
{
	return t->hdr.total_body_len;
}

/* The length of segment k's slice as the client cuts it. */
static uint32_t seg_len(const struct tmsg *t, uint32_t k)
{
	return k + 1u < tmsg_count(t) ? t->slice : tmsg_total(t) - t->slice * (tmsg_count(t) - 1u);
}

/* A request from a client with a fresh request_id, no deadline, priority 0, and no body yet. */
static void tmsg_init(struct tmsg *t, uint8_t opcode, uint32_t model_id, uint32_t slice, unsigned int client)
{
	static uint64_t next_id = UINT64_C(0x5e65000000000000);

	memset(t, 0, sizeof(*t));
	t->hdr.magic = BW_PROTO_MAGIC;
	t->hdr.version = BW_PROTO_VERSION;
	t->hdr.opcode = opcode;
	t->hdr.request_id = ++next_id;
	t->hdr.model_id = model_id;
	t->hdr.deadline_us = BW_DEADLINE_NONE;
	t->slice = slice;
	t->from = &g_clients[client];
}

static void tmsg_alloc(struct tmsg *t, uint32_t total)
{
	free(t->body);
	t->body = calloc(1, (size_t)total + T_BODY_SLACK);
	RTE_VERIFY(t->body != NULL);
	t->hdr.total_body_len = total;
	t->hdr.seg_count = (uint16_t)((total + t->slice - 1) / t->slice);
}

/* total bytes of a pattern that depends on seed: no two messages of a case carry the same body. */
static void tmsg_pattern(struct tmsg *t, uint32_t total, uint64_t seed)
{
	uint64_t s = seed * UINT64_C(0x9e3779b97f4a7c15) + 1;

	tmsg_alloc(t, total);
	for (uint32_t i = 0; i < total; i++)
		t->body[i] = (uint8_t)(bw_splitmix64(&s) >> 56);
}

/* A body of n tensors uint8 [1, lens[i]] named names[i] (NULL: none), payloads of pattern. */
static void tmsg_tensors(struct tmsg *t, const uint32_t *lens, const char *const *names, unsigned int n, uint64_t seed)
{
	uint64_t s = seed * UINT64_C(0x9e3779b97f4a7c15) + 7;
	uint32_t total = 0, off = 0;

	for (unsigned int i = 0; i < n; i++)
		total += (uint32_t)sizeof(struct bw_tensor_desc) + bw_pad8(names[i] != NULL ? (uint32_t)strlen(names[i]) : 0) +
			 lens[i];
	tmsg_alloc(t, total);
	for (unsigned int i = 0; i < n; i++) {
		uint32_t dims[2] = { 1, lens[i] };
		uint16_t name_len = (uint16_t)(names[i] != NULL ? strlen(names[i]) : 0);

		off += bw_tensor_desc_write(t->body + off, (uint16_t)i, BW_DTYPE_UINT8, 2, dims, names[i], name_len, lens[i]);
	}
	for (; off < total; off++)
		t->body[off] = (uint8_t)(bw_splitmix64(&s) >> 56);
	t->hdr.num_tensors = (uint16_t)n;
}

static void tmsg_fini(struct tmsg *t)
{
	free(t->body);
	t->body = NULL;
}

/* ---- segment frames --------------------------------------------------------------------------- */

static struct frame g_f;
static uint8_t g_payload[T_BW_LEN + BW_MTU_MAX];

/* Segment k of t with a slice of len bytes from the body at k * slice, as g_f: from t's client,
 * with opt_len bytes of IP options; checksums set. */
static void seg_frame_opt(const struct tmsg *t, uint32_t k, uint32_t len, uint32_t opt_len)
{
	struct bw_hdr h = t->hdr;

	RTE_VERIFY((uint64_t)k * t->slice + len <= (uint64_t)tmsg_total(t) + T_BODY_SLACK);
	h.seg_index = (uint16_t)k;
	h.body_len = len;
	memcpy(g_payload, &h, sizeof(h));
	memcpy(g_payload + T_BW_LEN, t->body + (size_t)k * t->slice, len);
	frame_udp(&g_f, g_payload, T_BW_LEN + len, opt_len);
	f_ip(&g_f)->src_addr = rte_cpu_to_be_32(t->from->ip);
	f_udp(&g_f)->src_port = rte_cpu_to_be_16(t->from->port);
	frame_fix(&g_f);
}

static void seg_frame_len(const struct tmsg *t, uint32_t k, uint32_t len)
{
	seg_frame_opt(t, k, len, 0);
}

static void seg_frame(const struct tmsg *t, uint32_t k)
{
	seg_frame_opt(t, k, seg_len(t, k), 0);
}

/* g_f with one protocol header field changed, checksums kept right. */
#define SEG_WITH(t, k, field, value)                   \
	do {                                           \
		seg_frame((t), (k));                   \
		f_bw(&g_f)->field = (value);           \
		frame_fix(&g_f);                       \
	} while (0)

static struct rte_mbuf *frame_mbuf(const struct frame *f)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(g_pool);

	RTE_VERIFY(m != NULL && f->len <= rte_pktmbuf_tailroom(m));
	memcpy(rte_pktmbuf_mtod(m, void *), f->b, f->len);
	m->data_len = (uint16_t)f->len;
	m->pkt_len = f->len;
	m->ol_flags = T_RX_OL_FLAGS;
	return m;
}

static const char *verdict_name(enum dp_verdict v)
{
	return v == DP_VERDICT_DROP ? "DROP" : v == DP_VERDICT_REPLY ? "REPLY" : v == DP_VERDICT_HELD ? "HELD" : "?";
}

/* g_f through dp_packet_handle, arrived at tsc, and its verdict carried out as dp_rx_poll does. */
static void send_at(struct dp_lcore *lc, uint64_t tsc, enum dp_verdict want, int line)
{
	struct rte_mbuf *m = frame_mbuf(&g_f);
	uint16_t index = f_bw(&g_f)->seg_index;
	enum dp_verdict v;

	lc->burst_tsc = tsc;
	v = dp_packet_handle(lc, m);
	if (v == DP_VERDICT_REPLY)
		dp_tx_enqueue(lc, m);
	else if (v == DP_VERDICT_DROP)
		rte_pktmbuf_free(m);
	check_at(v == want, line, "segment %u: verdict %s, expected %s", index, verdict_name(v), verdict_name(want));
}
#define SEND(lc, tsc, want) send_at((lc), (tsc), (want), __LINE__)
/* Segment k of t, as its client cut it. */
#define SEG(lc, t, k, tsc, want)                         \
	do {                                             \
		seg_frame((t), (k));                     \
		send_at((lc), (tsc), (want), __LINE__);  \
	} while (0)

static void rx_poll_all(struct dp_lcore *lc)
{
	unsigned int polls = 0;

	while (dp_rx_poll(lc) == PLAT_POLL_BUSY && polls < 100000)
		polls++;
}

/* g_f onto the port's RX ring; the lcore polls whenever a burst is waiting. */
static void frame_rx(struct dp_lcore *lc)
{
	RTE_VERIFY(rte_ring_enqueue(g_rx, frame_mbuf(&g_f)) == 0);
	if (rte_ring_count(g_rx) >= DP_RX_BURST)
		rx_poll_all(lc);
}

enum order {
	ORDER_FORWARD,
	ORDER_REVERSE,
	ORDER_RANDOM,
};

static const char *const g_order_names[] = { "in order", "reversed", "shuffled" };

/* A permutation of 0..n-1. */
static void order_make(uint32_t *idx, uint32_t n, enum order o, uint64_t seed)
{
	uint64_t s = seed * UINT64_C(0x9e3779b97f4a7c15) + 3;

	for (uint32_t i = 0; i < n; i++)
		idx[i] = o == ORDER_REVERSE ? n - 1 - i : i;
	if (o != ORDER_RANDOM)
		return;
	for (uint32_t i = n - 1; i > 0; i--) {
		uint32_t j = (uint32_t)(bw_splitmix64(&s) % (i + 1));
		uint32_t x = idx[i];

		idx[i] = idx[j];
		idx[j] = x;
	}
}

/* Every segment of t, in this order, through the RX ring and dp_rx_poll. */
static void msg_rx(struct dp_lcore *lc, const struct tmsg *t, enum order o, uint64_t seed)
{
	uint32_t n = tmsg_count(t), *idx = malloc(sizeof(*idx) * n);

	RTE_VERIFY(idx != NULL);
	order_make(idx, n, o, seed);
	for (uint32_t i = 0; i < n; i++) {
		seg_frame(t, idx[i]);
		frame_rx(lc);
	}
	rx_poll_all(lc);
	free(idx);
}

/* ---- replies ---------------------------------------------------------------------------------- */

static struct rte_mbuf *g_txm[T_RING_SIZE]; /* every datagram the case sent, in TX order */
static bool g_claimed[T_RING_SIZE];        /* ... and whether a check accounted for it */
static unsigned int g_nb_tx;

/* Flushes the lcore's TX buffer and takes what reached the TX ring. */
static void tx_collect(struct dp_lcore *lc)
{
	struct rte_mbuf *m = NULL;

	dp_tx_flush(lc);
	while (g_nb_tx < T_RING_SIZE && rte_ring_dequeue(g_tx, (void **)&m) == 0) {
		g_claimed[g_nb_tx] = false;
		g_txm[g_nb_tx++] = m;
	}
}

static void tx_release(void)
{
	for (unsigned int i = 0; i < g_nb_tx; i++)
		rte_pktmbuf_free(g_txm[i]);
	g_nb_tx = 0;
}

static const struct rte_ipv4_hdr *m_ip(const struct rte_mbuf *m)
{
	return rte_pktmbuf_mtod_offset(m, const struct rte_ipv4_hdr *, T_ETH_LEN);
}

static const struct rte_udp_hdr *m_udp(const struct rte_mbuf *m)
{
	return rte_pktmbuf_mtod_offset(m, const struct rte_udp_hdr *, T_ETH_LEN + T_IP_LEN);
}

static const struct bw_hdr *m_bw(const struct rte_mbuf *m)
{
	return rte_pktmbuf_mtod_offset(m, const struct bw_hdr *, T_UDP_HDRS_LEN);
}

/* Whether datagram m answers t's client about t's request_id. */
static bool reply_to(const struct rte_mbuf *m, const struct tmsg *t)
{
	return rte_pktmbuf_pkt_len(m) >= T_UDP_HDRS_LEN + T_BW_LEN &&
	       m_ip(m)->dst_addr == rte_cpu_to_be_32(t->from->ip) &&
	       m_udp(m)->dst_port == rte_cpu_to_be_16(t->from->port) && m_bw(m)->request_id == t->hdr.request_id;
}

/* What is wrong with the Eth/IPv4/UDP layers of a reply datagram to client c, or NULL. */
static const char *reply_frame_fault(const struct dp_lcore *lc, const struct rte_mbuf *m, const struct client *c)
{
	const struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, const struct rte_ether_hdr *);
	const struct rte_ipv4_hdr *ip = m_ip(m);
	const struct rte_udp_hdr *udp = m_udp(m);
	const struct bw_hdr *h = m_bw(m);
	uint32_t len = rte_pktmbuf_pkt_len(m);

	if (m->nb_segs != 1 || m->data_len != len)
		return "chained mbuf";
	if (len < T_UDP_HDRS_LEN + T_BW_LEN)
		return "shorter than the headers";
	if (len > T_ETH_LEN + lc->cfg->mtu)
		return "larger than the MTU";
	if (m->ol_flags != 0)
		return "ol_flags set";
	if (!rte_is_same_ether_addr(&eth->dst_addr, &g_peer_mac) || !rte_is_same_ether_addr(&eth->src_addr, &lc->mac) ||
	    eth->ether_type != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4))
		return "Ethernet header";
	if (ip->version_ihl != RTE_IPV4_VHL_DEF)
		return "IPv4 version/IHL (options echoed?)";
	if (rte_be_to_cpu_16(ip->total_length) != len - T_ETH_LEN || ip->time_to_live != DP_IP_TTL ||
	    ip->next_proto_id != IPPROTO_UDP || ip->fragment_offset != rte_cpu_to_be_16(RTE_IPV4_HDR_DF_FLAG))
		return "IPv4 length, TTL, protocol or DF";
	if (ip->src_addr != lc->cfg->ipv4_addr || ip->dst_addr != rte_cpu_to_be_32(c->ip))
		return "IPv4 addresses";
	if (rte_raw_cksum(ip, T_IP_LEN) != 0xffff)
		return "IPv4 checksum";
	if (udp->src_port != rte_cpu_to_be_16(lc->cfg->udp_port) || udp->dst_port != rte_cpu_to_be_16(c->port) ||
	    rte_be_to_cpu_16(udp->dgram_len) != len - T_ETH_LEN - T_IP_LEN)
		return "UDP ports or length";
	if (udp->dgram_cksum == 0 || rte_ipv4_udptcp_cksum_verify(ip, udp) != 0)
		return "UDP checksum";
	if (h->magic != BW_PROTO_MAGIC || h->version != BW_PROTO_VERSION || h->flags != 0)
		return "magic, version or flags";
	if (h->body_len != len - T_UDP_HDRS_LEN - T_BW_LEN)
		return "body_len is not what the datagram carries";
	return NULL;
}

/*
 * t was answered OK in datagrams of t's own slices (PING, echo): exactly seg_count of them, each a
 * well-formed reply to t's client, headers consistent, and together t's body byte for byte.
 * \return the datagrams' number.
 */
static unsigned int expect_ok_at(const struct dp_lcore *lc, const struct tmsg *t, int line)
{
	uint32_t count = tmsg_count(t), total = tmsg_total(t), n = 0;
	uint8_t *got = calloc(1, (size_t)total + 1);
	bool *have = calloc(count, sizeof(bool));
	char fault[200] = "";

	RTE_VERIFY(got != NULL && have != NULL);
	for (unsigned int i = 0; i < g_nb_tx; i++) {
		const struct rte_mbuf *m = g_txm[i];
		const struct bw_hdr *h;
		const char *why;

		if (g_claimed[i] || !reply_to(m, t))
			continue;
		g_claimed[i] = true;
		n++;
		if (fault[0] != '\0')
			continue;
		h = m_bw(m);
		why = reply_frame_fault(lc, m, t->from);
		if (why != NULL)
			snprintf(fault, sizeof(fault), "datagram %u: %s", n - 1, why);
		else if (h->opcode != (t->hdr.opcode | BW_OP_REPLY) || h->status != BW_STATUS_OK)
			snprintf(fault, sizeof(fault), "datagram %u: opcode 0x%02x status %s '%.*s'", n - 1, h->opcode,
				 bw_status_name(h->status), (int)RTE_MIN(h->body_len, 200u), (const char *)(h + 1));
		else if (h->seg_count != count || h->seg_index >= count || have[h->seg_index])
			snprintf(fault, sizeof(fault), "datagram %u: segment %u of %u (expected %u segments, each once)", n - 1,
				 h->seg_index, h->seg_count, count);
		else if (h->total_body_len != total || h->body_len != seg_len(t, h->seg_index))
			snprintf(fault, sizeof(fault), "segment %u: body_len %u total %u, expected %u of %u", h->seg_index,
				 h->body_len, h->total_body_len, seg_len(t, h->seg_index), total);
		else if (h->num_tensors != t->hdr.num_tensors)
			snprintf(fault, sizeof(fault), "segment %u: num_tensors %u, expected %u", h->seg_index, h->num_tensors,
				 t->hdr.num_tensors);
		else {
			have[h->seg_index] = true;
			memcpy(got + (size_t)h->seg_index * t->slice, h + 1, h->body_len);
		}
	}
	check_at(fault[0] == '\0', line, "reply: %s", fault);
	check_at(n == count, line, "%u reply datagrams, expected %u", n, count);
	if (fault[0] == '\0' && n == count) {
		uint32_t at = 0;

		while (at < total && got[at] == t->body[at])
			at++;
		check_at(at == total, line, "the reply differs from the request at byte %u of %u", at, total);
	}
	free(got);
	free(have);
	return n;
}
#define EXPECT_OK(lc, t) expect_ok_at((lc), (t), __LINE__)

/* t was answered once, in one datagram, with this error status (and, unless NULL, text in its message). */
static void expect_error_at(const struct dp_lcore *lc, const struct tmsg *t, enum bw_status status, const char *text,
			    int line)
{
	unsigned int n = 0;

	for (unsigned int i = 0; i < g_nb_tx; i++) {
		const struct rte_mbuf *m = g_txm[i];
		const struct bw_hdr *h = m_bw(m);
		const char *why;

		if (g_claimed[i] || !reply_to(m, t))
			continue;
		g_claimed[i] = true;
		if (n++ != 0)
			continue;
		why = reply_frame_fault(lc, m, t->from);
		check_at(why == NULL, line, "error reply: %s", why);
		if (why != NULL)
			continue;
		check_at(h->opcode == (t->hdr.opcode | BW_OP_REPLY), line, "error reply opcode 0x%02x", h->opcode);
		check_at(h->status == status, line, "reply status %s ('%.*s'), expected %s", bw_status_name(h->status),
			 (int)RTE_MIN(h->body_len, 200u), (const char *)(h + 1), bw_status_name(status));
		check_at(h->seg_index == 0 && h->seg_count == 1 && h->total_body_len == h->body_len, line,
			 "error reply is segment %u of %u, body %u of %u: one datagram expected", h->seg_index, h->seg_count,
			 h->body_len, h->total_body_len);
		check_at(h->num_tensors == 0 && h->body_len >= 1 && h->body_len <= DP_ERROR_MSG_MAX &&
				 memchr(h + 1, '\0', h->body_len) == NULL,
			 line, "error reply: num_tensors %u, a message of %u bytes", h->num_tensors, h->body_len);
		if (text != NULL)
			check_at(memmem(h + 1, h->body_len, text, strlen(text)) != NULL, line,
				 "error message '%.*s' does not say '%s'", (int)RTE_MIN(h->body_len, 200u),
				 (const char *)(h + 1), text);
	}
	check_at(n == 1, line, "%u replies, expected one %s datagram", n, bw_status_name(status));
}
#define EXPECT_ERROR(lc, t, status, text) expect_error_at((lc), (t), (status), (text), __LINE__)

/* Nothing was sent that no check accounted for. */
static void expect_all_claimed_at(int line)
{
	unsigned int extra = 0, first = 0;

	for (unsigned int i = 0; i < g_nb_tx; i++)
		if (!g_claimed[i] && extra++ == 0)
			first = i;
	if (extra == 0) {
		check_at(true, line, "%s", "");
		return;
	}
	const struct bw_hdr *h = m_bw(g_txm[first]);
	check_at(false, line, "%u datagrams nobody expected; the first: opcode 0x%02x status %s segment %u of %u, '%.*s'",
		 extra, h->opcode, bw_status_name(h->status), h->seg_index, h->seg_count,
		 h->status != 0 ? (int)RTE_MIN(h->body_len, 100u) : 0, (const char *)(h + 1));
}

/* ---- counters --------------------------------------------------------------------------------- */

/* What a case's counters must read; every one not named is 0. */
struct counts {
	uint64_t requests;
	uint64_t segments_in;
	uint64_t segments_out;
	uint64_t reassembled;
	uint64_t drop_segment;              /* drops[DP_DROP_SEGMENT]; every other drop must stay 0 */
	uint64_t reasm[DP_REASM_REASON_COUNT];
	uint64_t replies[BW_STATUS_COUNT];
};

static void counter_at(uint64_t got, uint64_t want, const char *name, int line)
{
	check_at(got == want, line, "%s %" PRIu64 ", expected %" PRIu64, name, got, want);
}

static void counts_check_at(const struct dp_lcore *lc, const struct counts *c, int line)
{
	const struct dp_lcore_stats *s = &lc->stats;
	char name[64];

	counter_at(s->requests, c->requests, "requests", line);
	counter_at(s->segments_in, c->segments_in, "segments_in", line);
	counter_at(s->segments_out, c->segments_out, "segments_out", line);
	counter_at(s->messages_reassembled, c->reassembled, "messages_reassembled", line);
	for (unsigned int k = 0; k < DP_REASM_REASON_COUNT; k++) {
		snprintf(name, sizeof(name), "reasm[%s]", dp_reasm_reason_name((enum dp_reasm_reason)k));
		counter_at(s->reasm[k], c->reasm[k], name, line);
	}
	for (unsigned int k = 0; k < BW_STATUS_COUNT; k++) {
		snprintf(name, sizeof(name), "replies[%s]", bw_status_name(k));
		counter_at(s->replies[k], c->replies[k], name, line);
	}
	for (unsigned int k = 0; k < DP_DROP_COUNT; k++) {
		snprintf(name, sizeof(name), "drops[%s]", dp_drop_reason_name((enum dp_drop_reason)k));
		counter_at(s->drops[k], k == DP_DROP_SEGMENT ? c->drop_segment : 0, name, line);
	}
	/* every datagram the lcore counted as sent reached the TX ring, and the case took it */
	counter_at(s->tx_packets, g_nb_tx, "tx_packets (datagrams on the TX ring)", line);
}
#define COUNTS(lc, ...) counts_check_at((lc), &(struct counts){ __VA_ARGS__ }, __LINE__)

static void gauges_at(const struct dp_lcore *lc, uint64_t messages, uint64_t segments, uint64_t bytes, int line)
{
	counter_at(lc->stats.reasm_messages, messages, "reasm_messages", line);
	counter_at(lc->stats.reasm_segments, segments, "reasm_segments", line);
	counter_at(lc->stats.reasm_bytes, bytes, "reasm_bytes", line);
	counter_at(lc->stats.held_messages, 0, "held_messages", line);
	counter_at(lc->stats.held_mbufs, 0, "held_mbufs", line);
}
#define GAUGES(lc, messages, segments, bytes) gauges_at((lc), (messages), (segments), (bytes), __LINE__)

/* ---- cases ------------------------------------------------------------------------------------ */

static unsigned int g_avail; /* the pool's free mbufs when the case began */

static void case_begin(struct dp_lcore *lc)
{
	gauges_at(lc, 0, 0, 0, __LINE__);
	memset(&lc->stats, 0, sizeof(lc->stats));
	memset(&g_stub, 0, sizeof(g_stub));
	tx_release();
	g_avail = rte_mempool_avail_count(g_pool);
}

/*
 * Ends a case: every datagram sent was accounted for; the entries the table still holds (left: dead
 * ones waiting out their clock) expire without a reply or a counter; the gauges are 0 and every mbuf
 * is back in the pool.
 */
static void case_end_at(struct dp_lcore *lc, unsigned int left, int line)
{
	struct dp_lcore_stats before;
	unsigned int sent, n;

	tx_collect(lc);
	expect_all_claimed_at(line);
	sent = g_nb_tx;
	before = lc->stats;
	n = dp_reasm_expire(lc, lc->burst_tsc + plat_us_to_tsc(T_FAR_US));
	check_at(n == left, line, "%u entries expired at the end, expected %u", n, left);
	check_at(memcmp(before.reasm, lc->stats.reasm, sizeof(before.reasm)) == 0 &&
			 memcmp(before.replies, lc->stats.replies, sizeof(before.replies)) == 0,
		 line, "the final expiry counted a discard or a reply");
	tx_collect(lc);
	check_at(g_nb_tx == sent, line, "the final expiry sent %u datagrams", g_nb_tx - sent);
	tx_release();
	gauges_at(lc, 0, 0, 0, line);
	check_at(rte_ring_count(g_rx) == 0, line, "%u frames left on the RX ring", rte_ring_count(g_rx));
	check_at(rte_mempool_avail_count(g_pool) == g_avail, line, "%u mbufs free, %u when the case began",
		 rte_mempool_avail_count(g_pool), g_avail);
}
#define CASE_END(lc, left) case_end_at((lc), (left), __LINE__)

/* An lcore of the ring port with its own configuration (finalized here), answering echo at once. */
static int lcore_make(struct dp_lcore *lc, struct dp_config *cfg)
{
	char err[256];
	int rc;

	cfg->ipv4_addr = rte_cpu_to_be_32(T_OUR_IP);
	rc = dp_config_finalize(cfg, err, sizeof(err));
	if (rc != 0) {
		fprintf(stderr, "dp_config_finalize: %s\n", err);
		return rc;
	}
	rc = dp_lcore_init(lc, rte_lcore_id(), (uint16_t)g_port, 0, (int)rte_socket_id(), cfg, &g_stub_ops);
	if (rc != 0)
		return rc;
	lc->model_lcore = lc; /* the stub's echo answers through dp_request_complete at once */
	lc->mac = g_our_mac;  /* dp_test.c's frames are addressed to it */
	return 0;
}

/* ---- whole messages --------------------------------------------------------------------------- */

/* One PING of total bytes in slices of slice, sent in an order: echoed in the same slices. */
static void ping_order_case(struct dp_lcore *lc, uint32_t total, uint32_t slice, enum order o, uint64_t seed)
{
	struct tmsg t;
	uint32_t n;

	tmsg_init(&t, BW_OP_PING, 0, slice, (unsigned int)(seed % T_CLIENTS));
	tmsg_pattern(&t, total, seed + total + slice);
	n = tmsg_count(&t);
	ctx_set("PING of %u bytes in %u slices of %u (MTU %u), %s, seed %" PRIu64, total, n, slice, lc->cfg->mtu,
		g_order_names[o], seed);
	case_begin(lc);
	msg_rx(lc, &t, o, seed);
	tx_collect(lc);
	EXPECT_OK(lc, &t);
	COUNTS(lc, .requests = n, .segments_in = n, .segments_out = n, .reassembled = 1, .replies[BW_STATUS_OK] = 1);
	CASE_END(lc, 0);
	tmsg_fini(&t);
}

/*
 * Bodies that take 2, 3, 70 and 421 slices of 1432 bytes (the last one short, or full), cut into those
 * slices and into slices of 256 and 1000 (MTU 1500) and 8932 (MTU 9000); each in order, reversed and
 * shuffled with three seeds.
 */
static void test_ping_orders(void)
{
	static const uint32_t totals[] = { 1432 + 1, 2 * 1432 + 700, 70 * 1432, 420 * 1432 + 333 };
	static const struct {
		struct dp_lcore *lc;
		uint32_t slice;
	} cuts[] = { { &g_lc1500, T_SLICE_1500 }, { &g_lc1500, 256 }, { &g_lc1500, 1000 }, { &g_lc9000, T_SLICE_9000 } };

	for (unsigned int c = 0; c < RTE_DIM(cuts); c++) {
		for (unsigned int i = 0; i < RTE_DIM(totals); i++) {
			if (totals[i] <= cuts[c].slice)
				continue; /* one datagram: not segmented */
			ping_order_case(cuts[c].lc, totals[i], cuts[c].slice, ORDER_FORWARD, 0);
			ping_order_case(cuts[c].lc, totals[i], cuts[c].slice, ORDER_REVERSE, 0);
			for (uint64_t seed = 1; seed <= 3; seed++)
				ping_order_case(cuts[c].lc, totals[i], cuts[c].slice, ORDER_RANDOM, seed);
		}
	}
	/* the counts the brief names, as cut at 1432 */
	CU_ASSERT_EQUAL(dp_msg_segments(&g_cfg_1500, totals[0]), 2);
	CU_ASSERT_EQUAL(dp_msg_segments(&g_cfg_1500, totals[1]), 3);
	CU_ASSERT_EQUAL(dp_msg_segments(&g_cfg_1500, totals[2]), 70);
	CU_ASSERT_EQUAL(dp_msg_segments(&g_cfg_1500, totals[3]), 421);
}

/* Segments with IP options (some of them): every reply datagram goes out without any. */
static void test_ip_options(void)
{
	struct dp_lcore *lc = &g_lc1500;
	struct tmsg t;

	tmsg_init(&t, BW_OP_PING, 0, 1000, 2);
	tmsg_pattern(&t, 3700, 11);
	ctx_set("PING of 4 segments, two with 8 and 40 bytes of IP options");
	case_begin(lc);
	seg_frame_opt(&t, 0, 1000, 0);
	SEND(lc, T_ARRIVAL_TSC, DP_VERDICT_HELD);
	seg_frame_opt(&t, 1, 1000, 8);
	SEND(lc, T_ARRIVAL_TSC, DP_VERDICT_HELD);
	seg_frame_opt(&t, 3, 700, 40);
	SEND(lc, T_ARRIVAL_TSC, DP_VERDICT_HELD);
	seg_frame_opt(&t, 2, 1000, 0);
	SEND(lc, T_ARRIVAL_TSC, DP_VERDICT_HELD);
	tx_collect(lc);
	EXPECT_OK(lc, &t);
	COUNTS(lc, .requests = 4, .segments_in = 4, .segments_out = 4, .reassembled = 1, .replies[BW_STATUS_OK] = 1);
	CASE_END(lc, 0);
	tmsg_fini(&t);
}

/*
 * A segment sent twice, before and after others, the first one to arrive included, and once with
 * other bytes: ignored (the bytes that came first stay), counted, and the message completes once.
 */
static void test_duplicates(void)
{
	struct dp_lcore *lc = &g_lc1500;
	struct tmsg a, b;

	tmsg_init(&a, BW_OP_PING, 0, 1000, 0);
	tmsg_pattern(&a, 4321, 1);
	tmsg_init(&b, BW_OP_PING, 0, T_SLICE_1500, 0);
	tmsg_pattern(&b, 3 * T_SLICE_1500 + 9, 2);
	ctx_set("duplicates");
	case_begin(lc);
	SEG(lc, &a, 2, T_ARRIVAL_TSC, DP_VERDICT_HELD);
	SEG(lc, &a, 2, T_ARRIVAL_TSC, DP_VERDICT_DROP); /* before any other */
	SEG(lc, &a, 0, T_ARRIVAL_TSC, DP_VERDICT_HELD);
	SEG(lc, &a, 1, T_ARRIVAL_TSC, DP_VERDICT_HELD);
	seg_frame(&a, 0);
	memset(f_bw(&g_f) + 1, 0xee, 1000); /* other bytes, same header */
	frame_fix(&g_f);
	SEND(lc, T_ARRIVAL_TSC, DP_VERDICT_DROP);
	SEG(lc, &a, 3, T_ARRIVAL_TSC, DP_VERDICT_HELD);
	SEG(lc, &a, 2, T_ARRIVAL_TSC, DP_VERDICT_DROP);
	GAUGES(lc, 1, 4, 4000);
	SEG(lc, &a, 4, T_ARRIVAL_TSC, DP_VERDICT_HELD); /* whole */
	/* b: its last segment first, then again */
	SEG(lc, &b, 3, T_ARRIVAL_TSC, DP_VERDICT_HELD);
	SEG(lc, &b, 3, T_ARRIVAL_TSC, DP_VERDICT_DROP);
	SEG(lc, &b, 0, T_ARRIVAL_TSC, DP_VERDICT_HELD);
	SEG(lc, &b, 1, T_ARRIVAL_TSC, DP_VERDICT_HELD);
	SEG(lc, &b, 2, T_ARRIVAL_TSC, DP_VERDICT_HELD);
	tx_collect(lc);
	EXPECT_OK(lc, &a);
	EXPECT_OK(lc, &b);
	COUNTS(lc, .requests = 13, .segments_in = 13, .segments_out = 9, .reassembled = 2, .drop_segment = 4,
	       .reasm[DP_REASM_DUPLICATE] = 4, .replies[BW_STATUS_OK] = 2);
	CASE_END(lc, 0);
	tmsg_fini(&a);
	tmsg_fini(&b);
}

/* A segment of a message already whole and answered starts a new message (docs/protocol.md): it
 * waits, and without a deadline times out in silence. */
static void test_segment_after_whole(void)
{
	struct dp_lcore *lc = &g_lc1500;
	struct tmsg t;

	tmsg_init(&t, BW_OP_PING, 0, 1000, 1);
	tmsg_pattern(&t, 2500, 3);
	ctx_set("a segment after its message was answered");
	case_begin(lc);
	for (uint32_t k = 0; k < 3; k++)
		SEG(lc, &t, k, T_ARRIVAL_TSC, DP_VERDICT_HELD);
	SEG(lc, &t, 1, T_ARRIVAL_TSC + 1, DP_VERDICT_HELD);
	GAUGES(lc, 1, 1, 1000);
	tx_collect(lc);
	EXPECT_OK(lc, &t);
	CU_ASSERT_EQUAL(dp_reasm_expire(lc, T_ARRIVAL_TSC + 1 + plat_us_to_tsc(T_TIMEOUT_US)), 1);
	COUNTS(lc, .requests = 4, .segments_in = 4, .segments_out = 3, .reassembled = 1, .reasm[DP_REASM_TIMEOUT] = 1,
	       .replies[BW_STATUS_OK] = 1);
	CASE_END(lc, 0);
	tmsg_fini(&t);
}

/* Eight clients (four addresses, two ports), request_ids shared among some, PINGs and echo INFERs of
 * different slices, every segment of all of them shuffled together: each gets its own reply. */
static void many_clients_case(uint64_t seed)
{
	static const uint32_t slices[T_CLIENTS] = { T_SLICE_1500, 1000, 256, T_SLICE_1500, 512, 1000, 300, 1432 };
	struct dp_lcore *lc = &g_lc1500;
	struct tmsg t[T_CLIENTS];
	uint32_t (*all)[2], nb = 0, segs = 0, *idx;
	uint64_t s = seed;

	ctx_set("8 clients interleaved, seed %" PRIu64, seed);
	case_begin(lc);
	for (unsigned int c = 0; c < T_CLIENTS; c++) {
		uint32_t n = 2 + (uint32_t)(bw_splitmix64(&s) % 9);

		tmsg_init(&t[c], c == 5 || c == 6 ? BW_OP_INFER : BW_OP_PING, STUB_MODEL_ECHO, slices[c], c);
		if (t[c].hdr.opcode == BW_OP_INFER) {
			uint32_t len = slices[c] * (n - 1) + 1 + (uint32_t)(bw_splitmix64(&s) % slices[c]) - 56;
			const char *name = "x";

			tmsg_tensors(&t[c], &len, &name, 1, seed * 10 + c);
		} else {
			tmsg_pattern(&t[c], slices[c] * (n - 1) + 1 + (uint32_t)(bw_splitmix64(&s) % slices[c]), seed * 10 + c);
		}
		segs += tmsg_count(&t[c]);
	}
	/* clients 0-3 (two addresses) share one request_id, 4 and 5 another, 7 the first again */
	t[1].hdr.request_id = t[2].hdr.request_id = t[3].hdr.request_id = t[7].hdr.request_id = t[0].hdr.request_id;
	t[5].hdr.request_id = t[4].hdr.request_id;
	all = malloc(sizeof(*all) * segs);
	idx = malloc(sizeof(*idx) * segs);
	RTE_VERIFY(all != NULL && idx != NULL);
	for (unsigned int c = 0; c < T_CLIENTS; c++)
		for (uint32_t k = 0; k < tmsg_count(&t[c]); k++) {
			all[nb][0] = c;
			all[nb++][1] = k;
		}
	order_make(idx, segs, ORDER_RANDOM, seed);
	for (uint32_t i = 0; i < segs; i++) {
		seg_frame(&t[all[idx[i]][0]], all[idx[i]][1]);
		frame_rx(lc);
	}
	rx_poll_all(lc);
	tx_collect(lc);
	for (unsigned int c = 0; c < T_CLIENTS; c++)
		EXPECT_OK(lc, &t[c]);
	COUNTS(lc, .requests = segs, .segments_in = segs, .segments_out = segs, .reassembled = T_CLIENTS,
	       .replies[BW_STATUS_OK] = T_CLIENTS);
	CU_ASSERT_EQUAL(g_stub.infer_calls, 2);
	CASE_END(lc, 0);
	for (unsigned int c = 0; c < T_CLIENTS; c++)
		tmsg_fini(&t[c]);
	free(all);
	free(idx);
}

static void test_many_clients(void)
{
	for (uint64_t seed = 1; seed <= 3; seed++)
		many_clients_case(seed);
}

/* ---- the clock -------------------------------------------------------------------------------- */

/*
 * A segment missing, no deadline: nothing before 100 ms after the first segment arrived (later
 * segments do not push the clock), then discarded in silence; the straggler starts a message of its
 * own, with its own 100 ms.
 */
static void test_timeout(void)
{
	struct dp_lcore *lc = &g_lc1500;
	const uint64_t t0 = T_ARRIVAL_TSC, timeout = plat_us_to_tsc(T_TIMEOUT_US);
	struct tmsg t;

	tmsg_init(&t, BW_OP_PING, 0, 1000, 3);
	tmsg_pattern(&t, 3500, 4);
	ctx_set("a segment missing, no deadline");
	case_begin(lc);
	SEG(lc, &t, 0, t0, DP_VERDICT_HELD);
	SEG(lc, &t, 1, t0 + plat_us_to_tsc(60000), DP_VERDICT_HELD);
	SEG(lc, &t, 3, t0 + plat_us_to_tsc(90000), DP_VERDICT_HELD);
	GAUGES(lc, 1, 3, 2500);
	CU_ASSERT_EQUAL(dp_reasm_expire(lc, t0), 0);
	CU_ASSERT_EQUAL(dp_reasm_expire(lc, t0 + timeout - 1), 0);
	GAUGES(lc, 1, 3, 2500);
	CU_ASSERT_EQUAL(rte_mempool_avail_count(g_pool), g_avail - 3);
	CU_ASSERT_EQUAL(dp_reasm_expire(lc, t0 + timeout), 1);
	GAUGES(lc, 0, 0, 0);
	CU_ASSERT_EQUAL(rte_mempool_avail_count(g_pool), g_avail);
	CU_ASSERT_EQUAL(lc->stats.reasm[DP_REASM_TIMEOUT], 1);
	CU_ASSERT_EQUAL(dp_reasm_expire(lc, t0 + 2 * timeout), 0);
	/* the missing segment, late */
	SEG(lc, &t, 2, t0 + timeout + 1, DP_VERDICT_HELD);
	GAUGES(lc, 1, 1, 1000);
	CU_ASSERT_EQUAL(dp_reasm_expire(lc, t0 + 2 * timeout), 0);
	CU_ASSERT_EQUAL(dp_reasm_expire(lc, t0 + 2 * timeout + 1), 1);
	tx_collect(lc);
	COUNTS(lc, .requests = 4, .segments_in = 4, .reasm[DP_REASM_TIMEOUT] = 2);
	CASE_END(lc, 0);
	tmsg_fini(&t);
}

/*
 * A segment missing from a request with a deadline: at the deadline (not before) one
 * DEADLINE_EXCEEDED datagram, from whichever segment it has; never again. A deadline longer than
 * reassembly_timeout_ms does not hold the entry past it: discarded in silence at the timeout (the
 * deadline has not passed; the client's own timeout resends).
 */
static void deadline_case(uint8_t opcode, uint32_t deadline_us, const uint32_t *sent, unsigned int nb_sent)
{
	struct dp_lcore *lc = &g_lc1500;
	const bool capped = deadline_us > T_TIMEOUT_US;
	const uint64_t t0 = T_ARRIVAL_TSC, clock = plat_us_to_tsc(capped ? T_TIMEOUT_US : deadline_us);
	struct tmsg t;
	uint32_t len = 2444;
	const char *name = "d";

	tmsg_init(&t, opcode, STUB_MODEL_ECHO, 1000, 4);
	if (opcode == BW_OP_INFER)
		tmsg_tensors(&t, &len, &name, 1, deadline_us);
	else
		tmsg_pattern(&t, 2500, deadline_us);
	t.hdr.deadline_us = deadline_us;
	ctx_set("opcode %u, deadline %u us, %u of 3 segments, the first %u", opcode, deadline_us, nb_sent, sent[0]);
	case_begin(lc);
	for (unsigned int i = 0; i < nb_sent; i++)
		SEG(lc, &t, sent[i], t0 + i, DP_VERDICT_HELD);
	CU_ASSERT_EQUAL(dp_reasm_expire(lc, t0 + clock - 1), 0);
	tx_collect(lc);
	CU_ASSERT_EQUAL(g_nb_tx, 0);
	CU_ASSERT_EQUAL(dp_reasm_expire(lc, t0 + clock), 1);
	CU_ASSERT_EQUAL(dp_reasm_expire(lc, t0 + plat_us_to_tsc(deadline_us) + plat_us_to_tsc(1000000)), 0);
	tx_collect(lc);
	if (capped) {
		CU_ASSERT_EQUAL(g_nb_tx, 0);
		COUNTS(lc, .requests = nb_sent, .segments_in = nb_sent, .reasm[DP_REASM_TIMEOUT] = 1);
	} else {
		EXPECT_ERROR(lc, &t, BW_STATUS_DEADLINE_EXCEEDED, "deadline");
		COUNTS(lc, .requests = nb_sent, .segments_in = nb_sent, .reasm[DP_REASM_DEADLINE] = 1,
		       .replies[BW_STATUS_DEADLINE_EXCEEDED] = 1);
	}
	CU_ASSERT_EQUAL(g_stub.infer_calls, 0);
	CASE_END(lc, 0);
	tmsg_fini(&t);
}

static void test_deadline(void)
{
	static const uint32_t first_last[] = { 0, 2 }, middle_last[] = { 2, 1 }, middle[] = { 1 };

	deadline_case(BW_OP_PING, 2000, first_last, RTE_DIM(first_last));
	deadline_case(BW_OP_PING, 2000, middle_last, RTE_DIM(middle_last)); /* segment 0 missing */
	deadline_case(BW_OP_INFER, 5000, middle, RTE_DIM(middle));
	deadline_case(BW_OP_PING, 100000, first_last, RTE_DIM(first_last)); /* exactly reassembly_timeout_ms */
	deadline_case(BW_OP_PING, 250000, first_last, RTE_DIM(first_last)); /* longer: the timeout, in silence */
	deadline_case(BW_OP_PING, UINT32_MAX - 1, first_last, RTE_DIM(first_last)); /* 71 minutes: 100 ms too */
}

/* ---- discards --------------------------------------------------------------------------------- */

/* The fields every segment must repeat, each changed in one segment. */
enum field {
	FIELD_MODEL_ID,
	FIELD_MODEL_ID_UNKNOWN,
	FIELD_PRIORITY,
	FIELD_PRIORITY_OUT_OF_RANGE,
	FIELD_NUM_TENSORS,
	FIELD_TOTAL_BODY_LEN,
	FIELD_SEG_COUNT,
	FIELD_OPCODE,
	FIELD_DEADLINE,
	FIELD_COUNT
};

static const char *const g_field_names[FIELD_COUNT] = {
	"model_id (another model)", "model_id (no such model)", "priority", "priority (out of range)",
	"num_tensors", "total_body_len", "seg_count", "opcode", "deadline_us",
};

static void field_change(struct bw_hdr *h, enum field f)
{
	switch (f) {
	case FIELD_MODEL_ID:
		h->model_id = STUB_MODEL_BROKEN;
		break;
	case FIELD_MODEL_ID_UNKNOWN:
		h->model_id = STUB_MODEL_UNKNOWN;
		break;
	case FIELD_PRIORITY:
		h->priority = 1;
		break;
	case FIELD_PRIORITY_OUT_OF_RANGE:
		h->priority = STUB_ECHO_LEVELS;
		break;
	case FIELD_NUM_TENSORS:
		h->num_tensors++;
		break;
	case FIELD_TOTAL_BODY_LEN:
		h->total_body_len++;
		break;
	case FIELD_SEG_COUNT:
		h->seg_count++;
		break;
	case FIELD_OPCODE:
		h->opcode = BW_OP_PING;
		break;
	case FIELD_DEADLINE:
		h->deadline_us = 1000;
		break;
	case FIELD_COUNT:
		break;
	}
}

/*
 * An echo INFER of 4 segments; one of them (the second to arrive, or the one that would have made it
 * whole) says something else in one field: discarded, no reply; the rest of its segments are dead.
 */
static void mismatch_case(enum field f, bool last)
{
	static const uint32_t early[] = { 0, 1, 2, 3 }, late[] = { 0, 2, 3, 1 };
	const uint32_t *order = last ? late : early;
	struct dp_lcore *lc = &g_lc1500;
	uint32_t len = 3500 - 56;
	const char *name = "m";
	struct tmsg t;

	tmsg_init(&t, BW_OP_INFER, STUB_MODEL_ECHO, 1000, 5);
	tmsg_tensors(&t, &len, &name, 1, f);
	ctx_set("%s differs in segment %u (%s)", g_field_names[f], order[last ? 3 : 1], last ? "the last to come" : "early");
	case_begin(lc);
	for (unsigned int i = 0; i < 4; i++) {
		bool changed = i == (last ? 3u : 1u);

		seg_frame(&t, order[i]);
		if (changed) {
			field_change(f_bw(&g_f), f);
			frame_fix(&g_f);
		}
		SEND(lc, T_ARRIVAL_TSC, i == 0 || (last && !changed) ? DP_VERDICT_HELD : DP_VERDICT_DROP);
	}
	GAUGES(lc, 0, 0, 0);
	CU_ASSERT_EQUAL(rte_mempool_avail_count(g_pool), g_avail);
	tx_collect(lc);
	COUNTS(lc, .requests = 4, .segments_in = 4, .drop_segment = last ? 1 : 3, .reasm[DP_REASM_MISMATCH] = 1,
	       .reasm[DP_REASM_DEAD_SEGMENT] = last ? 0 : 2);
	CU_ASSERT_EQUAL(g_stub.infer_calls, 0);
	/* the whole request again, same id: swallowed until the dead entry's clock runs out */
	for (uint32_t k = 0; k < 4; k++)
		SEG(lc, &t, k, T_ARRIVAL_TSC + 1, DP_VERDICT_DROP);
	CU_ASSERT_EQUAL(lc->stats.reasm[DP_REASM_DEAD_SEGMENT], last ? 4u : 6u);
	CASE_END(lc, 1);
	tmsg_fini(&t);
}

static void test_mismatch(void)
{
	for (unsigned int f = 0; f < FIELD_COUNT; f++) {
		mismatch_case((enum field)f, false);
		mismatch_case((enum field)f, true);
	}
}

/* One discarded message: segments sent in this order with these slice lengths, the first n_live of
 * them taken (HELD), then the one discarded for reason, then the rest dead. */
struct discard_step {
	uint32_t index;
	uint32_t len;
};

static void discard_case(const char *what, uint32_t total, uint32_t slice, uint16_t count,
			 const struct discard_step *steps, unsigned int nb_steps, unsigned int n_live,
			 enum dp_reasm_reason reason)
{
	struct dp_lcore *lc = &g_lc1500;
	struct counts want;
	struct tmsg t;

	tmsg_init(&t, BW_OP_PING, 0, slice, 6);
	tmsg_pattern(&t, total, total + slice);
	t.hdr.seg_count = count;
	ctx_set("%s", what);
	case_begin(lc);
	for (unsigned int i = 0; i < nb_steps; i++) {
		seg_frame_len(&t, steps[i].index, steps[i].len);
		SEND(lc, T_ARRIVAL_TSC, i < n_live ? DP_VERDICT_HELD : DP_VERDICT_DROP);
		if (i != n_live)
			continue;
		/* the discard itself: counted, every mbuf of the message freed, nothing held */
		counter_at(lc->stats.reasm[reason], 1, dp_reasm_reason_name(reason), __LINE__);
		GAUGES(lc, 0, 0, 0);
		CHECKF(rte_mempool_avail_count(g_pool) == g_avail, "%u mbufs free after the discard, %u before",
		       rte_mempool_avail_count(g_pool), g_avail);
	}
	GAUGES(lc, 0, 0, 0);
	tx_collect(lc);
	want = (struct counts){ .requests = nb_steps, .segments_in = nb_steps, .drop_segment = nb_steps - n_live };
	want.reasm[reason] = 1;
	want.reasm[DP_REASM_DEAD_SEGMENT] = nb_steps - n_live - 1;
	counts_check_at(lc, &want, __LINE__);
	CASE_END(lc, 1);
	tmsg_fini(&t);
}
#define DISCARD(what, total, slice, count, n_live, reason, ...)                                                  \
	do {                                                                                                     \
		static const struct discard_step steps_[] = { __VA_ARGS__ };                                     \
		discard_case(what, total, slice, count, steps_, RTE_DIM(steps_), n_live, reason);                \
	} while (0)

/* A slice of the wrong length once the first segment fixed them, in the middle or at the end: bad_slice. */
static void test_bad_slice(void)
{
	/* 4 segments: 1000, 1000, 1000, 500 */
	DISCARD("middle segment short", 3500, 1000, 4, 1, DP_REASM_BAD_SLICE, { 0, 1000 }, { 1, 999 }, { 2, 1000 },
		{ 3, 500 });
	DISCARD("middle segment long", 3500, 1000, 4, 1, DP_REASM_BAD_SLICE, { 0, 1000 }, { 1, 1001 }, { 2, 1000 },
		{ 3, 500 });
	DISCARD("middle segment empty", 3500, 1000, 4, 2, DP_REASM_BAD_SLICE, { 0, 1000 }, { 3, 500 }, { 2, 0 },
		{ 1, 1000 });
	DISCARD("last segment long", 3500, 1000, 4, 2, DP_REASM_BAD_SLICE, { 0, 1000 }, { 1, 1000 }, { 3, 501 },
		{ 2, 1000 });
	DISCARD("last segment short", 3500, 1000, 4, 1, DP_REASM_BAD_SLICE, { 0, 1000 }, { 3, 499 }, { 1, 1000 },
		{ 2, 1000 });
	DISCARD("the last came first, then a middle one short", 3500, 1000, 4, 1, DP_REASM_BAD_SLICE, { 3, 500 },
		{ 2, 999 }, { 0, 1000 }, { 1, 1000 });
	DISCARD("the last came first, then the first one long", 3500, 1000, 4, 2, DP_REASM_BAD_SLICE, { 3, 500 },
		{ 1, 1000 }, { 0, 1001 }, { 2, 1000 });
}

/*
 * Segments that no well-formed message can have, as the first of their message to arrive: each is
 * dropped with its reason and leaves nothing behind (no entry: a stranger cannot fill the table with
 * them). Every other segment of the message is then judged on its own: one that implies a well-formed
 * message starts it (HELD), and that message, never whole, times out in silence.
 */
struct malformed_step {
	uint32_t index;
	uint32_t len;
	bool held;
};

static void malformed_case(const char *what, uint32_t total, uint32_t slice, uint16_t count, uint32_t deadline_us,
			   const struct malformed_step *steps, unsigned int nb_steps, enum dp_reasm_reason reason)
{
	struct dp_lcore *lc = &g_lc1500;
	const uint64_t t0 = T_ARRIVAL_TSC;
	uint64_t clock = plat_us_to_tsc(deadline_us != BW_DEADLINE_NONE ? deadline_us : T_TIMEOUT_US);
	unsigned int held = 0;
	struct counts want;
	struct tmsg t;

	tmsg_init(&t, BW_OP_PING, 0, slice, 6);
	tmsg_pattern(&t, total, total + slice);
	t.hdr.seg_count = count;
	t.hdr.deadline_us = deadline_us;
	ctx_set("%s", what);
	case_begin(lc);
	for (unsigned int i = 0; i < nb_steps; i++) {
		seg_frame_len(&t, steps[i].index, steps[i].len);
		SEND(lc, t0, steps[i].held ? DP_VERDICT_HELD : DP_VERDICT_DROP);
		held += steps[i].held;
		if (i == 0) {
			counter_at(lc->stats.reasm[reason], 1, dp_reasm_reason_name(reason), __LINE__);
			GAUGES(lc, 0, 0, 0);
			CHECKF(rte_mempool_avail_count(g_pool) == g_avail, "%u mbufs free after the drop, %u before",
			       rte_mempool_avail_count(g_pool), g_avail);
		}
	}
	CU_ASSERT_EQUAL(dp_reasm_expire(lc, t0 + clock - 1), 0);
	CU_ASSERT_EQUAL(dp_reasm_expire(lc, t0 + clock), held != 0 ? 1 : 0);
	tx_collect(lc);
	want = (struct counts){ .requests = nb_steps, .segments_in = nb_steps, .drop_segment = nb_steps - held };
	want.reasm[reason] = nb_steps - held;
	if (held != 0 && deadline_us != BW_DEADLINE_NONE) {
		/* the well-formed part's deadline passed: answered, from a segment the client did send */
		EXPECT_ERROR(lc, &t, BW_STATUS_DEADLINE_EXCEEDED, "deadline");
		want.reasm[DP_REASM_DEADLINE] = 1;
		want.replies[BW_STATUS_DEADLINE_EXCEEDED] = 1;
	} else if (held != 0) {
		want.reasm[DP_REASM_TIMEOUT] = 1;
	}
	counts_check_at(lc, &want, __LINE__);
	CASE_END(lc, 0);
	tmsg_fini(&t);
}
#define MALFORMED(what, total, slice, count, deadline, reason, ...)                                               \
	do {                                                                                                     \
		static const struct malformed_step steps_[] = { __VA_ARGS__ };                                   \
		malformed_case(what, total, slice, count, deadline, steps_, RTE_DIM(steps_), reason);            \
	} while (0)
#define NONE BW_DEADLINE_NONE

/* Slices below 256 (3 segments of 255, 255, 100): every segment says so, whichever comes first. */
static void test_first_slice_short(void)
{
	MALFORMED("first slice 255", 610, 255, 3, NONE, DP_REASM_BAD_SLICE, { 0, 255, false }, { 1, 255, false },
		  { 2, 100, false });
	MALFORMED("a middle slice of 255 first", 610, 255, 3, NONE, DP_REASM_BAD_SLICE, { 1, 255, false },
		  { 2, 100, false }, { 0, 255, false });
	MALFORMED("the last first, implying slices of 255", 610, 255, 3, NONE, DP_REASM_BAD_SLICE, { 2, 100, false },
		  { 0, 255, false }, { 1, 255, false });
}

/* A total that the first segment to arrive cannot cut into seg_count slices: bad_total, no entry. */
static void test_bad_total(void)
{
	MALFORMED("slice * (n-1) == total (the last slice would be empty)", 2000, 1000, 3, NONE, DP_REASM_BAD_TOTAL,
		  { 0, 1000, false }, { 1, 1000, false }, { 2, 0, false });
	MALFORMED("slice * (n-1) > total", 1999, 1000, 3, NONE, DP_REASM_BAD_TOTAL, { 1, 1000, false },
		  { 0, 1000, false });
	MALFORMED("the last slice would be longer than the others", 3001, 1000, 3, NONE, DP_REASM_BAD_TOTAL,
		  { 0, 1000, false }, { 2, 1001, false }, { 1, 1000, false });
	/* its other segments imply slices of 1000 and a last of 501: a message that never completes */
	MALFORMED("the last first: total - last does not divide by n-1", 2501, 1000, 3, NONE, DP_REASM_BAD_TOTAL,
		  { 2, 500, false }, { 0, 1000, true }, { 1, 1000, true });
	MALFORMED("the last first: longer than total", 400, 1000, 2, NONE, DP_REASM_BAD_TOTAL, { 1, 500, false },
		  { 0, 400, false });
	MALFORMED("the last first: longer than the slices it implies", 1700, 400, 3, NONE, DP_REASM_BAD_TOTAL,
		  { 2, 900, false }, { 0, 400, false }, { 1, 400, false });
	MALFORMED("the last first: empty", 600, 600, 2, NONE, DP_REASM_BAD_TOTAL, { 1, 0, false }, { 0, 600, false });
	MALFORMED("seg_count 2, one slice holding all of total", 1000, 1000, 2, NONE, DP_REASM_BAD_TOTAL,
		  { 0, 1000, false }, { 1, 0, false });
}

/* With a deadline: the malformed segment is never answered; the part that forms a message of its own
 * (slices of 1000, a last of 501) is answered DEADLINE_EXCEEDED at its deadline, once. */
static void test_bad_total_deadline(void)
{
	MALFORMED("bad_total, deadline 2000 us", 2501, 1000, 3, 2000, DP_REASM_BAD_TOTAL, { 2, 500, false },
		  { 0, 1000, true }, { 1, 1000, true });
	MALFORMED("bad_slice, deadline 2000 us", 610, 255, 3, 2000, DP_REASM_BAD_SLICE, { 2, 100, false },
		  { 0, 255, false }, { 1, 255, false });
}

/* A message discarded mid-way (a short middle slice) that had a deadline: when the deadline passes
 * its dead entry goes in silence; no DEADLINE_EXCEEDED for a discarded message. */
static void test_discarded_deadline(void)
{
	struct dp_lcore *lc = &g_lc1500;
	const uint64_t t0 = T_ARRIVAL_TSC;
	struct tmsg t;

	tmsg_init(&t, BW_OP_PING, 0, 1000, 7);
	tmsg_pattern(&t, 3500, 2);
	t.hdr.deadline_us = 3000;
	ctx_set("bad_slice, deadline 3000 us");
	case_begin(lc);
	SEG(lc, &t, 0, t0, DP_VERDICT_HELD);
	SEG(lc, &t, 3, t0, DP_VERDICT_HELD);
	seg_frame_len(&t, 1, 999);
	SEND(lc, t0, DP_VERDICT_DROP);
	SEG(lc, &t, 2, t0, DP_VERDICT_DROP);
	CU_ASSERT_EQUAL(dp_reasm_expire(lc, t0 + plat_us_to_tsc(3000) - 1), 0);
	CU_ASSERT_EQUAL(dp_reasm_expire(lc, t0 + plat_us_to_tsc(3000)), 1);
	tx_collect(lc);
	COUNTS(lc, .requests = 4, .segments_in = 4, .drop_segment = 2, .reasm[DP_REASM_BAD_SLICE] = 1,
	       .reasm[DP_REASM_DEAD_SEGMENT] = 1);
	CASE_END(lc, 0);
	tmsg_fini(&t);
}

/* Whole, but not servable: PING with tensors, INFER whose tensors do not parse (a descriptor in the
 * second page), INFER to a model that fails. One error datagram each, after the last segment. */
static void test_whole_refused(void)
{
	struct dp_lcore *lc = &g_lc1500;
	static char long_name[BW_MAX_NAME_LEN + 1];
	const char *const names[5] = { long_name, "n1", "n2", "n3", "n4" };
	const uint32_t lens[5] = { 100, 200, 300, 400, 500 };
	struct tmsg ping, bad, broken;
	struct bw_tensor_desc *d;
	uint32_t off;

	memset(long_name, 'n', BW_MAX_NAME_LEN);
	tmsg_init(&ping, BW_OP_PING, 0, 1000, 0);
	tmsg_pattern(&ping, 2500, 7);
	ping.hdr.num_tensors = 1;
	tmsg_init(&bad, BW_OP_INFER, STUB_MODEL_ECHO, 256, 1);
	tmsg_tensors(&bad, lens, names, 5, 8);
	/* the last descriptor (past the first 256-byte page) has a reserved field set */
	off = (uint32_t)sizeof(*d) + bw_pad8((uint32_t)strlen(names[0])) + 3 * (uint32_t)(sizeof(*d) + 8);
	RTE_VERIFY(off > 256);
	d = (struct bw_tensor_desc *)(bad.body + off);
	d->reserved = 1;
	tmsg_init(&broken, BW_OP_INFER, STUB_MODEL_BROKEN, T_SLICE_1500, 2);
	tmsg_tensors(&broken, lens, names, 5, 9);
	ctx_set("whole, then refused");
	case_begin(lc);
	for (uint32_t k = 0; k < tmsg_count(&ping); k++)
		SEG(lc, &ping, k, T_ARRIVAL_TSC, DP_VERDICT_HELD);
	for (uint32_t k = tmsg_count(&bad); k-- > 0;)
		SEG(lc, &bad, k, T_ARRIVAL_TSC, DP_VERDICT_HELD);
	for (uint32_t k = 0; k < tmsg_count(&broken); k++)
		SEG(lc, &broken, k, T_ARRIVAL_TSC, DP_VERDICT_HELD);
	tx_collect(lc);
	EXPECT_ERROR(lc, &ping, BW_STATUS_INVALID_ARGUMENT, "PING carries no tensors");
	EXPECT_ERROR(lc, &bad, BW_STATUS_INVALID_ARGUMENT, "reserved");
	EXPECT_ERROR(lc, &broken, BW_STATUS_INTERNAL, STUB_BROKEN_MSG);
	uint32_t n = tmsg_count(&ping) + tmsg_count(&bad) + tmsg_count(&broken);
	COUNTS(lc, .requests = n, .segments_in = n, .reassembled = 3, .replies[BW_STATUS_INVALID_ARGUMENT] = 2,
	       .replies[BW_STATUS_INTERNAL] = 1);
	CU_ASSERT_EQUAL(g_stub.infer_calls, 1);
	CASE_END(lc, 0);
	tmsg_fini(&ping);
	tmsg_fini(&bad);
	tmsg_fini(&broken);
}

/* ---- refusals after the first segment --------------------------------------------------------- */

/* A segmented INFER to no model, and one with a priority the model does not have: one error
 * datagram after the first segment to arrive, whichever it is; the others dead. */
static void test_refused(void)
{
	struct dp_lcore *lc = &g_lc1500;
	struct tmsg none, prio;
	uint32_t len = 2444;
	const char *name = "r";

	tmsg_init(&none, BW_OP_INFER, STUB_MODEL_UNKNOWN, 1000, 0);
	tmsg_tensors(&none, &len, &name, 1, 1);
	tmsg_init(&prio, BW_OP_INFER, STUB_MODEL_ECHO, 1000, 1);
	tmsg_tensors(&prio, &len, &name, 1, 2);
	prio.hdr.priority = STUB_ECHO_LEVELS;
	ctx_set("refused");
	case_begin(lc);
	SEG(lc, &none, 0, T_ARRIVAL_TSC, DP_VERDICT_REPLY);
	SEG(lc, &none, 1, T_ARRIVAL_TSC, DP_VERDICT_DROP);
	SEG(lc, &none, 2, T_ARRIVAL_TSC, DP_VERDICT_DROP);
	SEG(lc, &none, 0, T_ARRIVAL_TSC, DP_VERDICT_DROP); /* a retry of the first: still not answered again */
	SEG(lc, &prio, 1, T_ARRIVAL_TSC, DP_VERDICT_REPLY);
	SEG(lc, &prio, 0, T_ARRIVAL_TSC, DP_VERDICT_DROP);
	SEG(lc, &prio, 2, T_ARRIVAL_TSC, DP_VERDICT_DROP);
	GAUGES(lc, 0, 0, 0);
	tx_collect(lc);
	EXPECT_ERROR(lc, &none, BW_STATUS_NOT_FOUND, "no model with id 42");
	EXPECT_ERROR(lc, &prio, BW_STATUS_INVALID_ARGUMENT, "priority");
	COUNTS(lc, .requests = 7, .segments_in = 7, .drop_segment = 5, .reasm[DP_REASM_REFUSED] = 2,
	       .reasm[DP_REASM_DEAD_SEGMENT] = 5, .replies[BW_STATUS_NOT_FOUND] = 1,
	       .replies[BW_STATUS_INVALID_ARGUMENT] = 1);
	CU_ASSERT_EQUAL(g_stub.infer_calls, 0);
	CASE_END(lc, 2);
	tmsg_fini(&none);
	tmsg_fini(&prio);
}

/* An lcore with max_message_bytes 8192 (6 slices at MTU 1500) and 4 message entries. */
static struct dp_config g_cfg_tiny;
static struct dp_lcore g_lc_tiny;

/* Above max_message_bytes: RESOURCE_EXHAUSTED once, after the first segment to arrive; the others
 * dead. At the limit exactly: served. */
static void test_too_large(void)
{
	struct dp_lcore *lc = &g_lc_tiny;
	struct tmsg a, b, fits;

	tmsg_init(&a, BW_OP_PING, 0, T_SLICE_1500, 0);
	tmsg_pattern(&a, 8193, 1);
	tmsg_init(&b, BW_OP_PING, 0, T_SLICE_1500, 1);
	tmsg_pattern(&b, 8193, 2);
	tmsg_init(&fits, BW_OP_PING, 0, T_SLICE_1500, 2);
	tmsg_pattern(&fits, 8192, 3);
	CU_ASSERT_EQUAL_FATAL(tmsg_count(&a), 6);
	ctx_set("total_body_len above max_message_bytes");
	case_begin(lc);
	SEG(lc, &a, 0, T_ARRIVAL_TSC, DP_VERDICT_REPLY);
	for (uint32_t k = 1; k < 6; k++)
		SEG(lc, &a, k, T_ARRIVAL_TSC, DP_VERDICT_DROP);
	SEG(lc, &b, 3, T_ARRIVAL_TSC, DP_VERDICT_REPLY); /* not segment 0 first: answered all the same */
	SEG(lc, &b, 0, T_ARRIVAL_TSC, DP_VERDICT_DROP);
	for (uint32_t k = 0; k < 6; k++)
		SEG(lc, &fits, k, T_ARRIVAL_TSC, DP_VERDICT_HELD);
	tx_collect(lc);
	EXPECT_ERROR(lc, &a, BW_STATUS_RESOURCE_EXHAUSTED, "8193");
	EXPECT_ERROR(lc, &b, BW_STATUS_RESOURCE_EXHAUSTED, "8192");
	EXPECT_OK(lc, &fits);
	COUNTS(lc, .requests = 14, .segments_in = 14, .segments_out = 6, .reassembled = 1, .drop_segment = 6,
	       .reasm[DP_REASM_TOO_LARGE] = 2, .reasm[DP_REASM_DEAD_SEGMENT] = 6,
	       .replies[BW_STATUS_RESOURCE_EXHAUSTED] = 2, .replies[BW_STATUS_OK] = 1);
	CASE_END(lc, 2);
	tmsg_fini(&a);
	tmsg_fini(&b);
	tmsg_fini(&fits);
}

/*
 * Four messages in reassembly on a table of four: a fifth is refused RESOURCE_EXHAUSTED on its
 * segment 0 (its other segments, which it cannot remember, are dropped and counted), and so is a
 * message too large (only its segment 0 answered); the four are not evicted and complete; then the
 * table has room again.
 */
static void test_table_full(void)
{
	struct dp_lcore *lc = &g_lc_tiny;
	struct tmsg t[4], fifth, big;

	for (unsigned int i = 0; i < 4; i++) {
		tmsg_init(&t[i], BW_OP_PING, 0, 1000, i);
		tmsg_pattern(&t[i], 2500 + i, i);
	}
	tmsg_init(&fifth, BW_OP_PING, 0, 1000, 4);
	tmsg_pattern(&fifth, 2500, 5);
	tmsg_init(&big, BW_OP_PING, 0, T_SLICE_1500, 5);
	tmsg_pattern(&big, 9000, 6);
	ctx_set("table of 4 full");
	case_begin(lc);
	for (unsigned int i = 0; i < 4; i++)
		SEG(lc, &t[i], 0, T_ARRIVAL_TSC, DP_VERDICT_HELD);
	GAUGES(lc, 4, 4, 4000);
	SEG(lc, &fifth, 1, T_ARRIVAL_TSC, DP_VERDICT_DROP);
	SEG(lc, &fifth, 0, T_ARRIVAL_TSC, DP_VERDICT_REPLY);
	SEG(lc, &fifth, 2, T_ARRIVAL_TSC, DP_VERDICT_DROP);
	SEG(lc, &big, 1, T_ARRIVAL_TSC, DP_VERDICT_DROP);
	SEG(lc, &big, 0, T_ARRIVAL_TSC, DP_VERDICT_REPLY);
	GAUGES(lc, 4, 4, 4000);
	tx_collect(lc);
	EXPECT_ERROR(lc, &fifth, BW_STATUS_RESOURCE_EXHAUSTED, "4 messages");
	EXPECT_ERROR(lc, &big, BW_STATUS_RESOURCE_EXHAUSTED, "9000");
	for (unsigned int i = 0; i < 4; i++) {
		SEG(lc, &t[i], 2, T_ARRIVAL_TSC, DP_VERDICT_HELD);
		SEG(lc, &t[i], 1, T_ARRIVAL_TSC, DP_VERDICT_HELD);
	}
	tx_collect(lc);
	for (unsigned int i = 0; i < 4; i++)
		EXPECT_OK(lc, &t[i]);
	/* room again: the fifth, sent whole once more, is served */
	for (uint32_t k = 0; k < 3; k++)
		SEG(lc, &fifth, k, T_ARRIVAL_TSC, DP_VERDICT_HELD);
	tx_collect(lc);
	EXPECT_OK(lc, &fifth);
	COUNTS(lc, .requests = 20, .segments_in = 20, .segments_out = 15, .reassembled = 5, .drop_segment = 3,
	       .reasm[DP_REASM_TABLE_FULL] = 3, .reasm[DP_REASM_TOO_LARGE] = 2,
	       .replies[BW_STATUS_RESOURCE_EXHAUSTED] = 2, .replies[BW_STATUS_OK] = 5);
	CASE_END(lc, 0);
	for (unsigned int i = 0; i < 4; i++)
		tmsg_fini(&t[i]);
	tmsg_fini(&fifth);
	tmsg_fini(&big);
}

/*
 * reassembly_mbufs 8, counted as datagrams arrive: a message of 9 segments never fits (refused at its
 * first); two messages holding 4 mbufs each fill the budget, so that the next segment to arrive, a
 * new message's or one of theirs, is refused RESOURCE_EXHAUSTED and its message discarded (its mbufs
 * given back), and the other completes; then there is room again.
 */
static void test_no_room(void)
{
	static struct dp_config cfg;
	static struct dp_lcore lc_room;
	struct dp_lcore *lc = &lc_room;
	struct tmsg nine, a, b, c, d;

	dp_config_defaults(&cfg);
	cfg.mtu = 1500;
	cfg.msg_max = 8 * T_SLICE_1500;
	cfg.ping_max = cfg.msg_max;
	cfg.reasm_mbufs = 8;
	CU_ASSERT_EQUAL_FATAL(lcore_make(lc, &cfg), 0);
	tmsg_init(&nine, BW_OP_PING, 0, 256, 0);
	tmsg_pattern(&nine, 8 * 256 + 100, 1);
	tmsg_init(&a, BW_OP_PING, 0, 256, 1);
	tmsg_pattern(&a, 4 * 256 + 200, 2);
	tmsg_init(&b, BW_OP_PING, 0, 256, 2);
	tmsg_pattern(&b, 4 * 256 + 200, 3);
	tmsg_init(&c, BW_OP_PING, 0, 256, 3);
	tmsg_pattern(&c, 4 * 256 + 1, 4);
	tmsg_init(&d, BW_OP_PING, 0, 256, 4);
	tmsg_pattern(&d, 4 * 256 + 1, 5);
	CU_ASSERT_EQUAL_FATAL(tmsg_count(&nine), 9);
	ctx_set("reassembly_mbufs 8");
	case_begin(lc);
	SEG(lc, &nine, 4, T_ARRIVAL_TSC, DP_VERDICT_REPLY);
	SEG(lc, &nine, 0, T_ARRIVAL_TSC, DP_VERDICT_DROP);
	for (uint32_t k = 0; k < 4; k++) {
		SEG(lc, &a, k, T_ARRIVAL_TSC, DP_VERDICT_HELD);
		SEG(lc, &b, k, T_ARRIVAL_TSC, DP_VERDICT_HELD);
	}
	GAUGES(lc, 2, 8, 8 * 256);
	SEG(lc, &c, 0, T_ARRIVAL_TSC, DP_VERDICT_REPLY); /* a new message: no budget */
	SEG(lc, &a, 4, T_ARRIVAL_TSC, DP_VERDICT_REPLY); /* a's last: no budget either; a is discarded */
	GAUGES(lc, 1, 4, 4 * 256);
	SEG(lc, &b, 4, T_ARRIVAL_TSC, DP_VERDICT_HELD);  /* a's mbufs are back: b completes */
	SEG(lc, &c, 1, T_ARRIVAL_TSC, DP_VERDICT_DROP);  /* c stays refused until its clock runs out */
	for (uint32_t k = 0; k < 5; k++)
		SEG(lc, &d, k, T_ARRIVAL_TSC, DP_VERDICT_HELD);
	tx_collect(lc);
	EXPECT_ERROR(lc, &nine, BW_STATUS_RESOURCE_EXHAUSTED, "reassembly_mbufs");
	EXPECT_ERROR(lc, &c, BW_STATUS_RESOURCE_EXHAUSTED, "mbufs");
	EXPECT_ERROR(lc, &a, BW_STATUS_RESOURCE_EXHAUSTED, "mbufs");
	EXPECT_OK(lc, &b);
	EXPECT_OK(lc, &d);
	COUNTS(lc, .requests = 19, .segments_in = 19, .segments_out = 10, .reassembled = 2, .drop_segment = 2,
	       .reasm[DP_REASM_NO_ROOM] = 3, .reasm[DP_REASM_DEAD_SEGMENT] = 2,
	       .replies[BW_STATUS_RESOURCE_EXHAUSTED] = 3, .replies[BW_STATUS_OK] = 2);
	CASE_END(lc, 3);
	dp_lcore_fini(lc);
	tmsg_fini(&nine);
	tmsg_fini(&a);
	tmsg_fini(&b);
	tmsg_fini(&c);
	tmsg_fini(&d);
}

/* ---- tensors across pages --------------------------------------------------------------------- */

/*
 * An echo INFER of two uint8 tensors whose first has a 255-byte name, so that the second descriptor
 * starts at byte 304 of the body: slices of 256 to 664 bytes put the first page boundary on every
 * byte of the first name from 256, the second descriptor, its name and both payloads. In order and
 * reversed: the stub sees both tensors, and the reply is the request.
 */
static void test_tensor_split(void)
{
	static char long_name[BW_MAX_NAME_LEN + 1];
	const char *const names[2] = { long_name, "b" };
	const uint32_t lens[2] = { 5, 300 };
	struct dp_lcore *lc = &g_lc1500;
	struct tmsg t;
	uint32_t total;

	memset(long_name, 'a', BW_MAX_NAME_LEN);
	tmsg_init(&t, BW_OP_INFER, STUB_MODEL_ECHO, 256, 0);
	tmsg_tensors(&t, lens, names, 2, 1);
	total = tmsg_total(&t);
	CU_ASSERT_EQUAL_FATAL(total, 48 + 256 + 48 + 8 + 5 + 300);
	for (uint32_t slice = 256; slice < total; slice++) {
		for (int o = ORDER_FORWARD; o <= ORDER_REVERSE; o++) {
			t.slice = slice;
			t.hdr.seg_count = (uint16_t)((total + slice - 1) / slice);
			ctx_set("two tensors, slices of %u, %s", slice, g_order_names[o]);
			case_begin(lc);
			msg_rx(lc, &t, (enum order)o, 0);
			tx_collect(lc);
			check_at(g_stub.infer_calls == 1 && g_stub.num_tensors == 2, __LINE__,
				 "infer called %u times with %u tensors", g_stub.infer_calls, g_stub.num_tensors);
			EXPECT_OK(lc, &t);
			COUNTS(lc, .requests = tmsg_count(&t), .segments_in = tmsg_count(&t), .segments_out = tmsg_count(&t),
			       .reassembled = 1, .replies[BW_STATUS_OK] = 1);
			CASE_END(lc, 0);
		}
	}
	tmsg_fini(&t);
}

/* 64 tensors with 255-byte names: their descriptors fill exactly DP_DESC_PREFIX_MAX bytes, across 14
 * pages of 1432 or 3 of 8932, shuffled: all 64 parsed, echoed. */
static void test_max_descriptors(void)
{
	static char name_bytes[BW_MAX_TENSORS][BW_MAX_NAME_LEN + 1];
	const char *names[BW_MAX_TENSORS];
	uint32_t lens[BW_MAX_TENSORS];
	struct dp_lcore *const lcs[] = { &g_lc1500, &g_lc9000 };
	const uint32_t slices[] = { T_SLICE_1500, T_SLICE_9000 };
	uint32_t payloads = 0;
	struct tmsg t;

	for (unsigned int i = 0; i < BW_MAX_TENSORS; i++) {
		memset(name_bytes[i], 'a' + (int)(i % 26), BW_MAX_NAME_LEN);
		names[i] = name_bytes[i];
		lens[i] = 1 + i % 3;
		payloads += lens[i];
	}
	for (unsigned int c = 0; c < RTE_DIM(lcs); c++) {
		tmsg_init(&t, BW_OP_INFER, STUB_MODEL_ECHO, slices[c], c);
		tmsg_tensors(&t, lens, names, BW_MAX_TENSORS, c);
		CU_ASSERT_EQUAL(tmsg_total(&t) - payloads, DP_DESC_PREFIX_MAX);
		ctx_set("64 tensors with 255-byte names, slices of %u", slices[c]);
		case_begin(lcs[c]);
		msg_rx(lcs[c], &t, ORDER_RANDOM, c + 1);
		tx_collect(lcs[c]);
		check_at(g_stub.infer_calls == 1 && g_stub.num_tensors == BW_MAX_TENSORS, __LINE__,
			 "infer called %u times with %u tensors", g_stub.infer_calls, g_stub.num_tensors);
		EXPECT_OK(lcs[c], &t);
		COUNTS(lcs[c], .requests = tmsg_count(&t), .segments_in = tmsg_count(&t), .segments_out = tmsg_count(&t),
		       .reassembled = 1, .replies[BW_STATUS_OK] = 1);
		CASE_END(lcs[c], 0);
		tmsg_fini(&t);
	}
}

/* ---- adversaries: a peer without a key trying to hold reassembly ------------------------------ */

/* An lcore of default limits at MTU 1500 (and every refusal answered, so that counts are exact). */
static void adversary_lcore(struct dp_lcore *lc, struct dp_config *cfg, uint32_t ping_max)
{
	dp_config_defaults(cfg);
	cfg->mtu = 1500;
	cfg->error_rate = 0;
	cfg->ping_max = ping_max;
	CU_ASSERT_EQUAL_FATAL(lcore_make(lc, cfg), 0);
}

/* A good client's echo INFER of 3 segments (from client 2), sent whole and answered OK. */
static void good_infer_at(struct dp_lcore *lc, uint64_t tsc, int line)
{
	uint32_t len = 3000 - 56;
	const char *name = "good";
	struct tmsg t;

	tmsg_init(&t, BW_OP_INFER, STUB_MODEL_ECHO, T_SLICE_1500, 2);
	tmsg_tensors(&t, &len, &name, 1, line);
	CU_ASSERT_EQUAL_FATAL(tmsg_count(&t), 3);
	for (uint32_t k = 0; k < 3; k++) {
		seg_frame(&t, k);
		send_at(lc, tsc, DP_VERDICT_HELD, line);
	}
	tx_collect(lc);
	expect_ok_at(lc, &t, line);
	tmsg_fini(&t);
}

/*
 * One datagram claiming every mbuf of the core, for 71 minutes: a PING's first segment with seg_count
 * as large as max_message_bytes allows and deadline_us 0xffffffff. PING is capped (ping_max_bytes):
 * refused at once. With the cap lifted, and as an INFER to a model that takes large requests, it holds
 * the one mbuf it brought; a good client's 3-segment request is served beside it; at
 * reassembly_timeout_ms (not its deadline) it is gone, in silence.
 */
static void test_one_datagram_claim(void)
{
	static struct dp_config cfg_capped, cfg_open;
	static struct dp_lcore capped, open;
	const uint64_t t0 = T_ARRIVAL_TSC;
	struct tmsg ping, infer;
	uint16_t count;

	adversary_lcore(&capped, &cfg_capped, DP_PING_MAX_DEFAULT);
	adversary_lcore(&open, &cfg_open, DP_MSG_MAX_DEFAULT);
	count = (uint16_t)dp_msg_segments(&cfg_open, cfg_open.msg_max);
	tmsg_init(&ping, BW_OP_PING, 0, T_SLICE_1500, 0);
	tmsg_pattern(&ping, T_SLICE_1500, 1);
	ping.hdr.seg_count = count;
	ping.hdr.total_body_len = cfg_open.msg_max;
	ping.hdr.deadline_us = UINT32_MAX;
	tmsg_init(&infer, BW_OP_INFER, STUB_MODEL_ECHO, T_SLICE_1500, 1);
	tmsg_pattern(&infer, T_SLICE_1500, 2);
	infer.hdr.seg_count = count;
	infer.hdr.total_body_len = cfg_open.msg_max;
	infer.hdr.deadline_us = UINT32_MAX;
	infer.hdr.num_tensors = 1;

	ctx_set("PING claiming %u segments, ping_max_bytes at its default", count);
	case_begin(&capped);
	SEG(&capped, &ping, 0, t0, DP_VERDICT_REPLY);
	tx_collect(&capped);
	EXPECT_ERROR(&capped, &ping, BW_STATUS_RESOURCE_EXHAUSTED, "ping_max_bytes");
	GAUGES(&capped, 0, 0, 0);
	COUNTS(&capped, .requests = 1, .segments_in = 1, .reasm[DP_REASM_TOO_LARGE] = 1,
	       .replies[BW_STATUS_RESOURCE_EXHAUSTED] = 1);
	CASE_END(&capped, 1);

	ctx_set("PING and INFER claiming %u segments each, deadline 0xffffffff", count);
	case_begin(&open);
	SEG(&open, &ping, 0, t0, DP_VERDICT_HELD);
	SEG(&open, &infer, 0, t0, DP_VERDICT_HELD);
	GAUGES(&open, 2, 2, 2 * T_SLICE_1500);
	CHECKF(rte_mempool_avail_count(g_pool) == g_avail - 2, "the claims hold %u mbufs, expected the 2 they brought",
	       g_avail - rte_mempool_avail_count(g_pool));
	good_infer_at(&open, t0 + 1, __LINE__);
	CU_ASSERT_EQUAL(dp_reasm_expire(&open, t0 + plat_us_to_tsc(T_TIMEOUT_US) - 1), 0);
	CU_ASSERT_EQUAL(dp_reasm_expire(&open, t0 + plat_us_to_tsc(T_TIMEOUT_US)), 2);
	GAUGES(&open, 0, 0, 0);
	COUNTS(&open, .requests = 5, .segments_in = 5, .segments_out = 3, .reassembled = 1,
	       .reasm[DP_REASM_TIMEOUT] = 2, .replies[BW_STATUS_OK] = 1);
	CASE_END(&open, 0);
	dp_lcore_fini(&capped);
	dp_lcore_fini(&open);
	tmsg_fini(&ping);
	tmsg_fini(&infer);
}

/*
 * A table's worth of dead entries (first segments refused: no such model, distinct ids, one source)
 * and as many malformed first segments (no entry at all): a good client from another source is served
 * all the same, taking the oldest dead entry (counted evicted); the rest go at reassembly_timeout_ms.
 */
static void test_dead_entries(void)
{
	static struct dp_config cfg;
	static struct dp_lcore lc_dead;
	struct dp_lcore *lc = &lc_dead;
	const uint64_t t0 = T_ARRIVAL_TSC;
	struct tmsg t;
	uint32_t n;

	adversary_lcore(lc, &cfg, DP_PING_MAX_DEFAULT);
	n = cfg.reasm_msgs;
	ctx_set("%u refused first segments, %u malformed ones, then a good client", n, n);
	case_begin(lc);
	tmsg_init(&t, BW_OP_INFER, STUB_MODEL_UNKNOWN, 1000, 0);
	tmsg_pattern(&t, 2500, 1);
	for (uint32_t i = 0; i < n; i++) {
		t.hdr.request_id++;
		seg_frame(&t, 0);
		send_at(lc, t0, DP_VERDICT_REPLY, __LINE__);
		tx_collect(lc);
		tx_release(); /* n replies: more than the TX ring holds */
	}
	t.hdr.total_body_len = 2000; /* slices of 1000 leave the last one empty */
	for (uint32_t i = 0; i < n; i++) {
		t.hdr.request_id++;
		seg_frame(&t, 0);
		send_at(lc, t0, DP_VERDICT_DROP, __LINE__);
	}
	GAUGES(lc, 0, 0, 0);
	good_infer_at(lc, t0 + 1, __LINE__);
	good_infer_at(lc, t0 + 2, __LINE__); /* the entry the first freed once answered: no eviction */
	CU_ASSERT_EQUAL(lc->stats.reasm[DP_REASM_EVICTED], 1);
	CU_ASSERT_EQUAL(lc->stats.reasm[DP_REASM_REFUSED], n);
	CU_ASSERT_EQUAL(lc->stats.reasm[DP_REASM_BAD_TOTAL], n);
	CU_ASSERT_EQUAL(lc->stats.replies[BW_STATUS_NOT_FOUND], n);
	CU_ASSERT_EQUAL(lc->stats.replies[BW_STATUS_OK], 2);
	CU_ASSERT_EQUAL(dp_reasm_expire(lc, t0 + plat_us_to_tsc(T_TIMEOUT_US) - 1), 0);
	CU_ASSERT_EQUAL(dp_reasm_expire(lc, t0 + plat_us_to_tsc(T_TIMEOUT_US)), n - 1);
	CASE_END(lc, 0);
	dp_lcore_fini(lc);
	tmsg_fini(&t);
}

/* The bucket an unkeyed mix of the key picked (what the table used before it took a secret). */
static uint32_t unkeyed_bucket(uint32_t ip, uint16_t port, uint64_t request_id, uint32_t mask)
{
	return (uint32_t)(((request_id ^ ((uint64_t)ip << 16 | port)) * UINT64_C(0x9e3779b97f4a7c15)) >> 32) & mask;
}

/* x with x * a == 1 modulo 2^64 (a odd): Newton's iteration doubles the correct bits each step. */
static uint64_t inverse_mod64(uint64_t a)
{
	uint64_t x = a;

	for (int i = 0; i < 6; i++)
		x *= 2 - a * x;
	return x;
}

/*
 * request_ids chosen so that an unkeyed hash puts every one in one bucket (their products differ only
 * above the bucket bits): under the lcore's secret key the chains stay short.
 */
static void test_colliding_ids(void)
{
	static struct dp_config cfg;
	static struct dp_lcore lc_coll;
	struct dp_lcore *lc = &lc_coll;
	const uint64_t g_inv = inverse_mod64(UINT64_C(0x9e3779b97f4a7c15));
	const struct client *from = &g_clients[0];
	uint32_t n, mask, same = 0, longest;
	struct tmsg t;

	adversary_lcore(lc, &cfg, DP_PING_MAX_DEFAULT);
	n = cfg.reasm_msgs;
	mask = rte_align32pow2(n * 2) - 1;
	ctx_set("%u ids on one chain of an unkeyed hash", n);
	case_begin(lc);
	tmsg_init(&t, BW_OP_PING, 0, 1000, 0);
	tmsg_pattern(&t, 2500, 3);
	for (uint32_t i = 0; i < n; i++) {
		uint64_t wanted = (uint64_t)(i + 1) << 43; /* above bits 32..42, the bucket's */

		t.hdr.request_id = (g_inv * wanted) ^ ((uint64_t)rte_cpu_to_be_32(from->ip) << 16 |
						       rte_cpu_to_be_16(from->port));
		same += unkeyed_bucket(rte_cpu_to_be_32(from->ip), rte_cpu_to_be_16(from->port), t.hdr.request_id,
				       mask) == 0;
		seg_frame(&t, 0);
		send_at(lc, T_ARRIVAL_TSC, DP_VERDICT_HELD, __LINE__);
	}
	CHECKF(same == n, "%u of %u ids collide unkeyed: the attack is not what this test says", same, n);
	longest = dp_reasm_chain_max(lc);
	CHECKF(longest <= 16, "the longest chain holds %u of %u entries", longest, n);
	GAUGES(lc, n, n, (uint64_t)n * 1000);
	CU_ASSERT_EQUAL(dp_reasm_expire(lc, T_ARRIVAL_TSC + plat_us_to_tsc(T_TIMEOUT_US)), n);
	CASE_END(lc, 0);
	dp_lcore_fini(lc);
	tmsg_fini(&t);
}

/* ---- environment ------------------------------------------------------------------------------ */

static void ring_free(struct rte_ring **r)
{
	struct rte_mbuf *m = NULL;

	if (*r == NULL)
		return;
	while (rte_ring_dequeue(*r, (void **)&m) == 0)
		rte_pktmbuf_free(m);
	rte_ring_free(*r);
	*r = NULL;
}

static int env_init(const char *prog)
{
	char args[][64] = { "", "--no-huge", "-m", "256", "--no-pci", "--no-telemetry", "-l", "0",
			    "--log-level=*:error", "--file-prefix", "" };
	char *argv[RTE_DIM(args)];
	struct rte_mempool *pools[1];
	int sockets[1];

	snprintf(args[0], sizeof(args[0]), "%s", prog);
	snprintf(args[RTE_DIM(args) - 1], sizeof(args[0]), "bwtest-reasm-%d", (int)getpid());
	for (unsigned int i = 0; i < RTE_DIM(args); i++)
		argv[i] = args[i];
	if (rte_eal_init((int)RTE_DIM(argv), argv) < 0) {
		fprintf(stderr, "rte_eal_init: %s\n", rte_strerror(rte_errno));
		return -1;
	}
	if (plat_clock_init() != 0) {
		fprintf(stderr, "plat_clock_init failed\n");
		return -1;
	}
	/* no cache: rte_mempool_avail_count is then exact at every moment */
	g_pool = rte_pktmbuf_pool_create("bwtest_reasm", T_POOL_MBUFS, 0, 0, dp_mbuf_data_room(BW_MTU_MAX),
					 (int)rte_socket_id());
	g_rx = rte_ring_create("bwreasm_rx", T_RING_SIZE, (int)rte_socket_id(), RING_F_SP_ENQ | RING_F_SC_DEQ);
	g_tx = rte_ring_create("bwreasm_tx", T_RING_SIZE, (int)rte_socket_id(), RING_F_SP_ENQ | RING_F_SC_DEQ);
	if (g_pool == NULL || g_rx == NULL || g_tx == NULL) {
		fprintf(stderr, "pool or rings: %s\n", rte_strerror(rte_errno));
		return -1;
	}
	g_port = rte_eth_from_rings("bwreasm", &g_rx, 1, &g_tx, 1, rte_socket_id());
	if (g_port < 0) {
		fprintf(stderr, "rte_eth_from_rings: %s\n", rte_strerror(rte_errno));
		return -1;
	}
	/* PING is this file's message of any size: its cap is that of every message */
	dp_config_defaults(&g_cfg_1500);
	g_cfg_1500.mtu = 1500;
	g_cfg_1500.ping_max = g_cfg_1500.msg_max;
	dp_config_defaults(&g_cfg_9000);
	g_cfg_9000.mtu = BW_MTU_MAX;
	g_cfg_9000.ping_max = g_cfg_9000.msg_max;
	dp_config_defaults(&g_cfg_tiny);
	g_cfg_tiny.mtu = 1500;
	g_cfg_tiny.msg_max = 8192;
	g_cfg_tiny.ping_max = 8192;
	g_cfg_tiny.reasm_msgs = 4;
	pools[0] = g_pool;
	sockets[0] = (int)rte_socket_id();
	if (dp_port_init((uint16_t)g_port, 1, &g_cfg_9000, pools, sockets) != 0) {
		fprintf(stderr, "dp_port_init failed\n");
		return -1;
	}
	if (lcore_make(&g_lc1500, &g_cfg_1500) != 0 || lcore_make(&g_lc9000, &g_cfg_9000) != 0 ||
	    lcore_make(&g_lc_tiny, &g_cfg_tiny) != 0) {
		fprintf(stderr, "dp_lcore_init failed\n");
		return -1;
	}
	return 0;
}

static void env_fini(void)
{
	char runtime_dir[PATH_MAX];

	snprintf(runtime_dir, sizeof(runtime_dir), "%s", rte_eal_get_runtime_dir());
	tx_release();
	if (g_port >= 0) {
		dp_lcore_fini(&g_lc1500);
		dp_lcore_fini(&g_lc9000);
		dp_lcore_fini(&g_lc_tiny);
		dp_port_fini((uint16_t)g_port);
	}
	ring_free(&g_rx);
	ring_free(&g_tx);
	rte_mempool_free(g_pool);
	g_pool = NULL;
	rte_eal_cleanup();
	plat_runtime_dir_remove(runtime_dir);
}

static CU_TestInfo g_whole_tests[] = {
	{ "PING in 2..2351 segments of 256/1000/1432/8932, in order, reversed, shuffled", test_ping_orders },
	{ "segments with IP options: replies without", test_ip_options },
	{ "duplicates ignored and counted, the message completes once", test_duplicates },
	{ "a segment after its message was answered starts a new one", test_segment_after_whole },
	{ "8 clients, shared request_ids, interleaved: each its own reply", test_many_clients },
	CU_TEST_INFO_NULL,
};

static CU_TestInfo g_clock_tests[] = {
	{ "missing segment, no deadline: timeout at 100 ms, no reply", test_timeout },
	{ "missing segment, deadline: one DEADLINE_EXCEEDED at the deadline", test_deadline },
	CU_TEST_INFO_NULL,
};

static CU_TestInfo g_discard_tests[] = {
	{ "a repeated header field that differs: mismatch", test_mismatch },
	{ "a slice of the wrong length: bad_slice, the rest dead", test_bad_slice },
	{ "a first slice below 256: bad_slice, no entry", test_first_slice_short },
	{ "a total that does not cut into the slices: bad_total, no entry", test_bad_total },
	{ "bad_total with a deadline: the malformed segment never answered", test_bad_total_deadline },
	{ "discarded mid-way with a deadline: never answered", test_discarded_deadline },
	{ "whole but unservable: one error after the last segment", test_whole_refused },
	CU_TEST_INFO_NULL,
};

static CU_TestInfo g_limit_tests[] = {
	{ "unknown model, bad priority: refused once", test_refused },
	{ "above max_message_bytes: RESOURCE_EXHAUSTED once", test_too_large },
	{ "table full: RESOURCE_EXHAUSTED, nothing evicted", test_table_full },
	{ "no budget for a segment: RESOURCE_EXHAUSTED, its message discarded", test_no_room },
	CU_TEST_INFO_NULL,
};

static CU_TestInfo g_adversary_tests[] = {
	{ "one datagram claiming every mbuf for 71 minutes: capped, holds one mbuf for 100 ms", test_one_datagram_claim },
	{ "a table of dead entries and malformed segments: a good client served", test_dead_entries },
	{ "ids colliding under an unkeyed hash: chains stay short", test_colliding_ids },
	CU_TEST_INFO_NULL,
};

static CU_TestInfo g_tensor_tests[] = {
	{ "a page boundary at every byte of names, descriptor and payloads", test_tensor_split },
	{ "64 descriptors with 255-byte names across pages", test_max_descriptors },
	CU_TEST_INFO_NULL,
};

int main(int argc, char **argv)
{
	static CU_SuiteInfo suites[] = {
		{ .pName = "reassembly: whole messages", .pTests = g_whole_tests },
		{ .pName = "reassembly: the clock", .pTests = g_clock_tests },
		{ .pName = "reassembly: discards", .pTests = g_discard_tests },
		{ .pName = "reassembly: limits", .pTests = g_limit_tests },
		{ .pName = "reassembly: tensors across pages", .pTests = g_tensor_tests },
		{ .pName = "reassembly: adversaries", .pTests = g_adversary_tests },
		CU_SUITE_INFO_NULL,
	};
	int status;

	(void)argc;
	if (env_init(argv[0]) != 0) {
		env_fini();
		return 1;
	}
	status = bw_cunit_run(suites);
	env_fini();
	return status;
}
