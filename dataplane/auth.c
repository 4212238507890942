/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Request authentication (docs/security.md): the key table the polling lcores verify trailers
 * against, its reload on a control thread, and each lcore's replay state.
 *
 * Keys. A reload builds a new table and publishes it with one atomic store; a polling lcore loads
 * the pointer once per request and reports a quiescent state (rte_rcu_qsbr) once per poll, so the
 * old table is freed when every lcore online has polled since. Keys are kept as their HMAC states
 * (include/batchwire/auth.h), never as secrets, sorted by id for a binary search.
 *
 * Replays. An authenticated request_id is the client's CLOCK_REALTIME in nanoseconds, kept
 * strictly increasing by the client. A request is fresh when its request_id is within window_ms of
 * our wall clock, and new when its source (address, port, key id: the tag covers the address and
 * port, so a replay cannot change them, and RSS sends one source to one lcore) has not used it: the
 * lcore keeps each source's DP_AUTH_RECENT largest request_ids, accepts one above the smallest of
 * them that is not among them, and forgets a source whose newest request_id went stale, since
 * nothing it sent can pass the window again. A server restart forgets every source, and the window
 * alone then stands between it and a replay of the last window_ms.
 */
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <rte_malloc.h>
#include <rte_rcu_qsbr.h>

#include <batchwire/auth.h>

#include "defs.h"

#define DP_AUTH_PROBE 8       /* slots of the flow table a source may sit in */
#define DP_AUTH_RETIRED_MAX 8 /* tables a reload could not free yet (an lcore not polling) */
#define DP_AUTH_GRACE_NS 1000000000ull /* a reload waits this long for the lcores to move on */

static const char *const g_outcome_names[DP_AUTH_OUTCOME_COUNT] = {
	[DP_AUTH_OK] = "ok",
	[DP_AUTH_MISSING] = "missing",
	[DP_AUTH_NO_KEYS] = "no_keys",
	[DP_AUTH_UNKNOWN_KEY] = "unknown_key",
	[DP_AUTH_BAD_TAG] = "bad_tag",
	[DP_AUTH_STALE] = "stale",
	[DP_AUTH_REPLAY] = "replay",
	[DP_AUTH_FLOWS_FULL] = "flows_full",
};

const char *dp_auth_outcome_name(enum dp_auth_outcome outcome)
{
	return (unsigned int)outcome < DP_AUTH_OUTCOME_COUNT ? g_outcome_names[outcome] : "unknown";
}

struct dp_auth_key {
	uint32_t id;
	uint64_t expires_ns; /* wall clock; 0: while it is in the file */
	struct bw_hmac_key hmac;
};

struct dp_keyring {
	uint32_t count;
	struct dp_auth_key keys[]; /* by id; a key and its predecessor under the same id side by side */
};

struct dp_auth {
	struct dp_auth_config cfg;
	struct dp_keyring *ring;     /* what the lcores read: atomic */
	int64_t wall_offset_ns;      /* wall clock = TSC in ns + this: atomic */
	uint64_t tsc_mult;           /* ns = tsc * tsc_mult >> 32 */
	uint64_t window_ns;
	struct rte_rcu_qsbr *qsbr;
	/* the control side: reloads, one at a time */
	pthread_mutex_t lock;
	uint64_t reloads;
	uint64_t reload_failures;
	char last_error[256];
	struct dp_keyring *retired[DP_AUTH_RETIRED_MAX];
	unsigned int nb_retired;
};

struct dp_auth_flow {
	rte_be32_t addr;
	rte_be16_t port;
	uint16_t count;        /* ids[] in use; 0: a free slot */
	uint32_t key_id;
	uint64_t newest;
	uint64_t ids[DP_AUTH_RECENT];
};

struct dp_auth_flows {
	uint32_t mask;
	struct dp_auth_flow flow[];
};

/* ---- the clock ---------------------------------------------------------------------------------- */

static inline uint64_t tsc_ns(const struct dp_auth *a, uint64_t tsc)
{
	return (uint64_t)(((unsigned __int128)tsc * a->tsc_mult) >> 32);
}

static uint64_t wall_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void dp_auth_clock_sync(struct dp_auth *a)
{
	int64_t offset = (int64_t)(wall_now_ns() - tsc_ns(a, plat_tsc_now()));

	__atomic_store_n(&a->wall_offset_ns, offset, __ATOMIC_RELAXED);
}

static inline uint64_t auth_wall_ns(const struct dp_auth *a, uint64_t tsc)
{
	return tsc_ns(a, tsc) + (uint64_t)__atomic_load_n(&a->wall_offset_ns, __ATOMIC_RELAXED);
}

/* ---- key files ---------------------------------------------------------------------------------- */

static int key_cmp(const void *x, const void *y)
{
	const struct dp_auth_key *a = x, *b = y;

	if (a->id != b->id)
		return a->id < b->id ? -1 : 1;
	/* under one id, the key of the file before the one it replaces */
	return (a->expires_ns == 0) - (b->expires_ns == 0);
}

/* A key file holds secrets: only its owner may read it, and the owner is root or whoever runs us. */
static int key_file_check(int fd, const char *path, char *err, size_t cap)
{
	struct stat st;

	if (fstat(fd, &st) != 0) {
		snprintf(err, cap, "key file %s: %s", path, strerror(errno));
		return -errno;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, cap, "key file %s is not a regular file", path);
		return -EINVAL;
	}
	if (st.st_uid != 0 && st.st_uid != geteuid()) {
		snprintf(err, cap, "key file %s belongs to uid %u: expected root or uid %u (chown root %s)", path,
			 (unsigned int)st.st_uid, (unsigned int)geteuid(), path);
		return -EPERM;
	}
	if (st.st_mode & (S_IRWXG | S_IRWXO)) {
		snprintf(err, cap, "key file %s is open to its group or others (mode %04o): chmod 600 %s", path,
			 (unsigned int)(st.st_mode & 07777), path);
		return -EPERM;
	}
	return 0;
}

/* Reads path into keys[] (DP_AUTH_KEYS_MAX of them): \return how many, or a negative errno. */
static int key_file_read(const char *path, struct dp_auth_key *keys, char *err, size_t cap)
{
	char line[512];
	unsigned int lineno = 0;
	int fd, ret, count = 0;
	FILE *f;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		ret = -errno;
		snprintf(err, cap, "key file %s: %s", path, strerror(errno));
		return ret;
	}
	ret = key_file_check(fd, path, err, cap);
	f = ret == 0 ? fdopen(fd, "r") : NULL;
	if (f == NULL) {
		if (ret == 0) {
			ret = -errno;
			snprintf(err, cap, "key file %s: %s", path, strerror(errno));
		}
		close(fd);
		return ret;
	}
	while (fgets(line, sizeof(line), f) != NULL) {
		uint8_t secret[BW_AUTH_KEY_MAX];
		const char *why = NULL;
		size_t len = 0;
		uint32_t id = 0;

		lineno++;
		if (strchr(line, '\n') == NULL && !feof(f)) {
			snprintf(err, cap, "key file %s line %u: longer than %zu bytes", path, lineno, sizeof(line) - 2);
			ret = -EINVAL;
			break;
		}
		ret = bw_key_line_parse(line, &id, secret, &len, &why);
		if (ret < 0) {
			snprintf(err, cap, "key file %s line %u: %s", path, lineno, why);
			break;
		}
		if (ret == 0)
			continue;
		ret = 0;
		for (int k = 0; k < count; k++) {
			if (keys[k].id == id) {
				snprintf(err, cap, "key file %s line %u: key id %u given twice", path, lineno, id);
				ret = -EINVAL;
			}
		}
		if (ret == 0 && count == DP_AUTH_KEYS_MAX) {
			snprintf(err, cap, "key file %s line %u: more than %u keys", path, lineno, DP_AUTH_KEYS_MAX);
			ret = -EINVAL;
		}
		if (ret == 0) {
			keys[count].id = id;
			keys[count].expires_ns = 0;
			bw_hmac_key_init(&keys[count].hmac, secret, len);
			count++;
		}
		OPENSSL_cleanse(secret, sizeof(secret));
		if (ret != 0)
			break;
	}
	OPENSSL_cleanse(line, sizeof(line));
	if (ret == 0 && ferror(f)) {
		snprintf(err, cap, "key file %s: read error", path);
		ret = -EIO;
	}
	fclose(f);
	return ret < 0 ? ret : count;
}

static struct dp_keyring *ring_alloc(uint32_t count)
{
	struct dp_keyring *r = rte_zmalloc("dp_auth_keys", sizeof(*r) + (size_t)count * sizeof(r->keys[0]),
					   RTE_CACHE_LINE_SIZE);

	if (r != NULL)
		r->count = count;
	return r;
}

static void ring_free(struct dp_keyring *r)
{
	if (r == NULL)
		return;
	OPENSSL_cleanse(r->keys, (size_t)r->count * sizeof(r->keys[0]));
	rte_free(r);
}

static bool key_same(const struct dp_auth_key *a, const struct dp_auth_key *b)
{
	return a->id == b->id && memcmp(&a->hmac, &b->hmac, sizeof(a->hmac)) == 0;
}

/* When a key the file no longer has stops being accepted: overlap_ns from now, or sooner if an
 * earlier reload said so. */
static uint64_t key_expiry(const struct dp_auth_key *k, uint64_t now_ns, uint64_t overlap_ns)
{
	uint64_t end = now_ns + overlap_ns;

	return k->expires_ns != 0 && k->expires_ns < end ? k->expires_ns : end;
}

/*
 * The table after a reload: the file's keys, and the old table's keys the file no longer has (by id
 * and secret) until their overlap ends.
 */
static struct dp_keyring *ring_merge(const struct dp_keyring *old, const struct dp_auth_key *fresh, uint32_t nb_fresh,
				     uint64_t now_ns, uint64_t overlap_ns)
{
	uint32_t kept = 0;
	struct dp_keyring *r;

	for (uint32_t i = 0; old != NULL && i < old->count; i++) {
		const struct dp_auth_key *k = &old->keys[i];
		bool in_file = false;

		for (uint32_t j = 0; j < nb_fresh && !in_file; j++)
			in_file = key_same(k, &fresh[j]);
		if (!in_file && key_expiry(k, now_ns, overlap_ns) > now_ns)
			kept++;
	}
	r = ring_alloc(nb_fresh + kept);
	if (r == NULL)
		return NULL;
	memcpy(r->keys, fresh, (size_t)nb_fresh * sizeof(fresh[0]));
	kept = nb_fresh;
	for (uint32_t i = 0; old != NULL && i < old->count; i++) {
		const struct dp_auth_key *k = &old->keys[i];
		bool in_file = false;

		for (uint32_t j = 0; j < nb_fresh && !in_file; j++)
			in_file = key_same(k, &fresh[j]);
		if (in_file || key_expiry(k, now_ns, overlap_ns) <= now_ns)
			continue;
		r->keys[kept] = *k;
		r->keys[kept].expires_ns = key_expiry(k, now_ns, overlap_ns);
		kept++;
	}
	qsort(r->keys, r->count, sizeof(r->keys[0]), key_cmp);
	return r;
}

/* Frees what no lcore can still read: called with the lock held, after a grace period. */
static void retired_free(struct dp_auth *a)
{
	for (unsigned int i = 0; i < a->nb_retired; i++)
		ring_free(a->retired[i]);
	a->nb_retired = 0;
}

/* Waits (a bounded time) until every lcore online has polled since the new table was published.
 * \return whether they all did. */
static bool grace_period(struct dp_auth *a)
{
	uint64_t token = rte_rcu_qsbr_start(a->qsbr);
	uint64_t deadline = wall_now_ns() + DP_AUTH_GRACE_NS;

	while (rte_rcu_qsbr_check(a->qsbr, token, false) == 0) {
		if (wall_now_ns() > deadline)
			return false;
		usleep(100);
	}
	return true;
}

static int auth_load(struct dp_auth *a, char *err, size_t cap)
{
	struct dp_auth_key *fresh = calloc(DP_AUTH_KEYS_MAX, sizeof(*fresh));
	struct dp_keyring *old, *ring;
	int count;

	if (fresh == NULL) {
		snprintf(err, cap, "out of memory for the key file");
		return -ENOMEM;
	}
	count = key_file_read(a->cfg.key_file, fresh, err, cap);
	if (count < 0) {
		OPENSSL_cleanse(fresh, DP_AUTH_KEYS_MAX * sizeof(*fresh));
		free(fresh);
		return count;
	}
	old = a->ring;
	ring = ring_merge(old, fresh, (uint32_t)count, wall_now_ns(), (uint64_t)a->cfg.overlap_s * 1000000000ull);
	OPENSSL_cleanse(fresh, DP_AUTH_KEYS_MAX * sizeof(*fresh));
	free(fresh);
	if (ring == NULL) {
		snprintf(err, cap, "out of memory for %d keys", count);
		return -ENOMEM;
	}
	/* room to retire the table in use: tables whose grace period ran out earlier go first */
	if (old != NULL && a->nb_retired == DP_AUTH_RETIRED_MAX) {
		if (!grace_period(a)) {
			ring_free(ring);
			snprintf(err, cap, "a polling lcore has not polled since the last %u reloads: keys unchanged",
				 DP_AUTH_RETIRED_MAX);
			return -EBUSY;
		}
		retired_free(a);
	}
	__atomic_store_n(&a->ring, ring, __ATOMIC_RELEASE);
	if (old != NULL) {
		a->retired[a->nb_retired++] = old;
		if (grace_period(a))
			retired_free(a);
	}
	return (int)ring->count;
}

int dp_auth_create(const struct dp_auth_config *cfg, struct dp_auth **out, char *err, size_t cap)
{
	struct dp_auth *a;
	size_t qsbr_size = rte_rcu_qsbr_get_memsize(RTE_MAX_LCORE);
	int ret;

	*out = NULL;
	a = rte_zmalloc("dp_auth", sizeof(*a), RTE_CACHE_LINE_SIZE);
	if (a == NULL) {
		snprintf(err, cap, "out of memory for the key table");
		return -ENOMEM;
	}
	a->cfg = *cfg;
	a->window_ns = (uint64_t)cfg->window_ms * 1000000ull;
	a->tsc_mult = (uint64_t)(((unsigned __int128)1000000000ull << 32) / plat_tsc_hz);
	pthread_mutex_init(&a->lock, NULL);
	a->qsbr = rte_zmalloc("dp_auth_qsbr", qsbr_size, RTE_CACHE_LINE_SIZE);
	if (a->qsbr == NULL || rte_rcu_qsbr_init(a->qsbr, RTE_MAX_LCORE) != 0) {
		snprintf(err, cap, "cannot set up the key table's grace periods");
		rte_free(a->qsbr);
		rte_free(a);
		return -ENOMEM;
	}
	dp_auth_clock_sync(a);
	ret = auth_load(a, err, cap);
	if (ret < 0) {
		rte_free(a->qsbr);
		rte_free(a);
		return ret;
	}
	*out = a;
	return 0;
}

int dp_auth_reload(struct dp_auth *a, char *err, size_t cap)
{
	int ret;

	pthread_mutex_lock(&a->lock);
	ret = auth_load(a, err, cap);
	a->reloads++;
	if (ret < 0) {
		a->reload_failures++;
		snprintf(a->last_error, sizeof(a->last_error), "%s", err);
	} else {
		a->last_error[0] = '\0';
	}
	pthread_mutex_unlock(&a->lock);
	return ret;
}

void dp_auth_telemetry(struct dp_auth *a, struct rte_tel_data *d)
{
	const struct dp_keyring *ring;
	struct rte_tel_data *ids = rte_tel_data_alloc();
	uint64_t now = wall_now_ns();
	uint32_t live = 0, expiring = 0;

	pthread_mutex_lock(&a->lock);
	ring = a->ring;
	if (ids != NULL)
		rte_tel_data_start_array(ids, RTE_TEL_U64_VAL);
	for (uint32_t i = 0; i < ring->count; i++) {
		if (ring->keys[i].expires_ns != 0 && ring->keys[i].expires_ns <= now)
			continue;
		live++;
		if (ring->keys[i].expires_ns != 0)
			expiring++;
		if (ids != NULL)
			rte_tel_data_add_array_u64(ids, ring->keys[i].id);
	}
	rte_tel_data_add_dict_string(d, "key_file", a->cfg.key_file);
	rte_tel_data_add_dict_u64(d, "keys", live);
	rte_tel_data_add_dict_u64(d, "keys_in_overlap", expiring);
	if (ids != NULL)
		rte_tel_data_add_dict_container(d, "key_ids", ids, 0);
	rte_tel_data_add_dict_u64(d, "window_ms", a->cfg.window_ms);
	rte_tel_data_add_dict_u64(d, "overlap_s", a->cfg.overlap_s);
	rte_tel_data_add_dict_u64(d, "reloads", a->reloads);
	rte_tel_data_add_dict_u64(d, "reload_failures", a->reload_failures);
	rte_tel_data_add_dict_string(d, "last_reload_error", a->last_error);
	pthread_mutex_unlock(&a->lock);
}

void dp_auth_destroy(struct dp_auth *a)
{
	if (a == NULL)
		return;
	retired_free(a);
	ring_free(a->ring);
	pthread_mutex_destroy(&a->lock);
	rte_free(a->qsbr);
	rte_free(a);
}

/* ---- the polling lcore -------------------------------------------------------------------------- */

int dp_auth_lcore_init(struct dp_lcore *lc, struct dp_auth *a, int socket_id)
{
	uint32_t n = rte_align32pow2(a->cfg.flows > DP_AUTH_PROBE ? a->cfg.flows : DP_AUTH_PROBE);
	struct dp_auth_flows *f;

	f = rte_zmalloc_socket("dp_auth_flows", sizeof(*f) + (size_t)n * sizeof(f->flow[0]), RTE_CACHE_LINE_SIZE,
			       socket_id);
	if (f == NULL)
		return -ENOMEM;
	f->mask = n - 1;
	if (rte_rcu_qsbr_thread_register(a->qsbr, lc->lcore_id) != 0) {
		rte_free(f);
		return -EINVAL;
	}
	lc->auth = a;
	lc->auth_flows = f;
	return 0;
}

void dp_auth_lcore_online(struct dp_lcore *lc)
{
	if (lc->auth != NULL)
		rte_rcu_qsbr_thread_online(lc->auth->qsbr, lc->lcore_id);
}

void dp_auth_lcore_offline(struct dp_lcore *lc)
{
	if (lc->auth != NULL)
		rte_rcu_qsbr_thread_offline(lc->auth->qsbr, lc->lcore_id);
}

void dp_auth_quiescent(struct dp_lcore *lc)
{
	rte_rcu_qsbr_quiescent(lc->auth->qsbr, lc->lcore_id);
}

void dp_auth_lcore_fini(struct dp_lcore *lc)
{
	if (lc->auth != NULL)
		rte_rcu_qsbr_thread_unregister(lc->auth->qsbr, lc->lcore_id);
	rte_free(lc->auth_flows);
	lc->auth_flows = NULL;
	lc->auth = NULL;
}

/* The first key under id, or NULL. */
static const struct dp_auth_key *key_find(const struct dp_keyring *r, uint32_t id)
{
	uint32_t lo = 0, hi = r->count;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (r->keys[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < r->count && r->keys[lo].id == id ? &r->keys[lo] : NULL;
}

enum dp_auth_outcome dp_auth_verify(struct dp_lcore *lc, const struct bw_hdr *hdr)
{
	/* the datagram's last 40 bytes, after any padding (rx_body_len: what follows the header) */
	const struct bw_auth_trailer *t =
		(const struct bw_auth_trailer *)((const uint8_t *)(hdr + 1) + lc->rx_body_len - sizeof(*t));
	uint32_t covered = (uint32_t)sizeof(*hdr) + lc->rx_body_len - BW_AUTH_TAG_LEN;
	const struct dp_keyring *ring;
	const struct dp_auth_key *k;
	uint8_t tag[BW_AUTH_TAG_LEN];
	uint32_t key_id = t->key_id;
	uint64_t now, id = hdr->request_id;
	bool known = false;

	lc->rx_authenticated = false;
	if (lc->auth == NULL)
		return DP_AUTH_NO_KEYS;
	struct bw_auth_pseudo pseudo = {
		.src_addr = lc->rx_src_addr,
		.dst_addr = lc->cfg->ipv4_addr,
		.src_port = lc->rx_src_port,
		.dst_port = rte_cpu_to_be_16(lc->cfg->udp_port),
	};
	now = auth_wall_ns(lc->auth, lc->burst_tsc);
	ring = __atomic_load_n(&lc->auth->ring, __ATOMIC_ACQUIRE);
	for (k = key_find(ring, key_id); k != NULL && k < ring->keys + ring->count && k->id == key_id; k++) {
		if (k->expires_ns != 0 && k->expires_ns <= now)
			continue;
		known = true;
		bw_auth_tag(&k->hmac, &pseudo, hdr, covered, tag);
		if (bw_auth_tag_equal(tag, t->tag))
			break;
	}
	if (!known)
		return DP_AUTH_UNKNOWN_KEY;
	if (k == ring->keys + ring->count || k->id != key_id)
		return DP_AUTH_BAD_TAG;
	/* only a datagram whose tag holds can tell us anything about its request_id */
	if (id + lc->auth->window_ns < now || id > now + lc->auth->window_ns)
		return DP_AUTH_STALE;
	lc->rx_authenticated = true;
	lc->rx_key_id = key_id;
	return DP_AUTH_OK;
}

static inline uint32_t flow_hash(rte_be32_t addr, rte_be16_t port, uint32_t key_id)
{
	uint64_t x = ((uint64_t)addr << 32 | (uint64_t)port << 16) ^ ((uint64_t)key_id * 0x9e3779b97f4a7c15ull);

	x ^= x >> 29;
	x *= 0xbf58476d1ce4e5b9ull;
	return (uint32_t)(x ^ (x >> 32));
}

enum dp_auth_outcome dp_auth_replay_check(struct dp_lcore *lc, uint64_t request_id)
{
	struct dp_auth_flows *f = lc->auth_flows;
	uint64_t now = auth_wall_ns(lc->auth, lc->burst_tsc), window = lc->auth->window_ns;
	uint32_t h = flow_hash(lc->rx_src_addr, lc->rx_src_port, lc->rx_key_id);
	struct dp_auth_flow *flow = NULL, *spare = NULL;
	unsigned int oldest = 0;

	for (unsigned int i = 0; i < DP_AUTH_PROBE; i++) {
		struct dp_auth_flow *s = &f->flow[(h + i) & f->mask];

		if (s->count != 0 && s->addr == lc->rx_src_addr && s->port == lc->rx_src_port &&
		    s->key_id == lc->rx_key_id) {
			flow = s;
			break;
		}
		/* a free slot, or a source whose newest request_id is stale: nothing it sent can pass again */
		if (spare == NULL && (s->count == 0 || s->newest + window < now))
			spare = s;
	}
	if (flow == NULL) {
		if (spare == NULL)
			return DP_AUTH_FLOWS_FULL;
		flow = spare;
		flow->addr = lc->rx_src_addr;
		flow->port = lc->rx_src_port;
		flow->key_id = lc->rx_key_id;
		flow->count = 0;
		flow->newest = 0;
	}
	for (unsigned int i = 0; i < flow->count; i++) {
		if (flow->ids[i] == request_id)
			return DP_AUTH_REPLAY;
		if (flow->ids[i] < flow->ids[oldest])
			oldest = i;
	}
	if (flow->count < DP_AUTH_RECENT) {
		flow->ids[flow->count++] = request_id;
	} else {
		/* below every id kept: one it may have already seen and forgotten */
		if (request_id < flow->ids[oldest])
			return DP_AUTH_REPLAY;
		flow->ids[oldest] = request_id;
	}
	if (request_id > flow->newest)
		flow->newest = request_id;
	return DP_AUTH_OK;
}
