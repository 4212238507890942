/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Shared fixture of the dataplane unit tests: EAL with one mbuf pool, two hand-built lcore contexts
 * (MTU 9000 and 1500) over a stub model layer, builders for Ethernet/IPv4/UDP/ICMP/ARP frames and
 * protocol v1 requests, and checks that run one frame through dp_packet_handle and compare its
 * verdict, every counter and the reply's bytes with what a case expects.
 *
 * Frames are built in plain buffers and broken by writing through the accessors below; frame_fix()
 * recomputes the checksums from whatever the header fields then say, so a case breaks a field and
 * either keeps the checksums consistent (frame_fix after) or not (frame_fix before).
 */
#ifndef BW_TEST_DP_H
#define BW_TEST_DP_H

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>

#include <CUnit/CUnit.h>

#include <rte_arp.h>
#include <rte_ether.h>
#include <rte_icmp.h>
#include <rte_ip.h>
#include <rte_udp.h>

#include "dataplane.h"

#define T_OUR_IP RTE_IPV4(10, 0, 0, 1)  /* host byte order */
#define T_PEER_IP RTE_IPV4(10, 0, 0, 2)
#define T_OTHER_IP RTE_IPV4(10, 0, 0, 3)
#define T_PEER_PORT 40000
#define T_BURST_TSC 0x5eed5eedULL        /* lc->burst_tsc: what a request's arrival_tsc must be */
/* What a NIC leaves in a received mbuf's ol_flags (an RSS hash): a reply must not carry it out. */
#define T_RX_OL_FLAGS RTE_MBUF_F_RX_RSS_HASH
#define T_ETH_LEN ((uint32_t)sizeof(struct rte_ether_hdr))
#define T_IP_LEN ((uint32_t)sizeof(struct rte_ipv4_hdr))
#define T_UDP_LEN ((uint32_t)sizeof(struct rte_udp_hdr))
#define T_BW_LEN ((uint32_t)sizeof(struct bw_hdr))
#define T_UDP_HDRS_LEN (T_ETH_LEN + T_IP_LEN + T_UDP_LEN) /* 42 */
#define T_FRAME_MAX (T_ETH_LEN + BW_MTU_MAX + 64)          /* a jumbo frame and then some padding */
#define T_MSG_MAX (BW_DGRAM_MAX + 256)                      /* a datagram and then some excess */

extern const struct rte_ether_addr g_our_mac;
extern const struct rte_ether_addr g_peer_mac;
extern struct rte_mempool *g_pool;
extern struct dp_lcore g_lc_jumbo; /* MTU 9000, no offloads */
extern struct dp_lcore g_lc_small; /* MTU 1500, no offloads */

/* ---- environment ------------------------------------------------------------------------------ */

/** EAL, the pool (data room for MTU 9000) and both lcores. \return 0 or -1. */
int t_env_init(const char *prog);
void t_env_fini(void);
/** Sets up an lcore context as the dataplane would, without a port. */
void t_lcore_init(struct dp_lcore *lc, const struct dp_config *cfg);

/* ---- stub model layer ------------------------------------------------------------------------- */

#define STUB_MODEL_ECHO 0     /* "echo": infer echoes the body in place; 2 priority levels */
#define STUB_MODEL_BROKEN 7   /* "broken": infer fails INTERNAL with STUB_BROKEN_MSG; describe -EMSGSIZE */
#define STUB_MODEL_BIG 9      /* "big": its description needs STUB_BIG_DESC_LEN bytes; infer says OK
			       * without taking the request (a model layer's bug the dataplane answers) */
#define STUB_MODEL_ROGUE 11   /* "rogue": takes the request and refuses it all the same (a model layer's bug:
			       * the request is its own, the dataplane must not answer it too) */
#define STUB_MODEL_LIAR 12    /* "liar": takes the request and answers it with one byte more than the room */
#define STUB_MODEL_WIDE 13    /* "wide": takes the request and answers STUB_WIDE_REPLY bytes, within the room:
			       * outputs larger than the inputs */
#define STUB_WIDE_REPLY 600u
#define STUB_MODEL_UNKNOWN 42
#define STUB_ECHO_LEVELS 2
#define STUB_BROKEN_MSG "kernel 3 failed: illegal address"
#define STUB_BIG_DESC_LEN 4000u
#define T_INFO_PAD 4096u /* a MODEL_INFO body padded to hold STUB_BIG_DESC_LEN (no reply larger than its request) */
#define STUB_ECHO_DESC_LEN 32u /* bw_model_info + "echo" padded to 8 */

/* What the stub saw on its last calls. t_run sets cap_limit to the MTU-derived room of the lcore it
 * runs, and the stub asserts every body_cap it is given against it. */
struct stub_state {
	uint32_t cap_limit;
	uint32_t infer_calls;
	uint32_t infer_cap;
	uint32_t describe_calls;
	uint32_t describe_cap;
	uint64_t arrival_tsc;
	const struct rte_mbuf *mbuf;
	int32_t hdr_off;                    /* req->hdr relative to req->body: must be -40 */
	uint16_t num_tensors;
	int32_t desc_off[BW_MAX_TENSORS];   /* the views, relative to req->body */
	int32_t name_off[BW_MAX_TENSORS];
	int32_t data_off[BW_MAX_TENSORS];
	struct rte_mbuf *held_mbuf;         /* the request echo took on a t_lcore_init lcore, for t_run */
	struct bw_hdr *held_hdr;
	uint16_t held_tensors;
	uint32_t held_reply_len;            /* what t_run answers the held request with; 0: its body_len */
	struct rte_mbuf *rogue_mbuf;        /* the request rogue took and refused */
};
extern struct stub_state g_stub;
extern const struct dp_model_ops g_stub_ops;

/* ---- frames ----------------------------------------------------------------------------------- */

struct frame {
	uint32_t len;
	uint8_t b[T_FRAME_MAX];
};

static inline void *frame_at(const struct frame *f, uint32_t off)
{
	return (void *)(uintptr_t)(f->b + off);
}
static inline struct rte_ether_hdr *f_eth(const struct frame *f)
{
	return frame_at(f, 0);
}
static inline struct rte_ipv4_hdr *f_ip(const struct frame *f)
{
	return frame_at(f, T_ETH_LEN);
}
static inline struct rte_arp_hdr *f_arp(const struct frame *f)
{
	return frame_at(f, T_ETH_LEN);
}
/* L4 starts after the IHL the IPv4 header claims (clamped into the buffer for broken IHLs). */
static inline uint8_t *f_l4(const struct frame *f)
{
	uint32_t ihl = (f_ip(f)->version_ihl & 0xfu) * 4u;

	return frame_at(f, T_ETH_LEN + (ihl < T_IP_LEN ? T_IP_LEN : ihl));
}
static inline struct rte_udp_hdr *f_udp(const struct frame *f)
{
	return (struct rte_udp_hdr *)f_l4(f);
}
static inline struct rte_icmp_hdr *f_icmp(const struct frame *f)
{
	return (struct rte_icmp_hdr *)f_l4(f);
}
static inline struct bw_hdr *f_bw(const struct frame *f)
{
	return (struct bw_hdr *)(f_l4(f) + T_UDP_LEN);
}

/** Eth/IPv4 from the peer to us: opt_len bytes of IP options (NOPs, a multiple of 4), then l4_len
 * bytes of protocol proto copied from l4 (zeros when NULL); checksums set. */
void frame_ipv4(struct frame *f, uint8_t proto, const void *l4, uint32_t l4_len, uint32_t opt_len);
/** Eth/IPv4/UDP from the peer's port to ours carrying payload; checksums set. */
void frame_udp(struct frame *f, const void *payload, uint32_t len, uint32_t opt_len);
/** ICMP echo request with payload_len bytes of pattern (id 0x4242, sequence 7). */
void frame_icmp_echo(struct frame *f, uint32_t payload_len);
/** Ethernet/IPv4 ARP from the peer (broadcast) asking who has target_ip (host order); 42 bytes. */
void frame_arp(struct frame *f, uint16_t op, uint32_t target_ip);
/** Recomputes the IPv4 header checksum, and the UDP or ICMP one, from the fields as they stand. */
void frame_fix(struct frame *f);
/** Makes the frame carry exactly l4_len bytes of L4: IPv4 total length, UDP length, frame length and
 * checksums all agree (a datagram that was short when sent, not one cut in transit). */
void frame_set_l4_len(struct frame *f, uint32_t l4_len);

/* ---- protocol v1 requests --------------------------------------------------------------------- */

struct msg {
	uint32_t len;                          /* header + body (+ whatever a case appends) */
	uint32_t desc_off[BW_MAX_TENSORS];     /* where msg_tensors put things, relative to the body */
	uint32_t name_off[BW_MAX_TENSORS];
	uint32_t data_off[BW_MAX_TENSORS];
	uint8_t b[T_MSG_MAX];
};

struct tensor_spec {
	uint16_t index;
	uint8_t dtype;
	uint8_t rank;
	uint32_t dims[BW_MAX_RANK];
	const char *name; /* NULL: no name */
};

static inline struct bw_hdr *msg_hdr(struct msg *m)
{
	return (struct bw_hdr *)m->b;
}
static inline uint8_t *msg_body(struct msg *m)
{
	return m->b + T_BW_LEN;
}
static inline struct bw_tensor_desc *msg_desc(struct msg *m, unsigned int i)
{
	return (struct bw_tensor_desc *)(msg_body(m) + m->desc_off[i]);
}

/** A valid request header (fresh request_id, seg 0 of 1, priority 0) with an empty body. */
void msg_init(struct msg *m, uint8_t opcode, uint32_t model_id);
/** Sets the body to these bytes; body_len, total_body_len and len follow. */
void msg_body_set(struct msg *m, const void *body, uint32_t len);
/** Sets the body to n tensors (descriptors, padded names, pattern payloads); num_tensors and the
 * lengths follow. */
void msg_tensors(struct msg *m, const struct tensor_spec *t, unsigned int n);
/** Sets body_len and total_body_len to len; the datagram keeps its size. */
void msg_set_body_len(struct msg *m, uint32_t len);
/** A request frame carrying the message. */
void frame_msg(struct frame *f, const struct msg *m);
/** A PING (in m) whose body is body_len bytes of pattern, as a frame with opt_len bytes of IP options. */
void frame_ping(struct frame *f, struct msg *m, uint32_t body_len, uint32_t opt_len);

/* ---- running a frame -------------------------------------------------------------------------- */

enum expect_kind {
	EXPECT_DROP,        /* code: the dp_drop_reason */
	EXPECT_PROTO_REPLY, /* code: the bw_status */
	EXPECT_ARP_REPLY,
	EXPECT_ICMP_REPLY,
};

/* A frame's fate as dp_packet_handle left it: the verdict and what each counter did. */
struct outcome {
	enum dp_verdict verdict;
	int drop;              /* the drop reason whose counter rose by 1; -1 none; -2 several or by more */
	int status;            /* likewise for replies[] */
	uint64_t requests;     /* rises */
	uint64_t arp_replies;
	uint64_t icmp_replies;
	bool io_moved;         /* rx/tx counters moved (they are the poller's, not dp_packet_handle's) */
};

/** Runs the frame's first len bytes through dp_packet_handle; the rest of the frame stays in the
 * mbuf's tailroom, so a read past the packet finds plausible bytes. A reply is kept in g_reply until
 * the next run; a dropped mbuf is freed. */
struct outcome t_run(struct dp_lcore *lc, const struct frame *f, uint32_t len, uint64_t rx_ol_flags);
/** Whether the outcome is exactly this one: the one right counter rose and nothing else moved. */
bool outcome_is(const struct outcome *o, enum expect_kind kind, int code);
/** A line describing the outcome, for failure messages. */
const char *outcome_str(const struct outcome *o);
extern struct rte_mbuf *g_reply;
void t_reply_release(void);

/** An assertion reported at the caller's line, its message formatted only on failure. */
void t_check(bool ok, const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

void expect_outcome_at(struct dp_lcore *lc, const struct frame *f, enum expect_kind kind, int code,
		       const char *file, int line);
/* The whole frame must be dropped for this reason, and nothing else counted. */
#define EXPECT_DROP(lc, f, reason) expect_outcome_at(lc, f, EXPECT_DROP, (int)(reason), __FILE__, __LINE__)
/* An ARP or ICMP echo reply (checked by the caller), and nothing else counted. */
#define EXPECT_OUTCOME(lc, f, kind) expect_outcome_at(lc, f, kind, 0, __FILE__, __LINE__)

/** Runs a request frame and expects a protocol reply with this status: checks the verdict, counters,
 * every Eth/IPv4/UDP field of the reply, and its protocol header (and, for an error, that the body is
 * a message). \return the reply's protocol header (valid until the next run), or NULL. */
const struct bw_hdr *expect_reply_at(struct dp_lcore *lc, const struct frame *f, enum bw_status status,
				     const char *file, int line);
#define EXPECT_REPLY(lc, f, status) expect_reply_at(lc, f, status, __FILE__, __LINE__)

/** The Ethernet and IPv4 layers of a reply to req: addresses turned around, no options, TTL 64,
 * lengths, DF kept, checksum (or the offload request), and the MTU. */
void ipv4_reply_check_at(const struct dp_lcore *lc, const struct frame *req, const struct rte_mbuf *m,
			 uint8_t proto, const char *file, int line);

/** Reply body bytes, and whether an error reply's message contains text. */
static inline const uint8_t *reply_body(const struct bw_hdr *h)
{
	return (const uint8_t *)(h + 1);
}
bool reply_msg_has(const struct bw_hdr *h, const char *text);

/* ---- suites ----------------------------------------------------------------------------------- */


/* The suites of test_dataplane, one array each, run by test_packet.c's main. */
extern CU_TestInfo g_arp_tests[], g_icmp_tests[], g_request_tests[], g_small_mtu_tests[], g_auth_tests[];
/** The authentication suite's set-up (the TSC's frequency for the key table's clock). */
int t_auth_suite_init(void);

#endif /* BW_TEST_DP_H */
