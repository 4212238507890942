/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of app/config.c, the app's parameters: every option of the command line and of the
 * --config INI file at its bounds, every kind of bad value with the one-line message it must produce,
 * the precedence of the command line over the file, and the EAL/app split at "--". No EAL: parsing
 * must work before it starts. The mode-000 case runs alone (argument mode-000, meson test
 * app-config-mode-000): it reports SKIP where this process reads such a file anyway, as root does.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../bw_cunit.h"

#include "config.h"
#include "graph.h"
#include "host.h"

#ifndef BW_SOURCE_ROOT
#error "tests/app/meson.build defines BW_SOURCE_ROOT (the source tree, for configs/*.ini)"
#endif

/* ---- running the parser ----------------------------------------------------------------------- */

#define ARGS_MAX 40

/* What one app_config_parse call returned and printed. */
struct parse_run {
	int ret;
	struct app_config cfg;
	char *out; /* text on out, NUL-terminated */
	char *err; /* text on err */
};

static struct parse_run g_run;

static void run_free(void)
{
	free(g_run.out);
	free(g_run.err);
	g_run.out = NULL;
	g_run.err = NULL;
}

/* Parses "batchwire" followed by args; the result lands in g_run. */
static int parse_args(const char *const *args, int nb_args)
{
	char *argv[ARGS_MAX + 2];
	char *owned[ARGS_MAX + 1];
	size_t out_len = 0, err_len = 0;
	FILE *out, *err;
	int argc = 0;

	CU_ASSERT_FATAL(nb_args <= ARGS_MAX);
	run_free();
	argv[argc++] = owned[0] = strdup("batchwire");
	for (int i = 0; i < nb_args; i++)
		argv[argc++] = owned[i + 1] = strdup(args[i]);
	argv[argc] = NULL;

	out = open_memstream(&g_run.out, &out_len);
	err = open_memstream(&g_run.err, &err_len);
	CU_ASSERT_FATAL(out != NULL && err != NULL);
	memset(&g_run.cfg, 0xa5, sizeof(g_run.cfg)); /* the parser must fill every field itself */
	g_run.ret = app_config_parse(argc, argv, &g_run.cfg, out, err);
	fclose(out);
	fclose(err);
	/* getopt permutes argv, so free through our own copy of the pointers. */
	for (int i = 0; i <= nb_args; i++)
		free(owned[i]);
	return g_run.ret;
}

#define PARSE(...) \
	parse_args((const char *const[]){__VA_ARGS__}, \
		   (int)(sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *)))

static unsigned int count_lines(const char *text)
{
	unsigned int n = 0;

	for (; *text != '\0'; text++)
		n += *text == '\n';
	return n;
}

/* Exactly one line, newline-terminated, on err. */
static bool err_is_one_line(void)
{
	size_t len = strlen(g_run.err);

	return count_lines(g_run.err) == 1 && len > 0 && g_run.err[len - 1] == '\n';
}

static bool err_has(const char *needle)
{
	return strstr(g_run.err, needle) != NULL;
}

/* ---- the option table as the tests see it ------------------------------------------------------ */

/* An integer option: its bounds, a typical value, its default and where it lands. */
struct int_option {
	const char *flag;     /* "--mtu" */
	const char *key;      /* "mtu" */
	uint64_t min, max, typical, dflt;
	size_t offset, width; /* inside struct app_config */
	const char *accepted; /* the "expected ..." text */
};

#define FIELD16(f) offsetof(struct app_config, f), sizeof(uint16_t)
#define FIELD32(f) offsetof(struct app_config, f), sizeof(uint32_t)

static const struct int_option g_int_options[] = {
	{"--udp-port", "udp_port", 1, 65535, 9000, BW_UDP_PORT_DEFAULT, FIELD16(dp.udp_port),
	 "expected an integer in 1..65535"},
	{"--mtu", "mtu", 576, 9000, 1400, DP_MTU_DEFAULT, FIELD16(dp.mtu), "expected an integer in 576..9000"},
	{"--port", "port", 0, RTE_MAX_ETHPORTS - 1, 3, 0, FIELD16(port_id), "expected a DPDK port id in 0.."},
	{"--tx-drain-us", "tx_drain_us", 1, 100000, 50, DP_TX_DRAIN_US_DEFAULT, FIELD32(dp.tx_drain_us),
	 "expected an integer in 1..100000"},
	{"--rx-desc", "rx_desc", 64, 16384, 512, DP_RX_DESC_DEFAULT, FIELD16(dp.rx_desc),
	 "expected an integer in 64..16384"},
	{"--tx-desc", "tx_desc", 64, 16384, 2048, DP_TX_DESC_DEFAULT, FIELD16(dp.tx_desc),
	 "expected an integer in 64..16384"},
	{"--mbufs-held", "mbufs_held", 0, 1u << 20, 8192, DP_MBUFS_HELD_DEFAULT, FIELD32(dp.mbufs_held),
	 "expected an integer in 0..1048576"},
	{"--gpu-index", "gpu_index", 0, 15, 1, 0, FIELD16(gpu_index), "expected an integer in 0..15"},
	{"--auth-window-ms", "auth_window_ms", 1, DP_AUTH_WINDOW_MS_MAX, 500, DP_AUTH_WINDOW_MS_DEFAULT,
	 FIELD32(dp.auth.window_ms), "expected an integer in 1..3600000"},
	{"--auth-overlap-s", "auth_overlap_s", 0, DP_AUTH_OVERLAP_S_MAX, 60, DP_AUTH_OVERLAP_S_DEFAULT,
	 FIELD32(dp.auth.overlap_s), "expected an integer in 0..604800"},
	{"--auth-flows", "auth_flows", 8, DP_AUTH_FLOWS_MAX, 128, DP_AUTH_FLOWS_DEFAULT, FIELD32(dp.auth.flows),
	 "expected an integer in 8..1048576"},
};

#define NB_INT_OPTIONS (sizeof(g_int_options) / sizeof(g_int_options[0]))

static uint64_t field_get(const struct app_config *cfg, const struct int_option *opt)
{
	const uint8_t *p = (const uint8_t *)cfg + opt->offset;

	if (opt->width == sizeof(uint16_t))
		return *(const uint16_t *)p;
	return *(const uint32_t *)p;
}

#define TEST_IP "10.0.0.1"
#define TEST_IP_NET 0x0100000au /* 10.0.0.1 in network order, read as a little-endian uint32 */

/* Every integer option other than `except` holds its default. */
static bool int_options_at_default(const struct app_config *cfg, const struct int_option *except)
{
	for (unsigned int i = 0; i < NB_INT_OPTIONS; i++) {
		if (&g_int_options[i] != except && field_get(cfg, &g_int_options[i]) != g_int_options[i].dflt)
			return false;
	}
	return true;
}

/* ---- defaults and accepted values --------------------------------------------------------------- */

static void test_defaults(void)
{
	struct dp_config dflt;

	dp_config_defaults(&dflt);
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP), APP_CONFIG_RUN);
	CU_ASSERT_STRING_EQUAL(g_run.err, "");
	CU_ASSERT_STRING_EQUAL(g_run.out, "");
	CU_ASSERT_TRUE(g_run.cfg.have_ip);
	CU_ASSERT_EQUAL(g_run.cfg.dp.ipv4_addr, TEST_IP_NET);
	CU_ASSERT_EQUAL(g_run.cfg.dp.udp_port, dflt.udp_port);
	CU_ASSERT_EQUAL(g_run.cfg.dp.mtu, dflt.mtu);
	CU_ASSERT_EQUAL(g_run.cfg.dp.tx_drain_us, dflt.tx_drain_us);
	CU_ASSERT_EQUAL(g_run.cfg.dp.rx_desc, dflt.rx_desc);
	CU_ASSERT_EQUAL(g_run.cfg.dp.tx_desc, dflt.tx_desc);
	CU_ASSERT_EQUAL(g_run.cfg.dp.mbufs_held, dflt.mbufs_held);
	/* The documented numbers themselves, so a changed default is a visible decision. */
	CU_ASSERT_EQUAL(g_run.cfg.dp.udp_port, 7878);
	CU_ASSERT_EQUAL(g_run.cfg.dp.mtu, 1500);
	CU_ASSERT_EQUAL(g_run.cfg.dp.tx_drain_us, 10);
	CU_ASSERT_EQUAL(g_run.cfg.dp.rx_desc, 1024);
	CU_ASSERT_EQUAL(g_run.cfg.dp.tx_desc, 1024);
	CU_ASSERT_EQUAL(g_run.cfg.dp.mbufs_held, 4096);
	CU_ASSERT_EQUAL(g_run.cfg.port_id, 0);
	CU_ASSERT_EQUAL(g_run.cfg.nb_poll_lcores, 0);
	CU_ASSERT_STRING_EQUAL(g_run.cfg.config_path, "");
	CU_ASSERT_TRUE(int_options_at_default(&g_run.cfg, NULL));
}

static void test_int_options_accepted(void)
{
	for (unsigned int i = 0; i < NB_INT_OPTIONS; i++) {
		const struct int_option *opt = &g_int_options[i];
		const uint64_t values[] = {opt->min, opt->max, opt->typical};

		for (unsigned int v = 0; v < 3; v++) {
			char text[32];

			snprintf(text, sizeof(text), "%llu", (unsigned long long)values[v]);
			CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, opt->flag, text), APP_CONFIG_RUN);
			CU_ASSERT_STRING_EQUAL(g_run.err, "");
			CU_ASSERT_EQUAL(field_get(&g_run.cfg, opt), values[v]);
			CU_ASSERT_TRUE(int_options_at_default(&g_run.cfg, opt));
			CU_ASSERT_EQUAL(g_run.cfg.dp.ipv4_addr, TEST_IP_NET);
			CU_ASSERT_EQUAL(g_run.cfg.nb_poll_lcores, 0);
			/* --opt=value is the same option */
			char joined[64];
			snprintf(joined, sizeof(joined), "%s=%s", opt->flag, text);
			CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, joined), APP_CONFIG_RUN);
			CU_ASSERT_EQUAL(field_get(&g_run.cfg, opt), values[v]);
		}
	}
}

static void test_ip_accepted(void)
{
	static const struct {
		const char *text;
		uint8_t bytes[4];
	} cases[] = {
		{"10.0.0.1", {10, 0, 0, 1}},
		{"192.168.1.254", {192, 168, 1, 254}},
		{"1.2.3.4", {1, 2, 3, 4}},
		{"223.255.255.254", {223, 255, 255, 254}}, /* just below multicast */
		{"1.0.0.1", {1, 0, 0, 1}},
	};

	for (unsigned int i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		CU_ASSERT_EQUAL(PARSE("--ip", cases[i].text), APP_CONFIG_RUN);
		CU_ASSERT_STRING_EQUAL(g_run.err, "");
		CU_ASSERT_TRUE(g_run.cfg.have_ip);
		/* network byte order: the first byte in memory is the first number written */
		CU_ASSERT_EQUAL(memcmp(&g_run.cfg.dp.ipv4_addr, cases[i].bytes, 4), 0);
		CU_ASSERT_TRUE(int_options_at_default(&g_run.cfg, NULL));
	}
	/* The last --ip wins. */
	CU_ASSERT_EQUAL(PARSE("--ip", "10.9.9.9", "--ip", TEST_IP), APP_CONFIG_RUN);
	CU_ASSERT_EQUAL(g_run.cfg.dp.ipv4_addr, TEST_IP_NET);
}

static void test_poll_lcores_accepted(void)
{
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--poll-lcores", "1"), APP_CONFIG_RUN);
	CU_ASSERT_STRING_EQUAL(g_run.err, "");
	CU_ASSERT_EQUAL(g_run.cfg.nb_poll_lcores, 1);
	CU_ASSERT_EQUAL(g_run.cfg.poll_lcores[0], 1);
	CU_ASSERT_TRUE(int_options_at_default(&g_run.cfg, NULL));

	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--poll-lcores", "1,3-5"), APP_CONFIG_RUN);
	CU_ASSERT_STRING_EQUAL(g_run.err, "");
	CU_ASSERT_EQUAL_FATAL(g_run.cfg.nb_poll_lcores, 4);
	CU_ASSERT_EQUAL(g_run.cfg.poll_lcores[0], 1);
	CU_ASSERT_EQUAL(g_run.cfg.poll_lcores[1], 3);
	CU_ASSERT_EQUAL(g_run.cfg.poll_lcores[2], 4);
	CU_ASSERT_EQUAL(g_run.cfg.poll_lcores[3], 5);

	/* min id, max id, a one-element range, order kept as given */
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--poll-lcores", "0"), APP_CONFIG_RUN);
	CU_ASSERT_EQUAL(g_run.cfg.nb_poll_lcores, 1);
	CU_ASSERT_EQUAL(g_run.cfg.poll_lcores[0], 0);
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--poll-lcores", "127"), APP_CONFIG_RUN);
	CU_ASSERT_EQUAL(g_run.cfg.nb_poll_lcores, 1);
	CU_ASSERT_EQUAL(g_run.cfg.poll_lcores[0], APP_LCORE_ID_MAX);
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--poll-lcores", "7,2-2,0"), APP_CONFIG_RUN);
	CU_ASSERT_EQUAL_FATAL(g_run.cfg.nb_poll_lcores, 3);
	CU_ASSERT_EQUAL(g_run.cfg.poll_lcores[0], 7);
	CU_ASSERT_EQUAL(g_run.cfg.poll_lcores[1], 2);
	CU_ASSERT_EQUAL(g_run.cfg.poll_lcores[2], 0);

	/* The most lcores a list may name: DP_MAX_POLL_LCORES. */
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--poll-lcores", "64-127"), APP_CONFIG_RUN);
	CU_ASSERT_EQUAL_FATAL(g_run.cfg.nb_poll_lcores, DP_MAX_POLL_LCORES);
	for (unsigned int i = 0; i < DP_MAX_POLL_LCORES; i++)
		CU_ASSERT_EQUAL(g_run.cfg.poll_lcores[i], 64 + i);
}

/* ---- rejected values ------------------------------------------------------------------------------ */

/* Parses --ip TEST_IP flag value (or --ip value) and checks the one error line. */
static void check_rejected(const char *flag, const char *value, const char *accepted)
{
	char quoted[128];
	int ret;

	if (strcmp(flag, "--ip") == 0)
		ret = PARSE("--ip", value);
	else
		ret = PARSE("--ip", TEST_IP, flag, value);
	snprintf(quoted, sizeof(quoted), "'%s'", value);
	CU_ASSERT_EQUAL(ret, -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has(flag));
	CU_ASSERT_TRUE(err_has(quoted));
	CU_ASSERT_TRUE(err_has(accepted));
	CU_ASSERT_STRING_EQUAL(g_run.out, "");
	if (ret != -EINVAL || !err_is_one_line() || !err_has(flag) || !err_has(quoted) || !err_has(accepted))
		printf("\n  %s '%s' -> %d, err: %s", flag, value, ret, g_run.err);
}

static void test_int_options_rejected(void)
{
	for (unsigned int i = 0; i < NB_INT_OPTIONS; i++) {
		const struct int_option *opt = &g_int_options[i];
		char text[64];

		if (opt->min > 0) {
			snprintf(text, sizeof(text), "%llu", (unsigned long long)opt->min - 1);
			check_rejected(opt->flag, text, opt->accepted);
		}
		snprintf(text, sizeof(text), "%llu", (unsigned long long)opt->max + 1);
		check_rejected(opt->flag, text, opt->accepted);
		check_rejected(opt->flag, "abc", opt->accepted);
		check_rejected(opt->flag, "-1", opt->accepted);
		snprintf(text, sizeof(text), "-%llu", (unsigned long long)opt->typical);
		check_rejected(opt->flag, text, opt->accepted);
		snprintf(text, sizeof(text), "%llux", (unsigned long long)opt->typical);
		check_rejected(opt->flag, text, opt->accepted);
		snprintf(text, sizeof(text), "%llu ", (unsigned long long)opt->typical);
		check_rejected(opt->flag, text, opt->accepted);
		snprintf(text, sizeof(text), "+%llu", (unsigned long long)opt->typical);
		check_rejected(opt->flag, text, opt->accepted);
		check_rejected(opt->flag, "0x10", opt->accepted);
		check_rejected(opt->flag, "", opt->accepted);
		check_rejected(opt->flag, "99999999999999999999", opt->accepted);
		check_rejected(opt->flag, "18446744073709551616", opt->accepted);
		/* 2^32 + typical: would wrap to typical if the parser truncated before range-checking */
		snprintf(text, sizeof(text), "%llu", (1ull << 32) + (unsigned long long)opt->typical);
		check_rejected(opt->flag, text, opt->accepted);
	}
}

/* The limits of multi-datagram messages: parsed, derived at finalize, and a room too small for one
 * maximal request refused with one line that says what it takes. */
static void test_message_limits(void)
{
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP), APP_CONFIG_RUN);
	CU_ASSERT_EQUAL(g_run.cfg.dp.msg_max, 16u << 20);
	CU_ASSERT_EQUAL(g_run.cfg.dp.reasm_msgs, 1024);
	CU_ASSERT_EQUAL(g_run.cfg.dp.reasm_mbufs, 11716 + 1024); /* 16 MiB at MTU 1500, derived */

	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--mtu", "9000", "--max-message-bytes", "1048576",
			      "--reassembly-messages", "8"), APP_CONFIG_RUN);
	CU_ASSERT_EQUAL(g_run.cfg.dp.msg_max, 1u << 20);
	CU_ASSERT_EQUAL(g_run.cfg.dp.reasm_msgs, 8);
	CU_ASSERT_EQUAL(g_run.cfg.dp.reasm_mbufs, 118 + 1024); /* 1 MiB in slices of 8932 */

	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--reassembly-mbufs", "11716"), APP_CONFIG_RUN);
	CU_ASSERT_EQUAL(g_run.cfg.dp.reasm_mbufs, 11716);
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--reassembly-mbufs", "11715"), -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has("cannot hold one request of max_message_bytes 16777216: it takes 11716 datagrams"));

	/* at the smallest MTU a maximal body would need more segments than a message may have */
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--mtu", "576", "--max-message-bytes", "1073741824"), -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has("a message has at most 65535"));

	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--max-message-bytes", "1023"), -EINVAL);
	CU_ASSERT_TRUE(err_has("1024..1073741824"));
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--reassembly-messages", "0"), -EINVAL);
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--reassembly-messages", "65537"), -EINVAL);

	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--model-opt", "echo.max_request_bytes=4096"), APP_CONFIG_RUN);
	CU_ASSERT_EQUAL(g_run.cfg.models[0].max_request_bytes, 4096);
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--model-opt", "echo.max_request_bytes=100"), -EINVAL);
	CU_ASSERT_TRUE(err_has("max_request_bytes"));
}

static void test_ip_rejected(void)
{
	static const char *const bad[] = {
		"10.0.0", "256.1.1.1", "0.0.0.0", "255.255.255.255", "224.0.0.1", "239.255.255.255", "abc",
		"", "10.0.0.1.2", "10.0.0.1 ", "::1", "-1", "0.0.0.1", "127.0.0.1", "127.255.0.9", "240.0.0.1",
	};

	for (unsigned int i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		check_rejected("--ip", bad[i], "expected a unicast, non-loopback IPv4 address");
}

static void test_poll_lcores_rejected(void)
{
	static const char *const bad[] = {
		"", "1,", ",1", "3-1", "1,1", "1-2,2", "128", "a", "1--2", "1,,2", "-1", "1-", "1 ", "0-64",
		"99999999999999999999", "1-99999999999999999999",
	};

	for (unsigned int i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		check_rejected("--poll-lcores", bad[i], "expected a list of distinct lcore ids below 128");
}

/* ---- the command line itself -------------------------------------------------------------------- */

static void test_missing_ip(void)
{
	CU_ASSERT_EQUAL(PARSE("--mtu", "1500"), -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has("--ip"));
	CU_ASSERT_TRUE(err_has("expected"));

	parse_args(NULL, 0);
	CU_ASSERT_EQUAL(g_run.ret, -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has("--ip"));
}

static void test_unknown_option(void)
{
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--bogus", "1"), -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has("--bogus"));

	CU_ASSERT_EQUAL(PARSE("--bogus"), -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has("--bogus"));

	/* a flag that takes no value, given one */
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--help=yes"), -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has("--help"));

	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "-x"), -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has("-x"));

	/* The line must name the argument at fault, not the one before it. */
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "-xy"), -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has("-x"));
	CU_ASSERT_FALSE(err_has(TEST_IP));
	if (err_has(TEST_IP))
		printf("\n  unknown short option cluster -xy, err: %s", g_run.err);
}

static void test_missing_value(void)
{
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--mtu"), -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has("--mtu"));

	CU_ASSERT_EQUAL(PARSE("--ip"), -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has("--ip"));

	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--config"), -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has("--config"));

	/* The next option becomes the value, and is refused as one. */
	CU_ASSERT_EQUAL(PARSE("--mtu", "--ip=" TEST_IP), -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has("--mtu"));
	CU_ASSERT_TRUE(err_has("'--ip=" TEST_IP "'"));
}

static void test_stray_argument(void)
{
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "stray"), -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has("stray"));

	CU_ASSERT_EQUAL(PARSE("stray", "--ip", TEST_IP), -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has("stray"));

	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--", "after"), -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has("after"));
}

static void test_help_and_version(void)
{
	static const char *const flags[] = {
		"--ip", "--udp-port", "--mtu", "--port", "--poll-lcores", "--tx-drain-us", "--rx-desc",
		"--tx-desc", "--mbufs-held", "--gpu-module", "--gpu-index", "--config", "--help", "--version",
	};

	CU_ASSERT_EQUAL(PARSE("--help"), APP_CONFIG_HELP);
	CU_ASSERT_STRING_EQUAL(g_run.err, "");
	CU_ASSERT_TRUE(strstr(g_run.out, "Usage: batchwire") != NULL);
	for (unsigned int i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		char listed[40];
		snprintf(listed, sizeof(listed), "  %s ", flags[i]);
		CU_ASSERT_TRUE(strstr(g_run.out, listed) != NULL);
		if (strstr(g_run.out, listed) == NULL)
			printf("\n  --help does not list %s", flags[i]);
	}

	/* --help wins over anything wrong elsewhere on the line, and needs no --ip. */
	CU_ASSERT_EQUAL(PARSE("--mtu", "1", "--help"), APP_CONFIG_HELP);
	CU_ASSERT_STRING_EQUAL(g_run.err, "");

	CU_ASSERT_EQUAL(PARSE("--version"), APP_CONFIG_HELP);
	CU_ASSERT_STRING_EQUAL(g_run.err, "");
	CU_ASSERT_TRUE(strstr(g_run.out, "batchwire " BW_VERSION) != NULL);
	CU_ASSERT_EQUAL(count_lines(g_run.out), 1);
}

/* ---- --config ---------------------------------------------------------------------------------------- */

static char g_ini_path[64];

/* Writes text to a fresh temp file whose path lands in g_ini_path. */
static void ini_write(const char *text)
{
	snprintf(g_ini_path, sizeof(g_ini_path), "/tmp/bwtest-app-XXXXXX");
	int fd = mkstemp(g_ini_path);
	CU_ASSERT_FATAL(fd >= 0);
	FILE *f = fdopen(fd, "w");
	CU_ASSERT_FATAL(f != NULL);
	fputs(text, f);
	fclose(f);
}

static void ini_remove(void)
{
	unlink(g_ini_path);
}

static const char g_full_ini[] =
	"; every key of [dataplane]\n"
	"[dataplane]\n"
	"ip = 10.0.0.2\n"
	"udp_port = 9000\n"
	"mtu = 9000\n"
	"port = 3\n"
	"poll_lcores = 1,3-5\n"
	"tx_drain_us = 50\n"
	"rx_desc = 512\n"
	"tx_desc = 2048\n"
	"mbufs_held = 0\n";

static void test_config_applied(void)
{
	ini_write(g_full_ini);
	CU_ASSERT_EQUAL(PARSE("--config", g_ini_path), APP_CONFIG_RUN);
	CU_ASSERT_STRING_EQUAL(g_run.err, "");
	CU_ASSERT_STRING_EQUAL(g_run.cfg.config_path, g_ini_path);
	CU_ASSERT_TRUE(g_run.cfg.have_ip);
	CU_ASSERT_EQUAL(memcmp(&g_run.cfg.dp.ipv4_addr, (const uint8_t[]){10, 0, 0, 2}, 4), 0);
	CU_ASSERT_EQUAL(g_run.cfg.dp.udp_port, 9000);
	CU_ASSERT_EQUAL(g_run.cfg.dp.mtu, 9000);
	CU_ASSERT_EQUAL(g_run.cfg.port_id, 3);
	CU_ASSERT_EQUAL_FATAL(g_run.cfg.nb_poll_lcores, 4);
	CU_ASSERT_EQUAL(g_run.cfg.poll_lcores[0], 1);
	CU_ASSERT_EQUAL(g_run.cfg.poll_lcores[3], 5);
	CU_ASSERT_EQUAL(g_run.cfg.dp.tx_drain_us, 50);
	CU_ASSERT_EQUAL(g_run.cfg.dp.rx_desc, 512);
	CU_ASSERT_EQUAL(g_run.cfg.dp.tx_desc, 2048);
	CU_ASSERT_EQUAL(g_run.cfg.dp.mbufs_held, 0);
	ini_remove();

	/* An empty file changes nothing, and --ip still comes from the command line. */
	ini_write("");
	CU_ASSERT_EQUAL(PARSE("--config", g_ini_path, "--ip", TEST_IP), APP_CONFIG_RUN);
	CU_ASSERT_STRING_EQUAL(g_run.err, "");
	CU_ASSERT_TRUE(int_options_at_default(&g_run.cfg, NULL));
	CU_ASSERT_EQUAL(PARSE("--config", g_ini_path), -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has("--ip"));
	ini_remove();
}

static void test_config_every_key_bounds(void)
{
	for (unsigned int i = 0; i < NB_INT_OPTIONS; i++) {
		const struct int_option *opt = &g_int_options[i];
		char text[160];

		snprintf(text, sizeof(text), "[dataplane]\nip = %s\n%s = %llu\n", TEST_IP, opt->key,
			 (unsigned long long)opt->max);
		ini_write(text);
		CU_ASSERT_EQUAL(PARSE("--config", g_ini_path), APP_CONFIG_RUN);
		CU_ASSERT_EQUAL(field_get(&g_run.cfg, opt), opt->max);
		CU_ASSERT_TRUE(int_options_at_default(&g_run.cfg, opt));
		ini_remove();

		snprintf(text, sizeof(text), "[dataplane]\nip = %s\n%s = %llu\n", TEST_IP, opt->key,
			 (unsigned long long)opt->max + 1);
		ini_write(text);
		CU_ASSERT_EQUAL(PARSE("--config", g_ini_path), -EINVAL);
		CU_ASSERT_TRUE(err_is_one_line());
		CU_ASSERT_TRUE(err_has(opt->key));
		CU_ASSERT_TRUE(err_has(g_ini_path));
		CU_ASSERT_TRUE(err_has(opt->accepted));
		ini_remove();
	}
}

static void test_config_overridden_by_command_line(void)
{
	ini_write(g_full_ini);
	CU_ASSERT_EQUAL(PARSE("--mtu", "1400", "--config", g_ini_path), APP_CONFIG_RUN);
	CU_ASSERT_EQUAL(g_run.cfg.dp.mtu, 1400);
	CU_ASSERT_EQUAL(g_run.cfg.dp.udp_port, 9000); /* the file's keys not overridden stay */
	CU_ASSERT_EQUAL(g_run.cfg.port_id, 3);

	CU_ASSERT_EQUAL(PARSE("--config", g_ini_path, "--mtu", "1400"), APP_CONFIG_RUN);
	CU_ASSERT_EQUAL(g_run.cfg.dp.mtu, 1400);
	CU_ASSERT_EQUAL(g_run.cfg.dp.udp_port, 9000);

	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--poll-lcores", "7", "--config", g_ini_path), APP_CONFIG_RUN);
	CU_ASSERT_EQUAL(g_run.cfg.dp.ipv4_addr, TEST_IP_NET);
	CU_ASSERT_EQUAL(g_run.cfg.nb_poll_lcores, 1);
	CU_ASSERT_EQUAL(g_run.cfg.poll_lcores[0], 7);
	CU_ASSERT_EQUAL(g_run.cfg.dp.tx_drain_us, 50);

	/* A bad command-line value is still refused when the file has a good one. */
	CU_ASSERT_EQUAL(PARSE("--config", g_ini_path, "--mtu", "100"), -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has("--mtu '100'"));
	ini_remove();
}

static void test_config_unknown_key(void)
{
	ini_write("[dataplane]\nip = 10.0.0.1\nbogus_key = 1\n");
	CU_ASSERT_EQUAL(PARSE("--config", g_ini_path), -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has("bogus_key"));
	CU_ASSERT_TRUE(err_has(g_ini_path));
	ini_remove();

	/* The command-line spelling is not a key. */
	ini_write("[dataplane]\nip = 10.0.0.1\nudp-port = 9000\n");
	CU_ASSERT_EQUAL(PARSE("--config", g_ini_path), -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has("udp-port"));
	CU_ASSERT_TRUE(err_has(g_ini_path));
	ini_remove();
}

static void test_config_unknown_section(void)
{
	ini_write("[other]\nmtu = 1500\n");
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--config", g_ini_path), -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has("other"));
	CU_ASSERT_TRUE(err_has(g_ini_path));
	ini_remove();

	ini_write("[dataplane]\nip = 10.0.0.1\n[runtime]\nthreads = 2\n");
	CU_ASSERT_EQUAL(PARSE("--config", g_ini_path), -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has("runtime"));
	CU_ASSERT_TRUE(err_has(g_ini_path));
	ini_remove();
}

static void test_config_bad_value(void)
{
	ini_write("[dataplane]\nip = 10.0.0.1\nmtu = 70000\n");
	CU_ASSERT_EQUAL(PARSE("--config", g_ini_path), -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has("mtu"));
	CU_ASSERT_TRUE(err_has("'70000'"));
	CU_ASSERT_TRUE(err_has(g_ini_path));
	CU_ASSERT_TRUE(err_has("expected an integer in 576..9000"));
	/* A good command-line value does not excuse a bad one in the file. */
	CU_ASSERT_EQUAL(PARSE("--config", g_ini_path, "--mtu", "1500"), -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has("'70000'"));
	ini_remove();

	ini_write("[dataplane]\nip = 224.0.0.1\n");
	CU_ASSERT_EQUAL(PARSE("--config", g_ini_path), -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has("ip"));
	CU_ASSERT_TRUE(err_has("'224.0.0.1'"));
	CU_ASSERT_TRUE(err_has(g_ini_path));
	CU_ASSERT_TRUE(err_has("expected a unicast, non-loopback IPv4 address"));
	ini_remove();

	ini_write("[dataplane]\nip = 10.0.0.1\npoll_lcores = 1,1\n");
	CU_ASSERT_EQUAL(PARSE("--config", g_ini_path), -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has("poll_lcores"));
	CU_ASSERT_TRUE(err_has("'1,1'"));
	CU_ASSERT_TRUE(err_has(g_ini_path));
	CU_ASSERT_TRUE(err_has("expected a list of distinct lcore ids"));
	ini_remove();
}

static void test_config_missing_file(void)
{
	const char *path = "/nonexistent/bwtest/batchwire.ini";

	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--config", path), -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has("--config"));
	CU_ASSERT_TRUE(err_has(path));
	CU_ASSERT_TRUE(err_has("expected"));

	/* Not an INI file at all: a key outside any section. */
	ini_write("mtu = 1500\n");
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--config", g_ini_path), -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has("--config"));
	CU_ASSERT_TRUE(err_has(g_ini_path));
	ini_remove();
}

/*
 * Whether this process reads a file of mode 000 anyway (root, or CAP_DAC_OVERRIDE): then permissions
 * cannot make --config unreadable and test_config_mode_000 cannot run. \return NULL, or why.
 */
static const char *mode_000_cannot_run(void)
{
	char path[] = "/tmp/bwtest-app-mode-XXXXXX";
	int fd = mkstemp(path);
	bool readable;

	if (fd < 0)
		return NULL; /* let the case run and fail on the same temp file */
	readable = fchmod(fd, 0) == 0;
	close(fd);
	fd = readable ? open(path, O_RDONLY) : -1;
	readable = fd >= 0;
	if (fd >= 0)
		close(fd);
	unlink(path);
	if (!readable)
		return NULL;
	return geteuid() == 0 ? "running as root, which reads a file of mode 000: --config cannot be made unreadable"
			      : "this process reads a file of mode 000 (CAP_DAC_OVERRIDE): --config cannot be made unreadable";
}

/* Runs alone (its own meson test): where mode 000 does not stop this process, it reports SKIP. */
static void test_config_mode_000(void)
{
	ini_write(g_full_ini);
	CU_ASSERT_EQUAL_FATAL(chmod(g_ini_path, 0), 0);
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--config", g_ini_path), -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has("--config"));
	CU_ASSERT_TRUE(err_has(g_ini_path));
	ini_remove();
}

static void test_config_directory(void)
{
	/* A directory opens but cannot be read: it is no INI file, not an empty one. */
	char dir[] = "/tmp/bwtest-app-dir-XXXXXX";
	CU_ASSERT_FATAL(mkdtemp(dir) != NULL);
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--config", dir), -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has("--config"));
	CU_ASSERT_TRUE(err_has(dir));
	if (g_run.ret != -EINVAL)
		printf("\n  --config <a directory> -> %d (accepted as an empty file) ", g_run.ret);
	rmdir(dir);
}

static void test_config_parse_error_names_cause(void)
{
	/* A file that exists but does not parse must not be reported with whatever errno the caller left. */
	ini_write("mtu = 1500\n");
	errno = ENOENT;
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--config", g_ini_path), -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has(g_ini_path));
	CU_ASSERT_FALSE(err_has(strerror(ENOENT)));
	if (err_has(strerror(ENOENT)))
		printf("\n  stale errno in the message: %s", g_run.err);
	ini_remove();
}

static void test_config_repeated_section(void)
{
	/*
	 * rte_cfgfile keeps both sections where the parser would read only the first, so a key of the
	 * second would be dropped without a word: config_file_check refuses the file instead, naming the
	 * section and the line it appears again on.
	 */
	ini_write("[dataplane]\nip = 10.0.0.1\n[dataplane]\nmtu = 9000\n");
	CU_ASSERT_EQUAL(PARSE("--config", g_ini_path), -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has(g_ini_path));
	CU_ASSERT_TRUE(err_has("line 3"));
	CU_ASSERT_TRUE(err_has("section [dataplane] appears twice"));
	CU_ASSERT_TRUE(err_has("expected each section once"));
	if (g_run.ret != -EINVAL)
		printf("\n  repeated [dataplane] -> %d, mtu %u ", g_run.ret, g_run.cfg.dp.mtu);
	ini_remove();
}

static void test_config_line_without_value(void)
{
	/* "mtu 9000" (no '=') is a typo the operator must hear about, not a line to skip. */
	ini_write("[dataplane]\nip = 10.0.0.1\nmtu 9000\n");
	PARSE("--config", g_ini_path);
	CU_ASSERT_EQUAL(g_run.ret, -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has(g_ini_path));
	if (g_run.ret != -EINVAL)
		printf("\n  line 'mtu 9000' without '=' -> %d, mtu %u (the line was skipped) ", g_run.ret,
		       g_run.cfg.dp.mtu);
	ini_remove();
}

static void test_config_given_twice(void)
{
	char first[sizeof(g_ini_path)];

	ini_write("[dataplane]\nip = 10.0.0.1\nmtu = 1400\n");
	snprintf(first, sizeof(first), "%s", g_ini_path);
	ini_write("[dataplane]\nip = 10.0.0.1\nrx_desc = 256\n");
	/* The last --config is the one loaded, as for every other option. */
	CU_ASSERT_EQUAL(PARSE("--config", first, "--config", g_ini_path), APP_CONFIG_RUN);
	CU_ASSERT_STRING_EQUAL(g_run.cfg.config_path, g_ini_path);
	CU_ASSERT_EQUAL(g_run.cfg.dp.rx_desc, 256);
	CU_ASSERT_EQUAL(g_run.cfg.dp.mtu, DP_MTU_DEFAULT);
	unlink(first);
	ini_remove();
}

static void test_config_shipped_files(void)
{
	const char *dir_path = BW_SOURCE_ROOT "/configs";
	DIR *dir = opendir(dir_path);
	unsigned int parsed = 0;
	struct dirent *ent;

	/* configs/ is part of the source tree: without it, or without a file in it, nothing is checked */
	CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
	while ((ent = readdir(dir)) != NULL) {
		size_t len = strlen(ent->d_name);
		char path[4096];

		if (len < 4 || strcmp(ent->d_name + len - 4, ".ini") != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir_path, ent->d_name);
		CU_ASSERT_EQUAL(PARSE("--config", path), APP_CONFIG_RUN);
		CU_ASSERT_STRING_EQUAL(g_run.err, "");
		if (g_run.ret != APP_CONFIG_RUN)
			printf("\n  %s: %s", path, g_run.err);
		parsed++;
	}
	closedir(dir);
	CU_ASSERT(parsed > 0);
	printf("\n  (%u file(s) of %s parsed) ", parsed, dir_path);
}

/* ---- app_args_split ------------------------------------------------------------------------------ */

static void test_args_split(void)
{
	int eal_argc, app_argc;
	char **app_argv;

	char *with[] = {"batchwire", "-l", "0-1", "--no-huge", "--", "--ip", TEST_IP, NULL};
	app_args_split(7, with, &eal_argc, &app_argc, &app_argv);
	CU_ASSERT_EQUAL(eal_argc, 4);
	CU_ASSERT_EQUAL(app_argc, 3);
	CU_ASSERT_STRING_EQUAL(app_argv[0], "batchwire");
	CU_ASSERT_STRING_EQUAL(app_argv[1], "--ip");
	CU_ASSERT_STRING_EQUAL(app_argv[2], TEST_IP);
	CU_ASSERT_PTR_NULL(app_argv[app_argc]);
	CU_ASSERT_STRING_EQUAL(with[3], "--no-huge"); /* EAL's part untouched */

	char *without[] = {"batchwire", "-l", "0", "--no-pci", NULL};
	app_args_split(4, without, &eal_argc, &app_argc, &app_argv);
	CU_ASSERT_EQUAL(eal_argc, 4);
	CU_ASSERT_EQUAL(app_argc, 1);
	CU_ASSERT_STRING_EQUAL(app_argv[0], "batchwire");

	char *last[] = {"batchwire", "-l", "0", "--", NULL};
	app_args_split(4, last, &eal_argc, &app_argc, &app_argv);
	CU_ASSERT_EQUAL(eal_argc, 3);
	CU_ASSERT_EQUAL(app_argc, 1);
	CU_ASSERT_STRING_EQUAL(app_argv[0], "batchwire");
	CU_ASSERT_PTR_NULL(app_argv[1]);

	char *first[] = {"batchwire", "--", "--mtu", "1500", NULL};
	app_args_split(4, first, &eal_argc, &app_argc, &app_argv);
	CU_ASSERT_EQUAL(eal_argc, 1);
	CU_ASSERT_EQUAL(app_argc, 3);
	CU_ASSERT_STRING_EQUAL(app_argv[0], "batchwire");
	CU_ASSERT_STRING_EQUAL(app_argv[1], "--mtu");

	/* Only the first "--" splits; a second one belongs to the app. */
	char *twice[] = {"batchwire", "-l", "0", "--", "--ip", TEST_IP, "--", "x", NULL};
	app_args_split(8, twice, &eal_argc, &app_argc, &app_argv);
	CU_ASSERT_EQUAL(eal_argc, 3);
	CU_ASSERT_EQUAL(app_argc, 5);
	CU_ASSERT_STRING_EQUAL(app_argv[3], "--");

	char *alone[] = {"batchwire", NULL};
	app_args_split(1, alone, &eal_argc, &app_argc, &app_argv);
	CU_ASSERT_EQUAL(eal_argc, 1);
	CU_ASSERT_EQUAL(app_argc, 1);
	CU_ASSERT_STRING_EQUAL(app_argv[0], "batchwire");

	/* The split app part parses as the daemon parses it. */
	char *full[] = {"batchwire", "-l", "0", "--", "--ip", TEST_IP, "--mtu", "9000", NULL};
	app_args_split(8, full, &eal_argc, &app_argc, &app_argv);
	struct app_config cfg;
	FILE *sink = fopen("/dev/null", "w");
	CU_ASSERT_FATAL(sink != NULL);
	CU_ASSERT_EQUAL(app_config_parse(app_argc, app_argv, &cfg, sink, sink), APP_CONFIG_RUN);
	CU_ASSERT_EQUAL(cfg.dp.mtu, 9000);
	fclose(sink);
}

/* ---- batching of models: [model NAME] and --model-opt ---------------------------------------- */

static const struct bat_options *echo_batching(void)
{
	return &g_run.cfg.models[0].batching;
}

/* --allow and [dataplane] allow, and a model's allow key: the lists as parsed, refusals in one line. */
static void test_allowlists(void)
{
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP), APP_CONFIG_RUN);
	CU_ASSERT_EQUAL(g_run.cfg.dp.allow.count, 0); /* every source by default */
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--allow", "10.0.0.0/8,192.168.1.7", "--model-opt",
			      "echo.allow=10.1.0.0/16"), APP_CONFIG_RUN);
	CU_ASSERT_STRING_EQUAL(g_run.err, "");
	CU_ASSERT_EQUAL_FATAL(g_run.cfg.dp.allow.count, 2);
	CU_ASSERT_EQUAL(g_run.cfg.dp.allow.prefixes[1].addr, RTE_IPV4(192u, 168u, 1u, 7u));
	CU_ASSERT_EQUAL(g_run.cfg.dp.allow.prefixes[1].depth, 32);
	CU_ASSERT_EQUAL_FATAL(g_run.cfg.models[0].allow.count, 1);
	CU_ASSERT_EQUAL(g_run.cfg.models[0].allow.prefixes[0].depth, 16);
	CU_ASSERT_TRUE(int_options_at_default(&g_run.cfg, NULL));

	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--allow", "10.0.0.1/8"), -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has("invalid --allow '10.0.0.1/8'"));
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--model-opt", "echo.allow=10.0.0.0/33"), -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has("invalid allow '10.0.0.0/33': '10.0.0.0/33': the prefix length must be 0..32"));

	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--auth-keys", "/etc/batchwire/keys", "--model-opt", "echo.auth=required"),
			APP_CONFIG_RUN);
	CU_ASSERT_STRING_EQUAL(g_run.cfg.dp.auth.key_file, "/etc/batchwire/keys");
	CU_ASSERT_TRUE(g_run.cfg.models[0].auth_required);
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--model-opt", "echo.auth=maybe"), -EINVAL);
	CU_ASSERT_TRUE(err_has("invalid auth 'maybe': expected required or optional"));
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--auth-keys", ""), -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());

	/* the HTTP control server: on by default at Triton's 127.0.0.1:8000 */
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP), APP_CONFIG_RUN);
	CU_ASSERT_TRUE(g_run.cfg.http.enabled);
	CU_ASSERT_EQUAL(g_run.cfg.http.addr, htonl(INADDR_LOOPBACK));
	CU_ASSERT_EQUAL(g_run.cfg.http.port, 8000);
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--http", "off"), APP_CONFIG_RUN);
	CU_ASSERT_FALSE(g_run.cfg.http.enabled);
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--http", "10.1.2.3:9100"), APP_CONFIG_RUN);
	CU_ASSERT_TRUE(g_run.cfg.http.enabled);
	CU_ASSERT_EQUAL(g_run.cfg.http.port, 9100);
	CU_ASSERT_EQUAL(g_run.cfg.http.addr, htonl(0x0a010203));
	static const char *const bad_http[] = { "8000", ":8000", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:65536",
						"localhost:8000", "127.0.0.1:80x", "on" };
	for (unsigned int i = 0; i < sizeof(bad_http) / sizeof(bad_http[0]); i++) {
		CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--http", bad_http[i]), -EINVAL);
		CU_ASSERT_TRUE(err_has("expected ADDR:PORT (an IPv4 address) or 'off'"));
	}

	ini_write("[dataplane]\nip = " TEST_IP "\nallow = 172.16.0.0/12\n[model echo]\nallow = any\n");
	CU_ASSERT_EQUAL(PARSE("--config", g_ini_path), APP_CONFIG_RUN);
	CU_ASSERT_STRING_EQUAL(g_run.err, "");
	CU_ASSERT_EQUAL(g_run.cfg.dp.allow.count, 1);
	CU_ASSERT_EQUAL(g_run.cfg.dp.allow.prefixes[0].addr, RTE_IPV4(172u, 16u, 0u, 0u));
	CU_ASSERT_EQUAL(g_run.cfg.models[0].allow.count, 0);
	ini_remove();
}

static void test_model_opt_applied(void)
{
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP), APP_CONFIG_RUN);
	CU_ASSERT_EQUAL(g_run.cfg.nb_models, 1);
	CU_ASSERT_STRING_EQUAL(g_run.cfg.models[0].name, "echo");
	CU_ASSERT_EQUAL(echo_batching()->max_batch_size, 32); /* the defaults of docs/batching.md */
	CU_ASSERT_EQUAL(echo_batching()->batch_timeout_micros, 1000);
	CU_ASSERT_EQUAL(echo_batching()->max_execution_batch_size, 0);

	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--model-opt", "echo.max_batch_size=8", "--model-opt",
			      "echo.allowed_batch_sizes=2,4,8", "--model-opt=echo.batch_timeout_micros=50"),
			APP_CONFIG_RUN);
	CU_ASSERT_STRING_EQUAL(g_run.err, "");
	CU_ASSERT_EQUAL(echo_batching()->max_batch_size, 8);
	CU_ASSERT_EQUAL(echo_batching()->num_allowed_batch_sizes, 3);
	CU_ASSERT_EQUAL(echo_batching()->allowed_batch_sizes[2], 8);
	CU_ASSERT_EQUAL(echo_batching()->batch_timeout_micros, 50);
	/* adaptive mode is finalized at parse time: splitting on, execution size derived */
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--model-opt", "echo.num_batch_threads=0"), APP_CONFIG_RUN);
	CU_ASSERT_TRUE(echo_batching()->enable_large_batch_splitting);
	CU_ASSERT_EQUAL(echo_batching()->max_execution_batch_size, 32);
}

static void test_model_opt_rejected(void)
{
	static const struct {
		const char *arg;
		const char *says;
	} cases[] = {
		{"echo", "expected MODEL.OPTION=VALUE"},
		{"echo.max_batch_size", "expected MODEL.OPTION=VALUE"},
		{".max_batch_size=8", "expected MODEL.OPTION=VALUE"},
		{"echo.=8", "expected MODEL.OPTION=VALUE"},
		{"resnet.max_batch_size=8", "model 'resnet' has no path"},
		{"bad/name.max_batch_size=8", "invalid model name 'bad/name'"},
		{"echo.path=x.onnx", "'echo' is the built-in model"},
		{"echo.workers=1", "model 'echo' is built in"},
		{"echo.precision=bf16", "expected no device, workers, slots, precision, chunk_rows or version_policy for it"},
		{"echo.chunk_rows=1", "expected no device, workers, slots, precision, chunk_rows or version_policy for it"},
		{"echo.version_policy=specific 2", "or version_policy for it"},
		{"echo.version_policy=latest 2", "or version_policy for it"},
		{"mlp.version_policy=latest 0", "invalid version_policy 'latest 0': expected latest N with N in 1..4"},
		{"mlp.version_policy=latest 5", "invalid version_policy 'latest 5': expected latest N with N in 1..4"},
		{"mlp.version_policy=latest 2x", "invalid version_policy 'latest 2x'"},
		{"mlp.version_policy=specific 0", "expected latest, latest N or specific N"},
		{"mlp.version_policy=newest", "invalid version_policy 'newest'"},
		{"mlp.version_policy=specific 70000", "invalid version_policy 'specific 70000'"},
		{"mlp.chunk_rows=0", "invalid chunk_rows '0': expected auto, off or an integer in 1..1024"},
		{"mlp.chunk_rows=1025", "invalid chunk_rows '1025'"},
		{"mlp.chunk_rows=some", "invalid chunk_rows 'some'"},
		{"mlp.path=", "expected an .onnx file"},
		{"mlp.device=tpu", "invalid device 'tpu': expected cpu or gpu"},
		{"mlp.workers=3,3", "invalid workers '3,3'"},
		{"mlp.workers=", "invalid workers ''"},
		{"mlp.slots=0", "invalid slots '0': expected an integer in 1..64"},
		{"mlp.slots=65", "invalid slots '65'"},
		{"echo.bogus=1", "unknown batching option 'bogus'"},
		{"echo.max_batch_size=0", "invalid max_batch_size '0': expected an integer in 1..1024"},
		{"echo.allowed_batch_sizes=8,4", "strictly increasing"},
		{"echo.allowed_batch_sizes=8,16", "must equal max_batch_size"},
		{"echo.dispatch_when_idle=maybe", "expected true or false"},
	};

	for (unsigned int i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--model-opt", cases[i].arg), -EINVAL);
		CU_ASSERT_TRUE(err_is_one_line());
		CU_ASSERT_TRUE(err_has(cases[i].says));
		if (!err_has(cases[i].says))
			printf("\n  --model-opt '%s': %s", cases[i].arg, g_run.err);
	}
}

static void test_model_section(void)
{
	ini_write("[dataplane]\nip = 10.0.0.1\n[model echo]\nmax_batch_size = 16\nallowed_batch_sizes = 4,16\n"
		  "priority_levels = 3\n");
	CU_ASSERT_EQUAL(PARSE("--config", g_ini_path), APP_CONFIG_RUN);
	CU_ASSERT_EQUAL(echo_batching()->max_batch_size, 16);
	CU_ASSERT_EQUAL(echo_batching()->priority_levels, 3);
	/* the command line overrides the file, before or after --config */
	CU_ASSERT_EQUAL(PARSE("--model-opt", "echo.priority_levels=2", "--config", g_ini_path), APP_CONFIG_RUN);
	CU_ASSERT_EQUAL(echo_batching()->priority_levels, 2);
	ini_remove();

	ini_write("[dataplane]\nip = 10.0.0.1\n[model echo]\nmax_batch_size = 2000\n");
	CU_ASSERT_EQUAL(PARSE("--config", g_ini_path), -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has("invalid max_batch_size '2000'"));
	CU_ASSERT_TRUE(err_has("[model echo]"));
	CU_ASSERT_TRUE(err_has(g_ini_path));
	ini_remove();

	ini_write("[dataplane]\nip = 10.0.0.1\n[model resnet]\nmax_batch_size = 8\n");
	CU_ASSERT_EQUAL(PARSE("--config", g_ini_path), -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has("model 'resnet' has no path"));
	ini_remove();

	ini_write("[dataplane]\nip = 10.0.0.1\n[model echo]\nmax_batch_size = 8\n[model echo]\nmax_batch_size = 4\n");
	CU_ASSERT_EQUAL(PARSE("--config", g_ini_path), -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has("appears twice"));
	ini_remove();

	/* rules across options are checked once everything is known, naming the model */
	ini_write("[dataplane]\nip = 10.0.0.1\n[model echo]\nallowed_batch_sizes = 4,8\n");
	CU_ASSERT_EQUAL(PARSE("--config", g_ini_path), -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has("model 'echo'"));
	CU_ASSERT_TRUE(err_has("allowed_batch_sizes"));
	CU_ASSERT_EQUAL(PARSE("--config", g_ini_path, "--model-opt", "echo.max_batch_size=8"), APP_CONFIG_RUN);
	ini_remove();
}

static const struct app_model_config *model_named(const char *name)
{
	for (unsigned int i = 0; i < g_run.cfg.nb_models; i++) {
		if (strcmp(g_run.cfg.models[i].name, name) == 0)
			return &g_run.cfg.models[i];
	}
	return NULL;
}

/* device = gpu: the module and index, what a GPU model needs, and what it refuses. */
static void test_gpu_models(void)
{
	static const struct {
		const char *opt[3];
		const char *says;
	} refused[] = {
		{{"mlp.max_batch_size=8", "mlp.num_batch_threads=2", "mlp.batch_timeout_micros=10"},
		 "device = gpu needs allowed_batch_sizes"},
		{{"mlp.allowed_batch_sizes=1,2,4,8", "mlp.workers=1", "mlp.num_batch_threads=2"},
		 "device = gpu runs on the polling lcores that batch it"},
		{{"mlp.allowed_batch_sizes=1,2,4,8", "mlp.slots=1", "mlp.num_batch_threads=2"},
		 "slots 1 is below its in-flight limit 2"},
		{{"mlp.allowed_batch_sizes=1,2,4,8", "mlp.num_batch_threads=0", "mlp.max_inflight_batches=100"},
		 "its in-flight limit is 100"},
		{{"mlp.allowed_batch_sizes=1,2", "mlp.precision=fp8", "mlp.num_batch_threads=1"},
		 "invalid precision 'fp8': expected fp32, bf16 (device cpu) or fp16 (device gpu)"},
		{{"mlp.allowed_batch_sizes=1,8", "mlp.precision=bf16", "mlp.num_batch_threads=1"},
		 "precision bf16 is the CPU's: device gpu takes fp32 or fp16"},
		{{"mlp.allowed_batch_sizes=1,8", "mlp.chunk_rows=1", "mlp.num_batch_threads=1"},
		 "chunk_rows is the CPU runtime's: device gpu runs each batch in one graph"},
		{{"mlp.allowed_batch_sizes=1,2", "mlp.launch_mode=ring", "mlp.num_batch_threads=1"},
		 "invalid launch_mode 'ring': expected graph or doorbell"},
		{{"mlp.allowed_batch_sizes=1,2", "mlp.layout=chwn", "mlp.num_batch_threads=1"},
		 "invalid layout 'chwn': expected auto, nchw or nhwc"},
	};
	const struct app_model_config *m;

	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--gpu-module", "fake", "--gpu-index", "2", "--model", "mlp=/m/mlp.onnx",
			      "--model-opt", "mlp.device=gpu", "--model-opt", "mlp.max_batch_size=8",
			      "--model-opt", "mlp.allowed_batch_sizes=1,4,8", "--model-opt", "mlp.num_batch_threads=3"),
			APP_CONFIG_RUN);
	CU_ASSERT_STRING_EQUAL(g_run.cfg.gpu_module, "fake");
	CU_ASSERT_EQUAL(g_run.cfg.gpu_index, 2);
	m = model_named("mlp");
	CU_ASSERT_PTR_NOT_NULL_FATAL(m);
	CU_ASSERT_EQUAL(m->device, APP_DEVICE_GPU);
	CU_ASSERT_EQUAL(m->nb_workers, 0);
	CU_ASSERT_EQUAL(m->slots, 0); /* derived when the service starts: the in-flight limit */
	CU_ASSERT_EQUAL(app_model_inflight_max(m), 3);
	CU_ASSERT_EQUAL(m->precision, GPU_PRECISION_FP32);
	CU_ASSERT_EQUAL(m->launch_mode, GPU_LAUNCH_GRAPH);
	/* precision and launch mode, from the line and from the file */
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--model", "mlp=/m/mlp.onnx", "--model-opt", "mlp.device=gpu",
			      "--model-opt", "mlp.max_batch_size=4", "--model-opt", "mlp.allowed_batch_sizes=1,4",
			      "--model-opt", "mlp.precision=fp16",
			      "--model-opt", "mlp.launch_mode=doorbell"), APP_CONFIG_RUN);
	m = model_named("mlp");
	CU_ASSERT_PTR_NOT_NULL_FATAL(m);
	CU_ASSERT_EQUAL(m->precision, GPU_PRECISION_FP16);
	CU_ASSERT_EQUAL(m->launch_mode, GPU_LAUNCH_DOORBELL);
	ini_write("[dataplane]\nip = 10.0.0.1\n[model mlp]\npath = /m/mlp.onnx\ndevice = gpu\n"
		  "max_batch_size = 4\nallowed_batch_sizes = 1,4\nprecision = fp16\nlaunch_mode = graph\n"
		  "layout = nchw\n");
	CU_ASSERT_EQUAL(PARSE("--config", g_ini_path), APP_CONFIG_RUN);
	m = model_named("mlp");
	CU_ASSERT_PTR_NOT_NULL_FATAL(m);
	CU_ASSERT_EQUAL(m->precision, GPU_PRECISION_FP16);
	CU_ASSERT_EQUAL(m->launch_mode, GPU_LAUNCH_GRAPH);
	CU_ASSERT_EQUAL(m->layout, GPU_LAYOUT_NCHW);
	ini_remove();
	/* on a CPU model they would be ignored: refused instead */
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--model", "mlp=/m/mlp.onnx", "--model-opt", "mlp.precision=fp16"),
			-EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has("precision fp16 is the GPU's: device cpu takes fp32 or bf16"));
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--model", "mlp=/m/mlp.onnx", "--model-opt", "mlp.layout=nhwc"),
			-EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has("layout and launch_mode are the GPU's: expected device = gpu"));
	/* a CPU model's precision: fp32 unless set, bf16 from the line or the file (whether this CPU runs
	 * it is the model load's question: engine_cpu.c) */
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--model", "mlp=/m/mlp.onnx"), APP_CONFIG_RUN);
	CU_ASSERT_EQUAL(model_named("mlp")->cpu_precision, RT_PRECISION_FP32);
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--model", "mlp=/m/mlp.onnx", "--model-opt", "mlp.precision=bf16"),
			APP_CONFIG_RUN);
	CU_ASSERT_EQUAL(model_named("mlp")->cpu_precision, RT_PRECISION_BF16);
	/* chunk_rows: auto unless set; off; a row count */
	CU_ASSERT_EQUAL(model_named("mlp")->chunk_rows, 0);
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--model", "mlp=/m/mlp.onnx", "--model-opt", "mlp.chunk_rows=off"),
			APP_CONFIG_RUN);
	CU_ASSERT_EQUAL(model_named("mlp")->chunk_rows, -1);
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--model", "mlp=/m/mlp.onnx", "--model-opt", "mlp.chunk_rows=4"),
			APP_CONFIG_RUN);
	CU_ASSERT_EQUAL(model_named("mlp")->chunk_rows, 4);
	ini_write("[dataplane]\nip = 10.0.0.1\n[model mlp]\npath = /m/mlp.onnx\nchunk_rows = auto\n");
	CU_ASSERT_EQUAL(PARSE("--config", g_ini_path), APP_CONFIG_RUN);
	CU_ASSERT_EQUAL(model_named("mlp")->chunk_rows, 0);
	ini_remove();
	ini_write("[dataplane]\nip = 10.0.0.1\n[model mlp]\npath = /m/mlp.onnx\nprecision = fp32\n");
	CU_ASSERT_EQUAL(PARSE("--config", g_ini_path), APP_CONFIG_RUN);
	CU_ASSERT_EQUAL(model_named("mlp")->cpu_precision, RT_PRECISION_FP32);
	ini_remove();
	/* the module in the file, the default otherwise */
	ini_write("[dataplane]\nip = 10.0.0.1\ngpu_module = /opt/bw/libbwgpu.so\n");
	CU_ASSERT_EQUAL(PARSE("--config", g_ini_path), APP_CONFIG_RUN);
	CU_ASSERT_STRING_EQUAL(g_run.cfg.gpu_module, "/opt/bw/libbwgpu.so");
	ini_remove();
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP), APP_CONFIG_RUN);
	CU_ASSERT_STRING_EQUAL(g_run.cfg.gpu_module, "");
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--gpu-module", ""), -EINVAL);
	CU_ASSERT_TRUE(err_has("invalid --gpu-module '': expected a file path"));

	for (unsigned int i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--model", "mlp=/m/mlp.onnx", "--model-opt", "mlp.device=gpu",
				      "--model-opt", "mlp.max_batch_size=8", "--model-opt", refused[i].opt[0],
				      "--model-opt", refused[i].opt[1], "--model-opt", refused[i].opt[2]),
				-EINVAL);
		CU_ASSERT_TRUE(err_is_one_line());
		CU_ASSERT_TRUE(err_has(refused[i].says));
		if (!err_has(refused[i].says))
			printf("\n  gpu case %u: %s", i, g_run.err);
	}
}

static void test_onnx_models(void)
{
	const struct app_model_config *m;
	char expect[4200];

	/* --model NAME=PATH, then its options; echo is always there */
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--model", "mlp=/m/mlp.onnx", "--model-opt", "mlp.workers=2-3",
			      "--model-opt", "mlp.max_batch_size=8", "--model-opt", "mlp.slots=4"), APP_CONFIG_RUN);
	CU_ASSERT_EQUAL(g_run.cfg.nb_models, 2);
	CU_ASSERT_PTR_NOT_NULL(model_named("echo"));
	m = model_named("mlp");
	CU_ASSERT_PTR_NOT_NULL_FATAL(m);
	CU_ASSERT_STRING_EQUAL(m->path, "/m/mlp.onnx");
	CU_ASSERT_EQUAL(m->device, APP_DEVICE_CPU);
	CU_ASSERT_EQUAL(m->nb_workers, 2);
	CU_ASSERT_EQUAL(m->workers[1], 3);
	CU_ASSERT_EQUAL(m->slots, 4);
	CU_ASSERT_EQUAL(m->batching.max_batch_size, 8);
	CU_ASSERT_FALSE(app_model_is_echo(m));

	/* a relative path in a file is the file's directory's; on the command line, the working directory's */
	ini_write("[dataplane]\nip = 10.0.0.1\n[model cnn]\npath = models/cnn.onnx\ndevice = cpu\nworkers = 1\n"
		  "max_batch_size = 4\n[model mlp]\npath = /abs/mlp.onnx\n");
	CU_ASSERT_EQUAL(PARSE("--config", g_ini_path, "--model", "bert=rel/bert.onnx"), APP_CONFIG_RUN);
	CU_ASSERT_EQUAL(g_run.cfg.nb_models, 4);
	m = model_named("cnn");
	CU_ASSERT_PTR_NOT_NULL_FATAL(m);
	snprintf(expect, sizeof(expect), "%.*smodels/cnn.onnx", (int)(strrchr(g_ini_path, '/') - g_ini_path + 1),
		 g_ini_path);
	CU_ASSERT_STRING_EQUAL(m->path, expect);
	CU_ASSERT_EQUAL(m->batching.max_batch_size, 4);
	CU_ASSERT_STRING_EQUAL(model_named("mlp")->path, "/abs/mlp.onnx");
	CU_ASSERT_STRING_EQUAL(model_named("bert")->path, "rel/bert.onnx");
	/* the command line overrides a model's file keys */
	CU_ASSERT_EQUAL(PARSE("--config", g_ini_path, "--model-opt", "cnn.path=/x/cnn.onnx"), APP_CONFIG_RUN);
	CU_ASSERT_STRING_EQUAL(model_named("cnn")->path, "/x/cnn.onnx");
	ini_remove();

	ini_write("[dataplane]\nip = 10.0.0.1\n[model cnn]\npath = cnn.onnx\nworkers = 1-\n");
	CU_ASSERT_EQUAL(PARSE("--config", g_ini_path), -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has("invalid workers '1-'"));
	CU_ASSERT_TRUE(err_has("[model cnn]"));
	ini_remove();

	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--model", "mlp"), -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has("expected NAME=FILE.onnx"));
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--model", "=x.onnx"), -EINVAL);
	CU_ASSERT_TRUE(err_has("expected NAME=FILE.onnx"));
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--model", "echo=x.onnx"), -EINVAL);
	CU_ASSERT_TRUE(err_has("'echo' is the built-in model"));

	/* at most APP_MODELS_MAX models, echo included */
	const char *many[2 + 2 * APP_MODELS_MAX];
	char names[APP_MODELS_MAX][32];
	int n = 0;
	many[n++] = "--ip";
	many[n++] = TEST_IP;
	for (int i = 0; i < APP_MODELS_MAX; i++) {
		snprintf(names[i], sizeof(names[i]), "m%d=m%d.onnx", i, i);
		many[n++] = "--model";
		many[n++] = names[i];
	}
	CU_ASSERT_EQUAL(parse_args(many, n), -EINVAL);
	CU_ASSERT_TRUE(err_has("expected at most 16 models"));
	CU_ASSERT_EQUAL(parse_args(many, n - 2), APP_CONFIG_RUN);

	/* latest N: N versions served, each a model of its own in the count; the last key given wins */
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--model", "mlp=/m/mlp", "--model-opt", "mlp.version_policy=latest 3"),
			APP_CONFIG_RUN);
	CU_ASSERT_EQUAL(model_named("mlp")->version_latest, 3);
	CU_ASSERT_EQUAL(model_named("mlp")->version_specific, 0);
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--model", "mlp=/m/mlp", "--model-opt", "mlp.version_policy=latest 3",
			      "--model-opt", "mlp.version_policy=specific 2"), APP_CONFIG_RUN);
	CU_ASSERT_EQUAL(model_named("mlp")->version_latest, 0);
	CU_ASSERT_EQUAL(model_named("mlp")->version_specific, 2);
	CU_ASSERT_EQUAL(PARSE("--ip", TEST_IP, "--model", "mlp=/m/mlp", "--model-opt", "mlp.version_policy=specific 2",
			      "--model-opt", "mlp.version_policy=latest"), APP_CONFIG_RUN);
	CU_ASSERT_EQUAL(model_named("mlp")->version_specific, 0);
	/* echo and m0..m11 are 13 models; 4 versions of m12 make 17, 3 make 16 */
	n = 2 + 2 * 13;
	many[n++] = "--model-opt";
	many[n++] = "m12.version_policy=latest 4";
	CU_ASSERT_EQUAL(parse_args(many, n), -EINVAL);
	CU_ASSERT_TRUE(err_is_one_line());
	CU_ASSERT_TRUE(err_has("17 models with their versions served (version_policy latest N counts N): expected at "
			       "most 16"));
	many[n - 1] = "m12.version_policy=latest 3";
	CU_ASSERT_EQUAL(parse_args(many, n), APP_CONFIG_RUN);
}

int main(int argc, char **argv)
{
	static CU_TestInfo tests[] = {
		{"defaults when absent", test_defaults},
		{"integer options at min, max, typical", test_int_options_accepted},
		{"--ip accepted, network order", test_ip_accepted},
		{"--allow, --auth-keys, --http, a model's allow and auth: parsed, refused in one line", test_allowlists},
		{"--poll-lcores accepted", test_poll_lcores_accepted},
		{"integer options rejected", test_int_options_rejected},
		{"--ip rejected", test_ip_rejected},
		{"--poll-lcores rejected", test_poll_lcores_rejected},
		{"missing --ip", test_missing_ip},
		{"unknown option", test_unknown_option},
		{"option missing its value", test_missing_value},
		{"stray positional argument", test_stray_argument},
		{"--help and --version", test_help_and_version},
		{"message limits: defaults, derived room, refusals", test_message_limits},
		{"--config keys applied", test_config_applied},
		{"--config every key at max and max+1", test_config_every_key_bounds},
		{"--config overridden by the command line", test_config_overridden_by_command_line},
		{"--config unknown key", test_config_unknown_key},
		{"--config unknown section", test_config_unknown_section},
		{"--config bad value", test_config_bad_value},
		{"--config missing or unparsable file", test_config_missing_file},
		{"--config a directory", test_config_directory},
		{"--config parse error ignores stale errno", test_config_parse_error_names_cause},
		{"--config repeated [dataplane] section", test_config_repeated_section},
		{"--config line without '='", test_config_line_without_value},
		{"--config given twice", test_config_given_twice},
		{"configs/*.ini of the source tree", test_config_shipped_files},
		{"app_args_split", test_args_split},
		{"--model-opt applied, defaults, adaptive finalized", test_model_opt_applied},
		{"--model-opt rejected", test_model_opt_rejected},
		{"[model NAME] sections", test_model_section},
		{"ONNX models: --model, path, device, workers, slots", test_onnx_models},
		{"GPU models: --gpu-module, --gpu-index, allowed sizes, no workers, slots", test_gpu_models},
		CU_TEST_INFO_NULL,
	};
	static CU_SuiteInfo suites[] = {
		{.pName = "app_config", .pTests = tests},
		CU_SUITE_INFO_NULL,
	};
	static const struct bw_cunit_alone alone[] = {
		{.arg = "mode-000", .name = "--config a file of mode 000", .test = test_config_mode_000,
		 .cannot_run = mode_000_cannot_run},
		{.arg = NULL},
	};
	int status = bw_cunit_main(argc, argv, suites, alone);

	run_free();
	return status;
}
