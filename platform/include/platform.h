/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * platform: the bottom layer. Logging types, TSC clock helpers, the hwloc view of the machine, thread
 * pinning and naming, and the poll loop that every polling lcore runs. Nothing here knows packets,
 * batches or models.
 */
#ifndef BW_PLATFORM_H
#define BW_PLATFORM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rte_common.h>
#include <rte_cycles.h>
#include <rte_log.h>

#include <batchwire/clock.h>

/* ---- keyed hashing ---------------------------------------------------------------------------- */

/* A secret hash key: a table of keys a peer chooses (addresses, ids) draws one at creation. */
struct plat_hash_key {
	uint64_t k0;
	uint64_t k1;
};

/** SipHash-2-4 of len bytes under key: 64 bits nobody without the key can predict or aim. */
uint64_t plat_siphash(const struct plat_hash_key *key, const void *data, size_t len);

/** Fills key from the kernel's random source (getrandom). \return 0 or a negative errno. */
int plat_hash_key_random(struct plat_hash_key *key);

/* ---- logging ---------------------------------------------------------------------------------- */

/* One rte_log type per layer, so `--log-level=bw.dp:debug` turns on one layer only. */
extern int plat_logtype_app;
extern int plat_logtype_plat;
extern int plat_logtype_dp;

#define PLAT_LOG(level, type, fmt, ...) \
	rte_log(RTE_LOG_##level, plat_logtype_##type, "batchwire: " fmt "\n", ##__VA_ARGS__)

/*
 * Deferred lines: a polling or worker lcore must not write to stdio or syslog (a system call, a
 * lock, a stall of milliseconds when the log is slow), so it formats the line into a fixed record and
 * leaves it on a ring that a control thread drains into rte_log. Without plat_log_defer_init (tools,
 * tests) a line is logged at once. A full ring loses the line and counts it.
 */
#define PLAT_LOG_RECORD_BYTES 256 /* one line: level, type and up to 247 bytes of text */

/** Creates the ring of count lines (a power of two) that PLAT_LOG_DEFERRED fills. \return 0 or -errno. */
int plat_log_defer_init(unsigned int count);
/** Frees the ring after a last drain. */
void plat_log_defer_fini(void);
/** On a control thread: logs every line waiting. \return how many. */
unsigned int plat_log_deferred_drain(void);
/** Lines lost to a full ring since start-up. */
uint64_t plat_log_deferred_lost(void);
/** Formats a line for the control thread to log (any thread, no lock or system call). */
void plat_log_deferred(uint32_t level, int logtype, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#define PLAT_LOG_DEFERRED(level, type, fmt, ...) \
	plat_log_deferred(RTE_LOG_##level, plat_logtype_##type, "batchwire: " fmt "\n", ##__VA_ARGS__)

/*
 * A log line a peer can cause (a failed batch, a refused request) passes at most once an interval
 * of the caller's clock; the lines held back meanwhile are counted, for the next line that passes to
 * say. Bounded by time, not by count: a flood costs one line an interval, whatever its rate.
 */
struct plat_log_gate {
	uint64_t next;       /* the first tick at which a line passes again */
	uint64_t suppressed; /* lines held back since the last one that passed */
};

/**
 * \return whether a line may be logged at now (then *held is how many were held back before it,
 * and the gate closes for interval ticks); otherwise the line is counted as held back.
 */
static inline bool plat_log_gate_pass(struct plat_log_gate *g, uint64_t now, uint64_t interval, uint64_t *held)
{
	if (now < g->next) {
		g->suppressed++;
		return false;
	}
	*held = g->suppressed;
	g->suppressed = 0;
	g->next = now + interval;
	return true;
}

/* ---- files --------------------------------------------------------------------------------- */

/**
 * Removes a directory and the files directly in it, as far as it can: EAL 22.11 leaves its runtime
 * directory (config, fbarrays) behind after rte_eal_cleanup, and a test or benchmark whose
 * --file-prefix is its own should not. A NULL, empty or missing path does nothing.
 */
void plat_runtime_dir_remove(const char *path);

/* ---- clock ------------------------------------------------------------------------------------ */

/* TSC ticks per second, read once from EAL at start-up (plat_clock_init). */
extern uint64_t plat_tsc_hz;

/** Caches the TSC frequency; call after rte_eal_init. \return 0 or -ENODEV when EAL has none. */
int plat_clock_init(void);

static inline uint64_t plat_tsc_now(void)
{
	return rte_rdtsc();
}

/* At plat_tsc_hz, through batchwire/clock.h: overflow-safe for any budget, saturating. */
static inline uint64_t plat_us_to_tsc(uint64_t us)
{
	return bw_us_to_ticks(us, plat_tsc_hz);
}

static inline uint64_t plat_tsc_to_us(uint64_t ticks)
{
	return bw_ticks_to_us(ticks, plat_tsc_hz);
}

/** CLOCK_MONOTONIC in ns, for threads that may sleep (control, HTTP; async-signal-safe). */
uint64_t plat_monotonic_ns(void);

/* ---- topology (hwloc) ------------------------------------------------------------------------- */

/* Where one CPU (an lcore's cpu id) sits in the machine. */
struct plat_cpu_location {
	int numa_node;    /* -1 when hwloc reports no NUMA node */
	int package;      /* physical socket */
	int core;         /* logical index of the physical core, unique machine-wide */
	int smt_siblings; /* hardware threads on that core, this one included */
};

/** Loads the topology of this machine. \return 0 or a negative errno. */
int plat_topology_init(void);
/** Loads a synthetic topology instead (hwloc syntax, e.g. "package:1 numa:2 core:2 pu:2"), for tests. */
int plat_topology_init_synthetic(const char *description);
void plat_topology_fini(void);

/** \return 0 and fills *loc, or -ENOENT when the cpu is not in the topology. */
int plat_cpu_locate(unsigned int cpu, struct plat_cpu_location *loc);

/** \return true when two distinct cpus are hardware threads of one physical core. */
bool plat_cpus_are_smt_siblings(unsigned int cpu_a, unsigned int cpu_b);

/* One polling lcore as the topology report needs it. */
struct plat_lcore_place {
	unsigned int lcore_id;
	unsigned int cpu;
	int port_numa_node; /* NUMA node of the port it polls, -1 if unknown (virtual devices) */
};

/**
 * Logs which NUMA node and physical core each polling lcore sits on, and warns when two of them are
 * SMT siblings or when a port's NUMA node differs from its polling lcore's.
 * \return the number of warnings issued (tests count them), or a negative errno.
 */
int plat_topology_report(const struct plat_lcore_place *places, unsigned int count);

/* ---- threads ---------------------------------------------------------------------------------- */

/**
 * Pins the calling thread to one cpu and names it (visible in top -H and gdb).
 * EAL already pins lcores from -l/--lcores; this makes the invariant explicit for every thread we own.
 * \return 0 or a negative errno.
 */
int plat_thread_pin_and_name(unsigned int cpu, const char *name);

/* ---- poll loop -------------------------------------------------------------------------------- */

enum plat_poll_result {
	PLAT_POLL_IDLE = 0, /* found nothing to do */
	PLAT_POLL_BUSY = 1, /* did work */
};

/* One entry of an lcore's poller table: RX, batch windows, executor completions, TX drain... */
struct plat_poller {
	const char *name;
	enum plat_poll_result (*poll)(void *arg);
	void *arg;
};

#define PLAT_POLLERS_MAX 32

/* Loop statistics of one lcore, written only by it, read by telemetry. */
struct plat_poll_stats {
	uint64_t iterations;
	uint64_t busy_iterations;
	uint64_t cycles;        /* TSC ticks in the loop so far */
	uint64_t busy_cycles;   /* ... in iterations where a poller did work: the useful-work share */
};

/**
 * Runs the pollers in table order until *quit becomes true. An iteration is busy when any poller
 * returned BUSY. Never returns early: stop by setting *quit.
 */
void plat_poll_loop(const struct plat_poller *pollers, unsigned int count, const volatile bool *quit,
		    struct plat_poll_stats *stats);

#endif /* BW_PLATFORM_H */
