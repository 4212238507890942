/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Source allowlists: the operator's IPv4 prefixes, parsed from the configuration and looked up per
 * frame in an rte_lpm (longest-prefix match, one or two memory reads). The tables are built before
 * the polling lcores start and only read afterwards, so every lcore shares them without a lock.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "defs.h"

/* One element: "A.B.C.D" or "A.B.C.D/LEN", with the host bits of the address zero. */
static int prefix_parse(const char *text, size_t len, struct dp_prefix *p, char *err, size_t cap)
{
	char addr[INET_ADDRSTRLEN + 4];
	const char *slash = memchr(text, '/', len);
	size_t addr_len = slash != NULL ? (size_t)(slash - text) : len;
	unsigned int depth = 32;
	struct in_addr in;

	if (addr_len == 0 || addr_len >= INET_ADDRSTRLEN) {
		snprintf(err, cap, "'%.*s' is not an IPv4 address", (int)len, text);
		return -EINVAL;
	}
	memcpy(addr, text, addr_len);
	addr[addr_len] = '\0';
	if (inet_pton(AF_INET, addr, &in) != 1) {
		snprintf(err, cap, "'%.*s' is not an IPv4 address", (int)len, text);
		return -EINVAL;
	}
	if (slash != NULL) {
		const char *d = slash + 1, *end = text + len;

		if (d == end || end - d > 2) {
			snprintf(err, cap, "'%.*s': the prefix length must be 0..32", (int)len, text);
			return -EINVAL;
		}
		depth = 0;
		for (; d < end; d++) {
			if (*d < '0' || *d > '9') {
				snprintf(err, cap, "'%.*s': the prefix length must be 0..32", (int)len, text);
				return -EINVAL;
			}
			depth = depth * 10 + (unsigned int)(*d - '0');
		}
		if (depth > 32) {
			snprintf(err, cap, "'%.*s': the prefix length must be 0..32", (int)len, text);
			return -EINVAL;
		}
	}
	p->addr = rte_be_to_cpu_32(in.s_addr);
	p->depth = (uint8_t)depth;
	uint32_t mask = depth == 0 ? 0 : ~0u << (32 - depth);
	if ((p->addr & ~mask) != 0) {
		struct in_addr net = { .s_addr = rte_cpu_to_be_32(p->addr & mask) };
		char buf[INET_ADDRSTRLEN];

		/* 10.1.2.3/8 is most likely a typo for a host or for 10.0.0.0/8: say which was read */
		inet_ntop(AF_INET, &net, buf, sizeof(buf));
		snprintf(err, cap, "'%.*s' has host bits set; the network is %s/%u", (int)len, text, buf, depth);
		return -EINVAL;
	}
	return 0;
}

int dp_allowlist_parse(const char *text, struct dp_allowlist *list, char *err, size_t cap)
{
	const char *p = text;

	list->count = 0;
	while (*p == ' ')
		p++;
	if (strcmp(p, "any") == 0)
		return 0;
	for (;;) {
		const char *end = p + strcspn(p, ",");
		const char *last = end;

		while (*p == ' ')
			p++;
		while (last > p && last[-1] == ' ')
			last--;
		if (last == p) {
			snprintf(err, cap, "empty element in '%s'", text);
			return -EINVAL;
		}
		if (list->count == DP_ALLOW_MAX) {
			snprintf(err, cap, "more than %u prefixes", DP_ALLOW_MAX);
			return -EINVAL;
		}
		if (prefix_parse(p, (size_t)(last - p), &list->prefixes[list->count], err, cap) != 0)
			return -EINVAL;
		list->count++;
		if (*end == '\0')
			return 0;
		p = end + 1;
	}
}

int dp_allowlist_format(const struct dp_allowlist *list, char *buf, size_t cap)
{
	size_t off = 0;

	if (cap == 0)
		return -ENOSPC;
	buf[0] = '\0';
	if (list->count == 0)
		return snprintf(buf, cap, "any") < (int)cap ? 0 : -ENOSPC;
	for (uint32_t i = 0; i < list->count; i++) {
		struct in_addr in = { .s_addr = rte_cpu_to_be_32(list->prefixes[i].addr) };
		char addr[INET_ADDRSTRLEN];
		int n;

		inet_ntop(AF_INET, &in, addr, sizeof(addr));
		n = snprintf(buf + off, cap - off, "%s%s/%u", i > 0 ? "," : "", addr, list->prefixes[i].depth);
		if (n < 0 || (size_t)n >= cap - off)
			return -ENOSPC;
		off += (size_t)n;
	}
	return 0;
}

int dp_allow_create(const struct dp_allowlist *list, const char *name, int socket_id, struct rte_lpm **out)
{
	struct rte_lpm_config conf = {
		.max_rules = list->count,
		/* prefixes longer than /24 take a tbl8 group each, at most */
		.number_tbl8s = list->count,
	};
	struct rte_lpm *lpm;

	*out = NULL;
	if (list->count == 0)
		return 0; /* every source */
	lpm = rte_lpm_create(name, socket_id, &conf);
	if (lpm == NULL)
		return -rte_errno;
	for (uint32_t i = 0; i < list->count; i++) {
		int ret = rte_lpm_add(lpm, list->prefixes[i].addr, list->prefixes[i].depth, 1);

		if (ret != 0) {
			rte_lpm_free(lpm);
			return ret;
		}
	}
	*out = lpm;
	return 0;
}
