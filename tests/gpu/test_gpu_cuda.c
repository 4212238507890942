/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The CUDA module on a real GPU (registered only when the module was built). Without a device it
 * prints the probe's reason and exits 77, which meson reports as SKIP: never a silent pass.
 *
 * With one: open device 0, register host memory, have a kernel fill it and a stream memory op write
 * a completion word behind it, poll the word from here (no synchronize call), check the bytes; then
 * launch/poll round trips through the in-flight tracker, and the module's error paths. The round
 * trip time is printed, never asserted. argv[1]: the module.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../bw_cunit.h"

#include "gpu.h"

#define EXIT_SKIP 77                  /* meson's SKIP */
#define HOST_BYTES (4u << 20)         /* the registered region */
#define PAGE_BYTES 4096
#define WAIT_NS (5ll * 1000000000ll)  /* longest wait for one completion word */
#define ROUND_TRIPS 1000
#define SLOTS 8

static const struct gpu_ops *g_ops;
static struct gpu_dev *g_dev;

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* Spins on the tracker until one launch completes. \return 1, or 0 after WAIT_NS. */
static int wait_one(struct gpu_inflight *fl, void **cookie)
{
	long long start = now_ns();

	while (gpu_inflight_poll(fl, cookie, 1) == 0)
		if (now_ns() - start > WAIT_NS)
			return 0;
	return 1;
}

static void test_fill_and_signal(void)
{
	uint8_t *mem = aligned_alloc(PAGE_BYTES, HOST_BYTES);
	struct gpu_stream *s = NULL;
	struct gpu_inflight *fl;
	void *dev_addr = NULL, *cookie = NULL;
	char err[GPU_ERR_MAX];
	uint32_t slot, i, bad = 0;
	int tag = 1;

	CU_ASSERT_PTR_NOT_NULL_FATAL(mem);
	memset(mem, 0, HOST_BYTES);
	CU_ASSERT_EQUAL_FATAL(g_ops->host_register(g_dev, mem, HOST_BYTES, &dev_addr, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(g_ops->host_regions(g_dev), 1);
	CU_ASSERT_EQUAL(g_ops->host_register(g_dev, mem + 64, 64, NULL, err, sizeof(err)), -EEXIST);
	CU_ASSERT_EQUAL_FATAL(g_ops->stream_create(g_dev, SLOTS, &s, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(g_ops->signal(s, SLOTS, 1, err, sizeof(err)), -EINVAL);
	fl = gpu_inflight_create(g_ops, s, SLOTS);
	CU_ASSERT_PTR_NOT_NULL_FATAL(fl);

	CU_ASSERT_EQUAL(g_ops->fill(s, dev_addr, HOST_BYTES, 0xa5, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(gpu_inflight_launch(fl, &tag, &slot, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL_FATAL(wait_one(fl, &cookie), 1);
	CU_ASSERT_PTR_EQUAL(cookie, &tag);
	for (i = 0; i < HOST_BYTES; i++)
		bad += mem[i] != 0xa5;
	CU_ASSERT_EQUAL(bad, 0);

	{
		long long start = now_ns();
		unsigned int done = 0;

		for (i = 0; i < ROUND_TRIPS; i++) {
			if (gpu_inflight_launch(fl, &tag, &slot, err, sizeof(err)) != 0 || !wait_one(fl, &cookie))
				break;
			done++;
		}
		CU_ASSERT_EQUAL(done, ROUND_TRIPS);
		printf("\n    signal -> poll round trip: %.2f us mean over %u\n",
		       (double)(now_ns() - start) / 1000.0 / (done ? done : 1), done);
	}
	CU_ASSERT_EQUAL(g_ops->health(g_dev, err, sizeof(err)), 0);
	gpu_inflight_free(fl);
	g_ops->stream_destroy(s);
	CU_ASSERT_EQUAL(g_ops->host_unregister(g_dev, mem, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(g_ops->host_unregister(g_dev, mem, err, sizeof(err)), -ENOENT);
	free(mem);
}

int main(int argc, char **argv)
{
	static CU_TestInfo tests[] = {
		{ "register, fill, signal, poll", test_fill_and_signal },
		CU_TEST_INFO_NULL,
	};
	static CU_SuiteInfo suites[] = {
		{ "cuda device 0", NULL, NULL, NULL, NULL, tests },
		CU_SUITE_INFO_NULL,
	};
	struct gpu_module mod;
	struct gpu_probe probe;
	char err[GPU_ERR_MAX];
	int rc;

	if (argc != 2) {
		fprintf(stderr, "usage: %s MODULE\n", argv[0]);
		return 1;
	}
	rc = gpu_module_load(argv[1], &mod, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "cannot load the CUDA module: %s\n", err);
		return 1; /* it was built: failing to load it is a failure, not a skip */
	}
	g_ops = mod.ops;
	g_ops->probe(&probe);
	if (probe.count == 0) {
		printf("SKIP: %s\n", probe.reason);
		gpu_module_unload(&mod);
		return EXIT_SKIP;
	}
	printf("device 0: %s, compute capability %d.%d\n", probe.devices[0].name, probe.devices[0].cc_major,
	       probe.devices[0].cc_minor);
	if (g_ops->dev_open(0, &g_dev, err, sizeof(err)) < 0) {
		fprintf(stderr, "device 0: %s\n", err);
		gpu_module_unload(&mod);
		return 1;
	}
	rc = bw_cunit_run(suites);
	g_ops->dev_close(g_dev);
	gpu_module_unload(&mod);
	return rc;
}
