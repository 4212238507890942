/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of batching/limiter.c on its own: the adaptive in-flight limit (TensorFlow's
 * AdaptiveSharedBatchScheduler rule) worked by hand window by window, its step bounds and clamps, and
 * admission with a fixed limit and with a fractional headroom. How the queue uses it is test_queue's.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../bw_cunit.h"

#include "bat_test.h"

/* ---- the adaptive rule, by hand ------------------------------------------------------------------ */

/* A window of n batches whose latencies spread around avg (sum n * avg); the limit moves on the last. */
static void one_window(struct bat_limiter *lim, uint32_t n, uint64_t avg)
{
	double before = bat_limiter_limit(lim);

	for (uint32_t i = 0; i < n; i++) {
		/* avg - 5(n-1) .. avg + 5(n-1) in steps of 10: they sum to n * avg */
		uint64_t latency = avg + 10 * i - 5 * (n - 1);

		one_batch(lim, latency);
		if (i + 1 < n)
			CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(lim), before, 0);
	}
}

/*
 * TF's rule by hand, min 1, initial 16, max 64. d: did the window's average decrease from the previous
 * one (previous starts at 0, so window 1 never decreases). step x2 on a decrease after a decrease,
 * x0.5 on a decrease after a non-decrease, within [1/128, 1/8]; direction reverses on no decrease;
 * limit += dir * limit * step, within [1, 64].
 *
 * | w | avg  | d   | prev d | step              | dir | limit                                  |
 * |---|------|-----|--------|-------------------|-----|----------------------------------------|
 * | 0 | -    | -   | no     | 1/8               | +1  | 16                                     |
 * | 1 | 1000 | no  | no     | 1/8               | -1  | 16 - 16/8 = 14                         |
 * | 2 |  800 | yes | no     | 1/16              | -1  | 14 - 14/16 = 13.125                    |
 * | 3 |  700 | yes | yes    | 1/8               | -1  | 13.125 - 13.125/8 = 11.484375          |
 * | 4 |  600 | yes | yes    | 1/4 -> 1/8 clamp  | -1  | 11.484375 * 7/8 = 10.048828125         |
 * | 5 |  650 | no  | yes    | 1/8               | +1  | 10.048828125 * 9/8 = 11.304931640625   |
 * | 6 |  550 | yes | no     | 1/16              | +1  | 11.304931640625 * 17/16 = 787185/65536 |
 * | 7 |  550 | no  | yes    | 1/16              | -1  | 787185/65536 * 15/16 = 11807775/1048576|
 * | 8 |  400 | yes | no     | 1/32              | -1  | 11807775/1048576 * 31/32               |
 * |   |      |     |        |                   |     |   = 366041025/33554432                 |
 */
static const uint64_t g_script_avg[] = {1000, 800, 700, 600, 650, 550, 550, 400};
static const double g_script_limit[] = {
	14.0,
	13.125,
	11.484375,
	10.048828125,
	11.304931640625,
	787185.0 / 65536,
	11807775.0 / 1048576,
	366041025.0 / 33554432,
};

static void run_script(uint32_t window)
{
	struct bat_limiter *lim = limiter_adaptive(1, 16, 64, window);

	CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(lim), 16.0, 0);
	for (size_t w = 0; w < sizeof(g_script_avg) / sizeof(g_script_avg[0]); w++) {
		one_window(lim, window, g_script_avg[w]);
		CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(lim), g_script_limit[w], 1e-12);
		if (bat_limiter_limit(lim) != g_script_limit[w])
			printf("\n  window %zu of %u: limit %.15g, want %.15g ", w + 1, window,
			       bat_limiter_limit(lim), g_script_limit[w]);
	}
	CU_ASSERT_EQUAL(bat_limiter_in_flight(lim), 0);
	bat_limiter_destroy(lim);
}

static void test_adaptive_script_window2(void)
{
	run_script(2);
}

static void test_adaptive_script_window10(void)
{
	run_script(10);
}

/*
 * The step floor, min 1, initial 16, max 64, one batch a window: alternate no-decrease / decrease,
 * so every decrease follows a non-decrease and halves the step, down to 1/128 and no lower.
 *
 * | w  | avg | d   | step         | dir | limit                      |
 * |----|-----|-----|--------------|-----|----------------------------|
 * | 1  | 100 | no  | 1/8          | -1  | 16 * 7/8 = 14              |
 * | 2  |  90 | yes | 1/16         | -1  | 14 * 15/16 = 13.125        |
 * | 3  |  95 | no  | 1/16         | +1  | 13.125 * 17/16 = 1785/128  |
 * | 4  |  90 | yes | 1/32         | +1  | * 33/32 = 58905/4096       |
 * | 5  |  95 | no  | 1/32         | -1  | * 31/32 = 1826055/131072   |
 * | 6  |  90 | yes | 1/64         | -1  | * 63/64 = 115041465/8388608|
 * | 7  |  95 | no  | 1/64         | +1  | * 65/64                    |
 * | 8  |  90 | yes | 1/128        | +1  | * 129/128                  |
 * | 9  |  95 | no  | 1/128        | -1  | * 127/128                  |
 * | 10 |  90 | yes | 1/256 -> 1/128 | -1 | * 127/128 (the floor holds)|
 */
static void test_adaptive_step_floor(void)
{
	static const uint64_t avg[] = {100, 90, 95, 90, 95, 90, 95, 90, 95, 90};
	struct bat_limiter *lim = limiter_adaptive(1, 16, 64, 1);
	double want = 16;
	static const double factor[] = {7.0 / 8, 15.0 / 16, 17.0 / 16, 33.0 / 32, 31.0 / 32,
					63.0 / 64, 65.0 / 64, 129.0 / 128, 127.0 / 128, 127.0 / 128};

	for (size_t w = 0; w < 10; w++) {
		one_batch(lim, avg[w]);
		want *= factor[w];
		CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(lim), want, 1e-12);
	}
	CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(lim), 15558399270639225.0 / 1125899906842624, 1e-12);
	bat_limiter_destroy(lim);
}

/*
 * The limit's clamps on a narrow range, min 8, initial 8, max 9, one batch a window:
 * | w | avg | d   | step | dir | limit                               |
 * | 1 | 100 | no  | 1/8  | -1  | 8 - 1 = 7 -> 8 (min)                |
 * | 2 | 200 | no  | 1/8  | +1  | 8 + 1 = 9 (max, reached exactly)     |
 * | 3 | 150 | yes | 1/16 | +1  | 9 + 9/16 = 9.5625 -> 9 (max)        |
 * | 4 | 160 | no  | 1/16 | -1  | 9 - 9/16 = 8.4375                   |
 */
static void test_adaptive_clamps_narrow(void)
{
	struct bat_limiter *lim = limiter_adaptive(8, 8, 9, 1);

	one_batch(lim, 100);
	CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(lim), 8.0, 0);
	one_batch(lim, 200);
	CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(lim), 9.0, 0);
	one_batch(lim, 150);
	CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(lim), 9.0, 0);
	one_batch(lim, 160);
	CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(lim), 8.4375, 0);
	bat_limiter_destroy(lim);
}

/*
 * The clamps over a long run, min 1, initial 16, max 64: latencies that keep falling with direction -1
 * shrink the limit by 7/8 a window (step back at 1/8 after window 3) until it sits on 1; one rise
 * reverses it (1 + 1/8 = 1.125); falling latencies then grow it by 9/8 a window until it sits on 64.
 */
static void test_adaptive_clamps_long(void)
{
	struct bat_limiter *lim = limiter_adaptive(1, 16, 64, 1);
	uint64_t latency = 100000;

	one_batch(lim, latency); /* window 1: reverses to -1, 14 */
	CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(lim), 14.0, 0);
	for (int w = 0; w < 40; w++) {
		one_batch(lim, --latency);
		CU_ASSERT(bat_limiter_limit(lim) >= 1.0);
	}
	CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(lim), 1.0, 0);
	one_batch(lim, 200000); /* a rise: +1 with step 1/8 */
	CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(lim), 1.125, 0);
	latency = 200000;
	one_batch(lim, --latency); /* a decrease after a rise: step 1/16, 1.125 * 17/16 */
	CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(lim), 1.125 * 17 / 16, 1e-12);
	one_batch(lim, --latency); /* decrease after decrease: step 1/8 */
	CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(lim), 1.125 * 17 / 16 * 9 / 8, 1e-12);
	for (int w = 0; w < 60; w++) {
		one_batch(lim, --latency);
		CU_ASSERT(bat_limiter_limit(lim) <= 64.0);
	}
	CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(lim), 64.0, 0);
	CU_ASSERT_EQUAL(bat_limiter_in_flight(lim), 0);
	bat_limiter_destroy(lim);
}

/* ---- admission: fixed and fractional ------------------------------------------------------------- */

static void test_limiter_fixed(void)
{
	struct bat_options o;
	char msg[MSG_CAP] = "";
	struct bat_limiter *lim;
	uint64_t rng = 7;

	bat_options_defaults(&o);
	o.num_batch_threads = 3;
	CU_ASSERT_EQUAL_FATAL(bat_options_finalize(&o, msg, sizeof(msg)), 0);
	lim = bat_limiter_create(&o);
	CU_ASSERT_PTR_NOT_NULL_FATAL(lim);
	CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(lim), 3.0, 0);
	for (int i = 0; i < 3; i++)
		CU_ASSERT_TRUE(bat_limiter_try_acquire(lim, &rng));
	CU_ASSERT_EQUAL(bat_limiter_in_flight(lim), 3);
	for (int i = 0; i < 100; i++)
		CU_ASSERT_FALSE(bat_limiter_try_acquire(lim, &rng));
	bat_limiter_release(lim, 500);
	CU_ASSERT_EQUAL(bat_limiter_in_flight(lim), 2);
	CU_ASSERT_TRUE(bat_limiter_try_acquire(lim, &rng));
	CU_ASSERT_FALSE(bat_limiter_try_acquire(lim, &rng));
	/* fixed: completions never move the limit */
	for (int i = 0; i < 3; i++)
		bat_limiter_release(lim, 100000 * (uint64_t)(i + 1));
	CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(lim), 3.0, 0);
	CU_ASSERT_EQUAL(bat_limiter_in_flight(lim), 0);
	bat_limiter_destroy(lim);
}

/* Attempts at one more batch with `held` in flight; each success is given back at once. */
static unsigned int attempts_admitted(struct bat_limiter *lim, unsigned int attempts, uint64_t *rng)
{
	unsigned int ok = 0;

	for (unsigned int i = 0; i < attempts; i++) {
		if (bat_limiter_try_acquire(lim, rng)) {
			ok++;
			bat_limiter_release(lim, 80);
		}
	}
	return ok;
}

/*
 * Fractional headroom. Reaching 16.5 with min 16, initial 16, max 64 (windows of 20000 batches, so
 * the 10,000 attempts below never complete a window and the limit stays put):
 * | w | avg | d   | step | dir | limit                        |
 * | 1 | 100 | no  | 1/8  | -1  | 16 - 2 = 14 -> 16            |
 * | 2 |  90 | yes | 1/16 | -1  | 16 - 1 = 15 -> 16            |
 * | 3 |  90 | no  | 1/16 | +1  | 16 + 1 = 17                  |
 * | 4 |  90 | no  | 1/16 | -1  | 17 - 17/16 = 15.9375 -> 16   |
 * | 5 |  80 | yes | 1/32 | -1  | 16 - 0.5 = 15.5 -> 16        |
 * | 6 |  80 | no  | 1/32 | +1  | 16 + 16/32 = 16.5            |
 */
static void test_limiter_fractional(void)
{
	enum { WINDOW = 20000, ATTEMPTS = 10000, HELD = 16 };
	static const uint64_t avg[] = {100, 90, 90, 90, 80, 80};
	static const double limit[] = {16, 16, 17, 16, 16, 16.5};
	struct bat_limiter *lim = limiter_adaptive(16, 16, 64, WINDOW);
	uint64_t rng = 0x243f6a8885a308d3ull;
	unsigned int ok;

	for (size_t w = 0; w < 5; w++) {
		for (unsigned int i = 0; i < WINDOW; i++)
			one_batch(lim, avg[w]);
		CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(lim), limit[w], 0);
	}
	/* limit 16, 16 in flight: never */
	for (unsigned int i = 0; i < HELD; i++)
		CU_ASSERT_TRUE(bat_limiter_try_acquire(lim, &rng));
	CU_ASSERT_EQUAL(attempts_admitted(lim, ATTEMPTS, &rng), 0);
	for (unsigned int i = 0; i < HELD; i++)
		bat_limiter_release(lim, avg[5]);
	for (unsigned int i = HELD; i < WINDOW; i++)
		one_batch(lim, avg[5]);
	CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(lim), limit[5], 0);

	/* limit 16.5, 16 in flight: headroom 0.5, so about half */
	for (unsigned int i = 0; i < HELD; i++)
		CU_ASSERT_TRUE(bat_limiter_try_acquire(lim, &rng)); /* headroom >= 1.5 until the 16th */
	CU_ASSERT_EQUAL(bat_limiter_in_flight(lim), HELD);
	ok = attempts_admitted(lim, ATTEMPTS, &rng);
	printf("\n  headroom 0.5: %u of %u admitted ", ok, (unsigned int)ATTEMPTS);
	CU_ASSERT(ok >= ATTEMPTS * 40 / 100 && ok <= ATTEMPTS * 60 / 100);
	CU_ASSERT_EQUAL(bat_limiter_in_flight(lim), HELD);
	CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(lim), 16.5, 0);
	/* never two beyond 16: a success was always given back first */
	for (unsigned int i = 0; i < HELD; i++)
		bat_limiter_release(lim, 80);
	bat_limiter_destroy(lim);

	/* fixed limit 16 with 16 in flight: never */
	struct bat_options o;
	char msg[MSG_CAP] = "";
	bat_options_defaults(&o);
	o.num_batch_threads = 16;
	CU_ASSERT_EQUAL_FATAL(bat_options_finalize(&o, msg, sizeof(msg)), 0);
	lim = bat_limiter_create(&o);
	CU_ASSERT_PTR_NOT_NULL_FATAL(lim);
	for (unsigned int i = 0; i < HELD; i++)
		CU_ASSERT_TRUE(bat_limiter_try_acquire(lim, &rng));
	CU_ASSERT_EQUAL(attempts_admitted(lim, ATTEMPTS, &rng), 0);
	bat_limiter_destroy(lim);
}

int main(void)
{
	static CU_TestInfo limit_tests[] = {
		{"adaptive script, 2 batches a window, by hand", test_adaptive_script_window2},
		{"adaptive script, 10 batches a window, by hand", test_adaptive_script_window10},
		{"step floor 1/128", test_adaptive_step_floor},
		{"limit clamps, narrow range", test_adaptive_clamps_narrow},
		{"limit clamps at 1 and 64 over a long run", test_adaptive_clamps_long},
		{"fixed: num_batch_threads slots", test_limiter_fixed},
		{"fractional headroom 0.5 admits about half; 0 never", test_limiter_fractional},
		CU_TEST_INFO_NULL,
	};
	static CU_SuiteInfo suites[] = {
		{.pName = "batching in-flight limit", .pTests = limit_tests},
		CU_SUITE_INFO_NULL,
	};

	return bw_cunit_run(suites);
}
