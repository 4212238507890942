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
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_pause.h>
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>
#include <rte_telemetry.h>

#include "defs.h"
#include "exec/executor.h"
#include "exec/plan.h"
#include "graph.h"

#define CPU_SUBMIT_BURST 8 /* batches an owner worker takes from its submit ring per turn */
#define CPU_OLD_KEEP_US 50000 /* beside twice batch_timeout_micros: a replaced version kept after the switch */

/* One worker lcore's part of a model: which worker index it is. */
struct cpu_worker {
	struct app_model *model;
	unsigned int index;
};

/*
 * One loaded version of a model: its graph and the executor planned for it. A model has one live
 * version; a reload (cpu_model_reload) makes the next one beside it and the owner worker switches
 * between batches, the old one draining its batches in flight before it is freed.
 */
struct cpu_version {
	struct rt_model spec;           /* this version's graph; its tensors are the model's (m->spec) */
	struct rt_executor *executor;
	int64_t chunk_rows;             /* rows the largest size runs at a time: that size when whole */
	uint32_t version;
	/* the owner worker's: batches started on it and finished, so it knows when it has drained */
	uint64_t started, finished;
};

/*
 * A model's CPU side (app_model.priv). Read-only after create except the owner's part and the
 * versions, whose hand-over is:
 *   reload thread --pending--> owner: takes it between batches: live becomes old, pending live
 *   owner --retired--> reload thread: old has no batch left; once every worker has passed a
 *                      quiescent state (qsbr) since, no worker can be inside it: freed
 * The workers read live and old (acquire) at every poll, and report a quiescent state after.
 */
struct cpu_model {
	struct cpu_version *live;       /* new batches start here */
	struct cpu_version *old;        /* draining: NULL when none; batches admitted to it still run on it */
	uint64_t old_keep_tsc;          /* the owner's: old is kept at least until then (old_keep) */
	struct cpu_version *pending;    /* the next version, published by a reload; NULL when none */
	struct cpu_version *retired;    /* drained, for the reload thread to free; NULL when none */
	struct rte_rcu_qsbr *qsbr;      /* the workers (thread id: worker index) */
	pthread_mutex_t tel_lock;       /* telemetry reading live against the reload freeing a version */
	struct rt_executor_stats steps_freed; /* the freed versions' executor counters */
	struct rte_ring *submit_ring;   /* MP: polling lcores; SC: the owner worker */
	unsigned int ring_size;         /* of the submit and the completion rings: > every batch in flight */
	int64_t sizes[BAT_BATCH_SIZE_MAX];
	unsigned int nb_sizes;
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

/*
 * The version a batch runs on: the one it was admitted to (bw_batch.version), live or the one a
 * reload replaced while it is still loaded; when that one is gone, the live one, unless a request
 * of the batch named its version (NULL: it is refused, never run on another).
 */
static struct cpu_version *batch_version(const struct cpu_model *cm, const struct bw_batch *b)
{
	if (likely(cm->live->version == b->version))
		return cm->live;
	if (cm->old != NULL && cm->old->version == b->version)
		return cm->old;
	return b->version_pinned ? NULL : cm->live;
}

/* \return 0, or -EBUSY when every slot of its size is in flight (the caller keeps it for later). */
static int model_batch_start(struct app_model *m, struct bw_batch *b)
{
	struct cpu_model *cm = cpu_of(m);
	struct cpu_version *v = batch_version(cm, b);
	/* Read after the dequeue: a clock read before it could precede the batch's dispatch on its
	 * polling lcore. The TSC is invariant and synchronised across cores. */
	uint64_t now = plat_tsc_now();
	int ret;

	b->started_tsc = now;
	if (unlikely(v == NULL)) {
		/* a request named a version that is no longer loaded: never run on another (the job's
		 * reply names the version) */
		cm->stats.batches_started++;
		cm->stats.batches_done++;
		cm->stats.batches_failed++;
		completion_send(b->exec_route, b, BW_STATUS_UNAVAILABLE, 0);
		return 0;
	}
	ret = rt_executor_submit(v->executor, b);
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
		return 0;
	}
	v->started++;
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

/* A version's finished batches back to their lcores; \return how many. */
static unsigned int version_completions(struct app_model *m, struct cpu_version *v)
{
	unsigned int n = rt_executor_poll_completions(v->executor, model_completion, m, APP_COMPLETION_BURST);

	v->finished += n;
	return n;
}

/*
 * The owner, between batches: takes a pending version (once the last one has drained and been
 * handed back), and hands the old one back once its last batch is done. A batch waiting in the
 * stash was never started: it starts on its own version if that one is still loaded (batch_version).
 */
/*
 * How long the version a reload replaced stays loaded after the switch, drained or not: requests
 * admitted to it before the polling lcores saw the switch may still be in a window (batch_timeout)
 * or a queue; their batches run on it. One that comes later still runs on the live version, or is
 * refused UNAVAILABLE when a request of it named the old one (batch_version).
 */
static uint64_t old_keep_ticks(const struct app_model *m)
{
	return plat_us_to_tsc(2ull * m->cfg.batching.batch_timeout_micros + CPU_OLD_KEEP_US);
}

static void versions_switch(struct app_model *m, struct cpu_model *cm)
{
	struct cpu_version *next = __atomic_load_n(&cm->pending, __ATOMIC_ACQUIRE);

	if (cm->old != NULL && cm->old->finished == cm->old->started && plat_tsc_now() >= cm->old_keep_tsc &&
	    __atomic_load_n(&cm->retired, __ATOMIC_ACQUIRE) == NULL) {
		struct cpu_version *done = cm->old;

		__atomic_store_n(&cm->old, NULL, __ATOMIC_RELEASE);
		__atomic_store_n(&cm->retired, done, __ATOMIC_RELEASE);
	}
	if (next != NULL && cm->old == NULL) {
		__atomic_store_n(&cm->old, cm->live, __ATOMIC_RELEASE);
		__atomic_store_n(&cm->live, next, __ATOMIC_RELEASE);
		/* routed from this moment: a request admitted from here on names, and runs on, the new one */
		__atomic_store_n(&m->spec.version, next->version, __ATOMIC_RELEASE);
		__atomic_store_n(&m->version, next->version, __ATOMIC_RELEASE);
		cm->old_keep_tsc = plat_tsc_now() + old_keep_ticks(m);
		__atomic_store_n(&cm->pending, NULL, __ATOMIC_RELEASE);
	}
}

/* The model's first worker: starts batches, runs steps, hands completions back. */
static enum plat_poll_result model_owner_poll(void *arg)
{
	struct cpu_worker *w = arg;
	struct app_model *m = w->model;
	struct cpu_model *cm = cpu_of(m);
	unsigned int done;

	if (__atomic_load_n(&cm->pending, __ATOMIC_RELAXED) != NULL || cm->old != NULL)
		versions_switch(m, cm);
	done = model_batches_start(m);
	done += rt_executor_work(cm->live->executor, 0);
	done += version_completions(m, cm->live);
	if (cm->old != NULL) {
		done += rt_executor_work(cm->old->executor, 0);
		done += version_completions(m, cm->old);
	}
	rte_rcu_qsbr_quiescent(cm->qsbr, 0);
	return done != 0 ? PLAT_POLL_BUSY : PLAT_POLL_IDLE;
}

static enum plat_poll_result model_worker_poll(void *arg)
{
	struct cpu_worker *w = arg;
	struct cpu_model *cm = cpu_of(w->model);
	struct cpu_version *live = __atomic_load_n(&cm->live, __ATOMIC_ACQUIRE);
	struct cpu_version *old = __atomic_load_n(&cm->old, __ATOMIC_ACQUIRE);
	unsigned int done = rt_executor_work(live->executor, w->index);

	if (old != NULL)
		done += rt_executor_work(old->executor, w->index);
	rte_rcu_qsbr_quiescent(cm->qsbr, w->index);
	return done != 0 ? PLAT_POLL_BUSY : PLAT_POLL_IDLE;
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

/*
 * What one version of the model may take in memory: its constants (weights, folded and packed ones)
 * and its executor's arenas, checked before each is allocated. A reload's new version is held to it
 * on its own, beside the served one (so a reload may take twice it for a while).
 * memory_budget_mb, or half the host's memory: a file of a few hundred bytes can ask for more than
 * the host has, and the reload runs inside the serving process.
 */
static uint64_t memory_budget(const struct app_model_config *mc)
{
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);

	if (mc->memory_budget_mb != 0)
		return mc->memory_budget_mb << 20;
	return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page / 2 : 0;
}

static void load_report(const struct app_model *m, const struct cpu_version *v, const struct rt_opt_report *rep,
			const char *file)
{
	const struct cpu_model *cm = cpu_of(m);
	char fusions[512] = "";
	size_t off = 0, arena = 0;

	for (uint32_t k = 0; k < rep->num_kinds && off < sizeof(fusions); k++)
		off += (size_t)snprintf(fusions + off, sizeof(fusions) - off, "%s%s x%u", k > 0 ? ", " : "",
					rep->kinds[k].what, rep->kinds[k].count);
	char depth[96] = "";
	unsigned int chunked = 0;

	for (unsigned int s = 0; s < cm->nb_sizes; s++) {
		int64_t rows = rt_executor_chunk_rows(v->executor, cm->sizes[s]);

		arena += rt_plan_arena_bytes(rt_executor_plan(v->executor, cm->sizes[s]));
		if (rows < cm->sizes[s] && chunked++ == 0)
			snprintf(depth, sizeof(depth), ", depth first in chunks of %" PRId64 " rows", rows);
	}
	if (chunked > 0)
		snprintf(depth + strlen(depth), sizeof(depth) - strlen(depth), " at %u sizes", chunked);
	PLAT_LOG(INFO, app, "model '%s' (id %u) version %u from %s: %u inputs, %u outputs, %u nodes (%u after "
		 "optimisation%s%s), precision %s, %u batch sizes up to %" PRId64 "%s, %u slots each (%zu KiB of "
		 "arenas), %u worker lcores from %u; %" PRIu64 " MiB of constants and arenas of a %" PRIu64 " MiB "
		 "budget", m->spec.name, m->spec.id, v->version, file, m->spec.num_inputs,
		 m->spec.num_outputs, rep->nodes_before, rep->nodes_after, off > 0 ? ": " : "", fusions,
		 rt_precision_name((enum rt_precision)m->cfg.cpu_precision), cm->nb_sizes, cm->sizes[cm->nb_sizes - 1],
		 depth, m->cfg.slots, arena * m->cfg.slots / 1024, m->cfg.nb_workers, m->cfg.workers[0],
		 (rt_graph_constant_bytes(v->spec.graph) + arena * m->cfg.slots) >> 20, v->spec.graph->memory_budget >> 20);
}

/*
 * Whether the model's batches run depth first (rt_plan_chunk_auto, plan.h): chunk_rows off, N, or
 * auto, measured once at the largest size, each smaller size it divides taking the same chunks.
 * \return the rows of the chunk (sizes[nb - 1]: whole), or a negative errno with why.
 */
static int64_t chunk_choose(const struct app_model *m, const struct rt_graph *g, const char *file, char *why,
			    size_t cap)
{
	const struct app_model_config *mc = &m->cfg;
	const struct cpu_model *cm = cpu_of(m);
	int64_t big = cm->sizes[cm->nb_sizes - 1], rows;
	char report[320], err[RT_ERR_MAX];

	if (mc->chunk_rows < 0)
		return big;
	if (mc->chunk_rows > 0)
		return mc->chunk_rows;
	PLAT_LOG(INFO, app, "model '%s': choosing how to run batch %" PRId64 ", whole or in chunks (chunk_rows = "
		 "auto: timed when its arena passes 1 MiB; off skips this)", mc->name, big);
	rows = rt_plan_chunk_auto(g, big, report, sizeof(report), err, sizeof(err));
	if (rows < 0) {
		snprintf(why, cap, "%s: choosing how to run batch %" PRId64 ": %s", file, big, err);
		return rows;
	}
	if (report[0] != '\0')
		PLAT_LOG(INFO, app, "model '%s': %s", mc->name, report);
	return rows;
}

static void version_free(struct cpu_version *v)
{
	if (v == NULL)
		return;
	rt_executor_destroy(v->executor);
	rt_model_fini(&v->spec);
	rte_free(v);
}

/*
 * Loads file as version of m: optimised, planned at every allowed size, its weights packed, its
 * executor made for the model's workers and slots. \return it, or NULL with why (errno set).
 * sig: the tensors it must serve (NULL: none yet, the first version defines them).
 */
static struct cpu_version *version_load(struct app_model *m, const char *file, uint32_t version,
					const struct rt_model *sig, struct rt_opt_report *rep, char *why, size_t cap)
{
	struct app_model_config *mc = &m->cfg;
	struct cpu_model *cm = cpu_of(m);
	struct cpu_version *v = rte_zmalloc("bw_cpu_version", sizeof(*v), RTE_CACHE_LINE_SIZE);
	int64_t chunks[BAT_BATCH_SIZE_MAX], chunk;
	char err[RT_ERR_MAX * 2];
	int ret;

	if (v == NULL) {
		snprintf(why, cap, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	v->version = version;
	ret = rt_onnx_model_load(&v->spec, m->spec.id, mc->name, file, RT_DEVICE_CPU,
				 &(struct rt_opt_options){ .precision = (enum rt_precision)mc->cpu_precision,
							   .memory_budget = memory_budget(mc) },
				 rep, err, sizeof(err));
	if (ret == 0 && sig != NULL)
		ret = app_model_signature_check(sig, &v->spec, err, sizeof(err));
	if (ret != 0) {
		snprintf(why, cap, "%s: %s", file, err);
		version_free(v);
		errno = -ret;
		return NULL;
	}
	chunk = chunk_choose(m, v->spec.graph, file, why, cap);
	if (chunk < 0) {
		version_free(v);
		errno = (int)-chunk;
		return NULL;
	}
	for (unsigned int s = 0; s < cm->nb_sizes; s++) /* the sizes the chunk divides, and is smaller than */
		chunks[s] = chunk < cm->sizes[s] && cm->sizes[s] % chunk == 0 ? chunk : cm->sizes[s];
	v->chunk_rows = chunks[cm->nb_sizes - 1];
	v->executor = rt_executor_create_chunked(v->spec.graph, NULL, cm->sizes, chunks, cm->nb_sizes, mc->nb_workers,
						 mc->slots, err, sizeof(err));
	if (v->executor == NULL) {
		ret = errno;
		snprintf(why, cap, "%s: %s", file, err);
		version_free(v);
		errno = ret;
		return NULL;
	}
	return v;
}

static void cpu_model_free(struct app_model *m)
{
	struct cpu_model *cm = cpu_of(m);

	if (cm != NULL) {
		version_free(cm->live);
		version_free(cm->old);
		version_free(cm->pending);
		version_free(cm->retired);
		rte_ring_free(cm->submit_ring);
		rte_free(cm->qsbr);
		rte_free(cm);
	}
	m->priv = NULL;
	rt_model_fini(&m->spec);
}

static int cpu_model_create(struct app_model *m, FILE *err)
{
	struct app_model_config *mc = &m->cfg;
	const struct bat_options *o = &mc->batching;
	unsigned int inflight = app_model_inflight_max(mc);
	size_t qsbr_size;
	struct rt_opt_report rep;
	char why[RT_ERR_MAX * 2 + APP_PATH_MAX], name[RTE_RING_NAMESIZE];
	struct cpu_model *cm;
	int ret;

	ret = workers_check(mc, err);
	if (ret != 0)
		return ret;
	cm = rte_zmalloc("bw_cpu_model", sizeof(*cm), RTE_CACHE_LINE_SIZE);
	if (cm == NULL) {
		fprintf(err, "batchwire: model '%s': out of memory\n", mc->name);
		return -ENOMEM;
	}
	m->priv = cm;
	pthread_mutex_init(&cm->tel_lock, NULL);
	if (o->num_allowed_batch_sizes > 0) {
		for (unsigned int i = 0; i < o->num_allowed_batch_sizes; i++)
			cm->sizes[cm->nb_sizes++] = o->allowed_batch_sizes[i];
	} else {
		for (uint32_t s = 1; s <= bat_options_batch_capacity(o); s++)
			cm->sizes[cm->nb_sizes++] = s;
	}
	/* Each slot is an arena per batch size; more slots than the in-flight limit would never be used,
	 * and one more than the workers keeps them busy while a batch is gathered or scattered. */
	if (mc->slots == 0)
		mc->slots = RTE_MAX(1u, RTE_MIN(inflight, mc->nb_workers + 1));
	cm->live = version_load(m, mc->path, m->version, NULL, &rep, why, sizeof(why));
	if (cm->live == NULL) {
		ret = -errno;
		fprintf(err, "batchwire: model '%s': %s\n", mc->name, why);
		return ret;
	}
	/* the model's tensors, as MODEL_INFO and the requests' binding read them; the graph stays the
	 * version's */
	m->spec = cm->live->spec;
	m->spec.graph = NULL;
	m->spec.version = m->version;
	qsbr_size = rte_rcu_qsbr_get_memsize(mc->nb_workers);
	cm->qsbr = rte_zmalloc("bw_cpu_qsbr", qsbr_size, RTE_CACHE_LINE_SIZE);
	if (cm->qsbr == NULL || rte_rcu_qsbr_init(cm->qsbr, mc->nb_workers) != 0) {
		fprintf(err, "batchwire: model '%s': out of memory for its workers' quiescent states\n", mc->name);
		return -ENOMEM;
	}
	for (unsigned int w = 0; w < mc->nb_workers; w++) {
		rte_rcu_qsbr_thread_register(cm->qsbr, w);
		rte_rcu_qsbr_thread_online(cm->qsbr, w);
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
	load_report(m, cm->live, &rep, mc->path);
	return 0;
}

/* ---- reload ------------------------------------------------------------------------------------- */

#define CPU_RELOAD_WAIT_S 30ull /* for the owner to switch, the old version to drain */

/*
 * On the reload thread (app_models_reload): the new version made beside the live one, published
 * for the owner worker to take between batches, and the old one freed once its last batch is done
 * and every worker has passed a quiescent state since. A version that fails to load leaves the
 * live one as it was. \return 0, or a negative errno with why.
 */
static int cpu_model_reload(struct app_model *m, const char *file, uint32_t version, char *why, size_t cap)
{
	struct cpu_model *cm = cpu_of(m);
	struct cpu_version *v, *done = NULL;
	struct rt_opt_report rep;
	uint64_t deadline, token;

	v = version_load(m, file, version, &m->spec, &rep, why, cap);
	if (v == NULL)
		return -errno;
	load_report(m, v, &rep, file);
	__atomic_store_n(&cm->pending, v, __ATOMIC_RELEASE);
	deadline = plat_tsc_now() + plat_us_to_tsc(CPU_RELOAD_WAIT_S * 1000000ull);
	while (__atomic_load_n(&cm->pending, __ATOMIC_ACQUIRE) != NULL) {
		if (plat_tsc_now() > deadline || app_reloads_stopping()) {
			struct cpu_version *mine = v;

			/* the owner never came: take it back, unless it is taking it now */
			if (__atomic_compare_exchange_n(&cm->pending, &mine, NULL, false, __ATOMIC_ACQ_REL,
							__ATOMIC_ACQUIRE)) {
				version_free(v);
				snprintf(why, cap, app_reloads_stopping() ? "the server is stopping" :
					 "the model's owner worker (lcore %u) did not take the new version within %llu s",
					 m->cfg.workers[0], CPU_RELOAD_WAIT_S);
				return -ETIMEDOUT;
			}
		}
		usleep(200);
	}
	/* switched: the owner routed requests to v as it took it (versions_switch) */
	while ((done = __atomic_load_n(&cm->retired, __ATOMIC_ACQUIRE)) == NULL) {
		if (plat_tsc_now() > deadline || app_reloads_stopping()) {
			snprintf(why, cap, "version %u serves, but the old one still had batches in flight after %llu s: "
				 "it is freed with the model", version, CPU_RELOAD_WAIT_S);
			return 0;
		}
		usleep(200);
	}
	token = rte_rcu_qsbr_start(cm->qsbr);
	while (rte_rcu_qsbr_check(cm->qsbr, token, false) == 0) {
		if (plat_tsc_now() > deadline || app_reloads_stopping()) {
			snprintf(why, cap, "version %u serves; a worker did not poll since the switch, so the old "
				 "version is freed with the model", version);
			return 0;
		}
		usleep(200);
	}
	__atomic_store_n(&cm->retired, NULL, __ATOMIC_RELEASE);
	pthread_mutex_lock(&cm->tel_lock);
	{
		struct rt_executor_stats es;

		rt_executor_stats(done->executor, &es);
		cm->steps_freed.steps_run += es.steps_run;
		cm->steps_freed.steps_failed += es.steps_failed;
	}
	version_free(done);
	pthread_mutex_unlock(&cm->tel_lock);
	why[0] = '\0';
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
	/* a version is freed under tel_lock: the live one read here stays while it is held */
	pthread_mutex_lock((pthread_mutex_t *)&cm->tel_lock);
	{
		const struct cpu_version *live = __atomic_load_n(&cm->live, __ATOMIC_ACQUIRE);

		rte_tel_data_add_dict_u64(d, "chunk_rows", (uint64_t)live->chunk_rows);
		rt_executor_stats(live->executor, &es);
		es.steps_run += cm->steps_freed.steps_run;
		es.steps_failed += cm->steps_freed.steps_failed;
	}
	pthread_mutex_unlock((pthread_mutex_t *)&cm->tel_lock);
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
	.model_reload = cpu_model_reload,
	.channel_init = cpu_channel_init,
	.worker_pollers = cpu_worker_pollers,
	.exec_stats = cpu_exec_stats,
	.model_telemetry = cpu_model_telemetry,
};
