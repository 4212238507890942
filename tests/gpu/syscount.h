/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Counting the system calls one thread makes, from inside the process: the GPU check machine has no
 * strace or perf, and what we want to know ("does a launch enter the kernel?") is a count, not a
 * trace. A seccomp filter installed on the calling thread traps every system call (SIGSYS) except
 * rt_sigreturn and those issued from one instruction of our own: the handler counts the call, issues
 * it again from that instruction, and puts the result where the caller expects it.
 *
 * Cost: a trapped call takes a signal delivery and return (microseconds), so count over a short,
 * deliberate window; the calls themselves still happen, with their results.
 *
 * Limits, by design:
 * - x86-64 only; elsewhere syscount_install returns -ENOTSUP.
 * - A filter cannot be removed: the thread keeps trapping until it exits. Install it on a thread made
 *   for the measurement when the rest of the program must run at full speed.
 * - Threads the filtered thread creates afterwards inherit the filter (the kernel copies it on clone);
 *   their calls are counted in their own per-thread counters (syscount_read in that thread).
 *   clone, clone3, fork and vfork are let through uncounted: re-issued from the handler, the child
 *   would return onto the handler's stack.
 * - rt_sigprocmask is emulated on the interrupted context's mask (re-issued, the signal return would
 *   undo it), and never blocks SIGSYS: a trapped call with SIGSYS blocked kills the process.
 * - execve under the filter kills the new program at its first system call (it has no handler).
 * - Nobody else may install a SIGSYS handler afterwards.
 */
#ifndef BW_TESTS_SYSCOUNT_H
#define BW_TESTS_SYSCOUNT_H

#include <stddef.h>
#include <stdint.h>

#define SYSCOUNT_NR_MAX 512 /* system call numbers counted one by one; above: "other" */
#define SYSCOUNT_TOP_MAX 8  /* most numbers syscount_top names */

/* One thread's counts since its syscount_install. */
struct syscount {
	uint64_t total;                    /* every trapped call, whatever its number */
	uint64_t other;                    /* numbers >= SYSCOUNT_NR_MAX, or of another arch */
	uint64_t per_nr[SYSCOUNT_NR_MAX];  /* by x86-64 system call number */
};

/**
 * Installs the counting filter on the calling thread (and the process's SIGSYS handler). A second
 * call on the same thread does nothing and returns 0.
 * \param err  one line on failure
 * \return 0; -ENOTSUP (not x86-64); -EINVAL (no seccomp filters in this kernel); -EACCES (refused,
 *         e.g. by a container's own policy); another negative errno from prctl, sigaction or seccomp.
 */
int syscount_install(char *err, size_t cap);

/** Copies the calling thread's counts (all zero before it installed or inherited the filter). No system call. */
void syscount_read(struct syscount *out);

/** out = after - before, number by number. */
void syscount_delta(const struct syscount *after, const struct syscount *before, struct syscount *out);

/**
 * Names the numbers counted most in c, most first: "ioctl:12,futex:3" (at most n, at most
 * SYSCOUNT_TOP_MAX; "-" when nothing was counted). Numbers without a name here are "nr<N>".
 * \return buf
 */
const char *syscount_top(const struct syscount *c, unsigned int n, char *buf, size_t cap);

/** \return the x86-64 name of system call nr, or NULL when this file does not know it. */
const char *syscount_name(unsigned int nr);

#endif /* BW_TESTS_SYSCOUNT_H */
