/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Protocol v1 on the polling lcore: validate the header in the order docs/protocol.md gives, dispatch
 * by opcode, and turn the request mbuf into its reply in place. A datagram whose header cannot be
 * trusted (truncated, wrong magic, a reply opcode) is dropped; any other bad request gets an error
 * reply naming the rule it broke.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "defs.h"

static bool bytes_zero(const uint8_t *p, uint32_t n)
{
	uint8_t any = 0;

	for (uint32_t i = 0; i < n; i++)
		any |= p[i];
	return any == 0;
}

/* The rules of docs/protocol.md "Validation rules", steps 2 to 4. */
static enum bw_status header_check(const struct dp_lcore *lc, const struct bw_hdr *hdr, uint32_t payload_len,
				   char *msg, size_t cap)
{
	uint32_t trailer_len = (hdr->flags & BW_FLAG_AUTH) ? (uint32_t)sizeof(struct bw_auth_trailer) : 0;

	if (hdr->version != BW_PROTO_VERSION) {
		snprintf(msg, cap, "protocol version %u not supported; this server speaks version %u",
			 hdr->version, BW_PROTO_VERSION);
		return BW_STATUS_INVALID_ARGUMENT;
	}
	if (hdr->status != 0) {
		snprintf(msg, cap, "status must be 0 in a request, got %u", hdr->status);
		return BW_STATUS_INVALID_ARGUMENT;
	}
	if (hdr->flags & ~BW_FLAGS_KNOWN) {
		snprintf(msg, cap, "unknown flags 0x%02x", hdr->flags & ~BW_FLAGS_KNOWN);
		return BW_STATUS_INVALID_ARGUMENT;
	}
	if (hdr->seg_count == 0 || hdr->seg_index >= hdr->seg_count) {
		snprintf(msg, cap, "segment %u of %u is not a valid segment", hdr->seg_index, hdr->seg_count);
		return BW_STATUS_INVALID_ARGUMENT;
	}
	if (hdr->flags & BW_FLAG_PADDED) {
		if (hdr->seg_count > 1) {
			snprintf(msg, cap, "only a request in one datagram may pad itself (flag PADDED)");
			return BW_STATUS_INVALID_ARGUMENT;
		}
		if ((uint64_t)sizeof(*hdr) + hdr->body_len + trailer_len > payload_len) {
			snprintf(msg, cap, "body_len %u does not fit the %u bytes after the header", hdr->body_len,
				 payload_len - (uint32_t)sizeof(*hdr));
			return BW_STATUS_INVALID_ARGUMENT;
		}
		if (!bytes_zero((const uint8_t *)(hdr + 1) + hdr->body_len,
				payload_len - (uint32_t)sizeof(*hdr) - hdr->body_len - trailer_len)) {
			snprintf(msg, cap, "padding after the body not zero");
			return BW_STATUS_INVALID_ARGUMENT;
		}
	} else if ((uint64_t)sizeof(*hdr) + hdr->body_len + trailer_len != payload_len) {
		snprintf(msg, cap, "body_len %u does not match the %u bytes after the header", hdr->body_len,
			 payload_len - (uint32_t)sizeof(*hdr));
		return BW_STATUS_INVALID_ARGUMENT;
	}
	/* Replies are as long as their requests or shorter (PING, echo) only if requests fit the MTU. */
	if (payload_len > dp_udp_payload_max(lc)) {
		snprintf(msg, cap, "request of %u bytes exceeds the %u bytes this server's MTU allows", payload_len,
			 dp_udp_payload_max(lc));
		return BW_STATUS_INVALID_ARGUMENT;
	}
	if (hdr->seg_count == 1 && hdr->total_body_len != hdr->body_len) {
		snprintf(msg, cap, "total_body_len %u differs from body_len %u in an unsegmented message",
			 hdr->total_body_len, hdr->body_len);
		return BW_STATUS_INVALID_ARGUMENT;
	}
	if (hdr->opcode != BW_OP_PING && hdr->opcode != BW_OP_INFER && hdr->opcode != BW_OP_MODEL_INFO) {
		snprintf(msg, cap, "unknown opcode %u", hdr->opcode);
		return BW_STATUS_INVALID_ARGUMENT;
	}
	if (hdr->seg_count > 1 && hdr->opcode == BW_OP_MODEL_INFO) {
		snprintf(msg, cap, "MODEL_INFO fits one datagram: its body is at most a %u-byte name", BW_MAX_NAME_LEN);
		return BW_STATUS_INVALID_ARGUMENT;
	}
	if ((hdr->flags & BW_FLAG_AUTH) &&
	    ((const struct bw_auth_trailer *)((const uint8_t *)hdr + payload_len - trailer_len))->reserved != 0) {
		snprintf(msg, cap, "the authentication trailer's reserved field must be 0");
		return BW_STATUS_INVALID_ARGUMENT;
	}
	return BW_STATUS_OK;
}

#define DP_NAME_QUOTE_MAX 64

/* "no model named '...'" with the name cut to 64 bytes and anything but printable ASCII shown as '?',
 * so the message stays valid UTF-8 whatever bytes the client sent. */
static void name_quote(char *msg, size_t cap, const uint8_t *name, uint32_t len)
{
	char quoted[DP_NAME_QUOTE_MAX + 1];
	bool cut = bw_name_printable(quoted, sizeof(quoted), (const char *)name, len);

	snprintf(msg, cap, "no model named '%s'%s", quoted, cut ? " (name cut)" : "");
}

/* Finds the model a request names and checks its priority; step 5. */
static const void *model_resolve(struct dp_lcore *lc, const struct bw_hdr *hdr, const uint8_t *body,
				 enum bw_status *status, char *msg, size_t cap)
{
	const struct dp_model_ops *ops = lc->models;
	const void *model = NULL;

	bool by_name = hdr->model_id == BW_MODEL_ID_ANY && hdr->opcode == BW_OP_MODEL_INFO && body != NULL;
	/* MODEL_INFO may name the model instead of numbering it; the name ends at its first zero byte,
	 * the zeros after it being the request's padding */
	uint32_t name_len = by_name ? (uint32_t)strnlen((const char *)body, hdr->body_len) : 0;

	if (by_name)
		model = ops->lookup(ops->ctx, hdr->model_id, (const char *)body, name_len);
	else if (hdr->model_id != BW_MODEL_ID_ANY)
		model = ops->lookup(ops->ctx, hdr->model_id, NULL, 0);
	if (model == NULL) {
		if (hdr->model_id != BW_MODEL_ID_ANY)
			snprintf(msg, cap, "no model with id %u", hdr->model_id);
		else if (hdr->opcode == BW_OP_MODEL_INFO)
			name_quote(msg, cap, body, name_len);
		else
			snprintf(msg, cap, "model id %u is reserved for MODEL_INFO by name; INFER names its model by id",
				 BW_MODEL_ID_ANY);
		*status = BW_STATUS_NOT_FOUND;
		return NULL;
	}
	if (hdr->priority >= ops->priority_levels(model)) {
		snprintf(msg, cap, "priority %u out of range: this model has %u levels (0 is most urgent)",
			 hdr->priority, ops->priority_levels(model));
		*status = BW_STATUS_INVALID_ARGUMENT;
		return NULL;
	}
	*status = BW_STATUS_OK;
	return model;
}

/* What a client is told when its authentication fails; the counter says which. */
static const char *auth_failure_message(enum dp_auth_outcome o)
{
	switch (o) {
	case DP_AUTH_MISSING:
		return "this model takes authenticated requests only: sign it (the AUTH flag and trailer)";
	case DP_AUTH_NO_KEYS:
		return "this server has no keys (auth_keys): it cannot check an authentication trailer";
	case DP_AUTH_UNKNOWN_KEY:
		return "unknown key id, or one past its overlap after a key rotation";
	case DP_AUTH_BAD_TAG:
		return "authentication tag does not match (wrong key, or the datagram or its addresses changed)";
	case DP_AUTH_STALE:
		return "request_id is not within auth_window_ms of the server's clock: signed, it is the client's "
		       "CLOCK_REALTIME in ns (are both clocks synchronised?)";
	case DP_AUTH_REPLAY:
		return "request_id already seen from this source under this key: a replay, or a resend that did not "
		       "take a new request_id";
	case DP_AUTH_FLOWS_FULL:
		return "auth_flows: this polling lcore tracks as many authenticated sources as it can";
	default:
		return "authentication failed";
	}
}

static enum bw_status auth_failure_status(enum dp_auth_outcome o)
{
	return o == DP_AUTH_FLOWS_FULL ? BW_STATUS_RESOURCE_EXHAUSTED : BW_STATUS_UNAUTHENTICATED;
}

/* A model that takes signed requests only, and one that was not. */
static bool auth_missing(const struct dp_lcore *lc, const void *model)
{
	return !lc->rx_authenticated && lc->models->auth_required != NULL && lc->models->auth_required(model);
}

/* A model's own allowlist: a source it leaves out gets nothing back, not even an error. */
static bool model_source_allowed(const struct dp_lcore *lc, const void *model)
{
	return lc->models->source_allowed == NULL || lc->models->source_allowed(model, lc->rx_src_addr);
}

bool dp_draining;

void dp_draining_set(bool draining)
{
	__atomic_store_n(&dp_draining, draining, __ATOMIC_RELAXED);
}

/* Rewrites the protocol header of the request into its reply's and finishes the frame. */
static enum dp_verdict reply_send(struct dp_lcore *lc, struct rte_mbuf *m, struct bw_hdr *hdr,
				  enum bw_status status, uint32_t body_len, uint16_t num_tensors)
{
	hdr->version = BW_PROTO_VERSION;
	hdr->opcode |= BW_OP_REPLY;
	hdr->status = (uint16_t)status;
	hdr->flags = dp_reply_flags(hdr->opcode);
	hdr->num_tensors = num_tensors;
	hdr->body_len = body_len;
	hdr->seg_index = 0;
	hdr->seg_count = 1;
	hdr->total_body_len = body_len;
	dp_ipv4_reply_finish(lc, m, (uint32_t)sizeof(struct rte_udp_hdr) + (uint32_t)sizeof(*hdr) + body_len);
	lc->stats.replies[status]++;
	return DP_VERDICT_REPLY;
}

/* Room for a reply body after hdr in m: the MTU, and the mbuf's own end, whichever is nearer. */
static uint32_t reply_room(const struct dp_lcore *lc, const struct rte_mbuf *m, const struct bw_hdr *hdr)
{
	const uint8_t *end = rte_pktmbuf_mtod(m, const uint8_t *) + rte_pktmbuf_data_len(m) + rte_pktmbuf_tailroom(m);

	return RTE_MIN(dp_udp_payload_max(lc), (uint32_t)(end - (const uint8_t *)hdr)) - (uint32_t)sizeof(*hdr);
}

/*
 * The bytes a request carried after its header, for the rule that an unsigned request gets no reply
 * larger than itself: one datagram's body, padding and trailer (its mbuf is as it arrived until the
 * reply is built), or a message's whole body.
 */
static uint32_t request_bytes(const struct rte_mbuf *m, const struct bw_hdr *hdr)
{
	if (hdr->seg_count > 1)
		return hdr->total_body_len;
	return rte_pktmbuf_pkt_len(m) - (uint32_t)((const uint8_t *)(hdr + 1) - rte_pktmbuf_mtod(m, const uint8_t *));
}

/*
 * An error reply's message: at most DP_ERROR_MSG_MAX bytes, the room, and the request's own body
 * bytes, so no error reply is larger than what provoked it (docs/protocol.md: a request pads itself
 * to read a long message).
 */
static enum dp_verdict error_reply_cut(struct dp_lcore *lc, struct rte_mbuf *m, struct bw_hdr *hdr,
				       enum bw_status status, const char *msg, uint32_t request_body)
{
	uint32_t len = RTE_MIN((uint32_t)strnlen(msg, DP_ERROR_MSG_MAX), RTE_MIN(reply_room(lc, m, hdr), request_body));

	memcpy(hdr + 1, msg, len);
	return reply_send(lc, m, hdr, status, len, 0);
}

enum dp_verdict dp_error_reply(struct dp_lcore *lc, struct rte_mbuf *m, struct bw_hdr *hdr, enum bw_status status,
			       const char *msg)
{
	return error_reply_cut(lc, m, hdr, status, msg, request_bytes(m, hdr));
}

enum dp_verdict dp_refuse(struct dp_lcore *lc, struct rte_mbuf *m, struct bw_hdr *hdr, enum bw_status status,
			  const char *msg)
{
	if (!dp_rate_allow(&lc->error_rate, lc->burst_tsc))
		return dp_drop(lc, DP_DROP_RATE_ERROR);
	/* the datagram's own bytes (its header's body_len may be what was wrong with it); an
	 * authenticated peer asked for the reply itself and gets the whole message */
	return error_reply_cut(lc, m, hdr, status, msg, lc->rx_authenticated ? DP_ERROR_MSG_MAX : lc->rx_body_len);
}

/* An error answer to a request: in its one datagram, or for a message in its first segment's mbuf
 * (sent here: the caller's mbuf is then held). */
static enum dp_verdict request_refuse(struct dp_lcore *lc, struct dp_request *req, enum bw_status status,
				      const char *msg)
{
	if (req->msg == NULL)
		return dp_refuse(lc, req->mbuf, req->hdr, status, msg);
	dp_msg_complete(lc, req->msg, req->mbuf, req->hdr, status, 0, 0, msg);
	return DP_VERDICT_HELD;
}

/* INFER: the body parsed into tensor views (their descriptors copied out when they cross a page),
 * then the model layer's. */
static enum dp_verdict infer_handle(struct dp_lcore *lc, const void *model, struct dp_request *req,
				    uint32_t body_cap)
{
	const uint8_t *prefix = req->body;
	uint32_t avail = req->pages != NULL ? RTE_MIN(req->pages->page_len, req->body_len) : req->body_len;
	char msg[DP_ERROR_MSG_MAX + 1];
	enum bw_status status;
	const char *why = NULL;
	bool single = req->msg == NULL; /* one datagram, held in its own mbuf */
	int rc;

	rc = bw_body_parse_prefix(prefix, avail, req->body_len, req->hdr->num_tensors, req->tensors, &why);
	if (rc == -EAGAIN && req->msg != NULL) { /* one datagram has avail == body_len: never again */
		prefix = dp_msg_prefix(lc, req->msg, &avail);
		rc = bw_body_parse_prefix(prefix, avail, req->body_len, req->hdr->num_tensors, req->tensors, &why);
	}
	if (rc != 0)
		return request_refuse(lc, req, BW_STATUS_INVALID_ARGUMENT,
				      why != NULL ? why : "tensor descriptors run past the body");
	if (prefix != req->body) /* views into the copy: its payload pointers would not last */
		for (uint16_t i = 0; i < req->hdr->num_tensors; i++)
			req->tensors[i].data = NULL;
	req->num_tensors = req->hdr->num_tensors;
	req->arrival_tsc = lc->burst_tsc;
	req->held = false;
	if (single && unlikely(lc->stats.held_requests >= lc->cfg->held_max)) {
		/* every request the model layer holds keeps an mbuf out of the pool the RX ring refills
		 * from: past this core's share, refuse rather than let PING and ARP find it empty */
		lc->stats.held_refused++;
		snprintf(msg, sizeof(msg), "this core holds %u requests already (its share of mbufs_held): try again",
			 lc->cfg->held_max);
		return request_refuse(lc, req, BW_STATUS_RESOURCE_EXHAUSTED, msg);
	}
	/* counted before infer: the model layer may answer it before infer returns */
	if (single)
		lc->stats.held_requests++;
	msg[0] = '\0';
	status = lc->models->infer(lc->model_lcore, model, req, body_cap, msg, sizeof(msg));
	if (single && (!req->held || req->msg != NULL))
		lc->stats.held_requests--; /* not taken, or taken as a message with reply pages: reasm counts it */
	/* The model layer is trusted with the mbuf, not with the counters' bounds. */
	if (unlikely(status >= BW_STATUS_COUNT)) {
		snprintf(msg, sizeof(msg), "model returned status %u, which protocol v1 does not define", status);
		status = BW_STATUS_INTERNAL;
	} else if (unlikely(status == BW_STATUS_OK && !req->held)) {
		snprintf(msg, sizeof(msg), "the model layer accepted the request without taking it");
		status = BW_STATUS_INTERNAL;
	}
	if (status == BW_STATUS_OK)
		return DP_VERDICT_HELD; /* answered later, through dp_request_complete */
	if (unlikely(req->held)) {
		/* refused but taken: the model layer owns the mbuf and will complete it. Answering here as
		 * well would reply twice and leave it an mbuf already sent (and freed by the driver). */
		lc->stats.model_contract_errors++;
		return DP_VERDICT_HELD;
	}
	return request_refuse(lc, req, status, msg[0] != '\0' ? msg : bw_status_name(status));
}

/*
 * The first segment to arrive already says whether its model exists and takes its priority, how large
 * a body it accepts, and (signed) whether its request_id is fresh: a message that cannot be served is
 * refused before it is reassembled, and a replayed one dropped before it holds anything.
 */
static enum dp_verdict segment_handle(struct dp_lcore *lc, struct rte_mbuf *m, struct bw_hdr *hdr)
{
	char msg[DP_ERROR_MSG_MAX + 1];
	struct dp_reasm_limit limit = {lc->cfg->msg_max, "this server's max_message_bytes", BW_STATUS_OK, msg};
	struct dp_request *req = &lc->request;
	struct dp_msg *whole;
	enum dp_verdict v;

	msg[0] = '\0';
	if (hdr->opcode == BW_OP_PING && lc->cfg->ping_max < limit.cap) {
		/* echoed to whatever source the datagram names: kept small */
		limit.cap = lc->cfg->ping_max;
		limit.cap_name = "this server's ping_max_bytes";
	}
	if (hdr->opcode == BW_OP_INFER) {
		const void *model = model_resolve(lc, hdr, NULL, &limit.refuse, msg, sizeof(msg));

		/* every segment of a message comes from one source (reassembly keys on it), so checking
		 * each here also covers the message once whole */
		if (model != NULL && !model_source_allowed(lc, model))
			return dp_drop(lc, DP_DROP_MODEL_NOT_ALLOWED);
		if (model != NULL && auth_missing(lc, model)) {
			lc->stats.auth[DP_AUTH_MISSING]++;
			limit.refuse = BW_STATUS_UNAUTHENTICATED;
			snprintf(msg, sizeof(msg), "%s", auth_failure_message(DP_AUTH_MISSING));
		}
		if (model != NULL && lc->models->request_max != NULL) {
			uint32_t model_cap = lc->models->request_max(model);

			if (model_cap != 0 && model_cap < limit.cap) {
				limit.cap = model_cap;
				limit.cap_name = "the model's largest request";
			}
		}
	}
	/* every segment was signed (flags are the same in all) and is checked as it comes; the message's
	 * request_id is spent at its first segment, under that segment's key, so that a replayed segment
	 * is dropped before it opens an entry */
	if (lc->rx_authenticated && limit.refuse == BW_STATUS_OK && !dp_reasm_known(lc, hdr)) {
		enum dp_auth_outcome o = dp_auth_replay_check(lc, hdr->request_id);

		lc->stats.auth[o]++;
		if (o == DP_AUTH_REPLAY) {
			/* a copy: a replay, or a late duplicate of a segment of a message already whole (whose
			 * own answer must not be overtaken by a refusal): dropped, unanswered */
			lc->stats.reasm[DP_REASM_REFUSED]++;
			return dp_drop(lc, DP_DROP_SEGMENT);
		}
		if (o != DP_AUTH_OK) {
			limit.refuse = auth_failure_status(o);
			snprintf(msg, sizeof(msg), "%s", auth_failure_message(o));
		}
	}
	v = dp_reasm_segment(lc, m, hdr, &limit, &whole);
	if (whole == NULL)
		return v;

	/* whole: served exactly as one datagram would be, from here on */
	dp_msg_request(lc, whole, req);
	if (req->hdr->opcode == BW_OP_PING) {
		if (req->hdr->num_tensors != 0)
			return request_refuse(lc, req, BW_STATUS_INVALID_ARGUMENT, "PING carries no tensors");
		dp_msg_complete(lc, whole, req->mbuf, req->hdr, BW_STATUS_OK, req->body_len, 0, NULL);
		return DP_VERDICT_HELD;
	}
	enum bw_status status;
	const void *model = model_resolve(lc, req->hdr, req->body, &status, msg, sizeof(msg));
	if (model == NULL)
		return request_refuse(lc, req, status, msg);
	return infer_handle(lc, model, req, 0);
}

enum dp_verdict dp_request_handle(struct dp_lcore *lc, struct rte_mbuf *m, uint8_t *payload,
				  uint32_t payload_len)
{
	struct bw_hdr *hdr = (struct bw_hdr *)payload;
	uint8_t *body = payload + sizeof(*hdr);
	uint32_t body_cap;
	char msg[DP_ERROR_MSG_MAX + 1];
	enum bw_status status;
	const void *model;

	if (payload_len < sizeof(*hdr))
		return dp_drop(lc, DP_DROP_PROTO_TRUNCATED);
	body_cap = reply_room(lc, m, hdr);
	lc->rx_body_len = payload_len - (uint32_t)sizeof(*hdr);
	if (hdr->magic != BW_PROTO_MAGIC)
		return dp_drop(lc, DP_DROP_PROTO_BAD_MAGIC);
	if (hdr->opcode & BW_OP_REPLY)
		return dp_drop(lc, DP_DROP_PROTO_REPLY);
	lc->stats.requests++;

	lc->rx_authenticated = false;
	status = header_check(lc, hdr, payload_len, msg, sizeof(msg));
	if (status != BW_STATUS_OK)
		return dp_refuse(lc, m, hdr, status, msg);
	if (hdr->flags & BW_FLAG_AUTH) {
		enum dp_auth_outcome o = dp_auth_verify(lc, hdr);

		/* one datagram is one request: its request_id is spent now (a message's once whole) */
		if (o == DP_AUTH_OK && hdr->seg_count == 1)
			o = dp_auth_replay_check(lc, hdr->request_id);
		if (o != DP_AUTH_OK || hdr->seg_count == 1)
			lc->stats.auth[o]++;
		if (o != DP_AUTH_OK) {
			lc->rx_authenticated = false;
			return dp_refuse(lc, m, hdr, auth_failure_status(o), auth_failure_message(o));
		}
	}
	if (hdr->seg_count > 1)
		return segment_handle(lc, m, hdr);

	if (hdr->opcode == BW_OP_PING) {
		if (hdr->num_tensors != 0)
			return dp_refuse(lc, m, hdr, BW_STATUS_INVALID_ARGUMENT, "PING carries no tensors");
		return reply_send(lc, m, hdr, BW_STATUS_OK, hdr->body_len, 0);
	}

	model = model_resolve(lc, hdr, body, &status, msg, sizeof(msg));
	if (model == NULL)
		return dp_refuse(lc, m, hdr, status, msg);
	if (!model_source_allowed(lc, model))
		return dp_drop(lc, DP_DROP_MODEL_NOT_ALLOWED);
	if (auth_missing(lc, model)) {
		lc->stats.auth[DP_AUTH_MISSING]++;
		return dp_refuse(lc, m, hdr, BW_STATUS_UNAUTHENTICATED, auth_failure_message(DP_AUTH_MISSING));
	}

	if (hdr->opcode == BW_OP_MODEL_INFO) {
		if (hdr->num_tensors != 0)
			return dp_refuse(lc, m, hdr, BW_STATUS_INVALID_ARGUMENT, "MODEL_INFO carries no tensors");
		int len = lc->models->describe(model, body, body_cap);
		if (len < 0)
			return dp_refuse(lc, m, hdr, BW_STATUS_INTERNAL,
					      "model description does not fit one datagram at this MTU");
		/* no reply larger than its request: the client pads its MODEL_INFO to what it asks for,
		 * unless it signed it (a forged source cannot sign) */
		if ((uint32_t)len > lc->rx_body_len && !lc->rx_authenticated) {
			snprintf(msg, sizeof(msg), "this model's description is %d bytes: pad the MODEL_INFO body to "
				 "that many with zeros", len);
			return dp_refuse(lc, m, hdr, BW_STATUS_RESOURCE_EXHAUSTED, msg);
		}
		return reply_send(lc, m, hdr, BW_STATUS_OK, (uint32_t)len, 0);
	}

	/* INFER in one datagram */
	struct dp_request *req = &lc->request;
	req->mbuf = m;
	req->hdr = hdr;
	req->body = body;
	req->body_len = hdr->body_len;
	req->pages = NULL;
	req->msg = NULL;
	return infer_handle(lc, model, req, body_cap);
}

bool dp_reply_amplifies(struct dp_lcore *lc, const struct rte_mbuf *m, const struct bw_hdr *hdr, uint32_t reply_len,
			char *why, size_t cap)
{
	uint32_t carried;

	if (hdr->flags & BW_FLAG_AUTH)
		return false; /* a forged source cannot sign */
	carried = request_bytes(m, hdr);
	if (reply_len <= carried)
		return false;
	lc->stats.amplification_refused++;
	snprintf(why, cap, "the reply is %u body bytes, more than the request's %u: pad the request to %u (flag PADDED) "
		 "or sign it", reply_len, carried, reply_len);
	return true;
}

bool dp_request_amplifies(struct dp_lcore *lc, const struct dp_request *req, uint64_t reply_len, char *why,
			  size_t cap)
{
	return dp_reply_amplifies(lc, req->mbuf, req->hdr, (uint32_t)RTE_MIN(reply_len, (uint64_t)UINT32_MAX), why,
				  cap);
}

void dp_request_reply(struct dp_lcore *lc, struct rte_mbuf *m, struct bw_hdr *hdr, enum bw_status status,
		      uint32_t reply_len, uint16_t reply_tensors, const char *msg)
{
	uint32_t room = reply_room(lc, m, hdr);
	char why[DP_ERROR_MSG_MAX + 1];

	if (status != BW_STATUS_OK) {
		dp_error_reply(lc, m, hdr, status < BW_STATUS_COUNT ? status : BW_STATUS_INTERNAL,
			       msg != NULL ? msg : bw_status_name(status));
		return;
	}
	if (unlikely(reply_len > room)) {
		/* the frame would run past the mbuf or the MTU: the layer broke infer's contract */
		lc->stats.model_contract_errors++;
		snprintf(why, sizeof(why), "the model's reply of %u bytes exceeds the datagram's %u bytes of room",
			 reply_len, room);
		dp_error_reply(lc, m, hdr, BW_STATUS_INTERNAL, why);
		return;
	}
	/* a forged source must buy no amplification (docs/protocol.md): known only now, when the
	 * model has said how long its reply is */
	if (dp_reply_amplifies(lc, m, hdr, reply_len, why, sizeof(why))) {
		dp_error_reply(lc, m, hdr, BW_STATUS_RESOURCE_EXHAUSTED, why);
		return;
	}
	reply_send(lc, m, hdr, status, reply_len, reply_tensors);
}

void dp_request_complete(struct dp_lcore *lc, struct rte_mbuf *m, struct bw_hdr *hdr, struct dp_msg *msg,
			 enum bw_status status, uint32_t reply_len, uint16_t reply_tensors, const char *why)
{
	if (msg != NULL) {
		dp_msg_complete(lc, msg, m, hdr, status < BW_STATUS_COUNT ? status : BW_STATUS_INTERNAL, reply_len,
				reply_tensors, why != NULL ? why : bw_status_name(status));
		return;
	}
	lc->stats.held_requests--;
	dp_request_reply(lc, m, hdr, status, reply_len, reply_tensors, why);
	dp_tx_enqueue(lc, m);
}
