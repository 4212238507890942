/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The lcores' side of the service. A polling lcore has one channel per model: its batcher (bat_queue)
 * and its engine's executor instance. Its pollers: RX (the dataplane), batch windows (closes what is
 * due and submits it to the channel's executor), completions (polls every channel's executor and
 * hands each finished batch back to its batcher, which answers the requests) and TX drain. A worker
 * lcore runs the pollers its models' engines give it. All of it per iteration on the hot path: no
 * lock, allocation or system call; nothing here knows what kind a model is.
 */
#include <errno.h>
#include <string.h>

#include <rte_lcore.h>

#include "defs.h"
#include "inject.h"

struct app_lcore app_lcores[RTE_MAX_LCORE];

int app_deferred_push(struct app_lcore *al, struct bw_batch *batch, enum bw_status status)
{
	if (al->deferred_count == APP_DEFERRED_MAX)
		return -ENOBUFS;
	al->deferred[(al->deferred_head + al->deferred_count++) % APP_DEFERRED_MAX] =
		(struct app_deferred){batch, status};
	return 0;
}

/* A finished batch back to the batcher that made it, which answers its requests. */
static void batch_done(void *arg, const struct bw_completion *c)
{
	const struct app_lcore *al = arg;

	bat_batch_complete(c->batch, c->status, al->now_tsc);
}

static enum plat_poll_result completions_poll(void *arg)
{
	struct app_lcore *al = arg;
	unsigned int total = 0;

	al->now_tsc = plat_tsc_now();
	while (al->deferred_count != 0) {
		struct app_deferred d = al->deferred[al->deferred_head];

		al->deferred_head = (al->deferred_head + 1) % APP_DEFERRED_MAX;
		al->deferred_count--;
		bat_batch_complete(d.batch, d.status, al->now_tsc);
		total++;
	}
	for (unsigned int c = 0; c < al->nb_channels; c++) {
		const struct bw_executor *ex = &al->channels[c].executor;

		if (ex->ops->poll != NULL)
			total += ex->ops->poll(ex->ctx, batch_done, al, APP_COMPLETION_BURST);
	}
	return total != 0 ? PLAT_POLL_BUSY : PLAT_POLL_IDLE;
}

/* Requests the HTTP server handed to this lcore, into its batchers. */
static enum plat_poll_result inject_poll(void *arg)
{
	return app_inject_poll(arg) != 0 ? PLAT_POLL_BUSY : PLAT_POLL_IDLE;
}

static enum plat_poll_result batch_windows_poll(void *arg)
{
	struct app_lcore *al = arg;
	uint64_t now = plat_tsc_now();
	unsigned int work = 0;

	for (unsigned int c = 0; c < al->nb_channels; c++)
		work += bat_poll(al->channels[c].queue, now);
	return work != 0 ? PLAT_POLL_BUSY : PLAT_POLL_IDLE;
}

/* ---- set-up ------------------------------------------------------------------------------------- */

int app_service_lcore_init(struct app_service *svc, struct dp_lcore *dp)
{
	struct app_lcore *al = &app_lcores[dp->lcore_id];
	int socket = (int)rte_lcore_to_socket_id(dp->lcore_id);
	int ret;

	memset(al, 0, sizeof(*al));
	al->dp = dp;
	al->lcore_id = dp->lcore_id;
	dp->model_lcore = al;
	for (unsigned int i = 0; i < svc->nb_models; i++) {
		struct app_model *m = svc->models[i];
		struct app_channel *ch = &al->channels[i];

		ch->lcore = al;
		ch->model = m;
		ch->executor.ops = m->engine->executor;
		ret = m->engine->channel_init(ch, socket);
		if (ret != 0)
			return ret;
		/* counted from here: app_lcores_stop frees what channel_init made */
		al->nb_channels = i + 1;
		ch->queue = bat_queue_create(&m->cfg.batching, m->limiter, &ch->executor, app_job_done, ch,
					     plat_tsc_hz, plat_tsc_now() ^ (dp->lcore_id * 0x9e3779b97f4a7c15ULL) ^ i);
		if (ch->queue == NULL)
			return -ENOMEM;
	}
	return app_inject_lcore_init(al, socket);
}

int app_service_lcore_start(unsigned int lcore_id, char *err, size_t cap)
{
	struct app_lcore *al = &app_lcores[lcore_id];

	for (unsigned int c = 0; c < al->nb_channels; c++) {
		const struct bw_executor *ex = &al->channels[c].executor;
		int ret = ex->ops->lcore_start != NULL ? ex->ops->lcore_start(ex->ctx, err, cap) : 0;

		if (ret != 0)
			return ret;
	}
	return 0;
}

void app_lcores_stop(void)
{
	for (unsigned int l = 0; l < RTE_MAX_LCORE; l++) {
		struct app_lcore *al = &app_lcores[l];
		unsigned int nb = al->nb_channels;

		/* telemetry walks the channels: they are gone before their executors are */
		__atomic_store_n(&al->nb_channels, 0, __ATOMIC_RELEASE);
		app_inject_lcore_fini(al);
		for (unsigned int c = 0; c < nb; c++) {
			struct bw_executor *ex = &al->channels[c].executor;

			if (ex->ops->lcore_stop != NULL && ex->ctx != NULL)
				ex->ops->lcore_stop(ex->ctx);
			ex->ctx = NULL;
		}
	}
}

static unsigned int worker_pollers(unsigned int lcore_id, struct plat_poller *pollers, unsigned int room)
{
	unsigned int n = 0;

	for (unsigned int i = 0; app_current != NULL && i < app_current->nb_models; i++) {
		struct app_model *m = app_current->models[i];

		if (m->engine->worker_pollers != NULL)
			n += m->engine->worker_pollers(m, lcore_id, pollers + n, room - n);
	}
	return n;
}

/* One per lcore id, each its own cache line: written only by that worker's loop. */
static struct {
	struct plat_poll_stats stats;
} __rte_cache_aligned g_worker_stats[RTE_MAX_LCORE];

struct plat_poll_stats *app_service_worker_stats(unsigned int lcore_id)
{
	return &g_worker_stats[lcore_id].stats;
}

bool app_service_is_worker(unsigned int lcore_id)
{
	struct plat_poller pollers[PLAT_POLLERS_MAX];

	return worker_pollers(lcore_id, pollers, PLAT_POLLERS_MAX) > 0;
}

unsigned int app_service_pollers(unsigned int lcore_id, bool polling, bool working, struct plat_poller *pollers)
{
	struct app_lcore *al = &app_lcores[lcore_id];
	unsigned int n = 0;

	if (polling && al->dp != NULL) {
		pollers[n++] = (struct plat_poller){"rx", dp_rx_poll, al->dp};
		if (al->inject != NULL)
			pollers[n++] = (struct plat_poller){"http_infer", inject_poll, al};
		pollers[n++] = (struct plat_poller){"batch_windows", batch_windows_poll, al};
		pollers[n++] = (struct plat_poller){"completions", completions_poll, al};
	}
	if (working)
		n += worker_pollers(lcore_id, pollers + n, PLAT_POLLERS_MAX - 1 - n);
	if (polling && al->dp != NULL)
		pollers[n++] = (struct plat_poller){"tx_drain", dp_tx_drain_poll, al->dp};
	return n;
}

static bool lcore_queues_empty(const struct app_lcore *al)
{
	for (unsigned int c = 0; c < al->nb_channels; c++) {
		if (!bat_queue_empty(al->channels[c].queue))
			return false;
	}
	return true;
}

bool app_service_lcore_drain(unsigned int lcore_id, uint64_t max_us)
{
	struct app_lcore *al = &app_lcores[lcore_id];
	uint64_t end = plat_tsc_now() + plat_us_to_tsc(max_us);
	struct plat_poller pollers[PLAT_POLLERS_MAX];
	unsigned int n = 0;

	/* HTTP requests handed to this lcore before inference stopped are taken, then answered below */
	while (al->inject != NULL && app_inject_poll(al) > 0)
		;
	for (unsigned int c = 0; c < al->nb_channels; c++)
		bat_queue_drain(al->channels[c].queue);
	/* No RX: no new requests; but if this lcore is also a worker, its steps must keep running. */
	pollers[n++] = (struct plat_poller){"batch_windows", batch_windows_poll, al};
	pollers[n++] = (struct plat_poller){"completions", completions_poll, al};
	n += worker_pollers(lcore_id, pollers + n, PLAT_POLLERS_MAX - n);
	while (!lcore_queues_empty(al) && plat_tsc_now() < end) {
		for (unsigned int i = 0; i < n; i++)
			pollers[i].poll(pollers[i].arg);
	}
	dp_tx_flush(al->dp);
	return lcore_queues_empty(al);
}
