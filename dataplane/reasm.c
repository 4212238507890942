/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Segmented messages on the polling lcore that receives them (docs/protocol.md "Segmentation"):
 * reassembly keyed by (source IP, source port, request_id), the held message while the model layer
 * runs it, and its reply, in as many datagrams as it takes.
 *
 * Everything is a fixed table made at start-up, per lcore: message entries (a free list and a chained
 * hash under a secret key, so that no sender can aim ids at one chain), the segments of messages still
 * filling (one per datagram that arrived, found by (message, seg_index) in an open-addressed table),
 * and pages for whole messages, taken as one run per message from a bitmap (first fit), so that page
 * k of a message is slot base + k and finding it is an index. A segment stays in its mbuf: the slot
 * records the mbuf and where its slice starts.
 *
 * What a stranger can hold, and for how long (docs/security.md): an mbuf is counted against the
 * lcore's budget (reassembly_mbufs) only when its datagram has arrived, so holding n mbufs takes
 * sending n datagrams; a message's run of pages is taken only once it is whole. Every entry's clock is
 * its deadline or reassembly_timeout_ms, whichever is sooner. The first segment to arrive fixes what
 * every other must say (its header fields, the slice length, the last slice's); any disagreement
 * discards the whole message, which then stays as a dead entry, without mbufs, that swallows its
 * remaining segments until its clock runs out, or until a new message needs its entry: a full table
 * gives up its oldest dead entry first. A segment that no well-formed message can have gets no entry.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <rte_malloc.h>

#include "defs.h"

#define SLOT_NONE UINT32_MAX
#define MSG_NONE UINT32_MAX
#define SEG_NONE UINT32_MAX

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
	bool deadline_clock; /* the clock is the request's deadline: answered DEADLINE_EXCEEDED at it */
	uint32_t next;     /* the hash chain (FILLING, DEAD) or the free list */
	uint32_t index;
	uint32_t dead_prev; /* DEAD: the list of dead entries, oldest first */
	uint32_t dead_next;
	struct bw_hdr first; /* the fields every segment must repeat */
	uint32_t slice;      /* every slice but the last */
	uint32_t last_len;
	uint32_t received;   /* distinct segments */
	uint64_t bytes;      /* their slices' bytes */
	uint32_t seg_head;   /* FILLING: the segments that arrived, a list through dp_seg.next */
	uint64_t expire_tsc;
	uint32_t req_base;   /* HELD: slots of the request's mbufs, req_count of them; SLOT_NONE when none */
	uint32_t req_count;
	uint32_t reply_base; /* slots of the reply's fresh mbufs, SLOT_NONE when the reply needs none */
	uint32_t reply_count;
	struct bw_pages pages; /* the request's body */
	struct bw_pages reply; /* the reply's, when it has pages of its own */
};

/* One datagram of a message still filling. */
struct dp_seg {
	struct rte_mbuf *mbuf;
	uint8_t *page;  /* its slice */
	uint32_t msg;   /* its message's index */
	uint32_t next;  /* the message's next segment, or the next free one */
	uint32_t home;  /* its position's hash in the segment table */
	uint16_t index; /* seg_index */
};

struct dp_reasm {
	struct plat_hash_key key; /* this lcore's secret: message buckets and segment positions */
	struct dp_msg *msgs;
	uint32_t nb_msgs;
	uint32_t free_head;
	uint32_t dead_head;  /* the oldest dead entry: the first a full table gives up */
	uint32_t dead_tail;
	uint32_t *buckets;   /* heads of the hash chains */
	uint32_t bucket_mask;
	uint64_t timeout_tsc; /* reassembly_timeout_ms: the longest clock of any entry */
	uint32_t nb_mbufs;   /* the budget: mbufs held in segments and pages at once */
	uint32_t mbufs_free;
	struct dp_seg *segs; /* nb_mbufs of them */
	uint32_t seg_free;
	uint32_t *seg_table; /* (message, seg_index) -> segment, open addressing, linear probing */
	uint32_t seg_mask;
	uint32_t nb_slots;   /* pages of whole messages and replies: runs */
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
	[DP_REASM_EVICTED] = "evicted",
};

const char *dp_reasm_reason_name(enum dp_reasm_reason reason)
{
	return (unsigned int)reason < DP_REASM_REASON_COUNT ? g_reasm_reason_names[reason] : "unknown";
}

/* ---- the budget: mbufs held, in segments and in pages ------------------------------------------ */

static bool budget_take(struct dp_reasm *r, uint32_t n)
{
	if (r->mbufs_free < n)
		return false;
	r->mbufs_free -= n;
	return true;
}

static void budget_give(struct dp_reasm *r, uint32_t n)
{
	r->mbufs_free += n;
}

/* ---- pages: one run per whole message, first fit in a bitmap ----------------------------------- */

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

/* Frees the mbufs still in a run and gives the run, and its n mbufs of budget, back. */
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
	budget_give(r, n);
}

/* ---- segments of messages still filling -------------------------------------------------------- */

static uint32_t seg_home(const struct dp_reasm *r, uint32_t msg, uint16_t index)
{
	uint64_t key = (uint64_t)msg << 16 | index;

	return (uint32_t)plat_siphash(&r->key, &key, sizeof(key));
}

/* \return the table position of segment index of msg, or SEG_NONE. */
static uint32_t seg_find(const struct dp_reasm *r, uint32_t msg, uint16_t index)
{
	for (uint32_t p = seg_home(r, msg, index) & r->seg_mask;; p = (p + 1) & r->seg_mask) {
		uint32_t s = r->seg_table[p];

		if (s == SEG_NONE)
			return SEG_NONE;
		if (r->segs[s].msg == msg && r->segs[s].index == index)
			return p;
	}
}

/* Empties position p, moving back the entries after it that probed past it (no tombstones). */
static void seg_table_del(struct dp_reasm *r, uint32_t p)
{
	uint32_t q = p;

	r->seg_table[p] = SEG_NONE;
	for (;;) {
		uint32_t s, home;

		q = (q + 1) & r->seg_mask;
		s = r->seg_table[q];
		if (s == SEG_NONE)
			return;
		home = r->segs[s].home & r->seg_mask;
		/* s stays where it is when its home lies cyclically in (p, q] */
		if (p <= q ? (home > p && home <= q) : (home > p || home <= q))
			continue;
		r->seg_table[p] = s;
		r->seg_table[q] = SEG_NONE;
		p = q;
	}
}

/* Keeps segment index of msg (its mbuf m, its slice at page); the caller took its budget. */
static void seg_add(struct dp_reasm *r, struct dp_msg *msg, uint16_t index, struct rte_mbuf *m, uint8_t *page)
{
	uint32_t s = r->seg_free, p;
	struct dp_seg *seg = &r->segs[s];

	r->seg_free = seg->next;
	seg->mbuf = m;
	seg->page = page;
	seg->msg = msg->index;
	seg->index = index;
	seg->home = seg_home(r, msg->index, index);
	seg->next = msg->seg_head;
	msg->seg_head = s;
	for (p = seg->home & r->seg_mask; r->seg_table[p] != SEG_NONE; p = (p + 1) & r->seg_mask)
		;
	r->seg_table[p] = s;
}

/* Takes a message's segments out of the table, one by one, each handed to fn (or its mbuf freed when
 * fn is NULL), their budget given back unless keep. */
static void segs_take(struct dp_reasm *r, struct dp_msg *msg, bool keep,
		      void (*fn)(struct dp_reasm *r, const struct dp_seg *seg, void *arg), void *arg)
{
	uint32_t s = msg->seg_head, n = 0;

	while (s != SEG_NONE) {
		struct dp_seg *seg = &r->segs[s];
		uint32_t next = seg->next;

		seg_table_del(r, seg_find(r, seg->msg, seg->index));
		if (fn != NULL)
			fn(r, seg, arg);
		else
			rte_pktmbuf_free(seg->mbuf);
		seg->mbuf = NULL;
		seg->next = r->seg_free;
		r->seg_free = s;
		s = next;
		n++;
	}
	msg->seg_head = SEG_NONE;
	if (!keep)
		budget_give(r, n);
}

/* ---- message entries --------------------------------------------------------------------------- */

static uint32_t key_bucket(const struct dp_reasm *r, uint32_t ip, uint16_t port, uint64_t request_id)
{
	struct {
		uint64_t request_id;
		uint32_t ip;
		uint32_t port;
	} key = {request_id, ip, port};

	return (uint32_t)plat_siphash(&r->key, &key, sizeof(key)) & r->bucket_mask;
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

static void dead_push(struct dp_reasm *r, struct dp_msg *m)
{
	m->dead_next = MSG_NONE;
	m->dead_prev = r->dead_tail;
	if (r->dead_tail != MSG_NONE)
		r->msgs[r->dead_tail].dead_next = m->index;
	else
		r->dead_head = m->index;
	r->dead_tail = m->index;
}

static void dead_unlink(struct dp_reasm *r, struct dp_msg *m)
{
	if (m->dead_prev != MSG_NONE)
		r->msgs[m->dead_prev].dead_next = m->dead_next;
	else
		r->dead_head = m->dead_next;
	if (m->dead_next != MSG_NONE)
		r->msgs[m->dead_next].dead_prev = m->dead_prev;
	else
		r->dead_tail = m->dead_prev;
	m->dead_prev = m->dead_next = MSG_NONE;
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
	lc->stats.reasm_messages += (uint64_t)sign;
	lc->stats.reasm_segments += (uint64_t)sign * m->received;
	lc->stats.reasm_bytes += (uint64_t)sign * m->bytes;
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
	if (m->state == MSG_DEAD)
		dead_unlink(r, m);
	segs_take(r, m, false, NULL, NULL);
	slots_release(r, m->req_base, m->req_count);
	slots_release(r, m->reply_base, m->reply_count);
	m->req_base = m->reply_base = SLOT_NONE;
	m->req_count = m->reply_count = 0;
	m->state = MSG_FREE;
	m->next = r->free_head;
	r->free_head = m->index;
}

/* A free entry, or the oldest dead one given up (counted); NULL when every entry is live. */
static struct dp_msg *msg_take(struct dp_lcore *lc)
{
	struct dp_reasm *r = lc->reasm;
	struct dp_msg *m;

	if (r->free_head == MSG_NONE && r->dead_head != MSG_NONE) {
		lc->stats.reasm[DP_REASM_EVICTED]++;
		msg_free(r, &r->msgs[r->dead_head]);
	}
	if (r->free_head == MSG_NONE)
		return NULL;
	m = &r->msgs[r->free_head];
	r->free_head = m->next;
	m->next = MSG_NONE;
	m->dead_prev = m->dead_next = MSG_NONE;
	m->seg_head = SEG_NONE;
	m->req_base = SLOT_NONE;
	m->req_count = 0;
	m->reply_base = SLOT_NONE;
	m->reply_count = 0;
	m->received = 0;
	m->bytes = 0;
	m->deadline_clock = false;
	m->reply.nb_pages = 0;
	return m;
}

/* Discarded while filling: its mbufs go, its key stays (DEAD) to swallow what is still coming. */
static void msg_kill(struct dp_lcore *lc, struct dp_msg *m, enum dp_reasm_reason reason)
{
	struct dp_reasm *r = lc->reasm;

	lc->stats.reasm[reason]++;
	if (m->state == MSG_FILLING)
		gauges_filling(lc, m, -1);
	segs_take(r, m, false, NULL, NULL);
	m->received = 0;
	m->bytes = 0;
	m->state = MSG_DEAD;
	dead_push(r, m);
}

/* ---- create, destroy ---------------------------------------------------------------------------- */

/* Pages for runs: twice the budget, so that a run of free pages is found while the budget allows it
 * (runs never hold more pages than the budget has mbufs: the rest is room against fragmentation). */
#define DP_REASM_PAGES_PER_MBUF 2

int dp_reasm_create(struct dp_lcore *lc, int socket_id)
{
	const struct dp_config *cfg = lc->cfg;
	struct dp_reasm *r;
	uint32_t nb_buckets = rte_align32pow2(cfg->reasm_msgs * 2), nb_positions;
	int ret;

	if (cfg->reasm_msgs == 0 || cfg->reasm_msgs > DP_REASM_MSGS_MAX)
		return -EINVAL;
	r = rte_zmalloc_socket("dp_reasm", sizeof(*r), RTE_CACHE_LINE_SIZE, socket_id);
	if (r == NULL)
		return -ENOMEM;
	lc->reasm = r;
	ret = plat_hash_key_random(&r->key);
	if (ret != 0) {
		dp_reasm_destroy(lc);
		return ret;
	}
	r->nb_msgs = cfg->reasm_msgs;
	r->nb_mbufs = dp_reasm_mbufs(cfg);
	r->mbufs_free = r->nb_mbufs;
	r->timeout_tsc = plat_us_to_tsc((uint64_t)cfg->reasm_timeout_ms * 1000);
	r->nb_slots = r->nb_mbufs * DP_REASM_PAGES_PER_MBUF;
	r->slots_free = r->nb_slots;
	r->bucket_mask = nb_buckets - 1;
	nb_positions = rte_align32pow2(r->nb_mbufs * 2); /* at most half full: short probes */
	r->seg_mask = nb_positions - 1;
	r->msgs = rte_zmalloc_socket("dp_reasm_msgs", sizeof(r->msgs[0]) * r->nb_msgs, RTE_CACHE_LINE_SIZE, socket_id);
	r->buckets = rte_malloc_socket("dp_reasm_buckets", sizeof(r->buckets[0]) * nb_buckets, 0, socket_id);
	r->segs = rte_zmalloc_socket("dp_reasm_segs", sizeof(r->segs[0]) * r->nb_mbufs, 0, socket_id);
	r->seg_table = rte_malloc_socket("dp_reasm_seg_table", sizeof(r->seg_table[0]) * nb_positions, 0, socket_id);
	r->slot_mbuf = rte_zmalloc_socket("dp_reasm_mbufs", sizeof(r->slot_mbuf[0]) * r->nb_slots, 0, socket_id);
	r->slot_page = rte_zmalloc_socket("dp_reasm_pages", sizeof(r->slot_page[0]) * r->nb_slots, 0, socket_id);
	r->slot_used = rte_zmalloc_socket("dp_reasm_used", sizeof(uint64_t) * ((r->nb_slots + 63) / 64), 0,
					  socket_id);
	if (r->msgs == NULL || r->buckets == NULL || r->segs == NULL || r->seg_table == NULL || r->slot_mbuf == NULL ||
	    r->slot_page == NULL || r->slot_used == NULL) {
		dp_reasm_destroy(lc);
		return -ENOMEM;
	}
	for (uint32_t b = 0; b < nb_buckets; b++)
		r->buckets[b] = MSG_NONE;
	for (uint32_t p = 0; p < nb_positions; p++)
		r->seg_table[p] = SEG_NONE;
	for (uint32_t s = 0; s < r->nb_mbufs; s++)
		r->segs[s].next = s + 1 < r->nb_mbufs ? s + 1 : SEG_NONE;
	r->seg_free = 0;
	for (uint32_t i = 0; i < r->nb_msgs; i++) {
		r->msgs[i].index = i;
		r->msgs[i].state = MSG_FREE;
		r->msgs[i].next = i + 1 < r->nb_msgs ? i + 1 : MSG_NONE;
		r->msgs[i].seg_head = SEG_NONE;
		r->msgs[i].req_base = r->msgs[i].reply_base = SLOT_NONE;
	}
	r->free_head = 0;
	r->dead_head = r->dead_tail = MSG_NONE;
	return 0;
}

void dp_reasm_destroy(struct dp_lcore *lc)
{
	struct dp_reasm *r = lc->reasm;

	if (r == NULL)
		return;
	if (r->msgs != NULL && r->buckets != NULL && r->segs != NULL && r->seg_table != NULL && r->slot_mbuf != NULL &&
	    r->slot_used != NULL) {
		for (uint32_t i = 0; i < r->nb_msgs; i++)
			if (r->msgs[i].state != MSG_FREE)
				msg_free(r, &r->msgs[i]);
	}
	rte_free(r->msgs);
	rte_free(r->buckets);
	rte_free(r->segs);
	rte_free(r->seg_table);
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

/*
 * An entry for the message of a first segment, keyed and hashed, its clock started, DEAD (no mbufs)
 * until the caller makes it FILLING. Left DEAD, it remembers a message discarded or answered at its
 * first segment, so that its other segments are dropped until its clock runs out (or a full table
 * needs the entry). The clock is the message's deadline or reassembly_timeout_ms, whichever is sooner.
 * \return the entry, or NULL when none is free.
 */
static struct dp_msg *msg_open(struct dp_lcore *lc, const struct bw_hdr *hdr, uint32_t ip, uint16_t port)
{
	struct dp_reasm *r = lc->reasm;
	struct dp_msg *msg = msg_take(lc);
	uint64_t clock = r->timeout_tsc;

	if (msg == NULL)
		return NULL;
	if (hdr->deadline_us != BW_DEADLINE_NONE && plat_us_to_tsc(hdr->deadline_us) <= clock) {
		clock = plat_us_to_tsc(hdr->deadline_us);
		msg->deadline_clock = true;
	}
	msg->request_id = hdr->request_id;
	msg->src_ip = ip;
	msg->src_port = port;
	msg->first = *hdr;
	msg->state = MSG_DEAD;
	msg->expire_tsc = lc->burst_tsc + clock;
	msg_hash_add(r, msg);
	dead_push(r, msg);
	return msg;
}

/* A first segment: its entry, FILLING, or a refusal in m. */
static enum dp_verdict msg_start(struct dp_lcore *lc, struct rte_mbuf *m, struct bw_hdr *hdr, uint32_t ip,
				 uint16_t port, const struct dp_reasm_limit *limit, struct dp_msg **out)
{
	struct dp_reasm *r = lc->reasm;
	enum dp_reasm_reason reason = limit->refuse != BW_STATUS_OK ? DP_REASM_REFUSED : DP_REASM_TOO_LARGE;
	struct dp_msg *msg, probe;
	char why[DP_ERROR_MSG_MAX + 1];
	bool cut;

	*out = NULL;
	/* A segment that no well-formed message can have is dropped, unanswered, and leaves nothing
	 * behind: each of its message's other segments is judged (and dropped) on its own. */
	cut = slices_fix(&probe, hdr);
	if (!cut || probe.slice < BW_SLICE_MIN) {
		lc->stats.reasm[cut ? DP_REASM_BAD_SLICE : DP_REASM_BAD_TOTAL]++;
		return dp_drop(lc, DP_DROP_SEGMENT);
	}
	if (limit->refuse != BW_STATUS_OK || hdr->total_body_len > limit->cap) {
		/* Answered once: when it cannot be remembered, only its segment 0 is answered. */
		if (msg_open(lc, hdr, ip, port) == NULL && hdr->seg_index != 0) {
			lc->stats.reasm[reason]++;
			return dp_drop(lc, DP_DROP_SEGMENT);
		}
		if (limit->refuse != BW_STATUS_OK)
			return segment_refuse(lc, m, hdr, reason, limit->refuse, limit->why);
		snprintf(why, sizeof(why), "message of %u bytes exceeds %s of %u bytes", hdr->total_body_len,
			 limit->cap_name, limit->cap);
		return segment_refuse(lc, m, hdr, reason, BW_STATUS_RESOURCE_EXHAUSTED, why);
	}
	if (hdr->seg_count > r->nb_mbufs) {
		/* could never be held whole: refused now rather than after the budget's worth of it */
		if (msg_open(lc, hdr, ip, port) == NULL && hdr->seg_index != 0) {
			lc->stats.reasm[DP_REASM_NO_ROOM]++;
			return dp_drop(lc, DP_DROP_SEGMENT);
		}
		snprintf(why, sizeof(why), "message of %u datagrams exceeds this core's reassembly_mbufs (%u mbufs)",
			 hdr->seg_count, r->nb_mbufs);
		return segment_refuse(lc, m, hdr, DP_REASM_NO_ROOM, BW_STATUS_RESOURCE_EXHAUSTED, why);
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
	dead_unlink(r, msg);
	msg->slice = probe.slice;
	msg->last_len = probe.last_len;
	msg->state = MSG_FILLING;
	lc->stats.reasm_messages++;
	*out = msg;
	return DP_VERDICT_HELD;
}

/* Out of room for a segment (no budget for its mbuf, or no run of pages for the whole message): the
 * message is discarded and refused once, in the segment's own mbuf. */
static enum dp_verdict msg_no_room(struct dp_lcore *lc, struct dp_msg *msg, struct rte_mbuf *m, struct bw_hdr *hdr)
{
	struct dp_reasm *r = lc->reasm;
	char why[DP_ERROR_MSG_MAX + 1];

	msg_kill(lc, msg, DP_REASM_NO_ROOM);
	snprintf(why, sizeof(why), "this core holds too many segments already (%u of %u mbufs free): try again",
		 r->mbufs_free, r->nb_mbufs);
	return dp_refuse(lc, m, hdr, BW_STATUS_RESOURCE_EXHAUSTED, why);
}

static void seg_place(struct dp_reasm *r, const struct dp_seg *seg, void *arg)
{
	uint32_t slot = *(const uint32_t *)arg + seg->index;

	r->slot_mbuf[slot] = seg->mbuf;
	r->slot_page[slot] = seg->page;
}

uint32_t dp_reasm_chain_max(const struct dp_lcore *lc)
{
	const struct dp_reasm *r = lc->reasm;
	uint32_t longest = 0;

	for (uint32_t b = 0; b <= r->bucket_mask; b++) {
		uint32_t n = 0;

		for (uint32_t i = r->buckets[b]; i != MSG_NONE; i = r->msgs[i].next)
			n++;
		longest = RTE_MAX(longest, n);
	}
	return longest;
}

bool dp_reasm_known(struct dp_lcore *lc, const struct bw_hdr *hdr)
{
	return msg_find(lc->reasm, lc->rx_src_addr, lc->rx_src_port, hdr->request_id) != NULL;
}

enum dp_verdict dp_reasm_segment(struct dp_lcore *lc, struct rte_mbuf *m, struct bw_hdr *hdr,
				 const struct dp_reasm_limit *limit, struct dp_msg **whole)
{
	struct dp_reasm *r = lc->reasm;
	uint32_t ip = lc->rx_src_addr, base, len;
	uint16_t port = lc->rx_src_port;
	struct dp_msg *msg;
	enum dp_verdict v;

	*whole = NULL;
	lc->stats.segments_in++;
	msg = msg_find(r, ip, port, hdr->request_id);
	if (msg == NULL) {
		v = msg_start(lc, m, hdr, ip, port, limit, &msg);
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
	if (hdr->seg_index >= msg->first.seg_count) {
		msg_kill(lc, msg, DP_REASM_BAD_INDEX);
		return dp_drop(lc, DP_DROP_SEGMENT);
	}
	len = hdr->seg_index + 1u == msg->first.seg_count ? msg->last_len : msg->slice;
	if (hdr->body_len != len) {
		msg_kill(lc, msg, DP_REASM_BAD_SLICE);
		return dp_drop(lc, DP_DROP_SEGMENT);
	}
	if (msg->received != 0 && seg_find(r, msg->index, hdr->seg_index) != SEG_NONE) {
		lc->stats.reasm[DP_REASM_DUPLICATE]++;
		return dp_drop(lc, DP_DROP_SEGMENT);
	}
	if (!budget_take(r, 1))
		return msg_no_room(lc, msg, m, hdr);
	if (msg->received + 1u < msg->first.seg_count) {
		seg_add(r, msg, hdr->seg_index, m, (uint8_t *)(hdr + 1));
		msg->received++;
		msg->bytes += len;
		lc->stats.reasm_segments++;
		lc->stats.reasm_bytes += len;
		return DP_VERDICT_HELD;
	}

	/* whole: its pages in one run (their mbufs already counted), out of the hash (a retry of the
	 * same request_id is a new message), the model layer's */
	base = slots_take(r, msg->first.seg_count);
	if (base == SLOT_NONE) {
		budget_give(r, 1);
		return msg_no_room(lc, msg, m, hdr);
	}
	gauges_filling(lc, msg, -1);
	segs_take(r, msg, true, seg_place, &base);
	r->slot_mbuf[base + hdr->seg_index] = m;
	r->slot_page[base + hdr->seg_index] = (uint8_t *)(hdr + 1);
	msg->received++;
	msg->bytes += len;
	msg->req_base = base;
	msg->req_count = msg->first.seg_count;
	msg_hash_del(r, msg);
	msg->state = MSG_HELD;
	msg->pages = (struct bw_pages){&r->slot_page[base], msg->slice, msg->req_count};
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

/* A run of n pages with n mbufs of budget. \return its first slot, or SLOT_NONE. */
static uint32_t run_take(struct dp_reasm *r, uint32_t n)
{
	uint32_t base;

	if (!budget_take(r, n))
		return SLOT_NONE;
	base = slots_take(r, n);
	if (base == SLOT_NONE)
		budget_give(r, n);
	return base;
}

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
		msg = msg_take(lc);
		if (msg == NULL)
			return -ENOSPC;
		msg->req_base = run_take(r, 1);
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
	base = run_take(r, n);
	mbufs = base != SLOT_NONE ? &r->slot_mbuf[base] : NULL;
	if (base == SLOT_NONE || rte_pktmbuf_alloc_bulk(req->mbuf->pool, mbufs, n) != 0) {
		if (base != SLOT_NONE) {
			memset(mbufs, 0, n * sizeof(mbufs[0]));
			slots_release(r, base, n);
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

/* The first segment to leave the table keeps its mbuf (arg): the one DEADLINE_EXCEEDED goes out in it. */
static void seg_keep_one(struct dp_reasm *r, const struct dp_seg *seg, void *arg)
{
	struct dp_seg *kept = arg;

	if (kept->mbuf == NULL)
		*kept = *seg;
	else
		rte_pktmbuf_free(seg->mbuf);
	(void)r;
}

unsigned int dp_reasm_expire(struct dp_lcore *lc, uint64_t now)
{
	struct dp_reasm *r = lc->reasm;
	unsigned int n = 0;

	for (uint32_t i = 0; i < r->nb_msgs; i++) {
		struct dp_msg *msg = &r->msgs[i];
		struct dp_seg kept = {.mbuf = NULL};

		if ((msg->state != MSG_FILLING && msg->state != MSG_DEAD) || (int64_t)(now - msg->expire_tsc) < 0)
			continue;
		n++;
		if (msg->state == MSG_DEAD) {
			msg_free(r, msg);
			continue;
		}
		gauges_filling(lc, msg, -1);
		if (msg->deadline_clock) {
			/* a request whose deadline ran out is answered, from one of the segments it has */
			segs_take(r, msg, false, seg_keep_one, &kept);
			lc->stats.reasm[DP_REASM_DEADLINE]++;
			dp_error_reply(lc, kept.mbuf, (struct bw_hdr *)(kept.page - sizeof(struct bw_hdr)),
				       BW_STATUS_DEADLINE_EXCEEDED, "the request's deadline passed before all its segments arrived");
			dp_tx_enqueue(lc, kept.mbuf);
		} else {
			lc->stats.reasm[DP_REASM_TIMEOUT]++;
		}
		msg_free(r, msg);
	}
	return n;
}
