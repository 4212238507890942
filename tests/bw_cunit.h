/* SPDX-License-Identifier: BSD-3-Clause */
/* The one way batchwire's CUnit programs run: verbose basic mode, so every Run Summary prints. */
#ifndef BW_TESTS_CUNIT_H
#define BW_TESTS_CUNIT_H

#include <stdio.h>

#include <CUnit/Basic.h>

/**
 * Registers and runs the suites (CU_SUITE_INFO_NULL-terminated).
 * \return the process exit status: the number of failed asserts, capped at 255 because an exit status
 *         is 8 bits and 256 failures must not read as success; 1 when CUnit itself fails.
 */
static inline int bw_cunit_run(CU_SuiteInfo *suites)
{
	unsigned int failures;

	setvbuf(stdout, NULL, _IONBF, 0); /* notes and CUnit's lines in order with stderr */
	if (CU_initialize_registry() != CUE_SUCCESS || CU_register_suites(suites) != CUE_SUCCESS) {
		fprintf(stderr, "CUnit: %s\n", CU_get_error_msg());
		CU_cleanup_registry();
		return 1;
	}
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	failures = CU_get_number_of_failures();
	CU_cleanup_registry();
	return failures > 255 ? 255 : (int)failures;
}

#define BW_TEST_EXIT_SKIP 77 /* the exit status meson reads as SKIP */

/** Says why the program cannot run its cases here. \return BW_TEST_EXIT_SKIP, for main to return. */
static inline int bw_cunit_skip(const char *why)
{
	printf("SKIP: %s\n", why);
	return BW_TEST_EXIT_SKIP;
}

#endif /* BW_TESTS_CUNIT_H */
