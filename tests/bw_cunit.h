/* SPDX-License-Identifier: BSD-3-Clause */
/* The one way batchwire's CUnit programs run: verbose basic mode, so every Run Summary prints. */
#ifndef BW_TESTS_CUNIT_H
#define BW_TESTS_CUNIT_H

#include <stdio.h>
#include <string.h>

#include <CUnit/Basic.h>

/**
 * Registers and runs the suites (CU_SUITE_INFO_NULL-terminated).
 * \return the process exit status: the number of failed asserts plus the suites whose set-up or
 *         clean-up failed (CUnit counts neither as a failed assert, and a suite whose set-up fails runs
 *         none of its cases), capped at 255 because an exit status is 8 bits and 256 failures must not
 *         read as success; 1 when CUnit itself fails.
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
	failures = CU_get_number_of_failures() + CU_get_number_of_suites_failed();
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

/*
 * A case some machines cannot run. CUnit 2.1-3 has no per-case skip, so such a case is left out of
 * the program's plain run and is a meson test of its own: the program run with `arg` runs it alone,
 * or reports SKIP with the reason where it cannot run.
 */
struct bw_cunit_alone {
	const char *arg;                /* argv[1] that selects it (the meson test's args) */
	const char *name;               /* the case's name in the Run Summary */
	CU_TestFunc test;
	const char *(*cannot_run)(void); /* NULL when it can run here, else why not (one line) */
	CU_InitializeFunc init;         /* the suite set-up and clean-up it needs, or NULL */
	CU_CleanupFunc cleanup;
};

/**
 * main() of a program with cases that run alone. Without arguments: runs suites (which do not hold
 * those cases) and names the cases left out. With argv[1] the arg of one of alone: runs that case by
 * itself, or reports SKIP.
 * \param alone  terminated by an entry whose arg is NULL
 * \return the process exit status: bw_cunit_run's, BW_TEST_EXIT_SKIP, or 2 when argv[1] names no case
 *         (a meson test with a mistyped argument must fail, not pass).
 */
static inline int bw_cunit_main(int argc, char **argv, CU_SuiteInfo *suites, const struct bw_cunit_alone *alone)
{
	const struct bw_cunit_alone *a;

	if (argc < 2) {
		setvbuf(stdout, NULL, _IONBF, 0);
		for (a = alone; a->arg != NULL; a++)
			printf("not in this run: '%s' (its own test: %s %s)\n", a->name, argv[0], a->arg);
		return bw_cunit_run(suites);
	}
	for (a = alone; a->arg != NULL; a++) {
		if (strcmp(argv[1], a->arg) != 0)
			continue;
		const char *why = a->cannot_run != NULL ? a->cannot_run() : NULL;
		if (why != NULL)
			return bw_cunit_skip(why);
		CU_TestInfo tests[] = {{a->name, a->test}, CU_TEST_INFO_NULL};
		CU_SuiteInfo one[] = {
			{.pName = a->arg, .pInitFunc = a->init, .pCleanupFunc = a->cleanup, .pTests = tests},
			CU_SUITE_INFO_NULL,
		};
		return bw_cunit_run(one);
	}
	fprintf(stderr, "%s: no case '%s' runs alone: expected", argv[0], argv[1]);
	for (a = alone; a->arg != NULL; a++)
		fprintf(stderr, " %s", a->arg);
	fprintf(stderr, "%s\n", alone->arg == NULL ? " no argument" : "");
	return 2;
}

#endif /* BW_TESTS_CUNIT_H */
