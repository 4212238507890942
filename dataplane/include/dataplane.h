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
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_telemetry.h>

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

/* Why a frame was dropped. Each has a counter; names are what telemetry shows. */
enum dp_drop_reason {
	DP_DROP_ETH_TRUNCATED,     /* shorter than an Ethernet header */
	DP_DROP_ETH_WRONG_DST,     /* unicast to another MAC */
	DP_DROP_ETH_UNKNOWN_TYPE,  /* neither ARP nor IPv4 (IPv6, VLAN, LLDP...) */
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
	DP_DROP_COUNT
};

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
} __rte_cache_aligned;

/* What the operator configures for the dataplane. Addresses in network byte order. */
struct dp_config {
	uint32_t ipv4_addr;
	uint16_t udp_port;      /* host byte order */
	uint16_t mtu;
	uint32_t tx_drain_us;
	uint16_t rx_desc;
	uint16_t tx_desc;
	uint32_t mbufs_held;    /* extra pool room for mbufs held in queued batches */
};

/** Fills the defaults (documented in --help and configs/). */
void dp_config_defaults(struct dp_config *cfg);

/* A request with a valid header, handed to the model layer on the polling lcore that received it. */
struct dp_request {
	struct rte_mbuf *mbuf;
	struct bw_hdr *hdr;
	uint8_t *body;          /* hdr->body_len bytes, inside the mbuf */
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
	/**
	 * Takes INFER to run; lcore is the polling lcore's dp_lcore.model_lcore (the model layer's own
	 * per-lcore state). On OK it has set req->held: it keeps req->mbuf and req->hdr and answers
	 * through dp_request_complete on this same lcore, exactly once, with a reply body of at most
	 * body_cap bytes at req->body (it may reuse the request's bytes in place). Any other status is
	 * answered at once, with msg as the reason.
	 */
	enum bw_status (*infer)(void *lcore, const void *model, struct dp_request *req, uint32_t body_cap, char *msg,
				size_t msg_cap);
	void *ctx;
};

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
	void *model_lcore;           /* the model layer's state for this lcore: infer's first argument */
	struct rte_eth_dev_tx_buffer *tx_buffer;
	uint64_t tx_drain_tsc;       /* drain period in TSC ticks */
	/* written on every burst */
	uint64_t last_drain_tsc __rte_cache_aligned;
	uint64_t burst_tsc;          /* when the current RX burst arrived: requests' arrival time */
	struct dp_request request;   /* scratch for the request being handled */
	struct dp_lcore_stats stats;
	struct plat_poll_stats poll; /* the app's poll loop counts its iterations here */
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

/** Handles one received frame (tests call it directly). */
enum dp_verdict dp_packet_handle(struct dp_lcore *lc, struct rte_mbuf *m);

/**
 * Answers a request the model layer held (DP_VERDICT_HELD): turns its mbuf into the reply (OK with
 * reply_len body bytes and reply_tensors tensors at the request's body, or an error status with msg)
 * and buffers it for TX. Only the lcore that received the request may call it, once.
 */
void dp_request_complete(struct dp_lcore *lc, struct rte_mbuf *m, struct bw_hdr *hdr, enum bw_status status,
			 uint32_t reply_len, uint16_t reply_tensors, const char *msg);

/** Poller: one RX burst, handled and buffered for TX. Argument: struct dp_lcore *. */
enum plat_poll_result dp_rx_poll(void *lcore);
/** Poller: flushes the TX buffer when the drain period has passed. */
enum plat_poll_result dp_tx_drain_poll(void *lcore);
/** Sends whatever is buffered now (shutdown). */
void dp_tx_flush(struct dp_lcore *lc);

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

#endif /* BW_DATAPLANE_H */
