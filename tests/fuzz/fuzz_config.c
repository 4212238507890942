/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Fuzz target for batchwire's parameters: app_config_parse (app/config.h), the app arguments after
 * EAL's `--` and the INI file --config names (read by its own line check, then rte_cfgfile), with
 * what they reach: the option table's parsers, the allowlists (dataplane/allow.c), the batching
 * options (batching/options.c) and the dataplane's final checks (dataplane/pool.c).
 *
 * The first byte picks a mode (its value modulo 3; the seeds use the digits '0', '1' and '2'):
 *
 *     0  the rest is the INI file: argv is {"batchwire", "--config", FILE}
 *     1  the rest, split at NUL bytes, is the app arguments: argv is {"batchwire", piece...}
 *     2  the rest up to the first NUL is the INI file, the pieces after it arguments that follow
 *        {"batchwire", "--config", FILE} (the command line overrides the file)
 *
 * FILE is c.ini in a directory private to the process (fuzz.h; removed at exit), rewritten
 * for every input. Messages (and rte_cfgfile's log) go to one unbuffered stream, opened once, that
 * counts the bytes and drops them.
 *
 * What must hold (abort() otherwise; the sanitizers and the leak checker watch the rest): the
 * result is APP_CONFIG_RUN, APP_CONFIG_HELP or -EINVAL, and an error printed at least one line, with
 * its newline; a configuration that parses has an address, the echo model first, 1 to
 * APP_MODELS_MAX models with distinct, terminated names, every model but echo a path, lcore ids in
 * range, and the dataplane parameters in the ranges the option table promises; parsing the same
 * arguments again gives the same result and the same configuration, byte for byte.
 *
 * Build and runs: docs/fuzzing.md.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_log.h>

#include "config.h"
#include "fuzz.h"

#define F_ARGS_MAX 64

static char *g_path; /* an argument: getopt takes char *, and does not write it */
static FILE *g_sink;       /* out, err and rte_log's stream */
static uint64_t g_printed; /* bytes written to g_sink */
static char g_last;        /* the last of them */
static bool g_verbose;     /* BW_FUZZ_VERBOSE set: what the parser prints goes to stderr as well */
static struct app_config g_cfg, g_again;

static ssize_t sink_write(void *cookie, const char *buf, size_t size)
{
	(void)cookie;
	if (g_verbose)
		fwrite(buf, 1, size, stderr);
	if (size > 0) {
		g_printed += size;
		g_last = buf[size - 1];
	}
	return (ssize_t)size;
}

static void sink_close(void)
{
	rte_openlog_stream(NULL);
	fclose(g_sink);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	g_path = fuzz_file_make("config", "c.ini");
	g_verbose = getenv("BW_FUZZ_VERBOSE") != NULL;
	g_sink = fopencookie(NULL, "w", (cookie_io_functions_t){ .write = sink_write });
	if (g_sink == NULL || setvbuf(g_sink, NULL, _IONBF, 0) != 0) {
		perror("fuzz_config: fopencookie");
		exit(1);
	}
	/* rte_cfgfile logs what it refuses; no EAL is needed for that or for parsing */
	rte_openlog_stream(g_sink);
	atexit(sink_close);
	return 0;
}

static bool name_ok(const char *name)
{
	size_t len = strnlen(name, APP_MODEL_NAME_MAX);

	return len > 0 && len < APP_MODEL_NAME_MAX;
}

static void parsed_check(const struct app_config *c)
{
	CHECK(c->have_ip && c->dp.ipv4_addr != 0);
	CHECK(c->nb_models >= 1 && c->nb_models <= APP_MODELS_MAX);
	CHECK(strcmp(c->models[0].name, "echo") == 0 && app_model_is_echo(&c->models[0]));
	for (unsigned int i = 0; i < c->nb_models; i++) {
		const struct app_model_config *m = &c->models[i];

		CHECK(name_ok(m->name));
		CHECK(memchr(m->path, '\0', sizeof(m->path)) != NULL);
		CHECK(i == 0 || !app_model_is_echo(m));
		for (unsigned int k = 0; k < i; k++)
			CHECK(strcmp(c->models[k].name, m->name) != 0);
		CHECK(m->nb_workers <= APP_MODEL_WORKERS_MAX);
		for (unsigned int w = 0; w < m->nb_workers; w++)
			CHECK(m->workers[w] <= APP_LCORE_ID_MAX);
		CHECK(m->slots <= APP_MODEL_SLOTS_MAX);
		CHECK(m->device == APP_DEVICE_CPU || m->device == APP_DEVICE_GPU);
		CHECK(m->max_request_bytes == 0 || (m->max_request_bytes >= 1024 && m->max_request_bytes <= (1u << 30)));
	}
	CHECK(c->nb_poll_lcores <= DP_MAX_POLL_LCORES);
	for (unsigned int i = 0; i < c->nb_poll_lcores; i++)
		CHECK(c->poll_lcores[i] <= APP_LCORE_ID_MAX);
	CHECK(c->dp.udp_port >= 1);
	CHECK(c->dp.mtu >= DP_MTU_MIN && c->dp.mtu <= DP_MTU_MAX);
	CHECK(c->dp.rx_desc >= 64 && c->dp.rx_desc <= DP_DESC_MAX);
	CHECK(c->dp.tx_desc >= 64 && c->dp.tx_desc <= DP_DESC_MAX);
	CHECK(c->dp.tx_drain_us >= 1 && c->dp.tx_drain_us <= DP_TX_DRAIN_US_MAX);
	CHECK(c->dp.msg_max >= 1024 && c->dp.msg_max <= (1u << 30));
	CHECK(c->dp.reasm_msgs >= 1 && c->dp.reasm_msgs <= DP_REASM_MSGS_MAX);
	CHECK(c->dp.reasm_mbufs >= dp_msg_segments(&c->dp, c->dp.msg_max));
	CHECK(c->port_id < RTE_MAX_ETHPORTS);
	CHECK(c->gpu_index <= APP_GPU_INDEX_MAX);
	CHECK(memchr(c->config_path, '\0', sizeof(c->config_path)) != NULL);
	CHECK(memchr(c->gpu_module, '\0', sizeof(c->gpu_module)) != NULL);
}

/* app_config_parse, and what it printed: at least a line on error. */
static int parse(int argc, char **argv, struct app_config *cfg)
{
	uint64_t before = g_printed;
	int rc = app_config_parse(argc, argv, cfg, g_sink, g_sink);

	CHECK(rc == APP_CONFIG_RUN || rc == APP_CONFIG_HELP || rc == -EINVAL);
	CHECK(rc != -EINVAL || (g_printed > before && g_last == '\n'));
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *argv[F_ARGS_MAX + 4], *again[F_ARGS_MAX + 4];
	char *text = NULL;
	unsigned int mode;
	int argc = 0, rc;
	size_t at = 1;

	if (size < 1)
		return 0;
	mode = data[0] % 3u;
	argv[argc++] = "batchwire";
	if (mode != 1) {
		size_t end = size;

		if (mode == 2) {
			const uint8_t *nul = memchr(data + 1, '\0', size - 1);

			end = nul != NULL ? (size_t)(nul - data) : size;
		}
		fuzz_file_write(data + 1, end - 1);
		argv[argc++] = "--config";
		argv[argc++] = g_path;
		at = end < size ? end + 1 : size;
	}
	if (mode != 0 && at < size) {
		/* a terminated copy, cut into pieces at its NUL bytes */
		text = malloc(size - at + 1);
		CHECK(text != NULL);
		memcpy(text, data + at, size - at);
		text[size - at] = '\0';
		for (size_t p = 0; p <= size - at && argc < F_ARGS_MAX; p += strlen(text + p) + 1)
			argv[argc++] = text + p;
	}
	argv[argc] = NULL;
	/* getopt permutes argv: the second parse gets its own copy, in the order given */
	memcpy(again, argv, sizeof(argv[0]) * (size_t)(argc + 1));

	rc = parse(argc, argv, &g_cfg);
	if (g_verbose)
		fprintf(stderr, "fuzz_config: mode %u, %d arguments: %s\n", mode, argc,
			rc == APP_CONFIG_RUN ? "run" : rc == APP_CONFIG_HELP ? "help" : "refused");
	if (rc == APP_CONFIG_RUN)
		parsed_check(&g_cfg);
	CHECK(parse(argc, again, &g_again) == rc);
	if (rc == APP_CONFIG_RUN)
		CHECK(memcmp(&g_cfg, &g_again, sizeof(g_cfg)) == 0);
	free(text);
	return 0;
}
