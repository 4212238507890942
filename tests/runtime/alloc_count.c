/* SPDX-License-Identifier: BSD-3-Clause */
/* Test support: the heap calls counted by interposition (alloc_count.h). */
#include "alloc_count.h"

#include <errno.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>

static atomic_bool g_counting;
static atomic_ulong g_allocs; /* malloc, calloc, realloc, the aligned ones */
static atomic_ulong g_frees;  /* free of a non-NULL pointer */

static inline void count(atomic_ulong *counter)
{
	if (atomic_load_explicit(&g_counting, memory_order_relaxed))
		atomic_fetch_add_explicit(counter, 1, memory_order_relaxed);
}

void alloc_count_start(void)
{
	atomic_store(&g_allocs, 0);
	atomic_store(&g_frees, 0);
	atomic_store(&g_counting, true);
}

void alloc_count_stop(void)
{
	atomic_store(&g_counting, false);
}

bool alloc_count_on(void)
{
	return atomic_load_explicit(&g_counting, memory_order_relaxed);
}

unsigned long alloc_count_allocs(void)
{
	return atomic_load(&g_allocs);
}

unsigned long alloc_count_frees(void)
{
	return atomic_load(&g_frees);
}

#if ALLOC_COUNT_ASAN
/* libasan calls these for every allocation and free it serves (compiler-rt's allocator_interface.h). */
int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void *, size_t),
					      void (*free_hook)(const volatile void *));

static void asan_malloc_hook(const volatile void *p, size_t size)
{
	(void)p;
	(void)size;
	count(&g_allocs);
}

static void asan_free_hook(const volatile void *p)
{
	if (p != NULL)
		count(&g_frees);
}

void alloc_count_init(void)
{
	__sanitizer_install_malloc_and_free_hooks(asan_malloc_hook, asan_free_hook);
}
#else
/* glibc's allocator under its exported names: what the definitions below forward to. */
extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t size);
extern void __libc_free(void *p);
extern void *__libc_memalign(size_t align, size_t size);
extern void *__libc_valloc(size_t size);
extern void *__libc_pvalloc(size_t size);

static bool align_ok(size_t align)
{
	return align != 0 && (align & (align - 1)) == 0;
}

void *malloc(size_t size)
{
	count(&g_allocs);
	return __libc_malloc(size);
}

void *calloc(size_t n, size_t size)
{
	count(&g_allocs);
	return __libc_calloc(n, size);
}

void *realloc(void *p, size_t size)
{
	count(&g_allocs);
	return __libc_realloc(p, size);
}

void free(void *p)
{
	if (p != NULL)
		count(&g_frees);
	__libc_free(p);
}

int posix_memalign(void **out, size_t align, size_t size)
{
	void *p;

	if (!align_ok(align) || align % sizeof(void *) != 0)
		return EINVAL;
	count(&g_allocs);
	p = __libc_memalign(align, size);
	if (p == NULL)
		return ENOMEM;
	*out = p;
	return 0;
}

void *aligned_alloc(size_t align, size_t size)
{
	if (!align_ok(align)) {
		errno = EINVAL;
		return NULL;
	}
	count(&g_allocs);
	return __libc_memalign(align, size);
}

void *memalign(size_t align, size_t size)
{
	count(&g_allocs);
	return __libc_memalign(align, size);
}

void *valloc(size_t size)
{
	count(&g_allocs);
	return __libc_valloc(size);
}

void *pvalloc(size_t size)
{
	count(&g_allocs);
	return __libc_pvalloc(size);
}

void alloc_count_init(void)
{
}
#endif
