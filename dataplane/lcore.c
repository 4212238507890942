/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The two dataplane pollers of a polling lcore: RX (a burst of up to 32 frames, each handled to a
 * reply, a drop, or held: a segment waiting for the rest of its message, a request with the model
 * layer) and TX drain (replies wait in a TX buffer so that several leave in one burst; the buffer is
 * flushed when full or when the drain period on the TSC has passed; it also runs reassembly's clock).
 */
#include <errno.h>
#include <string.h>

#include <rte_malloc.h>
#include <rte_prefetch.h>

#include "defs.h"

/* Called by rte_eth_tx_buffer_flush for the replies the queue refused: count them, free them. */
static void tx_unsent(struct rte_mbuf **pkts, uint16_t unsent, void *userdata)
{
	struct dp_lcore *lc = userdata;

	lc->stats.drops[DP_DROP_TX_FULL] += unsent;
	for (uint16_t i = 0; i < unsent; i++)
		lc->stats.tx_bytes -= rte_pktmbuf_pkt_len(pkts[i]);
	lc->stats.tx_packets -= unsent;
	rte_pktmbuf_free_bulk(pkts, unsent);
}

int dp_lcore_init(struct dp_lcore *lc, unsigned int lcore_id, uint16_t port_id, uint16_t queue_id, int socket_id,
		  const struct dp_config *cfg, const struct dp_model_ops *models)
{
	struct rte_eth_dev_info info;
	struct dp_csum_offloads csum;
	int ret;

	memset(lc, 0, sizeof(*lc));
	lc->lcore_id = lcore_id;
	lc->port_id = port_id;
	lc->queue_id = queue_id;
	lc->cfg = cfg;
	lc->models = models;
	ret = rte_eth_macaddr_get(port_id, &lc->mac);
	if (ret != 0)
		return ret;
	ret = rte_eth_dev_info_get(port_id, &info);
	if (ret != 0)
		return ret;
	if (queue_id >= info.nb_rx_queues || queue_id >= info.nb_tx_queues)
		return -EINVAL;
	csum = dp_port_csum_offloads(&info); /* what dp_port_init enabled */
	lc->tx_csum_offload = csum.tx != 0;
	lc->rx_csum_offload = csum.rx != 0;
	lc->tx_buffer = rte_zmalloc_socket("dp_tx_buffer", RTE_ETH_TX_BUFFER_SIZE(DP_RX_BURST), 0, socket_id);
	if (lc->tx_buffer == NULL)
		return -ENOMEM;
	rte_eth_tx_buffer_init(lc->tx_buffer, DP_RX_BURST);
	ret = rte_eth_tx_buffer_set_err_callback(lc->tx_buffer, tx_unsent, lc);
	if (ret != 0) {
		rte_free(lc->tx_buffer);
		lc->tx_buffer = NULL;
		return ret;
	}
	ret = dp_reasm_create(lc, socket_id);
	if (ret != 0) {
		rte_free(lc->tx_buffer);
		lc->tx_buffer = NULL;
		return ret;
	}
	lc->tx_drain_tsc = plat_us_to_tsc(cfg->tx_drain_us);
	dp_lcore_rates_init(lc, plat_tsc_hz);
	lc->last_drain_tsc = plat_tsc_now();
	lc->reasm_scan_tsc = lc->last_drain_tsc + plat_us_to_tsc(DP_REASM_SCAN_US);
	return 0;
}

void dp_rate_init(struct dp_rate *r, uint32_t per_s, uint64_t hz)
{
	uint64_t burst = per_s / 10 + 1;

	r->tat = 0;
	r->interval = per_s != 0 ? (hz / per_s > 0 ? hz / per_s : 1) : 0;
	r->tolerance = (burst - 1) * r->interval;
}

void dp_lcore_rates_init(struct dp_lcore *lc, uint64_t hz)
{
	dp_rate_init(&lc->error_rate, lc->cfg->error_rate, hz);
	dp_rate_init(&lc->icmp_rate, lc->cfg->icmp_rate, hz);
	dp_rate_init(&lc->arp_rate, lc->cfg->arp_rate, hz);
}

void dp_lcore_fini(struct dp_lcore *lc)
{
	dp_auth_lcore_fini(lc);
	dp_reasm_destroy(lc);
	rte_free(lc->tx_buffer);
	lc->tx_buffer = NULL;
}

void dp_tx_enqueue(struct dp_lcore *lc, struct rte_mbuf *m)
{
	/* Counted as sent now; tx_unsent takes them back if the queue refuses them. */
	lc->stats.tx_packets++;
	lc->stats.tx_bytes += rte_pktmbuf_pkt_len(m);
	rte_eth_tx_buffer(lc->port_id, lc->queue_id, lc->tx_buffer, m);
}

enum plat_poll_result dp_rx_poll(void *arg)
{
	struct dp_lcore *lc = arg;
	struct rte_mbuf *pkts[DP_RX_BURST];
	uint16_t nb_rx, i;

	if (lc->auth != NULL) /* between bursts no key table is in use: a reload may free the last one */
		dp_auth_quiescent(lc);
	nb_rx = rte_eth_rx_burst(lc->port_id, lc->queue_id, pkts, DP_RX_BURST);
	if (unlikely(nb_rx == 0))
		return PLAT_POLL_IDLE;

	lc->burst_tsc = plat_tsc_now();
	lc->stats.rx_packets += nb_rx;
	for (i = 0; i < nb_rx; i++) {
		if (i + 1 < nb_rx)
			rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 1], void *));
		lc->stats.rx_bytes += rte_pktmbuf_pkt_len(pkts[i]);
		switch (dp_packet_handle(lc, pkts[i])) {
		case DP_VERDICT_REPLY:
			dp_tx_enqueue(lc, pkts[i]);
			break;
		case DP_VERDICT_DROP:
			rte_pktmbuf_free(pkts[i]);
			break;
		case DP_VERDICT_HELD: /* the model layer answers it later through dp_request_complete */
			break;
		}
	}
	return PLAT_POLL_BUSY;
}

enum plat_poll_result dp_tx_drain_poll(void *arg)
{
	struct dp_lcore *lc = arg;
	uint64_t now = plat_tsc_now();

	/* Incomplete messages are looked at every DP_REASM_SCAN_US: their clocks are 100 ms or a
	 * request's deadline, and a scan walks the whole (small) table. */
	if (unlikely((int64_t)(now - lc->reasm_scan_tsc) >= 0)) {
		lc->reasm_scan_tsc = now + plat_us_to_tsc(DP_REASM_SCAN_US);
		dp_reasm_expire(lc, now);
	}
	if (now - lc->last_drain_tsc < lc->tx_drain_tsc)
		return PLAT_POLL_IDLE;
	lc->last_drain_tsc = now;
	return rte_eth_tx_buffer_flush(lc->port_id, lc->queue_id, lc->tx_buffer) > 0 ? PLAT_POLL_BUSY
										     : PLAT_POLL_IDLE;
}

void dp_tx_flush(struct dp_lcore *lc)
{
	rte_eth_tx_buffer_flush(lc->port_id, lc->queue_id, lc->tx_buffer);
}
