/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bwload on a DPDK port: its own Ethernet/IPv4/UDP, one RX/TX queue pair polled by the load loop's
 * lcore, the server's MAC learnt by ARP at open. A request datagram is encoded straight into its
 * mbuf (tx_slot points past the headers), the headers written from a template at commit.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <rte_arp.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_udp.h>

#include "port.h"

#define DPDK_HDRS_LEN (RTE_ETHER_HDR_LEN + sizeof(struct rte_ipv4_hdr) + sizeof(struct rte_udp_hdr))
#define DPDK_DESC 1024
#define DPDK_ARP_WAIT_MS 3000

struct load_port {
	uint16_t port_id;
	struct rte_mempool *pool;
	struct load_port_conf conf;
	struct rte_ether_addr mac;
	struct rte_ether_addr server_mac;
	uint16_t next_src;
	struct rte_mbuf *slot;
	unsigned int nb_tx;
	struct rte_mbuf *tx[LOAD_BURST];
	struct rte_mbuf *rx[LOAD_BURST];
	unsigned int nb_rx;
	uint64_t foreign;
};

static uint16_t mbuf_room(uint32_t mtu)
{
	/* a frame at the MTU with a VLAN tag and CRC, rounded up as af_packet sizes its slots */
	return (uint16_t)(RTE_PKTMBUF_HEADROOM + RTE_ALIGN_CEIL(RTE_ETHER_HDR_LEN + 4 + mtu + RTE_ETHER_CRC_LEN, 1024));
}

/* An ARP request for the server's address; the reply tells its MAC. */
static int arp_resolve(struct load_port *p, char *err, size_t cap)
{
	uint64_t hz = rte_get_tsc_hz(), deadline = rte_rdtsc() + hz * DPDK_ARP_WAIT_MS / 1000, next_ask = 0;

	while (rte_rdtsc() < deadline) {
		struct rte_mbuf *pkts[LOAD_BURST];
		uint16_t n;

		if (rte_rdtsc() >= next_ask) {
			struct rte_mbuf *m = rte_pktmbuf_alloc(p->pool);
			struct rte_ether_hdr *eth;
			struct rte_arp_hdr *arp;

			if (m == NULL)
				break;
			eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
			arp = (struct rte_arp_hdr *)(eth + 1);
			memset(&eth->dst_addr, 0xff, RTE_ETHER_ADDR_LEN);
			rte_ether_addr_copy(&p->mac, &eth->src_addr);
			eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP);
			arp->arp_hardware = rte_cpu_to_be_16(RTE_ARP_HRD_ETHER);
			arp->arp_protocol = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
			arp->arp_hlen = RTE_ETHER_ADDR_LEN;
			arp->arp_plen = 4;
			arp->arp_opcode = rte_cpu_to_be_16(RTE_ARP_OP_REQUEST);
			rte_ether_addr_copy(&p->mac, &arp->arp_data.arp_sha);
			arp->arp_data.arp_sip = p->conf.client_ip;
			memset(&arp->arp_data.arp_tha, 0, RTE_ETHER_ADDR_LEN);
			arp->arp_data.arp_tip = p->conf.server_ip;
			m->data_len = m->pkt_len = RTE_ETHER_HDR_LEN + sizeof(*arp);
			if (rte_eth_tx_burst(p->port_id, 0, &m, 1) != 1)
				rte_pktmbuf_free(m);
			next_ask = rte_rdtsc() + hz / 4;
		}
		n = rte_eth_rx_burst(p->port_id, 0, pkts, LOAD_BURST);
		for (uint16_t i = 0; i < n; i++) {
			const struct rte_ether_hdr *eth = rte_pktmbuf_mtod(pkts[i], const struct rte_ether_hdr *);
			const struct rte_arp_hdr *arp = (const struct rte_arp_hdr *)(eth + 1);

			if (rte_pktmbuf_pkt_len(pkts[i]) >= RTE_ETHER_HDR_LEN + sizeof(*arp) &&
			    eth->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP) &&
			    arp->arp_opcode == rte_cpu_to_be_16(RTE_ARP_OP_REPLY) &&
			    arp->arp_data.arp_sip == p->conf.server_ip) {
				rte_ether_addr_copy(&arp->arp_data.arp_sha, &p->server_mac);
				rte_pktmbuf_free_bulk(pkts, n);
				return 0;
			}
		}
		rte_pktmbuf_free_bulk(pkts, n);
	}
	snprintf(err, cap, "no ARP reply from the server within %d ms: is it up on this link, at that address?",
		 DPDK_ARP_WAIT_MS);
	return -EHOSTUNREACH;
}

static void dpdk_close(struct load_port *p)
{
	if (p == NULL)
		return;
	if (p->slot != NULL)
		rte_pktmbuf_free(p->slot);
	rte_pktmbuf_free_bulk(p->tx, p->nb_tx);
	rte_pktmbuf_free_bulk(p->rx, p->nb_rx);
	rte_eth_dev_stop(p->port_id);
	rte_eth_dev_close(p->port_id);
	rte_mempool_free(p->pool);
	rte_free(p);
}

static int dpdk_open(struct load_port **out, const struct load_port_conf *conf, char *err, size_t cap)
{
	struct rte_eth_conf port_conf = {0};
	struct load_port *p;
	int rc;

	if (!rte_eth_dev_is_valid_port(conf->dpdk_port)) {
		snprintf(err, cap, "DPDK port %u does not exist (give one with -a or --vdev before --)", conf->dpdk_port);
		return -ENODEV;
	}
	p = rte_zmalloc("bwload_port", sizeof(*p), RTE_CACHE_LINE_SIZE);
	if (p == NULL) {
		snprintf(err, cap, "out of memory");
		return -ENOMEM;
	}
	p->port_id = conf->dpdk_port;
	p->conf = *conf;
	p->pool = rte_pktmbuf_pool_create("bwload_mbufs", conf->pool_mbufs, 256, 0, mbuf_room(conf->mtu),
					  rte_eth_dev_socket_id(p->port_id));
	if (p->pool == NULL) {
		snprintf(err, cap, "mbuf pool of %u: %s", conf->pool_mbufs, rte_strerror(rte_errno));
		rte_free(p);
		return -ENOMEM;
	}
	rc = rte_eth_dev_configure(p->port_id, 1, 1, &port_conf);
	if (rc == 0)
		rc = rte_eth_rx_queue_setup(p->port_id, 0, DPDK_DESC, rte_eth_dev_socket_id(p->port_id), NULL, p->pool);
	if (rc == 0)
		rc = rte_eth_tx_queue_setup(p->port_id, 0, DPDK_DESC, rte_eth_dev_socket_id(p->port_id), NULL);
	if (rc == 0)
		(void)rte_eth_dev_set_mtu(p->port_id, (uint16_t)conf->mtu); /* virtual ports may refuse: their link decides */
	if (rc == 0)
		rc = rte_eth_dev_start(p->port_id);
	if (rc == 0)
		rc = rte_eth_macaddr_get(p->port_id, &p->mac);
	if (rc != 0) {
		snprintf(err, cap, "DPDK port %u: %s", p->port_id, rte_strerror(-rc));
		rte_mempool_free(p->pool);
		rte_free(p);
		return rc;
	}
	if (conf->server_mac_set)
		memcpy(p->server_mac.addr_bytes, conf->server_mac, RTE_ETHER_ADDR_LEN);
	rc = conf->server_mac_set ? 0 : arp_resolve(p, err, cap);
	if (rc != 0) {
		dpdk_close(p);
		return rc;
	}
	*out = p;
	return 0;
}

static uint8_t *dpdk_tx_slot(struct load_port *p, uint32_t cap)
{
	if (p->nb_tx == LOAD_BURST ||
	    DPDK_HDRS_LEN + cap > (uint32_t)rte_pktmbuf_data_room_size(p->pool) - RTE_PKTMBUF_HEADROOM)
		return NULL;
	if (p->slot == NULL)
		p->slot = rte_pktmbuf_alloc(p->pool);
	if (p->slot == NULL)
		return NULL;
	return rte_pktmbuf_mtod_offset(p->slot, uint8_t *, DPDK_HDRS_LEN);
}

static void dpdk_tx_commit(struct load_port *p, uint32_t len)
{
	struct rte_mbuf *m = p->slot;
	struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, struct rte_ether_hdr *);
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(eth + 1);
	struct rte_udp_hdr *udp = (struct rte_udp_hdr *)(ip + 1);

	rte_ether_addr_copy(&p->server_mac, &eth->dst_addr);
	rte_ether_addr_copy(&p->mac, &eth->src_addr);
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	memset(ip, 0, sizeof(*ip));
	ip->version_ihl = RTE_IPV4_VHL_DEF;
	ip->total_length = rte_cpu_to_be_16((uint16_t)(sizeof(*ip) + sizeof(*udp) + len));
	ip->fragment_offset = rte_cpu_to_be_16(RTE_IPV4_HDR_DF_FLAG);
	ip->time_to_live = 64;
	ip->next_proto_id = IPPROTO_UDP;
	ip->src_addr = p->conf.client_ip;
	ip->dst_addr = p->conf.server_ip;
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	udp->src_port = rte_cpu_to_be_16((uint16_t)(p->conf.client_port + p->next_src));
	udp->dst_port = rte_cpu_to_be_16(p->conf.server_port);
	udp->dgram_len = rte_cpu_to_be_16((uint16_t)(sizeof(*udp) + len));
	udp->dgram_cksum = 0;
	if (p->conf.udp_csum)
		udp->dgram_cksum = rte_ipv4_udptcp_cksum(ip, udp);
	m->data_len = m->pkt_len = (uint32_t)DPDK_HDRS_LEN + len;
	p->tx[p->nb_tx++] = m;
	p->slot = NULL;
}

static unsigned int dpdk_tx_flush(struct load_port *p)
{
	unsigned int sent = p->nb_tx == 0 ? 0 : rte_eth_tx_burst(p->port_id, 0, p->tx, (uint16_t)p->nb_tx);

	if (sent < p->nb_tx)
		memmove(p->tx, p->tx + sent, (p->nb_tx - sent) * sizeof(p->tx[0]));
	p->nb_tx -= sent;
	return p->nb_tx;
}

/* A request's segments share its source port (one flow: one server queue); the next request moves on. */
static void dpdk_next_flow(struct load_port *p)
{
	if (++p->next_src >= p->conf.src_ports)
		p->next_src = 0;
}

static void dpdk_rx(struct load_port *p, struct load_rx *rx)
{
	uint16_t n = rte_eth_rx_burst(p->port_id, 0, p->rx, LOAD_BURST);

	p->nb_rx = n;
	rx->n = 0;
	for (uint16_t i = 0; i < n; i++) {
		struct rte_mbuf *m = p->rx[i];
		const struct rte_ether_hdr *eth = rte_pktmbuf_mtod(m, const struct rte_ether_hdr *);
		const struct rte_ipv4_hdr *ip = (const struct rte_ipv4_hdr *)(eth + 1);
		const struct rte_udp_hdr *udp;
		uint32_t ihl, total;

		if (m->nb_segs != 1 || m->data_len < DPDK_HDRS_LEN || eth->ether_type != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4) ||
		    ip->next_proto_id != IPPROTO_UDP || ip->src_addr != p->conf.server_ip) {
			p->foreign++;
			continue;
		}
		ihl = rte_ipv4_hdr_len(ip);
		total = rte_be_to_cpu_16(ip->total_length);
		udp = (const struct rte_udp_hdr *)((const uint8_t *)ip + ihl);
		if (ihl < sizeof(*ip) || total < ihl + sizeof(*udp) || RTE_ETHER_HDR_LEN + total > m->data_len ||
		    udp->src_port != rte_cpu_to_be_16(p->conf.server_port)) {
			p->foreign++;
			continue;
		}
		rx->payload[rx->n] = (const uint8_t *)(udp + 1);
		rx->len[rx->n++] = total - ihl - (uint32_t)sizeof(*udp);
	}
}

static void dpdk_rx_done(struct load_port *p, struct load_rx *rx)
{
	rte_pktmbuf_free_bulk(p->rx, p->nb_rx);
	p->nb_rx = 0;
	rx->n = 0;
}

static uint64_t dpdk_rx_foreign(const struct load_port *p)
{
	return p->foreign;
}

const struct load_port_ops load_port_dpdk = {
	.name = "dpdk",
	.open = dpdk_open,
	.tx_slot = dpdk_tx_slot,
	.tx_commit = dpdk_tx_commit,
	.tx_flush = dpdk_tx_flush,
	.rx = dpdk_rx,
	.rx_done = dpdk_rx_done,
	.next_flow = dpdk_next_flow,
	.rx_foreign = dpdk_rx_foreign,
	.close = dpdk_close,
};
