/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The calls of the client library over a kernel UDP socket: one request in flight per connection,
 * matched to its reply by request_id, resent on timeout. UDP loses datagrams and the appliance
 * drops what it cannot queue, so every call is a small retry loop rather than a single send/recv.
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
#include <time.h>
#include <unistd.h>

#include "bwclient.h"

/* Room for a dozen jumbo datagrams, so a burst of late duplicates cannot push out the reply. */
#define BWC_SOCKBUF_BYTES (256 * 1024)

/* Largest UDP payload over IPv4: nothing the kernel hands us is ever truncated. */
#define BWC_RX_BYTES 65536

struct bwc {
	int fd;
	uint32_t timeout_ms;
	uint32_t retries;
	uint64_t next_request_id;
	uint8_t *tx; /* BW_DGRAM_MAX bytes */
	uint8_t *rx; /* BWC_RX_BYTES bytes */
	struct bwc_reply scratch; /* the reply of calls whose caller does not keep one */
	char last_error[BWC_ERRMSG_MAX + 64];
};

void bwc_opts_init(struct bwc_opts *opts)
{
	opts->host = "127.0.0.1";
	opts->port = BW_UDP_PORT_DEFAULT;
	opts->timeout_ms = BWC_TIMEOUT_MS_DEFAULT;
	opts->retries = BWC_RETRIES_DEFAULT;
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

static int resolve_and_connect(struct bwc *c, const struct bwc_opts *opts)
{
	struct addrinfo hints = {
		.ai_family = AF_INET, /* protocol v1 is IPv4 only */
		.ai_socktype = SOCK_DGRAM,
		.ai_protocol = IPPROTO_UDP,
	};
	struct addrinfo *res = NULL;
	char port[8];
	int bufsz = BWC_SOCKBUF_BYTES;
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
	/* Best effort: the kernel caps these at net.core.[rw]mem_max, and smaller still works. */
	(void)setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &bufsz, sizeof(bufsz));
	(void)setsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &bufsz, sizeof(bufsz));

	/* connect() makes the kernel drop datagrams from anyone but the server. */
	rc = connect(c->fd, res->ai_addr, res->ai_addrlen) < 0 ? -errno : 0;
	freeaddrinfo(res);
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
	if (opts->port == 0) {
		*err = -EINVAL;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (c == NULL) {
		*err = -ENOMEM;
		return NULL;
	}
	c->fd = -1;
	c->timeout_ms = opts->timeout_ms;
	c->retries = opts->retries;
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
	free(c);
}

const char *bwc_last_error(const struct bwc *c)
{
	return c->last_error;
}

#define set_error(c, ...) snprintf((c)->last_error, sizeof((c)->last_error), __VA_ARGS__)

/*
 * Waits until deadline_ns for the datagram answering request_id and decodes it.
 * \return 1 with *decoded set when the reply came, 0 at the deadline, or a negative errno
 */
static int wait_reply(struct bwc *c, uint64_t request_id, uint8_t opcode, uint64_t deadline_ns,
		      struct bwc_reply *reply, int *decoded, bool *refused)
{
	for (;;) {
		struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
		const struct bw_hdr *hdr = (const void *)c->rx;
		uint64_t now = now_ns();
		int timeout_ms, n;
		ssize_t len;

		if (now >= deadline_ns)
			return 0;
		/* Round up: poll(0) would spin through the last partial millisecond. */
		timeout_ms = (int)((deadline_ns - now + 999999u) / 1000000u);
		n = poll(&pfd, 1, timeout_ms);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return 0;

		/* MSG_TRUNC returns the datagram's real length, so an oversized one is recognised. */
		len = recv(c->fd, c->rx, BWC_RX_BYTES, MSG_DONTWAIT | MSG_TRUNC);
		if (len < 0) {
			if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
				continue;
			/* An ICMP port unreachable: maybe for an earlier datagram, maybe the server is
			 * restarting. Treat it like a loss; the caller reports it if nothing answers. */
			if (errno == ECONNREFUSED) {
				*refused = true;
				continue;
			}
			return -errno;
		}
		if ((size_t)len > BWC_RX_BYTES || (size_t)len < sizeof(*hdr))
			continue;
		/* Not ours: noise, or a late reply to an earlier request (a resend answered twice). */
		if (hdr->magic != BW_PROTO_MAGIC || hdr->request_id != request_id)
			continue;
		*decoded = bwc_decode_reply(c->rx, (size_t)len, opcode, reply);
		return 1;
	}
}

/*
 * Sends req with a fresh request_id and waits for the reply, resending the same datagram after
 * each timeout. Returns 0, a positive status, or a negative errno (see bwclient.h).
 */
static int transact(struct bwc *c, struct bwc_request *req, struct bwc_reply *reply)
{
	uint64_t start_ns, deadline_ns;
	bool refused = false;
	uint64_t attempt; /* 64-bit: retries may be UINT32_MAX without the loop wrapping */
	int len, rc, decoded = 0;

	c->last_error[0] = '\0';
	reply->rtt_ns = 0;
	reply->attempts = 0;
	req->request_id = c->next_request_id++;
	len = bwc_encode_request(req, c->tx, BW_DGRAM_MAX);
	if (len < 0) {
		set_error(c, "%s", len == -EMSGSIZE ? "request does not fit one datagram"
						    : "invalid request (tensor dtype, dims, name or size)");
		return len;
	}

	start_ns = now_ns();
	for (attempt = 0; attempt <= c->retries; attempt++) {
		ssize_t sent;

		reply->attempts = (uint32_t)(attempt + 1);
		sent = send(c->fd, c->tx, (size_t)len, 0);
		if (sent < 0) {
			/* A pending ICMP error surfaces on send too; the datagram may not have left. */
			if (errno == ECONNREFUSED) {
				refused = true;
			} else if (errno != EINTR && errno != ENOBUFS && errno != EAGAIN) {
				rc = -errno;
				set_error(c, "send: %s", strerror(-rc));
				return rc;
			}
		}
		deadline_ns = now_ns() + (uint64_t)c->timeout_ms * 1000000u;
		rc = wait_reply(c, req->request_id, req->opcode, deadline_ns, reply, &decoded,
				&refused);
		if (rc < 0) {
			set_error(c, "recv: %s", strerror(-rc));
			return rc;
		}
		if (rc == 1)
			break;
	}
	if (attempt > c->retries) {
		set_error(c, "no reply after %llu attempt%s%s", (unsigned long long)attempt,
			  attempt > 1 ? "s" : "",
			  refused ? " (ICMP port unreachable: is the server listening?)" : "");
		return -ETIMEDOUT;
	}
	reply->rtt_ns = now_ns() - start_ns;
	if (decoded < 0) {
		set_error(c, "malformed reply: %s", reply->why != NULL ? reply->why : "?");
		return decoded;
	}
	if (reply->status != BW_STATUS_OK) {
		set_error(c, "%s", reply->message);
		return reply->status;
	}
	return 0;
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
	};

	return transact(c, &req, reply != NULL ? reply : &c->scratch);
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
	return rc;
}

int bwc_model_info(struct bwc *c, uint32_t model_id, struct bwc_model_info *info)
{
	struct bwc_request req = {
		.opcode = BW_OP_MODEL_INFO,
		.model_id = model_id,
	};

	return model_info(c, &req, info);
}

int bwc_model_info_by_name(struct bwc *c, const char *name, struct bwc_model_info *info)
{
	size_t len = strlen(name);
	struct bwc_request req = {
		.opcode = BW_OP_MODEL_INFO,
		.model_id = BW_MODEL_ID_ANY,
		.body = name,
		.body_len = (uint32_t)len,
	};

	if (len == 0 || len > BW_MAX_NAME_LEN) {
		set_error(c, "model name must be 1..%d bytes", BW_MAX_NAME_LEN);
		return -EINVAL;
	}
	return model_info(c, &req, info);
}
