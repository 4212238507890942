/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dataplane: ports, mbuf pools, Eth/IPv4/UDP with ARP and ICMP echo, protocol v1 on the wire, and the
 * RX and TX-drain pollers that each polling lcore runs. It knows no models: requests that need one go
 * to the dp_model_ops the app installs.
 *
 * Ownership: a polling lcore owns its RX/TX queue pair, its TX buffer, its counters and every mbuf it
 * received; only it frees them (docs/architecture.md).
 */
#ifndef BW_DATAPLANE_H
#define BW_DATAPLANE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rte_ethdev.h>
#include <rte_lpm.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_telemetry.h>

#include <batchwire/batch.h>
#include <batchwire/status.h>
#include <batchwire/wire.h>

#include "platform.h"

#define DP_RX_BURST 32
#define DP_MTU_DEFAULT 1500
#define DP_MTU_MIN 576             /* the IPv4 minimum every host must accept */
#define DP_MTU_MAX BW_MTU_MAX      /* jumbo frames */
#define DP_TX_DRAIN_US_DEFAULT 10  /* a reply waits at most this long for others to share its burst */
#define DP_TX_DRAIN_US_MAX 100000
#define DP_RX_DESC_DEFAULT 1024
#define DP_TX_DESC_DEFAULT 1024
#define DP_DESC_MAX 16384
#define DP_MBUFS_HELD_DEFAULT 4096 /* room for request mbufs held in queued batches */
#define DP_MBUF_CACHE_SIZE 256
#define DP_MAX_POLL_LCORES 64
#define DP_ERROR_MSG_MAX 200       /* bytes of text in an error reply (docs/protocol.md) */
#define DP_MSG_MAX_DEFAULT (16u << 20) /* largest message body: requests and replies */
#define DP_MSG_MAX_MAX 0xffffffffu
#define DP_REASM_MSGS_DEFAULT 1024 /* messages in reassembly or held (until answered), per polling lcore */
#define DP_REASM_MSGS_MAX 65536
#define DP_REASM_TIMEOUT_MS_DEFAULT 100 /* a message has this long to arrive whole (or its deadline) */
#define DP_REASM_TIMEOUT_MS_MAX 60000
#define DP_PING_MAX_DEFAULT 65536  /* largest PING body: echoed to whoever the source says it is */
#define DP_REASM_SCAN_US 1000      /* how often the expiry scan runs */
/* Replies a peer can make us send without being served, per polling lcore and second (0: no
 * limit). Generous for operators' tools (ping, arping, a client's mistakes) and far below what a
 * lcore sends when flooded; a burst of a tenth of a second passes at once. */
#define DP_ERROR_RATE_DEFAULT 10000
#define DP_ICMP_RATE_DEFAULT 1000
#define DP_ARP_RATE_DEFAULT 1000
#define DP_RATE_MAX 10000000
#define DP_ALLOW_MAX 64            /* prefixes in one allowlist */
#define DP_AUTH_PATH_MAX 4096
#define DP_AUTH_KEYS_MAX 1024      /* keys of one key file */
#define DP_AUTH_WINDOW_MS_DEFAULT 10000 /* how far an authenticated request_id may be from our clock */
#define DP_AUTH_WINDOW_MS_MAX 3600000
#define DP_AUTH_OVERLAP_S_DEFAULT 300   /* a key taken out of the file is still accepted this long */
#define DP_AUTH_OVERLAP_S_MAX 604800
#define DP_AUTH_FLOWS_DEFAULT 4096      /* per polling lcore: sources whose recent request_ids are kept */
#define DP_AUTH_FLOWS_MAX (1u << 20)
#define DP_AUTH_RECENT 16               /* request_ids kept per source: how far a datagram may be overtaken */

/* Why a frame was dropped. Each has a counter; names are what telemetry shows. */
enum dp_drop_reason {
	DP_DROP_ETH_TRUNCATED,     /* shorter than an Ethernet header */
	DP_DROP_ETH_WRONG_DST,     /* unicast to another MAC */
	DP_DROP_ETH_UNKNOWN_TYPE,  /* neither ARP nor IPv4 (IPv6, VLAN, LLDP...) */
	DP_DROP_ETH_BAD_SRC,       /* source MAC broadcast, multicast or zero: a reply would flood the segment */
	DP_DROP_MULTI_SEGMENT,     /* chained mbuf: the pools are sized so this never happens */
	DP_DROP_ARP_INVALID,       /* not Ethernet/IPv4 ARP, or truncated */
	DP_DROP_ARP_NOT_FOR_US,    /* a request for another address, or a reply */
	DP_DROP_IP_TRUNCATED,      /* shorter than its header or its total length */
	DP_DROP_IP_BAD_VERSION,
	DP_DROP_IP_BAD_HDR_LEN,    /* IHL below 5 */
	DP_DROP_IP_BAD_TOTAL_LEN,  /* total length below the header length */
	DP_DROP_IP_OVER_MTU,       /* ICMP echo longer than our MTU: its reply could not be sent */
	DP_DROP_IP_BAD_CSUM,
	DP_DROP_IP_FRAGMENT,       /* MF set or offset non-zero: we do not reassemble */
	DP_DROP_IP_WRONG_DST,      /* not our address */
	DP_DROP_IP_MARTIAN_SRC,    /* source 0/8, 127/8, 224/4, 240/4 (the limited broadcast) or our own */
	DP_DROP_SRC_NOT_ALLOWED,   /* IPv4 or ARP from a source outside the allowlist: no reply at all */
	DP_DROP_MODEL_NOT_ALLOWED, /* a request for a model whose allowlist leaves its source out */
	DP_DROP_IP_UNKNOWN_PROTO,  /* neither ICMP nor UDP */
	DP_DROP_ICMP_INVALID,      /* truncated or bad checksum */
	DP_DROP_ICMP_UNSUPPORTED,  /* anything but echo request */
	DP_DROP_UDP_TRUNCATED,     /* shorter than a UDP header */
	DP_DROP_UDP_BAD_LEN,       /* UDP length disagrees with the IP payload length */
	DP_DROP_UDP_BAD_CSUM,
	DP_DROP_UDP_WRONG_PORT,    /* not our port */
	DP_DROP_PROTO_TRUNCATED,   /* shorter than the 40-byte protocol header */
	DP_DROP_PROTO_BAD_MAGIC,
	DP_DROP_PROTO_REPLY,       /* a reply opcode sent to us: dropped so that no loop can form */
	DP_DROP_TX_FULL,           /* the TX queue refused a reply */
	DP_DROP_SEGMENT,           /* a segment ignored or discarded in reassembly: reasm_* say why */
	DP_DROP_RATE_ERROR,        /* an error reply over error_reply_rate: not sent */
	DP_DROP_RATE_ICMP,         /* an echo reply over icmp_rate: not sent */
	DP_DROP_RATE_ARP,          /* an ARP reply over arp_rate: not sent */
	DP_DROP_COUNT
};

/* What became of a request's authentication. Each has a counter; names are what telemetry shows. */
enum dp_auth_outcome {
	DP_AUTH_OK,           /* a valid trailer, a fresh request_id never seen from its source */
	DP_AUTH_MISSING,      /* no trailer, for a model that requires one: UNAUTHENTICATED */
	DP_AUTH_NO_KEYS,      /* a trailer, and this server has no key file: UNAUTHENTICATED */
	DP_AUTH_UNKNOWN_KEY,  /* a key id not in the key file (or past its overlap): UNAUTHENTICATED */
	DP_AUTH_BAD_TAG,      /* the tag does not match: UNAUTHENTICATED */
	DP_AUTH_STALE,        /* request_id further than auth_window_ms from our clock: UNAUTHENTICATED */
	DP_AUTH_REPLAY,       /* request_id already seen from this source and key: UNAUTHENTICATED */
	DP_AUTH_FLOWS_FULL,   /* no room to remember a new source: RESOURCE_EXHAUSTED */
	DP_AUTH_OUTCOME_COUNT
};

/** Telemetry name of an authentication outcome ("bad_tag"...). */
const char *dp_auth_outcome_name(enum dp_auth_outcome outcome);

/*
 * Why a segment, or a whole segmented message, was discarded in reassembly (docs/protocol.md
 * "Segmentation"). Each has a counter; names are what telemetry shows.
 */
enum dp_reasm_reason {
	DP_REASM_DUPLICATE,      /* a segment already in: ignored, the message goes on */
	DP_REASM_MISMATCH,       /* a header field differs from the message's first segment */
	DP_REASM_BAD_INDEX,      /* seg_index out of the message's range */
	DP_REASM_BAD_SLICE,      /* a slice of the wrong length, or below BW_SLICE_MIN */
	DP_REASM_BAD_TOTAL,      /* total_body_len cannot be cut into seg_count such slices */
	DP_REASM_TOO_LARGE,      /* total_body_len above the cap: answered RESOURCE_EXHAUSTED */
	DP_REASM_TABLE_FULL,     /* no free message entry: RESOURCE_EXHAUSTED */
	DP_REASM_NO_ROOM,        /* the lcore's reassembly mbufs are taken: RESOURCE_EXHAUSTED */
	DP_REASM_REFUSED,        /* the model or priority is wrong: answered after the first segment */
	DP_REASM_TIMEOUT,        /* incomplete when its clock ran out (no deadline): dropped */
	DP_REASM_DEADLINE,       /* incomplete at its deadline: answered DEADLINE_EXCEEDED */
	DP_REASM_DEAD_SEGMENT,   /* a segment of a message already discarded or answered */
	DP_REASM_EVICTED,        /* a dead entry given up early: the table was full and a message needed it */
	DP_REASM_REASON_COUNT
};

/** Telemetry name of a reassembly discard reason ("mismatch"...). */
const char *dp_reasm_reason_name(enum dp_reasm_reason reason);

/** Telemetry name of a drop reason ("ip_bad_csum"...). */
const char *dp_drop_reason_name(enum dp_drop_reason reason);

/* Counters of one polling lcore: plain integers, written only by it, summed by telemetry. */
struct dp_lcore_stats {
	uint64_t rx_packets;
	uint64_t rx_bytes;
	uint64_t tx_packets;
	uint64_t tx_bytes;
	uint64_t arp_replies;
	uint64_t icmp_echo_replies;
	uint64_t requests;                         /* datagrams with a readable v1 header */
	uint64_t replies[BW_STATUS_COUNT];          /* replies by status */
	uint64_t drops[DP_DROP_COUNT];
	/* segmented messages */
	uint64_t segments_in;                      /* request datagrams with seg_count > 1 */
	uint64_t segments_out;                     /* reply datagrams of segmented replies */
	uint64_t messages_reassembled;             /* complete, handed on as one request */
	uint64_t reasm[DP_REASM_REASON_COUNT];     /* discards by reason */
	/* gauges: what reassembly holds now (segments and bytes of messages not yet whole) */
	uint64_t reasm_messages;
	uint64_t reasm_segments;
	uint64_t reasm_bytes;
	uint64_t held_messages;                    /* whole, with the model layer, on several mbufs */
	uint64_t held_mbufs;                       /* their request and reply mbufs */
	/* the model layer broke dp_model_ops.infer's contract: refused a request it had taken (left to
	 * it, not answered twice), or completed one with a reply larger than its datagram (INTERNAL) */
	uint64_t model_contract_errors;
	uint64_t auth[DP_AUTH_OUTCOME_COUNT];      /* requests by authentication outcome */
	uint64_t amplification_refused;            /* unsigned requests whose reply outgrew them:
						    * answered RESOURCE_EXHAUSTED instead */
	uint64_t held_requests;                    /* gauge: one-datagram requests the model layer holds */
	uint64_t held_refused;                     /* requests refused at held_max: RESOURCE_EXHAUSTED */
} __rte_cache_aligned;

/* IPv4 prefixes, host byte order, host bits zero. */
struct dp_prefix {
	uint32_t addr;
	uint8_t depth;
};

/* The sources allowed to reach the appliance, or one model: no prefixes allows every source. */
struct dp_allowlist {
	uint32_t count;
	struct dp_prefix prefixes[DP_ALLOW_MAX];
};

/**
 * Parses "any" (every source) or a comma-separated list of "A.B.C.D[/LEN]" (LEN 0..32, 32 when
 * left out; host bits zero).
 * \return 0, or -EINVAL with one line in err naming the element at fault.
 */
int dp_allowlist_parse(const char *text, struct dp_allowlist *list, char *err, size_t cap);

/** Writes list as dp_allowlist_parse reads it ("any" when empty). \return 0 or -ENOSPC. */
int dp_allowlist_format(const struct dp_allowlist *list, char *buf, size_t cap);

/**
 * Builds list's lookup table on socket_id, under a memzone name unique in the process; *out is
 * NULL for an empty list (every source). Read-only afterwards: any lcore may look it up.
 * \return 0 or a negative errno.
 */
int dp_allow_create(const struct dp_allowlist *list, const char *name, int socket_id, struct rte_lpm **out);

/** \return whether src (network byte order) may talk to what lpm guards; NULL allows every source. */
static inline bool dp_allowed(struct rte_lpm *lpm, rte_be32_t src)
{
	uint32_t next_hop;

	return lpm == NULL || rte_lpm_lookup(lpm, rte_be_to_cpu_32(src), &next_hop) == 0;
}

/* Authentication (docs/security.md): where the keys are and how requests are held to them. */
struct dp_auth_config {
	char key_file[DP_AUTH_PATH_MAX]; /* "": no keys (a request with a trailer is refused) */
	uint32_t window_ms;  /* an authenticated request_id (the client's clock, ns) is this close to ours */
	uint32_t overlap_s;  /* a key dropped from the file at a reload is accepted this long after */
	uint32_t flows;      /* per polling lcore: sources tracked for replays (rounded up to a power of 2) */
};

/* What the operator configures for the dataplane. Addresses in network byte order. */
struct dp_config {
	uint32_t ipv4_addr;
	uint16_t udp_port;      /* host byte order */
	uint16_t mtu;
	uint32_t tx_drain_us;
	uint16_t rx_desc;
	uint16_t tx_desc;
	uint32_t mbufs_held;    /* extra pool room for mbufs held in queued batches */
	uint32_t held_max;      /* per polling lcore: one-datagram requests the model layer may hold at
				 * once: its share of mbufs_held */
	uint32_t msg_max;       /* largest message body accepted (and reply sent), bytes */
	uint32_t reasm_msgs;    /* per polling lcore: segmented messages in reassembly or held */
	uint32_t reasm_mbufs;   /* per polling lcore: mbufs they may hold (0: dp_config_finalize derives) */
	uint32_t reasm_timeout_ms; /* the longest a message may take to arrive whole */
	uint32_t ping_max;      /* largest PING body, bytes (above one datagram: in segments) */
	uint32_t error_rate;    /* per polling lcore: error replies a second to requests refused on arrival */
	uint32_t icmp_rate;     /* per polling lcore: ICMP echo replies a second */
	uint32_t arp_rate;      /* per polling lcore: ARP replies a second */
	struct dp_allowlist allow; /* sources that get any answer (ARP, ICMP, requests); empty: all */
	struct dp_auth_config auth;
};

/** Fills the defaults (documented in --help and configs/). */
void dp_config_defaults(struct dp_config *cfg);

/** Datagrams a body of body_len bytes takes at this MTU, in full slices (1 when it fits one). */
uint32_t dp_msg_segments(const struct dp_config *cfg, uint64_t body_len);

/**
 * Derives what was left 0 (reasm_mbufs: the segments of two maximal requests) and checks that the
 * lcore can hold one maximal request and its reply. \return 0, or -EINVAL with one line in err.
 */
int dp_config_finalize(struct dp_config *cfg, char *err, size_t cap);

/* A segmented message held by the dataplane (dataplane/reasm.c); opaque to the model layer. */
struct dp_msg;
/*
 * A request with a valid header, handed to the model layer on the polling lcore that received it. Its
 * body is one datagram's (body holds all body_len bytes) or, for a segmented message, the pages of its
 * datagrams (body is then page 0 only). A tensor's data is set where its payload is contiguous at
 * body; otherwise its offset places it in pages.
 */
struct dp_request {
	struct rte_mbuf *mbuf;  /* the first segment's: its error replies and the reply's headers */
	struct bw_hdr *hdr;     /* the first segment's header; body_len there is its slice only */
	uint8_t *body;
	uint32_t body_len;      /* the whole message's */
	const struct bw_pages *pages; /* the body page by page, as long as the request is held; NULL
				       * for one datagram (body holds all of it) */
	struct dp_msg *msg;     /* the message (segmented, or given reply pages), or NULL: the model
				 * layer gives it back in dp_request_complete */
	uint16_t num_tensors;
	struct bw_tensor_view tensors[BW_MAX_TENSORS];
	uint64_t arrival_tsc;
	bool held;              /* set by infer: the model layer keeps the mbuf and replies later */
};

/*
 * The model layer as the dataplane sees it; the app wires runtime/ in. Called on the polling lcore, so
 * every function must keep the hot-path rules (no locks, syscalls, allocation).
 */
struct dp_model_ops {
	/** Resolves a model by id, or by name when id is BW_MODEL_ID_ANY. NULL when there is none. */
	const void *(*lookup)(void *ctx, uint32_t id, const char *name, uint32_t name_len);
	/** Priorities the model accepts (a request's must be below). */
	uint32_t (*priority_levels)(const void *model);
	/** Writes the MODEL_INFO body. \return its length or -EMSGSIZE. */
	int (*describe)(const void *model, uint8_t *buf, uint32_t cap);
	/** Whether src (network byte order) may use the model (optional: every source may); a request
	 * from any other source is dropped without a reply. */
	bool (*source_allowed)(const void *model, rte_be32_t src);
	/** Whether the model answers authenticated requests only (optional: it takes any). */
	bool (*auth_required)(const void *model);
	/** Largest request body the model takes, 0 for the server's msg_max (optional). */
	uint32_t (*request_max)(const void *model);
	/**
	 * Takes INFER to run; lcore is the polling lcore's dp_lcore.model_lcore (the model layer's own
	 * per-lcore state). On OK it has set req->held: it keeps req->mbuf, req->hdr and req->msg and
	 * answers through dp_request_complete on this same lcore, exactly once. The reply body goes at
	 * req->body (at most body_cap bytes; 0 for a segmented request), or into req->pages in place
	 * (the request's own datagrams: echo), or into the pages dp_request_reply_pages reserved. Any
	 * other status is answered at once, with msg as the reason.
	 */
	enum bw_status (*infer)(void *lcore, const void *model, struct dp_request *req, uint32_t body_cap, char *msg,
				size_t msg_cap);
	void *ctx;
};

/*
 * A rate limit on the polling lcore's TSC (the generic cell rate algorithm, a token bucket without
 * a division on the hot path): an event passes while its theoretical arrival time is within
 * tolerance of now, and moves it on by one interval. interval 0: no limit.
 */
struct dp_rate {
	uint64_t tat;
	uint64_t interval;  /* TSC ticks an event */
	uint64_t tolerance; /* ticks of burst: (burst - 1) intervals */
};

/** per_s events a second, bursts of per_s / 10 + 1, on a clock of hz ticks a second (0: no limit). */
void dp_rate_init(struct dp_rate *r, uint32_t per_s, uint64_t hz);

static inline bool dp_rate_allow(struct dp_rate *r, uint64_t now)
{
	uint64_t tat;

	if (r->interval == 0)
		return true;
	tat = r->tat > now ? r->tat : now;
	if (tat - now > r->tolerance)
		return false;
	r->tat = tat + r->interval;
	return true;
}

/* Everything one polling lcore owns. Cache-aligned; nobody else writes it. */
struct dp_lcore {
	/* read-mostly: set at init */
	unsigned int lcore_id;
	uint16_t port_id;
	uint16_t queue_id;
	bool tx_csum_offload;        /* port computes IPv4 and UDP checksums on TX */
	bool rx_csum_offload;        /* port reports checksum status on RX */
	struct rte_ether_addr mac;
	const struct dp_config *cfg;
	const struct dp_model_ops *models;
	struct rte_lpm *allow;       /* the global allowlist's table (shared, read-only); NULL: every source */
	struct dp_auth *auth;        /* the keys (shared; dp_auth_lcore_init); NULL: none */
	struct dp_auth_flows *auth_flows; /* this lcore's sources and their recent request_ids */
	void *model_lcore;           /* the model layer's state for this lcore: infer's first argument */
	struct rte_eth_dev_tx_buffer *tx_buffer;
	uint64_t tx_drain_tsc;       /* drain period in TSC ticks */
	/* written on every burst */
	uint64_t last_drain_tsc __rte_cache_aligned;
	uint64_t burst_tsc;          /* when the current RX burst arrived: requests' arrival time */
	uint32_t rx_body_len;        /* the datagram in hand: its bytes after the protocol header */
	rte_be32_t rx_src_addr;      /* the datagram in hand: its IPv4 source */
	rte_be16_t rx_src_port;      /* and its UDP source port */
	bool rx_authenticated;       /* and whether its trailer was verified */
	uint32_t rx_key_id;          /* under which key */
	struct dp_request request;   /* scratch for the request being handled */
	struct dp_lcore_stats stats;
	struct plat_poll_stats poll; /* the app's poll loop counts its iterations here */
	struct dp_reasm *reasm;      /* segmented messages: this lcore's tables (dataplane/reasm.c) */
	uint64_t reasm_scan_tsc;     /* the next expiry scan */
	/* replies a peer gets without being served: limited (dp_config's rates, by burst_tsc) */
	struct dp_rate error_rate, icmp_rate, arp_rate;
} __rte_cache_aligned;

/* A frame's fate after dp_packet_handle. */
enum dp_verdict {
	DP_VERDICT_DROP,  /* counted; the caller frees the mbuf */
	DP_VERDICT_REPLY, /* the mbuf now holds the reply; the caller transmits it */
	DP_VERDICT_HELD,  /* the model layer keeps the mbuf until dp_request_complete */
};

/**
 * Creates the mbuf pool of one NUMA socket for nb_queues RX/TX queue pairs polled from that socket,
 * its data room sized for cfg->mtu. \return the pool, or NULL with rte_errno set.
 */
struct rte_mempool *dp_pool_create(const struct dp_config *cfg, int socket_id, unsigned int nb_queues);

/** Data room of the pool's mbufs for an MTU: one mbuf holds any frame the port accepts. */
uint16_t dp_mbuf_data_room(uint16_t mtu);

/**
 * Configures and starts one port with nb_queues RX/TX queue pairs (RSS when more than one), MTU and
 * checksum offloads as the device offers. Queue q takes its mbufs from pools[q] and its rings are
 * allocated on queue_sockets[q]: the socket of the lcore that polls it.
 * \return 0 or a negative errno.
 */
int dp_port_init(uint16_t port_id, uint16_t nb_queues, const struct dp_config *cfg,
		 struct rte_mempool *const *pools, const int *queue_sockets);

/** Stops and closes a port. */
void dp_port_fini(uint16_t port_id);

/** Sets up one lcore's context for a queue of a started port. \return 0 or a negative errno. */
int dp_lcore_init(struct dp_lcore *lc, unsigned int lcore_id, uint16_t port_id, uint16_t queue_id, int socket_id,
		  const struct dp_config *cfg, const struct dp_model_ops *models);

void dp_lcore_fini(struct dp_lcore *lc);

/** Sets lc's rate limits from its configuration on a clock of hz ticks a second (dp_lcore_init: the TSC). */
void dp_lcore_rates_init(struct dp_lcore *lc, uint64_t hz);

/* The keys and the clock authenticated requests are checked against: one for every polling lcore. */
struct dp_auth;

/**
 * Loads cfg->key_file (refused unless a regular file that only its owner, root or this user, can
 * read or write) and starts the wall clock the request_ids are checked against.
 * \return 0, or a negative errno with one line in err (the file and line at fault).
 */
int dp_auth_create(const struct dp_auth_config *cfg, struct dp_auth **out, char *err, size_t cap);

/**
 * Reads the key file again, on a control thread: its keys are accepted from now on, and keys no
 * longer in it (or whose secret changed) for overlap_s more. The polling lcores switch between two
 * requests; the old table is freed once every one has moved on. A file that does not load changes
 * nothing. \return the number of keys accepted now, or a negative errno with one line in err.
 */
int dp_auth_reload(struct dp_auth *a, char *err, size_t cap);

/** Re-reads CLOCK_REALTIME against the TSC (a control thread, about once a second: NTP's steps
 * and the TSC's drift stay well inside the window). */
void dp_auth_clock_sync(struct dp_auth *a);

/** What /batchwire/auth shows: keys, reloads, the last reload's error. */
void dp_auth_telemetry(struct dp_auth *a, struct rte_tel_data *d);

/** Frees the keys (after every lcore stopped). */
void dp_auth_destroy(struct dp_auth *a);

/**
 * Gives lc the keys and its own table of cfg->auth.flows sources, on socket_id; the lcore must then
 * call dp_auth_lcore_online on its own thread before its first burst and dp_auth_lcore_offline
 * after its last (a reload waits for the lcores online). \return 0 or a negative errno.
 */
int dp_auth_lcore_init(struct dp_lcore *lc, struct dp_auth *a, int socket_id);
void dp_auth_lcore_online(struct dp_lcore *lc);
void dp_auth_lcore_offline(struct dp_lcore *lc);

/** Handles one received frame (tests call it directly). */
enum dp_verdict dp_packet_handle(struct dp_lcore *lc, struct rte_mbuf *m);

/**
 * Reserves reply pages for a held request's reply of reply_len body bytes (fresh mbufs from the
 * request's pool, one per reply datagram): for outputs that do not fit the request's own mbuf, or
 * must not overwrite its input. The request becomes a dp_msg (req->msg) if it was not one.
 * \param pages  out: where the reply body goes (the model layer writes all of it)
 * \return 0, -EMSGSIZE (above msg_max), -ENOSPC (no message entry) or -ENOBUFS (no mbufs)
 */
int dp_request_reply_pages(struct dp_lcore *lc, struct dp_request *req, uint32_t reply_len,
			   const struct bw_pages **pages);

/**
 * Whether an OK reply of reply_len body bytes to req would be larger than the request carried, req
 * being unsigned (docs/security.md, "no larger reply"): if so counts it (amplification_refused) and
 * says why in why; the model layer then refuses it RESOURCE_EXHAUSTED. Asked at admission, once the
 * reply's size is known and before the request takes a batch slot or reply pages, so that a forged
 * source costs no compute; dp_request_complete asks again of what was written.
 */
bool dp_request_amplifies(struct dp_lcore *lc, const struct dp_request *req, uint64_t reply_len, char *why,
			  size_t cap);

/**
 * Answers a request the model layer held (DP_VERDICT_HELD) and buffers the reply for TX: OK with
 * reply_len body bytes and reply_tensors tensors, or an error status with why (one datagram). The
 * body is where infer's contract put it: at the request's body (msg NULL), in the reply pages, or in
 * the request's pages in place. msg is the request's (req->msg). Only the lcore that received the
 * request may call it, once; every mbuf of the request is sent or freed.
 */
void dp_request_complete(struct dp_lcore *lc, struct rte_mbuf *m, struct bw_hdr *hdr, struct dp_msg *msg,
			 enum bw_status status, uint32_t reply_len, uint16_t reply_tensors, const char *why);

/** Poller: one RX burst, handled and buffered for TX. Argument: struct dp_lcore *. */
enum plat_poll_result dp_rx_poll(void *lcore);
/** Poller: flushes the TX buffer when the drain period has passed. */
enum plat_poll_result dp_tx_drain_poll(void *lcore);
/** Sends whatever is buffered now (shutdown). */
void dp_tx_flush(struct dp_lcore *lc);

/** (any thread) Draining: every PING reply from now on carries BW_FLAG_DRAINING (or no longer). */
void dp_draining_set(bool draining);

/**
 * Discards or answers the segmented messages whose clock ran out by now (the TX drain poller runs it
 * every DP_REASM_SCAN_US; tests call it with their own clock). \return how many.
 */
unsigned int dp_reasm_expire(struct dp_lcore *lc, uint64_t now);

/**
 * Sums the counters of count polling lcores into *sum and, unless poll is NULL, their poll loop
 * counts into *poll: what /batchwire/stats and the daemon's exit line show. Safe while they run (each
 * 64-bit counter is read whole, if a few packets behind).
 */
void dp_lcores_stats_sum(struct dp_lcore *const *lcores, unsigned int count, struct dp_lcore_stats *sum,
			 struct plat_poll_stats *poll);
/** \return the replies of every status in s. */
uint64_t dp_stats_replies_total(const struct dp_lcore_stats *s);
/** \return the drops of every reason in s. */
uint64_t dp_stats_drops_total(const struct dp_lcore_stats *s);

/** Adds the app's own keys (batching counters) to /batchwire/stats; runs on the telemetry thread. */
typedef void (*dp_telemetry_extra_fn)(struct rte_tel_data *dict);

/**
 * Registers /batchwire/stats and /batchwire/lcores with rte_telemetry over these lcore contexts.
 * \param extra  may be NULL
 * \return 0 or a negative errno.
 */
int dp_telemetry_register(struct dp_lcore *const *lcores, unsigned int count, dp_telemetry_extra_fn extra);

/** Registers /batchwire/auth and /batchwire/auth/reload over auth. \return 0 or a negative errno. */
int dp_telemetry_auth(struct dp_auth *auth);

/**
 * The mbuf pools /batchwire/stats reports (mbufs_total, mbufs_free: what is back in the pool and its
 * caches, so that a test or an operator sees whether anything is still held). Before the first read.
 */
void dp_telemetry_pools(struct rte_mempool *const *pools, unsigned int count);

#endif /* BW_DATAPLANE_H */
