/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The fake device's programs and instances (gpu.h's program_load to instance_time): a loaded program is
 * the fake's own copy, an instance the arenas, tables and words of its (size, slot)s, and its launches
 * go to the device's queue or, in doorbell mode, to its ring (fake_defs.h).
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fake_defs.h"

#define CACHE_LINE_BYTES 64
#define FAKE_ARENA_POISON 0xcd          /* a fresh arena's bytes: cudaMalloc does not zero either */

int fake_program_load(struct gpu_dev *dev, const struct gpu_program *prog, struct gpu_loaded **out,
		      char *err, size_t cap)
{
	struct gpu_loaded *l;
	int rc;

	pthread_mutex_lock(&dev->lock);
	rc = fake_check(dev, err, cap);
	pthread_mutex_unlock(&dev->lock);
	if (rc < 0)
		return rc;
	rc = gpu_program_check(prog, err, cap);
	if (rc < 0)
		return rc;
	l = calloc(1, sizeof(*l));
	if (l != NULL)
		l->prog = gpu_program_copy(prog);
	if (l == NULL || l->prog == NULL) {
		free(l);
		gpu_err(err, cap, "program %s: out of memory", prog->name);
		return -ENOMEM;
	}
	l->dev = dev;
	*out = l;
	return 0;
}

void fake_program_unload(struct gpu_loaded *l)
{
	struct gpu_dev *dev;

	if (l == NULL)
		return;
	assert(l->nb_instances == 0); /* their arenas' launches would run a freed program */
	dev = l->dev;
	/* where the CUDA module's cudaFree is: the doorbell instances park around it */
	gpu_fake_doorbells_park(dev);
	gpu_program_free(l->prog);
	free(l);
	gpu_fake_doorbells_resume(dev);
}

static void fake_instance_free(struct gpu_instance *inst)
{
	uint32_t n = inst->loaded->prog->nb_sizes * inst->nb_slots;

	if (inst->slots != NULL) {
		for (uint32_t i = 0; i < n; i++) {
			free(inst->slots[i].arena);
			free(inst->slots[i].table);
		}
	}
	free(inst->slots);
	free((void *)inst->words);
	free(inst->ring);
	free(inst);
}

static size_t round_up(size_t n, size_t align)
{
	return (n + align - 1) & ~(align - 1);
}

int fake_instance_create(struct gpu_loaded *l, struct gpu_stream *stream, uint32_t nb_slots, uint32_t mode,
			 struct gpu_instance **out, char *err, size_t cap)
{
	const struct gpu_program *prog = l->prog;
	struct gpu_instance *inst;
	uint32_t n;
	int rc;

	if (nb_slots == 0 || nb_slots > GPU_INSTANCE_SLOTS_MAX) {
		gpu_err(err, cap, "instance of %s with %u slots: 1 to %u", prog->name, nb_slots, GPU_INSTANCE_SLOTS_MAX);
		return -EINVAL;
	}
	if (mode >= GPU_LAUNCH_MODE_COUNT) {
		gpu_err(err, cap, "instance of %s: launch mode %u unknown", prog->name, mode);
		return -EINVAL;
	}
	if (stream->dev != l->dev) {
		gpu_err(err, cap, "instance of %s: the stream is on another device", prog->name);
		return -EINVAL;
	}
	pthread_mutex_lock(&l->dev->lock);
	rc = fake_check(l->dev, err, cap);
	pthread_mutex_unlock(&l->dev->lock);
	if (rc < 0)
		return rc;
	n = prog->nb_sizes * nb_slots;
	inst = calloc(1, sizeof(*inst));
	if (inst == NULL)
		goto nomem;
	inst->loaded = l;
	inst->stream = stream;
	inst->nb_slots = nb_slots;
	inst->mode = mode;
	if (mode == GPU_LAUNCH_DOORBELL) {
		uint32_t entries = gpu_doorbell_entries(n);
		size_t bytes = round_up(gpu_doorbell_ring_bytes(entries), CACHE_LINE_BYTES);

		inst->ring = aligned_alloc(CACHE_LINE_BYTES, bytes);
		if (inst->ring == NULL)
			goto nomem;
		memset(inst->ring, 0, bytes);
		inst->ring_mask = entries - 1;
	}
	inst->slots = calloc(n, sizeof(*inst->slots));
	inst->words = aligned_alloc(CACHE_LINE_BYTES, round_up(n * sizeof(uint32_t), CACHE_LINE_BYTES));
	if (inst->slots == NULL || inst->words == NULL)
		goto nomem;
	memset((void *)inst->words, 0, round_up(n * sizeof(uint32_t), CACHE_LINE_BYTES));
	for (uint32_t i = 0; i < n; i++) {
		struct fake_slot *fs = &inst->slots[i];
		size_t arena_bytes = prog->sizes[i / nb_slots].arena_bytes; /* a multiple of GPU_PROG_ALIGN */
		size_t table_bytes = round_up(gpu_batch_table_bytes(prog->max_segments), CACHE_LINE_BYTES);

		fs->arena = aligned_alloc(GPU_PROG_ALIGN, arena_bytes);
		fs->table = aligned_alloc(CACHE_LINE_BYTES, table_bytes);
		if (fs->arena == NULL || fs->table == NULL)
			goto nomem;
		memset(fs->arena, FAKE_ARENA_POISON, arena_bytes);
		memset(fs->table, 0, table_bytes);
	}
	pthread_mutex_lock(&l->dev->lock);
	l->nb_instances++;
	if (mode == GPU_LAUNCH_DOORBELL) {
		fake_doorbell_park(inst, l->dev->doorbell_parks); /* the resumes in progress count it */
		inst->next_doorbell = l->dev->doorbells;
		l->dev->doorbells = inst;
	}
	pthread_mutex_unlock(&l->dev->lock);
	*out = inst;
	return 0;
nomem:
	if (inst != NULL)
		fake_instance_free(inst);
	gpu_err(err, cap, "instance of %s with %u slots: out of memory", prog->name, nb_slots);
	return -ENOMEM;
}

/* The oldest queued launch of inst, or -1. Caller holds the lock. */
static int fake_oldest_launch(const struct gpu_dev *dev, const struct gpu_instance *inst)
{
	for (unsigned int q = 0; q < dev->nb_queued; q++)
		if (dev->queue[q].inst == inst)
			return (int)q;
	return -1;
}

/*
 * As gpu.h says, its launches finish first: each one and the stream's work queued before it run now
 * (CUDA: a stream synchronize before the graphs are destroyed). On a lost device they are dropped:
 * they can never finish, and their words never arrive.
 */
void fake_instance_destroy(struct gpu_instance *inst)
{
	struct gpu_dev *dev;
	int q;

	if (inst == NULL)
		return;
	dev = inst->loaded->dev;
	pthread_mutex_lock(&dev->lock);
	while ((q = fake_oldest_launch(dev, inst)) >= 0) {
		if (dev->lost)
			fake_drop(dev, (unsigned int)q);
		else
			fake_finish(dev, (unsigned int)fake_oldest(dev, inst->stream));
	}
	if (inst->mode == GPU_LAUNCH_DOORBELL) {
		/* as the CUDA module's stop entry: the dispatcher runs what was rung before it, a park
		 * in effect letting go of this instance first */
		struct gpu_instance **p = &dev->doorbells;

		fake_doorbell_park(inst, 0);
		while (fake_doorbell_waiting(inst) > 0)
			fake_doorbell_take(dev, inst, dev->lost);
		while (*p != inst)
			p = &(*p)->next_doorbell;
		*p = inst->next_doorbell;
	}
	inst->loaded->nb_instances--;
	pthread_mutex_unlock(&dev->lock);
	/* where the CUDA module's cudaFree and cudaFreeHost are: the other doorbell instances park */
	gpu_fake_doorbells_park(dev);
	fake_instance_free(inst);
	gpu_fake_doorbells_resume(dev);
}

struct gpu_batch_table *fake_instance_table(struct gpu_instance *inst, uint32_t size_idx, uint32_t slot)
{
	if (size_idx >= inst->loaded->prog->nb_sizes || slot >= inst->nb_slots)
		return NULL;
	return inst->slots[size_idx * inst->nb_slots + slot].table;
}

volatile uint32_t *fake_instance_word(struct gpu_instance *inst, uint32_t size_idx, uint32_t slot)
{
	if (size_idx >= inst->loaded->prog->nb_sizes || slot >= inst->nb_slots)
		return NULL;
	return &inst->words[size_idx * inst->nb_slots + slot];
}

int fake_instance_launch(struct gpu_instance *inst, uint32_t size_idx, uint32_t slot, char *err, size_t cap)
{
	struct gpu_dev *dev = inst->loaded->dev;
	int rc;

	if (size_idx >= inst->loaded->prog->nb_sizes || slot >= inst->nb_slots) {
		gpu_err(err, cap, "launch of %s: size %u slot %u, the instance has %u sizes and %u slots",
			inst->loaded->prog->name, size_idx, slot, inst->loaded->prog->nb_sizes, inst->nb_slots);
		return -EINVAL;
	}
	if (inst->mode == GPU_LAUNCH_DOORBELL) {
		/* no lock unless a fault is pending: a lost device or GPU_FAKE_FAULT_NEXT_LAUNCH */
		if (__atomic_load_n(&dev->lost, __ATOMIC_ACQUIRE) || __atomic_load_n(&dev->fail_next, __ATOMIC_ACQUIRE)) {
			pthread_mutex_lock(&dev->lock);
			rc = fake_accepts(dev, "doorbell", err, cap);
			pthread_mutex_unlock(&dev->lock);
			if (rc < 0)
				return rc;
		}
		gpu_doorbell_post(inst->ring, inst->ring_mask, inst->posted++, size_idx, slot);
		return 0;
	}
	pthread_mutex_lock(&dev->lock);
	rc = fake_accepts(dev, "launch", err, cap);
	if (rc == 0 && dev->nb_queued == GPU_FAKE_PENDING_MAX) {
		gpu_err(err, cap, "fake device %d: %u pieces of work queued (GPU_FAKE_PENDING_MAX)", dev->index,
			dev->nb_queued);
		rc = -EIO;
	}
	if (rc == 0)
		dev->queue[dev->nb_queued++] = (struct fake_launch){ .stream = inst->stream, .inst = inst,
								     .size_idx = size_idx, .slot = slot };
	pthread_mutex_unlock(&dev->lock);
	return rc;
}

static double elapsed_ms(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) * 1e3 + (double)(b->tv_nsec - a->tv_nsec) / 1e6;
}

/*
 * Cold (benchmarks): the stream's work queued before (and a doorbell instance's rung launches) runs
 * first, as it would on a stream; then the host clock around iters runs of the graph, each done (word
 * written) before the next starts.
 */
int fake_instance_time(struct gpu_instance *inst, uint32_t size_idx, uint32_t slot, uint32_t iters,
		       double *ms_per_launch, char *err, size_t cap)
{
	const struct gpu_program *prog = inst->loaded->prog;
	struct gpu_dev *dev = inst->loaded->dev;
	uint32_t idx = size_idx * inst->nb_slots + slot;
	struct timespec start, end;
	int q, rc;

	if (size_idx >= prog->nb_sizes || slot >= inst->nb_slots || iters == 0 || ms_per_launch == NULL) {
		gpu_err(err, cap, "timing of %s size %u slot %u, %u launches: the instance has %u sizes and %u slots; "
			"iters > 0", prog->name, size_idx, slot, iters, prog->nb_sizes, inst->nb_slots);
		return -EINVAL;
	}
	pthread_mutex_lock(&dev->lock);
	while (!dev->lost && (q = fake_oldest(dev, inst->stream)) >= 0)
		fake_finish(dev, (unsigned int)q);
	while (!dev->lost && inst->mode == GPU_LAUNCH_DOORBELL && fake_doorbell_waiting(inst) > 0)
		fake_doorbell_take(dev, inst, false);
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (uint32_t i = 0; i < iters && !dev->lost; i++)
		fake_run_launch(dev, inst, size_idx, slot);
	clock_gettime(CLOCK_MONOTONIC, &end);
	rc = fake_check(dev, err, cap);
	if (rc == 0 && __atomic_load_n(&inst->words[idx], __ATOMIC_ACQUIRE) != inst->slots[idx].table->generation) {
		gpu_err(err, cap, "timing of %s size %u slot %u: the word did not reach the generation", prog->name,
			size_idx, slot);
		rc = -EIO;
	}
	pthread_mutex_unlock(&dev->lock);
	if (rc == 0)
		*ms_per_launch = elapsed_ms(&start, &end) / iters;
	return rc;
}
