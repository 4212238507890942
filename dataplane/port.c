/* SPDX-License-Identifier: BSD-3-Clause */
/* Port bring-up for any PMD: PCI NICs in production, af_packet, memif, ring or null here. */
#include <errno.h>
#include <string.h>

#include <rte_bus.h>
#include <rte_dev.h>

#include "defs.h"

/* The flows RSS should spread when several lcores poll one port; masked by what the device hashes. */
#define DP_RSS_HF_WANTED (RTE_ETH_RSS_IPV4 | RTE_ETH_RSS_NONFRAG_IPV4_UDP)

static bool port_is_virtual(const struct rte_eth_dev_info *info)
{
	const struct rte_bus *bus = rte_dev_bus(info->device);

	return bus != NULL && strcmp(rte_bus_name(bus), "vdev") == 0;
}

struct dp_csum_offloads dp_port_csum_offloads(const struct rte_eth_dev_info *info)
{
	const uint64_t tx_csum = RTE_ETH_TX_OFFLOAD_IPV4_CKSUM | RTE_ETH_TX_OFFLOAD_UDP_CKSUM;
	const uint64_t rx_csum = RTE_ETH_RX_OFFLOAD_IPV4_CKSUM | RTE_ETH_RX_OFFLOAD_UDP_CKSUM;

	return (struct dp_csum_offloads){
		.tx = (info->tx_offload_capa & tx_csum) == tx_csum ? tx_csum : 0,
		.rx = (info->rx_offload_capa & rx_csum) == rx_csum ? rx_csum : 0,
	};
}

int dp_port_init(uint16_t port_id, uint16_t nb_queues, const struct dp_config *cfg,
		 struct rte_mempool *const *pools, const int *queue_sockets)
{
	struct dp_csum_offloads csum;
	struct rte_eth_conf conf = {0};
	struct rte_eth_dev_info info;
	struct rte_eth_txconf txconf;
	uint16_t nb_rxd = cfg->rx_desc, nb_txd = cfg->tx_desc;
	int ret;

	if (!rte_eth_dev_is_valid_port(port_id))
		return -ENODEV;
	ret = rte_eth_dev_info_get(port_id, &info);
	if (ret != 0)
		return ret;
	if (nb_queues == 0 || nb_queues > info.max_rx_queues || nb_queues > info.max_tx_queues) {
		PLAT_LOG(ERR, dp, "port %u (%s): %u queue pairs asked, the device has %u RX / %u TX", port_id,
			 info.driver_name, nb_queues, info.max_rx_queues, info.max_tx_queues);
		return -EINVAL;
	}
	if (cfg->mtu < DP_MTU_MIN || cfg->mtu > DP_MTU_MAX) {
		PLAT_LOG(ERR, dp, "port %u: MTU %u outside what batchwire serves (%u..%u)", port_id, cfg->mtu,
			 DP_MTU_MIN, DP_MTU_MAX);
		return -EINVAL;
	}
	if (cfg->mtu < info.min_mtu || cfg->mtu > info.max_mtu) {
		PLAT_LOG(ERR, dp, "port %u (%s): MTU %u outside what the device accepts (%u..%u)", port_id,
			 info.driver_name, cfg->mtu, info.min_mtu, info.max_mtu);
		return -EINVAL;
	}
	/* Some PMDs (af_packet on 22.11) report a 1518-byte max_rx_pktlen yet accept a larger MTU
	 * through their mtu_set op, sized by their own frame buffers. Configure within what the device
	 * reports, then ask for the MTU we want: the PMD has the last word. */
	uint32_t frame_overhead = RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN;
	conf.rxmode.mtu = (uint16_t)RTE_MIN((uint32_t)cfg->mtu, info.max_rx_pktlen - frame_overhead);
	if (nb_queues > 1) {
		uint64_t rss_hf = DP_RSS_HF_WANTED & info.flow_type_rss_offloads;
		if (rss_hf != 0) {
			conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
			conf.rx_adv_conf.rss_conf.rss_hf = rss_hf;
		} else {
			PLAT_LOG(WARNING, dp, "port %u (%s) offers no RSS on IPv4/UDP: the driver decides which "
				 "queue a flow lands on", port_id, info.driver_name);
		}
	}
	csum = dp_port_csum_offloads(&info);
	conf.txmode.offloads |= csum.tx;
	conf.rxmode.offloads |= csum.rx;
	/* Every mbuf a queue sends comes from one pool with refcount 1: the cheap free path is safe. */
	if (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE)
		conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE;

	ret = rte_eth_dev_configure(port_id, nb_queues, nb_queues, &conf);
	if (ret != 0) {
		PLAT_LOG(ERR, dp, "port %u (%s): configure failed: %s", port_id, info.driver_name, rte_strerror(-ret));
		return ret;
	}
	if (conf.rxmode.mtu != cfg->mtu) {
		ret = rte_eth_dev_set_mtu(port_id, cfg->mtu);
		if (ret != 0 && !port_is_virtual(&info)) {
			PLAT_LOG(ERR, dp, "port %u (%s): MTU %u refused (the device reports frames up to %u bytes): %s",
				 port_id, info.driver_name, cfg->mtu, info.max_rx_pktlen, rte_strerror(-ret));
			return ret;
		}
		/* A virtual port's real limit is its kernel interface's (af_packet) or its peer's (memif):
		 * 22.11's af_packet reports 1518 whatever its frame size, yet carries jumbo frames. */
		if (ret != 0)
			PLAT_LOG(WARNING, dp, "port %u (%s): the PMD reports frames up to %u bytes; MTU %u relies on "
				 "the interface behind it (e.g. `ip link set IFACE mtu %u` and af_packet framesz)",
				 port_id, info.driver_name, info.max_rx_pktlen, cfg->mtu, cfg->mtu);
	}
	ret = rte_eth_dev_adjust_nb_rx_tx_desc(port_id, &nb_rxd, &nb_txd);
	if (ret != 0)
		return ret;
	txconf = info.default_txconf;
	txconf.offloads = conf.txmode.offloads;
	for (uint16_t q = 0; q < nb_queues; q++) {
		ret = rte_eth_rx_queue_setup(port_id, q, nb_rxd, (unsigned int)queue_sockets[q], NULL, pools[q]);
		if (ret != 0) {
			PLAT_LOG(ERR, dp, "port %u: RX queue %u setup failed: %s", port_id, q, rte_strerror(-ret));
			return ret;
		}
		ret = rte_eth_tx_queue_setup(port_id, q, nb_txd, (unsigned int)queue_sockets[q], &txconf);
		if (ret != 0) {
			PLAT_LOG(ERR, dp, "port %u: TX queue %u setup failed: %s", port_id, q, rte_strerror(-ret));
			return ret;
		}
	}
	ret = rte_eth_dev_start(port_id);
	if (ret != 0) {
		PLAT_LOG(ERR, dp, "port %u (%s): start failed: %s", port_id, info.driver_name, rte_strerror(-ret));
		return ret;
	}

	struct rte_ether_addr mac;
	rte_eth_macaddr_get(port_id, &mac);
	PLAT_LOG(INFO, dp, "port %u (%s) up: MAC " RTE_ETHER_ADDR_PRT_FMT ", %u queue pairs, %u/%u descriptors, "
		 "MTU %u, checksums %s on TX and %s on RX", port_id, info.driver_name, RTE_ETHER_ADDR_BYTES(&mac),
		 nb_queues, nb_rxd, nb_txd, cfg->mtu,
		 csum.tx != 0 ? "offloaded" : "computed", csum.rx != 0 ? "offloaded" : "verified in software");
	return 0;
}

void dp_port_fini(uint16_t port_id)
{
	int ret = rte_eth_dev_stop(port_id);

	if (ret != 0)
		PLAT_LOG(WARNING, dp, "port %u: stop failed: %s", port_id, rte_strerror(-ret));
	rte_eth_dev_close(port_id);
}
