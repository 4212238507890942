/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Inside bwcli (not the client library, bwclient.h): what its files share. bwcli.c has main, the global
 * options and the help; bwcli_ping.c, bwcli_info.c and bwcli_infer.c one command each (bwcli_infer_model.c
 * the inputs and outputs of a model that declares its tensors, and the --expect check of any reply);
 * bwcli_common.c the option values, the connection and the model lookup; bwcli_report.c what a run
 * prints (failures, the summary line).
 */
#ifndef BATCHWIRE_BWCLI_H
#define BATCHWIRE_BWCLI_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <batchwire/auth.h>

#include "bwclient.h"

#define PROG "bwcli"

/* Exit codes, documented in --help. */
#define EXIT_OK 0
#define EXIT_FAIL 1  /* a request failed, timed out or mismatched; a file could not be used */
#define EXIT_USAGE 2 /* bad command line: unknown option, bad value, missing argument */

#define SHAPES_MAX 16
#define COUNT_MAX 10000000u   /* latencies are kept per request: 80 MB at most */
#define ERRORS_SHOWN_MAX 10   /* error lines printed before the rest are only counted */
#define TENSORS_MAX 16 /* --tensor options */

/* --expect's tolerances: |got - want| <= atol + rtol * |want| for floating-point outputs. */
#define EXPECT_RTOL_DEFAULT 1e-4
#define EXPECT_ATOL_DEFAULT 1e-5

/* The largest request body bwcli sends (--size, --input, --shape): what the default reply cap lets an
 * echo of it come back in. */
#define REQUEST_BODY_MAX (BWC_MAX_REPLY_BYTES_DEFAULT - (uint32_t)sizeof(struct bw_hdr))

/* Set by SIGINT and SIGTERM: a long run stops early but still prints its summary. */
extern volatile sig_atomic_t g_stop;

struct cli {
	struct bwc_opts opts;
	struct bwc *c;                /* the connection; with several hosts, the pool's last answer's */
	struct bwc_pool *pool;        /* --host a,b,c or @FILE: infer spreads over them; else NULL */
	uint8_t key[BW_AUTH_KEY_MAX]; /* --key-file's key, which opts.key points to */
};

/** INFER through the pool when there is one (cli->c then becomes the connection that answered),
 *  else on cli->c: bwc_infer's return. */
int cli_infer(struct cli *cli, uint32_t model_id, const struct bwc_tensor *inputs, uint16_t n, uint32_t deadline_us,
	      uint8_t priority, struct bwc_reply *reply);

/** With a pool, one line per host: what it was sent, answered, failed and handed on. */
void print_pool_summary(const struct cli *cli);

/** Closes cli's connection or pool. */
void close_client(struct cli *cli);

/* Counters of one ping or infer run; latencies of OK replies only; datagrams of every request. */
struct run_stats {
	uint64_t sent, ok, errors, timeouts;
	uint64_t segments_sent, segments_received, segments_withheld;
	uint64_t *lat_ns;
	unsigned errors_shown;
};

/* infer's options (bwcli_infer.c parses them; bwcli_infer_model.c reads them too). */
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
	const char *expect_dir;
	double rtol, atol;
	bool quiet;
};

/*
 * --expect DIR (bwcli_infer_model.c): every output of an OK reply compared with DIR/NAME.npy (NAME the
 * output's name in the reply, output_INDEX when it has none). Each file is read once, the first time
 * it is needed or by expect_preload, and kept, failure included, for the rest of the run.
 */
struct expect;
/* NULL, with the reason printed, when dir is no directory. */
struct expect *expect_open(const char *dir, double rtol, double atol);
/* Reads the files of the outputs MODEL_INFO lists, before the first request. */
void expect_preload(struct expect *ex, const struct bwc_model_info *info);
/* Checks one OK reply: true when every output matches, else false with why (one line) saying what
 * did not, or which file could not be read. */
bool expect_check(struct expect *ex, const struct bwc_reply *r, char *why, size_t cap);
/* The "expect: ..." line, printed before print_summary's. */
void expect_print_summary(const struct expect *ex);
void expect_close(struct expect *ex);

/* The commands: each parses its own options (argv[0] is its name) and returns an exit code. */
int cmd_ping(struct cli *cli, int argc, char **argv);
int cmd_top(struct cli *cli, int argc, char **argv);
int cmd_info(struct cli *cli, int argc, char **argv);
int cmd_infer(struct cli *cli, int argc, char **argv);
/* Their help texts (--help, 'help COMMAND'). */
extern const char g_usage_ping[];
extern const char g_usage_top[];
extern const char g_usage_info[];
extern const char g_usage_infer[];

/* infer with a model that declares its inputs (bwcli_infer_model.c). */
int infer_model(struct cli *cli, const struct infer_args *a, const struct bwc_model_info *info,
		uint32_t model_id, struct expect *ex, struct run_stats *st);

/* Option values and the connection (bwcli_common.c). */
void usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);
bool opt_u64(const char *cmd, const char *opt, const char *val, uint64_t min, uint64_t max, uint64_t *out);
bool opt_nonneg_double(const char *cmd, const char *opt, const char *val, double *out);
int command_opt_error(const char *cmd, int opt, char **argv);
int no_operands(const char *cmd, int argc, char **argv);
int open_client(struct cli *cli);
size_t reply_body_max(const struct cli *cli);
int resolve_model(struct cli *cli, const char *cmd, const char *model, struct bwc_model_info *info,
		  bool *have_info, uint32_t *model_id);
void generate_data(uint8_t *out, uint32_t dtype, uint64_t elems, uint64_t seed);

/* What a run prints (bwcli_report.c). */
void format_dims(char *out, size_t cap, uint8_t rank, const uint32_t *dims);
const char *dtype_label(uint32_t dtype);
void print_failure(const char *what, int rc, const struct bwc *c);
void note_failure(struct run_stats *st, const char *what, int rc, const struct bwc *c);
void note_mismatch(struct run_stats *st, const char *what, const char *why);
void note_datagrams(struct run_stats *st, const struct bwc *c);
void print_summary(const char *what, const struct cli *cli, struct run_stats *st);

#endif /* BATCHWIRE_BWCLI_H */
