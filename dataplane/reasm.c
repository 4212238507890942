/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Segmented messages on the polling lcore that receives them (docs/protocol.md "Segmentation"):
 * reassembly keyed by (source IP, source port, request_id), the held message while the model layer
 * runs it, and its reply, in as many datagrams as it takes.
 *
 * Everything is a fixed table made at start-up, per lcore: message entries (a free list and a
 * chained hash), and slots for the mbufs messages hold, taken as one run per message from a bitmap
 * (first fit), so that page k of a message is slot base + k and finding it is an index. A segment
 * stays in its mbuf: the slot records the mbuf and where its slice starts. The first segment to arrive
 * fixes what every other must say (its header fields, the slice length, the last slice's); any
 * disagreement discards the whole message, which then stays as a dead entry, without mbufs, that
 * swallows its remaining segments until its clock runs out. The clock is the TSC: the message's
 * deadline, or DP_REASM_TIMEOUT_US.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <rte_malloc.h>

#include "defs.h"

#define SLOT_NONE UINT32_MAX
#define MSG_NONE UINT32_MAX

enum msg_state {
	MSG_FREE,
	MSG_FILLING, /* segments arriving */
	MSG_DEAD,    /* discarded or answered: swallows the rest of its segments until it expires */
	MSG_HELD,    /* whole (or a one-datagram request with reply pages): the model layer's */
};

struct dp_msg {
	/* key */
	uint64_t request_id;
	uint32_t src_ip;   /* network byte order */
	uint16_t src_port; /* network byte order */
	uint8_t state;     /* enum msg_state */
	uint32_t next;     /* the hash chain (FILLING, DEAD) or the free list */
	uint32_t index;
	struct bw_hdr first; /* the fields every segment must repeat */
	uint32_t slice;      /* every slice but the last */
	uint32_t last_len;
	uint32_t received;   /* distinct segments */
	uint64_t expire_tsc;
	uint32_t req_base;   /* slots of the request's mbufs: seg_count of them, SLOT_NONE when none */
	uint32_t req_count;
	uint32_t reply_base; /* slots of the reply's fresh mbufs, SLOT_NONE when the reply needs none */
	uint32_t reply_count;
	struct bw_pages pages; /* the request's body */
	struct bw_pages reply; /* the reply's, when it has pages of its own */
};

struct dp_reasm {
	struct dp_msg *msgs;
	uint32_t nb_msgs;
	uint32_t free_head;
	uint32_t *buckets;   /* heads of the hash chains */
	uint32_t bucket_mask;
	uint32_t nb_slots;
	uint32_t slots_free;
	struct rte_mbuf **slot_mbuf;
	uint8_t **slot_page;
	uint64_t *slot_used; /* bit per slot */
	uint8_t prefix[DP_DESC_PREFIX_MAX]; /* a body's descriptors, when they cross a page */
};

static const char *const g_reasm_reason_names[DP_REASM_REASON_COUNT] = {
	[DP_REASM_DUPLICATE] = "duplicate",
	[DP_REASM_MISMATCH] = "mismatch",
	[DP_REASM_BAD_INDEX] = "bad_index",
	[DP_REASM_BAD_SLICE] = "bad_slice",
	[DP_REASM_BAD_TOTAL] = "bad_total",
	[DP_REASM_TOO_LARGE] = "too_large",
	[DP_REASM_TABLE_FULL] = "table_full",
	[DP_REASM_NO_ROOM] = "no_room",
	[DP_REASM_REFUSED] = "refused",
	[DP_REASM_TIMEOUT] = "timeout",
	[DP_REASM_DEADLINE] = "deadline",
	[DP_REASM_DEAD_SEGMENT] = "dead_segment",
};

const char *dp_reasm_reason_name(enum dp_reasm_reason reason)
{
	return (unsigned int)reason < DP_REASM_REASON_COUNT ? g_reasm_reason_names[reason] : "unknown";
}

/* ---- slots: one run per message, first fit in a bitmap ----------------------------------------- */

static bool slot_used(const struct dp_reasm *r, uint32_t s)
{
	return (r->slot_used[s / 64] >> (s % 64)) & 1;
}

static void slots_mark(struct dp_reasm *r, uint32_t base, uint32_t n, bool used)
{
	for (uint32_t s = base; s < base + n; s++) {
		if (used)
			r->slot_used[s / 64] |= UINT64_C(1) << (s % 64);
		else
			r->slot_used[s / 64] &= ~(UINT64_C(1) << (s % 64));
	}
	r->slots_free = used ? r->slots_free - n : r->slots_free + n;
}

/* \return the first slot of a free run of n, or SLOT_NONE. Whole words are skipped at once. */
static uint32_t slots_take(struct dp_reasm *r, uint32_t n)
{
	uint32_t run = 0, start = 0, s = 0;

	if (n == 0 || n > r->slots_free)
		return SLOT_NONE;
	while (s < r->nb_slots) {
		uint64_t word = r->slot_used[s / 64];

		if (s % 64 == 0 && word == UINT64_MAX) {
			run = 0;
			s += 64;
			continue;
		}
		if (s % 64 == 0 && word == 0 && s + 64 <= r->nb_slots) {
			if (run == 0)
				start = s;
			run += 64;
			s += 64;
		} else if (slot_used(r, s)) {
			run = 0;
			s++;
			continue;
		} else {
			if (run == 0)
				start = s;
			run++;
			s++;
		}
		if (run >= n) {
			slots_mark(r, start, n, true);
			for (uint32_t k = start; k < start + n; k++)
				r->slot_mbuf[k] = NULL;
			return start;
		}
	}
	return SLOT_NONE;
}

/* Frees the mbufs still in a run and gives the run back. */
static void slots_release(struct dp_reasm *r, uint32_t base, uint32_t n)
{
	if (base == SLOT_NONE)
		return;
	for (uint32_t k = base; k < base + n; k++) {
		if (r->slot_mbuf[k] != NULL)
			rte_pktmbuf_free(r->slot_mbuf[k]);
		r->slot_mbuf[k] = NULL;
	}
	slots_mark(r, base, n, false);
}

/* ---- message entries --------------------------------------------------------------------------- */

static uint32_t key_bucket(const struct dp_reasm *r, uint32_t ip, uint16_t port, uint64_t request_id)
{
	uint64_t h = (request_id ^ ((uint64_t)ip << 16 | port)) * UINT64_C(0x9e3779b97f4a7c15);

	return (uint32_t)(h >> 32) & r->bucket_mask;
}

static struct dp_msg *msg_find(struct dp_reasm *r, uint32_t ip, uint16_t port, uint64_t request_id)
{
	for (uint32_t i = r->buckets[key_bucket(r, ip, port, request_id)]; i != MSG_NONE; i = r->msgs[i].next) {
		struct dp_msg *m = &r->msgs[i];

		if (m->request_id == request_id && m->src_ip == ip && m->src_port == port)
			return m;
	}
	return NULL;
}

static struct dp_msg *msg_take(struct dp_reasm *r)
{
	struct dp_msg *m;

	if (r->free_head == MSG_NONE)
		return NULL;
	m = &r->msgs[r->free_head];
	r->free_head = m->next;
	m->next = MSG_NONE;
	m->req_base = SLOT_NONE;
	m->req_count = 0;
	m->reply_base = SLOT_NONE;
	m->reply_count = 0;
	m->received = 0;
	m->reply.nb_pages = 0;
	return m;
}

static void msg_hash_add(struct dp_reasm *r, struct dp_msg *m)
{
	uint32_t b = key_bucket(r, m->src_ip, m->src_port, m->request_id);

	m->next = r->buckets[b];
	r->buckets[b] = m->index;
}

static void msg_hash_del(struct dp_reasm *r, struct dp_msg *m)
{
	uint32_t *link = &r->buckets[key_bucket(r, m->src_ip, m->src_port, m->request_id)];

	while (*link != MSG_NONE && *link != m->index)
		link = &r->msgs[*link].next;
	if (*link == m->index)
		*link = m->next;
	m->next = MSG_NONE;
}

/* What a message in reassembly counts in the gauges. */
static void gauges_filling(struct dp_lcore *lc, const struct dp_msg *m, int sign)
{
	uint64_t bytes = 0;

	for (uint32_t k = 0; k < m->req_count && m->req_base != SLOT_NONE; k++)
		if (lc->reasm->slot_mbuf[m->req_base + k] != NULL)
			bytes += k + 1 == m->req_count ? m->last_len : m->slice;
	lc->stats.reasm_messages += (uint64_t)sign;
	lc->stats.reasm_segments += (uint64_t)sign * m->received;
	lc->stats.reasm_bytes += (uint64_t)sign * bytes;
}

static void gauges_held(struct dp_lcore *lc, const struct dp_msg *m, int sign)
{
	lc->stats.held_messages += (uint64_t)sign;
	lc->stats.held_mbufs += (uint64_t)sign * (m->req_count + m->reply_count);
}

/* Leaves the table: every mbuf still held freed, the entry back on the free list. */
static void msg_free(struct dp_reasm *r, struct dp_msg *m)
{
	if (m->state == MSG_FILLING || m->state == MSG_DEAD)
		msg_hash_del(r, m);
	slots_release(r, m->req_base, m->req_count);
	slots_release(r, m->reply_base, m->reply_count);
	m->req_base = m->reply_base = SLOT_NONE;
	m->state = MSG_FREE;
	m->next = r->free_head;
	r->free_head = m->index;
}

/* Discarded while filling: its mbufs go, its key stays (DEAD) to swallow what is still coming. */
static void msg_kill(struct dp_lcore *lc, struct dp_msg *m, enum dp_reasm_reason reason)
{
	struct dp_reasm *r = lc->reasm;

	lc->stats.reasm[reason]++;
	if (m->state == MSG_FILLING)
		gauges_filling(lc, m, -1);
	slots_release(r, m->req_base, m->req_count);
	m->req_base = SLOT_NONE;
	m->req_count = 0;
	m->state = MSG_DEAD;
}

/* ---- create, destroy ---------------------------------------------------------------------------- */

int dp_reasm_create(struct dp_lcore *lc, int socket_id)
{
	const struct dp_config *cfg = lc->cfg;
	struct dp_reasm *r;
	uint32_t nb_buckets = rte_align32pow2(cfg->reasm_msgs * 2);

	if (cfg->reasm_msgs == 0 || cfg->reasm_msgs > DP_REASM_MSGS_MAX)
		return -EINVAL;
	r = rte_zmalloc_socket("dp_reasm", sizeof(*r), RTE_CACHE_LINE_SIZE, socket_id);
	if (r == NULL)
		return -ENOMEM;
	r->nb_msgs = cfg->reasm_msgs;
	r->nb_slots = dp_reasm_mbufs(cfg);
	r->slots_free = r->nb_slots;
	r->bucket_mask = nb_buckets - 1;
	r->msgs = rte_zmalloc_socket("dp_reasm_msgs", sizeof(r->msgs[0]) * r->nb_msgs, RTE_CACHE_LINE_SIZE, socket_id);
	r->buckets = rte_malloc_socket("dp_reasm_buckets", sizeof(r->buckets[0]) * nb_buckets, 0, socket_id);
	r->slot_mbuf = rte_zmalloc_socket("dp_reasm_mbufs", sizeof(r->slot_mbuf[0]) * r->nb_slots, 0, socket_id);
	r->slot_page = rte_zmalloc_socket("dp_reasm_pages", sizeof(r->slot_page[0]) * r->nb_slots, 0, socket_id);
	r->slot_used = rte_zmalloc_socket("dp_reasm_used", sizeof(uint64_t) * ((r->nb_slots + 63) / 64), 0,
					  socket_id);
	lc->reasm = r;
	if (r->msgs == NULL || r->buckets == NULL || r->slot_mbuf == NULL || r->slot_page == NULL ||
	    r->slot_used == NULL) {
		dp_reasm_destroy(lc);
		return -ENOMEM;
	}
	for (uint32_t b = 0; b < nb_buckets; b++)
		r->buckets[b] = MSG_NONE;
	for (uint32_t i = 0; i < r->nb_msgs; i++) {
		r->msgs[i].index = i;
		r->msgs[i].state = MSG_FREE;
		r->msgs[i].next = i + 1 < r->nb_msgs ? i + 1 : MSG_NONE;
		r->msgs[i].req_base = r->msgs[i].reply_base = SLOT_NONE;
	}
	r->free_head = 0;
	return 0;
}

void dp_reasm_destroy(struct dp_lcore *lc)
{
	struct dp_reasm *r = lc->reasm;

	if (r == NULL)
		return;
	if (r->msgs != NULL && r->slot_mbuf != NULL && r->slot_used != NULL) {
		for (uint32_t i = 0; i < r->nb_msgs; i++)
			if (r->msgs[i].state != MSG_FREE)
				msg_free(r, &r->msgs[i]);
	}
	rte_free(r->msgs);
	rte_free(r->buckets);
	rte_free(r->slot_mbuf);
	rte_free(r->slot_page);
	rte_free(r->slot_used);
	rte_free(r);
	lc->reasm = NULL;
}

/* ---- segments in -------------------------------------------------------------------------------- */

/* The fields every segment of a message repeats (docs/protocol.md "Segmentation", rule 1). */
static bool hdr_same(const struct bw_hdr *a, const struct bw_hdr *b)
{
	return a->opcode == b->opcode && a->model_id == b->model_id && a->deadline_us == b->deadline_us &&
	       a->priority == b->priority && a->flags == b->flags && a->num_tensors == b->num_tensors &&
	       a->seg_count == b->seg_count && a->total_body_len == b->total_body_len;
}

/*
 * The slice length and the last slice's, from the first segment to arrive: a non-last segment gives
 * the slice, the last one gives what is left. \return false when total_body_len cannot be cut so.
 */
static bool slices_fix(struct dp_msg *m, const struct bw_hdr *hdr)
{
	uint64_t n = hdr->seg_count, total = hdr->total_body_len, slice, last;

	if (hdr->seg_index + 1u < hdr->seg_count) {
		slice = hdr->body_len;
		if (slice * (n - 1) >= total)
			return false;
		last = total - slice * (n - 1);
	} else {
		last = hdr->body_len;
		if (last == 0 || last > total || (total - last) % (n - 1) != 0)
			return false;
		slice = (total - last) / (n - 1);
	}
	if (last > slice)
		return false;
	m->slice = (uint32_t)slice;
	m->last_len = (uint32_t)last;
	return true;
}

/* An error reply to the segment in m (one datagram), counted by reason. */
static enum dp_verdict segment_refuse(struct dp_lcore *lc, struct rte_mbuf *m, struct bw_hdr *hdr,
				      enum dp_reasm_reason reason, enum bw_status status, const char *why)
{
	lc->stats.reasm[reason]++;
	return dp_refuse(lc, m, hdr, status, why);
}

/* A message's reassembly clock, from its first segment: its deadline, or DP_REASM_TIMEOUT_US. */
static uint64_t msg_clock(const struct bw_hdr *hdr)
{
	return plat_us_to_tsc(hdr->deadline_us != BW_DEADLINE_NONE ? hdr->deadline_us : DP_REASM_TIMEOUT_US);
}

/*
 * An entry for the message of a first segment, keyed and hashed, its clock started, DEAD (no mbufs)
 * until the caller gives it slots. Left DEAD, it remembers a message discarded or answered at its
 * first segment, so that its other segments are dropped until its clock runs out.
 * \return the entry, or NULL when none is free.
 */
static struct dp_msg *msg_open(struct dp_lcore *lc, const struct bw_hdr *hdr, uint32_t ip, uint16_t port)
{
	struct dp_reasm *r = lc->reasm;
	struct dp_msg *msg = msg_take(r);

	if (msg == NULL)
		return NULL;
	msg->request_id = hdr->request_id;
	msg->src_ip = ip;
	msg->src_port = port;
	msg->first = *hdr;
	msg->state = MSG_DEAD;
	msg->expire_tsc = lc->burst_tsc + msg_clock(hdr);
	msg_hash_add(r, msg);
	return msg;
}

/* A first segment: its entry, its slots, or a refusal in m. */
static enum dp_verdict msg_start(struct dp_lcore *lc, struct rte_mbuf *m, struct bw_hdr *hdr, uint32_t ip,
				 uint16_t port, uint32_t cap, enum bw_status refuse, const char *refuse_why,
				 struct dp_msg **out)
{
	struct dp_reasm *r = lc->reasm;
	enum dp_reasm_reason reason = refuse != BW_STATUS_OK ? DP_REASM_REFUSED : DP_REASM_TOO_LARGE;
	struct dp_msg *msg, probe;
	char why[DP_ERROR_MSG_MAX + 1];
	bool cut;

	*out = NULL;
	if (refuse != BW_STATUS_OK || hdr->total_body_len > cap) {
		/* Answered once: when it cannot be remembered, only its segment 0 is answered. */
		if (msg_open(lc, hdr, ip, port) == NULL && hdr->seg_index != 0) {
			lc->stats.reasm[reason]++;
			return dp_drop(lc, DP_DROP_SEGMENT);
		}
		if (refuse != BW_STATUS_OK)
			return segment_refuse(lc, m, hdr, reason, refuse, refuse_why);
		snprintf(why, sizeof(why), "message of %u bytes exceeds this server's %u-byte limit",
			 hdr->total_body_len, cap);
		return segment_refuse(lc, m, hdr, reason, BW_STATUS_RESOURCE_EXHAUSTED, why);
	}
	/* A segment that no well-formed message can have discards its message, unanswered; remembered,
	 * none of its other segments can start a message of its own (to be answered at its deadline). */
	cut = slices_fix(&probe, hdr);
	if (!cut || probe.slice < BW_SLICE_MIN) {
		lc->stats.reasm[cut ? DP_REASM_BAD_SLICE : DP_REASM_BAD_TOTAL]++;
		msg_open(lc, hdr, ip, port);
		return dp_drop(lc, DP_DROP_SEGMENT);
	}
	msg = msg_open(lc, hdr, ip, port);
	if (msg == NULL) {
		if (hdr->seg_index != 0) {
			lc->stats.reasm[DP_REASM_TABLE_FULL]++;
			return dp_drop(lc, DP_DROP_SEGMENT);
		}
		snprintf(why, sizeof(why), "this core is reassembling %u messages already: try again", r->nb_msgs);
		return segment_refuse(lc, m, hdr, DP_REASM_TABLE_FULL, BW_STATUS_RESOURCE_EXHAUSTED, why);
	}
	msg->slice = probe.slice;
	msg->last_len = probe.last_len;
	msg->req_base = slots_take(r, hdr->seg_count);
	if (msg->req_base == SLOT_NONE) {
		snprintf(why, sizeof(why), "this core holds too many segments already (%u of %u mbufs free): try again",
			 r->slots_free, r->nb_slots);
		return segment_refuse(lc, m, hdr, DP_REASM_NO_ROOM, BW_STATUS_RESOURCE_EXHAUSTED, why);
	}
	msg->req_count = hdr->seg_count;
	msg->state = MSG_FILLING;
	lc->stats.reasm_messages++;
	*out = msg;
	return DP_VERDICT_HELD;
}

enum dp_verdict dp_reasm_segment(struct dp_lcore *lc, struct rte_mbuf *m, struct bw_hdr *hdr, uint32_t cap,
				 enum bw_status refuse, const char *why, struct dp_msg **whole)
{
	struct dp_reasm *r = lc->reasm;
	const struct rte_ipv4_hdr *ip = rte_pktmbuf_mtod_offset(m, const struct rte_ipv4_hdr *, DP_L2_LEN);
	const struct rte_udp_hdr *udp = (const struct rte_udp_hdr *)((const uint8_t *)hdr - sizeof(*udp));
	struct dp_msg *msg;
	uint32_t slot, len;
	enum dp_verdict v;

	*whole = NULL;
	lc->stats.segments_in++;
	msg = msg_find(r, ip->src_addr, udp->src_port, hdr->request_id);
	if (msg == NULL) {
		v = msg_start(lc, m, hdr, ip->src_addr, udp->src_port, cap, refuse, why, &msg);
		if (msg == NULL)
			return v;
	} else if (msg->state == MSG_DEAD) {
		lc->stats.reasm[DP_REASM_DEAD_SEGMENT]++;
		return dp_drop(lc, DP_DROP_SEGMENT);
	} else if (!hdr_same(hdr, &msg->first)) {
		/* seg_count differing makes the index meaningless too: a mismatch, not a bad index */
		msg_kill(lc, msg, DP_REASM_MISMATCH);
		return dp_drop(lc, DP_DROP_SEGMENT);
	}
	if (hdr->seg_index >= msg->req_count) {
		msg_kill(lc, msg, DP_REASM_BAD_INDEX);
		return dp_drop(lc, DP_DROP_SEGMENT);
	}
	len = hdr->seg_index + 1u == msg->req_count ? msg->last_len : msg->slice;
	if (hdr->body_len != len) {
		msg_kill(lc, msg, DP_REASM_BAD_SLICE);
		return dp_drop(lc, DP_DROP_SEGMENT);
	}
	slot = msg->req_base + hdr->seg_index;
	if (r->slot_mbuf[slot] != NULL) {
		lc->stats.reasm[DP_REASM_DUPLICATE]++;
		return dp_drop(lc, DP_DROP_SEGMENT);
	}
	r->slot_mbuf[slot] = m;
	r->slot_page[slot] = (uint8_t *)(hdr + 1);
	msg->received++;
	lc->stats.reasm_segments++;
	lc->stats.reasm_bytes += len;
	if (msg->received < msg->req_count)
		return DP_VERDICT_HELD;

	/* whole: out of the hash (a retry of the same request_id is a new message), the model layer's */
	gauges_filling(lc, msg, -1);
	msg_hash_del(r, msg);
	msg->state = MSG_HELD;
	msg->pages = (struct bw_pages){&r->slot_page[msg->req_base], msg->slice, msg->req_count};
	gauges_held(lc, msg, +1);
	lc->stats.messages_reassembled++;
	*whole = msg;
	return DP_VERDICT_HELD;
}

void dp_msg_request(struct dp_lcore *lc, struct dp_msg *msg, struct dp_request *req)
{
	struct dp_reasm *r = lc->reasm;

	req->mbuf = r->slot_mbuf[msg->req_base];
	req->hdr = (struct bw_hdr *)(r->slot_page[msg->req_base] - sizeof(struct bw_hdr));
	req->body = r->slot_page[msg->req_base];
	req->body_len = msg->first.total_body_len;
	req->pages = &msg->pages;
	req->msg = msg;
}

const uint8_t *dp_msg_prefix(struct dp_lcore *lc, const struct dp_msg *msg, uint32_t *len)
{
	struct dp_reasm *r = lc->reasm;
	struct bw_segment body = {NULL, RTE_MIN(msg->first.total_body_len, (uint32_t)DP_DESC_PREFIX_MAX), 0,
				  &msg->pages};

	bw_segment_read(&body, r->prefix);
	*len = body.len;
	return r->prefix;
}

/* ---- replies ------------------------------------------------------------------------------------ */

int dp_request_reply_pages(struct dp_lcore *lc, struct dp_request *req, uint32_t reply_len,
			   const struct bw_pages **pages)
{
	struct dp_reasm *r = lc->reasm;
	struct dp_msg *msg = req->msg;
	uint32_t page_len = dp_udp_payload_max(lc) - (uint32_t)sizeof(struct bw_hdr);
	uint32_t n = (reply_len + page_len - 1) / page_len, base;
	struct rte_mbuf **mbufs;

	if (reply_len > lc->cfg->msg_max || n > BW_SEG_COUNT_MAX)
		return -EMSGSIZE;
	if (n == 0)
		n = 1;
	if (msg != NULL && msg->reply_count != 0)
		return -EALREADY;
	if (msg == NULL) {
		/* a one-datagram request becomes a message: its one mbuf in a slot of its own */
		msg = msg_take(r);
		if (msg == NULL)
			return -ENOSPC;
		msg->req_base = slots_take(r, 1);
		if (msg->req_base == SLOT_NONE) {
			msg_free(r, msg);
			return -ENOBUFS;
		}
		msg->req_count = 1;
		msg->first = *req->hdr;
		msg->slice = msg->last_len = req->body_len;
		r->slot_mbuf[msg->req_base] = req->mbuf;
		r->slot_page[msg->req_base] = req->body;
		msg->pages = (struct bw_pages){&r->slot_page[msg->req_base], RTE_MAX(req->body_len, 1u), 1};
		msg->state = MSG_HELD;
	} else {
		gauges_held(lc, msg, -1);
	}
	base = slots_take(r, n);
	mbufs = base != SLOT_NONE ? &r->slot_mbuf[base] : NULL;
	if (base == SLOT_NONE || rte_pktmbuf_alloc_bulk(req->mbuf->pool, mbufs, n) != 0) {
		if (base != SLOT_NONE) {
			memset(mbufs, 0, n * sizeof(mbufs[0]));
			slots_mark(r, base, n, false);
		}
		if (req->msg == NULL) { /* undone: the request is one datagram again, still the caller's */
			r->slot_mbuf[msg->req_base] = NULL;
			msg_free(r, msg);
		} else {
			gauges_held(lc, msg, +1);
		}
		return -ENOBUFS;
	}
	for (uint32_t k = 0; k < n; k++)
		r->slot_page[base + k] = rte_pktmbuf_mtod(mbufs[k], uint8_t *) + DP_UDP_HDRS_LEN + sizeof(struct bw_hdr);
	msg->reply_base = base;
	msg->reply_count = n;
	msg->reply = (struct bw_pages){&r->slot_page[base], page_len, n};
	gauges_held(lc, msg, +1);
	req->msg = msg;
	*pages = &msg->reply;
	return 0;
}

/* Reply segment k (of count, slice bytes of body_len) in mbuf m, whose body is at page: its header
 * from the request's, turned into a reply, and the frame finished. */
static void segment_finish(struct dp_lcore *lc, struct rte_mbuf *m, uint8_t *page, const struct bw_hdr *req_hdr,
			   uint16_t k, uint16_t count, uint32_t slice, uint32_t total, uint16_t num_tensors)
{
	struct bw_hdr *hdr = (struct bw_hdr *)(page - sizeof(*hdr));

	*hdr = *req_hdr; /* a fresh mbuf has none; the request's own segments differ in theirs */
	hdr->version = BW_PROTO_VERSION;
	hdr->opcode |= BW_OP_REPLY;
	hdr->status = BW_STATUS_OK;
	hdr->flags = dp_reply_flags(hdr->opcode);
	hdr->num_tensors = num_tensors;
	hdr->seg_index = k;
	hdr->seg_count = count;
	hdr->total_body_len = total;
	hdr->body_len = k + 1u < count ? slice : total - slice * (count - 1u);
	dp_ipv4_reply_finish(lc, m, (uint32_t)sizeof(struct rte_udp_hdr) + (uint32_t)sizeof(*hdr) + hdr->body_len);
}

/* A fresh mbuf gets the request's Eth/IPv4/UDP headers (the request direction: reply_finish turns
 * them around), without IP options. */
static void headers_copy(struct rte_mbuf *dst, const struct rte_mbuf *req)
{
	const uint8_t *src = rte_pktmbuf_mtod(req, const uint8_t *);
	const struct rte_ipv4_hdr *ip = (const struct rte_ipv4_hdr *)(src + DP_L2_LEN);
	uint8_t *d = rte_pktmbuf_mtod(dst, uint8_t *);
	struct rte_ipv4_hdr *dip = (struct rte_ipv4_hdr *)(d + DP_L2_LEN);

	memcpy(d, src, DP_L2_LEN + DP_L3_LEN);
	dip->version_ihl = RTE_IPV4_VHL_DEF;
	memcpy(d + DP_L2_LEN + DP_L3_LEN, src + DP_L2_LEN + rte_ipv4_hdr_len(ip), sizeof(struct rte_udp_hdr));
	dst->data_len = (uint16_t)DP_UDP_HDRS_LEN;
	dst->pkt_len = DP_UDP_HDRS_LEN;
}

/* Sends the reply of a held message whole and frees the message: every mbuf sent or freed. */
static void msg_reply_send(struct dp_lcore *lc, struct dp_msg *msg, struct rte_mbuf *m, struct bw_hdr *hdr,
			   uint32_t reply_len, uint16_t num_tensors)
{
	struct dp_reasm *r = lc->reasm;
	bool own = msg->reply_count != 0; /* pages of its own, or the request's in place */
	uint32_t base = own ? msg->reply_base : msg->req_base;
	uint32_t slice = own ? msg->reply.page_len : msg->pages.page_len;
	uint32_t have = own ? msg->reply_count : msg->req_count;
	uint32_t count = reply_len == 0 ? 1 : (reply_len + slice - 1) / slice;
	struct bw_hdr req_hdr = *hdr;

	if (unlikely(count > have || count > BW_SEG_COUNT_MAX)) {
		/* the model layer wrote more than it had room for: nothing half-sent */
		dp_error_reply(lc, m, hdr, BW_STATUS_INTERNAL, "the reply is larger than the room reserved for it");
		dp_tx_enqueue(lc, m);
		if (r->slot_mbuf[msg->req_base] == m)
			r->slot_mbuf[msg->req_base] = NULL;
		gauges_held(lc, msg, -1);
		msg_free(r, msg);
		return;
	}
	req_hdr.opcode &= (uint8_t)~BW_OP_REPLY;
	for (uint32_t k = 0; k < count; k++) {
		struct rte_mbuf *seg = r->slot_mbuf[base + k];

		if (own)
			headers_copy(seg, m);
		segment_finish(lc, seg, r->slot_page[base + k], &req_hdr, (uint16_t)k, (uint16_t)count, slice, reply_len,
			       num_tensors);
		r->slot_mbuf[base + k] = NULL;
		dp_tx_enqueue(lc, seg);
	}
	lc->stats.replies[BW_STATUS_OK]++;
	if (count > 1)
		lc->stats.segments_out += count;
	gauges_held(lc, msg, -1);
	msg_free(r, msg);
}

void dp_msg_complete(struct dp_lcore *lc, struct dp_msg *msg, struct rte_mbuf *m, struct bw_hdr *hdr,
		     enum bw_status status, uint32_t reply_len, uint16_t reply_tensors, const char *why)
{
	struct dp_reasm *r = lc->reasm;
	char text[DP_ERROR_MSG_MAX + 1];

	if (status == BW_STATUS_OK && dp_reply_amplifies(lc, m, hdr, reply_len, text, sizeof(text))) {
		status = BW_STATUS_RESOURCE_EXHAUSTED;
		why = text;
	}
	if (status == BW_STATUS_OK) {
		msg_reply_send(lc, msg, m, hdr, reply_len, reply_tensors);
		return;
	}
	/* an error is one datagram, in the first segment's mbuf; every other mbuf is freed */
	if (r->slot_mbuf[msg->req_base] == m)
		r->slot_mbuf[msg->req_base] = NULL;
	gauges_held(lc, msg, -1);
	msg_free(r, msg);
	dp_request_reply(lc, m, hdr, status, 0, 0, why);
	dp_tx_enqueue(lc, m);
}

/* ---- the clock ---------------------------------------------------------------------------------- */

unsigned int dp_reasm_expire(struct dp_lcore *lc, uint64_t now)
{
	struct dp_reasm *r = lc->reasm;
	unsigned int n = 0;

	for (uint32_t i = 0; i < r->nb_msgs; i++) {
		struct dp_msg *msg = &r->msgs[i];

		if ((msg->state != MSG_FILLING && msg->state != MSG_DEAD) || (int64_t)(now - msg->expire_tsc) < 0)
			continue;
		n++;
		if (msg->state == MSG_DEAD) {
			msg_free(r, msg);
			continue;
		}
		gauges_filling(lc, msg, -1);
		if (msg->first.deadline_us != BW_DEADLINE_NONE) {
			/* a request whose deadline ran out is answered, from one of the segments it has */
			struct rte_mbuf *m = NULL;
			uint32_t k;

			for (k = 0; k < msg->req_count && m == NULL; k++)
				m = r->slot_mbuf[msg->req_base + k];
			k--;
			r->slot_mbuf[msg->req_base + k] = NULL;
			lc->stats.reasm[DP_REASM_DEADLINE]++;
			dp_error_reply(lc, m, (struct bw_hdr *)(r->slot_page[msg->req_base + k] - sizeof(struct bw_hdr)),
				       BW_STATUS_DEADLINE_EXCEEDED, "the request's deadline passed before all its segments arrived");
			dp_tx_enqueue(lc, m);
		} else {
			lc->stats.reasm[DP_REASM_TIMEOUT]++;
		}
		msg->state = MSG_DEAD; /* msg_free unhashes it */
		msg_free(r, msg);
	}
	return n;
}
