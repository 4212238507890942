/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Test support: counting the process's heap calls while a window is open (test_noalloc, test_opt).
 *
 * Linking alloc_count.c into an executable replaces the allocator for the whole process: malloc,
 * calloc, realloc, free, posix_memalign, aligned_alloc, memalign, valloc and pvalloc are defined
 * there, and a definition in the executable takes the place of libc's everywhere (libc's own
 * internal calls and OpenBLAS's too); each forwards to glibc's __libc_* allocator and counts while
 * counting is on. Under AddressSanitizer, which owns malloc, the sanitizer's malloc/free hooks
 * (installed by alloc_count_init) count instead.
 */
#ifndef BATCHWIRE_TESTS_RUNTIME_ALLOC_COUNT_H
#define BATCHWIRE_TESTS_RUNTIME_ALLOC_COUNT_H

#include <stdbool.h>

#if defined(__SANITIZE_ADDRESS__)
#define ALLOC_COUNT_ASAN 1
#else
#define ALLOC_COUNT_ASAN 0
#endif

/* Installs the AddressSanitizer hooks (nothing to do otherwise); once, before the first count. */
void alloc_count_init(void);
/* Zeroes the counts and starts counting. No CUnit assert while counting: a failed one allocates. */
void alloc_count_start(void);
void alloc_count_stop(void);
bool alloc_count_on(void);
/* malloc, calloc, realloc and the aligned ones counted since alloc_count_start. */
unsigned long alloc_count_allocs(void);
/* free of a non-NULL pointer counted since alloc_count_start. */
unsigned long alloc_count_frees(void);

#endif
