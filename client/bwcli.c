/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bwcli: talk to a batchwire appliance from any Linux host (ping, model info, inference).
 * Its last line of output for ping and infer is machine-readable so that integration tests and
 * benchmarks can parse it without scraping the human lines above it.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bwclient.h"

#define PROG "bwcli"

/* Exit codes, documented in --help. */
#define EXIT_OK 0
#define EXIT_FAIL 1  /* a request failed, timed out or mismatched; a file could not be used */
#define EXIT_USAGE 2 /* bad command line: unknown option, bad value, missing argument */

#define SHAPES_MAX 16
#define COUNT_MAX 10000000u   /* latencies are kept per request: 80 MB at most */
#define TIMEOUT_MS_MAX 3600000u
#define RETRIES_MAX 1000u
#define ERRORS_SHOWN_MAX 10   /* error lines printed before the rest are only counted */
#define PING_SIZE_DEFAULT 56  /* like ping(8) */
#define INFER_DIM_DEFAULT 16  /* shape [1,16] when neither --shape nor --input says */

static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
	(void)sig;
	g_stop = 1;
}

struct cli {
	struct bwc_opts opts;
	struct bwc *c;
};

/* Counters of one ping or infer run; latencies of OK replies only. */
struct run_stats {
	uint64_t sent, ok, errors, timeouts;
	uint64_t *lat_ns;
	unsigned errors_shown;
};

static const char g_usage[] =
	"Usage: " PROG " [GLOBAL OPTIONS] COMMAND [OPTIONS]\n"
	"Talk to a batchwire appliance over UDP (protocol v1).\n"
	"\n"
	"Commands:\n"
	"  ping    check the server answers; measure round trips\n"
	"  info    describe a model\n"
	"  infer   send inference requests\n"
	"  help    show this help, or 'help COMMAND' for a command's\n"
	"\n"
	"Global options (before COMMAND):\n"
	"  --host H          server IPv4 address or host name (default 127.0.0.1)\n"
	"  --port P          server UDP port, 1..65535 (default 7878)\n"
	"  --timeout-ms N    wait this long for each reply before resending, 1..3600000 (default 1000)\n"
	"  --retries N       resends after the first try, 0..1000 (default 3)\n"
	"  -h, --help        this help; 'COMMAND --help' for a command's options\n"
	"\n"
	"Exit status: 0 when every request got an OK reply (and matched with --expect-echo),\n"
	"1 when a request failed, timed out or mismatched, 2 for a bad command line.\n"
	"ping and infer end with one machine-readable line:\n"
	"  sent=N ok=N errors=N timeouts=N p50_us=X p99_us=X\n"
	"(errors = error replies, mismatches and malformed replies; latencies of OK replies, µs).\n";

static const char g_usage_ping[] =
	"Usage: " PROG " [GLOBAL OPTIONS] ping [--count N] [--size BYTES] [--quiet]\n"
	"Sends PING requests one after another; each reply must echo the payload.\n"
	"  --count N       pings to send, 1..10000000 (default 1)\n"
	"  --size BYTES    payload bytes per ping, 0..8932 (default 56)\n"
	"  -q, --quiet     no line per ping, only the summary\n";

static const char g_usage_info[] =
	"Usage: " PROG " [GLOBAL OPTIONS] info --model M\n"
	"Prints a model's name, id, flags, batch sizes, inputs and outputs.\n"
	"  --model M       model id (0..4294967294) or name (all digits: an id)\n";

static const char g_usage_infer[] =
	"Usage: " PROG " [GLOBAL OPTIONS] infer --model M [OPTIONS]\n"
	"Sends INFER requests with one input tensor, one after another.\n"
	"  --model M          model id (0..4294967294) or name (all digits: an id); a name is\n"
	"                     looked up once with MODEL_INFO\n"
	"  --input FILE       raw little-endian bytes of the tensor; without it the data is\n"
	"                     generated, deterministic and different for every request\n"
	"  --dtype T          element type (default float): float uint8 int8 uint16 int16 int32\n"
	"                     int64 bool float16 double uint32 uint64 bfloat16\n"
	"                     (aliases float32 fp32 float64 fp64 fp16 half bf16)\n"
	"  --shape D,D,...    dims, 1..8 of them; repeat to cycle: request i uses shape\n"
	"                     number i mod the number of shapes\n"
	"                     (default: [1, FILE bytes / element size] with --input, else [1,16])\n"
	"  --input-name NAME  address the tensor by name (index 0xFFFF) instead of index 0\n"
	"  --count N          requests to send, 1..10000000 (default 1)\n"
	"  --deadline-us N    budget at the server, 0..4294967295; 0: the model's default (default 0)\n"
	"  --priority N       0..255, 0 most urgent (default 0)\n"
	"  --expect-echo      each OK reply's tensors must equal the inputs (dtype, dims, data)\n"
	"  --output FILE      write the first output tensor of the last OK reply\n"
	"Models with declared inputs (MODEL_INFO lists them; e.g. ONNX models):\n"
	"  --tensor NAME=FILE.npy  input NAME from a NumPy file, sent by name; repeat per input\n"
	"                     (without --tensor, --input or --shape, every input is generated:\n"
	"                     floats in [-1,1), '*mask*' integers 1 with the last quarter 0,\n"
	"                     other integers in [0,1000), with --rows rows)\n"
	"  --rows N           rows (batch dimension) of generated inputs, 1..1024 (default 1)\n"
	"  --output-dir DIR   write every output of the last OK reply as DIR/NAME.npy\n"
	"  -q, --quiet        no line per request, only errors and the summary\n";

static void usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* One line on stderr naming what was wrong; the caller exits with EXIT_USAGE. */
static void usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s%s%s: ", PROG, cmd != NULL ? " " : "", cmd != NULL ? cmd : "");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* Strict unsigned decimal: no sign, no spaces, no trailing junk, within [min, max]. */
static bool parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
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

static bool opt_u64(const char *cmd, const char *opt, const char *val, uint64_t min, uint64_t max,
		    uint64_t *out)
{
	if (parse_u64(val, min, max, out))
		return true;
	usage_error(cmd, "%s: invalid value '%s' (expected an integer %" PRIu64 "..%" PRIu64 ")",
		    opt, val, min, max);
	return false;
}

/* Parses "1,3,224,224" into t's rank and dims. */
static bool parse_shape(const char *s, uint8_t *rank, uint32_t dims[BW_MAX_RANK])
{
	char buf[256], *tok, *save = NULL;
	unsigned n = 0;

	if (strlen(s) >= sizeof(buf) || s[0] == '\0')
		return false;
	strcpy(buf, s);
	/* strtok_r would skip empty fields and accept "1,,2". */
	if (buf[strlen(buf) - 1] == ',' || strstr(buf, ",,") != NULL)
		return false;
	for (tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
		uint64_t v;

		if (n == BW_MAX_RANK || !parse_u64(tok, 0, UINT32_MAX, &v))
			return false;
		dims[n++] = (uint32_t)v;
	}
	*rank = (uint8_t)n;
	return n > 0;
}

static uint64_t shape_elems(uint8_t rank, const uint32_t *dims)
{
	uint64_t elems = 1;
	uint8_t d;

	for (d = 0; d < rank; d++) {
		elems *= dims[d];
		if (elems > UINT32_MAX)
			return UINT64_MAX;
	}
	return elems;
}

static void format_dims(char *out, size_t cap, uint8_t rank, const uint32_t *dims)
{
	size_t off = 0;
	uint8_t d;

	off += (size_t)snprintf(out + off, cap - off, "[");
	for (d = 0; d < rank && off < cap; d++) {
		if (dims[d] == 0)
			off += (size_t)snprintf(out + off, cap - off, "%s?", d ? "," : "");
		else
			off += (size_t)snprintf(out + off, cap - off, "%s%u", d ? "," : "", dims[d]);
	}
	if (off < cap)
		snprintf(out + off, cap - off, "]");
}

static const char *dtype_label(uint32_t dtype)
{
	static char unknown[32];
	const char *name = bwc_dtype_name(dtype);

	if (name != NULL)
		return name;
	snprintf(unknown, sizeof(unknown), "dtype(%u)", dtype);
	return unknown;
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

/* Describes a call's failure on stderr: the server's status and message, or the local error. */
static void print_failure(const char *what, int rc, const struct bwc *c)
{
	if (rc > 0)
		fprintf(stderr, "%s: %s: %s\n", what, bw_status_name((uint32_t)rc), bwc_last_error(c));
	else if (rc == -ETIMEDOUT)
		fprintf(stderr, "%s: timeout: %s\n", what, bwc_last_error(c));
	else
		fprintf(stderr, "%s: %s: %s\n", what, strerror(-rc), bwc_last_error(c));
}

static void note_failure(struct run_stats *st, const char *what, int rc, const struct bwc *c)
{
	if (st->errors_shown < ERRORS_SHOWN_MAX)
		print_failure(what, rc, c);
	else if (st->errors_shown == ERRORS_SHOWN_MAX)
		fprintf(stderr, "(further failures are counted, not shown)\n");
	st->errors_shown++;
}

static int open_client(struct cli *cli)
{
	int err;

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

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted values, in µs. */
static double percentile_us(const uint64_t *sorted, uint64_t n, unsigned pct)
{
	uint64_t rank;

	if (n == 0)
		return 0.0;
	rank = (n * pct + 99) / 100;
	if (rank == 0)
		rank = 1;
	return (double)sorted[rank - 1] / 1000.0;
}

static void print_summary(const char *what, const struct cli *cli, struct run_stats *st)
{
	double p50, p90, p99;

	qsort(st->lat_ns, st->ok, sizeof(st->lat_ns[0]), cmp_u64);
	p50 = percentile_us(st->lat_ns, st->ok, 50);
	p90 = percentile_us(st->lat_ns, st->ok, 90);
	p99 = percentile_us(st->lat_ns, st->ok, 99);

	printf("--- %s:%u %s: %" PRIu64 " sent, %" PRIu64 " ok, %" PRIu64 " errors, %" PRIu64
	       " timeouts%s\n",
	       cli->opts.host, (unsigned)cli->opts.port, what, st->sent, st->ok, st->errors,
	       st->timeouts, g_stop ? " (interrupted)" : "");
	if (st->ok > 0)
		printf("latency us: min %.1f p50 %.1f p90 %.1f p99 %.1f max %.1f\n",
		       (double)st->lat_ns[0] / 1000.0, p50, p90, p99,
		       (double)st->lat_ns[st->ok - 1] / 1000.0);
	printf("sent=%" PRIu64 " ok=%" PRIu64 " errors=%" PRIu64 " timeouts=%" PRIu64
	       " p50_us=%.1f p99_us=%.1f\n",
	       st->sent, st->ok, st->errors, st->timeouts, p50, p99);
}

/* splitmix64: a tiny deterministic generator, so request i carries the same data in every run. */
static uint64_t splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Fills elems elements of dtype with values a model can digest: floats in (-1, 1), bools 0/1,
 * integers anything. */
static void generate_data(uint8_t *out, uint32_t dtype, uint64_t elems, uint64_t seed)
{
	uint64_t state = seed, i;

	for (i = 0; i < elems; i++) {
		uint64_t r = splitmix64(&state);
		float f = (float)((double)(r >> 40) / (double)(1u << 24) * 2.0 - 1.0);
		double d = (double)(r >> 11) / (double)(1ull << 53) * 2.0 - 1.0;
		uint32_t fbits;
		uint16_t h;

		switch (dtype) {
		case BW_DTYPE_FLOAT:
			memcpy(out + i * 4, &f, 4);
			break;
		case BW_DTYPE_DOUBLE:
			memcpy(out + i * 8, &d, 8);
			break;
		case BW_DTYPE_BFLOAT16:
			memcpy(&fbits, &f, 4);
			h = (uint16_t)(fbits >> 16);
			memcpy(out + i * 2, &h, 2);
			break;
		case BW_DTYPE_FLOAT16:
			/* Exponent 14: magnitudes in [0.5, 1), random sign and mantissa. */
			h = (uint16_t)(((r >> 63) << 15) | (14u << 10) | (r & 0x3ff));
			memcpy(out + i * 2, &h, 2);
			break;
		case BW_DTYPE_BOOL:
			out[i] = (uint8_t)(r & 1);
			break;
		default:
			memcpy(out + i * bw_dtype_size(dtype), &r, bw_dtype_size(dtype));
			break;
		}
	}
}

/* Sets the connection's defaults from the global options; returns the index of COMMAND. */
static int parse_global(int argc, char **argv, struct cli *cli, int *exit_code)
{
	static const struct option longopts[] = {
		{ "host", required_argument, NULL, 'H' },
		{ "port", required_argument, NULL, 'p' },
		{ "timeout-ms", required_argument, NULL, 't' },
		{ "retries", required_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t v;
	int opt;

	bwc_opts_init(&cli->opts);
	opterr = 0;
	/* '+': stop at COMMAND, whose options are parsed by the command. */
	while ((opt = getopt_long(argc, argv, "+:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'H':
			cli->opts.host = optarg;
			break;
		case 'p':
			if (!opt_u64(NULL, "--port", optarg, 1, 65535, &v))
				goto usage;
			cli->opts.port = (uint16_t)v;
			break;
		case 't':
			if (!opt_u64(NULL, "--timeout-ms", optarg, 1, TIMEOUT_MS_MAX, &v))
				goto usage;
			cli->opts.timeout_ms = (uint32_t)v;
			break;
		case 'r':
			if (!opt_u64(NULL, "--retries", optarg, 0, RETRIES_MAX, &v))
				goto usage;
			cli->opts.retries = (uint32_t)v;
			break;
		case 'h':
			fputs(g_usage, stdout);
			*exit_code = EXIT_OK;
			return -1;
		case ':':
			usage_error(NULL, "option '%s' needs a value (see " PROG " --help)",
				    argv[optind - 1]);
			goto usage;
		default:
			usage_error(NULL, "unknown option '%s' (see " PROG " --help)", argv[optind - 1]);
			goto usage;
		}
	}
	if (optind >= argc) {
		usage_error(NULL, "no command given (expected ping, info, infer or help)");
		goto usage;
	}
	return optind;
usage:
	*exit_code = EXIT_USAGE;
	return -1;
}

/* Common handling of getopt's '?' and ':' for the commands. */
static int command_opt_error(const char *cmd, int opt, char **argv)
{
	if (opt == ':')
		usage_error(cmd, "option '%s' needs a value (see " PROG " %s --help)", argv[optind - 1],
			    cmd);
	else
		usage_error(cmd, "unknown option '%s' (see " PROG " %s --help)", argv[optind - 1], cmd);
	return EXIT_USAGE;
}

static int no_operands(const char *cmd, int argc, char **argv)
{
	if (optind < argc) {
		usage_error(cmd, "unexpected argument '%s' (see " PROG " %s --help)", argv[optind], cmd);
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

static int cmd_ping(struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "count", required_argument, NULL, 'c' },
		{ "size", required_argument, NULL, 's' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t count = 1, size = PING_SIZE_DEFAULT, v, i;
	struct run_stats st = { 0 };
	bool quiet = false;
	uint8_t *payload;
	int opt, rc;

	while ((opt = getopt_long(argc, argv, ":qh", longopts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			if (!opt_u64("ping", "--count", optarg, 1, COUNT_MAX, &count))
				return EXIT_USAGE;
			break;
		case 's':
			if (!opt_u64("ping", "--size", optarg, 0, BWC_BODY_MAX, &v))
				return EXIT_USAGE;
			size = v;
			break;
		case 'q':
			quiet = true;
			break;
		case 'h':
			fputs(g_usage_ping, stdout);
			return EXIT_OK;
		default:
			return command_opt_error("ping", opt, argv);
		}
	}
	if (no_operands("ping", argc, argv) != EXIT_OK)
		return EXIT_USAGE;
	rc = open_client(cli);
	if (rc != EXIT_OK)
		return rc;

	payload = malloc(size > 0 ? size : 1);
	st.lat_ns = malloc(count * sizeof(st.lat_ns[0]));
	if (payload == NULL || st.lat_ns == NULL) {
		fprintf(stderr, "%s ping: out of memory\n", PROG);
		free(payload);
		free(st.lat_ns);
		return EXIT_FAIL;
	}
	for (i = 0; i < count && !g_stop; i++) {
		char what[48];
		uint64_t rtt_ns = 0;

		/* A payload that differs per ping, so a reply echoing an older one is caught. */
		generate_data(payload, BW_DTYPE_UINT8, size, i);
		st.sent++;
		rc = bwc_ping(cli->c, payload, (uint32_t)size, &rtt_ns);
		snprintf(what, sizeof(what), "ping %" PRIu64, i + 1);
		if (rc == 0) {
			st.lat_ns[st.ok++] = rtt_ns;
			if (!quiet)
				printf("%s: %" PRIu64 " bytes rtt %.1f us\n", what, size,
				       (double)rtt_ns / 1000.0);
			continue;
		}
		if (rc == -ETIMEDOUT)
			st.timeouts++;
		else
			st.errors++;
		note_failure(&st, what, rc, cli->c);
	}
	print_summary("ping", cli, &st);
	rc = st.ok == count ? EXIT_OK : EXIT_FAIL;
	free(payload);
	free(st.lat_ns);
	return rc;
}

/* Resolves --model: a number is an id, anything else a name looked up with MODEL_INFO. */
static int resolve_model(struct cli *cli, const char *cmd, const char *model,
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

static void print_tensor_infos(const char *label, const struct bwc_tensor_info *t, uint16_t n)
{
	char dims[160];
	uint16_t i;

	printf("%s: %u\n", label, n);
	for (i = 0; i < n; i++) {
		format_dims(dims, sizeof(dims), t[i].rank, t[i].dims);
		printf("  [%u] %s: %s %s\n", t[i].index, t[i].name[0] ? t[i].name : "(unnamed)",
		       dtype_label(t[i].dtype), dims);
	}
}

static int cmd_info(struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "model", required_argument, NULL, 'm' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct bwc_model_info *info;
	const char *model = NULL;
	bool have_info;
	uint32_t model_id, i;
	int opt, rc;

	while ((opt = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'm':
			model = optarg;
			break;
		case 'h':
			fputs(g_usage_info, stdout);
			return EXIT_OK;
		default:
			return command_opt_error("info", opt, argv);
		}
	}
	if (no_operands("info", argc, argv) != EXIT_OK)
		return EXIT_USAGE;
	if (model == NULL) {
		usage_error("info", "--model is required (a model id or name)");
		return EXIT_USAGE;
	}
	info = malloc(sizeof(*info));
	if (info == NULL) {
		fprintf(stderr, "%s info: out of memory\n", PROG);
		return EXIT_FAIL;
	}
	rc = open_client(cli);
	if (rc == EXIT_OK)
		rc = resolve_model(cli, "info", model, info, &have_info, &model_id);
	if (rc == EXIT_OK && !have_info) {
		int err = bwc_model_info(cli->c, model_id, info);

		if (err != 0) {
			char what[64];

			snprintf(what, sizeof(what), PROG " info: model %u", model_id);
			print_failure(what, err, cli->c);
			rc = EXIT_FAIL;
		}
	}
	if (rc != EXIT_OK) {
		free(info);
		return rc;
	}

	printf("name: %s\n", info->name);
	printf("id: %u\n", info->model_id);
	printf("flags: 0x%04x%s\n", info->flags,
	       (info->flags & BW_MODEL_F_ANY_TENSORS) ? " (ANY_TENSORS)" : "");
	printf("priority levels: %u\n", info->priority_levels);
	printf("max batch size: %u\n", info->max_batch_size);
	if (info->num_batch_sizes == 0) {
		printf(info->max_batch_size == 0 ? "batch sizes: none (not batched)\n"
						 : "batch sizes: any (no padding)\n");
	} else {
		printf("batch sizes:");
		for (i = 0; i < info->num_batch_sizes; i++)
			printf(" %u", info->batch_sizes[i]);
		printf("\n");
	}
	if (info->flags & BW_MODEL_F_ANY_TENSORS) {
		printf("inputs: any\noutputs: any\n");
	} else {
		print_tensor_infos("inputs", info->inputs, info->num_inputs);
		print_tensor_infos("outputs", info->outputs, info->num_outputs);
	}
	free(info);
	return EXIT_OK;
}

#define TENSORS_MAX 16 /* --tensor options */

struct infer_args {
	const char *model;
	unsigned ntensors;
	const char *tensor_names[TENSORS_MAX];
	const char *tensor_paths[TENSORS_MAX];
	uint64_t rows;
	const char *output_dir;
	const char *input_path;
	const char *input_name;
	const char *output_path;
	int dtype;
	unsigned nshapes;
	uint8_t ranks[SHAPES_MAX];
	uint32_t dims[SHAPES_MAX][BW_MAX_RANK];
	uint64_t count;
	uint32_t deadline_us;
	uint8_t priority;
	bool expect_echo;
	bool quiet;
};

static int parse_infer(int argc, char **argv, struct infer_args *a)
{
	static const struct option longopts[] = {
		{ "model", required_argument, NULL, 'm' },
		{ "input", required_argument, NULL, 'i' },
		{ "input-name", required_argument, NULL, 'n' },
		{ "dtype", required_argument, NULL, 'd' },
		{ "shape", required_argument, NULL, 's' },
		{ "count", required_argument, NULL, 'c' },
		{ "deadline-us", required_argument, NULL, 'D' },
		{ "priority", required_argument, NULL, 'P' },
		{ "expect-echo", no_argument, NULL, 'e' },
		{ "output", required_argument, NULL, 'o' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "tensor", required_argument, NULL, 't' },
		{ "rows", required_argument, NULL, 'r' },
		{ "output-dir", required_argument, NULL, 'O' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t v;
	int opt;
	const char *eq;

	while ((opt = getopt_long(argc, argv, ":qh", longopts, NULL)) != -1) {
		switch (opt) {
		case 'm':
			a->model = optarg;
			break;
		case 'i':
			a->input_path = optarg;
			break;
		case 'n':
			if (optarg[0] == '\0' || strlen(optarg) > BW_MAX_NAME_LEN) {
				usage_error("infer", "--input-name: invalid value '%s' (expected a "
					    "name of 1..255 bytes)", optarg);
				return EXIT_USAGE;
			}
			a->input_name = optarg;
			break;
		case 'd':
			a->dtype = bwc_dtype_parse(optarg);
			if (a->dtype < 0) {
				usage_error("infer", "--dtype: invalid value '%s' (expected float, "
					    "uint8, int8, uint16, int16, int32, int64, bool, float16, "
					    "double, uint32, uint64 or bfloat16)", optarg);
				return EXIT_USAGE;
			}
			break;
		case 's':
			if (a->nshapes == SHAPES_MAX) {
				usage_error("infer", "--shape: too many shapes at '%s' (at most %d)",
					    optarg, SHAPES_MAX);
				return EXIT_USAGE;
			}
			if (!parse_shape(optarg, &a->ranks[a->nshapes], a->dims[a->nshapes])) {
				usage_error("infer", "--shape: invalid value '%s' (expected 1..8 "
					    "comma-separated dims 0..4294967295, e.g. 1,3,224,224)",
					    optarg);
				return EXIT_USAGE;
			}
			a->nshapes++;
			break;
		case 'c':
			if (!opt_u64("infer", "--count", optarg, 1, COUNT_MAX, &a->count))
				return EXIT_USAGE;
			break;
		case 'D':
			if (!opt_u64("infer", "--deadline-us", optarg, 0, UINT32_MAX, &v))
				return EXIT_USAGE;
			a->deadline_us = (uint32_t)v;
			break;
		case 'P':
			if (!opt_u64("infer", "--priority", optarg, 0, UINT8_MAX, &v))
				return EXIT_USAGE;
			a->priority = (uint8_t)v;
			break;
		case 'e':
			a->expect_echo = true;
			break;
		case 'o':
			a->output_path = optarg;
			break;
		case 'q':
			a->quiet = true;
			break;
		case 't':
			eq = strchr(optarg, '=');
			if (eq == NULL || eq == optarg || eq[1] == '\0' || (size_t)(eq - optarg) > BW_MAX_NAME_LEN) {
				usage_error("infer", "--tensor: invalid value '%s' (expected NAME=FILE.npy)", optarg);
				return EXIT_USAGE;
			}
			if (a->ntensors == TENSORS_MAX) {
				usage_error("infer", "--tensor: too many at '%s' (at most %d)", optarg, TENSORS_MAX);
				return EXIT_USAGE;
			}
			/* NUL-terminate the name in place: optarg points into argv, ours for the run */
			*(char *)eq = '\0';
			a->tensor_names[a->ntensors] = optarg;
			a->tensor_paths[a->ntensors++] = eq + 1;
			break;
		case 'r':
			if (!opt_u64("infer", "--rows", optarg, 1, 1024, &a->rows))
				return EXIT_USAGE;
			break;
		case 'O':
			a->output_dir = optarg;
			break;
		case 'h':
			fputs(g_usage_infer, stdout);
			return -1;
		default:
			return command_opt_error("infer", opt, argv);
		}
	}
	if (no_operands("infer", argc, argv) != EXIT_OK)
		return EXIT_USAGE;
	if (a->model == NULL) {
		usage_error("infer", "--model is required (a model id or name)");
		return EXIT_USAGE;
	}
	if (a->ntensors > 0 && (a->input_path != NULL || a->nshapes > 0 || a->expect_echo)) {
		usage_error("infer", "--tensor cannot be combined with --input, --shape or --expect-echo");
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

/* The payload room left for data in one datagram with one tensor descriptor and its name. */
static uint64_t data_room(const struct infer_args *a)
{
	uint32_t name_len = a->input_name != NULL ? (uint32_t)strlen(a->input_name) : 0;

	return BWC_BODY_MAX - sizeof(struct bw_tensor_desc) - bw_pad8(name_len);
}

/* Reads --input; fills in the default shape or checks the given ones against the file size. */
static int load_input(struct infer_args *a, uint8_t *buf, uint64_t *len)
{
	uint32_t elem = bw_dtype_size((uint32_t)a->dtype);
	uint64_t room = data_room(a);
	char dims[160];
	FILE *f;
	size_t n;
	unsigned s;

	f = fopen(a->input_path, "rb");
	if (f == NULL) {
		fprintf(stderr, "%s infer: --input: cannot open '%s': %s\n", PROG, a->input_path,
			strerror(errno));
		return EXIT_FAIL;
	}
	/* Read one byte past the room so that a too-big file is recognised without stat(). */
	n = fread(buf, 1, room + 1, f);
	if (ferror(f)) {
		fprintf(stderr, "%s infer: --input: cannot read '%s': %s\n", PROG, a->input_path,
			strerror(errno));
		fclose(f);
		return EXIT_FAIL;
	}
	fclose(f);
	if (n > room) {
		usage_error("infer", "--input: file '%s' is larger than one datagram holds (at most "
			    "%" PRIu64 " bytes)", a->input_path, room);
		return EXIT_USAGE;
	}
	*len = n;
	if (a->nshapes == 0) {
		if (n % elem != 0) {
			usage_error("infer", "--input: file '%s' has %zu bytes, not a multiple of the "
				    "%s element size %u", a->input_path, n, dtype_label((uint32_t)a->dtype),
				    elem);
			return EXIT_USAGE;
		}
		a->nshapes = 1;
		a->ranks[0] = 2;
		a->dims[0][0] = 1;
		a->dims[0][1] = (uint32_t)(n / elem);
		return EXIT_OK;
	}
	for (s = 0; s < a->nshapes; s++) {
		if (shape_elems(a->ranks[s], a->dims[s]) * elem != n) {
			format_dims(dims, sizeof(dims), a->ranks[s], a->dims[s]);
			usage_error("infer", "--shape: %s of %s needs %" PRIu64 " bytes but --input "
				    "'%s' has %zu", dims, dtype_label((uint32_t)a->dtype),
				    shape_elems(a->ranks[s], a->dims[s]) * elem, a->input_path, n);
			return EXIT_USAGE;
		}
	}
	return EXIT_OK;
}

/* Checks that a reply echoes the input; returns NULL or what differs. */
static const char *echo_mismatch(const struct bwc_reply *r, const struct bwc_tensor *in)
{
	const struct bw_tensor_desc *d;

	if (r->num_tensors != 1)
		return "reply tensor count differs from the request";
	d = r->tensors[0].desc;
	if (d->dtype != in->dtype)
		return "reply dtype differs from the request";
	if (d->rank != in->rank || memcmp(d->dims, in->dims, in->rank * sizeof(in->dims[0])) != 0)
		return "reply dims differ from the request";
	if (d->data_len != in->data_len ||
	    (in->data_len > 0 && memcmp(r->tensors[0].data, in->data, in->data_len) != 0))
		return "reply data differs from the request";
	return NULL;
}

static int write_output(const char *path, const uint8_t *data, uint32_t len)
{
	FILE *f = fopen(path, "wb");

	if (f == NULL || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
		fprintf(stderr, "%s infer: --output: cannot write '%s': %s\n", PROG, path,
			strerror(errno));
		if (f != NULL)
			fclose(f);
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

/* Inputs of a model that declares them: from --tensor files, or generated from MODEL_INFO. */
struct model_inputs {
	unsigned n;
	struct bwc_tensor t[TENSORS_MAX];
	struct bwc_npy npy[TENSORS_MAX];
	uint8_t *generated[TENSORS_MAX];
};

static void model_inputs_free(struct model_inputs *mi)
{
	for (unsigned i = 0; i < TENSORS_MAX; i++) {
		bwc_npy_free(&mi->npy[i]);
		free(mi->generated[i]);
	}
}

static bool name_has(const char *name, const char *part)
{
	return strstr(name, part) != NULL;
}

/* Integers: a mask is ones with its last quarter zero (padding), anything else ids in [0,1000). */
static void generate_ints(uint8_t *out, uint32_t dtype, const char *name, uint64_t rows, uint64_t row_elems,
			  uint64_t seed)
{
	uint64_t state = seed;
	uint32_t size = bw_dtype_size(dtype);

	for (uint64_t r = 0; r < rows; r++) {
		for (uint64_t e = 0; e < row_elems; e++) {
			int64_t v = name_has(name, "mask") ? (e < row_elems - row_elems / 4)
							   : (int64_t)(splitmix64(&state) % 1000);
			/* little-endian: the low bytes of v are the value in any narrower type */
			memcpy(out + (r * row_elems + e) * size, &v, size);
		}
	}
}

static int model_inputs_make(const struct infer_args *a, const struct bwc_model_info *info,
			     struct model_inputs *mi)
{
	char err[512];

	memset(mi, 0, sizeof(*mi));
	if (a->ntensors > 0) {
		for (unsigned i = 0; i < a->ntensors; i++) {
			struct bwc_npy *npy = &mi->npy[i];

			if (bwc_npy_read(a->tensor_paths[i], npy, err, sizeof(err)) != 0) {
				fprintf(stderr, "%s infer: --tensor %s: %s\n", PROG, a->tensor_names[i], err);
				return EXIT_USAGE;
			}
			mi->t[i] = (struct bwc_tensor){
				.index = BW_TENSOR_BY_NAME, .dtype = npy->dtype, .rank = npy->rank,
				.name = a->tensor_names[i], .data = npy->data, .data_len = (uint32_t)npy->nbytes,
			};
			memcpy(mi->t[i].dims, npy->dims, sizeof(npy->dims));
		}
		mi->n = a->ntensors;
		return EXIT_OK;
	}
	if (info->num_inputs > TENSORS_MAX) {
		fprintf(stderr, "%s infer: model '%s' has %u inputs; bwcli generates at most %d\n", PROG, info->name,
			info->num_inputs, TENSORS_MAX);
		return EXIT_FAIL;
	}
	for (unsigned i = 0; i < info->num_inputs; i++) {
		const struct bwc_tensor_info *ti = &info->inputs[i];
		uint64_t row_elems = 1, rows = a->rows != 0 ? a->rows : 1;
		struct bwc_tensor *t = &mi->t[i];

		for (uint8_t d = 1; d < ti->rank; d++)
			row_elems *= ti->dims[d];
		mi->generated[i] = malloc(rows * row_elems * bw_dtype_size(ti->dtype) + 1);
		if (mi->generated[i] == NULL || ti->rank == 0 || row_elems == 0) {
			fprintf(stderr, "%s infer: cannot generate input '%s' (rank %u)\n", PROG, ti->name, ti->rank);
			return EXIT_FAIL;
		}
		*t = (struct bwc_tensor){.index = ti->index, .dtype = ti->dtype, .rank = ti->rank, .name = ti->name,
					 .data = mi->generated[i],
					 .data_len = (uint32_t)(rows * row_elems * bw_dtype_size(ti->dtype))};
		memcpy(t->dims, ti->dims, sizeof(t->dims));
		t->dims[0] = (uint32_t)rows;
		if (ti->dtype == BW_DTYPE_FLOAT || ti->dtype == BW_DTYPE_DOUBLE || ti->dtype == BW_DTYPE_FLOAT16 ||
		    ti->dtype == BW_DTYPE_BFLOAT16)
			generate_data(mi->generated[i], ti->dtype, rows * row_elems, i + 1);
		else
			generate_ints(mi->generated[i], ti->dtype, ti->name, rows, row_elems, i + 1);
	}
	mi->n = info->num_inputs;
	return EXIT_OK;
}

/* Writes every output of a reply as DIR/NAME.npy (NAME from the reply, else output_INDEX). */
static int outputs_write(const char *dir, const struct bwc_reply *r)
{
	for (uint16_t o = 0; o < r->num_tensors; o++) {
		const struct bw_tensor_view *v = &r->tensors[o];
		uint32_t dims[BW_MAX_RANK];
		char path[4096], err[512];
		int n;

		memcpy(dims, v->desc->dims, sizeof(dims));
		if (v->desc->name_len > 0)
			n = snprintf(path, sizeof(path), "%s/%.*s.npy", dir, (int)v->desc->name_len, v->name);
		else
			n = snprintf(path, sizeof(path), "%s/output_%u.npy", dir, o);
		if (n >= (int)sizeof(path) || memchr(v->name, '/', v->desc->name_len) != NULL) {
			fprintf(stderr, "%s infer: --output-dir: output %u has a name that is no file name\n", PROG, o);
			return EXIT_FAIL;
		}
		if (bwc_npy_write(path, v->desc->dtype, v->desc->rank, dims, v->data, err, sizeof(err)) != 0) {
			fprintf(stderr, "%s infer: --output-dir: %s\n", PROG, err);
			return EXIT_FAIL;
		}
	}
	return EXIT_OK;
}

/* Copies a reply whose views point into the connection's buffer, so that it outlives the next call. */
static void reply_keep(struct bwc_reply *dst, uint8_t *body, const struct bwc_reply *src)
{
	*dst = *src;
	memcpy(body, src->body, src->body_len);
	dst->body = body;
	for (uint16_t o = 0; o < src->num_tensors; o++) {
		dst->tensors[o].desc = (const void *)(body + ((const uint8_t *)src->tensors[o].desc - src->body));
		dst->tensors[o].name = (const char *)(body + ((const uint8_t *)src->tensors[o].name - src->body));
		dst->tensors[o].data = body + (src->tensors[o].data - src->body);
	}
}

static int infer_model(struct cli *cli, const struct infer_args *a, const struct bwc_model_info *info,
		       uint32_t model_id, struct run_stats *st)
{
	struct model_inputs mi;
	struct bwc_reply *reply = malloc(sizeof(*reply)), *last = malloc(sizeof(*last));
	uint8_t *last_body = malloc(BWC_BODY_MAX);
	bool have_last = false;
	int rc = model_inputs_make(a, info, &mi);

	if (reply == NULL || last == NULL || last_body == NULL) {
		fprintf(stderr, "%s infer: out of memory\n", PROG);
		rc = EXIT_FAIL;
	}
	for (uint64_t i = 0; rc == EXIT_OK && i < a->count && !g_stop; i++) {
		char what[48];
		int ret;

		snprintf(what, sizeof(what), "request %" PRIu64, i + 1);
		st->sent++;
		ret = bwc_infer(cli->c, model_id, mi.t, (uint16_t)mi.n, a->deadline_us, a->priority, reply);
		if (ret != 0) {
			if (ret == -ETIMEDOUT)
				st->timeouts++;
			else
				st->errors++;
			note_failure(st, what, ret, cli->c);
			continue;
		}
		st->lat_ns[st->ok++] = reply->rtt_ns;
		if (a->output_dir != NULL) {
			reply_keep(last, last_body, reply);
			have_last = true;
		}
		if (!a->quiet)
			printf("%s: OK %u output%s rtt %.1f us\n", what, reply->num_tensors,
			       reply->num_tensors == 1 ? "" : "s", (double)reply->rtt_ns / 1000.0);
	}
	if (rc == EXIT_OK) {
		print_summary("infer", cli, st);
		rc = st->ok == a->count ? EXIT_OK : EXIT_FAIL;
	}
	if (a->output_dir != NULL && rc != EXIT_USAGE) {
		if (have_last) {
			if (outputs_write(a->output_dir, last) != EXIT_OK)
				rc = EXIT_FAIL;
		} else {
			fprintf(stderr, "%s infer: --output-dir: no OK reply; nothing written to '%s'\n", PROG,
				a->output_dir);
			rc = EXIT_FAIL;
		}
	}
	model_inputs_free(&mi);
	free(reply);
	free(last);
	free(last_body);
	return rc;
}

static int cmd_infer(struct cli *cli, int argc, char **argv)
{
	struct infer_args a = { .dtype = BW_DTYPE_FLOAT, .count = 1 };
	struct run_stats st = { 0 };
	struct bwc_model_info *info = NULL;
	struct bwc_reply *reply = NULL;
	uint8_t *data = NULL, *out = NULL;
	uint64_t input_len = 0, i, room;
	uint32_t model_id, out_len = 0, elem;
	bool have_info, have_out = false;
	char dims[160];
	unsigned s;
	int rc;

	rc = parse_infer(argc, argv, &a);
	if (rc != EXIT_OK)
		return rc < 0 ? EXIT_OK : rc;
	unsigned user_shapes = a.nshapes;

	elem = bw_dtype_size((uint32_t)a.dtype);
	room = data_room(&a);
	data = malloc(BWC_BODY_MAX + 1);
	out = malloc(BWC_BODY_MAX);
	reply = malloc(sizeof(*reply));
	info = malloc(sizeof(*info));
	st.lat_ns = malloc(a.count * sizeof(st.lat_ns[0]));
	if (data == NULL || out == NULL || reply == NULL || info == NULL || st.lat_ns == NULL) {
		fprintf(stderr, "%s infer: out of memory\n", PROG);
		rc = EXIT_FAIL;
		goto done;
	}
	if (a.input_path != NULL) {
		rc = load_input(&a, data, &input_len);
		if (rc != EXIT_OK)
			goto done;
	} else if (a.nshapes == 0) {
		a.nshapes = 1;
		a.ranks[0] = 2;
		a.dims[0][0] = 1;
		a.dims[0][1] = INFER_DIM_DEFAULT;
	}
	for (s = 0; s < a.nshapes; s++) {
		uint64_t elems = shape_elems(a.ranks[s], a.dims[s]);

		if (elems == UINT64_MAX || elems * elem > room) {
			format_dims(dims, sizeof(dims), a.ranks[s], a.dims[s]);
			usage_error("infer", "--shape: %s of %s does not fit one datagram (at most "
				    "%" PRIu64 " bytes of data)", dims, dtype_label((uint32_t)a.dtype),
				    room);
			rc = EXIT_USAGE;
			goto done;
		}
	}

	rc = open_client(cli);
	if (rc != EXIT_OK)
		goto done;
	rc = resolve_model(cli, "infer", a.model, info, &have_info, &model_id);
	if (rc != EXIT_OK)
		goto done;
	/* A model that declares its inputs gets them by name or generated, unless raw data was asked for. */
	if (a.ntensors > 0 || (a.input_path == NULL && user_shapes == 0 && !a.expect_echo)) {
		if (!have_info) {
			rc = bwc_model_info(cli->c, model_id, info);
			if (rc != 0) {
				fprintf(stderr, "%s infer: MODEL_INFO of model %u: %s\n", PROG, model_id,
					bwc_last_error(cli->c));
				rc = EXIT_FAIL;
				goto done;
			}
			have_info = true;
		}
		if (a.ntensors > 0 || (!(info->flags & BW_MODEL_F_ANY_TENSORS) && info->num_inputs > 0)) {
			rc = infer_model(cli, &a, info, model_id, &st);
			goto done;
		}
	}
	if (a.output_dir != NULL || a.rows != 0) {
		usage_error("infer", "--output-dir and --rows need a model that declares its inputs");
		rc = EXIT_USAGE;
		goto done;
	}

	for (i = 0; i < a.count && !g_stop; i++) {
		unsigned shape = (unsigned)(i % a.nshapes);
		struct bwc_tensor in = {
			.index = a.input_name != NULL ? BW_TENSOR_BY_NAME : 0,
			.dtype = (uint8_t)a.dtype,
			.rank = a.ranks[shape],
			.name = a.input_name,
			.data = data,
		};
		const char *mismatch;
		char what[48];
		uint64_t elems = shape_elems(in.rank, a.dims[shape]);

		memcpy(in.dims, a.dims[shape], sizeof(in.dims));
		in.data_len = (uint32_t)(elems * elem);
		if (a.input_path == NULL)
			generate_data(data, in.dtype, elems, i);

		snprintf(what, sizeof(what), "request %" PRIu64, i + 1);
		st.sent++;
		rc = bwc_infer(cli->c, model_id, &in, 1, a.deadline_us, a.priority, reply);
		if (rc != 0) {
			if (rc == -ETIMEDOUT)
				st.timeouts++;
			else
				st.errors++;
			note_failure(&st, what, rc, cli->c);
			continue;
		}
		mismatch = a.expect_echo ? echo_mismatch(reply, &in) : NULL;
		if (mismatch != NULL) {
			st.errors++;
			if (st.errors_shown < ERRORS_SHOWN_MAX)
				fprintf(stderr, "%s: mismatch: %s\n", what, mismatch);
			else if (st.errors_shown == ERRORS_SHOWN_MAX)
				fprintf(stderr, "(further failures are counted, not shown)\n");
			st.errors_shown++;
			continue;
		}
		st.lat_ns[st.ok++] = reply->rtt_ns;
		/* The reply's views die with the next request: keep the bytes --output wants. */
		if (a.output_path != NULL && reply->num_tensors > 0) {
			out_len = reply->tensors[0].desc->data_len;
			memcpy(out, reply->tensors[0].data, out_len);
			have_out = true;
		}
		if (!a.quiet)
			printf("%s: OK %u output%s rtt %.1f us%s\n", what, reply->num_tensors,
			       reply->num_tensors == 1 ? "" : "s", (double)reply->rtt_ns / 1000.0,
			       a.expect_echo ? " (echo matches)" : "");
	}
	print_summary("infer", cli, &st);
	rc = st.ok == a.count ? EXIT_OK : EXIT_FAIL;
	if (a.output_path != NULL) {
		if (have_out) {
			if (write_output(a.output_path, out, out_len) != EXIT_OK)
				rc = EXIT_FAIL;
		} else {
			fprintf(stderr, "%s infer: --output: no OK reply with an output tensor; '%s' "
				"not written\n", PROG, a.output_path);
			rc = EXIT_FAIL;
		}
	}
done:
	free(data);
	free(out);
	free(reply);
	free(info);
	free(st.lat_ns);
	return rc;
}

static const struct command {
	const char *name;
	int (*run)(struct cli *cli, int argc, char **argv);
	const char *usage;
} g_commands[] = {
	{ "ping", cmd_ping, g_usage_ping },
	{ "info", cmd_info, g_usage_info },
	{ "infer", cmd_infer, g_usage_infer },
};

static const struct command *find_command(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(g_commands) / sizeof(g_commands[0]); i++)
		if (strcmp(g_commands[i].name, name) == 0)
			return &g_commands[i];
	return NULL;
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_signal };
	const struct command *cmd;
	struct cli cli = { 0 };
	int exit_code = EXIT_OK, first, rc;

	first = parse_global(argc, argv, &cli, &exit_code);
	if (first < 0)
		return exit_code;

	if (strcmp(argv[first], "help") == 0) {
		if (first + 1 >= argc) {
			fputs(g_usage, stdout);
			return EXIT_OK;
		}
		cmd = find_command(argv[first + 1]);
		if (cmd == NULL) {
			usage_error(NULL, "help: unknown command '%s' (expected ping, info or infer)",
				    argv[first + 1]);
			return EXIT_USAGE;
		}
		fputs(cmd->usage, stdout);
		return EXIT_OK;
	}
	cmd = find_command(argv[first]);
	if (cmd == NULL) {
		usage_error(NULL, "unknown command '%s' (expected ping, info, infer or help)",
			    argv[first]);
		return EXIT_USAGE;
	}

	/* Ctrl-C ends a long run early but still prints its summary. */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	/* The command parses its own options: argv[first] plays argv[0]; optind 0 resets getopt. */
	optind = 0;
	rc = cmd->run(&cli, argc - first, argv + first);
	bwc_close(cli.c);
	return rc;
}
