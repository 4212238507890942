/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of batching/queue.c: every rule of TensorFlow's BatchFunction as batchwire applies it
 * (docs/batching.md), driven by a scripted clock through the harness of bat_test.h: windows, splitting,
 * a full queue, padding, errors, deadlines, the in-flight limit as the queue obeys and feeds it,
 * priorities, the extensions, and the fixed pools under a random load.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../bw_cunit.h"

#include "bat_test.h"

static const struct bw_executor_ops g_no_submit_ops = {.name = "no_submit"};

/* ---- creation ------------------------------------------------------------------------------------ */

static void test_queue_create_refuses(void)
{
	struct bat_options o = opts_base(1, 4, 100);
	struct bat_limiter *lim;
	struct bw_executor exec = {.ops = &g_stub_ops, .ctx = NULL};
	struct bw_executor no_submit = {.ops = &g_no_submit_ops, .ctx = NULL};
	char msg[MSG_CAP];

	CU_ASSERT_EQUAL_FATAL(bat_options_finalize(&o, msg, sizeof(msg)), 0);
	lim = bat_limiter_create(&o);
	CU_ASSERT_PTR_NOT_NULL_FATAL(lim);
	CU_ASSERT_PTR_NULL(bat_queue_create(NULL, lim, &exec, on_done, NULL, TSC_HZ_1US, 1));
	CU_ASSERT_PTR_NULL(bat_queue_create(&o, NULL, &exec, on_done, NULL, TSC_HZ_1US, 1));
	CU_ASSERT_PTR_NULL(bat_queue_create(&o, lim, NULL, on_done, NULL, TSC_HZ_1US, 1));
	CU_ASSERT_PTR_NULL(bat_queue_create(&o, lim, &no_submit, on_done, NULL, TSC_HZ_1US, 1));
	CU_ASSERT_PTR_NULL(bat_queue_create(&o, lim, &exec, NULL, NULL, TSC_HZ_1US, 1));
	CU_ASSERT_PTR_NULL(bat_queue_create(&o, lim, &exec, on_done, NULL, 0, 1));
	o.priority_levels = BAT_PRIORITY_LEVELS_MAX + 1;
	CU_ASSERT_PTR_NULL(bat_queue_create(&o, lim, &exec, on_done, NULL, TSC_HZ_1US, 1));
	bat_limiter_destroy(lim);
}

/* ---- windows ------------------------------------------------------------------------------------- */

static void test_window_full(void)
{
	struct harness h;
	struct bat_options o = opts_base(4, 4, 100);
	struct job_rec a, b;

	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit(&h, &a, 2, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1000), 0); /* open, not due */
	CU_ASSERT_EQUAL(h.nb_rec, 0);
	CU_ASSERT_FALSE(bat_queue_empty(h.q));
	CU_ASSERT_EQUAL(submit(&h, &b, 2, 1010), BW_STATUS_OK); /* fills it: closed FULL */
	CU_ASSERT_EQUAL(bat_poll(h.q, 1010), 1);                /* dispatched on this same poll */
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 1);
	CU_ASSERT_EQUAL(h.rec[0].reason, BW_DISPATCH_FULL);
	CU_ASSERT_EQUAL(h.rec[0].size, 4);
	CU_ASSERT_EQUAL(h.rec[0].padded_size, 4);
	CU_ASSERT_EQUAL(h.rec[0].num_tasks, 2);
	CU_ASSERT_EQUAL(h.rec[0].created_tsc, 1000); /* the window opened with its first task */
	CU_ASSERT_EQUAL(h.rec[0].dispatched_tsc, 1010);
	CU_ASSERT_EQUAL(h.rec[0].priority, 0);
	check_task(&h.rec[0], 0, &a, 2, 0);
	check_task(&h.rec[0], 1, &b, 2, 0);
	CU_ASSERT_EQUAL(bat_queue_stats(h.q)->window_wait_us, 10);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1011), 0);
	CHECK_STATS(&h, .jobs = 2, .batches = 1, .rows = 4, .dispatch[BW_DISPATCH_FULL] = 1);

	CU_ASSERT_EQUAL(a.done_calls, 0);
	complete(&h, 0, BW_STATUS_OK, 1050);
	check_done_once(&a, BW_STATUS_OK);
	check_done_once(&b, BW_STATUS_OK);
	CU_ASSERT_TRUE(job_output_ok(&a));
	CU_ASSERT_TRUE(job_output_ok(&b));
	CU_ASSERT_TRUE(bat_queue_empty(h.q));
	CU_ASSERT_EQUAL(bat_limiter_in_flight(h.lim), 0);
	CHECK_STATS(&h, .jobs = 2, .jobs_done = 2, .batches = 1, .rows = 4, .dispatch[BW_DISPATCH_FULL] = 1);
	harness_fini(&h);
}

/*
 * Jobs admitted to two versions of a model (a reload between them) never share a batch: a job of
 * another version closes the open window (reason version) and opens its own, which its version's
 * next job joins; each batch says its version.
 */
static void test_window_version(void)
{
	struct harness h;
	struct bat_options o = opts_base(4, 4, 100);
	struct job_rec a, b, c;

	harness_init(&h, &o);
	h.version = 1;
	CU_ASSERT_EQUAL(submit(&h, &a, 1, 1000), BW_STATUS_OK);
	h.version = 2;
	CU_ASSERT_EQUAL(submit(&h, &b, 1, 1005), BW_STATUS_OK); /* closes a's window: version */
	CU_ASSERT_EQUAL(bat_poll(h.q, 1005), 1);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 1);
	CU_ASSERT_EQUAL(h.rec[0].reason, BW_DISPATCH_VERSION);
	CU_ASSERT_EQUAL(h.rec[0].version, 1);
	CU_ASSERT_EQUAL(h.rec[0].num_tasks, 1);
	check_task(&h.rec[0], 0, &a, 1, 0);
	CU_ASSERT_EQUAL(submit(&h, &c, 1, 1006), BW_STATUS_OK); /* version 2's window */
	CU_ASSERT_EQUAL(bat_poll(h.q, 1104), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1105), 2);                /* b's window timed out: closed, dispatched */
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 2);
	CU_ASSERT_EQUAL(h.rec[1].reason, BW_DISPATCH_TIMEOUT);
	CU_ASSERT_EQUAL(h.rec[1].version, 2);
	CU_ASSERT_EQUAL(h.rec[1].num_tasks, 2);
	check_task(&h.rec[1], 0, &b, 1, 0);
	check_task(&h.rec[1], 1, &c, 1, 0);
	CU_ASSERT_STRING_EQUAL(bw_dispatch_reason_name(BW_DISPATCH_VERSION), "version");
	complete(&h, 0, BW_STATUS_OK, 1200);
	complete(&h, 1, BW_STATUS_OK, 1200);
	check_done_once(&a, BW_STATUS_OK);
	check_done_once(&b, BW_STATUS_OK);
	check_done_once(&c, BW_STATUS_OK);
	CHECK_STATS(&h, .jobs = 3, .jobs_done = 3, .batches = 2, .rows = 3, .dispatch[BW_DISPATCH_VERSION] = 1,
		    .dispatch[BW_DISPATCH_TIMEOUT] = 1);
	harness_fini(&h);
}

static void test_window_timeout(void)
{
	struct harness h;
	struct bat_options o = opts_base(4, 8, 100);
	struct job_rec a, b, c;

	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit(&h, &a, 1, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(submit(&h, &b, 2, 1050), BW_STATUS_OK); /* joins: timed from the first task */
	CU_ASSERT_EQUAL(bat_poll(h.q, 1000), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1099), 0); /* created + timeout - 1: still open */
	CU_ASSERT_EQUAL(h.nb_rec, 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1100), 2); /* closes and dispatches */
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 1);
	CU_ASSERT_EQUAL(h.rec[0].reason, BW_DISPATCH_TIMEOUT);
	CU_ASSERT_EQUAL(h.rec[0].size, 3);
	CU_ASSERT_EQUAL(h.rec[0].padded_size, 3);
	CU_ASSERT_EQUAL(h.rec[0].created_tsc, 1000);
	CU_ASSERT_EQUAL(h.rec[0].dispatched_tsc, 1100);
	check_task(&h.rec[0], 0, &a, 1, 0);
	check_task(&h.rec[0], 1, &b, 2, 0);
	CU_ASSERT_EQUAL(bat_queue_stats(h.q)->window_wait_us, 100);

	/* the next task opens the next window, timed from itself */
	CU_ASSERT_EQUAL(submit(&h, &c, 1, 1100), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1199), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1200), 2);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 2);
	CU_ASSERT_EQUAL(h.rec[1].reason, BW_DISPATCH_TIMEOUT);
	CU_ASSERT_EQUAL(h.rec[1].created_tsc, 1100);
	check_task(&h.rec[1], 0, &c, 1, 0);
	complete(&h, 1, BW_STATUS_OK, 1210);
	complete(&h, 0, BW_STATUS_OK, 1220);
	check_done_once(&a, BW_STATUS_OK);
	check_done_once(&b, BW_STATUS_OK);
	check_done_once(&c, BW_STATUS_OK);
	CU_ASSERT_EQUAL(c.done_order, 1);
	CU_ASSERT_TRUE(bat_queue_empty(h.q));
	CHECK_STATS(&h, .jobs = 3, .jobs_done = 3, .batches = 2, .rows = 4, .dispatch[BW_DISPATCH_TIMEOUT] = 2);
	harness_fini(&h);
}

static void test_window_timeout_zero(void)
{
	struct harness h;
	struct bat_options o = opts_base(4, 8, 0);
	struct job_rec a, b;

	/* batch_timeout_micros 0: tasks submitted before the poll still share the window */
	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit(&h, &a, 1, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(submit(&h, &b, 1, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1000), 2);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 1);
	CU_ASSERT_EQUAL(h.rec[0].reason, BW_DISPATCH_TIMEOUT);
	CU_ASSERT_EQUAL(h.rec[0].size, 2);
	complete(&h, 0, BW_STATUS_OK, 1001);
	CHECK_STATS(&h, .jobs = 2, .jobs_done = 2, .batches = 1, .rows = 2, .dispatch[BW_DISPATCH_TIMEOUT] = 1);
	harness_fini(&h);
}

static void test_window_drain(void)
{
	struct harness h;
	struct bat_options o = opts_base(4, 8, 100);
	struct job_rec a;

	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit(&h, &a, 3, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1001), 0);
	bat_queue_drain(h.q);
	CU_ASSERT_EQUAL(h.nb_rec, 0); /* drain closes; the poll dispatches */
	CU_ASSERT_EQUAL(bat_poll(h.q, 1001), 1);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 1);
	CU_ASSERT_EQUAL(h.rec[0].reason, BW_DISPATCH_DRAIN);
	CU_ASSERT_EQUAL(h.rec[0].size, 3);
	CU_ASSERT_EQUAL(h.rec[0].dispatched_tsc, 1001);
	/* drain with nothing open does nothing */
	bat_queue_drain(h.q);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1002), 0);
	complete(&h, 0, BW_STATUS_OK, 1010);
	check_done_once(&a, BW_STATUS_OK);
	CU_ASSERT_TRUE(bat_queue_empty(h.q));
	CHECK_STATS(&h, .jobs = 1, .jobs_done = 1, .batches = 1, .rows = 3, .dispatch[BW_DISPATCH_DRAIN] = 1);
	harness_fini(&h);
}

static void test_window_no_fit(void)
{
	struct harness h;
	struct bat_options o = opts_base(4, 8, 100);
	struct job_rec a, b;

	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit(&h, &a, 5, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(submit(&h, &b, 5, 1001), BW_STATUS_OK); /* 5 + 5 > 8: closes a's, opens the next */
	CU_ASSERT_EQUAL(bat_poll(h.q, 1001), 1);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 1);
	CU_ASSERT_EQUAL(h.rec[0].reason, BW_DISPATCH_FULL);
	CU_ASSERT_EQUAL(h.rec[0].size, 5);
	CU_ASSERT_EQUAL(h.rec[0].padded_size, 5);
	CU_ASSERT_EQUAL(h.rec[0].num_tasks, 1);
	check_task(&h.rec[0], 0, &a, 5, 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1100), 0); /* b's window opened at 1001 */
	CU_ASSERT_EQUAL(bat_poll(h.q, 1101), 2);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 2);
	CU_ASSERT_EQUAL(h.rec[1].reason, BW_DISPATCH_TIMEOUT);
	CU_ASSERT_EQUAL(h.rec[1].created_tsc, 1001);
	check_task(&h.rec[1], 0, &b, 5, 0);
	complete(&h, 0, BW_STATUS_OK, 1200);
	complete(&h, 1, BW_STATUS_OK, 1200);
	check_done_once(&a, BW_STATUS_OK);
	check_done_once(&b, BW_STATUS_OK);
	CU_ASSERT_TRUE(job_output_ok(&a));
	CU_ASSERT_TRUE(job_output_ok(&b));
	CHECK_STATS(&h, .jobs = 2, .jobs_done = 2, .batches = 2, .rows = 10, .dispatch[BW_DISPATCH_FULL] = 1,
		    .dispatch[BW_DISPATCH_TIMEOUT] = 1);
	harness_fini(&h);
}

/* ---- splitting ----------------------------------------------------------------------------------- */

/* max_batch_size 16, allowed sizes {4} with splitting: L = 4. */
static struct bat_options opts_split(int32_t threads)
{
	struct bat_options o = opts_base(threads, 16, 100);

	o.enable_large_batch_splitting = true;
	set_sizes(&o, 1, (const uint32_t[]){4});
	return o;
}

static void test_split_10_3_4(void)
{
	struct harness h;
	struct bat_options o = opts_split(4);
	struct job_rec a, b;

	harness_init(&h, &o);
	CU_ASSERT_EQUAL(h.opts.max_execution_batch_size, 4);
	CU_ASSERT_EQUAL(submit(&h, &a, 1, 1000), BW_STATUS_OK);  /* r = 3 */
	CU_ASSERT_EQUAL(submit(&h, &b, 10, 1001), BW_STATUS_OK); /* n = 10: 3, 4, 3 */
	CU_ASSERT_EQUAL(bat_queue_stats(h.q)->splits, 1);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1001), 2); /* two full batches */
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 2);
	CU_ASSERT_EQUAL(h.rec[0].reason, BW_DISPATCH_FULL);
	CU_ASSERT_EQUAL(h.rec[0].size, 4);
	CU_ASSERT_EQUAL(h.rec[0].num_tasks, 2);
	check_task(&h.rec[0], 0, &a, 1, 0);
	check_task(&h.rec[0], 1, &b, 3, 0);
	CU_ASSERT_EQUAL(h.rec[1].reason, BW_DISPATCH_FULL);
	CU_ASSERT_EQUAL(h.rec[1].size, 4);
	CU_ASSERT_EQUAL(h.rec[1].num_tasks, 1);
	CU_ASSERT_EQUAL(h.rec[1].created_tsc, 1001);
	check_task(&h.rec[1], 0, &b, 4, 3);
	/* the tail waits in its own window, opened by b at 1001 */
	CU_ASSERT_EQUAL(bat_poll(h.q, 1100), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1101), 2);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 3);
	CU_ASSERT_EQUAL(h.rec[2].reason, BW_DISPATCH_TIMEOUT);
	CU_ASSERT_EQUAL(h.rec[2].size, 3);
	CU_ASSERT_EQUAL(h.rec[2].padded_size, 4);
	check_task(&h.rec[2], 0, &b, 3, 7);

	/* pieces complete out of order; b completes once, after its last */
	complete(&h, 2, BW_STATUS_OK, 1200);
	CU_ASSERT_EQUAL(b.done_calls, 0);
	complete(&h, 0, BW_STATUS_OK, 1201);
	check_done_once(&a, BW_STATUS_OK);
	CU_ASSERT_EQUAL(b.done_calls, 0);
	complete(&h, 1, BW_STATUS_OK, 1202);
	check_done_once(&a, BW_STATUS_OK);
	check_done_once(&b, BW_STATUS_OK);
	CU_ASSERT_EQUAL(b.done_order, 2);
	/* outputs joined in row order, and nothing written past them (padding dropped) */
	CU_ASSERT_TRUE(job_output_ok(&a));
	CU_ASSERT_TRUE(job_output_ok(&b));
	CU_ASSERT_TRUE(bat_queue_empty(h.q));
	CU_ASSERT_EQUAL(bat_queue_stats(h.q)->by_size[4], 3);
	CHECK_STATS(&h, .jobs = 2, .jobs_done = 2, .splits = 1, .batches = 3, .rows = 11, .padding_rows = 1,
		    .dispatch[BW_DISPATCH_FULL] = 2, .dispatch[BW_DISPATCH_TIMEOUT] = 1);
	harness_fini(&h);
}

static void test_split_no_open_window(void)
{
	struct harness h;
	struct bat_options o = opts_split(4);
	struct job_rec a;

	/* r = 0 (no window open): [L, L, tail] = 4, 4, 1 */
	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit(&h, &a, 9, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1000), 2);
	bat_queue_drain(h.q);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1000), 1);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 3);
	check_task(&h.rec[0], 0, &a, 4, 0);
	check_task(&h.rec[1], 0, &a, 4, 4);
	check_task(&h.rec[2], 0, &a, 1, 8);
	CU_ASSERT_EQUAL(h.rec[2].reason, BW_DISPATCH_DRAIN);
	CU_ASSERT_EQUAL(h.rec[2].padded_size, 4);
	for (unsigned int i = 0; i < 3; i++)
		complete(&h, i, BW_STATUS_OK, 1100);
	check_done_once(&a, BW_STATUS_OK);
	CU_ASSERT_TRUE(job_output_ok(&a));
	CHECK_STATS(&h, .jobs = 1, .jobs_done = 1, .splits = 1, .batches = 3, .rows = 9, .padding_rows = 3,
		    .dispatch[BW_DISPATCH_FULL] = 2, .dispatch[BW_DISPATCH_DRAIN] = 1);
	harness_fini(&h);
}

static void test_split_first_error(void)
{
	struct harness h;
	struct bat_options o = opts_split(4);
	struct job_rec a, b;

	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit(&h, &a, 1, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(submit(&h, &b, 10, 1000), BW_STATUS_OK);
	bat_queue_drain(h.q);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1000), 3);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 3);
	complete(&h, 0, BW_STATUS_OK, 1100);
	check_done_once(&a, BW_STATUS_OK);
	CU_ASSERT_EQUAL(b.done_calls, 0);
	complete(&h, 1, BW_STATUS_INTERNAL, 1101);
	CU_ASSERT_EQUAL(b.done_calls, 0);
	complete(&h, 2, BW_STATUS_UNAVAILABLE, 1102);
	check_done_once(&b, BW_STATUS_INTERNAL); /* the first error wins */
	check_done_once(&a, BW_STATUS_OK);
	CHECK_STATS(&h, .jobs = 2, .jobs_done = 2, .splits = 1, .batches = 3, .batches_failed = 2, .rows = 11,
		    .padding_rows = 1, .dispatch[BW_DISPATCH_FULL] = 2, .dispatch[BW_DISPATCH_DRAIN] = 1);
	harness_fini(&h);
}

static void test_too_large(void)
{
	struct harness h;
	struct bat_options o = opts_base(4, 8, 100);
	struct job_rec a, b, c;

	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit(&h, &a, 9, 1000), BW_STATUS_INVALID_ARGUMENT);
	CU_ASSERT_EQUAL(submit(&h, &b, 0, 1000), BW_STATUS_INVALID_ARGUMENT); /* no rows: not too large */
	CU_ASSERT_EQUAL(submit(&h, &c, 8, 1000), BW_STATUS_OK);               /* exactly max is fine */
	CU_ASSERT_EQUAL(bat_poll(h.q, 1000), 1);
	CU_ASSERT_EQUAL(a.done_calls, 0);
	CU_ASSERT_EQUAL(b.done_calls, 0);
	complete(&h, 0, BW_STATUS_OK, 1010);
	check_done_once(&c, BW_STATUS_OK);
	CU_ASSERT_EQUAL(a.done_calls, 0);
	CHECK_STATS(&h, .jobs = 1, .jobs_done = 1, .rejected_too_large = 1, .batches = 1, .rows = 8,
		    .dispatch[BW_DISPATCH_FULL] = 1);
	harness_fini(&h);

	/* with splitting too: max_batch_size bounds a request, L a batch */
	o = opts_split(4);
	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit(&h, &a, 17, 1000), BW_STATUS_INVALID_ARGUMENT);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1000), 0);
	CU_ASSERT_EQUAL(h.nb_rec, 0);
	CU_ASSERT_EQUAL(a.done_calls, 0);
	CU_ASSERT_TRUE(bat_queue_empty(h.q));
	CHECK_STATS(&h, .rejected_too_large = 1);
	harness_fini(&h);
}

/* ---- full queue ---------------------------------------------------------------------------------- */

static void test_full_enqueued_batches(void)
{
	struct harness h;
	struct bat_options o = opts_base(1, 4, 100);
	struct job_rec a, b, c, d, e, f, g;

	o.max_enqueued_batches = 2;
	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit(&h, &a, 4, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1000), 1); /* a's batch in flight: it no longer counts */
	CU_ASSERT_EQUAL(submit(&h, &b, 4, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(submit(&h, &c, 4, 1000), BW_STATUS_OK); /* two closed, waiting for the limit */
	CU_ASSERT_EQUAL(bat_poll(h.q, 1000), 0);
	CU_ASSERT_EQUAL(h.nb_rec, 1);
	CU_ASSERT_EQUAL(submit(&h, &d, 1, 1001), BW_STATUS_UNAVAILABLE); /* closed ones count */
	CU_ASSERT_EQUAL(d.done_calls, 0);
	CHECK_STATS(&h, .jobs = 3, .rejected_full = 1, .batches = 1, .rows = 4, .dispatch[BW_DISPATCH_FULL] = 1);

	complete(&h, 0, BW_STATUS_OK, 1010);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1010), 1); /* b goes; c waits */
	CU_ASSERT_EQUAL(submit(&h, &e, 1, 1011), BW_STATUS_OK); /* opens the window: c + it = 2 */
	CU_ASSERT_EQUAL(submit(&h, &f, 4, 1012), BW_STATUS_UNAVAILABLE); /* would need a third */
	CU_ASSERT_EQUAL(submit(&h, &g, 2, 1013), BW_STATUS_OK);          /* fits the open window */
	CU_ASSERT_EQUAL(f.done_calls, 0);
	CU_ASSERT_EQUAL(d.done_calls, 0);
	complete(&h, 1, BW_STATUS_OK, 1020);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1020), 1);
	complete(&h, 2, BW_STATUS_OK, 1030);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1110), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1111), 2);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 4);
	/* f's refusal left the window open and whole */
	CU_ASSERT_EQUAL(h.rec[3].reason, BW_DISPATCH_TIMEOUT);
	CU_ASSERT_EQUAL(h.rec[3].size, 3);
	check_task(&h.rec[3], 0, &e, 1, 0);
	check_task(&h.rec[3], 1, &g, 2, 0);
	complete(&h, 3, BW_STATUS_OK, 1120);
	check_done_once(&a, BW_STATUS_OK);
	check_done_once(&b, BW_STATUS_OK);
	check_done_once(&c, BW_STATUS_OK);
	check_done_once(&e, BW_STATUS_OK);
	check_done_once(&g, BW_STATUS_OK);
	CU_ASSERT_EQUAL(d.done_calls, 0);
	CU_ASSERT_EQUAL(f.done_calls, 0);
	CU_ASSERT_TRUE(bat_queue_empty(h.q));
	CHECK_STATS(&h, .jobs = 5, .jobs_done = 5, .rejected_full = 2, .batches = 4, .rows = 15,
		    .dispatch[BW_DISPATCH_FULL] = 3, .dispatch[BW_DISPATCH_TIMEOUT] = 1);
	harness_fini(&h);
}

static void test_full_queue_size(void)
{
	struct harness h;
	struct bat_options o = opts_base(1, 8, 100);
	struct job_rec j[8];

	o.max_queue_size = 3;
	harness_init(&h, &o);
	for (unsigned int i = 0; i < 3; i++)
		CU_ASSERT_EQUAL(submit(&h, &j[i], 1, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(submit(&h, &j[3], 1, 1000), BW_STATUS_UNAVAILABLE);
	CU_ASSERT_EQUAL(j[3].done_calls, 0);
	CHECK_STATS(&h, .jobs = 3, .rejected_full = 1);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1100), 2); /* dispatched tasks leave the count */
	CU_ASSERT_EQUAL(submit(&h, &j[4], 1, 1100), BW_STATUS_OK);
	CU_ASSERT_EQUAL(submit(&h, &j[5], 1, 1100), BW_STATUS_OK);
	CU_ASSERT_EQUAL(submit(&h, &j[6], 1, 1100), BW_STATUS_OK);
	CU_ASSERT_EQUAL(submit(&h, &j[7], 1, 1100), BW_STATUS_UNAVAILABLE);
	complete(&h, 0, BW_STATUS_OK, 1150);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1200), 2);
	complete(&h, 1, BW_STATUS_OK, 1250);
	for (unsigned int i = 0; i < 8; i++) {
		if (i == 3 || i == 7) {
			CU_ASSERT_EQUAL(j[i].done_calls, 0);
		} else {
			check_done_once(&j[i], BW_STATUS_OK);
		}
	}
	CHECK_STATS(&h, .jobs = 6, .jobs_done = 6, .rejected_full = 2, .batches = 2, .rows = 6,
		    .dispatch[BW_DISPATCH_TIMEOUT] = 2);
	harness_fini(&h);
}

static void test_full_split_nothing_half_queued(void)
{
	struct harness h;
	struct bat_options o = opts_split(1);
	struct job_rec a, b, c;

	o.max_enqueued_batches = 3;
	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit(&h, &a, 1, 1000), BW_STATUS_OK);
	/* 14 rows: 3 into the open batch + 4 + 4 + 3 needs 3 new batches, 1 + 3 > 3 */
	CU_ASSERT_EQUAL(submit(&h, &b, 14, 1001), BW_STATUS_UNAVAILABLE);
	CU_ASSERT_EQUAL(b.done_calls, 0);
	CHECK_STATS(&h, .jobs = 1, .rejected_full = 1);
	/* 10 rows: 3 + 4 + 3 needs 2 new, 1 + 2 = 3 */
	CU_ASSERT_EQUAL(submit(&h, &c, 10, 1002), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1002), 1);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 1);
	/* the open batch holds a and c's first piece: nothing of b */
	CU_ASSERT_EQUAL(h.rec[0].size, 4);
	CU_ASSERT_EQUAL(h.rec[0].num_tasks, 2);
	check_task(&h.rec[0], 0, &a, 1, 0);
	check_task(&h.rec[0], 1, &c, 3, 0);
	complete(&h, 0, BW_STATUS_OK, 1010);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1010), 1);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 2);
	check_task(&h.rec[1], 0, &c, 4, 3);
	complete(&h, 1, BW_STATUS_OK, 1020);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1101), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1102), 2);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 3);
	check_task(&h.rec[2], 0, &c, 3, 7);
	CU_ASSERT_EQUAL(h.rec[2].num_tasks, 1);
	complete(&h, 2, BW_STATUS_OK, 1110);
	check_done_once(&a, BW_STATUS_OK);
	check_done_once(&c, BW_STATUS_OK);
	CU_ASSERT_TRUE(job_output_ok(&c));
	CU_ASSERT_EQUAL(b.done_calls, 0);
	CU_ASSERT_TRUE(bat_queue_empty(h.q));
	CHECK_STATS(&h, .jobs = 2, .jobs_done = 2, .rejected_full = 1, .splits = 1, .batches = 3, .rows = 11,
		    .padding_rows = 1, .dispatch[BW_DISPATCH_FULL] = 2, .dispatch[BW_DISPATCH_TIMEOUT] = 1);
	harness_fini(&h);
}

/* ---- padding ------------------------------------------------------------------------------------- */

static void test_padding_counted_by_size(void)
{
	static const uint32_t rows[] = {1, 2, 3, 5, 8};
	static const uint32_t padded[] = {2, 2, 4, 8, 8};
	struct harness h;
	struct bat_options o = opts_base(8, 8, 100);
	struct job_rec j[5];

	set_sizes(&o, 3, (const uint32_t[]){2, 4, 8});
	harness_init(&h, &o);
	for (unsigned int i = 0; i < 5; i++) {
		CU_ASSERT_EQUAL(submit(&h, &j[i], rows[i], 1000 + 1000 * i), BW_STATUS_OK);
		bat_poll(h.q, 1100 + 1000 * i);
		CU_ASSERT_EQUAL_FATAL(h.nb_rec, i + 1);
		CU_ASSERT_EQUAL(h.rec[i].padded_size, padded[i]);
		complete(&h, i, BW_STATUS_OK, 1200 + 1000 * i);
		check_done_once(&j[i], BW_STATUS_OK);
		CU_ASSERT_TRUE(job_output_ok(&j[i])); /* padding outputs dropped */
	}
	CU_ASSERT_EQUAL(bat_queue_stats(h.q)->by_size[2], 2);
	CU_ASSERT_EQUAL(bat_queue_stats(h.q)->by_size[4], 1);
	CU_ASSERT_EQUAL(bat_queue_stats(h.q)->by_size[8], 2);
	/* padding 1 + 0 + 1 + 3 + 0 */
	CHECK_STATS(&h, .jobs = 5, .jobs_done = 5, .batches = 5, .rows = 19, .padding_rows = 5,
		    .dispatch[BW_DISPATCH_TIMEOUT] = 4, .dispatch[BW_DISPATCH_FULL] = 1);
	harness_fini(&h);
}

/*
 * The distributions, on the harness's 1 µs clock: two single-row requests at 1000 and 1030 share a
 * window that times out at 1100 (window 100); the executor starts it at 1150 (queue 50) and it
 * completes at 1400 (compute 250): latencies 400 and 370. A third alone, started at once.
 */
static void test_histograms(void)
{
	struct harness h;
	struct bat_options o = opts_base(8, 8, 100);
	struct job_rec j[3];
	const struct bat_stats *st;

	harness_init(&h, &o);
	st = bat_queue_stats(h.q);
	CU_ASSERT_EQUAL(submit(&h, &j[0], 1, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(submit(&h, &j[1], 1, 1030), BW_STATUS_OK);
	bat_poll(h.q, 1100);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 1);
	h.rec[0].batch->started_tsc = 1150;
	complete(&h, 0, BW_STATUS_OK, 1400);
	CU_ASSERT_EQUAL(st->window_us.count, 1);
	CU_ASSERT_EQUAL(st->window_us.sum, 100);
	CU_ASSERT_EQUAL(st->queue_us.sum, 50);
	CU_ASSERT_EQUAL(st->compute_us.sum, 250);
	CU_ASSERT_EQUAL(st->latency_us.count, 2);
	CU_ASSERT_EQUAL(st->latency_us.sum, 400 + 370);
	CU_ASSERT_EQUAL(st->batch_rows.count, 1);
	CU_ASSERT_EQUAL(st->batch_rows.sum, 2);
	/* each value in a bucket at or above it, within a quarter */
	CU_ASSERT(bw_hist_quantile(&st->latency_us, 1.0) >= 400 && bw_hist_quantile(&st->latency_us, 1.0) < 500);
	CU_ASSERT(bw_hist_quantile(&st->latency_us, 0.5) >= 370 && bw_hist_quantile(&st->latency_us, 0.5) < 463);

	CU_ASSERT_EQUAL(submit(&h, &j[2], 1, 2000), BW_STATUS_OK);
	bat_poll(h.q, 2100);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 2);
	complete(&h, 1, BW_STATUS_OK, 2130); /* no start time given: queue 0, compute from dispatch */
	CU_ASSERT_EQUAL(st->queue_us.count, 2);
	CU_ASSERT_EQUAL(st->queue_us.sum, 50);
	CU_ASSERT_EQUAL(st->compute_us.sum, 250 + 30);
	CU_ASSERT_EQUAL(st->latency_us.count, 3);
	harness_fini(&h);
}

/* ---- errors -------------------------------------------------------------------------------------- */

static void test_error_fanout(void)
{
	struct harness h;
	struct bat_options o = opts_base(4, 8, 100);
	struct job_rec a, b, c, d;

	o.enable_large_batch_splitting = true;
	o.max_execution_batch_size = 4;
	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit(&h, &a, 2, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(submit(&h, &b, 1, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(submit(&h, &c, 3, 1000), BW_STATUS_OK); /* 1 here, 2 in the next batch */
	CU_ASSERT_EQUAL(submit(&h, &d, 1, 1000), BW_STATUS_OK); /* joins c's second piece */
	bat_queue_drain(h.q);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1000), 2);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 2);
	check_task(&h.rec[0], 0, &a, 2, 0);
	check_task(&h.rec[0], 1, &b, 1, 0);
	check_task(&h.rec[0], 2, &c, 1, 0);
	check_task(&h.rec[1], 0, &c, 2, 1);
	check_task(&h.rec[1], 1, &d, 1, 0);

	complete(&h, 0, BW_STATUS_INTERNAL, 1100);
	check_done_once(&a, BW_STATUS_INTERNAL);
	check_done_once(&b, BW_STATUS_INTERNAL);
	CU_ASSERT_EQUAL(c.done_calls, 0); /* its other piece is still running */
	CU_ASSERT_EQUAL(d.done_calls, 0);
	complete(&h, 1, BW_STATUS_INTERNAL, 1101);
	check_done_once(&a, BW_STATUS_INTERNAL);
	check_done_once(&b, BW_STATUS_INTERNAL);
	check_done_once(&c, BW_STATUS_INTERNAL);
	check_done_once(&d, BW_STATUS_INTERNAL);
	CU_ASSERT_EQUAL(h.done_calls, 4);
	CU_ASSERT_TRUE(bat_queue_empty(h.q));
	CHECK_STATS(&h, .jobs = 4, .jobs_done = 4, .splits = 1, .batches = 2, .batches_failed = 2, .rows = 7,
		    .dispatch[BW_DISPATCH_FULL] = 1, .dispatch[BW_DISPATCH_DRAIN] = 1);
	harness_fini(&h);
}

static void test_error_split_piece_ok_after_failure(void)
{
	struct harness h;
	struct bat_options o = opts_base(4, 8, 100);
	struct job_rec a, c;

	/* one piece fails, the other succeeds: the job still completes once, with the failure */
	o.enable_large_batch_splitting = true;
	o.max_execution_batch_size = 4;
	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit(&h, &a, 3, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(submit(&h, &c, 3, 1000), BW_STATUS_OK);
	bat_queue_drain(h.q);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1000), 2);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 2);
	complete(&h, 0, BW_STATUS_INTERNAL, 1100);
	check_done_once(&a, BW_STATUS_INTERNAL);
	CU_ASSERT_EQUAL(c.done_calls, 0);
	complete(&h, 1, BW_STATUS_OK, 1101);
	check_done_once(&c, BW_STATUS_INTERNAL);
	CHECK_STATS(&h, .jobs = 2, .jobs_done = 2, .splits = 1, .batches = 2, .batches_failed = 1, .rows = 6,
		    .dispatch[BW_DISPATCH_FULL] = 1, .dispatch[BW_DISPATCH_DRAIN] = 1);
	harness_fini(&h);
}

static void test_error_submit_eio(void)
{
	struct harness h;
	struct bat_options o = opts_base(1, 4, 100);
	struct job_rec a, b, c;

	harness_init(&h, &o);
	h.submit_ret = -EIO;
	CU_ASSERT_EQUAL(submit(&h, &a, 2, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(submit(&h, &b, 2, 1000), BW_STATUS_OK);
	bat_poll(h.q, 1000);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 1);
	CU_ASSERT_TRUE(h.rec[0].failed_submit);
	check_done_once(&a, BW_STATUS_UNAVAILABLE);
	check_done_once(&b, BW_STATUS_UNAVAILABLE);
	CU_ASSERT_EQUAL(bat_limiter_in_flight(h.lim), 0); /* the slot is back */
	CU_ASSERT_TRUE(bat_queue_empty(h.q));
	CHECK_STATS(&h, .jobs = 2, .jobs_done = 2, .batches = 1, .batches_failed = 1, .rows = 4,
		    .dispatch[BW_DISPATCH_FULL] = 1);

	/* with num_batch_threads 1, the next batch could not go if the slot had leaked */
	h.submit_ret = 0;
	CU_ASSERT_EQUAL(submit(&h, &c, 4, 1001), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1001), 1);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 2);
	CU_ASSERT_FALSE(h.rec[1].failed_submit);
	CU_ASSERT_EQUAL(bat_limiter_in_flight(h.lim), 1);
	complete(&h, 1, BW_STATUS_OK, 1010);
	check_done_once(&c, BW_STATUS_OK);
	check_done_once(&a, BW_STATUS_UNAVAILABLE);
	CU_ASSERT_EQUAL(bat_limiter_in_flight(h.lim), 0);
	CHECK_STATS(&h, .jobs = 3, .jobs_done = 3, .batches = 2, .batches_failed = 1, .rows = 8,
		    .dispatch[BW_DISPATCH_FULL] = 2);
	harness_fini(&h);
}

/* ---- deadlines ----------------------------------------------------------------------------------- */

static void test_deadline_while_limit_held(void)
{
	struct harness h;
	struct bat_options o = opts_base(1, 4, 100);
	struct job_rec a, b, c, c2;

	o.max_enqueued_batches = 1;
	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit(&h, &a, 4, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1000), 1); /* a holds the only in-flight slot */
	CU_ASSERT_EQUAL(submit_full(&h, &b, 200, 1, 0, 1150, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(submit(&h, &c, 4, 1001), BW_STATUS_UNAVAILABLE); /* b's batch fills the queue */
	CU_ASSERT_EQUAL(bat_poll(h.q, 1099), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1100), 1); /* b's window closes but cannot go */
	CU_ASSERT_EQUAL(bat_poll(h.q, 1149), 0);
	CU_ASSERT_EQUAL(b.done_calls, 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1150), 1);
	check_done_once(&b, BW_STATUS_DEADLINE_EXCEEDED);
	CU_ASSERT_EQUAL(h.nb_rec, 1); /* never given to the executor */
	CU_ASSERT_FALSE(bat_queue_empty(h.q)); /* a is still in flight */
	/* its place is free: a job that found the queue full now fits */
	CU_ASSERT_EQUAL(submit(&h, &c2, 4, 1150), BW_STATUS_OK);
	complete(&h, 0, BW_STATUS_OK, 1200);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1200), 1);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 2);
	check_task(&h.rec[1], 0, &c2, 4, 0);
	complete(&h, 1, BW_STATUS_OK, 1210);
	check_done_once(&a, BW_STATUS_OK);
	check_done_once(&b, BW_STATUS_DEADLINE_EXCEEDED);
	check_done_once(&c2, BW_STATUS_OK);
	CU_ASSERT_EQUAL(c.done_calls, 0);
	CU_ASSERT_TRUE(bat_queue_empty(h.q));
	CHECK_STATS(&h, .jobs = 3, .jobs_done = 3, .rejected_full = 1, .deadline_expired = 1, .batches = 2,
		    .rows = 8, .dispatch[BW_DISPATCH_FULL] = 2);
	harness_fini(&h);
}

/*
 * default_timeout_micros and a job's own deadline, with the only in-flight slot held so that waiting
 * tasks cannot be dispatched: each window closes DEADLINE the guard before its earliest deadline,
 * then its late tasks expire at the deadline itself.
 */
static void test_deadline_default_and_own(void)
{
	const uint64_t guard = BAT_DEADLINE_GUARD_US;
	struct harness h;
	struct bat_options o = opts_base(1, 4, 100);
	struct job_rec x, a, b, c, c2, y;

	o.default_timeout_micros = 50;
	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit(&h, &x, 4, 900), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 900), 1); /* x holds the slot */

	/* the default: arrival 1000 + 50 */
	CU_ASSERT_EQUAL(submit_full(&h, &a, 300, 1, 0, 0, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1050 - guard - 1), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1050 - guard), 1); /* closes, cannot go */
	CU_ASSERT_EQUAL(bat_poll(h.q, 1049), 0);
	CU_ASSERT_EQUAL(a.done_calls, 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1050), 1);
	check_done_once(&a, BW_STATUS_DEADLINE_EXCEEDED);

	/* its own deadline overrides the default upwards: not expired at 2050; it closes at the
	 * timeout and goes when the slot comes back, before its deadline, so it runs */
	CU_ASSERT_EQUAL(submit_full(&h, &b, 301, 1, 0, 2200, 2000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 2050), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 2099), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 2100), 1);
	CU_ASSERT_EQUAL(b.done_calls, 0);
	complete(&h, 0, BW_STATUS_OK, 2150);
	CU_ASSERT_EQUAL(bat_poll(h.q, 2150), 1);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 2);
	CU_ASSERT_EQUAL(h.rec[1].reason, BW_DISPATCH_TIMEOUT);
	check_task(&h.rec[1], 0, &b, 1, 0); /* b now holds the slot */

	/* ... and downwards */
	CU_ASSERT_EQUAL(submit_full(&h, &c, 302, 1, 0, 3020, 3000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 3020 - guard - 1), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 3020 - guard), 1);
	CU_ASSERT_EQUAL(bat_poll(h.q, 3019), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 3020), 1);
	check_done_once(&c, BW_STATUS_DEADLINE_EXCEEDED);

	/* expiry takes only the late task out of a shared batch; the other goes later */
	CU_ASSERT_EQUAL(submit_full(&h, &c2, 303, 1, 0, 4020, 4000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(submit_full(&h, &y, 304, 2, 0, 4500, 4001), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 4020 - guard), 1);
	CU_ASSERT_EQUAL(bat_poll(h.q, 4020), 1);
	check_done_once(&c2, BW_STATUS_DEADLINE_EXCEEDED);
	CU_ASSERT_EQUAL(y.done_calls, 0);
	complete(&h, 1, BW_STATUS_OK, 4050);
	check_done_once(&b, BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 4050), 1);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 3);
	CU_ASSERT_EQUAL(h.rec[2].reason, BW_DISPATCH_DEADLINE);
	CU_ASSERT_EQUAL(h.rec[2].size, 2);
	CU_ASSERT_EQUAL(h.rec[2].num_tasks, 1);
	check_task(&h.rec[2], 0, &y, 2, 0);
	complete(&h, 2, BW_STATUS_OK, 4060);
	check_done_once(&y, BW_STATUS_OK);
	check_done_once(&x, BW_STATUS_OK);
	CU_ASSERT_EQUAL(h.nb_rec, 3); /* a, c and c2 never reached the executor */
	CU_ASSERT_TRUE(bat_queue_empty(h.q));
	CHECK_STATS(&h, .jobs = 6, .jobs_done = 6, .deadline_expired = 3, .batches = 3, .rows = 7,
		    .dispatch[BW_DISPATCH_FULL] = 1, .dispatch[BW_DISPATCH_TIMEOUT] = 1,
		    .dispatch[BW_DISPATCH_DEADLINE] = 1);
	harness_fini(&h);
}

/* At low load a budget shorter than the timeout runs: its window closes the guard before it. */
static void test_deadline_before_timeout_idle(void)
{
	const uint64_t guard = BAT_DEADLINE_GUARD_US;
	struct harness h;
	struct bat_options o = opts_base(1, 4, 1000);
	struct job_rec a;

	o.default_timeout_micros = 100;
	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit(&h, &a, 1, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1100 - guard - 1), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1100 - guard), 2);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 1);
	CU_ASSERT_EQUAL(h.rec[0].reason, BW_DISPATCH_DEADLINE);
	CU_ASSERT_EQUAL(h.rec[0].dispatched_tsc, 1100 - guard);
	complete(&h, 0, BW_STATUS_OK, 1500); /* the deadline bounds dispatch, not completion */
	check_done_once(&a, BW_STATUS_OK);
	CHECK_STATS(&h, .jobs = 1, .jobs_done = 1, .batches = 1, .rows = 1, .dispatch[BW_DISPATCH_DEADLINE] = 1);
	harness_fini(&h);
}

static void test_deadline_split_piece_dispatched(void)
{
	struct harness h;
	struct bat_options o = opts_split(1);
	struct job_rec j;

	/* 6 rows: a full piece of 4 goes at once, the tail of 2 waits and expires */
	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit_full(&h, &j, 400, 6, 0, 1050, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1000), 1);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1050 - BAT_DEADLINE_GUARD_US), 1); /* the tail closes; the slot is held */
	CU_ASSERT_EQUAL(bat_poll(h.q, 1049), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1050), 1);
	CU_ASSERT_EQUAL(j.done_calls, 0); /* its first piece still runs */
	CU_ASSERT_EQUAL(h.nb_rec, 1);
	complete(&h, 0, BW_STATUS_OK, 1060);
	check_done_once(&j, BW_STATUS_DEADLINE_EXCEEDED);
	CU_ASSERT_TRUE(bat_queue_empty(h.q));
	CHECK_STATS(&h, .jobs = 1, .jobs_done = 1, .splits = 1, .deadline_expired = 1, .batches = 1, .rows = 4,
		    .dispatch[BW_DISPATCH_FULL] = 1);
	harness_fini(&h);

	/* both pieces waiting (the limit held by another batch): both expire, one done() */
	harness_init(&h, &o);
	struct job_rec x;
	CU_ASSERT_EQUAL(submit(&h, &x, 4, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1000), 1);
	CU_ASSERT_EQUAL(submit_full(&h, &j, 401, 6, 0, 1050, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1050 - BAT_DEADLINE_GUARD_US), 1);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1049), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1050), 2);
	check_done_once(&j, BW_STATUS_DEADLINE_EXCEEDED);
	complete(&h, 0, BW_STATUS_OK, 1060);
	check_done_once(&x, BW_STATUS_OK);
	CU_ASSERT_EQUAL(h.nb_rec, 1);
	CU_ASSERT_TRUE(bat_queue_empty(h.q));
	CHECK_STATS(&h, .jobs = 2, .jobs_done = 2, .splits = 1, .deadline_expired = 2, .batches = 1, .rows = 4,
		    .dispatch[BW_DISPATCH_FULL] = 1);
	harness_fini(&h);
}

/* Once a compute time is learnt, a window closes early (DEADLINE) so its task can still be dispatched. */
static void test_deadline_close_early(void)
{
	struct harness h;
	struct bat_options o = opts_base(1, 4, 1000);
	struct job_rec a, b;

	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit(&h, &a, 1, 0), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1000), 2);
	complete(&h, 0, BW_STATUS_OK, 1100); /* size 1 computes in 100 us */
	CU_ASSERT_EQUAL(submit_full(&h, &b, 500, 1, 0, 5300, 5000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 5300 - 100 - BAT_DEADLINE_GUARD_US - 1), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 5300 - 100 - BAT_DEADLINE_GUARD_US), 2); /* now + 100 + guard */
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 2);
	CU_ASSERT_EQUAL(h.rec[1].reason, BW_DISPATCH_DEADLINE);
	complete(&h, 1, BW_STATUS_OK, 5300);
	check_done_once(&b, BW_STATUS_OK);
	CHECK_STATS(&h, .jobs = 2, .jobs_done = 2, .batches = 2, .rows = 2, .dispatch[BW_DISPATCH_TIMEOUT] = 1,
		    .dispatch[BW_DISPATCH_DEADLINE] = 1);
	harness_fini(&h);
}

/* ---- the in-flight limit ------------------------------------------------------------------------- */

/*
 * A limiter at 16.5 (min 16, initial 16, max 64), windows of `window` batches: test_limiter.c's
 * test_limiter_fractional works its six windows by hand.
 */
static struct bat_limiter *limiter_at_16_5(uint32_t window)
{
	static const uint64_t avg[] = {100, 90, 90, 90, 80, 80};
	struct bat_limiter *lim = limiter_adaptive(16, 16, 64, window);

	for (size_t w = 0; w < 6; w++) {
		for (uint32_t i = 0; i < window; i++)
			one_batch(lim, avg[w]);
	}
	CU_ASSERT_DOUBLE_EQUAL_FATAL(bat_limiter_limit(lim), 16.5, 0);
	return lim;
}

/*
 * The queue draws for a fractional headroom only when a batch closes or one completes (docs: as
 * TensorFlow; a draw on every poll would admit the batch almost at once). Limit 16.5 with 16 slots
 * held by other cores: a full batch goes on the poll after it closes with probability 1/2, and if it
 * does not, a thousand more polls leave it waiting; a slot given back (headroom 1.5) lets it go.
 */
static void test_queue_fractional_draw(void)
{
	enum { TRIALS = 200, HELD = 16 };
	struct bat_limiter *lim = limiter_at_16_5(20000);
	uint64_t rng = 99;
	unsigned int first_poll = 0;

	for (unsigned int i = 0; i < HELD; i++)
		CU_ASSERT_TRUE(bat_limiter_try_acquire(lim, &rng));
	for (unsigned int t = 0; t < TRIALS; t++) {
		struct harness h;
		struct bat_options o = opts_base(0, 4, 100);
		struct bw_executor exec = {.ops = &g_stub_ops, .ctx = &h};
		struct job_rec a;
		char msg[MSG_CAP];

		o.batches_to_average_over = 20000; /* as the limiter's: the window never closes here */
		memset(&h, 0, sizeof(h));
		h.opts = o;
		CU_ASSERT_EQUAL_FATAL(bat_options_finalize(&h.opts, msg, sizeof(msg)), 0);
		h.rec = calloc(REC_BATCHES_MAX, sizeof(*h.rec));
		CU_ASSERT_PTR_NOT_NULL_FATAL(h.rec);
		h.lim = lim;
		h.q = bat_queue_create(&h.opts, lim, &exec, on_done, &h, TSC_HZ_1US, 1000 + t);
		CU_ASSERT_PTR_NOT_NULL_FATAL(h.q);

		CU_ASSERT_EQUAL(submit(&h, &a, 4, 1000), BW_STATUS_OK); /* closes FULL */
		bat_poll(h.q, 1000);
		if (h.nb_rec == 1) {
			first_poll++;
		} else {
			for (uint64_t now = 1001; now < 2001; now++)
				bat_poll(h.q, now);
			CU_ASSERT_EQUAL(h.nb_rec, 0);
			bat_limiter_release(lim, 80); /* another core's completion */
			CU_ASSERT_EQUAL(bat_poll(h.q, 2001), 1);
			CU_ASSERT_EQUAL(h.nb_rec, 1);
		}
		CU_ASSERT_EQUAL_FATAL(h.nb_rec, 1);
		complete(&h, 0, BW_STATUS_OK, 2100);
		check_done_once(&a, BW_STATUS_OK);
		if (bat_limiter_in_flight(lim) < HELD) /* the slot given back is held again */
			CU_ASSERT_TRUE(bat_limiter_try_acquire(lim, &rng));
		CU_ASSERT_EQUAL(bat_limiter_in_flight(lim), HELD);
		bat_queue_destroy(h.q);
		free(h.rec);
	}
	printf("\n  %u of %u went on the first poll ", first_poll, (unsigned int)TRIALS);
	CU_ASSERT(first_poll >= TRIALS / 4 && first_poll <= TRIALS * 3 / 4);
	CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(lim), 16.5, 0);
	for (unsigned int i = 0; i < HELD; i++)
		bat_limiter_release(lim, 80);
	bat_limiter_destroy(lim);
}

/* The queue feeds the adaptive rule with creation-to-completion latencies, and obeys the limit. */
static void test_queue_adaptive_latency(void)
{
	struct harness h;
	struct bat_options o = opts_base(0, 4, 100);
	struct job_rec a, b;

	o.min_inflight_batches = 1;
	o.initial_inflight_batches = 1;
	o.max_inflight_batches = 4;
	o.batches_to_average_over = 1;
	harness_init(&h, &o);
	CU_ASSERT_TRUE(h.opts.enable_large_batch_splitting);
	CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(h.lim), 1.0, 0);
	CU_ASSERT_EQUAL(submit(&h, &a, 4, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(submit(&h, &b, 4, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1000), 1); /* limit 1: one goes */
	CU_ASSERT_EQUAL(h.nb_rec, 1);
	/* window 1, latency 500 (created 1000, completed 1500): no decrease from 0, -1, 1 - 1/8 -> 1 */
	complete(&h, 0, BW_STATUS_OK, 1500);
	CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(h.lim), 1.0, 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1500), 1);
	/* window 2, latency 1700 - 1000 = 700: no decrease, +1, 1 + 1/8 */
	complete(&h, 1, BW_STATUS_OK, 1700);
	CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(h.lim), 1.125, 0);
	CHECK_STATS(&h, .jobs = 2, .jobs_done = 2, .batches = 2, .rows = 8, .dispatch[BW_DISPATCH_FULL] = 2);
	harness_fini(&h);
}

/* ---- priorities ---------------------------------------------------------------------------------- */

static void test_priorities(void)
{
	struct harness h;
	struct bat_options o = opts_base(1, 4, 100);
	struct job_rec lo, hi, bad, lo1, hi1;

	o.priority_levels = 2;
	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit_full(&h, &lo, 600, 4, 1, 0, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(submit_full(&h, &hi, 601, 4, 0, 0, 1001), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1001), 1);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 1);
	CU_ASSERT_EQUAL(h.rec[0].priority, 0);
	check_task(&h.rec[0], 0, &hi, 4, 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1002), 0); /* the low one waits */
	complete(&h, 0, BW_STATUS_OK, 1010);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1010), 1);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 2);
	CU_ASSERT_EQUAL(h.rec[1].priority, 1);
	check_task(&h.rec[1], 0, &lo, 4, 0);
	complete(&h, 1, BW_STATUS_OK, 1020);

	/* priority >= levels */
	CU_ASSERT_EQUAL(submit_full(&h, &bad, 602, 1, 2, 0, 1030), BW_STATUS_INVALID_ARGUMENT);
	CU_ASSERT_EQUAL(bad.done_calls, 0);

	/* levels never share a batch */
	CU_ASSERT_EQUAL(submit_full(&h, &lo1, 603, 1, 1, 0, 1040), BW_STATUS_OK);
	CU_ASSERT_EQUAL(submit_full(&h, &hi1, 604, 1, 0, 0, 1041), BW_STATUS_OK);
	bat_queue_drain(h.q);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1042), 1);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 3);
	CU_ASSERT_EQUAL(h.rec[2].priority, 0);
	CU_ASSERT_EQUAL(h.rec[2].num_tasks, 1);
	check_task(&h.rec[2], 0, &hi1, 1, 0);
	complete(&h, 2, BW_STATUS_OK, 1050);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1050), 1);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 4);
	CU_ASSERT_EQUAL(h.rec[3].priority, 1);
	check_task(&h.rec[3], 0, &lo1, 1, 0);
	complete(&h, 3, BW_STATUS_OK, 1060);
	check_done_once(&lo, BW_STATUS_OK);
	check_done_once(&hi, BW_STATUS_OK);
	check_done_once(&lo1, BW_STATUS_OK);
	check_done_once(&hi1, BW_STATUS_OK);
	CU_ASSERT_EQUAL(hi.done_order, 1);
	CU_ASSERT_TRUE(bat_queue_empty(h.q));
	CHECK_STATS(&h, .jobs = 4, .jobs_done = 4, .batches = 4, .rows = 10, .dispatch[BW_DISPATCH_FULL] = 2,
		    .dispatch[BW_DISPATCH_DRAIN] = 2);
	harness_fini(&h);
}

/* ---- extensions ---------------------------------------------------------------------------------- */

static void test_slo(void)
{
	struct harness h;
	struct bat_options o = opts_base(1, 4, 10000);
	struct job_rec a, b, c, d;

	o.slo_micros = 500;
	harness_init(&h, &o);
	/* nothing learnt: only the age counts */
	CU_ASSERT_EQUAL(submit(&h, &a, 2, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1499), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1500), 2);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 1);
	CU_ASSERT_EQUAL(h.rec[0].reason, BW_DISPATCH_SLO);
	complete(&h, 0, BW_STATUS_OK, 1800); /* size 2 computes in 300 us */

	/* 200 + 300 >= 500 */
	CU_ASSERT_EQUAL(submit(&h, &b, 2, 2000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 2199), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 2200), 2);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 2);
	CU_ASSERT_EQUAL(h.rec[1].reason, BW_DISPATCH_SLO);
	complete(&h, 1, BW_STATUS_OK, 2600); /* 400 us: average 300 + (400 - 300) / 8 = 312.5 */

	CU_ASSERT_EQUAL(submit(&h, &c, 2, 3000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 3187), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 3188), 2); /* 188 + 312 >= 500 */
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 3);
	CU_ASSERT_EQUAL(h.rec[2].reason, BW_DISPATCH_SLO);
	complete(&h, 2, BW_STATUS_OK, 3200);

	/* a size not learnt yet predicts nothing */
	CU_ASSERT_EQUAL(submit(&h, &d, 3, 4000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 4499), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 4500), 2);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 4);
	CU_ASSERT_EQUAL(h.rec[3].reason, BW_DISPATCH_SLO);
	complete(&h, 3, BW_STATUS_OK, 4600);
	check_done_once(&d, BW_STATUS_OK);
	CHECK_STATS(&h, .jobs = 4, .jobs_done = 4, .batches = 4, .rows = 9, .dispatch[BW_DISPATCH_SLO] = 4);
	harness_fini(&h);
}

static void test_slo_off_by_default(void)
{
	struct harness h;
	struct bat_options o = opts_base(1, 4, 1000);
	struct job_rec a, b;

	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit(&h, &a, 2, 0), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1000), 2);
	complete(&h, 0, BW_STATUS_OK, 1900); /* learnt: 900 us */
	CU_ASSERT_EQUAL(submit(&h, &b, 2, 2000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 2999), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 3000), 2);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 2);
	CU_ASSERT_EQUAL(h.rec[1].reason, BW_DISPATCH_TIMEOUT);
	complete(&h, 1, BW_STATUS_OK, 3100);
	CHECK_STATS(&h, .jobs = 2, .jobs_done = 2, .batches = 2, .rows = 4, .dispatch[BW_DISPATCH_TIMEOUT] = 2);
	harness_fini(&h);
}

static void test_dispatch_when_idle(void)
{
	struct harness h;
	struct bat_options o = opts_base(2, 4, 1000);
	struct job_rec a, b, c;

	o.dispatch_when_idle = true;
	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit(&h, &a, 1, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1000), 2); /* nothing in flight: at once */
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 1);
	CU_ASSERT_EQUAL(h.rec[0].reason, BW_DISPATCH_IDLE);
	CU_ASSERT_EQUAL(h.rec[0].dispatched_tsc, 1000);
	/* a is in flight: b waits */
	CU_ASSERT_EQUAL(submit(&h, &b, 1, 1001), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1001), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1500), 0);
	CU_ASSERT_EQUAL(h.nb_rec, 1);
	complete(&h, 0, BW_STATUS_OK, 1600);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1600), 2); /* idle again */
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 2);
	CU_ASSERT_EQUAL(h.rec[1].reason, BW_DISPATCH_IDLE);
	check_task(&h.rec[1], 0, &b, 1, 0);
	/* while b is in flight, c's window runs to its timeout */
	CU_ASSERT_EQUAL(submit(&h, &c, 1, 1700), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 2699), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 2700), 2);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 3);
	CU_ASSERT_EQUAL(h.rec[2].reason, BW_DISPATCH_TIMEOUT);
	complete(&h, 1, BW_STATUS_OK, 2800);
	complete(&h, 2, BW_STATUS_OK, 2800);
	check_done_once(&a, BW_STATUS_OK);
	check_done_once(&b, BW_STATUS_OK);
	check_done_once(&c, BW_STATUS_OK);
	CHECK_STATS(&h, .jobs = 3, .jobs_done = 3, .batches = 3, .rows = 3, .dispatch[BW_DISPATCH_IDLE] = 2,
		    .dispatch[BW_DISPATCH_TIMEOUT] = 1);
	harness_fini(&h);
}

/* ---- pools --------------------------------------------------------------------------------------- */

/* Gives a blank job back: a job with no rows is refused with INVALID_ARGUMENT and returns to the pool. */
static void job_give_back(struct harness *h, struct bat_job *job)
{
	job->rows = 0;
	CU_ASSERT_EQUAL(bat_submit(h->q, job, 0), BW_STATUS_INVALID_ARGUMENT);
}

/* How many jobs the pool holds now (it is left as found). */
static unsigned int jobs_free(struct harness *h)
{
	enum { LIMIT = 200000 };
	struct bat_job **jobs = calloc(LIMIT, sizeof(*jobs));
	unsigned int n = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(jobs);
	while (n < LIMIT && (jobs[n] = bat_job_alloc(h->q)) != NULL)
		n++;
	CU_ASSERT(n < LIMIT);
	for (unsigned int i = 0; i < n; i++)
		job_give_back(h, jobs[i]);
	free(jobs);
	return n;
}

static void test_pool_exhausted(void)
{
	struct harness h;
	struct bat_options o = opts_base(1, 1, 100);
	struct bat_job *jobs[64];
	unsigned int n = 0;

	o.max_enqueued_batches = 1;
	harness_init(&h, &o);
	while (n < 64 && (jobs[n] = bat_job_alloc(h.q)) != NULL)
		n++;
	CU_ASSERT(n >= 1 && n < 64);
	CU_ASSERT_PTR_NULL(bat_job_alloc(h.q));
	job_give_back(&h, jobs[--n]);
	jobs[n] = bat_job_alloc(h.q);
	CU_ASSERT_PTR_NOT_NULL(jobs[n]);
	n++;
	CU_ASSERT_PTR_NULL(bat_job_alloc(h.q));
	/* a blank job comes back zeroed */
	for (unsigned int i = 0; i < n; i++)
		job_give_back(&h, jobs[i]);
	struct bat_job *j = bat_job_alloc(h.q);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	CU_ASSERT_EQUAL(j->rows, 0);
	CU_ASSERT_EQUAL(j->pieces_pending, 0);
	CU_ASSERT_PTR_NULL(j->owner[0]);
	job_give_back(&h, j);
	CU_ASSERT_EQUAL(jobs_free(&h), n);
	CHECK_STATS(&h, .jobs = 0);
	harness_fini(&h);
}

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

/* Drains: closes every window, then polls and completes until nothing is left. */
static void settle(struct harness *h, uint64_t now)
{
	bat_queue_drain(h->q);
	for (int round = 0; round < 1000 && !bat_queue_empty(h->q); round++) {
		bat_poll(h->q, now);
		for (unsigned int i = 0; i < h->nb_rec; i++) {
			if (!h->rec[i].completed)
				complete(h, i, BW_STATUS_OK, now);
		}
	}
	CU_ASSERT_TRUE(bat_queue_empty(h->q));
	CU_ASSERT_EQUAL(bat_limiter_in_flight(h->lim), 0);
}

static void test_random_cycles(void)
{
	enum { ITERATIONS = 1000, SETTLE_EVERY = 100 };
	struct harness h;
	struct bat_options o = opts_base(2, 8, 50);
	struct job_rec *recs = calloc(ITERATIONS, sizeof(*recs));
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	uint64_t now = 1000;
	unsigned int nb_recs = 0, pool, accepted = 0, settles = 0;
	uint64_t rows_real = 0, rows_padded = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(recs);
	o.enable_large_batch_splitting = true;
	set_sizes(&o, 2, (const uint32_t[]){2, 4}); /* L = 4 */
	o.max_enqueued_batches = 4;
	o.priority_levels = 2;
	o.max_queue_size = 12;
	o.default_timeout_micros = 400;
	harness_init(&h, &o);
	pool = jobs_free(&h);

	for (unsigned int it = 0; it < ITERATIONS; it++) {
		uint64_t op = xorshift(&seed) % 100;

		now += xorshift(&seed) % 20;
		if (op < 45) {
			struct job_rec *r = &recs[nb_recs];
			uint32_t rows = 1 + (uint32_t)(xorshift(&seed) % 9); /* 9: too large */
			uint8_t prio = xorshift(&seed) % 10 == 0 ? 2 : (uint8_t)(xorshift(&seed) % 2);
			uint64_t deadline = xorshift(&seed) % 4 == 0 ? now + 1 + xorshift(&seed) % 200 : 0;
			enum bw_status st = submit_full(&h, r, nb_recs, rows, prio, deadline, now);

			nb_recs++;
			if (rows > 8 || prio >= 2) {
				CU_ASSERT_EQUAL(st, BW_STATUS_INVALID_ARGUMENT);
			} else {
				CU_ASSERT(st == BW_STATUS_OK || st == BW_STATUS_UNAVAILABLE);
			}
			accepted += st == BW_STATUS_OK;
		} else if (op < 75) {
			h.submit_ret = xorshift(&seed) % 40 == 0 ? -EIO : 0;
			bat_poll(h.q, now);
			h.submit_ret = 0;
		} else {
			unsigned int pending[REC_BATCHES_MAX], n = 0;

			for (unsigned int i = 0; i < h.nb_rec; i++) {
				if (!h.rec[i].completed)
					pending[n++] = i;
			}
			if (n > 0) {
				unsigned int i = pending[xorshift(&seed) % n];
				complete(&h, i, xorshift(&seed) % 8 == 0 ? BW_STATUS_INTERNAL : BW_STATUS_OK, now);
			}
		}
		if ((it + 1) % SETTLE_EVERY == 0) {
			settle(&h, now);
			settles++;
			CU_ASSERT_EQUAL(jobs_free(&h), pool); /* every job is back */
			CU_ASSERT_EQUAL(bat_queue_stats(h.q)->jobs_done, accepted);
		}
	}
	settle(&h, now);

	const struct bat_stats *s = bat_queue_stats(h.q);
	uint64_t by_size = 0, by_reason = 0;
	unsigned int failed_jobs = 0;

	for (unsigned int i = 0; i < nb_recs; i++) {
		const struct job_rec *r = &recs[i];

		if (!r->accepted) {
			CU_ASSERT_EQUAL(r->done_calls, 0);
			continue;
		}
		CU_ASSERT_EQUAL(r->done_calls, 1);
		if (r->done_calls != 1)
			printf("\n  job %u: %u done() calls ", i, r->done_calls);
		if (r->status == BW_STATUS_OK) {
			CU_ASSERT_TRUE(job_output_ok(r));
		} else {
			failed_jobs++;
		}
	}
	for (unsigned int i = 0; i < h.nb_rec; i++) {
		rows_real += h.rec[i].size;
		rows_padded += h.rec[i].padded_size;
	}
	for (unsigned int i = 0; i <= BAT_BATCH_SIZE_MAX; i++)
		by_size += s->by_size[i];
	for (unsigned int i = 0; i < BW_DISPATCH_COUNT; i++)
		by_reason += s->dispatch[i];
	CU_ASSERT_EQUAL(s->jobs, accepted);
	CU_ASSERT_EQUAL(s->jobs_done, accepted);
	CU_ASSERT_EQUAL(s->batches, h.nb_rec);
	CU_ASSERT_EQUAL(s->rows, rows_real);
	CU_ASSERT_EQUAL(s->padding_rows, rows_padded - rows_real);
	CU_ASSERT_EQUAL(by_size, h.nb_rec);
	CU_ASSERT_EQUAL(by_reason, h.nb_rec);
	CU_ASSERT_EQUAL(h.done_calls, accepted);
	CU_ASSERT_TRUE(bat_queue_empty(h.q));
	CU_ASSERT_EQUAL(jobs_free(&h), pool);
	printf("\n  %u jobs (%u accepted, %u failed), %u batches, %llu splits, %llu expired, %llu full, %u settles ",
	       nb_recs, accepted, failed_jobs, h.nb_rec, (unsigned long long)s->splits,
	       (unsigned long long)s->deadline_expired, (unsigned long long)s->rejected_full, settles);
	/* the mix exercised what it is meant to */
	CU_ASSERT(s->splits > 0);
	CU_ASSERT(s->deadline_expired > 0);
	CU_ASSERT(s->rejected_full > 0);
	CU_ASSERT(s->batches_failed > 0);
	CU_ASSERT(accepted > 100);

	/* and the queue still takes a full load: batches and tasks are all back too */
	struct job_rec fill[4];
	unsigned int base = h.nb_rec;
	for (unsigned int i = 0; i < 4; i++)
		CU_ASSERT_EQUAL(submit(&h, &fill[i], 4, now), BW_STATUS_OK); /* 4 batches = max_enqueued */
	settle(&h, now);
	CU_ASSERT_EQUAL(h.nb_rec, base + 4);
	for (unsigned int i = 0; i < 4; i++)
		check_done_once(&fill[i], BW_STATUS_OK);
	free(recs);
	harness_fini(&h);
}

int main(void)
{
	static CU_TestInfo create_tests[] = {
		{"bat_queue_create refuses bad arguments", test_queue_create_refuses},
		CU_TEST_INFO_NULL,
	};
	static CU_TestInfo window_tests[] = {
		{"closes FULL, dispatched on the same poll", test_window_full},
		{"closes at created + timeout, not a tick before", test_window_timeout},
		{"timeout 0 still batches what came before the poll", test_window_timeout_zero},
		{"drain closes DRAIN", test_window_drain},
		{"a task that does not fit closes the window", test_window_no_fit},
		CU_TEST_INFO_NULL,
	};
	static CU_TestInfo split_tests[] = {
		{"n=10 r=3 L=4: 3, 4, 3, once, joined in order", test_split_10_3_4},
		{"r=0: 4, 4, 1", test_split_no_open_window},
		{"first error wins, once", test_split_first_error},
		{"too large: INVALID_ARGUMENT at once", test_too_large},
		CU_TEST_INFO_NULL,
	};
	static CU_TestInfo full_tests[] = {
		{"max_enqueued_batches: open and closed count, in flight not", test_full_enqueued_batches},
		{"max_queue_size", test_full_queue_size},
		{"split refused whole: nothing half-queued", test_full_split_nothing_half_queued},
		CU_TEST_INFO_NULL,
	};
	static CU_TestInfo padding_tests[] = {
		{"padded sizes and counters by size", test_padding_counted_by_size},
		{"distributions: window, queue, compute, latency, rows", test_histograms},
		CU_TEST_INFO_NULL,
	};
	static CU_TestInfo error_tests[] = {
		{"INTERNAL fans out to every job once, split job included", test_error_fanout},
		{"a split job with one failed piece completes once with it", test_error_split_piece_ok_after_failure},
		{"submit -EIO: UNAVAILABLE to every job, slot released", test_error_submit_eio},
		CU_TEST_INFO_NULL,
	};
	static CU_TestInfo deadline_tests[] = {
		{"expires while the limit is held; slot freed", test_deadline_while_limit_held},
		{"default_timeout_micros and the job's own deadline", test_deadline_default_and_own},
		{"split job: dispatched piece runs, job DEADLINE_EXCEEDED once", test_deadline_split_piece_dispatched},
		{"learnt compute time closes the window early (DEADLINE)", test_deadline_close_early},
		{"budget shorter than the timeout runs at low load", test_deadline_before_timeout_idle},
		CU_TEST_INFO_NULL,
	};
	static CU_TestInfo limit_tests[] = {
		{"queue feeds creation-to-completion latency", test_queue_adaptive_latency},
		{"queue draws for a fractional headroom only on close or completion", test_queue_fractional_draw},
		CU_TEST_INFO_NULL,
	};
	static CU_TestInfo priority_tests[] = {
		{"strict levels, bad level refused, levels never share", test_priorities},
		CU_TEST_INFO_NULL,
	};
	static CU_TestInfo extension_tests[] = {
		{"slo_micros closes early on the learnt compute time", test_slo},
		{"slo off by default", test_slo_off_by_default},
		{"dispatch_when_idle", test_dispatch_when_idle},
		CU_TEST_INFO_NULL,
	};
	static CU_TestInfo pool_tests[] = {
		{"bat_job_alloc NULL when exhausted", test_pool_exhausted},
		{"jobs of two versions never share a batch: the window closes (version)", test_window_version},
		{"1000 random submit/poll/complete: once each, all back", test_random_cycles},
		CU_TEST_INFO_NULL,
	};
	static CU_SuiteInfo suites[] = {
		{.pName = "batching queue creation", .pTests = create_tests},
		{.pName = "batching windows", .pTests = window_tests},
		{.pName = "batching splitting", .pTests = split_tests},
		{.pName = "batching full queue", .pTests = full_tests},
		{.pName = "batching padding", .pTests = padding_tests},
		{.pName = "batching errors", .pTests = error_tests},
		{.pName = "batching deadlines", .pTests = deadline_tests},
		{.pName = "batching queue and the in-flight limit", .pTests = limit_tests},
		{.pName = "batching priorities", .pTests = priority_tests},
		{.pName = "batching extensions", .pTests = extension_tests},
		{.pName = "batching pools", .pTests = pool_tests},
		CU_SUITE_INFO_NULL,
	};

	return bw_cunit_run(suites);
}
