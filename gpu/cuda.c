/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The CUDA module (libbwgpu.so): struct gpu_ops on the CUDA runtime, linked statically, so the only
 * CUDA library a host needs is the driver (libcuda.so.1), which the runtime opens itself when the
 * first call comes. Without a driver every call fails cleanly and probe says why. This file: devices,
 * host registration and streams; programs and their instances are cuda_program.c's.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_defs.h"

/* Errors after which the context is unusable: every later call returns them. */
static bool sticky(cudaError_t e)
{
	switch (e) {
	case cudaErrorIllegalAddress:
	case cudaErrorLaunchFailure:
	case cudaErrorHardwareStackError:
	case cudaErrorIllegalInstruction:
	case cudaErrorMisalignedAddress:
	case cudaErrorInvalidAddressSpace:
	case cudaErrorInvalidPc:
	case cudaErrorECCUncorrectable:
	case cudaErrorAssert:
	case cudaErrorLaunchTimeout:
	case cudaErrorUnknown:
		return true;
	default:
		return false;
	}
}

int cuda_fail(struct gpu_dev *dev, const char *call, cudaError_t e, char *err, size_t cap)
{
	gpu_err(err, cap, "%s: %s (%s)", call, cudaGetErrorString(e), cudaGetErrorName(e));
	if (dev != NULL && sticky(e) && !dev->lost) {
		dev->lost = true;
		snprintf(dev->fault, sizeof(dev->fault), "%s: %s (%s)", call, cudaGetErrorString(e), cudaGetErrorName(e));
	}
	return -EIO;
}

int cuda_check(const struct gpu_dev *dev, char *err, size_t cap)
{
	if (!dev->lost)
		return 0;
	gpu_err(err, cap, "CUDA device %d unhealthy: %s", dev->index, dev->fault);
	return -EIO;
}

static int cuda_probe(struct gpu_probe *out)
{
	cudaError_t e;
	int i, n = 0;

	if (out == NULL)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	cudaRuntimeGetVersion(&out->runtime_version);
	cudaDriverGetVersion(&out->driver_version); /* 0 without a driver */
	e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess) {
		snprintf(out->reason, sizeof(out->reason), "no CUDA device present: cudaGetDeviceCount: %s (%s)",
			 cudaGetErrorString(e), cudaGetErrorName(e));
		cudaGetLastError(); /* not sticky: clear it */
		return 0;
	}
	if (n == 0) {
		snprintf(out->reason, sizeof(out->reason), "no CUDA device present: cudaGetDeviceCount found none");
		return 0;
	}
	for (i = 0; i < n && out->count < GPU_DEVICES_MAX; i++) {
		struct gpu_device_info *d = &out->devices[out->count];
		struct cudaDeviceProp p;

		e = cudaGetDeviceProperties(&p, i);
		if (e != cudaSuccess) {
			snprintf(out->reason, sizeof(out->reason), "device %d: cudaGetDeviceProperties: %s", i,
				 cudaGetErrorString(e));
			continue;
		}
		d->index = i;
		snprintf(d->name, sizeof(d->name), "%s", p.name);
		d->cc_major = p.major;
		d->cc_minor = p.minor;
		d->total_mem_bytes = p.totalGlobalMem;
		d->multiprocessors = p.multiProcessorCount;
		d->can_map_host_memory = p.canMapHostMemory;
		out->count++;
	}
	if (out->count == 0 && out->reason[0] == '\0')
		snprintf(out->reason, sizeof(out->reason), "no CUDA device usable");
	return 0;
}

static int cuda_dev_open(int index, struct gpu_dev **out, char *err, size_t cap)
{
	struct gpu_dev *dev;
	cudaError_t e;

	e = cudaSetDevice(index);
	if (e != cudaSuccess) {
		gpu_err(err, cap, "CUDA device %d: cudaSetDevice: %s (%s)", index, cudaGetErrorString(e),
			cudaGetErrorName(e));
		return e == cudaErrorInvalidDevice || e == cudaErrorNoDevice ? -ENODEV : -EIO;
	}
	e = cudaFree(NULL); /* creates the primary context now, not on the hot path */
	if (e != cudaSuccess)
		return cuda_fail(NULL, "cudaFree(NULL) (context creation)", e, err, cap);
	dev = calloc(1, sizeof(*dev));
	if (dev == NULL) {
		gpu_err(err, cap, "CUDA device %d: out of memory", index);
		return -ENOMEM;
	}
	dev->index = index;
	pthread_mutex_init(&dev->doorbells_lock, NULL);
	/* cudaHostRegister pins whole pages: regions sharing one are refused up front (defs.h) */
	dev->regions.page = (size_t)sysconf(_SC_PAGESIZE);
	*out = dev;
	return 0;
}

static void cuda_dev_close(struct gpu_dev *dev)
{
	if (dev == NULL)
		return;
	cudaSetDevice(dev->index);
	while (dev->regions.n > 0) {
		cudaHostUnregister((void *)dev->regions.r[dev->regions.n - 1].start);
		gpu_regions_remove(&dev->regions, dev->regions.n - 1);
	}
	cublaslt_close(dev);
	cudnn_close(dev);
	pthread_mutex_destroy(&dev->doorbells_lock);
	free(dev);
}

static int cuda_health(struct gpu_dev *dev, char *why, size_t cap)
{
	cudaError_t e;

	if (!dev->lost) {
		/* neither call waits for the device; a lost context fails both with its sticky error */
		cudaSetDevice(dev->index);
		e = cudaPeekAtLastError();
		if (sticky(e))
			cuda_fail(dev, "cudaPeekAtLastError", e, NULL, 0);
		e = cudaStreamQuery(NULL);
		if (sticky(e))
			cuda_fail(dev, "cudaStreamQuery", e, NULL, 0);
	}
	if (cuda_check(dev, why, cap) < 0)
		return -EIO;
	gpu_err(why, cap, "healthy");
	return 0;
}

static int cuda_host_register(struct gpu_dev *dev, void *addr, size_t len, void **dev_addr, char *err, size_t cap)
{
	void *dptr = NULL;
	cudaError_t e;
	int rc;

	rc = cuda_check(dev, err, cap);
	if (rc == 0)
		rc = gpu_regions_check(&dev->regions, addr, len, err, cap);
	if (rc < 0)
		return rc;
	cudaSetDevice(dev->index);
	e = cudaHostRegister(addr, len, cudaHostRegisterMapped | cudaHostRegisterPortable);
	if (e != cudaSuccess)
		return cuda_fail(dev, "cudaHostRegister", e, err, cap);
	e = cudaHostGetDevicePointer(&dptr, addr, 0);
	if (e != cudaSuccess) {
		cudaHostUnregister(addr);
		return cuda_fail(dev, "cudaHostGetDevicePointer", e, err, cap);
	}
	gpu_regions_add(&dev->regions, addr, len, dptr);
	if (dev_addr != NULL)
		*dev_addr = dptr;
	return 0;
}

static int cuda_host_unregister(struct gpu_dev *dev, void *addr, char *err, size_t cap)
{
	cudaError_t e;
	int idx = gpu_regions_find(&dev->regions, addr, err, cap);

	if (idx < 0)
		return idx;
	gpu_regions_remove(&dev->regions, (unsigned int)idx);
	cudaSetDevice(dev->index);
	cuda_doorbells_park(dev); /* it waits for the whole device, a busy dispatcher too */
	e = cudaHostUnregister(addr);
	cuda_doorbells_resume(dev);
	if (e != cudaSuccess)
		return cuda_fail(dev, "cudaHostUnregister", e, err, cap);
	return 0;
}

static unsigned int cuda_host_regions(const struct gpu_dev *dev)
{
	return dev->regions.n;
}

static int cuda_stream_create(struct gpu_dev *dev, struct gpu_stream **out, char *err, size_t cap)
{
	struct gpu_stream *s;
	cudaError_t e;
	int rc;

	rc = cuda_check(dev, err, cap);
	if (rc < 0)
		return rc;
	s = calloc(1, sizeof(*s));
	if (s == NULL) {
		gpu_err(err, cap, "stream: out of memory");
		return -ENOMEM;
	}
	cudaSetDevice(dev->index);
	e = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking);
	if (e != cudaSuccess) {
		free(s);
		return cuda_fail(dev, "cudaStreamCreateWithFlags", e, err, cap);
	}
	s->dev = dev;
	*out = s;
	return 0;
}

static void cuda_stream_destroy(struct gpu_stream *s)
{
	if (s == NULL)
		return;
	cudaSetDevice(s->dev->index);
	if (!s->dev->lost)
		cudaStreamSynchronize(s->stream); /* shutdown: what was queued on it still finishes */
	cudaStreamDestroy(s->stream);
	free(s);
}

/* (hot) A linear scan: GPU_REGIONS_MAX is small and the regions change only at start-up. */
static int cuda_host_to_dev(struct gpu_dev *dev, const void *addr, size_t len, uint64_t *dev_addr)
{
	uintptr_t a = (uintptr_t)addr;
	unsigned int i;

	for (i = 0; i < dev->regions.n; i++) {
		const struct gpu_region *r = &dev->regions.r[i];

		if (a >= r->start && a - r->start <= r->len && len <= r->len - (a - r->start)) {
			*dev_addr = (uint64_t)(uintptr_t)r->dev_addr + (a - r->start);
			return 0;
		}
	}
	return -EFAULT;
}

static const struct gpu_ops g_cuda_ops = {
	.abi_version = GPU_ABI_VERSION,
	.name = "cuda",
	.probe = cuda_probe,
	.dev_open = cuda_dev_open,
	.dev_close = cuda_dev_close,
	.health = cuda_health,
	.host_register = cuda_host_register,
	.host_unregister = cuda_host_unregister,
	.host_regions = cuda_host_regions,
	.stream_create = cuda_stream_create,
	.stream_destroy = cuda_stream_destroy,
	.host_to_dev = cuda_host_to_dev,
	.program_load = cuda_program_load,
	.program_unload = cuda_program_unload,
	.instance_create = cuda_instance_create,
	.instance_destroy = cuda_instance_destroy,
	.instance_table = cuda_instance_table,
	.instance_word = cuda_instance_word,
	.instance_launch = cuda_instance_launch,
	.instance_time = cuda_instance_time,
};

__attribute__((visibility("default"))) const struct gpu_ops *bw_gpu_module_ops(uint32_t abi_version);

const struct gpu_ops *bw_gpu_module_ops(uint32_t abi_version)
{
	return abi_version == GPU_ABI_VERSION ? &g_cuda_ops : NULL;
}
