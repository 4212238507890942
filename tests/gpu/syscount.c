/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syscount.h's counter: a seccomp filter that traps every system call but those issued from the
 * `syscall` instruction of syscount_gadget (and rt_sigreturn, which the handler's own return needs),
 * and a SIGSYS handler that counts the call and re-issues it through the gadget.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>

#include "syscount.h"

/* Per thread: a thread's calls trap on that thread, so its handler writes only its own counters. */
static __thread struct syscount g_counts __attribute__((tls_model("initial-exec")));
static __thread int g_installed __attribute__((tls_model("initial-exec")));

#define NAME(n) [__NR_##n] = #n
static const char *const g_names[SYSCOUNT_NR_MAX] = {
#ifdef __x86_64__
	NAME(read), NAME(write), NAME(open), NAME(close), NAME(stat), NAME(fstat), NAME(lstat), NAME(poll),
	NAME(lseek), NAME(mmap), NAME(mprotect), NAME(munmap), NAME(brk), NAME(rt_sigaction),
	NAME(rt_sigprocmask), NAME(rt_sigreturn), NAME(ioctl), NAME(pread64), NAME(pwrite64), NAME(readv),
	NAME(writev), NAME(access), NAME(pipe), NAME(select), NAME(sched_yield), NAME(mremap), NAME(madvise),
	NAME(dup), NAME(nanosleep), NAME(getpid), NAME(socket), NAME(sendto), NAME(recvfrom), NAME(sendmsg),
	NAME(recvmsg), NAME(clone), NAME(fork), NAME(vfork), NAME(execve), NAME(exit), NAME(wait4),
	NAME(kill), NAME(uname), NAME(fcntl), NAME(getcwd), NAME(readlink), NAME(gettimeofday),
	NAME(getrusage), NAME(sysinfo), NAME(getuid), NAME(getppid), NAME(sigaltstack), NAME(prctl),
	NAME(arch_prctl), NAME(gettid), NAME(tkill), NAME(time), NAME(futex), NAME(sched_setaffinity),
	NAME(sched_getaffinity), NAME(getdents64), NAME(set_tid_address), NAME(clock_gettime),
	NAME(clock_getres), NAME(clock_nanosleep), NAME(exit_group), NAME(epoll_wait), NAME(epoll_ctl),
	NAME(tgkill), NAME(mbind), NAME(openat), NAME(newfstatat), NAME(pselect6), NAME(ppoll),
	NAME(set_robust_list), NAME(get_robust_list), NAME(epoll_pwait), NAME(timerfd_create),
	NAME(eventfd), NAME(eventfd2), NAME(epoll_create1), NAME(pipe2), NAME(prlimit64), NAME(sched_getattr),
	NAME(getrandom), NAME(memfd_create), NAME(membarrier), NAME(statx), NAME(rseq), NAME(clone3),
	NAME(seccomp), NAME(mlock), NAME(munlock), NAME(get_mempolicy), NAME(set_mempolicy),
#endif
};
#undef NAME

const char *syscount_name(unsigned int nr)
{
	return nr < SYSCOUNT_NR_MAX ? g_names[nr] : NULL;
}

void syscount_read(struct syscount *out)
{
	*out = g_counts;
}

void syscount_delta(const struct syscount *after, const struct syscount *before, struct syscount *out)
{
	out->total = after->total - before->total;
	out->other = after->other - before->other;
	for (unsigned int i = 0; i < SYSCOUNT_NR_MAX; i++)
		out->per_nr[i] = after->per_nr[i] - before->per_nr[i];
}

const char *syscount_top(const struct syscount *c, unsigned int n, char *buf, size_t cap)
{
	uint64_t shown[SYSCOUNT_TOP_MAX];
	unsigned int nb = 0;
	size_t len = 0;

	if (cap == 0)
		return buf;
	buf[0] = '\0';
	if (n > SYSCOUNT_TOP_MAX)
		n = SYSCOUNT_TOP_MAX;
	/* n passes over 512 counters: this runs once per measurement, never per call */
	while (nb < n) {
		unsigned int best = SYSCOUNT_NR_MAX;

		for (unsigned int i = 0; i < SYSCOUNT_NR_MAX; i++) {
			bool taken = false;

			for (unsigned int k = 0; k < nb; k++)
				taken |= shown[k] == i;
			if (!taken && c->per_nr[i] > 0 && (best == SYSCOUNT_NR_MAX || c->per_nr[i] > c->per_nr[best]))
				best = i;
		}
		if (best == SYSCOUNT_NR_MAX)
			break;
		shown[nb++] = best;
		if (len < cap) {
			const char *name = syscount_name(best);

			len += (size_t)(name != NULL ? snprintf(buf + len, cap - len, "%s%s:%llu", nb > 1 ? "," : "",
								name, (unsigned long long)c->per_nr[best])
						     : snprintf(buf + len, cap - len, "%snr%u:%llu", nb > 1 ? "," : "",
								best, (unsigned long long)c->per_nr[best]));
		}
	}
	if (c->other > 0 && len < cap)
		len += (size_t)snprintf(buf + len, cap - len, "%sother:%llu", nb > 0 ? "," : "",
					(unsigned long long)c->other);
	if (nb == 0 && c->other == 0)
		snprintf(buf, cap, "-");
	return buf;
}

#ifdef __x86_64__

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <ucontext.h>
#include <unistd.h>

/*
 * long syscount_gadget(long nr, long a1, ..., long a6): the SysV arguments moved into the kernel's
 * registers, one `syscall`. syscount_gadget_ret is the instruction after it: the kernel reports that
 * address as a call's instruction_pointer, and the filter lets calls from there through. Hidden, so
 * the C code reaches both by a PC-relative address, and nothing outside this file can call it.
 */
__asm__(".pushsection .text\n"
	".p2align 4\n"
	".type syscount_gadget, @function\n"
	"syscount_gadget:\n"
	"\tmovq %rdi, %rax\n"
	"\tmovq %rsi, %rdi\n"
	"\tmovq %rdx, %rsi\n"
	"\tmovq %rcx, %rdx\n"
	"\tmovq %r8, %r10\n"
	"\tmovq %r9, %r8\n"
	"\tmovq 8(%rsp), %r9\n"
	"\tsyscall\n"
	"syscount_gadget_ret:\n"
	"\tret\n"
	".size syscount_gadget, .-syscount_gadget\n"
	".popsection\n");

long syscount_gadget(long nr, long a1, long a2, long a3, long a4, long a5, long a6)
	__attribute__((visibility("hidden")));
extern const char syscount_gadget_ret[] __attribute__((visibility("hidden")));

#define SIGSET_KERNEL_BYTES 8 /* the kernel's sigset_t on x86-64: 64 signals */

/*
 * rt_sigprocmask on the interrupted context: the mask the signal return restores is uc_sigmask, so
 * re-issuing the call would be undone the moment the handler returns. SIGSYS stays unblocked: a
 * trapped call with it blocked is fatal.
 */
static long emulate_sigprocmask(ucontext_t *uc, long how, const uint64_t *set, uint64_t *oldset, long size)
{
	uint64_t cur, want;

	if (size != SIGSET_KERNEL_BYTES)
		return -EINVAL;
	memcpy(&cur, &uc->uc_sigmask, sizeof(cur));
	if (set != NULL) {
		if (how == SIG_BLOCK)
			want = cur | *set;
		else if (how == SIG_UNBLOCK)
			want = cur & ~*set;
		else if (how == SIG_SETMASK)
			want = *set;
		else
			return -EINVAL;
		/* as the kernel does for SIGKILL and SIGSTOP; we add SIGSYS */
		want &= ~((1ull << (SIGKILL - 1)) | (1ull << (SIGSTOP - 1)) | (1ull << (SIGSYS - 1)));
	} else {
		want = cur;
	}
	if (oldset != NULL)
		*oldset = cur;
	memcpy(&uc->uc_sigmask, &want, sizeof(want));
	return 0;
}

/* Async-signal context: no libc, no system call but through the gadget. */
static void on_sigsys(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;
	greg_t *r = uc->uc_mcontext.gregs;
	unsigned int nr = (unsigned int)si->si_syscall;

	(void)sig;
	g_counts.total++;
	if (si->si_arch != AUDIT_ARCH_X86_64 || nr >= SYSCOUNT_NR_MAX) {
		g_counts.other++;
		if (si->si_arch != AUDIT_ARCH_X86_64) {
			r[REG_RAX] = -ENOSYS; /* an int 0x80 call: not ours to re-issue */
			return;
		}
	} else {
		g_counts.per_nr[nr]++;
	}
	if (nr == __NR_rt_sigprocmask) {
		r[REG_RAX] = emulate_sigprocmask(uc, r[REG_RDI], (const uint64_t *)r[REG_RSI], (uint64_t *)r[REG_RDX],
						 r[REG_R10]);
		return;
	}
	r[REG_RAX] = syscount_gadget(si->si_syscall, r[REG_RDI], r[REG_RSI], r[REG_RDX], r[REG_R10], r[REG_R8],
				     r[REG_R9]);
}

#define LO32(x) ((uint32_t)((uint64_t)(x) & 0xffffffffu))
#define HI32(x) ((uint32_t)((uint64_t)(x) >> 32))

int syscount_install(char *err, size_t cap)
{
	const uint64_t ip = (uint64_t)(uintptr_t)syscount_gadget_ret;
	/* A jump's offsets count instructions after it: TRAP is at 12, ALLOW at 13. */
	struct sock_filter filter[] = {
		/* 0 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		/* 1 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 10),
		/* 2 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		/* 3 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_rt_sigreturn, 9, 0),
		/* 4 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 8, 0),
		/* 5 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone3, 7, 0),
		/* 6 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_fork, 6, 0),
		/* 7 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_vfork, 5, 0),
		/* 8 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, instruction_pointer)),
		/* 9 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, LO32(ip), 0, 2),
		/* 10 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, instruction_pointer) + 4),
		/* 11 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, HI32(ip), 1, 0),
		/* 12 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
		/* 13 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(filter) / sizeof(filter[0]), .filter = filter };
	struct sigaction sa;
	sigset_t sys;

	if (g_installed)
		return 0;
	/* NODEFER: a signal arriving during the handler may itself make trapped calls */
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigsys;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSYS, &sa, NULL) != 0) {
		snprintf(err, cap, "syscount: sigaction(SIGSYS): %s", strerror(errno));
		return -errno;
	}
	sigemptyset(&sys);
	sigaddset(&sys, SIGSYS);
	pthread_sigmask(SIG_UNBLOCK, &sys, NULL);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
		snprintf(err, cap, "syscount: prctl(PR_SET_NO_NEW_PRIVS): %s", strerror(errno));
		return -errno;
	}
	/* flags 0: this thread only (no SECCOMP_FILTER_FLAG_TSYNC) */
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) {
		int e = errno;

		snprintf(err, cap, "syscount: seccomp(SECCOMP_SET_MODE_FILTER): %s%s", strerror(e),
			 e == EINVAL ? " (no seccomp filters in this kernel)" : e == EACCES ? " (refused here)" : "");
		return -e;
	}
	g_installed = 1;
	return 0;
}

#else /* !__x86_64__ */

int syscount_install(char *err, size_t cap)
{
	snprintf(err, cap, "syscount: x86-64 only (its trap handler re-issues calls with x86-64 registers)");
	return -ENOTSUP;
}

#endif
