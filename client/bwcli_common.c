/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What bwcli's commands share before they send anything: strict option values and their one-line
 * errors, the connection, --model resolved to an id, and the generated request data.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <batchwire/inputs.h>

#include "bwcli.h"

/* One line on stderr naming what was wrong; the caller exits with EXIT_USAGE. */
void usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s%s%s: ", PROG, cmd != NULL ? " " : "", cmd != NULL ? cmd : "");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* Strict unsigned decimal: no sign, no spaces, no trailing junk, within [min, max]. */
bool parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (s[0] < '0' || s[0] > '9')
		return false;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < min || v > max)
		return false;
	*out = v;
	return true;
}

bool opt_u64(const char *cmd, const char *opt, const char *val, uint64_t min, uint64_t max,
	     uint64_t *out)
{
	if (parse_u64(val, min, max, out))
		return true;
	usage_error(cmd, "%s: invalid value '%s' (expected an integer %" PRIu64 "..%" PRIu64 ")",
		    opt, val, min, max);
	return false;
}

/* Strict finite number >= 0 ("1e-4", "0.5"): no sign, no spaces, no trailing junk, no inf or nan. */
bool opt_nonneg_double(const char *cmd, const char *opt, const char *val, double *out)
{
	double v;
	char *end;

	if ((val[0] >= '0' && val[0] <= '9') || (val[0] == '.' && val[1] >= '0' && val[1] <= '9')) {
		errno = 0;
		v = strtod(val, &end);
		if (errno == 0 && *end == '\0' && isfinite(v)) {
			*out = v;
			return true;
		}
	}
	usage_error(cmd, "%s: invalid value '%s' (expected a number >= 0, e.g. 1e-4)", opt, val);
	return false;
}

static bool is_number(const char *s)
{
	if (*s == '\0')
		return false;
	for (; *s != '\0'; s++)
		if (*s < '0' || *s > '9')
			return false;
	return true;
}

/* Several hosts ("a,b,c" or "@FILE"): a pool, and its first healthy host's connection for the
 * commands' one-off calls (MODEL_INFO, PING). */
static int open_pool(struct cli *cli)
{
	char err[256];

	cli->pool = bwc_pool_open(&cli->opts, cli->opts.host, 0, 0, err, sizeof(err));
	if (cli->pool == NULL) {
		usage_error(NULL, "--host: %s", err);
		return EXIT_USAGE;
	}
	cli->c = bwc_pool_any(cli->pool, NULL);
	if (cli->c == NULL) {
		fprintf(stderr, "%s: --host %s: no server answers PING\n", PROG, cli->opts.host);
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

int cli_infer(struct cli *cli, uint32_t model_id, const struct bwc_tensor *inputs, uint16_t n, uint32_t deadline_us,
	      uint8_t priority, struct bwc_reply *reply)
{
	struct bwc *answered = NULL;
	int rc;

	if (cli->pool == NULL)
		return bwc_infer(cli->c, model_id, inputs, n, deadline_us, priority, reply);
	rc = bwc_pool_infer(cli->pool, model_id, inputs, n, deadline_us, priority, reply, &answered, NULL);
	if (answered != NULL)
		cli->c = answered;
	return rc;
}

void print_pool_summary(const struct cli *cli)
{
	for (unsigned int i = 0; cli->pool != NULL && i < bwc_pool_size(cli->pool); i++) {
		struct bwc_pool_host_stats st;

		bwc_pool_stats(cli->pool, i, &st);
		printf("host %s: sent %" PRIu64 ", ok %" PRIu64 ", errors %" PRIu64 ", timeouts %" PRIu64 ", failovers %"
		       PRIu64 ", pings %" PRIu64 ", draining seen %" PRIu64 "%s\n", st.host, st.sent, st.ok, st.errors,
		       st.timeouts, st.failovers, st.pings, st.drains_seen, st.healthy ? "" : " (out)");
	}
}

void close_client(struct cli *cli)
{
	if (cli->pool != NULL)
		bwc_pool_close(cli->pool); /* cli->c is one of its connections */
	else
		bwc_close(cli->c);
	cli->pool = NULL;
	cli->c = NULL;
}

int open_client(struct cli *cli)
{
	int err;

	if (cli->opts.host != NULL && (strchr(cli->opts.host, ',') != NULL || cli->opts.host[0] == '@'))
		return open_pool(cli);
	cli->c = bwc_open(&cli->opts, &err);
	if (cli->c != NULL)
		return EXIT_OK;
	if (err == -ENXIO || err == -EINVAL) {
		usage_error(NULL, "--host: cannot resolve '%s' (expected an IPv4 address or host name)",
			    cli->opts.host);
		return EXIT_USAGE;
	}
	if (err == -EAGAIN) {
		fprintf(stderr, "%s: --host: cannot resolve '%s' now (temporary name resolution "
			"failure)\n", PROG, cli->opts.host);
		return EXIT_FAIL;
	}
	fprintf(stderr, "%s: cannot open a UDP socket to %s:%u: %s\n", PROG, cli->opts.host,
		(unsigned)cli->opts.port, strerror(-err));
	return EXIT_FAIL;
}

/* The largest reply body a call on the connection accepts: an unsegmented one always, a reassembled
 * one up to max_reply_bytes. Buffers that keep a reply's bytes past the next call are this big. */
size_t reply_body_max(const struct cli *cli)
{
	size_t reassembled = cli->opts.max_reply_bytes - sizeof(struct bw_hdr);

	return reassembled > BWC_BODY_MAX ? reassembled : BWC_BODY_MAX;
}

/* Fills elems elements of dtype with batchwire/inputs.h's values from seed: request i gets seed i, the
 * same data in every run. */
void generate_data(uint8_t *out, uint32_t dtype, uint64_t elems, uint64_t seed)
{
	uint64_t state = bw_input_stream(seed, 0);

	bw_input_fill(dtype, out, elems, elems, false, &state);
}

/* Common handling of getopt's '?' and ':' for the commands. */
int command_opt_error(const char *cmd, int opt, char **argv)
{
	if (opt == ':')
		usage_error(cmd, "option '%s' needs a value (see " PROG " %s --help)", argv[optind - 1],
			    cmd);
	else
		usage_error(cmd, "unknown option '%s' (see " PROG " %s --help)", argv[optind - 1], cmd);
	return EXIT_USAGE;
}

int no_operands(const char *cmd, int argc, char **argv)
{
	if (optind < argc) {
		usage_error(cmd, "unexpected argument '%s' (see " PROG " %s --help)", argv[optind], cmd);
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

/* Resolves --model: a number is an id, anything else a name looked up with MODEL_INFO. */
int resolve_model(struct cli *cli, const char *cmd, const char *model,
		  struct bwc_model_info *info, bool *have_info, uint32_t *model_id)
{
	uint64_t v;
	int rc;

	*have_info = false;
	if (is_number(model)) {
		if (!parse_u64(model, 0, BW_MODEL_ID_ANY - 1u, &v)) {
			usage_error(cmd, "--model: invalid value '%s' (expected a model id "
				    "0..4294967294 or a model name)", model);
			return EXIT_USAGE;
		}
		*model_id = (uint32_t)v;
		return EXIT_OK;
	}
	if (strlen(model) > BW_MAX_NAME_LEN) {
		usage_error(cmd, "--model: invalid value '%.32s...' (expected a model id or a "
			    "name of 1..255 bytes)", model);
		return EXIT_USAGE;
	}
	rc = bwc_model_info_by_name(cli->c, model, info);
	if (rc != 0) {
		char what[300];

		snprintf(what, sizeof(what), "%s %s: model '%s'", PROG, cmd, model);
		print_failure(what, rc, cli->c);
		return EXIT_FAIL;
	}
	*have_info = true;
	*model_id = info->model_id;
	return EXIT_OK;
}
