/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * /batchwire/stats and /batchwire/lcores. The hot path only increments its own lcore's plain
 * integers; these callbacks run on the telemetry thread and sum them. A 64-bit aligned load is atomic
 * on the CPUs DPDK runs on, so a reader sees each counter whole, if a few packets behind.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <rte_telemetry.h>

#include "dataplane.h"

static struct dp_lcore *const *g_lcores;
static unsigned int g_nb_lcores;
static dp_telemetry_extra_fn g_extra;
static struct rte_mempool *g_pools[RTE_MAX_NUMA_NODES];
static unsigned int g_nb_pools;

void dp_telemetry_pools(struct rte_mempool *const *pools, unsigned int count)
{
	g_nb_pools = RTE_MIN(count, (unsigned int)RTE_MAX_NUMA_NODES);
	for (unsigned int i = 0; i < g_nb_pools; i++)
		g_pools[i] = pools[i];
}

void dp_lcores_stats_sum(struct dp_lcore *const *lcores, unsigned int count, struct dp_lcore_stats *sum,
			 struct plat_poll_stats *poll)
{
	memset(sum, 0, sizeof(*sum));
	if (poll != NULL)
		memset(poll, 0, sizeof(*poll));
	for (unsigned int i = 0; i < count; i++) {
		const struct dp_lcore_stats *s = &lcores[i]->stats;

		sum->rx_packets += s->rx_packets;
		sum->rx_bytes += s->rx_bytes;
		sum->tx_packets += s->tx_packets;
		sum->tx_bytes += s->tx_bytes;
		sum->arp_replies += s->arp_replies;
		sum->icmp_echo_replies += s->icmp_echo_replies;
		sum->requests += s->requests;
		for (unsigned int k = 0; k < BW_STATUS_COUNT; k++)
			sum->replies[k] += s->replies[k];
		for (unsigned int k = 0; k < DP_DROP_COUNT; k++)
			sum->drops[k] += s->drops[k];
		sum->segments_in += s->segments_in;
		sum->segments_out += s->segments_out;
		sum->messages_reassembled += s->messages_reassembled;
		for (unsigned int k = 0; k < DP_REASM_REASON_COUNT; k++)
			sum->reasm[k] += s->reasm[k];
		sum->reasm_messages += s->reasm_messages;
		sum->reasm_segments += s->reasm_segments;
		sum->reasm_bytes += s->reasm_bytes;
		sum->held_messages += s->held_messages;
		sum->held_mbufs += s->held_mbufs;
		sum->model_contract_errors += s->model_contract_errors;
		for (unsigned int k = 0; k < DP_AUTH_OUTCOME_COUNT; k++)
			sum->auth[k] += s->auth[k];
		sum->amplification_refused += s->amplification_refused;
		sum->held_requests += s->held_requests;
		sum->held_refused += s->held_refused;
		if (poll != NULL) {
			poll->busy_iterations += lcores[i]->poll.busy_iterations;
			poll->cycles += lcores[i]->poll.cycles;
			poll->busy_cycles += lcores[i]->poll.busy_cycles;
			poll->iterations += lcores[i]->poll.iterations;
		}
	}
}

uint64_t dp_stats_replies_total(const struct dp_lcore_stats *s)
{
	uint64_t n = 0;
	for (unsigned int k = 0; k < BW_STATUS_COUNT; k++)
		n += s->replies[k];
	return n;
}

uint64_t dp_stats_drops_total(const struct dp_lcore_stats *s)
{
	uint64_t n = 0;
	for (unsigned int k = 0; k < DP_DROP_COUNT; k++)
		n += s->drops[k];
	return n;
}

/* The flat counters both commands show. */
static void stats_add_scalars(struct rte_tel_data *d, const struct dp_lcore_stats *s)
{
	rte_tel_data_add_dict_u64(d, "rx_packets", s->rx_packets);
	rte_tel_data_add_dict_u64(d, "rx_bytes", s->rx_bytes);
	rte_tel_data_add_dict_u64(d, "tx_packets", s->tx_packets);
	rte_tel_data_add_dict_u64(d, "tx_bytes", s->tx_bytes);
	rte_tel_data_add_dict_u64(d, "arp_replies", s->arp_replies);
	rte_tel_data_add_dict_u64(d, "icmp_echo_replies", s->icmp_echo_replies);
	rte_tel_data_add_dict_u64(d, "requests", s->requests);
	rte_tel_data_add_dict_u64(d, "replies", dp_stats_replies_total(s));
	rte_tel_data_add_dict_u64(d, "drops", dp_stats_drops_total(s));
	rte_tel_data_add_dict_u64(d, "segments_in", s->segments_in);
	rte_tel_data_add_dict_u64(d, "segments_out", s->segments_out);
	rte_tel_data_add_dict_u64(d, "messages_reassembled", s->messages_reassembled);
	rte_tel_data_add_dict_u64(d, "amplification_refused", s->amplification_refused);
	rte_tel_data_add_dict_u64(d, "reasm_messages", s->reasm_messages);
	rte_tel_data_add_dict_u64(d, "reasm_segments", s->reasm_segments);
	rte_tel_data_add_dict_u64(d, "reasm_bytes", s->reasm_bytes);
	rte_tel_data_add_dict_u64(d, "held_messages", s->held_messages);
	rte_tel_data_add_dict_u64(d, "held_mbufs", s->held_mbufs);
	rte_tel_data_add_dict_u64(d, "held_requests", s->held_requests);
	rte_tel_data_add_dict_u64(d, "held_refused", s->held_refused);
	rte_tel_data_add_dict_u64(d, "model_contract_errors", s->model_contract_errors);
}

/*
 * What the NIC dropped before any poller saw it, over the ports the lcores poll (each once):
 * imissed (RX ring full: the polling lcore fell behind), rx_nombuf (no mbuf to refill the ring),
 * ierrors (bad frames), oerrors (TX failures). Summed into d, and one dict per port when ports is
 * not NULL.
 */
static void ports_add(struct rte_tel_data *d, struct rte_tel_data *ports)
{
	uint64_t imissed = 0, nombuf = 0, ierrors = 0, oerrors = 0;
	bool seen[RTE_MAX_ETHPORTS] = {false};

	for (unsigned int i = 0; i < g_nb_lcores; i++) {
		uint16_t port = g_lcores[i]->port_id;
		struct rte_eth_stats st;

		if (port >= RTE_MAX_ETHPORTS || seen[port] || rte_eth_stats_get(port, &st) != 0)
			continue;
		seen[port] = true;
		imissed += st.imissed;
		nombuf += st.rx_nombuf;
		ierrors += st.ierrors;
		oerrors += st.oerrors;
		if (ports != NULL) {
			struct rte_tel_data *one = rte_tel_data_alloc();
			char key[16];

			if (one == NULL)
				continue;
			rte_tel_data_start_dict(one);
			rte_tel_data_add_dict_u64(one, "imissed", st.imissed);
			rte_tel_data_add_dict_u64(one, "rx_nombuf", st.rx_nombuf);
			rte_tel_data_add_dict_u64(one, "ierrors", st.ierrors);
			rte_tel_data_add_dict_u64(one, "oerrors", st.oerrors);
			rte_tel_data_add_dict_u64(one, "ipackets", st.ipackets);
			rte_tel_data_add_dict_u64(one, "opackets", st.opackets);
			snprintf(key, sizeof(key), "port%u", port);
			rte_tel_data_add_dict_container(ports, key, one, 0);
		}
	}
	rte_tel_data_add_dict_u64(d, "port_imissed", imissed);
	rte_tel_data_add_dict_u64(d, "port_rx_nombuf", nombuf);
	rte_tel_data_add_dict_u64(d, "port_ierrors", ierrors);
	rte_tel_data_add_dict_u64(d, "port_oerrors", oerrors);
}

static int stats_cb(const char *cmd __rte_unused, const char *params __rte_unused, struct rte_tel_data *d)
{
	struct dp_lcore_stats sum;
	struct plat_poll_stats poll;
	struct rte_tel_data *replies, *drops, *reasm, *auth;

	dp_lcores_stats_sum(g_lcores, g_nb_lcores, &sum, &poll);
	rte_tel_data_start_dict(d);
	stats_add_scalars(d, &sum);
	rte_tel_data_add_dict_u64(d, "poll_iterations", poll.iterations);
	rte_tel_data_add_dict_u64(d, "poll_busy_iterations", poll.busy_iterations);
	rte_tel_data_add_dict_u64(d, "poll_cycles", poll.cycles);
	rte_tel_data_add_dict_u64(d, "poll_busy_cycles", poll.busy_cycles);
	{
		uint64_t total = 0, avail = 0;

		for (unsigned int i = 0; i < g_nb_pools; i++) {
			total += g_pools[i]->size;
			avail += rte_mempool_avail_count(g_pools[i]);
		}
		rte_tel_data_add_dict_u64(d, "mbufs_total", total);
		rte_tel_data_add_dict_u64(d, "mbufs_free", avail);
	}
	{
		struct rte_tel_data *ports = rte_tel_data_alloc();

		if (ports != NULL)
			rte_tel_data_start_dict(ports);
		ports_add(d, ports);
		if (ports != NULL)
			rte_tel_data_add_dict_container(d, "ports", ports, 0);
	}

	replies = rte_tel_data_alloc();
	drops = rte_tel_data_alloc();
	reasm = rte_tel_data_alloc();
	auth = rte_tel_data_alloc();
	if (replies == NULL || drops == NULL || reasm == NULL || auth == NULL) {
		rte_tel_data_free(replies);
		rte_tel_data_free(drops);
		rte_tel_data_free(reasm);
		rte_tel_data_free(auth);
		return -ENOMEM;
	}
	rte_tel_data_start_dict(replies);
	for (unsigned int k = 0; k < BW_STATUS_COUNT; k++)
		rte_tel_data_add_dict_u64(replies, bw_status_name(k), sum.replies[k]);
	rte_tel_data_start_dict(drops);
	for (unsigned int k = 0; k < DP_DROP_COUNT; k++)
		rte_tel_data_add_dict_u64(drops, dp_drop_reason_name(k), sum.drops[k]);
	rte_tel_data_start_dict(reasm);
	for (unsigned int k = 0; k < DP_REASM_REASON_COUNT; k++)
		rte_tel_data_add_dict_u64(reasm, dp_reasm_reason_name(k), sum.reasm[k]);
	rte_tel_data_add_dict_container(d, "replies_by_status", replies, 0);
	rte_tel_data_add_dict_container(d, "drops_by_reason", drops, 0);
	rte_tel_data_add_dict_container(d, "reasm_discards_by_reason", reasm, 0);
	rte_tel_data_start_dict(auth);
	for (unsigned int k = 0; k < DP_AUTH_OUTCOME_COUNT; k++)
		rte_tel_data_add_dict_u64(auth, dp_auth_outcome_name(k), sum.auth[k]);
	rte_tel_data_add_dict_container(d, "auth_by_outcome", auth, 0);
	if (g_extra != NULL)
		g_extra(d);
	return 0;
}

static int lcores_cb(const char *cmd __rte_unused, const char *params __rte_unused, struct rte_tel_data *d)
{
	rte_tel_data_start_dict(d);
	for (unsigned int i = 0; i < g_nb_lcores; i++) {
		const struct dp_lcore *lc = g_lcores[i];
		struct rte_tel_data *one = rte_tel_data_alloc();
		char key[32];

		if (one == NULL)
			return -ENOMEM;
		rte_tel_data_start_dict(one);
		rte_tel_data_add_dict_u64(one, "port", lc->port_id);
		rte_tel_data_add_dict_u64(one, "queue", lc->queue_id);
		stats_add_scalars(one, &lc->stats);
		rte_tel_data_add_dict_u64(one, "poll_iterations", lc->poll.iterations);
		rte_tel_data_add_dict_u64(one, "poll_busy_iterations", lc->poll.busy_iterations);
		rte_tel_data_add_dict_u64(one, "poll_cycles", lc->poll.cycles);
		rte_tel_data_add_dict_u64(one, "poll_busy_cycles", lc->poll.busy_cycles);
		snprintf(key, sizeof(key), "lcore%u", lc->lcore_id);
		rte_tel_data_add_dict_container(d, key, one, 0);
	}
	return 0;
}

static struct dp_auth *g_auth;

static int auth_cb(const char *cmd __rte_unused, const char *params __rte_unused, struct rte_tel_data *d)
{
	rte_tel_data_start_dict(d);
	dp_auth_telemetry(g_auth, d);
	return 0;
}

/* Runs on the telemetry thread: a control thread, never a polling lcore. */
static int auth_reload_cb(const char *cmd __rte_unused, const char *params __rte_unused, struct rte_tel_data *d)
{
	char err[256] = "";
	int keys = dp_auth_reload(g_auth, err, sizeof(err));

	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_string(d, "result", keys >= 0 ? "reloaded" : "failed, keys unchanged");
	if (keys >= 0)
		rte_tel_data_add_dict_u64(d, "keys", (uint64_t)keys);
	else
		rte_tel_data_add_dict_string(d, "error", err);
	return 0;
}

int dp_telemetry_auth(struct dp_auth *auth)
{
	int ret;

	g_auth = auth;
	ret = rte_telemetry_register_cmd("/batchwire/auth", auth_cb,
					 "Authentication keys (ids, never secrets), window, overlap, reloads. No parameters.");
	if (ret != 0)
		return ret;
	return rte_telemetry_register_cmd("/batchwire/auth/reload", auth_reload_cb,
					  "Reads the key file again (as SIGHUP does): new keys at once, dropped ones "
					  "for the overlap. No parameters.");
}

int dp_telemetry_register(struct dp_lcore *const *lcores, unsigned int count, dp_telemetry_extra_fn extra)
{
	int ret;

	g_lcores = lcores;
	g_nb_lcores = count;
	g_extra = extra;
	ret = rte_telemetry_register_cmd("/batchwire/stats", stats_cb,
					 "Dataplane counters summed over polling lcores: packets, requests, replies "
					 "by status, drops by reason. No parameters.");
	if (ret != 0)
		return ret;
	return rte_telemetry_register_cmd("/batchwire/lcores", lcores_cb,
					  "Counters of each polling lcore. No parameters.");
}
