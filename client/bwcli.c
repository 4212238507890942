/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bwcli: talk to a batchwire appliance from any Linux host (ping, model info, inference).
 * Its last line of output for ping and infer is machine-readable so that integration tests and
 * benchmarks can parse it without scraping the human lines above it.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "bwcli.h"

#define TIMEOUT_MS_MAX 3600000u
#define RETRIES_MAX 1000u
#define PACE_US_MAX 1000000u /* a second between segments: slower is no longer a pace */

volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
	(void)sig;
	g_stop = 1;
}

static const char g_usage[] =
	"Usage: " PROG " [GLOBAL OPTIONS] COMMAND [OPTIONS]\n"
	"Talk to a batchwire appliance over UDP (protocol v1).\n"
	"\n"
	"Commands:\n"
	"  ping    check the server answers; measure round trips\n"
	"  info    describe a model\n"
	"  infer   send inference requests\n"
	"  top     watch the appliance: rates, latencies, busy lcores, drops (its HTTP /metrics)\n"
	"  help    show this help, or 'help COMMAND' for a command's\n"
	"\n"
	"Global options (before COMMAND):\n"
	"  --host H          server IPv4 address or host name (default 127.0.0.1); several as\n"
	"                    H1,H2,... (each H[:PORT]) or @FILE (one a line): infer sends each\n"
	"                    request to the healthy one with the fewest in flight, and on a timeout\n"
	"                    or UNAVAILABLE to the next with the same request_id; a server whose\n"
	"                    PING says DRAINING is left out (one line per server at the end)\n"
	"  --port P          server UDP port, 1..65535 (default 7878)\n"
	"  --timeout-ms N    wait this long for each reply before resending, 1..3600000 (default 1000)\n"
	"  --retries N       resends of the whole request after the first try, 0..1000 (default 3)\n"
	"  --mtu N           IP MTU of the path, 576..9000 (default 1500): a request body above\n"
	"                    N - 68 bytes is sent in segments of N - 68 bytes\n"
	"  --pace-us N       pause between two segments of a request, 0..1000000 (default 0: back\n"
	"                    to back), for paths that drop bursts\n"
	"  --drop-permille N for loss tests: withhold each request datagram with probability N/1000\n"
	"                    (a fixed sequence; default 0), as a lossy path would drop it\n"
	"  --key-file F      sign every request with a key of F (the server's key file format:\n"
	"                    'KEY_ID HEX_SECRET' lines; mode 600): the first key, or --key-id's\n"
	"  --key-id N        the key of --key-file to sign with, 1..4294967295\n"
	"  -h, --help        this help; 'COMMAND --help' for a command's options\n"
	"\n"
	"Exit status: 0 when every request got an OK reply (and matched with --expect-echo or --expect),\n"
	"1 when a request failed, timed out or mismatched, 2 for a bad command line.\n"
	"ping and infer end with one machine-readable line:\n"
	"  sent=N ok=N errors=N timeouts=N p50_us=X p99_us=X\n"
	"(errors = error replies, mismatches and malformed replies; latencies of OK replies, µs);\n"
	"the line before it counts datagrams: segments: N sent, N received.\n";

/* Sets the connection's defaults from the global options; returns the index of COMMAND. */
static int parse_global(int argc, char **argv, struct cli *cli, int *exit_code)
{
	static const struct option longopts[] = {
		{ "host", required_argument, NULL, 'H' },
		{ "port", required_argument, NULL, 'p' },
		{ "timeout-ms", required_argument, NULL, 't' },
		{ "retries", required_argument, NULL, 'r' },
		{ "mtu", required_argument, NULL, 'm' },
		{ "pace-us", required_argument, NULL, 'P' },
		{ "drop-permille", required_argument, NULL, 'D' },
		{ "key-file", required_argument, NULL, 'K' },
		{ "key-id", required_argument, NULL, 'k' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *key_file = NULL;
	uint32_t key_id = 0;
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
		case 'm':
			if (!opt_u64(NULL, "--mtu", optarg, BWC_MTU_MIN, BWC_MTU_MAX, &v))
				goto usage;
			cli->opts.mtu = (uint32_t)v;
			break;
		case 'P':
			if (!opt_u64(NULL, "--pace-us", optarg, 0, PACE_US_MAX, &v))
				goto usage;
			cli->opts.pace_us = (uint32_t)v;
			break;
		case 'D':
			if (!opt_u64(NULL, "--drop-permille", optarg, 0, 1000, &v))
				goto usage;
			cli->opts.drop_permille = (uint32_t)v;
			break;
		case 'K':
			key_file = optarg;
			break;
		case 'k':
			if (!opt_u64(NULL, "--key-id", optarg, 1, UINT32_MAX, &v))
				goto usage;
			key_id = (uint32_t)v;
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
	if (key_id != 0 && key_file == NULL) {
		usage_error(NULL, "--key-id needs --key-file");
		goto usage;
	}
	if (key_file != NULL) {
		char err[512];
		uint32_t len = 0;

		if (bwc_key_file_read(key_file, key_id, &cli->opts.key_id, cli->key, &len, err, sizeof(err)) != 0) {
			fprintf(stderr, PROG ": %s\n", err);
			goto usage;
		}
		cli->opts.key = cli->key;
		cli->opts.key_len = len;
	}
	return optind;
usage:
	*exit_code = EXIT_USAGE;
	return -1;
}

static const struct command {
	const char *name;
	int (*run)(struct cli *cli, int argc, char **argv);
	const char *usage;
} g_commands[] = {
	{ "ping", cmd_ping, g_usage_ping },
	{ "info", cmd_info, g_usage_info },
	{ "top", cmd_top, g_usage_top },
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
	close_client(&cli);
	return rc;
}
