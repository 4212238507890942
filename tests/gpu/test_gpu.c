/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of gpu/ against the fake device (gpu/fake.h), so they run on every host: registration
 * bookkeeping, streams and the order their launches finish in (one program of a single COPY op, its
 * rows gathered from and scattered into registered memory), error paths (a refused launch, a sticky
 * error that marks the device unhealthy) and the module loader. tests/gpu/test_program.c covers the
 * programs themselves. argv[1], argv[2]: the fake built as a module, and the same from "another ABI".
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <batchwire/dtype.h>

#include "../bw_cunit.h"

#include "fake.h"
#include "gpu.h"

static const char *g_fake_module_path;
static const char *g_other_abi_module_path;
static const struct gpu_ops *g_ops;

static struct gpu_dev *open_fake(enum gpu_fake_mode mode, unsigned int seed)
{
	struct gpu_fake_config cfg = { .nb_devices = 1, .mode = mode, .seed = seed };
	struct gpu_dev *dev = NULL;
	char err[GPU_ERR_MAX];

	gpu_fake_configure(&cfg);
	CU_ASSERT_EQUAL_FATAL(g_ops->dev_open(0, &dev, err, sizeof(err)), 0);
	return dev;
}

static struct gpu_stream *make_stream(struct gpu_dev *dev)
{
	struct gpu_stream *s = NULL;
	char err[GPU_ERR_MAX];

	CU_ASSERT_EQUAL_FATAL(g_ops->stream_create(dev, &s, err, sizeof(err)), 0);
	return s;
}

/* ---- probe ------------------------------------------------------------------------------------------- */

static void test_probe(void)
{
	struct gpu_fake_config none = { .nb_devices = 0 };
	struct gpu_dev *dev = NULL;
	struct gpu_probe p;
	char err[GPU_ERR_MAX];

	gpu_fake_configure(&none);
	CU_ASSERT_EQUAL(g_ops->probe(&p), 0);
	CU_ASSERT_EQUAL(p.count, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(p.reason, "no fake device"));
	CU_ASSERT_EQUAL(g_ops->dev_open(0, &dev, err, sizeof(err)), -ENODEV);
	CU_ASSERT_PTR_NULL(dev);
	CU_ASSERT_EQUAL(g_ops->probe(NULL), -EINVAL);

	dev = open_fake(GPU_FAKE_ON_DEMAND, 1);
	CU_ASSERT_EQUAL(g_ops->probe(&p), 0);
	CU_ASSERT_EQUAL(p.count, 1);
	CU_ASSERT_EQUAL(p.devices[0].cc_major, 9);
	CU_ASSERT_EQUAL(p.reason[0], '\0');
	CU_ASSERT_EQUAL(g_ops->health(dev, err, sizeof(err)), 0);
	g_ops->dev_close(dev);
}

/* ---- registration -------------------------------------------------------------------------------------- */

static void test_register(void)
{
	static uint8_t mem[GPU_REGIONS_MAX + 1][64];
	struct gpu_dev *dev = open_fake(GPU_FAKE_ON_DEMAND, 1);
	char err[GPU_ERR_MAX];
	void *dev_addr = NULL;
	unsigned int i;

	CU_ASSERT_EQUAL(g_ops->host_register(dev, mem[0], sizeof(mem[0]), &dev_addr, err, sizeof(err)), 0);
	CU_ASSERT_PTR_EQUAL(dev_addr, mem[0]);
	CU_ASSERT_EQUAL(g_ops->host_regions(dev), 1);
	/* overlapping: inside, straddling the start, straddling the end */
	CU_ASSERT_EQUAL(g_ops->host_register(dev, mem[0] + 8, 8, NULL, err, sizeof(err)), -EEXIST);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "overlaps"));
	CU_ASSERT_EQUAL(g_ops->host_register(dev, mem[0] + 63, 2, NULL, err, sizeof(err)), -EEXIST);
	CU_ASSERT_EQUAL(g_ops->host_register(dev, (void *)((uintptr_t)mem[0] - 1), 2, NULL, err, sizeof(err)), -EEXIST);
	/* adjacent is no overlap */
	CU_ASSERT_EQUAL(g_ops->host_register(dev, mem[1], sizeof(mem[1]), NULL, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(g_ops->host_regions(dev), 2);
	/* not a region */
	CU_ASSERT_EQUAL(g_ops->host_register(dev, NULL, 64, NULL, err, sizeof(err)), -EINVAL);
	CU_ASSERT_EQUAL(g_ops->host_register(dev, mem[2], 0, NULL, err, sizeof(err)), -EINVAL);
	CU_ASSERT_EQUAL(g_ops->host_register(dev, (void *)(UINTPTR_MAX - 8), 64, NULL, err, sizeof(err)), -EINVAL);
	/* unregister: only a region's start */
	CU_ASSERT_EQUAL(g_ops->host_unregister(dev, mem[0] + 1, err, sizeof(err)), -ENOENT);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "not registered"));
	CU_ASSERT_EQUAL(g_ops->host_unregister(dev, mem[0], err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(g_ops->host_unregister(dev, mem[0], err, sizeof(err)), -ENOENT);
	CU_ASSERT_EQUAL(g_ops->host_regions(dev), 1);
	/* again after unregistering */
	CU_ASSERT_EQUAL(g_ops->host_register(dev, mem[0], sizeof(mem[0]), NULL, err, sizeof(err)), 0);
	/* the table fills up */
	for (i = 2; i < GPU_REGIONS_MAX; i++)
		CU_ASSERT_EQUAL(g_ops->host_register(dev, mem[i], sizeof(mem[i]), NULL, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(g_ops->host_regions(dev), GPU_REGIONS_MAX);
	CU_ASSERT_EQUAL(g_ops->host_register(dev, mem[GPU_REGIONS_MAX], 64, NULL, err, sizeof(err)), -ENOSPC);
	for (i = 0; i < GPU_REGIONS_MAX; i++)
		CU_ASSERT_EQUAL(g_ops->host_unregister(dev, mem[i], err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(g_ops->host_regions(dev), 0);
	g_ops->dev_close(dev);
}

/*
 * Configured as cudaHostRegister behaves (whole pages pinned), the fake refuses a region sharing a
 * page with a registered one, -EEXIST naming the page, where CUDA would fail -EIO; page neighbours are
 * fine.
 */
static void test_register_pages(void)
{
	enum { PAGE = 4096 };
	struct gpu_fake_config cfg = { .nb_devices = 1, .mode = GPU_FAKE_ON_DEMAND, .seed = 1,
				       .pin_page_bytes = PAGE };
	uint8_t *mem = aligned_alloc(PAGE, 4 * PAGE);
	struct gpu_dev *dev = NULL;
	char err[GPU_ERR_MAX];

	CU_ASSERT_PTR_NOT_NULL_FATAL(mem);
	gpu_fake_configure(&cfg);
	CU_ASSERT_EQUAL_FATAL(g_ops->dev_open(0, &dev, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(g_ops->host_register(dev, mem + 100, 200, NULL, err, sizeof(err)), 0);
	/* the same page, bytes apart: after it, before it */
	CU_ASSERT_EQUAL(g_ops->host_register(dev, mem + 300, 8, NULL, err, sizeof(err)), -EEXIST);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "shares a 4096-byte page"));
	CU_ASSERT_EQUAL(g_ops->host_register(dev, mem, 100, NULL, err, sizeof(err)), -EEXIST);
	/* a region starting in that page and going on for pages: its rounded range covers it */
	CU_ASSERT_EQUAL(g_ops->host_register(dev, mem + PAGE - 1, 2 * PAGE, NULL, err, sizeof(err)), -EEXIST);
	/* the next page is another page */
	CU_ASSERT_EQUAL(g_ops->host_register(dev, mem + PAGE, PAGE, NULL, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(g_ops->host_register(dev, mem + 2 * PAGE + 5, PAGE - 5, NULL, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(g_ops->host_register(dev, mem + 3 * PAGE, 1, NULL, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(g_ops->host_regions(dev), 4);
	CU_ASSERT_EQUAL(g_ops->health(dev, err, sizeof(err)), 0);
	g_ops->dev_close(dev); /* releases the registrations */
	free(mem);
}

/* Pages [first, first + count) after base, as one chunk. */
static struct gpu_host_range pages(uintptr_t base, unsigned int first, unsigned int count)
{
	return (struct gpu_host_range){ .start = base + first * 4096u, .end = base + (first + count) * 4096u };
}

/*
 * gpu_host_ranges_merge: what app/engine_gpu.c registers for the mbuf pools. A pool on 2 MB hugepages
 * in IOVA-as-PA mode has one chunk per page, far more than GPU_REGIONS_MAX, but they are contiguous
 * in virtual memory: one registration per contiguous run, whatever the order the chunks come in.
 */
static void test_ranges_merge(void)
{
	enum { PAGE = 4096, CHUNKS = 4 * GPU_REGIONS_MAX };
	static struct gpu_host_range r[CHUNKS];
	const uintptr_t base = (uintptr_t)1 << 40;
	unsigned int n, i;

	CU_ASSERT_EQUAL(gpu_host_ranges_merge(r, 0, PAGE), 0);
	/* many contiguous chunks in a scrambled order (i * 97 mod CHUNKS visits each once): one range */
	for (i = 0; i < CHUNKS; i++)
		r[i] = pages(base, (i * 97u) % CHUNKS, 1);
	n = gpu_host_ranges_merge(r, CHUNKS, PAGE);
	CU_ASSERT_EQUAL(n, 1);
	CU_ASSERT_EQUAL(r[0].start, base);
	CU_ASSERT_EQUAL(r[0].end, base + CHUNKS * (uintptr_t)PAGE);

	/* chunks not page-aligned: rounded out, those sharing a page merged (the device pins whole
	 * pages), one byte into the next page included; an empty chunk dropped */
	r[0] = (struct gpu_host_range){ base + 10, base + 20 };
	r[1] = (struct gpu_host_range){ base + 3000, base + PAGE + 1 };
	r[2] = (struct gpu_host_range){ base + 5 * PAGE + 7, base + 5 * PAGE + 8 };
	r[3] = (struct gpu_host_range){ base + 9 * PAGE, base + 9 * PAGE };
	r[4] = (struct gpu_host_range){ base + 6 * PAGE, base + 7 * PAGE }; /* touches r[2]'s page */
	n = gpu_host_ranges_merge(r, 5, PAGE);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_EQUAL(r[0].start, base);
	CU_ASSERT_EQUAL(r[0].end, base + 2 * PAGE);
	CU_ASSERT_EQUAL(r[1].start, base + 5 * PAGE);
	CU_ASSERT_EQUAL(r[1].end, base + 7 * PAGE);

	/* GPU_REGIONS_MAX runs of 4 contiguous pages with a page's gap between runs, given in reverse
	 * order as overlapping 2-page chunks (more chunks than the table): exactly GPU_REGIONS_MAX */
	n = 0;
	for (i = 0; i < GPU_REGIONS_MAX; i++) {
		unsigned int run = GPU_REGIONS_MAX - 1 - i;

		for (unsigned int k = 0; k < 4; k++)
			r[n++] = pages(base, run * 5 + k, k == 3 ? 1 : 2);
	}
	n = gpu_host_ranges_merge(r, n, PAGE);
	CU_ASSERT_EQUAL_FATAL(n, GPU_REGIONS_MAX);
	for (i = 0; i < n; i++) {
		CU_ASSERT_EQUAL(r[i].start, base + i * 5 * (uintptr_t)PAGE);
		CU_ASSERT_EQUAL(r[i].end, base + (i * 5 + 4) * (uintptr_t)PAGE);
		if (i > 0)
			CU_ASSERT_TRUE(r[i].start > r[i - 1].end); /* neither touching nor overlapping */
	}

	/* truly separate chunks: more runs than a device takes, the caller's error to report */
	for (i = 0; i < GPU_REGIONS_MAX + 1; i++)
		r[i] = pages(base, 2 * i, 1);
	CU_ASSERT_EQUAL(gpu_host_ranges_merge(r, GPU_REGIONS_MAX + 1, PAGE), GPU_REGIONS_MAX + 1);

	/* page 0: bytes; touching ranges still merge */
	r[0] = (struct gpu_host_range){ base + 8, base + 16 };
	r[1] = (struct gpu_host_range){ base, base + 8 };
	r[2] = (struct gpu_host_range){ base + 17, base + 18 };
	CU_ASSERT_EQUAL_FATAL(gpu_host_ranges_merge(r, 3, 0), 2);
	CU_ASSERT_EQUAL(r[0].start, base);
	CU_ASSERT_EQUAL(r[0].end, base + 16);
	CU_ASSERT_EQUAL(r[1].start, base + 17);
}

/* Merged ranges of real memory all register on a device that pins pages: none shares a page. */
static void test_ranges_register(void)
{
	enum { PAGE = 4096 };
	struct gpu_fake_config cfg = { .nb_devices = 1, .mode = GPU_FAKE_ON_DEMAND, .seed = 1,
				       .pin_page_bytes = PAGE };
	uint8_t *mem = aligned_alloc(PAGE, 8 * PAGE);
	struct gpu_host_range r[5];
	struct gpu_dev *dev = NULL;
	char err[GPU_ERR_MAX];
	unsigned int n, i;
	uintptr_t m;

	CU_ASSERT_PTR_NOT_NULL_FATAL(mem);
	m = (uintptr_t)mem;
	r[0] = (struct gpu_host_range){ m + 100, m + 200 };
	r[1] = (struct gpu_host_range){ m + 300, m + PAGE + 10 };
	r[2] = (struct gpu_host_range){ m + 3 * PAGE + 1, m + 4 * PAGE - 1 };
	r[3] = (struct gpu_host_range){ m + 4 * PAGE + 1, m + 5 * PAGE };
	r[4] = (struct gpu_host_range){ m + 7 * PAGE, m + 8 * PAGE };
	n = gpu_host_ranges_merge(r, 5, PAGE);
	CU_ASSERT_EQUAL(n, 3);
	gpu_fake_configure(&cfg);
	CU_ASSERT_EQUAL_FATAL(g_ops->dev_open(0, &dev, err, sizeof(err)), 0);
	for (i = 0; i < n; i++)
		CU_ASSERT_EQUAL(g_ops->host_register(dev, (void *)r[i].start, r[i].end - r[i].start, NULL, err,
						     sizeof(err)), 0);
	CU_ASSERT_EQUAL(g_ops->host_regions(dev), n);
	g_ops->dev_close(dev);
	free(mem);
}

/* ---- launches ----------------------------------------------------------------------------------------- */

#define COPY_ROW_BYTES 64 /* one COPY program's input and output row */

/* A program of one COPY op at batch size 1: each launch copies one row of host memory to another. */
struct copy_program {
	struct gpu_op op;
	struct gpu_program prog;
};

static void copy_program_init(struct copy_program *cp)
{
	memset(cp, 0, sizeof(*cp));
	cp->op.code = GPU_OP_COPY;
	cp->op.in[0] = (struct gpu_ref){ .space = GPU_SPACE_ARENA, .dtype = BW_DTYPE_UINT8, .offset = 0 };
	cp->op.out = (struct gpu_ref){ .space = GPU_SPACE_ARENA, .dtype = BW_DTYPE_UINT8, .offset = COPY_ROW_BYTES };
	cp->op.count = COPY_ROW_BYTES;
	snprintf(cp->prog.name, sizeof(cp->prog.name), "copy");
	cp->prog.nb_inputs = cp->prog.nb_outputs = 1;
	cp->prog.input_row_bytes[0] = cp->prog.output_row_bytes[0] = COPY_ROW_BYTES;
	cp->prog.max_segments = 2;
	cp->prog.nb_sizes = 1;
	cp->prog.sizes[0] = (struct gpu_program_size){ .batch = 1, .nb_ops = 1, .ops = &cp->op,
						       .arena_bytes = GPU_PROG_ALIGN,
						       .output_offset = { COPY_ROW_BYTES } };
}

static struct gpu_loaded *load_copy(struct gpu_dev *dev, struct copy_program *cp)
{
	struct gpu_loaded *lp = NULL;
	char err[GPU_ERR_MAX];

	copy_program_init(cp);
	CU_ASSERT_EQUAL_FATAL(g_ops->program_load(dev, &cp->prog, &lp, err, sizeof(err)), 0);
	return lp;
}

static struct gpu_instance *make_instance(struct gpu_loaded *lp, struct gpu_stream *s, uint32_t nb_slots)
{
	struct gpu_instance *inst = NULL;
	char err[GPU_ERR_MAX];

	CU_ASSERT_EQUAL_FATAL(g_ops->instance_create(lp, s, nb_slots, GPU_LAUNCH_GRAPH, &inst, err, sizeof(err)), 0);
	return inst;
}

/* Writes slot's table: copy the row at in to out (host addresses inside registered memory). */
static void table_set(struct gpu_dev *dev, struct gpu_instance *inst, uint32_t slot, uint32_t generation,
		      const uint8_t *in, uint8_t *out)
{
	struct gpu_batch_table *t = g_ops->instance_table(inst, 0, slot);

	t->generation = generation;
	t->nb_gather = 1;
	t->nb_scatter = 1;
	t->fault = 0;
	t->segments[0] = (struct gpu_segment){ .len = COPY_ROW_BYTES };
	t->segments[1] = (struct gpu_segment){ .len = COPY_ROW_BYTES };
	CU_ASSERT_EQUAL(g_ops->host_to_dev(dev, in, COPY_ROW_BYTES, &t->segments[0].addr), 0);
	CU_ASSERT_EQUAL(g_ops->host_to_dev(dev, out, COPY_ROW_BYTES, &t->segments[1].addr), 0);
}

static bool slot_done(struct gpu_instance *inst, uint32_t slot, uint32_t generation)
{
	return gpu_word_reached(g_ops->instance_word(inst, 0, slot), generation);
}

/*
 * The device reads and writes registered memory, and host_to_dev names only that;
 * a stream's launches finish in the order they were queued, different streams' in any order.
 */
static void test_streams(void)
{
	static uint8_t mem[8][COPY_ROW_BYTES]; /* rows 0..3 inputs, 4..7 outputs */
	static uint8_t unregistered[COPY_ROW_BYTES];
	struct gpu_dev *dev = open_fake(GPU_FAKE_ON_DEMAND, 1);
	struct gpu_stream *s = NULL, *t;
	struct gpu_instance *is, *it;
	struct copy_program cp;
	struct gpu_loaded *lp;
	char err[GPU_ERR_MAX];
	uint64_t dev_addr;
	unsigned int r, bad = 0;

	memset(mem, 0, sizeof(mem));
	for (r = 0; r < 4; r++)
		memset(mem[r], 0x10 + r, COPY_ROW_BYTES);
	CU_ASSERT_EQUAL_FATAL(g_ops->host_register(dev, mem, sizeof(mem), NULL, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(g_ops->host_to_dev(dev, unregistered, 1, &dev_addr), -EFAULT);
	CU_ASSERT_EQUAL(g_ops->host_to_dev(dev, mem[7] + 1, COPY_ROW_BYTES, &dev_addr), -EFAULT); /* past the end */
	s = make_stream(dev);
	t = make_stream(dev);
	lp = load_copy(dev, &cp);
	is = make_instance(lp, s, 2);
	it = make_instance(lp, t, 1);

	table_set(dev, is, 0, 7, mem[0], mem[4]);
	table_set(dev, is, 1, 9, mem[1], mem[5]);
	table_set(dev, it, 0, 4, mem[2], mem[6]);
	CU_ASSERT_EQUAL(g_ops->instance_launch(is, 0, 0, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(g_ops->instance_launch(is, 0, 1, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(g_ops->instance_launch(it, 0, 0, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(gpu_fake_pending(dev), 3);
	CU_ASSERT_FALSE(slot_done(is, 0, 7));
	CU_ASSERT_EQUAL(mem[4][0], 0); /* queued, not done */
	/* the other stream first: across streams, any order */
	CU_ASSERT_EQUAL(gpu_fake_complete(t), 1);
	CU_ASSERT_TRUE(slot_done(it, 0, 4));
	CU_ASSERT_FALSE(slot_done(is, 0, 7));
	/* one stream's launches in order */
	CU_ASSERT_EQUAL(gpu_fake_complete(s), 1);
	CU_ASSERT_TRUE(slot_done(is, 0, 7));
	CU_ASSERT_FALSE(slot_done(is, 1, 9));
	CU_ASSERT_EQUAL(gpu_fake_complete(s), 1);
	CU_ASSERT_TRUE(slot_done(is, 1, 9));
	CU_ASSERT_EQUAL(gpu_fake_complete(s), 0);
	CU_ASSERT_EQUAL(gpu_fake_pending(dev), 0);
	/* rows 4..6 now hold inputs 0..2; row 7 was never written */
	for (r = 0; r < 4; r++)
		for (unsigned int i = 0; i < COPY_ROW_BYTES; i++)
			bad += mem[4 + r][i] != (r < 3 ? 0x10 + r : 0);
	CU_ASSERT_EQUAL(bad, 0);

	g_ops->instance_destroy(is);
	g_ops->instance_destroy(it);
	g_ops->program_unload(lp);
	g_ops->stream_destroy(t);
	g_ops->stream_destroy(s);
	CU_ASSERT_EQUAL(g_ops->host_unregister(dev, mem, err, sizeof(err)), 0);
	g_ops->dev_close(dev);
}

/* ---- errors ---------------------------------------------------------------------------------------------- */

/* A refused launch (GPU_FAKE_FAULT_NEXT_LAUNCH) queues nothing and leaves the device healthy. */
static void test_refused(void)
{
	static uint8_t mem[2][COPY_ROW_BYTES];
	struct gpu_dev *dev = open_fake(GPU_FAKE_ON_DEMAND, 1);
	struct gpu_stream *s = make_stream(dev);
	struct copy_program cp;
	struct gpu_loaded *lp = load_copy(dev, &cp);
	struct gpu_instance *inst = make_instance(lp, s, 1);
	char err[GPU_ERR_MAX];

	CU_ASSERT_EQUAL_FATAL(g_ops->host_register(dev, mem, sizeof(mem), NULL, err, sizeof(err)), 0);
	table_set(dev, inst, 0, 1, mem[0], mem[1]);
	gpu_fake_inject(dev, GPU_FAKE_FAULT_NEXT_LAUNCH, "test: transient");
	CU_ASSERT_EQUAL(g_ops->instance_launch(inst, 0, 0, err, sizeof(err)), -EIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "test: transient"));
	CU_ASSERT_EQUAL(gpu_fake_pending(dev), 0);
	CU_ASSERT_EQUAL(g_ops->health(dev, err, sizeof(err)), 0); /* not sticky */
	CU_ASSERT_EQUAL(g_ops->instance_launch(inst, 0, 0, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(gpu_fake_complete(s), 1);
	CU_ASSERT_TRUE(slot_done(inst, 0, 1));
	g_ops->instance_destroy(inst);
	g_ops->program_unload(lp);
	g_ops->stream_destroy(s);
	CU_ASSERT_EQUAL(g_ops->host_unregister(dev, mem, err, sizeof(err)), 0);
	g_ops->dev_close(dev);
}

/* A sticky error while a launch is queued: its word never arrives, health says why, every call fails. */
static void test_sticky(void)
{
	static uint8_t mem[2][COPY_ROW_BYTES], spare[8];
	struct gpu_dev *dev = open_fake(GPU_FAKE_ON_DEMAND, 1);
	struct gpu_stream *s = make_stream(dev), *t = NULL;
	struct copy_program cp;
	struct gpu_loaded *lp = load_copy(dev, &cp);
	struct gpu_instance *inst = make_instance(lp, s, 1);
	char err[GPU_ERR_MAX];

	CU_ASSERT_EQUAL_FATAL(g_ops->host_register(dev, mem, sizeof(mem), NULL, err, sizeof(err)), 0);
	table_set(dev, inst, 0, 1, mem[0], mem[1]);
	CU_ASSERT_EQUAL(g_ops->instance_launch(inst, 0, 0, err, sizeof(err)), 0);
	gpu_fake_inject(dev, GPU_FAKE_FAULT_STICKY, "test: illegal address");
	gpu_fake_inject(dev, GPU_FAKE_FAULT_STICKY, "test: a later error"); /* the first one is kept */
	CU_ASSERT_EQUAL(gpu_fake_complete(s), 0);
	CU_ASSERT_EQUAL(gpu_fake_complete_all(dev), 0);
	CU_ASSERT_FALSE(slot_done(inst, 0, 1));

	CU_ASSERT_EQUAL(g_ops->health(dev, err, sizeof(err)), -EIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "unhealthy: test: illegal address"));
	CU_ASSERT_EQUAL(g_ops->instance_launch(inst, 0, 0, err, sizeof(err)), -EIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "test: illegal address"));
	CU_ASSERT_EQUAL(g_ops->host_register(dev, spare, sizeof(spare), NULL, err, sizeof(err)), -EIO);
	CU_ASSERT_EQUAL(g_ops->stream_create(dev, &t, err, sizeof(err)), -EIO);
	CU_ASSERT_PTR_NULL(t);
	/* shutdown still works on a lost device */
	CU_ASSERT_EQUAL(g_ops->host_unregister(dev, mem, err, sizeof(err)), 0);
	g_ops->instance_destroy(inst);
	g_ops->program_unload(lp);
	g_ops->stream_destroy(s);
	g_ops->dev_close(dev);
}

/* ---- loader ---------------------------------------------------------------------------------------------- */

static void test_loader(void)
{
	struct gpu_module mod;
	struct gpu_probe p;
	char err[GPU_ERR_MAX];
	int rc;

	CU_ASSERT_EQUAL(gpu_module_load("/nonexistent/libbwgpu.so", &mod, err, sizeof(err)), -ENOEXEC);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "dlopen /nonexistent/libbwgpu.so"));
	CU_ASSERT_PTR_NULL(mod.ops);
	/* a shared object that is not a module */
	CU_ASSERT_EQUAL(gpu_module_load("libm.so.6", &mod, err, sizeof(err)), -ENOEXEC);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "no symbol " GPU_MODULE_SYMBOL));
	CU_ASSERT_EQUAL(gpu_module_load(g_other_abi_module_path, &mod, err, sizeof(err)), -EPROTO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "does not speak ABI"));

	CU_ASSERT_EQUAL_FATAL(gpu_module_load(g_fake_module_path, &mod, err, sizeof(err)), 0);
	CU_ASSERT_STRING_EQUAL(mod.ops->name, "fake");
	CU_ASSERT_EQUAL(mod.ops->abi_version, GPU_ABI_VERSION);
	CU_ASSERT_EQUAL(mod.ops->probe(&p), 0);
	CU_ASSERT_EQUAL(p.count, 1); /* the module's own fake, with its default configuration */
	gpu_module_unload(&mod);
	CU_ASSERT_PTR_NULL(mod.handle);

	/* the default path: found when this build has the CUDA module and it is in reach, else a reason */
	rc = gpu_module_load(NULL, &mod, err, sizeof(err));
	if (rc == 0) {
		CU_ASSERT_TRUE(gpu_module_built());
		gpu_module_unload(&mod);
	} else {
		CU_ASSERT_EQUAL(rc, -ENOENT);
		CU_ASSERT_PTR_NOT_NULL(strstr(err, gpu_module_built() ? "not found (looked in" : "not built"));
		printf("\n    default module path: %s\n", err);
	}
}

int main(int argc, char **argv)
{
	static CU_TestInfo device_tests[] = {
		{ "probe and open", test_probe },
		{ "host registration bookkeeping", test_register },
		{ "host registration: regions sharing a page (as CUDA pins)", test_register_pages },
		{ "mempool chunks merged into page runs", test_ranges_merge },
		{ "merged page runs register where pages are pinned", test_ranges_register },
		{ "streams: registered memory only, launches in order per stream, any order across", test_streams },
		CU_TEST_INFO_NULL,
	};
	static CU_TestInfo error_tests[] = {
		{ "a refused launch queues nothing, the device stays healthy", test_refused },
		{ "sticky error marks the device unhealthy", test_sticky },
		CU_TEST_INFO_NULL,
	};
	static CU_TestInfo loader_tests[] = {
		{ "module loading and its errors", test_loader },
		CU_TEST_INFO_NULL,
	};
	static CU_SuiteInfo suites[] = {
		{ "fake device", NULL, NULL, NULL, NULL, device_tests },
		{ "errors", NULL, NULL, NULL, NULL, error_tests },
		{ "loader", NULL, NULL, NULL, NULL, loader_tests },
		CU_SUITE_INFO_NULL,
	};

	if (argc != 3) {
		fprintf(stderr, "usage: %s FAKE_MODULE OTHER_ABI_FAKE_MODULE\n", argv[0]);
		return 1;
	}
	g_fake_module_path = argv[1];
	g_other_abi_module_path = argv[2];
	g_ops = gpu_fake_ops();
	return bw_cunit_run(suites);
}
