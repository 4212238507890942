/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The device runtime's interface: DPDK-free and CUDA-free, so the host side (app/, bwrun, tests)
 * includes it without either. A device runtime is a table of functions, struct gpu_ops, that a module
 * exports through one symbol (GPU_MODULE_SYMBOL): the CUDA module (libbwgpu.so, loaded with dlopen,
 * so hosts without CUDA need no CUDA library) or the fake device (gpu/fake.h, a CPU implementation
 * for CI, linked in).
 *
 *   host (one polling lcore)                                device
 *   ops->instance_launch(inst, size, slot)      ---->       the (size, slot)'s graph, then
 *   ... loop ...                                            word = the table's generation (mapped
 *   gpu_word_reached(word, generation)          <----       pinned host memory, after a system-wide
 *                                                           fence)
 *
 * The host learns of completion by reading host memory: no synchronize call, no callback, no system
 * call. Each caller (polling lcore) has its own stream and its instances their own completion words.
 *
 * Errors: functions return 0 or a negative errno and, where they take err/cap, one line saying why.
 * A sticky device error (the CUDA context is lost, or the fake was told so) marks the device
 * unhealthy: every later call on it fails with -EIO and health() returns the first reason.
 */
#ifndef BW_GPU_H
#define BW_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "program.h"

/* Bumped whenever struct gpu_ops or the structs it passes change. */
#define GPU_ABI_VERSION 5u

/* The one symbol a module exports: gpu_module_entry_fn. */
#define GPU_MODULE_SYMBOL "bw_gpu_module_ops"

#define GPU_ERR_MAX 256          /* an error line, with its NUL */
#define GPU_DEVICES_MAX 16       /* devices a probe reports */
#define GPU_NAME_MAX 256        /* cudaDeviceProp.name's size */
#define GPU_REGIONS_MAX 64       /* host regions registered per device at once */
#define GPU_INSTANCE_SLOTS_MAX 4096 /* an instance's slots per size */

/* One device as a probe sees it. */
struct gpu_device_info {
	int index;
	char name[GPU_NAME_MAX];
	int cc_major, cc_minor;          /* compute capability: 9.0 is Hopper */
	uint64_t total_mem_bytes;
	int multiprocessors;
	int can_map_host_memory;         /* cudaHostRegisterMapped works */
};

/* What a probe found. count == 0 is no error: reason then says why there is no device. */
struct gpu_probe {
	int count;                                /* devices, at most GPU_DEVICES_MAX reported */
	struct gpu_device_info devices[GPU_DEVICES_MAX];
	int runtime_version;                      /* e.g. 13000; 0 when unknown */
	int driver_version;                       /* 0 when there is no driver */
	char reason[GPU_ERR_MAX];                 /* "" when count > 0 */
};

/*
 * How an instance's graphs are started (instance_create's mode). Either way instance_launch keeps its
 * contract: the batch table is written, the word reaches the generation when the graph is done.
 */
enum gpu_launch_mode {
	GPU_LAUNCH_GRAPH = 0,    /* instance_launch calls the driver: one graph launch per batch */
	GPU_LAUNCH_DOORBELL = 1, /* instance_launch is memory writes: a dispatcher the module keeps on a
				  * stream of the instance's own reads launch requests from a ring in mapped
				  * memory (doorbell.h) and starts each (size, slot)'s graph from the device;
				  * no driver call per batch while it runs (idle for a while it parks, and the
				  * next launch restarts it: one graph launch). Its launches run in the order
				  * made, not ordered with other work on the caller's stream. CUDA: -ENOTSUP
				  * when a graph holds a node the device cannot launch */
	GPU_LAUNCH_MODE_COUNT
};

struct gpu_dev;      /* an opened device: the module's */
struct gpu_stream;   /* one caller's stream and its completion words: the module's */
struct gpu_loaded;   /* a program on a device: its ops and its constants in device memory */
struct gpu_instance; /* a loaded program for one stream: arenas, batch tables, words and graphs */

/*
 * A device runtime. Functions marked (hot) may run on a polling lcore per batch: no lock, no
 * allocation, no system call, no logging. The others run at start-up or shutdown.
 */
struct gpu_ops {
	uint32_t abi_version;   /* GPU_ABI_VERSION of the module */
	const char *name;       /* "cuda", "fake" */

	/**
	 * Looks for devices. Never fails for want of a device or a driver: count is then 0 and reason
	 * says why (e.g. "no CUDA device present: cudaGetDeviceCount: ...").
	 * \return 0, or a negative errno when out is NULL.
	 */
	int (*probe)(struct gpu_probe *out);

	/** Opens device index (creates its context). \return 0 and *dev, or a negative errno and err. */
	int (*dev_open)(int index, struct gpu_dev **dev, char *err, size_t cap);
	/** Closes a device; its streams and registrations must be gone (they are released if not). */
	void (*dev_close)(struct gpu_dev *dev);
	/** \return 0 while healthy; -EIO once a sticky error happened, with its reason in why. */
	int (*health)(struct gpu_dev *dev, char *why, size_t cap);

	/**
	 * Registers a host region (e.g. a DPDK mbuf pool's memory) so the device reads and writes it
	 * directly (cudaHostRegister, mapped). *dev_addr: the address the device uses for addr.
	 * The CUDA module refuses a region sharing a page with a registered one (cudaHostRegister pins
	 * whole pages), as the fake does when configured to (pin_page_bytes): see gpu_host_ranges_merge.
	 * \return 0; -EINVAL (NULL, empty), -EEXIST (overlaps a registered region, or shares a page with
	 *         one), -ENOSPC (more than GPU_REGIONS_MAX), -EIO (device error or unhealthy).
	 */
	int (*host_register)(struct gpu_dev *dev, void *addr, size_t len, void **dev_addr, char *err, size_t cap);
	/** \return 0; -ENOENT when addr does not start a registered region; -EIO. */
	int (*host_unregister)(struct gpu_dev *dev, void *addr, char *err, size_t cap);
	/** \return the number of regions registered now. */
	unsigned int (*host_regions)(const struct gpu_dev *dev);

	/**
	 * Creates a stream for one caller. Call it on the thread that will use the stream: it makes the
	 * device current there (CUDA's current device is per thread). The completion words are the
	 * instances' (instance_create). \return 0; -ENOMEM; -EIO.
	 */
	int (*stream_create)(struct gpu_dev *dev, struct gpu_stream **stream, char *err, size_t cap);
	/** Destroys a stream, waiting for its queued work. */
	void (*stream_destroy)(struct gpu_stream *stream);

	/**
	 * (hot) Translates a host address inside a registered region to the device's address for it.
	 * \return 0 and *dev_addr; -EFAULT when [addr, addr + len) is not inside one registered region.
	 */
	int (*host_to_dev)(struct gpu_dev *dev, const void *addr, size_t len, uint64_t *dev_addr);

	/**
	 * Loads a program (program.h) on the device: checks every op (codes, functions, dtypes, operands
	 * inside the arena or the constants), uploads the constants and prepares what each op needs (the
	 * CUDA module: cuBLASLt matmul descriptors and algorithms). The program may be freed afterwards.
	 * \return 0 and *out; -EINVAL (an op the module refuses: err names the size, the op and why),
	 *         -ENOTSUP (a library the program needs is missing, e.g. libcublasLt), -ENOMEM, -EIO.
	 */
	int (*program_load)(struct gpu_dev *dev, const struct gpu_program *prog, struct gpu_loaded **out, char *err,
			    size_t cap);
	/** Frees a loaded program (its instances must be destroyed). */
	void (*program_unload)(struct gpu_loaded *prog);

	/**
	 * Makes an instance of a loaded program for one stream, with nb_slots slots per batch size: for
	 * every (size, slot) a device arena, a batch table and a completion word in mapped pinned host
	 * memory, and one CUDA graph (gather, the ops, scatter, completion write) captured and
	 * instantiated now, so that a launch is a single graph launch. Call it on the stream's thread.
	 * \param mode  enum gpu_launch_mode
	 * \return 0 and *out; -EINVAL (nb_slots 0 or above GPU_INSTANCE_SLOTS_MAX, an unknown mode);
	 *         -ENOTSUP (the mode is not available on this device or driver: err says why); -ENOMEM;
	 *         -EIO.
	 */
	int (*instance_create)(struct gpu_loaded *prog, struct gpu_stream *stream, uint32_t nb_slots, uint32_t mode,
			       struct gpu_instance **out, char *err, size_t cap);
	/** Destroys an instance, waiting for its launches to finish. */
	void (*instance_destroy)(struct gpu_instance *inst);
	/** \return the batch table of (size index, slot): host address, written by the host before a launch. */
	struct gpu_batch_table *(*instance_table)(struct gpu_instance *inst, uint32_t size_idx, uint32_t slot);
	/** \return the completion word of (size index, slot): host address, polled with gpu_word_reached. */
	volatile uint32_t *(*instance_word)(struct gpu_instance *inst, uint32_t size_idx, uint32_t slot);

	/**
	 * (hot) Launches the graph of (size index, slot) on the instance's stream. Its batch table must be
	 * written; when the graph is done, the word holds the table's generation (and the table's fault
	 * says whether a kernel found bad data).
	 * \return 0; -EINVAL (index out of range); -EIO (the launch failed: err says why; a sticky error
	 *         also marks the device unhealthy).
	 */
	int (*instance_launch)(struct gpu_instance *inst, uint32_t size_idx, uint32_t slot, char *err, size_t cap);

	/**
	 * For benchmarks, never on a polling lcore (it waits): launches the graph of (size index, slot)
	 * iters times back to back, as instance_launch does, and measures the device's time from the first
	 * launch's start to the last one's end (CUDA events on the instance's stream; the fake: its host
	 * clock). The slot's table must be written and the slot idle (in doorbell mode: the whole
	 * instance idle; the graphs are launched from the host, so the time is the graph's, without the
	 * doorbell). *ms_per_launch: that time / iters.
	 * \return 0; -EINVAL (index out of range, iters 0); -EIO.
	 */
	int (*instance_time)(struct gpu_instance *inst, uint32_t size_idx, uint32_t slot, uint32_t iters,
			     double *ms_per_launch, char *err, size_t cap);
};

/*
 * The module's entry point, exported as GPU_MODULE_SYMBOL. \return the table when the module speaks
 * abi_version, else NULL.
 */
typedef const struct gpu_ops *(*gpu_module_entry_fn)(uint32_t abi_version);

/** (hot) \return non-zero once the device wrote value into word. A plain load: no system call. */
static inline int gpu_word_reached(const volatile uint32_t *word, uint32_t value)
{
	return __atomic_load_n(word, __ATOMIC_ACQUIRE) == value;
}

/* ---- preparing registrations (gpu/regions.c, linked with the loader) ------------------------------ */

/* Host memory to register: [start, end). */
struct gpu_host_range {
	uintptr_t start, end;
};

/**
 * Turns memory chunks (a mempool's, in any order, touching, overlapping or empty) into what to pass to
 * host_register, in place: each rounded out to page boundaries, sorted, and those that overlap or
 * touch merged into one. So a pool of many contiguous chunks (2 MB hugepages, one chunk each, in
 * IOVA-as-PA mode) takes one registration per contiguous run, not one per chunk, and no two
 * registrations share a page (host_register refuses that: the device pins whole pages). Start-up only.
 * \param page  a power of two (the host's page size); 0 or 1: no rounding
 * \return the number of ranges left at the front of r, ascending and neither touching nor overlapping
 */
unsigned int gpu_host_ranges_merge(struct gpu_host_range *r, unsigned int n, size_t page);

/* ---- the loader (gpu/loader.c, library bwgpuload) ---------------------------------------------------- */

struct gpu_module {
	const struct gpu_ops *ops;
	void *handle;                  /* dlopen's */
	char path[4096];               /* the file it came from */
};

/**
 * Loads a device module with dlopen and checks its ABI version.
 * \param path  the module file; NULL: libbwgpu.so next to the executable, then in the build tree's
 *              gpu/ beside it, then in the install's libdir/batchwire (GPU_MODULE_DIR)
 * \return 0; -ENOENT (not built, or not found: err lists where it looked); -ENOEXEC (dlopen or dlsym
 *         failed: err has dlerror's line); -EPROTO (another ABI version).
 */
int gpu_module_load(const char *path, struct gpu_module *mod, char *err, size_t cap);

/** Unloads a module loaded by gpu_module_load (its devices must be closed). */
void gpu_module_unload(struct gpu_module *mod);

/** \return non-zero when this build has a CUDA module (meson's cuda feature found nvcc). */
int gpu_module_built(void);

#endif /* BW_GPU_H */
