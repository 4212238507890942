/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bwclient: the batchwire client library. Kernel UDP sockets and libc only, no DPDK, so any Linux
 * host can talk to the appliance. Two layers:
 *   - a pure codec (bwc_encode_request, bwc_encode_request_segment for a body larger than one
 *     datagram, bwc_reasm_add for a reply that came in segments, bwc_decode_reply,
 *     bwc_decode_model_info) that touches no socket, so the tests can check every byte;
 *   - calls (bwc_ping, bwc_infer, bwc_model_info*) that send one request and wait for its reply,
 *     resending on timeout. A request whose body is larger than one datagram at the connection's MTU
 *     goes out as its segments (docs/protocol.md, "Segmentation"), cut as it is sent, never built
 *     whole; a reply that comes back in segments is put back together before it is decoded.
 *
 * Return convention of the calls: 0 for an OK reply; a positive enum bw_status when the server
 * answered with an error status (its message is in bwc_last_error()); -ETIMEDOUT when no reply
 * came after all retries; another negative errno for a local failure or a malformed reply.
 * The library never prints.
 *
 * A struct bwc is not thread-safe: use one per thread.
 */
#ifndef BATCHWIRE_BWCLIENT_H
#define BATCHWIRE_BWCLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <batchwire/status.h>
#include <batchwire/wire.h>

#define BWC_TIMEOUT_MS_DEFAULT 1000
#define BWC_RETRIES_DEFAULT 3

/* The IP MTU the calls cut requests for: every datagram they send fits it. 576 is the least every
 * IPv4 host must accept; 9000 the jumbo frames the appliance supports. */
#define BWC_MTU_DEFAULT 1500
#define BWC_MTU_MIN 576
#define BWC_MTU_MAX BW_MTU_MAX

/* Segments back to back unless a path that drops bursts asks for a pause. */
#define BWC_PACE_US_DEFAULT 0

/* The largest reply a call accepts, header and body together, once reassembled: 16 MiB of body. */
#define BWC_MAX_REPLY_BYTES_DEFAULT (16u * 1024u * 1024u + (uint32_t)sizeof(struct bw_hdr))

/* Room for a server's error message; the protocol promises at most 200 bytes. */
#define BWC_ERRMSG_MAX 255

/* Segments of one message at most (seg_count is 16 bits). */
#define BWC_SEGMENTS_MAX 65535u

/* Largest body of an unsegmented message. */
#define BWC_BODY_MAX ((uint32_t)(BW_DGRAM_MAX - sizeof(struct bw_hdr)))

/* Most batch sizes a MODEL_INFO reply can list in one datagram (each is a uint32_t). */
#define BWC_MODEL_BATCH_SIZES_MAX ((BWC_BODY_MAX - (uint32_t)sizeof(struct bw_model_info)) / 4u)

/* Fill with bwc_opts_init, then change what differs: a zeroed struct is refused (mtu 0). */
struct bwc_opts {
	const char *host;    /* IPv4 dotted address or host name; NULL means 127.0.0.1 */
	uint16_t port;       /* BW_UDP_PORT_DEFAULT */
	uint32_t timeout_ms; /* wait for a reply this long before resending; BWC_TIMEOUT_MS_DEFAULT */
	uint32_t retries;    /* resends of the whole request after the first try; BWC_RETRIES_DEFAULT */
	uint32_t mtu;        /* BWC_MTU_MIN..BWC_MTU_MAX, BWC_MTU_DEFAULT: a request body above
			      * bwc_segment_slice(mtu) bytes is sent in segments of that many */
	uint32_t pace_us;    /* pause between two segments of a request; BWC_PACE_US_DEFAULT (none) */
	uint32_t max_reply_bytes; /* largest reassembled reply, header included, at least 40;
				   * BWC_MAX_REPLY_BYTES_DEFAULT. An unsegmented reply (at most
				   * BW_DGRAM_MAX bytes) is always accepted. */
	uint32_t drop_permille;   /* for loss tests on paths that cannot drop (no netem): each request
				   * datagram is withheld with this probability in 1/1000, a fixed
				   * pseudo-random sequence per connection; 0 (default): none */
	/* Signing (docs/protocol.md "Authentication trailer"): with key_id set, every datagram carries a
	 * trailer under key (key_len bytes, BW_AUTH_KEY_MIN..BW_AUTH_KEY_MAX), each request's request_id
	 * is this host's CLOCK_REALTIME in ns (kept increasing), and a resend takes a new one. Segments
	 * then carry 40 bytes less body. bwc_open copies the key. */
	uint32_t key_id;          /* 0 (default): requests are not signed */
	const uint8_t *key;
	uint32_t key_len;
};

/**
 * Reads a key from a key file in the server's format ("KEY_ID HEX_SECRET" lines, '#' comments): the
 * key with id want_id, or the file's first key when want_id is 0. The file must not be open to its
 * group or others, as the server demands of its own.
 * \return 0 with *id, key and *len set, or a negative errno with one line in err.
 */
int bwc_key_file_read(const char *path, uint32_t want_id, uint32_t *id, uint8_t *key, uint32_t *len, char *err,
		      size_t cap);

/** \return the body bytes of one segment at an IP MTU: what is left after IPv4 (20), UDP (8) and the
 *          header (40) */
static inline uint32_t bwc_segment_slice(uint32_t mtu)
{
	return mtu - 20u - 8u - (uint32_t)sizeof(struct bw_hdr);
}

/* One tensor to send. The encoder copies it; nothing is kept. */
struct bwc_tensor {
	uint16_t index;             /* input index, or BW_TENSOR_BY_NAME */
	uint8_t dtype;              /* enum bw_dtype */
	uint8_t rank;               /* 0..BW_MAX_RANK */
	uint32_t dims[BW_MAX_RANK]; /* dims[0..rank-1] */
	const char *name;           /* NUL-terminated, or NULL; required with BW_TENSOR_BY_NAME */
	const void *data;           /* data_len bytes, row-major, little-endian */
	uint32_t data_len;          /* must equal product(dims) * bw_dtype_size(dtype) */
};

/* What a request carries, in one datagram (bwc_encode_request) or several (bwc_encode_request_segment):
 * tensors, or a raw body (PING, MODEL_INFO by name), never both. */
struct bwc_request {
	uint8_t opcode; /* enum bw_opcode */
	uint8_t priority;
	uint16_t num_tensors;
	uint32_t model_id;
	uint32_t deadline_us;
	uint64_t request_id;
	const struct bwc_tensor *tensors;
	const void *body;
	uint32_t body_len;
	uint32_t pad_to;  /* one datagram: at least this many bytes after the header, zeros after the
			   * body (flag PADDED); an unsigned request's reply may be no larger than
			   * that (docs/protocol.md); 0: none */
};

/* A decoded reply. body, and the tensor views of an OK INFER reply, point into the buffer that was
 * decoded: for the calls that is the connection's receive buffer (or, for a reply that came in
 * segments, its reassembly buffer), valid until its next call. */
struct bwc_reply {
	uint16_t status; /* enum bw_status; other values come from a newer server */
	uint8_t opcode;  /* the request opcode, without BW_OP_REPLY */
	uint8_t flags;
	uint16_t num_tensors;
	uint32_t model_id;
	uint64_t request_id;
	const uint8_t *body;
	uint32_t body_len;
	struct bw_tensor_view tensors[BW_MAX_TENSORS]; /* OK INFER replies: num_tensors entries */
	char message[BWC_ERRMSG_MAX + 1];              /* error replies: the server's message */
	const char *why;                               /* decode failures: the rule broken */
	/* Filled by the calls, not by bwc_decode_reply, on failures too: */
	uint64_t rtt_ns;            /* first send to reply, resends included: what the caller waited */
	uint32_t attempts;          /* tries of the whole request, 1 + resends */
	uint32_t segments_sent;     /* request datagrams sent over all attempts (a segment each) */
	uint32_t segments_received; /* reply datagrams accepted into the reply: 1 for an unsegmented
				     * one, the distinct segments of a segmented one (so far) */
	uint32_t segments_withheld; /* request datagrams drop_permille kept back (not in segments_sent) */
};

/* One input or output of a model, as MODEL_INFO describes it (a dim of 0 is dynamic). */
struct bwc_tensor_info {
	uint16_t index;
	uint8_t dtype;
	uint8_t rank;
	uint32_t dims[BW_MAX_RANK];
	char name[BW_MAX_NAME_LEN + 1];
};

/* A decoded MODEL_INFO reply, copied out of the datagram. */
struct bwc_model_info {
	uint32_t model_id;
	uint16_t flags; /* BW_MODEL_F_* */
	uint16_t priority_levels;
	uint32_t max_batch_size;
	uint16_t num_batch_sizes; /* 0: any size up to max_batch_size */
	uint16_t num_inputs;
	uint16_t num_outputs;
	uint32_t version; /* served; 0: the model has none (echo, or a server before versions) */
	char name[BW_MAX_NAME_LEN + 1];
	uint32_t batch_sizes[BWC_MODEL_BATCH_SIZES_MAX];
	struct bwc_tensor_info inputs[BW_MAX_TENSORS];
	struct bwc_tensor_info outputs[BW_MAX_TENSORS];
};

struct bwc;

/* --- codec: pure functions, no sockets --- */

/**
 * Writes a request (header and body) into buf.
 * \param req  the request; tensors are validated (dtype, rank, name, data_len)
 * \param buf  where the datagram goes
 * \param cap  bytes available at buf
 * \return the datagram length, -EINVAL for a malformed request, or -EMSGSIZE when it does not fit
 *         cap or BW_DGRAM_MAX
 */
int bwc_encode_request(const struct bwc_request *req, void *buf, size_t cap);


/**
 * How many datagrams a request takes when its body is cut into slices of slice bytes
 * (docs/protocol.md, "Segmentation": every segment but the last carries exactly slice bytes).
 * \param slice  body bytes per segment, 1..BWC_BODY_MAX (at an MTU: MTU - 20 - 8 - 40)
 * \return the segment count (1 for a body of at most slice bytes), -EINVAL (a malformed request or
 *         slice), -EMSGSIZE (more than BWC_SEGMENTS_MAX segments)
 */
int bwc_request_segments(const struct bwc_request *req, uint32_t slice);

/**
 * Writes segment index of a request cut as bwc_request_segments says into buf: the header (the same
 * in every segment but seg_index and body_len) and its slice of the body, taken from the request's
 * tensors without building the whole body. A one-segment request is bwc_encode_request's datagram.
 * \return the datagram length, -EINVAL (as bwc_request_segments, or index out of range), -EMSGSIZE
 *         (cap too small, or too many segments)
 */
int bwc_encode_request_segment(const struct bwc_request *req, uint32_t slice, uint32_t index, void *buf, size_t cap);

/*
 * A segmented reply being put back together (docs/protocol.md, "Segmentation") in the caller's
 * buffer, as the one datagram bwc_decode_reply reads: the header (seg_count 1, body_len the whole
 * body, the AUTH flag cleared: each segment's trailer is its own) and the body, each segment's slice
 * written where it belongs. A few KiB: keep it off the stack.
 */
struct bwc_reasm {
	uint8_t *buf;
	size_t cap;
	uint64_t request_id;
	uint8_t opcode;                     /* the request's */
	bool started;                       /* a segment of the reply has arrived */
	struct bw_hdr first;                /* the first segment's header: every other must agree */
	uint32_t slice;                     /* body bytes of every segment but the last; 0 until one arrived */
	uint32_t last_len;                  /* the last segment's, when it came before any other */
	uint32_t received;                  /* distinct segments */
	uint8_t seen[BWC_SEGMENTS_MAX / 8 + 1];
};

/** Starts a reassembly of the reply to (request_id, opcode) into buf (room for header and body). */
void bwc_reasm_init(struct bwc_reasm *r, void *buf, size_t cap, uint64_t request_id, uint8_t opcode);

/**
 * Adds one datagram. Datagrams of another request, and duplicates, are ignored.
 * \return 1 when the reply is whole (buf holds it: hand 40 + its body_len bytes to bwc_decode_reply),
 *         0 when more segments are needed or the datagram was ignored; -EBADMSG for a segment that
 *         breaks the rules (a field unlike the first segment's, seg_index out of range, a slice of
 *         the wrong length, lengths that do not add up) and -EMSGSIZE for a reply larger than cap:
 *         the reassembly is then over.
 */
int bwc_reasm_add(struct bwc_reasm *r, const void *dgram, size_t len);

/**
 * Checks a reply datagram and fills reply. The request_id is not compared: callers match it.
 * \param buf        the datagram
 * \param len        its length
 * \param opcode     the opcode of the request it answers
 * \param reply      out; its pointers point into buf
 * \return 0 for a well-formed reply of any status; on error reply->why names the rule and:
 *         -EBADMSG (short, bad magic, length or body inconsistent), -EPROTONOSUPPORT (version),
 *         -EPROTO (not a reply, or a reply to another opcode), -ENOTSUP (segmented reply)
 */
int bwc_decode_reply(const void *buf, size_t len, uint8_t opcode, struct bwc_reply *reply);

/**
 * Decodes the body of an OK MODEL_INFO reply (docs/protocol.md "MODEL_INFO reply").
 * \param why  out, on error a static string naming the rule that failed
 * \return 0, or -EBADMSG with *why set
 */
int bwc_decode_model_info(const void *body, size_t len, struct bwc_model_info *info,
			  const char **why);

/** \return the lower-case dtype name ("float", "int64", ...), or NULL for one v1 does not carry */
const char *bwc_dtype_name(uint32_t dtype);

/** \return the enum bw_dtype for a name (bwc_dtype_name's, or float32/fp32/fp16/bf16/float64),
 *          or -EINVAL */
int bwc_dtype_parse(const char *name);

/** \return a description of a call's return value: bw_status_name() for positive values,
 *          strerror() for negative ones */
const char *bwc_strerror(int rc);

/* --- calls --- */

/** Fills the defaults. */
void bwc_opts_init(struct bwc_opts *opts);

/**
 * Resolves the host, opens a UDP socket and connect()s it to the server.
 * \param opts  NULL for the defaults
 * \param err   out, a negative errno when NULL is returned (-ENXIO: unknown host; -EINVAL: port 0,
 *              mtu outside BWC_MTU_MIN..BWC_MTU_MAX, max_reply_bytes below 40)
 * \return the connection, or NULL
 */
struct bwc *bwc_open(const struct bwc_opts *opts, int *err);

void bwc_close(struct bwc *c);

/*
 * The calls below send the request (in segments when its body is above bwc_segment_slice(mtu)) and
 * wait timeout_ms for the reply; then they resend the whole request, with the same request_id, up to
 * retries times. Segments of a reply that came before a resend still count: the reply is
 * reassembled across the resends. An error reply the server sends while segments are still going
 * out is read once all are out. A segmented reply above max_reply_bytes fails the call with
 * -EMSGSIZE, one that breaks the segmentation rules with -EBADMSG, without a resend.
 */

/**
 * PING: the reply body must equal the payload (-EBADMSG otherwise).
 * \param rtt_ns  out (may be NULL): first send to reply
 */
int bwc_ping(struct bwc *c, const void *payload, uint32_t len, uint64_t *rtt_ns);

/**
 * INFER: sends inputs to model_id and waits for the outputs. Unsigned, a request in one datagram is
 * padded to its reply's size when the connection knows the model (any MODEL_INFO of it on this
 * connection told it); when the server answers RESOURCE_EXHAUSTED to a model it does not know, the
 * call asks MODEL_INFO once and sends it again padded.
 * \param deadline_us  budget from arrival at the server, BW_DEADLINE_NONE for the model's default
 * \param priority     0 is the most urgent
 * \param reply        out; on 0, tensors[] point into the connection's receive buffer, valid until
 *                     the next call on c
 */
int bwc_infer(struct bwc *c, uint32_t model_id, const struct bwc_tensor *inputs, uint16_t n,
	      uint32_t deadline_us, uint8_t priority, struct bwc_reply *reply);

/**
 * The body bytes of an INFER reply of `rows` rows from the model info describes: its output
 * descriptors and outputs. \return them, or 0 when an output has a dynamic dimension besides the
 * batch (the size is not known before the reply).
 */
uint32_t bwc_reply_body_bytes(const struct bwc_model_info *info, uint32_t rows);

/** MODEL_INFO for one model id (the request padded with zeros to a whole datagram). */
int bwc_model_info(struct bwc *c, uint32_t model_id, struct bwc_model_info *info);

/** MODEL_INFO by name: model_id BW_MODEL_ID_ANY with the name (1..255 bytes) as the body, then zeros
 *  to a whole datagram. */
int bwc_model_info_by_name(struct bwc *c, const char *name, struct bwc_model_info *info);

/** The request_id the next unsigned request on c takes (then counting up from it). A signed
 *  connection takes its ids from the clock and ignores this. */
void bwc_set_next_request_id(struct bwc *c, uint64_t request_id);

/** \return why the last call failed: the server's message for an error status, otherwise a
 *          description of the local failure; "" after a success */
const char *bwc_last_error(const struct bwc *c);

/**
 * The reply of the last call on c: the connection's own for the calls that take none (bwc_ping,
 * bwc_model_info*, bwc_infer with reply NULL), a copy of the caller's for bwc_infer. Its counters
 * (rtt_ns, attempts, segments_sent, segments_received) are set after every call, a failed one
 * included; body and views are valid until the next call.
 */
const struct bwc_reply *bwc_last_reply(const struct bwc *c);

/* ==== several servers (client/pool.c) =============================================================
 *
 * A pool spreads requests over several servers of the same models: each INFER goes to the healthy
 * server with the fewest requests in flight from this pool (ties taken in turn), on a connection of
 * its own (a pool may be shared by threads: a server gets one connection per request in flight, up to
 * BWC_POOL_CONNS). A server is healthy until a request to it times out (after the connection's
 * retries) or is answered UNAVAILABLE, or a PING's reply says DRAINING; it is then left out for
 * down_ms and PINGed before it is used again. A request that timed out or was refused UNAVAILABLE is
 * sent to the next healthy server with the same request_id (unsigned requests; a signed one takes its
 * connection's next), until each server was tried once. Every server is PINGed at most every
 * ping_ms while in use, so a draining one is left before it stops.
 */
#define BWC_POOL_MAX 16        /* servers in one pool */
#define BWC_POOL_CONNS 8       /* connections to one server */
#define BWC_POOL_DOWN_MS_DEFAULT 1000
#define BWC_POOL_PING_MS_DEFAULT 500

struct bwc_pool;

/* One server's counters (bwc_pool_stats). */
struct bwc_pool_host_stats {
	char host[128];
	uint64_t sent;         /* INFERs sent to it (first tries and failovers) */
	uint64_t ok;           /* answered OK */
	uint64_t errors;       /* answered with another status (UNAVAILABLE included) */
	uint64_t timeouts;     /* no reply after the connection's retries */
	uint64_t failovers;    /* requests sent elsewhere after it timed out or said UNAVAILABLE */
	uint64_t pings, drains_seen; /* PINGs sent to it; replies flagged DRAINING */
	bool healthy;
	uint32_t in_flight;
};

/**
 * Opens a pool over hosts: "a,b,c" (each an address or name, optionally :PORT), or "@FILE" (one per
 * line, '#' comments). opts is each connection's (its host ignored); down_ms and ping_ms 0 take the
 * defaults. \return the pool, or NULL with why in err (no host, too many, one that does not resolve).
 */
struct bwc_pool *bwc_pool_open(const struct bwc_opts *opts, const char *hosts, uint32_t down_ms, uint32_t ping_ms,
			       char *err, size_t cap);

void bwc_pool_close(struct bwc_pool *p);

unsigned int bwc_pool_size(const struct bwc_pool *p);

/**
 * INFER on the pool, as bwc_infer on one connection. \param answered  out (may be NULL): the
 * connection the outcome came from (bwc_last_reply, bwc_last_error on it; reply's views point into
 * it), valid until the next call on the pool from this thread. \param host  out (may be NULL): its
 * index. \return as bwc_infer; -EHOSTUNREACH when no server is healthy or each one tried failed.
 */
int bwc_pool_infer(struct bwc_pool *p, uint32_t model_id, const struct bwc_tensor *inputs, uint16_t n,
		   uint32_t deadline_us, uint8_t priority, struct bwc_reply *reply, struct bwc **answered,
		   unsigned int *host);

/** A connection to a healthy server (PINGed if due), for MODEL_INFO and the like before the requests
 *  start: it stays in the pool, so no other thread may use the pool while it is in use. NULL when no
 *  server is healthy. */
struct bwc *bwc_pool_any(struct bwc_pool *p, unsigned int *host);

/** Server i's counters. \return 0, or -EINVAL past the last. */
int bwc_pool_stats(struct bwc_pool *p, unsigned int i, struct bwc_pool_host_stats *st);

/* ==== NumPy .npy files (client/npy.c) ============================================================
 * For bwcli, bwrun and tests: tensors in the files numpy.save writes and numpy.load reads. No
 * sockets; usable without a connection. */

/* A tensor read from a NumPy .npy file (format 1.0/2.0/3.0, C order, little-endian, dtypes <f4 <f8
 * <i8 <i4 <i2 |i1 |u1 <u2 <u4 <u8 |b1 <f2). */
struct bwc_npy {
	uint8_t dtype;              /* enum bw_dtype (include/batchwire/wire.h) */
	uint8_t rank;               /* 0..BW_MAX_RANK */
	uint32_t dims[BW_MAX_RANK];
	void *data;                 /* malloc'd: bwc_npy_free */
	size_t nbytes;
};

/**
 * Reads a whole .npy file. Refused: Fortran order (unless it is the same bytes as C order),
 * big-endian, object, structured and other dtypes, rank above BW_MAX_RANK, dims above UINT32_MAX,
 * truncated data or bytes after it.
 * \param t    out; zeroed on failure
 * \param err  out, one line starting with the path
 * \return 0, or a negative errno with err saying what is wrong with the file (one line).
 */
int bwc_npy_read(const char *path, struct bwc_npy *t, char *err, size_t cap);

/**
 * Writes a C-order little-endian .npy file (format 1.0), byte for byte what numpy.save writes for
 * the same array. A failed write removes the file.
 * \param dims  rank entries (may be NULL for rank 0)
 * \param data  product(dims) * bw_dtype_size(dtype) bytes
 * \return 0, or a negative errno with err saying why (-EINVAL: bfloat16, which numpy lacks, or a
 *         bad rank)
 */
int bwc_npy_write(const char *path, uint8_t dtype, uint8_t rank, const uint32_t *dims, const void *data,
		  char *err, size_t cap);

/** Frees t's data and zeroes it (t may be NULL). */
void bwc_npy_free(struct bwc_npy *t);

/* ==== end of NumPy .npy files ==================================================================== */

#endif /* BATCHWIRE_BWCLIENT_H */
