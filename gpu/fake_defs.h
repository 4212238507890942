/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Inside the fake device (fake.h), shared by its files: fake.c (probe, open, health and faults, host
 * registrations, streams, the ops table), fake_program.c (programs and their instances) and fake_run.c
 * (the device doing the work: launches, doorbells, the GPU_FAKE_THREAD thread).
 *
 * One mutex per device guards its queue of launches, its regions and its health; completion words are
 * written with release stores, so a host polling them with gpu_word_reached sees them as it would see
 * a GPU's writes after the fence.
 *
 * Programs (program.h) run on the CPU when their launch is finished: the table's segments are
 * gathered, every op's items run through gpu_op_item (program_math.h, the code the CUDA module's
 * kernels run), the outputs scattered, then the table's generation is stored into the slot's word.
 * The device address of a registered region is its host address (host_register returns addr), as
 * with CUDA's unified addressing on a 64-bit host: a segment's addr is dereferenced as it is.
 *
 * Doorbell instances (GPU_LAUNCH_DOORBELL) queue nothing: instance_launch writes the instance's ring
 * (doorbell.h) without the lock, and the device (gpu_fake_complete*, the thread, instance_destroy)
 * takes the published entries in ring order, as the CUDA module's dispatcher does. A doorbell
 * instance is its own stream, as on CUDA (its dispatcher's private stream): its launches are not
 * ordered with the caller's stream's other work. While its ring's park_now is set (a park in effect:
 * gpu_fake_doorbells_park, and instance_destroy and program_unload around their frees, where the CUDA
 * module's device-wide synchronising calls are), the device takes nothing from it; the entries wait
 * for the resume.
 */
#ifndef BW_GPU_FAKE_DEFS_H
#define BW_GPU_FAKE_DEFS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "defs.h"
#include "doorbell.h"
#include "fake.h"

/* A queued launch of a graph-mode instance's (size, slot), on the instance's stream. */
struct fake_launch {
	struct gpu_stream *stream;
	struct gpu_instance *inst;
	uint32_t size_idx, slot;
};

struct gpu_dev {
	int index;
	enum gpu_fake_mode mode;
	pthread_mutex_t lock;
	struct fake_launch queue[GPU_FAKE_PENDING_MAX]; /* in queueing order */
	unsigned int nb_queued;
	struct gpu_regions regions;
	unsigned int nb_streams;
	bool lost;
	bool fail_next;
	char fault[GPU_ERR_MAX];
	pthread_t thread;
	bool thread_running, stop;
	unsigned int seed;
	struct gpu_instance *doorbells; /* doorbell instances, linked by next_doorbell */
	uint32_t doorbell_parks;        /* parks in effect (gpu_fake_doorbells_park not yet resumed) */
};

struct gpu_stream {
	struct gpu_dev *dev;
};

/* A loaded program: the module's own copy of it (ops and constants), as a device upload would be. */
struct gpu_loaded {
	struct gpu_dev *dev;
	struct gpu_program *prog;
	unsigned int nb_instances; /* alive: gpu.h says they go before the program */
};

/* What one (size, slot) owns. */
struct fake_slot {
	uint8_t *arena;                /* sizes[size].arena_bytes, GPU_PROG_ALIGN-aligned */
	struct gpu_batch_table *table; /* gpu_batch_table_bytes(max_segments), zeroed at creation */
};

struct gpu_instance {
	struct gpu_loaded *loaded;
	struct gpu_stream *stream;
	uint32_t nb_slots;
	uint32_t mode;                 /* enum gpu_launch_mode */
	struct fake_slot *slots;       /* [size_idx * nb_slots + slot] */
	volatile uint32_t *words;      /* the same index */
	/* GPU_LAUNCH_DOORBELL */
	struct gpu_doorbell_ring *ring;
	uint32_t ring_mask;
	uint32_t posted;               /* the host's: positions published (instance_launch's thread only) */
	uint32_t taken;                /* the device's: the next position to run (under the device's lock) */
	uint32_t park_count;           /* parks in effect on it: park_now set while > 0 (the lock) */
	struct gpu_instance *next_doorbell;
};

/* Health and faults (fake.c). Callers hold the lock. */
void fake_lose(struct gpu_dev *dev, const char *reason);
int fake_check(const struct gpu_dev *dev, char *err, size_t cap);
int fake_accepts(struct gpu_dev *dev, const char *what, char *err, size_t cap);

/* The device's work (fake_run.c). Callers hold the lock, except fake_thread's (the thread's body). */
void fake_run_launch(struct gpu_dev *dev, struct gpu_instance *inst, uint32_t size_idx, uint32_t slot);
void fake_drop(struct gpu_dev *dev, unsigned int q);
void fake_finish(struct gpu_dev *dev, unsigned int q);
int fake_oldest(const struct gpu_dev *dev, const struct gpu_stream *stream);
uint32_t fake_doorbell_rung(const struct gpu_instance *inst);
uint32_t fake_doorbell_waiting(const struct gpu_instance *inst);
void fake_doorbell_park(struct gpu_instance *inst, uint32_t parks);
void fake_doorbell_take(struct gpu_dev *dev, struct gpu_instance *inst, bool drop);
void *fake_thread(void *arg);

/* gpu.h's program and instance ops (fake_program.c), for the table in fake.c. */
int fake_program_load(struct gpu_dev *dev, const struct gpu_program *prog, struct gpu_loaded **out, char *err,
		      size_t cap);
void fake_program_unload(struct gpu_loaded *l);
int fake_instance_create(struct gpu_loaded *l, struct gpu_stream *stream, uint32_t nb_slots, uint32_t mode,
			 struct gpu_instance **out, char *err, size_t cap);
void fake_instance_destroy(struct gpu_instance *inst);
struct gpu_batch_table *fake_instance_table(struct gpu_instance *inst, uint32_t size_idx, uint32_t slot);
volatile uint32_t *fake_instance_word(struct gpu_instance *inst, uint32_t size_idx, uint32_t slot);
int fake_instance_launch(struct gpu_instance *inst, uint32_t size_idx, uint32_t slot, char *err, size_t cap);
int fake_instance_time(struct gpu_instance *inst, uint32_t size_idx, uint32_t slot, uint32_t iters,
		       double *ms_per_launch, char *err, size_t cap);

#endif /* BW_GPU_FAKE_DEFS_H */
