/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Eth/IPv4/UDP validation, ARP responder and ICMP echo. Every frame is checked field by field before
 * anything trusts it; a bad one is dropped and counted by reason, never trusted and never fatal.
 * Replies are built in the received mbuf (no allocation on the hot path).
 */
#include <string.h>

#include <rte_arp.h>
#include <rte_icmp.h>

#include "defs.h"

static const char *const g_drop_reason_names[DP_DROP_COUNT] = {
	[DP_DROP_ETH_TRUNCATED] = "eth_truncated",
	[DP_DROP_ETH_WRONG_DST] = "eth_wrong_dst",
	[DP_DROP_ETH_UNKNOWN_TYPE] = "eth_unknown_type",
	[DP_DROP_ETH_BAD_SRC] = "eth_bad_src",
	[DP_DROP_MULTI_SEGMENT] = "multi_segment",
	[DP_DROP_ARP_INVALID] = "arp_invalid",
	[DP_DROP_ARP_NOT_FOR_US] = "arp_not_for_us",
	[DP_DROP_IP_TRUNCATED] = "ip_truncated",
	[DP_DROP_IP_BAD_VERSION] = "ip_bad_version",
	[DP_DROP_IP_BAD_HDR_LEN] = "ip_bad_hdr_len",
	[DP_DROP_IP_BAD_TOTAL_LEN] = "ip_bad_total_len",
	[DP_DROP_IP_OVER_MTU] = "ip_over_mtu",
	[DP_DROP_IP_BAD_CSUM] = "ip_bad_csum",
	[DP_DROP_IP_FRAGMENT] = "ip_fragment",
	[DP_DROP_IP_WRONG_DST] = "ip_wrong_dst",
	[DP_DROP_IP_MARTIAN_SRC] = "ip_martian_src",
	[DP_DROP_SRC_NOT_ALLOWED] = "src_not_allowed",
	[DP_DROP_MODEL_NOT_ALLOWED] = "model_not_allowed",
	[DP_DROP_IP_UNKNOWN_PROTO] = "ip_unknown_proto",
	[DP_DROP_ICMP_INVALID] = "icmp_invalid",
	[DP_DROP_ICMP_UNSUPPORTED] = "icmp_unsupported",
	[DP_DROP_UDP_TRUNCATED] = "udp_truncated",
	[DP_DROP_UDP_BAD_LEN] = "udp_bad_len",
	[DP_DROP_UDP_BAD_CSUM] = "udp_bad_csum",
	[DP_DROP_UDP_WRONG_PORT] = "udp_wrong_port",
	[DP_DROP_PROTO_TRUNCATED] = "proto_truncated",
	[DP_DROP_PROTO_BAD_MAGIC] = "proto_bad_magic",
	[DP_DROP_PROTO_REPLY] = "proto_reply",
	[DP_DROP_TX_FULL] = "tx_full",
	[DP_DROP_SEGMENT] = "segment",
	[DP_DROP_RATE_ERROR] = "rate_error_reply",
	[DP_DROP_RATE_ICMP] = "rate_icmp",
	[DP_DROP_RATE_ARP] = "rate_arp",
};

const char *dp_drop_reason_name(enum dp_drop_reason reason)
{
	return (unsigned int)reason < DP_DROP_COUNT ? g_drop_reason_names[reason] : "unknown";
}

static void eth_turnaround(struct dp_lcore *lc, struct rte_ether_hdr *eth)
{
	rte_ether_addr_copy(&eth->src_addr, &eth->dst_addr);
	rte_ether_addr_copy(&lc->mac, &eth->src_addr);
}

static enum dp_verdict arp_handle(struct dp_lcore *lc, struct rte_mbuf *m, struct rte_ether_hdr *eth)
{
	struct rte_arp_hdr *arp = (struct rte_arp_hdr *)(eth + 1);

	if (rte_pktmbuf_pkt_len(m) < DP_L2_LEN + sizeof(*arp) ||
	    arp->arp_hardware != rte_cpu_to_be_16(RTE_ARP_HRD_ETHER) ||
	    arp->arp_protocol != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4) || arp->arp_hlen != RTE_ETHER_ADDR_LEN ||
	    arp->arp_plen != sizeof(uint32_t))
		return dp_drop(lc, DP_DROP_ARP_INVALID);
	if (arp->arp_opcode != rte_cpu_to_be_16(RTE_ARP_OP_REQUEST) || arp->arp_data.arp_tip != lc->cfg->ipv4_addr)
		return dp_drop(lc, DP_DROP_ARP_NOT_FOR_US);
	/* a host we would not answer over IP learns nothing of us over ARP either */
	if (!dp_allowed(lc->allow, arp->arp_data.arp_sip))
		return dp_drop(lc, DP_DROP_SRC_NOT_ALLOWED);
	if (!dp_rate_allow(&lc->arp_rate, lc->burst_tsc))
		return dp_drop(lc, DP_DROP_RATE_ARP);

	arp->arp_opcode = rte_cpu_to_be_16(RTE_ARP_OP_REPLY);
	rte_ether_addr_copy(&arp->arp_data.arp_sha, &arp->arp_data.arp_tha);
	arp->arp_data.arp_tip = arp->arp_data.arp_sip;
	rte_ether_addr_copy(&lc->mac, &arp->arp_data.arp_sha);
	arp->arp_data.arp_sip = lc->cfg->ipv4_addr;
	eth_turnaround(lc, eth);
	m->ol_flags = 0;
	lc->stats.arp_replies++;
	return DP_VERDICT_REPLY;
}

void dp_ipv4_reply_finish(struct dp_lcore *lc, struct rte_mbuf *m, uint32_t l4_len)
{
	struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(eth + 1);
	uint32_t ihl = rte_ipv4_hdr_len(ip);

	/* Options of a request (source routes, timestamps) must not be echoed: slide Eth+IPv4 forward
	 * over them so the L4 part stays where it is. */
	if (ihl > DP_L3_LEN) {
		memmove((uint8_t *)eth + (ihl - DP_L3_LEN), eth, DP_L2_LEN + DP_L3_LEN);
		rte_pktmbuf_adj(m, (uint16_t)(ihl - DP_L3_LEN));
		eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
		ip = (struct rte_ipv4_hdr *)(eth + 1);
		ip->version_ihl = RTE_IPV4_VHL_DEF;
	}
	eth_turnaround(lc, eth);
	ip->dst_addr = ip->src_addr;
	ip->src_addr = lc->cfg->ipv4_addr;
	ip->time_to_live = DP_IP_TTL;
	ip->total_length = rte_cpu_to_be_16((uint16_t)(DP_L3_LEN + l4_len));
	ip->fragment_offset &= rte_cpu_to_be_16(RTE_IPV4_HDR_DF_FLAG);
	ip->hdr_checksum = 0;
	m->data_len = (uint16_t)(DP_L2_LEN + DP_L3_LEN + l4_len);
	m->pkt_len = m->data_len;

	struct rte_udp_hdr *udp = NULL;
	if (ip->next_proto_id == IPPROTO_UDP) {
		udp = (struct rte_udp_hdr *)(ip + 1);
		uint16_t port = udp->src_port;
		udp->src_port = udp->dst_port;
		udp->dst_port = port;
		udp->dgram_len = rte_cpu_to_be_16((uint16_t)l4_len);
		udp->dgram_cksum = 0;
	}
	if (lc->tx_csum_offload) {
		m->l2_len = DP_L2_LEN;
		m->l3_len = DP_L3_LEN;
		m->ol_flags = RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM;
		if (udp != NULL) {
			m->ol_flags |= RTE_MBUF_F_TX_UDP_CKSUM;
			udp->dgram_cksum = rte_ipv4_phdr_cksum(ip, m->ol_flags);
		}
	} else {
		m->ol_flags = 0;
		ip->hdr_checksum = rte_ipv4_cksum(ip);
		if (udp != NULL)
			udp->dgram_cksum = rte_ipv4_udptcp_cksum(ip, udp);
	}
}

static enum dp_verdict icmp_handle(struct dp_lcore *lc, struct rte_mbuf *m, struct rte_ipv4_hdr *ip,
				   uint32_t l4_len)
{
	struct rte_icmp_hdr *icmp = (struct rte_icmp_hdr *)((uint8_t *)ip + rte_ipv4_hdr_len(ip));

	if (l4_len < sizeof(*icmp) || rte_raw_cksum(icmp, l4_len) != 0xffff)
		return dp_drop(lc, DP_DROP_ICMP_INVALID);
	if (icmp->icmp_type != RTE_IP_ICMP_ECHO_REQUEST || icmp->icmp_code != 0)
		return dp_drop(lc, DP_DROP_ICMP_UNSUPPORTED);
	if (!dp_rate_allow(&lc->icmp_rate, lc->burst_tsc))
		return dp_drop(lc, DP_DROP_RATE_ICMP);

	icmp->icmp_type = RTE_IP_ICMP_ECHO_REPLY;
	icmp->icmp_cksum = 0;
	icmp->icmp_cksum = (uint16_t)~rte_raw_cksum(icmp, l4_len);
	dp_ipv4_reply_finish(lc, m, l4_len);
	lc->stats.icmp_echo_replies++;
	return DP_VERDICT_REPLY;
}

static bool ip_csum_ok(const struct dp_lcore *lc, const struct rte_mbuf *m, const struct rte_ipv4_hdr *ip)
{
	if (lc->rx_csum_offload) {
		uint64_t flags = m->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK;
		if (flags == RTE_MBUF_F_RX_IP_CKSUM_GOOD)
			return true;
		if (flags == RTE_MBUF_F_RX_IP_CKSUM_BAD)
			return false;
	}
	return rte_raw_cksum(ip, rte_ipv4_hdr_len(ip)) == 0xffff;
}

static bool udp_csum_ok(const struct dp_lcore *lc, const struct rte_mbuf *m, const struct rte_ipv4_hdr *ip,
			const struct rte_udp_hdr *udp)
{
	if (udp->dgram_cksum == 0) /* the sender chose not to checksum (RFC 768) */
		return true;
	if (lc->rx_csum_offload) {
		uint64_t flags = m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK;
		if (flags == RTE_MBUF_F_RX_L4_CKSUM_GOOD)
			return true;
		if (flags == RTE_MBUF_F_RX_L4_CKSUM_BAD)
			return false;
	}
	return rte_ipv4_udptcp_cksum_verify(ip, udp) == 0;
}

static enum dp_verdict udp_handle(struct dp_lcore *lc, struct rte_mbuf *m, struct rte_ipv4_hdr *ip,
				  uint32_t l4_len)
{
	struct rte_udp_hdr *udp = (struct rte_udp_hdr *)((uint8_t *)ip + rte_ipv4_hdr_len(ip));

	if (l4_len < sizeof(*udp))
		return dp_drop(lc, DP_DROP_UDP_TRUNCATED);
	if (rte_be_to_cpu_16(udp->dgram_len) != l4_len)
		return dp_drop(lc, DP_DROP_UDP_BAD_LEN);
	if (!udp_csum_ok(lc, m, ip, udp))
		return dp_drop(lc, DP_DROP_UDP_BAD_CSUM);
	if (udp->dst_port != rte_cpu_to_be_16(lc->cfg->udp_port))
		return dp_drop(lc, DP_DROP_UDP_WRONG_PORT);
	lc->rx_src_port = udp->src_port;
	return dp_request_handle(lc, m, (uint8_t *)(udp + 1), l4_len - (uint32_t)sizeof(*udp));
}

/*
 * A source no reply may go to (RFC 1122 3.2.1.3 and RFC 5735): "this network" 0/8, loopback 127/8,
 * multicast 224/4, the reserved 240/4 with the limited broadcast 255.255.255.255, and our own
 * address. A reply to any of them would reach a host that did not ask, or many: the reflection a
 * forged source buys.
 */
static bool ip_src_martian(const struct dp_lcore *lc, rte_be32_t src)
{
	uint32_t a = rte_be_to_cpu_32(src);

	return (a >> 24) == 0 || (a >> 24) == 127 || (a >> 28) >= 0xe || src == lc->cfg->ipv4_addr;
}

static enum dp_verdict ipv4_handle(struct dp_lcore *lc, struct rte_mbuf *m, struct rte_ether_hdr *eth)
{
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(eth + 1);
	uint32_t l3_len = rte_pktmbuf_pkt_len(m) - DP_L2_LEN;
	uint32_t ihl, total_len;

	if (l3_len < DP_L3_LEN)
		return dp_drop(lc, DP_DROP_IP_TRUNCATED);
	if ((ip->version_ihl >> 4) != 4)
		return dp_drop(lc, DP_DROP_IP_BAD_VERSION);
	ihl = rte_ipv4_hdr_len(ip);
	if (ihl < DP_L3_LEN)
		return dp_drop(lc, DP_DROP_IP_BAD_HDR_LEN);
	if (ihl > l3_len)
		return dp_drop(lc, DP_DROP_IP_TRUNCATED);
	total_len = rte_be_to_cpu_16(ip->total_length);
	if (total_len < ihl)
		return dp_drop(lc, DP_DROP_IP_BAD_TOTAL_LEN);
	if (total_len > l3_len)
		return dp_drop(lc, DP_DROP_IP_TRUNCATED);
	/* Nothing past here trusts a field the checksum has not vouched for. */
	if (!ip_csum_ok(lc, m, ip))
		return dp_drop(lc, DP_DROP_IP_BAD_CSUM);
	if (ip->fragment_offset & rte_cpu_to_be_16(RTE_IPV4_HDR_MF_FLAG | RTE_IPV4_HDR_OFFSET_MASK))
		return dp_drop(lc, DP_DROP_IP_FRAGMENT);
	if (ip->dst_addr != lc->cfg->ipv4_addr)
		return dp_drop(lc, DP_DROP_IP_WRONG_DST);
	if (ip_src_martian(lc, ip->src_addr))
		return dp_drop(lc, DP_DROP_IP_MARTIAN_SRC);
	if (!dp_allowed(lc->allow, ip->src_addr))
		return dp_drop(lc, DP_DROP_SRC_NOT_ALLOWED);
	lc->rx_src_addr = ip->src_addr;
	/* Ethernet pads short frames to 60 bytes: the padding is not part of the datagram. */
	if (l3_len > total_len)
		rte_pktmbuf_trim(m, (uint16_t)(l3_len - total_len));

	switch (ip->next_proto_id) {
	case IPPROTO_UDP:
		/* A request above the MTU gets a short error reply from dp_request_handle. */
		return udp_handle(lc, m, ip, total_len - ihl);
	case IPPROTO_ICMP:
		/* An echo reply is as long as its request: above our MTU it could not be sent. Virtual
		 * ports whose interface accepts more than we were configured for do deliver these. */
		if (total_len > lc->cfg->mtu)
			return dp_drop(lc, DP_DROP_IP_OVER_MTU);
		return icmp_handle(lc, m, ip, total_len - ihl);
	default:
		return dp_drop(lc, DP_DROP_IP_UNKNOWN_PROTO);
	}
}

enum dp_verdict dp_packet_handle(struct dp_lcore *lc, struct rte_mbuf *m)
{
	struct rte_ether_hdr *eth;

	if (unlikely(m->nb_segs != 1))
		return dp_drop(lc, DP_DROP_MULTI_SEGMENT);
	if (unlikely(rte_pktmbuf_pkt_len(m) < DP_L2_LEN))
		return dp_drop(lc, DP_DROP_ETH_TRUNCATED);
	eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	if (!rte_is_same_ether_addr(&eth->dst_addr, &lc->mac) && !rte_is_broadcast_ether_addr(&eth->dst_addr))
		return dp_drop(lc, DP_DROP_ETH_WRONG_DST);
	/* every reply goes to the source MAC: a group or zero one would flood or be dropped on the way */
	if (!rte_is_valid_assigned_ether_addr(&eth->src_addr))
		return dp_drop(lc, DP_DROP_ETH_BAD_SRC);

	switch (rte_be_to_cpu_16(eth->ether_type)) {
	case RTE_ETHER_TYPE_IPV4:
		return ipv4_handle(lc, m, eth);
	case RTE_ETHER_TYPE_ARP:
		return arp_handle(lc, m, eth);
	default:
		return dp_drop(lc, DP_DROP_ETH_UNKNOWN_TYPE);
	}
}
