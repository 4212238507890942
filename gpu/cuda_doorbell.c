/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The doorbell launch mode on the CUDA module (gpu.h's GPU_LAUNCH_DOORBELL), host side. The dispatcher
 * kernel is doorbell.cu's, the ring doorbell.h's.
 *
 * A launch is memory writes: the ring entry and its seq (mapped pinned host memory), then a full fence
 * and a load of the line the device writes only when its dispatcher parks or fails (so it stays in the
 * host's cache). No driver call, no system call, no lock while the dispatcher is running. The
 * dispatcher takes entries in ring order and tail-launches each (size, slot)'s work graph from the
 * device, then itself; idle for DOORBELL_PARK_AFTER_NS it parks, and the next doorbell starts it again
 * with one cudaGraphLaunch: the only driver call this mode makes per batch, and only after an idle
 * period.
 *
 * Why it parks rather than wait forever: a dispatcher spinning on the device keeps its stream busy,
 * and device-wide synchronising calls (cudaFree, cudaFreeHost: instance_destroy, program_unload, on
 * any lcore) would wait for it without end. Parked, it lets them through within the idle time.
 *
 * Why it also parks on demand: under steady traffic it never idles, so the module's own device-wide
 * synchronising calls (cudaFree, cudaFreeHost, cudaHostUnregister in instance_destroy, program_unload,
 * host_unregister; cudaDeviceSynchronize in program_load's warm-ups) would wait for as long as traffic
 * flows. Around them the module parks every doorbell of the device (cuda_doorbells_park): it sets the
 * ring's park_now, after which the dispatcher parks at the start of its next run or poll even with work
 * waiting and the lcore's doorbell starts no chain; it waits (bounded) until the dispatcher's stream is
 * empty, makes the call, then clears park_now and starts a chain itself (cuda_doorbells_resume), which
 * takes what was rung meanwhile. Parks nest (a count per doorbell, under the device's doorbells_lock):
 * the last resume restarts. The lcore's path takes no lock: it reads park_now after its fence.
 *
 * Who starts chains: the lcore (after an idle park) and the resuming thread. Two threads must not
 * launch the kick graph at once (CUDA graph execs are not internally synchronised), and the dispatcher
 * reads the number of chains started when it parks, so that number (the ring's epoch) is shared and
 * written only by the holder of the ring's starting flag, taken by compare-and-swap. The lcore never
 * waits for it: when the flag is taken, the holder is either a park (whose resume starts a chain after
 * clearing park_now) or a thread about to launch a chain (which runs after the lcore's seq store, by
 * the handshake below), and either chain takes the lcore's entry. A park holds the flag for its whole
 * duration (taken after setting park_now, so at most one lcore launch is in progress to wait out), so
 * nothing is launched on a parked stream.
 *
 * Why two graphs of the same kernel: a device graph must not be launched from the host while it may
 * be launched from the device (the CUDA programming guide: undefined behaviour), and a dispatcher
 * that found work right after announcing it parks goes on launching itself while the host, having seen
 * the announcement, starts another chain. So the host only ever launches the kick graph (a host graph:
 * its launches queue behind the chain before it on the dispatcher's stream) and only the device
 * launches the dispatch graph, which continues the chain by tail-launching its own handle (stored in
 * struct gpu_doorbell_dispatch, since the kick graph is no device graph and cudaGetCurrentGraphExec
 * would give it none). A second chain, started needlessly, finds no work and parks: harmless.
 *
 * The dispatcher's stream is private to the instance: it is busy whenever the dispatcher runs, so
 * nothing else may queue behind it. Doorbell launches are therefore not ordered with the caller's
 * stream's other work (gpu.h's instance_launch needs no such order: the table, then the word).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <batchwire/compiler.h> /* likely, unlikely */

#include "cuda_defs.h"
#include "doorbell.h"

/*
 * How long an idle dispatcher polls before it parks. Longer keeps a doorbell free of driver calls
 * across longer gaps between batches; shorter lets a device-wide synchronising call through sooner
 * (and polls PCIe less: about one 4-byte read per microsecond while idle).
 */
#define DOORBELL_PARK_AFTER_NS 2000000ull
/*
 * How long a park waits for one dispatcher to end (cold): a poll plus the work graph it may be running.
 * Past it the synchronising call goes ahead and waits in the driver instead (the dispatcher still parks
 * at its next poll, park_now being set).
 */
#define DOORBELL_PARK_WAIT_NS 1000000000ull
#define DOORBELL_PARK_NAP_NS 20000L         /* between two cudaStreamQuery while waiting */

/* doorbell.cu */
int bwgpu_doorbell_launch(void *stream, struct gpu_doorbell_dispatch *dispatch_dev);
int bwgpu_doorbell_check(void);

struct cuda_doorbell {
	struct gpu_dev *dev;
	struct gpu_doorbell_ring *ring;     /* host address, mapped pinned */
	uint32_t mask;
	uint32_t posted;                    /* positions published (the launching thread's) */
	uint32_t nb_slots;
	uint32_t park_count;                /* parks in effect on it (dev->doorbells_lock) */
	cudaStream_t stream;                /* the dispatcher's, private */
	struct gpu_doorbell_dispatch *dispatch_dev;
	cudaGraphExec_t kick;               /* launched by the host: starts a chain */
	cudaGraphExec_t dispatch;           /* launched by the device only */
	bool armed;                         /* the dispatcher's state is on the device: a chain may run */
	bool listed;                        /* on dev->doorbells (dev->doorbells_lock) */
	struct cuda_doorbell *next;         /* dev->doorbells (dev->doorbells_lock) */
};

static const char *node_type_name(enum cudaGraphNodeType t)
{
	switch (t) {
	case cudaGraphNodeTypeKernel: return "kernel";
	case cudaGraphNodeTypeMemcpy: return "memcpy";
	case cudaGraphNodeTypeMemset: return "memset";
	case cudaGraphNodeTypeHost: return "host function";
	case cudaGraphNodeTypeGraph: return "child graph";
	case cudaGraphNodeTypeEmpty: return "empty";
	case cudaGraphNodeTypeWaitEvent: return "event wait";
	case cudaGraphNodeTypeEventRecord: return "event record";
	case cudaGraphNodeTypeExtSemaphoreSignal: return "external semaphore signal";
	case cudaGraphNodeTypeExtSemaphoreWait: return "external semaphore wait";
	case cudaGraphNodeTypeMemAlloc: return "memory allocation";
	case cudaGraphNodeTypeMemFree: return "memory free";
	case cudaGraphNodeTypeConditional: return "conditional";
	default: return "unknown";
	}
}

/* Names the node device launch refused: its type and, for a kernel, the kernel when the runtime knows it. */
static void refused_node(cudaGraphNode_t node, char *out, size_t cap)
{
	enum cudaGraphNodeType type;
	struct cudaKernelNodeParams kp;
	const char *name = NULL;

	if (node == NULL || cudaGraphNodeGetType(node, &type) != cudaSuccess) {
		snprintf(out, cap, "a node");
		return;
	}
	/* best effort: a library's kernel may be unknown to this runtime (cudaErrorInvalidDeviceFunction) */
	if (type == cudaGraphNodeTypeKernel && cudaGraphKernelNodeGetParams(node, &kp) == cudaSuccess &&
	    cudaFuncGetName(&name, kp.func) != cudaSuccess)
		name = NULL;
	cudaGetLastError();
	if (name != NULL)
		snprintf(out, cap, "a kernel node (%s)", name);
	else
		snprintf(out, cap, "a %s node", node_type_name(type));
}

int cuda_graph_instantiate(struct gpu_dev *dev, cudaGraph_t graph, bool device_launch, cudaStream_t upload,
			   cudaGraphExec_t *exec, const char *what, char *err, size_t cap)
{
	cudaGraphInstantiateParams p = { .flags = device_launch ? cudaGraphInstantiateFlagDeviceLaunch : 0 };
	char call[160], node[96];
	cudaError_t e;

	*exec = NULL;
	e = cudaGraphInstantiateWithParams(exec, graph, &p);
	if (device_launch && (p.result_out == cudaGraphInstantiateNodeOperationNotSupported ||
			      p.result_out == cudaGraphInstantiateMultipleDevicesNotSupported)) {
		refused_node(p.errNode_out, node, sizeof(node));
		gpu_err(err, cap, "%s: the doorbell launch mode needs graphs the device can launch: %s %s", what, node,
			p.result_out == cudaGraphInstantiateMultipleDevicesNotSupported ? "is on another device" :
			"is not device-launchable (only kernel, memcpy, memset and child graph nodes are, and kernels "
			"without dynamic parallelism)");
		if (*exec != NULL)
			cudaGraphExecDestroy(*exec);
		*exec = NULL;
		cudaGetLastError();
		return -ENOTSUP;
	}
	if (e == cudaSuccess && p.result_out != cudaGraphInstantiateSuccess)
		e = cudaErrorInvalidValue; /* a result without an error code: say what the call says */
	if (e != cudaSuccess) {
		if (*exec != NULL)
			cudaGraphExecDestroy(*exec);
		*exec = NULL;
		snprintf(call, sizeof(call), "%s: cudaGraphInstantiate%s", what, device_launch ? " (device launch)" : "");
		return cuda_fail(dev, call, e, err, cap);
	}
	/* now, so the first launch does not pay for moving the graph (a device launch needs it there) */
	e = cudaGraphUpload(*exec, upload);
	if (e != cudaSuccess) {
		snprintf(call, sizeof(call), "%s: cudaGraphUpload", what);
		return cuda_fail(dev, call, e, err, cap);
	}
	return 0;
}

/* The dispatcher chain ended by a failed device-side launch (doorbell.cu): the device is lost. Cold. */
static int doorbell_failed(struct cuda_doorbell *db, char *err, size_t cap)
{
	struct gpu_dev *dev = db->dev;
	uint32_t code = __atomic_load_n(&db->ring->fault, __ATOMIC_ACQUIRE);
	uint32_t graph = __atomic_load_n(&db->ring->fault_graph, __ATOMIC_RELAXED);

	if (!dev->lost) {
		dev->lost = true;
		snprintf(dev->fault, sizeof(dev->fault),
			 "doorbell dispatcher: device-side cudaGraphLaunch of size %u slot %u (ring position %u): %s (%s)",
			 graph / db->nb_slots, graph % db->nb_slots, __atomic_load_n(&db->ring->fault_pos, __ATOMIC_RELAXED),
			 cudaGetErrorString((cudaError_t)code), cudaGetErrorName((cudaError_t)code));
	}
	return cuda_check(dev, err, cap);
}

/* Starts a chain: one cudaGraphLaunch of the kick graph. The caller holds ring->starting. */
static int doorbell_kick(struct cuda_doorbell *db, char *err, size_t cap)
{
	struct gpu_doorbell_ring *ring = db->ring;
	uint32_t epoch = __atomic_load_n(&ring->epoch, __ATOMIC_RELAXED);
	cudaError_t e;

	/* read by the chain when it parks; the launch's doorbell write to the GPU comes after this store */
	__atomic_store_n(&ring->epoch, epoch + 1, __ATOMIC_RELEASE);
	e = cudaGraphLaunch(db->kick, db->stream);
	if (likely(e == cudaSuccess))
		return 0;
	/* no chain: the next doorbell tries again, and its chain takes this entry too */
	__atomic_store_n(&ring->epoch, epoch, __ATOMIC_RELEASE);
	return cuda_fail(db->dev, "cudaGraphLaunch (doorbell dispatcher)", e, err, cap);
}

/*
 * No dispatcher runs: start a chain, unless another thread holds the starting flag (the header comment
 * says why its chain takes this entry). Never waits.
 */
static int doorbell_start(struct cuda_doorbell *db, char *err, size_t cap)
{
	uint32_t free_flag = 0;
	int rc;

	if (!__atomic_compare_exchange_n(&db->ring->starting, &free_flag, 1, false, __ATOMIC_ACQUIRE,
					 __ATOMIC_RELAXED))
		return 0;
	rc = doorbell_kick(db, err, cap);
	__atomic_store_n(&db->ring->starting, 0, __ATOMIC_RELEASE);
	return rc;
}

int cuda_doorbell_ring(struct cuda_doorbell *db, uint32_t size_idx, uint32_t slot, char *err, size_t cap)
{
	struct gpu_doorbell_ring *ring = db->ring;
	uint32_t parked, epoch;

	if (unlikely(__atomic_load_n(&ring->fault, __ATOMIC_RELAXED) != 0))
		return doorbell_failed(db, err, cap);
	gpu_doorbell_post(ring, db->mask, db->posted++, size_idx, slot);
	/*
	 * Store seq, full fence, load parked, against the dispatcher's store parked, fence, load seq: if
	 * it parked without seeing this seq, this load sees it parked, and a chain is started. parked is
	 * read before epoch (acquire): a chain started after this read has not announced parking to it,
	 * so it will see this seq; reading epoch first could pair a stale epoch with that chain's parked.
	 */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	parked = __atomic_load_n(&ring->parked, __ATOMIC_ACQUIRE);
	epoch = __atomic_load_n(&ring->epoch, __ATOMIC_RELAXED);
	if (likely(parked != epoch))
		return 0;
	/* parked on purpose: the resume, which clears park_now before it starts a chain, takes this entry */
	if (__atomic_load_n(&ring->park_now, __ATOMIC_RELAXED) != 0)
		return 0;
	return doorbell_start(db, err, cap);
}

/* ---- parking around device-wide synchronising calls (cold) ---------------------------------------------- */

static uint64_t mono_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/*
 * Holds the ring for a park: park_now is set first, so the only holder to wait out is an lcore in
 * the middle of one cudaGraphLaunch (doorbell_start), whose chain then parks at once.
 */
static void doorbell_hold(struct cuda_doorbell *db)
{
	uint32_t free_flag = 0;

	__atomic_store_n(&db->ring->park_now, 1, __ATOMIC_SEQ_CST);
	while (!__atomic_compare_exchange_n(&db->ring->starting, &free_flag, 1, false, __ATOMIC_ACQUIRE,
					    __ATOMIC_RELAXED)) {
		free_flag = 0;
		sched_yield();
	}
}

/* Clears park_now, starts a chain for what was rung meanwhile, lets go of the ring. */
static void doorbell_release(struct cuda_doorbell *db)
{
	struct gpu_doorbell_ring *ring = db->ring;

	__atomic_store_n(&ring->park_now, 0, __ATOMIC_SEQ_CST);
	/*
	 * Always a chain: whether anything waits is not known here (an lcore that saw park_now set, or
	 * failed to take starting from us, rang without starting one). Idle, it parks after the idle time.
	 */
	if (db->armed && !db->dev->lost && __atomic_load_n(&ring->fault, __ATOMIC_ACQUIRE) == 0)
		doorbell_kick(db, NULL, 0);
	__atomic_store_n(&ring->starting, 0, __ATOMIC_RELEASE);
}

/* Waits, bounded, until the dispatcher's stream is empty: every chain on it has parked or ended. */
static void doorbell_wait_parked(struct cuda_doorbell *db)
{
	const struct timespec nap = { .tv_sec = 0, .tv_nsec = DOORBELL_PARK_NAP_NS };
	uint64_t start = mono_ns();

	while (!db->dev->lost && cudaStreamQuery(db->stream) == cudaErrorNotReady &&
	       mono_ns() - start < DOORBELL_PARK_WAIT_NS)
		nanosleep(&nap, NULL);
}

void cuda_doorbells_park(struct gpu_dev *dev)
{
	struct cuda_doorbell *db;

	pthread_mutex_lock(&dev->doorbells_lock);
	dev->doorbell_parks++;
	for (db = dev->doorbells; db != NULL; db = db->next)
		if (db->park_count++ == 0)
			doorbell_hold(db);
	/* every ring flagged first, then each waited for: the dispatchers park side by side */
	for (db = dev->doorbells; db != NULL; db = db->next)
		doorbell_wait_parked(db);
	pthread_mutex_unlock(&dev->doorbells_lock);
}

void cuda_doorbells_resume(struct gpu_dev *dev)
{
	struct cuda_doorbell *db;

	pthread_mutex_lock(&dev->doorbells_lock);
	dev->doorbell_parks--;
	for (db = dev->doorbells; db != NULL; db = db->next)
		if (--db->park_count == 0)
			doorbell_release(db);
	pthread_mutex_unlock(&dev->doorbells_lock);
}

/* Puts db on the device's list, parked if parks are in effect (their resumes count it). */
static void doorbell_list(struct cuda_doorbell *db)
{
	struct gpu_dev *dev = db->dev;

	pthread_mutex_lock(&dev->doorbells_lock);
	db->park_count = dev->doorbell_parks;
	if (db->park_count > 0)
		doorbell_hold(db); /* nothing rang it yet: the flag is free */
	db->next = dev->doorbells;
	dev->doorbells = db;
	db->listed = true;
	pthread_mutex_unlock(&dev->doorbells_lock);
}

/* Takes db off the list; a park holding it lets go without starting a chain (its owner stops it). */
static void doorbell_unlist(struct cuda_doorbell *db)
{
	struct gpu_dev *dev = db->dev;
	struct cuda_doorbell **p;

	if (!db->listed)
		return;
	pthread_mutex_lock(&dev->doorbells_lock);
	for (p = &dev->doorbells; *p != db; p = &(*p)->next)
		;
	*p = db->next;
	db->listed = false;
	if (db->park_count > 0) {
		db->park_count = 0;
		__atomic_store_n(&db->ring->park_now, 0, __ATOMIC_SEQ_CST);
		__atomic_store_n(&db->ring->starting, 0, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&dev->doorbells_lock);
}

void cuda_doorbell_stop(struct cuda_doorbell *db)
{
	struct gpu_dev *dev;

	if (db == NULL)
		return;
	dev = db->dev;
	cudaSetDevice(dev->index);
	doorbell_unlist(db);
	/* nothing rung and no chain ever started (epoch 0): no chain to stop */
	if (db->armed && (db->posted > 0 || __atomic_load_n(&db->ring->epoch, __ATOMIC_RELAXED) > 0) && !dev->lost &&
	    __atomic_load_n(&db->ring->fault, __ATOMIC_ACQUIRE) == 0) {
		/*
		 * The stop entry: the dispatcher serves what was rung before it, then ends. The ring has
		 * room: fewer entries wait than the instance has (size, slot) pairs (doorbell.h). Off the
		 * list, no park holds it: the doorbell starts a chain if none runs.
		 */
		if (cuda_doorbell_ring(db, GPU_DOORBELL_STOP, 0, NULL, 0) == 0)
			cudaStreamSynchronize(db->stream);
	}
	db->armed = false;
}

void cuda_doorbell_free(struct cuda_doorbell *db)
{
	if (db == NULL)
		return;
	cudaSetDevice(db->dev->index);
	if (db->kick != NULL)
		cudaGraphExecDestroy(db->kick);
	if (db->dispatch != NULL)
		cudaGraphExecDestroy(db->dispatch);
	cudaFree(db->dispatch_dev);
	if (db->stream != NULL)
		cudaStreamDestroy(db->stream);
	if (db->ring != NULL)
		cudaFreeHost(db->ring);
	free(db);
}

/* A doorbell that is not its instance's yet (creation failed): the others parked around its frees. */
static void doorbell_destroy(struct cuda_doorbell *db)
{
	struct gpu_dev *dev = db->dev;

	cuda_doorbell_stop(db);
	cuda_doorbells_park(dev);
	cuda_doorbell_free(db);
	cuda_doorbells_resume(dev);
}

/* Captures the dispatcher kernel once and instantiates it twice: kick (host graph), dispatch (device). */
static int doorbell_graphs(struct cuda_doorbell *db, char *err, size_t cap)
{
	cudaGraph_t graph = NULL;
	cudaError_t e, end_e;
	int rc;

	e = (cudaError_t)bwgpu_doorbell_check();
	if (e != cudaSuccess) {
		gpu_err(err, cap, "doorbell dispatcher kernel: cudaFuncGetAttributes: %s (%s): this driver cannot load "
			"a kernel that launches graphs from the device", cudaGetErrorString(e), cudaGetErrorName(e));
		cudaGetLastError();
		return -ENOTSUP;
	}
	e = cudaStreamBeginCapture(db->stream, cudaStreamCaptureModeThreadLocal);
	if (e != cudaSuccess)
		return cuda_fail(db->dev, "doorbell dispatcher: cudaStreamBeginCapture", e, err, cap);
	e = (cudaError_t)bwgpu_doorbell_launch(db->stream, db->dispatch_dev);
	end_e = cudaStreamEndCapture(db->stream, &graph);
	if (e == cudaSuccess)
		e = end_e;
	if (e != cudaSuccess) {
		if (graph != NULL)
			cudaGraphDestroy(graph);
		rc = cuda_fail(db->dev, "doorbell dispatcher: capture", e, err, cap);
		cudaGetLastError();
		return rc;
	}
	rc = cuda_graph_instantiate(db->dev, graph, true, db->stream, &db->dispatch, "doorbell dispatcher", err, cap);
	if (rc == 0)
		rc = cuda_graph_instantiate(db->dev, graph, false, db->stream, &db->kick, "doorbell kick", err, cap);
	cudaGraphDestroy(graph);
	return rc;
}

int cuda_doorbell_create(struct gpu_dev *dev, const cudaGraphExec_t *graphs, uint32_t nb_graphs, uint32_t nb_slots,
			 struct cuda_doorbell **out, char *err, size_t cap)
{
	uint32_t entries = gpu_doorbell_entries(nb_graphs);
	size_t ring_bytes = (size_t)gpu_doorbell_ring_bytes(entries);
	size_t dispatch_bytes = sizeof(struct gpu_doorbell_dispatch) + (size_t)nb_graphs * sizeof(uint64_t);
	struct gpu_doorbell_dispatch *dispatch = NULL;
	struct cuda_doorbell *db;
	void *ring_dev = NULL;
	cudaError_t e;
	int rc;

	db = calloc(1, sizeof(*db));
	dispatch = calloc(1, dispatch_bytes);
	if (db == NULL || dispatch == NULL) {
		free(db);
		free(dispatch);
		gpu_err(err, cap, "doorbell of %u graphs: out of memory", nb_graphs);
		return -ENOMEM;
	}
	db->dev = dev;
	db->mask = entries - 1;
	db->nb_slots = nb_slots;
	e = cudaHostAlloc((void **)&db->ring, ring_bytes, cudaHostAllocMapped | cudaHostAllocPortable);
	if (e != cudaSuccess) {
		db->ring = NULL;
		rc = cuda_fail(dev, "cudaHostAlloc (doorbell ring)", e, err, cap);
		goto fail;
	}
	/* parked == epoch == 0: no dispatcher runs, the first doorbell starts one; park_now, starting clear */
	memset(db->ring, 0, ring_bytes);
	e = cudaHostGetDevicePointer(&ring_dev, db->ring, 0);
	if (e == cudaSuccess)
		e = cudaStreamCreateWithFlags(&db->stream, cudaStreamNonBlocking);
	if (e == cudaSuccess)
		e = cudaMalloc((void **)&db->dispatch_dev, dispatch_bytes);
	if (e != cudaSuccess) {
		rc = cuda_fail(dev, "doorbell: cudaHostGetDevicePointer, cudaStreamCreateWithFlags, cudaMalloc", e, err, cap);
		goto fail;
	}
	rc = doorbell_graphs(db, err, cap);
	if (rc < 0)
		goto fail;
	dispatch->ring = (uint64_t)(uintptr_t)ring_dev;
	dispatch->self = (uint64_t)(uintptr_t)db->dispatch;
	dispatch->park_after_ns = DOORBELL_PARK_AFTER_NS;
	dispatch->mask = db->mask;
	dispatch->nb_slots = nb_slots;
	dispatch->nb_graphs = nb_graphs;
	for (uint32_t i = 0; i < nb_graphs; i++)
		dispatch->graphs[i] = (uint64_t)(uintptr_t)graphs[i];
	/* the dispatcher graphs' uploads were queued on db->stream: the synchronize waits for those too */
	e = cudaMemcpyAsync(db->dispatch_dev, dispatch, dispatch_bytes, cudaMemcpyHostToDevice, db->stream);
	if (e == cudaSuccess)
		e = cudaStreamSynchronize(db->stream);
	if (e != cudaSuccess) {
		rc = cuda_fail(dev, "doorbell: cudaMemcpyAsync (dispatcher state)", e, err, cap);
		goto fail;
	}
	free(dispatch);
	db->armed = true;
	doorbell_list(db);
	*out = db;
	return 0;
fail:
	free(dispatch);
	doorbell_destroy(db);
	return rc;
}
