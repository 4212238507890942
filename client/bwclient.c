/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The calls of the client library over a kernel UDP socket: one request in flight per connection,
 * matched to its reply by request_id, resent on timeout. UDP loses datagrams and the appliance
 * drops what it cannot queue, so every call is a small retry loop rather than a single send/recv.
 * A request larger than one datagram at the MTU goes out as its segments, each encoded into the one
 * transmit buffer as it is sent; a reply in segments is reassembled into a buffer that grows to the
 * largest reply seen (up to max_reply_bytes) and is kept for the next calls. A resend repeats every
 * segment: the protocol has no acknowledgement that would say which of them were lost.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <batchwire/auth.h>

#include "bwclient.h"

/* A segmented reply arrives as a burst of hundreds of datagrams (the echo of a 600,000-byte PING is
 * 419 at MTU 1500) that may all queue before we read the first, and a segmented request leaves as
 * one: 4 MiB holds a thousand or more, at up to 4 KiB of kernel bookkeeping each. */
#define BWC_SOCKBUF_BYTES (4 * 1024 * 1024)

/* Largest UDP payload over IPv4: nothing the kernel hands us is ever truncated. */
#define BWC_RX_BYTES 65536

#define BWC_SHAPES 16 /* models whose reply sizes a connection remembers */

struct bwc {
	int fd;
	uint32_t timeout_ms;
	uint32_t retries;
	uint32_t slice;           /* request body bytes per segment: bwc_segment_slice(mtu) */
	uint32_t pace_us;
	uint32_t max_reply_bytes;
	uint32_t drop_permille;
	uint64_t drop_state;      /* xorshift64: the withheld datagrams of a loss test */
	uint64_t next_request_id;
	bool sign;                /* every datagram carries a trailer under hmac */
	uint32_t key_id;
	struct bw_hmac_key hmac;
	struct bw_auth_pseudo pseudo; /* our address and port, the server's: what the tag binds */
	uint64_t last_signed_id;
	/* what an INFER reply of each model this connection asked MODEL_INFO of is: its unsigned
	 * requests pad themselves to it (the server sends no reply larger than its request) */
	struct {
		uint32_t model_id;
		uint32_t fixed;   /* body bytes whatever the rows: descriptors, unbatched outputs */
		uint32_t per_row;
	} shapes[BWC_SHAPES];
	unsigned int nb_shapes, next_shape;
	uint8_t *tx;              /* BW_DGRAM_MAX bytes: one datagram, or one segment at a time */
	uint8_t *rx;              /* BWC_RX_BYTES bytes */
	uint8_t *reply_buf;       /* a reassembled reply: reply_cap bytes, NULL until one came */
	size_t reply_cap;
	struct bwc_reasm reasm;   /* the segmented reply of the call in progress */
	struct bwc_reply scratch; /* the last call's reply (bwc_last_reply) */
	char last_error[BWC_ERRMSG_MAX + 64];
};

void bwc_opts_init(struct bwc_opts *opts)
{
	opts->host = "127.0.0.1";
	opts->port = BW_UDP_PORT_DEFAULT;
	opts->timeout_ms = BWC_TIMEOUT_MS_DEFAULT;
	opts->retries = BWC_RETRIES_DEFAULT;
	opts->mtu = BWC_MTU_DEFAULT;
	opts->pace_us = BWC_PACE_US_DEFAULT;
	opts->max_reply_bytes = BWC_MAX_REPLY_BYTES_DEFAULT;
	opts->drop_permille = 0;
	opts->key_id = 0;
	opts->key = NULL;
	opts->key_len = 0;
}

static uint64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A random start keeps a restarted client from matching replies meant for its previous run. */
static uint64_t seed_request_id(void)
{
	uint64_t seed = 0;

	if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != (ssize_t)sizeof(seed))
		seed = now_ns() ^ ((uint64_t)getpid() << 32);
	return seed;
}

static int gai_to_errno(int gai)
{
	switch (gai) {
	case EAI_NONAME:
#ifdef EAI_NODATA
	case EAI_NODATA:
#endif
	case EAI_FAIL:
		return -ENXIO;
	case EAI_AGAIN:
		return -EAGAIN;
	case EAI_MEMORY:
		return -ENOMEM;
	case EAI_SYSTEM:
		return errno != 0 ? -errno : -EIO;
	default:
		return -EINVAL;
	}
}

/*
 * Asks for BWC_SOCKBUF_BYTES of one socket buffer. Best effort: the FORCE option, which only
 * CAP_NET_ADMIN may use, goes past net.core.[rw]mem_max; the plain one is capped by it, and a smaller
 * buffer still works, with the losses of a large burst made up by resends.
 */
static void sockbuf_grow(int fd, int force_opt, int opt)
{
	int bytes = BWC_SOCKBUF_BYTES;

	if (setsockopt(fd, SOL_SOCKET, force_opt, &bytes, sizeof(bytes)) == 0)
		return;
	(void)setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof(bytes));
}

/* The addresses a signed datagram's tag binds: ours as connect() chose them, and the server's. The
 * server sees the same unless a NAT lies between: signing does not cross one. */
static int pseudo_fill(struct bwc *c)
{
	struct sockaddr_in local, peer;
	socklen_t len = sizeof(local);

	if (getsockname(c->fd, (struct sockaddr *)&local, &len) < 0)
		return -errno;
	len = sizeof(peer);
	if (getpeername(c->fd, (struct sockaddr *)&peer, &len) < 0)
		return -errno;
	c->pseudo.src_addr = local.sin_addr.s_addr;
	c->pseudo.src_port = local.sin_port;
	c->pseudo.dst_addr = peer.sin_addr.s_addr;
	c->pseudo.dst_port = peer.sin_port;
	return 0;
}

static int resolve_and_connect(struct bwc *c, const struct bwc_opts *opts)
{
	struct addrinfo hints = {
		.ai_family = AF_INET, /* protocol v1 is IPv4 only */
		.ai_socktype = SOCK_DGRAM,
		.ai_protocol = IPPROTO_UDP,
	};
	struct addrinfo *res = NULL;
	char port[8];
	int gai, rc;

	snprintf(port, sizeof(port), "%u", (unsigned)opts->port);
	gai = getaddrinfo(opts->host != NULL ? opts->host : "127.0.0.1", port, &hints, &res);
	if (gai != 0)
		return gai_to_errno(gai);

	c->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_UDP);
	if (c->fd < 0) {
		rc = -errno;
		freeaddrinfo(res);
		return rc;
	}
	sockbuf_grow(c->fd, SO_RCVBUFFORCE, SO_RCVBUF);
	sockbuf_grow(c->fd, SO_SNDBUFFORCE, SO_SNDBUF);

	/* connect() makes the kernel drop datagrams from anyone but the server. */
	rc = connect(c->fd, res->ai_addr, res->ai_addrlen) < 0 ? -errno : 0;
	freeaddrinfo(res);
	if (rc == 0 && c->sign)
		rc = pseudo_fill(c);
	return rc;
}

struct bwc *bwc_open(const struct bwc_opts *opts, int *err)
{
	struct bwc_opts defaults;
	struct bwc *c;
	int rc;

	if (opts == NULL) {
		bwc_opts_init(&defaults);
		opts = &defaults;
	}
	if (opts->port == 0 || opts->mtu < BWC_MTU_MIN || opts->mtu > BWC_MTU_MAX ||
	    opts->max_reply_bytes < sizeof(struct bw_hdr) || opts->drop_permille > 1000) {
		*err = -EINVAL;
		return NULL;
	}
	if (opts->key_id != 0 && (opts->key == NULL || opts->key_len < BW_AUTH_KEY_MIN || opts->key_len > BW_AUTH_KEY_MAX)) {
		*err = -EINVAL;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (c == NULL) {
		*err = -ENOMEM;
		return NULL;
	}
	if (opts->key_id != 0) {
		c->sign = true;
		c->key_id = opts->key_id;
		bw_hmac_key_init(&c->hmac, opts->key, opts->key_len);
	}
	c->fd = -1;
	c->timeout_ms = opts->timeout_ms;
	c->retries = opts->retries;
	c->slice = bwc_segment_slice(opts->mtu) - (c->sign ? (uint32_t)sizeof(struct bw_auth_trailer) : 0);
	c->pace_us = opts->pace_us;
	c->max_reply_bytes = opts->max_reply_bytes;
	c->drop_permille = opts->drop_permille;
	c->drop_state = 0x9e3779b97f4a7c15ull;
	c->next_request_id = seed_request_id();
	c->tx = malloc(BW_DGRAM_MAX);
	c->rx = malloc(BWC_RX_BYTES);
	if (c->tx == NULL || c->rx == NULL) {
		bwc_close(c);
		*err = -ENOMEM;
		return NULL;
	}
	rc = resolve_and_connect(c, opts);
	if (rc < 0) {
		bwc_close(c);
		*err = rc;
		return NULL;
	}
	*err = 0;
	return c;
}

void bwc_close(struct bwc *c)
{
	if (c == NULL)
		return;
	if (c->fd >= 0)
		close(c->fd);
	free(c->tx);
	free(c->rx);
	free(c->reply_buf);
	OPENSSL_cleanse(&c->hmac, sizeof(c->hmac));
	free(c);
}

const char *bwc_last_error(const struct bwc *c)
{
	return c->last_error;
}

#define set_error(c, ...) snprintf((c)->last_error, sizeof((c)->last_error), __VA_ARGS__)

/* One call in progress: what its wait loop and its resends share. */
struct call {
	const struct bwc_request *req;
	struct bwc_reply *reply;
	uint32_t segments;  /* datagrams per attempt: bwc_request_segments at the connection's slice */
	bool refused;       /* an ICMP port unreachable came back */
	bool reassembling;  /* c->reasm holds part of this call's reply, kept across resends */
	int decoded;        /* bwc_decode_reply's verdict on the reply, once it came */
};

/* Sleeps us microseconds, through signals: a pace shorter than asked would defeat its purpose. */
static void pause_us(uint32_t us)
{
	struct timespec left = { .tv_sec = us / 1000000u, .tv_nsec = (long)(us % 1000000u) * 1000 };

	while (nanosleep(&left, &left) < 0 && errno == EINTR)
		;
}

/*
 * Sends every segment of the request once, pace_us apart, each encoded into c->tx in turn from the
 * caller's tensors. A datagram the kernel would not take (no buffer, a pending ICMP error) is a loss
 * like any other: the timeout resends the whole request.
 * \return 0, or a negative errno when the socket cannot send at all (c->last_error says why)
 */
/* Whether a loss test withholds the next datagram: the same sequence on every run. */
static bool drop_next(struct bwc *c)
{
	if (c->drop_permille == 0)
		return false;
	c->drop_state ^= c->drop_state << 13;
	c->drop_state ^= c->drop_state >> 7;
	c->drop_state ^= c->drop_state << 17;
	return c->drop_state % 1000 < c->drop_permille;
}

/* Appends the trailer to the datagram of len bytes in c->tx (room for it: the slice left it).
 * \return the new length. */
static int datagram_sign(struct bwc *c, int len)
{
	struct bw_hdr *hdr = (struct bw_hdr *)c->tx;
	struct bw_auth_trailer *t = (struct bw_auth_trailer *)(c->tx + len);

	hdr->flags |= BW_FLAG_AUTH;
	t->key_id = c->key_id;
	t->reserved = 0;
	bw_auth_tag(&c->hmac, &c->pseudo, hdr, (uint32_t)len + BW_AUTH_COVERED_TRAILER, t->tag);
	return len + (int)sizeof(*t);
}

/* A signed request's request_id: the wall clock in ns, above the last one (the server refuses a
 * request_id it has seen from us, or one far from its own clock). */
static uint64_t signed_request_id(struct bwc *c)
{
	uint64_t id = realtime_ns();

	if (id <= c->last_signed_id)
		id = c->last_signed_id + 1;
	c->last_signed_id = id;
	return id;
}

static int send_request(struct bwc *c, struct call *call)
{
	for (uint32_t i = 0; i < call->segments; i++) {
		int len = bwc_encode_request_segment(call->req, c->slice, i, c->tx, BW_DGRAM_MAX);
		ssize_t sent;
		int rc;

		if (len < 0) {
			set_error(c, "cannot encode segment %u of %u", i, call->segments);
			return len;
		}
		if (c->sign)
			len = datagram_sign(c, len);
		if (i > 0 && c->pace_us > 0)
			pause_us(c->pace_us);
		if (drop_next(c)) {
			call->reply->segments_withheld++;
			continue;
		}
		do
			sent = send(c->fd, c->tx, (size_t)len, 0);
		while (sent < 0 && errno == EINTR);
		if (sent >= 0) {
			call->reply->segments_sent++;
			continue;
		}
		if (errno == ECONNREFUSED) {
			call->refused = true;
		} else if (errno != ENOBUFS && errno != EAGAIN && errno != EWOULDBLOCK) {
			rc = -errno;
			set_error(c, "send: %s", strerror(-rc));
			return rc;
		}
	}
	return 0;
}

/* Makes the reassembly buffer hold bytes, doubling so that a run of growing replies reallocates
 * rarely, and no further than max_reply_bytes unless bytes itself is. Its old contents are not kept:
 * each reply starts afresh. */
static int reply_buf_reserve(struct bwc *c, size_t bytes)
{
	size_t cap = c->reply_cap * 2;
	uint8_t *buf;

	if (bytes <= c->reply_cap)
		return 0;
	if (cap > c->max_reply_bytes)
		cap = c->max_reply_bytes;
	if (cap < bytes)
		cap = bytes;
	buf = malloc(cap);
	if (buf == NULL)
		return -ENOMEM;
	free(c->reply_buf);
	c->reply_buf = buf;
	c->reply_cap = cap;
	return 0;
}

/*
 * Feeds the segment in c->rx (len bytes, of this call's request_id, version and opcode) to the
 * reassembly, which the first one starts: it is sized from that segment's total_body_len.
 * \return 1 when the reply is whole and decoded (call->decoded), 0 when more segments are needed,
 *         or a negative errno with c->last_error set: -EMSGSIZE (above max_reply_bytes), -ENOMEM,
 *         -EBADMSG (a segment that breaks the rules of docs/protocol.md)
 */
static int reply_segment_add(struct bwc *c, struct call *call, size_t len)
{
	const struct bw_hdr *hdr = (const void *)c->rx;
	uint64_t whole = sizeof(*hdr) + (uint64_t)hdr->total_body_len;
	int rc;

	if (!call->reassembling) {
		if (whole > c->max_reply_bytes) {
			set_error(c, "reply of %llu bytes in %u segments is larger than max_reply_bytes (%u)",
				  (unsigned long long)whole, hdr->seg_count, c->max_reply_bytes);
			return -EMSGSIZE;
		}
		if (reply_buf_reserve(c, (size_t)whole) < 0) {
			set_error(c, "no memory for a reply of %llu bytes", (unsigned long long)whole);
			return -ENOMEM;
		}
		bwc_reasm_init(&c->reasm, c->reply_buf, c->reply_cap, call->req->request_id, call->req->opcode);
		call->reassembling = true;
	}
	rc = bwc_reasm_add(&c->reasm, c->rx, len);
	call->reply->segments_received = c->reasm.received;
	if (rc == 0)
		return 0;
	if (rc < 0) {
		set_error(c, "malformed segmented reply: segment %u of %u (%u of %u body bytes) does not fit the "
			  "segments before it", hdr->seg_index, hdr->seg_count, hdr->body_len, hdr->total_body_len);
		return rc;
	}
	call->decoded = bwc_decode_reply(c->reply_buf, (size_t)whole, call->req->opcode, call->reply);
	return 1;
}

/* Waits until deadline_ns for the socket to be readable. \return 1, 0 at the deadline, or -errno */
static int wait_readable(int fd, uint64_t deadline_ns)
{
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		uint64_t now = now_ns();
		int n;

		if (now >= deadline_ns)
			return 0;
		/* Round up: poll(0) would spin through the last partial millisecond. */
		n = poll(&pfd, 1, (int)((deadline_ns - now + 999999u) / 1000000u));
		if (n >= 0)
			return n > 0;
		if (errno != EINTR)
			return -errno;
	}
}

/*
 * Reads datagrams until deadline_ns, or until the reply to the call's request is whole: an unsegmented
 * datagram of its request_id is the reply (an error status among them), a segmented one goes to the
 * reassembly. The socket is drained before each poll, so a burst of segments costs a recv each.
 * \return 1 with call->decoded set when the reply came, 0 at the deadline, or a negative errno with
 *         c->last_error set
 */
static int wait_reply(struct bwc *c, struct call *call, uint64_t deadline_ns)
{
	const struct bw_hdr *hdr = (const void *)c->rx;
	const uint8_t reply_opcode = call->req->opcode | BW_OP_REPLY;

	for (;;) {
		ssize_t len;
		int rc;

		/* Checked per datagram too: a stream of strangers' datagrams must not hold off the resend. */
		if (now_ns() >= deadline_ns)
			return 0;
		/* MSG_TRUNC returns the datagram's real length, so an oversized one is recognised. */
		len = recv(c->fd, c->rx, BWC_RX_BYTES, MSG_DONTWAIT | MSG_TRUNC);
		if (len < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				rc = wait_readable(c->fd, deadline_ns);
				if (rc < 0) {
					set_error(c, "poll: %s", strerror(-rc));
					return rc;
				}
				if (rc == 0)
					return 0;
				continue;
			}
			if (errno == EINTR)
				continue;
			/* An ICMP port unreachable: maybe for an earlier datagram, maybe the server is
			 * restarting. Treat it like a loss; the caller reports it if nothing answers. */
			if (errno == ECONNREFUSED) {
				call->refused = true;
				continue;
			}
			rc = -errno;
			set_error(c, "recv: %s", strerror(-rc));
			return rc;
		}
		if ((size_t)len > BWC_RX_BYTES || (size_t)len < sizeof(*hdr))
			continue;
		/* Not ours: noise, or a late reply to an earlier request (a resend answered twice). */
		if (hdr->magic != BW_PROTO_MAGIC || hdr->request_id != call->req->request_id)
			continue;
		/* A segment of another version or opcode is left to bwc_decode_reply, which names the
		 * mismatch, as it does for an unsegmented one. */
		if (hdr->seg_count > 1 && hdr->version == BW_PROTO_VERSION && hdr->opcode == reply_opcode) {
			rc = reply_segment_add(c, call, (size_t)len);
			if (rc == 0)
				continue;
			return rc;
		}
		call->decoded = bwc_decode_reply(c->rx, (size_t)len, call->req->opcode, call->reply);
		call->reply->segments_received = 1;
		return 1;
	}
}

/*
 * Sends req with a fresh request_id and waits for the reply, resending the whole request (every
 * segment, the same request_id) after each timeout. Returns 0, a positive status, or a negative
 * errno (see bwclient.h).
 */
static int exchange(struct bwc *c, struct bwc_request *req, struct bwc_reply *reply)
{
	struct call call = { .req = req, .reply = reply };
	uint64_t attempt; /* 64-bit: retries may be UINT32_MAX without the loop wrapping */
	uint64_t start_ns;
	int segments, rc = 0;

	c->last_error[0] = '\0';
	reply->rtt_ns = 0;
	reply->attempts = 0;
	reply->segments_sent = 0;
	reply->segments_received = 0;
	reply->segments_withheld = 0;
	req->request_id = c->sign ? signed_request_id(c) : c->next_request_id++;
	segments = bwc_request_segments(req, c->slice);
	if (segments < 0) {
		set_error(c, "%s", segments == -EMSGSIZE ? "request needs more than 65535 segments at this MTU"
							 : "invalid request (tensor dtype, dims, name or size)");
		return segments;
	}
	call.segments = (uint32_t)segments;

	start_ns = now_ns();
	for (attempt = 0; attempt <= c->retries; attempt++) {
		reply->attempts = (uint32_t)(attempt + 1);
		/* a signed resend is a new request to the server, which refuses a request_id twice: the
		 * reply to the last one sent is the one waited for */
		if (c->sign && attempt > 0) {
			req->request_id = signed_request_id(c);
			call.reassembling = false;
		}
		rc = send_request(c, &call);
		if (rc < 0)
			return rc;
		rc = wait_reply(c, &call, now_ns() + (uint64_t)c->timeout_ms * 1000000u);
		if (rc != 0)
			break;
	}
	reply->rtt_ns = now_ns() - start_ns;
	if (rc < 0)
		return rc;
	if (rc == 0) {
		set_error(c, "no reply after %llu attempt%s%s", (unsigned long long)attempt, attempt > 1 ? "s" : "",
			  call.refused ? " (ICMP port unreachable: is the server listening?)" : "");
		return -ETIMEDOUT;
	}
	if (call.decoded < 0) {
		set_error(c, "malformed reply: %s", reply->why != NULL ? reply->why : "?");
		return call.decoded;
	}
	if (reply->status != BW_STATUS_OK) {
		set_error(c, "%s", reply->message);
		return reply->status;
	}
	return 0;
}

/* exchange(), and the reply kept where bwc_last_reply finds it. */
static int transact(struct bwc *c, struct bwc_request *req, struct bwc_reply *reply)
{
	int rc = exchange(c, req, reply);

	if (reply != &c->scratch)
		c->scratch = *reply;
	return rc;
}

const struct bwc_reply *bwc_last_reply(const struct bwc *c)
{
	return &c->scratch;
}

int bwc_ping(struct bwc *c, const void *payload, uint32_t len, uint64_t *rtt_ns)
{
	struct bwc_request req = {
		.opcode = BW_OP_PING,
		.body = payload,
		.body_len = len,
	};
	struct bwc_reply *reply = &c->scratch;
	int rc;

	rc = transact(c, &req, reply);
	if (rtt_ns != NULL)
		*rtt_ns = reply->rtt_ns;
	if (rc != 0)
		return rc;
	if (reply->body_len != len || (len > 0 && memcmp(reply->body, payload, len) != 0)) {
		set_error(c, "ping reply body differs from the request");
		return -EBADMSG;
	}
	return 0;
}

static int shape_find(const struct bwc *c, uint32_t model_id)
{
	for (unsigned int i = 0; i < c->nb_shapes; i++)
		if (c->shapes[i].model_id == model_id)
			return (int)i;
	return -1;
}

/* Remembers what a model's INFER replies are, from its MODEL_INFO. */
static void shape_learn(struct bwc *c, const struct bwc_model_info *info)
{
	uint32_t fixed = bwc_reply_body_bytes(info, 0), one = bwc_reply_body_bytes(info, 1);
	int i = shape_find(c, info->model_id);

	if (info->num_outputs > 0 && one == 0)
		return; /* a dynamic dimension: not known before the reply */
	if (i < 0) {
		i = (int)(c->nb_shapes < BWC_SHAPES ? c->nb_shapes++ : c->next_shape++ % BWC_SHAPES);
		c->shapes[i].model_id = info->model_id;
	}
	c->shapes[i].fixed = fixed;
	c->shapes[i].per_row = one - fixed;
}

/* How far an unsigned INFER pads itself: its reply's size, when known and one datagram holds it. */
static uint32_t infer_pad(const struct bwc *c, uint32_t model_id, const struct bwc_tensor *inputs, uint16_t n)
{
	int i = shape_find(c, model_id);
	uint64_t rows = n > 0 && inputs[0].rank > 0 ? inputs[0].dims[0] : 1, bytes;

	if (c->sign || i < 0)
		return 0;
	bytes = c->shapes[i].fixed + rows * c->shapes[i].per_row;
	return bytes <= c->slice ? (uint32_t)bytes : 0;
}

void bwc_set_next_request_id(struct bwc *c, uint64_t request_id)
{
	c->next_request_id = request_id;
}

int bwc_infer(struct bwc *c, uint32_t model_id, const struct bwc_tensor *inputs, uint16_t n,
	      uint32_t deadline_us, uint8_t priority, struct bwc_reply *reply)
{
	struct bwc_request req = {
		.opcode = BW_OP_INFER,
		.model_id = model_id,
		.deadline_us = deadline_us,
		.priority = priority,
		.tensors = inputs,
		.num_tensors = n,
		.pad_to = infer_pad(c, model_id, inputs, n),
	};
	int rc = transact(c, &req, reply != NULL ? reply : &c->scratch);

	/* refused, unsigned, for a model we know nothing of: perhaps its reply outgrew the request.
	 * Ask what the model answers, and send it once more padded to that. */
	if (rc == BW_STATUS_RESOURCE_EXHAUSTED && !c->sign && shape_find(c, model_id) < 0) {
		struct bwc_model_info *info = malloc(sizeof(*info));
		struct bwc_reply *refusal = malloc(sizeof(*refusal));
		char refusal_error[sizeof(c->last_error)];

		if (info == NULL || refusal == NULL) {
			free(info);
			free(refusal);
			return rc;
		}
		*refusal = c->scratch; /* the refusal, as bwc_last_reply shows it: MODEL_INFO replaces it */
		snprintf(refusal_error, sizeof(refusal_error), "%s", c->last_error);
		if (bwc_model_info(c, model_id, info) == 0)
			req.pad_to = infer_pad(c, model_id, inputs, n);
		free(info);
		if (req.pad_to != 0) {
			free(refusal);
			return transact(c, &req, reply != NULL ? reply : &c->scratch);
		}
		c->scratch = *refusal;
		snprintf(c->last_error, sizeof(c->last_error), "%s", refusal_error);
		free(refusal);
	}
	return rc;
}

static int model_info(struct bwc *c, struct bwc_request *req, struct bwc_model_info *info)
{
	struct bwc_reply *reply = &c->scratch;
	const char *why = NULL;
	int rc;

	rc = transact(c, req, reply);
	if (rc != 0)
		return rc;
	rc = bwc_decode_model_info(reply->body, reply->body_len, info, &why);
	if (rc < 0)
		set_error(c, "malformed MODEL_INFO reply: %s", why);
	else
		shape_learn(c, info);
	return rc;
}

/*
 * MODEL_INFO is padded with zeros to a whole datagram: the server sends no reply larger than its
 * request (docs/protocol.md), and a description always fits one datagram.
 */
static int model_info_padded(struct bwc *c, uint32_t model_id, const char *name, size_t name_len,
			     struct bwc_model_info *info)
{
	uint8_t *body = calloc(1, c->slice);
	struct bwc_request req = {
		.opcode = BW_OP_MODEL_INFO,
		.model_id = model_id,
		.body = body,
		.body_len = c->slice,
	};
	int rc;

	if (body == NULL) {
		set_error(c, "out of memory");
		return -ENOMEM;
	}
	memcpy(body, name, name_len);
	rc = model_info(c, &req, info);
	free(body);
	return rc;
}

int bwc_model_info(struct bwc *c, uint32_t model_id, struct bwc_model_info *info)
{
	return model_info_padded(c, model_id, "", 0, info);
}

int bwc_model_info_by_name(struct bwc *c, const char *name, struct bwc_model_info *info)
{
	size_t len = strlen(name);

	if (len == 0 || len > BW_MAX_NAME_LEN) {
		set_error(c, "model name must be 1..%d bytes", BW_MAX_NAME_LEN);
		return -EINVAL;
	}
	return model_info_padded(c, BW_MODEL_ID_ANY, name, len, info);
}

int bwc_key_file_read(const char *path, uint32_t want_id, uint32_t *id, uint8_t *key, uint32_t *len, char *err,
		      size_t cap)
{
	char line[512];
	unsigned int lineno = 0;
	struct stat st;
	int rc = -ENOENT;
	FILE *f = fopen(path, "re");

	if (f == NULL) {
		rc = -errno;
		snprintf(err, cap, "key file %s: %s", path, strerror(errno));
		return rc;
	}
	if (fstat(fileno(f), &st) == 0 && (st.st_mode & (S_IRWXG | S_IRWXO))) {
		snprintf(err, cap, "key file %s is open to its group or others (mode %04o): chmod 600 %s", path,
			 (unsigned int)(st.st_mode & 07777), path);
		fclose(f);
		return -EPERM;
	}
	while (fgets(line, sizeof(line), f) != NULL) {
		const char *why = NULL;
		size_t n = 0;
		int got;

		lineno++;
		got = bw_key_line_parse(line, id, key, &n, &why);
		if (got < 0) {
			snprintf(err, cap, "key file %s line %u: %s", path, lineno, why);
			rc = -EINVAL;
			break;
		}
		if (got == 1 && (want_id == 0 || *id == want_id)) {
			*len = (uint32_t)n;
			rc = 0;
			break;
		}
	}
	OPENSSL_cleanse(line, sizeof(line));
	fclose(f);
	if (rc == -ENOENT) {
		if (want_id != 0)
			snprintf(err, cap, "key file %s has no key %u", path, want_id);
		else
			snprintf(err, cap, "key file %s holds no key", path);
	}
	return rc;
}
