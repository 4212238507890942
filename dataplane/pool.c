/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One mbuf pool per NUMA socket. Its data room follows the MTU so that every frame the port accepts
 * lands in one mbuf (the parser never walks chains), and its size counts every place an mbuf can wait:
 * RX and TX rings, the burst in hand, the TX buffer, the per-lcore caches, the requests held in
 * queued batches, and each lcore's segmented messages (their segments, and their replies' mbufs).
 */
#include <stdio.h>

#include <rte_ether.h>

#include "defs.h"

#define DP_VLAN_TAG_LEN 4

/* Frame room is rounded up to 1 KiB: kernel-backed PMDs (af_packet) need room for their whole frame
 * slot, which they size in such steps (framesz=9216 for a 9000-byte MTU). */
#define DP_FRAME_ROOM_ALIGN 1024

uint16_t dp_mbuf_data_room(uint16_t mtu)
{
	uint32_t frame = RTE_ETHER_HDR_LEN + DP_VLAN_TAG_LEN + (uint32_t)mtu + RTE_ETHER_CRC_LEN;

	return (uint16_t)(RTE_PKTMBUF_HEADROOM + RTE_ALIGN_CEIL(frame, DP_FRAME_ROOM_ALIGN));
}

struct rte_mempool *dp_pool_create(const struct dp_config *cfg, int socket_id, unsigned int nb_queues)
{
	char name[RTE_MEMPOOL_NAMESIZE];
	/* A mempool cache holds up to 1.5 times its size before it flushes to the ring. */
	unsigned int per_queue = cfg->rx_desc + cfg->tx_desc + 2 * DP_RX_BURST + DP_MBUF_CACHE_SIZE * 3 / 2;
	unsigned int count = nb_queues * (per_queue + dp_reasm_mbufs(cfg)) + cfg->mbufs_held;

	/* A ring-backed mempool is most compact at 2^n - 1 elements. */
	count = rte_align32pow2(count + 1) - 1;
	snprintf(name, sizeof(name), "bw_mbufs_s%d", socket_id);
	return rte_pktmbuf_pool_create(name, count, DP_MBUF_CACHE_SIZE, 0, dp_mbuf_data_room(cfg->mtu), socket_id);
}

void dp_config_defaults(struct dp_config *cfg)
{
	*cfg = (struct dp_config){
		.ipv4_addr = 0,
		.udp_port = BW_UDP_PORT_DEFAULT,
		.mtu = DP_MTU_DEFAULT,
		.tx_drain_us = DP_TX_DRAIN_US_DEFAULT,
		.rx_desc = DP_RX_DESC_DEFAULT,
		.tx_desc = DP_TX_DESC_DEFAULT,
		.mbufs_held = DP_MBUFS_HELD_DEFAULT,
		.held_max = DP_MBUFS_HELD_DEFAULT, /* one polling lcore's share: the app divides */
		.msg_max = DP_MSG_MAX_DEFAULT,
		.reasm_msgs = DP_REASM_MSGS_DEFAULT,
		.reasm_mbufs = 0,
		.reasm_timeout_ms = DP_REASM_TIMEOUT_MS_DEFAULT,
		.ping_max = DP_PING_MAX_DEFAULT,
		.error_rate = DP_ERROR_RATE_DEFAULT,
		.icmp_rate = DP_ICMP_RATE_DEFAULT,
		.arp_rate = DP_ARP_RATE_DEFAULT,
		.auth = {
			.key_file = "",
			.window_ms = DP_AUTH_WINDOW_MS_DEFAULT,
			.overlap_s = DP_AUTH_OVERLAP_S_DEFAULT,
			.flows = DP_AUTH_FLOWS_DEFAULT,
		},
	};
}

uint32_t dp_msg_segments(const struct dp_config *cfg, uint64_t body_len)
{
	uint64_t slice = (uint64_t)cfg->mtu - DP_L3_LEN - sizeof(struct rte_udp_hdr) - sizeof(struct bw_hdr);

	return body_len <= slice ? 1 : (uint32_t)((body_len + slice - 1) / slice);
}

uint32_t dp_reasm_mbufs(const struct dp_config *cfg)
{
	return cfg->reasm_mbufs != 0 ? cfg->reasm_mbufs : dp_msg_segments(cfg, cfg->msg_max) + DP_REASM_MBUFS_SPARE;
}

int dp_config_finalize(struct dp_config *cfg, char *err, size_t cap)
{
	uint32_t need = dp_msg_segments(cfg, cfg->msg_max);

	if (cfg->reasm_msgs == 0 || cfg->reasm_msgs > DP_REASM_MSGS_MAX) {
		snprintf(err, cap, "reassembly_messages must be 1..%u, got %u", DP_REASM_MSGS_MAX, cfg->reasm_msgs);
		return -EINVAL;
	}
	if (cfg->reasm_timeout_ms == 0 || cfg->reasm_timeout_ms > DP_REASM_TIMEOUT_MS_MAX) {
		snprintf(err, cap, "reassembly_timeout_ms must be 1..%u, got %u", DP_REASM_TIMEOUT_MS_MAX,
			 cfg->reasm_timeout_ms);
		return -EINVAL;
	}
	if (need > BW_SEG_COUNT_MAX) {
		snprintf(err, cap, "max_message_bytes %u takes %u datagrams at MTU %u; a message has at most %u",
			 cfg->msg_max, need, cfg->mtu, BW_SEG_COUNT_MAX);
		return -EINVAL;
	}
	cfg->reasm_mbufs = dp_reasm_mbufs(cfg);
	if (cfg->reasm_mbufs < need) {
		snprintf(err, cap, "reassembly_mbufs %u cannot hold one request of max_message_bytes %u: it takes %u "
			 "datagrams at MTU %u (raise reassembly_mbufs or lower max_message_bytes)", cfg->reasm_mbufs,
			 cfg->msg_max, need, cfg->mtu);
		return -EINVAL;
	}
	return 0;
}
