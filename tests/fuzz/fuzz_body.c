/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Fuzz target for the protocol body parser (include/batchwire/wire.h: bw_body_parse_prefix and
 * bw_body_parse, which the server and the client both call on bytes a peer sent).
 *
 * The input, split the way libFuzzer's FuzzedDataProvider would split it, in plain C:
 *
 *     byte 0      num_tensors, 0..BW_MAX_TENSORS + 1 (one past the limit, to reach its refusal)
 *     byte 1      bits 0-1: body_len is the bytes given (0), more (1: + extra, the payloads not
 *                 all here, as in a message's first slice), fewer (2: - extra, the rest a trailer)
 *                 or extra itself (3); bit 2: the parse sees the bytes less cut (a prefix)
 *     bytes 2-5   extra, u32 little-endian
 *     bytes 6-7   cut, u16 little-endian
 *     the rest    the body's bytes
 *
 * Each parse sees a heap copy of exactly the bytes it may read, so AddressSanitizer reports a read
 * past them. What must hold (abort() otherwise, so libFuzzer keeps the input):
 * - the result is 0, -EAGAIN (only when avail < body_len) or -EINVAL with a reason;
 * - with views or without (validate only), the same result;
 * - on success every rule of docs/protocol.md "Tensors", checked again here: each descriptor and
 *   its name inside the bytes parsed and the body, packed one after the other with the name padded
 *   to 8 with zeros; dtype known, rank <= 8, dims past rank 0, reserved fields 0, a by-name tensor
 *   named; the dims' product (a 0 counted as 1) within 32 bits and data_len = product(dims) x
 *   element size; the payloads packed in descriptor order after the last name and filling the
 *   body exactly; a view's data pointer set exactly when its payload lies in the bytes parsed, and
 *   then at its offset; every descriptor re-encoded by bw_tensor_desc_write gives back its bytes;
 * - more bytes never change the answer: a parse of every byte given agrees with the prefix's (the
 *   same error and reason, or the same views with data pointers only added), and only an -EAGAIN
 *   may become something else;
 * - bw_body_parse is bw_body_parse_prefix with avail = body_len;
 * - bw_name_printable makes a printable, terminated copy of every name.
 *
 * Build and runs: docs/fuzzing.md (meson builds tests/fuzz/fuzz_body with clang when it has
 * libFuzzer; `meson test --suite fuzz` runs it briefly from tests/fuzz/corpus/body).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <batchwire/wire.h>

#include "fuzz.h"

#define F_HDR_LEN 8

static uint32_t rd16(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* A copy of exactly len bytes on the heap: a read past them is AddressSanitizer's to see. */
static uint8_t *dup_exact(const uint8_t *p, size_t len)
{
	uint8_t *q = malloc(len > 0 ? len : 1);

	CHECK(q != NULL);
	if (len > 0)
		memcpy(q, p, len);
	return q;
}

/* Every rule of a parsed body, from the bytes, apart from the parser's own walk. */
static void views_check(const uint8_t *body, uint32_t avail, uint32_t body_len, uint32_t n,
			const struct bw_tensor_view *v)
{
	uint32_t seen = avail < body_len ? avail : body_len; /* the bytes that are both parsed and body */
	uint64_t off = 0, payload = 0;
	char printable[32];

	for (uint32_t i = 0; i < n; i++) {
		const struct bw_tensor_desc *d = v[i].desc;
		uint64_t elems = 1, bound = 1;
		uint32_t size, pad;
		uint8_t again[sizeof(struct bw_tensor_desc) + BW_MAX_NAME_LEN + 8];

		CHECK((const uint8_t *)d == body + off);
		CHECK(off + sizeof(*d) <= seen);
		CHECK(d->reserved == 0 && d->reserved2 == 0);
		size = bw_dtype_size(d->dtype);
		CHECK(size != 0 && bw_dtype_name(d->dtype) != NULL);
		CHECK(d->rank <= BW_MAX_RANK);
		CHECK(d->name_len <= BW_MAX_NAME_LEN);
		CHECK(d->index != BW_TENSOR_BY_NAME || d->name_len > 0);
		for (uint32_t k = 0; k < BW_MAX_RANK; k++) {
			if (k >= d->rank) {
				CHECK(d->dims[k] == 0);
				continue;
			}
			elems *= d->dims[k];
			bound *= d->dims[k] != 0 ? d->dims[k] : 1;
			CHECK(bound <= UINT32_MAX);
		}
		CHECK(elems * size == d->data_len);
		off += sizeof(*d);
		pad = bw_pad8(d->name_len);
		CHECK(pad >= d->name_len && pad < (uint32_t)d->name_len + 8 && pad % 8 == 0);
		CHECK(v[i].name == (const char *)body + off);
		CHECK(off + pad <= seen);
		for (uint32_t k = d->name_len; k < pad; k++)
			CHECK(body[off + k] == 0);
		/* the one encoding both sides write gives back these bytes exactly */
		CHECK(bw_tensor_desc_write(again, d->index, d->dtype, d->rank, d->dims, v[i].name, d->name_len,
					   d->data_len) == sizeof(*d) + pad);
		CHECK(memcmp(again, d, sizeof(*d) + pad) == 0);
		CHECK(bw_name_printable(printable, sizeof(printable), v[i].name, d->name_len) ==
		      (d->name_len > sizeof(printable) - 1));
		for (size_t k = 0; printable[k] != '\0'; k++)
			CHECK(printable[k] >= 0x20 && printable[k] < 0x7f);
		CHECK(strlen(printable) == (d->name_len < sizeof(printable) - 1 ? d->name_len : sizeof(printable) - 1));
		off += pad;
	}
	for (uint32_t i = 0; i < n; i++) {
		const uint32_t len = v[i].desc->data_len;

		CHECK(v[i].offset == off + payload);
		if (v[i].offset + (uint64_t)len <= avail) {
			volatile uint8_t sink = 0;

			CHECK(v[i].data == body + v[i].offset);
			for (uint32_t k = 0; k < len; k++) /* every byte readable */
				sink ^= v[i].data[k];
			(void)sink;
		} else {
			CHECK(v[i].data == NULL);
		}
		payload += len;
	}
	CHECK(off + payload == body_len);
}

/* One parse of the first avail bytes (a copy of exactly those): its result, checked. */
static int parse_checked(const uint8_t *bytes, uint32_t avail, uint32_t body_len, uint32_t n,
			 struct bw_tensor_view *views, const char **why, uint8_t **copy)
{
	const char *why2 = NULL;
	int rc, rc2;

	*copy = dup_exact(bytes, avail);
	*why = NULL;
	memset(views, 0xa5, sizeof(*views) * (BW_MAX_TENSORS + 1));
	rc = bw_body_parse_prefix(*copy, avail, body_len, n, views, why);
	CHECK(rc == 0 || rc == -EAGAIN || rc == -EINVAL);
	CHECK(rc != -EAGAIN || avail < body_len);
	CHECK(rc != -EINVAL || (*why != NULL && (*why)[0] != '\0'));
	rc2 = bw_body_parse_prefix(*copy, avail, body_len, n, NULL, &why2);
	CHECK(rc2 == rc);
	CHECK(rc != -EINVAL || strcmp(why2, *why) == 0);
	if (avail == body_len) {
		why2 = NULL;
		CHECK(bw_body_parse(*copy, body_len, n, NULL, &why2) == rc);
		CHECK(rc != -EINVAL || strcmp(why2, *why) == 0);
	}
	if (rc == 0)
		views_check(*copy, avail, body_len, n, views);
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct bw_tensor_view prefix_views[BW_MAX_TENSORS + 1], all_views[BW_MAX_TENSORS + 1];
	const char *prefix_why, *all_why;
	uint8_t *prefix_copy, *all_copy;
	uint32_t n, have, avail, body_len, extra, cut;
	uint64_t longer;
	int prefix_rc, all_rc;

	if (size < F_HDR_LEN || size - F_HDR_LEN > UINT32_MAX)
		return 0;
	n = data[0] % (BW_MAX_TENSORS + 2u);
	extra = rd32(data + 2);
	cut = rd16(data + 6);
	have = (uint32_t)(size - F_HDR_LEN);
	switch (data[1] & 3u) {
	case 0:
		body_len = have;
		break;
	case 1:
		longer = (uint64_t)have + extra;
		body_len = longer > UINT32_MAX ? UINT32_MAX : (uint32_t)longer;
		break;
	case 2:
		body_len = have - (extra < have ? extra : have);
		break;
	default:
		body_len = extra;
		break;
	}
	avail = (data[1] & 4u) ? have - (cut < have ? cut : have) : have;

	prefix_rc = parse_checked(data + F_HDR_LEN, avail, body_len, n, prefix_views, &prefix_why, &prefix_copy);
	all_rc = parse_checked(data + F_HDR_LEN, have, body_len, n, all_views, &all_why, &all_copy);
	/* more bytes: an answer stays the answer, only "parse more of the body" may change */
	if (prefix_rc != -EAGAIN) {
		CHECK(all_rc == prefix_rc);
		CHECK(prefix_rc != -EINVAL || strcmp(prefix_why, all_why) == 0);
	}
	if (prefix_rc == 0) {
		for (uint32_t i = 0; i < n; i++) {
			CHECK((const uint8_t *)prefix_views[i].desc - prefix_copy ==
			      (const uint8_t *)all_views[i].desc - all_copy);
			CHECK(prefix_views[i].offset == all_views[i].offset);
			CHECK(prefix_views[i].data == NULL || all_views[i].data != NULL);
		}
	}
	free(prefix_copy);
	free(all_copy);
	return 0;
}
