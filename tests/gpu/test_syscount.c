/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syscount.h on this CPU: exact counts of known calls, none for pure computation, the re-issued
 * calls' results, the emulated signal mask, threads inheriting the filter, and the top-N line.
 * Every measurement runs on a thread of its own (a filter never comes off), and each window is
 * "read, act, read": CUnit's and printf's own calls fall outside it. Without seccomp (a kernel or a
 * container that refuses filters) it prints the reason and exits 77, meson's SKIP.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../bw_cunit.h"

#include "syscount.h"

#define CALLS 1000          /* of each kind in the exact-count test */
#define COMPUTE_ITERS 20000000u
#define CHILD_CALLS 3

/* ---- the exact counts ----------------------------------------------------------------------------- */

struct exact_result {
	int install_rc;
	char err[256];
	struct syscount ppid, writes, compute; /* deltas of the three windows */
	long ppid_bad, write_bad;             /* calls whose re-issued result was wrong */
	pid_t want_ppid;
	uint64_t sink;
};

static void *exact_main(void *arg)
{
	struct exact_result *r = arg;
	struct syscount a, b;
	volatile uint64_t acc = 1;
	int fd;

	r->install_rc = syscount_install(r->err, sizeof(r->err));
	if (r->install_rc != 0)
		return NULL;
	fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	syscount_read(&a);
	for (int i = 0; i < CALLS; i++)
		r->ppid_bad += syscall(SYS_getppid) != r->want_ppid;
	syscount_read(&b);
	syscount_delta(&b, &a, &r->ppid);

	syscount_read(&a);
	for (int i = 0; i < CALLS; i++)
		r->write_bad += write(fd, "x", 1) != 1;
	syscount_read(&b);
	syscount_delta(&b, &a, &r->writes);

	syscount_read(&a);
	for (uint32_t i = 0; i < COMPUTE_ITERS; i++)
		acc = acc * 6364136223846793005ull + i;
	syscount_read(&b);
	syscount_delta(&b, &a, &r->compute);
	r->sink = acc;
	close(fd);
	return NULL;
}

static void test_exact_counts(void)
{
	struct exact_result r = { .want_ppid = getppid() };
	pthread_t t;

	CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, exact_main, &r), 0);
	pthread_join(t, NULL);
	CU_ASSERT_EQUAL_FATAL(r.install_rc, 0);
	CU_ASSERT_EQUAL(r.ppid.per_nr[SYS_getppid], CALLS);
	CU_ASSERT_EQUAL(r.ppid.total, CALLS);
	CU_ASSERT_EQUAL(r.ppid_bad, 0);
	CU_ASSERT_EQUAL(r.writes.per_nr[SYS_write], CALLS);
	CU_ASSERT_EQUAL(r.writes.total, CALLS);
	CU_ASSERT_EQUAL(r.write_bad, 0);
	CU_ASSERT_EQUAL(r.compute.total, 0);
	printf("  getppid window %llu calls, write window %llu, compute window %llu\n",
	       (unsigned long long)r.ppid.total, (unsigned long long)r.writes.total,
	       (unsigned long long)r.compute.total);
}

/* ---- the signal mask ------------------------------------------------------------------------------ */

struct mask_result {
	int install_rc;
	char err[256];
	int usr1_blocked, sys_blocked_after_fill, usr1_after_unblock;
	long ppid_after_fill;
	uint64_t sigprocmask_calls;
};

static void *mask_main(void *arg)
{
	struct mask_result *r = arg;
	struct syscount a, b;
	sigset_t set, cur;

	r->install_rc = syscount_install(r->err, sizeof(r->err));
	if (r->install_rc != 0)
		return NULL;
	syscount_read(&a);
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	pthread_sigmask(SIG_BLOCK, NULL, &cur);
	r->usr1_blocked = sigismember(&cur, SIGUSR1);
	/* blocking everything must leave SIGSYS open, or the next trapped call would kill us */
	sigfillset(&set);
	pthread_sigmask(SIG_SETMASK, &set, NULL);
	r->ppid_after_fill = syscall(SYS_getppid);
	pthread_sigmask(SIG_BLOCK, NULL, &cur);
	r->sys_blocked_after_fill = sigismember(&cur, SIGSYS);
	sigemptyset(&set);
	pthread_sigmask(SIG_SETMASK, &set, NULL);
	pthread_sigmask(SIG_BLOCK, NULL, &cur);
	r->usr1_after_unblock = sigismember(&cur, SIGUSR1);
	syscount_read(&b);
	r->sigprocmask_calls = b.per_nr[SYS_rt_sigprocmask] - a.per_nr[SYS_rt_sigprocmask];
	return NULL;
}

static void test_signal_mask(void)
{
	struct mask_result r = { 0 };
	pthread_t t;

	CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, mask_main, &r), 0);
	pthread_join(t, NULL);
	CU_ASSERT_EQUAL_FATAL(r.install_rc, 0);
	CU_ASSERT_EQUAL(r.usr1_blocked, 1);
	CU_ASSERT_EQUAL(r.sys_blocked_after_fill, 0);
	CU_ASSERT_EQUAL(r.ppid_after_fill, getppid());
	CU_ASSERT_EQUAL(r.usr1_after_unblock, 0);
	CU_ASSERT_EQUAL(r.sigprocmask_calls, 6);
}

/* ---- threads inherit the filter --------------------------------------------------------------------- */

struct inherit_result {
	int install_rc, create_rc;
	char err[256];
	struct syscount child; /* the child's own window */
	long child_bad;
	pid_t want_ppid;
};

static void *child_main(void *arg)
{
	struct inherit_result *r = arg;
	struct syscount a, b;

	syscount_read(&a);
	for (int i = 0; i < CHILD_CALLS; i++)
		r->child_bad += syscall(SYS_getppid) != r->want_ppid;
	syscount_read(&b);
	syscount_delta(&b, &a, &r->child);
	return NULL;
}

static void *parent_main(void *arg)
{
	struct inherit_result *r = arg;
	pthread_t t;

	r->install_rc = syscount_install(r->err, sizeof(r->err));
	if (r->install_rc != 0)
		return NULL;
	/* pthread_create under the filter: its mmap, mprotect and signal-mask calls are trapped, clone3 passes */
	r->create_rc = pthread_create(&t, NULL, child_main, r);
	if (r->create_rc == 0)
		pthread_join(t, NULL);
	return NULL;
}

static void test_threads_inherit(void)
{
	struct inherit_result r = { .want_ppid = getppid() };
	pthread_t t;

	CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, parent_main, &r), 0);
	pthread_join(t, NULL);
	CU_ASSERT_EQUAL_FATAL(r.install_rc, 0);
	CU_ASSERT_EQUAL_FATAL(r.create_rc, 0);
	CU_ASSERT_EQUAL(r.child.per_nr[SYS_getppid], CHILD_CALLS);
	CU_ASSERT_EQUAL(r.child.total, CHILD_CALLS);
	CU_ASSERT_EQUAL(r.child_bad, 0);
}

/* ---- the top-N line ---------------------------------------------------------------------------------- */

static void test_top(void)
{
	static struct syscount c;
	char buf[128];

	CU_ASSERT_STRING_EQUAL(syscount_top(&c, 3, buf, sizeof(buf)), "-");
	c.per_nr[SYS_ioctl] = 12;
	c.per_nr[SYS_futex] = 3;
	c.per_nr[SYS_write] = 5;
	c.per_nr[SYSCOUNT_NR_MAX - 1] = 1;
	CU_ASSERT_STRING_EQUAL(syscount_top(&c, 2, buf, sizeof(buf)), "ioctl:12,write:5");
	CU_ASSERT_STRING_EQUAL(syscount_top(&c, 8, buf, sizeof(buf)), "ioctl:12,write:5,futex:3,nr511:1");
	c.other = 2;
	CU_ASSERT_STRING_EQUAL(syscount_top(&c, 1, buf, sizeof(buf)), "ioctl:12,other:2");
	CU_ASSERT_STRING_EQUAL(syscount_name(SYS_getppid), "getppid");
	CU_ASSERT_PTR_NULL(syscount_name(SYSCOUNT_NR_MAX));
}

/* ---- is seccomp there at all? ------------------------------------------------------------------------ */

struct probe_result {
	int rc;
	char err[256];
};

static void *probe_main(void *arg)
{
	struct probe_result *r = arg;

	r->rc = syscount_install(r->err, sizeof(r->err));
	return NULL;
}

int main(void)
{
	static CU_TestInfo tests[] = {
		{ "exact counts: getppid, write, none for computation", test_exact_counts },
		{ "rt_sigprocmask emulated, SIGSYS never blocked", test_signal_mask },
		{ "a thread created under the filter inherits it", test_threads_inherit },
		{ "top numbers named", test_top },
		CU_TEST_INFO_NULL,
	};
	static CU_SuiteInfo suites[] = {
		{ "syscount", NULL, NULL, NULL, NULL, tests },
		CU_SUITE_INFO_NULL,
	};
	struct probe_result probe = { 0 };
	pthread_t t;

	/* on a thread of its own: the filter stays on the thread that installs it */
	if (pthread_create(&t, NULL, probe_main, &probe) != 0) {
		fprintf(stderr, "cannot start the probe thread\n");
		return 1;
	}
	pthread_join(t, NULL);
	if (probe.rc == -EINVAL || probe.rc == -EACCES || probe.rc == -ENOTSUP || probe.rc == -EPERM) {
		printf("SKIP: %s\n", probe.err);
		return BW_TEST_EXIT_SKIP;
	}
	if (probe.rc != 0) {
		fprintf(stderr, "%s\n", probe.err);
		return 1;
	}
	return bw_cunit_run(suites);
}
