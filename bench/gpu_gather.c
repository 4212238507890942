/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * gpu_gather: the batch table's gather and scatter on their own, in GB/s, from and into registered
 * host memory (page-aligned, registered as the daemon registers its mbuf pools: mapped). A program
 * of one input and one output tensor of --mib MiB at the same arena bytes and no op, so a launch's
 * device time (ops->instance_time over --iters launches back to back) is its gather kernel, its
 * scatter kernel and the completion write. One line per layout:
 *
 *   gather_1seg      the whole tensor in one segment, source 16-byte aligned (bwrun's and
 *                    gpu_launch's layout); the scatter has no segment
 *   gather_8k        segments of 8 KiB, each starting 16-byte aligned (jumbo frames' payloads)
 *   gather_8k_off2   the same starting 2 bytes past alignment (packet payloads): copy_plan.h's
 *                    shifted path, two aligned source words funnel-shifted into each 16-byte store
 *   scatter_1seg     one scatter segment of the whole tensor; the gather has none
 *
 * as `layout=... bytes=... ms=... gbps=...`, then `off2_vs_aligned=...` (gather_8k_off2's GB/s over
 * gather_8k's, in this run: what a misaligned source costs, near 1 when the shifted path's second
 * load is served by the first's sectors) and `gather_gbps=...` (gather_1seg's), the figure the GPU
 * check holds against its target (gpu/README.md). Exit: 0; 1 an error; 77 no device; 2 usage.
 * --module fake runs it on the fake device (a smoke run: its timing means nothing).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu.h"
#include "host.h"

#define PROG "gpu_gather"
#define EXIT_SKIP 77
#define EXIT_USAGE 2
#define MIB_DEFAULT 64u
#define ITERS_DEFAULT 20u
#define SEG_8K_BYTES 8192u
#define PAGE_BYTES 4096u

enum layout { GATHER_1SEG, GATHER_8K, GATHER_8K_OFF2, SCATTER_1SEG, LAYOUTS };

static const char *const g_layout_names[LAYOUTS] = { "gather_1seg", "gather_8k", "gather_8k_off2",
						     "scatter_1seg" };

static void usage(FILE *f)
{
	fprintf(f, "usage: " PROG " [--module PATH|fake] [--mib N] [--iters N]\n"
		   "  --module  the device module (default: libbwgpu.so where gpu_module_load looks), or fake\n"
		   "  --mib     the tensor's size in MiB (default %u)\n"
		   "  --iters   launches timed back to back per layout (default %u)\n",
		MIB_DEFAULT, ITERS_DEFAULT);
}

/* Writes the table for one layout. \return the bytes it moves. */
static uint64_t layout_table(struct gpu_batch_table *t, enum layout l, uint64_t host_dev, uint32_t bytes)
{
	uint32_t n = 0;

	t->nb_gather = t->nb_scatter = 0;
	if (l == GATHER_1SEG || l == SCATTER_1SEG) {
		t->segments[0] = (struct gpu_segment){ .addr = host_dev, .offset = 0, .len = bytes, .tensor = 0 };
		if (l == GATHER_1SEG)
			t->nb_gather = 1;
		else
			t->nb_scatter = 1;
		return bytes;
	}
	/* 8 KiB segments, each at its own place in host memory (spaced by a page, as packet buffers are) */
	for (uint32_t at = 0; at + SEG_8K_BYTES <= bytes - PAGE_BYTES; at += SEG_8K_BYTES, n++)
		t->segments[n] = (struct gpu_segment){ .addr = host_dev + at + (l == GATHER_8K_OFF2 ? 2 : 0),
						       .offset = at, .len = SEG_8K_BYTES, .tensor = 0 };
	t->nb_gather = n;
	return (uint64_t)n * SEG_8K_BYTES;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "module", required_argument, NULL, 'm' },
		{ "mib", required_argument, NULL, 's' },
		{ "iters", required_argument, NULL, 'i' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *path = NULL;
	unsigned long mib = MIB_DEFAULT, iters = ITERS_DEFAULT;
	struct gpu_host_device hd;
	const struct gpu_ops *ops;
	struct gpu_dev *dev;
	struct gpu_stream *stream = NULL;
	struct gpu_loaded *loaded = NULL;
	struct gpu_instance *inst = NULL;
	struct gpu_program prog;
	char err[GPU_ERR_MAX];
	double gather_gbps = 0, gbps[LAYOUTS] = { 0 };
	uint64_t host_dev = 0;
	uint32_t bytes;
	uint8_t *host;
	int opt, rc = 0;

	while ((opt = getopt_long(argc, argv, "m:s:i:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'm':
			path = optarg;
			break;
		case 's':
			mib = strtoul(optarg, NULL, 10);
			break;
		case 'i':
			iters = strtoul(optarg, NULL, 10);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (optind != argc || mib == 0 || mib > 1024 || iters == 0 || iters > 100000) {
		usage(stderr);
		return EXIT_USAGE;
	}
	bytes = (uint32_t)(mib << 20);
	rc = gpu_host_device_open(path, 0, &hd, err, sizeof(err));
	if (rc != 0) {
		/* no device, or no module (gpu_module_load's codes): a host this cannot measure; else an error */
		printf(PROG ": %s\n", err);
		return rc == -ENODEV || rc == -ENOENT || rc == -ENOEXEC || rc == -EPROTO ? EXIT_SKIP : 1;
	}
	ops = hd.ops;
	dev = hd.dev;

	memset(&prog, 0, sizeof(prog));
	snprintf(prog.name, sizeof(prog.name), "gather-%lumib", mib);
	prog.nb_inputs = prog.nb_outputs = 1;
	prog.input_row_bytes[0] = prog.output_row_bytes[0] = bytes;
	prog.max_segments = bytes / SEG_8K_BYTES;
	prog.nb_sizes = 1;
	prog.sizes[0].batch = 1;
	prog.sizes[0].arena_bytes = (bytes + GPU_PROG_ALIGN - 1) / GPU_PROG_ALIGN * GPU_PROG_ALIGN;
	host = aligned_alloc(PAGE_BYTES, bytes);
	if (host == NULL) {
		fprintf(stderr, PROG ": out of memory (%u bytes)\n", bytes);
		gpu_host_device_close(&hd);
		return 1;
	}
	memset(host, 0x5a, bytes); /* faulted in before registration pins it */
	if ((rc = ops->host_register(dev, host, bytes, NULL, err, sizeof(err))) < 0 ||
	    (rc = ops->host_to_dev(dev, host, bytes, &host_dev)) < 0 ||
	    (rc = ops->stream_create(dev, &stream, err, sizeof(err))) < 0 ||
	    (rc = ops->program_load(dev, &prog, &loaded, err, sizeof(err))) < 0 ||
	    (rc = ops->instance_create(loaded, stream, 1, GPU_LAUNCH_GRAPH, &inst, err, sizeof(err))) < 0) {
		fprintf(stderr, PROG ": %s\n", rc == -EFAULT ? "host_to_dev: not registered" : err);
		rc = 1;
		goto out;
	}
	printf("device: %s; %lu MiB tensor, %lu launches per layout\n", hd.info.name, mib, iters);
	for (enum layout l = 0; l < LAYOUTS; l++) {
		struct gpu_batch_table *t = ops->instance_table(inst, 0, 0);
		uint64_t moved = layout_table(t, l, host_dev, bytes);
		double ms = 0;

		t->generation = 1;
		if (ops->instance_time(inst, 0, 0, (uint32_t)iters, &ms, err, sizeof(err)) < 0) {
			fprintf(stderr, PROG ": %s: %s\n", g_layout_names[l], err);
			rc = 1;
			break;
		}
		gbps[l] = ms > 0 ? (double)moved / (ms * 1e6) : 0.0;
		printf("layout=%s bytes=%llu ms=%.4f gbps=%.2f\n", g_layout_names[l], (unsigned long long)moved, ms,
		       gbps[l]);
	}
	gather_gbps = gbps[GATHER_1SEG];
	if (rc == 0) {
		printf("off2_vs_aligned=%.2f\n", gbps[GATHER_8K] > 0 ? gbps[GATHER_8K_OFF2] / gbps[GATHER_8K] : 0.0);
		printf("gather_gbps=%.2f\n", gather_gbps);
	}
out:
	if (inst != NULL)
		ops->instance_destroy(inst);
	if (loaded != NULL)
		ops->program_unload(loaded);
	if (stream != NULL)
		ops->stream_destroy(stream);
	gpu_host_device_close(&hd); /* releases the registration, unloads the module */
	free(host);
	return rc;
}
