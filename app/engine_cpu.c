/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ONNX models on the CPU: each model has worker lcores (the first is its owner) that run its
 * rt_executor. A polling lcore's closed batch goes on the model's submit ring (MP: every polling
 * lcore; SC: the owner), the owner starts it (gather, pad) and every worker runs its steps; the owner
 * hands each finished batch to the completion ring of the lcore that submitted it (SP/SC), whose
 * completion poller takes it back to its batcher. The rings hold more entries than the model can have
 * batches in flight (its in-flight limit), so no enqueue fails for want of room.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_pause.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>
#include <rte_telemetry.h>

#include "defs.h"
#include "exec/executor.h"
#include "exec/plan.h"
#include "graph.h"

#define CPU_SUBMIT_BURST 8 /* batches an owner worker takes from its submit ring per turn */

/* One worker lcore's part of a model: which worker index it is. */
struct cpu_worker {
	struct app_model *model;
	unsigned int index;
};

/* A model's CPU side (app_model.priv). Read-only after create except the owner's part. */
struct cpu_model {
	struct rt_executor *executor;
	struct rte_ring *submit_ring;   /* MP: polling lcores; SC: the owner worker */
	unsigned int ring_size;         /* of the submit and the completion rings: > every batch in flight */
	int64_t chunk_rows;             /* rows the largest size runs at a time: that size when whole */
	struct cpu_worker workers[APP_MODEL_WORKERS_MAX];
	char poller_name[APP_MODEL_NAME_MAX + 8];
	/* the owner worker's */
	struct bw_batch *stash __rte_cache_aligned; /* refused for want of a slot: started first next turn */
	struct app_exec_stats stats;
};

/* A model on one polling lcore (the channel's executor instance). */
struct cpu_channel {
	struct app_model *model;
	struct rte_ring *completions;   /* SP from the owner worker, SC by the polling lcore */
};

static struct cpu_model *cpu_of(const struct app_model *m)
{
	return m->priv;
}

/* ---- the polling lcore's side -------------------------------------------------------------------- */

/* (hot) The batch leaves its polling lcore for the model's owner worker; exec_route says where it returns. */
static int cpu_submit(void *ctx, struct bw_batch *batch)
{
	struct cpu_channel *cc = ctx;

	batch->exec_route = cc->completions;
	return rte_ring_mp_enqueue(cpu_of(cc->model)->submit_ring, batch) == 0 ? 0 : -ENOBUFS;
}

/* (hot) The owner's completions for this lcore. */
static unsigned int cpu_poll(void *ctx, bw_completion_fn done, void *arg, unsigned int max)
{
	struct cpu_channel *cc = ctx;
	struct bw_completion c[APP_COMPLETION_BURST];
	unsigned int n = rte_ring_sc_dequeue_burst_elem(cc->completions, c, sizeof(c[0]),
							RTE_MIN(max, (unsigned int)APP_COMPLETION_BURST), NULL);

	for (unsigned int i = 0; i < n; i++)
		done(arg, &c[i]);
	return n;
}

static void cpu_lcore_stop(void *ctx)
{
	struct cpu_channel *cc = ctx;

	rte_ring_free(cc->completions);
	rte_free(cc);
}

static const struct bw_executor_ops cpu_executor = {
	.name = "cpu",
	.lcore_stop = cpu_lcore_stop,
	.submit = cpu_submit,
	.poll = cpu_poll,
};

static int cpu_channel_init(struct app_channel *ch, int socket)
{
	struct cpu_channel *cc = rte_zmalloc_socket("bw_cpu_channel", sizeof(*cc), RTE_CACHE_LINE_SIZE, socket);
	char name[RTE_RING_NAMESIZE];

	if (cc == NULL)
		return -ENOMEM;
	cc->model = ch->model;
	snprintf(name, sizeof(name), "bw_cpl_%u_%u", ch->model->spec.id, ch->lcore->lcore_id);
	cc->completions = rte_ring_create_elem(name, sizeof(struct bw_completion), cpu_of(ch->model)->ring_size, socket,
					       RING_F_SP_ENQ | RING_F_SC_DEQ);
	if (cc->completions == NULL) {
		rte_free(cc);
		return -rte_errno;
	}
	ch->executor.ctx = cc;
	return 0;
}

/* ---- the worker lcores' side ---------------------------------------------------------------------- */

/* Owner worker: hands a completion to the lcore that submitted the batch. */
static void completion_send(struct rte_ring *ring, struct bw_batch *batch, enum bw_status status, uint32_t valid)
{
	/* the failure, if any, was logged here: the polling lcore needs only the outcome */
	struct bw_completion c = {.batch = batch, .status = status, .msg = "", .valid_outputs = valid};

	/* The ring holds more entries than the model can have batches in flight: a full ring is only its
	 * consumer being behind, never a lost completion, so wait for it rather than drop. */
	while (rte_ring_sp_enqueue_elem(ring, &c, sizeof(c)) != 0)
		rte_pause();
}

static void model_completion(void *ctx, const struct bw_completion *c)
{
	struct app_model *m = ctx;
	struct cpu_model *cm = cpu_of(m);
	uint64_t now = plat_tsc_now();
	struct bw_batch *b = c->batch;

	cm->stats.batches_done++;
	cm->stats.compute_us += plat_tsc_to_us(now - b->started_tsc);
	if (c->status != BW_STATUS_OK) {
		cm->stats.batches_failed++;
		app_failure_log(m, &cm->stats, false, c->msg);
	}
	completion_send(b->exec_route, b, c->status, c->valid_outputs);
}

/* \return 0, or -EBUSY when every slot of its size is in flight (the caller keeps it for later). */
static int model_batch_start(struct app_model *m, struct bw_batch *b)
{
	struct cpu_model *cm = cpu_of(m);
	/* Read after the dequeue: a clock read before it could precede the batch's dispatch on its
	 * polling lcore. The TSC is invariant and synchronised across cores. */
	uint64_t now = plat_tsc_now();
	int ret;

	b->started_tsc = now;
	ret = rt_executor_submit(cm->executor, b);
	if (ret == -EBUSY)
		return ret;
	cm->stats.batches_started++;
	cm->stats.queue_wait_us += now > b->dispatched_tsc ? plat_tsc_to_us(now - b->dispatched_tsc) : 0;
	if (ret != 0) {
		/* The batcher only makes batches of the sizes the executor was planned for: a bug, but the
		 * requests still get an answer. */
		cm->stats.batches_done++;
		cm->stats.batches_failed++;
		app_failure_log(m, &cm->stats, false, "the executor refused the batch (no plan for its size)");
		completion_send(b->exec_route, b, BW_STATUS_INTERNAL, 0);
	}
	return 0;
}

static unsigned int model_batches_start(struct app_model *m)
{
	struct cpu_model *cm = cpu_of(m);
	unsigned int started = 0;
	struct bw_batch *b;

	if (cm->stash != NULL) {
		if (model_batch_start(m, cm->stash) != 0)
			return 0;
		cm->stash = NULL;
		started++;
	}
	while (started < CPU_SUBMIT_BURST && rte_ring_sc_dequeue(cm->submit_ring, (void **)&b) == 0) {
		if (model_batch_start(m, b) != 0) {
			cm->stash = b;
			cm->stats.busy_waits++;
			break;
		}
		started++;
	}
	return started;
}

/* The model's first worker: starts batches, runs steps, hands completions back. */
static enum plat_poll_result model_owner_poll(void *arg)
{
	struct cpu_worker *w = arg;
	struct app_model *m = w->model;
	struct rt_executor *ex = cpu_of(m)->executor;
	unsigned int done = model_batches_start(m);

	done += rt_executor_work(ex, 0);
	done += rt_executor_poll_completions(ex, model_completion, m, APP_COMPLETION_BURST);
	return done != 0 ? PLAT_POLL_BUSY : PLAT_POLL_IDLE;
}

static enum plat_poll_result model_worker_poll(void *arg)
{
	struct cpu_worker *w = arg;

	return rt_executor_work(cpu_of(w->model)->executor, w->index) != 0 ? PLAT_POLL_BUSY : PLAT_POLL_IDLE;
}

static unsigned int cpu_worker_pollers(struct app_model *m, unsigned int lcore_id, struct plat_poller *pollers,
				       unsigned int room)
{
	struct cpu_model *cm = cpu_of(m);
	unsigned int n = 0;

	for (unsigned int w = 0; w < m->cfg.nb_workers && n < room; w++) {
		if (m->cfg.workers[w] == lcore_id)
			pollers[n++] = (struct plat_poller){cm->poller_name, w == 0 ? model_owner_poll : model_worker_poll,
							    &cm->workers[w]};
	}
	return n;
}

/* ---- set-up ------------------------------------------------------------------------------------- */

/* The CPU kernels' instruction set, chosen once before any model loads, said once in the log. */
static int cpu_init(const struct app_config *cfg __rte_unused, FILE *err)
{
	char line[256];
	int ret = rt_cpu_isa_select(line, sizeof(line));

	if (ret != 0) {
		fprintf(err, "batchwire: CPU kernels: %s\n", line);
		return ret;
	}
	rt_cpu_isa_describe(line, sizeof(line));
	PLAT_LOG(INFO, app, "CPU kernels: %s", line);
	return 0;
}

static int workers_check(struct app_model_config *mc, FILE *err)
{
	if (mc->nb_workers == 0) {
		mc->workers[0] = rte_get_main_lcore();
		mc->nb_workers = 1;
	}
	for (unsigned int w = 0; w < mc->nb_workers; w++) {
		if (!rte_lcore_is_enabled(mc->workers[w])) {
			fprintf(err, "batchwire: invalid workers of model '%s': lcore %u is not enabled in EAL: expected "
				"lcores given to EAL with -l or --lcores\n", mc->name, mc->workers[w]);
			return -EINVAL;
		}
	}
	return 0;
}

static void load_report(const struct app_model *m, const struct rt_opt_report *rep, const int64_t *sizes,
			unsigned int nb_sizes)
{
	char fusions[512] = "";
	size_t off = 0, arena = 0;

	for (uint32_t k = 0; k < rep->num_kinds && off < sizeof(fusions); k++)
		off += (size_t)snprintf(fusions + off, sizeof(fusions) - off, "%s%s x%u", k > 0 ? ", " : "",
					rep->kinds[k].what, rep->kinds[k].count);
	char depth[96] = "";
	unsigned int chunked = 0;

	for (unsigned int s = 0; s < nb_sizes; s++) {
		int64_t rows = rt_executor_chunk_rows(cpu_of(m)->executor, sizes[s]);

		arena += rt_plan_arena_bytes(rt_executor_plan(cpu_of(m)->executor, sizes[s]));
		if (rows < sizes[s] && chunked++ == 0)
			snprintf(depth, sizeof(depth), ", depth first in chunks of %" PRId64 " rows", rows);
	}
	if (chunked > 0)
		snprintf(depth + strlen(depth), sizeof(depth) - strlen(depth), " at %u sizes", chunked);
	PLAT_LOG(INFO, app, "model '%s' (id %u) from %s: %u inputs, %u outputs, %u nodes (%u after "
		 "optimisation%s%s), precision %s, %u batch sizes up to %" PRId64 "%s, %u slots each (%zu KiB of "
		 "arenas), %u worker lcores from %u", m->spec.name, m->spec.id, m->cfg.path, m->spec.num_inputs,
		 m->spec.num_outputs, rep->nodes_before, rep->nodes_after, off > 0 ? ": " : "", fusions,
		 rt_precision_name((enum rt_precision)m->cfg.cpu_precision), nb_sizes, sizes[nb_sizes - 1], depth,
		 m->cfg.slots, arena * m->cfg.slots / 1024, m->cfg.nb_workers, m->cfg.workers[0]);
}

/*
 * Whether the model's batches run depth first (rt_plan_chunk_auto, plan.h): chunk_rows off, N, or
 * auto, measured once at the largest size, each smaller size it divides taking the same chunks.
 * \return the rows of the chunk (sizes[nb - 1]: whole), or a negative errno with one line on err.
 */
static int64_t chunk_choose(const struct app_model *m, const int64_t *sizes, unsigned int nb, FILE *err)
{
	const struct app_model_config *mc = &m->cfg;
	int64_t big = sizes[nb - 1], rows;
	char report[320], why[RT_ERR_MAX];

	if (mc->chunk_rows < 0)
		return big;
	if (mc->chunk_rows > 0)
		return mc->chunk_rows;
	PLAT_LOG(INFO, app, "model '%s': choosing how to run batch %" PRId64 ", whole or in chunks (chunk_rows = "
		 "auto: timed when its arena passes 1 MiB; off skips this)", mc->name, big);
	rows = rt_plan_chunk_auto(m->spec.graph, big, report, sizeof(report), why, sizeof(why));
	if (rows < 0) {
		fprintf(err, "batchwire: model '%s' (%s): choosing how to run batch %" PRId64 ": %s\n", mc->name, mc->path,
			big, why);
		return rows;
	}
	if (report[0] != '\0')
		PLAT_LOG(INFO, app, "model '%s': %s", mc->name, report);
	return rows;
}

static void cpu_model_free(struct app_model *m)
{
	struct cpu_model *cm = cpu_of(m);

	if (cm != NULL) {
		rt_executor_destroy(cm->executor);
		rte_ring_free(cm->submit_ring);
		rte_free(cm);
	}
	m->priv = NULL;
	rt_model_fini(&m->spec);
}

static int cpu_model_create(struct app_model *m, FILE *err)
{
	struct app_model_config *mc = &m->cfg;
	const struct bat_options *o = &mc->batching;
	int64_t sizes[BAT_BATCH_SIZE_MAX], chunks[BAT_BATCH_SIZE_MAX], chunk;
	unsigned int nb_sizes = 0, inflight = app_model_inflight_max(mc);
	struct rt_opt_report rep;
	char why[RT_ERR_MAX * 2], name[RTE_RING_NAMESIZE];
	struct cpu_model *cm;
	int ret;

	ret = workers_check(mc, err);
	if (ret != 0)
		return ret;
	ret = rt_onnx_model_load(&m->spec, m->spec.id, mc->name, mc->path, RT_DEVICE_CPU,
				 &(struct rt_opt_options){ .precision = (enum rt_precision)mc->cpu_precision }, &rep, why,
				 sizeof(why));
	if (ret != 0) {
		fprintf(err, "batchwire: model '%s' (%s): %s\n", mc->name, mc->path, why);
		return ret;
	}
	cm = rte_zmalloc("bw_cpu_model", sizeof(*cm), RTE_CACHE_LINE_SIZE);
	if (cm == NULL) {
		fprintf(err, "batchwire: model '%s': out of memory\n", mc->name);
		return -ENOMEM;
	}
	m->priv = cm;
	if (o->num_allowed_batch_sizes > 0) {
		for (unsigned int i = 0; i < o->num_allowed_batch_sizes; i++)
			sizes[nb_sizes++] = o->allowed_batch_sizes[i];
	} else {
		for (uint32_t s = 1; s <= bat_options_batch_capacity(o); s++)
			sizes[nb_sizes++] = s;
	}
	/* Each slot is an arena per batch size; more slots than the in-flight limit would never be used,
	 * and one more than the workers keeps them busy while a batch is gathered or scattered. */
	if (mc->slots == 0)
		mc->slots = RTE_MAX(1u, RTE_MIN(inflight, mc->nb_workers + 1));
	chunk = chunk_choose(m, sizes, nb_sizes, err);
	if (chunk < 0)
		return (int)chunk;
	for (unsigned int s = 0; s < nb_sizes; s++) /* the sizes the chunk divides, and is smaller than */
		chunks[s] = chunk < sizes[s] && sizes[s] % chunk == 0 ? chunk : sizes[s];
	cm->chunk_rows = chunks[nb_sizes - 1];
	cm->executor = rt_executor_create_chunked(m->spec.graph, NULL, sizes, chunks, nb_sizes, mc->nb_workers,
						  mc->slots, why, sizeof(why));
	if (cm->executor == NULL) {
		ret = -errno;
		fprintf(err, "batchwire: model '%s' (%s): %s\n", mc->name, mc->path, why);
		return ret;
	}
	cm->ring_size = rte_align32pow2(inflight + 1);
	snprintf(name, sizeof(name), "bw_sub_%u", m->spec.id);
	cm->submit_ring = rte_ring_create(name, cm->ring_size, (int)rte_lcore_to_socket_id(mc->workers[0]), RING_F_SC_DEQ);
	if (cm->submit_ring == NULL) {
		fprintf(err, "batchwire: model '%s': cannot create its submit ring: %s\n", mc->name,
			rte_strerror(rte_errno));
		return -rte_errno;
	}
	for (unsigned int w = 0; w < mc->nb_workers; w++)
		cm->workers[w] = (struct cpu_worker){m, w};
	app_reply_layout(m);
	snprintf(cm->poller_name, sizeof(cm->poller_name), "model_%s", mc->name);
	load_report(m, &rep, sizes, nb_sizes);
	return 0;
}

/* ---- telemetry ---------------------------------------------------------------------------------- */

/* Written by the model's owner worker only. */
static void cpu_exec_stats(const struct app_model *m, struct app_exec_stats *sum)
{
	app_exec_stats_sum(sum, &cpu_of(m)->stats);
}

static void cpu_model_telemetry(const struct app_model *m, struct rte_tel_data *d)
{
	const struct cpu_model *cm = cpu_of(m);
	struct rt_executor_stats es;

	rte_tel_data_add_dict_u64(d, "workers", m->cfg.nb_workers);
	rte_tel_data_add_dict_u64(d, "slots", m->cfg.slots);
	rte_tel_data_add_dict_string(d, "precision", rt_precision_name((enum rt_precision)m->cfg.cpu_precision));
	/* the largest size's chunk rows: the rows a batch runs at a time (its size when whole) */
	rte_tel_data_add_dict_u64(d, "chunk_rows", (uint64_t)cm->chunk_rows);
	rt_executor_stats(cm->executor, &es);
	rte_tel_data_add_dict_u64(d, "exec_steps_run", es.steps_run);
	rte_tel_data_add_dict_u64(d, "exec_steps_failed", es.steps_failed);
}

const struct app_engine app_engine_cpu = {
	.name = "cpu",
	.kind = "onnx",
	.device = "cpu",
	.executor = &cpu_executor,
	.request_queue = app_onnx_request_queue,
	.job_done = app_onnx_job_done,
	.init = cpu_init,
	.model_create = cpu_model_create,
	.model_free = cpu_model_free,
	.channel_init = cpu_channel_init,
	.worker_pollers = cpu_worker_pollers,
	.exec_stats = cpu_exec_stats,
	.model_telemetry = cpu_model_telemetry,
};
