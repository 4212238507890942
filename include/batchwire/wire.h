/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * batchwire protocol v1: the bytes of a UDP datagram between a client and the appliance.
 * docs/protocol.md is the prose; this header is the layout. DPDK-free: the daemon, the client
 * library and the tests all build against it. Every field is little-endian; every offset and size
 * is pinned by a static_assert so that a change to the layout cannot go unnoticed.
 *
 * The structs are packed because a datagram's payload lands at an address that is only 2-byte
 * aligned inside an mbuf (128 B headroom + 42 B of Eth/IPv4/UDP); packed makes the compiler emit
 * accesses that are safe there. All fields sit at their natural alignment relative to the message
 * start, so nothing is lost on hosts that copy the message into an aligned buffer first.
 */
#ifndef BATCHWIRE_WIRE_H
#define BATCHWIRE_WIRE_H

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <batchwire/dtype.h>
#include <batchwire/status.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "batchwire maps its little-endian wire format onto host structs: little-endian hosts only"
#endif

#define BW_PROTO_MAGIC 0x52495742u /* the bytes "BWIR" */
#define BW_PROTO_VERSION 1
#define BW_UDP_PORT_DEFAULT 7878

/* Request opcodes; a reply carries the request's opcode with BW_OP_REPLY set. */
enum bw_opcode {
	BW_OP_PING = 1,       /* liveness; the body comes back unchanged */
	BW_OP_INFER = 2,      /* run a model on the tensors in the body */
	BW_OP_MODEL_INFO = 3, /* describe one model */
};
#define BW_OP_REPLY 0x80

/* Header flags. */
#define BW_FLAG_AUTH 0x01   /* a struct bw_auth_trailer ends the datagram */
#define BW_FLAG_PADDED 0x02 /* zero bytes follow the body (before any trailer) to the datagram's end: an
			     * unsegmented request pads itself to the size of its reply */
#define BW_FLAGS_KNOWN (BW_FLAG_AUTH | BW_FLAG_PADDED)
/* Replies only: the server is draining (stopping after a grace period): a PING reply says so, so
 * that clients send new requests elsewhere; a request that sets it is refused (unknown flags). */
#define BW_FLAG_DRAINING 0x04
#define BW_FLAGS_REPLY_KNOWN (BW_FLAG_AUTH | BW_FLAG_PADDED | BW_FLAG_DRAINING)

/* A priority of 0 is the most urgent; a model with P levels accepts 0..P-1. */
#define BW_PRIORITY_HIGHEST 0

/* A deadline budget of 0 means "no budget of my own": the model's default applies. */
#define BW_DEADLINE_NONE 0

#define BW_MAX_RANK 8
#define BW_MAX_TENSORS 64
#define BW_MAX_NAME_LEN 255
#define BW_TENSOR_BY_NAME 0xffffu /* bw_tensor_desc.index: match the tensor by its name */
#define BW_MODEL_ID_ANY 0xffffffffu
/* bw_hdr.model_id of an INFER: the model in the low 16 bits, a version it must be served at in the
 * high 16 (0: whichever version is served) */
#define BW_MODEL_ID_MODEL_MASK 0xffffu
#define BW_MODEL_ID_VERSION_SHIFT 16

/* The fixed header at the start of every datagram. */
struct bw_hdr {
	uint32_t magic;          /* BW_PROTO_MAGIC */
	uint8_t version;         /* BW_PROTO_VERSION */
	uint8_t opcode;          /* enum bw_opcode, | BW_OP_REPLY in replies */
	uint16_t status;         /* enum bw_status; 0 in requests */
	uint64_t request_id;     /* chosen by the client, echoed in the reply */
	uint32_t model_id;       /* which model; ignored by PING */
	uint32_t deadline_us;    /* relative budget from arrival, BW_DEADLINE_NONE for the default */
	uint8_t priority;        /* 0 = most urgent */
	uint8_t flags;           /* BW_FLAG_* */
	uint16_t num_tensors;    /* tensor descriptors in the (whole, reassembled) body */
	uint32_t body_len;       /* body bytes in this datagram, after the header, before a trailer */
	uint16_t seg_index;      /* 0-based segment number */
	uint16_t seg_count;      /* 1 for a message that fits one datagram */
	uint32_t total_body_len; /* body bytes of the whole message, all segments together */
} __attribute__((packed));

static_assert(offsetof(struct bw_hdr, magic) == 0, "bw_hdr.magic");
static_assert(offsetof(struct bw_hdr, version) == 4, "bw_hdr.version");
static_assert(offsetof(struct bw_hdr, opcode) == 5, "bw_hdr.opcode");
static_assert(offsetof(struct bw_hdr, status) == 6, "bw_hdr.status");
static_assert(offsetof(struct bw_hdr, request_id) == 8, "bw_hdr.request_id");
static_assert(offsetof(struct bw_hdr, model_id) == 16, "bw_hdr.model_id");
static_assert(offsetof(struct bw_hdr, deadline_us) == 20, "bw_hdr.deadline_us");
static_assert(offsetof(struct bw_hdr, priority) == 24, "bw_hdr.priority");
static_assert(offsetof(struct bw_hdr, flags) == 25, "bw_hdr.flags");
static_assert(offsetof(struct bw_hdr, num_tensors) == 26, "bw_hdr.num_tensors");
static_assert(offsetof(struct bw_hdr, body_len) == 28, "bw_hdr.body_len");
static_assert(offsetof(struct bw_hdr, seg_index) == 32, "bw_hdr.seg_index");
static_assert(offsetof(struct bw_hdr, seg_count) == 34, "bw_hdr.seg_count");
static_assert(offsetof(struct bw_hdr, total_body_len) == 36, "bw_hdr.total_body_len");
static_assert(sizeof(struct bw_hdr) == 40, "bw_hdr size");

/*
 * One tensor in a body. Its name (name_len bytes, no NUL) follows the descriptor directly and is
 * padded with zeros to a multiple of 8 bytes, so the next descriptor starts 8-byte aligned relative
 * to the body. The payloads of all tensors follow the last descriptor, packed in descriptor order.
 */
struct bw_tensor_desc {
	uint16_t index;             /* input/output index, or BW_TENSOR_BY_NAME */
	uint8_t dtype;              /* enum bw_dtype */
	uint8_t rank;               /* 0..BW_MAX_RANK; 0 is a scalar */
	uint16_t name_len;          /* 0..BW_MAX_NAME_LEN */
	uint16_t reserved;          /* 0 */
	uint32_t data_len;          /* payload bytes: product(dims) * element size */
	uint32_t reserved2;         /* 0 */
	uint32_t dims[BW_MAX_RANK]; /* dims[0..rank-1]; 0 in MODEL_INFO means "any" */
} __attribute__((packed));

static_assert(offsetof(struct bw_tensor_desc, index) == 0, "bw_tensor_desc.index");
static_assert(offsetof(struct bw_tensor_desc, dtype) == 2, "bw_tensor_desc.dtype");
static_assert(offsetof(struct bw_tensor_desc, rank) == 3, "bw_tensor_desc.rank");
static_assert(offsetof(struct bw_tensor_desc, name_len) == 4, "bw_tensor_desc.name_len");
static_assert(offsetof(struct bw_tensor_desc, reserved) == 6, "bw_tensor_desc.reserved");
static_assert(offsetof(struct bw_tensor_desc, data_len) == 8, "bw_tensor_desc.data_len");
static_assert(offsetof(struct bw_tensor_desc, reserved2) == 12, "bw_tensor_desc.reserved2");
static_assert(offsetof(struct bw_tensor_desc, dims) == 16, "bw_tensor_desc.dims");
static_assert(sizeof(struct bw_tensor_desc) == 48, "bw_tensor_desc size");

/* Body of a MODEL_INFO reply: this struct, the name (padded to 8), the allowed batch sizes as
 * uint32_t (padded to 8), then num_inputs and num_outputs tensor descriptors with their names
 * (data_len 0; a dim of 0 is dynamic, dims[0] of a batched model is the batch dimension). */
struct bw_model_info {
	uint32_t model_id;
	uint16_t name_len;
	uint16_t flags;           /* BW_MODEL_F_* */
	uint16_t num_inputs;
	uint16_t num_outputs;
	uint16_t num_batch_sizes; /* 0: any size up to max_batch_size (0: not batched) */
	uint16_t priority_levels; /* a request's priority must be below this */
	uint32_t max_batch_size;
	uint32_t version;         /* the version being served (docs/protocol.md); 0: the model has none (echo) */
} __attribute__((packed));

#define BW_MODEL_F_ANY_TENSORS 0x0001 /* accepts any tensors (the echo model): no descriptors */

static_assert(offsetof(struct bw_model_info, model_id) == 0, "bw_model_info.model_id");
static_assert(offsetof(struct bw_model_info, name_len) == 4, "bw_model_info.name_len");
static_assert(offsetof(struct bw_model_info, flags) == 6, "bw_model_info.flags");
static_assert(offsetof(struct bw_model_info, num_inputs) == 8, "bw_model_info.num_inputs");
static_assert(offsetof(struct bw_model_info, num_outputs) == 10, "bw_model_info.num_outputs");
static_assert(offsetof(struct bw_model_info, num_batch_sizes) == 12, "bw_model_info.num_batch_sizes");
static_assert(offsetof(struct bw_model_info, priority_levels) == 14, "bw_model_info.priority_levels");
static_assert(offsetof(struct bw_model_info, max_batch_size) == 16, "bw_model_info.max_batch_size");
static_assert(offsetof(struct bw_model_info, version) == 20, "bw_model_info.version");
static_assert(sizeof(struct bw_model_info) == 24, "bw_model_info size");

/* The datagram's last 40 bytes when BW_FLAG_AUTH is set: HMAC-SHA256, keyed by key_id, over the
 * datagram's addresses and everything of it before the tag (batchwire/auth.h). */
struct bw_auth_trailer {
	uint32_t key_id;
	uint32_t reserved; /* 0 */
	uint8_t tag[32];
} __attribute__((packed));

static_assert(offsetof(struct bw_auth_trailer, key_id) == 0, "bw_auth_trailer.key_id");
static_assert(offsetof(struct bw_auth_trailer, reserved) == 4, "bw_auth_trailer.reserved");
static_assert(offsetof(struct bw_auth_trailer, tag) == 8, "bw_auth_trailer.tag");
static_assert(sizeof(struct bw_auth_trailer) == 40, "bw_auth_trailer size");

/* Largest UDP payload on a 9000-byte MTU (IPv4 20 B, UDP 8 B): the biggest unsegmented message. */
#define BW_MTU_MAX 9000
#define BW_DGRAM_MAX (BW_MTU_MAX - 20 - 8)

/* Segmentation (docs/protocol.md): every slice but the last is at least this long (a datagram at
 * the IPv4 minimum MTU of 576 carries 508), and a message has at most this many segments. */
#define BW_SLICE_MIN 256
#define BW_SEG_COUNT_MAX 65535

static inline uint32_t bw_pad8(uint32_t len)
{
	return (len + 7u) & ~7u;
}

/**
 * Writes one tensor descriptor and its name, zero-padded to 8 bytes, at p (unaligned is fine): the
 * one encoding the server's replies and the client's requests share. Reserved fields and the dims
 * past rank are 0. \return the bytes written: sizeof(struct bw_tensor_desc) + bw_pad8(name_len).
 */
static inline uint32_t bw_tensor_desc_write(uint8_t *p, uint16_t index, uint8_t dtype, uint8_t rank,
					    const uint32_t *dims, const char *name, uint16_t name_len, uint32_t data_len)
{
	struct bw_tensor_desc desc;

	memset(&desc, 0, sizeof(desc));
	desc.index = index;
	desc.dtype = dtype;
	desc.rank = rank;
	desc.name_len = name_len;
	desc.data_len = data_len;
	memcpy(desc.dims, dims, (size_t)rank * sizeof(desc.dims[0]));
	memcpy(p, &desc, sizeof(desc));
	if (name_len > 0)
		memcpy(p + sizeof(desc), name, name_len);
	memset(p + sizeof(desc) + name_len, 0, bw_pad8(name_len) - name_len);
	return (uint32_t)sizeof(desc) + bw_pad8(name_len);
}

/* A tensor found in a body: pointers into the caller's buffer, nothing copied. */
struct bw_tensor_view {
	const struct bw_tensor_desc *desc;
	const char *name;    /* desc->name_len bytes, not NUL-terminated */
	const uint8_t *data; /* NULL when the payload is not all inside the bytes parsed (bw_body_parse_prefix) */
	uint32_t offset;     /* the payload's place in the body */
};

/*
 * Walks a body holding num_tensors tensors and checks every rule of docs/protocol.md: descriptors and
 * names inside the body, known dtype, rank <= BW_MAX_RANK, reserved fields zero, the dims' product
 * (each 0 counted as 1) within 32 bits, names' padding zero, data_len equal to product(dims) * element size, and the payloads filling the rest of the body exactly. Only the first
 * avail bytes of the body are at body (a message that came in segments: its first slice, or its
 * descriptors copied out); the descriptors must lie in them, the payloads need not.
 * \param views  out, room for num_tensors entries (NULL to validate only)
 * \param why    out, on error a static string naming the rule that failed
 * \return 0; -EAGAIN when a descriptor or name runs past avail but not past body_len (parse more of
 *         the body); or -EINVAL with *why set
 */
static inline int bw_body_parse_prefix(const uint8_t *body, uint32_t avail, uint32_t body_len,
				       uint32_t num_tensors, struct bw_tensor_view *views, const char **why)
{
	uint64_t off = 0, data_total = 0;
	uint32_t i, d;

	if (num_tensors > BW_MAX_TENSORS) {
		*why = "num_tensors above 64";
		return -EINVAL;
	}
	for (i = 0; i < num_tensors; i++) {
		const struct bw_tensor_desc *desc = (const void *)(body + off);
		uint64_t elems = 1, bound;
		uint32_t elem_size;

		if (off + sizeof(*desc) > body_len) {
			*why = "tensor descriptor runs past the body";
			return -EINVAL;
		}
		if (off + sizeof(*desc) > avail)
			return -EAGAIN;
		if (desc->reserved != 0 || desc->reserved2 != 0) {
			*why = "tensor descriptor reserved field not zero";
			return -EINVAL;
		}
		elem_size = bw_dtype_size(desc->dtype);
		if (elem_size == 0) {
			*why = "tensor dtype not supported";
			return -EINVAL;
		}
		if (desc->rank > BW_MAX_RANK) {
			*why = "tensor rank above 8";
			return -EINVAL;
		}
		if (desc->name_len > BW_MAX_NAME_LEN) {
			*why = "tensor name longer than 255 bytes";
			return -EINVAL;
		}
		if (desc->index == BW_TENSOR_BY_NAME && desc->name_len == 0) {
			*why = "tensor addressed by name has no name";
			return -EINVAL;
		}
		/* bounded with each 0 taken as 1: a zero dim must not let the others be anything (a reader
		 * multiplying the dims after the first would overflow) */
		for (d = 0, bound = 1; d < desc->rank; d++) {
			elems *= desc->dims[d];
			bound *= desc->dims[d] != 0 ? desc->dims[d] : 1;
			if (bound > UINT32_MAX) {
				*why = "tensor dims overflow";
				return -EINVAL;
			}
		}
		for (; d < BW_MAX_RANK; d++) {
			if (desc->dims[d] != 0) {
				*why = "tensor dim beyond rank not zero";
				return -EINVAL;
			}
		}
		if (elems * elem_size != desc->data_len) {
			*why = "tensor data_len does not match dims and dtype";
			return -EINVAL;
		}
		off += sizeof(*desc);
		if (off + bw_pad8(desc->name_len) > body_len) {
			*why = "tensor name runs past the body";
			return -EINVAL;
		}
		if (off + bw_pad8(desc->name_len) > avail)
			return -EAGAIN;
		for (d = desc->name_len; d < bw_pad8(desc->name_len); d++) {
			if (body[off + d] != 0) {
				*why = "tensor name padding not zero";
				return -EINVAL;
			}
		}
		if (views != NULL) {
			views[i].desc = desc;
			views[i].name = (const char *)body + off;
		}
		off += bw_pad8(desc->name_len);
		data_total += desc->data_len;
	}
	if (off + data_total != body_len) {
		*why = "tensor payloads do not fill the body exactly";
		return -EINVAL;
	}
	if (views != NULL) {
		for (i = 0; i < num_tensors; i++) {
			views[i].offset = (uint32_t)off;
			views[i].data = off + views[i].desc->data_len <= avail ? body + off : NULL;
			off += views[i].desc->data_len;
		}
	}
	return 0;
}

/**
 * Up to cap - 1 bytes of a name a peer sent, for a message: anything but printable ASCII becomes '?',
 * so the text stays valid UTF-8 and holds no control characters whatever the bytes were.
 * \return whether the name was cut to fit.
 */
static inline bool bw_name_printable(char *dst, size_t cap, const char *name, uint32_t len)
{
	uint32_t n = cap > 0 && len > cap - 1 ? (uint32_t)(cap - 1) : len;

	if (cap == 0)
		return len > 0;
	for (uint32_t i = 0; i < n; i++)
		dst[i] = ((unsigned char)name[i] >= 0x20 && (unsigned char)name[i] < 0x7f) ? name[i] : '?';
	dst[n] = '\0';
	return n < len;
}

/** bw_body_parse_prefix of a body that is all at body. */
static inline int bw_body_parse(const uint8_t *body, uint32_t body_len, uint32_t num_tensors,
				struct bw_tensor_view *views, const char **why)
{
	return bw_body_parse_prefix(body, body_len, body_len, num_tensors, views, why);
}

#endif /* BATCHWIRE_WIRE_H */
