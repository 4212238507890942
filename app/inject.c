/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Requests from inside the process into the polling lcores' batchers (inject.h says who owns what).
 * The HTTP side's calls run on its threads: they take and give back slots (the pool's ring, no
 * per-lcore cache) and enqueue on an lcore's ring. The lcore's side is on the hot path: a burst
 * off its ring, a batcher job per slot pointing at the slot's bytes, nothing copied, no lock,
 * allocation or system call.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <semaphore.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <rte_lcore.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include "defs.h"
#include "inject.h"

static struct {
	struct rte_mempool *pool;
	uint32_t slot_bytes;
	struct rte_ring *rings[RTE_MAX_LCORE]; /* the polling lcores', in set-up order */
	unsigned int nb_rings;                 /* atomic: published after the ring */
	unsigned int next;                     /* atomic: the ring the next request tries first */
	bool closed;                           /* atomic */
	sem_t free_slots;                      /* counts the pool's free slots: takers sleep on it */
	bool sem_made;
} g_inject;

/* A waiter on r's state sleeps in the kernel until the lcore's answer (or ns pass). */
static void state_wait(struct app_inject *r, uint32_t seen, uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };

	syscall(SYS_futex, &r->state, FUTEX_WAIT_PRIVATE, seen, &ts, NULL, 0);
}

static void state_wake(struct app_inject *r)
{
	syscall(SYS_futex, &r->state, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* A slot back in the pool, and one more for whoever waits for one. */
static void slot_put(struct app_inject *r)
{
	rte_mempool_put(g_inject.pool, r);
	sem_post(&g_inject.free_slots);
}

/* What one request of max_batch_size rows of the model takes: its inputs and outputs, each aligned. */
static uint64_t model_slot_need(const struct app_model *m)
{
	const struct rt_model *s = &m->spec;
	uint64_t rows = RTE_MAX(s->max_batch_size, 1u), need = 0;

	for (uint16_t i = 0; i < s->num_inputs; i++)
		need += RTE_ALIGN_CEIL(rows * s->input_row_bytes[i], RTE_CACHE_LINE_SIZE);
	for (uint16_t o = 0; o < s->num_outputs; o++)
		need += RTE_ALIGN_CEIL(rows * s->output_row_bytes[o], RTE_CACHE_LINE_SIZE);
	return need;
}

int app_inject_init(const struct app_service *svc, unsigned int slots, uint32_t bytes_max, FILE *err)
{
	uint64_t need = APP_INJECT_SLOT_MIN;

	memset(&g_inject, 0, sizeof(g_inject));
	if (slots == 0)
		return 0;
	for (unsigned int i = 0; i < svc->nb_models; i++)
		need = RTE_MAX(need, model_slot_need(svc->models[i]));
	g_inject.slot_bytes = (uint32_t)RTE_ALIGN_CEIL(RTE_MIN(need, (uint64_t)bytes_max), RTE_CACHE_LINE_SIZE);
	/* No cache: HTTP threads are not lcores, and an lcore frees only the slots given up on. */
	g_inject.pool = rte_mempool_create("bw_inject", slots, sizeof(struct app_inject) + g_inject.slot_bytes, 0, 0,
					   NULL, NULL, NULL, NULL, SOCKET_ID_ANY, 0);
	if (g_inject.pool == NULL) {
		fprintf(err, "batchwire: cannot make %u HTTP inference slots of %" PRIu32 " bytes (http_infer_slots, "
			"http_infer_bytes): %s\n", slots, g_inject.slot_bytes, rte_strerror(rte_errno));
		return -ENOMEM;
	}
	sem_init(&g_inject.free_slots, 0, slots);
	g_inject.sem_made = true;
	return 0;
}

void app_inject_fini(void)
{
	if (g_inject.sem_made)
		sem_destroy(&g_inject.free_slots);
	rte_mempool_free(g_inject.pool);
	memset(&g_inject, 0, sizeof(g_inject));
}

struct rte_mempool *app_inject_pool(void)
{
	return g_inject.pool;
}

uint32_t app_inject_slot_bytes(void)
{
	return g_inject.slot_bytes;
}

int app_inject_lcore_init(struct app_lcore *al, int socket)
{
	char name[RTE_RING_NAMESIZE];
	unsigned int n;

	if (g_inject.pool == NULL)
		return 0;
	snprintf(name, sizeof(name), "bw_inject_%u", al->lcore_id);
	al->inject = rte_ring_create(name, APP_INJECT_RING_SIZE, socket, RING_F_SC_DEQ);
	if (al->inject == NULL)
		return -rte_errno;
	n = __atomic_load_n(&g_inject.nb_rings, __ATOMIC_RELAXED);
	g_inject.rings[n] = al->inject;
	__atomic_store_n(&g_inject.nb_rings, n + 1, __ATOMIC_RELEASE);
	return 0;
}

void app_inject_lcore_fini(struct app_lcore *al)
{
	/* A slot still on the ring belongs to the pool, freed whole by app_inject_fini. */
	rte_ring_free(al->inject);
	al->inject = NULL;
}

/* ---- the HTTP side ---------------------------------------------------------------------------- */

struct app_inject *app_inject_take(uint64_t wait_us)
{
	struct timespec until;
	void *obj;

	if (g_inject.pool == NULL)
		return NULL;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += (time_t)(wait_us / 1000000);
	until.tv_nsec += (long)(wait_us % 1000000) * 1000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	/* the count says a slot is free: the pool then has one (it is put back before the post) */
	while (sem_clockwait(&g_inject.free_slots, CLOCK_MONOTONIC, &until) != 0) {
		if (errno != EINTR || app_inject_closed())
			return NULL;
	}
	if (app_inject_closed() || rte_mempool_get(g_inject.pool, &obj) != 0) {
		sem_post(&g_inject.free_slots);
		return NULL;
	}
	memset(obj, 0, sizeof(struct app_inject));
	return obj;
}

void app_inject_release(struct app_inject *r)
{
	slot_put(r);
}

int app_inject_submit(struct app_inject *r)
{
	unsigned int n = __atomic_load_n(&g_inject.nb_rings, __ATOMIC_ACQUIRE);
	unsigned int first;

	if (n == 0 || __atomic_load_n(&g_inject.closed, __ATOMIC_ACQUIRE))
		return -ENODEV;
	/* The lcores in turn; a full ring passes the request to the next. */
	first = __atomic_fetch_add(&g_inject.next, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&r->state, APP_INJECT_QUEUED, __ATOMIC_RELAXED);
	for (unsigned int i = 0; i < n; i++) {
		if (rte_ring_mp_enqueue(g_inject.rings[(first + i) % n], r) == 0)
			return 0;
	}
	__atomic_store_n(&r->state, APP_INJECT_FILLING, __ATOMIC_RELAXED);
	return -ENOBUFS;
}

bool app_inject_finished(const struct app_inject *r)
{
	return __atomic_load_n(&r->state, __ATOMIC_ACQUIRE) == APP_INJECT_DONE;
}

bool app_inject_wait(struct app_inject *r, uint64_t ns)
{
	uint32_t state;

	__atomic_store_n(&r->waiting, 1, __ATOMIC_SEQ_CST);
	state = __atomic_load_n(&r->state, __ATOMIC_SEQ_CST);
	if (state == APP_INJECT_QUEUED)
		state_wait(r, state, ns); /* returns at once if the state moved meanwhile */
	return app_inject_finished(r);
}

bool app_inject_abandon(struct app_inject *r)
{
	uint32_t expected = APP_INJECT_QUEUED;

	return __atomic_compare_exchange_n(&r->state, &expected, APP_INJECT_ABANDONED, false, __ATOMIC_ACQ_REL,
					   __ATOMIC_ACQUIRE);
}

void app_inject_close(void)
{
	__atomic_store_n(&g_inject.closed, true, __ATOMIC_RELEASE);
}

bool app_inject_closed(void)
{
	return __atomic_load_n(&g_inject.closed, __ATOMIC_ACQUIRE);
}

/* ---- the polling lcore's side ------------------------------------------------------------------ */

/* (hot) r's answer: published with one CAS, or r freed here when its waiter has given up. */
static void inject_finish(struct app_inject *r, enum bw_status status, const char *msg)
{
	uint32_t expected = APP_INJECT_QUEUED;

	r->status = (uint16_t)status;
	if (msg != NULL) { /* cut to fit */
		size_t n = 0;

		while (n < sizeof(r->msg) - 1 && msg[n] != '\0')
			n++;
		memcpy(r->msg, msg, n);
		r->msg[n] = '\0';
	}
	if (!__atomic_compare_exchange_n(&r->state, &expected, APP_INJECT_DONE, false, __ATOMIC_SEQ_CST,
					 __ATOMIC_RELAXED)) {
		slot_put(r); /* abandoned: nobody reads it any more */
		return;
	}
	/* Its HTTP thread sleeps on the state, or will see DONE before it does: the store above and its
	 * flag are both sequentially consistent, so one of the two sees the other. The wake is a system
	 * call on this lcore, once per HTTP request answered, and only when the thread is asleep. The
	 * thread may have seen DONE and given the slot back (even to another request) before these two
	 * reads: the pool's memory stays mapped, and a waiter a wake finds early looks again and sleeps
	 * on (app_inject_wait's callers loop). */
	if (__atomic_load_n(&r->waiting, __ATOMIC_SEQ_CST))
		state_wake(r);
}

/* (hot) One slot into its model's batcher on this lcore, or answered at once. */
static void inject_queue(struct app_lcore *al, struct app_inject *r, uint64_t now)
{
	char msg[APP_INJECT_MSG_MAX];
	struct app_channel *ch;
	struct bat_job *job;
	enum bw_status status;
	uint32_t version;

	if (__atomic_load_n(&r->state, __ATOMIC_ACQUIRE) == APP_INJECT_ABANDONED) {
		slot_put(r);
		return;
	}
	if (r->model_id >= al->nb_channels) {
		inject_finish(r, BW_STATUS_NOT_FOUND, "no such model");
		return;
	}
	ch = &al->channels[r->model_id];
	if (unlikely(!app_channel_healthy(ch, msg, sizeof(msg)))) {
		inject_finish(r, BW_STATUS_UNAVAILABLE, msg);
		return;
	}
	if (!app_version_admit(ch->model, r->version, &version, msg, sizeof(msg))) {
		inject_finish(r, BW_STATUS_NOT_FOUND, msg);
		return;
	}
	job = app_job_take(ch->queue, r->rows, r->num_inputs, r->num_outputs, msg, sizeof(msg));
	if (job == NULL) {
		inject_finish(r, BW_STATUS_RESOURCE_EXHAUSTED, msg);
		return;
	}
	job->version = version;
	job->version_pinned = r->version != 0;
	job->priority = r->priority;
	job->arrival_tsc = now;
	job->deadline_tsc = r->timeout_us != 0 ? now + plat_us_to_tsc(r->timeout_us) : 0;
	for (uint16_t i = 0; i < r->num_inputs; i++)
		job->inputs[i] = bw_segment_flat(r->data + r->in[i].off, r->in[i].len);
	for (uint16_t o = 0; o < r->num_outputs; o++)
		job->outputs[o] = bw_segment_flat(r->data + r->out[o].off, r->out[o].len);
	job->owner[0] = r;
	job->owner[1] = NULL; /* not a datagram: app_job_done sends it here */
	job->owner[2] = NULL;
	status = bat_submit(ch->queue, job, now);
	if (status != BW_STATUS_OK) {
		app_job_refusal(ch->queue, job->rows, status, msg, sizeof(msg));
		inject_finish(r, status, msg);
	}
}

unsigned int app_inject_poll(struct app_lcore *al)
{
	void *objs[APP_INJECT_BURST];
	unsigned int n = rte_ring_sc_dequeue_burst(al->inject, objs, APP_INJECT_BURST, NULL);
	uint64_t now;

	if (n == 0)
		return 0;
	now = plat_tsc_now();
	for (unsigned int i = 0; i < n; i++)
		inject_queue(al, objs[i], now);
	return n;
}

void app_inject_job_done(struct app_channel *ch, struct bat_job *job, enum bw_status status)
{
	char why[APP_JOB_TEXT_MAX];

	inject_finish(job->owner[0], status,
		      status == BW_STATUS_OK ? NULL : app_job_refusal_text(ch->model, job, status, why, sizeof(why)));
}
