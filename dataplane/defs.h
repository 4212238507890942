/* SPDX-License-Identifier: BSD-3-Clause */
/* dataplane internals shared between its files; nothing outside dataplane/ includes this. */
#ifndef BW_DP_DEFS_H
#define BW_DP_DEFS_H

#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_udp.h>

#include "dataplane.h"

#define DP_L2_LEN ((uint32_t)sizeof(struct rte_ether_hdr))
#define DP_L3_LEN ((uint32_t)sizeof(struct rte_ipv4_hdr)) /* replies never carry IP options */
#define DP_UDP_HDRS_LEN (DP_L2_LEN + DP_L3_LEN + (uint32_t)sizeof(struct rte_udp_hdr))
#define DP_IP_TTL 64

extern bool dp_draining; /* atomic: dp_draining_set's */

/* The flags of a reply with this (reply) opcode: DRAINING on PING's while the server drains. */
static inline uint8_t dp_reply_flags(uint8_t opcode)
{
	return opcode == (BW_OP_PING | BW_OP_REPLY) && __atomic_load_n(&dp_draining, __ATOMIC_RELAXED)
		       ? BW_FLAG_DRAINING : 0;
}

static inline enum dp_verdict dp_drop(struct dp_lcore *lc, enum dp_drop_reason reason)
{
	lc->stats.drops[reason]++;
	return DP_VERDICT_DROP;
}

/*
 * Turns a received IPv4 frame around in place into a reply of l4_len bytes of L4 (already written
 * after the IPv4 header): swaps addresses, strips IP options, sets lengths and the IPv4 (and, for UDP,
 * the UDP) checksum or asks the NIC to. The caller has checked that l4_len fits the mbuf.
 */
void dp_ipv4_reply_finish(struct dp_lcore *lc, struct rte_mbuf *m, uint32_t l4_len);

/* Largest UDP payload a reply may have: the configured MTU less IPv4 and UDP headers. */
static inline uint32_t dp_udp_payload_max(const struct dp_lcore *lc)
{
	return (uint32_t)lc->cfg->mtu - DP_L3_LEN - (uint32_t)sizeof(struct rte_udp_hdr);
}

/*
 * Handles a UDP datagram to our port: protocol v1. payload points just past the UDP header (inside
 * m), after any IP options the request had. \return the frame's fate.
 */
enum dp_verdict dp_request_handle(struct dp_lcore *lc, struct rte_mbuf *m, uint8_t *payload,
				  uint32_t payload_len);

/* Buffers a reply for TX, counted as sent (tx_unsent takes refused ones back). */
void dp_tx_enqueue(struct dp_lcore *lc, struct rte_mbuf *m);

/* The checksum offloads of a port: rte_eth_conf offload bits, 0 on a side that does not get them. */
struct dp_csum_offloads {
	uint64_t tx;
	uint64_t rx;
};

/*
 * What dp_port_init enables and dp_lcore_init mirrors, from the device's capabilities: on each side
 * both the IPv4 and the UDP checksum, or neither, so that one code path computes (TX) or verifies
 * (RX) them in software.
 */
struct dp_csum_offloads dp_port_csum_offloads(const struct rte_eth_dev_info *info);

/*
 * dp_request_complete without the send: the reply built in m and counted. The dataplane's unit tests
 * answer held requests with it on an lcore that has no TX queue.
 */
void dp_request_reply(struct dp_lcore *lc, struct rte_mbuf *m, struct bw_hdr *hdr, enum bw_status status,
		      uint32_t reply_len, uint16_t reply_tensors, const char *msg);

/* An error reply of one datagram in m (the message cut to DP_ERROR_MSG_MAX bytes), counted. */
enum dp_verdict dp_error_reply(struct dp_lcore *lc, struct rte_mbuf *m, struct bw_hdr *hdr, enum bw_status status,
			       const char *msg);

/* dp_error_reply to a request refused as it arrives, within error_rate: over it, nothing is sent
 * (the drop counted as rate_error_reply). Answers to requests that were taken are not limited. */
enum dp_verdict dp_refuse(struct dp_lcore *lc, struct rte_mbuf *m, struct bw_hdr *hdr, enum bw_status status,
			  const char *msg);

/* ---- reasm.c: segmented messages ---------------------------------------------------------------- */

/* A body's descriptors with their names at most: what is copied when they cross a page. */
#define DP_DESC_PREFIX_MAX (BW_MAX_TENSORS * ((uint32_t)sizeof(struct bw_tensor_desc) + 256u))

/* The mbufs an lcore's reassembly may hold: the configured number, or one maximal request's
 * segments and DP_REASM_MBUFS_SPARE more. */
#define DP_REASM_MBUFS_SPARE 1024
uint32_t dp_reasm_mbufs(const struct dp_config *cfg);

/** The lcore's tables (lc->cfg set). \return 0 or a negative errno. */
int dp_reasm_create(struct dp_lcore *lc, int socket_id);
/** Frees the tables and every mbuf they hold. */
void dp_reasm_destroy(struct dp_lcore *lc);

/* What the first segment of a message is held to: refused with why (once) unless refuse is OK;
 * otherwise a total_body_len above cap is RESOURCE_EXHAUSTED, naming cap_name. */
struct dp_reasm_limit {
	uint32_t cap;
	const char *cap_name;     /* "this server's max_message_bytes"... */
	enum bw_status refuse;
	const char *why;
};

/*
 * Takes one segment (seg_count > 1, header checked; lc->rx_src_* set) of a message held to limit
 * when it is its first. \return DROP (counted: the caller frees m), REPLY (m holds an error reply) or
 * HELD (kept; when it made the message whole, *whole is set and the message is the caller's to serve).
 */
enum dp_verdict dp_reasm_segment(struct dp_lcore *lc, struct rte_mbuf *m, struct bw_hdr *hdr,
				 const struct dp_reasm_limit *limit, struct dp_msg **whole);

/** The longest chain of the message hash now (tests: ids chosen to collide stay spread). */
uint32_t dp_reasm_chain_max(const struct dp_lcore *lc);

/** Whether the segment in hand belongs to a message the table knows (filling or dead). */
bool dp_reasm_known(struct dp_lcore *lc, const struct bw_hdr *hdr);

/** Fills req for a whole message: the first segment's mbuf and header, the pages, the total length. */
void dp_msg_request(struct dp_lcore *lc, struct dp_msg *msg, struct dp_request *req);

/** The first bytes of a message's body (its descriptors), copied contiguous. \return them; *len set. */
const uint8_t *dp_msg_prefix(struct dp_lcore *lc, const struct dp_msg *msg, uint32_t *len);

/** Answers a held message (dp_request_complete's work for one of several mbufs) and frees it. */
void dp_msg_complete(struct dp_lcore *lc, struct dp_msg *msg, struct rte_mbuf *m, struct bw_hdr *hdr,
		     enum bw_status status, uint32_t reply_len, uint16_t reply_tensors, const char *why);

/**
 * Whether an OK reply of reply_len body bytes to the request in m would be larger than the request
 * carried, for a request that was not signed; if so counts it and says why (the caller answers
 * RESOURCE_EXHAUSTED instead).
 */
bool dp_reply_amplifies(struct dp_lcore *lc, const struct rte_mbuf *m, const struct bw_hdr *hdr, uint32_t reply_len,
			char *why, size_t cap);

/* ---- authentication (auth.c) ---- */

/**
 * Checks the trailer of the datagram in hand (AUTH set, lengths checked; lc->rx_src_* set): a key of
 * its id still accepted, the tag, and request_id within the window. On OK sets lc->rx_authenticated
 * and lc->rx_key_id. Keeps no state: a message checks its request_id once, whole.
 */
enum dp_auth_outcome dp_auth_verify(struct dp_lcore *lc, const struct bw_hdr *hdr);

/** Whether the verified datagram's source has not used request_id yet; records it. */
enum dp_auth_outcome dp_auth_replay_check(struct dp_lcore *lc, uint64_t request_id);

/** The polling lcore holds no key table now (once per poll; lc->auth set). */
void dp_auth_quiescent(struct dp_lcore *lc);

/** Frees the lcore's flow table and leaves the key table's grace periods (dp_lcore_fini). */
void dp_auth_lcore_fini(struct dp_lcore *lc);

#endif /* BW_DP_DEFS_H */
