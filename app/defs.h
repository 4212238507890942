/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Private to app/: the models as served, their engines, and each polling lcore's part of the
 * service. service.h is the public side (main.c's); these files share the rest:
 *
 *   requests.c    binding a request to its model, queueing it with the batcher, building its reply
 *   models.c      model lifecycle: create (the engine loads it), register, reload, free; service init/fini
 *   versions.c    a model's versions: a file or a directory of numbered ones, the policy's choice
 *   lcores.c      a polling lcore's channels, its pollers, drain; the worker lcores' pollers
 *   engine_echo.c the built-in echo model: a batch finishes as it is submitted
 *   engine_cpu.c  ONNX on the CPU: the model's worker lcores run rt_executor; rings to and from them
 *   engine_gpu.c  ONNX on a GPU: the polling lcore launches and polls; the device, its memory, health
 *   telemetry.c   /batchwire/stats' batch keys, /batchwire/models, /batchwire/model,NAME
 *
 * An engine is a table (struct app_engine) chosen once per model, when it is created: nothing else
 * asks what kind a model is. Per polling lcore, each model has a channel whose executor
 * (struct bw_executor, batchwire/batch.h) the batcher submits to and the completion poller polls.
 */
#ifndef BW_APP_DEFS_H
#define BW_APP_DEFS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <rte_common.h>
#include <rte_lcore.h>

#include <batchwire/batch.h>

#include "service.h"

struct rte_mempool;
struct rte_tel_data;
struct app_model;
struct app_channel;

#define APP_COMPLETION_BURST 32 /* completions a poller hands on per turn */
#define APP_FAIL_LOG_US 1000000 /* a model's failed batches are logged at most once a second per stats */

/* Counters of a model's executor side: written by one thread (the CPU model's owner worker; a GPU
 * model's polling lcore, one set per lcore), read by telemetry. */
struct app_exec_stats {
	uint64_t batches_started;
	uint64_t batches_done;
	uint64_t batches_failed;
	struct plat_log_gate fail_log; /* app_failure_log's: one line a second at most */
	uint64_t queue_wait_us;  /* sum over batches: dispatched by the batcher -> started by the engine */
	uint64_t compute_us;     /* sum over batches: started -> completion seen */
	uint64_t busy_waits;     /* every slot of a batch's size was in flight: it waited its turn */
};

/*
 * What runs a kind of model. The daemon has three (app_engines: echo, cpu, gpu); app_engine_for picks
 * a model's from its configuration, once. Optional members are NULL where the engine has nothing to do.
 */
struct app_engine {
	const char *name;                        /* "echo", "cpu", "gpu" */
	const char *kind;                        /* telemetry's "kind": "echo" or "onnx" */
	const char *device;                      /* telemetry's "device": "cpu" or "gpu" */
	const struct bw_executor_ops *executor;  /* one instance per model and polling lcore */
	/** (hot) Binds a request to the model and queues it with ch's batcher; on error msg says why. */
	enum bw_status (*request_queue)(struct app_channel *ch, struct dp_request *req, uint32_t body_cap, char *msg,
					size_t cap);
	bat_job_done_fn job_done;                /* the batcher is done with a request: its reply */
	/** Once, before any model is created (the CPU kernels' instruction set, the GPU). One line on err. */
	int (*init)(const struct app_config *cfg, FILE *err);
	/** After every model is freed. */
	void (*fini)(void);
	/** Loads the model (m->cfg), fills m->spec (id set), makes what every lcore shares. One line on err. */
	int (*model_create)(struct app_model *m, FILE *err);
	void (*model_free)(struct app_model *m);
	/**
	 * (optional: NULL, the engine cannot) On the reload thread, while the model serves: loads file as
	 * version, beside the served one, and switches to it between batches, the old one freed after its
	 * last; the tensors must stay m->spec's. A failure leaves the served version serving. \return 0,
	 * or a negative errno with why. why may say something on success too ("" otherwise).
	 */
	int (*model_reload)(struct app_model *m, const char *file, uint32_t version, char *why, size_t cap);
	/** A polling lcore's executor instance for the model: fills ch->executor.ctx. \return 0 or -errno. */
	int (*channel_init)(struct app_channel *ch, int socket);
	/** The pollers this model runs on worker lcore lcore_id (optional). \return how many written. */
	unsigned int (*worker_pollers)(struct app_model *m, unsigned int lcore_id, struct plat_poller *pollers,
				       unsigned int room);
	/** The mbuf pools' memory, before any port starts (optional). \return 0 or -errno, one line on err. */
	int (*memory_register)(struct rte_mempool *const *pools, unsigned int nb_pools, FILE *err);
	/** The model's executor counters, summed over wherever they are kept (optional: it has none). */
	void (*exec_stats)(const struct app_model *m, struct app_exec_stats *sum);
	/** Adds the engine's own keys to the model's /batchwire/model dict. */
	void (*model_telemetry)(const struct app_model *m, struct rte_tel_data *d);
	/** Registers the engine's own telemetry commands (optional). \return 0 or -errno. */
	int (*telemetry_register)(void);
};

extern const struct app_engine app_engine_echo;
extern const struct app_engine app_engine_cpu;
extern const struct app_engine app_engine_gpu;

/* Every engine, in the order their init runs. */
extern const struct app_engine *const app_engines[];
extern const unsigned int app_nb_engines;

/** The engine a configured model runs on. */
const struct app_engine *app_engine_for(const struct app_model_config *mc);

struct app_model;

/*
 * version_policy = latest N > 1: N versions of one model served at once, each an app_model of its own
 * (its id, channels, batchers, executor, limiter). member[0] is registered under the name and holds
 * the set; requests reach the others through it, by the version they name (app_model_version).
 * A reload may move a member to another version; latest follows.
 */
struct app_versions_served {
	unsigned int nb;
	struct app_model *member[APP_VERSIONS_SERVED_MAX];
	uint32_t latest;                 /* the member an unversioned request goes to (atomic: a reload writes it) */
};

/* One model as served. Read-only after init except where an engine says. */
struct app_model {
	struct rt_model spec;            /* registered; MODEL_INFO describes it */
	struct app_model_config cfg;
	const struct app_engine *engine;
	struct bat_limiter *limiter;     /* in-flight limit shared by every polling lcore */
	uint32_t reply_desc_bytes;       /* output descriptors with their names, as every reply has them */
	uint32_t output_row_bytes;       /* all outputs of one row */
	struct rte_lpm *allow;           /* cfg.allow's table, read by every polling lcore; NULL: all */
	void *priv;                      /* the engine's (struct cpu_model, struct gpu_model) */
	/* Versions (app/versions.c): cfg.path is the served version's file, source what was configured
	 * (the file, or the directory of numbered versions); version is the served one (atomic: a reload
	 * writes it, as m->spec.version), the rest the reload thread's, under app_reload_lock */
	char source[APP_PATH_MAX];
	uint32_t version;
	uint64_t reloads, reload_failures;
	char reload_last[256];           /* the last reload's outcome, "" before any */
	struct app_versions_served *served; /* latest N > 1: the set (every member points at member[0]'s
					     * versions_set); NULL otherwise */
	struct app_versions_served versions_set; /* member[0]'s */
} __rte_cache_aligned;

/**
 * (hot) Which model serves version want of m (m the registered one): 0 names none, and gets the
 * highest served. \return that model, or NULL when no version want is served.
 */
static inline struct app_model *app_model_version(struct app_model *m, uint32_t want)
{
	const struct app_versions_served *vs = m->served;

	if (likely(vs == NULL))
		return want == 0 || want == __atomic_load_n(&m->version, __ATOMIC_ACQUIRE) ? m : NULL;
	if (want == 0)
		return vs->member[__atomic_load_n(&vs->latest, __ATOMIC_ACQUIRE)];
	for (unsigned int i = 0; i < vs->nb; i++) {
		if (__atomic_load_n(&vs->member[i]->version, __ATOMIC_ACQUIRE) == want)
			return vs->member[i];
	}
	return NULL;
}

/** Whether m is one a request reaches by its name alone: not a second member of a set of versions. */
static inline bool app_model_is_named(const struct app_model *m)
{
	return m->served == NULL || m->served->member[0] == m;
}

/** The versions m (the registered one) serves, ascending, into v (APP_VERSIONS_SERVED_MAX room). \return how many. */
unsigned int app_model_versions(const struct app_model *m, uint32_t *v);

/** The same as "2, 3". \return what snprintf does. */
int app_model_versions_format(const struct app_model *m, char *buf, size_t cap);

/* One model on one polling lcore. */
struct app_channel {
	struct app_lcore *lcore;
	struct app_model *model;
	struct bat_queue *queue;
	struct bw_executor executor;     /* the engine's, for this lcore: the batcher submits, the lcore polls */
};

/* A batch finished on its polling lcore without leaving it (echo, a GPU launch that failed). */
struct app_deferred {
	struct bw_batch *batch;
	enum bw_status status;
};

/* One polling lcore's part of the service: written only by that lcore (telemetry reads stats). */
struct app_lcore {
	struct dp_lcore *dp;
	unsigned int lcore_id;
	unsigned int nb_channels;
	struct app_channel channels[APP_MODELS_MAX]; /* index: the model's id */
	/* batches finished at submit, waiting for the completion poller: SP/SC on one lcore */
	struct app_deferred deferred[APP_DEFERRED_MAX];
	uint32_t deferred_head;
	uint32_t deferred_count;
	uint64_t now_tsc;                /* the completion poller's clock, for the engines' polls */
	struct rte_ring *inject;         /* inject.c's: requests from the HTTP server, or NULL */
} __rte_cache_aligned;

/* Every polling lcore's part, by lcore id; the service being run (NULL before init, after fini). */
extern struct app_lcore app_lcores[RTE_MAX_LCORE];
extern struct app_service *app_current;

/** Whether an lcore runs model steps and does not poll the port (a worker lcore of its own). */
static inline bool app_lcore_is_worker_only(unsigned int lcore_id)
{
	return rte_lcore_is_enabled(lcore_id) && app_lcores[lcore_id].dp == NULL && app_service_is_worker(lcore_id);
}

/** After the lcores stopped, on the main thread: every channel's executor instance freed. */
void app_lcores_stop(void);

/* ---- versions and reloads (versions.c, models.c) ------------------------------------------------ */

#define APP_VERSIONS_MAX 64 /* versions of a directory listed in telemetry and the repository index */

/**
 * Version want of source (a file: version 1; a directory: its numbered subdirectories N holding
 * model.onnx, Triton's layout), want 0 naming the highest (version_policy latest; specific N: N):
 * its number and file. \return 0, or a negative errno with why.
 */
int app_version_resolve(const char *source, uint32_t want, uint32_t *version, char *file, size_t file_cap, char *why,
			size_t why_cap);

/**
 * The highest max versions source holds, ascending, whatever order its directory lists them in (a
 * file: 1). \return how many (at most max), or a negative errno.
 */
int app_versions_list(const char *source, uint32_t *versions, unsigned int max);

/** Whether a new version serves the same tensors as the model's (names, dtypes, shapes, index bounds).
 * \return 0, or -EINVAL with why naming the first difference. */
int app_model_signature_check(const struct rt_model *served, const struct rt_model *fresh, char *why, size_t cap);

/** Held by app_models_reload for a whole reload; telemetry tries it to read a model's reload fields. */
extern pthread_mutex_t app_reload_mutex;

/** Whether app_reloads_stop was called: a reload's waits give up. */
bool app_reloads_stopping(void);

/* ---- requests.c -------------------------------------------------------------------------------- */

/** The dataplane's view of the models served by svc (infer's context: the polling lcore's app_lcore). */
struct dp_model_ops app_model_ops(struct app_service *svc);

/** Fills reply_desc_bytes and output_row_bytes from the spec's outputs. */
void app_reply_layout(struct app_model *m);

/* Echo takes any tensors and answers with them; ONNX models bind the request to their inputs. */
enum bw_status app_echo_request_queue(struct app_channel *ch, struct dp_request *req, uint32_t body_cap, char *msg,
				      size_t cap);
enum bw_status app_onnx_request_queue(struct app_channel *ch, struct dp_request *req, uint32_t body_cap, char *msg,
				      size_t cap);

/**
 * (hot) Every batcher's done(): a datagram's job goes to its engine's job_done, an injected one's
 * (owner[1] NULL: no protocol header) to its slot (inject.c).
 */
void app_job_done(void *ctx, struct bat_job *job, enum bw_status status);

/** (hot) A blank job of the queue for a request of rows rows and these tensor counts, or NULL with msg
 * saying why (every job in use). */
struct bat_job *app_job_take(struct bat_queue *q, uint32_t rows, uint16_t num_inputs, uint16_t num_outputs,
			     char *msg, size_t cap);

/** (hot) Whether the channel's executor can take batches; if not, msg says the model is unavailable
 * and why. */
bool app_channel_healthy(const struct app_channel *ch, char *msg, size_t cap);

/** "[1,784]", or with batch "N" or "-1" in place of the first dimension: a shape in a message. */
void app_shape_format(char *buf, size_t cap, const uint32_t *dims, uint8_t rank, const char *batch);

/** (hot) Why bat_submit refused a job of rows rows with status. */
void app_job_refusal(const struct bat_queue *q, uint32_t rows, enum bw_status status, char *msg, size_t cap);

/** What a failed job's reply says, by the batch's status. */
const char *app_job_error_message(enum bw_status status);

#define APP_JOB_TEXT_MAX 200
/** (hot) Why a job of model m ended with status: app_job_error_message's, or, for a job admitted to a
 * version a reload has since replaced, that version named (written into buf). */
const char *app_job_refusal_text(const struct app_model *m, const struct bat_job *job, enum bw_status status, char *buf,
				 size_t cap);

/**
 * (hot) The version a request naming version named (0: whichever serves) is admitted to: m's
 * served one, read once; false (msg says why) when it is not the one named.
 */
bool app_version_admit(const struct app_model *m, uint32_t named, uint32_t *version, char *msg, size_t cap);

struct rt_tensor_spec;
/**
 * (hot) An input that indexes a table of the model (spec->index_bound): whether every value of seg
 * lies within it, msg naming the first that does not.
 */
bool app_index_check(const struct rt_tensor_spec *spec, const struct bw_segment *seg, char *msg, size_t cap);

/** The batcher is done with an echo request / an ONNX one: answer it from its own mbuf. */
void app_echo_job_done(void *ctx, struct bat_job *job, enum bw_status status);
void app_onnx_job_done(void *ctx, struct bat_job *job, enum bw_status status);

/* ---- engines' shared pieces ---------------------------------------------------------------------- */

/**
 * (hot) A batch finished at submit completes from the completion poller, never inside submit (the
 * batcher is still dispatching it), as a real executor's would. \return 0, or -ENOBUFS (UNAVAILABLE).
 */
int app_deferred_push(struct app_lcore *al, struct bw_batch *batch, enum bw_status status);

/** Logs a failed batch, at most one line every APP_FAIL_LOG_US for st (by time: a flood of bad requests
 *  costs one line a second), saying how many were not logged since the last. */
void app_failure_log(const struct app_model *m, struct app_exec_stats *st, bool per_lcore, const char *msg);

/* ---- the batchers' counters, as telemetry and /metrics read them (telemetry.c) ---- */

/** One model's batcher counters over the polling lcores (model < 0: every model; lcore < 0: every
 * polling lcore), on a reader's thread. */
void app_stats_sum(int model, int lcore, struct bat_stats *sum);
/** The distributions in struct bat_stats: how many, their names ("latency_us"...), each. */
unsigned int app_hist_count(void);
const char *app_hist_name(unsigned int h);
const struct bw_hist *app_hist_get(const struct bat_stats *s, unsigned int h);

/** Adds st to sum. */
void app_exec_stats_sum(struct app_exec_stats *sum, const struct app_exec_stats *st);

#endif /* BW_APP_DEFS_H */
