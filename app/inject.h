/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Requests that come from inside the process (the HTTP server's POST /v2/models/NAME/infer) into
 * the same batchers as the UDP ones (inject.c). A request is a slot from a fixed pool made at
 * start-up (registered with the GPU like the mbuf pools, so a GPU model reads its rows in place):
 * its inputs and room for its outputs in one buffer. The HTTP thread fills a slot and puts it on
 * a polling lcore's inject ring (multi-producer, single-consumer; the lcores in turn); that lcore's
 * `http_infer` poller takes it into the model's batcher on its channel, where it shares windows,
 * limits and counters with the datagrams the lcore received; the job's end writes the status into
 * the slot and wakes the HTTP thread asleep on the slot's state (a futex), which builds the reply.
 * A thread waiting for a free slot sleeps on a semaphore that counts them.
 *
 * Who frees a slot: the HTTP thread once it has seen it finished, or the polling lcore when the HTTP
 * thread gave up on it first (a timeout, or the server stopping): one compare-and-swap on the
 * state decides, so a slot is never freed twice nor written after it was freed.
 */
#ifndef BW_APP_INJECT_H
#define BW_APP_INJECT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <rte_common.h>

#include <batchwire/batch.h>

struct rte_mempool;
struct app_service;
struct app_lcore;
struct app_channel;
struct bat_job;

#define APP_INJECT_MSG_MAX 224
#define APP_INJECT_RING_SIZE 64     /* per polling lcore: requests handed over, not yet taken */
#define APP_INJECT_BURST 8          /* taken per turn of the poller */
#define APP_INJECT_SLOT_MIN (64u << 10)

enum app_inject_state {
	APP_INJECT_FILLING = 0,  /* the HTTP thread's */
	APP_INJECT_QUEUED,       /* on a ring or with a batcher: the polling lcore's */
	APP_INJECT_DONE,         /* answered: the HTTP thread's again */
	APP_INJECT_ABANDONED,    /* the HTTP thread gave up: the lcore frees it when it is done with it */
};

struct app_inject_tensor {
	uint32_t off;  /* in data[], 64-byte aligned */
	uint32_t len;  /* rows * bytes per row */
};

/* One request. The HTTP side fills everything above `state`; the lcore writes status and msg. */
struct app_inject {
	uint32_t model_id;
	uint32_t version;          /* the version the request names (0: whichever serves) */
	uint32_t rows;
	uint8_t priority;          /* 0 is the most urgent, as in protocol v1 */
	uint32_t timeout_us;       /* the request's deadline from when its lcore takes it; 0: none */
	uint16_t num_inputs;       /* in the model's input order */
	uint16_t num_outputs;      /* in the model's output order (an echo's are its inputs) */
	struct app_inject_tensor in[BW_BATCH_TENSORS_MAX];
	struct app_inject_tensor out[BW_BATCH_TENSORS_MAX];
	uint32_t state;            /* enum app_inject_state, atomic; the futex the waiter sleeps on */
	uint32_t waiting;          /* atomic: the HTTP thread may be asleep on state (the lcore wakes it) */
	uint16_t status;           /* enum bw_status once DONE */
	char msg[APP_INJECT_MSG_MAX]; /* why, when status is not OK */
	uint8_t data[] __rte_cache_aligned;
};

/**
 * Makes the pool of slots, each with room for bytes_max (or less: what the largest request of any
 * model takes at its max_batch_size, inputs and outputs, but at least APP_INJECT_SLOT_MIN). After
 * the models are loaded, before the pools' memory is registered. slots 0: none, and every request
 * is refused. \return 0, or a negative errno with one line on err.
 */
int app_inject_init(const struct app_service *svc, unsigned int slots, uint32_t bytes_max, FILE *err);
/** After the service is gone (its GPU registrations first). */
void app_inject_fini(void);
/** The slots' pool (NULL: none), for the GPU's registration. */
struct rte_mempool *app_inject_pool(void);
/** Data bytes of one slot (0: none). */
uint32_t app_inject_slot_bytes(void);

/** A polling lcore's ring, from app_service_lcore_init (nothing when there is no pool). \return 0 or -errno. */
int app_inject_lcore_init(struct app_lcore *al, int socket);
void app_inject_lcore_fini(struct app_lcore *al);

/** (any thread) A blank slot, waiting up to wait_us for one to be given back (asleep, not polling).
 * \return NULL when none came, or when the server stopped. */
struct app_inject *app_inject_take(uint64_t wait_us);
/** (any thread) Gives back a slot that was never submitted, or that was seen DONE. */
void app_inject_release(struct app_inject *r);
/** (any thread) Hands r to a polling lcore. \return 0, -ENODEV (none serves), -ENOBUFS (every ring full). */
int app_inject_submit(struct app_inject *r);
/** (any thread) Whether r is answered: its status, msg and outputs may be read. */
bool app_inject_finished(const struct app_inject *r);
/** (any thread) Sleeps until r is answered (its lcore wakes the thread) or ns pass. \return finished. */
bool app_inject_wait(struct app_inject *r, uint64_t ns);
/**
 * (any thread) Gives up on r. \return true: it was not answered, and r must not be touched again
 * (its lcore frees it); false: it was answered meanwhile, and is the caller's to read and release.
 */
bool app_inject_abandon(struct app_inject *r);
/** After every lcore has stopped: nothing more will be answered; waiters give up. */
void app_inject_close(void);
bool app_inject_closed(void);

/** (hot) The `http_infer` poller's work on its lcore. \return how many slots it took. */
unsigned int app_inject_poll(struct app_lcore *al);
/** (hot) The batcher of channel ch is done with an injected job (owner[0] is its slot). */
void app_inject_job_done(struct app_channel *ch, struct bat_job *job, enum bw_status status);

#endif /* BW_APP_INJECT_H */
