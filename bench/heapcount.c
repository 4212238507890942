/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libheapcount.so: counts heap calls per thread, for LD_PRELOAD (bench/p3_syscalls.sh).
 *
 * It defines the allocator entry points glibc exports for replacement (malloc, calloc, realloc,
 * reallocarray, free, posix_memalign, aligned_alloc, memalign, valloc, pvalloc) and DPDK's rte_malloc
 * family (rte_malloc, rte_zmalloc, rte_calloc, rte_realloc, their _socket forms, rte_free), counts
 * each call in the calling thread's slot of a shared-memory table and forwards it to the next
 * definition (dlsym(RTLD_NEXT)). A reader maps or copies the table, /dev/shm/bwheap-<pid>, at two
 * moments and subtracts: the counts are totals since start-up, so the process is never stopped.
 *
 * What it sees: every call that goes through the dynamic symbol, which includes glibc's own
 * internal calls to malloc and free (glibc routes them through the PLT so that malloc can be
 * replaced: strdup, fopen, qsort's buffer, dlopen...). What it cannot see: calls to glibc's
 * __libc_malloc, __libc_calloc, __libc_realloc, __libc_free, __libc_memalign (exported, but bound
 * inside libc and called directly; nothing interposes them), the loader's own minimal malloc before
 * libc is relocated, memory taken by mmap or brk directly (OpenBLAS's buffers, thread stacks, DPDK's
 * memory segments: those are system calls, which strace sees), rte_mempool gets and puts (a pool,
 * not a heap), and rte_malloc calls that librte_eal makes to itself without its PLT.
 *
 * Table: a 4 KiB header (magic, geometry, the counters' names), then HEAPCOUNT_SLOTS slots of
 * HEAPCOUNT_SLOT_BYTES. Slot 0 takes calls no thread slot can: those before the table is mapped
 * and those of threads past the last slot. A thread takes the next free slot at its first counted
 * call (a thread-local pointer remembers it) and writes its tid and name there; that first call
 * costs it two system calls (gettid, prctl(PR_GET_NAME)), once. Counters are 64-bit and incremented
 * with relaxed atomic adds (slot 0 is shared); the reader wants totals, not an order between them.
 *
 * Bootstrap: the first call resolves every next definition with dlsym, and dlsym may itself call
 * calloc or malloc; while a thread initialises, its calls are served from a small static arena (a
 * bump allocator whose blocks record their size, so that realloc can move them out), and free of
 * an arena block does nothing.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define HEAPCOUNT_MAGIC "BWHEAP1"
#define HEAPCOUNT_VERSION 1u
#define HEAPCOUNT_HEADER_BYTES 4096u
#define HEAPCOUNT_SLOTS 256u
#define HEAPCOUNT_SLOT_BYTES 256u
#define HEAPCOUNT_NAME_BYTES 24u
#define HEAPCOUNT_NAMES_OFFSET 64u
#define HEAPCOUNT_ARENA_BYTES (64u * 1024u)

/* The counters, in table order; the header carries these names so the reader need not. */
enum heapcount_counter {
	HC_MALLOC,
	HC_CALLOC,
	HC_REALLOC,
	HC_REALLOCARRAY,
	HC_FREE,       /* free(p), p != NULL */
	HC_FREE_NULL,  /* free(NULL): a call all the same */
	HC_POSIX_MEMALIGN,
	HC_ALIGNED_ALLOC,
	HC_MEMALIGN,
	HC_VALLOC,
	HC_PVALLOC,
	HC_LIBC_BYTES, /* bytes asked of the calls above (not a call count) */
	HC_RTE_MALLOC,
	HC_RTE_ZMALLOC,
	HC_RTE_CALLOC,
	HC_RTE_REALLOC,
	HC_RTE_MALLOC_SOCKET,
	HC_RTE_ZMALLOC_SOCKET,
	HC_RTE_CALLOC_SOCKET,
	HC_RTE_REALLOC_SOCKET,
	HC_RTE_FREE,
	HC_COUNTERS
};

static const char *const g_counter_names[HC_COUNTERS] = {
	[HC_MALLOC] = "malloc",
	[HC_CALLOC] = "calloc",
	[HC_REALLOC] = "realloc",
	[HC_REALLOCARRAY] = "reallocarray",
	[HC_FREE] = "free",
	[HC_FREE_NULL] = "free_null",
	[HC_POSIX_MEMALIGN] = "posix_memalign",
	[HC_ALIGNED_ALLOC] = "aligned_alloc",
	[HC_MEMALIGN] = "memalign",
	[HC_VALLOC] = "valloc",
	[HC_PVALLOC] = "pvalloc",
	[HC_LIBC_BYTES] = "libc_bytes",
	[HC_RTE_MALLOC] = "rte_malloc",
	[HC_RTE_ZMALLOC] = "rte_zmalloc",
	[HC_RTE_CALLOC] = "rte_calloc",
	[HC_RTE_REALLOC] = "rte_realloc",
	[HC_RTE_MALLOC_SOCKET] = "rte_malloc_socket",
	[HC_RTE_ZMALLOC_SOCKET] = "rte_zmalloc_socket",
	[HC_RTE_CALLOC_SOCKET] = "rte_calloc_socket",
	[HC_RTE_REALLOC_SOCKET] = "rte_realloc_socket",
	[HC_RTE_FREE] = "rte_free",
};

struct heapcount_header {
	char magic[8];
	uint32_t version;
	uint32_t nslots;
	uint32_t ncounters;
	uint32_t slot_bytes;
	uint32_t slots_offset;
	uint32_t name_bytes;
	uint32_t slots_used; /* slots taken, slot 0 included; may pass nslots (then slot 0 counts) */
	int32_t pid;
};

struct heapcount_slot {
	int32_t tid; /* 0 until the slot is taken; slot 0 keeps 0 */
	uint32_t reserved;
	char comm[16]; /* the thread's name when it took the slot; the reader prefers /proc's */
	uint64_t counts[HC_COUNTERS];
};

_Static_assert(sizeof(struct heapcount_header) <= HEAPCOUNT_NAMES_OFFSET, "header fits before the names");
_Static_assert(HEAPCOUNT_NAMES_OFFSET + HC_COUNTERS * HEAPCOUNT_NAME_BYTES <= HEAPCOUNT_HEADER_BYTES,
	       "names fit in the header");
_Static_assert(sizeof(struct heapcount_slot) <= HEAPCOUNT_SLOT_BYTES, "a slot fits its stride");
_Static_assert(HEAPCOUNT_SLOT_BYTES % 64 == 0, "slots on cache lines of their own");

/* ---- the next definitions ---------------------------------------------------------------------- */

static void *(*g_real_malloc)(size_t);
static void *(*g_real_calloc)(size_t, size_t);
static void *(*g_real_realloc)(void *, size_t);
static void *(*g_real_reallocarray)(void *, size_t, size_t);
static void (*g_real_free)(void *);
static int (*g_real_posix_memalign)(void **, size_t, size_t);
static void *(*g_real_aligned_alloc)(size_t, size_t);
static void *(*g_real_memalign)(size_t, size_t);
static void *(*g_real_valloc)(size_t);
static void *(*g_real_pvalloc)(size_t);
static void *(*g_real_rte_malloc)(const char *, size_t, unsigned int);
static void *(*g_real_rte_zmalloc)(const char *, size_t, unsigned int);
static void *(*g_real_rte_calloc)(const char *, size_t, size_t, unsigned int);
static void *(*g_real_rte_realloc)(void *, size_t, unsigned int);
static void *(*g_real_rte_malloc_socket)(const char *, size_t, unsigned int, int);
static void *(*g_real_rte_zmalloc_socket)(const char *, size_t, unsigned int, int);
static void *(*g_real_rte_calloc_socket)(const char *, size_t, size_t, unsigned int, int);
static void *(*g_real_rte_realloc_socket)(void *, size_t, unsigned int, int);
static void (*g_real_rte_free)(void *);

/* ---- state --------------------------------------------------------------------------------------- */

enum { INIT_NONE, INIT_RUNNING, INIT_DONE };
static int g_init_state = INIT_NONE;
static unsigned char *g_table;    /* NULL: not mapped (or could not be): counts go to g_early */
static struct heapcount_slot g_early; /* slot 0's counts until the table exists */

static __thread struct heapcount_slot *g_slot __attribute__((tls_model("initial-exec")));
static __thread bool g_initialising __attribute__((tls_model("initial-exec")));
/* Inside a counted rte_* call: rte_zmalloc reaching rte_malloc_socket through the PLT is one call. */
static __thread unsigned int g_rte_depth __attribute__((tls_model("initial-exec")));

static _Alignas(64) unsigned char g_arena[HEAPCOUNT_ARENA_BYTES];
static size_t g_arena_used;

/* ---- the arena, for dlsym's allocations while resolving ------------------------------------------ */

#define ARENA_ALIGN 16u

static bool arena_owns(const void *p)
{
	return (const unsigned char *)p >= g_arena && (const unsigned char *)p < g_arena + sizeof(g_arena);
}

static void *arena_alloc(size_t size, size_t align)
{
	if (align < ARENA_ALIGN)
		align = ARENA_ALIGN;
	size_t start = __atomic_load_n(&g_arena_used, __ATOMIC_RELAXED);
	size_t body, end;

	do {
		body = (start + ARENA_ALIGN + align - 1) & ~(align - 1); /* room for the size before it */
		end = body + ((size + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1));
		if (end > sizeof(g_arena) || end < body)
			return NULL;
	} while (!__atomic_compare_exchange_n(&g_arena_used, &start, end, false, __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));
	memcpy(g_arena + body - sizeof(size_t), &size, sizeof(size));
	return g_arena + body; /* static storage: already zero */
}

static size_t arena_size(const void *p)
{
	size_t size;

	memcpy(&size, (const unsigned char *)p - sizeof(size_t), sizeof(size));
	return size;
}

/* ---- the table ------------------------------------------------------------------------------------ */

static size_t table_bytes(void)
{
	return HEAPCOUNT_HEADER_BYTES + (size_t)HEAPCOUNT_SLOTS * HEAPCOUNT_SLOT_BYTES;
}

static struct heapcount_slot *table_slot(unsigned int i)
{
	return (struct heapcount_slot *)(g_table + HEAPCOUNT_HEADER_BYTES + (size_t)i * HEAPCOUNT_SLOT_BYTES);
}

/* "/dev/shm/bwheap-<pid>" without stdio, which may allocate. */
static void table_path(char *buf, size_t cap, pid_t pid)
{
	static const char prefix[] = "/dev/shm/bwheap-";
	char digits[16];
	unsigned int n = 0;
	unsigned long v = (unsigned long)pid;

	do {
		digits[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0 && n < sizeof(digits));
	size_t len = sizeof(prefix) - 1;
	if (len + n + 1 > cap) {
		buf[0] = '\0';
		return;
	}
	memcpy(buf, prefix, len);
	while (n > 0)
		buf[len++] = digits[--n];
	buf[len] = '\0';
}

/*
 * Creates the table afresh (a process that exec'd keeps its pid and so its file: the new image
 * starts from zero). Failure leaves g_table NULL: every call is then forwarded uncounted.
 */
static void table_map(void)
{
	char path[64];
	pid_t pid = getpid();

	table_path(path, sizeof(path), pid);
	if (path[0] == '\0')
		return;
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	if (ftruncate(fd, (off_t)table_bytes()) != 0) {
		close(fd);
		return;
	}
	void *map = mmap(NULL, table_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return;

	unsigned char *t = map;
	struct heapcount_header *h = map;

	h->version = HEAPCOUNT_VERSION;
	h->nslots = HEAPCOUNT_SLOTS;
	h->ncounters = HC_COUNTERS;
	h->slot_bytes = HEAPCOUNT_SLOT_BYTES;
	h->slots_offset = HEAPCOUNT_HEADER_BYTES;
	h->name_bytes = HEAPCOUNT_NAME_BYTES;
	h->pid = (int32_t)pid;
	for (unsigned int c = 0; c < HC_COUNTERS; c++)
		strncpy((char *)t + HEAPCOUNT_NAMES_OFFSET + c * HEAPCOUNT_NAME_BYTES, g_counter_names[c],
			HEAPCOUNT_NAME_BYTES - 1);
	g_table = t;
	struct heapcount_slot *s0 = table_slot(0);
	memcpy(s0->comm, "(unattributed)", sizeof("(unattributed)"));
	for (unsigned int c = 0; c < HC_COUNTERS; c++)
		s0->counts[c] = __atomic_load_n(&g_early.counts[c], __ATOMIC_RELAXED);
	h->slots_used = 1;
	/* the magic last: a reader that sees it sees a whole header */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	memcpy(h->magic, HEAPCOUNT_MAGIC, sizeof(HEAPCOUNT_MAGIC));
}

static void *next_symbol(const char *name)
{
	return dlsym(RTLD_NEXT, name);
}

#define RESOLVE(var, name) ((var) = (__typeof__(var))next_symbol(name))

static void resolve_all(void)
{
	RESOLVE(g_real_malloc, "malloc");
	RESOLVE(g_real_calloc, "calloc");
	RESOLVE(g_real_realloc, "realloc");
	RESOLVE(g_real_reallocarray, "reallocarray");
	RESOLVE(g_real_free, "free");
	RESOLVE(g_real_posix_memalign, "posix_memalign");
	RESOLVE(g_real_aligned_alloc, "aligned_alloc");
	RESOLVE(g_real_memalign, "memalign");
	RESOLVE(g_real_valloc, "valloc");
	RESOLVE(g_real_pvalloc, "pvalloc");
	/* NULL in a process without librte_eal, which then never calls these */
	RESOLVE(g_real_rte_malloc, "rte_malloc");
	RESOLVE(g_real_rte_zmalloc, "rte_zmalloc");
	RESOLVE(g_real_rte_calloc, "rte_calloc");
	RESOLVE(g_real_rte_realloc, "rte_realloc");
	RESOLVE(g_real_rte_malloc_socket, "rte_malloc_socket");
	RESOLVE(g_real_rte_zmalloc_socket, "rte_zmalloc_socket");
	RESOLVE(g_real_rte_calloc_socket, "rte_calloc_socket");
	RESOLVE(g_real_rte_realloc_socket, "rte_realloc_socket");
	RESOLVE(g_real_rte_free, "rte_free");
}

/*
 * Once per process, on its first call or from the constructor, whichever is first. A thread that
 * finds another one initialising waits for it (start-up only); the initialising thread's own
 * calls (from inside dlsym) see g_initialising and go to the arena.
 */
static void init_once(void)
{
	int expected = INIT_NONE;

	if (__atomic_compare_exchange_n(&g_init_state, &expected, INIT_RUNNING, false, __ATOMIC_ACQ_REL,
					__ATOMIC_ACQUIRE)) {
		g_initialising = true;
		resolve_all();
		table_map();
		g_initialising = false;
		__atomic_store_n(&g_init_state, INIT_DONE, __ATOMIC_RELEASE);
		return;
	}
	while (__atomic_load_n(&g_init_state, __ATOMIC_ACQUIRE) != INIT_DONE)
		;
}

static inline bool ready(void)
{
	if (__builtin_expect(__atomic_load_n(&g_init_state, __ATOMIC_ACQUIRE) == INIT_DONE, 1))
		return true;
	if (g_initialising)
		return false;
	init_once();
	return true;
}

__attribute__((constructor)) static void heapcount_init(void)
{
	(void)ready();
}

static struct heapcount_slot *slot_take(void)
{
	if (g_table == NULL)
		return &g_early;
	struct heapcount_header *h = (struct heapcount_header *)g_table;
	unsigned int i = __atomic_fetch_add(&h->slots_used, 1, __ATOMIC_RELAXED);

	if (i >= HEAPCOUNT_SLOTS)
		return table_slot(0);
	struct heapcount_slot *s = table_slot(i);
	char comm[16] = {0};

	(void)prctl(PR_GET_NAME, comm, 0, 0, 0);
	memcpy(s->comm, comm, sizeof(s->comm));
	__atomic_store_n(&s->tid, (int32_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
	return s;
}

static inline void count(enum heapcount_counter c, uint64_t n)
{
	struct heapcount_slot *s = g_slot;

	if (__builtin_expect(s == NULL, 0)) {
		s = slot_take();
		if (g_table != NULL)
			g_slot = s;
	}
	__atomic_fetch_add(&s->counts[c], n, __ATOMIC_RELAXED);
}

/* ---- glibc's allocator ---------------------------------------------------------------------------- */

void *malloc(size_t size)
{
	if (!ready())
		return arena_alloc(size, ARENA_ALIGN);
	count(HC_MALLOC, 1);
	count(HC_LIBC_BYTES, size);
	return g_real_malloc(size);
}

void *calloc(size_t n, size_t size)
{
	if (!ready()) {
		if (size != 0 && n > SIZE_MAX / size)
			return NULL;
		return arena_alloc(n * size, ARENA_ALIGN);
	}
	count(HC_CALLOC, 1);
	count(HC_LIBC_BYTES, n * size);
	return g_real_calloc(n, size);
}

static void *arena_move(void *p, size_t size)
{
	size_t old = arena_size(p);
	void *q = ready() ? g_real_malloc(size) : arena_alloc(size, ARENA_ALIGN);

	if (q != NULL)
		memcpy(q, p, old < size ? old : size);
	return q;
}

void *realloc(void *p, size_t size)
{
	if (p != NULL && arena_owns(p))
		return arena_move(p, size);
	if (!ready())
		return arena_alloc(size, ARENA_ALIGN);
	count(HC_REALLOC, 1);
	count(HC_LIBC_BYTES, size);
	return g_real_realloc(p, size);
}

void *reallocarray(void *p, size_t n, size_t size)
{
	if (size != 0 && n > SIZE_MAX / size) {
		errno = ENOMEM;
		return NULL;
	}
	if (p != NULL && arena_owns(p))
		return arena_move(p, n * size);
	if (!ready())
		return arena_alloc(n * size, ARENA_ALIGN);
	count(HC_REALLOCARRAY, 1);
	count(HC_LIBC_BYTES, n * size);
	return g_real_reallocarray(p, n, size);
}

void free(void *p)
{
	if (p != NULL && arena_owns(p))
		return;
	if (!ready())
		return; /* nothing but the arena has been handed out yet */
	if (p == NULL) {
		count(HC_FREE_NULL, 1);
		return;
	}
	count(HC_FREE, 1);
	g_real_free(p);
}

int posix_memalign(void **out, size_t align, size_t size)
{
	if (!ready()) {
		*out = arena_alloc(size, align);
		return *out != NULL ? 0 : ENOMEM;
	}
	count(HC_POSIX_MEMALIGN, 1);
	count(HC_LIBC_BYTES, size);
	return g_real_posix_memalign(out, align, size);
}

void *aligned_alloc(size_t align, size_t size)
{
	if (!ready())
		return arena_alloc(size, align);
	count(HC_ALIGNED_ALLOC, 1);
	count(HC_LIBC_BYTES, size);
	return g_real_aligned_alloc(align, size);
}

void *memalign(size_t align, size_t size)
{
	if (!ready())
		return arena_alloc(size, align);
	count(HC_MEMALIGN, 1);
	count(HC_LIBC_BYTES, size);
	return g_real_memalign(align, size);
}

void *valloc(size_t size)
{
	if (!ready())
		return arena_alloc(size, 4096);
	count(HC_VALLOC, 1);
	count(HC_LIBC_BYTES, size);
	return g_real_valloc(size);
}

void *pvalloc(size_t size)
{
	if (!ready())
		return arena_alloc((size + 4095) & ~(size_t)4095, 4096);
	count(HC_PVALLOC, 1);
	count(HC_LIBC_BYTES, size);
	return g_real_pvalloc(size);
}

/* ---- DPDK's heap (rte_malloc.h's prototypes, without its headers) --------------------------------- */

void *rte_malloc(const char *type, size_t size, unsigned int align);
void *rte_zmalloc(const char *type, size_t size, unsigned int align);
void *rte_calloc(const char *type, size_t num, size_t size, unsigned int align);
void *rte_realloc(void *ptr, size_t size, unsigned int align);
void *rte_malloc_socket(const char *type, size_t size, unsigned int align, int socket);
void *rte_zmalloc_socket(const char *type, size_t size, unsigned int align, int socket);
void *rte_calloc_socket(const char *type, size_t num, size_t size, unsigned int align, int socket);
void *rte_realloc_socket(void *ptr, size_t size, unsigned int align, int socket);
void rte_free(void *ptr);

/* Counts the outermost rte_* call of a thread only. */
#define RTE_COUNTED(counter, call)                                                                         \
	do {                                                                                               \
		(void)ready();                                                                             \
		if (g_rte_depth++ == 0)                                                                    \
			count(counter, 1);                                                                 \
		__typeof__(call) r_ = (call);                                                              \
		g_rte_depth--;                                                                             \
		return r_;                                                                                 \
	} while (0)

void *rte_malloc(const char *type, size_t size, unsigned int align)
{
	RTE_COUNTED(HC_RTE_MALLOC, g_real_rte_malloc(type, size, align));
}

void *rte_zmalloc(const char *type, size_t size, unsigned int align)
{
	RTE_COUNTED(HC_RTE_ZMALLOC, g_real_rte_zmalloc(type, size, align));
}

void *rte_calloc(const char *type, size_t num, size_t size, unsigned int align)
{
	RTE_COUNTED(HC_RTE_CALLOC, g_real_rte_calloc(type, num, size, align));
}

void *rte_realloc(void *ptr, size_t size, unsigned int align)
{
	RTE_COUNTED(HC_RTE_REALLOC, g_real_rte_realloc(ptr, size, align));
}

void *rte_malloc_socket(const char *type, size_t size, unsigned int align, int socket)
{
	RTE_COUNTED(HC_RTE_MALLOC_SOCKET, g_real_rte_malloc_socket(type, size, align, socket));
}

void *rte_zmalloc_socket(const char *type, size_t size, unsigned int align, int socket)
{
	RTE_COUNTED(HC_RTE_ZMALLOC_SOCKET, g_real_rte_zmalloc_socket(type, size, align, socket));
}

void *rte_calloc_socket(const char *type, size_t num, size_t size, unsigned int align, int socket)
{
	RTE_COUNTED(HC_RTE_CALLOC_SOCKET, g_real_rte_calloc_socket(type, num, size, align, socket));
}

void *rte_realloc_socket(void *ptr, size_t size, unsigned int align, int socket)
{
	RTE_COUNTED(HC_RTE_REALLOC_SOCKET, g_real_rte_realloc_socket(ptr, size, align, socket));
}

void rte_free(void *ptr)
{
	(void)ready();
	if (g_rte_depth++ == 0)
		count(HC_RTE_FREE, 1);
	g_real_rte_free(ptr);
	g_rte_depth--;
}
