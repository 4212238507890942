/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of gpu/ against the fake device (gpu/fake.h), so they run on every host: registration
 * bookkeeping, completion words written and polled, launch/poll/complete with completions out of
 * order, error paths (a refused signal, a sticky error that marks the device unhealthy) and the
 * module loader. argv[1], argv[2]: the fake built as a module, and the same from "another ABI".
 */
#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../bw_cunit.h"

#include "fake.h"
#include "gpu.h"

#define THREAD_LAUNCHES 500        /* launches per stream in the threaded test */
#define THREAD_SLOTS 16
#define THREAD_TIMEOUT_S 40        /* a liveness bound (valgrind, a loaded host), not a timing check */

static const char *g_fake_module_path;
static const char *g_other_abi_module_path;
static const struct gpu_ops *g_ops;

static struct gpu_dev *open_fake(enum gpu_fake_mode mode, unsigned int seed)
{
	struct gpu_fake_config cfg = { .nb_devices = 1, .mode = mode, .seed = seed };
	struct gpu_dev *dev = NULL;
	char err[GPU_ERR_MAX];

	gpu_fake_configure(&cfg);
	CU_ASSERT_EQUAL_FATAL(g_ops->dev_open(0, &dev, err, sizeof(err)), 0);
	return dev;
}

static struct gpu_stream *make_stream(struct gpu_dev *dev, uint32_t nb_words)
{
	struct gpu_stream *s = NULL;
	char err[GPU_ERR_MAX];

	CU_ASSERT_EQUAL_FATAL(g_ops->stream_create(dev, nb_words, &s, err, sizeof(err)), 0);
	return s;
}

/* ---- probe ------------------------------------------------------------------------------------------- */

static void test_probe(void)
{
	struct gpu_fake_config none = { .nb_devices = 0 };
	struct gpu_dev *dev = NULL;
	struct gpu_probe p;
	char err[GPU_ERR_MAX];

	gpu_fake_configure(&none);
	CU_ASSERT_EQUAL(g_ops->probe(&p), 0);
	CU_ASSERT_EQUAL(p.count, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(p.reason, "no fake device"));
	CU_ASSERT_EQUAL(g_ops->dev_open(0, &dev, err, sizeof(err)), -ENODEV);
	CU_ASSERT_PTR_NULL(dev);
	CU_ASSERT_EQUAL(g_ops->probe(NULL), -EINVAL);

	dev = open_fake(GPU_FAKE_ON_DEMAND, 1);
	CU_ASSERT_EQUAL(g_ops->probe(&p), 0);
	CU_ASSERT_EQUAL(p.count, 1);
	CU_ASSERT_EQUAL(p.devices[0].cc_major, 9);
	CU_ASSERT_EQUAL(p.reason[0], '\0');
	CU_ASSERT_EQUAL(g_ops->health(dev, err, sizeof(err)), 0);
	g_ops->dev_close(dev);
}

/* ---- registration -------------------------------------------------------------------------------------- */

static void test_register(void)
{
	static uint8_t mem[GPU_REGIONS_MAX + 1][64];
	struct gpu_dev *dev = open_fake(GPU_FAKE_ON_DEMAND, 1);
	char err[GPU_ERR_MAX];
	void *dev_addr = NULL;
	unsigned int i;

	CU_ASSERT_EQUAL(g_ops->host_register(dev, mem[0], sizeof(mem[0]), &dev_addr, err, sizeof(err)), 0);
	CU_ASSERT_PTR_EQUAL(dev_addr, mem[0]);
	CU_ASSERT_EQUAL(g_ops->host_regions(dev), 1);
	/* overlapping: inside, straddling the start, straddling the end */
	CU_ASSERT_EQUAL(g_ops->host_register(dev, mem[0] + 8, 8, NULL, err, sizeof(err)), -EEXIST);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "overlaps"));
	CU_ASSERT_EQUAL(g_ops->host_register(dev, mem[0] + 63, 2, NULL, err, sizeof(err)), -EEXIST);
	CU_ASSERT_EQUAL(g_ops->host_register(dev, (void *)((uintptr_t)mem[0] - 1), 2, NULL, err, sizeof(err)), -EEXIST);
	/* adjacent is no overlap */
	CU_ASSERT_EQUAL(g_ops->host_register(dev, mem[1], sizeof(mem[1]), NULL, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(g_ops->host_regions(dev), 2);
	/* not a region */
	CU_ASSERT_EQUAL(g_ops->host_register(dev, NULL, 64, NULL, err, sizeof(err)), -EINVAL);
	CU_ASSERT_EQUAL(g_ops->host_register(dev, mem[2], 0, NULL, err, sizeof(err)), -EINVAL);
	CU_ASSERT_EQUAL(g_ops->host_register(dev, (void *)(UINTPTR_MAX - 8), 64, NULL, err, sizeof(err)), -EINVAL);
	/* unregister: only a region's start */
	CU_ASSERT_EQUAL(g_ops->host_unregister(dev, mem[0] + 1, err, sizeof(err)), -ENOENT);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "not registered"));
	CU_ASSERT_EQUAL(g_ops->host_unregister(dev, mem[0], err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(g_ops->host_unregister(dev, mem[0], err, sizeof(err)), -ENOENT);
	CU_ASSERT_EQUAL(g_ops->host_regions(dev), 1);
	/* again after unregistering */
	CU_ASSERT_EQUAL(g_ops->host_register(dev, mem[0], sizeof(mem[0]), NULL, err, sizeof(err)), 0);
	/* the table fills up */
	for (i = 2; i < GPU_REGIONS_MAX; i++)
		CU_ASSERT_EQUAL(g_ops->host_register(dev, mem[i], sizeof(mem[i]), NULL, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(g_ops->host_regions(dev), GPU_REGIONS_MAX);
	CU_ASSERT_EQUAL(g_ops->host_register(dev, mem[GPU_REGIONS_MAX], 64, NULL, err, sizeof(err)), -ENOSPC);
	for (i = 0; i < GPU_REGIONS_MAX; i++)
		CU_ASSERT_EQUAL(g_ops->host_unregister(dev, mem[i], err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(g_ops->host_regions(dev), 0);
	g_ops->dev_close(dev);
}

/* The device writes registered memory, and only registered memory. */
static void test_fill(void)
{
	static uint8_t mem[256];
	struct gpu_dev *dev = open_fake(GPU_FAKE_ON_DEMAND, 1);
	struct gpu_stream *s = make_stream(dev, 4);
	char err[GPU_ERR_MAX];
	void *dev_addr = NULL;
	unsigned int i, bad = 0;

	memset(mem, 0, sizeof(mem));
	CU_ASSERT_EQUAL(g_ops->fill(s, mem, 16, 0xa5, err, sizeof(err)), -EINVAL); /* not registered */
	CU_ASSERT_EQUAL_FATAL(g_ops->host_register(dev, mem, 128, &dev_addr, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(g_ops->fill(s, (uint8_t *)dev_addr + 120, 16, 0xa5, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "not inside"));
	CU_ASSERT_EQUAL(g_ops->fill(s, (uint8_t *)dev_addr + 64, 64, 0xa5, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(g_ops->signal(s, 0, 1, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(mem[64], 0); /* queued, not done */
	CU_ASSERT_EQUAL(gpu_fake_complete_all(dev), 2);
	CU_ASSERT_TRUE(gpu_word_reached(&g_ops->stream_words(s)[0], 1));
	for (i = 0; i < sizeof(mem); i++)
		bad += mem[i] != (i >= 64 && i < 128 ? 0xa5 : 0);
	CU_ASSERT_EQUAL(bad, 0);
	g_ops->stream_destroy(s);
	CU_ASSERT_EQUAL(g_ops->host_unregister(dev, mem, err, sizeof(err)), 0);
	g_ops->dev_close(dev);
}

/* ---- completion words ------------------------------------------------------------------------------------ */

static void test_words(void)
{
	struct gpu_dev *dev = open_fake(GPU_FAKE_ON_DEMAND, 1);
	struct gpu_stream *s = NULL, *t;
	volatile uint32_t *w;
	char err[GPU_ERR_MAX];
	unsigned int i, nonzero = 0;

	CU_ASSERT_EQUAL(g_ops->stream_create(dev, 0, &s, err, sizeof(err)), -EINVAL);
	CU_ASSERT_EQUAL(g_ops->stream_create(dev, GPU_STREAM_WORDS_MAX + 1, &s, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NULL(s);
	s = make_stream(dev, 8);
	t = make_stream(dev, 8);
	w = g_ops->stream_words(s);
	for (i = 0; i < 8; i++)
		nonzero += w[i] != 0;
	CU_ASSERT_EQUAL(nonzero, 0);
	CU_ASSERT_EQUAL(g_ops->signal(s, 8, 1, err, sizeof(err)), -EINVAL);
	/* one stream's work finishes in order */
	CU_ASSERT_EQUAL(g_ops->signal(s, 3, 7, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(g_ops->signal(s, 5, 9, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(g_ops->signal(t, 0, 4, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(gpu_fake_pending(dev), 3);
	CU_ASSERT_FALSE(gpu_word_reached(&w[3], 7));
	/* the other stream first: across streams, any order */
	CU_ASSERT_EQUAL(gpu_fake_complete(t), 1);
	CU_ASSERT_TRUE(gpu_word_reached(&g_ops->stream_words(t)[0], 4));
	CU_ASSERT_FALSE(gpu_word_reached(&w[3], 7));
	CU_ASSERT_EQUAL(gpu_fake_complete(s), 1);
	CU_ASSERT_TRUE(gpu_word_reached(&w[3], 7));
	CU_ASSERT_FALSE(gpu_word_reached(&w[5], 9));
	CU_ASSERT_EQUAL(gpu_fake_complete(s), 1);
	CU_ASSERT_TRUE(gpu_word_reached(&w[5], 9));
	CU_ASSERT_EQUAL(gpu_fake_complete(s), 0);
	CU_ASSERT_EQUAL(gpu_fake_pending(dev), 0);
	/* destroying a stream lets its queued work finish first, as cudaStreamDestroy does */
	CU_ASSERT_EQUAL(g_ops->signal(t, 1, 2, err, sizeof(err)), 0);
	g_ops->stream_destroy(t);
	CU_ASSERT_EQUAL(gpu_fake_pending(dev), 0);
	g_ops->stream_destroy(s);
	g_ops->dev_close(dev);
}

/* ---- launch / poll / complete ------------------------------------------------------------------------------ */

static void test_inflight(void)
{
	struct gpu_dev *dev = open_fake(GPU_FAKE_ON_DEMAND, 1);
	struct gpu_stream *s = make_stream(dev, 4);
	struct gpu_inflight *fl;
	volatile uint32_t *w = g_ops->stream_words(s);
	int cookies[6] = { 10, 11, 12, 13, 14, 15 };
	void *got[8];
	uint32_t slot[6];
	char err[GPU_ERR_MAX];
	unsigned int i;

	CU_ASSERT_PTR_NULL(gpu_inflight_create(g_ops, s, 0));
	CU_ASSERT_PTR_NULL(gpu_inflight_create(g_ops, s, GPU_STREAM_WORDS_MAX + 1));
	fl = gpu_inflight_create(g_ops, s, 4);
	CU_ASSERT_PTR_NOT_NULL_FATAL(fl);
	for (i = 0; i < 4; i++)
		CU_ASSERT_EQUAL(gpu_inflight_launch(fl, &cookies[i], &slot[i], err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(gpu_inflight_launch(fl, &cookies[4], &slot[4], err, sizeof(err)), -EBUSY);
	CU_ASSERT_EQUAL(gpu_inflight_pending(fl), 4);
	CU_ASSERT_EQUAL(gpu_inflight_poll(fl, got, 8), 0);

	/* out of order: the device finishes the launches in slots 2 and 0 (as a device running several
	 * graphs at once would), not 1 and 3 */
	CU_ASSERT_EQUAL(gpu_fake_complete_all(dev), 4); /* the fake writes in order... */
	__atomic_store_n(&w[slot[1]], 0, __ATOMIC_RELEASE); /* ...so take two back: still running */
	__atomic_store_n(&w[slot[3]], 0, __ATOMIC_RELEASE);
	CU_ASSERT_EQUAL(gpu_inflight_poll(fl, got, 1), 1); /* max respected */
	CU_ASSERT_EQUAL(gpu_inflight_poll(fl, got + 1, 8), 1);
	CU_ASSERT_TRUE((got[0] == &cookies[0] && got[1] == &cookies[2]) ||
		       (got[0] == &cookies[2] && got[1] == &cookies[0]));
	CU_ASSERT_EQUAL(gpu_inflight_pending(fl), 2);
	/* the freed slots take new launches while 1 and 3 are still out */
	CU_ASSERT_EQUAL(gpu_inflight_launch(fl, &cookies[4], &slot[4], err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(gpu_inflight_launch(fl, &cookies[5], &slot[5], err, sizeof(err)), 0);
	CU_ASSERT_TRUE((slot[4] == slot[0] || slot[4] == slot[2]) && (slot[5] == slot[0] || slot[5] == slot[2]));
	/* a reused slot is not done because its word still holds the previous generation */
	CU_ASSERT_EQUAL(gpu_inflight_poll(fl, got, 8), 0);
	__atomic_store_n(&w[slot[3]], 1, __ATOMIC_RELEASE); /* slot 3's first launch: generation 1 */
	CU_ASSERT_EQUAL(gpu_inflight_poll(fl, got, 8), 1);
	CU_ASSERT_PTR_EQUAL(got[0], &cookies[3]);
	CU_ASSERT_EQUAL(gpu_fake_complete_all(dev), 2);
	__atomic_store_n(&w[slot[1]], 1, __ATOMIC_RELEASE);
	CU_ASSERT_EQUAL(gpu_inflight_poll(fl, got, 8), 3);
	CU_ASSERT_EQUAL(gpu_inflight_pending(fl), 0);

	/* a refused signal leaves the slot free and nothing in flight */
	gpu_fake_inject(dev, GPU_FAKE_FAULT_NEXT_SIGNAL, "test: transient");
	CU_ASSERT_EQUAL(gpu_inflight_launch(fl, &cookies[0], &slot[0], err, sizeof(err)), -EIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "test: transient"));
	CU_ASSERT_EQUAL(gpu_inflight_pending(fl), 0);
	CU_ASSERT_EQUAL(g_ops->health(dev, err, sizeof(err)), 0); /* not sticky */
	CU_ASSERT_EQUAL(gpu_inflight_launch(fl, &cookies[0], &slot[0], err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(gpu_fake_complete(s), 1);
	CU_ASSERT_EQUAL(gpu_inflight_poll(fl, got, 8), 1);
	gpu_inflight_free(fl);
	g_ops->stream_destroy(s);
	g_ops->dev_close(dev);
}

/* Two streams, the fake's own thread finishing their work in random order; every launch comes back once. */
static void test_inflight_threaded(void)
{
	struct gpu_dev *dev = open_fake(GPU_FAKE_THREAD, 12345);
	struct gpu_stream *s[2];
	struct gpu_inflight *fl[2];
	static unsigned char seen[2][THREAD_LAUNCHES];
	unsigned int launched[2] = { 0, 0 }, done[2] = { 0, 0 }, twice = 0, k, n;
	char err[GPU_ERR_MAX];
	void *got[THREAD_SLOTS];
	uint32_t slot;
	time_t start = time(NULL);

	memset(seen, 0, sizeof(seen));
	for (k = 0; k < 2; k++) {
		s[k] = make_stream(dev, THREAD_SLOTS);
		fl[k] = gpu_inflight_create(g_ops, s[k], THREAD_SLOTS);
		CU_ASSERT_PTR_NOT_NULL_FATAL(fl[k]);
	}
	while ((done[0] < THREAD_LAUNCHES || done[1] < THREAD_LAUNCHES) && time(NULL) - start < THREAD_TIMEOUT_S) {
		for (k = 0; k < 2; k++) {
			while (launched[k] < THREAD_LAUNCHES &&
			       gpu_inflight_launch(fl[k], &seen[k][launched[k]], &slot, err, sizeof(err)) == 0)
				launched[k]++;
			n = gpu_inflight_poll(fl[k], got, THREAD_SLOTS);
			for (unsigned int i = 0; i < n; i++) {
				unsigned char *c = got[i];

				twice += *c != 0;
				*c = 1;
			}
			done[k] += n;
			if (n == 0)
				sched_yield(); /* the fake's thread may share our core */
		}
	}
	CU_ASSERT_EQUAL(done[0], THREAD_LAUNCHES);
	CU_ASSERT_EQUAL(done[1], THREAD_LAUNCHES);
	CU_ASSERT_EQUAL(twice, 0);
	CU_ASSERT_PTR_NULL(memchr(seen[0], 0, THREAD_LAUNCHES));
	CU_ASSERT_PTR_NULL(memchr(seen[1], 0, THREAD_LAUNCHES));
	for (k = 0; k < 2; k++) {
		gpu_inflight_free(fl[k]);
		g_ops->stream_destroy(s[k]);
	}
	g_ops->dev_close(dev);
}

/* ---- errors ---------------------------------------------------------------------------------------------- */

/* A sticky error while work is queued: the words never arrive, health says why, every call fails. */
static void test_sticky(void)
{
	static uint8_t mem[64];
	struct gpu_dev *dev = open_fake(GPU_FAKE_ON_DEMAND, 1);
	struct gpu_stream *s = make_stream(dev, 4), *t = NULL;
	struct gpu_inflight *fl = gpu_inflight_create(g_ops, s, 4);
	int cookie = 1;
	void *got[4];
	uint32_t slot;
	char err[GPU_ERR_MAX];

	CU_ASSERT_PTR_NOT_NULL_FATAL(fl);
	CU_ASSERT_EQUAL(g_ops->host_register(dev, mem, sizeof(mem), NULL, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(gpu_inflight_launch(fl, &cookie, &slot, err, sizeof(err)), 0);
	gpu_fake_inject(dev, GPU_FAKE_FAULT_STICKY, "test: illegal address");
	gpu_fake_inject(dev, GPU_FAKE_FAULT_STICKY, "test: a later error"); /* the first one is kept */
	CU_ASSERT_EQUAL(gpu_fake_complete(s), 0);
	CU_ASSERT_EQUAL(gpu_fake_complete_all(dev), 0);
	CU_ASSERT_EQUAL(gpu_inflight_poll(fl, got, 4), 0);
	CU_ASSERT_EQUAL(gpu_inflight_pending(fl), 1);

	CU_ASSERT_EQUAL(g_ops->health(dev, err, sizeof(err)), -EIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "unhealthy: test: illegal address"));
	CU_ASSERT_EQUAL(gpu_inflight_launch(fl, &cookie, &slot, err, sizeof(err)), -EIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "test: illegal address"));
	CU_ASSERT_EQUAL(g_ops->signal(s, 0, 5, err, sizeof(err)), -EIO);
	CU_ASSERT_EQUAL(g_ops->fill(s, mem, 8, 1, err, sizeof(err)), -EIO);
	CU_ASSERT_EQUAL(g_ops->host_register(dev, mem + 32, 8, NULL, err, sizeof(err)), -EIO);
	CU_ASSERT_EQUAL(g_ops->stream_create(dev, 4, &t, err, sizeof(err)), -EIO);
	CU_ASSERT_PTR_NULL(t);
	/* shutdown still works on a lost device */
	CU_ASSERT_EQUAL(g_ops->host_unregister(dev, mem, err, sizeof(err)), 0);
	gpu_inflight_free(fl);
	g_ops->stream_destroy(s);
	g_ops->dev_close(dev);
}

/* ---- loader ---------------------------------------------------------------------------------------------- */

static void test_loader(void)
{
	struct gpu_module mod;
	struct gpu_probe p;
	char err[GPU_ERR_MAX];
	int rc;

	CU_ASSERT_EQUAL(gpu_module_load("/nonexistent/libbwgpu.so", &mod, err, sizeof(err)), -ENOEXEC);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "dlopen /nonexistent/libbwgpu.so"));
	CU_ASSERT_PTR_NULL(mod.ops);
	/* a shared object that is not a module */
	CU_ASSERT_EQUAL(gpu_module_load("libm.so.6", &mod, err, sizeof(err)), -ENOEXEC);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "no symbol " GPU_MODULE_SYMBOL));
	CU_ASSERT_EQUAL(gpu_module_load(g_other_abi_module_path, &mod, err, sizeof(err)), -EPROTO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "does not speak ABI"));

	CU_ASSERT_EQUAL_FATAL(gpu_module_load(g_fake_module_path, &mod, err, sizeof(err)), 0);
	CU_ASSERT_STRING_EQUAL(mod.ops->name, "fake");
	CU_ASSERT_EQUAL(mod.ops->abi_version, GPU_ABI_VERSION);
	CU_ASSERT_EQUAL(mod.ops->probe(&p), 0);
	CU_ASSERT_EQUAL(p.count, 1); /* the module's own fake, with its default configuration */
	gpu_module_unload(&mod);
	CU_ASSERT_PTR_NULL(mod.handle);

	/* the default path: found when this build has the CUDA module and it is in reach, else a reason */
	rc = gpu_module_load(NULL, &mod, err, sizeof(err));
	if (rc == 0) {
		CU_ASSERT_TRUE(gpu_module_built());
		gpu_module_unload(&mod);
	} else {
		CU_ASSERT_EQUAL(rc, -ENOENT);
		CU_ASSERT_PTR_NOT_NULL(strstr(err, gpu_module_built() ? "not found (looked in" : "not built"));
		printf("\n    default module path: %s\n", err);
	}
}

int main(int argc, char **argv)
{
	static CU_TestInfo device_tests[] = {
		{ "probe and open", test_probe },
		{ "host registration bookkeeping", test_register },
		{ "fill reaches registered memory only", test_fill },
		{ "completion words written and polled", test_words },
		CU_TEST_INFO_NULL,
	};
	static CU_TestInfo inflight_tests[] = {
		{ "launch, poll, complete out of order", test_inflight },
		{ "two streams on the fake's thread", test_inflight_threaded },
		CU_TEST_INFO_NULL,
	};
	static CU_TestInfo error_tests[] = {
		{ "sticky error marks the device unhealthy", test_sticky },
		CU_TEST_INFO_NULL,
	};
	static CU_TestInfo loader_tests[] = {
		{ "module loading and its errors", test_loader },
		CU_TEST_INFO_NULL,
	};
	static CU_SuiteInfo suites[] = {
		{ "fake device", NULL, NULL, NULL, NULL, device_tests },
		{ "in-flight tracking", NULL, NULL, NULL, NULL, inflight_tests },
		{ "errors", NULL, NULL, NULL, NULL, error_tests },
		{ "loader", NULL, NULL, NULL, NULL, loader_tests },
		CU_SUITE_INFO_NULL,
	};

	if (argc != 3) {
		fprintf(stderr, "usage: %s FAKE_MODULE OTHER_ABI_FAKE_MODULE\n", argv[0]);
		return 1;
	}
	g_fake_module_path = argv[1];
	g_other_abi_module_path = argv[2];
	g_ops = gpu_fake_ops();
	return bw_cunit_run(suites);
}
