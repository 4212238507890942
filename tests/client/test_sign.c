/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Signed calls of the client library (bwc_opts.key_id) against a fake server thread on loopback that
 * checks each datagram's trailer itself: the tag recomputed from the addresses it sees, the key id,
 * request_ids on the wall clock and increasing, a resend under a new request_id, segments each
 * signed and 40 bytes short of the unsigned slice. And bwc_key_file_read's refusals.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <batchwire/auth.h>

#include "../bw_cunit.h"

#include "bwclient.h"

#define T_KEY_ID 42
#define T_SEGMENTS_MAX 16

static const uint8_t g_key[24] = "signing key of 24 bytes";

struct fake {
	int fd;
	uint16_t port;
	pthread_t thread;
	struct bw_hmac_key hmac;
	unsigned int drop_first;        /* datagrams ignored before answering */
	unsigned int datagrams, bad;    /* seen; whose trailer or id was wrong */
	uint64_t ids[T_SEGMENTS_MAX * 4]; /* request_id of each datagram */
	uint32_t body_lens[T_SEGMENTS_MAX * 4];
	char why[160];
};

static uint64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Checks one datagram as the server would; answers PING with its body once every segment came. */
static void fake_datagram(struct fake *f, uint8_t *d, size_t len, const struct sockaddr_in *from)
{
	struct bw_hdr *h = (struct bw_hdr *)d;
	struct bw_auth_trailer *t = (struct bw_auth_trailer *)(d + len - sizeof(struct bw_auth_trailer));
	struct bw_auth_pseudo pseudo = {
		.src_addr = from->sin_addr.s_addr,
		.dst_addr = htonl(INADDR_LOOPBACK),
		.src_port = from->sin_port,
		.dst_port = htons(f->port),
	};
	uint8_t tag[BW_AUTH_TAG_LEN];
	uint64_t now = realtime_ns();
	unsigned int n = f->datagrams++;

	if (n < sizeof(f->ids) / sizeof(f->ids[0])) {
		f->ids[n] = h->request_id;
		f->body_lens[n] = h->body_len;
	}
	if (len != sizeof(*h) + h->body_len + sizeof(*t) || !(h->flags & BW_FLAG_AUTH)) {
		snprintf(f->why, sizeof(f->why), "datagram %u: %zu bytes, flags %#x: no trailer", n, len, h->flags);
		f->bad++;
		return;
	}
	bw_auth_tag(&f->hmac, &pseudo, h, (uint32_t)len - BW_AUTH_TAG_LEN, tag);
	if (!bw_auth_tag_equal(tag, t->tag) || t->key_id != T_KEY_ID || t->reserved != 0) {
		snprintf(f->why, sizeof(f->why), "datagram %u: tag, key id %u or reserved %u wrong", n, t->key_id,
			 t->reserved);
		f->bad++;
		return;
	}
	if (h->request_id + 5000000000ull < now || h->request_id > now + 5000000000ull) {
		snprintf(f->why, sizeof(f->why), "datagram %u: request_id %llu is not the wall clock", n,
			 (unsigned long long)h->request_id);
		f->bad++;
		return;
	}
	if (n < f->drop_first || h->seg_index + 1 != h->seg_count)
		return;
	/* the last segment: answer with one unsegmented reply of the last slice (the test checks ids) */
	h->opcode |= BW_OP_REPLY;
	h->flags = 0;
	h->seg_index = 0;
	h->seg_count = 1;
	h->total_body_len = h->body_len;
	sendto(f->fd, d, sizeof(*h) + h->body_len, 0, (const struct sockaddr *)from, sizeof(*from));
}

static void *fake_main(void *arg)
{
	struct fake *f = arg;
	static uint8_t buf[65536];

	for (;;) {
		struct pollfd pfd = { .fd = f->fd, .events = POLLIN };
		struct sockaddr_in from;
		socklen_t flen = sizeof(from);
		ssize_t len;

		if (poll(&pfd, 1, 2000) <= 0)
			return NULL;
		len = recvfrom(f->fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &flen);
		if (len == 4 && memcmp(buf, "stop", 4) == 0)
			return NULL;
		if (len >= (ssize_t)sizeof(struct bw_hdr))
			fake_datagram(f, buf, (size_t)len, &from);
	}
}

static int fake_start(struct fake *f, unsigned int drop_first)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);

	memset(f, 0, sizeof(*f));
	f->drop_first = drop_first;
	bw_hmac_key_init(&f->hmac, g_key, sizeof(g_key));
	f->fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (f->fd < 0 || bind(f->fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    getsockname(f->fd, (struct sockaddr *)&a, &len) != 0)
		return -1;
	f->port = ntohs(a.sin_port);
	return pthread_create(&f->thread, NULL, fake_main, f);
}

static void fake_stop(struct fake *f)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(f->port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	sendto(fd, "stop", 4, 0, (struct sockaddr *)&a, sizeof(a));
	close(fd);
	pthread_join(f->thread, NULL);
	close(f->fd);
}

static struct bwc *open_signed(const struct fake *f, uint32_t timeout_ms)
{
	struct bwc_opts o;
	int err = 0;

	bwc_opts_init(&o);
	o.port = f->port;
	o.timeout_ms = timeout_ms;
	o.retries = 2;
	o.key_id = T_KEY_ID;
	o.key = g_key;
	o.key_len = sizeof(g_key);
	return bwc_open(&o, &err);
}

static void test_signed_ping(void)
{
	static uint8_t payload[100];
	struct fake f;
	struct bwc *c;

	CU_ASSERT_EQUAL_FATAL(fake_start(&f, 0), 0);
	c = open_signed(&f, 1000);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	for (unsigned int i = 0; i < 3; i++)
		CU_ASSERT_EQUAL(bwc_ping(c, payload, sizeof(payload), NULL), 0);
	bwc_close(c);
	fake_stop(&f);
	CU_ASSERT_EQUAL(f.datagrams, 3);
	CU_ASSERT_EQUAL(f.bad, 0);
	if (f.bad)
		printf("\n  %s", f.why);
	CU_ASSERT(f.ids[0] < f.ids[1] && f.ids[1] < f.ids[2]);
}

/* The first try is lost: the resend is signed again under a new, larger request_id, and its reply
 * is the one the call takes. */
static void test_signed_resend(void)
{
	static uint8_t payload[16];
	struct fake f;
	struct bwc *c;

	CU_ASSERT_EQUAL_FATAL(fake_start(&f, 1), 0);
	c = open_signed(&f, 100);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	CU_ASSERT_EQUAL(bwc_ping(c, payload, sizeof(payload), NULL), 0);
	CU_ASSERT_EQUAL(bwc_last_reply(c)->attempts, 2);
	bwc_close(c);
	fake_stop(&f);
	CU_ASSERT_EQUAL(f.datagrams, 2);
	CU_ASSERT_EQUAL(f.bad, 0);
	CU_ASSERT(f.ids[1] > f.ids[0]);
}

/* Segments each carry a trailer, and 40 bytes less body than unsigned ones. */
static void test_signed_segments(void)
{
	static uint8_t payload[4000];
	uint32_t slice = bwc_segment_slice(1500) - (uint32_t)sizeof(struct bw_auth_trailer);
	struct fake f;
	struct bwc *c;

	CU_ASSERT_EQUAL_FATAL(fake_start(&f, 0), 0);
	c = open_signed(&f, 1000);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	/* the fake answers with the last slice only: the call sees a short echo, and says so */
	CU_ASSERT_EQUAL(bwc_ping(c, payload, sizeof(payload), NULL), -EBADMSG);
	bwc_close(c);
	fake_stop(&f);
	CU_ASSERT_EQUAL(f.bad, 0);
	CU_ASSERT_EQUAL_FATAL(f.datagrams, (sizeof(payload) + slice - 1) / slice);
	for (unsigned int i = 0; i + 1 < f.datagrams; i++) {
		CU_ASSERT_EQUAL(f.body_lens[i], slice);
		CU_ASSERT_EQUAL(f.ids[i], f.ids[0]); /* one message, one request_id */
	}
}

static void key_file(const char *path, const char *text, mode_t mode)
{
	FILE *fp = fopen(path, "w");

	CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
	fputs(text, fp);
	fclose(fp);
	chmod(path, mode);
}

static void test_key_file(void)
{
	char path[64], err[300];
	uint8_t key[BW_AUTH_KEY_MAX];
	uint32_t id = 0, len = 0;
	struct bwc_opts o;
	int e = 0;

	snprintf(path, sizeof(path), "/tmp/bwc-test-keys-%d", (int)getpid());
	key_file(path, "# keys\n3 000102030405060708090a0b0c0d0e0f\n9 ffeeddccbbaa99887766554433221100ff\n", 0600);
	CU_ASSERT_EQUAL(bwc_key_file_read(path, 0, &id, key, &len, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(id, 3);
	CU_ASSERT_EQUAL(len, 16);
	CU_ASSERT_EQUAL(key[15], 0x0f);
	CU_ASSERT_EQUAL(bwc_key_file_read(path, 9, &id, key, &len, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(id, 9);
	CU_ASSERT_EQUAL(len, 17);
	CU_ASSERT_EQUAL(bwc_key_file_read(path, 5, &id, key, &len, err, sizeof(err)), -ENOENT);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "no key 5"));
	chmod(path, 0644);
	CU_ASSERT_EQUAL(bwc_key_file_read(path, 0, &id, key, &len, err, sizeof(err)), -EPERM);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "chmod 600"));
	key_file(path, "3 0001\n", 0600);
	CU_ASSERT_EQUAL(bwc_key_file_read(path, 0, &id, key, &len, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "line 1"));
	unlink(path);
	CU_ASSERT_EQUAL(bwc_key_file_read(path, 0, &id, key, &len, err, sizeof(err)), -ENOENT);

	/* a key too short or missing is refused at open */
	bwc_opts_init(&o);
	o.key_id = 1;
	o.key = key;
	o.key_len = BW_AUTH_KEY_MIN - 1;
	CU_ASSERT_PTR_NULL(bwc_open(&o, &e));
	CU_ASSERT_EQUAL(e, -EINVAL);
	o.key = NULL;
	o.key_len = BW_AUTH_KEY_MIN;
	CU_ASSERT_PTR_NULL(bwc_open(&o, &e));
	CU_ASSERT_EQUAL(e, -EINVAL);
}

int main(int argc, char **argv)
{
	static CU_TestInfo tests[] = {
		{ "signed PING: tag over the addresses, key id, wall-clock request_ids", test_signed_ping },
		{ "a signed resend takes a new request_id", test_signed_resend },
		{ "signed segments: each with its trailer, 40 bytes shorter", test_signed_segments },
		{ "key files: by id or the first, refusals", test_key_file },
		CU_TEST_INFO_NULL,
	};
	static CU_SuiteInfo suites[] = {
		{ .pName = "client: signed requests", .pTests = tests },
		CU_SUITE_INFO_NULL,
	};

	static const struct bw_cunit_alone none[] = { { .arg = NULL } };

	return bw_cunit_main(argc, argv, suites, none);
}
