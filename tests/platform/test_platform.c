/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the platform layer: the hwloc topology on synthetic machines (so the answers do not
 * depend on the host), the placement report's warning count, the poll loop's order and counters, and
 * thread pinning and naming. No EAL: rte_log writes to stderr before rte_eal_init.
 *
 * In a synthetic hwloc topology the PUs' os_index (the cpu id) follows their logical order unless the
 * description says otherwise: in "package:2 numa:1 core:2 pu:2", cpus 0-1 are core 0, 2-3 core 1 (both
 * on package 0, NUMA node 0), 4-5 core 2 and 6-7 core 3 (package 1, NUMA node 1). The "indexes="
 * attribute gives Linux's usual numbering instead, where the sibling of cpu n is cpu n + 4.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "../bw_cunit.h"

#include "platform.h"

#define TOPO_2P_SMT "package:2 numa:1 core:2 pu:2"
#define TOPO_1P_NOSMT "package:1 core:4 pu:1"
#define TOPO_LINUX_SMT "package:2 core:2 pu:2(indexes=0,4,1,5,2,6,3,7)"

/* ---- topology --------------------------------------------------------------------------------------- */

static void check_locate(unsigned int cpu, int numa_node, int package, int core, int smt_siblings)
{
	struct plat_cpu_location loc;

	memset(&loc, 0x5a, sizeof(loc));
	CU_ASSERT_EQUAL_FATAL(plat_cpu_locate(cpu, &loc), 0);
	CU_ASSERT_EQUAL(loc.numa_node, numa_node);
	CU_ASSERT_EQUAL(loc.package, package);
	CU_ASSERT_EQUAL(loc.core, core);
	CU_ASSERT_EQUAL(loc.smt_siblings, smt_siblings);
	if (loc.numa_node != numa_node || loc.package != package || loc.core != core ||
	    loc.smt_siblings != smt_siblings)
		printf("\n  cpu %u: numa %d package %d core %d smt %d, expected %d %d %d %d ", cpu,
			loc.numa_node, loc.package, loc.core, loc.smt_siblings, numa_node, package, core,
			smt_siblings);
}

static void test_topology_two_packages_smt(void)
{
	struct plat_cpu_location loc;

	CU_ASSERT_EQUAL_FATAL(plat_topology_init_synthetic(TOPO_2P_SMT), 0);
	for (unsigned int cpu = 0; cpu < 8; cpu++)
		check_locate(cpu, (int)cpu / 4, (int)cpu / 4, (int)cpu / 2, 2);

	CU_ASSERT_TRUE(plat_cpus_are_smt_siblings(0, 1));
	CU_ASSERT_TRUE(plat_cpus_are_smt_siblings(1, 0));
	CU_ASSERT_TRUE(plat_cpus_are_smt_siblings(6, 7));
	CU_ASSERT_FALSE(plat_cpus_are_smt_siblings(1, 2)); /* neighbours on different cores */
	CU_ASSERT_FALSE(plat_cpus_are_smt_siblings(0, 4)); /* other package */
	CU_ASSERT_FALSE(plat_cpus_are_smt_siblings(3, 3)); /* a cpu is not its own sibling */
	CU_ASSERT_FALSE(plat_cpus_are_smt_siblings(0, 8)); /* unknown cpu */
	CU_ASSERT_FALSE(plat_cpus_are_smt_siblings(8, 9));
	CU_ASSERT_FALSE(plat_cpus_are_smt_siblings(100000, 0));

	CU_ASSERT_EQUAL(plat_cpu_locate(8, &loc), -ENOENT);
	CU_ASSERT_EQUAL(plat_cpu_locate(100000, &loc), -ENOENT);
	plat_topology_fini();
}

static void test_topology_one_package_no_smt(void)
{
	struct plat_cpu_location loc;

	CU_ASSERT_EQUAL_FATAL(plat_topology_init_synthetic(TOPO_1P_NOSMT), 0);
	/* hwloc gives a machine without NUMA nodes one node, 0 */
	for (unsigned int cpu = 0; cpu < 4; cpu++)
		check_locate(cpu, 0, 0, (int)cpu, 1);
	for (unsigned int a = 0; a < 4; a++) {
		for (unsigned int b = 0; b < 4; b++)
			CU_ASSERT_FALSE(plat_cpus_are_smt_siblings(a, b));
	}
	CU_ASSERT_EQUAL(plat_cpu_locate(4, &loc), -ENOENT);
	plat_topology_fini();
}

static void test_topology_os_index(void)
{
	/* Cpu ids are os indexes, not logical positions. */
	CU_ASSERT_EQUAL_FATAL(plat_topology_init_synthetic(TOPO_LINUX_SMT), 0);
	CU_ASSERT_TRUE(plat_cpus_are_smt_siblings(0, 4));
	CU_ASSERT_TRUE(plat_cpus_are_smt_siblings(3, 7));
	CU_ASSERT_FALSE(plat_cpus_are_smt_siblings(0, 1));
	check_locate(0, 0, 0, 0, 2);
	check_locate(4, 0, 0, 0, 2);
	check_locate(1, 0, 0, 1, 2);
	check_locate(2, 0, 1, 2, 2);
	check_locate(7, 0, 1, 3, 2);
	plat_topology_fini();
}

static void test_topology_invalid(void)
{
	struct plat_cpu_location loc;

	CU_ASSERT_EQUAL(plat_topology_init_synthetic("garbage:3"), -EINVAL);
	CU_ASSERT_EQUAL(plat_topology_init_synthetic("package:2 numa:"), -EINVAL);
	CU_ASSERT_EQUAL(plat_topology_init_synthetic(""), -EINVAL);
	/* Nothing loaded: every cpu is unknown and the report refuses to run. */
	CU_ASSERT_EQUAL(plat_cpu_locate(0, &loc), -ENOENT);
	CU_ASSERT_FALSE(plat_cpus_are_smt_siblings(0, 1));
	CU_ASSERT_EQUAL(plat_topology_report(NULL, 0), -ENODEV);

	/* A failed load replaces a good one: no stale topology survives it. */
	CU_ASSERT_EQUAL_FATAL(plat_topology_init_synthetic(TOPO_2P_SMT), 0);
	CU_ASSERT_EQUAL(plat_topology_init_synthetic("garbage:3"), -EINVAL);
	CU_ASSERT_EQUAL(plat_cpu_locate(0, &loc), -ENOENT);

	/* Loading twice replaces the first. */
	CU_ASSERT_EQUAL_FATAL(plat_topology_init_synthetic(TOPO_2P_SMT), 0);
	CU_ASSERT_EQUAL_FATAL(plat_topology_init_synthetic(TOPO_1P_NOSMT), 0);
	CU_ASSERT_EQUAL(plat_cpu_locate(5, &loc), -ENOENT);
	CU_ASSERT_FALSE(plat_cpus_are_smt_siblings(0, 1));
	plat_topology_fini();
	plat_topology_fini(); /* twice is harmless */
}

static void test_topology_host(void)
{
	struct plat_cpu_location loc;

	/* The real machine: cpu 0 exists everywhere we run. */
	CU_ASSERT_EQUAL_FATAL(plat_topology_init(), 0);
	CU_ASSERT_EQUAL(plat_cpu_locate(0, &loc), 0);
	CU_ASSERT_TRUE(loc.smt_siblings >= 1);
	CU_ASSERT_TRUE(loc.core >= 0);
	plat_topology_fini();
}

/* ---- topology report ---------------------------------------------------------------------------------- */

static int report(const struct plat_lcore_place *places, unsigned int count)
{
	return plat_topology_report(places, count);
}

#define REPORT(...) \
	report((const struct plat_lcore_place[]){__VA_ARGS__}, \
	       sizeof((const struct plat_lcore_place[]){__VA_ARGS__}) / sizeof(struct plat_lcore_place))

static void test_report_two_packages(void)
{
	CU_ASSERT_EQUAL_FATAL(plat_topology_init_synthetic(TOPO_2P_SMT), 0);
	printf("\n");

	CU_ASSERT_EQUAL(plat_topology_report(NULL, 0), 0);
	/* SMT siblings: one warning for the pair */
	CU_ASSERT_EQUAL(REPORT({1, 0, -1}, {2, 1, -1}), 1);
	CU_ASSERT_EQUAL(REPORT({1, 6, 1}, {2, 7, 1}), 1);
	/* two pairs of siblings */
	CU_ASSERT_EQUAL(REPORT({1, 0, 0}, {2, 1, 0}, {3, 2, 0}, {4, 3, 0}), 2);
	/* different cores of one NUMA node, port on that node */
	CU_ASSERT_EQUAL(REPORT({1, 0, 0}, {2, 2, 0}), 0);
	CU_ASSERT_EQUAL(REPORT({1, 4, 1}, {2, 6, 1}), 0);
	CU_ASSERT_EQUAL(REPORT({1, 1, 0}), 0);
	/* port on the other NUMA node: one warning per lcore */
	CU_ASSERT_EQUAL(REPORT({1, 0, 1}, {2, 2, 1}), 2);
	CU_ASSERT_EQUAL(REPORT({1, 4, 0}), 1);
	CU_ASSERT_EQUAL(REPORT({1, 0, 0}, {2, 4, 0}), 1);
	/* port node unknown (virtual device): no NUMA warning, whatever the lcores' nodes */
	CU_ASSERT_EQUAL(REPORT({1, 0, -1}, {2, 4, -1}), 0);
	/* both at once: siblings on the wrong node */
	CU_ASSERT_EQUAL(REPORT({1, 4, 0}, {2, 5, 0}), 3);
	/* a cpu hwloc does not know */
	CU_ASSERT_EQUAL(REPORT({1, 8, 0}), 1);
	CU_ASSERT_EQUAL(REPORT({1, 0, 0}, {2, 100000, -1}), 1);
	plat_topology_fini();
}

static void test_report_one_package(void)
{
	CU_ASSERT_EQUAL_FATAL(plat_topology_init_synthetic(TOPO_1P_NOSMT), 0);
	printf("\n");
	CU_ASSERT_EQUAL(REPORT({1, 0, 0}, {2, 1, 0}, {3, 2, 0}, {4, 3, 0}), 0);
	CU_ASSERT_EQUAL(REPORT({1, 0, 1}, {2, 1, 1}), 2);
	CU_ASSERT_EQUAL(REPORT({1, 0, -1}, {2, 1, -1}), 0);
	plat_topology_fini();
}

/* ---- poll loop ------------------------------------------------------------------------------------------ */

#define TRACE_MAX 256

struct poll_trace {
	char calls[TRACE_MAX]; /* one letter per call, in call order */
	unsigned int len;
};

struct test_poller {
	char letter;
	unsigned int calls;
	unsigned int busy_every;    /* BUSY on every n-th call; 0: never */
	unsigned int busy_on;       /* also BUSY on this call; 0: none */
	unsigned int quit_on;       /* sets *quit on this call; 0: never */
	volatile bool *quit;
	struct poll_trace *trace;
};

static enum plat_poll_result test_poll(void *arg)
{
	struct test_poller *p = arg;

	p->calls++;
	if (p->trace->len < TRACE_MAX)
		p->trace->calls[p->trace->len++] = p->letter;
	if (p->quit_on != 0 && p->calls == p->quit_on)
		*p->quit = true;
	if ((p->busy_every != 0 && p->calls % p->busy_every == 0) || p->calls == p->busy_on)
		return PLAT_POLL_BUSY;
	return PLAT_POLL_IDLE;
}

static void test_poll_loop_counts(void)
{
	volatile bool quit = false;
	struct poll_trace trace = {.len = 0};
	struct test_poller rx = {.letter = 'r', .busy_every = 3, .quit = &quit, .trace = &trace};
	struct test_poller tx = {.letter = 't', .busy_on = 5, .quit_on = 10, .quit = &quit, .trace = &trace};
	const struct plat_poller table[] = {{"rx", test_poll, &rx}, {"tx", test_poll, &tx}};
	struct plat_poll_stats stats = {0};

	plat_poll_loop(table, 2, &quit, &stats);
	/* tx quits on its 10th call, the end of iteration 10; busy in iterations 3, 5, 6, 9 */
	CU_ASSERT_EQUAL(stats.iterations, 10);
	CU_ASSERT_EQUAL(stats.busy_iterations, 4);
	CU_ASSERT_EQUAL(rx.calls, 10);
	CU_ASSERT_EQUAL(tx.calls, 10);
	CU_ASSERT_EQUAL(trace.len, 20);
	for (unsigned int i = 0; i < trace.len; i++)
		CU_ASSERT_EQUAL(trace.calls[i], i % 2 == 0 ? 'r' : 't');

	/* The first poller sets quit: the iteration still finishes, in order. */
	quit = false;
	trace.len = 0;
	rx = (struct test_poller){.letter = 'r', .busy_every = 1, .quit_on = 4, .quit = &quit, .trace = &trace};
	tx = (struct test_poller){.letter = 't', .quit = &quit, .trace = &trace};
	stats = (struct plat_poll_stats){0};
	plat_poll_loop(table, 2, &quit, &stats);
	CU_ASSERT_EQUAL(stats.iterations, 4);
	CU_ASSERT_EQUAL(stats.busy_iterations, 4);
	CU_ASSERT_EQUAL(stats.busy_cycles, stats.cycles); /* every iteration busy: all of the time */
	CU_ASSERT(stats.cycles > 0);
	CU_ASSERT_EQUAL(rx.calls, 4);
	CU_ASSERT_EQUAL(tx.calls, 4);
	CU_ASSERT_EQUAL(trace.len, 8);
	CU_ASSERT_EQUAL(memcmp(trace.calls, "rtrtrtrt", 8), 0);

	/* Both busy in one iteration count once. */
	quit = false;
	trace.len = 0;
	rx = (struct test_poller){.letter = 'r', .busy_every = 2, .quit = &quit, .trace = &trace};
	tx = (struct test_poller){.letter = 't', .busy_every = 2, .quit_on = 7, .quit = &quit, .trace = &trace};
	stats = (struct plat_poll_stats){0};
	plat_poll_loop(table, 2, &quit, &stats);
	CU_ASSERT_EQUAL(stats.iterations, 7);
	CU_ASSERT_EQUAL(stats.busy_iterations, 3);
	CU_ASSERT(stats.busy_cycles <= stats.cycles);

	/* Never busy. */
	quit = false;
	trace.len = 0;
	rx = (struct test_poller){.letter = 'r', .quit = &quit, .trace = &trace};
	tx = (struct test_poller){.letter = 't', .quit_on = 3, .quit = &quit, .trace = &trace};
	stats = (struct plat_poll_stats){0};
	plat_poll_loop(table, 2, &quit, &stats);
	CU_ASSERT_EQUAL(stats.iterations, 3);
	CU_ASSERT_EQUAL(stats.busy_iterations, 0);
	CU_ASSERT_EQUAL(stats.busy_cycles, 0);
	CU_ASSERT(stats.cycles > 0);
}

static void test_poll_loop_quit_before_start(void)
{
	volatile bool quit = true;
	struct poll_trace trace = {.len = 0};
	struct test_poller rx = {.letter = 'r', .busy_every = 1, .quit = &quit, .trace = &trace};
	const struct plat_poller table[] = {{"rx", test_poll, &rx}};
	struct plat_poll_stats stats = {0};

	plat_poll_loop(table, 1, &quit, &stats);
	CU_ASSERT_EQUAL(stats.iterations, 0);
	CU_ASSERT_EQUAL(stats.busy_iterations, 0);
	CU_ASSERT_EQUAL(rx.calls, 0);
}

/* ---- threads ------------------------------------------------------------------------------------------- */

struct pin_job {
	unsigned int cpu;
	const char *name;
	int ret;
	char name_after[32];
	int cpu_after;
	bool only_cpu_in_mask;
};

static void *pin_thread(void *arg)
{
	struct pin_job *job = arg;
	cpu_set_t set;

	job->ret = plat_thread_pin_and_name(job->cpu, job->name);
	pthread_getname_np(pthread_self(), job->name_after, sizeof(job->name_after));
	job->cpu_after = sched_getcpu();
	CPU_ZERO(&set);
	job->only_cpu_in_mask = pthread_getaffinity_np(pthread_self(), sizeof(set), &set) == 0 &&
				CPU_COUNT(&set) == 1 && job->cpu < CPU_SETSIZE && CPU_ISSET(job->cpu, &set);
	return NULL;
}

/* Runs the call on a thread of its own, so the test's main thread keeps its name and cpus. */
static void pin_in_thread(struct pin_job *job)
{
	pthread_t thread;

	CU_ASSERT_EQUAL_FATAL(pthread_create(&thread, NULL, pin_thread, job), 0);
	CU_ASSERT_EQUAL_FATAL(pthread_join(thread, NULL), 0);
}

/* The lowest cpu this process may run on: the pin case's cpu, so it runs whatever cpu set it is given. */
static unsigned int first_allowed_cpu(void)
{
	cpu_set_t allowed;
	unsigned int cpu = 0;

	CU_ASSERT_EQUAL_FATAL(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
	while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &allowed))
		cpu++;
	CU_ASSERT_FATAL(cpu < CPU_SETSIZE); /* a running process has a cpu */
	return cpu;
}

static void test_thread_pin_and_name(void)
{
	unsigned int cpu = first_allowed_cpu();
	struct pin_job job;

	job = (struct pin_job){.cpu = cpu, .name = "bw-poll-1"};
	pin_in_thread(&job);
	CU_ASSERT_EQUAL(job.ret, 0);
	CU_ASSERT_STRING_EQUAL(job.name_after, "bw-poll-1");
	CU_ASSERT_EQUAL(job.cpu_after, (int)cpu);
	CU_ASSERT_TRUE(job.only_cpu_in_mask);

	/* 15 characters fit; longer names are cut to 15 rather than refused. */
	job = (struct pin_job){.cpu = cpu, .name = "bw-fifteen-char"};
	pin_in_thread(&job);
	CU_ASSERT_EQUAL(job.ret, 0);
	CU_ASSERT_STRING_EQUAL(job.name_after, "bw-fifteen-char");

	job = (struct pin_job){.cpu = cpu, .name = "bw-poll-lcore-127-with-a-long-name"};
	pin_in_thread(&job);
	CU_ASSERT_EQUAL(job.ret, 0);
	CU_ASSERT_STRING_EQUAL(job.name_after, "bw-poll-lcore-1");
	CU_ASSERT_EQUAL(strlen(job.name_after), 15);

	job = (struct pin_job){.cpu = 100000, .name = "bw-nowhere"};
	pin_in_thread(&job);
	CU_ASSERT_EQUAL(job.ret, -EINVAL);
	CU_ASSERT_STRING_NOT_EQUAL(job.name_after, "bw-nowhere");
	/* CPU_SETSIZE itself is the first cpu a cpu_set_t cannot hold */
	job = (struct pin_job){.cpu = CPU_SETSIZE, .name = "bw-nowhere"};
	pin_in_thread(&job);
	CU_ASSERT_EQUAL(job.ret, -EINVAL);
}

/* A line passes, then none until the interval is over, each held back counted for the next. */
static void test_log_gate(void)
{
	struct plat_log_gate g = { 0 };
	uint64_t held = 99;

	CU_ASSERT(plat_log_gate_pass(&g, 1000, 100, &held));
	CU_ASSERT_EQUAL(held, 0);
	for (uint64_t t = 1000; t < 1100; t += 10)
		CU_ASSERT(!plat_log_gate_pass(&g, t, 100, &held));
	CU_ASSERT(plat_log_gate_pass(&g, 1100, 100, &held));
	CU_ASSERT_EQUAL(held, 10);
	CU_ASSERT(!plat_log_gate_pass(&g, 1150, 100, &held));
	CU_ASSERT(plat_log_gate_pass(&g, 5000, 100, &held)); /* long quiet: one passes, no burst */
	CU_ASSERT_EQUAL(held, 1);
	CU_ASSERT(!plat_log_gate_pass(&g, 5001, 100, &held));
}

/* SipHash-2-4 against the reference vectors (key 00..0f, messages 00 01 02 ... of each length; the
 * same as OpenSSL's `openssl mac -macopt hexkey:000102030405060708090a0b0c0d0e0f SIPHASH`), and two
 * random keys that differ. */
static void test_siphash(void)
{
	static const struct {
		size_t len;
		uint64_t want;
	} vectors[] = {
		{0, UINT64_C(0x726fdb47dd0e0e31)},
		{8, UINT64_C(0x93f5f5799a932462)},
		{15, UINT64_C(0xa129ca6149be45e5)},
		{16, UINT64_C(0x3f2acc7f57c29bdb)},
	};
	const struct plat_hash_key key = {UINT64_C(0x0706050403020100), UINT64_C(0x0f0e0d0c0b0a0908)};
	struct plat_hash_key a, b;
	uint8_t msg[16];

	for (unsigned int i = 0; i < sizeof(msg); i++)
		msg[i] = (uint8_t)i;
	for (unsigned int i = 0; i < sizeof(vectors) / sizeof(vectors[0]); i++)
		CU_ASSERT_EQUAL(plat_siphash(&key, msg, vectors[i].len), vectors[i].want);
	CU_ASSERT_EQUAL_FATAL(plat_hash_key_random(&a), 0);
	CU_ASSERT_EQUAL_FATAL(plat_hash_key_random(&b), 0);
	CU_ASSERT(a.k0 != b.k0 || a.k1 != b.k1);
	CU_ASSERT(plat_siphash(&a, msg, 16) != plat_siphash(&b, msg, 16));
}

int main(void)
{
	static CU_TestInfo tests[] = {
		{"log gate: one line an interval, the rest counted", test_log_gate},
		{"siphash: reference vectors, random keys", test_siphash},
		{"topology " TOPO_2P_SMT, test_topology_two_packages_smt},
		{"topology " TOPO_1P_NOSMT, test_topology_one_package_no_smt},
		{"topology cpu ids are os indexes", test_topology_os_index},
		{"topology invalid description", test_topology_invalid},
		{"topology of this host", test_topology_host},
		{"report on " TOPO_2P_SMT, test_report_two_packages},
		{"report on " TOPO_1P_NOSMT, test_report_one_package},
		{"poll loop counts and order", test_poll_loop_counts},
		{"poll loop quit before start", test_poll_loop_quit_before_start},
		{"thread pin and name", test_thread_pin_and_name},
		CU_TEST_INFO_NULL,
	};
	static CU_SuiteInfo suites[] = {
		{.pName = "platform", .pTests = tests},
		CU_SUITE_INFO_NULL,
	};

	return bw_cunit_run(suites);
}
