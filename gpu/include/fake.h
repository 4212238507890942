/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The fake device: a CPU implementation of struct gpu_ops (gpu.h) for CI and for hosts without a GPU,
 * so the launch/poll/complete logic, the registrations and the error paths run without CUDA. Its
 * "GPU" finishes queued launches either when a test says so (GPU_FAKE_ON_DEMAND: the test picks the
 * stream, hence the order across streams) or on a thread of its own per device (GPU_FAKE_THREAD: a
 * random stream each time). Either way a stream's work finishes in the order it was queued, as on a
 * CUDA stream; across streams, in any order.
 *
 * Programs (gpu.h's program_load, instances, instance_launch) run on the CPU through program_math.h,
 * the code the CUDA module's kernels run, when their launch finishes. A device address is the host
 * address it was registered at (host_register returns addr). A launch whose batch table names memory
 * outside the registered regions, or bytes outside a tensor's rows, loses the device (sticky, with
 * the reason), as an illegal address does on CUDA.
 *
 * Not for the hot path's timing: its instance_launch takes a mutex (the CUDA module's does not).
 */
#ifndef BW_GPU_FAKE_H
#define BW_GPU_FAKE_H

#include <sched.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu.h"

#define GPU_FAKE_PENDING_MAX 4096 /* queued launches per device */

enum gpu_fake_mode {
	GPU_FAKE_ON_DEMAND, /* queued work finishes in gpu_fake_complete / gpu_fake_complete_all */
	GPU_FAKE_THREAD,    /* a thread per opened device finishes it, streams in random order */
};

enum gpu_fake_fault {
	GPU_FAKE_FAULT_NEXT_LAUNCH, /* the next instance_launch (doorbell ones too) is refused (-EIO);
				     * the device stays healthy */
	GPU_FAKE_FAULT_STICKY,      /* the device is lost now: queued work never finishes, every later
				     * call fails -EIO, health reports the reason */
};

struct gpu_fake_config {
	int nb_devices;          /* what probe reports; 0: "no fake device configured" */
	enum gpu_fake_mode mode;
	unsigned int seed;       /* GPU_FAKE_THREAD's choice of stream */
	size_t pin_page_bytes;   /* host_register refuses a region sharing a page of this size with a
				  * registered one, as cudaHostRegister does; 0: bytes (regions may be
				  * neighbouring arrays) */
};

/** The fake's table. */
const struct gpu_ops *gpu_fake_ops(void);

/** Sets what later probes and opens see (devices already open keep their mode). */
void gpu_fake_configure(const struct gpu_fake_config *cfg);

/**
 * Finishes the oldest queued launch of stream; when it has none, the next rung launch of a doorbell
 * instance made on stream (GPU_LAUNCH_DOORBELL: each such instance is a stream of its own, as on
 * CUDA, its launches taken in the order they were rung).
 * \return 1, or 0 when it had none (or the device is lost).
 */
int gpu_fake_complete(struct gpu_stream *stream);

/** Finishes every piece of work queued on the device, in queueing order, then the doorbell instances'
 * rung launches. \return how many. */
unsigned int gpu_fake_complete_all(struct gpu_dev *dev);

/** \return the pieces of work (launches, rung doorbells) queued on the device and not finished. */
unsigned int gpu_fake_pending(struct gpu_dev *dev);

/**
 * The CPUs the device's thread (GPU_FAKE_THREAD) may run on: those of the thread that opened the
 * device, as a CUDA driver's helper threads inherit them. \return 0; -ENOENT (no thread); a negative
 * errno from pthread_getaffinity_np.
 */
int gpu_fake_thread_cpus(struct gpu_dev *dev, cpu_set_t *cpus);

/**
 * Parks every doorbell instance of dev, as the CUDA module does around its device-wide synchronising
 * calls (instance_destroy and program_unload do it here too): their rung launches are held (pending,
 * not taken by gpu_fake_complete*, the thread or instance_time) until the matching resume. Nests; an
 * instance made meanwhile is parked too.
 */
void gpu_fake_doorbells_park(struct gpu_dev *dev);
/** Ends one park: the last lets the device take the held launches again. */
void gpu_fake_doorbells_resume(struct gpu_dev *dev);

/** Injects a fault (reason: the line health and the failing calls report). */
void gpu_fake_inject(struct gpu_dev *dev, enum gpu_fake_fault fault, const char *reason);

#endif /* BW_GPU_FAKE_H */
