/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * batchwire: the daemon. Parses its own arguments first (so a typo costs no EAL start), starts EAL,
 * checks every parameter against the machine, loads the models, brings the port up, and runs one
 * poll loop per polling lcore and per worker lcore until SIGINT or SIGTERM. Only main() exits the
 * process.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <time.h>

#include <systemd/sd-daemon.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <inttypes.h>

#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>

#include "config.h"
#include "dataplane.h"
#include "doctor.h"
#include "http.h"
#include "inject.h"
#include "platform.h"
#include "service.h"

#define APP_MAIN_WAIT_US 100000 /* how often a non-polling main lcore looks for a stop request */
#define APP_DRAIN_MAX_US 2000000 /* longest a stopping lcore waits for its batches to be answered */

/*
 * Stopping takes two steps: SIGINT/SIGTERM sets g_force_quit, and polling lcores stop taking requests
 * and drain; the last of them to finish sets g_workers_quit, and worker lcores, which the draining
 * batches needed until then, stop too.
 */
static volatile bool g_force_quit;
static volatile bool g_workers_quit;
static uint32_t g_polls_running;        /* polling lcores not yet drained */
static struct dp_lcore g_lcores[RTE_MAX_LCORE];
static struct dp_lcore *g_poll_lcores[DP_MAX_POLL_LCORES];
static unsigned int g_nb_poll_lcores;
static bool g_is_poll_lcore[RTE_MAX_LCORE];

static volatile bool g_reload_keys; /* SIGHUP: the control thread reads the key file again */
static volatile bool g_reload_models; /* SIGHUP: and has every model reloaded (reload_thread) */
static struct dp_auth *g_auth;       /* atomic: set by the main lcore once the keys are loaded */
static bool g_control_quit;          /* atomic: the control thread ends (after the lcores) */
static int g_control_started;        /* atomic: 1 once the control thread set up, or -errno */
static pthread_t g_control;
static bool g_control_running;       /* the main lcore's: g_control is to be stopped before EAL goes */

/*
 * The drain (SIGTERM or SIGINT): readiness goes off at once (/v2/health/ready 400, PING replies
 * flagged DRAINING) while the lcores go on serving for drain_grace_ms, so that load balancers and
 * clients move away; then g_force_quit: no new requests, those taken answered, exit. A second
 * signal cuts the grace short.
 */
static uint32_t g_drain_grace_ms;      /* the configuration's, for the handler */
static volatile sig_atomic_t g_stop_signals;
static uint64_t g_stop_ns;             /* CLOCK_MONOTONIC at the first signal */
static uint64_t g_replies_at_stop;     /* the control thread's count at its first look after it */
static bool g_replies_counted;

/* No new requests from here (the drain's grace is over): UDP's lcores leave their loops, HTTP
 * inference is refused. Lock-free atomic stores: safe in a handler. */
static void quit_now(void)
{
	app_http_inference(false);
	g_force_quit = true;
}

static volatile sig_atomic_t g_launched; /* every lcore launched: from here a stop drains */

static void signal_handler(int signum)
{
	if (signum == SIGINT || signum == SIGTERM) {
		/* a second stop while still starting (a model loading for minutes): nothing to drain */
		if (g_stop_signals > 0 && !g_launched)
			_exit(EXIT_FAILURE);
		if (g_stop_signals++ == 0) {
			__atomic_store_n(&g_stop_ns, plat_monotonic_ns(), __ATOMIC_RELEASE);
			/* lock-free atomic stores: safe in a handler */
			app_http_ready(false);
			dp_draining_set(true);
		}
		if (g_drain_grace_ms == 0 || g_stop_signals > 1)
			quit_now();
	} else if (signum == SIGHUP) {
		g_reload_keys = true;
		g_reload_models = true;
	}
}

#define APP_CONTROL_TICK_US 100000  /* how soon a SIGHUP is acted on */
#define APP_DRAIN_TICK_US 5000      /* how close to its end the drain's grace period is ended */
#define APP_NOTIFY_EVERY_NS 1000000000ull /* systemd's STATUS and WATCHDOG: once a second */
#define APP_CLOCK_SYNC_TICKS 10     /* the key table's wall clock re-read every second */
#define APP_LOG_RING_LINES 1024     /* lines the lcores may leave between two drains */

/*
 * systemd (Type=notify; sd_notify is a no-op without NOTIFY_SOCKET): READY=1 once every lcore
 * serves (main), STOPPING=1 at the first stop signal, and every second a STATUS line with the
 * replies a second, and WATCHDOG=1 when the unit has WatchdogSec, but only while every polling
 * lcore's loop has gone round since the last look: a stuck lcore lets the watchdog fire.
 */
static struct {
	uint64_t watchdog_us;                 /* 0: no watchdog */
	uint64_t replies;                     /* at the last status */
	uint64_t iterations[DP_MAX_POLL_LCORES];
	bool serving;                         /* atomic: READY=1 sent */
	bool stopping_sent;
} g_notify;

static void notify_init(void)
{
	uint64_t us = 0;

	if (sd_watchdog_enabled(0, &us) > 0)
		g_notify.watchdog_us = us;
}

/* Once a second on the control thread. */
static void notify_tick(void)
{
	struct dp_lcore_stats sum;
	uint64_t replies;
	bool all_moving = true;

	if (!__atomic_load_n(&g_notify.serving, __ATOMIC_ACQUIRE))
		return; /* not serving yet: start-up has TimeoutStartSec, not the watchdog */
	if (g_stop_signals > 0) { /* draining: the lcores leave their loops; the process is alive */
		if (g_notify.watchdog_us != 0)
			sd_notify(0, "WATCHDOG=1");
		return;
	}
	dp_lcores_stats_sum(g_poll_lcores, g_nb_poll_lcores, &sum, NULL);
	replies = dp_stats_replies_total(&sum);
	sd_notifyf(0, "STATUS=serving: %" PRIu64 " replies/s, %u polling lcores", replies - g_notify.replies,
		   g_nb_poll_lcores);
	g_notify.replies = replies;
	for (unsigned int i = 0; i < g_nb_poll_lcores; i++) {
		uint64_t it = __atomic_load_n(&g_poll_lcores[i]->poll.iterations, __ATOMIC_RELAXED);

		all_moving &= it != g_notify.iterations[i];
		g_notify.iterations[i] = it;
	}
	if (g_notify.watchdog_us != 0 && all_moving)
		sd_notify(0, "WATCHDOG=1");
}

/* The drain's clock, on the control thread: the replies so far once, then the end of the grace. */
static void drain_tick(void)
{
	if (!g_notify.stopping_sent) { /* at once: a drain without grace ends before the next notify_tick */
		sd_notify(0, "STOPPING=1\nSTATUS=draining: readiness off, answering what is in flight");
		g_notify.stopping_sent = true;
	}
	if (!g_replies_counted) {
		struct dp_lcore_stats sum;

		dp_lcores_stats_sum(g_poll_lcores, g_nb_poll_lcores, &sum, NULL);
		g_replies_at_stop = dp_stats_replies_total(&sum);
		g_replies_counted = true;
		PLAT_LOG(INFO, app, "stopping: readiness off; serving %u ms more before the drain (drain_grace_ms; "
			 "a second SIGINT or SIGTERM drains now)", g_force_quit ? 0 : g_drain_grace_ms);
	}
	if (!g_force_quit && plat_monotonic_ns() - __atomic_load_n(&g_stop_ns, __ATOMIC_ACQUIRE) >=
				     (uint64_t)g_drain_grace_ms * 1000000ull) {
		PLAT_LOG(INFO, app, "stopping: grace period over, taking no new requests");
		quit_now();
	}
}

/*
 * SIGHUP's model reloads, off the control thread (a reload loads, plans and times a model: seconds),
 * on a control thread of its own that ends when they are done (app_models_reload runs them on yet
 * another, at a lower priority, one reload at a time, and logs each model's outcome).
 */
static void *reload_main(void *arg __rte_unused)
{
	char out[4096];

	app_models_reload(NULL, out, sizeof(out));
	return NULL;
}

static void reload_start(void)
{
	pthread_t t;
	int ret = rte_ctrl_thread_create(&t, "bw-reload", NULL, reload_main, NULL);

	if (ret != 0)
		PLAT_LOG(ERR, app, "SIGHUP: cannot start the reload thread: %s; no model reloaded", strerror(-ret));
	else
		pthread_detach(t);
}

/*
 * The control thread (not pinned to a polling or worker lcore's CPU): the work of the appliance that
 * may block or make system calls while the lcores serve: writing the log lines the lcores leave on
 * the deferred-log ring, re-reading the wall clock that signed request_ids are checked against, and
 * the key file on SIGHUP.
 */
static void *control_main(void *arg)
{
	const struct app_config *cfg = arg;
	uint64_t next_notify_ns = 0;
	unsigned int ticks = 0;
	bool early_reload_said = false;
	char err[256];
	int ret;

	notify_init();
	/* from here, so that its thread runs where control threads run, never on an lcore's CPU */
	ret = app_http_start(&cfg->http, err, sizeof(err));
	if (ret != 0)
		fprintf(stderr, "batchwire: %s\n", err);
	__atomic_store_n(&g_control_started, ret != 0 ? ret : 1, __ATOMIC_RELEASE);
	if (ret != 0)
		return NULL;
	while (!__atomic_load_n(&g_control_quit, __ATOMIC_ACQUIRE)) {
		struct dp_auth *auth;

		usleep(g_stop_signals > 0 && !g_force_quit ? APP_DRAIN_TICK_US : APP_CONTROL_TICK_US);
		plat_log_deferred_drain();
		if (g_stop_signals > 0) {
			app_reloads_stop(); /* one running gives up its waits; none starts */
			drain_tick();
		}
		if (g_reload_models && g_stop_signals == 0 && __atomic_load_n(&g_notify.serving, __ATOMIC_ACQUIRE)) {
			g_reload_models = false;
			reload_start();
		} else if (g_reload_models && !early_reload_said && g_stop_signals == 0) {
			PLAT_LOG(INFO, app, "SIGHUP during start-up: the models are reloaded once serving starts");
			early_reload_said = true;
		}
		if (plat_monotonic_ns() >= next_notify_ns) {
			notify_tick();
			next_notify_ns = plat_monotonic_ns() + APP_NOTIFY_EVERY_NS;
		}
		auth = __atomic_load_n(&g_auth, __ATOMIC_ACQUIRE);
		if (auth == NULL)
			continue;
		if (++ticks % APP_CLOCK_SYNC_TICKS == 0)
			dp_auth_clock_sync(auth);
		if (g_reload_keys) {
			int keys;

			g_reload_keys = false;
			keys = dp_auth_reload(auth, err, sizeof(err));
			if (keys >= 0)
				PLAT_LOG(INFO, app, "SIGHUP: key file reloaded, %d keys accepted", keys);
			else
				PLAT_LOG(ERR, app, "SIGHUP: %s; the keys in use are unchanged", err);
		}
	}
	app_http_stop();
	return NULL;
}

/* Starts the control thread (and the HTTP server with it) and waits until it has. \return 0 or -1. */
static int control_start(pthread_t *thread, const struct app_config *cfg)
{
	int ret = plat_log_defer_init(APP_LOG_RING_LINES);

	if (ret != 0) {
		fprintf(stderr, "batchwire: cannot create the deferred-log ring: %s\n", rte_strerror(-ret));
		return -1;
	}
	ret = rte_ctrl_thread_create(thread, "bw-ctrl", NULL, control_main, (void *)(uintptr_t)cfg);
	if (ret != 0) {
		fprintf(stderr, "batchwire: cannot start the control thread: %s\n", strerror(ret));
		return -1;
	}
	while ((ret = __atomic_load_n(&g_control_started, __ATOMIC_ACQUIRE)) == 0)
		usleep(1000);
	if (ret < 0) {
		pthread_join(*thread, NULL);
		return -1;
	}
	g_control_running = true;
	return 0;
}

/* Ends the control thread (after the lcores: it writes their last log lines) and the HTTP server. */
static void control_stop(pthread_t thread)
{
	__atomic_store_n(&g_control_quit, true, __ATOMIC_RELEASE);
	pthread_join(thread, NULL);
	g_control_running = false;
	plat_log_defer_fini(); /* the lines the lcores left while draining */
	if (plat_log_deferred_lost() != 0)
		PLAT_LOG(WARNING, app, "%" PRIu64 " log lines were lost to a full deferred-log ring",
			 plat_log_deferred_lost());
}

/*
 * A start-up failure once the control thread runs: it is stopped before EAL frees the memory its
 * log ring lives in, then EAL is cleaned up and the process exits 1 (rte_exit's work, in that order).
 */
static void __attribute__((noreturn, format(printf, 1, 2))) startup_fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (g_control_running)
		control_stop(g_control);
	rte_eal_cleanup();
	exit(EXIT_FAILURE);
}

/*
 * Pins the calling lcore's thread to its CPU and names it after its role. Not the main lcore's: the
 * main thread's name is the process's name (ps, pidof, pkill and systemd see it), so it stays
 * "batchwire".
 */
static void lcore_thread_setup(unsigned int lcore, const char *name)
{
	int ret = plat_thread_pin_and_name(rte_lcore_to_cpu_id((int)lcore),
					   lcore == rte_get_main_lcore() ? "batchwire" : name);

	if (ret != 0)
		PLAT_LOG(WARNING, app, "lcore %u: cannot pin and name the thread: %s", lcore, strerror(-ret));
}

static int poll_lcore_main(void *arg)
{
	struct dp_lcore *lc = arg;
	char name[16];

	snprintf(name, sizeof(name), "bw-poll-%u", lc->lcore_id);
	lcore_thread_setup(lc->lcore_id, name);

	struct plat_poller pollers[PLAT_POLLERS_MAX];
	unsigned int nb_pollers = app_service_pollers(lc->lcore_id, true, true, pollers);

	dp_auth_lcore_online(lc);
	plat_poll_loop(pollers, nb_pollers, &g_force_quit, &lc->poll);
	dp_auth_lcore_offline(lc); /* reads no key table past its last burst: reloads need not wait for it */
	/* Stopping: take no new requests, but answer every request already taken before the port stops. */
	if (!app_service_lcore_drain(lc->lcore_id, APP_DRAIN_MAX_US))
		PLAT_LOG(WARNING, app, "lcore %u: batches still in flight after %u ms; their requests go unanswered",
			 lc->lcore_id, APP_DRAIN_MAX_US / 1000);
	if (__atomic_sub_fetch(&g_polls_running, 1, __ATOMIC_ACQ_REL) == 0)
		g_workers_quit = true;
	/* Also a worker: other polling lcores may still be draining batches that need its steps. */
	nb_pollers = app_service_pollers(lc->lcore_id, false, true, pollers);
	if (nb_pollers > 0)
		plat_poll_loop(pollers, nb_pollers, &g_workers_quit, &lc->poll);
	return 0;
}

/* A polling lcore's set-up on its own thread (its GPU stream and executors), before its poll loop. */
static int poll_lcore_start(void *arg)
{
	struct dp_lcore *lc = arg;
	char err[512];
	int ret = app_service_lcore_start(lc->lcore_id, err, sizeof(err));

	if (ret != 0)
		fprintf(stderr, "batchwire: %s\n", err);
	return ret;
}

/*
 * Runs poll_lcore_start on every polling lcore's thread (the main lcore's inline) and waits for them
 * all: the daemon serves only when every lcore is ready. \return 0, or the first error.
 */
static int poll_lcores_start(void)
{
	int first = 0;

	for (unsigned int i = 0; i < g_nb_poll_lcores; i++) {
		struct dp_lcore *lc = g_poll_lcores[i];
		int ret = lc->lcore_id == rte_get_main_lcore() ? poll_lcore_start(lc)
							     : rte_eal_remote_launch(poll_lcore_start, lc, lc->lcore_id);
		if (ret != 0 && first == 0)
			first = ret;
	}
	for (unsigned int i = 0; i < g_nb_poll_lcores; i++) {
		unsigned int lcore = g_poll_lcores[i]->lcore_id;
		int ret = lcore == rte_get_main_lcore() ? 0 : rte_eal_wait_lcore(lcore);

		if (ret != 0 && first == 0)
			first = ret;
	}
	return first;
}

/* A worker lcore that does not poll the port: runs its models' steps until every polling lcore drained. */
static int worker_lcore_main(void *arg)
{
	unsigned int lcore = (unsigned int)(uintptr_t)arg;
	struct plat_poller pollers[PLAT_POLLERS_MAX];
	unsigned int nb_pollers = app_service_pollers(lcore, false, true, pollers);
	char name[16];

	snprintf(name, sizeof(name), "bw-work-%u", lcore);
	lcore_thread_setup(lcore, name);
	plat_poll_loop(pollers, nb_pollers, &g_workers_quit, app_service_worker_stats(lcore));
	return 0;
}

/* Checks the parameters that need EAL to judge: lcores and port. One line per problem. */
static int config_check_machine(struct app_config *cfg)
{
	unsigned int lcore;

	if (cfg->nb_poll_lcores == 0) {
		RTE_LCORE_FOREACH_WORKER(lcore) {
			if (cfg->nb_poll_lcores < DP_MAX_POLL_LCORES)
				cfg->poll_lcores[cfg->nb_poll_lcores++] = lcore;
		}
		if (cfg->nb_poll_lcores == 0)
			cfg->poll_lcores[cfg->nb_poll_lcores++] = rte_get_main_lcore();
	}
	/* The pool keeps mbufs_held mbufs for requests the batchers hold; each polling lcore may hold its
	 * share, so that a flood held by a slow model cannot take the mbufs its RX ring refills from. A
	 * share smaller than a model's batch could never fill that batch. */
	cfg->dp.held_max = cfg->dp.mbufs_held / cfg->nb_poll_lcores;
	for (unsigned int i = 0; i < cfg->nb_models; i++) {
		const struct app_model_config *m = &cfg->models[i];

		if (m->batching.max_batch_size > cfg->dp.held_max) {
			fprintf(stderr, "batchwire: mbufs_held %u leaves each of the %u polling lcores %u held requests, "
				"fewer than model '%s' batches (max_batch_size %u): raise mbufs_held to at least %u\n",
				cfg->dp.mbufs_held, cfg->nb_poll_lcores, cfg->dp.held_max, m->name,
				m->batching.max_batch_size, m->batching.max_batch_size * cfg->nb_poll_lcores);
			return -EINVAL;
		}
	}
	for (unsigned int i = 0; i < cfg->nb_poll_lcores; i++) {
		if (!rte_lcore_is_enabled(cfg->poll_lcores[i])) {
			fprintf(stderr, "batchwire: invalid --poll-lcores: lcore %u is not enabled in EAL: expected "
				"lcores given to EAL with -l or --lcores\n", cfg->poll_lcores[i]);
			return -EINVAL;
		}
	}
	if (rte_eth_dev_count_avail() == 0) {
		fprintf(stderr, "batchwire: no DPDK port: expected a NIC bound to a DPDK driver or a --vdev "
			"(e.g. net_af_packet0,iface=veth0)\n");
		return -ENODEV;
	}
	if (!rte_eth_dev_is_valid_port(cfg->port_id)) {
		fprintf(stderr, "batchwire: invalid --port '%u': expected one of the %u DPDK ports (0..%u)\n",
			cfg->port_id, rte_eth_dev_count_avail(), rte_eth_dev_count_avail() - 1);
		return -EINVAL;
	}
	return 0;
}

static void topology_report(const struct app_config *cfg)
{
	struct plat_lcore_place places[DP_MAX_POLL_LCORES];
	int ret = plat_topology_init();

	if (ret != 0) {
		PLAT_LOG(WARNING, app, "hwloc could not read the topology (%s): placement not checked", strerror(-ret));
		return;
	}
	for (unsigned int i = 0; i < cfg->nb_poll_lcores; i++) {
		places[i] = (struct plat_lcore_place){
			.lcore_id = cfg->poll_lcores[i],
			.cpu = rte_lcore_to_cpu_id((int)cfg->poll_lcores[i]),
			.port_numa_node = rte_eth_dev_socket_id(cfg->port_id),
		};
	}
	plat_topology_report(places, cfg->nb_poll_lcores);
	plat_topology_fini();
}

/* Who may talk to us, said once at start-up: a source left out is dropped without a word, so an
 * operator chasing a silent client needs to see the lists. */
static void allowlists_report(const struct app_config *cfg)
{
	char text[DP_ALLOW_MAX * 20];

	if (dp_allowlist_format(&cfg->dp.allow, text, sizeof(text)) == 0)
		PLAT_LOG(INFO, app, "sources allowed: %s", text);
	for (unsigned int i = 0; i < cfg->nb_models; i++) {
		const struct app_model_config *m = &cfg->models[i];

		if (m->allow.count != 0 && dp_allowlist_format(&m->allow, text, sizeof(text)) == 0)
			PLAT_LOG(INFO, app, "model '%s': sources allowed: %s", m->name, text);
	}
}

/* The mbuf pools: one per NUMA socket that has polling lcores, each listed once. */
struct pool_set {
	unsigned int count;
	struct rte_mempool *pools[RTE_MAX_NUMA_NODES];
};

/*
 * One pool per NUMA socket that has polling lcores, sized for that socket's queues: each lcore's
 * mbufs, rings and TX buffer stay local to it. Queue i is polled by cfg->poll_lcores[i] and takes
 * its mbufs from queue_pools[i]; set lists each pool once.
 */
static int pools_create(const struct app_config *cfg, struct rte_mempool **queue_pools, int *queue_sockets,
			struct pool_set *set)
{
	unsigned int queues_on_socket[RTE_MAX_NUMA_NODES] = {0};
	struct rte_mempool *by_socket[RTE_MAX_NUMA_NODES] = {NULL};

	for (unsigned int i = 0; i < cfg->nb_poll_lcores; i++) {
		queue_sockets[i] = (int)rte_lcore_to_socket_id(cfg->poll_lcores[i]);
		queues_on_socket[queue_sockets[i]]++;
	}
	for (unsigned int i = 0; i < cfg->nb_poll_lcores; i++) {
		int socket = queue_sockets[i];

		if (by_socket[socket] == NULL) {
			by_socket[socket] = dp_pool_create(&cfg->dp, socket, queues_on_socket[socket]);
			if (by_socket[socket] == NULL)
				return -rte_errno;
			set->pools[set->count++] = by_socket[socket];
			PLAT_LOG(INFO, app, "mbuf pool on socket %d: %u mbufs of %u bytes for %u queues", socket,
				 by_socket[socket]->size, dp_mbuf_data_room(cfg->dp.mtu), queues_on_socket[socket]);
		}
		queue_pools[i] = by_socket[socket];
	}
	return 0;
}

static void pools_free(struct pool_set *set)
{
	for (unsigned int i = 0; i < set->count; i++)
		rte_mempool_free(set->pools[i]);
	set->count = 0;
}

static void summary_print(void)
{
	struct dp_lcore_stats sum;

	dp_lcores_stats_sum(g_poll_lcores, g_nb_poll_lcores, &sum, NULL);
	if (g_stop_signals > 0)
		printf("batchwire: drained in %.0f ms (%u ms of grace, then the requests in flight): %" PRIu64
		       " replies sent since the stop request\n", (double)(plat_monotonic_ns() - g_stop_ns) / 1e6,
		       g_drain_grace_ms, dp_stats_replies_total(&sum) - (g_replies_counted ? g_replies_at_stop : 0));
	printf("batchwire: stopped: rx_packets=%" PRIu64 " tx_packets=%" PRIu64 " requests=%" PRIu64
	       " replies=%" PRIu64 " drops=%" PRIu64 "\n", sum.rx_packets, sum.tx_packets, sum.requests,
	       dp_stats_replies_total(&sum), dp_stats_drops_total(&sum));
	fflush(stdout);
}

/* Takes "--doctor" out of argv (wherever it is, before or after "--"). \return whether it was there. */
static bool doctor_arg_take(int *argc, char **argv)
{
	bool found = false;
	int w = 0;

	for (int r = 0; r < *argc; r++) {
		if (r > 0 && strcmp(argv[r], "--doctor") == 0) {
			found = true;
			continue;
		}
		argv[w++] = argv[r];
	}
	argv[w] = NULL;
	*argc = w;
	return found;
}

/*
 * The doctor's checks: all of them to stdout for --doctor (\return its exit status), or only its
 * findings to stderr at start-up (\return 0: EAL says what stops it, the findings say why).
 */
static int doctor_run(const struct app_config *cfg, int eal_argc, char **eal_argv, bool report)
{
	struct rlimit lim = { .rlim_cur = RLIM_INFINITY };
	struct app_doctor_input in = { .root = getenv("BW_DOCTOR_ROOT") != NULL ? getenv("BW_DOCTOR_ROOT") : "",
				       .eal_argc = eal_argc, .eal_argv = eal_argv, .cfg = cfg,
				       .openblas_threads = getenv("OPENBLAS_NUM_THREADS") };
	char *text = NULL;
	size_t len = 0;
	FILE *mem;
	int fails;

	getrlimit(RLIMIT_MEMLOCK, &lim);
	in.memlock = (unsigned long long)lim.rlim_cur;
	if (report) {
		fails = app_doctor(&in, stdout);
		return fails == 0 ? 0 : 1;
	}
	mem = open_memstream(&text, &len);
	if (mem == NULL)
		return 0;
	app_doctor(&in, mem);
	fclose(mem);
	for (char *line = strtok(text, "\n"); line != NULL; line = strtok(NULL, "\n"))
		if (strncmp(line, "doctor: WARN", 12) == 0 || strncmp(line, "doctor: FAIL", 12) == 0)
			fprintf(stderr, "batchwire: %s\n", line);
	free(text);
	return 0;
}

static bool wants_help(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "--version") == 0)
			return true;
	}
	return false;
}

int main(int argc, char **argv)
{
	static struct app_config cfg;
	static struct app_service service;
	struct rte_mempool *pools[DP_MAX_POLL_LCORES];
	static struct pool_set pool_set;
	struct rte_mempool *registered[RTE_MAX_NUMA_NODES + 1];
	unsigned int nb_registered;
	int queue_sockets[DP_MAX_POLL_LCORES];
	struct rte_lpm *allow;
	int eal_argc, app_argc, ret;
	unsigned int lcore;
	char **app_argv;
	bool main_polls = false, doctor;

	/* First of all: a SIGHUP (systemctl reload) or a stop during a slow start-up must not take the
	 * default action and kill the daemon. The handlers only set flags: a reload asked for now runs
	 * once serving starts; after a stop, start-up goes through without ever becoming ready, and the
	 * lcores leave at once (a second stop during start-up exits at once). */
	signal(SIGINT, signal_handler);
	signal(SIGTERM, signal_handler);
	signal(SIGHUP, signal_handler);
	doctor = doctor_arg_take(&argc, argv);
	app_args_split(argc, argv, &eal_argc, &app_argc, &app_argv);
	/* `batchwire --help` without "--" should still show our help, not EAL's. */
	if (app_argc == 1 && wants_help(argc, argv)) {
		app_argc = argc;
		app_argv = argv;
		eal_argc = 1;
	}
	ret = app_config_parse(app_argc, app_argv, &cfg, stdout, stderr);
	if (ret == APP_CONFIG_HELP)
		return 0;
	if (ret < 0)
		return 1;
	/* --doctor: the host against what this configuration needs, and nothing else; otherwise the
	 * same checks' findings, before EAL's own messages */
	if (doctor)
		return doctor_run(&cfg, eal_argc, argv, true);
	doctor_run(&cfg, eal_argc, argv, false);

	ret = rte_eal_init(eal_argc, argv);
	if (ret < 0)
		rte_exit(EXIT_FAILURE, "batchwire: EAL initialisation failed: %s\n", rte_strerror(rte_errno));
	if (plat_clock_init() != 0)
		rte_exit(EXIT_FAILURE, "batchwire: EAL reports no TSC frequency\n");
	/* first: /v2/health/live answers while the models load, and a port in use stops us at once */
	if (control_start(&g_control, &cfg) != 0) {
		rte_eal_cleanup();
		return 1;
	}
	if (config_check_machine(&cfg) != 0)
		startup_fail("%s", ""); /* it said why */
	topology_report(&cfg);

	sd_notify(0, "STATUS=loading the models (planning, packing weights, timing chunk sizes)");
	/* Models first: a model that does not load stops start-up before any port is touched. */
	if (app_service_init(&service, &cfg, stderr) != 0)
		startup_fail("%s", ""); /* it said why, naming the model */
	ret = pools_create(&cfg, pools, queue_sockets, &pool_set);
	if (ret != 0)
		startup_fail("batchwire: cannot create the mbuf pools: %s\n", rte_strerror(-ret));
	if (cfg.http.enabled && app_inject_init(&service, cfg.http.infer_slots, cfg.http.infer_bytes, stderr) != 0)
		startup_fail("%s", ""); /* it said why */
	/* Before the port starts: the GPU reads requests straight from these buffers (and the HTTP
	 * requests' slots). */
	registered[0] = app_inject_pool();
	nb_registered = registered[0] != NULL ? 1 : 0;
	for (unsigned int i = 0; i < pool_set.count; i++)
		registered[nb_registered++] = pool_set.pools[i];
	if (app_service_memory_register(registered, nb_registered, stderr) != 0)
		startup_fail("batchwire: the GPU cannot reach the mbuf pools\n");
	ret = dp_port_init(cfg.port_id, (uint16_t)cfg.nb_poll_lcores, &cfg.dp, pools, queue_sockets);
	if (ret != 0)
		startup_fail("batchwire: port %u failed to start: %s\n", cfg.port_id, rte_strerror(-ret));

	if (cfg.dp.auth.key_file[0] != '\0') {
		char err[512];

		struct dp_auth *auth;

		ret = dp_auth_create(&cfg.dp.auth, &auth, err, sizeof(err));
		if (ret != 0)
			startup_fail("batchwire: %s\n", err);
		__atomic_store_n(&g_auth, auth, __ATOMIC_RELEASE);
		PLAT_LOG(INFO, app, "signed requests: keys from %s, window %u ms, overlap %u s", cfg.dp.auth.key_file,
			 cfg.dp.auth.window_ms, cfg.dp.auth.overlap_s);
	}
	ret = dp_allow_create(&cfg.dp.allow, "bw_allow", SOCKET_ID_ANY, &allow);
	if (ret != 0)
		startup_fail("batchwire: cannot build the allowlist: %s\n", rte_strerror(-ret));
	allowlists_report(&cfg);

	for (unsigned int i = 0; i < cfg.nb_poll_lcores; i++) {
		unsigned int lcore = cfg.poll_lcores[i];
		struct dp_lcore *lc = &g_lcores[lcore];

		ret = dp_lcore_init(lc, lcore, cfg.port_id, (uint16_t)i, queue_sockets[i], &cfg.dp, &service.ops);
		lc->allow = allow;
		if (ret == 0 && g_auth != NULL)
			ret = dp_auth_lcore_init(lc, g_auth, queue_sockets[i]);
		if (ret == 0)
			ret = app_service_lcore_init(&service, lc);
		if (ret != 0)
			startup_fail("batchwire: lcore %u setup failed: %s\n", lcore, rte_strerror(-ret));
		g_poll_lcores[g_nb_poll_lcores++] = lc;
		g_is_poll_lcore[lcore] = true;
	}
	g_polls_running = g_nb_poll_lcores;
	if (poll_lcores_start() != 0)
		startup_fail("batchwire: a polling lcore could not be set up\n");
	dp_telemetry_pools(pool_set.pools, pool_set.count);
	ret = dp_telemetry_register(g_poll_lcores, g_nb_poll_lcores, app_service_telemetry);
	if (ret == 0)
		ret = app_service_telemetry_register();
	if (ret == 0 && g_auth != NULL)
		ret = dp_telemetry_auth(g_auth);
	if (ret != 0)
		PLAT_LOG(WARNING, app, "telemetry commands not registered: %s", rte_strerror(-ret));

	g_drain_grace_ms = cfg.drain_grace_ms;
	app_http_lcores(g_poll_lcores, g_nb_poll_lcores);

	char ip[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &cfg.dp.ipv4_addr, ip, sizeof(ip));
	PLAT_LOG(INFO, app, "serving on %s:%u (port %u, %u polling lcores); SIGINT or SIGTERM stops", ip,
		 cfg.dp.udp_port, cfg.port_id, g_nb_poll_lcores);

	for (unsigned int i = 0; i < g_nb_poll_lcores; i++) {
		struct dp_lcore *lc = g_poll_lcores[i];
		if (lc->lcore_id == rte_get_main_lcore()) {
			main_polls = true;
			continue;
		}
		ret = rte_eal_remote_launch(poll_lcore_main, lc, lc->lcore_id);
		if (ret != 0)
			startup_fail("batchwire: cannot launch lcore %u: %s\n", lc->lcore_id, strerror(-ret));
	}
	RTE_LCORE_FOREACH_WORKER(lcore) {
		if (g_is_poll_lcore[lcore] || !app_service_is_worker(lcore))
			continue;
		ret = rte_eal_remote_launch(worker_lcore_main, (void *)(uintptr_t)lcore, lcore);
		if (ret != 0)
			startup_fail("batchwire: cannot launch worker lcore %u: %s\n", lcore, strerror(-ret));
	}
	g_launched = 1;
	if (g_stop_signals == 0) { /* every model loaded, every lcore launched; not when already stopping */
		app_http_inference(true);
		if (g_force_quit) /* a stop came in between */
			app_http_inference(false);
		app_http_ready(true);
		sd_notifyf(0, "READY=1\nSTATUS=serving on %s:%u, %u polling lcores", ip, cfg.dp.udp_port, g_nb_poll_lcores);
		__atomic_store_n(&g_notify.serving, true, __ATOMIC_RELEASE);
	}
	if (main_polls)
		poll_lcore_main(&g_lcores[rte_get_main_lcore()]);
	else if (app_service_is_worker(rte_get_main_lcore()))
		worker_lcore_main((void *)(uintptr_t)rte_get_main_lcore());
	else
		while (!g_force_quit)
			usleep(APP_MAIN_WAIT_US);
	rte_eal_mp_wait_lcore();
	app_inject_close(); /* nothing more is answered: HTTP requests still waiting give up */
	control_stop(g_control);

	PLAT_LOG(INFO, app, "stopping: lcores joined, stopping port %u", cfg.port_id);
	summary_print();
	dp_port_fini(cfg.port_id);
	for (unsigned int i = 0; i < g_nb_poll_lcores; i++)
		dp_lcore_fini(g_poll_lcores[i]);
	dp_auth_destroy(g_auth);
	app_service_fini(&service); /* first: it unregisters the pools' memory from the GPU */
	pools_free(&pool_set);
	rte_eal_cleanup();
	return 0;
}
