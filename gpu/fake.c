/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The fake device (fake.h): probe, open and close, health and faults, host registrations, streams and
 * the ops table. How the device is put together and locked: fake_defs.h.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_defs.h"

#define FAKE_MEM_BYTES (1ull << 30)     /* what probe says a fake device has */

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
void fake_lose(struct gpu_dev *dev, const char *reason)
{
	if (!dev->lost)
		snprintf(dev->fault, sizeof(dev->fault), "%s", reason);
	/* atomic: a doorbell launch reads it without the lock */
	__atomic_store_n(&dev->lost, true, __ATOMIC_RELEASE);
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
	dev->regions.page = g_config.pin_page_bytes;
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
int fake_check(const struct gpu_dev *dev, char *err, size_t cap)
{
	if (!dev->lost)
		return 0;
	gpu_err(err, cap, "fake device %d unhealthy: %s", dev->index, dev->fault);
	return -EIO;
}

/*
 * Whether the device takes a piece of work (what: "launch", "doorbell"): not when lost, nor the first
 * one after GPU_FAKE_FAULT_NEXT_LAUNCH. Caller holds the lock. \return 0, or -EIO with err.
 */
int fake_accepts(struct gpu_dev *dev, const char *what, char *err, size_t cap)
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

static int fake_stream_create(struct gpu_dev *dev, struct gpu_stream **out, char *err, size_t cap)
{
	struct gpu_stream *s;
	int rc;

	pthread_mutex_lock(&dev->lock);
	rc = fake_check(dev, err, cap);
	pthread_mutex_unlock(&dev->lock);
	if (rc < 0)
		return rc;
	s = calloc(1, sizeof(*s));
	if (s == NULL) {
		gpu_err(err, cap, "stream: out of memory");
		return -ENOMEM;
	}
	s->dev = dev;
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
	free(s);
}

/* (hot, but the fake takes its lock, as its launches do) */
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

int gpu_fake_thread_cpus(struct gpu_dev *dev, cpu_set_t *cpus)
{
	if (!dev->thread_running)
		return -ENOENT;
	return -pthread_getaffinity_np(dev->thread, sizeof(*cpus), cpus);
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
