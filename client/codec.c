/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The client's half of protocol v1 without sockets: encoding requests, validating replies and
 * decoding MODEL_INFO bodies. Pure so that the tests can feed it every malformed datagram.
 * Tensor bodies are parsed by wire.h's bw_body_parse, the same walker the server uses, so the two
 * sides cannot disagree on what a valid body is.
 */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "bwclient.h"

/* Checks one tensor to send; returns its body footprint (descriptor + padded name) or -EINVAL. */
static int64_t tensor_desc_size(const struct bwc_tensor *t)
{
	uint32_t elem_size = bw_dtype_size(t->dtype);
	uint64_t elems = 1;
	size_t name_len = t->name != NULL ? strlen(t->name) : 0;
	uint32_t d;

	if (elem_size == 0 || t->rank > BW_MAX_RANK || name_len > BW_MAX_NAME_LEN)
		return -EINVAL;
	if (t->index == BW_TENSOR_BY_NAME && name_len == 0)
		return -EINVAL;
	for (d = 0; d < t->rank; d++) {
		elems *= t->dims[d];
		if (elems > UINT32_MAX)
			return -EINVAL;
	}
	if (elems * elem_size != t->data_len || (t->data_len != 0 && t->data == NULL))
		return -EINVAL;
	return (int64_t)sizeof(struct bw_tensor_desc) + bw_pad8((uint32_t)name_len);
}

/* Checks a request; \return its body's length (descriptors, then payloads, then a raw body), or -EINVAL. */
static int64_t request_body_len(const struct bwc_request *req)
{
	uint64_t body_len = 0;

	if (req->opcode < BW_OP_PING || req->opcode > BW_OP_MODEL_INFO)
		return -EINVAL;
	if (req->num_tensors > BW_MAX_TENSORS || (req->num_tensors > 0 && req->tensors == NULL))
		return -EINVAL;
	/* PING and MODEL_INFO carry no tensors; a raw body and tensors cannot share one body. */
	if (req->num_tensors > 0 && (req->opcode != BW_OP_INFER || req->body_len > 0))
		return -EINVAL;
	if (req->body_len > 0 && req->body == NULL)
		return -EINVAL;
	for (uint32_t i = 0; i < req->num_tensors; i++) {
		int64_t sz = tensor_desc_size(&req->tensors[i]);

		if (sz < 0)
			return sz;
		body_len += (uint64_t)sz + req->tensors[i].data_len;
	}
	return (int64_t)(body_len + req->body_len);
}

/* Copies the overlap of [part, part + part_len) with the slice [off, off + len) of the body to out. */
static void part_copy(uint64_t part, const uint8_t *src, uint64_t part_len, uint64_t off, uint32_t len, uint8_t *out)
{
	uint64_t lo = part > off ? part : off, hi = part + part_len < off + len ? part + part_len : off + len;

	if (lo < hi)
		memcpy(out + (lo - off), src + (lo - part), hi - lo);
}

/*
 * Writes bytes [off, off + len) of the request's body to out, without building the whole body: each
 * descriptor is encoded on the stack, each payload copied from the caller's tensor. The one layout of
 * a request body, for one datagram or for the slices of a segmented message.
 */
static void body_copy(const struct bwc_request *req, uint64_t off, uint32_t len, uint8_t *out)
{
	uint8_t desc[sizeof(struct bw_tensor_desc) + BW_MAX_NAME_LEN + 8];
	uint64_t at = 0;

	for (uint32_t i = 0; i < req->num_tensors; i++) {
		const struct bwc_tensor *t = &req->tensors[i];
		uint32_t n = bw_tensor_desc_write(desc, t->index, t->dtype, t->rank, t->dims, t->name,
						  t->name != NULL ? (uint16_t)strlen(t->name) : 0, t->data_len);

		part_copy(at, desc, n, off, len, out);
		at += n;
	}
	for (uint32_t i = 0; i < req->num_tensors; i++) {
		part_copy(at, req->tensors[i].data, req->tensors[i].data_len, off, len, out);
		at += req->tensors[i].data_len;
	}
	part_copy(at, req->body, req->body_len, off, len, out);
}

static void header_write(const struct bwc_request *req, uint32_t body_len, uint16_t seg_index, uint16_t seg_count,
			 uint32_t total_body_len, struct bw_hdr *hdr)
{
	/* Zero first: the header's reserved fields must be 0 on the wire (bw_tensor_desc_write zeroes the
	 * descriptors' own). */
	memset(hdr, 0, sizeof(*hdr));
	hdr->magic = BW_PROTO_MAGIC;
	hdr->version = BW_PROTO_VERSION;
	hdr->opcode = req->opcode;
	hdr->request_id = req->request_id;
	hdr->model_id = req->model_id;
	hdr->deadline_us = req->deadline_us;
	hdr->priority = req->priority;
	hdr->num_tensors = req->num_tensors;
	hdr->body_len = body_len;
	hdr->seg_index = seg_index;
	hdr->seg_count = seg_count;
	hdr->total_body_len = total_body_len;
}

/* Zeros after the body of a request in one datagram, to req->pad_to bytes after the header (within
 * cap and one datagram). \return the datagram's length, or -EMSGSIZE. */
static int pad_apply(const struct bwc_request *req, int segments, uint32_t body_len, void *buf, size_t cap)
{
	struct bw_hdr *hdr = buf;
	size_t len = sizeof(*hdr) + body_len;

	if (segments != 1 || req->pad_to <= body_len)
		return (int)len;
	if (sizeof(*hdr) + (size_t)req->pad_to > cap || sizeof(*hdr) + (size_t)req->pad_to > BW_DGRAM_MAX)
		return -EMSGSIZE;
	memset((uint8_t *)buf + len, 0, req->pad_to - body_len);
	hdr->flags |= BW_FLAG_PADDED;
	return (int)(sizeof(*hdr) + req->pad_to);
}

uint32_t bwc_reply_body_bytes(const struct bwc_model_info *info, uint32_t rows)
{
	uint64_t bytes = 0;

	for (uint16_t o = 0; o < info->num_outputs; o++) {
		const struct bwc_tensor_info *t = &info->outputs[o];
		/* a batched model's batch dimension is 0 (dynamic): the request's rows */
		uint64_t elems = t->rank == 0 ? 1 : t->dims[0] != 0 ? t->dims[0] : rows;

		for (uint8_t d = 1; d < t->rank; d++) {
			if (t->dims[d] == 0)
				return 0;
			elems *= t->dims[d];
		}
		bytes += sizeof(struct bw_tensor_desc) + bw_pad8((uint32_t)strlen(t->name)) + elems * bw_dtype_size(t->dtype);
	}
	return bytes > UINT32_MAX ? 0 : (uint32_t)bytes;
}

int bwc_encode_request(const struct bwc_request *req, void *buf, size_t cap)
{
	int64_t body_len = request_body_len(req);

	if (body_len < 0)
		return (int)body_len;
	if (sizeof(struct bw_hdr) + (uint64_t)body_len > BW_DGRAM_MAX || sizeof(struct bw_hdr) + (uint64_t)body_len > cap)
		return -EMSGSIZE;
	header_write(req, (uint32_t)body_len, 0, 1, (uint32_t)body_len, buf);
	body_copy(req, 0, (uint32_t)body_len, (uint8_t *)buf + sizeof(struct bw_hdr));
	return pad_apply(req, 1, (uint32_t)body_len, buf, cap);
}

int bwc_request_segments(const struct bwc_request *req, uint32_t slice)
{
	int64_t body_len = request_body_len(req);
	uint64_t count;

	if (body_len < 0)
		return (int)body_len;
	if (slice == 0 || slice > BWC_BODY_MAX)
		return -EINVAL;
	count = body_len == 0 ? 1 : ((uint64_t)body_len + slice - 1) / slice;
	if (count > BWC_SEGMENTS_MAX || (uint64_t)body_len > UINT32_MAX)
		return -EMSGSIZE;
	return (int)count;
}

int bwc_encode_request_segment(const struct bwc_request *req, uint32_t slice, uint32_t index, void *buf, size_t cap)
{
	int count = bwc_request_segments(req, slice);
	uint32_t total, len;

	if (count < 0)
		return count;
	if (index >= (uint32_t)count)
		return -EINVAL;
	total = (uint32_t)request_body_len(req);
	len = index + 1 < (uint32_t)count ? slice : total - slice * index; /* the last: what is left */
	if (sizeof(struct bw_hdr) + len > cap)
		return -EMSGSIZE;
	header_write(req, len, (uint16_t)index, (uint16_t)count, total, buf);
	body_copy(req, (uint64_t)slice * index, len, (uint8_t *)buf + sizeof(struct bw_hdr));
	return pad_apply(req, count, len, buf, cap);
}

static int reply_fail(struct bwc_reply *reply, int err, const char *why)
{
	reply->why = why;
	return err;
}

void bwc_reasm_init(struct bwc_reasm *r, void *buf, size_t cap, uint64_t request_id, uint8_t opcode)
{
	memset(r, 0, sizeof(*r));
	r->buf = buf;
	r->cap = cap;
	r->request_id = request_id;
	r->opcode = opcode;
}

/* Whether h's message fields are the first segment's. */
static bool reasm_same_message(const struct bw_hdr *a, const struct bw_hdr *h)
{
	return a->opcode == h->opcode && a->status == h->status && a->model_id == h->model_id &&
	       a->deadline_us == h->deadline_us && a->priority == h->priority && a->flags == h->flags &&
	       a->num_tensors == h->num_tensors && a->seg_count == h->seg_count && a->total_body_len == h->total_body_len;
}

int bwc_reasm_add(struct bwc_reasm *r, const void *dgram, size_t len)
{
	const struct bw_hdr *h = dgram;
	uint32_t count, idx, off;
	size_t trailer;

	if (len < sizeof(*h) || h->magic != BW_PROTO_MAGIC || h->version != BW_PROTO_VERSION ||
	    h->request_id != r->request_id || h->opcode != (r->opcode | BW_OP_REPLY))
		return 0; /* not part of this reply: a stale one, or someone else's */
	trailer = (h->flags & BW_FLAG_AUTH) ? sizeof(struct bw_auth_trailer) : 0;
	count = h->seg_count;
	idx = h->seg_index;
	if (count == 0 || idx >= count || (uint64_t)sizeof(*h) + h->body_len + trailer != len ||
	    h->body_len > h->total_body_len || (count == 1 && h->body_len != h->total_body_len) ||
	    (count > 1 && h->body_len == 0))
		return -EBADMSG;
	if (!r->started) {
		if (sizeof(*h) + (uint64_t)h->total_body_len > r->cap)
			return -EMSGSIZE;
		r->first = *h;
		r->started = true;
	} else if (!reasm_same_message(&r->first, h)) {
		return -EBADMSG;
	}
	if (r->seen[idx / 8] & (1u << (idx % 8)))
		return 0; /* a duplicate */
	if (idx + 1 < count) {
		/* every slice but the last is the same; the last is what they leave, at least one byte */
		if (r->slice == 0) {
			if ((uint64_t)h->body_len * (count - 1) >= h->total_body_len ||
			    (uint64_t)h->body_len * count < h->total_body_len)
				return -EBADMSG;
			r->slice = h->body_len;
			if (r->last_len != 0 && r->last_len != h->total_body_len - r->slice * (count - 1))
				return -EBADMSG;
		} else if (h->body_len != r->slice) {
			return -EBADMSG;
		}
		off = r->slice * idx;
	} else {
		if (r->slice != 0 && h->body_len != h->total_body_len - r->slice * (count - 1))
			return -EBADMSG;
		if ((uint64_t)h->body_len + (count - 1) > h->total_body_len) /* each other segment holds a byte */
			return -EBADMSG;
		r->last_len = h->body_len;
		off = h->total_body_len - h->body_len;
	}
	memcpy(r->buf + sizeof(*h) + off, h + 1, h->body_len);
	r->seen[idx / 8] |= (uint8_t)(1u << (idx % 8));
	if (++r->received < count)
		return 0;
	/* whole: the header of the one datagram it now is */
	memcpy(r->buf, &r->first, sizeof(r->first));
	((struct bw_hdr *)r->buf)->seg_index = 0;
	((struct bw_hdr *)r->buf)->seg_count = 1;
	((struct bw_hdr *)r->buf)->flags &= (uint8_t)~BW_FLAG_AUTH;
	((struct bw_hdr *)r->buf)->body_len = r->first.total_body_len;
	return 1;
}

int bwc_decode_reply(const void *buf, size_t len, uint8_t opcode, struct bwc_reply *reply)
{
	const struct bw_hdr *hdr = buf;
	const uint8_t *body = (const uint8_t *)buf + sizeof(*hdr);
	size_t trailer, msg_len;
	int rc;

	reply->why = NULL;
	reply->message[0] = '\0';
	reply->num_tensors = 0;
	reply->body = NULL;
	reply->body_len = 0;

	if (len < sizeof(*hdr))
		return reply_fail(reply, -EBADMSG, "datagram shorter than the header");
	if (hdr->magic != BW_PROTO_MAGIC)
		return reply_fail(reply, -EBADMSG, "bad magic");
	if (hdr->version != BW_PROTO_VERSION)
		return reply_fail(reply, -EPROTONOSUPPORT, "protocol version is not 1");
	if (!(hdr->opcode & BW_OP_REPLY))
		return reply_fail(reply, -EPROTO, "opcode is not a reply");
	if ((hdr->opcode & ~BW_OP_REPLY) != opcode)
		return reply_fail(reply, -EPROTO, "reply opcode does not match the request");
	if (hdr->flags & ~BW_FLAGS_REPLY_KNOWN)
		return reply_fail(reply, -EBADMSG, "unknown flag bits");
	if (hdr->seg_count == 0 || hdr->seg_index >= hdr->seg_count)
		return reply_fail(reply, -EBADMSG, "segment index outside the segment count");
	/* One segment of a larger reply: bwc_reasm_add puts them together first (the calls do). */
	if (hdr->seg_count > 1)
		return reply_fail(reply, -ENOTSUP, "one segment of a segmented reply: reassemble it first (bwc_reasm_add)");
	/* The trailer is not verified (this client holds no keys) but its length must add up. */
	trailer = (hdr->flags & BW_FLAG_AUTH) ? sizeof(struct bw_auth_trailer) : 0;
	if ((uint64_t)sizeof(*hdr) + hdr->body_len + trailer != len)
		return reply_fail(reply, -EBADMSG, "body_len does not match the datagram length");
	if (hdr->total_body_len != hdr->body_len)
		return reply_fail(reply, -EBADMSG, "total_body_len differs from body_len");

	reply->status = hdr->status;
	reply->opcode = opcode;
	reply->flags = hdr->flags;
	reply->model_id = hdr->model_id;
	reply->request_id = hdr->request_id;
	reply->body = body;
	reply->body_len = hdr->body_len;

	if (hdr->status != BW_STATUS_OK) {
		/* The message has no NUL on the wire; stop at one anyway so a C string stays whole. */
		msg_len = hdr->body_len < BWC_ERRMSG_MAX ? hdr->body_len : BWC_ERRMSG_MAX;
		memcpy(reply->message, body, msg_len);
		reply->message[msg_len] = '\0';
		return 0;
	}
	if (opcode != BW_OP_INFER) {
		if (hdr->num_tensors != 0)
			return reply_fail(reply, -EBADMSG, "PING or MODEL_INFO reply with tensors");
		return 0;
	}
	rc = bw_body_parse(body, hdr->body_len, hdr->num_tensors, reply->tensors, &reply->why);
	if (rc < 0)
		return -EBADMSG;
	reply->num_tensors = hdr->num_tensors;
	return 0;
}

/* Copies name_len bytes of a wire name into a C string. */
static void copy_name(char *dst, const uint8_t *src, uint16_t name_len)
{
	memcpy(dst, src, name_len);
	dst[name_len] = '\0';
}

static int decode_tensor_infos(const uint8_t *body, size_t len, size_t *off, uint16_t n,
			       struct bwc_tensor_info *out, const char **why)
{
	uint16_t i;

	for (i = 0; i < n; i++) {
		const struct bw_tensor_desc *desc = (const void *)(body + *off);

		if (*off + sizeof(*desc) > len) {
			*why = "model tensor descriptor runs past the body";
			return -EBADMSG;
		}
		if (desc->rank > BW_MAX_RANK) {
			*why = "model tensor rank above 8";
			return -EBADMSG;
		}
		if (desc->name_len > BW_MAX_NAME_LEN) {
			*why = "model tensor name longer than 255 bytes";
			return -EBADMSG;
		}
		*off += sizeof(*desc);
		if (*off + bw_pad8(desc->name_len) > len) {
			*why = "model tensor name runs past the body";
			return -EBADMSG;
		}
		out[i].index = desc->index;
		out[i].dtype = desc->dtype;
		out[i].rank = desc->rank;
		memset(out[i].dims, 0, sizeof(out[i].dims));
		memcpy(out[i].dims, desc->dims, desc->rank * sizeof(desc->dims[0]));
		copy_name(out[i].name, body + *off, desc->name_len);
		*off += bw_pad8(desc->name_len);
	}
	return 0;
}

int bwc_decode_model_info(const void *buf, size_t len, struct bwc_model_info *info,
			  const char **why)
{
	const uint8_t *body = buf;
	const struct bw_model_info *mi = buf;
	size_t off;
	uint16_t i;
	int rc;

	if (len < sizeof(*mi)) {
		*why = "MODEL_INFO body shorter than bw_model_info";
		return -EBADMSG;
	}
	if (mi->name_len > BW_MAX_NAME_LEN) {
		*why = "model name longer than 255 bytes";
		return -EBADMSG;
	}
	if (mi->num_inputs > BW_MAX_TENSORS || mi->num_outputs > BW_MAX_TENSORS) {
		*why = "model has more than 64 inputs or outputs";
		return -EBADMSG;
	}
	if (mi->num_batch_sizes > BWC_MODEL_BATCH_SIZES_MAX) {
		*why = "more batch sizes than one datagram holds";
		return -EBADMSG;
	}
	off = sizeof(*mi);
	if (off + bw_pad8(mi->name_len) > len) {
		*why = "model name runs past the body";
		return -EBADMSG;
	}
	info->model_id = mi->model_id;
	info->flags = mi->flags;
	info->priority_levels = mi->priority_levels;
	info->max_batch_size = mi->max_batch_size;
	info->version = mi->version;
	info->num_batch_sizes = mi->num_batch_sizes;
	info->num_inputs = mi->num_inputs;
	info->num_outputs = mi->num_outputs;
	copy_name(info->name, body + off, mi->name_len);
	off += bw_pad8(mi->name_len);

	if (off + bw_pad8(mi->num_batch_sizes * 4u) > len) {
		*why = "batch sizes run past the body";
		return -EBADMSG;
	}
	for (i = 0; i < mi->num_batch_sizes; i++)
		memcpy(&info->batch_sizes[i], body + off + i * 4u, 4);
	off += bw_pad8(mi->num_batch_sizes * 4u);

	rc = decode_tensor_infos(body, len, &off, mi->num_inputs, info->inputs, why);
	if (rc < 0)
		return rc;
	rc = decode_tensor_infos(body, len, &off, mi->num_outputs, info->outputs, why);
	if (rc < 0)
		return rc;
	if (off != len) {
		*why = "MODEL_INFO body longer than its contents";
		return -EBADMSG;
	}
	return 0;
}

/* Names people type besides bw_dtype_name's canonical ones. */
static const struct {
	const char *name;
	uint8_t dtype;
} g_dtype_aliases[] = {
	{ "float32", BW_DTYPE_FLOAT },    { "fp32", BW_DTYPE_FLOAT },
	{ "float64", BW_DTYPE_DOUBLE },   { "fp64", BW_DTYPE_DOUBLE },
	{ "fp16", BW_DTYPE_FLOAT16 },     { "half", BW_DTYPE_FLOAT16 },
	{ "bf16", BW_DTYPE_BFLOAT16 },
};

const char *bwc_dtype_name(uint32_t dtype)
{
	return bw_dtype_name(dtype);
}

int bwc_dtype_parse(const char *name)
{
	size_t i;

	for (uint32_t d = 0; d <= UINT8_MAX; d++) /* every value a descriptor's dtype byte holds */
		if (bw_dtype_name(d) != NULL && strcasecmp(bw_dtype_name(d), name) == 0)
			return (int)d;
	for (i = 0; i < sizeof(g_dtype_aliases) / sizeof(g_dtype_aliases[0]); i++)
		if (strcasecmp(g_dtype_aliases[i].name, name) == 0)
			return g_dtype_aliases[i].dtype;
	return -EINVAL;
}

const char *bwc_strerror(int rc)
{
	if (rc >= 0)
		return bw_status_name((uint32_t)rc);
	return strerror(-rc);
}
