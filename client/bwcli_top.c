/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bwcli top: the appliance at a glance, refreshed every interval, like top(1). It reads the HTTP
 * control server's /metrics (Prometheus text: one sample a line), keeps the previous scrape, and
 * shows what moved between the two: replies a second by status, each model's requests a second and
 * latency p50/p99 over the interval (from the histogram's bucket deltas), each lcore's busy share,
 * drops a second by reason. A terminal gets a redrawn screen; anything else (a pipe, a test) plain
 * blocks of lines, one per interval.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bwcli.h"

#define TOP_INTERVAL_MS_DEFAULT 1000
#define TOP_RESPONSE_MAX (16u << 20) /* a scrape of the largest configuration is far below this */
#define TOP_SAMPLES_MAX 8192
#define TOP_KEY_MAX 192
#define TOP_ROWS_MAX 64

const char g_usage_top[] =
	"Usage: " PROG " [GLOBAL OPTIONS] top [--http ADDR:PORT] [--interval-ms N] [--count N]\n"
	"Shows, every interval, what moved on the appliance: replies a second by status, each model's\n"
	"requests a second and latency p50/p99, each lcore's busy share, drops by reason. It reads the\n"
	"HTTP control server's /metrics (batchwire --http).\n"
	"  --http ADDR:PORT  the control server (default 127.0.0.1:8000)\n"
	"  --interval-ms N   between two views, 100..3600000 (default 1000)\n"
	"  --count N         views to show, then exit (default: until Ctrl-C)\n";

/* One sample of a scrape: "name{labels}" and its value. */
struct sample {
	char key[TOP_KEY_MAX];
	double value;
};

struct scrape {
	struct sample *s;
	unsigned int n;
};

/* GET /metrics over a plain TCP connection. \return the body (malloc'd), or NULL with why. */
static char *http_get_metrics(const struct sockaddr_in *addr, char *why, size_t cap)
{
	static const char request[] = "GET /metrics HTTP/1.0\r\nHost: batchwire\r\n\r\n";
	size_t len = 0, room = 1 << 16;
	char *buf = malloc(room), *body;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (buf == NULL || fd < 0) {
		snprintf(why, cap, "out of memory or sockets");
		goto fail;
	}
	if (connect(fd, (const struct sockaddr *)addr, sizeof(*addr)) != 0) {
		snprintf(why, cap, "cannot reach the control server: %s (is batchwire running with --http?)", strerror(errno));
		goto fail;
	}
	if (send(fd, request, sizeof(request) - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof(request) - 1)) {
		snprintf(why, cap, "send: %s", strerror(errno));
		goto fail;
	}
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t got;

		if (poll(&p, 1, 5000) <= 0) {
			snprintf(why, cap, "the control server did not answer within 5 s");
			goto fail;
		}
		if (len + 1 == room) {
			char *grown = room < TOP_RESPONSE_MAX ? realloc(buf, room * 2) : NULL;

			if (grown == NULL) {
				snprintf(why, cap, "the scrape is larger than %u bytes", TOP_RESPONSE_MAX);
				goto fail;
			}
			buf = grown;
			room *= 2;
		}
		got = recv(fd, buf + len, room - 1 - len, 0);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			snprintf(why, cap, "recv: %s", strerror(errno));
			goto fail;
		}
		if (got == 0)
			break;
		len += (size_t)got;
	}
	close(fd);
	buf[len] = '\0';
	if (strncmp(buf, "HTTP/1.", 7) != 0 || strncmp(buf + 9, "200", 3) != 0 || (body = strstr(buf, "\r\n\r\n")) == NULL) {
		snprintf(why, cap, "the control server answered %.40s", buf);
		free(buf);
		return NULL;
	}
	memmove(buf, body + 4, strlen(body + 4) + 1);
	return buf;
fail:
	if (fd >= 0)
		close(fd);
	free(buf);
	return NULL;
}

/* Every "name{labels} value" line of a Prometheus text body (comments left out). */
static int scrape_parse(char *text, struct scrape *out)
{
	out->n = 0;
	for (char *line = strtok(text, "\n"); line != NULL; line = strtok(NULL, "\n")) {
		char *space = strrchr(line, ' ');

		if (line[0] == '#' || space == NULL || (size_t)(space - line) >= TOP_KEY_MAX)
			continue;
		if (out->n == TOP_SAMPLES_MAX)
			return -E2BIG;
		memcpy(out->s[out->n].key, line, (size_t)(space - line));
		out->s[out->n].key[space - line] = '\0';
		out->s[out->n].value = strtod(space + 1, NULL);
		out->n++;
	}
	return 0;
}

static double value_of(const struct scrape *sc, const char *key)
{
	for (unsigned int i = 0; i < sc->n; i++)
		if (strcmp(sc->s[i].key, key) == 0)
			return sc->s[i].value;
	return NAN;
}

/* The value of key in the last scrape minus the one before (0 when either lacks it). */
static double delta(const struct scrape *now, const struct scrape *before, const char *key)
{
	double a = value_of(now, key), b = value_of(before, key);

	return isnan(a) || isnan(b) ? 0 : a - b;
}

/* The label value of `label` in key ("...{model=\"mlp\",le=\"1\"}"), into out. */
static bool label_get(const char *key, const char *label, char *out, size_t cap)
{
	char pattern[64];
	const char *p, *end;

	snprintf(pattern, sizeof(pattern), "%s=\"", label);
	p = strstr(key, pattern);
	if (p == NULL)
		return false;
	p += strlen(pattern);
	end = strchr(p, '"');
	if (end == NULL || (size_t)(end - p) >= cap)
		return false;
	memcpy(out, p, (size_t)(end - p));
	out[end - p] = '\0';
	return true;
}

/* The distinct values of label among the samples of a family (prefix "name{"). */
static unsigned int labels_list(const struct scrape *sc, const char *family, const char *label,
				char (*out)[TOP_KEY_MAX], unsigned int max)
{
	unsigned int n = 0;
	size_t flen = strlen(family);

	for (unsigned int i = 0; i < sc->n && n < max; i++) {
		char v[TOP_KEY_MAX];
		bool seen = false;

		if (strncmp(sc->s[i].key, family, flen) != 0 || sc->s[i].key[flen] != '{' ||
		    !label_get(sc->s[i].key, label, v, sizeof(v)))
			continue;
		for (unsigned int k = 0; k < n && !seen; k++)
			seen = strcmp(out[k], v) == 0;
		if (!seen)
			snprintf(out[n++], TOP_KEY_MAX, "%s", v);
	}
	return n;
}

/* The quantile q of a model's latency over the interval, from the cumulative buckets' deltas: the
 * upper edge of the first bucket holding that rank, in µs; NAN with nothing answered. */
static double latency_quantile(const struct scrape *now, const struct scrape *before, const char *model, double q)
{
	char prefix[TOP_KEY_MAX];
	double total, best = NAN;
	size_t plen;

	snprintf(prefix, sizeof(prefix), "batchwire_request_latency_seconds_bucket{model=\"%.100s\",le=\"", model);
	plen = strlen(prefix);
	snprintf(prefix + plen, sizeof(prefix) - plen, "+Inf\"}");
	total = delta(now, before, prefix);
	prefix[plen] = '\0';
	if (!(total > 0))
		return NAN;
	for (unsigned int i = 0; i < now->n; i++) {
		double le;

		if (strncmp(now->s[i].key, prefix, plen) != 0 || now->s[i].key[plen] == '+')
			continue;
		le = strtod(now->s[i].key + plen, NULL);
		if (delta(now, before, now->s[i].key) >= q * total && (isnan(best) || le < best))
			best = le;
	}
	return isnan(best) ? NAN : best * 1e6;
}

/* Each lcore's busy share over the interval, of the polling (role "poll") or worker ones. */
static void busy_print(const struct scrape *now, const struct scrape *before, const char *role,
		       char (*names)[TOP_KEY_MAX])
{
	char family[64], key[TOP_KEY_MAX * 2];
	unsigned int n;

	snprintf(family, sizeof(family), "batchwire_%s_seconds_total", role);
	n = labels_list(now, family, "lcore", names, TOP_ROWS_MAX);
	for (unsigned int i = 0; i < n; i++) {
		double all, busy;

		snprintf(key, sizeof(key), "batchwire_%s_seconds_total{lcore=\"%.100s\"}", role, names[i]);
		all = delta(now, before, key);
		snprintf(key, sizeof(key), "batchwire_%s_busy_seconds_total{lcore=\"%.100s\"}", role, names[i]);
		busy = delta(now, before, key);
		printf(" %s lcore %s %.1f%%", role, names[i], all > 0 ? 100 * busy / all : 0);
	}
}

static void show(const struct scrape *now, const struct scrape *before, double seconds, unsigned int view)
{
	static char names[TOP_ROWS_MAX][TOP_KEY_MAX];
	char key[TOP_KEY_MAX * 2];
	unsigned int n;
	double total = 0;

	if (isatty(STDOUT_FILENO))
		fputs("\033[H\033[2J", stdout);
	printf("batchwire top: view %u, over %.2f s%s\n", view, seconds,
	       value_of(now, "batchwire_ready") == 1 ? ", ready" : ", NOT READY");
	n = labels_list(now, "batchwire_replies_total", "status", names, TOP_ROWS_MAX);
	printf("replies/s:");
	for (unsigned int i = 0; i < n; i++) {
		double d;

		snprintf(key, sizeof(key), "batchwire_replies_total{status=\"%.100s\"}", names[i]);
		d = delta(now, before, key) / seconds;
		total += d;
		if (d > 0)
			printf(" %s %.0f", names[i], d);
	}
	printf(" (all %.0f)\n", total);
	n = labels_list(now, "batchwire_model_requests_done_total", "model", names, TOP_ROWS_MAX);
	printf("%-24s %12s %12s %12s %10s\n", "model", "requests/s", "p50_us", "p99_us", "rows/batch");
	for (unsigned int i = 0; i < n; i++) {
		double rows, batches;

		snprintf(key, sizeof(key), "batchwire_model_requests_done_total{model=\"%.100s\"}", names[i]);
		double rate = delta(now, before, key) / seconds;
		snprintf(key, sizeof(key), "batchwire_model_rows_total{model=\"%.100s\"}", names[i]);
		rows = delta(now, before, key);
		snprintf(key, sizeof(key), "batchwire_model_batches_total{model=\"%.100s\"}", names[i]);
		batches = delta(now, before, key);
		double p50 = latency_quantile(now, before, names[i], 0.5), p99 = latency_quantile(now, before, names[i], 0.99);
		char p50_text[24] = "-", p99_text[24] = "-", rows_text[24] = "-";

		/* "-": nothing answered in the interval, so no latency to speak of */
		if (!isnan(p50))
			snprintf(p50_text, sizeof(p50_text), "%.0f", p50);
		if (!isnan(p99))
			snprintf(p99_text, sizeof(p99_text), "%.0f", p99);
		if (batches > 0)
			snprintf(rows_text, sizeof(rows_text), "%.1f", rows / batches);
		printf("%-24s %12.0f %12s %12s %10s\n", names[i], rate, p50_text, p99_text, rows_text);
	}
	printf("busy:");
	busy_print(now, before, "poll", names);
	busy_print(now, before, "worker", names);
	printf("\n");
	n = labels_list(now, "batchwire_drops_total", "reason", names, TOP_ROWS_MAX);
	printf("drops/s:");
	total = 0;
	for (unsigned int i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "batchwire_drops_total{reason=\"%.100s\"}", names[i]);
		double d = delta(now, before, key) / seconds;

		total += d;
		if (d > 0)
			printf(" %s %.0f", names[i], d);
	}
	printf("%s\n", total > 0 ? "" : " none");
	fflush(stdout);
}

static bool parse_addr(const char *text, struct sockaddr_in *addr)
{
	char host[INET_ADDRSTRLEN];
	const char *colon = strrchr(text, ':');
	char *end;
	unsigned long port;

	if (colon == NULL || colon == text || (size_t)(colon - text) >= sizeof(host))
		return false;
	memcpy(host, text, (size_t)(colon - text));
	host[colon - text] = '\0';
	port = strtoul(colon + 1, &end, 10);
	*addr = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	return *end == '\0' && port > 0 && port <= 65535 && inet_pton(AF_INET, host, &addr->sin_addr) == 1;
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int cmd_top(struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "http", required_argument, NULL, 'H' },
		{ "interval-ms", required_argument, NULL, 'i' },
		{ "count", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct sockaddr_in addr;
	struct scrape a = { 0 }, b = { 0 }, *now = &a, *before = &b;
	uint64_t interval_ms = TOP_INTERVAL_MS_DEFAULT, count = UINT64_MAX;
	double t_before;
	char why[256];
	char *text;
	int opt, rc = EXIT_OK;

	(void)cli; /* the UDP connection's options do not apply: top talks HTTP to the control server */
	parse_addr("127.0.0.1:8000", &addr);
	while ((opt = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'H':
			if (!parse_addr(optarg, &addr)) {
				usage_error("top", "--http: invalid value '%s' (expected ADDR:PORT, an IPv4 address)", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'i':
			if (!opt_u64("top", "--interval-ms", optarg, 100, 3600000, &interval_ms))
				return EXIT_USAGE;
			break;
		case 'c':
			if (!opt_u64("top", "--count", optarg, 1, COUNT_MAX, &count))
				return EXIT_USAGE;
			break;
		case 'h':
			fputs(g_usage_top, stdout);
			return EXIT_OK;
		default:
			return command_opt_error("top", opt, argv);
		}
	}
	if (no_operands("top", argc, argv) != EXIT_OK)
		return EXIT_USAGE;
	a.s = calloc(TOP_SAMPLES_MAX, sizeof(*a.s));
	b.s = calloc(TOP_SAMPLES_MAX, sizeof(*b.s));
	if (a.s == NULL || b.s == NULL) {
		fprintf(stderr, PROG " top: out of memory\n");
		rc = EXIT_FAIL;
		goto out;
	}
	text = http_get_metrics(&addr, why, sizeof(why));
	if (text == NULL || scrape_parse(text, before) != 0) {
		fprintf(stderr, PROG " top: %s\n", text == NULL ? why : "more samples than top reads");
		free(text);
		rc = EXIT_FAIL;
		goto out;
	}
	free(text);
	t_before = mono_s();
	for (uint64_t view = 1; view <= count && !g_stop; view++) {
		struct scrape *swap;
		double t_now;

		usleep((useconds_t)(interval_ms * 1000));
		if (g_stop)
			break;
		text = http_get_metrics(&addr, why, sizeof(why));
		if (text == NULL || scrape_parse(text, now) != 0) {
			fprintf(stderr, PROG " top: %s\n", text == NULL ? why : "more samples than top reads");
			free(text);
			rc = EXIT_FAIL;
			break;
		}
		free(text);
		t_now = mono_s();
		show(now, before, t_now - t_before, (unsigned int)view);
		swap = before;
		before = now;
		now = swap;
		t_before = t_now;
	}
out:
	free(a.s);
	free(b.s);
	return rc;
}
