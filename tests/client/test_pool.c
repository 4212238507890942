/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The client library's pool over several servers (client/pool.c), against fake servers in this
 * process: one thread each on a loopback UDP socket, answering PING (with the DRAINING flag when the
 * case says) and INFER (OK with no tensors, UNAVAILABLE, or nothing), and keeping every INFER's
 * request_id. Checked: the host lists and their refusals, requests spread over the servers, a
 * DRAINING server left, a silent one and an UNAVAILABLE one failed over with the same request_id,
 * no server healthy.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../bw_cunit.h"

#include "bwclient.h"

#define FAKE_IDS_MAX 4096
#define TIMEOUT_MS 100

enum fake_infer { FAKE_OK, FAKE_UNAVAILABLE, FAKE_SILENT };

struct fake {
	int fd;
	uint16_t port;
	pthread_t thread;
	volatile bool stop;
	volatile bool draining;           /* PING replies carry BW_FLAG_DRAINING */
	volatile enum fake_infer infer;
	volatile unsigned int nb_ids;     /* INFERs seen */
	uint64_t ids[FAKE_IDS_MAX];
};

static void *fake_main(void *arg)
{
	struct fake *f = arg;
	uint8_t buf[2048];

	while (!f->stop) {
		struct pollfd pfd = { .fd = f->fd, .events = POLLIN };
		struct sockaddr_in from;
		socklen_t flen = sizeof(from);
		struct bw_hdr *h = (struct bw_hdr *)buf;
		ssize_t n;

		if (poll(&pfd, 1, 20) <= 0)
			continue;
		n = recvfrom(f->fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &flen);
		if (n < (ssize_t)sizeof(*h) || h->magic != BW_PROTO_MAGIC)
			continue;
		if (h->opcode == BW_OP_INFER) {
			if (f->nb_ids < FAKE_IDS_MAX)
				f->ids[f->nb_ids] = h->request_id;
			__atomic_add_fetch(&f->nb_ids, 1, __ATOMIC_RELEASE);
			if (f->infer == FAKE_SILENT)
				continue;
			h->status = f->infer == FAKE_OK ? BW_STATUS_OK : BW_STATUS_UNAVAILABLE;
			h->num_tensors = 0;
			h->body_len = h->total_body_len = 0;
			h->flags = 0;
			n = sizeof(*h);
		} else if (h->opcode == BW_OP_PING) {
			h->flags = f->draining ? BW_FLAG_DRAINING : 0;
		} else {
			continue;
		}
		h->opcode |= BW_OP_REPLY;
		sendto(f->fd, buf, (size_t)n, 0, (struct sockaddr *)&from, flen);
	}
	return NULL;
}

static void fake_start(struct fake *f)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);

	memset(f, 0, sizeof(*f));
	f->fd = socket(AF_INET, SOCK_DGRAM, 0);
	CU_ASSERT_FATAL(f->fd >= 0);
	CU_ASSERT_FATAL(bind(f->fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	CU_ASSERT_FATAL(getsockname(f->fd, (struct sockaddr *)&a, &len) == 0);
	f->port = ntohs(a.sin_port);
	CU_ASSERT_FATAL(pthread_create(&f->thread, NULL, fake_main, f) == 0);
}

static void fake_stop(struct fake *f)
{
	f->stop = true;
	pthread_join(f->thread, NULL);
	close(f->fd);
}

static struct bwc_pool *pool_of(struct fake *a, struct fake *b)
{
	struct bwc_opts o;
	char hosts[64], err[256];
	struct bwc_pool *p;

	bwc_opts_init(&o);
	o.timeout_ms = TIMEOUT_MS;
	o.retries = 0;
	snprintf(hosts, sizeof(hosts), "127.0.0.1:%u,127.0.0.1:%u", a->port, b->port);
	p = bwc_pool_open(&o, hosts, 200, 50, err, sizeof(err));
	if (p == NULL)
		printf("\n  %s\n", err);
	return p;
}

static int infer_one(struct bwc_pool *p, unsigned int *host)
{
	static const float x[4] = { 1, 2, 3, 4 };
	struct bwc_tensor t = { .index = 0, .dtype = BW_DTYPE_FLOAT, .rank = 2, .dims = { 1, 4 }, .data = x,
				.data_len = sizeof(x) };
	struct bwc_reply r;

	return bwc_pool_infer(p, 1, &t, 1, BW_DEADLINE_NONE, 0, &r, NULL, host);
}

static void test_hosts(void)
{
	char err[256], path[] = "/tmp/bw-pool-hosts.XXXXXX", many[512] = "";
	struct bwc_pool *p;
	FILE *f;
	int fd;

	p = bwc_pool_open(NULL, "127.0.0.1:7001, 127.0.0.1", 0, 0, err, sizeof(err));
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_EQUAL(bwc_pool_size(p), 2);
	bwc_pool_close(p);
	fd = mkstemp(path);
	CU_ASSERT_FATAL(fd >= 0);
	f = fdopen(fd, "w");
	fputs("# the fleet\n127.0.0.1:7001\n\n127.0.0.1:7002  # rack 2\n127.0.0.1\n", f);
	fclose(f);
	snprintf(many, sizeof(many), "@%s", path);
	p = bwc_pool_open(NULL, many, 0, 0, err, sizeof(err));
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_EQUAL(bwc_pool_size(p), 3);
	bwc_pool_close(p);
	unlink(path);
	CU_ASSERT_PTR_NULL(bwc_pool_open(NULL, "", 0, 0, err, sizeof(err)));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "no host"));
	CU_ASSERT_PTR_NULL(bwc_pool_open(NULL, "127.0.0.1:0", 0, 0, err, sizeof(err)));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "invalid port '0'"));
	CU_ASSERT_PTR_NULL(bwc_pool_open(NULL, "@/nonexistent/hosts", 0, 0, err, sizeof(err)));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "cannot read hosts file"));
	many[0] = '\0';
	for (int i = 0; i <= BWC_POOL_MAX; i++)
		strcat(many, "127.0.0.1,");
	CU_ASSERT_PTR_NULL(bwc_pool_open(NULL, many, 0, 0, err, sizeof(err)));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "more than 16 hosts"));
}

/* Both healthy and answering: one request after another alternates between them. */
static void test_spread(void)
{
	struct fake a, b;
	struct bwc_pool *p;
	unsigned int host, count[2] = { 0, 0 };

	fake_start(&a);
	fake_start(&b);
	p = pool_of(&a, &b);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	for (int i = 0; i < 20; i++) {
		CU_ASSERT_EQUAL(infer_one(p, &host), 0);
		count[host]++;
	}
	CU_ASSERT_EQUAL(count[0], 10);
	CU_ASSERT_EQUAL(count[1], 10);
	CU_ASSERT_EQUAL(a.nb_ids + b.nb_ids, 20);
	bwc_pool_close(p);
	fake_stop(&a);
	fake_stop(&b);
}

/* A's PING says DRAINING: once the pool has pinged it, everything goes to B. */
static void test_draining(void)
{
	struct bwc_pool_host_stats st;
	struct fake a, b;
	struct bwc_pool *p;
	unsigned int host;

	fake_start(&a);
	fake_start(&b);
	a.draining = true;
	p = pool_of(&a, &b);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	for (int i = 0; i < 10; i++) {
		CU_ASSERT_EQUAL(infer_one(p, &host), 0);
		CU_ASSERT_EQUAL(host, 1);
	}
	CU_ASSERT_EQUAL(a.nb_ids, 0);
	bwc_pool_stats(p, 0, &st);
	CU_ASSERT(st.drains_seen >= 1 && !st.healthy);
	/* A done draining (here: back): after its time out and a PING, it takes requests again */
	a.draining = false;
	usleep(250 * 1000);
	for (int i = 0; i < 10; i++)
		CU_ASSERT_EQUAL(infer_one(p, &host), 0);
	CU_ASSERT(a.nb_ids >= 4);
	bwc_pool_close(p);
	fake_stop(&a);
	fake_stop(&b);
}

/* A request to a server that times out, or answers UNAVAILABLE, goes to the other with its id. */
static void failover_case(enum fake_infer how)
{
	struct bwc_pool_host_stats st;
	struct fake a, b;
	struct bwc_pool *p;
	unsigned int host;

	fake_start(&a);
	fake_start(&b);
	p = pool_of(&a, &b);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_EQUAL(infer_one(p, &host), 0); /* A first (pinged and healthy), then B next */
	CU_ASSERT_EQUAL(host, 0);
	b.infer = how;
	CU_ASSERT_EQUAL(infer_one(p, &host), 0);
	CU_ASSERT_EQUAL(host, 0);
	CU_ASSERT_EQUAL_FATAL(b.nb_ids, 1);
	CU_ASSERT_EQUAL_FATAL(a.nb_ids, 2);
	CU_ASSERT_EQUAL(b.ids[0], a.ids[1]); /* the same request, the same request_id */
	bwc_pool_stats(p, 1, &st);
	CU_ASSERT_EQUAL(st.failovers, 1);
	CU_ASSERT_EQUAL(how == FAKE_SILENT ? st.timeouts : st.errors, 1);
	CU_ASSERT_FALSE(st.healthy);
	/* while B is out, A takes every request */
	for (int i = 0; i < 5; i++) {
		CU_ASSERT_EQUAL(infer_one(p, &host), 0);
		CU_ASSERT_EQUAL(host, 0);
	}
	/* neither answers: each tried once, then no server */
	a.infer = FAKE_SILENT;
	b.infer = FAKE_SILENT;
	usleep(250 * 1000);
	CU_ASSERT(infer_one(p, &host) != 0);
	CU_ASSERT_EQUAL(infer_one(p, &host), -EHOSTUNREACH);
	bwc_pool_close(p);
	fake_stop(&a);
	fake_stop(&b);
}

static void test_failover_timeout(void)
{
	failover_case(FAKE_SILENT);
}

static void test_failover_unavailable(void)
{
	failover_case(FAKE_UNAVAILABLE);
}

int main(void)
{
	CU_TestInfo tests[] = {
		{ "hosts: a list, a file with comments, refusals", test_hosts },
		{ "two healthy servers share the requests", test_spread },
		{ "a server whose PING says DRAINING is left, then taken back", test_draining },
		{ "a timeout fails over with the same request_id; none healthy", test_failover_timeout },
		{ "UNAVAILABLE fails over with the same request_id", test_failover_unavailable },
		CU_TEST_INFO_NULL,
	};
	CU_SuiteInfo suites[] = {
		{ "pool", NULL, NULL, NULL, NULL, tests },
		CU_SUITE_INFO_NULL,
	};

	return bw_cunit_run(suites);
}
