/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Several servers behind one client (bwclient.h, "several servers"): the least loaded healthy one
 * takes each request, a timeout or UNAVAILABLE sends it to the next with the same request_id, and
 * PING's DRAINING flag takes a stopping server out before it stops. One mutex guards the servers'
 * state; the requests themselves run outside it, each on a connection of its own.
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "bwclient.h"

struct pool_host {
	char name[128];
	struct bwc_opts opts;              /* this server's: the pool's with its host and port */
	struct bwc *conns[BWC_POOL_CONNS]; /* idle connections, opened as needed */
	unsigned int nb_idle, nb_open;
	uint64_t down_until_ns;            /* left out until then */
	uint64_t next_ping_ns;
	bool pinging;                      /* a thread is PINGing it now */
	struct bwc_pool_host_stats st;
};

struct bwc_pool {
	pthread_mutex_t lock;
	unsigned int nb_hosts, next;
	uint64_t down_ns, ping_ns;
	uint64_t next_id;
	struct pool_host hosts[BWC_POOL_MAX];
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* One "host[:port]" into h; \return 0 or -EINVAL with why. */
static int host_parse(struct pool_host *h, const struct bwc_opts *opts, const char *s, size_t len, char *err,
		      size_t cap)
{
	const char *colon = memchr(s, ':', len);
	size_t name_len = colon != NULL ? (size_t)(colon - s) : len;

	if (name_len == 0 || name_len >= sizeof(h->name)) {
		snprintf(err, cap, "invalid host '%.*s': expected ADDRESS[:PORT]", (int)(len < 64 ? len : 64), s);
		return -EINVAL;
	}
	memcpy(h->name, s, name_len);
	h->name[name_len] = '\0';
	h->opts = *opts;
	h->opts.host = h->name;
	if (colon != NULL) {
		char port[8];
		size_t plen = len - name_len - 1;
		char *end;
		unsigned long v;

		if (plen == 0 || plen >= sizeof(port)) {
			snprintf(err, cap, "invalid port in '%.*s': expected 1..65535", (int)(len < 64 ? len : 64), s);
			return -EINVAL;
		}
		memcpy(port, colon + 1, plen);
		port[plen] = '\0';
		v = strtoul(port, &end, 10);
		if (!isdigit((unsigned char)port[0]) || *end != '\0' || v == 0 || v > 65535) {
			snprintf(err, cap, "invalid port '%s' of host '%s': expected 1..65535", port, h->name);
			return -EINVAL;
		}
		h->opts.port = (uint16_t)v;
	}
	snprintf(h->st.host, sizeof(h->st.host), "%.*s", (int)(len < sizeof(h->st.host) - 1 ? len : sizeof(h->st.host) - 1),
		 s);
	h->st.healthy = true;
	return 0;
}

/* The list of "a,b,c", or of @FILE's lines, into p. */
static int hosts_parse(struct bwc_pool *p, const struct bwc_opts *opts, const char *hosts, char *err, size_t cap)
{
	char *text = NULL, *cur;
	int ret = 0;

	if (hosts[0] == '@') {
		FILE *f = fopen(hosts + 1, "r");
		size_t n = 0;
		long size;

		if (f == NULL) {
			snprintf(err, cap, "cannot read hosts file '%s': %s", hosts + 1, strerror(errno));
			return -errno;
		}
		fseek(f, 0, SEEK_END);
		size = ftell(f);
		rewind(f);
		text = size >= 0 && size < (1 << 20) ? calloc(1, (size_t)size + 1) : NULL;
		if (text != NULL)
			n = fread(text, 1, (size_t)size, f);
		fclose(f);
		if (text == NULL) {
			snprintf(err, cap, "hosts file '%s' is unreadable or above 1 MiB", hosts + 1);
			return -EINVAL;
		}
		text[n] = '\0';
		for (char *c = text; *c != '\0'; c++) { /* comments out, lines to commas */
			if (*c == '#')
				while (*c != '\0' && *c != '\n')
					*c++ = ' ';
			if (*c == '\n')
				*c = ',';
		}
	} else {
		text = strdup(hosts);
		if (text == NULL)
			return -ENOMEM;
	}
	for (cur = text; ret == 0 && *cur != '\0';) {
		size_t len;

		while (*cur == ',' || isspace((unsigned char)*cur))
			cur++;
		len = strcspn(cur, ", \t\r");
		if (len == 0)
			break;
		if (p->nb_hosts == BWC_POOL_MAX) {
			snprintf(err, cap, "more than %d hosts", BWC_POOL_MAX);
			ret = -E2BIG;
			break;
		}
		ret = host_parse(&p->hosts[p->nb_hosts], opts, cur, len, err, cap);
		if (ret == 0)
			p->nb_hosts++;
		cur += len;
	}
	free(text);
	if (ret == 0 && p->nb_hosts == 0) {
		snprintf(err, cap, "no host in '%s'", hosts);
		ret = -EINVAL;
	}
	return ret;
}

struct bwc_pool *bwc_pool_open(const struct bwc_opts *opts, const char *hosts, uint32_t down_ms, uint32_t ping_ms,
			       char *err, size_t cap)
{
	struct bwc_pool *p = calloc(1, sizeof(*p));
	struct bwc_opts defaults;
	int ret;

	if (p == NULL) {
		snprintf(err, cap, "out of memory");
		return NULL;
	}
	if (opts == NULL) {
		bwc_opts_init(&defaults);
		opts = &defaults;
	}
	pthread_mutex_init(&p->lock, NULL);
	p->down_ns = (uint64_t)(down_ms != 0 ? down_ms : BWC_POOL_DOWN_MS_DEFAULT) * 1000000ull;
	p->ping_ns = (uint64_t)(ping_ms != 0 ? ping_ms : BWC_POOL_PING_MS_DEFAULT) * 1000000ull;
	if (getrandom(&p->next_id, sizeof(p->next_id), GRND_NONBLOCK) != (ssize_t)sizeof(p->next_id))
		p->next_id = now_ns();
	ret = hosts_parse(p, opts, hosts, err, cap);
	/* each host resolved now, so that a bad name fails the open rather than a request */
	for (unsigned int i = 0; ret == 0 && i < p->nb_hosts; i++) {
		struct pool_host *h = &p->hosts[i];
		struct bwc *c = bwc_open(&h->opts, &ret);

		if (c == NULL) {
			snprintf(err, cap, "host '%s': %s", h->st.host,
				 ret == -ENXIO || ret == -EINVAL ? "cannot resolve it (expected an IPv4 address or host name)"
								 : strerror(-ret));
			break;
		}
		h->conns[h->nb_idle++] = c;
		h->nb_open = 1;
	}
	if (ret != 0) {
		bwc_pool_close(p);
		return NULL;
	}
	return p;
}

static void held_give(struct bwc_pool *p);

void bwc_pool_close(struct bwc_pool *p)
{
	if (p == NULL)
		return;
	held_give(p); /* this thread's; other threads' must have made their last call before */
	for (unsigned int i = 0; i < p->nb_hosts; i++)
		for (unsigned int k = 0; k < p->hosts[i].nb_idle; k++)
			bwc_close(p->hosts[i].conns[k]);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

unsigned int bwc_pool_size(const struct bwc_pool *p)
{
	return p->nb_hosts;
}

int bwc_pool_stats(struct bwc_pool *p, unsigned int i, struct bwc_pool_host_stats *st)
{
	if (i >= p->nb_hosts)
		return -EINVAL;
	pthread_mutex_lock(&p->lock);
	*st = p->hosts[i].st;
	pthread_mutex_unlock(&p->lock);
	return 0;
}

/* Under the lock: a connection of host i (opened outside it when none is idle). NULL when its
 * connections are all in use or one cannot be opened. */
static struct bwc *conn_take(struct bwc_pool *p, unsigned int i)
{
	struct pool_host *h = &p->hosts[i];
	struct bwc *c;
	int err;

	if (h->nb_idle > 0)
		return h->conns[--h->nb_idle];
	if (h->nb_open == BWC_POOL_CONNS)
		return NULL;
	h->nb_open++;
	pthread_mutex_unlock(&p->lock);
	c = bwc_open(&h->opts, &err);
	pthread_mutex_lock(&p->lock);
	if (c == NULL)
		h->nb_open--;
	return c;
}

static void conn_give(struct bwc_pool *p, unsigned int i, struct bwc *c)
{
	p->hosts[i].conns[p->hosts[i].nb_idle++] = c;
}

/* Under the lock: marks host i out for the pool's down time. */
static void host_down(struct bwc_pool *p, unsigned int i, uint64_t now)
{
	p->hosts[i].down_until_ns = now + p->down_ns;
	p->hosts[i].next_ping_ns = p->hosts[i].down_until_ns;
	p->hosts[i].st.healthy = false;
}

/*
 * Under the lock: PINGs host i when its time has come (down and its time out passed, or due while
 * up), outside the lock; healthy again when the reply comes without DRAINING. \return whether it is
 * healthy now.
 */
static bool host_check(struct bwc_pool *p, unsigned int i)
{
	struct pool_host *h = &p->hosts[i];
	uint64_t now = now_ns();
	struct bwc *c;
	int rc;

	if (now < h->down_until_ns)
		return false;
	if (now < h->next_ping_ns || h->pinging)
		return h->st.healthy;
	c = conn_take(p, i);
	if (c == NULL)
		return h->st.healthy;
	h->pinging = true;
	h->next_ping_ns = now + p->ping_ns;
	h->st.pings++;
	pthread_mutex_unlock(&p->lock);
	rc = bwc_ping(c, "pool", 4, NULL);
	pthread_mutex_lock(&p->lock);
	h->pinging = false;
	conn_give(p, i, c);
	now = now_ns();
	if (rc == 0 && (bwc_last_reply(c)->flags & BW_FLAG_DRAINING) != 0) {
		h->st.drains_seen++;
		host_down(p, i, now);
	} else if (rc != 0) {
		host_down(p, i, now);
	} else {
		h->st.healthy = true;
		h->down_until_ns = 0;
	}
	return h->st.healthy;
}

/* Under the lock: the healthy host with the fewest in flight, not in tried (a bit per host); -1 none. */
static int host_pick(struct bwc_pool *p, uint32_t tried)
{
	int best = -1;

	for (unsigned int k = 0; k < p->nb_hosts; k++) {
		unsigned int i = (p->next + k) % p->nb_hosts;

		if ((tried & (1u << i)) != 0 || !host_check(p, i))
			continue;
		if (best < 0 || p->hosts[i].st.in_flight < p->hosts[best].st.in_flight)
			best = (int)i;
	}
	if (best >= 0)
		p->next = ((unsigned int)best + 1) % p->nb_hosts;
	return best;
}

struct bwc *bwc_pool_any(struct bwc_pool *p, unsigned int *host)
{
	struct bwc *c = NULL;
	int i;

	pthread_mutex_lock(&p->lock);
	i = host_pick(p, 0);
	if (i >= 0 && p->hosts[i].nb_idle > 0)
		c = p->hosts[i].conns[p->hosts[i].nb_idle - 1]; /* lent, not taken: for one thread's set-up */
	pthread_mutex_unlock(&p->lock);
	if (c != NULL && host != NULL)
		*host = (unsigned int)i;
	return c;
}

/* The connection this thread's last outcome came from: kept out of the pool until the thread's next
 * call, while the caller reads the reply in its buffer. */
static __thread struct {
	struct bwc_pool *pool;
	unsigned int host;
	struct bwc *c;
} t_held;

static void held_give(struct bwc_pool *p)
{
	if (t_held.pool == p && t_held.c != NULL)
		conn_give(p, t_held.host, t_held.c);
	t_held.pool = NULL;
	t_held.c = NULL;
}

int bwc_pool_infer(struct bwc_pool *p, uint32_t model_id, const struct bwc_tensor *inputs, uint16_t n,
		   uint32_t deadline_us, uint8_t priority, struct bwc_reply *reply, struct bwc **answered,
		   unsigned int *host)
{
	struct bwc *last = NULL;
	unsigned int last_host = 0;
	uint32_t tried = 0;
	uint64_t id;
	int rc = -EHOSTUNREACH, prev = -1;

	pthread_mutex_lock(&p->lock);
	held_give(p);
	id = p->next_id++;
	for (;;) {
		int i = host_pick(p, tried);
		struct bwc *c;

		if (i < 0)
			break;
		tried |= 1u << i;
		c = conn_take(p, (unsigned int)i);
		if (c == NULL)
			continue;
		if (prev >= 0)
			p->hosts[prev].st.failovers++;
		p->hosts[i].st.in_flight++;
		p->hosts[i].st.sent++;
		pthread_mutex_unlock(&p->lock);
		bwc_set_next_request_id(c, id);
		rc = bwc_infer(c, model_id, inputs, n, deadline_us, priority, reply);
		pthread_mutex_lock(&p->lock);
		p->hosts[i].st.in_flight--;
		if (last != NULL)
			conn_give(p, last_host, last); /* an earlier try's: its reply is not the outcome */
		last = c;
		last_host = (unsigned int)i;
		if (host != NULL)
			*host = (unsigned int)i;
		if (rc == 0) {
			p->hosts[i].st.ok++;
			break;
		}
		if (rc == -ETIMEDOUT) {
			p->hosts[i].st.timeouts++;
		} else {
			p->hosts[i].st.errors++;
			if (rc != BW_STATUS_UNAVAILABLE)
				break; /* the server's answer: another would say the same */
		}
		host_down(p, (unsigned int)i, now_ns());
		prev = i;
	}
	if (last != NULL) {
		t_held.pool = p;
		t_held.host = last_host;
		t_held.c = last;
	}
	pthread_mutex_unlock(&p->lock);
	if (answered != NULL)
		*answered = last;
	return rc;
}
