/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bwload: a load generator for batchwire. One thread (a DPDK lcore, or a plain thread on a kernel
 * socket) runs the schedule, sends each request (segmented when its body outgrows a datagram),
 * matches replies by request_id, and keeps latency in a log-linear histogram from the request's
 * intended send time. In-flight requests live in a ring indexed by sequence number (request_id =
 * base + seq), so a reply finds its request in O(1) and the oldest pending request is always at the
 * tail, where timeouts are found. At the end: every request sent is OK, an error by status, a
 * timeout or malformed (the conservation line), JSON and one machine-readable line.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>

#include <batchwire/inputs.h>

#include "bwclient.h"
#include "load.h"
#include "port.h"

#define PROG "bwload"
#define INFLIGHT_DEFAULT 65536
#define ECHO_ROW_FLOATS 16 /* a model that takes any tensors (echo) gets float [rows, 16] */
#define INFO_TRIES 5
#define INFO_WAIT_NS 500000000ull
#define DUE_MAX 256

enum slot_state { SLOT_FREE, SLOT_PENDING, SLOT_DONE };

struct slot {
	uint64_t intended_ns;  /* latency counts from here: the schedule's time (open loop) or the send */
	uint64_t sent_ns;      /* the deadline counts from here: when its first datagram was queued */
	uint64_t timeout_at_ns; /* a timeout then (intended + --timeout-ms; a failover moves it) */
	uint8_t server;        /* the server it went to (--server A,B,...) */
	uint8_t failed_over;   /* sent on to another server once already */
	uint32_t seg_count;    /* of the reply, once its first datagram came */
	uint32_t segs_seen;
	uint64_t seen_mask;    /* reply segments 0..63 seen: duplicates of those are not counted twice */
	uint8_t state;
	uint8_t mix;
};

/* One entry of the mix, ready to send: its model's id and its input tensors. */
struct mix_ready {
	uint32_t model_id;
	uint16_t nb_tensors;
	struct bwc_tensor tensors[LOAD_MIX_INPUTS_MAX];
	void *owned[LOAD_MIX_INPUTS_MAX];
	uint32_t segments;     /* datagrams per request */
	uint32_t pad_to;       /* one datagram: padded to its reply's size (the server sends no reply
				* larger than an unsigned request); 0: none */
	uint64_t sent, ok;
};

/*
 * One server of --server A,B,...: requests go to the one with the fewest pending among those not
 * left out; one is left out for LOAD_SERVER_DOWN_NS when a request to it times out (the request goes
 * to another, with its request_id) or its PING reply says DRAINING.
 */
#define LOAD_SERVER_DOWN_NS 1000000000ull
#define LOAD_PING_NS 500000000ull
struct server_state {
	uint32_t pending;
	uint64_t down_until_ns, next_ping_ns;
	uint64_t sent, ok, failovers, pings, drains_seen;
};

struct run {
	const struct load_port_ops *ops;
	struct server_state servers[LOAD_SERVERS_MAX];
	unsigned int nb_servers, next_server;
	uint64_t ping_datagrams;   /* PINGs to the servers (several only), outside the counts */
	struct load_port *port;
	struct load_port_conf pconf;
	struct load_mix mix;
	struct mix_ready ready[LOAD_MIX_MAX];
	struct load_sched sched;
	enum load_mode mode;
	double rate;
	uint32_t outstanding;
	double duration_s;
	uint64_t count;
	uint64_t timeout_ns;
	uint32_t slice;
	uint32_t cap;          /* in-flight ring size, a power of two */
	struct slot *slots;
	uint64_t id_base, head, tail;
	uint64_t seed;         /* --seed: the inputs (as bwrun's), the Poisson gaps, the mix picks */
	uint64_t rng;
	struct load_counts counts;
	uint64_t skipped;      /* due while the ring was full: never sent (the generator's limit) */
	uint64_t setup_datagrams;  /* MODEL_INFO requests at start-up, outside the counts */
	uint64_t setup_replies;
	struct load_hist total, interval;
	const char *json_path;
	bool quiet;
	bool use_dpdk;
	bool no_model_info;    /* models named by id, sent as echo's tensors: a peer that answers nothing */
	uint32_t idle_us;      /* sleep this long when a turn found nothing to do (0: spin) */
};

static volatile sig_atomic_t g_stop;

/* The first signal stops the sending and lets what is in flight come back; a second ends the wait. */
static void on_signal(int sig)
{
	(void)sig;
	g_stop = g_stop != 0 ? 2 : 1;
}

/* ---- the clock ---------------------------------------------------------------------------------- */

static double g_ns_per_tick;
static uint64_t g_tick0;

static uint64_t now_ns(void)
{
	if (g_ns_per_tick > 0)
		return (uint64_t)((double)(rte_rdtsc() - g_tick0) * g_ns_per_tick);
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- sending ------------------------------------------------------------------------------------ */

static unsigned int receive(struct run *r);

/* Queues one datagram slot, flushing (and waiting for the port) while none is free. */
static uint8_t *slot_wait(struct run *r, uint32_t cap)
{
	uint8_t *buf;

	while ((buf = r->ops->tx_slot(r->port, cap)) == NULL && !g_stop) {
		r->ops->tx_flush(r->port);
		receive(r); /* replies keep coming while the ring drains */
	}
	return buf;
}

/* Encodes and queues every datagram of one request; a full port makes it wait, never drops. */
static int request_send(struct run *r, const struct bwc_request *req, uint32_t segments)
{
	uint32_t cap = r->slice + (uint32_t)sizeof(struct bw_hdr);

	for (uint32_t i = 0; i < segments; i++) {
		uint8_t *buf = slot_wait(r, cap);
		int len;

		if (buf == NULL)
			return -EINTR;
		len = segments == 1 ? bwc_encode_request(req, buf, cap)
				    : bwc_encode_request_segment(req, r->slice, i, buf, cap);
		if (len < 0)
			return len;
		r->ops->tx_commit(r->port, (uint32_t)len);
		r->counts.datagrams_out++;
	}
	if (r->ops->next_flow != NULL)
		r->ops->next_flow(r->port);
	return 0;
}

/* Request seq of mix entry m, as send_due and a failover encode it. */
static struct bwc_request request_of(const struct run *r, unsigned int m, uint64_t seq)
{
	const struct mix_ready *mr = &r->ready[m];
	const struct load_mix_entry *e = &r->mix.entries[m];

	return (struct bwc_request){
		.opcode = BW_OP_INFER,
		.priority = e->priority,
		.num_tensors = mr->nb_tensors,
		.model_id = mr->model_id,
		.deadline_us = e->deadline_us,
		.tensors = mr->tensors,
		.pad_to = mr->pad_to,
		.request_id = r->id_base + seq,
	};
}

/* The server not left out with the fewest pending, not except (-1: none excepted), ties in turn;
 * every one left out: the one with the fewest pending all the same (a generator sends). \return it,
 * or -1 when except is the only one. */
static int server_pick(struct run *r, uint64_t now, int except)
{
	int best = -1;
	bool best_up = false;

	for (unsigned int k = 0; k < r->nb_servers; k++) {
		unsigned int i = (r->next_server + k) % r->nb_servers;
		bool up = now >= r->servers[i].down_until_ns;

		if ((int)i == except)
			continue;
		if (best < 0 || (up && !best_up) ||
		    (up == best_up && r->servers[i].pending < r->servers[best].pending)) {
			best = (int)i;
			best_up = up;
		}
	}
	if (best >= 0)
		r->next_server = ((unsigned int)best + 1) % r->nb_servers;
	return best;
}

/* The datagrams queued next go to server i. */
static void server_use(struct run *r, struct slot *s, unsigned int i)
{
	s->server = (uint8_t)i;
	r->servers[i].pending++;
	r->servers[i].sent++;
	if (r->ops->set_server != NULL)
		r->ops->set_server(r->port, i);
}

/* Each server's PING when due (several servers): its reply's DRAINING flag leaves it out. */
static void servers_ping(struct run *r, uint64_t now)
{
	for (unsigned int i = 0; r->nb_servers > 1 && i < r->nb_servers; i++) {
		struct server_state *sv = &r->servers[i];
		struct bwc_request req = {.opcode = BW_OP_PING, .request_id = r->id_base - 2 - i};
		uint32_t room = r->slice + (uint32_t)sizeof(struct bw_hdr);
		uint8_t *buf;
		int len;

		if (now < sv->next_ping_ns || (buf = r->ops->tx_slot(r->port, room)) == NULL)
			continue;
		sv->next_ping_ns = now + LOAD_PING_NS;
		if (r->ops->set_server != NULL)
			r->ops->set_server(r->port, i);
		len = bwc_encode_request(&req, buf, room);
		if (len < 0)
			continue;
		r->ops->tx_commit(r->port, (uint32_t)len);
		sv->pings++;
		r->ping_datagrams++;
	}
}

static unsigned int send_due(struct run *r, uint64_t now)
{
	uint64_t when[DUE_MAX];
	unsigned int n;

	/* datagrams the port did not take yet go first; until they have, no new request is due */
	if (r->ops->tx_flush(r->port) != 0)
		return 1;
	n = load_sched_due(&r->sched, now, (uint32_t)(r->head - r->tail), when, DUE_MAX);
	for (unsigned int k = 0; k < n; k++) {
		unsigned int m = load_mix_pick(&r->mix, &r->rng);
		struct mix_ready *mr = &r->ready[m];
		struct bwc_request req = request_of(r, m, r->head);
		struct slot *s;
		uint64_t intended = r->mode == LOAD_MODE_CLOSED ? now : when[k];

		if (r->head - r->tail == r->cap) {
			r->skipped++;
			continue;
		}
		s = &r->slots[r->head & (r->cap - 1)];
		*s = (struct slot){.intended_ns = intended, .sent_ns = now_ns(), .timeout_at_ns = intended + r->timeout_ns,
				   .state = SLOT_PENDING, .mix = (uint8_t)m};
		server_use(r, s, (unsigned int)server_pick(r, now, -1));
		r->head++;
		r->counts.sent++;
		mr->sent++;
		if (request_send(r, &req, mr->segments) != 0)
			break; /* stopped while waiting for the port: this request times out */
	}
	r->ops->tx_flush(r->port);
	return n;
}

/* ---- receiving ---------------------------------------------------------------------------------- */

static void request_finish(struct run *r, struct slot *s, uint16_t status, uint64_t now)
{
	s->state = SLOT_DONE;
	r->servers[s->server].pending--;
	r->servers[s->server].ok += status == BW_STATUS_OK;
	if (status == BW_STATUS_OK) {
		uint64_t lat = now > s->intended_ns ? now - s->intended_ns : 0;
		uint32_t deadline_us = r->mix.entries[s->mix].deadline_us;

		r->counts.ok++;
		r->ready[s->mix].ok++;
		if (deadline_us != 0 && now - s->sent_ns > (uint64_t)deadline_us * 1000)
			r->counts.ok_past_deadline++;
		load_hist_record(&r->total, lat);
		load_hist_record(&r->interval, lat);
	} else if (status < BW_STATUS_COUNT) {
		r->counts.errors[status]++;
	} else {
		r->counts.malformed++;
	}
}

static void reply_take(struct run *r, const uint8_t *p, uint32_t len, uint64_t now)
{
	const struct bw_hdr *h = (const struct bw_hdr *)p;
	uint64_t seq;
	struct slot *s;

	r->counts.datagrams_in++;
	if (len < sizeof(*h) || h->magic != BW_PROTO_MAGIC || !(h->opcode & BW_OP_REPLY))
		return;
	if (h->opcode == (BW_OP_PING | BW_OP_REPLY) && r->nb_servers > 1) {
		uint64_t i = r->id_base - 2 - h->request_id; /* servers_ping's ids */

		r->counts.datagrams_in--; /* a PING's, outside the counts as its request is */
		if (i < r->nb_servers && (h->flags & BW_FLAG_DRAINING) != 0) {
			r->servers[i].down_until_ns = now + LOAD_SERVER_DOWN_NS;
			r->servers[i].drains_seen++;
		}
		return;
	}
	seq = h->request_id - r->id_base;
	if (seq >= r->head)
		return; /* not ours: another run's, or noise */
	s = &r->slots[seq & (r->cap - 1)];
	if (seq < r->tail || s->state != SLOT_PENDING) {
		r->counts.late_replies++;
		return;
	}
	if (h->seg_count <= 1 || h->status != BW_STATUS_OK) {
		request_finish(r, s, h->status, now);
		return;
	}
	if (h->seg_index >= h->seg_count || (s->seg_count != 0 && s->seg_count != h->seg_count)) {
		s->state = SLOT_DONE;
		r->counts.malformed++;
		return;
	}
	s->seg_count = h->seg_count;
	if (h->seg_index < 64) {
		if (s->seen_mask & (UINT64_C(1) << h->seg_index))
			return;
		s->seen_mask |= UINT64_C(1) << h->seg_index;
	}
	if (++s->segs_seen == s->seg_count)
		request_finish(r, s, BW_STATUS_OK, now);
}

/*
 * A pending request past its timeout, with several servers: its server left out, the request sent
 * to another with the same request_id and a timeout of its own (once). \return whether it was.
 */
static bool failover(struct run *r, struct slot *s, uint64_t seq, uint64_t now)
{
	int to;

	if (r->nb_servers < 2 || s->failed_over)
		return false;
	to = server_pick(r, now, s->server);
	if (to < 0 || now < r->servers[to].down_until_ns)
		return false;
	r->servers[s->server].down_until_ns = now + LOAD_SERVER_DOWN_NS;
	r->servers[s->server].failovers++;
	r->servers[s->server].pending--;
	s->failed_over = 1;
	s->timeout_at_ns = now + r->timeout_ns;
	server_use(r, s, (unsigned int)to);
	{
		struct bwc_request req = request_of(r, s->mix, seq);

		if (request_send(r, &req, r->ready[s->mix].segments) != 0)
			return true; /* stopped while waiting for the port: it times out */
	}
	r->ops->tx_flush(r->port);
	return true;
}

/* Retires the oldest requests: done ones, and pending ones past their timeout (with several servers,
 * once they were sent on to another and timed out there too). */
static void tail_advance(struct run *r, uint64_t now)
{
	while (r->tail < r->head) {
		struct slot *s = &r->slots[r->tail & (r->cap - 1)];

		if (s->state == SLOT_PENDING) {
			if (now < s->timeout_at_ns && now >= s->intended_ns)
				break;
			if (failover(r, s, r->tail, now))
				break;
			r->counts.timeouts++;
			r->servers[s->server].pending--;
		}
		s->state = SLOT_FREE;
		r->tail++;
	}
}

static unsigned int receive(struct run *r)
{
	struct load_rx rx;
	unsigned int n;
	uint64_t now;

	r->ops->rx(r->port, &rx);
	n = rx.n;
	if (rx.n > 0) {
		now = now_ns();
		for (unsigned int i = 0; i < rx.n; i++)
			reply_take(r, rx.payload[i], rx.len[i], now);
	}
	r->ops->rx_done(r->port, &rx); /* always: a burst of foreign frames only is buffers too */
	return n;
}

/* ---- set-up: the models' ids and inputs from MODEL_INFO ----------------------------------------- */

static int model_info(struct run *r, const char *name, struct bwc_model_info *info, char *err, size_t cap)
{
	static uint8_t reasm_buf[BW_DGRAM_MAX], padded[BW_DGRAM_MAX];
	/* the name, then zeros to a whole datagram: no reply is larger than its request (docs/protocol.md) */
	struct bwc_request req = {.opcode = BW_OP_MODEL_INFO, .model_id = BW_MODEL_ID_ANY, .body = padded,
				  .body_len = r->slice, .request_id = r->id_base - 1};

	memset(padded, 0, sizeof(padded));
	memcpy(padded, name, strnlen(name, BW_MAX_NAME_LEN));

	for (int t = 0; t < INFO_TRIES; t++) {
		uint32_t room = r->slice + (uint32_t)sizeof(struct bw_hdr);
		uint8_t *buf = r->ops->tx_slot(r->port, room);
		uint64_t deadline;
		int len;

		if (buf == NULL)
			return -ENOBUFS;
		len = bwc_encode_request(&req, buf, room);
		if (len < 0)
			return len;
		r->ops->tx_commit(r->port, (uint32_t)len);
		if (r->ops->tx_flush(r->port) == 0)
			r->setup_datagrams++;
		deadline = now_ns() + INFO_WAIT_NS;
		while (now_ns() < deadline && !g_stop) {
			struct load_rx rx;

			r->ops->rx(r->port, &rx);
			for (unsigned int i = 0; i < rx.n; i++) {
				const struct bw_hdr *h = (const struct bw_hdr *)rx.payload[i];
				struct bwc_reply reply;
				const char *why = NULL;
				int rc;

				if (rx.len[i] < sizeof(*h) || h->request_id != req.request_id || rx.len[i] > sizeof(reasm_buf))
					continue;
				memcpy(reasm_buf, rx.payload[i], rx.len[i]);
				r->ops->rx_done(r->port, &rx);
				r->setup_replies++;
				rc = bwc_decode_reply(reasm_buf, rx.len[i], BW_OP_MODEL_INFO, &reply);
				if (rc == 0 && reply.status != BW_STATUS_OK) {
					snprintf(err, cap, "model '%s': %s: %s", name, bw_status_name(reply.status), reply.message);
					return -ENOENT;
				}
				if (rc == 0)
					rc = bwc_decode_model_info(reply.body, reply.body_len, info, &why);
				if (rc != 0)
					snprintf(err, cap, "model '%s': malformed MODEL_INFO reply (%s)", name,
						 why != NULL ? why : reply.why);
				return rc;
			}
			r->ops->rx_done(r->port, &rx);
		}
	}
	snprintf(err, cap, "model '%s': no MODEL_INFO reply after %d tries: is batchwire serving at that address?",
		 name, INFO_TRIES);
	return -ETIMEDOUT;
}

/* One input as bwrun generates it for the same seed (batchwire/inputs.h): its own stream per index. */
static void *inputs_generate(uint8_t dtype, size_t elems, size_t row, bool mask, uint64_t seed, uint32_t index)
{
	uint64_t state = bw_input_stream(seed, index);
	uint8_t *p = malloc(elems * bw_dtype_size(dtype) + 1);

	if (p != NULL)
		bw_input_fill(dtype, p, elems, row, mask, &state);
	return p;
}

static int mix_prepare(struct run *r, unsigned int m, char *err, size_t cap)
{
	const struct load_mix_entry *e = &r->mix.entries[m];
	struct mix_ready *mr = &r->ready[m];
	struct bwc_model_info *info = calloc(1, sizeof(*info));
	struct bwc_request req = {.opcode = BW_OP_INFER};
	int rc, segs;

	if (info == NULL)
		return -ENOMEM;
	if (r->no_model_info) {
		char *end;
		unsigned long id = strtoul(e->model, &end, 10);

		if (*end != '\0' || end == e->model || id >= BW_MODEL_ID_ANY) {
			snprintf(err, cap, "entry %u: with --no-model-info a model is its id, got '%s'", m + 1, e->model);
			free(info);
			return -EINVAL;
		}
		info->model_id = (uint32_t)id;
		info->flags = BW_MODEL_F_ANY_TENSORS;
		rc = 0;
	} else {
		rc = model_info(r, e->model, info, err, cap);
	}
	if (rc != 0) {
		free(info);
		return rc;
	}
	mr->model_id = info->model_id;
	if (e->nb_inputs > 0) {
		for (unsigned int i = 0; i < e->nb_inputs; i++) {
			struct bwc_npy npy;
			char why[512];

			if (bwc_npy_read(e->input_path[i], &npy, why, sizeof(why)) != 0) {
				snprintf(err, cap, "%s", why);
				free(info);
				return -EINVAL;
			}
			mr->owned[i] = npy.data;
			mr->tensors[i] = (struct bwc_tensor){.index = BW_TENSOR_BY_NAME, .dtype = npy.dtype, .rank = npy.rank,
							     .name = e->input_name[i], .data = npy.data,
							     .data_len = (uint32_t)npy.nbytes};
			memcpy(mr->tensors[i].dims, npy.dims, sizeof(npy.dims));
		}
		mr->nb_tensors = (uint16_t)e->nb_inputs;
	} else if (info->flags & BW_MODEL_F_ANY_TENSORS) {
		mr->owned[0] = inputs_generate(BW_DTYPE_FLOAT, (size_t)e->rows * ECHO_ROW_FLOATS, ECHO_ROW_FLOATS, false,
					       r->seed, 0);
		mr->tensors[0] = (struct bwc_tensor){.index = 0, .dtype = BW_DTYPE_FLOAT, .rank = 2,
						     .dims = {e->rows, ECHO_ROW_FLOATS}, .data = mr->owned[0],
						     .data_len = e->rows * ECHO_ROW_FLOATS * 4};
		mr->nb_tensors = 1;
	} else {
		if (info->num_inputs > LOAD_MIX_INPUTS_MAX) {
			snprintf(err, cap, "model '%s' has %u inputs; bwload generates at most %d", e->model, info->num_inputs,
				 LOAD_MIX_INPUTS_MAX);
			free(info);
			return -EINVAL;
		}
		for (unsigned int i = 0; i < info->num_inputs; i++) {
			const struct bwc_tensor_info *ti = &info->inputs[i];
			struct bwc_tensor *t = &mr->tensors[i];
			size_t elems = e->rows;

			*t = (struct bwc_tensor){.index = ti->index, .dtype = ti->dtype, .rank = ti->rank};
			t->dims[0] = e->rows;
			for (unsigned int d = 1; d < ti->rank; d++) {
				t->dims[d] = ti->dims[d] != 0 ? ti->dims[d] : 1;
				elems *= t->dims[d];
			}
			mr->owned[i] = inputs_generate(ti->dtype, elems, ti->rank > 1 ? t->dims[ti->rank - 1] : 1,
						       strstr(ti->name, "mask") != NULL, r->seed, i);
			t->data = mr->owned[i];
			t->data_len = (uint32_t)(elems * bw_dtype_size(ti->dtype));
		}
		mr->nb_tensors = info->num_inputs;
	}
	/* what the reply will be, while the description is at hand (0 for echo: its reply is its request) */
	uint32_t reply_bytes = r->no_model_info ? 0 : bwc_reply_body_bytes(info, e->rows);
	free(info);
	req.tensors = mr->tensors;
	req.num_tensors = mr->nb_tensors;
	segs = bwc_request_segments(&req, r->slice);
	if (segs < 0) {
		snprintf(err, cap, "entry %u (model '%s'): the request cannot be encoded (%s)", m + 1, e->model,
			 strerror(-segs));
		return segs;
	}
	mr->segments = (uint32_t)segs;
	mr->pad_to = segs == 1 && reply_bytes <= r->slice ? reply_bytes : 0;
	return 0;
}

/* ---- the run ------------------------------------------------------------------------------------ */

static void conf_json(const struct run *r, char *out, size_t cap)
{
	static const char *const modes[] = {"fixed", "poisson", "closed"};

	snprintf(out, cap,
		 "{\"port\":\"%s\",\"mode\":\"%s\",\"rate\":%.3f,\"outstanding\":%u,\"duration_s\":%.3f,\"count\":%" PRIu64
		 ",\"timeout_ms\":%" PRIu64 ",\"mtu\":%u,\"mix_entries\":%u,\"setup_datagrams_out\":%" PRIu64
		 ",\"setup_replies\":%" PRIu64 ",\"skipped\":%" PRIu64 ",\"servers\":%u,\"ping_datagrams_out\":%" PRIu64 "}",
		 r->ops->name, modes[r->mode], r->rate, r->outstanding, r->duration_s, r->count,
		 r->timeout_ns / 1000000, r->pconf.mtu, r->mix.nb_entries, r->setup_datagrams, r->setup_replies,
		 r->skipped, r->nb_servers, r->ping_datagrams);
}

static int run_load(struct run *r)
{
	uint64_t start = now_ns(), last_progress = start, end_by, drain_by = 0;
	struct load_counts at_last = r->counts;

	if (load_sched_init(&r->sched, r->mode, r->rate, r->outstanding, r->count, start, r->seed) != 0)
		return -EINVAL;
	end_by = r->duration_s > 0 ? start + (uint64_t)(r->duration_s * 1e9) : UINT64_MAX;
	load_hist_init(&r->total);
	load_hist_init(&r->interval);
	for (;;) {
		uint64_t now = now_ns();
		bool sending = !g_stop && now < end_by && !load_sched_done(&r->sched);

		unsigned int work = 0;

		if (sending) {
			servers_ping(r, now);
			work += send_due(r, now);
		}
		else if (drain_by == 0)
			drain_by = now + r->timeout_ns; /* the last requests get their full timeout */
		work += receive(r);
		/* a generator sharing a core with what it measures gives it back while nothing is due */
		if (work == 0 && r->idle_us != 0)
			usleep(r->idle_us);
		tail_advance(r, now);
		if (!sending && (r->tail == r->head || now >= drain_by || g_stop > 1))
			break;
		if (!r->quiet && now - last_progress >= 1000000000ull) {
			struct load_counts d = r->counts;

			d.in_flight = r->head - r->tail;
			load_progress_print(stderr, (double)(now - start) / 1e9, &d, &r->interval,
					    (double)(r->counts.sent - at_last.sent) * 1e9 / (double)(now - last_progress));
			load_hist_init(&r->interval);
			at_last = r->counts;
			last_progress = now;
		}
	}
	/* whatever is still pending after the drain timed out */
	while (r->tail < r->head) {
		if (r->slots[r->tail & (r->cap - 1)].state == SLOT_PENDING) {
			r->counts.timeouts++;
			r->servers[r->slots[r->tail & (r->cap - 1)].server].pending--;
		}
		r->tail++;
	}
	r->counts.in_flight = 0;
	{
		double seconds = (double)(now_ns() - start) / 1e9;
		char conf[512];

		conf_json(r, conf, sizeof(conf));
		if (r->json_path != NULL) {
			FILE *f = fopen(r->json_path, "w");

			if (f == NULL) {
				fprintf(stderr, PROG ": --json %s: %s\n", r->json_path, strerror(errno));
			} else {
				load_report_json(f, conf, &r->counts, &r->total, seconds);
				fclose(f);
			}
		}
		for (unsigned int m = 0; m < r->mix.nb_entries; m++)
			printf("mix %u model=%s: sent %" PRIu64 ", ok %" PRIu64 ", %u datagram%s each\n", m + 1,
			       r->mix.entries[m].model, r->ready[m].sent, r->ready[m].ok, r->ready[m].segments,
			       r->ready[m].segments == 1 ? "" : "s");
		if (load_counts_errors(&r->counts) != 0) {
			printf("errors:");
			for (unsigned int st = BW_STATUS_OK + 1; st < BW_STATUS_COUNT; st++)
				if (r->counts.errors[st] != 0)
					printf(" %s=%" PRIu64, bw_status_name(st), r->counts.errors[st]);
			printf("\n");
		}
		if (r->counts.ok_past_deadline != 0)
			printf("deadlines: %" PRIu64 " OK replies came after their request's deadline_us\n",
			       r->counts.ok_past_deadline);
		if (r->skipped != 0)
			printf("skipped: %" PRIu64 " requests due while %u were in flight (raise --max-inflight)\n",
			       r->skipped, r->cap);
		for (unsigned int i = 0; r->nb_servers > 1 && i < r->nb_servers; i++) {
			char ip[INET_ADDRSTRLEN];

			inet_ntop(AF_INET, &r->pconf.servers_ip[i], ip, sizeof(ip));
			printf("server %s: sent %" PRIu64 ", ok %" PRIu64 ", failovers %" PRIu64 ", pings %" PRIu64
			       ", draining seen %" PRIu64 "\n", ip, r->servers[i].sent, r->servers[i].ok,
			       r->servers[i].failovers, r->servers[i].pings, r->servers[i].drains_seen);
		}
		printf("datagrams: %" PRIu64 " out, %" PRIu64 " in, %" PRIu64 " late replies, %" PRIu64 " foreign frames\n",
		       r->counts.datagrams_out, r->counts.datagrams_in, r->counts.late_replies,
		       r->ops->rx_foreign(r->port));
		load_report_line(stdout, &r->counts, &r->total, seconds);
	}
	return load_counts_conserved(&r->counts) ? 0 : -EPROTO;
}

/* ---- command line ------------------------------------------------------------------------------- */

static const char g_usage[] =
	"Usage: " PROG " [EAL options --] --server IP [options]\n"
	"Load for a batchwire appliance: open loop (fixed rate or Poisson arrivals, latency from each\n"
	"request's intended send time) or closed loop (N outstanding), over a DPDK port (EAL options\n"
	"before --: e.g. --vdev net_memif0,role=client,socket=/run/bw.sock) or a kernel UDP socket.\n\n"
	"  --server IP        batchwire's address (required); with --socket, several as IP,IP,... (up\n"
	"                     to 16, one UDP port): each request goes to the one with the fewest pending,\n"
	"                     a server whose PING (every 500 ms) says DRAINING is left out for a second,\n"
	"                     and a request that times out is sent once more, with its request_id, to\n"
	"                     another (the server it timed out on left out); one line per server at the end\n"
	"  --port P           its UDP port (default 7878)\n"
	"  --socket           a kernel UDP socket (no DPDK; no EAL options)\n"
	"  --ip IP            DPDK: this generator's address (required with DPDK)\n"
	"  --dpdk-port N      DPDK: the port id (default 0)\n"
	"  --src-ports N      DPDK: source ports used in turn, from 40000 (default 1): RSS spreads them\n"
	"  --no-udp-csum      DPDK: send UDP checksums of 0 (RFC 768: none), to spare the generator\n"
	"  --server-mac MAC   DPDK: the server's MAC, instead of asking it by ARP\n"
	"  --no-model-info    no MODEL_INFO at start: each mix model is an id (model=0: echo) and gets\n"
	"                     echo's float [rows,16] (to drive a peer that answers nothing, e.g. testpmd;\n"
	"                     what comes back is counted as foreign frames)\n"
	"  --mix SPEC         what to send (default model=echo); entries separated by ';', each of\n"
	"                     model=NAME,weight=N,rows=N,priority=N,deadline_us=N,input=NAME:FILE.npy\n"
	"                     (inputs not given are generated from MODEL_INFO, as bwrun generates them;\n"
	"                     a model of any tensors, echo, gets float [rows,16])\n"
	"  --rate R           open loop at R requests/s\n"
	"  --poisson R        open loop, Poisson arrivals at a mean of R requests/s\n"
	"  --closed N         closed loop, N outstanding (default: --closed 1)\n"
	"  --duration S       seconds of load (default 5); --count N stops after N requests instead\n"
	"  --count N\n"
	"  --timeout-ms N     a request without its reply this long after its intended send time is a\n"
	"                     timeout (default 1000); its reply, if it comes, counts as late\n"
	"  --mtu N            IP MTU of the path, 576..9000 (default 1500): larger requests are segmented\n"
	"  --max-inflight N   requests in flight at most (default 65536; a power of two)\n"
	"  --seed S           inputs, Poisson gaps and mix picks (default 1)\n"
	"  --json FILE        the run as JSON: configuration, counts, errors by status, latency\n"
	"  --quiet            no progress line each second (on stderr)\n"
	"  --idle-us N        sleep N us when a turn finds nothing to send or receive (default 0: spin);\n"
	"                     for a generator that shares its core with the server it measures\n"
	"  -h, --help\n\n"
	"Last line: bwload sent=N ok=N errors=N timeouts=N malformed=N conserved=yes rate=X p50_us=X ...\n"
	"Exit status: 0 when every request sent is accounted for (conserved); 1 otherwise or on a\n"
	"set-up failure; 2 for a bad command line.\n";

static bool parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (s[0] < '0' || s[0] > '9')
		return false;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < lo || v > hi)
		return false;
	*out = v;
	return true;
}

static bool parse_pos_double(const char *s, double *out)
{
	char *end;
	double v = strtod(s, &end);

	if (*end != '\0' || !isfinite(v) || v <= 0)
		return false;
	*out = v;
	return true;
}

static int args_parse(int argc, char **argv, struct run *r)
{
	enum { O_SERVER = 256, O_PORT, O_SOCKET, O_IP, O_DPDK_PORT, O_SRC_PORTS, O_NO_CSUM, O_MIX, O_RATE, O_POISSON,
	       O_CLOSED, O_DURATION, O_COUNT, O_TIMEOUT, O_MTU, O_INFLIGHT, O_SEED, O_JSON, O_QUIET, O_SERVER_MAC,
	       O_NO_INFO, O_IDLE };
	static const struct option opts[] = {
		{"server", required_argument, NULL, O_SERVER}, {"port", required_argument, NULL, O_PORT},
		{"socket", no_argument, NULL, O_SOCKET}, {"ip", required_argument, NULL, O_IP},
		{"dpdk-port", required_argument, NULL, O_DPDK_PORT}, {"src-ports", required_argument, NULL, O_SRC_PORTS},
		{"no-udp-csum", no_argument, NULL, O_NO_CSUM}, {"mix", required_argument, NULL, O_MIX},
		{"rate", required_argument, NULL, O_RATE}, {"poisson", required_argument, NULL, O_POISSON},
		{"closed", required_argument, NULL, O_CLOSED}, {"duration", required_argument, NULL, O_DURATION},
		{"count", required_argument, NULL, O_COUNT}, {"timeout-ms", required_argument, NULL, O_TIMEOUT},
		{"mtu", required_argument, NULL, O_MTU}, {"max-inflight", required_argument, NULL, O_INFLIGHT},
		{"seed", required_argument, NULL, O_SEED}, {"json", required_argument, NULL, O_JSON},
		{"quiet", no_argument, NULL, O_QUIET}, {"server-mac", required_argument, NULL, O_SERVER_MAC},
		{"no-model-info", no_argument, NULL, O_NO_INFO}, {"idle-us", required_argument, NULL, O_IDLE},
		{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0},
	};
	const char *mix = "model=echo";
	char err[256];
	uint64_t v;
	int opt, modes = 0;
	bool have_server = false, have_ip = false;

	r->pconf = (struct load_port_conf){.server_port = BW_UDP_PORT_DEFAULT, .client_port = 40000, .src_ports = 1,
					   .mtu = 1500, .pool_mbufs = 16383, .udp_csum = 1};
	r->mode = LOAD_MODE_CLOSED;
	r->outstanding = 1;
	r->duration_s = 5;
	r->timeout_ns = 1000000000ull;
	r->cap = INFLIGHT_DEFAULT;
	r->seed = BW_INPUT_SEED_DEFAULT;
	r->use_dpdk = true;
	optind = 1;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case O_SERVER: {
			/* A or A,B,...: several spread the requests (a kernel socket only) */
			char list[LOAD_SERVERS_MAX * 16 + 1], *tok, *save = NULL;

			if (strlen(optarg) >= sizeof(list))
				goto bad;
			strcpy(list, optarg);
			r->pconf.nb_servers = 0;
			for (tok = strtok_r(list, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
				if (r->pconf.nb_servers == LOAD_SERVERS_MAX ||
				    inet_pton(AF_INET, tok, &r->pconf.servers_ip[r->pconf.nb_servers]) != 1)
					goto bad;
				r->pconf.nb_servers++;
			}
			have_server = r->pconf.nb_servers > 0;
			if (!have_server)
				goto bad;
			r->pconf.server_ip = r->pconf.servers_ip[0];
			break;
		}
		case O_PORT:
			if (!parse_u64(optarg, 1, 65535, &v))
				goto bad;
			r->pconf.server_port = (uint16_t)v;
			break;
		case O_SOCKET:
			r->use_dpdk = false;
			break;
		case O_IP:
			have_ip = inet_pton(AF_INET, optarg, &r->pconf.client_ip) == 1;
			if (!have_ip)
				goto bad;
			break;
		case O_DPDK_PORT:
			if (!parse_u64(optarg, 0, 1023, &v))
				goto bad;
			r->pconf.dpdk_port = (uint16_t)v;
			break;
		case O_SRC_PORTS:
			if (!parse_u64(optarg, 1, 1024, &v))
				goto bad;
			r->pconf.src_ports = (uint16_t)v;
			break;
		case O_NO_CSUM:
			r->pconf.udp_csum = 0;
			break;
		case O_MIX:
			mix = optarg;
			break;
		case O_RATE:
		case O_POISSON:
			if (!parse_pos_double(optarg, &r->rate))
				goto bad;
			r->mode = opt == O_RATE ? LOAD_MODE_FIXED : LOAD_MODE_POISSON;
			modes++;
			break;
		case O_CLOSED:
			if (!parse_u64(optarg, 1, 1u << 20, &v))
				goto bad;
			r->mode = LOAD_MODE_CLOSED;
			r->outstanding = (uint32_t)v;
			modes++;
			break;
		case O_DURATION:
			if (!parse_pos_double(optarg, &r->duration_s))
				goto bad;
			break;
		case O_COUNT:
			if (!parse_u64(optarg, 1, UINT64_MAX, &r->count))
				goto bad;
			r->duration_s = 0;
			break;
		case O_TIMEOUT:
			if (!parse_u64(optarg, 1, 3600000, &v))
				goto bad;
			r->timeout_ns = v * 1000000ull;
			break;
		case O_MTU:
			if (!parse_u64(optarg, 576, 9000, &v))
				goto bad;
			r->pconf.mtu = (uint32_t)v;
			break;
		case O_INFLIGHT:
			if (!parse_u64(optarg, 1, 1u << 24, &v) || (v & (v - 1)) != 0)
				goto bad;
			r->cap = (uint32_t)v;
			break;
		case O_SEED:
			if (!parse_u64(optarg, 1, UINT64_MAX, &v))
				goto bad;
			r->seed = v;
			break;
		case O_JSON:
			r->json_path = optarg;
			break;
		case O_QUIET:
			r->quiet = true;
			break;
		case O_SERVER_MAC: {
			unsigned int b[6];
			char tail;

			if (sscanf(optarg, "%x:%x:%x:%x:%x:%x%c", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5], &tail) != 6)
				goto bad;
			for (int i = 0; i < 6; i++) {
				if (b[i] > 255)
					goto bad;
				r->pconf.server_mac[i] = (uint8_t)b[i];
			}
			r->pconf.server_mac_set = 1;
			break;
		}
		case O_NO_INFO:
			r->no_model_info = true;
			break;
		case O_IDLE:
			if (!parse_u64(optarg, 0, 100000, &v))
				goto bad;
			r->idle_us = (uint32_t)v;
			break;
		case 'h':
			fputs(g_usage, stdout);
			exit(0);
		default:
			fprintf(stderr, PROG ": unknown option or missing value '%s'; see --help\n", argv[optind - 1]);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(stderr, PROG ": unexpected argument '%s'; see --help\n", argv[optind]);
		return -EINVAL;
	}
	if (have_server && r->use_dpdk && r->pconf.nb_servers > 1) {
		fprintf(stderr, PROG ": several servers need --socket (a DPDK port talks to one); see --help\n");
		return -EINVAL;
	}
	r->nb_servers = r->pconf.nb_servers > 0 ? r->pconf.nb_servers : 1;
	if (!have_server || (r->use_dpdk && !have_ip) || modes > 1) {
		fprintf(stderr, PROG ": %s; see --help\n",
			!have_server ? "--server IP is required"
				     : modes > 1 ? "give one of --rate, --poisson and --closed"
						 : "--ip IP (this generator's address) is required on a DPDK port");
		return -EINVAL;
	}
	r->slice = bwc_segment_slice(r->pconf.mtu);
	r->rng = load_rng_seed(r->seed);
	if (load_mix_parse(mix, &r->mix, err, sizeof(err)) != 0) {
		fprintf(stderr, PROG ": --mix: %s\n", err);
		return -EINVAL;
	}
	return 0;
bad:
	fprintf(stderr, PROG ": invalid value '%s' for %s; see --help\n", optarg, argv[optind - 1]);
	return -EINVAL;
}

int main(int argc, char **argv)
{
	static struct run r;
	char err[512];
	int app_argc = argc, eal_argc = 0, rc;
	char **app_argv = argv;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0) {
			eal_argc = i;
			app_argv = &argv[i];
			app_argc = argc - i;
			app_argv[0] = argv[0];
			break;
		}
	}
	if (args_parse(app_argc, app_argv, &r) != 0)
		return 2;
	if (r.use_dpdk) {
		if (eal_argc == 0) {
			fprintf(stderr, PROG ": a DPDK port needs EAL options before -- (or use --socket); see --help\n");
			return 2;
		}
		if (rte_eal_init(eal_argc, argv) < 0) {
			fprintf(stderr, PROG ": EAL: %s\n", rte_strerror(rte_errno));
			return 1;
		}
		g_tick0 = rte_rdtsc();
		g_ns_per_tick = 1e9 / (double)rte_get_tsc_hz();
		r.ops = &load_port_dpdk;
	} else {
		if (eal_argc != 0) {
			fprintf(stderr, PROG ": --socket takes no EAL options\n");
			return 2;
		}
		r.ops = &load_port_socket;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	r.slots = calloc(r.cap, sizeof(r.slots[0]));
	if (r.slots == NULL) {
		fprintf(stderr, PROG ": out of memory for %u in-flight requests\n", r.cap);
		return 1;
	}
	r.id_base = ((uint64_t)getpid() << 40) ^ ((uint64_t)time(NULL) << 20);
	rc = r.ops->open(&r.port, &r.pconf, err, sizeof(err));
	if (rc != 0) {
		fprintf(stderr, PROG ": %s\n", err);
		return 1;
	}
	for (unsigned int m = 0; m < r.mix.nb_entries && rc == 0; m++)
		rc = mix_prepare(&r, m, err, sizeof(err));
	if (rc != 0) {
		fprintf(stderr, PROG ": %s\n", err);
		r.ops->close(r.port);
		return 1;
	}
	rc = run_load(&r);
	r.ops->close(r.port);
	for (unsigned int m = 0; m < r.mix.nb_entries; m++)
		for (unsigned int i = 0; i < LOAD_MIX_INPUTS_MAX; i++)
			free(r.ready[m].owned[i]);
	free(r.slots);
	if (r.use_dpdk)
		rte_eal_cleanup();
	return rc == 0 ? 0 : 1;
}
