/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <rte_errno.h>
#include <rte_ring.h>

#include "platform.h"

RTE_LOG_REGISTER(plat_logtype_app, bw.app, INFO);
RTE_LOG_REGISTER(plat_logtype_plat, bw.plat, INFO);
RTE_LOG_REGISTER(plat_logtype_dp, bw.dp, INFO);

uint64_t plat_tsc_hz;

int plat_clock_init(void)
{
	plat_tsc_hz = rte_get_tsc_hz();
	return plat_tsc_hz == 0 ? -ENODEV : 0;
}

struct plat_log_record {
	uint32_t level;
	int32_t logtype;
	char text[PLAT_LOG_RECORD_BYTES - 2 * sizeof(uint32_t)];
};
_Static_assert(sizeof(struct plat_log_record) == PLAT_LOG_RECORD_BYTES, "plat_log_record size");

static struct rte_ring *g_log_ring;
static uint64_t g_log_lost;

int plat_log_defer_init(unsigned int count)
{
	g_log_ring = rte_ring_create_elem("plat_log", sizeof(struct plat_log_record), count, SOCKET_ID_ANY,
					  RING_F_SC_DEQ);
	return g_log_ring != NULL ? 0 : -rte_errno;
}

void plat_log_defer_fini(void)
{
	plat_log_deferred_drain();
	rte_ring_free(g_log_ring);
	g_log_ring = NULL;
}

void plat_log_deferred(uint32_t level, int logtype, const char *fmt, ...)
{
	struct plat_log_record r = { .level = level, .logtype = logtype };
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r.text, sizeof(r.text), fmt, ap);
	va_end(ap);
	if (g_log_ring == NULL) {
		rte_log(level, (uint32_t)logtype, "%s", r.text);
		return;
	}
	if (rte_ring_mp_enqueue_elem(g_log_ring, &r, sizeof(r)) != 0)
		__atomic_fetch_add(&g_log_lost, 1, __ATOMIC_RELAXED);
}

unsigned int plat_log_deferred_drain(void)
{
	struct plat_log_record r;
	unsigned int n = 0;

	while (g_log_ring != NULL && rte_ring_sc_dequeue_elem(g_log_ring, &r, sizeof(r)) == 0) {
		/* a line cut at the record's size still ends its line */
		size_t len = strnlen(r.text, sizeof(r.text));

		if (len == sizeof(r.text) - 1 && r.text[len - 1] != '\n')
			r.text[len - 1] = '\n';
		rte_log(r.level, (uint32_t)r.logtype, "%s", r.text);
		n++;
	}
	return n;
}

uint64_t plat_log_deferred_lost(void)
{
	return __atomic_load_n(&g_log_lost, __ATOMIC_RELAXED);
}

uint64_t plat_monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts); /* async-signal-safe */
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
