/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The fake device doing the work (fake_defs.h): a launch's program run on the CPU, the queue of
 * graph-mode launches, the doorbell rings taken in order, the GPU_FAKE_THREAD thread, and
 * gpu_fake_complete* for the tests that say when work finishes.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "copy_plan.h"
#include "fake_defs.h"
#include "program_math.h"

#define FAKE_THREAD_NAP_NS 20000L       /* GPU_FAKE_THREAD's nap when nothing is queued */

/*
 * A segment the graph's gather or scatter kernel would take out of bounds: past the tensor's rows in
 * the arena, or at an address that is not registered memory. On CUDA the first corrupts the arena and
 * the second is an illegal address that loses the context; the fake loses the device with the reason
 * instead of touching the memory. \return 0, or -EFAULT with why. Caller holds the lock.
 */
static int fake_segment_check(const struct gpu_dev *dev, const struct gpu_program *prog,
			      const struct gpu_program_size *sz, const struct gpu_batch_table *t, uint32_t s,
			      char *why, size_t cap)
{
	const struct gpu_segment *seg = &t->segments[s];
	bool gather = s < t->nb_gather;
	uint32_t nb = gather ? prog->nb_inputs : prog->nb_outputs;
	uint64_t tensor_bytes;

	if (seg->tensor >= nb) {
		gpu_err(why, cap, "segment %u: tensor %u, the program has %u %s", s, seg->tensor, nb,
			gather ? "inputs" : "outputs");
		return -EFAULT;
	}
	tensor_bytes = (uint64_t)sz->batch * (gather ? prog->input_row_bytes : prog->output_row_bytes)[seg->tensor];
	if (seg->offset > tensor_bytes || seg->len > tensor_bytes - seg->offset) {
		gpu_err(why, cap, "segment %u: bytes [%llu, %llu) of a %llu-byte tensor", s,
			(unsigned long long)seg->offset, (unsigned long long)seg->offset + seg->len,
			(unsigned long long)tensor_bytes);
		return -EFAULT;
	}
	if (seg->len == 0 || (gather && seg->addr == 0))
		return 0; /* nothing read from the host: padding rows are written zero */
	if (gpu_regions_covers(&dev->regions, (const void *)(uintptr_t)seg->addr, seg->len, NULL, 0) < 0) {
		gpu_err(why, cap, "segment %u: device address 0x%llx + %u is not registered memory", s,
			(unsigned long long)seg->addr, seg->len);
		return -EFAULT;
	}
	return 0;
}

/*
 * Runs the graph of (size_idx, slot): gather, every op over all its items, scatter, then the word.
 * A bad segment loses the device (the word never arrives). Caller holds the lock.
 */
void fake_run_launch(struct gpu_dev *dev, struct gpu_instance *inst, uint32_t size_idx, uint32_t slot)
{
	const struct gpu_program *prog = inst->loaded->prog;
	const struct gpu_program_size *sz = &prog->sizes[size_idx];
	uint32_t idx = size_idx * inst->nb_slots + slot;
	struct fake_slot *fs = &inst->slots[idx];
	struct gpu_batch_table *t = fs->table;
	uint32_t nb_seg, s, k, blocks;
	uint64_t chunk;
	char why[GPU_ERR_MAX - 64];

	/* the table is read once the launch runs, as the graph's kernels read it */
	if ((uint64_t)t->nb_gather + t->nb_scatter > prog->max_segments) {
		char reason[GPU_ERR_MAX];

		gpu_err(reason, sizeof(reason), "launch of %s size %u slot %u: %u + %u segments, the table holds %u",
			prog->name, sz->batch, slot, t->nb_gather, t->nb_scatter, prog->max_segments);
		fake_lose(dev, reason);
		return;
	}
	nb_seg = t->nb_gather + t->nb_scatter;
	for (s = 0; s < nb_seg; s++) {
		if (fake_segment_check(dev, prog, sz, t, s, why, sizeof(why)) < 0) {
			char reason[GPU_ERR_MAX];

			gpu_err(reason, sizeof(reason), "launch of %s size %u slot %u: %s", prog->name, sz->batch, slot,
				why);
			fake_lose(dev, reason);
			return;
		}
	}
	/* the gather and scatter as the CUDA kernel's grid partitions them (copy_plan.h), block by block */
	blocks = gpu_copy_blocks(prog, sz, 0);
	for (s = 0, chunk = 0; s < t->nb_gather; s++) {
		const struct gpu_segment *seg = &t->segments[s];
		const uint8_t *src;
		uint8_t *dst;

		if (gpu_copy_segment_ends(sz, t->nb_gather, seg, s, fs->arena, &dst, &src) == 0)
			chunk += gpu_copy_emulate(dst, src, seg->len, chunk, blocks);
	}
	for (k = 0; k < sz->nb_ops; k++) {
		const struct gpu_op *op = &sz->ops[k];
		uint64_t items = gpu_op_items(op);

		for (uint64_t i = 0; i < items; i++)
			gpu_op_item(op, k, fs->arena, prog->consts, &t->fault, i);
	}
	blocks = gpu_copy_blocks(prog, sz, 1);
	for (s = t->nb_gather, chunk = 0; s < nb_seg; s++) {
		const struct gpu_segment *seg = &t->segments[s];
		const uint8_t *src;
		uint8_t *dst;

		if (gpu_copy_segment_ends(sz, t->nb_gather, seg, s, fs->arena, &dst, &src) == 0)
			chunk += gpu_copy_emulate(dst, src, seg->len, chunk, blocks);
	}
	__atomic_store_n(&inst->words[idx], t->generation, __ATOMIC_RELEASE);
}

/* Drops queued work q without doing it. Caller holds the lock. */
void fake_drop(struct gpu_dev *dev, unsigned int q)
{
	memmove(&dev->queue[q], &dev->queue[q + 1], (dev->nb_queued - q - 1) * sizeof(dev->queue[0]));
	dev->nb_queued--;
}

/* Runs queued launch q. Caller holds the lock. */
void fake_finish(struct gpu_dev *dev, unsigned int q)
{
	struct fake_launch l = dev->queue[q];

	fake_drop(dev, q);
	fake_run_launch(dev, l.inst, l.size_idx, l.slot);
}

/* The oldest queued launch of stream, or -1. Caller holds the lock. */
int fake_oldest(const struct gpu_dev *dev, const struct gpu_stream *stream)
{
	unsigned int q;

	for (q = 0; q < dev->nb_queued; q++)
		if (dev->queue[q].stream == stream)
			return (int)q;
	return -1;
}

/* Published entries of a doorbell instance not taken yet. Caller holds the lock. */
uint32_t fake_doorbell_rung(const struct gpu_instance *inst)
{
	return __atomic_load_n(&inst->ring->seq, __ATOMIC_ACQUIRE) - inst->taken;
}

/* Those the device may take now: none while park_now is set, as the CUDA dispatcher parks. The lock. */
uint32_t fake_doorbell_waiting(const struct gpu_instance *inst)
{
	if (__atomic_load_n(&inst->ring->park_now, __ATOMIC_ACQUIRE) != 0)
		return 0;
	return fake_doorbell_rung(inst);
}

/* Sets how many parks hold inst (0: none), park_now with it. Caller holds the lock. */
void fake_doorbell_park(struct gpu_instance *inst, uint32_t parks)
{
	inst->park_count = parks;
	__atomic_store_n(&inst->ring->park_now, parks > 0, __ATOMIC_RELEASE);
}

/*
 * The CUDA module's park (cuda_doorbell.c): every doorbell instance of the device flagged; they are
 * parked at once, the device's side running only under the lock. Nests, as there.
 */
void gpu_fake_doorbells_park(struct gpu_dev *dev)
{
	pthread_mutex_lock(&dev->lock);
	dev->doorbell_parks++;
	for (struct gpu_instance *i = dev->doorbells; i != NULL; i = i->next_doorbell)
		fake_doorbell_park(i, i->park_count + 1);
	pthread_mutex_unlock(&dev->lock);
}

void gpu_fake_doorbells_resume(struct gpu_dev *dev)
{
	pthread_mutex_lock(&dev->lock);
	assert(dev->doorbell_parks > 0);
	dev->doorbell_parks--;
	for (struct gpu_instance *i = dev->doorbells; i != NULL; i = i->next_doorbell) {
		assert(i->park_count > 0);
		fake_doorbell_park(i, i->park_count - 1);
	}
	pthread_mutex_unlock(&dev->lock);
}

/*
 * Takes the doorbell instance's next entry and runs it, or drops it (drop: the device is lost). More
 * entries waiting than the ring holds means the host wrote over ones not taken (it launched a slot
 * still in flight): the fake loses the device saying so, where CUDA would run the wrong batches.
 * Caller holds the lock and saw fake_doorbell_waiting() > 0.
 */
void fake_doorbell_take(struct gpu_dev *dev, struct gpu_instance *inst, bool drop)
{
	uint32_t waiting = fake_doorbell_rung(inst);
	const struct gpu_doorbell_entry *e = &inst->ring->entries[inst->taken & inst->ring_mask];
	uint32_t size_idx = __atomic_load_n(&e->size_idx, __ATOMIC_RELAXED);
	uint32_t slot = __atomic_load_n(&e->slot, __ATOMIC_RELAXED);
	char reason[GPU_ERR_MAX];

	if (!drop && waiting > inst->ring_mask + 1) {
		gpu_err(reason, sizeof(reason), "doorbell ring of %s overrun: %u launches waiting, the ring holds %u "
			"(a slot launched again before its word was seen)", inst->loaded->prog->name, waiting,
			inst->ring_mask + 1);
		fake_lose(dev, reason);
	}
	inst->taken++;
	if (dev->lost || drop)
		return;
	/* instance_launch checked the indexes: this is the fake's own bookkeeping */
	assert(size_idx < inst->loaded->prog->nb_sizes && slot < inst->nb_slots);
	fake_run_launch(dev, inst, size_idx, slot);
}

/* The first doorbell instance of stream (any, when stream is NULL) with entries waiting, or NULL. */
static struct gpu_instance *fake_doorbell_ready(const struct gpu_dev *dev, const struct gpu_stream *stream)
{
	for (struct gpu_instance *i = dev->doorbells; i != NULL; i = i->next_doorbell)
		if ((stream == NULL || i->stream == stream) && fake_doorbell_waiting(i) > 0)
			return i;
	return NULL;
}

/* Pieces of work not done: queued work and rung doorbell entries (parked ones too). Caller holds the lock. */
static unsigned int fake_work_pending(const struct gpu_dev *dev)
{
	unsigned int n = dev->nb_queued;

	for (struct gpu_instance *i = dev->doorbells; i != NULL; i = i->next_doorbell)
		n += fake_doorbell_rung(i);
	return n;
}

void *fake_thread(void *arg)
{
	struct gpu_dev *dev = arg;
	const struct timespec nap = { .tv_sec = 0, .tv_nsec = FAKE_THREAD_NAP_NS };

	for (;;) {
		bool busy = false;

		pthread_mutex_lock(&dev->lock);
		if (dev->stop) {
			pthread_mutex_unlock(&dev->lock);
			return NULL;
		}
		if (!dev->lost) {
			unsigned int nb_ready = 0, pick;
			struct gpu_instance *db;

			for (db = dev->doorbells; db != NULL; db = db->next_doorbell)
				nb_ready += fake_doorbell_waiting(db) > 0;
			if (dev->nb_queued + nb_ready > 0) {
				/* a random stream (a queued piece of work's, or a doorbell instance), then its
				 * oldest work: in order per stream */
				pick = (unsigned int)rand_r(&dev->seed) % (dev->nb_queued + nb_ready);
				if (pick < dev->nb_queued) {
					fake_finish(dev, (unsigned int)fake_oldest(dev, dev->queue[pick].stream));
				} else {
					pick -= dev->nb_queued;
					for (db = dev->doorbells; fake_doorbell_waiting(db) == 0 || pick-- > 0;
					     db = db->next_doorbell)
						;
					fake_doorbell_take(dev, db, false);
				}
				busy = true;
			}
		}
		pthread_mutex_unlock(&dev->lock);
		/* with work queued, only let the host run (a loaded 2-core machine must not starve us) */
		if (busy)
			sched_yield();
		else
			nanosleep(&nap, NULL);
	}
}

int gpu_fake_complete(struct gpu_stream *s)
{
	struct gpu_dev *dev = s->dev;
	int q, done = 0;

	pthread_mutex_lock(&dev->lock);
	q = fake_oldest(dev, s);
	if (!dev->lost && q >= 0) {
		fake_finish(dev, (unsigned int)q);
		done = 1;
	} else if (!dev->lost) {
		struct gpu_instance *db = fake_doorbell_ready(dev, s);

		if (db != NULL) {
			fake_doorbell_take(dev, db, false);
			done = 1;
		}
	}
	pthread_mutex_unlock(&dev->lock);
	return done;
}

unsigned int gpu_fake_complete_all(struct gpu_dev *dev)
{
	unsigned int n = 0;

	pthread_mutex_lock(&dev->lock);
	for (;;) {
		struct gpu_instance *db;

		if (!dev->lost && dev->nb_queued > 0)
			fake_finish(dev, 0);
		else if (!dev->lost && (db = fake_doorbell_ready(dev, NULL)) != NULL)
			fake_doorbell_take(dev, db, false);
		else
			break;
		n++;
	}
	pthread_mutex_unlock(&dev->lock);
	return n;
}

unsigned int gpu_fake_pending(struct gpu_dev *dev)
{
	unsigned int n;

	pthread_mutex_lock(&dev->lock);
	n = fake_work_pending(dev);
	pthread_mutex_unlock(&dev->lock);
	return n;
}
