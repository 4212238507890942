/* SPDX-License-Identifier: BSD-3-Clause */
/* bwcli ping: PING requests one after another, each reply checked to echo its payload. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "bwcli.h"

#define PING_SIZE_DEFAULT 56  /* like ping(8) */

const char g_usage_ping[] =
	"Usage: " PROG " [GLOBAL OPTIONS] ping [--count N] [--size BYTES] [--quiet]\n"
	"Sends PING requests one after another; each reply must echo the payload.\n"
	"  --count N       pings to send, 1..10000000 (default 1)\n"
	"  --size BYTES    payload bytes per ping, 0..16777216 (default 56); above --mtu - 68\n"
	"                  the ping and its echo travel in segments\n"
	"  -q, --quiet     no line per ping, only the summary\n";

int cmd_ping(struct cli *cli, int argc, char **argv)
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
			if (!opt_u64("ping", "--size", optarg, 0, REQUEST_BODY_MAX, &v))
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
		note_datagrams(&st, cli->c);
		snprintf(what, sizeof(what), "ping %" PRIu64, i + 1);
		if (rc == 0) {
			st.lat_ns[st.ok++] = rtt_ns;
			if (!quiet)
				printf("%s: %" PRIu64 " bytes rtt %.1f us%s\n", what, size, (double)rtt_ns / 1000.0,
				       (bwc_last_reply(cli->c)->flags & BW_FLAG_DRAINING)
					       ? " (server draining: send new requests elsewhere)" : "");
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
