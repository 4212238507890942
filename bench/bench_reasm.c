/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_reasm: what a segmented message costs the polling lcore that receives it, against copying its
 * bytes. A program, not a test: it prints cycles and ratios measured in one run and never fails on a
 * number; it exits 1 only when the dataplane answers wrongly or loses an mbuf.
 *
 * The load is ResNet-50-sized PING messages (a 1x3x224x224 float32 input: 602,112 body bytes), cut
 * at the MTU as a client cuts them (slice = MTU - 68: IPv4 20, UDP 8, protocol header 40), as
 * Ethernet/IPv4/UDP frames with valid checksums and distinct request_ids, built once before anything
 * is timed. One ring PMD port made in this process (rte_eth_from_rings: nothing reads its RX ring,
 * this program drains its TX ring), one dp_lcore on it, a model layer whose lookup finds nothing
 * (PING needs none).
 *
 *  (1) reassembly + echo: every segment of K messages through dp_packet_handle, in bursts of
 *      DP_RX_BURST with lc->burst_tsc set per burst and the next frame prefetched, as dp_rx_poll
 *      does. A message's last segment makes it whole and dp_msg_complete turns every segment around
 *      in place into the reply's and buffers it for TX (32 to a burst onto the TX ring); the final
 *      dp_tx_flush is timed too. Checksums are verified on RX and computed on TX in software when
 *      the port offloads neither (the ring PMD offloads none). Copying the frames into mbufs before
 *      the timed loop, and draining the TX ring and freeing the replies after it, are not timed: the
 *      TX ring has room for every reply of a run, so it never needs draining inside.
 *  (2) the baseline: rte_memcpy of the same bytes, each slice from its frame into one 602,112-byte
 *      buffer at its offset, K times: what putting the body together by copying would cost.
 *
 * Five runs of each, alternating, and the median of each is reported. Figures are in TSC cycles
 * (rte_rdtsc), GB/s is 1e9 bytes of request body per second. The last lines are
 *   reasm_cycles_per_segment / memcpy_cycles_per_slice = X
 *   echo_gbps / memcpy_gbps = Y
 *   bench_reasm mtu=... segments_per_msg=... cycles_per_segment=... memcpy_cycles_per_slice=...
 *       echo_gbps=... memcpy_gbps=... ratio_cycles=... ratio_gbps=...
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_memcpy.h>
#include <rte_prefetch.h>
#include <rte_ring.h>

#include "dataplane.h"
#include "defs.h" /* DP_UDP_HDRS_LEN: the header lengths the dataplane itself uses */

#define BENCH_BODY_BYTES 602112u           /* ResNet-50's input, 1x3x224x224 float32 */
#define BENCH_MESSAGES_DEFAULT 200u
#define BENCH_MESSAGES_MAX 300u            /* every segment of a run is in an mbuf at once: -m 512 */
#define BENCH_RUNS 5
#define BENCH_EAL_MEM_MB "512"
#define BENCH_POOL_SPARE_MBUFS 1024u       /* beyond one run's segments: the mempool cache, slack */
#define BENCH_RX_RING_SIZE 64u             /* the port needs one; nothing is put on it */
#define BENCH_DRAIN_BURST 256u
#define BENCH_PAYLOAD_OFF (DP_UDP_HDRS_LEN + (uint32_t)sizeof(struct bw_hdr)) /* 82: body in a frame */
#define BENCH_HDRS_OVER_IP (DP_L3_LEN + (uint32_t)sizeof(struct rte_udp_hdr) + (uint32_t)sizeof(struct bw_hdr))
#define BENCH_FRAME_STRIDE_ALIGN 64u
#define BENCH_OUR_IP RTE_IPV4(10, 0, 0, 1) /* host byte order */
#define BENCH_PEER_IP RTE_IPV4(10, 0, 0, 2)
#define BENCH_PEER_PORT 40000
#define BENCH_REQUEST_ID_BASE 0x62656e6368000000ull

static const struct rte_ether_addr g_peer_mac = {.addr_bytes = {0x02, 0x62, 0x77, 0x00, 0x00, 0x02}};

/* ---- the load ---------------------------------------------------------------------------------- */

/* K messages of segs frames each, frame (m, k) at frames + (m * segs + k) * stride. */
struct load {
	uint16_t mtu;
	uint32_t messages;
	uint32_t segs;
	uint32_t slice;      /* every slice but the last */
	uint32_t last_len;
	uint32_t stride;
	uint8_t *frames;
	uint8_t *body;       /* what every message carries */
};

static uint8_t *frame_at(const struct load *ld, uint32_t m, uint32_t k)
{
	return ld->frames + ((size_t)m * ld->segs + k) * ld->stride;
}

static uint32_t slice_len(const struct load *ld, uint32_t k)
{
	return k + 1 < ld->segs ? ld->slice : ld->last_len;
}

static uint32_t frame_len(const struct load *ld, uint32_t k)
{
	return BENCH_PAYLOAD_OFF + slice_len(ld, k);
}

/* Segment k of message m, to our MAC and address, from the peer: every field a client sets. */
static void frame_build(const struct load *ld, uint32_t m, uint32_t k, const struct rte_ether_addr *our_mac,
			uint32_t our_ip)
{
	uint8_t *f = frame_at(ld, m, k);
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)f;
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(eth + 1);
	struct rte_udp_hdr *udp = (struct rte_udp_hdr *)(ip + 1);
	struct bw_hdr *h = (struct bw_hdr *)(udp + 1);
	uint32_t len = slice_len(ld, k);

	memset(f, 0, BENCH_PAYLOAD_OFF);
	eth->dst_addr = *our_mac;
	eth->src_addr = g_peer_mac;
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	ip->version_ihl = RTE_IPV4_VHL_DEF;
	ip->total_length = rte_cpu_to_be_16((uint16_t)(BENCH_HDRS_OVER_IP + len));
	ip->packet_id = rte_cpu_to_be_16((uint16_t)(m * ld->segs + k));
	ip->fragment_offset = rte_cpu_to_be_16(RTE_IPV4_HDR_DF_FLAG);
	ip->time_to_live = 64;
	ip->next_proto_id = IPPROTO_UDP;
	ip->src_addr = rte_cpu_to_be_32(BENCH_PEER_IP);
	ip->dst_addr = our_ip;
	udp->src_port = rte_cpu_to_be_16(BENCH_PEER_PORT);
	udp->dst_port = rte_cpu_to_be_16(BW_UDP_PORT_DEFAULT);
	udp->dgram_len = rte_cpu_to_be_16((uint16_t)(sizeof(*udp) + sizeof(*h) + len));
	h->magic = BW_PROTO_MAGIC;
	h->version = BW_PROTO_VERSION;
	h->opcode = BW_OP_PING;
	h->request_id = BENCH_REQUEST_ID_BASE + m;
	h->deadline_us = BW_DEADLINE_NONE;
	h->body_len = len;
	h->seg_index = (uint16_t)k;
	h->seg_count = (uint16_t)ld->segs;
	h->total_body_len = BENCH_BODY_BYTES;
	memcpy(h + 1, ld->body + (size_t)k * ld->slice, len);
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	udp->dgram_cksum = rte_ipv4_udptcp_cksum(ip, udp);
}

static int load_build(struct load *ld, uint16_t mtu, uint32_t messages, const struct rte_ether_addr *our_mac,
		      uint32_t our_ip)
{
	ld->mtu = mtu;
	ld->messages = messages;
	ld->slice = (uint32_t)mtu - BENCH_HDRS_OVER_IP;
	ld->segs = (BENCH_BODY_BYTES + ld->slice - 1) / ld->slice;
	ld->last_len = BENCH_BODY_BYTES - (ld->segs - 1) * ld->slice;
	ld->stride = RTE_ALIGN_CEIL(DP_L2_LEN + (uint32_t)mtu, BENCH_FRAME_STRIDE_ALIGN);
	ld->body = aligned_alloc(RTE_CACHE_LINE_SIZE, RTE_ALIGN_CEIL(BENCH_BODY_BYTES, RTE_CACHE_LINE_SIZE));
	ld->frames = aligned_alloc(RTE_CACHE_LINE_SIZE, (size_t)messages * ld->segs * ld->stride);
	if (ld->body == NULL || ld->frames == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < BENCH_BODY_BYTES; i++)
		ld->body[i] = (uint8_t)(i * 131u + (i >> 11) + 7u);
	for (uint32_t m = 0; m < messages; m++)
		for (uint32_t k = 0; k < ld->segs; k++)
			frame_build(ld, m, k, our_mac, our_ip);
	return 0;
}

/* Messages [first, first + count) into mbufs, as the NIC would have received them: n = count * segs. */
static int mbufs_fill(const struct load *ld, struct rte_mempool *pool, uint32_t first, uint32_t count,
		      struct rte_mbuf **mbufs)
{
	uint32_t n = count * ld->segs;

	if (rte_pktmbuf_alloc_bulk(pool, mbufs, n) != 0)
		return -ENOBUFS;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t k = i % ld->segs, len = frame_len(ld, k);

		rte_memcpy(rte_pktmbuf_mtod(mbufs[i], void *), frame_at(ld, first + i / ld->segs, k), len);
		mbufs[i]->data_len = (uint16_t)len;
		mbufs[i]->pkt_len = len;
	}
	return 0;
}

/* ---- the lcore under test ---------------------------------------------------------------------- */

/* PING asks nothing of the model layer. */
static const void *stub_lookup(void *ctx, uint32_t id, const char *name, uint32_t name_len)
{
	RTE_SET_USED(ctx);
	RTE_SET_USED(id);
	RTE_SET_USED(name);
	RTE_SET_USED(name_len);
	return NULL;
}

static const struct dp_model_ops g_models = {.lookup = stub_lookup};

struct bench {
	struct load ld;
	struct dp_config cfg;
	struct dp_lcore *lc;
	struct rte_mempool *pool;
	struct rte_ring *rx_ring;
	struct rte_ring *tx_ring;
	int port;
	struct rte_mbuf **mbufs;  /* one run's segments */
	uint8_t *copy_dst;        /* the baseline's message buffer */
};

static struct dp_lcore g_lc;

/*
 * Time n frames through dp_packet_handle the way dp_rx_poll handles a burst, then the last flush.
 * \return the cycles; *bad counts the frames that were not held (dropped, or answered alone).
 */
static uint64_t reasm_run(struct dp_lcore *lc, struct rte_mbuf **pkts, uint32_t n, uint32_t *bad)
{
	uint64_t t0 = rte_rdtsc(), t1;

	for (uint32_t b = 0; b < n; b += DP_RX_BURST) {
		uint32_t nb = RTE_MIN((uint32_t)DP_RX_BURST, n - b);

		lc->burst_tsc = rte_rdtsc();
		lc->stats.rx_packets += nb;
		for (uint32_t i = b; i < b + nb; i++) {
			if (i + 1 < b + nb)
				rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 1], void *));
			lc->stats.rx_bytes += rte_pktmbuf_pkt_len(pkts[i]);
			switch (dp_packet_handle(lc, pkts[i])) {
			case DP_VERDICT_HELD: /* a segment: kept, or the last one, answered with its message */
				break;
			case DP_VERDICT_REPLY: /* an error reply to a valid segment */
			case DP_VERDICT_DROP:
				(*bad)++;
				rte_pktmbuf_free(pkts[i]);
				break;
			}
		}
	}
	dp_tx_flush(lc);
	t1 = rte_rdtsc();
	return t1 - t0;
}

/* Takes everything off the TX ring and frees it. \return how many. */
static uint32_t tx_drain(struct rte_ring *tx)
{
	struct rte_mbuf *burst[BENCH_DRAIN_BURST];
	uint32_t total = 0, got;

	while ((got = rte_ring_dequeue_burst(tx, (void **)burst, BENCH_DRAIN_BURST, NULL)) != 0) {
		rte_pktmbuf_free_bulk(burst, got);
		total += got;
	}
	return total;
}

/* One reply datagram as a client would check it. \return NULL when right, else why not. */
static const char *reply_segment_check(const struct bench *bn, const struct rte_mbuf *r, uint64_t request_id,
				       uint8_t *out, uint8_t *seen)
{
	const struct load *ld = &bn->ld;
	const struct rte_ether_hdr *eth = rte_pktmbuf_mtod(r, const struct rte_ether_hdr *);
	const struct rte_ipv4_hdr *ip = (const struct rte_ipv4_hdr *)(eth + 1);
	const struct rte_udp_hdr *udp = (const struct rte_udp_hdr *)(ip + 1);
	const struct bw_hdr *h = (const struct bw_hdr *)(udp + 1);
	uint32_t len = rte_pktmbuf_pkt_len(r), k, slice;

	if (r->nb_segs != 1 || r->data_len != len || len < BENCH_PAYLOAD_OFF || len > DP_L2_LEN + ld->mtu)
		return "a reply frame of the wrong shape or size";
	if (!rte_is_same_ether_addr(&eth->dst_addr, &g_peer_mac) || !rte_is_same_ether_addr(&eth->src_addr, &bn->lc->mac))
		return "Ethernet addresses not turned around";
	if (ip->version_ihl != RTE_IPV4_VHL_DEF || rte_be_to_cpu_16(ip->total_length) != len - DP_L2_LEN ||
	    ip->src_addr != bn->cfg.ipv4_addr || ip->dst_addr != rte_cpu_to_be_32(BENCH_PEER_IP) ||
	    ip->next_proto_id != IPPROTO_UDP)
		return "an IPv4 header that is not the reply's";
	if (udp->src_port != rte_cpu_to_be_16(BW_UDP_PORT_DEFAULT) || udp->dst_port != rte_cpu_to_be_16(BENCH_PEER_PORT) ||
	    rte_be_to_cpu_16(udp->dgram_len) != len - DP_L2_LEN - DP_L3_LEN)
		return "a UDP header that is not the reply's";
	if (bn->lc->tx_csum_offload) {
		if (!(r->ol_flags & RTE_MBUF_F_TX_UDP_CKSUM) || !(r->ol_flags & RTE_MBUF_F_TX_IP_CKSUM))
			return "checksum offload not asked for";
	} else if (rte_raw_cksum(ip, DP_L3_LEN) != 0xffff || udp->dgram_cksum == 0 ||
		   rte_ipv4_udptcp_cksum_verify(ip, udp) != 0) {
		return "a wrong IPv4 or UDP checksum";
	}
	if (h->magic != BW_PROTO_MAGIC || h->version != BW_PROTO_VERSION || h->opcode != (BW_OP_PING | BW_OP_REPLY) ||
	    h->status != BW_STATUS_OK || h->request_id != request_id || h->flags != 0 || h->num_tensors != 0)
		return "a protocol header that is not PING's OK reply";
	if (h->seg_count != ld->segs || h->seg_index >= ld->segs || h->total_body_len != BENCH_BODY_BYTES)
		return "segment numbers or total_body_len that are not the request's";
	k = h->seg_index;
	slice = slice_len(ld, k);
	if (h->body_len != slice || len != BENCH_PAYLOAD_OFF + slice)
		return "a slice of the wrong length";
	if (seen[k]++)
		return "a segment sent twice";
	memcpy(out + (size_t)k * ld->slice, h + 1, slice);
	return NULL;
}

/*
 * Message 0 through the lcore, its reply taken off the TX ring and put back together the way a client
 * would: every datagram checked, the body compared with what was sent. Untimed; it also warms up.
 * \return NULL when right, else why not.
 */
static const char *reply_check(struct bench *bn)
{
	const struct load *ld = &bn->ld;
	uint8_t *out = calloc(1, BENCH_BODY_BYTES), *seen = calloc(ld->segs, 1);
	const char *why = NULL;
	uint32_t bad = 0, got = 0;

	if (out == NULL || seen == NULL) {
		why = "out of memory";
		goto out;
	}
	if (mbufs_fill(ld, bn->pool, 0, 1, bn->mbufs) != 0) {
		why = "no mbufs";
		goto out;
	}
	reasm_run(bn->lc, bn->mbufs, ld->segs, &bad);
	if (bad != 0) {
		why = "a segment was dropped or answered alone";
		tx_drain(bn->tx_ring);
		goto out;
	}
	for (;;) {
		struct rte_mbuf *r = NULL;

		if (rte_ring_dequeue(bn->tx_ring, (void **)&r) != 0)
			break;
		got++;
		if (why == NULL)
			why = reply_segment_check(bn, r, BENCH_REQUEST_ID_BASE, out, seen);
		rte_pktmbuf_free(r);
	}
	if (why == NULL && got != ld->segs)
		why = "a reply of the wrong number of segments";
	if (why == NULL && memcmp(out, ld->body, BENCH_BODY_BYTES) != 0)
		why = "a reply body that differs from the request's";
out:
	free(out);
	free(seen);
	return why;
}

/* ---- the baseline ------------------------------------------------------------------------------ */

static uint64_t memcpy_run(const struct load *ld, uint8_t *dst)
{
	uint64_t t0 = rte_rdtsc(), t1;

	for (uint32_t m = 0; m < ld->messages; m++)
		for (uint32_t k = 0; k < ld->segs; k++)
			rte_memcpy(dst + (size_t)k * ld->slice, frame_at(ld, m, k) + BENCH_PAYLOAD_OFF, slice_len(ld, k));
	t1 = rte_rdtsc();
	return t1 - t0;
}

/* ---- set-up, runs, report ---------------------------------------------------------------------- */

static int bench_init(struct bench *bn, uint16_t mtu, uint32_t messages)
{
	char err[256];
	int socket = (int)rte_socket_id(), ret;
	uint32_t slice = (uint32_t)mtu - BENCH_HDRS_OVER_IP;
	uint32_t segs = (BENCH_BODY_BYTES + slice - 1) / slice;
	uint32_t n = messages * segs;

	dp_config_defaults(&bn->cfg);
	bn->cfg.ipv4_addr = rte_cpu_to_be_32(BENCH_OUR_IP);
	bn->cfg.mtu = mtu;
	if (dp_config_finalize(&bn->cfg, err, sizeof(err)) != 0) {
		fprintf(stderr, "bench_reasm: %s\n", err);
		return -EINVAL;
	}
	bn->pool = rte_pktmbuf_pool_create("bwbench_reasm", n + BENCH_POOL_SPARE_MBUFS, DP_MBUF_CACHE_SIZE, 0,
					   dp_mbuf_data_room(mtu), socket);
	bn->rx_ring = rte_ring_create("bwbench_rx", BENCH_RX_RING_SIZE, socket, RING_F_SP_ENQ | RING_F_SC_DEQ);
	/* room for every reply of a run: nothing drains it inside the timed loop */
	bn->tx_ring = rte_ring_create("bwbench_tx", rte_align32pow2(n + 1), socket, RING_F_SP_ENQ | RING_F_SC_DEQ);
	bn->mbufs = calloc(n, sizeof(bn->mbufs[0]));
	bn->copy_dst = aligned_alloc(RTE_CACHE_LINE_SIZE, RTE_ALIGN_CEIL(BENCH_BODY_BYTES, RTE_CACHE_LINE_SIZE));
	if (bn->pool == NULL || bn->rx_ring == NULL || bn->tx_ring == NULL) {
		fprintf(stderr, "bench_reasm: %u mbufs and rings: %s\n", n + BENCH_POOL_SPARE_MBUFS, rte_strerror(rte_errno));
		return -ENOMEM;
	}
	if (bn->mbufs == NULL || bn->copy_dst == NULL)
		return -ENOMEM;
	bn->port = rte_eth_from_rings("bwbench_reasm", &bn->rx_ring, 1, &bn->tx_ring, 1, (unsigned int)socket);
	if (bn->port < 0) {
		fprintf(stderr, "bench_reasm: rte_eth_from_rings: %s\n", rte_strerror(rte_errno));
		return -ENODEV;
	}
	ret = dp_port_init((uint16_t)bn->port, 1, &bn->cfg, &bn->pool, &socket);
	if (ret != 0)
		return ret;
	bn->lc = &g_lc;
	ret = dp_lcore_init(bn->lc, rte_lcore_id(), (uint16_t)bn->port, 0, socket, &bn->cfg, &g_models);
	if (ret != 0)
		return ret;
	return load_build(&bn->ld, mtu, messages, &bn->lc->mac, bn->cfg.ipv4_addr);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Median of BENCH_RUNS (odd); min and max. */
static uint64_t median(uint64_t *v, uint64_t *lo, uint64_t *hi)
{
	qsort(v, BENCH_RUNS, sizeof(*v), cmp_u64);
	*lo = v[0];
	*hi = v[BENCH_RUNS - 1];
	return v[BENCH_RUNS / 2];
}

static char g_runtime_dir[PATH_MAX];

/* EAL 22.11 leaves its runtime directory (config, fbarrays) behind; ours is private to this pid. */
static void runtime_dir_remove(void)
{
	plat_runtime_dir_remove(g_runtime_dir);
}

static void usage(const char *prog)
{
	printf("Usage: %s [--mtu N] [--messages K] [--help]\n"
	       "Times ResNet-50-sized PING messages (%u body bytes, cut at MTU - 68 bytes a slice) through\n"
	       "batchwire's reassembly and in-place echo on one dp_lcore over an in-process ring port, against\n"
	       "rte_memcpy of the same bytes into one buffer. Median of %u runs of each, in TSC cycles.\n"
	       "Starts EAL itself: --no-huge -m %s --no-pci --no-telemetry --file-prefix bwbench-reasm-<pid> -l 0\n"
	       "  --mtu N        the port's MTU, %u..%u (default %u; 1500: 421 segments, 9000: 68)\n"
	       "  --messages K   messages per run, 1..%u (default %u)\n"
	       "  --help         this text\n"
	       "The last lines:\n"
	       "  reasm_cycles_per_segment / memcpy_cycles_per_slice = X\n"
	       "  echo_gbps / memcpy_gbps = Y\n"
	       "  bench_reasm mtu=.. segments_per_msg=.. cycles_per_segment=.. memcpy_cycles_per_slice=.. echo_gbps=..\n"
	       "      memcpy_gbps=.. ratio_cycles=.. ratio_gbps=..\n"
	       "Exit status 0 when it ran; 1 when a reply is wrong or an mbuf is not back in the pool; 2 usage.\n",
	       prog, BENCH_BODY_BYTES, BENCH_RUNS, BENCH_EAL_MEM_MB, DP_MTU_MIN, DP_MTU_MAX, DP_MTU_DEFAULT,
	       BENCH_MESSAGES_MAX, BENCH_MESSAGES_DEFAULT);
}

static bool parse_u32(const char *s, uint32_t min, uint32_t max, uint32_t *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < min || v > max)
		return false;
	*out = (uint32_t)v;
	return true;
}

int main(int argc, char **argv)
{
	static const struct option long_opts[] = {
		{"mtu", required_argument, NULL, 'm'},
		{"messages", required_argument, NULL, 'k'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	char prefix[64];
	char *eal_argv[] = {argv[0], "--no-huge", "-m", BENCH_EAL_MEM_MB, "--no-pci", "--no-telemetry",
			    "--file-prefix", prefix, "-l", "0", NULL};
	uint32_t mtu = DP_MTU_DEFAULT, messages = BENCH_MESSAGES_DEFAULT;
	uint64_t reasm[BENCH_RUNS], copy[BENCH_RUNS];
	static struct bench bn;
	const char *why;
	int opt, ret;

	/* Our own options first, so --help needs no EAL. */
	while ((opt = getopt_long(argc, argv, "", long_opts, NULL)) != -1) {
		switch (opt) {
		case 'm':
			if (!parse_u32(optarg, DP_MTU_MIN, DP_MTU_MAX, &mtu)) {
				fprintf(stderr, "bench_reasm: --mtu must be %u..%u, got '%s'\n", DP_MTU_MIN, DP_MTU_MAX, optarg);
				return 2;
			}
			break;
		case 'k':
			if (!parse_u32(optarg, 1, BENCH_MESSAGES_MAX, &messages)) {
				fprintf(stderr, "bench_reasm: --messages must be 1..%u, got '%s'\n", BENCH_MESSAGES_MAX, optarg);
				return 2;
			}
			break;
		case 'h':
			usage(argv[0]);
			return 0;
		default:
			usage(argv[0]);
			return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "bench_reasm: unexpected argument '%s'\n", argv[optind]);
		usage(argv[0]);
		return 2;
	}

	snprintf(prefix, sizeof(prefix), "bwbench-reasm-%d", (int)getpid());
	ret = rte_eal_init((int)RTE_DIM(eal_argv) - 1, eal_argv);
	if (ret < 0)
		rte_exit(EXIT_FAILURE, "bench_reasm: EAL init failed: %s\n", rte_strerror(rte_errno));
	/* Runs at exit, after rte_eal_cleanup: from main's return and from rte_exit alike. */
	snprintf(g_runtime_dir, sizeof(g_runtime_dir), "%s", rte_eal_get_runtime_dir());
	atexit(runtime_dir_remove);
	if (plat_clock_init() != 0)
		rte_exit(EXIT_FAILURE, "bench_reasm: EAL reports no TSC frequency\n");
	ret = bench_init(&bn, (uint16_t)mtu, messages);
	if (ret != 0)
		rte_exit(EXIT_FAILURE, "bench_reasm: set-up failed: %s\n", strerror(-ret));

	const struct load *ld = &bn.ld;
	uint32_t n = messages * ld->segs;

	printf("bench_reasm: TSC %.3f GHz, MTU %u, checksums %s on RX and %s on TX\n", (double)plat_tsc_hz / 1e9, mtu,
	       bn.lc->rx_csum_offload ? "offloaded" : "verified in software",
	       bn.lc->tx_csum_offload ? "offloaded" : "computed in software");
	printf("  PING of %u body bytes in %u segments (slice %u, last %u, frames of %u bytes), %u messages per run, "
	       "median of %u runs\n", BENCH_BODY_BYTES, ld->segs, ld->slice, ld->last_len, DP_L2_LEN + mtu, messages,
	       BENCH_RUNS);

	why = reply_check(&bn);
	if (why != NULL) {
		fprintf(stderr, "bench_reasm: the reply to a %u-segment PING is wrong: %s\n", ld->segs, why);
		return 1;
	}
	printf("  reply checked: %u segments, every header and checksum, body identical to the request's\n", ld->segs);
	fflush(stdout);

	uint64_t ok_before = bn.lc->stats.replies[BW_STATUS_OK];
	uint64_t drops_before = dp_stats_drops_total(&bn.lc->stats);

	for (unsigned int r = 0; r < BENCH_RUNS; r++) {
		uint32_t bad = 0, sent;

		if (mbufs_fill(ld, bn.pool, 0, messages, bn.mbufs) != 0)
			rte_exit(EXIT_FAILURE, "bench_reasm: no mbufs for run %u\n", r);
		reasm[r] = reasm_run(bn.lc, bn.mbufs, n, &bad);
		sent = tx_drain(bn.tx_ring);
		if (bad != 0 || sent != n) {
			fprintf(stderr, "bench_reasm: run %u: %u segments not held, %u of %u reply segments sent\n", r, bad,
				sent, n);
			return 1;
		}
		copy[r] = memcpy_run(ld, bn.copy_dst);
		if (memcmp(bn.copy_dst, ld->body, BENCH_BODY_BYTES) != 0) {
			fprintf(stderr, "bench_reasm: run %u: the copied body differs\n", r);
			return 1;
		}
	}
	if (bn.lc->stats.replies[BW_STATUS_OK] - ok_before != (uint64_t)BENCH_RUNS * messages ||
	    dp_stats_drops_total(&bn.lc->stats) != drops_before) {
		fprintf(stderr, "bench_reasm: %" PRIu64 " OK replies for %u messages, %" PRIu64 " drops\n",
			bn.lc->stats.replies[BW_STATUS_OK] - ok_before, BENCH_RUNS * messages,
			dp_stats_drops_total(&bn.lc->stats) - drops_before);
		return 1;
	}

	uint64_t reasm_lo, reasm_hi, copy_lo, copy_hi;
	uint64_t reasm_med = median(reasm, &reasm_lo, &reasm_hi), copy_med = median(copy, &copy_lo, &copy_hi);
	double bytes = (double)BENCH_BODY_BYTES * messages, hz = (double)plat_tsc_hz;
	double cyc_seg = (double)reasm_med / n, cyc_slice = (double)copy_med / n;
	double echo_gbps = bytes / ((double)reasm_med / hz) / 1e9, copy_gbps = bytes / ((double)copy_med / hz) / 1e9;

	printf("\nreassembly + echo (dp_packet_handle, reply enqueued):  %9.1f cycles per segment  (runs %.1f..%.1f)  "
	       "%6.2f GB/s of request body\n", cyc_seg, (double)reasm_lo / n, (double)reasm_hi / n, echo_gbps);
	printf("baseline rte_memcpy, slice by slice into one buffer:    %9.1f cycles per %u-byte copy (runs %.1f..%.1f)  "
	       "%6.2f GB/s\n", cyc_slice, ld->slice, (double)copy_lo / n, (double)copy_hi / n, copy_gbps);
	printf("reasm_cycles_per_segment / memcpy_cycles_per_slice = %.2f\n", cyc_seg / cyc_slice);
	printf("echo_gbps / memcpy_gbps = %.3f\n", echo_gbps / copy_gbps);
	printf("bench_reasm mtu=%u segments_per_msg=%u cycles_per_segment=%.1f memcpy_cycles_per_slice=%.1f "
	       "echo_gbps=%.2f memcpy_gbps=%.2f ratio_cycles=%.2f ratio_gbps=%.3f\n", mtu, ld->segs, cyc_seg, cyc_slice,
	       echo_gbps, copy_gbps, cyc_seg / cyc_slice, echo_gbps / copy_gbps);
	fflush(stdout);

	/* Every mbuf back: none held by reassembly, none left on a ring (before dp_lcore_fini, which
	 * would free what reassembly still held and hide it). */
	int status = 0;
	unsigned int avail = rte_mempool_avail_count(bn.pool);

	if (avail != bn.pool->size || bn.lc->stats.held_mbufs != 0 || bn.lc->stats.reasm_segments != 0) {
		fprintf(stderr, "bench_reasm: %u of %u mbufs back in the pool (reassembly holds %" PRIu64
			" segments, %" PRIu64 " held mbufs)\n", avail, bn.pool->size, bn.lc->stats.reasm_segments,
			bn.lc->stats.held_mbufs);
		status = 1;
	}
	dp_lcore_fini(bn.lc);
	dp_port_fini((uint16_t)bn.port);
	rte_ring_free(bn.rx_ring);
	rte_ring_free(bn.tx_ring);
	rte_mempool_free(bn.pool);
	free(bn.mbufs);
	free(bn.copy_dst);
	free(bn.ld.frames);
	free(bn.ld.body);
	rte_eal_cleanup();
	return status;
}
