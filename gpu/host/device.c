/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Opening a device the way every host-side program does (bwrun, the daemon): the module by path (or
 * the fake device by the name "fake"), a probe, the index checked against what the probe found, and
 * one line that says why when any of it fails, e.g. "no CUDA device present: cudaGetDeviceCount: ...".
 * Then a model's program: compiled and loaded on it the same way everywhere.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <batchwire/err.h>

#include "fake.h"
#include "host.h"

int gpu_host_device_open(const char *module, int index, struct gpu_host_device *hd, char *err, size_t cap)
{
	struct gpu_probe probe;
	int rc;

	memset(hd, 0, sizeof(*hd));
	hd->index = index;
	if (module != NULL && strcmp(module, GPU_HOST_FAKE_MODULE) == 0) {
		/* one device whose own thread finishes queued work, as a GPU would */
		struct gpu_fake_config cfg = { .nb_devices = 1, .mode = GPU_FAKE_THREAD, .seed = 1 };

		gpu_fake_configure(&cfg);
		hd->ops = gpu_fake_ops();
	} else {
		rc = gpu_module_load(module, &hd->module, err, cap);
		if (rc != 0)
			return rc;
		hd->ops = hd->module.ops;
	}
	rc = hd->ops->probe(&probe);
	if (rc == 0 && probe.count == 0) {
		snprintf(err, cap, "%s", probe.reason);
		rc = -ENODEV;
	} else if (rc == 0 && (index < 0 || index >= probe.count)) {
		snprintf(err, cap, "GPU index %d: this host has %d device(s) (0..%d)", index, probe.count,
			 probe.count - 1);
		rc = -ENODEV;
	} else if (rc != 0) {
		snprintf(err, cap, "probing for devices: %s", strerror(-rc));
	}
	if (rc == 0) {
		hd->info = probe.devices[index];
		rc = hd->ops->dev_open(index, &hd->dev, err, cap);
	}
	if (rc != 0)
		gpu_host_device_close(hd);
	return rc;
}

int gpu_host_device_open_on(const char *module, int index, const cpu_set_t *driver_cpus, struct gpu_host_device *hd,
			    char *err, size_t cap)
{
	cpu_set_t own;
	int rc, back;

	if (driver_cpus == NULL)
		return gpu_host_device_open(module, index, hd, err, cap);
	memset(hd, 0, sizeof(*hd));
	rc = pthread_getaffinity_np(pthread_self(), sizeof(own), &own);
	if (rc == 0)
		rc = pthread_setaffinity_np(pthread_self(), sizeof(*driver_cpus), driver_cpus);
	if (rc != 0) {
		snprintf(err, cap, "moving to the driver's CPUs to open the GPU: %s", strerror(rc));
		return -rc;
	}
	rc = gpu_host_device_open(module, index, hd, err, cap);
	back = pthread_setaffinity_np(pthread_self(), sizeof(own), &own);
	if (back != 0) {
		/* a polling lcore left off its own core is worse than no GPU: open nothing, say why */
		if (rc == 0)
			gpu_host_device_close(hd);
		snprintf(err, cap, "back to the thread's own CPUs after opening the GPU: %s", strerror(back));
		return -back;
	}
	return rc;
}

void gpu_host_device_close(struct gpu_host_device *hd)
{
	if (hd->dev != NULL)
		hd->ops->dev_close(hd->dev);
	if (hd->module.handle != NULL)
		gpu_module_unload(&hd->module);
	memset(hd, 0, sizeof(*hd));
}

int gpu_host_program_load(const struct gpu_host_device *hd, const struct rt_graph *g, const int64_t *sizes,
			  unsigned int nb_sizes, const struct gpu_compile_options *o, struct gpu_host_program *p,
			  char *err, size_t cap)
{
	char why[GPU_ERR_MAX * 2];
	int rc;

	memset(p, 0, sizeof(*p));
	rc = gpu_compile_with(g, sizes, nb_sizes, o, &p->compiled, why, sizeof(why));
	if (rc != 0)
		return bw_err(err, cap, rc, "compiling: %s", why);
	rc = hd->ops->program_load(hd->dev, &p->compiled->prog, &p->loaded, why, sizeof(why));
	if (rc != 0) {
		gpu_host_program_unload(hd, p);
		return bw_err(err, cap, rc, "loading on %s: %s", hd->info.name, why);
	}
	return 0;
}

void gpu_host_program_unload(const struct gpu_host_device *hd, struct gpu_host_program *p)
{
	if (p->loaded != NULL)
		hd->ops->program_unload(p->loaded);
	gpu_compiled_free(p->compiled);
	memset(p, 0, sizeof(*p));
}
