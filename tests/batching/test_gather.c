/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of batchwire/batch.h's gather and scatter, on a padded batch the queue formed (3 rows
 * padded to 4): padding rows repeat row 0 of the first task, and scatter writes each task's rows back
 * and drops the padding. Every queue test also runs them, through the stub model (bat_test.c).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../bw_cunit.h"

#include "bat_test.h"

static void test_padding_gather_scatter(void)
{
	struct harness h;
	struct bat_options o = opts_base(1, 8, 100);
	struct job_rec a, b;
	uint8_t dst[4 * ROW_BYTES + CANARY_BYTES];
	uint8_t src[4 * ROW_BYTES];

	set_sizes(&o, 3, (const uint32_t[]){2, 4, 8});
	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit(&h, &a, 2, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(submit(&h, &b, 1, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1100), 2);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 1);
	CU_ASSERT_EQUAL(h.rec[0].size, 3);
	CU_ASSERT_EQUAL(h.rec[0].padded_size, 4);
	CU_ASSERT_EQUAL(h.rec[0].batch->padded_size, 4);

	/* gather: a's 2 rows, b's row, then row 0 of the first task (a) once more */
	memset(dst, CANARY, sizeof(dst));
	bw_batch_gather(h.rec[0].batch, 0, dst, ROW_BYTES);
	CU_ASSERT_EQUAL(memcmp(dst, a.in, 2 * ROW_BYTES), 0);
	CU_ASSERT_EQUAL(memcmp(dst + 2 * ROW_BYTES, b.in, ROW_BYTES), 0);
	CU_ASSERT_EQUAL(memcmp(dst + 3 * ROW_BYTES, a.in, ROW_BYTES), 0);
	for (unsigned int i = 4 * ROW_BYTES; i < sizeof(dst); i++)
		CU_ASSERT_EQUAL(dst[i], CANARY);

	/* scatter: rows 0-1 to a, row 2 to b, row 3 (padding) nowhere */
	for (unsigned int i = 0; i < sizeof(src); i++)
		src[i] = (uint8_t)(0x40 + i);
	bw_batch_scatter(h.rec[0].batch, 0, src);
	CU_ASSERT_EQUAL(memcmp(a.out, src, 2 * ROW_BYTES), 0);
	CU_ASSERT_EQUAL(memcmp(b.out, src + 2 * ROW_BYTES, ROW_BYTES), 0);
	for (unsigned int i = 2 * ROW_BYTES; i < sizeof(a.out); i++)
		CU_ASSERT_EQUAL(a.out[i], CANARY);
	for (unsigned int i = ROW_BYTES; i < sizeof(b.out); i++)
		CU_ASSERT_EQUAL(b.out[i], CANARY);

	h.rec[0].completed = true;
	bat_batch_complete(h.rec[0].batch, BW_STATUS_OK, 1110);
	check_done_once(&a, BW_STATUS_OK);
	check_done_once(&b, BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_queue_stats(h.q)->by_size[4], 1);
	CU_ASSERT_EQUAL(bat_queue_stats(h.q)->by_size[3], 0);
	CHECK_STATS(&h, .jobs = 2, .jobs_done = 2, .batches = 1, .rows = 3, .padding_rows = 1,
		    .dispatch[BW_DISPATCH_TIMEOUT] = 1);
	harness_fini(&h);
}

int main(void)
{
	static CU_TestInfo gather_tests[] = {
		{"3 rows in {2,4,8}: gather repeats row 0, scatter drops padding", test_padding_gather_scatter},
		CU_TEST_INFO_NULL,
	};
	static CU_SuiteInfo suites[] = {
		{.pName = "batching gather and scatter", .pTests = gather_tests},
		CU_SUITE_INFO_NULL,
	};

	return bw_cunit_run(suites);
}
