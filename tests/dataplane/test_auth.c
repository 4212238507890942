/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of request authentication (dataplane/auth.c, and request.c around it) through
 * dp_packet_handle: the HMAC against RFC 4231's vectors, key files (format, permissions), every
 * outcome of a signed request with its counter, a model that requires signing, reloads with their
 * overlap, and a lcore's table of sources filling up.
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#include <rte_common.h>
#include <rte_cycles.h>
#include <rte_mbuf.h>

#include <batchwire/auth.h>

#include "../bw_cunit.h"
#include "dp_test.h"
#include "platform.h"

#define T_KEY_ID 7
#define T_KEY2_ID 8

static struct frame g_f;
static struct msg g_m;
static char g_key_path[64];
static const uint8_t g_secret[32] = "0123456789abcdef0123456789abcdef";
static const uint8_t g_secret2[20] = { 0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b,
				       0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b };

static uint64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void hex(char *out, const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
}

/* Writes the key file with the given text and mode. */
static void key_file_write(const char *text, mode_t mode)
{
	FILE *f;

	snprintf(g_key_path, sizeof(g_key_path), "/tmp/bw-test-keys-%d", (int)getpid());
	unlink(g_key_path);
	f = fopen(g_key_path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs(text, f);
	fclose(f);
	CU_ASSERT_EQUAL(chmod(g_key_path, mode), 0);
}

/* A key file holding key 7 (g_secret) and, when both, key 8 (g_secret2). */
static void key_file_standard(bool both)
{
	char text[512], h1[65], h2[41];

	hex(h1, g_secret, sizeof(g_secret));
	hex(h2, g_secret2, sizeof(g_secret2));
	snprintf(text, sizeof(text), "# test keys\n\n%u %s\n%s%s%s\n", T_KEY_ID, h1, both ? "8 " : "#", both ? h2 : "",
		 "");
	key_file_write(text, 0600);
}

static struct dp_auth_config auth_config(uint32_t flows)
{
	struct dp_auth_config c = { .window_ms = 2000, .overlap_s = 300, .flows = flows };

	snprintf(c.key_file, sizeof(c.key_file), "%s", g_key_path);
	return c;
}

/* Signs g_m (header and body as built) under secret as key_id, from the peer's address and port to
 * us, as g_f. */
static void sign_from(uint16_t port, uint32_t key_id, const uint8_t *secret, size_t len, uint64_t request_id)
{
	struct bw_hdr *h = msg_hdr(&g_m);
	struct bw_auth_trailer *t = (struct bw_auth_trailer *)(g_m.b + T_BW_LEN + h->body_len);
	struct bw_auth_pseudo pseudo = {
		.src_addr = rte_cpu_to_be_32(T_PEER_IP),
		.dst_addr = rte_cpu_to_be_32(T_OUR_IP),
		.src_port = rte_cpu_to_be_16(port),
		.dst_port = rte_cpu_to_be_16(BW_UDP_PORT_DEFAULT),
	};
	struct bw_hmac_key k;

	h->flags |= BW_FLAG_AUTH;
	h->request_id = request_id;
	t->key_id = key_id;
	t->reserved = 0;
	bw_hmac_key_init(&k, secret, len);
	bw_auth_tag(&k, &pseudo, h, T_BW_LEN + h->body_len + BW_AUTH_COVERED_TRAILER, t->tag);
	g_m.len = T_BW_LEN + h->body_len + (uint32_t)sizeof(*t);
	frame_msg(&g_f, &g_m);
	f_udp(&g_f)->src_port = pseudo.src_port;
	frame_fix(&g_f);
}

static void sign(uint32_t key_id, const uint8_t *secret, size_t len, uint64_t request_id)
{
	sign_from(T_PEER_PORT, key_id, secret, len, request_id);
}

static void ping_signed(uint32_t key_id, const uint8_t *secret, size_t len, uint64_t request_id)
{
	static const uint8_t body[24] = "signed ping body";

	msg_init(&g_m, BW_OP_PING, 0);
	msg_body_set(&g_m, body, sizeof(body));
	sign(key_id, secret, len, request_id);
}

/* The reply to g_f, with this status and a message holding text (NULL: an OK echo). */
static void expect(struct dp_lcore *lc, enum bw_status status, const char *text, int line)
{
	const struct bw_hdr *h;

	lc->burst_tsc = rte_rdtsc();
	h = expect_reply_at(lc, &g_f, status, __FILE__, line);
	if (h != NULL && text != NULL)
		t_check(reply_msg_has(h, text), __FILE__, line, "message '%.*s' lacks '%s'", (int)h->body_len,
			(const char *)(h + 1), text);
}
#define EXPECT(lc, status, text) expect(lc, status, text, __LINE__)

static uint64_t outcome_count(const struct dp_lcore *lc, enum dp_auth_outcome o)
{
	return lc->stats.auth[o];
}

/* RFC 4231 test cases 1, 2 and 4: the construction over OpenSSL's SHA-256 is HMAC-SHA256. */
static void test_hmac_vectors(void)
{
	static const struct {
		uint8_t key[32];
		size_t key_len;
		const char *data;
		size_t data_len;
		const char *mac;
	} v[] = {
		{ { 0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b,
		    0x0b, 0x0b, 0x0b }, 20, "Hi There", 8,
		  "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7" },
		{ "Jefe", 4, "what do ya want for nothing?", 28,
		  "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843" },
		{ { 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11,
		    0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19 }, 25,
		  "\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd"
		  "\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd\xcd",
		  50, "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b" },
	};

	for (unsigned int i = 0; i < RTE_DIM(v); i++) {
		struct bw_hmac_key k;
		uint8_t mac[BW_AUTH_TAG_LEN];
		char text[65];
		/* split in two parts: the parts are one message */
		const void *parts[2] = { v[i].data, v[i].data + 3 };
		size_t lens[2] = { 3, v[i].data_len - 3 };

		bw_hmac_key_init(&k, v[i].key, v[i].key_len);
		bw_hmac_parts(&k, parts, lens, 2, mac);
		hex(text, mac, sizeof(mac));
		CU_ASSERT_STRING_EQUAL(text, v[i].mac);
	}
}

static void test_key_lines(void)
{
	static const char *const bad[] = {
		"x 00112233445566778899aabbccddeeff",        /* no id */
		"0 00112233445566778899aabbccddeeff",        /* id 0 */
		"4294967296 00112233445566778899aabbccddeeff", /* above 32 bits */
		"7",                                         /* no secret */
		"7:00112233445566778899aabbccddeeff",        /* no space */
		"7 00112233445566778899aabbccddee",          /* 15 bytes */
		"7 00112233445566778899aabbccddeeff0",       /* odd */
		"7 00112233445566778899aabbccddeefg",        /* not hex */
		"7 00112233445566778899aabbccddeeff extra",  /* trailing words */
	};
	uint8_t secret[BW_AUTH_KEY_MAX];
	const char *why;
	uint32_t id;
	size_t len;

	CU_ASSERT_EQUAL(bw_key_line_parse("# comment\n", &id, secret, &len, &why), 0);
	CU_ASSERT_EQUAL(bw_key_line_parse("   \n", &id, secret, &len, &why), 0);
	CU_ASSERT_EQUAL(bw_key_line_parse("4294967295\t00112233445566778899AABBCCDDEEFF \r\n", &id, secret, &len, &why), 1);
	CU_ASSERT_EQUAL(id, 4294967295u);
	CU_ASSERT_EQUAL(len, 16);
	CU_ASSERT_EQUAL(secret[10], 0xaa);
	for (unsigned int i = 0; i < RTE_DIM(bad); i++) {
		why = NULL;
		CU_ASSERT_EQUAL(bw_key_line_parse(bad[i], &id, secret, &len, &why), -EINVAL);
		CU_ASSERT_PTR_NOT_NULL(why);
	}
}

/* A key file others may read, or that is malformed, stops start-up with the file and line named. */
static void test_key_file_refused(void)
{
	struct dp_auth_config c;
	struct dp_auth *a = NULL;
	char err[300];

	key_file_standard(true);
	CU_ASSERT_EQUAL(chmod(g_key_path, 0640), 0);
	c = auth_config(64);
	CU_ASSERT_EQUAL(dp_auth_create(&c, &a, err, sizeof(err)), -EPERM);
	CU_ASSERT_PTR_NULL(a);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "chmod 600"));

	key_file_write("7 00112233445566778899aabbccddeeff\n7 00112233445566778899aabbccddeeff\n", 0600);
	CU_ASSERT_EQUAL(dp_auth_create(&c, &a, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "line 2: key id 7 given twice"));
	key_file_write("7 0011\n", 0400);
	CU_ASSERT_EQUAL(dp_auth_create(&c, &a, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "line 1"));
	snprintf(c.key_file, sizeof(c.key_file), "/nonexistent/keys");
	CU_ASSERT_EQUAL(dp_auth_create(&c, &a, err, sizeof(err)), -ENOENT);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "/nonexistent/keys"));
	unlink(g_key_path);
}

static void lcore_with_keys(struct dp_lcore *lc, struct dp_auth **a, uint32_t flows)
{
	struct dp_auth_config c = auth_config(flows);
	char err[300];

	t_lcore_init(lc, g_lc_jumbo.cfg);
	lc->lcore_id = rte_lcore_id();
	CU_ASSERT_EQUAL_FATAL(dp_auth_create(&c, a, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL_FATAL(dp_auth_lcore_init(lc, *a, SOCKET_ID_ANY), 0);
	dp_auth_lcore_online(lc);
}

static void lcore_without_keys(struct dp_lcore *lc, struct dp_auth *a)
{
	dp_auth_lcore_offline(lc);
	dp_lcore_fini(lc);
	dp_auth_destroy(a);
}

/* Every outcome of a signed PING, each counted once. */
static void test_signed_requests(void)
{
	static struct dp_lcore lc;
	struct dp_auth *a;
	uint64_t now;

	key_file_standard(true);
	lcore_with_keys(&lc, &a, 64);
	now = realtime_ns();

	ping_signed(T_KEY_ID, g_secret, sizeof(g_secret), now);
	EXPECT(&lc, BW_STATUS_OK, NULL);
	CU_ASSERT_EQUAL(outcome_count(&lc, DP_AUTH_OK), 1);
	/* the same datagram again: a replay */
	EXPECT(&lc, BW_STATUS_UNAUTHENTICATED, "already seen");
	CU_ASSERT_EQUAL(outcome_count(&lc, DP_AUTH_REPLAY), 1);
	/* the second key works as well */
	ping_signed(T_KEY2_ID, g_secret2, sizeof(g_secret2), now + 1);
	EXPECT(&lc, BW_STATUS_OK, NULL);
	/* and a request_id used under key 7 is new under key 8: replays are per source and key */
	ping_signed(T_KEY2_ID, g_secret2, sizeof(g_secret2), now);
	EXPECT(&lc, BW_STATUS_OK, NULL);
	CU_ASSERT_EQUAL(outcome_count(&lc, DP_AUTH_OK), 3);

	ping_signed(T_KEY_ID, g_secret2, sizeof(g_secret2), now + 2); /* key 7, the wrong secret */
	EXPECT(&lc, BW_STATUS_UNAUTHENTICATED, "tag does not match");
	CU_ASSERT_EQUAL(outcome_count(&lc, DP_AUTH_BAD_TAG), 1);
	ping_signed(99, g_secret, sizeof(g_secret), now + 3);
	EXPECT(&lc, BW_STATUS_UNAUTHENTICATED, "unknown key id");
	CU_ASSERT_EQUAL(outcome_count(&lc, DP_AUTH_UNKNOWN_KEY), 1);
	/* one bit of the body flipped after signing */
	ping_signed(T_KEY_ID, g_secret, sizeof(g_secret), now + 4);
	f_l4(&g_f)[8 + T_BW_LEN + 3] ^= 1;
	frame_fix(&g_f);
	EXPECT(&lc, BW_STATUS_UNAUTHENTICATED, "tag does not match");
	/* the same datagram from another source: the tag binds the address */
	ping_signed(T_KEY_ID, g_secret, sizeof(g_secret), now + 5);
	f_ip(&g_f)->src_addr = rte_cpu_to_be_32(T_OTHER_IP);
	frame_fix(&g_f);
	EXPECT(&lc, BW_STATUS_UNAUTHENTICATED, "tag does not match");
	CU_ASSERT_EQUAL(outcome_count(&lc, DP_AUTH_BAD_TAG), 3);
	/* clocks apart by more than the window, either way */
	ping_signed(T_KEY_ID, g_secret, sizeof(g_secret), now - 3000000000ull);
	EXPECT(&lc, BW_STATUS_UNAUTHENTICATED, "auth_window_ms");
	ping_signed(T_KEY_ID, g_secret, sizeof(g_secret), now + 3000000000ull);
	EXPECT(&lc, BW_STATUS_UNAUTHENTICATED, "auth_window_ms");
	CU_ASSERT_EQUAL(outcome_count(&lc, DP_AUTH_STALE), 2);
	/* reserved must be 0: it is covered, but a v1 server knows no other value */
	ping_signed(T_KEY_ID, g_secret, sizeof(g_secret), now + 6);
	((struct bw_auth_trailer *)(f_l4(&g_f) + 8 + T_BW_LEN + f_bw(&g_f)->body_len))->reserved = 1;
	frame_fix(&g_f);
	EXPECT(&lc, BW_STATUS_INVALID_ARGUMENT, "reserved");
	/* no trailer where the flag says one is: the lengths disagree */
	ping_signed(T_KEY_ID, g_secret, sizeof(g_secret), now + 7);
	frame_udp(&g_f, g_m.b, g_m.len - (uint32_t)sizeof(struct bw_auth_trailer), 0);
	EXPECT(&lc, BW_STATUS_INVALID_ARGUMENT, "body_len");
	CU_ASSERT_EQUAL(outcome_count(&lc, DP_AUTH_OK), 3);
	lcore_without_keys(&lc, a);

	/* a server without keys cannot check a trailer */
	ping_signed(T_KEY_ID, g_secret, sizeof(g_secret), realtime_ns());
	EXPECT(&g_lc_jumbo, BW_STATUS_UNAUTHENTICATED, "no keys");
	t_reply_release();
	unlink(g_key_path);
}

/* Overtaken datagrams are fine up to DP_AUTH_RECENT later ones; older than all kept, a replay. */
static void test_reordering(void)
{
	static struct dp_lcore lc;
	struct dp_auth *a;
	uint64_t now;

	key_file_standard(false);
	lcore_with_keys(&lc, &a, 64);
	now = realtime_ns();
	for (unsigned int i = 0; i < DP_AUTH_RECENT; i++) {
		ping_signed(T_KEY_ID, g_secret, sizeof(g_secret), now + 100 + i);
		EXPECT(&lc, BW_STATUS_OK, NULL);
	}
	ping_signed(T_KEY_ID, g_secret, sizeof(g_secret), now + 99); /* below all 16 kept */
	EXPECT(&lc, BW_STATUS_UNAUTHENTICATED, "already seen");
	ping_signed(T_KEY_ID, g_secret, sizeof(g_secret), now + 200);
	EXPECT(&lc, BW_STATUS_OK, NULL);
	ping_signed(T_KEY_ID, g_secret, sizeof(g_secret), now + 150); /* overtaken by one: still new */
	EXPECT(&lc, BW_STATUS_OK, NULL);
	ping_signed(T_KEY_ID, g_secret, sizeof(g_secret), now + 150);
	EXPECT(&lc, BW_STATUS_UNAUTHENTICATED, "already seen");
	lcore_without_keys(&lc, a);
	t_reply_release();
	unlink(g_key_path);
}

/* A model that requires signing refuses the unsigned, and answers the signed; other models and
 * PING do not care. An authenticated MODEL_INFO need not pad itself. */
static bool echo_requires_auth(const void *model)
{
	return model == g_stub_ops.lookup(g_stub_ops.ctx, STUB_MODEL_ECHO, NULL, 0);
}

static void test_model_requires_auth(void)
{
	static struct dp_lcore lc;
	static struct dp_model_ops ops;
	static const uint8_t zeros[DP_ERROR_MSG_MAX];
	static const struct tensor_spec t = { .index = 0, .dtype = BW_DTYPE_FLOAT, .rank = 2, .dims = { 1, 4 } };
	struct dp_auth *a;
	uint64_t now;

	key_file_standard(false);
	lcore_with_keys(&lc, &a, 64);
	ops = g_stub_ops;
	ops.auth_required = echo_requires_auth;
	lc.models = &ops;
	now = realtime_ns();

	msg_init(&g_m, BW_OP_INFER, STUB_MODEL_ECHO);
	msg_tensors(&g_m, &t, 1);
	frame_msg(&g_f, &g_m);
	EXPECT(&lc, BW_STATUS_UNAUTHENTICATED, "");
	CU_ASSERT_EQUAL(outcome_count(&lc, DP_AUTH_MISSING), 1);
	sign(T_KEY_ID, g_secret, sizeof(g_secret), now);
	EXPECT(&lc, BW_STATUS_OK, NULL);
	/* an unsigned error reply is cut to the request's body; a signed one carries the whole message */
	msg_init(&g_m, BW_OP_MODEL_INFO, STUB_MODEL_ECHO);
	msg_body_set(&g_m, zeros, sizeof(zeros));
	frame_msg(&g_f, &g_m);
	EXPECT(&lc, BW_STATUS_UNAUTHENTICATED, "takes authenticated requests only");
	msg_init(&g_m, BW_OP_MODEL_INFO, STUB_MODEL_ECHO); /* no padding */
	sign(T_KEY_ID, g_secret, sizeof(g_secret), now + 1);
	EXPECT(&lc, BW_STATUS_OK, NULL);
	CU_ASSERT_EQUAL(outcome_count(&lc, DP_AUTH_MISSING), 2);
	/* PING and other models take unsigned requests */
	frame_ping(&g_f, &g_m, 8, 0);
	EXPECT(&lc, BW_STATUS_OK, NULL);
	msg_init(&g_m, BW_OP_INFER, STUB_MODEL_UNKNOWN);
	msg_body_set(&g_m, zeros, sizeof(zeros));
	frame_msg(&g_f, &g_m);
	EXPECT(&lc, BW_STATUS_NOT_FOUND, "no model with id");
	lcore_without_keys(&lc, a);
	t_reply_release();
	unlink(g_key_path);
}

/* A reload from a control thread: the lcore (this thread too, here) is offline meanwhile, as a
 * polling lcore between two polls would be quiescent. */
static int reload(struct dp_auth *a, struct dp_lcore *lc, char *err, size_t cap)
{
	int ret;

	dp_auth_lcore_offline(lc);
	ret = dp_auth_reload(a, err, cap);
	dp_auth_lcore_online(lc);
	return ret;
}

/* A reload takes new keys at once and keeps dropped ones for the overlap; one that fails changes
 * nothing. */
static void test_reload(void)
{
	static struct dp_lcore lc;
	struct dp_auth *a;
	char err[300], h1[65], h2[41], text[300];
	uint64_t now;

	hex(h1, g_secret, sizeof(g_secret));
	hex(h2, g_secret2, sizeof(g_secret2));
	key_file_standard(false); /* key 7 only */
	lcore_with_keys(&lc, &a, 64);
	now = realtime_ns();
	ping_signed(T_KEY2_ID, g_secret2, sizeof(g_secret2), now);
	EXPECT(&lc, BW_STATUS_UNAUTHENTICATED, "unknown key id");

	/* rotation: key 8 added, key 7 taken out: both accepted during the overlap */
	snprintf(text, sizeof(text), "8 %s\n", h2);
	key_file_write(text, 0600);
	CU_ASSERT_EQUAL(reload(a, &lc, err, sizeof(err)), 2);
	ping_signed(T_KEY2_ID, g_secret2, sizeof(g_secret2), now + 1);
	EXPECT(&lc, BW_STATUS_OK, NULL);
	ping_signed(T_KEY_ID, g_secret, sizeof(g_secret), now + 2);
	EXPECT(&lc, BW_STATUS_OK, NULL);
	/* key 7 given a new secret: the old one stays for the overlap, the new one works at once */
	snprintf(text, sizeof(text), "8 %s\n7 %s\n", h2, h2);
	key_file_write(text, 0600);
	CU_ASSERT_EQUAL(reload(a, &lc, err, sizeof(err)), 3);
	ping_signed(T_KEY_ID, g_secret2, sizeof(g_secret2), now + 3);
	EXPECT(&lc, BW_STATUS_OK, NULL);
	ping_signed(T_KEY_ID, g_secret, sizeof(g_secret), now + 4);
	EXPECT(&lc, BW_STATUS_OK, NULL);
	/* a file that does not load keeps what was */
	key_file_write("8 nothex\n", 0600);
	CU_ASSERT_EQUAL(reload(a, &lc, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "line 1"));
	ping_signed(T_KEY2_ID, g_secret2, sizeof(g_secret2), now + 5);
	EXPECT(&lc, BW_STATUS_OK, NULL);
	lcore_without_keys(&lc, a);

	/* with no overlap a dropped key is refused at once */
	key_file_standard(true);
	{
		struct dp_auth_config c = auth_config(64);

		c.overlap_s = 0;
		t_lcore_init(&lc, g_lc_jumbo.cfg);
		lc.lcore_id = rte_lcore_id();
		CU_ASSERT_EQUAL_FATAL(dp_auth_create(&c, &a, err, sizeof(err)), 0);
		CU_ASSERT_EQUAL_FATAL(dp_auth_lcore_init(&lc, a, SOCKET_ID_ANY), 0);
		dp_auth_lcore_online(&lc);
	}
	snprintf(text, sizeof(text), "8 %s\n", h2);
	key_file_write(text, 0600);
	CU_ASSERT_EQUAL(reload(a, &lc, err, sizeof(err)), 1);
	ping_signed(T_KEY_ID, g_secret, sizeof(g_secret), now + 6);
	EXPECT(&lc, BW_STATUS_UNAUTHENTICATED, "unknown key id");
	lcore_without_keys(&lc, a);
	t_reply_release();
	unlink(g_key_path);
}

/* A signed PING from the peer's address and another port. */
static void ping_from_port(uint16_t port, uint64_t request_id)
{
	static const uint8_t body[24] = "signed ping body";

	msg_init(&g_m, BW_OP_PING, 0);
	msg_body_set(&g_m, body, sizeof(body));
	sign_from(port, T_KEY_ID, g_secret, sizeof(g_secret), request_id);
}

/* A lcore remembers at most auth_flows sources (here 8, every slot a source may take): the next
 * new one is refused RESOURCE_EXHAUSTED, the known ones go on. */
static void test_flows_full(void)
{
	static struct dp_lcore lc;
	struct dp_auth *a;
	uint64_t now;

	key_file_standard(false);
	lcore_with_keys(&lc, &a, 8);
	now = realtime_ns();
	for (unsigned int i = 0; i < 9; i++) {
		ping_from_port((uint16_t)(T_PEER_PORT + 1 + i), now + i);
		if (i < 8)
			EXPECT(&lc, BW_STATUS_OK, NULL);
		else
			EXPECT(&lc, BW_STATUS_RESOURCE_EXHAUSTED, "auth_flows");
	}
	CU_ASSERT_EQUAL(outcome_count(&lc, DP_AUTH_FLOWS_FULL), 1);
	ping_from_port(T_PEER_PORT + 1, now + 100); /* a known source goes on */
	EXPECT(&lc, BW_STATUS_OK, NULL);
	lcore_without_keys(&lc, a);
	t_reply_release();
	unlink(g_key_path);
}

static void test_outcome_names(void)
{
	for (int i = 0; i < DP_AUTH_OUTCOME_COUNT; i++) {
		CU_ASSERT(strcmp(dp_auth_outcome_name((enum dp_auth_outcome)i), "unknown") != 0);
		for (int j = 0; j < i; j++)
			CU_ASSERT(strcmp(dp_auth_outcome_name((enum dp_auth_outcome)i),
					 dp_auth_outcome_name((enum dp_auth_outcome)j)) != 0);
	}
	CU_ASSERT_STRING_EQUAL(dp_auth_outcome_name(DP_AUTH_OUTCOME_COUNT), "unknown");
}

int t_auth_suite_init(void)
{
	return plat_clock_init() == 0 ? 0 : -1;
}

/*
 * A signed message's request_id is spent at its first segment: that segment, captured and sent again
 * after its message timed out, is dropped at once (counted a replay), unanswered (a late duplicate of
 * a message already answered must not send a refusal after the answer) and holds no mbuf, rather
 * than opening an entry that waits out the reassembly clock.
 */
static void test_segment_replay(void)
{
	static struct dp_lcore lc;
	static uint8_t body[600];
	struct dp_auth *a;
	struct outcome o;
	uint64_t now;

	key_file_standard(false);
	lcore_with_keys(&lc, &a, 64);
	now = realtime_ns();
	memset(body, 0x5a, sizeof(body));
	msg_init(&g_m, BW_OP_PING, 0);
	msg_body_set(&g_m, body, sizeof(body));
	msg_hdr(&g_m)->seg_count = 2;
	msg_hdr(&g_m)->total_body_len = 1000; /* segment 1 (400 bytes) never comes */
	msg_hdr(&g_m)->deadline_us = BW_DEADLINE_NONE; /* expires in silence: this lcore has no TX queue */
	sign(T_KEY_ID, g_secret, sizeof(g_secret), now);

	lc.burst_tsc = rte_rdtsc();
	o = t_run(&lc, &g_f, g_f.len, T_RX_OL_FLAGS);
	CU_ASSERT_EQUAL(o.verdict, DP_VERDICT_HELD);
	CU_ASSERT_EQUAL(outcome_count(&lc, DP_AUTH_OK), 1);
	CU_ASSERT_EQUAL(lc.stats.reasm_messages, 1);
	CU_ASSERT_EQUAL(dp_reasm_expire(&lc, lc.burst_tsc + plat_us_to_tsc(DP_REASM_TIMEOUT_MS_DEFAULT * 1000)), 1);
	CU_ASSERT_EQUAL(lc.stats.reasm_messages, 0);
	/* the captured first segment again, within the signing window */
	lc.burst_tsc = rte_rdtsc();
	o = t_run(&lc, &g_f, g_f.len, T_RX_OL_FLAGS);
	CU_ASSERT(o.verdict == DP_VERDICT_DROP && o.drop == DP_DROP_SEGMENT && o.status == -1);
	CU_ASSERT_EQUAL(outcome_count(&lc, DP_AUTH_REPLAY), 1);
	CU_ASSERT_EQUAL(lc.stats.reasm_messages, 0);
	CU_ASSERT_EQUAL(lc.stats.reasm_segments, 0);
	CU_ASSERT_EQUAL(lc.stats.reasm[DP_REASM_REFUSED], 1);
	CU_ASSERT_EQUAL(dp_reasm_expire(&lc, UINT64_MAX / 2), 0); /* no entry was opened */
	lcore_without_keys(&lc, a);
	unlink(g_key_path);
}

CU_TestInfo g_auth_tests[] = {
	{ "HMAC-SHA256: RFC 4231 vectors, in parts", test_hmac_vectors },
	{ "key file lines: ids, secrets, comments, every malformed one", test_key_lines },
	{ "key files open to others, malformed or missing: refused, file and line named", test_key_file_refused },
	{ "signed requests: ok, replay, wrong key, unknown key, flipped bit, other source, stale, no keys",
	  test_signed_requests },
	{ "overtaken datagrams within the recent ids, replays below them", test_reordering },
	{ "a signed message's first segment replayed: dropped at once, nothing held", test_segment_replay },
	{ "a model that requires signing; signed MODEL_INFO unpadded", test_model_requires_auth },
	{ "reloads: new keys at once, dropped ones for the overlap, a bad file changes nothing", test_reload },
	{ "the lcore's table of sources full: RESOURCE_EXHAUSTED", test_flows_full },
	{ "outcome names are distinct", test_outcome_names },
	CU_TEST_INFO_NULL,
};
