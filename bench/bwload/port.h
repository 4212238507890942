/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Where bwload's datagrams go: a DPDK port (memif, af_packet, a PCI NIC: port_dpdk.c, its own
 * Eth/IPv4/UDP) or a kernel UDP socket (port_socket.c, for hosts without DPDK). An engine is a
 * table; the load loop knows nothing else of either. Every call is non-blocking.
 */
#ifndef BW_LOAD_PORT_H
#define BW_LOAD_PORT_H

#include <stddef.h>
#include <stdint.h>

#define LOAD_BURST 32
#define LOAD_SERVERS_MAX 16 /* --server A,B,...: the socket port's servers */

struct load_port_conf {
	uint32_t server_ip;   /* network byte order: the (first) server */
	uint16_t server_port; /* host byte order */
	/* the socket port: every server (servers_ip[0] is server_ip), all on server_port */
	uint32_t servers_ip[LOAD_SERVERS_MAX];
	unsigned int nb_servers;
	uint32_t client_ip;   /* DPDK: our address (network byte order) */
	uint16_t client_port; /* host byte order: the first of src_ports */
	uint16_t src_ports;   /* source ports used in turn (RSS spreads them over the server's queues) */
	uint16_t dpdk_port;   /* DPDK port id */
	uint32_t mtu;
	uint32_t pool_mbufs;  /* DPDK: the mbuf pool */
	int udp_csum;         /* DPDK: compute UDP checksums (else 0, which RFC 768 allows) */
	int server_mac_set;   /* DPDK: server_mac given, no ARP (a peer that answers none: testpmd) */
	uint8_t server_mac[6];
};

/* Datagrams received in one burst: the UDP payloads, valid until the next recv. */
struct load_rx {
	unsigned int n;
	const uint8_t *payload[LOAD_BURST];
	uint32_t len[LOAD_BURST];
};

struct load_port;

struct load_port_ops {
	const char *name; /* "dpdk", "socket" */
	/** Opens the port (DPDK: after EAL; resolves the server's MAC). \return 0 or -errno, one line in err. */
	int (*open)(struct load_port **p, const struct load_port_conf *conf, char *err, size_t cap);
	/** Room for one UDP payload of up to cap bytes, to be filled then sent by tx_commit. NULL: none now. */
	uint8_t *(*tx_slot)(struct load_port *p, uint32_t cap);
	/** Queues the payload written in the last tx_slot (len bytes). */
	void (*tx_commit)(struct load_port *p, uint32_t len);
	/**
	 * Sends what is queued, as much as the port takes now; the rest stays queued, in order, for the
	 * next flush (a generator never drops its own datagrams: a full ring delays them, and the
	 * schedule's backlog shows as latency). \return the datagrams still queued.
	 */
	unsigned int (*tx_flush)(struct load_port *p);
	/** Receives up to LOAD_BURST datagrams for us (others are dropped and counted). */
	void (*rx)(struct load_port *p, struct load_rx *rx);
	/** Gives back the buffers of the last rx. */
	void (*rx_done)(struct load_port *p, struct load_rx *rx);
	/** The datagrams of the next request leave from the next source port (optional). */
	void (*next_flow)(struct load_port *p);
	/** The datagrams queued from now on go to server i of conf's servers (optional: one server). */
	void (*set_server)(struct load_port *p, unsigned int i);
	/** Frames dropped on receive because they were not ours (ARP, other ports...). */
	uint64_t (*rx_foreign)(const struct load_port *p);
	void (*close)(struct load_port *p);
};

extern const struct load_port_ops load_port_dpdk;
extern const struct load_port_ops load_port_socket;

#endif /* BW_LOAD_PORT_H */
