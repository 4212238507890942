/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The deferred log (platform/log_clock.c): lines left by any thread reach rte_log only when drained,
 * in order, whole; a full ring loses lines and counts them; a line cut to the record still ends its
 * line; without a ring a line is logged at once. rte_log writes into a memory stream here, so what
 * reached the log is read back. EAL (no hugepages) for the ring.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>

#include "../bw_cunit.h"
#include "platform.h"

static char *g_text;
static size_t g_len;
static FILE *g_stream;

static void capture(void)
{
	if (g_stream != NULL) {
		rte_openlog_stream(NULL);
		fclose(g_stream);
	}
	free(g_text);
	g_text = NULL;
	g_len = 0;
	g_stream = open_memstream(&g_text, &g_len);
	rte_openlog_stream(g_stream);
}

/* What reached the log since capture(). */
static const char *captured(void)
{
	fflush(g_stream);
	return g_text != NULL ? g_text : "";
}

static unsigned int lines(const char *s)
{
	unsigned int n = 0;

	for (; *s != '\0'; s++)
		n += *s == '\n';
	return n;
}

static void test_direct_without_ring(void)
{
	capture();
	PLAT_LOG_DEFERRED(WARNING, app, "direct %d", 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(captured(), "batchwire: direct 1\n"));
}

static void test_deferred(void)
{
	char longer[400];

	CU_ASSERT_EQUAL_FATAL(plat_log_defer_init(4), 0);
	capture();
	for (int i = 0; i < 5; i++) /* a ring of 4 holds 3 */
		PLAT_LOG_DEFERRED(WARNING, app, "line %d", i);
	CU_ASSERT_STRING_EQUAL(captured(), "");
	CU_ASSERT_EQUAL(plat_log_deferred_lost(), 2);
	CU_ASSERT_EQUAL(plat_log_deferred_drain(), 3);
	CU_ASSERT_STRING_EQUAL(captured(), "batchwire: line 0\nbatchwire: line 1\nbatchwire: line 2\n");
	CU_ASSERT_EQUAL(plat_log_deferred_drain(), 0);

	capture();
	memset(longer, 'x', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	PLAT_LOG_DEFERRED(ERR, app, "%s", longer);
	CU_ASSERT_EQUAL(plat_log_deferred_drain(), 1);
	CU_ASSERT_EQUAL(lines(captured()), 1);
	CU_ASSERT(strlen(captured()) < PLAT_LOG_RECORD_BYTES);
	CU_ASSERT_EQUAL(captured()[strlen(captured()) - 1], '\n');
	/* the levels still filter: a DEBUG line below the type's level is not written */
	capture();
	PLAT_LOG_DEFERRED(DEBUG, app, "quiet");
	plat_log_deferred_drain();
	CU_ASSERT_STRING_EQUAL(captured(), "");
	plat_log_defer_fini();
}

int main(int argc, char **argv)
{
	char prefix[64];
	char *eal[] = { argv[0], "--no-huge", "-m", "64", "--no-pci", "--no-telemetry", "-l", "0",
			"--log-level=*:error", "--log-level=bw.app:info", "--file-prefix", prefix };
	static CU_TestInfo tests[] = {
		{ "without a ring: logged at once", test_direct_without_ring },
		{ "deferred: in order at the drain, lost when full, cut lines end their line", test_deferred },
		CU_TEST_INFO_NULL,
	};
	static CU_SuiteInfo suites[] = {
		{ .pName = "platform: deferred log", .pTests = tests },
		CU_SUITE_INFO_NULL,
	};
	int status;

	(void)argc;
	snprintf(prefix, sizeof(prefix), "bwtest-log-%d", (int)getpid());
	if (rte_eal_init((int)(sizeof(eal) / sizeof(eal[0])), eal) < 0) {
		fprintf(stderr, "rte_eal_init: %s\n", rte_strerror(rte_errno));
		return 1;
	}
	status = bw_cunit_run(suites);
	rte_openlog_stream(NULL);
	if (g_stream != NULL)
		fclose(g_stream);
	free(g_text);
	rte_eal_cleanup();
	return status;
}
