/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The fake device (fake.h). One mutex per device guards its queue of work, its regions and its
 * health; words are written with release stores, so a host polling them with gpu_word_reached sees
 * them as it would see a GPU's writes after the fence.
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
 * ordered with the caller's stream's other work.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "defs.h"
#include "doorbell.h"
#include "fake.h"
#include "program_math.h"

#define FAKE_THREAD_NAP_NS 20000L       /* GPU_FAKE_THREAD's nap when nothing is queued */
#define FAKE_MEM_BYTES (1ull << 30)     /* what probe says a fake device has */
#define CACHE_LINE_BYTES 64
#define FAKE_ARENA_POISON 0xcd          /* a fresh arena's bytes: cudaMalloc does not zero either */

enum fake_work_kind {
	FAKE_WORK_SIGNAL,
	FAKE_WORK_FILL,
	FAKE_WORK_LAUNCH,
};

/* A queued piece of work: a signal, a fill, or a program launch on one (size, slot). */
struct fake_signal {
	struct gpu_stream *stream;
	enum fake_work_kind kind;
	uint32_t word, value;
	void *fill_addr;
	size_t fill_len;
	uint8_t fill_byte;
	struct gpu_instance *inst;
	uint32_t size_idx, slot;
};

struct gpu_dev {
	int index;
	enum gpu_fake_mode mode;
	pthread_mutex_t lock;
	struct fake_signal queue[GPU_FAKE_PENDING_MAX]; /* in queueing order */
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
};

struct gpu_stream {
	struct gpu_dev *dev;
	volatile uint32_t *words;
	uint32_t nb_words;
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
	struct gpu_instance *next_doorbell;
};

static struct gpu_fake_config g_config = { .nb_devices = 1, .mode = GPU_FAKE_ON_DEMAND, .seed = 1 };

void gpu_fake_configure(const struct gpu_fake_config *cfg)
{
	g_config = *cfg;
}

static int fake_probe(struct gpu_probe *out)
{
	int i;

	if (out == NULL)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->count = g_config.nb_devices < GPU_DEVICES_MAX ? g_config.nb_devices : GPU_DEVICES_MAX;
	for (i = 0; i < out->count; i++) {
		struct gpu_device_info *d = &out->devices[i];

		d->index = i;
		snprintf(d->name, sizeof(d->name), "batchwire fake GPU %d", i);
		d->cc_major = 9;
		d->cc_minor = 0;
		d->total_mem_bytes = FAKE_MEM_BYTES;
		d->multiprocessors = 1;
		d->can_map_host_memory = 1;
	}
	if (out->count == 0)
		snprintf(out->reason, sizeof(out->reason), "no fake device configured (gpu_fake_configure)");
	return 0;
}

/*
 * Marks the device lost, as a kernel's illegal address does on CUDA: the first reason stays. Caller
 * holds the lock.
 */
static void fake_lose(struct gpu_dev *dev, const char *reason)
{
	if (!dev->lost)
		snprintf(dev->fault, sizeof(dev->fault), "%s", reason);
	/* atomic: a doorbell launch reads it without the lock */
	__atomic_store_n(&dev->lost, true, __ATOMIC_RELEASE);
}

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
static void fake_run_launch(struct gpu_dev *dev, struct gpu_instance *inst, uint32_t size_idx, uint32_t slot)
{
	const struct gpu_program *prog = inst->loaded->prog;
	const struct gpu_program_size *sz = &prog->sizes[size_idx];
	uint32_t idx = size_idx * inst->nb_slots + slot;
	struct fake_slot *fs = &inst->slots[idx];
	struct gpu_batch_table *t = fs->table;
	uint32_t nb_seg, s, k;
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
	for (s = 0; s < t->nb_gather; s++) {
		const struct gpu_segment *seg = &t->segments[s];
		uint8_t *dst = fs->arena + sz->input_offset[seg->tensor] + seg->offset;

		if (seg->addr != 0)
			memcpy(dst, (const void *)(uintptr_t)seg->addr, seg->len);
		else
			memset(dst, 0, seg->len);
	}
	for (k = 0; k < sz->nb_ops; k++) {
		const struct gpu_op *op = &sz->ops[k];
		uint64_t items = gpu_op_items(op);

		for (uint64_t i = 0; i < items; i++)
			gpu_op_item(op, k, fs->arena, prog->consts, &t->fault, i);
	}
	for (s = t->nb_gather; s < nb_seg; s++) {
		const struct gpu_segment *seg = &t->segments[s];

		memcpy((void *)(uintptr_t)seg->addr, fs->arena + sz->output_offset[seg->tensor] + seg->offset, seg->len);
	}
	__atomic_store_n(&inst->words[idx], t->generation, __ATOMIC_RELEASE);
}

/* Drops queued work q without doing it. Caller holds the lock. */
static void fake_drop(struct gpu_dev *dev, unsigned int q)
{
	memmove(&dev->queue[q], &dev->queue[q + 1], (dev->nb_queued - q - 1) * sizeof(dev->queue[0]));
	dev->nb_queued--;
}

/* Does queued work q: writes the signal's word, the fill's bytes, or runs the launch. Caller holds the lock. */
static void fake_finish(struct gpu_dev *dev, unsigned int q)
{
	struct fake_signal s = dev->queue[q];

	fake_drop(dev, q);
	switch (s.kind) {
	case FAKE_WORK_FILL:
		memset(s.fill_addr, s.fill_byte, s.fill_len);
		break;
	case FAKE_WORK_LAUNCH:
		fake_run_launch(dev, s.inst, s.size_idx, s.slot);
		break;
	default:
		__atomic_store_n(&s.stream->words[s.word], s.value, __ATOMIC_RELEASE);
		break;
	}
}

/* The oldest queued signal of stream, or -1. Caller holds the lock. */
static int fake_oldest(const struct gpu_dev *dev, const struct gpu_stream *stream)
{
	unsigned int q;

	for (q = 0; q < dev->nb_queued; q++)
		if (dev->queue[q].stream == stream)
			return (int)q;
	return -1;
}

/* Published entries of a doorbell instance not taken yet. Caller holds the lock. */
static uint32_t fake_doorbell_waiting(const struct gpu_instance *inst)
{
	return __atomic_load_n(&inst->ring->seq, __ATOMIC_ACQUIRE) - inst->taken;
}

/*
 * Takes the doorbell instance's next entry and runs it, or drops it (drop: the device is lost). More
 * entries waiting than the ring holds means the host wrote over ones not taken (it launched a slot
 * still in flight): the fake loses the device saying so, where CUDA would run the wrong batches.
 * Caller holds the lock and saw fake_doorbell_waiting() > 0.
 */
static void fake_doorbell_take(struct gpu_dev *dev, struct gpu_instance *inst, bool drop)
{
	uint32_t waiting = fake_doorbell_waiting(inst);
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

/* Pieces of work the device can do now: queued work and waiting doorbell entries. Caller holds the lock. */
static unsigned int fake_work_pending(const struct gpu_dev *dev)
{
	unsigned int n = dev->nb_queued;

	for (struct gpu_instance *i = dev->doorbells; i != NULL; i = i->next_doorbell)
		n += fake_doorbell_waiting(i);
	return n;
}

static void *fake_thread(void *arg)
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

static int fake_dev_open(int index, struct gpu_dev **out, char *err, size_t cap)
{
	struct gpu_dev *dev;

	if (index < 0 || index >= g_config.nb_devices) {
		gpu_err(err, cap, "fake device %d: %d configured", index, g_config.nb_devices);
		return -ENODEV;
	}
	dev = calloc(1, sizeof(*dev));
	if (dev == NULL) {
		gpu_err(err, cap, "fake device %d: out of memory", index);
		return -ENOMEM;
	}
	dev->index = index;
	dev->mode = g_config.mode;
	dev->seed = g_config.seed;
	pthread_mutex_init(&dev->lock, NULL);
	if (dev->mode == GPU_FAKE_THREAD) {
		int rc = pthread_create(&dev->thread, NULL, fake_thread, dev);

		if (rc != 0) {
			gpu_err(err, cap, "fake device %d: pthread_create: %s", index, strerror(rc));
			pthread_mutex_destroy(&dev->lock);
			free(dev);
			return -rc;
		}
		dev->thread_running = true;
	}
	*out = dev;
	return 0;
}

static void fake_dev_close(struct gpu_dev *dev)
{
	if (dev == NULL)
		return;
	if (dev->thread_running) {
		pthread_mutex_lock(&dev->lock);
		dev->stop = true;
		pthread_mutex_unlock(&dev->lock);
		pthread_join(dev->thread, NULL);
	}
	pthread_mutex_destroy(&dev->lock);
	free(dev);
}

/* -EIO with the fault's line when the device is lost. Caller holds the lock. */
static int fake_check(const struct gpu_dev *dev, char *err, size_t cap)
{
	if (!dev->lost)
		return 0;
	gpu_err(err, cap, "fake device %d unhealthy: %s", dev->index, dev->fault);
	return -EIO;
}

/*
 * Whether the device takes a piece of work (what: "signal", "launch", "doorbell"): not when lost, nor
 * the first one after GPU_FAKE_FAULT_NEXT_SIGNAL, which refuses the next signal or launch, whichever
 * comes first. Caller holds the lock. \return 0, or -EIO with err.
 */
static int fake_accepts(struct gpu_dev *dev, const char *what, char *err, size_t cap)
{
	int rc = fake_check(dev, err, cap);

	if (rc == 0 && dev->fail_next) {
		__atomic_store_n(&dev->fail_next, false, __ATOMIC_RELEASE);
		gpu_err(err, cap, "fake device %d refused the %s: %s", dev->index, what, dev->fault);
		rc = -EIO;
	}
	return rc;
}

static int fake_health(struct gpu_dev *dev, char *why, size_t cap)
{
	int rc;

	pthread_mutex_lock(&dev->lock);
	rc = fake_check(dev, why, cap);
	pthread_mutex_unlock(&dev->lock);
	if (rc == 0)
		gpu_err(why, cap, "healthy");
	return rc;
}

static int fake_host_register(struct gpu_dev *dev, void *addr, size_t len, void **dev_addr, char *err, size_t cap)
{
	int rc;

	pthread_mutex_lock(&dev->lock);
	rc = fake_check(dev, err, cap);
	if (rc == 0)
		rc = gpu_regions_check(&dev->regions, addr, len, err, cap);
	if (rc == 0) {
		gpu_regions_add(&dev->regions, addr, len, addr); /* one address space, as with UVA */
		if (dev_addr != NULL)
			*dev_addr = addr;
	}
	pthread_mutex_unlock(&dev->lock);
	return rc;
}

static int fake_host_unregister(struct gpu_dev *dev, void *addr, char *err, size_t cap)
{
	int rc;

	pthread_mutex_lock(&dev->lock);
	rc = gpu_regions_find(&dev->regions, addr, err, cap);
	if (rc >= 0) {
		gpu_regions_remove(&dev->regions, (unsigned int)rc);
		rc = 0;
	}
	pthread_mutex_unlock(&dev->lock);
	return rc;
}

static unsigned int fake_host_regions(const struct gpu_dev *dev)
{
	return __atomic_load_n(&dev->regions.n, __ATOMIC_RELAXED);
}

static int fake_stream_create(struct gpu_dev *dev, uint32_t nb_words, struct gpu_stream **out, char *err, size_t cap)
{
	struct gpu_stream *s;
	size_t bytes;
	int rc;

	if (nb_words == 0 || nb_words > GPU_STREAM_WORDS_MAX) {
		gpu_err(err, cap, "stream of %u words: 1 to %u", nb_words, GPU_STREAM_WORDS_MAX);
		return -EINVAL;
	}
	pthread_mutex_lock(&dev->lock);
	rc = fake_check(dev, err, cap);
	pthread_mutex_unlock(&dev->lock);
	if (rc < 0)
		return rc;
	s = calloc(1, sizeof(*s));
	bytes = ((size_t)nb_words * sizeof(uint32_t) + CACHE_LINE_BYTES - 1) & ~(size_t)(CACHE_LINE_BYTES - 1);
	if (s != NULL)
		s->words = aligned_alloc(CACHE_LINE_BYTES, bytes);
	if (s == NULL || s->words == NULL) {
		free(s);
		gpu_err(err, cap, "stream of %u words: out of memory", nb_words);
		return -ENOMEM;
	}
	memset((void *)s->words, 0, bytes);
	s->dev = dev;
	s->nb_words = nb_words;
	pthread_mutex_lock(&dev->lock);
	dev->nb_streams++;
	pthread_mutex_unlock(&dev->lock);
	*out = s;
	return 0;
}

static void fake_stream_destroy(struct gpu_stream *s)
{
	struct gpu_dev *dev;
	int q;

	if (s == NULL)
		return;
	dev = s->dev;
	/* as cudaStreamDestroy: its queued work still finishes (unless the device is lost) */
	pthread_mutex_lock(&dev->lock);
	while ((q = fake_oldest(dev, s)) >= 0) {
		if (dev->lost)
			fake_drop(dev, (unsigned int)q);
		else
			fake_finish(dev, (unsigned int)q);
	}
	dev->nb_streams--;
	pthread_mutex_unlock(&dev->lock);
	free((void *)s->words);
	free(s);
}

static volatile uint32_t *fake_stream_words(struct gpu_stream *s)
{
	return s->words;
}

static int fake_signal(struct gpu_stream *s, uint32_t word, uint32_t value, char *err, size_t cap)
{
	struct gpu_dev *dev = s->dev;
	int rc;

	if (word >= s->nb_words) {
		gpu_err(err, cap, "signal on word %u of a stream of %u", word, s->nb_words);
		return -EINVAL;
	}
	pthread_mutex_lock(&dev->lock);
	rc = fake_accepts(dev, "signal", err, cap);
	if (rc == 0 && dev->nb_queued == GPU_FAKE_PENDING_MAX) {
		gpu_err(err, cap, "fake device %d: %u signals queued (GPU_FAKE_PENDING_MAX)", dev->index,
			dev->nb_queued);
		rc = -EIO;
	}
	if (rc == 0)
		dev->queue[dev->nb_queued++] = (struct fake_signal){ .stream = s, .kind = FAKE_WORK_SIGNAL, .word = word,
								     .value = value };
	pthread_mutex_unlock(&dev->lock);
	return rc;
}

static int fake_fill(struct gpu_stream *s, void *dev_addr, size_t len, uint8_t byte, char *err, size_t cap)
{
	struct gpu_dev *dev = s->dev;
	int rc;

	pthread_mutex_lock(&dev->lock);
	rc = fake_check(dev, err, cap);
	if (rc == 0)
		rc = gpu_regions_covers(&dev->regions, dev_addr, len, err, cap);
	if (rc == 0 && dev->nb_queued == GPU_FAKE_PENDING_MAX) {
		gpu_err(err, cap, "fake device %d: %u signals queued (GPU_FAKE_PENDING_MAX)", dev->index,
			dev->nb_queued);
		rc = -EIO;
	}
	if (rc == 0)
		dev->queue[dev->nb_queued++] = (struct fake_signal){ .stream = s, .kind = FAKE_WORK_FILL,
								     .fill_addr = dev_addr, .fill_len = len,
								     .fill_byte = byte };
	pthread_mutex_unlock(&dev->lock);
	return rc;
}

/* ---- programs ------------------------------------------------------------------------------------------- */

/* (hot, but the fake takes its lock as its signal does) */
static int fake_host_to_dev(struct gpu_dev *dev, const void *addr, size_t len, uint64_t *dev_addr)
{
	uintptr_t a = (uintptr_t)addr;
	int rc = -EFAULT;

	pthread_mutex_lock(&dev->lock);
	for (unsigned int i = 0; i < dev->regions.n; i++) {
		const struct gpu_region *r = &dev->regions.r[i];

		/* inside one region: [a, a + len) within [start, start + len); len 0 names a byte in it */
		if (a >= r->start && a - r->start < r->len && len <= r->len - (a - r->start)) {
			*dev_addr = (uint64_t)((uintptr_t)r->dev_addr + (a - r->start));
			rc = 0;
			break;
		}
	}
	pthread_mutex_unlock(&dev->lock);
	return rc;
}

static int fake_program_load(struct gpu_dev *dev, const struct gpu_program *prog, struct gpu_loaded **out,
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

static void fake_program_unload(struct gpu_loaded *l)
{
	if (l == NULL)
		return;
	assert(l->nb_instances == 0); /* their arenas' launches would run a freed program */
	gpu_program_free(l->prog);
	free(l);
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

static int fake_instance_create(struct gpu_loaded *l, struct gpu_stream *stream, uint32_t nb_slots, uint32_t mode,
				struct gpu_instance **out, char *err, size_t cap)
{
	const struct gpu_program *prog = l->prog;
	struct gpu_instance *inst;
	uint32_t n;
	int rc;

	if (nb_slots == 0 || nb_slots > GPU_STREAM_WORDS_MAX) {
		gpu_err(err, cap, "instance of %s with %u slots: 1 to %u", prog->name, nb_slots, GPU_STREAM_WORDS_MAX);
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
		if (dev->queue[q].kind == FAKE_WORK_LAUNCH && dev->queue[q].inst == inst)
			return (int)q;
	return -1;
}

/*
 * As gpu.h says, its launches finish first: each one and the stream's work queued before it run now
 * (CUDA: a stream synchronize before the graphs are destroyed). On a lost device they are dropped:
 * they can never finish, and their words never arrive.
 */
static void fake_instance_destroy(struct gpu_instance *inst)
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
		/* as the CUDA module's stop entry: the dispatcher runs what was rung before it */
		struct gpu_instance **p = &dev->doorbells;

		while (fake_doorbell_waiting(inst) > 0)
			fake_doorbell_take(dev, inst, dev->lost);
		while (*p != inst)
			p = &(*p)->next_doorbell;
		*p = inst->next_doorbell;
	}
	inst->loaded->nb_instances--;
	pthread_mutex_unlock(&dev->lock);
	fake_instance_free(inst);
}

static struct gpu_batch_table *fake_instance_table(struct gpu_instance *inst, uint32_t size_idx, uint32_t slot)
{
	if (size_idx >= inst->loaded->prog->nb_sizes || slot >= inst->nb_slots)
		return NULL;
	return inst->slots[size_idx * inst->nb_slots + slot].table;
}

static volatile uint32_t *fake_instance_word(struct gpu_instance *inst, uint32_t size_idx, uint32_t slot)
{
	if (size_idx >= inst->loaded->prog->nb_sizes || slot >= inst->nb_slots)
		return NULL;
	return &inst->words[size_idx * inst->nb_slots + slot];
}

static int fake_instance_launch(struct gpu_instance *inst, uint32_t size_idx, uint32_t slot, char *err, size_t cap)
{
	struct gpu_dev *dev = inst->loaded->dev;
	int rc;

	if (size_idx >= inst->loaded->prog->nb_sizes || slot >= inst->nb_slots) {
		gpu_err(err, cap, "launch of %s: size %u slot %u, the instance has %u sizes and %u slots",
			inst->loaded->prog->name, size_idx, slot, inst->loaded->prog->nb_sizes, inst->nb_slots);
		return -EINVAL;
	}
	if (inst->mode == GPU_LAUNCH_DOORBELL) {
		/* no lock unless a fault is pending: a lost device or GPU_FAKE_FAULT_NEXT_SIGNAL */
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
		dev->queue[dev->nb_queued++] = (struct fake_signal){ .stream = inst->stream, .kind = FAKE_WORK_LAUNCH,
								     .inst = inst, .size_idx = size_idx,
								     .slot = slot };
	pthread_mutex_unlock(&dev->lock);
	return rc;
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

void gpu_fake_inject(struct gpu_dev *dev, enum gpu_fake_fault fault, const char *reason)
{
	pthread_mutex_lock(&dev->lock);
	if (fault == GPU_FAKE_FAULT_STICKY) {
		fake_lose(dev, reason); /* the first sticky reason is the one reported, as CUDA's */
	} else {
		if (!dev->lost)
			snprintf(dev->fault, sizeof(dev->fault), "%s", reason);
		__atomic_store_n(&dev->fail_next, true, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&dev->lock);
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
static int fake_instance_time(struct gpu_instance *inst, uint32_t size_idx, uint32_t slot, uint32_t iters,
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

static const struct gpu_ops g_fake_ops = {
	.abi_version = GPU_ABI_VERSION,
	.name = "fake",
	.probe = fake_probe,
	.dev_open = fake_dev_open,
	.dev_close = fake_dev_close,
	.health = fake_health,
	.host_register = fake_host_register,
	.host_unregister = fake_host_unregister,
	.host_regions = fake_host_regions,
	.stream_create = fake_stream_create,
	.stream_destroy = fake_stream_destroy,
	.stream_words = fake_stream_words,
	.signal = fake_signal,
	.fill = fake_fill,
	.host_to_dev = fake_host_to_dev,
	.program_load = fake_program_load,
	.program_unload = fake_program_unload,
	.instance_create = fake_instance_create,
	.instance_destroy = fake_instance_destroy,
	.instance_table = fake_instance_table,
	.instance_word = fake_instance_word,
	.instance_launch = fake_instance_launch,
	.instance_time = fake_instance_time,
};

const struct gpu_ops *gpu_fake_ops(void)
{
	return &g_fake_ops;
}
