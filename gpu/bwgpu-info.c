/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bwgpu-info: loads the GPU module as the daemon will and prints the devices it finds, or exactly why
 * there are none. It starts on any host: without CUDA, without a driver, without the module.
 *
 * Exit status (scripts test it; the smoke script runs it first):
 *   0  at least one device
 *   2  the module loaded but found no device (the reason is printed)
 *   3  no module: this build has no CUDA, or the module could not be loaded (the reason is printed)
 *   1  bad arguments
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "fake.h"
#include "gpu.h"

#define PROG "bwgpu-info"
#define EXIT_NO_DEVICE 2
#define EXIT_NO_MODULE 3

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " [--module PATH] [--fake]\n"
		"  --module PATH  the GPU module to load (default: libbwgpu.so beside this program, the build\n"
		"                 tree's gpu/, then the install's libdir/batchwire)\n"
		"  --fake         probe the built-in fake device instead (what CI tests against)\n"
		"exit: 0 devices found, 2 no device (reason printed), 3 no module (reason printed), 1 usage\n");
}

static void print_version(const char *what, int v)
{
	if (v > 0)
		printf("%s %d.%d", what, v / 1000, (v % 1000) / 10);
	else
		printf("%s none", what);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "module", required_argument, NULL, 'm' },
		{ "fake", no_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct gpu_module mod = { 0 };
	const struct gpu_ops *ops;
	const char *path = NULL;
	char err[GPU_ERR_MAX];
	struct gpu_probe probe;
	int opt, i, fake = 0;

	while ((opt = getopt_long(argc, argv, "m:fh", longopts, NULL)) != -1) {
		switch (opt) {
		case 'm':
			path = optarg;
			break;
		case 'f':
			fake = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 1;
		}
	}
	if (optind != argc) {
		fprintf(stderr, PROG ": unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 1;
	}
	if (fake) {
		ops = gpu_fake_ops();
		printf("module: built-in fake device (ABI %u)\n", ops->abi_version);
	} else {
		int rc = gpu_module_load(path, &mod, err, sizeof(err));

		if (rc < 0) {
			printf("no GPU: %s\n", err);
			return EXIT_NO_MODULE;
		}
		ops = mod.ops;
		printf("module: %s (%s, ABI %u)\n", mod.path, ops->name, ops->abi_version);
	}
	ops->probe(&probe);
	if (!fake) {
		print_version("CUDA runtime", probe.runtime_version);
		print_version(", driver", probe.driver_version);
		printf("\n");
	}
	for (i = 0; i < probe.count; i++) {
		const struct gpu_device_info *d = &probe.devices[i];

		printf("device %d: %s, compute capability %d.%d, %.1f GiB, %d SMs, %s\n", d->index, d->name,
		       d->cc_major, d->cc_minor, (double)d->total_mem_bytes / (1024.0 * 1024.0 * 1024.0),
		       d->multiprocessors, d->can_map_host_memory ? "maps host memory" : "cannot map host memory");
	}
	if (probe.count == 0)
		printf("%s\n", probe.reason);
	if (!fake)
		gpu_module_unload(&mod);
	return probe.count > 0 ? 0 : EXIT_NO_DEVICE;
}
