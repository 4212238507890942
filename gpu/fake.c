/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The fake device (fake.h). One mutex per device guards its queue of signals, its regions and its
 * health; words are written with release stores, so a host polling them with gpu_word_reached sees
 * them as it would see a GPU's writes after the fence.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "defs.h"
#include "fake.h"

#define FAKE_THREAD_NAP_NS 20000L       /* GPU_FAKE_THREAD's nap when nothing is queued */
#define FAKE_MEM_BYTES (1ull << 30)     /* what probe says a fake device has */
#define CACHE_LINE_BYTES 64

/* A queued piece of work: a signal, or a fill when len > 0. */
struct fake_signal {
	struct gpu_stream *stream;
	uint32_t word, value;
	void *fill_addr;
	size_t fill_len;
	uint8_t fill_byte;
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
};

struct gpu_stream {
	struct gpu_dev *dev;
	volatile uint32_t *words;
	uint32_t nb_words;
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

/* Writes the signal's word. Caller holds the lock. */
static void fake_finish(struct gpu_dev *dev, unsigned int q)
{
	struct fake_signal s = dev->queue[q];

	if (s.fill_len > 0)
		memset(s.fill_addr, s.fill_byte, s.fill_len);
	else
		__atomic_store_n(&s.stream->words[s.word], s.value, __ATOMIC_RELEASE);
	memmove(&dev->queue[q], &dev->queue[q + 1], (dev->nb_queued - q - 1) * sizeof(dev->queue[0]));
	dev->nb_queued--;
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
		if (!dev->lost && dev->nb_queued > 0) {
			/* a random queued signal's stream, then that stream's oldest: in order per stream */
			unsigned int pick = (unsigned int)rand_r(&dev->seed) % dev->nb_queued;

			fake_finish(dev, (unsigned int)fake_oldest(dev, dev->queue[pick].stream));
			busy = true;
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
		if (dev->lost) {
			memmove(&dev->queue[q], &dev->queue[q + 1], (dev->nb_queued - (unsigned int)q - 1) *
				sizeof(dev->queue[0]));
			dev->nb_queued--;
		} else {
			fake_finish(dev, (unsigned int)q);
		}
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
	rc = fake_check(dev, err, cap);
	if (rc == 0 && dev->fail_next) {
		dev->fail_next = false;
		gpu_err(err, cap, "fake device %d refused the signal: %s", dev->index, dev->fault);
		rc = -EIO;
	}
	if (rc == 0 && dev->nb_queued == GPU_FAKE_PENDING_MAX) {
		gpu_err(err, cap, "fake device %d: %u signals queued (GPU_FAKE_PENDING_MAX)", dev->index,
			dev->nb_queued);
		rc = -EIO;
	}
	if (rc == 0)
		dev->queue[dev->nb_queued++] = (struct fake_signal){ .stream = s, .word = word, .value = value };
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
		dev->queue[dev->nb_queued++] = (struct fake_signal){ .stream = s, .fill_addr = dev_addr,
								     .fill_len = len, .fill_byte = byte };
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
	}
	pthread_mutex_unlock(&dev->lock);
	return done;
}

unsigned int gpu_fake_complete_all(struct gpu_dev *dev)
{
	unsigned int n = 0;

	pthread_mutex_lock(&dev->lock);
	while (!dev->lost && dev->nb_queued > 0) {
		fake_finish(dev, 0);
		n++;
	}
	pthread_mutex_unlock(&dev->lock);
	return n;
}

unsigned int gpu_fake_pending(struct gpu_dev *dev)
{
	unsigned int n;

	pthread_mutex_lock(&dev->lock);
	n = dev->nb_queued;
	pthread_mutex_unlock(&dev->lock);
	return n;
}

void gpu_fake_inject(struct gpu_dev *dev, enum gpu_fake_fault fault, const char *reason)
{
	pthread_mutex_lock(&dev->lock);
	if (!dev->lost) /* the first sticky reason is the one reported, as CUDA's sticky errors */
		snprintf(dev->fault, sizeof(dev->fault), "%s", reason);
	if (fault == GPU_FAKE_FAULT_STICKY)
		dev->lost = true;
	else
		dev->fail_next = true;
	pthread_mutex_unlock(&dev->lock);
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
};

const struct gpu_ops *gpu_fake_ops(void)
{
	return &g_fake_ops;
}
