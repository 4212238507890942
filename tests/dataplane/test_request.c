/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of dataplane/request.c (protocol v1) through dp_packet_handle: INFER, PING and
 * MODEL_INFO replies byte by byte, every rule of docs/protocol.md "Validation rules" with the status
 * it must produce, datagrams cut at every length, and replies that must fit a 1500-byte MTU.
 */
#include <string.h>

#include <CUnit/CUnit.h>

#include <rte_common.h>
#include <rte_mbuf.h>

#include "dp_test.h"

static struct frame g_f;
static struct msg g_m;

/* By index with a name padded 9 -> 16, by name (4 -> 8), and an unnamed scalar: 209 body bytes. */
static const struct tensor_spec g_three[] = {
	{ .index = 0, .dtype = BW_DTYPE_FLOAT, .rank = 2, .dims = { 1, 4 }, .name = "input_ids" },
	{ .index = BW_TENSOR_BY_NAME, .dtype = BW_DTYPE_INT64, .rank = 1, .dims = { 3 }, .name = "mask" },
	{ .index = 2, .dtype = BW_DTYPE_BOOL, .rank = 0 },
};

/* A valid INFER of these tensors to a model, as g_m and g_f. */
static void infer_frame(uint32_t model_id, const struct tensor_spec *t, unsigned int n)
{
	msg_init(&g_m, BW_OP_INFER, model_id);
	msg_tensors(&g_m, t, n);
	frame_msg(&g_f, &g_m);
}

/* Zeros a request carries so that its error reply may hold the whole message: no reply is larger
 * than its request (docs/protocol.md). */
static const uint8_t g_zeros[T_INFO_PAD];

/* A request from g_m with one header field changed, padded to hold any error message, as g_f. */
#define REQUEST_WITH(opcode, field, value)                       \
	do {                                                     \
		msg_init(&g_m, (opcode), STUB_MODEL_ECHO);       \
		msg_body_set(&g_m, g_zeros, DP_ERROR_MSG_MAX);   \
		msg_hdr(&g_m)->field = (value);                  \
		frame_msg(&g_f, &g_m);                           \
	} while (0)

/* An error reply whose message contains text. */
#define EXPECT_ERROR(lc, status, text)                                                                         \
	do {                                                                                                   \
		const struct bw_hdr *h_ = EXPECT_REPLY(lc, &g_f, status);                                     \
		t_check(reply_msg_has(h_, text), __FILE__, __LINE__, "message '%.*s' lacks '%s'",            \
			h_ != NULL ? (int)RTE_MIN(h_->body_len, 200u) : 0, h_ != NULL ? (const char *)(h_ + 1) : "", \
			text);                                                                                 \
	} while (0)

/* The echo reply to the INFER in g_m: the request's body and tensor count, and the views the model
 * was given pointed where the builder put each descriptor, name and payload. */
static void echo_check(const struct bw_hdr *h, int line)
{
	const struct bw_hdr *rq = msg_hdr(&g_m);
	unsigned int i, n = rq->num_tensors;

	if (h == NULL)
		return;
	t_check(h->num_tensors == n, __FILE__, line, "reply num_tensors %u, request %u", h->num_tensors, n);
	t_check(h->body_len == rq->body_len && memcmp(reply_body(h), msg_body(&g_m), rq->body_len) == 0, __FILE__,
		line, "reply body (%u bytes) is the request body (%u bytes)", h->body_len, rq->body_len);
	t_check(g_stub.num_tensors == n && g_stub.hdr_off == -(int32_t)T_BW_LEN, __FILE__, line, "request header/count");
	t_check(g_stub.arrival_tsc == T_BURST_TSC && g_stub.mbuf == g_reply, __FILE__, line, "arrival and mbuf");
	for (i = 0; i < n; i++)
		t_check(g_stub.desc_off[i] == (int32_t)g_m.desc_off[i] && g_stub.name_off[i] == (int32_t)g_m.name_off[i] &&
				g_stub.data_off[i] == (int32_t)g_m.data_off[i],
			__FILE__, line, "tensor %u view", i);
}

/* ---- INFER, PING, MODEL_INFO ------------------------------------------------------------------ */

static void test_infer_echo(void)
{
	static struct tensor_spec many[BW_MAX_TENSORS];
	static char names[BW_MAX_TENSORS][8];
	static const uint8_t dtypes[] = { BW_DTYPE_UINT8, BW_DTYPE_FLOAT, BW_DTYPE_INT16, BW_DTYPE_BFLOAT16 };
	static const unsigned int counts[] = { 0, 1, 3 };
	uint32_t calls;
	unsigned int i;

	for (i = 0; i < RTE_DIM(counts); i++) {
		infer_frame(STUB_MODEL_ECHO, g_three, counts[i]);
		calls = g_stub.infer_calls;
		echo_check(EXPECT_REPLY(&g_lc_jumbo, &g_f, BW_STATUS_OK), __LINE__);
		CU_ASSERT(g_stub.infer_calls == calls + 1);
	}
	for (i = 0; i < BW_MAX_TENSORS; i++) {
		snprintf(names[i], sizeof(names[i]), "t%u", i);
		many[i] = (struct tensor_spec){ .index = (uint16_t)i, .dtype = dtypes[i % RTE_DIM(dtypes)], .rank = 1,
						.dims = { i % 5 + 1 }, .name = i % 2 == 0 ? names[i] : NULL };
	}
	infer_frame(STUB_MODEL_ECHO, many, BW_MAX_TENSORS);
	echo_check(EXPECT_REPLY(&g_lc_jumbo, &g_f, BW_STATUS_OK), __LINE__);
	t_reply_release();
}

static void test_infer_by_name(void)
{
	static const struct tensor_spec by_name = { .index = BW_TENSOR_BY_NAME, .dtype = BW_DTYPE_FLOAT16, .rank = 2,
						    .dims = { 1, 7 }, .name = "attention_mask" };

	infer_frame(STUB_MODEL_ECHO, &by_name, 1);
	echo_check(EXPECT_REPLY(&g_lc_jumbo, &g_f, BW_STATUS_OK), __LINE__);
	CU_ASSERT(g_m.name_off[0] == sizeof(struct bw_tensor_desc) && g_m.data_off[0] == 48 + 16);
	t_reply_release();
}

/* Every v1 dtype, rank 0 to 8, and the lower priority level. */
static void test_infer_dtypes_ranks(void)
{
	static const uint8_t dtypes[] = { 1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 16 };
	struct tensor_spec t[RTE_DIM(dtypes)];
	unsigned int i, d;

	for (i = 0; i < RTE_DIM(dtypes); i++) {
		t[i] = (struct tensor_spec){ .index = (uint16_t)i, .dtype = dtypes[i], .rank = (uint8_t)(i % 9) };
		for (d = 0; d < t[i].rank; d++)
			t[i].dims[d] = d == 0 ? 2 : 1;
	}
	infer_frame(STUB_MODEL_ECHO, t, RTE_DIM(t));
	msg_hdr(&g_m)->priority = STUB_ECHO_LEVELS - 1;
	frame_msg(&g_f, &g_m);
	echo_check(EXPECT_REPLY(&g_lc_jumbo, &g_f, BW_STATUS_OK), __LINE__);
	t_reply_release();
}

static void test_ping(void)
{
	static const uint32_t bodies[] = { 0, 1, 100, 8000 };
	const struct bw_hdr *h;
	unsigned int i;

	for (i = 0; i < RTE_DIM(bodies); i++) {
		frame_ping(&g_f, &g_m, bodies[i], 0);
		h = EXPECT_REPLY(&g_lc_jumbo, &g_f, BW_STATUS_OK);
		if (h == NULL)
			continue;
		CU_ASSERT(h->num_tensors == 0);
		CU_ASSERT(h->body_len == bodies[i] && memcmp(reply_body(h), msg_body(&g_m), bodies[i]) == 0);
	}
	/* PING ignores model_id */
	frame_ping(&g_f, &g_m, 5, 0);
	f_bw(&g_f)->model_id = STUB_MODEL_UNKNOWN;
	frame_fix(&g_f);
	CU_ASSERT_PTR_NOT_NULL(EXPECT_REPLY(&g_lc_jumbo, &g_f, BW_STATUS_OK));

	frame_ping(&g_f, &g_m, 32, 0); /* 32 bytes: room for the whole message */
	f_bw(&g_f)->num_tensors = 1;
	frame_fix(&g_f);
	EXPECT_ERROR(&g_lc_jumbo, BW_STATUS_INVALID_ARGUMENT, "tensors");
	/* with 5 bytes the reply may hold 5 bytes of it, no more */
	frame_ping(&g_f, &g_m, 5, 0);
	f_bw(&g_f)->num_tensors = 1;
	frame_fix(&g_f);
	{
		const struct bw_hdr *h = EXPECT_REPLY(&g_lc_jumbo, &g_f, BW_STATUS_INVALID_ARGUMENT);

		CU_ASSERT(h != NULL && h->body_len == 5 && memcmp(reply_body(h), "PING ", 5) == 0);
	}
	/* draining: a PING's reply says so (a request may not set the flag: test_status_and_flags); an
	 * error reply to a PING does not, nor does any other reply */
	dp_draining_set(true);
	frame_ping(&g_f, &g_m, 5, 0);
	{
		const struct bw_hdr *h = EXPECT_REPLY(&g_lc_jumbo, &g_f, BW_STATUS_OK);

		CU_ASSERT(h != NULL && h->flags == BW_FLAG_DRAINING);
	}
	dp_draining_set(false);
	frame_ping(&g_f, &g_m, 5, 0);
	{
		const struct bw_hdr *h = EXPECT_REPLY(&g_lc_jumbo, &g_f, BW_STATUS_OK);

		CU_ASSERT(h != NULL && h->flags == 0);
	}
	t_reply_release();
}

/* MODEL_INFO by id (name NULL) or by name, the body padded with zeros to pad bytes. */
static void model_info_frame_padded(uint32_t model_id, const char *name, uint32_t pad)
{
	uint8_t body[T_INFO_PAD] = { 0 };
	size_t len = name != NULL ? strlen(name) : 0;

	msg_init(&g_m, BW_OP_MODEL_INFO, model_id);
	memcpy(body, name != NULL ? name : "", len);
	msg_body_set(&g_m, body, (uint32_t)RTE_MAX(len, (size_t)pad));
	frame_msg(&g_f, &g_m);
}

/* A MODEL_INFO padded to hold the largest description the stub writes (and any message). */
static void model_info_frame(uint32_t model_id, const char *name)
{
	model_info_frame_padded(model_id, name, T_INFO_PAD);
}

/* The echo model's description as the stub writes it, built here field by field. */
static void echo_description_check(const struct bw_hdr *h)
{
	struct bw_model_info info = { .model_id = STUB_MODEL_ECHO, .name_len = 4, .flags = BW_MODEL_F_ANY_TENSORS,
				      .priority_levels = STUB_ECHO_LEVELS };
	uint8_t want[STUB_ECHO_DESC_LEN] = { 0 };

	memcpy(want, &info, sizeof(info));
	memcpy(want + sizeof(info), "echo", 4);
	CU_ASSERT_FATAL(h != NULL);
	CU_ASSERT(h->num_tensors == 0);
	CU_ASSERT(h->body_len == sizeof(want) && memcmp(reply_body(h), want, sizeof(want)) == 0);
}

static void test_model_info(void)
{
	const struct bw_hdr *h;
	uint32_t i;

	model_info_frame(STUB_MODEL_ECHO, NULL);
	echo_description_check(EXPECT_REPLY(&g_lc_jumbo, &g_f, BW_STATUS_OK));
	model_info_frame(BW_MODEL_ID_ANY, "echo");
	echo_description_check(EXPECT_REPLY(&g_lc_jumbo, &g_f, BW_STATUS_OK));

	model_info_frame(BW_MODEL_ID_ANY, "big");
	h = EXPECT_REPLY(&g_lc_jumbo, &g_f, BW_STATUS_OK);
	CU_ASSERT_FATAL(h != NULL);
	CU_ASSERT(h->body_len == STUB_BIG_DESC_LEN);
	for (i = 0; i < STUB_BIG_DESC_LEN && h->body_len == STUB_BIG_DESC_LEN; i++)
		if (reply_body(h)[i] != (uint8_t)(i * 13u + 5u))
			break;
	CU_ASSERT(i == STUB_BIG_DESC_LEN);
	/* the room describe had: the jumbo MTU's, less the header */
	CU_ASSERT(g_stub.describe_cap == BW_DGRAM_MAX - T_BW_LEN);
	t_reply_release();
}

static void test_model_info_errors(void)
{
	static const char *const names[] = { "ech", "echo2", "ECHO", "" };
	unsigned int i;

	model_info_frame(STUB_MODEL_UNKNOWN, NULL);
	EXPECT_ERROR(&g_lc_jumbo, BW_STATUS_NOT_FOUND, "42");
	for (i = 0; i < RTE_DIM(names); i++) {
		model_info_frame(BW_MODEL_ID_ANY, names[i]);
		EXPECT_ERROR(&g_lc_jumbo, BW_STATUS_NOT_FOUND, names[i]);
	}
	model_info_frame(STUB_MODEL_BROKEN, NULL); /* its describe says -EMSGSIZE */
	EXPECT_ERROR(&g_lc_jumbo, BW_STATUS_INTERNAL, "description");
	model_info_frame(STUB_MODEL_ECHO, NULL);
	f_bw(&g_f)->num_tensors = 2;
	frame_fix(&g_f);
	EXPECT_ERROR(&g_lc_jumbo, BW_STATUS_INVALID_ARGUMENT, "tensors");
	model_info_frame(STUB_MODEL_ECHO, NULL);
	f_bw(&g_f)->priority = STUB_ECHO_LEVELS;
	frame_fix(&g_f);
	EXPECT_ERROR(&g_lc_jumbo, BW_STATUS_INVALID_ARGUMENT, "priority");
	t_reply_release();
}

/*
 * No reply larger than its request (docs/protocol.md): MODEL_INFO answers a body padded to the
 * description's size, one byte short gets RESOURCE_EXHAUSTED with as much of the message as the
 * request carried, a bare header none; the name ends at its first zero; an error to a bare
 * header is the status alone.
 */
static void test_no_larger_reply(void)
{
	const struct bw_hdr *h;

	model_info_frame_padded(STUB_MODEL_ECHO, NULL, STUB_ECHO_DESC_LEN);
	echo_description_check(EXPECT_REPLY(&g_lc_jumbo, &g_f, BW_STATUS_OK));
	model_info_frame_padded(BW_MODEL_ID_ANY, "echo", STUB_ECHO_DESC_LEN);
	echo_description_check(EXPECT_REPLY(&g_lc_jumbo, &g_f, BW_STATUS_OK));
	model_info_frame_padded(STUB_MODEL_ECHO, NULL, STUB_ECHO_DESC_LEN - 1);
	h = EXPECT_REPLY(&g_lc_jumbo, &g_f, BW_STATUS_RESOURCE_EXHAUSTED);
	CU_ASSERT(h != NULL && h->body_len == STUB_ECHO_DESC_LEN - 1 &&
		  memcmp(reply_body(h), "this model's description is 32 b", STUB_ECHO_DESC_LEN - 1) == 0);
	model_info_frame_padded(STUB_MODEL_ECHO, NULL, 0);
	h = EXPECT_REPLY(&g_lc_jumbo, &g_f, BW_STATUS_RESOURCE_EXHAUSTED);
	CU_ASSERT(h != NULL && h->body_len == 0);
	model_info_frame_padded(BW_MODEL_ID_ANY, "echo", 0); /* 4 bytes of name, 32 of description */
	h = EXPECT_REPLY(&g_lc_jumbo, &g_f, BW_STATUS_RESOURCE_EXHAUSTED);
	CU_ASSERT(h != NULL && h->body_len == 4);
	model_info_frame_padded(STUB_MODEL_BIG, NULL, T_INFO_PAD);
	CU_ASSERT_PTR_NOT_NULL(EXPECT_REPLY(&g_lc_jumbo, &g_f, BW_STATUS_OK));
	/* a bare header's error: the status, no message */
	msg_init(&g_m, BW_OP_PING, STUB_MODEL_ECHO);
	msg_hdr(&g_m)->version = 3;
	frame_msg(&g_f, &g_m);
	h = EXPECT_REPLY(&g_lc_jumbo, &g_f, BW_STATUS_INVALID_ARGUMENT);
	CU_ASSERT(h != NULL && h->body_len == 0);
	t_reply_release();
}

/* An unknown name is quoted back cut to 64 bytes; the message must stay UTF-8 (docs/protocol.md:
 * "a short UTF-8 message"), so the cut must not split a character: batchwire shows bytes outside
 * printable ASCII as '?'. */
static void test_unknown_name_message_is_utf8(void)
{
	char name[128] = "a";
	unsigned int i;

	for (i = 0; i < 40; i++)
		strcat(name, "\xc3\xa9"); /* U+00E9, two bytes: byte 64 is the first half of one */
	model_info_frame(BW_MODEL_ID_ANY, name);
	CU_ASSERT_PTR_NOT_NULL(EXPECT_REPLY(&g_lc_jumbo, &g_f, BW_STATUS_NOT_FOUND));
	t_reply_release();
}

/* ---- what is dropped -------------------------------------------------------------------------- */

/* A datagram shorter than the header, however consistent its IP and UDP lengths, is dropped. */
static void test_proto_truncated(void)
{
	uint32_t len;

	for (len = 0; len < T_BW_LEN; len++) {
		infer_frame(STUB_MODEL_ECHO, g_three, RTE_DIM(g_three));
		frame_set_l4_len(&g_f, T_UDP_LEN + len);
		EXPECT_DROP(&g_lc_jumbo, &g_f, DP_DROP_PROTO_TRUNCATED);
	}
}

static void test_bad_magic(void)
{
	static const uint32_t magics[] = { 0, 0x42574952u /* "RIWB" */, BW_PROTO_MAGIC ^ 1, 0xffffffffu };
	unsigned int i;

	for (i = 0; i < RTE_DIM(magics); i++) {
		REQUEST_WITH(BW_OP_PING, magic, magics[i]);
		EXPECT_DROP(&g_lc_jumbo, &g_f, DP_DROP_PROTO_BAD_MAGIC);
	}
}

/* A reply opcode sent to the server is dropped (no reply loops), whatever else is wrong with it. */
static void test_reply_opcode(void)
{
	static const uint8_t opcodes[] = { BW_OP_REPLY, BW_OP_REPLY | BW_OP_PING, BW_OP_REPLY | BW_OP_INFER,
					   BW_OP_REPLY | BW_OP_MODEL_INFO, 0xff };
	unsigned int i;

	for (i = 0; i < RTE_DIM(opcodes); i++) {
		REQUEST_WITH(opcodes[i], opcode, opcodes[i]);
		EXPECT_DROP(&g_lc_jumbo, &g_f, DP_DROP_PROTO_REPLY);
	}
	REQUEST_WITH(BW_OP_REPLY | BW_OP_INFER, version, 2);
	EXPECT_DROP(&g_lc_jumbo, &g_f, DP_DROP_PROTO_REPLY);
}

/* ---- header rules: error replies -------------------------------------------------------------- */

/* Any version but 1 is refused, and the reply says version 1 (expect_reply checks every reply's). */
static void test_bad_version(void)
{
	static const uint8_t versions[] = { 2, 0, 255 };
	unsigned int i;

	for (i = 0; i < RTE_DIM(versions); i++) {
		REQUEST_WITH(BW_OP_INFER, version, versions[i]);
		EXPECT_ERROR(&g_lc_jumbo, BW_STATUS_INVALID_ARGUMENT, "version");
	}
}

static void test_status_and_flags(void)
{
	static const uint16_t statuses[] = { 1, BW_STATUS_INTERNAL, 0xffff };
	static const uint8_t flags[] = { 0x04, 0x80, 0xff };
	unsigned int i;

	for (i = 0; i < RTE_DIM(statuses); i++) {
		REQUEST_WITH(BW_OP_PING, status, statuses[i]);
		EXPECT_ERROR(&g_lc_jumbo, BW_STATUS_INVALID_ARGUMENT, "status");
	}
	for (i = 0; i < RTE_DIM(flags); i++) {
		REQUEST_WITH(BW_OP_PING, flags, flags[i]);
		EXPECT_ERROR(&g_lc_jumbo, BW_STATUS_INVALID_ARGUMENT, "flags");
	}
}

static void test_unknown_opcode(void)
{
	static const uint8_t opcodes[] = { 0, 4, 0x7f };
	unsigned int i;

	for (i = 0; i < RTE_DIM(opcodes); i++) {
		REQUEST_WITH(opcodes[i], opcode, opcodes[i]);
		EXPECT_ERROR(&g_lc_jumbo, BW_STATUS_INVALID_ARGUMENT, "opcode");
	}
}

static void test_segments(void)
{
	static const struct {
		uint16_t index, count;
		enum bw_status status;
		const char *text;
	} cases[] = {
		{ 1, 1, BW_STATUS_INVALID_ARGUMENT, "segment" },  { 5, 3, BW_STATUS_INVALID_ARGUMENT, "segment" },
		{ 0, 0, BW_STATUS_INVALID_ARGUMENT, "segment" },  { 0xffff, 0xffff, BW_STATUS_INVALID_ARGUMENT, "segment" },
	};
	/* valid segment numbers go to reassembly: test_reasm.c */
	unsigned int i;

	for (i = 0; i < RTE_DIM(cases); i++) {
		infer_frame(STUB_MODEL_ECHO, g_three, RTE_DIM(g_three));
		f_bw(&g_f)->seg_index = cases[i].index;
		f_bw(&g_f)->seg_count = cases[i].count;
		f_bw(&g_f)->total_body_len = f_bw(&g_f)->body_len;
		frame_fix(&g_f);
		EXPECT_ERROR(&g_lc_jumbo, cases[i].status, cases[i].text);
	}
}

/* AUTH without its 40-byte trailer: the lengths disagree (test_auth.c has signed requests). */
static void test_auth(void)
{
	REQUEST_WITH(BW_OP_PING, flags, BW_FLAG_AUTH);
	EXPECT_ERROR(&g_lc_jumbo, BW_STATUS_INVALID_ARGUMENT, "body_len");
}

/* A request pads itself (flag PADDED): zeros after the body, before any trailer; the body parses as
 * without them. Only one datagram may, and only with zeros. */
static void test_padded(void)
{
	const struct bw_hdr *h;

	frame_ping(&g_f, &g_m, 24, 0);
	msg_hdr(&g_m)->flags = BW_FLAG_PADDED;
	memset(g_m.b + g_m.len, 0, 300);
	g_m.len += 300;
	frame_msg(&g_f, &g_m);
	h = EXPECT_REPLY(&g_lc_jumbo, &g_f, BW_STATUS_OK);
	CU_ASSERT(h != NULL && h->body_len == 24); /* the body echoed, not the padding */
	g_m.b[g_m.len - 7] = 1;
	frame_msg(&g_f, &g_m);
	EXPECT_ERROR(&g_lc_jumbo, BW_STATUS_INVALID_ARGUMENT, "padding");
	/* body_len past the datagram, padded or not */
	g_m.b[g_m.len - 7] = 0;
	msg_hdr(&g_m)->body_len = 400;
	msg_hdr(&g_m)->total_body_len = 400;
	frame_msg(&g_f, &g_m);
	EXPECT_ERROR(&g_lc_jumbo, BW_STATUS_INVALID_ARGUMENT, "does not fit");
	/* an INFER padded: its tensors parse as if the padding were not there */
	infer_frame(STUB_MODEL_ECHO, g_three, RTE_DIM(g_three));
	msg_hdr(&g_m)->flags = BW_FLAG_PADDED;
	memset(g_m.b + g_m.len, 0, 64);
	g_m.len += 64;
	frame_msg(&g_f, &g_m);
	CU_ASSERT_PTR_NOT_NULL(EXPECT_REPLY(&g_lc_jumbo, &g_f, BW_STATUS_OK));
	/* a segment may not */
	REQUEST_WITH(BW_OP_PING, flags, BW_FLAG_PADDED);
	msg_hdr(&g_m)->seg_count = 2;
	msg_hdr(&g_m)->total_body_len = 2 * DP_ERROR_MSG_MAX;
	frame_msg(&g_f, &g_m);
	EXPECT_ERROR(&g_lc_jumbo, BW_STATUS_INVALID_ARGUMENT, "only a request in one datagram");
	t_reply_release();
}

/* No unsigned reply larger than its request: a model whose outputs outgrow the inputs gets its
 * reply replaced by RESOURCE_EXHAUSTED saying how far to pad, unless the request padded itself. */
static void test_no_amplification(void)
{
	static const uint8_t zeros[DP_ERROR_MSG_MAX];
	uint64_t refused = g_lc_jumbo.stats.amplification_refused;
	const struct bw_hdr *h;

	msg_init(&g_m, BW_OP_INFER, STUB_MODEL_WIDE);
	msg_body_set(&g_m, zeros, 0);
	msg_hdr(&g_m)->num_tensors = 0;
	memcpy(g_m.b + g_m.len, zeros, sizeof(zeros)); /* room for the message: not counted as padding */
	frame_msg(&g_f, &g_m);
	/* 0 body bytes, a 600-byte reply */
	h = EXPECT_REPLY(&g_lc_jumbo, &g_f, BW_STATUS_RESOURCE_EXHAUSTED);
	CU_ASSERT_PTR_NOT_NULL(h);
	CU_ASSERT_EQUAL(g_lc_jumbo.stats.amplification_refused, refused + 1);
	/* padded to one byte short, then to the reply's size */
	msg_hdr(&g_m)->flags = BW_FLAG_PADDED;
	memset(g_m.b + g_m.len, 0, STUB_WIDE_REPLY);
	g_m.len += STUB_WIDE_REPLY - 1;
	frame_msg(&g_f, &g_m);
	h = EXPECT_REPLY(&g_lc_jumbo, &g_f, BW_STATUS_RESOURCE_EXHAUSTED);
	CU_ASSERT(h != NULL && reply_msg_has(h, "pad the request to 600"));
	g_m.len += 1;
	frame_msg(&g_f, &g_m);
	h = EXPECT_REPLY(&g_lc_jumbo, &g_f, BW_STATUS_OK);
	CU_ASSERT(h != NULL && h->body_len == STUB_WIDE_REPLY);
	CU_ASSERT_EQUAL(g_lc_jumbo.stats.amplification_refused, refused + 2);
	t_reply_release();
}

static void test_body_lengths(void)
{
	static const int64_t deltas[] = { 1, -1, -209, 8, 0x7fffffff };
	unsigned int i;

	for (i = 0; i < RTE_DIM(deltas); i++) {
		infer_frame(STUB_MODEL_ECHO, g_three, RTE_DIM(g_three));
		msg_set_body_len(&g_m, (uint32_t)(msg_hdr(&g_m)->body_len + deltas[i]));
		frame_msg(&g_f, &g_m);
		EXPECT_ERROR(&g_lc_jumbo, BW_STATUS_INVALID_ARGUMENT, "body_len");
	}
	infer_frame(STUB_MODEL_ECHO, g_three, RTE_DIM(g_three));
	msg_hdr(&g_m)->total_body_len += 1;
	frame_msg(&g_f, &g_m);
	EXPECT_ERROR(&g_lc_jumbo, BW_STATUS_INVALID_ARGUMENT, "total_body_len");
	infer_frame(STUB_MODEL_ECHO, g_three, RTE_DIM(g_three));
	msg_hdr(&g_m)->total_body_len = 0;
	frame_msg(&g_f, &g_m);
	EXPECT_ERROR(&g_lc_jumbo, BW_STATUS_INVALID_ARGUMENT, "total_body_len");
}

/* A datagram cut inside its body, sent that way (IP/UDP lengths consistent): with the header's
 * body_len as it was the lengths disagree; with body_len cut to match, the tensors do not parse.
 * Either way the model never sees it. */
static void test_body_cut_at_every_length(void)
{
	uint32_t body_len, len, calls = g_stub.infer_calls;

	infer_frame(STUB_MODEL_ECHO, g_three, RTE_DIM(g_three));
	body_len = msg_hdr(&g_m)->body_len;
	CU_ASSERT(body_len == 209);
	for (len = 0; len < body_len; len++) {
		/* the message is cut to the len bytes the datagram carried: named once there is room */
		infer_frame(STUB_MODEL_ECHO, g_three, RTE_DIM(g_three));
		frame_set_l4_len(&g_f, T_UDP_LEN + T_BW_LEN + len);
		if (len >= 8)
			EXPECT_ERROR(&g_lc_jumbo, BW_STATUS_INVALID_ARGUMENT, "body_len");
		else
			CU_ASSERT_PTR_NOT_NULL(EXPECT_REPLY(&g_lc_jumbo, &g_f, BW_STATUS_INVALID_ARGUMENT));

		f_bw(&g_f)->body_len = len;
		f_bw(&g_f)->total_body_len = len;
		frame_fix(&g_f);
		if (len >= 64)
			EXPECT_ERROR(&g_lc_jumbo, BW_STATUS_INVALID_ARGUMENT, "tensor");
		else
			CU_ASSERT_PTR_NOT_NULL(EXPECT_REPLY(&g_lc_jumbo, &g_f, BW_STATUS_INVALID_ARGUMENT));
	}
	CU_ASSERT(g_stub.infer_calls == calls);
	t_reply_release();
}

/* ---- model resolution and tensors ------------------------------------------------------------- */

static void test_priority_and_model(void)
{
	static const uint8_t priorities[] = { STUB_ECHO_LEVELS, 255 };
	unsigned int i;

	for (i = 0; i < RTE_DIM(priorities); i++) {
		infer_frame(STUB_MODEL_ECHO, g_three, 1);
		f_bw(&g_f)->priority = priorities[i];
		frame_fix(&g_f);
		EXPECT_ERROR(&g_lc_jumbo, BW_STATUS_INVALID_ARGUMENT, "priority");
	}
	infer_frame(STUB_MODEL_UNKNOWN, g_three, 1);
	EXPECT_ERROR(&g_lc_jumbo, BW_STATUS_NOT_FOUND, "42");
	/* INFER names its model by id only: 0xFFFFFFFF is no model, even with a model's name around */
	infer_frame(BW_MODEL_ID_ANY, g_three, 0);
	CU_ASSERT_PTR_NOT_NULL(EXPECT_REPLY(&g_lc_jumbo, &g_f, BW_STATUS_NOT_FOUND));
	t_reply_release();
}

static void mut_dtype_string(struct msg *m)
{
	msg_desc(m, 1)->dtype = 8;
}
static void mut_dtype_zero(struct msg *m)
{
	msg_desc(m, 0)->dtype = 0;
}
static void mut_dtype_17(struct msg *m)
{
	msg_desc(m, 2)->dtype = 17;
}
static void mut_rank_9(struct msg *m)
{
	msg_desc(m, 0)->rank = 9;
}
static void mut_data_len(struct msg *m)
{
	msg_desc(m, 0)->data_len += 4;
}
static void mut_reserved(struct msg *m)
{
	msg_desc(m, 1)->reserved = 1;
}
static void mut_reserved2(struct msg *m)
{
	msg_desc(m, 2)->reserved2 = 0x80000000u;
}
static void mut_dims_overflow(struct msg *m)
{
	struct bw_tensor_desc *d = msg_desc(m, 2);

	d->rank = 3;
	d->dims[0] = 0x10000;
	d->dims[1] = 0x10000;
	d->dims[2] = 1;
}
static void mut_dims_overflow_past_zero(struct msg *m)
{
	struct bw_tensor_desc *d = msg_desc(m, 2);

	/* 0 elements, data_len 0 fits: the dims after the 0 must still be bounded */
	d->rank = BW_MAX_RANK;
	d->dims[0] = 1;
	d->dims[1] = 0;
	for (unsigned int k = 2; k < BW_MAX_RANK; k++)
		d->dims[k] = 0xffffffffu;
	d->data_len = 0;
}
static void mut_name_padding(struct msg *m)
{
	/* "input_ids": 9 bytes of name, 7 of padding */
	((uint8_t *)(msg_desc(m, 0) + 1))[12] = 'x';
}
static void mut_dim_past_rank(struct msg *m)
{
	msg_desc(m, 1)->dims[5] = 1;
}
static void mut_by_name_without_name(struct msg *m)
{
	msg_desc(m, 2)->index = BW_TENSOR_BY_NAME;
}
static void mut_name_256(struct msg *m)
{
	msg_desc(m, 0)->name_len = 256;
}
static void mut_name_past_body(struct msg *m)
{
	msg_desc(m, 2)->name_len = 200;
}
static void mut_payload_short(struct msg *m)
{
	msg_set_body_len(m, msg_hdr(m)->body_len - 1);
	m->len--;
}
static void mut_payload_long(struct msg *m)
{
	m->b[m->len++] = 0;
	msg_set_body_len(m, msg_hdr(m)->body_len + 1);
}
static void mut_num_tensors_65(struct msg *m)
{
	msg_hdr(m)->num_tensors = BW_MAX_TENSORS + 1;
}
static void mut_num_tensors_more(struct msg *m)
{
	msg_hdr(m)->num_tensors = 4;
}
static void mut_num_tensors_fewer(struct msg *m)
{
	msg_hdr(m)->num_tensors = 2;
}

/* Each broken tensor body gets INVALID_ARGUMENT naming its rule, and never reaches the model. */
static void test_bad_tensors(void)
{
	static const struct {
		void (*mutate)(struct msg *m);
		const char *text;
	} cases[] = {
		{ mut_dtype_string, "dtype" },        { mut_dtype_zero, "dtype" },
		{ mut_dtype_17, "dtype" },            { mut_rank_9, "rank" },
		{ mut_data_len, "data_len" },         { mut_reserved, "reserved" },
		{ mut_reserved2, "reserved" },        { mut_dims_overflow, "overflow" },
		{ mut_dims_overflow_past_zero, "overflow" }, { mut_name_padding, "padding" },
		{ mut_dim_past_rank, "beyond rank" }, { mut_by_name_without_name, "no name" },
		{ mut_name_256, "255" },              { mut_name_past_body, "name runs past" },
		{ mut_payload_short, "fill" },        { mut_payload_long, "fill" },
		{ mut_num_tensors_65, "64" },         { mut_num_tensors_more, "descriptor runs past" },
		{ mut_num_tensors_fewer, "fill" },
	};
	uint32_t calls = g_stub.infer_calls;
	unsigned int i;

	for (i = 0; i < RTE_DIM(cases); i++) {
		infer_frame(STUB_MODEL_ECHO, g_three, RTE_DIM(g_three));
		cases[i].mutate(&g_m);
		frame_msg(&g_f, &g_m);
		EXPECT_ERROR(&g_lc_jumbo, BW_STATUS_INVALID_ARGUMENT, cases[i].text);
	}
	CU_ASSERT(g_stub.infer_calls == calls);
}

/* A model's failure is answered with its status and its own message. */
static void test_model_failure(void)
{
	const struct bw_hdr *h;

	infer_frame(STUB_MODEL_BROKEN, g_three, RTE_DIM(g_three));
	h = EXPECT_REPLY(&g_lc_jumbo, &g_f, BW_STATUS_INTERNAL);
	CU_ASSERT_FATAL(h != NULL);
	CU_ASSERT(h->body_len == strlen(STUB_BROKEN_MSG) &&
		  memcmp(reply_body(h), STUB_BROKEN_MSG, strlen(STUB_BROKEN_MSG)) == 0);
	t_reply_release();
	/* OK without taking the request would leave it unanswered: the dataplane answers INTERNAL */
	infer_frame(STUB_MODEL_BIG, g_three, RTE_DIM(g_three));
	EXPECT_ERROR(&g_lc_jumbo, BW_STATUS_INTERNAL, "the model layer accepted the request without taking it");
}

/*
 * A model layer breaking infer's contract the other two ways: refusing a request it took is left to
 * it (no reply here, no second one later, the mbuf untouched), and a reply larger than the datagram's
 * room is answered INTERNAL instead of a frame written past the mbuf; each counted.
 */
static void test_model_contract(void)
{
	uint64_t before = g_lc_jumbo.stats.model_contract_errors, replies = 0, held = g_lc_jumbo.stats.held_requests;
	struct outcome o;

	for (unsigned int s = 0; s < BW_STATUS_COUNT; s++)
		replies += g_lc_jumbo.stats.replies[s];
	infer_frame(STUB_MODEL_ROGUE, g_three, RTE_DIM(g_three));
	o = t_run(&g_lc_jumbo, &g_f, g_f.len, T_RX_OL_FLAGS);
	CU_ASSERT(o.verdict == DP_VERDICT_HELD);
	CU_ASSERT(o.status == -1); /* no reply of any status */
	CU_ASSERT(g_stub.rogue_mbuf != NULL);
	CU_ASSERT(g_lc_jumbo.stats.model_contract_errors == before + 1);
	/* taken, so held until the model layer completes it (here: freed as its completion would) */
	CU_ASSERT(g_lc_jumbo.stats.held_requests == held + 1);
	rte_pktmbuf_free(g_stub.rogue_mbuf);
	g_lc_jumbo.stats.held_requests--;
	for (unsigned int s = 0; s < BW_STATUS_COUNT; s++)
		replies -= g_lc_jumbo.stats.replies[s];
	CU_ASSERT(replies == 0);

	infer_frame(STUB_MODEL_LIAR, g_three, RTE_DIM(g_three));
	EXPECT_ERROR(&g_lc_jumbo, BW_STATUS_INTERNAL, "exceeds the datagram's");
	CU_ASSERT(g_lc_jumbo.stats.model_contract_errors == before + 2);
	t_reply_release();
}

/*
 * Error replies to requests refused on arrival are limited like ICMP (50 a second: a burst of 6,
 * then one each 1/50 s); over the limit the request is dropped (rate_error_reply) and nothing is
 * sent. A request that is served is never held back by it.
 */
/* A request read and refused, its error reply held back by the rate: counted as both. */
static void expect_rate_dropped(int line)
{
	struct outcome o = t_run(&g_lc_jumbo, &g_f, g_f.len, T_RX_OL_FLAGS);

	t_check(o.verdict == DP_VERDICT_DROP && o.drop == DP_DROP_RATE_ERROR && o.status == -1 && o.requests == 1,
		__FILE__, line, "expected the error reply rate-dropped; got %s", outcome_str(&o));
}

static void test_error_rate(void)
{
	const uint64_t hz = 1000000000ull, start = g_lc_jumbo.burst_tsc;

	dp_rate_init(&g_lc_jumbo.error_rate, 50, hz);
	for (unsigned int i = 0; i < 6; i++) {
		infer_frame(STUB_MODEL_UNKNOWN, g_three, RTE_DIM(g_three));
		CU_ASSERT_PTR_NOT_NULL(EXPECT_REPLY(&g_lc_jumbo, &g_f, BW_STATUS_NOT_FOUND));
	}
	infer_frame(STUB_MODEL_UNKNOWN, g_three, RTE_DIM(g_three));
	expect_rate_dropped(__LINE__);
	REQUEST_WITH(BW_OP_PING, version, 9);
	expect_rate_dropped(__LINE__);
	/* served requests pass while errors are held back */
	infer_frame(STUB_MODEL_ECHO, g_three, RTE_DIM(g_three));
	CU_ASSERT_PTR_NOT_NULL(EXPECT_REPLY(&g_lc_jumbo, &g_f, BW_STATUS_OK));
	g_lc_jumbo.burst_tsc += hz / 50;
	infer_frame(STUB_MODEL_UNKNOWN, g_three, RTE_DIM(g_three));
	CU_ASSERT_PTR_NOT_NULL(EXPECT_REPLY(&g_lc_jumbo, &g_f, BW_STATUS_NOT_FOUND));
	dp_rate_init(&g_lc_jumbo.error_rate, 0, hz);
	g_lc_jumbo.burst_tsc = start;
	t_reply_release();
}

/* ---- MTU 1500 --------------------------------------------------------------------------------- */

#define SMALL_ROOM (1500u - T_IP_LEN - T_UDP_LEN - T_BW_LEN) /* 1432 body bytes */

/* An INFER whose body is exactly body_len bytes: one UINT8 tensor. */
static void infer_frame_sized(uint32_t model_id, uint32_t body_len)
{
	struct tensor_spec t = { .index = 0, .dtype = BW_DTYPE_UINT8, .rank = 1,
				 .dims = { body_len - (uint32_t)sizeof(struct bw_tensor_desc) } };

	infer_frame(model_id, &t, 1);
}

/* Replies at the MTU's edge fit; a request above the MTU (a virtual port may deliver one) is refused
 * with a short INVALID_ARGUMENT before any model sees it, so no reply can exceed the MTU. */
static void test_small_mtu_replies_fit(void)
{
	const struct bw_hdr *h;

	infer_frame_sized(STUB_MODEL_ECHO, SMALL_ROOM);
	h = EXPECT_REPLY(&g_lc_small, &g_f, BW_STATUS_OK);
	CU_ASSERT(g_stub.infer_cap == SMALL_ROOM);
	CU_ASSERT(h != NULL && rte_pktmbuf_pkt_len(g_reply) == T_ETH_LEN + 1500);
	/* one byte more: refused before the model runs */
	g_stub.infer_cap = 0;
	infer_frame_sized(STUB_MODEL_ECHO, SMALL_ROOM + 1);
	EXPECT_ERROR(&g_lc_small, BW_STATUS_INVALID_ARGUMENT, "MTU");
	CU_ASSERT(g_stub.infer_cap == 0);
	infer_frame_sized(STUB_MODEL_BROKEN, 3000);
	EXPECT_ERROR(&g_lc_small, BW_STATUS_INVALID_ARGUMENT, "MTU");
	infer_frame_sized(STUB_MODEL_ECHO, 5000);
	f_bw(&g_f)->version = 2;
	frame_fix(&g_f);
	CU_ASSERT_PTR_NOT_NULL(EXPECT_REPLY(&g_lc_small, &g_f, BW_STATUS_INVALID_ARGUMENT));
	/* an unknown name of 1400 bytes is quoted back short */
	msg_init(&g_m, BW_OP_MODEL_INFO, BW_MODEL_ID_ANY);
	memset(msg_body(&g_m), 'n', 1400);
	msg_set_body_len(&g_m, 1400);
	g_m.len = T_BW_LEN + 1400;
	frame_msg(&g_f, &g_m);
	EXPECT_ERROR(&g_lc_small, BW_STATUS_NOT_FOUND, "(name cut)");
	t_reply_release();
}

/* describe gets the MTU's room, and a description that needs more is INTERNAL, not an oversize reply. */
static void test_small_mtu_model_info(void)
{
	model_info_frame_padded(STUB_MODEL_BIG, NULL, SMALL_ROOM);
	EXPECT_ERROR(&g_lc_small, BW_STATUS_INTERNAL, "does not fit");
	CU_ASSERT(g_stub.describe_cap == SMALL_ROOM);
	model_info_frame_padded(STUB_MODEL_ECHO, NULL, SMALL_ROOM);
	echo_description_check(EXPECT_REPLY(&g_lc_small, &g_f, BW_STATUS_OK));
	CU_ASSERT(g_stub.describe_cap == SMALL_ROOM);
	t_reply_release();
}

/* docs/protocol.md: "A server never sends a reply larger than its own configured MTU allows." A PING
 * that arrived larger than the MTU (a PMD that does not enforce it, see dp_port_init's af_packet
 * note) must be dropped or refused, not echoed whole. */
static void test_ping_over_mtu_refused(void)
{
	struct outcome o;

	frame_ping(&g_f, &g_m, SMALL_ROOM, 0);
	CU_ASSERT_PTR_NOT_NULL(EXPECT_REPLY(&g_lc_small, &g_f, BW_STATUS_OK));
	frame_ping(&g_f, &g_m, SMALL_ROOM + 100, 0);
	o = t_run(&g_lc_small, &g_f, g_f.len, 0);
	t_check(o.verdict == DP_VERDICT_DROP || rte_pktmbuf_pkt_len(g_reply) <= T_ETH_LEN + 1500, __FILE__, __LINE__,
		"PING of %u body bytes at MTU 1500: %s of %u bytes", SMALL_ROOM + 100, outcome_str(&o),
		g_reply != NULL ? rte_pktmbuf_pkt_len(g_reply) : 0);
	t_reply_release();
}

/*
 * Requests of one datagram the model layer holds keep their mbufs out of the pool the RX ring refills
 * from: at this core's share of mbufs_held (held_max) the next INFER is refused RESOURCE_EXHAUSTED,
 * counted, before the model layer sees it, while PING is still answered; below it, served again.
 */
static void test_held_budget(void)
{
	struct dp_lcore *lc = &g_lc_jumbo;
	uint64_t held = lc->stats.held_requests, refused = lc->stats.held_refused;
	uint32_t calls;

	lc->stats.held_requests = lc->cfg->held_max; /* as many as a flood to a slow model leaves held */
	infer_frame(STUB_MODEL_ECHO, g_three, RTE_DIM(g_three));
	calls = g_stub.infer_calls;
	EXPECT_ERROR(lc, BW_STATUS_RESOURCE_EXHAUSTED, "mbufs_held");
	CU_ASSERT_EQUAL(g_stub.infer_calls, calls);
	CU_ASSERT_EQUAL(lc->stats.held_refused, refused + 1);
	frame_ping(&g_f, &g_m, 64, 0);
	CU_ASSERT_PTR_NOT_NULL(EXPECT_REPLY(lc, &g_f, BW_STATUS_OK));
	lc->stats.held_requests = lc->cfg->held_max - 1;
	infer_frame(STUB_MODEL_ECHO, g_three, RTE_DIM(g_three));
	CU_ASSERT_PTR_NOT_NULL(EXPECT_REPLY(lc, &g_f, BW_STATUS_OK));
	CU_ASSERT_EQUAL(lc->stats.held_requests, lc->cfg->held_max - 1); /* taken and answered */
	lc->stats.held_requests = held;
	t_reply_release();
}

CU_TestInfo g_request_tests[] = {
	{ "INFER with 0, 1, 3 and 64 tensors is echoed", test_infer_echo },
	{ "INFER with a tensor addressed by name", test_infer_by_name },
	{ "INFER with every dtype, rank 0..8, lowest priority", test_infer_dtypes_ranks },
	{ "PING echoes its body; with tensors INVALID_ARGUMENT; DRAINING while draining", test_ping },
	{ "MODEL_INFO by id and by name", test_model_info },
	{ "MODEL_INFO unknown id/name NOT_FOUND, describe failing INTERNAL", test_model_info_errors },
	{ "unknown-name message cut at 64 bytes stays valid UTF-8",
	  test_unknown_name_message_is_utf8 },
	{ "no reply larger than its request: MODEL_INFO padded, errors cut to the request", test_no_larger_reply },
	{ "datagram shorter than the header: proto_truncated", test_proto_truncated },
	{ "bad magic: proto_bad_magic", test_bad_magic },
	{ "reply opcode: proto_reply", test_reply_opcode },
	{ "version not 1: INVALID_ARGUMENT, reply version 1", test_bad_version },
	{ "status not 0, unknown flags: INVALID_ARGUMENT", test_status_and_flags },
	{ "unknown opcode: INVALID_ARGUMENT", test_unknown_opcode },
	{ "bad segment numbers: INVALID_ARGUMENT", test_segments },
	{ "AUTH flag without a trailer: the lengths disagree", test_auth },
	{ "PADDED: zeros after the body, one datagram only", test_padded },
	{ "no unsigned reply larger than its request: RESOURCE_EXHAUSTED, or padded", test_no_amplification },
	{ "body_len and total_body_len mismatches", test_body_lengths },
	{ "body cut at every length: INVALID_ARGUMENT", test_body_cut_at_every_length },
	{ "priority out of range, unknown model", test_priority_and_model },
	{ "bad tensors: INVALID_ARGUMENT naming the rule", test_bad_tensors },
	{ "model failure: INTERNAL with its message", test_model_failure },
	{ "model layer contract: a request refused after it was taken, a reply over its room", test_model_contract },
	{ "error replies past error_reply_rate dropped: rate_error_reply", test_error_rate },
	{ "held requests at this core's share of mbufs_held: RESOURCE_EXHAUSTED, PING answered", test_held_budget },
	CU_TEST_INFO_NULL,
};

CU_TestInfo g_small_mtu_tests[] = {
	{ "replies and error replies fit MTU 1500", test_small_mtu_replies_fit },
	{ "MODEL_INFO larger than the room: INTERNAL", test_small_mtu_model_info },
	{ "PING larger than the MTU is refused, not echoed past it", test_ping_over_mtu_refused },
	CU_TEST_INFO_NULL,
};
