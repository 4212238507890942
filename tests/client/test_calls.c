/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The calls of the client library with messages larger than one datagram (docs/protocol.md,
 * "Segmentation"), against a fake appliance in this process: a thread on a loopback UDP socket that
 * puts each request back together itself, checking every segment's header and length by hand (the
 * library's bwc_reasm_add is written for replies, and a check that shares the client's code could not
 * catch the client's mistakes), then answers as the case's script says: an echo cut into segments of
 * its own size and order, a lost segment, an error reply after the first segment, a reply above the
 * client's cap. Every count the cases check is exact, and every payload is compared byte for byte.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../bw_cunit.h"

#include "bwclient.h"

#define FAKE_BODY_MAX (1u << 20)     /* the largest request the fake server reassembles */
#define FAKE_IDLE_MS 5000            /* the thread gives up if nobody stops it by then */
#define FAKE_SOCKBUF_BYTES (4 << 20) /* what the client asks for, so neither side drops a burst */
#define CALL_TIMEOUT_MS 500          /* cases that expect no resend: room for a loaded machine */
#define LOSS_TIMEOUT_MS 200          /* cases that expect one: a short wait for it */

struct fake_server;

/* A script's look at one request segment that obeyed the rules; false: it is lost (not reassembled). */
typedef bool fake_segment_fn(struct fake_server *s, const struct bw_hdr *h, const struct sockaddr_in *from);
/* A script's answer to a whole request, in s->first and s->body. */
typedef void fake_request_fn(struct fake_server *s, const struct sockaddr_in *from);

struct fake_server {
	int fd;
	int stop[2]; /* a pipe: the test thread writes to it once the client is done */
	uint16_t port;
	pthread_t thread;
	/* the script */
	uint32_t slice;              /* the client's: every request segment but the last carries this */
	fake_segment_fn *on_segment; /* NULL: every segment is kept */
	fake_request_fn *on_request;
	uint32_t reply_slice;        /* for the echo scripts */
	/* the request in reassembly: the client has one in flight at a time */
	struct bw_hdr first;         /* its first segment's header */
	uint8_t *body;               /* FAKE_BODY_MAX bytes */
	uint8_t seen[BWC_SEGMENTS_MAX / 8 + 1];
	uint32_t have;               /* distinct segments reassembled */
	bool answered;               /* the script answered it: later segments are counted only */
	int script_state;            /* the script's own */
	/* what it saw */
	unsigned datagrams;          /* every datagram */
	unsigned lost;               /* segments the script lost */
	unsigned requests;           /* distinct request_ids */
	unsigned whole;              /* requests reassembled whole */
	size_t largest;              /* the longest datagram */
	uint32_t seg_count;          /* of the last request */
	unsigned broken;             /* datagrams that broke a rule */
	const char *why;             /* the first rule broken */
};

static void fake_break(struct fake_server *s, const char *why)
{
	if (s->broken++ == 0)
		s->why = why;
}

/* Checks one datagram as a server must (docs/protocol.md, "Segmentation"), then reassembles it. */
static void fake_datagram(struct fake_server *s, const uint8_t *dgram, size_t len, const struct sockaddr_in *from)
{
	struct bw_hdr h;
	uint32_t last_len, want;

	s->datagrams++;
	if (len > s->largest)
		s->largest = len;
	if (len < sizeof(h)) {
		fake_break(s, "datagram shorter than the header");
		return;
	}
	memcpy(&h, dgram, sizeof(h));
	if (h.magic != BW_PROTO_MAGIC || h.version != BW_PROTO_VERSION || h.status != 0 || (h.opcode & BW_OP_REPLY) ||
	    h.flags != 0 || len != sizeof(h) + h.body_len) {
		fake_break(s, "header: magic, version, status, opcode, flags or body_len");
		return;
	}
	/* the least count of slices that holds the body: each but the last full, the last not empty */
	if (h.seg_count == 0 || h.seg_index >= h.seg_count || h.total_body_len > FAKE_BODY_MAX ||
	    (uint64_t)s->slice * (h.seg_count - 1u) >= h.total_body_len + (h.total_body_len == 0) ||
	    (uint64_t)s->slice * h.seg_count < h.total_body_len) {
		fake_break(s, "seg_count, seg_index or total_body_len not those of the client's slice");
		return;
	}
	if (s->requests == 0 || h.request_id != s->first.request_id) {
		s->requests++;
		s->first = h;
		s->have = 0;
		s->answered = false;
		s->seg_count = h.seg_count;
		memset(s->seen, 0, sizeof(s->seen));
	}
	if (h.opcode != s->first.opcode || h.model_id != s->first.model_id || h.deadline_us != s->first.deadline_us ||
	    h.priority != s->first.priority || h.num_tensors != s->first.num_tensors ||
	    h.seg_count != s->first.seg_count || h.total_body_len != s->first.total_body_len) {
		fake_break(s, "a segment's message fields differ from the first's");
		return;
	}
	last_len = h.total_body_len - s->slice * (h.seg_count - 1u);
	want = h.seg_index + 1u < h.seg_count ? s->slice : last_len;
	if (h.body_len != want) {
		fake_break(s, "segment body_len is not the slice (or, last, what is left)");
		return;
	}
	if (s->on_segment != NULL && !s->on_segment(s, &h, from)) {
		s->lost++;
		return;
	}
	if (s->seen[h.seg_index / 8] & (1u << (h.seg_index % 8))) {
		/* a resend: the same bytes as the first time */
		if (memcmp(s->body + (size_t)s->slice * h.seg_index, dgram + sizeof(h), h.body_len) != 0)
			fake_break(s, "a resent segment differs from the first copy");
		return;
	}
	memcpy(s->body + (size_t)s->slice * h.seg_index, dgram + sizeof(h), h.body_len);
	s->seen[h.seg_index / 8] |= (uint8_t)(1u << (h.seg_index % 8));
	if (++s->have == h.seg_count && !s->answered) {
		s->whole++;
		s->answered = true;
		s->on_request(s, from);
	}
}

static void *fake_main(void *arg)
{
	struct fake_server *s = arg;
	static uint8_t dgram[65536];

	for (;;) {
		struct pollfd pfd[2] = { { .fd = s->fd, .events = POLLIN }, { .fd = s->stop[0], .events = POLLIN } };
		struct sockaddr_in from;
		socklen_t fromlen = sizeof(from);
		ssize_t len;

		if (poll(pfd, 2, FAKE_IDLE_MS) <= 0)
			break;
		/* the socket first: a stop takes effect only once every datagram sent before it is read */
		if (pfd[0].revents & POLLIN) {
			len = recvfrom(s->fd, dgram, sizeof(dgram), MSG_TRUNC, (struct sockaddr *)&from, &fromlen);
			if (len < 0)
				break;
			fake_datagram(s, dgram, (size_t)len, &from);
			continue;
		}
		if (pfd[1].revents)
			break;
	}
	return NULL;
}

static void sockbuf_grow(int fd, int force_opt, int opt)
{
	int bytes = FAKE_SOCKBUF_BYTES;

	if (setsockopt(fd, SOL_SOCKET, force_opt, &bytes, sizeof(bytes)) != 0)
		(void)setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof(bytes));
}

/* Starts the thread with a script; slice is the client's (its MTU - 68). */
static int fake_start(struct fake_server *s, uint32_t slice, fake_request_fn *on_request, fake_segment_fn *on_segment,
		      uint32_t reply_slice)
{
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(addr);
	uint8_t *body = s->body != NULL ? s->body : malloc(FAKE_BODY_MAX);

	memset(s, 0, sizeof(*s));
	s->body = body;
	s->slice = slice;
	s->on_request = on_request;
	s->on_segment = on_segment;
	s->reply_slice = reply_slice;
	if (s->body == NULL || pipe(s->stop) != 0)
		return -ENOMEM;
	s->fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (s->fd < 0)
		return -errno;
	sockbuf_grow(s->fd, SO_RCVBUFFORCE, SO_RCVBUF);
	sockbuf_grow(s->fd, SO_SNDBUFFORCE, SO_SNDBUF);
	if (bind(s->fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
	    getsockname(s->fd, (struct sockaddr *)&addr, &alen) < 0)
		return -errno;
	s->port = ntohs(addr.sin_port);
	return pthread_create(&s->thread, NULL, fake_main, s) == 0 ? 0 : -EAGAIN;
}

/* Stops the thread once it has read what the client sent; its counters are then final. */
static void fake_stop(struct fake_server *s)
{
	ssize_t n = write(s->stop[1], "x", 1);

	(void)n;
	pthread_join(s->thread, NULL);
	close(s->fd);
	close(s->stop[0]);
	close(s->stop[1]);
	if (s->broken != 0)
		printf("\n    fake server: %u datagrams broke a rule, the first: %s", s->broken, s->why);
}

static void fake_free(struct fake_server *s)
{
	free(s->body);
	s->body = NULL;
}

/* Sends segment idx of the echo of the request in reassembly, cut into slices of slice bytes. */
static void echo_segment_send(struct fake_server *s, const struct sockaddr_in *to, uint32_t slice, uint32_t idx)
{
	static uint8_t dgram[BW_DGRAM_MAX];
	uint32_t total = s->first.total_body_len, count = total == 0 ? 1 : (total + slice - 1) / slice;
	struct bw_hdr h = s->first;
	ssize_t n;

	h.opcode |= BW_OP_REPLY;
	h.seg_index = (uint16_t)idx;
	h.seg_count = (uint16_t)count;
	h.body_len = idx + 1 < count ? slice : total - slice * (count - 1);
	memcpy(dgram, &h, sizeof(h));
	memcpy(dgram + sizeof(h), s->body + (size_t)slice * idx, h.body_len);
	n = sendto(s->fd, dgram, sizeof(h) + h.body_len, 0, (const struct sockaddr *)to, sizeof(*to));
	(void)n;
}

static uint32_t echo_segments(const struct fake_server *s, uint32_t slice)
{
	return s->first.total_body_len == 0 ? 1 : (s->first.total_body_len + slice - 1) / slice;
}

static void echo_in_order(struct fake_server *s, const struct sockaddr_in *from)
{
	for (uint32_t i = 0; i < echo_segments(s, s->reply_slice); i++)
		echo_segment_send(s, from, s->reply_slice, i);
}

static void echo_reversed(struct fake_server *s, const struct sockaddr_in *from)
{
	for (uint32_t i = echo_segments(s, s->reply_slice); i-- > 0;)
		echo_segment_send(s, from, s->reply_slice, i);
}

/* Distinct, position-dependent bytes: a slice copied to the wrong offset cannot go unnoticed. */
static void fill_payload(uint8_t *p, uint32_t len, uint32_t seed)
{
	for (uint32_t i = 0; i < len; i++)
		p[i] = (uint8_t)((i + seed) * 2654435761u >> 24);
}

static struct bwc *open_client(uint16_t port, uint32_t mtu, uint32_t timeout_ms, uint32_t retries)
{
	struct bwc_opts o;
	int err = 0;
	struct bwc *c;

	bwc_opts_init(&o);
	o.port = port;
	o.mtu = mtu;
	o.timeout_ms = timeout_ms;
	o.retries = retries;
	c = bwc_open(&o, &err);
	CU_ASSERT_EQUAL(err, 0);
	return c;
}

/* One ping of len bytes that must come back whole. \return bwc_ping's result */
static int ping_bytes(struct bwc *c, uint32_t len, uint32_t seed)
{
	uint8_t *payload = malloc(len > 0 ? len : 1);
	int rc;

	CU_ASSERT_PTR_NOT_NULL_FATAL(payload);
	fill_payload(payload, len, seed);
	rc = bwc_ping(c, payload, len, NULL);
	free(payload);
	return rc;
}

/* Checks the last call's attempts and datagram counts; names the case where one is wrong, since
 * CUnit's line would be this function's. */
static void expect_counts(const struct bwc *c, const char *what, uint32_t attempts, uint32_t sent, uint32_t received)
{
	const struct bwc_reply *r = bwc_last_reply(c);

	CU_ASSERT_EQUAL(r->attempts, attempts);
	CU_ASSERT_EQUAL(r->segments_sent, sent);
	CU_ASSERT_EQUAL(r->segments_received, received);
	if (r->attempts != attempts || r->segments_sent != sent || r->segments_received != received)
		printf("\n    %s: %u attempts, %u segments sent, %u received; expected %u, %u, %u", what, r->attempts,
		       r->segments_sent, r->segments_received, attempts, sent, received);
}

/* The 600 KB case's bursts (419 request and 600 reply datagrams back to back) need socket buffers
 * that hold them whole, as both sides ask for: where the kernel grants less (no CAP_NET_ADMIN and a
 * small net.core.rmem_max), a burst may lose datagrams to a busy machine, and the resends that make
 * them up would change the exact counts the case checks. 4 KiB of kernel bookkeeping per datagram at
 * most. */
#define BURST_DATAGRAMS 600
static const char *burst_cannot_run(void)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0), granted = 0;
	socklen_t len = sizeof(granted);

	if (fd < 0)
		return "no UDP socket";
	sockbuf_grow(fd, SO_RCVBUFFORCE, SO_RCVBUF);
	(void)getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &granted, &len);
	close(fd);
	if (granted < BURST_DATAGRAMS * 4096)
		return "socket receive buffers are capped below 2.4 MB (net.core.rmem_max, not root): a "
		       "600-datagram burst may lose datagrams";
	return NULL;
}

/*
 * A 600,000-byte PING at MTU 1500: 419 segments of 1432 bytes, the last 1424, all of the same
 * request_id, each no larger than 1472 bytes on the wire; the echo comes back in 600 segments of 1000
 * bytes (a slice the server chose), last first, and bwc_ping finds it equal to the payload.
 */
static void test_ping_600k(void)
{
	static struct fake_server s;
	const struct bwc_reply *r;
	struct bwc *c;

	CU_ASSERT_EQUAL_FATAL(fake_start(&s, 1432, echo_reversed, NULL, 1000), 0);
	c = open_client(s.port, 1500, CALL_TIMEOUT_MS, 1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	CU_ASSERT_EQUAL(ping_bytes(c, 600000, 1), 0);
	CU_ASSERT_STRING_EQUAL(bwc_last_error(c), "");
	expect_counts(c, "600,000 bytes", 1, 419, 600);
	r = bwc_last_reply(c);
	CU_ASSERT_EQUAL(r->body_len, 600000);
	CU_ASSERT(r->rtt_ns > 0);
	/* the reassembly buffer is kept, and a smaller segmented reply after it is right too */
	CU_ASSERT_EQUAL(ping_bytes(c, 5000, 2), 0);
	expect_counts(c, "5,000 bytes after 600,000", 1, 4, 5);
	fake_stop(&s);
	CU_ASSERT_EQUAL(s.broken, 0);
	CU_ASSERT_EQUAL(s.datagrams, 419 + 4);
	CU_ASSERT_EQUAL(s.requests, 2);
	CU_ASSERT_EQUAL(s.whole, 2);
	CU_ASSERT_EQUAL(s.largest, 1472);
	bwc_close(c);
	fake_free(&s);
}

/* Loses the first copy of segment 2 of the first request. */
static bool lose_third_segment_once(struct fake_server *s, const struct bw_hdr *h, const struct sockaddr_in *from)
{
	(void)from;
	if (h->seg_index == 2 && s->script_state == 0) {
		s->script_state = 1;
		return false;
	}
	return true;
}

/*
 * The first try of a 20,000-byte PING (14 segments) loses its third segment: no reply, so after the
 * timeout the call sends all 14 again with the same request_id and the same bytes; the server
 * completes the request from the resend and echoes it in 14 segments.
 */
static void test_resend_after_lost_segment(void)
{
	static struct fake_server s;
	struct bwc *c;

	CU_ASSERT_EQUAL_FATAL(fake_start(&s, 1432, echo_in_order, lose_third_segment_once, 1432), 0);
	c = open_client(s.port, 1500, LOSS_TIMEOUT_MS, 2);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	CU_ASSERT_EQUAL(ping_bytes(c, 20000, 3), 0);
	expect_counts(c, "a lost segment", 2, 28, 14);
	CU_ASSERT(bwc_last_reply(c)->rtt_ns >= (uint64_t)LOSS_TIMEOUT_MS * 1000000u);
	fake_stop(&s);
	CU_ASSERT_EQUAL(s.broken, 0); /* every resent segment equal to its first copy */
	CU_ASSERT_EQUAL(s.datagrams, 28);
	CU_ASSERT_EQUAL(s.lost, 1);
	CU_ASSERT_EQUAL(s.requests, 1); /* one request_id for both tries */
	CU_ASSERT_EQUAL(s.seg_count, 14);
	CU_ASSERT_EQUAL(s.whole, 1);
	bwc_close(c);
	fake_free(&s);
}

/* Echoes all but the last 2 segments of the reply; when the resend's first segment arrives, the 2
 * missing ones and a duplicate of the first. */
static void echo_all_but_two(struct fake_server *s, const struct sockaddr_in *from)
{
	for (uint32_t i = 0; i + 2 < echo_segments(s, s->reply_slice); i++)
		echo_segment_send(s, from, s->reply_slice, i);
}

static bool send_missing_on_resend(struct fake_server *s, const struct bw_hdr *h, const struct sockaddr_in *from)
{
	uint32_t count = echo_segments(s, s->reply_slice);

	if (s->answered && h->seg_index == 0 && s->script_state++ == 0) {
		echo_segment_send(s, from, s->reply_slice, 0);
		echo_segment_send(s, from, s->reply_slice, count - 2);
		echo_segment_send(s, from, s->reply_slice, count - 1);
	}
	return true;
}

/*
 * Segments of the reply that came before a resend still count: the first try's reply lacks its last
 * 2 segments, the resend brings only those 2 (and a duplicate), and the call puts the reply together
 * from both (a call that started the reassembly afresh would time out: retries 1).
 */
static void test_reply_kept_across_resend(void)
{
	static struct fake_server s;
	struct bwc *c;

	CU_ASSERT_EQUAL_FATAL(fake_start(&s, 1432, echo_all_but_two, send_missing_on_resend, 1000), 0);
	c = open_client(s.port, 1500, LOSS_TIMEOUT_MS, 1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	CU_ASSERT_EQUAL(ping_bytes(c, 20000, 4), 0);
	expect_counts(c, "reply kept across a resend", 2, 28, 20); /* distinct: the duplicate is not counted */
	fake_stop(&s);
	CU_ASSERT_EQUAL(s.broken, 0);
	CU_ASSERT_EQUAL(s.datagrams, 28);
	CU_ASSERT_EQUAL(s.script_state, 1); /* the 2 missing segments went once */
	CU_ASSERT_EQUAL(s.requests, 1);
	bwc_close(c);
	fake_free(&s);
}

#define CAP_MESSAGE "message of 30000 bytes is above this server's 16384-byte reassembly cap"

/* Answers the first segment of a request with an unsegmented RESOURCE_EXHAUSTED and loses the rest. */
static bool refuse_at_first_segment(struct fake_server *s, const struct bw_hdr *h, const struct sockaddr_in *from)
{
	uint8_t dgram[sizeof(struct bw_hdr) + sizeof(CAP_MESSAGE)];
	struct bw_hdr reply = *h;
	ssize_t n;

	if (s->script_state++ > 0)
		return false;
	reply.opcode |= BW_OP_REPLY;
	reply.status = BW_STATUS_RESOURCE_EXHAUSTED;
	reply.seg_index = 0;
	reply.seg_count = 1;
	reply.body_len = reply.total_body_len = sizeof(CAP_MESSAGE) - 1;
	memcpy(dgram, &reply, sizeof(reply));
	memcpy(dgram + sizeof(reply), CAP_MESSAGE, sizeof(CAP_MESSAGE) - 1);
	n = sendto(s->fd, dgram, sizeof(dgram) - 1, 0, (const struct sockaddr *)from, sizeof(*from));
	(void)n;
	return false;
}

static void never_whole(struct fake_server *s, const struct sockaddr_in *from)
{
	(void)from;
	fake_break(s, "a request the script refused was reassembled");
}

/* An error reply after the first segment: the call still sends the other 20, then reads it, and
 * returns its status with its message; no resend. */
static void test_error_after_first_segment(void)
{
	static struct fake_server s;
	const struct bwc_reply *r;
	struct bwc *c;

	CU_ASSERT_EQUAL_FATAL(fake_start(&s, 1432, never_whole, refuse_at_first_segment, 0), 0);
	c = open_client(s.port, 1500, CALL_TIMEOUT_MS, 2);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	CU_ASSERT_EQUAL(ping_bytes(c, 30000, 5), BW_STATUS_RESOURCE_EXHAUSTED);
	CU_ASSERT_STRING_EQUAL(bwc_last_error(c), CAP_MESSAGE);
	r = bwc_last_reply(c);
	CU_ASSERT_STRING_EQUAL(r->message, CAP_MESSAGE);
	CU_ASSERT_EQUAL(r->status, BW_STATUS_RESOURCE_EXHAUSTED);
	expect_counts(c, "an error after the first segment", 1, 21, 1);
	fake_stop(&s);
	CU_ASSERT_EQUAL(s.broken, 0);
	CU_ASSERT_EQUAL(s.datagrams, 21);
	CU_ASSERT_EQUAL(s.lost, 21);
	bwc_close(c);
	fake_free(&s);
}

/*
 * A segmented reply above max_reply_bytes (40 + 10,000 here) ends the call at its first segment with
 * -EMSGSIZE and says why, without a resend; the connection then works: a reply of exactly the cap is
 * accepted, and so is a small one, the rest of the refused reply ignored as stale.
 */
static void test_reply_above_cap(void)
{
	static struct fake_server s;
	struct bwc_opts o;
	struct bwc *c;
	int err = 0;

	CU_ASSERT_EQUAL_FATAL(fake_start(&s, 1432, echo_in_order, NULL, 1432), 0);
	bwc_opts_init(&o);
	o.port = s.port;
	o.timeout_ms = CALL_TIMEOUT_MS;
	o.retries = 2;
	o.max_reply_bytes = 40 + 10000;
	c = bwc_open(&o, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	CU_ASSERT_EQUAL(ping_bytes(c, 10001, 6), -EMSGSIZE);
	CU_ASSERT(strstr(bwc_last_error(c), "10041 bytes") != NULL);
	CU_ASSERT(strstr(bwc_last_error(c), "max_reply_bytes (10040)") != NULL);
	expect_counts(c, "a reply above the cap", 1, 7, 0);
	CU_ASSERT_EQUAL(ping_bytes(c, 10000, 7), 0);
	expect_counts(c, "a reply of the cap", 1, 7, 7);
	CU_ASSERT_EQUAL(ping_bytes(c, 100, 8), 0);
	expect_counts(c, "a small reply after a refused one", 1, 1, 1);
	fake_stop(&s);
	CU_ASSERT_EQUAL(s.broken, 0);
	CU_ASSERT_EQUAL(s.whole, 3);
	bwc_close(c);
	fake_free(&s);
}

/*
 * Segment sizes at the MTU's limits: 30,000 bytes are 4 segments of 8932 at MTU 9000 (the last
 * 3204, a datagram of 8972 at most) and 60 of 508 at MTU 576 (the last 28, 548 bytes at most); a
 * body of exactly one slice is one unsegmented datagram, one byte more two segments. The echo of the
 * MTU-576 one comes back in one datagram: a server may answer a segmented request unsegmented.
 */
static void test_mtu_limits(void)
{
	static struct fake_server s;
	static const struct { uint32_t mtu, slice, body, segments, largest, reply_slice, replies; } cases[] = {
		{ 9000, 8932, 30000, 4, 8972, 3000, 10 },
		{ 576, 508, 30000, 60, 548, 1000, 30 },
		{ 576, 508, 5000, 10, 548, 8932, 1 },
		{ 576, 508, 508, 1, 548, 8932, 1 },
		{ 576, 508, 509, 2, 548, 8932, 1 },
		{ 9000, 8932, 8932, 1, 8972, 8932, 1 },
		{ 9000, 8932, 8933, 2, 8972, 8932, 2 },
	};

	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char what[64];
		struct bwc *c;

		CU_ASSERT_EQUAL_FATAL(fake_start(&s, cases[i].slice, echo_reversed, NULL, cases[i].reply_slice), 0);
		c = open_client(s.port, cases[i].mtu, CALL_TIMEOUT_MS, 1);
		CU_ASSERT_PTR_NOT_NULL_FATAL(c);
		snprintf(what, sizeof(what), "MTU %u, %u bytes", cases[i].mtu, cases[i].body);
		CU_ASSERT_EQUAL(ping_bytes(c, cases[i].body, i), 0);
		expect_counts(c, what, 1, cases[i].segments, cases[i].replies);
		fake_stop(&s);
		CU_ASSERT_EQUAL(s.broken, 0);
		CU_ASSERT_EQUAL(s.datagrams, cases[i].segments);
		CU_ASSERT_EQUAL(s.seg_count, cases[i].segments);
		CU_ASSERT_EQUAL(s.largest, cases[i].segments > 1 ? cases[i].largest : 40 + cases[i].body);
		if (s.datagrams != cases[i].segments || s.largest != (cases[i].segments > 1 ? cases[i].largest : 40 + cases[i].body))
			printf("\n    %s: the server read %u datagrams, the longest %zu bytes", what, s.datagrams, s.largest);
		bwc_close(c);
	}
	fake_free(&s);
}

/*
 * An INFER of a 49,152-byte float tensor named "image": its 49,208-byte body in 35 segments, the
 * echo in 42 of 1200 bytes, decoded into a tensor view of the reassembly buffer that holds the input's
 * bytes; bwc_last_reply is a copy of the caller's reply.
 */
static void test_infer_segmented(void)
{
	static struct fake_server s;
	static struct bwc_reply reply;
	static float data[3 * 64 * 64];
	struct bwc_tensor t = { .index = BW_TENSOR_BY_NAME, .dtype = BW_DTYPE_FLOAT, .rank = 4, .dims = { 1, 3, 64, 64 },
				.name = "image", .data = data, .data_len = sizeof(data) };
	const struct bwc_reply *last;
	struct bwc *c;

	for (unsigned i = 0; i < sizeof(data) / sizeof(data[0]); i++)
		data[i] = (float)i * 0.5f - 1000.0f;
	CU_ASSERT_EQUAL_FATAL(fake_start(&s, 1432, echo_in_order, NULL, 1200), 0);
	c = open_client(s.port, 1500, CALL_TIMEOUT_MS, 1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	CU_ASSERT_EQUAL(bwc_infer(c, 7, &t, 1, 2500, 1, &reply), 0);
	CU_ASSERT_EQUAL(reply.attempts, 1);
	CU_ASSERT_EQUAL(reply.segments_sent, 35);
	CU_ASSERT_EQUAL(reply.segments_received, 42);
	expect_counts(c, "INFER, in bwc_last_reply's copy", 1, 35, 42);
	CU_ASSERT_EQUAL(reply.model_id, 7);
	CU_ASSERT_EQUAL_FATAL(reply.num_tensors, 1);
	CU_ASSERT_EQUAL(reply.tensors[0].desc->data_len, sizeof(data));
	CU_ASSERT_EQUAL(reply.tensors[0].desc->dims[2], 64);
	CU_ASSERT(memcmp(reply.tensors[0].name, "image", 5) == 0);
	CU_ASSERT(memcmp(reply.tensors[0].data, data, sizeof(data)) == 0);
	last = bwc_last_reply(c);
	CU_ASSERT_PTR_EQUAL(last->tensors[0].data, reply.tensors[0].data);
	fake_stop(&s);
	CU_ASSERT_EQUAL(s.broken, 0);
	CU_ASSERT_EQUAL(s.first.model_id, 7);
	CU_ASSERT_EQUAL(s.first.deadline_us, 2500);
	CU_ASSERT_EQUAL(s.first.priority, 1);
	CU_ASSERT_EQUAL(s.first.num_tensors, 1);
	CU_ASSERT_EQUAL(s.first.total_body_len, 48 + 8 + sizeof(data));
	CU_ASSERT_EQUAL(s.datagrams, 35);
	bwc_close(c);
	fake_free(&s);
}

/*
 * pace_us: 3 pauses between the 4 segments of a 5,000-byte PING at MTU 1500, so the call lasts at
 * least 3 * 20 ms (a lower bound that sleeping guarantees, not a measure of speed).
 */
static void test_pace(void)
{
	static struct fake_server s;
	struct bwc_opts o;
	uint64_t rtt_ns = 0;
	uint8_t payload[5000];
	struct bwc *c;
	int err = 0;

	CU_ASSERT_EQUAL_FATAL(fake_start(&s, 1432, echo_in_order, NULL, 1432), 0);
	bwc_opts_init(&o);
	o.port = s.port;
	o.timeout_ms = CALL_TIMEOUT_MS;
	o.retries = 1;
	o.pace_us = 20000;
	c = bwc_open(&o, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	fill_payload(payload, sizeof(payload), 9);
	CU_ASSERT_EQUAL(bwc_ping(c, payload, sizeof(payload), &rtt_ns), 0);
	CU_ASSERT(rtt_ns >= 3u * 20000u * 1000u);
	expect_counts(c, "paced", 1, 4, 4);
	fake_stop(&s);
	CU_ASSERT_EQUAL(s.broken, 0);
	CU_ASSERT_EQUAL(s.datagrams, 4);
	bwc_close(c);
	fake_free(&s);
}

/* drop_permille withholds request datagrams before they leave, on a fixed sequence: what is sent
 * plus what is withheld is every segment of every attempt, and the server sees exactly what was sent. */
static void test_drop_permille(void)
{
	static struct fake_server s;
	const struct bwc_reply *r;
	struct bwc_opts o;
	struct bwc *c;
	uint32_t sent;
	int err = 0, rc;

	CU_ASSERT_EQUAL_FATAL(fake_start(&s, 1432, echo_in_order, NULL, 1432), 0);
	bwc_opts_init(&o);
	o.port = s.port;
	o.timeout_ms = LOSS_TIMEOUT_MS;
	o.retries = 5;
	o.drop_permille = 1001;
	CU_ASSERT_PTR_NULL(bwc_open(&o, &err));
	CU_ASSERT_EQUAL(err, -EINVAL);
	o.drop_permille = 1000; /* everything withheld: nothing reaches the server, every try times out */
	c = bwc_open(&o, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	CU_ASSERT_EQUAL(ping_bytes(c, 20000, 5), -ETIMEDOUT);
	r = bwc_last_reply(c);
	CU_ASSERT_EQUAL(r->attempts, 6);
	CU_ASSERT_EQUAL(r->segments_sent, 0);
	CU_ASSERT_EQUAL(r->segments_withheld, 6 * 14);
	bwc_close(c);
	o.drop_permille = 200; /* some withheld: resends until one try arrives whole */
	o.retries = 50;
	c = bwc_open(&o, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	rc = ping_bytes(c, 5000, 6);
	CU_ASSERT_EQUAL(rc, 0);
	r = bwc_last_reply(c);
	CU_ASSERT(r->segments_withheld > 0 || r->attempts == 1);
	CU_ASSERT_EQUAL(r->segments_sent + r->segments_withheld, r->attempts * 4);
	sent = r->segments_sent; /* r is the connection's: gone with it */
	bwc_close(c);
	fake_stop(&s);
	CU_ASSERT_EQUAL(s.datagrams, sent);
	CU_ASSERT_EQUAL(s.broken, 0);
	fake_free(&s);
}

static void test_open_options(void)
{
	static const uint32_t refused[] = { 0, 100, 575, 9001 }, accepted[] = { 576, 9000 };
	struct bwc_opts o;
	struct bwc *c;
	int err = 0;

	bwc_opts_init(&o);
	CU_ASSERT_EQUAL(o.mtu, 1500);
	CU_ASSERT_EQUAL(o.pace_us, 0);
	CU_ASSERT_EQUAL(o.max_reply_bytes, 16u * 1024u * 1024u + 40u);
	CU_ASSERT_EQUAL(bwc_segment_slice(1500), 1432);
	for (unsigned i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		o.mtu = refused[i];
		err = 0;
		CU_ASSERT_PTR_NULL(bwc_open(&o, &err));
		CU_ASSERT_EQUAL(err, -EINVAL);
	}
	o.mtu = 1500;
	o.max_reply_bytes = 39;
	CU_ASSERT_PTR_NULL(bwc_open(&o, &err));
	CU_ASSERT_EQUAL(err, -EINVAL);
	o.max_reply_bytes = 40;
	for (unsigned i = 0; i < sizeof(accepted) / sizeof(accepted[0]); i++) {
		o.mtu = accepted[i];
		c = bwc_open(&o, &err);
		CU_ASSERT_PTR_NOT_NULL(c);
		CU_ASSERT_EQUAL(err, 0);
		bwc_close(c);
	}
}

int main(int argc, char **argv)
{
	static CU_TestInfo tests[] = {
		{ "a lost segment: the whole request again, same request_id", test_resend_after_lost_segment },
		{ "reply segments from before a resend still count", test_reply_kept_across_resend },
		{ "an error reply after the first segment", test_error_after_first_segment },
		{ "a segmented reply above max_reply_bytes: -EMSGSIZE", test_reply_above_cap },
		{ "segment sizes at MTU 9000 and 576", test_mtu_limits },
		{ "INFER: segmented request and reply", test_infer_segmented },
		{ "pace_us between segments", test_pace },
		{ "open: mtu and max_reply_bytes", test_open_options },
		{ "drop_permille withholds request datagrams", test_drop_permille },
		CU_TEST_INFO_NULL,
	};
	static CU_SuiteInfo suites[] = {
		{ .pName = "client calls, segmented", .pTests = tests },
		CU_SUITE_INFO_NULL,
	};
	static const struct bw_cunit_alone alone[] = {
		{ .arg = "600k", .name = "a 600 KB PING in 419 segments, its echo in 600 reversed",
		  .test = test_ping_600k, .cannot_run = burst_cannot_run },
		{ .arg = NULL },
	};

	return bw_cunit_main(argc, argv, suites, alone);
}
