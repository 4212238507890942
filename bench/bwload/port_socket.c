/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bwload over a kernel UDP socket: for hosts without DPDK, and as the reference a DPDK generator is
 * held against. One non-blocking socket, connected to the server when there is one (with several,
 * each datagram names its server); a burst is sendmmsg'd at once and received with recvmmsg, so
 * the kernel's per-call cost is paid per burst, not per datagram.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "port.h"

#define SOCKET_DGRAM_MAX 65536
#define SOCKET_BUF_BYTES (16 * 1024 * 1024)

struct load_port {
	int fd;
	unsigned int nb_tx;
	uint8_t *tx_buf[LOAD_BURST];
	uint32_t tx_len[LOAD_BURST];
	uint8_t tx_server[LOAD_BURST];   /* with several servers: each queued datagram's */
	unsigned int nb_servers, server; /* server: the next datagrams' */
	struct sockaddr_in servers[LOAD_SERVERS_MAX];
	uint8_t *rx_buf[LOAD_BURST];
	uint64_t foreign;
};

static void sockbuf_grow(int fd, int force_opt, int opt)
{
	int bytes = SOCKET_BUF_BYTES;

	if (setsockopt(fd, SOL_SOCKET, force_opt, &bytes, sizeof(bytes)) != 0)
		(void)setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof(bytes));
}

static void socket_close(struct load_port *p)
{
	if (p == NULL)
		return;
	if (p->fd >= 0)
		close(p->fd);
	for (unsigned int i = 0; i < LOAD_BURST; i++) {
		free(p->tx_buf[i]);
		free(p->rx_buf[i]);
	}
	free(p);
}

static int socket_open(struct load_port **out, const struct load_port_conf *conf, char *err, size_t cap)
{
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(conf->server_port),
				 .sin_addr.s_addr = conf->server_ip};
	struct load_port *p = calloc(1, sizeof(*p));
	int rc;

	if (p == NULL) {
		snprintf(err, cap, "out of memory");
		return -ENOMEM;
	}
	p->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_UDP);
	for (unsigned int i = 0; i < LOAD_BURST; i++) {
		p->tx_buf[i] = malloc(SOCKET_DGRAM_MAX);
		p->rx_buf[i] = malloc(SOCKET_DGRAM_MAX);
		if (p->tx_buf[i] == NULL || p->rx_buf[i] == NULL) {
			socket_close(p);
			snprintf(err, cap, "out of memory");
			return -ENOMEM;
		}
	}
	p->nb_servers = conf->nb_servers > 1 ? conf->nb_servers : 1;
	for (unsigned int i = 0; i < p->nb_servers; i++)
		p->servers[i] = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons(conf->server_port),
						     .sin_addr.s_addr = conf->nb_servers > 1 ? conf->servers_ip[i] : conf->server_ip};
	if (p->fd < 0 || (p->nb_servers == 1 && connect(p->fd, (const struct sockaddr *)&to, sizeof(to)) != 0)) {
		rc = -errno;
		snprintf(err, cap, "UDP socket to the server: %s", strerror(-rc));
		socket_close(p);
		return rc;
	}
	/* a segmented request leaves as a burst of hundreds of datagrams, and replies come back so */
	sockbuf_grow(p->fd, SO_SNDBUFFORCE, SO_SNDBUF);
	sockbuf_grow(p->fd, SO_RCVBUFFORCE, SO_RCVBUF);
	*out = p;
	return 0;
}

static uint8_t *socket_tx_slot(struct load_port *p, uint32_t cap)
{
	if (cap > SOCKET_DGRAM_MAX)
		return NULL;
	if (p->nb_tx == LOAD_BURST)
		return NULL; /* the caller flushes first */
	return p->tx_buf[p->nb_tx];
}

static void socket_tx_commit(struct load_port *p, uint32_t len)
{
	p->tx_server[p->nb_tx] = (uint8_t)p->server;
	p->tx_len[p->nb_tx++] = len;
}

static void socket_set_server(struct load_port *p, unsigned int i)
{
	p->server = i < p->nb_servers ? i : 0;
}

static unsigned int socket_tx_flush(struct load_port *p)
{
	struct mmsghdr msgs[LOAD_BURST];
	struct iovec iov[LOAD_BURST];
	unsigned int sent = 0;

	for (unsigned int i = 0; i < p->nb_tx; i++) {
		iov[i] = (struct iovec){p->tx_buf[i], p->tx_len[i]};
		msgs[i] = (struct mmsghdr){.msg_hdr = {.msg_iov = &iov[i], .msg_iovlen = 1}};
		if (p->nb_servers > 1) {
			msgs[i].msg_hdr.msg_name = &p->servers[p->tx_server[i]];
			msgs[i].msg_hdr.msg_namelen = sizeof(p->servers[0]);
		}
	}
	while (sent < p->nb_tx) {
		int n = sendmmsg(p->fd, msgs + sent, p->nb_tx - sent, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOBUFS)
			sent++; /* a pending ICMP error (ECONNREFUSED) is the server's answer to an earlier one: lost */
		else if (n <= 0)
			break; /* the socket buffer is full: the rest waits for the next flush */
		else
			sent += (unsigned int)n;
	}
	/* the buffers are reused in place: keep the unsent ones first, in order */
	for (unsigned int i = sent; i < p->nb_tx; i++) {
		uint8_t *b = p->tx_buf[i - sent];

		p->tx_buf[i - sent] = p->tx_buf[i];
		p->tx_buf[i] = b;
		p->tx_len[i - sent] = p->tx_len[i];
		p->tx_server[i - sent] = p->tx_server[i];
	}
	p->nb_tx -= sent;
	return p->nb_tx;
}

static void socket_rx(struct load_port *p, struct load_rx *rx)
{
	struct mmsghdr msgs[LOAD_BURST];
	struct iovec iov[LOAD_BURST];
	int n;

	for (unsigned int i = 0; i < LOAD_BURST; i++) {
		iov[i] = (struct iovec){p->rx_buf[i], SOCKET_DGRAM_MAX};
		msgs[i] = (struct mmsghdr){.msg_hdr = {.msg_iov = &iov[i], .msg_iovlen = 1}};
	}
	n = recvmmsg(p->fd, msgs, LOAD_BURST, MSG_DONTWAIT, NULL);
	rx->n = 0;
	for (int i = 0; i < n; i++) {
		if (msgs[i].msg_hdr.msg_flags & MSG_TRUNC) {
			p->foreign++;
			continue;
		}
		rx->payload[rx->n] = p->rx_buf[i];
		rx->len[rx->n++] = msgs[i].msg_len;
	}
}

static void socket_rx_done(struct load_port *p, struct load_rx *rx)
{
	(void)p;
	rx->n = 0;
}

static uint64_t socket_rx_foreign(const struct load_port *p)
{
	return p->foreign;
}

const struct load_port_ops load_port_socket = {
	.name = "socket",
	.open = socket_open,
	.tx_slot = socket_tx_slot,
	.tx_commit = socket_tx_commit,
	.tx_flush = socket_tx_flush,
	.rx = socket_rx,
	.rx_done = socket_rx_done,
	.rx_foreign = socket_rx_foreign,
	.set_server = socket_set_server,
	.close = socket_close,
};
