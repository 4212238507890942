/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the client library: the codec byte by byte against wire.h, reply validation with
 * every malformed datagram we can think of, MODEL_INFO decoding, and the call layer against a
 * loopback UDP server thread that loses datagrams and sends stale replies on purpose.
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

/* Little-endian reads at literal offsets, so the tests check docs/protocol.md's tables and not
 * merely that the encoder and wire.h's structs agree with each other. */
static uint16_t rd16(const uint8_t *p, size_t off)
{
	return (uint16_t)(p[off] | p[off + 1] << 8);
}

static uint32_t rd32(const uint8_t *p, size_t off)
{
	return (uint32_t)rd16(p, off) | (uint32_t)rd16(p, off + 2) << 16;
}

static uint64_t rd64(const uint8_t *p, size_t off)
{
	return (uint64_t)rd32(p, off) | (uint64_t)rd32(p, off + 4) << 32;
}

static bool all_zero(const uint8_t *p, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != 0)
			return false;
	return true;
}

/* Three tensors: by index with a name, by name (name padded 10 -> 16), and an unnamed scalar. */
static const float g_in0[4] = { 1.0f, -2.0f, 3.5f, 0.25f };
static const int64_t g_in1[2] = { 42, -7 };
static const uint8_t g_in2[1] = { 0xab };

static void three_tensors(struct bwc_tensor t[3])
{
	memset(t, 0, 3 * sizeof(t[0]));
	t[0] = (struct bwc_tensor){ .index = 0, .dtype = BW_DTYPE_FLOAT, .rank = 2,
				    .dims = { 1, 4 }, .name = "in0", .data = g_in0,
				    .data_len = sizeof(g_in0) };
	t[1] = (struct bwc_tensor){ .index = BW_TENSOR_BY_NAME, .dtype = BW_DTYPE_INT64, .rank = 1,
				    .dims = { 2 }, .name = "tokens_ids", .data = g_in1,
				    .data_len = sizeof(g_in1) };
	t[2] = (struct bwc_tensor){ .index = 2, .dtype = BW_DTYPE_UINT8, .rank = 0,
				    .data = g_in2, .data_len = sizeof(g_in2) };
}

/* The body layout of three_tensors(): descriptor, name, pad; then the payloads. */
#define D0 40u
#define N0 (D0 + 48u)       /* "in0", padded to 8 */
#define D1 (N0 + 8u)
#define N1 (D1 + 48u)       /* "tokens_ids", padded to 16 */
#define D2 (N1 + 16u)
#define P0 (D2 + 48u)       /* no name */
#define P1 (P0 + 16u)
#define P2 (P1 + 16u)
#define TOTAL3 (P2 + 1u)

static int encode_three(uint8_t *buf, size_t cap)
{
	struct bwc_tensor t[3];
	struct bwc_request req = {
		.opcode = BW_OP_INFER,
		.request_id = 0x0102030405060708ull,
		.model_id = 0xdeadbeef,
		.deadline_us = 5000,
		.priority = 3,
		.num_tensors = 3,
	};

	three_tensors(t);
	req.tensors = t;
	return bwc_encode_request(&req, buf, cap);
}

static void test_encode_fields(void)
{
	uint8_t buf[BW_DGRAM_MAX];
	int len;

	memset(buf, 0x5a, sizeof(buf)); /* garbage, so unwritten padding would show */
	len = encode_three(buf, sizeof(buf));
	CU_ASSERT_EQUAL(len, (int)TOTAL3);

	/* Header, offsets from docs/protocol.md. */
	CU_ASSERT_EQUAL(rd32(buf, 0), BW_PROTO_MAGIC);
	CU_ASSERT(memcmp(buf, "BWIR", 4) == 0);
	CU_ASSERT_EQUAL(buf[4], 1);
	CU_ASSERT_EQUAL(buf[5], BW_OP_INFER);
	CU_ASSERT_EQUAL(rd16(buf, 6), 0);
	CU_ASSERT_EQUAL(rd64(buf, 8), 0x0102030405060708ull);
	CU_ASSERT_EQUAL(rd32(buf, 16), 0xdeadbeef);
	CU_ASSERT_EQUAL(rd32(buf, 20), 5000);
	CU_ASSERT_EQUAL(buf[24], 3);
	CU_ASSERT_EQUAL(buf[25], 0);
	CU_ASSERT_EQUAL(rd16(buf, 26), 3);
	CU_ASSERT_EQUAL(rd32(buf, 28), TOTAL3 - 40u);
	CU_ASSERT_EQUAL(rd16(buf, 32), 0);
	CU_ASSERT_EQUAL(rd16(buf, 34), 1);
	CU_ASSERT_EQUAL(rd32(buf, 36), TOTAL3 - 40u);

	/* Descriptor 0: by index, named. */
	CU_ASSERT_EQUAL(rd16(buf, D0 + 0), 0);
	CU_ASSERT_EQUAL(buf[D0 + 2], BW_DTYPE_FLOAT);
	CU_ASSERT_EQUAL(buf[D0 + 3], 2);
	CU_ASSERT_EQUAL(rd16(buf, D0 + 4), 3);
	CU_ASSERT_EQUAL(rd16(buf, D0 + 6), 0);
	CU_ASSERT_EQUAL(rd32(buf, D0 + 8), 16);
	CU_ASSERT_EQUAL(rd32(buf, D0 + 12), 0);
	CU_ASSERT_EQUAL(rd32(buf, D0 + 16), 1);
	CU_ASSERT_EQUAL(rd32(buf, D0 + 20), 4);
	CU_ASSERT(all_zero(buf + D0 + 24, 24));
	CU_ASSERT(memcmp(buf + N0, "in0", 3) == 0);
	CU_ASSERT(all_zero(buf + N0 + 3, 5));

	/* Descriptor 1: by name. */
	CU_ASSERT_EQUAL(rd16(buf, D1 + 0), BW_TENSOR_BY_NAME);
	CU_ASSERT_EQUAL(buf[D1 + 2], BW_DTYPE_INT64);
	CU_ASSERT_EQUAL(buf[D1 + 3], 1);
	CU_ASSERT_EQUAL(rd16(buf, D1 + 4), 10);
	CU_ASSERT_EQUAL(rd16(buf, D1 + 6), 0);
	CU_ASSERT_EQUAL(rd32(buf, D1 + 8), 16);
	CU_ASSERT_EQUAL(rd32(buf, D1 + 12), 0);
	CU_ASSERT_EQUAL(rd32(buf, D1 + 16), 2);
	CU_ASSERT(all_zero(buf + D1 + 20, 28));
	CU_ASSERT(memcmp(buf + N1, "tokens_ids", 10) == 0);
	CU_ASSERT(all_zero(buf + N1 + 10, 6));

	/* Descriptor 2: unnamed scalar. */
	CU_ASSERT_EQUAL(rd16(buf, D2 + 0), 2);
	CU_ASSERT_EQUAL(buf[D2 + 2], BW_DTYPE_UINT8);
	CU_ASSERT_EQUAL(buf[D2 + 3], 0);
	CU_ASSERT_EQUAL(rd16(buf, D2 + 4), 0);
	CU_ASSERT_EQUAL(rd32(buf, D2 + 8), 1);
	CU_ASSERT(all_zero(buf + D2 + 12, 36));

	/* Payloads, packed in descriptor order. */
	CU_ASSERT(memcmp(buf + P0, g_in0, sizeof(g_in0)) == 0);
	CU_ASSERT(memcmp(buf + P1, g_in1, sizeof(g_in1)) == 0);
	CU_ASSERT_EQUAL(buf[P2], 0xab);
	CU_ASSERT_EQUAL(buf[TOTAL3], 0x5a); /* nothing written past the end */
}

static void test_encode_round_trip(void)
{
	uint8_t buf[BW_DGRAM_MAX];
	struct bw_tensor_view v[3];
	const char *why = NULL;
	int len;

	len = encode_three(buf, sizeof(buf));
	CU_ASSERT_FATAL(len > 40);
	CU_ASSERT_EQUAL(bw_body_parse(buf + 40, rd32(buf, 28), rd16(buf, 26), v, &why), 0);
	CU_ASSERT_EQUAL(v[0].desc->name_len, 3);
	CU_ASSERT(memcmp(v[0].name, "in0", 3) == 0);
	CU_ASSERT(memcmp(v[0].data, g_in0, sizeof(g_in0)) == 0);
	CU_ASSERT_EQUAL(v[1].desc->index, BW_TENSOR_BY_NAME);
	CU_ASSERT(memcmp(v[1].name, "tokens_ids", 10) == 0);
	CU_ASSERT(memcmp(v[1].data, g_in1, sizeof(g_in1)) == 0);
	CU_ASSERT_EQUAL(v[2].desc->rank, 0);
	CU_ASSERT_EQUAL(v[2].data[0], 0xab);
}

static void test_encode_sizes(void)
{
	static uint8_t big[BW_DGRAM_MAX];
	uint8_t buf[BW_DGRAM_MAX + 64];
	struct bwc_tensor t = { .index = 0, .dtype = BW_DTYPE_UINT8, .rank = 1, .data = big };
	struct bwc_request req = { .opcode = BW_OP_INFER, .tensors = &t, .num_tensors = 1 };
	const uint32_t fit = BW_DGRAM_MAX - 40 - 48; /* data that exactly fills a datagram */

	t.dims[0] = fit;
	t.data_len = fit;
	CU_ASSERT_EQUAL(bwc_encode_request(&req, buf, sizeof(buf)), BW_DGRAM_MAX);

	t.dims[0] = t.data_len = fit + 1;
	CU_ASSERT_EQUAL(bwc_encode_request(&req, buf, sizeof(buf)), -EMSGSIZE);

	/* Fits the protocol, not the caller's buffer. */
	t.dims[0] = t.data_len = 100;
	CU_ASSERT_EQUAL(bwc_encode_request(&req, buf, 40 + 48 + 99), -EMSGSIZE);
	CU_ASSERT_EQUAL(bwc_encode_request(&req, buf, 40 + 48 + 100), 40 + 48 + 100);

	/* A raw body too. */
	req = (struct bwc_request){ .opcode = BW_OP_PING, .body = big, .body_len = BW_DGRAM_MAX - 39 };
	CU_ASSERT_EQUAL(bwc_encode_request(&req, buf, sizeof(buf)), -EMSGSIZE);
	req.body_len = BW_DGRAM_MAX - 40;
	CU_ASSERT_EQUAL(bwc_encode_request(&req, buf, sizeof(buf)), BW_DGRAM_MAX);
}

/* pad_to: zeros after the body to that many bytes after the header, flag PADDED; nothing for a
 * body already as long, and -EMSGSIZE past one datagram or the buffer. */
static void test_encode_padded(void)
{
	static uint8_t buf[BW_DGRAM_MAX];
	static const uint8_t body[10] = "0123456789";
	struct bwc_request req = { .opcode = BW_OP_PING, .body = body, .body_len = sizeof(body), .pad_to = 500 };
	int len;

	memset(buf, 0xee, sizeof(buf));
	len = bwc_encode_request(&req, buf, sizeof(buf));
	CU_ASSERT_EQUAL(len, 40 + 500);
	CU_ASSERT_EQUAL(buf[25], BW_FLAG_PADDED);
	CU_ASSERT_EQUAL(rd32(buf, 28), sizeof(body)); /* body_len: the body, not the padding */
	for (int i = 40 + (int)sizeof(body); i < len; i++)
		CU_ASSERT_EQUAL_FATAL(buf[i], 0);
	req.pad_to = sizeof(body);
	CU_ASSERT_EQUAL(bwc_encode_request(&req, buf, sizeof(buf)), 40 + (int)sizeof(body));
	CU_ASSERT_EQUAL(buf[25], 0);
	req.pad_to = BW_DGRAM_MAX - 39;
	CU_ASSERT_EQUAL(bwc_encode_request(&req, buf, sizeof(buf)), -EMSGSIZE);
	req.pad_to = 500;
	CU_ASSERT_EQUAL(bwc_encode_request(&req, buf, 400), -EMSGSIZE);
	/* segments are never padded */
	req.pad_to = 5000;
	req.body_len = sizeof(body);
	CU_ASSERT_EQUAL(bwc_encode_request_segment(&req, 4, 0, buf, sizeof(buf)), 44);
	CU_ASSERT_EQUAL(buf[25], 0);
}

/* A reply's body from MODEL_INFO: descriptors with their padded names, then outputs at the rows; a
 * dynamic dimension past the batch makes it unknown (0). */
static void test_reply_body_bytes(void)
{
	static struct bwc_model_info info;

	memset(&info, 0, sizeof(info));
	info.num_outputs = 2;
	info.outputs[0] = (struct bwc_tensor_info){ .dtype = BW_DTYPE_FLOAT, .rank = 2, .dims = { 0, 10 }, .name = "logits" };
	info.outputs[1] = (struct bwc_tensor_info){ .dtype = BW_DTYPE_INT64, .rank = 1, .dims = { 3 }, .name = "ninechars" };
	CU_ASSERT_EQUAL(bwc_reply_body_bytes(&info, 4), (48 + 8 + 4 * 10 * 4) + (48 + 16 + 3 * 8));
	CU_ASSERT_EQUAL(bwc_reply_body_bytes(&info, 0), (48 + 8) + (48 + 16 + 3 * 8));
	info.outputs[0].dims[1] = 0;
	CU_ASSERT_EQUAL(bwc_reply_body_bytes(&info, 4), 0);
	info.num_outputs = 0;
	CU_ASSERT_EQUAL(bwc_reply_body_bytes(&info, 4), 0);
}

/*
 * Segments (docs/protocol.md, "Segmentation"): for slices of every size from 1 byte to the whole
 * body, the segments' bodies concatenated in seg_index order are the unsegmented body byte for byte;
 * each header is the unsegmented one but for seg_index, seg_count and body_len (the slice; the last
 * what is left); the count is the least that holds the body. A 600 KB tensor (ResNet-50's input)
 * at MTU 1500 and 9000. The limits and refusals.
 */
static void test_encode_segments(void)
{
	static uint8_t whole[BW_DGRAM_MAX], joined[BW_DGRAM_MAX], seg[BW_DGRAM_MAX];
	struct bwc_tensor t[3];
	struct bwc_request req = { .opcode = BW_OP_INFER, .request_id = 77, .model_id = 5, .deadline_us = 900,
				   .priority = 1, .num_tensors = 3 };
	const uint32_t body = TOTAL3 - 40u;
	unsigned int bad = 0;

	three_tensors(t);
	req.tensors = t;
	CU_ASSERT_EQUAL_FATAL(bwc_encode_request(&req, whole, sizeof(whole)), (int)TOTAL3);
	for (uint32_t slice = 1; slice <= body + 1; slice++) {
		int count = bwc_request_segments(&req, slice);
		uint32_t off = 0;

		if (count != (int)((body + slice - 1) / slice)) {
			bad++;
			continue;
		}
		memset(joined, 0x5a, sizeof(joined));
		for (int i = 0; i < count; i++) {
			int len = bwc_encode_request_segment(&req, slice, (uint32_t)i, seg, sizeof(seg));
			uint32_t want = i + 1 < count ? slice : body - slice * (uint32_t)i;

			bad += len != (int)(40 + want) || rd16(seg, 32) != i || rd16(seg, 34) != count ||
			       rd32(seg, 28) != want || rd32(seg, 36) != body;
			/* everything else as in the unsegmented header */
			bad += memcmp(seg, whole, 28) != 0;
			if (len > 40)
				memcpy(joined + off, seg + 40, (size_t)len - 40);
			off += want;
		}
		bad += off != body || memcmp(joined, whole + 40, body) != 0;
	}
	CU_ASSERT_EQUAL(bad, 0);
	/* one segment: the unsegmented datagram */
	CU_ASSERT_EQUAL(bwc_encode_request_segment(&req, body, 0, seg, sizeof(seg)), (int)TOTAL3);
	CU_ASSERT(memcmp(seg, whole, TOTAL3) == 0);
	/* refusals */
	CU_ASSERT_EQUAL(bwc_request_segments(&req, 0), -EINVAL);
	CU_ASSERT_EQUAL(bwc_request_segments(&req, BWC_BODY_MAX + 1), -EINVAL);
	CU_ASSERT_EQUAL(bwc_encode_request_segment(&req, 16, (uint32_t)bwc_request_segments(&req, 16), seg, sizeof(seg)),
			-EINVAL);
	CU_ASSERT_EQUAL(bwc_encode_request_segment(&req, 16, 0, seg, 40 + 15), -EMSGSIZE);
	CU_ASSERT_EQUAL(bwc_encode_request_segment(&req, 16, 0, seg, 40 + 16), 40 + 16);
	req.opcode = 9;
	CU_ASSERT_EQUAL(bwc_request_segments(&req, 16), -EINVAL);
}

static void test_encode_segments_large(void)
{
	const uint32_t image = 3u * 224u * 224u * 4u; /* 602,112 bytes */
	uint8_t *data = malloc(image), *joined = malloc(image + 64);
	static uint8_t seg[BW_DGRAM_MAX];
	struct bwc_tensor t = { .index = 0, .dtype = BW_DTYPE_FLOAT, .rank = 4, .dims = { 1, 3, 224, 224 },
				.name = "input", .data_len = image };
	struct bwc_request req = { .opcode = BW_OP_INFER, .request_id = 9, .num_tensors = 1, .tensors = &t };
	static const uint32_t mtus[] = { 1500, 9000 };

	CU_ASSERT_PTR_NOT_NULL_FATAL(data);
	CU_ASSERT_PTR_NOT_NULL_FATAL(joined);
	for (uint32_t i = 0; i < image; i++)
		data[i] = (uint8_t)(i * 2654435761u >> 24);
	t.data = data;
	for (unsigned int m = 0; m < 2; m++) {
		uint32_t slice = mtus[m] - 20 - 8 - 40, off = 0, body = 48 + 8 + image; /* "input" padded to 8 */
		int count = bwc_request_segments(&req, slice);
		unsigned int bad = 0;

		printf("\n    %u-byte body at MTU %u: %d datagrams of up to %u bytes", body, mtus[m], count, slice);
		CU_ASSERT_EQUAL(count, (int)((body + slice - 1) / slice));
		for (int i = 0; i < count; i++) {
			int len = bwc_encode_request_segment(&req, slice, (uint32_t)i, seg, sizeof(seg));

			bad += len <= 40 || len > (int)(mtus[m] - 28) || rd32(seg, 36) != body;
			if (len > 40) {
				memcpy(joined + off, seg + 40, (size_t)len - 40);
				off += (uint32_t)len - 40;
			}
		}
		CU_ASSERT_EQUAL(bad, 0);
		CU_ASSERT_EQUAL_FATAL(off, body);
		CU_ASSERT(memcmp(joined + 56, data, image) == 0); /* the payload after its descriptor and name */
		CU_ASSERT(memcmp(joined + 48, "input", 5) == 0);
	}
	/* more segments than seg_count holds: refused */
	CU_ASSERT_EQUAL(bwc_request_segments(&req, 8), -EMSGSIZE);
	free(data);
	free(joined);
}

/* Segments of three_tensors() as an OK INFER reply would carry them, cut into slices of slice bytes. */
static int reply_segments(uint32_t slice, uint8_t (*segs)[BW_DGRAM_MAX], int *lens)
{
	struct bwc_tensor t[3];
	struct bwc_request req = { .opcode = BW_OP_INFER, .request_id = 4242, .model_id = 5, .num_tensors = 3 };
	int count;

	three_tensors(t);
	req.tensors = t;
	count = bwc_request_segments(&req, slice);
	for (int i = 0; i < count; i++) {
		lens[i] = bwc_encode_request_segment(&req, slice, (uint32_t)i, segs[i], BW_DGRAM_MAX);
		segs[i][5] |= BW_OP_REPLY;
	}
	return count;
}

/*
 * A segmented reply put back together: in order, reversed and shuffled, with duplicates and a
 * stranger's datagram mixed in, at every slice size; the result decodes as the unsegmented reply
 * would. Each broken rule ends it with -EBADMSG, a reply larger than the buffer with -EMSGSIZE.
 */
static void test_reasm(void)
{
	static uint8_t segs[TOTAL3][BW_DGRAM_MAX], buf[BW_DGRAM_MAX], other[BW_DGRAM_MAX];
	static struct bwc_reasm r;
	static struct bwc_reply reply;
	int lens[TOTAL3];
	unsigned int bad = 0, seed = 7;
	const uint32_t body = TOTAL3 - 40u;

	for (uint32_t slice = 1; slice <= body; slice++) {
		int count = reply_segments(slice, segs, lens);

		for (int order = 0; order < 3; order++) {
			int idx[TOTAL3], rc = 0;

			for (int i = 0; i < count; i++)
				idx[i] = order == 1 ? count - 1 - i : i;
			for (int i = count - 1; order == 2 && i > 0; i--) {
				int j = rand_r(&seed) % (i + 1), x = idx[i];

				idx[i] = idx[j];
				idx[j] = x;
			}
			bwc_reasm_init(&r, buf, sizeof(buf), 4242, BW_OP_INFER);
			memcpy(other, segs[0], (size_t)lens[0]);
			((struct bw_hdr *)other)->request_id = 1; /* someone else's reply: ignored */
			bad += bwc_reasm_add(&r, other, (size_t)lens[0]) != 0;
			for (int i = 0; i < count; i++) {
				rc = bwc_reasm_add(&r, segs[idx[i]], (size_t)lens[idx[i]]);
				bad += rc != (i + 1 == count ? 1 : 0);
				if (i + 1 < count) /* a duplicate changes nothing */
					bad += bwc_reasm_add(&r, segs[idx[i]], (size_t)lens[idx[i]]) != 0;
			}
			bad += rc != 1 || bwc_decode_reply(buf, 40 + body, BW_OP_INFER, &reply) != 0 ||
			       reply.num_tensors != 3 || memcmp(reply.tensors[1].data, g_in1, sizeof(g_in1)) != 0 ||
			       reply.tensors[2].data[0] != 0xab;
		}
	}
	CU_ASSERT_EQUAL(bad, 0);

	/* broken rules, each on a fresh reassembly of slices of 16 bytes */
	int count = reply_segments(16, segs, lens);
	struct { const char *what; int seg; size_t field; uint32_t value; int width; } cases[] = {
		{ "another model", 1, offsetof(struct bw_hdr, model_id), 9, 4 },
		{ "another total", 1, offsetof(struct bw_hdr, total_body_len), body + 16, 4 },
		{ "another seg_count", 1, offsetof(struct bw_hdr, seg_count), (uint32_t)count + 1, 2 },
		{ "seg_index out of range", 1, offsetof(struct bw_hdr, seg_index), (uint32_t)count, 2 },
		{ "another status", 1, offsetof(struct bw_hdr, status), BW_STATUS_INTERNAL, 2 },
	};
	CU_ASSERT_FATAL(count > 3);
	for (unsigned int c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		memcpy(other, segs[cases[c].seg], (size_t)lens[cases[c].seg]);
		if (cases[c].width == 4)
			memcpy(other + cases[c].field, &cases[c].value, 4);
		else
			memcpy(other + cases[c].field, &(uint16_t){ (uint16_t)cases[c].value }, 2);
		bwc_reasm_init(&r, buf, sizeof(buf), 4242, BW_OP_INFER);
		CU_ASSERT_EQUAL(bwc_reasm_add(&r, segs[0], (size_t)lens[0]), 0);
		if (bwc_reasm_add(&r, other, (size_t)lens[cases[c].seg]) != -EBADMSG)
			printf("\n    not refused: %s", cases[c].what);
		CU_ASSERT_EQUAL(bwc_reasm_add(&r, other, (size_t)lens[cases[c].seg]), -EBADMSG);
	}
	/* a middle slice of another length (the datagram shortened with it) */
	memcpy(other, segs[1], (size_t)lens[1]);
	((struct bw_hdr *)other)->body_len = 15;
	bwc_reasm_init(&r, buf, sizeof(buf), 4242, BW_OP_INFER);
	CU_ASSERT_EQUAL(bwc_reasm_add(&r, segs[0], (size_t)lens[0]), 0);
	CU_ASSERT_EQUAL(bwc_reasm_add(&r, other, (size_t)lens[1] - 1), -EBADMSG);
	/* the last first, then a slice it does not fit with */
	bwc_reasm_init(&r, buf, sizeof(buf), 4242, BW_OP_INFER);
	CU_ASSERT_EQUAL(bwc_reasm_add(&r, segs[count - 1], (size_t)lens[count - 1]), 0);
	memcpy(other, segs[0], (size_t)lens[0]);
	((struct bw_hdr *)other)->body_len = 17;
	memset(other + lens[0], 0, 1);
	CU_ASSERT_EQUAL(bwc_reasm_add(&r, other, (size_t)lens[0] + 1), -EBADMSG);
	/* a datagram whose length is not its header's */
	bwc_reasm_init(&r, buf, sizeof(buf), 4242, BW_OP_INFER);
	CU_ASSERT_EQUAL(bwc_reasm_add(&r, segs[0], (size_t)lens[0] - 1), -EBADMSG);
	/* larger than the caller's buffer: refused at the first segment */
	bwc_reasm_init(&r, buf, 40 + body - 1, 4242, BW_OP_INFER);
	CU_ASSERT_EQUAL(bwc_reasm_add(&r, segs[0], (size_t)lens[0]), -EMSGSIZE);
	/* an unsegmented reply is whole at once, an empty one included */
	count = reply_segments(body, segs, lens);
	CU_ASSERT_EQUAL(count, 1);
	bwc_reasm_init(&r, buf, sizeof(buf), 4242, BW_OP_INFER);
	CU_ASSERT_EQUAL(bwc_reasm_add(&r, segs[0], (size_t)lens[0]), 1);
	CU_ASSERT(memcmp(buf, segs[0], (size_t)lens[0]) == 0);
}

static void test_encode_invalid(void)
{
	uint8_t buf[512], data[16] = { 0 };
	struct bwc_tensor t = { .dtype = BW_DTYPE_FLOAT, .rank = 1, .dims = { 4 }, .data = data,
				.data_len = 16 };
	struct bwc_request req = { .opcode = BW_OP_INFER, .tensors = &t, .num_tensors = 1 };
	char long_name[300];

	CU_ASSERT_EQUAL(bwc_encode_request(&req, buf, sizeof(buf)), 40 + 48 + 16);

	t.dtype = 8; /* STRING: not carried by v1 */
	CU_ASSERT_EQUAL(bwc_encode_request(&req, buf, sizeof(buf)), -EINVAL);
	t.dtype = BW_DTYPE_FLOAT;
	t.rank = BW_MAX_RANK + 1;
	CU_ASSERT_EQUAL(bwc_encode_request(&req, buf, sizeof(buf)), -EINVAL);
	t.rank = 1;
	t.data_len = 15;
	CU_ASSERT_EQUAL(bwc_encode_request(&req, buf, sizeof(buf)), -EINVAL);
	t.data_len = 16;
	t.index = BW_TENSOR_BY_NAME;
	CU_ASSERT_EQUAL(bwc_encode_request(&req, buf, sizeof(buf)), -EINVAL);
	memset(long_name, 'x', sizeof(long_name));
	long_name[BW_MAX_NAME_LEN + 1] = '\0';
	t.name = long_name;
	CU_ASSERT_EQUAL(bwc_encode_request(&req, buf, sizeof(buf)), -EINVAL);
	t.name = "x";
	CU_ASSERT_EQUAL(bwc_encode_request(&req, buf, sizeof(buf)), 40 + 48 + 8 + 16);

	req.opcode = BW_OP_PING; /* PING carries no tensors */
	CU_ASSERT_EQUAL(bwc_encode_request(&req, buf, sizeof(buf)), -EINVAL);
	req.opcode = 9;
	CU_ASSERT_EQUAL(bwc_encode_request(&req, buf, sizeof(buf)), -EINVAL);
	req.opcode = BW_OP_INFER;
	req.num_tensors = BW_MAX_TENSORS + 1;
	CU_ASSERT_EQUAL(bwc_encode_request(&req, buf, sizeof(buf)), -EINVAL);
}

/* A reply datagram with a raw body. */
static size_t make_reply(uint8_t *buf, uint8_t opcode, uint16_t status, const void *body,
			 uint32_t body_len, uint16_t num_tensors)
{
	struct bw_hdr *h = (void *)buf;

	memset(h, 0, sizeof(*h));
	h->magic = BW_PROTO_MAGIC;
	h->version = BW_PROTO_VERSION;
	h->opcode = opcode | BW_OP_REPLY;
	h->status = status;
	h->request_id = 77;
	h->num_tensors = num_tensors;
	h->body_len = body_len;
	h->seg_count = 1;
	h->total_body_len = body_len;
	memcpy(buf + sizeof(*h), body, body_len);
	return sizeof(*h) + body_len;
}

static void test_decode_ok_infer(void)
{
	static struct bwc_reply r;
	uint8_t buf[BW_DGRAM_MAX];
	int len = encode_three(buf, sizeof(buf));

	buf[5] |= BW_OP_REPLY; /* an echo server's reply: the request with the reply bit */
	CU_ASSERT_EQUAL_FATAL(bwc_decode_reply(buf, (size_t)len, BW_OP_INFER, &r), 0);
	CU_ASSERT_EQUAL(r.status, BW_STATUS_OK);
	CU_ASSERT_EQUAL(r.opcode, BW_OP_INFER);
	CU_ASSERT_EQUAL(r.request_id, 0x0102030405060708ull);
	CU_ASSERT_EQUAL(r.model_id, 0xdeadbeef);
	CU_ASSERT_EQUAL(r.num_tensors, 3);
	CU_ASSERT_EQUAL(r.body_len, TOTAL3 - 40);
	CU_ASSERT_PTR_EQUAL(r.body, buf + 40);
	CU_ASSERT_PTR_EQUAL(r.tensors[0].desc, (const void *)(buf + D0));
	CU_ASSERT_PTR_EQUAL(r.tensors[1].name, (const void *)(buf + N1));
	CU_ASSERT_PTR_EQUAL(r.tensors[0].data, buf + P0);
	CU_ASSERT_PTR_EQUAL(r.tensors[2].data, buf + P2);
	CU_ASSERT_EQUAL(r.message[0], '\0');
	CU_ASSERT_PTR_NULL(r.why);
}

static void test_decode_error_reply(void)
{
	static struct bwc_reply r;
	static const char msg[] = "tensor 0: data_len does not match dims";
	uint8_t buf[512];
	char long_msg[400];
	size_t len;

	len = make_reply(buf, BW_OP_INFER, BW_STATUS_INVALID_ARGUMENT, msg, sizeof(msg) - 1, 0);
	CU_ASSERT_EQUAL_FATAL(bwc_decode_reply(buf, len, BW_OP_INFER, &r), 0);
	CU_ASSERT_EQUAL(r.status, BW_STATUS_INVALID_ARGUMENT);
	CU_ASSERT_STRING_EQUAL(r.message, msg);
	CU_ASSERT_EQUAL(r.num_tensors, 0);

	/* An empty message, and one longer than the protocol allows (kept, cut at our limit). */
	len = make_reply(buf, BW_OP_PING, BW_STATUS_UNAVAILABLE, "", 0, 0);
	CU_ASSERT_EQUAL(bwc_decode_reply(buf, len, BW_OP_PING, &r), 0);
	CU_ASSERT_EQUAL(r.status, BW_STATUS_UNAVAILABLE);
	CU_ASSERT_STRING_EQUAL(r.message, "");
	memset(long_msg, 'm', sizeof(long_msg));
	len = make_reply(buf, BW_OP_PING, BW_STATUS_INTERNAL, long_msg, 300, 0);
	CU_ASSERT_EQUAL(bwc_decode_reply(buf, len, BW_OP_PING, &r), 0);
	CU_ASSERT_EQUAL(strlen(r.message), BWC_ERRMSG_MAX);

	/* A status this client does not know (a newer server) is still an error reply. */
	len = make_reply(buf, BW_OP_PING, 40, "new", 3, 0);
	CU_ASSERT_EQUAL(bwc_decode_reply(buf, len, BW_OP_PING, &r), 0);
	CU_ASSERT_EQUAL(r.status, 40);
	CU_ASSERT_STRING_EQUAL(r.message, "new");
}

static void test_decode_truncated(void)
{
	static struct bwc_reply r;
	uint8_t buf[BW_DGRAM_MAX], copy[BW_DGRAM_MAX];
	size_t len, cut;

	len = (size_t)encode_three(buf, sizeof(buf));
	buf[5] |= BW_OP_REPLY;
	/* Copy each prefix to its own buffer so a read past the cut would be a real overread for
	 * tools like ASan, not a read of the rest of a valid datagram. */
	for (cut = 0; cut < len; cut++) {
		uint8_t *p = malloc(cut > 0 ? cut : 1);

		memcpy(p, buf, cut);
		CU_ASSERT(bwc_decode_reply(p, cut, BW_OP_INFER, &r) == -EBADMSG);
		CU_ASSERT_PTR_NOT_NULL(r.why);
		free(p);
	}
	/* A datagram longer than its header says is just as wrong. */
	memcpy(copy, buf, len);
	copy[len] = 0;
	CU_ASSERT_EQUAL(bwc_decode_reply(copy, len + 1, BW_OP_INFER, &r), -EBADMSG);
	CU_ASSERT_EQUAL(bwc_decode_reply(buf, len, BW_OP_INFER, &r), 0);
}

static void test_decode_bad_header(void)
{
	static struct bwc_reply r;
	uint8_t buf[256];
	struct bw_hdr *h = (void *)buf;
	size_t len;

#define FRESH() (len = make_reply(buf, BW_OP_PING, 0, "abcd", 4, 0))
	FRESH();
	CU_ASSERT_EQUAL(bwc_decode_reply(buf, len, BW_OP_PING, &r), 0);
	CU_ASSERT_EQUAL(r.body_len, 4);

	FRESH();
	h->magic = 0x52495743;
	CU_ASSERT_EQUAL(bwc_decode_reply(buf, len, BW_OP_PING, &r), -EBADMSG);

	FRESH();
	h->version = 2;
	CU_ASSERT_EQUAL(bwc_decode_reply(buf, len, BW_OP_PING, &r), -EPROTONOSUPPORT);

	FRESH();
	h->opcode = BW_OP_PING; /* no reply bit: a request, maybe our own looped back */
	CU_ASSERT_EQUAL(bwc_decode_reply(buf, len, BW_OP_PING, &r), -EPROTO);

	FRESH();
	CU_ASSERT_EQUAL(bwc_decode_reply(buf, len, BW_OP_INFER, &r), -EPROTO);

	FRESH();
	h->body_len = 5;
	CU_ASSERT_EQUAL(bwc_decode_reply(buf, len, BW_OP_PING, &r), -EBADMSG);
	FRESH();
	h->body_len = 3;
	CU_ASSERT_EQUAL(bwc_decode_reply(buf, len, BW_OP_PING, &r), -EBADMSG);

	FRESH();
	h->total_body_len = 8;
	CU_ASSERT_EQUAL(bwc_decode_reply(buf, len, BW_OP_PING, &r), -EBADMSG);

	FRESH();
	h->flags = 0x80;
	CU_ASSERT_EQUAL(bwc_decode_reply(buf, len, BW_OP_PING, &r), -EBADMSG);

	FRESH();
	h->seg_count = 0;
	CU_ASSERT_EQUAL(bwc_decode_reply(buf, len, BW_OP_PING, &r), -EBADMSG);

	FRESH();
	h->seg_count = 2;
	h->total_body_len = 8;
	CU_ASSERT_EQUAL(bwc_decode_reply(buf, len, BW_OP_PING, &r), -ENOTSUP);

	/* AUTH: the trailer's 40 bytes must be there (this client does not check the tag). */
	FRESH();
	h->flags = BW_FLAG_AUTH;
	CU_ASSERT_EQUAL(bwc_decode_reply(buf, len, BW_OP_PING, &r), -EBADMSG);
	memset(buf + len, 0, sizeof(struct bw_auth_trailer));
	CU_ASSERT_EQUAL(bwc_decode_reply(buf, len + sizeof(struct bw_auth_trailer), BW_OP_PING, &r),
			0);

	/* OK PING or MODEL_INFO replies carry no tensors. */
	FRESH();
	h->num_tensors = 1;
	CU_ASSERT_EQUAL(bwc_decode_reply(buf, len, BW_OP_PING, &r), -EBADMSG);
#undef FRESH
}

static void test_decode_bad_infer_body(void)
{
	static struct bwc_reply r;
	uint8_t buf[BW_DGRAM_MAX];
	int len = encode_three(buf, sizeof(buf));

	buf[5] |= BW_OP_REPLY;
	buf[D1 + 3] = BW_MAX_RANK + 1;
	CU_ASSERT_EQUAL(bwc_decode_reply(buf, (size_t)len, BW_OP_INFER, &r), -EBADMSG);
	CU_ASSERT_PTR_NOT_NULL(r.why);

	len = encode_three(buf, sizeof(buf));
	buf[5] |= BW_OP_REPLY;
	buf[26] = 2; /* num_tensors says 2 but the body holds 3 */
	CU_ASSERT_EQUAL(bwc_decode_reply(buf, (size_t)len, BW_OP_INFER, &r), -EBADMSG);

	/* An error reply's body is a message: it is not parsed as tensors. */
	len = encode_three(buf, sizeof(buf));
	buf[5] |= BW_OP_REPLY;
	buf[6] = BW_STATUS_INTERNAL;
	CU_ASSERT_EQUAL(bwc_decode_reply(buf, (size_t)len, BW_OP_INFER, &r), 0);
	CU_ASSERT_EQUAL(r.num_tensors, 0);
}

/* A MODEL_INFO body for "resnet50": batch sizes 1,2,4; input float [?,3,224,224] named "input";
 * output float [?,1000] named "logits". */
static size_t make_model_info(uint8_t *body)
{
	struct bw_model_info mi = {
		.model_id = 7,
		.name_len = 8,
		.flags = 0,
		.num_inputs = 1,
		.num_outputs = 1,
		.num_batch_sizes = 3,
		.priority_levels = 4,
		.max_batch_size = 4,
	};
	struct bw_tensor_desc in = { .index = 0, .dtype = BW_DTYPE_FLOAT, .rank = 4,
				     .name_len = 5, .dims = { 0, 3, 224, 224 } };
	struct bw_tensor_desc out = { .index = 0, .dtype = BW_DTYPE_FLOAT, .rank = 2,
				      .name_len = 6, .dims = { 0, 1000 } };
	const uint32_t sizes[3] = { 1, 2, 4 };
	size_t off = 0;

	memset(body, 0, 512);
	memcpy(body + off, &mi, sizeof(mi));
	off += sizeof(mi);
	memcpy(body + off, "resnet50", 8);
	off += 8;
	memcpy(body + off, sizes, sizeof(sizes));
	off += 16; /* 12 bytes padded to 16 */
	memcpy(body + off, &in, sizeof(in));
	off += sizeof(in);
	memcpy(body + off, "input", 5);
	off += 8;
	memcpy(body + off, &out, sizeof(out));
	off += sizeof(out);
	memcpy(body + off, "logits", 6);
	off += 8;
	return off;
}

static void check_resnet50(const struct bwc_model_info *info)
{
	CU_ASSERT_EQUAL(info->model_id, 7);
	CU_ASSERT_STRING_EQUAL(info->name, "resnet50");
	CU_ASSERT_EQUAL(info->flags, 0);
	CU_ASSERT_EQUAL(info->priority_levels, 4);
	CU_ASSERT_EQUAL(info->max_batch_size, 4);
	CU_ASSERT_EQUAL(info->num_batch_sizes, 3);
	CU_ASSERT_EQUAL(info->batch_sizes[0], 1);
	CU_ASSERT_EQUAL(info->batch_sizes[2], 4);
	CU_ASSERT_EQUAL(info->num_inputs, 1);
	CU_ASSERT_EQUAL(info->num_outputs, 1);
	CU_ASSERT_STRING_EQUAL(info->inputs[0].name, "input");
	CU_ASSERT_EQUAL(info->inputs[0].dtype, BW_DTYPE_FLOAT);
	CU_ASSERT_EQUAL(info->inputs[0].rank, 4);
	CU_ASSERT_EQUAL(info->inputs[0].dims[0], 0);
	CU_ASSERT_EQUAL(info->inputs[0].dims[3], 224);
	CU_ASSERT_STRING_EQUAL(info->outputs[0].name, "logits");
	CU_ASSERT_EQUAL(info->outputs[0].rank, 2);
	CU_ASSERT_EQUAL(info->outputs[0].dims[1], 1000);
}

static void test_model_info_decode(void)
{
	static struct bwc_model_info info;
	uint8_t body[512];
	const char *why = NULL;
	size_t len = make_model_info(body), cut;

	CU_ASSERT_EQUAL(len, 24 + 8 + 16 + 56 + 56);
	CU_ASSERT_EQUAL_FATAL(bwc_decode_model_info(body, len, &info, &why), 0);
	check_resnet50(&info);

	for (cut = 0; cut < len; cut++) {
		uint8_t *p = malloc(cut > 0 ? cut : 1);

		memcpy(p, body, cut);
		why = NULL;
		CU_ASSERT(bwc_decode_model_info(p, cut, &info, &why) == -EBADMSG);
		CU_ASSERT_PTR_NOT_NULL(why);
		free(p);
	}
	CU_ASSERT_EQUAL(bwc_decode_model_info(body, len + 8, &info, &why), -EBADMSG);

	/* The echo model: any tensors, not batched, nothing described. */
	{
		struct bw_model_info echo = { .model_id = 0, .name_len = 4,
					      .flags = BW_MODEL_F_ANY_TENSORS, .priority_levels = 1 };

		memset(body, 0, sizeof(body));
		memcpy(body, &echo, sizeof(echo));
		memcpy(body + sizeof(echo), "echo", 4);
		CU_ASSERT_EQUAL(bwc_decode_model_info(body, 32, &info, &why), 0);
		CU_ASSERT_STRING_EQUAL(info.name, "echo");
		CU_ASSERT_EQUAL(info.flags, BW_MODEL_F_ANY_TENSORS);
		CU_ASSERT_EQUAL(info.num_inputs + info.num_outputs + info.num_batch_sizes, 0);
	}
}

static void test_dtype_names(void)
{
	CU_ASSERT_EQUAL(bwc_dtype_parse("float"), BW_DTYPE_FLOAT);
	CU_ASSERT_EQUAL(bwc_dtype_parse("FP32"), BW_DTYPE_FLOAT);
	CU_ASSERT_EQUAL(bwc_dtype_parse("bf16"), BW_DTYPE_BFLOAT16);
	CU_ASSERT_EQUAL(bwc_dtype_parse("int64"), BW_DTYPE_INT64);
	CU_ASSERT_EQUAL(bwc_dtype_parse("string"), -EINVAL);
	CU_ASSERT_STRING_EQUAL(bwc_dtype_name(BW_DTYPE_FLOAT), "float");
	CU_ASSERT_STRING_EQUAL(bwc_dtype_name(BW_DTYPE_DOUBLE), "double");
	CU_ASSERT_PTR_NULL(bwc_dtype_name(8));
	CU_ASSERT_STRING_EQUAL(bwc_strerror(BW_STATUS_NOT_FOUND), "NOT_FOUND");
	CU_ASSERT_PTR_NOT_NULL(bwc_strerror(-ETIMEDOUT));
}

/* --- loopback: a plain-socket server thread scripted per test --- */

#define SERVER_IDLE_MS 3000 /* the thread gives up if the client goes quiet this long */

struct loop_server {
	int fd;
	uint16_t port;
	pthread_t thread;
	/* Handles datagram number n (from 1); returns true when the script is done. */
	bool (*handle)(struct loop_server *s, int n, uint8_t *dgram, size_t len,
		       const struct sockaddr_in *from);
	int received;
	uint8_t first[BW_DGRAM_MAX];
	size_t first_len;
	bool resend_identical; /* every datagram after the first equalled the first */
	bool script_ok;        /* the handler's own checks on what it received */
};

static void server_send(struct loop_server *s, const void *buf, size_t len,
			const struct sockaddr_in *to)
{
	ssize_t n = sendto(s->fd, buf, len, 0, (const struct sockaddr *)to, sizeof(*to));

	(void)n;
}

static void *server_main(void *arg)
{
	struct loop_server *s = arg;
	static uint8_t dgram[65536];

	for (;;) {
		struct pollfd pfd = { .fd = s->fd, .events = POLLIN };
		struct sockaddr_in from;
		socklen_t fromlen = sizeof(from);
		ssize_t len;

		if (poll(&pfd, 1, SERVER_IDLE_MS) <= 0)
			break;
		len = recvfrom(s->fd, dgram, sizeof(dgram), 0, (struct sockaddr *)&from, &fromlen);
		if (len < 0)
			break;
		s->received++;
		if (s->received == 1) {
			memcpy(s->first, dgram, (size_t)len);
			s->first_len = (size_t)len;
			s->resend_identical = true;
		} else if ((size_t)len != s->first_len || memcmp(dgram, s->first, (size_t)len) != 0) {
			s->resend_identical = false;
		}
		if (s->handle(s, s->received, dgram, (size_t)len, &from))
			break;
	}
	return NULL;
}

static int server_start(struct loop_server *s)
{
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(addr);

	s->fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (s->fd < 0)
		return -errno;
	if (bind(s->fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
	    getsockname(s->fd, (struct sockaddr *)&addr, &alen) < 0) {
		close(s->fd);
		return -errno;
	}
	s->port = ntohs(addr.sin_port);
	return pthread_create(&s->thread, NULL, server_main, s) == 0 ? 0 : -EAGAIN;
}

static void server_stop(struct loop_server *s)
{
	pthread_join(s->thread, NULL);
	close(s->fd);
}

static struct bwc *open_host(const char *host, uint16_t port, uint32_t timeout_ms, uint32_t retries)
{
	struct bwc_opts o;
	int err = 0;
	struct bwc *c;

	bwc_opts_init(&o);
	o.host = host;
	o.port = port;
	o.timeout_ms = timeout_ms;
	o.retries = retries;
	c = bwc_open(&o, &err);
	CU_ASSERT_EQUAL(err, 0);
	return c;
}

static struct bwc *open_loopback(uint16_t port, uint32_t timeout_ms, uint32_t retries)
{
	return open_host("127.0.0.1", port, timeout_ms, retries);
}

/* Turns a request into its reply in place: the reply bit, a status, a new body. */
static size_t as_reply(uint8_t *dgram, uint16_t status, const void *body, uint32_t body_len,
		       uint16_t num_tensors)
{
	struct bw_hdr *h = (void *)dgram;

	h->opcode |= BW_OP_REPLY;
	h->status = status;
	h->num_tensors = num_tensors;
	h->body_len = body_len;
	h->total_body_len = body_len;
	if (body != dgram + sizeof(*h))
		memmove(dgram + sizeof(*h), body, body_len);
	return sizeof(*h) + body_len;
}

/* Loses the first datagram; answers the resend with a stale reply first, then the real one. */
static bool drop_first_then_stale(struct loop_server *s, int n, uint8_t *dgram, size_t len,
				  const struct sockaddr_in *from)
{
	static uint8_t stale[BW_DGRAM_MAX];
	struct bw_hdr *h = (void *)dgram;
	size_t body_len = len - sizeof(*h);

	if (n == 1)
		return false;
	s->script_ok = h->opcode == BW_OP_PING && len >= sizeof(*h);
	/* Same length, other bytes, other request_id: accepting it would fail the echo check. */
	memcpy(stale, dgram, len);
	((struct bw_hdr *)stale)->request_id = h->request_id - 1;
	memset(stale + sizeof(*h), 0xee, body_len);
	as_reply(stale, BW_STATUS_OK, stale + sizeof(*h), (uint32_t)body_len, 0);
	server_send(s, stale, len, from);
	server_send(s, dgram, as_reply(dgram, BW_STATUS_OK, dgram + sizeof(*h),
				       (uint32_t)body_len, 0), from);
	return true;
}

static void test_loopback_retry_and_stale(void)
{
	static struct loop_server s = { .handle = drop_first_then_stale };
	const char payload[] = "are you there?";
	uint64_t rtt_ns = 0;
	struct bwc *c;

	CU_ASSERT_EQUAL_FATAL(server_start(&s), 0);
	c = open_loopback(s.port, 200, 3);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	CU_ASSERT_EQUAL(bwc_ping(c, payload, sizeof(payload), &rtt_ns), 0);
	CU_ASSERT_STRING_EQUAL(bwc_last_error(c), "");
	server_stop(&s);
	CU_ASSERT_EQUAL(s.received, 2);
	CU_ASSERT(s.resend_identical); /* the resend is the same request, same request_id */
	CU_ASSERT(s.script_ok);
	CU_ASSERT(rtt_ns > 0);
	bwc_close(c);
}

/* Answers one INFER with INVALID_ARGUMENT, the next (another request_id) by echoing it. */
static bool error_then_echo(struct loop_server *s, int n, uint8_t *dgram, size_t len,
			    const struct sockaddr_in *from)
{
	static const char msg[] = "tensor 0: rank above the model's";
	struct bw_hdr *h = (void *)dgram;

	if (n == 1) {
		s->script_ok = h->opcode == BW_OP_INFER && h->model_id == 5 && h->priority == 1 &&
			       h->deadline_us == 2500;
		server_send(s, dgram, as_reply(dgram, BW_STATUS_INVALID_ARGUMENT, msg,
					       sizeof(msg) - 1, 0), from);
		return false;
	}
	s->script_ok = s->script_ok && h->request_id == ((struct bw_hdr *)s->first)->request_id + 1;
	server_send(s, dgram, as_reply(dgram, BW_STATUS_OK, dgram + sizeof(*h),
				       (uint32_t)(len - sizeof(*h)), h->num_tensors), from);
	return true;
}

static void test_loopback_infer(void)
{
	static struct loop_server s = { .handle = error_then_echo };
	static struct bwc_reply r;
	struct bwc_tensor t[3];
	struct bwc *c;

	three_tensors(t);
	CU_ASSERT_EQUAL_FATAL(server_start(&s), 0);
	c = open_loopback(s.port, 500, 2);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);

	CU_ASSERT_EQUAL(bwc_infer(c, 5, t, 3, 2500, 1, &r), BW_STATUS_INVALID_ARGUMENT);
	CU_ASSERT_STRING_EQUAL(bwc_last_error(c), "tensor 0: rank above the model's");
	CU_ASSERT_STRING_EQUAL(r.message, "tensor 0: rank above the model's");

	CU_ASSERT_EQUAL(bwc_infer(c, 5, t, 3, 2500, 1, &r), 0);
	CU_ASSERT_EQUAL(r.attempts, 1);
	CU_ASSERT_EQUAL_FATAL(r.num_tensors, 3);
	CU_ASSERT(memcmp(r.tensors[0].data, g_in0, sizeof(g_in0)) == 0);
	CU_ASSERT(memcmp(r.tensors[1].name, "tokens_ids", 10) == 0);
	CU_ASSERT_EQUAL(r.tensors[2].data[0], 0xab);
	server_stop(&s);
	CU_ASSERT(s.script_ok);
	bwc_close(c);
}

/* MODEL_INFO by name: model_id ANY, the name as the body, then zeros to a whole datagram (the
 * server sends no reply larger than its request). */
static bool model_by_name(struct loop_server *s, int n, uint8_t *dgram, size_t len,
			  const struct sockaddr_in *from)
{
	struct bw_hdr *h = (void *)dgram;
	uint32_t slice = bwc_segment_slice(BWC_MTU_DEFAULT);
	uint8_t body[512];
	size_t body_len = make_model_info(body);
	bool zeros = true;

	(void)n;
	for (uint32_t i = 8; i < slice && sizeof(*h) + i < len; i++)
		zeros &= dgram[sizeof(*h) + i] == 0;
	s->script_ok = h->opcode == BW_OP_MODEL_INFO && h->model_id == BW_MODEL_ID_ANY &&
		       h->num_tensors == 0 && h->body_len == slice && len == sizeof(*h) + slice &&
		       memcmp(dgram + sizeof(*h), "resnet50", 8) == 0 && zeros;
	server_send(s, dgram, as_reply(dgram, BW_STATUS_OK, body, (uint32_t)body_len, 0), from);
	return true;
}

static void test_loopback_model_info_by_name(void)
{
	static struct loop_server s = { .handle = model_by_name };
	static struct bwc_model_info info;
	struct bwc *c;

	CU_ASSERT_EQUAL_FATAL(server_start(&s), 0);
	c = open_loopback(s.port, 500, 2);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	CU_ASSERT_EQUAL(bwc_model_info_by_name(c, "resnet50", &info), 0);
	check_resnet50(&info);
	server_stop(&s);
	CU_ASSERT(s.script_ok);
	CU_ASSERT_EQUAL(bwc_model_info_by_name(c, "", &info), -EINVAL);
	bwc_close(c);
}

static void test_loopback_no_server(void)
{
	/*
	 * A port that nobody listens on: bind one, note it, close it. On 127.0.0.1 a fake server of a
	 * test running beside this one (meson runs them in parallel) may be given the freed port at
	 * once and answer; an address of 127/8 that no test binds leaves only a wildcard socket to
	 * take it.
	 */
	static const char *const no_server_host = "127.83.41.7";
	struct sockaddr_in addr = { .sin_family = AF_INET };
	socklen_t alen = sizeof(addr);
	uint64_t rtt_ns;
	struct bwc *c;
	int fd;

	CU_ASSERT_FATAL(inet_pton(AF_INET, no_server_host, &addr.sin_addr) == 1);
	/* The kernel answers with ICMP port unreachable, which must still end in -ETIMEDOUT, not a
	 * spin or another error. */
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_FATAL(bind(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0);
	CU_ASSERT_FATAL(getsockname(fd, (struct sockaddr *)&addr, &alen) == 0);
	close(fd);
	c = open_host(no_server_host, ntohs(addr.sin_port), 50, 2);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	CU_ASSERT_EQUAL(bwc_ping(c, "x", 1, &rtt_ns), -ETIMEDOUT);
	CU_ASSERT(strlen(bwc_last_error(c)) > 0);
	bwc_close(c);

	/* A server that reads nothing: a black hole, no ICMP (it holds its port: no race). */
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	addr.sin_port = 0;
	CU_ASSERT_FATAL(bind(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0);
	CU_ASSERT_FATAL(getsockname(fd, (struct sockaddr *)&addr, &alen) == 0);
	c = open_loopback(ntohs(addr.sin_port), 50, 1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	CU_ASSERT_EQUAL(bwc_ping(c, "x", 1, &rtt_ns), -ETIMEDOUT);
	bwc_close(c);
	close(fd);
}

static void test_open_invalid(void)
{
	struct bwc_opts o;
	int err = 0;

	bwc_opts_init(&o);
	CU_ASSERT_EQUAL(o.port, BW_UDP_PORT_DEFAULT);
	CU_ASSERT_EQUAL(o.timeout_ms, 1000);
	CU_ASSERT_EQUAL(o.retries, 3);
	o.port = 0;
	CU_ASSERT_PTR_NULL(bwc_open(&o, &err));
	CU_ASSERT_EQUAL(err, -EINVAL);
}

int main(void)
{
	static CU_TestInfo codec_tests[] = {
		{ "encode: every field at its offset", test_encode_fields },
		{ "encode: round trip through bw_body_parse", test_encode_round_trip },
		{ "encode: -EMSGSIZE past one datagram or the buffer", test_encode_sizes },
		{ "encode: pad_to pads one datagram with zeros, flag PADDED", test_encode_padded },
		{ "reply body bytes from MODEL_INFO", test_reply_body_bytes },
		{ "encode: invalid tensors rejected", test_encode_invalid },
		{ "encode: segments of every slice size rebuild the body", test_encode_segments },
		{ "encode: a 600 KB tensor in segments at MTU 1500 and 9000", test_encode_segments_large },
		{ "reassembly of a segmented reply: any order, duplicates, every broken rule", test_reasm },
		{ "decode: OK INFER reply", test_decode_ok_infer },
		{ "decode: error reply with message", test_decode_error_reply },
		{ "decode: truncated at every length", test_decode_truncated },
		{ "decode: bad magic, version, reply bit, opcode, lengths", test_decode_bad_header },
		{ "decode: malformed INFER body", test_decode_bad_infer_body },
		{ "decode: MODEL_INFO body", test_model_info_decode },
		{ "dtype names", test_dtype_names },
		CU_TEST_INFO_NULL,
	}, loop_tests[] = {
		{ "retry after a lost datagram, stale reply ignored", test_loopback_retry_and_stale },
		{ "infer: error status then echo", test_loopback_infer },
		{ "model info by name", test_loopback_model_info_by_name },
		{ "no server: -ETIMEDOUT", test_loopback_no_server },
		{ "open: defaults and invalid options", test_open_invalid },
		CU_TEST_INFO_NULL,
	};
	static CU_SuiteInfo suites[] = {
		{.pName = "client codec", .pTests = codec_tests},
		{.pName = "client loopback", .pTests = loop_tests},
		CU_SUITE_INFO_NULL,
	};

	return bw_cunit_run(suites);
}
