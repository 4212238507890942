/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of batching/: every rule of TensorFlow's BatchFunction as batchwire applies it (issue 3,
 * docs/batching.md), driven by a scripted clock. Queues are created with tsc_hz = 1000000, so one
 * tick is one microsecond and every `now` below reads as microseconds. The executor is a stub that
 * records the batches it receives; the tests complete them with bat_batch_complete, never from inside
 * submit. done() counts its calls per job, so "exactly once" is checked by counting.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../bw_cunit.h"

#include "batching.h"

#define TSC_HZ_1US 1000000u /* one tick per microsecond */
#define ROW_BYTES 4
#define JOB_ROWS_MAX 40     /* larger than any max_batch_size used below, for the too-large cases */
#define CANARY_BYTES 8
#define CANARY 0xee
#define REC_BATCHES_MAX 4096
#define REC_TASKS_MAX 32
#define MSG_CAP 256

/* ---- a job as its owner sees it ------------------------------------------------------------------ */

struct job_rec {
	unsigned int done_calls;
	enum bw_status status;
	unsigned int done_order; /* harness done count when it completed: 1 is the first */
	uint32_t rows;
	bool accepted;
	uint8_t in[JOB_ROWS_MAX * ROW_BYTES];
	uint8_t out[JOB_ROWS_MAX * ROW_BYTES + CANARY_BYTES];
};

/* Every input byte distinct per row (7 is odd, so row * 7 differs mod 256 for any two rows). */
static uint8_t in_byte(unsigned int id, uint32_t row, unsigned int k)
{
	return (uint8_t)(id * 31u + row * 7u + k * 2u + 1u);
}

/* The stub model: each output byte is its input byte xor 0xa5. */
static uint8_t model_byte(uint8_t in)
{
	return (uint8_t)(in ^ 0xa5);
}

static void job_rec_init(struct job_rec *r, unsigned int id, uint32_t rows)
{
	memset(r, 0, sizeof(*r));
	r->rows = rows;
	r->status = BW_STATUS_COUNT;
	for (uint32_t row = 0; row < JOB_ROWS_MAX; row++) {
		for (unsigned int k = 0; k < ROW_BYTES; k++)
			r->in[row * ROW_BYTES + k] = in_byte(id, row, k);
	}
	memset(r->out, CANARY, sizeof(r->out));
}

/* The job's output holds the model's result for each of its rows, in order, and nothing past them. */
static bool job_output_ok(const struct job_rec *r)
{
	for (uint32_t i = 0; i < r->rows * ROW_BYTES; i++) {
		if (r->out[i] != model_byte(r->in[i]))
			return false;
	}
	for (uint32_t i = r->rows * ROW_BYTES; i < sizeof(r->out); i++) {
		if (r->out[i] != CANARY)
			return false;
	}
	return true;
}

/* ---- the executor stub and the harness ------------------------------------------------------------ */

struct rec_task {
	uint32_t rows;
	uint32_t row_offset;
	struct bw_segment in0, out0;
	struct job_rec *owner;
};

/* A batch as the stub received it, copied at submit. */
struct rec_batch {
	struct bw_batch *batch; /* valid until completed */
	uint32_t size, padded_size;
	uint16_t num_tasks;
	uint8_t reason, priority;
	uint64_t created_tsc, dispatched_tsc;
	struct rec_task tasks[REC_TASKS_MAX];
	bool failed_submit; /* the stub refused it: the queue completed it itself */
	bool completed;
};

struct harness {
	struct bat_options opts;
	struct bat_limiter *lim;
	struct bat_queue *q;
	int submit_ret;      /* what the stub's submit returns */
	unsigned int nb_rec; /* batches received, refused ones included */
	struct rec_batch *rec;
	unsigned int done_calls;
	unsigned int done_in_submit; /* done() while the stub's submit runs: must stay 0 */
	bool in_submit;
};

static int stub_submit(void *ctx, struct bw_batch *batch)
{
	struct harness *h = ctx;
	struct rec_batch *rb;

	if (h->nb_rec == REC_BATCHES_MAX || batch->num_tasks > REC_TASKS_MAX) {
		CU_FAIL("stub executor: too many batches or tasks to record");
		return -ENOSPC;
	}
	h->in_submit = true;
	rb = &h->rec[h->nb_rec++];
	memset(rb, 0, sizeof(*rb));
	rb->batch = batch;
	rb->size = batch->size;
	rb->padded_size = batch->padded_size;
	rb->num_tasks = batch->num_tasks;
	rb->reason = batch->reason;
	rb->priority = batch->priority;
	rb->created_tsc = batch->created_tsc;
	rb->dispatched_tsc = batch->dispatched_tsc;
	for (uint16_t i = 0; i < batch->num_tasks; i++) {
		const struct bw_batch_task *t = batch->tasks[i];
		const struct bat_job *job = t->job;

		rb->tasks[i] = (struct rec_task){
			.rows = t->rows,
			.row_offset = t->row_offset,
			.in0 = t->inputs[0],
			.out0 = t->outputs[0],
			.owner = job->owner[0],
		};
	}
	if (h->submit_ret != 0) {
		rb->failed_submit = true;
		rb->completed = true;
	}
	h->in_submit = false;
	return h->submit_ret;
}

static void on_done(void *ctx, struct bat_job *job, enum bw_status status)
{
	struct harness *h = ctx;
	struct job_rec *r = job->owner[0];

	if (h->in_submit)
		h->done_in_submit++;
	r->done_calls++;
	r->status = status;
	r->done_order = ++h->done_calls;
}

static void harness_init(struct harness *h, const struct bat_options *opts)
{
	char msg[MSG_CAP] = "";
	struct bw_executor exec;
	int ret;

	memset(h, 0, sizeof(*h));
	h->opts = *opts;
	ret = bat_options_finalize(&h->opts, msg, sizeof(msg));
	if (ret != 0)
		printf("\n  finalize: %s ", msg);
	CU_ASSERT_EQUAL_FATAL(ret, 0);
	h->rec = calloc(REC_BATCHES_MAX, sizeof(*h->rec));
	CU_ASSERT_PTR_NOT_NULL_FATAL(h->rec);
	h->lim = bat_limiter_create(&h->opts);
	CU_ASSERT_PTR_NOT_NULL_FATAL(h->lim);
	exec = (struct bw_executor){.submit = stub_submit, .ctx = h};
	h->q = bat_queue_create(&h->opts, h->lim, &exec, on_done, h, TSC_HZ_1US, 0x5eed);
	CU_ASSERT_PTR_NOT_NULL_FATAL(h->q);
}

static void harness_fini(struct harness *h)
{
	CU_ASSERT_EQUAL(h->done_in_submit, 0);
	bat_queue_destroy(h->q);
	bat_limiter_destroy(h->lim);
	free(h->rec);
}

/* Options most queue tests start from: defaults, a fixed limit of `threads`, short windows. */
static struct bat_options opts_base(int32_t threads, uint32_t max_batch_size, uint32_t timeout_us)
{
	struct bat_options o;

	bat_options_defaults(&o);
	o.num_batch_threads = threads;
	o.max_batch_size = max_batch_size;
	o.batch_timeout_micros = timeout_us;
	return o;
}

static void set_sizes(struct bat_options *o, unsigned int n, const uint32_t *sizes)
{
	o->num_allowed_batch_sizes = (uint16_t)n;
	for (unsigned int i = 0; i < n; i++)
		o->allowed_batch_sizes[i] = sizes[i];
}

/* A job with one input and one output of rows * ROW_BYTES, arriving at now. */
static enum bw_status submit_full(struct harness *h, struct job_rec *r, unsigned int id, uint32_t rows,
				  uint8_t priority, uint64_t deadline, uint64_t now)
{
	struct bat_job *job = bat_job_alloc(h->q);
	enum bw_status st;

	CU_ASSERT_PTR_NOT_NULL_FATAL(job);
	job_rec_init(r, id, rows);
	job->rows = rows;
	job->priority = priority;
	job->arrival_tsc = now;
	job->deadline_tsc = deadline;
	job->num_inputs = 1;
	job->num_outputs = 1;
	job->inputs[0] = (struct bw_segment){r->in, rows * ROW_BYTES};
	job->outputs[0] = (struct bw_segment){r->out, rows * ROW_BYTES};
	job->owner[0] = r;
	st = bat_submit(h->q, job, now);
	r->accepted = st == BW_STATUS_OK;
	return st;
}

static enum bw_status submit(struct harness *h, struct job_rec *r, uint32_t rows, uint64_t now)
{
	static unsigned int id;

	return submit_full(h, r, ++id, rows, 0, 0, now);
}

/* The stub model on the CPU: gather input 0, transform every padded row, scatter output 0. */
static void run_model(const struct rec_batch *rb)
{
	uint8_t buf[(REC_TASKS_MAX + BAT_BATCH_SIZE_MAX) * ROW_BYTES];

	CU_ASSERT_FATAL(rb->padded_size <= BAT_BATCH_SIZE_MAX);
	bat_batch_gather(rb->batch, 0, buf, ROW_BYTES);
	for (uint32_t i = 0; i < rb->padded_size * ROW_BYTES; i++)
		buf[i] = model_byte(buf[i]);
	bat_batch_scatter(rb->batch, 0, buf, ROW_BYTES);
}

static void complete(struct harness *h, unsigned int i, enum bw_status status, uint64_t now)
{
	struct rec_batch *rb = &h->rec[i];

	CU_ASSERT_FATAL(i < h->nb_rec);
	CU_ASSERT_FATAL(!rb->completed);
	if (status == BW_STATUS_OK)
		run_model(rb);
	rb->completed = true;
	bat_batch_complete(rb->batch, status, now);
}

/* Every counter of a queue, exactly. window_wait_us and by_size are checked where they matter. */
struct want {
	uint64_t jobs, jobs_done, rejected_full, rejected_too_large, splits, deadline_expired;
	uint64_t batches, batches_failed, rows, padding_rows;
	uint64_t dispatch[BW_DISPATCH_COUNT];
};

#define STAT_EQ(field)                                                                                   \
	do {                                                                                             \
		CU_ASSERT_EQUAL(s->field, w->field);                                                     \
		if (s->field != w->field)                                                                \
			printf("\n  line %d: stats." #field " %llu, want %llu ", line,                   \
			       (unsigned long long)s->field, (unsigned long long)w->field);              \
	} while (0)

static void check_stats(const struct harness *h, const struct want *w, int line)
{
	const struct bat_stats *s = bat_queue_stats(h->q);

	STAT_EQ(jobs);
	STAT_EQ(jobs_done);
	STAT_EQ(rejected_full);
	STAT_EQ(rejected_too_large);
	STAT_EQ(splits);
	STAT_EQ(deadline_expired);
	STAT_EQ(batches);
	STAT_EQ(batches_failed);
	STAT_EQ(rows);
	STAT_EQ(padding_rows);
	for (unsigned int r = 0; r < BW_DISPATCH_COUNT; r++)
		STAT_EQ(dispatch[r]);
}

#define CHECK_STATS(h, ...) check_stats((h), &(struct want){__VA_ARGS__}, __LINE__)

/* The task records of batch b: rows and row offsets, and whose they are. */
static void check_task(const struct rec_batch *rb, unsigned int t, const struct job_rec *owner, uint32_t rows,
		       uint32_t row_offset)
{
	CU_ASSERT_FATAL(t < rb->num_tasks);
	CU_ASSERT_PTR_EQUAL(rb->tasks[t].owner, owner);
	CU_ASSERT_EQUAL(rb->tasks[t].rows, rows);
	CU_ASSERT_EQUAL(rb->tasks[t].row_offset, row_offset);
	/* the segments point into the request's own memory, at its row offset: no copy */
	CU_ASSERT_PTR_EQUAL(rb->tasks[t].in0.data, owner->in + row_offset * ROW_BYTES);
	CU_ASSERT_EQUAL(rb->tasks[t].in0.len, rows * ROW_BYTES);
	CU_ASSERT_PTR_EQUAL(rb->tasks[t].out0.data, owner->out + row_offset * ROW_BYTES);
	CU_ASSERT_EQUAL(rb->tasks[t].out0.len, rows * ROW_BYTES);
}

static void check_done_once(const struct job_rec *r, enum bw_status status)
{
	CU_ASSERT_EQUAL(r->done_calls, 1);
	CU_ASSERT_EQUAL(r->status, status);
}

/* ---- 1. options: defaults, parsing, validation ------------------------------------------------- */

static void test_defaults(void)
{
	struct bat_options o;

	memset(&o, 0x5a, sizeof(o));
	bat_options_defaults(&o);
	CU_ASSERT_EQUAL(o.num_batch_threads, 1);
	CU_ASSERT_EQUAL(o.max_batch_size, 32);
	CU_ASSERT_EQUAL(o.batch_timeout_micros, 1000);
	CU_ASSERT_EQUAL(o.max_enqueued_batches, 10);
	CU_ASSERT_EQUAL(o.num_allowed_batch_sizes, 0);
	CU_ASSERT_FALSE(o.enable_large_batch_splitting);
	CU_ASSERT_EQUAL(o.max_execution_batch_size, 0);
	CU_ASSERT_EQUAL(o.min_inflight_batches, 16);
	CU_ASSERT_EQUAL(o.initial_inflight_batches, 16);
	CU_ASSERT_EQUAL(o.max_inflight_batches, 64);
	CU_ASSERT_EQUAL(o.batches_to_average_over, 10);
	CU_ASSERT_EQUAL(o.default_timeout_micros, 0);
	CU_ASSERT_EQUAL(o.priority_levels, 1);
	CU_ASSERT_EQUAL(o.max_queue_size, 0);
	CU_ASSERT_EQUAL(o.slo_micros, 0);
	CU_ASSERT_FALSE(o.dispatch_when_idle);
	for (unsigned int i = 0; i < BAT_ALLOWED_SIZES_MAX; i++)
		CU_ASSERT_EQUAL(o.allowed_batch_sizes[i], 0);
}

static void test_defaults_finalize(void)
{
	struct bat_options o;
	char msg[MSG_CAP] = "";

	bat_options_defaults(&o);
	CU_ASSERT_EQUAL(bat_options_finalize(&o, msg, sizeof(msg)), 0);
	CU_ASSERT_FALSE(o.enable_large_batch_splitting);
	CU_ASSERT_EQUAL(o.max_execution_batch_size, 0);
	CU_ASSERT_EQUAL(bat_options_batch_capacity(&o), 32);
	CU_ASSERT_EQUAL(bat_options_padded_size(&o, 3), 3); /* no allowed sizes: no padding */
}

/* The numeric field a key names, widened. */
static int64_t field_of(const struct bat_options *o, const char *key)
{
	static const struct {
		const char *key;
		size_t off;
		int kind; /* 0 u32, 1 i32, 2 u64, 3 u16 */
	} f[] = {
		{"num_batch_threads", offsetof(struct bat_options, num_batch_threads), 1},
		{"max_batch_size", offsetof(struct bat_options, max_batch_size), 0},
		{"batch_timeout_micros", offsetof(struct bat_options, batch_timeout_micros), 0},
		{"max_enqueued_batches", offsetof(struct bat_options, max_enqueued_batches), 0},
		{"max_execution_batch_size", offsetof(struct bat_options, max_execution_batch_size), 0},
		{"min_inflight_batches", offsetof(struct bat_options, min_inflight_batches), 0},
		{"initial_inflight_batches", offsetof(struct bat_options, initial_inflight_batches), 0},
		{"max_inflight_batches", offsetof(struct bat_options, max_inflight_batches), 0},
		{"batches_to_average_over", offsetof(struct bat_options, batches_to_average_over), 0},
		{"default_timeout_micros", offsetof(struct bat_options, default_timeout_micros), 2},
		{"priority_levels", offsetof(struct bat_options, priority_levels), 3},
		{"max_queue_size", offsetof(struct bat_options, max_queue_size), 0},
		{"slo_micros", offsetof(struct bat_options, slo_micros), 0},
	};
	const uint8_t *base = (const uint8_t *)o;

	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		if (strcmp(f[i].key, key) != 0)
			continue;
		switch (f[i].kind) {
		case 0: {
			uint32_t v;
			memcpy(&v, base + f[i].off, sizeof(v));
			return v;
		}
		case 1: {
			int32_t v;
			memcpy(&v, base + f[i].off, sizeof(v));
			return v;
		}
		case 2: {
			uint64_t v;
			memcpy(&v, base + f[i].off, sizeof(v));
			return (int64_t)v;
		}
		default: {
			uint16_t v;
			memcpy(&v, base + f[i].off, sizeof(v));
			return v;
		}
		}
	}
	CU_FAIL("field_of: unknown key");
	return INT64_MIN;
}

/* Refused with -EINVAL, the field unchanged, and msg exactly "invalid <key> '<value>': expected ...". */
static void check_refused(struct bat_options *o, const char *key, const char *value)
{
	char msg[MSG_CAP] = "";
	char head[MSG_CAP];
	int64_t before = field_of(o, key);

	snprintf(head, sizeof(head), "invalid %s '%s': expected ", key, value);
	CU_ASSERT_EQUAL(bat_option_set(o, key, value, msg, sizeof(msg)), -EINVAL);
	CU_ASSERT_EQUAL(strncmp(msg, head, strlen(head)), 0);
	CU_ASSERT(strlen(msg) > strlen(head)); /* says what is expected */
	CU_ASSERT_PTR_NULL(strchr(msg, '\n'));
	CU_ASSERT_EQUAL(field_of(o, key), before);
	if (strncmp(msg, head, strlen(head)) != 0)
		printf("\n  %s=%s: '%s' ", key, value, msg);
}

static void test_option_set_numbers(void)
{
	static const struct {
		const char *key;
		const char *min, *max, *below, *above;
		int64_t vmin, vmax;
	} k[] = {
		{"num_batch_threads", "-1", "1024", "-2", "1025", -1, 1024},
		{"max_batch_size", "1", "1024", "0", "1025", 1, 1024},
		{"batch_timeout_micros", "0", "60000000", "-1", "60000001", 0, 60000000},
		{"max_enqueued_batches", "1", "4096", "0", "4097", 1, 4096},
		{"max_execution_batch_size", "1", "1024", "0", "1025", 1, 1024},
		{"min_inflight_batches", "1", "1024", "0", "1025", 1, 1024},
		{"initial_inflight_batches", "1", "1024", "0", "1025", 1, 1024},
		{"max_inflight_batches", "1", "1024", "0", "1025", 1, 1024},
		{"batches_to_average_over", "1", "1000000", "0", "1000001", 1, 1000000},
		{"default_timeout_micros", "0", "3600000000", "-1", "3600000001", 0, 3600000000LL},
		{"priority_levels", "1", "8", "0", "9", 1, 8},
		{"max_queue_size", "0", "1000000", "-1", "1000001", 0, 1000000},
		{"slo_micros", "0", "60000000", "-1", "60000001", 0, 60000000},
	};
	static const char *const junk[] = {"", "abc", "12x", "-", "+5", " 5", "5 ", "0x10", "1e3",
					   "99999999999999999999999"};

	for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
		struct bat_options o;
		char msg[MSG_CAP] = "";

		bat_options_defaults(&o);
		CU_ASSERT_EQUAL(bat_option_set(&o, k[i].key, k[i].min, msg, sizeof(msg)), 0);
		CU_ASSERT_EQUAL(field_of(&o, k[i].key), k[i].vmin);
		CU_ASSERT_EQUAL(bat_option_set(&o, k[i].key, k[i].max, msg, sizeof(msg)), 0);
		CU_ASSERT_EQUAL(field_of(&o, k[i].key), k[i].vmax);
		check_refused(&o, k[i].key, k[i].below);
		check_refused(&o, k[i].key, k[i].above);
		for (size_t j = 0; j < sizeof(junk) / sizeof(junk[0]); j++)
			check_refused(&o, k[i].key, junk[j]);
	}
}

static void test_option_set_bools(void)
{
	static const char *const keys[] = {"enable_large_batch_splitting", "dispatch_when_idle"};

	for (size_t i = 0; i < 2; i++) {
		struct bat_options o;
		char msg[MSG_CAP] = "";
		char head[MSG_CAP];
		bool *field = i == 0 ? &o.enable_large_batch_splitting : &o.dispatch_when_idle;

		bat_options_defaults(&o);
		CU_ASSERT_EQUAL(bat_option_set(&o, keys[i], "true", msg, sizeof(msg)), 0);
		CU_ASSERT_TRUE(*field);
		CU_ASSERT_EQUAL(bat_option_set(&o, keys[i], "false", msg, sizeof(msg)), 0);
		CU_ASSERT_FALSE(*field);
		CU_ASSERT_EQUAL(bat_option_set(&o, keys[i], "1", msg, sizeof(msg)), 0);
		CU_ASSERT_TRUE(*field);
		CU_ASSERT_EQUAL(bat_option_set(&o, keys[i], "0", msg, sizeof(msg)), 0);
		CU_ASSERT_FALSE(*field);
		CU_ASSERT_EQUAL(bat_option_set(&o, keys[i], "1", msg, sizeof(msg)), 0);
		CU_ASSERT_EQUAL(bat_option_set(&o, keys[i], "yes", msg, sizeof(msg)), -EINVAL);
		snprintf(head, sizeof(head), "invalid %s 'yes': expected true or false", keys[i]);
		CU_ASSERT_STRING_EQUAL(msg, head);
		CU_ASSERT_TRUE(*field); /* unchanged */
		CU_ASSERT_EQUAL(bat_option_set(&o, keys[i], "2", msg, sizeof(msg)), -EINVAL);
		CU_ASSERT_EQUAL(bat_option_set(&o, keys[i], "", msg, sizeof(msg)), -EINVAL);
	}
}

static void check_sizes_refused(const char *value)
{
	struct bat_options o;
	char msg[MSG_CAP] = "";
	char head[MSG_CAP];

	bat_options_defaults(&o);
	o.num_allowed_batch_sizes = 3;
	snprintf(head, sizeof(head), "invalid allowed_batch_sizes '%s': expected ", value);
	CU_ASSERT_EQUAL(bat_option_set(&o, "allowed_batch_sizes", value, msg, sizeof(msg)), -EINVAL);
	CU_ASSERT_EQUAL(strncmp(msg, head, strlen(head)), 0);
	CU_ASSERT_EQUAL(o.num_allowed_batch_sizes, 3);
}

static void test_option_set_sizes(void)
{
	struct bat_options o;
	char msg[MSG_CAP] = "";
	char list[256] = "";
	char thirty_three[256] = "";

	bat_options_defaults(&o);
	CU_ASSERT_EQUAL(bat_option_set(&o, "allowed_batch_sizes", "8,16,32", msg, sizeof(msg)), 0);
	CU_ASSERT_EQUAL(o.num_allowed_batch_sizes, 3);
	CU_ASSERT_EQUAL(o.allowed_batch_sizes[0], 8);
	CU_ASSERT_EQUAL(o.allowed_batch_sizes[1], 16);
	CU_ASSERT_EQUAL(o.allowed_batch_sizes[2], 32);
	/* an empty list is the default: every size, no padding */
	CU_ASSERT_EQUAL(bat_option_set(&o, "allowed_batch_sizes", "", msg, sizeof(msg)), 0);
	CU_ASSERT_EQUAL(o.num_allowed_batch_sizes, 0);
	CU_ASSERT_EQUAL(bat_option_set(&o, "allowed_batch_sizes", "1024", msg, sizeof(msg)), 0);
	CU_ASSERT_EQUAL(o.num_allowed_batch_sizes, 1);
	CU_ASSERT_EQUAL(o.allowed_batch_sizes[0], 1024);

	/* 32 entries are accepted, 33 refused */
	for (unsigned int i = 1; i <= 33; i++) {
		char item[8];

		snprintf(item, sizeof(item), i == 1 ? "%u" : ",%u", i);
		if (i <= 32)
			strcat(list, item);
		strcat(thirty_three, item);
	}
	CU_ASSERT_EQUAL(bat_option_set(&o, "allowed_batch_sizes", list, msg, sizeof(msg)), 0);
	CU_ASSERT_EQUAL(o.num_allowed_batch_sizes, 32);
	CU_ASSERT_EQUAL(o.allowed_batch_sizes[31], 32);
	check_sizes_refused(thirty_three);

	check_sizes_refused("8,,16");
	check_sizes_refused("8,");
	check_sizes_refused(",8");
	check_sizes_refused(",");
	check_sizes_refused("0");     /* entries are >= 1 */
	check_sizes_refused("8,0,16");
	check_sizes_refused("1025");
	check_sizes_refused("-8");
	check_sizes_refused("8;16");
	check_sizes_refused("8, 16");
	check_sizes_refused("x");
}

static void test_option_set_unknown(void)
{
	struct bat_options o, before;
	char msg[MSG_CAP] = "";

	bat_options_defaults(&o);
	before = o;
	CU_ASSERT_EQUAL(bat_option_set(&o, "max_batch", "8", msg, sizeof(msg)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "unknown batching option 'max_batch'"));
	CU_ASSERT_EQUAL(memcmp(&o, &before, sizeof(o)), 0);
	CU_ASSERT_EQUAL(bat_option_set(&o, "", "8", msg, sizeof(msg)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "unknown batching option ''"));
	/* keys are case-sensitive, as in the INI file */
	CU_ASSERT_EQUAL(bat_option_set(&o, "Max_Batch_Size", "8", msg, sizeof(msg)), -EINVAL);
	CU_ASSERT_EQUAL(o.max_batch_size, 32);
}

/* finalize refuses, and its message names `name` (and `name2` when given). */
static void check_finalize_refused(struct bat_options *o, const char *name, const char *name2, int line)
{
	char msg[MSG_CAP] = "";
	int ret = bat_options_finalize(o, msg, sizeof(msg));

	CU_ASSERT_EQUAL(ret, -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, name));
	if (name2 != NULL)
		CU_ASSERT_PTR_NOT_NULL(strstr(msg, name2));
	CU_ASSERT_PTR_NULL(strchr(msg, '\n'));
	if (ret != -EINVAL || strstr(msg, name) == NULL || (name2 != NULL && strstr(msg, name2) == NULL))
		printf("\n  line %d: finalize %d '%s' ", line, ret, msg);
}

#define FINALIZE_REFUSED(o, name, name2) check_finalize_refused((o), (name), (name2), __LINE__)

static void test_finalize_allowed_sizes(void)
{
	struct bat_options o;
	char msg[MSG_CAP] = "";

	bat_options_defaults(&o);
	set_sizes(&o, 3, (const uint32_t[]){8, 8, 32});
	FINALIZE_REFUSED(&o, "allowed_batch_sizes", "increasing");

	bat_options_defaults(&o);
	set_sizes(&o, 3, (const uint32_t[]){16, 8, 32});
	FINALIZE_REFUSED(&o, "allowed_batch_sizes", "increasing");

	/* strictly increasing also with splitting, and in adaptive mode */
	bat_options_defaults(&o);
	o.num_batch_threads = 0;
	set_sizes(&o, 2, (const uint32_t[]){8, 8});
	FINALIZE_REFUSED(&o, "allowed_batch_sizes", "increasing");

	/* the last entry equals max_batch_size without splitting */
	bat_options_defaults(&o);
	set_sizes(&o, 2, (const uint32_t[]){8, 16});
	FINALIZE_REFUSED(&o, "allowed_batch_sizes", "max_batch_size");

	bat_options_defaults(&o);
	set_sizes(&o, 3, (const uint32_t[]){8, 16, 32});
	CU_ASSERT_EQUAL(bat_options_finalize(&o, msg, sizeof(msg)), 0);
	CU_ASSERT_EQUAL(bat_options_batch_capacity(&o), 32);

	/* ... but not with splitting: batches then execute at the last allowed size */
	bat_options_defaults(&o);
	set_sizes(&o, 2, (const uint32_t[]){8, 16});
	o.enable_large_batch_splitting = true;
	CU_ASSERT_EQUAL(bat_options_finalize(&o, msg, sizeof(msg)), 0);
	CU_ASSERT_EQUAL(o.max_execution_batch_size, 16);
	CU_ASSERT_EQUAL(bat_options_batch_capacity(&o), 16);

	/* with splitting the last entry is at most max_batch_size (docs/batching.md) */
	bat_options_defaults(&o);
	set_sizes(&o, 2, (const uint32_t[]){8, 64});
	o.enable_large_batch_splitting = true;
	FINALIZE_REFUSED(&o, "allowed_batch_sizes", "max_batch_size");
	bat_options_defaults(&o);
	set_sizes(&o, 2, (const uint32_t[]){8, 32});
	o.enable_large_batch_splitting = true;
	CU_ASSERT_EQUAL(bat_options_finalize(&o, msg, sizeof(msg)), 0);
	CU_ASSERT_EQUAL(o.max_execution_batch_size, 32);
}

static void test_finalize_execution_size(void)
{
	struct bat_options o;
	char msg[MSG_CAP] = "";

	/* max_execution_batch_size without splitting */
	bat_options_defaults(&o);
	o.max_execution_batch_size = 16;
	FINALIZE_REFUSED(&o, "max_execution_batch_size", "enable_large_batch_splitting");

	/* with splitting and allowed sizes it must equal the last of them */
	bat_options_defaults(&o);
	o.enable_large_batch_splitting = true;
	set_sizes(&o, 2, (const uint32_t[]){8, 16});
	o.max_execution_batch_size = 8;
	FINALIZE_REFUSED(&o, "max_execution_batch_size", NULL);
	o.max_execution_batch_size = 32;
	FINALIZE_REFUSED(&o, "max_execution_batch_size", NULL);
	o.max_execution_batch_size = 16;
	CU_ASSERT_EQUAL(bat_options_finalize(&o, msg, sizeof(msg)), 0);
	CU_ASSERT_EQUAL(o.max_execution_batch_size, 16);

	/* with splitting and no allowed sizes: derived from max_batch_size, or kept when given */
	bat_options_defaults(&o);
	o.enable_large_batch_splitting = true;
	CU_ASSERT_EQUAL(bat_options_finalize(&o, msg, sizeof(msg)), 0);
	CU_ASSERT_EQUAL(o.max_execution_batch_size, 32);
	bat_options_defaults(&o);
	o.enable_large_batch_splitting = true;
	o.max_execution_batch_size = 4;
	CU_ASSERT_EQUAL(bat_options_finalize(&o, msg, sizeof(msg)), 0);
	CU_ASSERT_EQUAL(o.max_execution_batch_size, 4);
	CU_ASSERT_EQUAL(bat_options_batch_capacity(&o), 4);
	/* ... at most max_batch_size */
	bat_options_defaults(&o);
	o.enable_large_batch_splitting = true;
	o.max_execution_batch_size = 33;
	FINALIZE_REFUSED(&o, "max_execution_batch_size", "max_batch_size");
	o.max_execution_batch_size = 32;
	CU_ASSERT_EQUAL(bat_options_finalize(&o, msg, sizeof(msg)), 0);
}

static void test_finalize_inflight(void)
{
	struct bat_options o;
	char msg[MSG_CAP] = "";

	bat_options_defaults(&o);
	o.num_batch_threads = 0;
	o.min_inflight_batches = 17; /* > initial 16 */
	FINALIZE_REFUSED(&o, "min_inflight_batches", "initial_inflight_batches");

	bat_options_defaults(&o);
	o.num_batch_threads = 0;
	o.initial_inflight_batches = 65; /* > max 64 */
	FINALIZE_REFUSED(&o, "initial_inflight_batches", "max_inflight_batches");

	bat_options_defaults(&o);
	o.num_batch_threads = -1;
	o.min_inflight_batches = 0; /* bat_option_set refuses it; set here directly */
	FINALIZE_REFUSED(&o, "min_inflight_batches", NULL);

	bat_options_defaults(&o);
	o.num_batch_threads = 0;
	o.batches_to_average_over = 0;
	FINALIZE_REFUSED(&o, "batches_to_average_over", NULL);

	/* min = initial = max is allowed */
	bat_options_defaults(&o);
	o.num_batch_threads = 0;
	o.min_inflight_batches = o.initial_inflight_batches = o.max_inflight_batches = 4;
	o.batches_to_average_over = 1;
	CU_ASSERT_EQUAL(bat_options_finalize(&o, msg, sizeof(msg)), 0);

	/* in fixed mode the adaptive options are ignored, as TensorFlow ignores them */
	bat_options_defaults(&o);
	o.min_inflight_batches = 17;
	o.batches_to_average_over = 0;
	CU_ASSERT_EQUAL(bat_options_finalize(&o, msg, sizeof(msg)), 0);
}

static void test_finalize_zero_counts(void)
{
	struct bat_options o;

	bat_options_defaults(&o);
	o.max_batch_size = 0;
	FINALIZE_REFUSED(&o, "max_batch_size", NULL);
	bat_options_defaults(&o);
	o.max_enqueued_batches = 0;
	FINALIZE_REFUSED(&o, "max_enqueued_batches", NULL);
	bat_options_defaults(&o);
	o.priority_levels = 0;
	FINALIZE_REFUSED(&o, "priority_levels", NULL);
}

static void test_finalize_adaptive(void)
{
	static const int32_t modes[] = {0, -1};

	for (size_t i = 0; i < 2; i++) {
		struct bat_options o;
		char msg[MSG_CAP] = "";

		/* adaptive mode splits, whatever enable_large_batch_splitting says */
		bat_options_defaults(&o);
		o.num_batch_threads = modes[i];
		o.enable_large_batch_splitting = false;
		CU_ASSERT_EQUAL(bat_options_finalize(&o, msg, sizeof(msg)), 0);
		CU_ASSERT_TRUE(o.enable_large_batch_splitting);
		CU_ASSERT_EQUAL(o.max_execution_batch_size, 32); /* no allowed sizes: max_batch_size */
		CU_ASSERT_EQUAL(bat_options_batch_capacity(&o), 32);

		/* with allowed sizes: the last one, which need not equal max_batch_size since it splits */
		bat_options_defaults(&o);
		o.num_batch_threads = modes[i];
		set_sizes(&o, 2, (const uint32_t[]){4, 8});
		CU_ASSERT_EQUAL(bat_options_finalize(&o, msg, sizeof(msg)), 0);
		CU_ASSERT_TRUE(o.enable_large_batch_splitting);
		CU_ASSERT_EQUAL(o.max_execution_batch_size, 8);
		CU_ASSERT_EQUAL(bat_options_batch_capacity(&o), 8);
	}
}

/*
 * Issue 3 rule 1: allowed sizes are >= 1. bat_option_set refuses "0"; options built in code reach
 * bat_options_finalize directly, which must refuse an entry 0 too (here {0, 32}, no splitting).
 */
static void test_finalize_size_zero(void)
{
	struct bat_options o;

	bat_options_defaults(&o);
	set_sizes(&o, 2, (const uint32_t[]){0, 32});
	FINALIZE_REFUSED(&o, "allowed_batch_sizes", NULL);
	/* with splitting, {0} alone would make every batch's capacity 0 */
	bat_options_defaults(&o);
	o.enable_large_batch_splitting = true;
	set_sizes(&o, 1, (const uint32_t[]){0});
	FINALIZE_REFUSED(&o, "allowed_batch_sizes", NULL);
}

/*
 * bat_option_set bounds max_batch_size (and every allowed size) by BAT_BATCH_SIZE_MAX = 1024, and so
 * must bat_options_finalize for options set in code: a batch of 2000 rows would index stats.by_size
 * and the queue's per-size compute average past their 1025 entries.
 */
static void test_finalize_size_bound(void)
{
	struct bat_options o;

	bat_options_defaults(&o);
	o.max_batch_size = 2000;
	FINALIZE_REFUSED(&o, "max_batch_size", NULL);
	bat_options_defaults(&o);
	o.max_batch_size = 2000;
	o.enable_large_batch_splitting = true;
	FINALIZE_REFUSED(&o, "max_batch_size", NULL);
}

static void test_padded_size(void)
{
	struct bat_options o = opts_base(1, 8, 100);

	set_sizes(&o, 3, (const uint32_t[]){2, 4, 8});
	CU_ASSERT_EQUAL(bat_options_padded_size(&o, 1), 2);
	CU_ASSERT_EQUAL(bat_options_padded_size(&o, 2), 2);
	CU_ASSERT_EQUAL(bat_options_padded_size(&o, 3), 4);
	CU_ASSERT_EQUAL(bat_options_padded_size(&o, 4), 4);
	CU_ASSERT_EQUAL(bat_options_padded_size(&o, 5), 8);
	CU_ASSERT_EQUAL(bat_options_padded_size(&o, 8), 8);
}

static void test_queue_create_refuses(void)
{
	struct bat_options o = opts_base(1, 4, 100);
	struct bat_limiter *lim;
	struct bw_executor exec = {.submit = stub_submit, .ctx = NULL};
	struct bw_executor no_submit = {.submit = NULL, .ctx = NULL};
	char msg[MSG_CAP];

	CU_ASSERT_EQUAL_FATAL(bat_options_finalize(&o, msg, sizeof(msg)), 0);
	lim = bat_limiter_create(&o);
	CU_ASSERT_PTR_NOT_NULL_FATAL(lim);
	CU_ASSERT_PTR_NULL(bat_queue_create(NULL, lim, &exec, on_done, NULL, TSC_HZ_1US, 1));
	CU_ASSERT_PTR_NULL(bat_queue_create(&o, NULL, &exec, on_done, NULL, TSC_HZ_1US, 1));
	CU_ASSERT_PTR_NULL(bat_queue_create(&o, lim, NULL, on_done, NULL, TSC_HZ_1US, 1));
	CU_ASSERT_PTR_NULL(bat_queue_create(&o, lim, &no_submit, on_done, NULL, TSC_HZ_1US, 1));
	CU_ASSERT_PTR_NULL(bat_queue_create(&o, lim, &exec, NULL, NULL, TSC_HZ_1US, 1));
	CU_ASSERT_PTR_NULL(bat_queue_create(&o, lim, &exec, on_done, NULL, 0, 1));
	o.priority_levels = BAT_PRIORITY_LEVELS_MAX + 1;
	CU_ASSERT_PTR_NULL(bat_queue_create(&o, lim, &exec, on_done, NULL, TSC_HZ_1US, 1));
	bat_limiter_destroy(lim);
}

/* ---- 2. windows -------------------------------------------------------------------------------- */

static void test_window_full(void)
{
	struct harness h;
	struct bat_options o = opts_base(4, 4, 100);
	struct job_rec a, b;

	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit(&h, &a, 2, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1000), 0); /* open, not due */
	CU_ASSERT_EQUAL(h.nb_rec, 0);
	CU_ASSERT_FALSE(bat_queue_empty(h.q));
	CU_ASSERT_EQUAL(submit(&h, &b, 2, 1010), BW_STATUS_OK); /* fills it: closed FULL */
	CU_ASSERT_EQUAL(bat_poll(h.q, 1010), 1);                /* dispatched on this same poll */
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 1);
	CU_ASSERT_EQUAL(h.rec[0].reason, BW_DISPATCH_FULL);
	CU_ASSERT_EQUAL(h.rec[0].size, 4);
	CU_ASSERT_EQUAL(h.rec[0].padded_size, 4);
	CU_ASSERT_EQUAL(h.rec[0].num_tasks, 2);
	CU_ASSERT_EQUAL(h.rec[0].created_tsc, 1000); /* the window opened with its first task */
	CU_ASSERT_EQUAL(h.rec[0].dispatched_tsc, 1010);
	CU_ASSERT_EQUAL(h.rec[0].priority, 0);
	check_task(&h.rec[0], 0, &a, 2, 0);
	check_task(&h.rec[0], 1, &b, 2, 0);
	CU_ASSERT_EQUAL(bat_queue_stats(h.q)->window_wait_us, 10);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1011), 0);
	CHECK_STATS(&h, .jobs = 2, .batches = 1, .rows = 4, .dispatch[BW_DISPATCH_FULL] = 1);

	CU_ASSERT_EQUAL(a.done_calls, 0);
	complete(&h, 0, BW_STATUS_OK, 1050);
	check_done_once(&a, BW_STATUS_OK);
	check_done_once(&b, BW_STATUS_OK);
	CU_ASSERT_TRUE(job_output_ok(&a));
	CU_ASSERT_TRUE(job_output_ok(&b));
	CU_ASSERT_TRUE(bat_queue_empty(h.q));
	CU_ASSERT_EQUAL(bat_limiter_in_flight(h.lim), 0);
	CHECK_STATS(&h, .jobs = 2, .jobs_done = 2, .batches = 1, .rows = 4, .dispatch[BW_DISPATCH_FULL] = 1);
	harness_fini(&h);
}

static void test_window_timeout(void)
{
	struct harness h;
	struct bat_options o = opts_base(4, 8, 100);
	struct job_rec a, b, c;

	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit(&h, &a, 1, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(submit(&h, &b, 2, 1050), BW_STATUS_OK); /* joins: timed from the first task */
	CU_ASSERT_EQUAL(bat_poll(h.q, 1000), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1099), 0); /* created + timeout - 1: still open */
	CU_ASSERT_EQUAL(h.nb_rec, 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1100), 2); /* closes and dispatches */
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 1);
	CU_ASSERT_EQUAL(h.rec[0].reason, BW_DISPATCH_TIMEOUT);
	CU_ASSERT_EQUAL(h.rec[0].size, 3);
	CU_ASSERT_EQUAL(h.rec[0].padded_size, 3);
	CU_ASSERT_EQUAL(h.rec[0].created_tsc, 1000);
	CU_ASSERT_EQUAL(h.rec[0].dispatched_tsc, 1100);
	check_task(&h.rec[0], 0, &a, 1, 0);
	check_task(&h.rec[0], 1, &b, 2, 0);
	CU_ASSERT_EQUAL(bat_queue_stats(h.q)->window_wait_us, 100);

	/* the next task opens the next window, timed from itself */
	CU_ASSERT_EQUAL(submit(&h, &c, 1, 1100), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1199), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1200), 2);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 2);
	CU_ASSERT_EQUAL(h.rec[1].reason, BW_DISPATCH_TIMEOUT);
	CU_ASSERT_EQUAL(h.rec[1].created_tsc, 1100);
	check_task(&h.rec[1], 0, &c, 1, 0);
	complete(&h, 1, BW_STATUS_OK, 1210);
	complete(&h, 0, BW_STATUS_OK, 1220);
	check_done_once(&a, BW_STATUS_OK);
	check_done_once(&b, BW_STATUS_OK);
	check_done_once(&c, BW_STATUS_OK);
	CU_ASSERT_EQUAL(c.done_order, 1);
	CU_ASSERT_TRUE(bat_queue_empty(h.q));
	CHECK_STATS(&h, .jobs = 3, .jobs_done = 3, .batches = 2, .rows = 4, .dispatch[BW_DISPATCH_TIMEOUT] = 2);
	harness_fini(&h);
}

static void test_window_timeout_zero(void)
{
	struct harness h;
	struct bat_options o = opts_base(4, 8, 0);
	struct job_rec a, b;

	/* batch_timeout_micros 0: tasks submitted before the poll still share the window */
	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit(&h, &a, 1, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(submit(&h, &b, 1, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1000), 2);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 1);
	CU_ASSERT_EQUAL(h.rec[0].reason, BW_DISPATCH_TIMEOUT);
	CU_ASSERT_EQUAL(h.rec[0].size, 2);
	complete(&h, 0, BW_STATUS_OK, 1001);
	CHECK_STATS(&h, .jobs = 2, .jobs_done = 2, .batches = 1, .rows = 2, .dispatch[BW_DISPATCH_TIMEOUT] = 1);
	harness_fini(&h);
}

static void test_window_drain(void)
{
	struct harness h;
	struct bat_options o = opts_base(4, 8, 100);
	struct job_rec a;

	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit(&h, &a, 3, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1001), 0);
	bat_queue_drain(h.q, 1001);
	CU_ASSERT_EQUAL(h.nb_rec, 0); /* drain closes; the poll dispatches */
	CU_ASSERT_EQUAL(bat_poll(h.q, 1001), 1);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 1);
	CU_ASSERT_EQUAL(h.rec[0].reason, BW_DISPATCH_DRAIN);
	CU_ASSERT_EQUAL(h.rec[0].size, 3);
	CU_ASSERT_EQUAL(h.rec[0].dispatched_tsc, 1001);
	/* drain with nothing open does nothing */
	bat_queue_drain(h.q, 1002);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1002), 0);
	complete(&h, 0, BW_STATUS_OK, 1010);
	check_done_once(&a, BW_STATUS_OK);
	CU_ASSERT_TRUE(bat_queue_empty(h.q));
	CHECK_STATS(&h, .jobs = 1, .jobs_done = 1, .batches = 1, .rows = 3, .dispatch[BW_DISPATCH_DRAIN] = 1);
	harness_fini(&h);
}

static void test_window_no_fit(void)
{
	struct harness h;
	struct bat_options o = opts_base(4, 8, 100);
	struct job_rec a, b;

	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit(&h, &a, 5, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(submit(&h, &b, 5, 1001), BW_STATUS_OK); /* 5 + 5 > 8: closes a's, opens the next */
	CU_ASSERT_EQUAL(bat_poll(h.q, 1001), 1);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 1);
	CU_ASSERT_EQUAL(h.rec[0].reason, BW_DISPATCH_FULL);
	CU_ASSERT_EQUAL(h.rec[0].size, 5);
	CU_ASSERT_EQUAL(h.rec[0].padded_size, 5);
	CU_ASSERT_EQUAL(h.rec[0].num_tasks, 1);
	check_task(&h.rec[0], 0, &a, 5, 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1100), 0); /* b's window opened at 1001 */
	CU_ASSERT_EQUAL(bat_poll(h.q, 1101), 2);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 2);
	CU_ASSERT_EQUAL(h.rec[1].reason, BW_DISPATCH_TIMEOUT);
	CU_ASSERT_EQUAL(h.rec[1].created_tsc, 1001);
	check_task(&h.rec[1], 0, &b, 5, 0);
	complete(&h, 0, BW_STATUS_OK, 1200);
	complete(&h, 1, BW_STATUS_OK, 1200);
	check_done_once(&a, BW_STATUS_OK);
	check_done_once(&b, BW_STATUS_OK);
	CU_ASSERT_TRUE(job_output_ok(&a));
	CU_ASSERT_TRUE(job_output_ok(&b));
	CHECK_STATS(&h, .jobs = 2, .jobs_done = 2, .batches = 2, .rows = 10, .dispatch[BW_DISPATCH_FULL] = 1,
		    .dispatch[BW_DISPATCH_TIMEOUT] = 1);
	harness_fini(&h);
}

/* ---- 3. splitting ------------------------------------------------------------------------------ */

/* max_batch_size 16, allowed sizes {4} with splitting: L = 4. */
static struct bat_options opts_split(int32_t threads)
{
	struct bat_options o = opts_base(threads, 16, 100);

	o.enable_large_batch_splitting = true;
	set_sizes(&o, 1, (const uint32_t[]){4});
	return o;
}

static void test_split_10_3_4(void)
{
	struct harness h;
	struct bat_options o = opts_split(4);
	struct job_rec a, b;

	harness_init(&h, &o);
	CU_ASSERT_EQUAL(h.opts.max_execution_batch_size, 4);
	CU_ASSERT_EQUAL(submit(&h, &a, 1, 1000), BW_STATUS_OK);  /* r = 3 */
	CU_ASSERT_EQUAL(submit(&h, &b, 10, 1001), BW_STATUS_OK); /* n = 10: 3, 4, 3 */
	CU_ASSERT_EQUAL(bat_queue_stats(h.q)->splits, 1);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1001), 2); /* two full batches */
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 2);
	CU_ASSERT_EQUAL(h.rec[0].reason, BW_DISPATCH_FULL);
	CU_ASSERT_EQUAL(h.rec[0].size, 4);
	CU_ASSERT_EQUAL(h.rec[0].num_tasks, 2);
	check_task(&h.rec[0], 0, &a, 1, 0);
	check_task(&h.rec[0], 1, &b, 3, 0);
	CU_ASSERT_EQUAL(h.rec[1].reason, BW_DISPATCH_FULL);
	CU_ASSERT_EQUAL(h.rec[1].size, 4);
	CU_ASSERT_EQUAL(h.rec[1].num_tasks, 1);
	CU_ASSERT_EQUAL(h.rec[1].created_tsc, 1001);
	check_task(&h.rec[1], 0, &b, 4, 3);
	/* the tail waits in its own window, opened by b at 1001 */
	CU_ASSERT_EQUAL(bat_poll(h.q, 1100), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1101), 2);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 3);
	CU_ASSERT_EQUAL(h.rec[2].reason, BW_DISPATCH_TIMEOUT);
	CU_ASSERT_EQUAL(h.rec[2].size, 3);
	CU_ASSERT_EQUAL(h.rec[2].padded_size, 4);
	check_task(&h.rec[2], 0, &b, 3, 7);

	/* pieces complete out of order; b completes once, after its last */
	complete(&h, 2, BW_STATUS_OK, 1200);
	CU_ASSERT_EQUAL(b.done_calls, 0);
	complete(&h, 0, BW_STATUS_OK, 1201);
	check_done_once(&a, BW_STATUS_OK);
	CU_ASSERT_EQUAL(b.done_calls, 0);
	complete(&h, 1, BW_STATUS_OK, 1202);
	check_done_once(&a, BW_STATUS_OK);
	check_done_once(&b, BW_STATUS_OK);
	CU_ASSERT_EQUAL(b.done_order, 2);
	/* outputs joined in row order, and nothing written past them (padding dropped) */
	CU_ASSERT_TRUE(job_output_ok(&a));
	CU_ASSERT_TRUE(job_output_ok(&b));
	CU_ASSERT_TRUE(bat_queue_empty(h.q));
	CU_ASSERT_EQUAL(bat_queue_stats(h.q)->by_size[4], 3);
	CHECK_STATS(&h, .jobs = 2, .jobs_done = 2, .splits = 1, .batches = 3, .rows = 11, .padding_rows = 1,
		    .dispatch[BW_DISPATCH_FULL] = 2, .dispatch[BW_DISPATCH_TIMEOUT] = 1);
	harness_fini(&h);
}

static void test_split_no_open_window(void)
{
	struct harness h;
	struct bat_options o = opts_split(4);
	struct job_rec a;

	/* r = 0 (no window open): [L, L, tail] = 4, 4, 1 */
	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit(&h, &a, 9, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1000), 2);
	bat_queue_drain(h.q, 1000);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1000), 1);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 3);
	check_task(&h.rec[0], 0, &a, 4, 0);
	check_task(&h.rec[1], 0, &a, 4, 4);
	check_task(&h.rec[2], 0, &a, 1, 8);
	CU_ASSERT_EQUAL(h.rec[2].reason, BW_DISPATCH_DRAIN);
	CU_ASSERT_EQUAL(h.rec[2].padded_size, 4);
	for (unsigned int i = 0; i < 3; i++)
		complete(&h, i, BW_STATUS_OK, 1100);
	check_done_once(&a, BW_STATUS_OK);
	CU_ASSERT_TRUE(job_output_ok(&a));
	CHECK_STATS(&h, .jobs = 1, .jobs_done = 1, .splits = 1, .batches = 3, .rows = 9, .padding_rows = 3,
		    .dispatch[BW_DISPATCH_FULL] = 2, .dispatch[BW_DISPATCH_DRAIN] = 1);
	harness_fini(&h);
}

static void test_split_first_error(void)
{
	struct harness h;
	struct bat_options o = opts_split(4);
	struct job_rec a, b;

	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit(&h, &a, 1, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(submit(&h, &b, 10, 1000), BW_STATUS_OK);
	bat_queue_drain(h.q, 1000);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1000), 3);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 3);
	complete(&h, 0, BW_STATUS_OK, 1100);
	check_done_once(&a, BW_STATUS_OK);
	CU_ASSERT_EQUAL(b.done_calls, 0);
	complete(&h, 1, BW_STATUS_INTERNAL, 1101);
	CU_ASSERT_EQUAL(b.done_calls, 0);
	complete(&h, 2, BW_STATUS_UNAVAILABLE, 1102);
	check_done_once(&b, BW_STATUS_INTERNAL); /* the first error wins */
	check_done_once(&a, BW_STATUS_OK);
	CHECK_STATS(&h, .jobs = 2, .jobs_done = 2, .splits = 1, .batches = 3, .batches_failed = 2, .rows = 11,
		    .padding_rows = 1, .dispatch[BW_DISPATCH_FULL] = 2, .dispatch[BW_DISPATCH_DRAIN] = 1);
	harness_fini(&h);
}

static void test_too_large(void)
{
	struct harness h;
	struct bat_options o = opts_base(4, 8, 100);
	struct job_rec a, b, c;

	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit(&h, &a, 9, 1000), BW_STATUS_INVALID_ARGUMENT);
	CU_ASSERT_EQUAL(submit(&h, &b, 0, 1000), BW_STATUS_INVALID_ARGUMENT); /* no rows: not too large */
	CU_ASSERT_EQUAL(submit(&h, &c, 8, 1000), BW_STATUS_OK);               /* exactly max is fine */
	CU_ASSERT_EQUAL(bat_poll(h.q, 1000), 1);
	CU_ASSERT_EQUAL(a.done_calls, 0);
	CU_ASSERT_EQUAL(b.done_calls, 0);
	complete(&h, 0, BW_STATUS_OK, 1010);
	check_done_once(&c, BW_STATUS_OK);
	CU_ASSERT_EQUAL(a.done_calls, 0);
	CHECK_STATS(&h, .jobs = 1, .jobs_done = 1, .rejected_too_large = 1, .batches = 1, .rows = 8,
		    .dispatch[BW_DISPATCH_FULL] = 1);
	harness_fini(&h);

	/* with splitting too: max_batch_size bounds a request, L a batch */
	o = opts_split(4);
	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit(&h, &a, 17, 1000), BW_STATUS_INVALID_ARGUMENT);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1000), 0);
	CU_ASSERT_EQUAL(h.nb_rec, 0);
	CU_ASSERT_EQUAL(a.done_calls, 0);
	CU_ASSERT_TRUE(bat_queue_empty(h.q));
	CHECK_STATS(&h, .rejected_too_large = 1);
	harness_fini(&h);
}

/* ---- 4. full queue ----------------------------------------------------------------------------- */

static void test_full_enqueued_batches(void)
{
	struct harness h;
	struct bat_options o = opts_base(1, 4, 100);
	struct job_rec a, b, c, d, e, f, g;

	o.max_enqueued_batches = 2;
	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit(&h, &a, 4, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1000), 1); /* a's batch in flight: it no longer counts */
	CU_ASSERT_EQUAL(submit(&h, &b, 4, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(submit(&h, &c, 4, 1000), BW_STATUS_OK); /* two closed, waiting for the limit */
	CU_ASSERT_EQUAL(bat_poll(h.q, 1000), 0);
	CU_ASSERT_EQUAL(h.nb_rec, 1);
	CU_ASSERT_EQUAL(submit(&h, &d, 1, 1001), BW_STATUS_UNAVAILABLE); /* closed ones count */
	CU_ASSERT_EQUAL(d.done_calls, 0);
	CHECK_STATS(&h, .jobs = 3, .rejected_full = 1, .batches = 1, .rows = 4, .dispatch[BW_DISPATCH_FULL] = 1);

	complete(&h, 0, BW_STATUS_OK, 1010);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1010), 1); /* b goes; c waits */
	CU_ASSERT_EQUAL(submit(&h, &e, 1, 1011), BW_STATUS_OK); /* opens the window: c + it = 2 */
	CU_ASSERT_EQUAL(submit(&h, &f, 4, 1012), BW_STATUS_UNAVAILABLE); /* would need a third */
	CU_ASSERT_EQUAL(submit(&h, &g, 2, 1013), BW_STATUS_OK);          /* fits the open window */
	CU_ASSERT_EQUAL(f.done_calls, 0);
	CU_ASSERT_EQUAL(d.done_calls, 0);
	complete(&h, 1, BW_STATUS_OK, 1020);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1020), 1);
	complete(&h, 2, BW_STATUS_OK, 1030);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1110), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1111), 2);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 4);
	/* f's refusal left the window open and whole */
	CU_ASSERT_EQUAL(h.rec[3].reason, BW_DISPATCH_TIMEOUT);
	CU_ASSERT_EQUAL(h.rec[3].size, 3);
	check_task(&h.rec[3], 0, &e, 1, 0);
	check_task(&h.rec[3], 1, &g, 2, 0);
	complete(&h, 3, BW_STATUS_OK, 1120);
	check_done_once(&a, BW_STATUS_OK);
	check_done_once(&b, BW_STATUS_OK);
	check_done_once(&c, BW_STATUS_OK);
	check_done_once(&e, BW_STATUS_OK);
	check_done_once(&g, BW_STATUS_OK);
	CU_ASSERT_EQUAL(d.done_calls, 0);
	CU_ASSERT_EQUAL(f.done_calls, 0);
	CU_ASSERT_TRUE(bat_queue_empty(h.q));
	CHECK_STATS(&h, .jobs = 5, .jobs_done = 5, .rejected_full = 2, .batches = 4, .rows = 15,
		    .dispatch[BW_DISPATCH_FULL] = 3, .dispatch[BW_DISPATCH_TIMEOUT] = 1);
	harness_fini(&h);
}

static void test_full_queue_size(void)
{
	struct harness h;
	struct bat_options o = opts_base(1, 8, 100);
	struct job_rec j[8];

	o.max_queue_size = 3;
	harness_init(&h, &o);
	for (unsigned int i = 0; i < 3; i++)
		CU_ASSERT_EQUAL(submit(&h, &j[i], 1, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(submit(&h, &j[3], 1, 1000), BW_STATUS_UNAVAILABLE);
	CU_ASSERT_EQUAL(j[3].done_calls, 0);
	CHECK_STATS(&h, .jobs = 3, .rejected_full = 1);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1100), 2); /* dispatched tasks leave the count */
	CU_ASSERT_EQUAL(submit(&h, &j[4], 1, 1100), BW_STATUS_OK);
	CU_ASSERT_EQUAL(submit(&h, &j[5], 1, 1100), BW_STATUS_OK);
	CU_ASSERT_EQUAL(submit(&h, &j[6], 1, 1100), BW_STATUS_OK);
	CU_ASSERT_EQUAL(submit(&h, &j[7], 1, 1100), BW_STATUS_UNAVAILABLE);
	complete(&h, 0, BW_STATUS_OK, 1150);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1200), 2);
	complete(&h, 1, BW_STATUS_OK, 1250);
	for (unsigned int i = 0; i < 8; i++) {
		if (i == 3 || i == 7) {
			CU_ASSERT_EQUAL(j[i].done_calls, 0);
		} else {
			check_done_once(&j[i], BW_STATUS_OK);
		}
	}
	CHECK_STATS(&h, .jobs = 6, .jobs_done = 6, .rejected_full = 2, .batches = 2, .rows = 6,
		    .dispatch[BW_DISPATCH_TIMEOUT] = 2);
	harness_fini(&h);
}

static void test_full_split_nothing_half_queued(void)
{
	struct harness h;
	struct bat_options o = opts_split(1);
	struct job_rec a, b, c;

	o.max_enqueued_batches = 3;
	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit(&h, &a, 1, 1000), BW_STATUS_OK);
	/* 14 rows: 3 into the open batch + 4 + 4 + 3 needs 3 new batches, 1 + 3 > 3 */
	CU_ASSERT_EQUAL(submit(&h, &b, 14, 1001), BW_STATUS_UNAVAILABLE);
	CU_ASSERT_EQUAL(b.done_calls, 0);
	CHECK_STATS(&h, .jobs = 1, .rejected_full = 1);
	/* 10 rows: 3 + 4 + 3 needs 2 new, 1 + 2 = 3 */
	CU_ASSERT_EQUAL(submit(&h, &c, 10, 1002), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1002), 1);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 1);
	/* the open batch holds a and c's first piece: nothing of b */
	CU_ASSERT_EQUAL(h.rec[0].size, 4);
	CU_ASSERT_EQUAL(h.rec[0].num_tasks, 2);
	check_task(&h.rec[0], 0, &a, 1, 0);
	check_task(&h.rec[0], 1, &c, 3, 0);
	complete(&h, 0, BW_STATUS_OK, 1010);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1010), 1);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 2);
	check_task(&h.rec[1], 0, &c, 4, 3);
	complete(&h, 1, BW_STATUS_OK, 1020);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1101), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1102), 2);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 3);
	check_task(&h.rec[2], 0, &c, 3, 7);
	CU_ASSERT_EQUAL(h.rec[2].num_tasks, 1);
	complete(&h, 2, BW_STATUS_OK, 1110);
	check_done_once(&a, BW_STATUS_OK);
	check_done_once(&c, BW_STATUS_OK);
	CU_ASSERT_TRUE(job_output_ok(&c));
	CU_ASSERT_EQUAL(b.done_calls, 0);
	CU_ASSERT_TRUE(bat_queue_empty(h.q));
	CHECK_STATS(&h, .jobs = 2, .jobs_done = 2, .rejected_full = 1, .splits = 1, .batches = 3, .rows = 11,
		    .padding_rows = 1, .dispatch[BW_DISPATCH_FULL] = 2, .dispatch[BW_DISPATCH_TIMEOUT] = 1);
	harness_fini(&h);
}

/* ---- 5. padding -------------------------------------------------------------------------------- */

static void test_padding_gather_scatter(void)
{
	struct harness h;
	struct bat_options o = opts_base(1, 8, 100);
	struct job_rec a, b;
	uint8_t dst[4 * ROW_BYTES + CANARY_BYTES];
	uint8_t src[4 * ROW_BYTES];

	set_sizes(&o, 3, (const uint32_t[]){2, 4, 8});
	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit(&h, &a, 2, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(submit(&h, &b, 1, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1100), 2);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 1);
	CU_ASSERT_EQUAL(h.rec[0].size, 3);
	CU_ASSERT_EQUAL(h.rec[0].padded_size, 4);
	CU_ASSERT_EQUAL(h.rec[0].batch->padded_size, 4);

	/* gather: a's 2 rows, b's row, then row 0 of the first task (a) once more */
	memset(dst, CANARY, sizeof(dst));
	bat_batch_gather(h.rec[0].batch, 0, dst, ROW_BYTES);
	CU_ASSERT_EQUAL(memcmp(dst, a.in, 2 * ROW_BYTES), 0);
	CU_ASSERT_EQUAL(memcmp(dst + 2 * ROW_BYTES, b.in, ROW_BYTES), 0);
	CU_ASSERT_EQUAL(memcmp(dst + 3 * ROW_BYTES, a.in, ROW_BYTES), 0);
	for (unsigned int i = 4 * ROW_BYTES; i < sizeof(dst); i++)
		CU_ASSERT_EQUAL(dst[i], CANARY);

	/* scatter: rows 0-1 to a, row 2 to b, row 3 (padding) nowhere */
	for (unsigned int i = 0; i < sizeof(src); i++)
		src[i] = (uint8_t)(0x40 + i);
	bat_batch_scatter(h.rec[0].batch, 0, src, ROW_BYTES);
	CU_ASSERT_EQUAL(memcmp(a.out, src, 2 * ROW_BYTES), 0);
	CU_ASSERT_EQUAL(memcmp(b.out, src + 2 * ROW_BYTES, ROW_BYTES), 0);
	for (unsigned int i = 2 * ROW_BYTES; i < sizeof(a.out); i++)
		CU_ASSERT_EQUAL(a.out[i], CANARY);
	for (unsigned int i = ROW_BYTES; i < sizeof(b.out); i++)
		CU_ASSERT_EQUAL(b.out[i], CANARY);

	h.rec[0].completed = true;
	bat_batch_complete(h.rec[0].batch, BW_STATUS_OK, 1110);
	check_done_once(&a, BW_STATUS_OK);
	check_done_once(&b, BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_queue_stats(h.q)->by_size[4], 1);
	CU_ASSERT_EQUAL(bat_queue_stats(h.q)->by_size[3], 0);
	CHECK_STATS(&h, .jobs = 2, .jobs_done = 2, .batches = 1, .rows = 3, .padding_rows = 1,
		    .dispatch[BW_DISPATCH_TIMEOUT] = 1);
	harness_fini(&h);
}

static void test_padding_counted_by_size(void)
{
	static const uint32_t rows[] = {1, 2, 3, 5, 8};
	static const uint32_t padded[] = {2, 2, 4, 8, 8};
	struct harness h;
	struct bat_options o = opts_base(8, 8, 100);
	struct job_rec j[5];

	set_sizes(&o, 3, (const uint32_t[]){2, 4, 8});
	harness_init(&h, &o);
	for (unsigned int i = 0; i < 5; i++) {
		CU_ASSERT_EQUAL(submit(&h, &j[i], rows[i], 1000 + 1000 * i), BW_STATUS_OK);
		bat_poll(h.q, 1100 + 1000 * i);
		CU_ASSERT_EQUAL_FATAL(h.nb_rec, i + 1);
		CU_ASSERT_EQUAL(h.rec[i].padded_size, padded[i]);
		complete(&h, i, BW_STATUS_OK, 1200 + 1000 * i);
		check_done_once(&j[i], BW_STATUS_OK);
		CU_ASSERT_TRUE(job_output_ok(&j[i])); /* padding outputs dropped */
	}
	CU_ASSERT_EQUAL(bat_queue_stats(h.q)->by_size[2], 2);
	CU_ASSERT_EQUAL(bat_queue_stats(h.q)->by_size[4], 1);
	CU_ASSERT_EQUAL(bat_queue_stats(h.q)->by_size[8], 2);
	/* padding 1 + 0 + 1 + 3 + 0 */
	CHECK_STATS(&h, .jobs = 5, .jobs_done = 5, .batches = 5, .rows = 19, .padding_rows = 5,
		    .dispatch[BW_DISPATCH_TIMEOUT] = 4, .dispatch[BW_DISPATCH_FULL] = 1);
	harness_fini(&h);
}

/* ---- 6. errors --------------------------------------------------------------------------------- */

static void test_error_fanout(void)
{
	struct harness h;
	struct bat_options o = opts_base(4, 8, 100);
	struct job_rec a, b, c, d;

	o.enable_large_batch_splitting = true;
	o.max_execution_batch_size = 4;
	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit(&h, &a, 2, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(submit(&h, &b, 1, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(submit(&h, &c, 3, 1000), BW_STATUS_OK); /* 1 here, 2 in the next batch */
	CU_ASSERT_EQUAL(submit(&h, &d, 1, 1000), BW_STATUS_OK); /* joins c's second piece */
	bat_queue_drain(h.q, 1000);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1000), 2);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 2);
	check_task(&h.rec[0], 0, &a, 2, 0);
	check_task(&h.rec[0], 1, &b, 1, 0);
	check_task(&h.rec[0], 2, &c, 1, 0);
	check_task(&h.rec[1], 0, &c, 2, 1);
	check_task(&h.rec[1], 1, &d, 1, 0);

	complete(&h, 0, BW_STATUS_INTERNAL, 1100);
	check_done_once(&a, BW_STATUS_INTERNAL);
	check_done_once(&b, BW_STATUS_INTERNAL);
	CU_ASSERT_EQUAL(c.done_calls, 0); /* its other piece is still running */
	CU_ASSERT_EQUAL(d.done_calls, 0);
	complete(&h, 1, BW_STATUS_INTERNAL, 1101);
	check_done_once(&a, BW_STATUS_INTERNAL);
	check_done_once(&b, BW_STATUS_INTERNAL);
	check_done_once(&c, BW_STATUS_INTERNAL);
	check_done_once(&d, BW_STATUS_INTERNAL);
	CU_ASSERT_EQUAL(h.done_calls, 4);
	CU_ASSERT_TRUE(bat_queue_empty(h.q));
	CHECK_STATS(&h, .jobs = 4, .jobs_done = 4, .splits = 1, .batches = 2, .batches_failed = 2, .rows = 7,
		    .dispatch[BW_DISPATCH_FULL] = 1, .dispatch[BW_DISPATCH_DRAIN] = 1);
	harness_fini(&h);
}

static void test_error_split_piece_ok_after_failure(void)
{
	struct harness h;
	struct bat_options o = opts_base(4, 8, 100);
	struct job_rec a, c;

	/* one piece fails, the other succeeds: the job still completes once, with the failure */
	o.enable_large_batch_splitting = true;
	o.max_execution_batch_size = 4;
	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit(&h, &a, 3, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(submit(&h, &c, 3, 1000), BW_STATUS_OK);
	bat_queue_drain(h.q, 1000);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1000), 2);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 2);
	complete(&h, 0, BW_STATUS_INTERNAL, 1100);
	check_done_once(&a, BW_STATUS_INTERNAL);
	CU_ASSERT_EQUAL(c.done_calls, 0);
	complete(&h, 1, BW_STATUS_OK, 1101);
	check_done_once(&c, BW_STATUS_INTERNAL);
	CHECK_STATS(&h, .jobs = 2, .jobs_done = 2, .splits = 1, .batches = 2, .batches_failed = 1, .rows = 6,
		    .dispatch[BW_DISPATCH_FULL] = 1, .dispatch[BW_DISPATCH_DRAIN] = 1);
	harness_fini(&h);
}

static void test_error_submit_eio(void)
{
	struct harness h;
	struct bat_options o = opts_base(1, 4, 100);
	struct job_rec a, b, c;

	harness_init(&h, &o);
	h.submit_ret = -EIO;
	CU_ASSERT_EQUAL(submit(&h, &a, 2, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(submit(&h, &b, 2, 1000), BW_STATUS_OK);
	bat_poll(h.q, 1000);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 1);
	CU_ASSERT_TRUE(h.rec[0].failed_submit);
	check_done_once(&a, BW_STATUS_UNAVAILABLE);
	check_done_once(&b, BW_STATUS_UNAVAILABLE);
	CU_ASSERT_EQUAL(bat_limiter_in_flight(h.lim), 0); /* the slot is back */
	CU_ASSERT_TRUE(bat_queue_empty(h.q));
	CHECK_STATS(&h, .jobs = 2, .jobs_done = 2, .batches = 1, .batches_failed = 1, .rows = 4,
		    .dispatch[BW_DISPATCH_FULL] = 1);

	/* with num_batch_threads 1, the next batch could not go if the slot had leaked */
	h.submit_ret = 0;
	CU_ASSERT_EQUAL(submit(&h, &c, 4, 1001), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1001), 1);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 2);
	CU_ASSERT_FALSE(h.rec[1].failed_submit);
	CU_ASSERT_EQUAL(bat_limiter_in_flight(h.lim), 1);
	complete(&h, 1, BW_STATUS_OK, 1010);
	check_done_once(&c, BW_STATUS_OK);
	check_done_once(&a, BW_STATUS_UNAVAILABLE);
	CU_ASSERT_EQUAL(bat_limiter_in_flight(h.lim), 0);
	CHECK_STATS(&h, .jobs = 3, .jobs_done = 3, .batches = 2, .batches_failed = 1, .rows = 8,
		    .dispatch[BW_DISPATCH_FULL] = 2);
	harness_fini(&h);
}

/* ---- 7. deadlines ------------------------------------------------------------------------------ */

static void test_deadline_while_limit_held(void)
{
	struct harness h;
	struct bat_options o = opts_base(1, 4, 100);
	struct job_rec a, b, c, c2;

	o.max_enqueued_batches = 1;
	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit(&h, &a, 4, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1000), 1); /* a holds the only in-flight slot */
	CU_ASSERT_EQUAL(submit_full(&h, &b, 200, 1, 0, 1150, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(submit(&h, &c, 4, 1001), BW_STATUS_UNAVAILABLE); /* b's batch fills the queue */
	CU_ASSERT_EQUAL(bat_poll(h.q, 1099), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1100), 1); /* b's window closes but cannot go */
	CU_ASSERT_EQUAL(bat_poll(h.q, 1149), 0);
	CU_ASSERT_EQUAL(b.done_calls, 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1150), 1);
	check_done_once(&b, BW_STATUS_DEADLINE_EXCEEDED);
	CU_ASSERT_EQUAL(h.nb_rec, 1); /* never given to the executor */
	CU_ASSERT_FALSE(bat_queue_empty(h.q)); /* a is still in flight */
	/* its place is free: a job that found the queue full now fits */
	CU_ASSERT_EQUAL(submit(&h, &c2, 4, 1150), BW_STATUS_OK);
	complete(&h, 0, BW_STATUS_OK, 1200);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1200), 1);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 2);
	check_task(&h.rec[1], 0, &c2, 4, 0);
	complete(&h, 1, BW_STATUS_OK, 1210);
	check_done_once(&a, BW_STATUS_OK);
	check_done_once(&b, BW_STATUS_DEADLINE_EXCEEDED);
	check_done_once(&c2, BW_STATUS_OK);
	CU_ASSERT_EQUAL(c.done_calls, 0);
	CU_ASSERT_TRUE(bat_queue_empty(h.q));
	CHECK_STATS(&h, .jobs = 3, .jobs_done = 3, .rejected_full = 1, .deadline_expired = 1, .batches = 2,
		    .rows = 8, .dispatch[BW_DISPATCH_FULL] = 2);
	harness_fini(&h);
}

/*
 * default_timeout_micros and a job's own deadline, with the only in-flight slot held so that waiting
 * tasks cannot be dispatched: each window closes DEADLINE the guard before its earliest deadline,
 * then its late tasks expire at the deadline itself.
 */
static void test_deadline_default_and_own(void)
{
	const uint64_t guard = BAT_DEADLINE_GUARD_US;
	struct harness h;
	struct bat_options o = opts_base(1, 4, 100);
	struct job_rec x, a, b, c, c2, y;

	o.default_timeout_micros = 50;
	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit(&h, &x, 4, 900), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 900), 1); /* x holds the slot */

	/* the default: arrival 1000 + 50 */
	CU_ASSERT_EQUAL(submit_full(&h, &a, 300, 1, 0, 0, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1050 - guard - 1), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1050 - guard), 1); /* closes, cannot go */
	CU_ASSERT_EQUAL(bat_poll(h.q, 1049), 0);
	CU_ASSERT_EQUAL(a.done_calls, 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1050), 1);
	check_done_once(&a, BW_STATUS_DEADLINE_EXCEEDED);

	/* its own deadline overrides the default upwards: not expired at 2050; it closes at the
	 * timeout and goes when the slot comes back, before its deadline, so it runs */
	CU_ASSERT_EQUAL(submit_full(&h, &b, 301, 1, 0, 2200, 2000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 2050), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 2099), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 2100), 1);
	CU_ASSERT_EQUAL(b.done_calls, 0);
	complete(&h, 0, BW_STATUS_OK, 2150);
	CU_ASSERT_EQUAL(bat_poll(h.q, 2150), 1);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 2);
	CU_ASSERT_EQUAL(h.rec[1].reason, BW_DISPATCH_TIMEOUT);
	check_task(&h.rec[1], 0, &b, 1, 0); /* b now holds the slot */

	/* ... and downwards */
	CU_ASSERT_EQUAL(submit_full(&h, &c, 302, 1, 0, 3020, 3000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 3020 - guard - 1), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 3020 - guard), 1);
	CU_ASSERT_EQUAL(bat_poll(h.q, 3019), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 3020), 1);
	check_done_once(&c, BW_STATUS_DEADLINE_EXCEEDED);

	/* expiry takes only the late task out of a shared batch; the other goes later */
	CU_ASSERT_EQUAL(submit_full(&h, &c2, 303, 1, 0, 4020, 4000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(submit_full(&h, &y, 304, 2, 0, 4500, 4001), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 4020 - guard), 1);
	CU_ASSERT_EQUAL(bat_poll(h.q, 4020), 1);
	check_done_once(&c2, BW_STATUS_DEADLINE_EXCEEDED);
	CU_ASSERT_EQUAL(y.done_calls, 0);
	complete(&h, 1, BW_STATUS_OK, 4050);
	check_done_once(&b, BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 4050), 1);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 3);
	CU_ASSERT_EQUAL(h.rec[2].reason, BW_DISPATCH_DEADLINE);
	CU_ASSERT_EQUAL(h.rec[2].size, 2);
	CU_ASSERT_EQUAL(h.rec[2].num_tasks, 1);
	check_task(&h.rec[2], 0, &y, 2, 0);
	complete(&h, 2, BW_STATUS_OK, 4060);
	check_done_once(&y, BW_STATUS_OK);
	check_done_once(&x, BW_STATUS_OK);
	CU_ASSERT_EQUAL(h.nb_rec, 3); /* a, c and c2 never reached the executor */
	CU_ASSERT_TRUE(bat_queue_empty(h.q));
	CHECK_STATS(&h, .jobs = 6, .jobs_done = 6, .deadline_expired = 3, .batches = 3, .rows = 7,
		    .dispatch[BW_DISPATCH_FULL] = 1, .dispatch[BW_DISPATCH_TIMEOUT] = 1,
		    .dispatch[BW_DISPATCH_DEADLINE] = 1);
	harness_fini(&h);
}

/* At low load a budget shorter than the timeout runs: its window closes the guard before it. */
static void test_deadline_before_timeout_idle(void)
{
	const uint64_t guard = BAT_DEADLINE_GUARD_US;
	struct harness h;
	struct bat_options o = opts_base(1, 4, 1000);
	struct job_rec a;

	o.default_timeout_micros = 100;
	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit(&h, &a, 1, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1100 - guard - 1), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1100 - guard), 2);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 1);
	CU_ASSERT_EQUAL(h.rec[0].reason, BW_DISPATCH_DEADLINE);
	CU_ASSERT_EQUAL(h.rec[0].dispatched_tsc, 1100 - guard);
	complete(&h, 0, BW_STATUS_OK, 1500); /* the deadline bounds dispatch, not completion */
	check_done_once(&a, BW_STATUS_OK);
	CHECK_STATS(&h, .jobs = 1, .jobs_done = 1, .batches = 1, .rows = 1, .dispatch[BW_DISPATCH_DEADLINE] = 1);
	harness_fini(&h);
}

static void test_deadline_split_piece_dispatched(void)
{
	struct harness h;
	struct bat_options o = opts_split(1);
	struct job_rec j;

	/* 6 rows: a full piece of 4 goes at once, the tail of 2 waits and expires */
	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit_full(&h, &j, 400, 6, 0, 1050, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1000), 1);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1050 - BAT_DEADLINE_GUARD_US), 1); /* the tail closes; the slot is held */
	CU_ASSERT_EQUAL(bat_poll(h.q, 1049), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1050), 1);
	CU_ASSERT_EQUAL(j.done_calls, 0); /* its first piece still runs */
	CU_ASSERT_EQUAL(h.nb_rec, 1);
	complete(&h, 0, BW_STATUS_OK, 1060);
	check_done_once(&j, BW_STATUS_DEADLINE_EXCEEDED);
	CU_ASSERT_TRUE(bat_queue_empty(h.q));
	CHECK_STATS(&h, .jobs = 1, .jobs_done = 1, .splits = 1, .deadline_expired = 1, .batches = 1, .rows = 4,
		    .dispatch[BW_DISPATCH_FULL] = 1);
	harness_fini(&h);

	/* both pieces waiting (the limit held by another batch): both expire, one done() */
	harness_init(&h, &o);
	struct job_rec x;
	CU_ASSERT_EQUAL(submit(&h, &x, 4, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1000), 1);
	CU_ASSERT_EQUAL(submit_full(&h, &j, 401, 6, 0, 1050, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1050 - BAT_DEADLINE_GUARD_US), 1);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1049), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1050), 2);
	check_done_once(&j, BW_STATUS_DEADLINE_EXCEEDED);
	complete(&h, 0, BW_STATUS_OK, 1060);
	check_done_once(&x, BW_STATUS_OK);
	CU_ASSERT_EQUAL(h.nb_rec, 1);
	CU_ASSERT_TRUE(bat_queue_empty(h.q));
	CHECK_STATS(&h, .jobs = 2, .jobs_done = 2, .splits = 1, .deadline_expired = 2, .batches = 1, .rows = 4,
		    .dispatch[BW_DISPATCH_FULL] = 1);
	harness_fini(&h);
}

/* Once a compute time is learnt, a window closes early (DEADLINE) so its task can still be dispatched. */
static void test_deadline_close_early(void)
{
	struct harness h;
	struct bat_options o = opts_base(1, 4, 1000);
	struct job_rec a, b;

	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit(&h, &a, 1, 0), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1000), 2);
	complete(&h, 0, BW_STATUS_OK, 1100); /* size 1 computes in 100 us */
	CU_ASSERT_EQUAL(submit_full(&h, &b, 500, 1, 0, 5300, 5000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 5300 - 100 - BAT_DEADLINE_GUARD_US - 1), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 5300 - 100 - BAT_DEADLINE_GUARD_US), 2); /* now + 100 + guard */
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 2);
	CU_ASSERT_EQUAL(h.rec[1].reason, BW_DISPATCH_DEADLINE);
	complete(&h, 1, BW_STATUS_OK, 5300);
	check_done_once(&b, BW_STATUS_OK);
	CHECK_STATS(&h, .jobs = 2, .jobs_done = 2, .batches = 2, .rows = 2, .dispatch[BW_DISPATCH_TIMEOUT] = 1,
		    .dispatch[BW_DISPATCH_DEADLINE] = 1);
	harness_fini(&h);
}

/* ---- 8. the in-flight limit -------------------------------------------------------------------- */

static struct bat_limiter *limiter_adaptive(uint32_t min, uint32_t initial, uint32_t max, uint32_t window)
{
	struct bat_options o;
	char msg[MSG_CAP] = "";
	struct bat_limiter *lim;

	bat_options_defaults(&o);
	o.num_batch_threads = 0;
	o.min_inflight_batches = min;
	o.initial_inflight_batches = initial;
	o.max_inflight_batches = max;
	o.batches_to_average_over = window;
	CU_ASSERT_EQUAL_FATAL(bat_options_finalize(&o, msg, sizeof(msg)), 0);
	lim = bat_limiter_create(&o);
	CU_ASSERT_PTR_NOT_NULL_FATAL(lim);
	return lim;
}

/* One batch through the limiter: taken (the limit is >= 1 with none in flight) and given back. */
static void one_batch(struct bat_limiter *lim, uint64_t latency_us)
{
	uint64_t rng = 42;

	CU_ASSERT_TRUE(bat_limiter_try_acquire(lim, &rng));
	bat_limiter_release(lim, latency_us);
}

/* A window of n batches whose latencies spread around avg (sum n * avg); the limit moves on the last. */
static void one_window(struct bat_limiter *lim, uint32_t n, uint64_t avg)
{
	double before = bat_limiter_limit(lim);

	for (uint32_t i = 0; i < n; i++) {
		/* avg - 5(n-1) .. avg + 5(n-1) in steps of 10: they sum to n * avg */
		uint64_t latency = avg + 10 * i - 5 * (n - 1);

		one_batch(lim, latency);
		if (i + 1 < n)
			CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(lim), before, 0);
	}
}

/*
 * TF's rule by hand, min 1, initial 16, max 64. d: did the window's average decrease from the previous
 * one (previous starts at 0, so window 1 never decreases). step x2 on a decrease after a decrease,
 * x0.5 on a decrease after a non-decrease, within [1/128, 1/8]; direction reverses on no decrease;
 * limit += dir * limit * step, within [1, 64].
 *
 * | w | avg  | d   | prev d | step              | dir | limit                                  |
 * |---|------|-----|--------|-------------------|-----|----------------------------------------|
 * | 0 | -    | -   | no     | 1/8               | +1  | 16                                     |
 * | 1 | 1000 | no  | no     | 1/8               | -1  | 16 - 16/8 = 14                         |
 * | 2 |  800 | yes | no     | 1/16              | -1  | 14 - 14/16 = 13.125                    |
 * | 3 |  700 | yes | yes    | 1/8               | -1  | 13.125 - 13.125/8 = 11.484375          |
 * | 4 |  600 | yes | yes    | 1/4 -> 1/8 clamp  | -1  | 11.484375 * 7/8 = 10.048828125         |
 * | 5 |  650 | no  | yes    | 1/8               | +1  | 10.048828125 * 9/8 = 11.304931640625   |
 * | 6 |  550 | yes | no     | 1/16              | +1  | 11.304931640625 * 17/16 = 787185/65536 |
 * | 7 |  550 | no  | yes    | 1/16              | -1  | 787185/65536 * 15/16 = 11807775/1048576|
 * | 8 |  400 | yes | no     | 1/32              | -1  | 11807775/1048576 * 31/32               |
 * |   |      |     |        |                   |     |   = 366041025/33554432                 |
 */
static const uint64_t g_script_avg[] = {1000, 800, 700, 600, 650, 550, 550, 400};
static const double g_script_limit[] = {
	14.0,
	13.125,
	11.484375,
	10.048828125,
	11.304931640625,
	787185.0 / 65536,
	11807775.0 / 1048576,
	366041025.0 / 33554432,
};

static void run_script(uint32_t window)
{
	struct bat_limiter *lim = limiter_adaptive(1, 16, 64, window);

	CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(lim), 16.0, 0);
	for (size_t w = 0; w < sizeof(g_script_avg) / sizeof(g_script_avg[0]); w++) {
		one_window(lim, window, g_script_avg[w]);
		CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(lim), g_script_limit[w], 1e-12);
		if (bat_limiter_limit(lim) != g_script_limit[w])
			printf("\n  window %zu of %u: limit %.15g, want %.15g ", w + 1, window,
			       bat_limiter_limit(lim), g_script_limit[w]);
	}
	CU_ASSERT_EQUAL(bat_limiter_in_flight(lim), 0);
	bat_limiter_destroy(lim);
}

static void test_adaptive_script_window2(void)
{
	run_script(2);
}

static void test_adaptive_script_window10(void)
{
	run_script(10);
}

/*
 * The step floor, min 1, initial 16, max 64, one batch a window: alternate no-decrease / decrease,
 * so every decrease follows a non-decrease and halves the step, down to 1/128 and no lower.
 *
 * | w  | avg | d   | step         | dir | limit                      |
 * |----|-----|-----|--------------|-----|----------------------------|
 * | 1  | 100 | no  | 1/8          | -1  | 16 * 7/8 = 14              |
 * | 2  |  90 | yes | 1/16         | -1  | 14 * 15/16 = 13.125        |
 * | 3  |  95 | no  | 1/16         | +1  | 13.125 * 17/16 = 1785/128  |
 * | 4  |  90 | yes | 1/32         | +1  | * 33/32 = 58905/4096       |
 * | 5  |  95 | no  | 1/32         | -1  | * 31/32 = 1826055/131072   |
 * | 6  |  90 | yes | 1/64         | -1  | * 63/64 = 115041465/8388608|
 * | 7  |  95 | no  | 1/64         | +1  | * 65/64                    |
 * | 8  |  90 | yes | 1/128        | +1  | * 129/128                  |
 * | 9  |  95 | no  | 1/128        | -1  | * 127/128                  |
 * | 10 |  90 | yes | 1/256 -> 1/128 | -1 | * 127/128 (the floor holds)|
 */
static void test_adaptive_step_floor(void)
{
	static const uint64_t avg[] = {100, 90, 95, 90, 95, 90, 95, 90, 95, 90};
	struct bat_limiter *lim = limiter_adaptive(1, 16, 64, 1);
	double want = 16;
	static const double factor[] = {7.0 / 8, 15.0 / 16, 17.0 / 16, 33.0 / 32, 31.0 / 32,
					63.0 / 64, 65.0 / 64, 129.0 / 128, 127.0 / 128, 127.0 / 128};

	for (size_t w = 0; w < 10; w++) {
		one_batch(lim, avg[w]);
		want *= factor[w];
		CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(lim), want, 1e-12);
	}
	CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(lim), 15558399270639225.0 / 1125899906842624, 1e-12);
	bat_limiter_destroy(lim);
}

/*
 * The limit's clamps on a narrow range, min 8, initial 8, max 9, one batch a window:
 * | w | avg | d   | step | dir | limit                               |
 * | 1 | 100 | no  | 1/8  | -1  | 8 - 1 = 7 -> 8 (min)                |
 * | 2 | 200 | no  | 1/8  | +1  | 8 + 1 = 9 (max, reached exactly)     |
 * | 3 | 150 | yes | 1/16 | +1  | 9 + 9/16 = 9.5625 -> 9 (max)        |
 * | 4 | 160 | no  | 1/16 | -1  | 9 - 9/16 = 8.4375                   |
 */
static void test_adaptive_clamps_narrow(void)
{
	struct bat_limiter *lim = limiter_adaptive(8, 8, 9, 1);

	one_batch(lim, 100);
	CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(lim), 8.0, 0);
	one_batch(lim, 200);
	CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(lim), 9.0, 0);
	one_batch(lim, 150);
	CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(lim), 9.0, 0);
	one_batch(lim, 160);
	CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(lim), 8.4375, 0);
	bat_limiter_destroy(lim);
}

/*
 * The clamps over a long run, min 1, initial 16, max 64: latencies that keep falling with direction -1
 * shrink the limit by 7/8 a window (step back at 1/8 after window 3) until it sits on 1; one rise
 * reverses it (1 + 1/8 = 1.125); falling latencies then grow it by 9/8 a window until it sits on 64.
 */
static void test_adaptive_clamps_long(void)
{
	struct bat_limiter *lim = limiter_adaptive(1, 16, 64, 1);
	uint64_t latency = 100000;

	one_batch(lim, latency); /* window 1: reverses to -1, 14 */
	CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(lim), 14.0, 0);
	for (int w = 0; w < 40; w++) {
		one_batch(lim, --latency);
		CU_ASSERT(bat_limiter_limit(lim) >= 1.0);
	}
	CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(lim), 1.0, 0);
	one_batch(lim, 200000); /* a rise: +1 with step 1/8 */
	CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(lim), 1.125, 0);
	latency = 200000;
	one_batch(lim, --latency); /* a decrease after a rise: step 1/16, 1.125 * 17/16 */
	CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(lim), 1.125 * 17 / 16, 1e-12);
	one_batch(lim, --latency); /* decrease after decrease: step 1/8 */
	CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(lim), 1.125 * 17 / 16 * 9 / 8, 1e-12);
	for (int w = 0; w < 60; w++) {
		one_batch(lim, --latency);
		CU_ASSERT(bat_limiter_limit(lim) <= 64.0);
	}
	CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(lim), 64.0, 0);
	CU_ASSERT_EQUAL(bat_limiter_in_flight(lim), 0);
	bat_limiter_destroy(lim);
}

static void test_limiter_fixed(void)
{
	struct bat_options o;
	char msg[MSG_CAP] = "";
	struct bat_limiter *lim;
	uint64_t rng = 7;

	bat_options_defaults(&o);
	o.num_batch_threads = 3;
	CU_ASSERT_EQUAL_FATAL(bat_options_finalize(&o, msg, sizeof(msg)), 0);
	lim = bat_limiter_create(&o);
	CU_ASSERT_PTR_NOT_NULL_FATAL(lim);
	CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(lim), 3.0, 0);
	for (int i = 0; i < 3; i++)
		CU_ASSERT_TRUE(bat_limiter_try_acquire(lim, &rng));
	CU_ASSERT_EQUAL(bat_limiter_in_flight(lim), 3);
	for (int i = 0; i < 100; i++)
		CU_ASSERT_FALSE(bat_limiter_try_acquire(lim, &rng));
	bat_limiter_release(lim, 500);
	CU_ASSERT_EQUAL(bat_limiter_in_flight(lim), 2);
	CU_ASSERT_TRUE(bat_limiter_try_acquire(lim, &rng));
	CU_ASSERT_FALSE(bat_limiter_try_acquire(lim, &rng));
	/* fixed: completions never move the limit */
	for (int i = 0; i < 3; i++)
		bat_limiter_release(lim, 100000 * (uint64_t)(i + 1));
	CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(lim), 3.0, 0);
	CU_ASSERT_EQUAL(bat_limiter_in_flight(lim), 0);
	bat_limiter_destroy(lim);
}

/* Attempts at one more batch with `held` in flight; each success is given back at once. */
static unsigned int attempts_admitted(struct bat_limiter *lim, unsigned int attempts, uint64_t *rng)
{
	unsigned int ok = 0;

	for (unsigned int i = 0; i < attempts; i++) {
		if (bat_limiter_try_acquire(lim, rng)) {
			ok++;
			bat_limiter_release(lim, 80);
		}
	}
	return ok;
}

/*
 * Fractional headroom. Reaching 16.5 with min 16, initial 16, max 64 (windows of 20000 batches, so
 * the 10,000 attempts below never complete a window and the limit stays put):
 * | w | avg | d   | step | dir | limit                        |
 * | 1 | 100 | no  | 1/8  | -1  | 16 - 2 = 14 -> 16            |
 * | 2 |  90 | yes | 1/16 | -1  | 16 - 1 = 15 -> 16            |
 * | 3 |  90 | no  | 1/16 | +1  | 16 + 1 = 17                  |
 * | 4 |  90 | no  | 1/16 | -1  | 17 - 17/16 = 15.9375 -> 16   |
 * | 5 |  80 | yes | 1/32 | -1  | 16 - 0.5 = 15.5 -> 16        |
 * | 6 |  80 | no  | 1/32 | +1  | 16 + 16/32 = 16.5            |
 */
static void test_limiter_fractional(void)
{
	enum { WINDOW = 20000, ATTEMPTS = 10000, HELD = 16 };
	static const uint64_t avg[] = {100, 90, 90, 90, 80, 80};
	static const double limit[] = {16, 16, 17, 16, 16, 16.5};
	struct bat_limiter *lim = limiter_adaptive(16, 16, 64, WINDOW);
	uint64_t rng = 0x243f6a8885a308d3ull;
	unsigned int ok;

	for (size_t w = 0; w < 5; w++) {
		for (unsigned int i = 0; i < WINDOW; i++)
			one_batch(lim, avg[w]);
		CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(lim), limit[w], 0);
	}
	/* limit 16, 16 in flight: never */
	for (unsigned int i = 0; i < HELD; i++)
		CU_ASSERT_TRUE(bat_limiter_try_acquire(lim, &rng));
	CU_ASSERT_EQUAL(attempts_admitted(lim, ATTEMPTS, &rng), 0);
	for (unsigned int i = 0; i < HELD; i++)
		bat_limiter_release(lim, avg[5]);
	for (unsigned int i = HELD; i < WINDOW; i++)
		one_batch(lim, avg[5]);
	CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(lim), limit[5], 0);

	/* limit 16.5, 16 in flight: headroom 0.5, so about half */
	for (unsigned int i = 0; i < HELD; i++)
		CU_ASSERT_TRUE(bat_limiter_try_acquire(lim, &rng)); /* headroom >= 1.5 until the 16th */
	CU_ASSERT_EQUAL(bat_limiter_in_flight(lim), HELD);
	ok = attempts_admitted(lim, ATTEMPTS, &rng);
	printf("\n  headroom 0.5: %u of %u admitted ", ok, (unsigned int)ATTEMPTS);
	CU_ASSERT(ok >= ATTEMPTS * 40 / 100 && ok <= ATTEMPTS * 60 / 100);
	CU_ASSERT_EQUAL(bat_limiter_in_flight(lim), HELD);
	CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(lim), 16.5, 0);
	/* never two beyond 16: a success was always given back first */
	for (unsigned int i = 0; i < HELD; i++)
		bat_limiter_release(lim, 80);
	bat_limiter_destroy(lim);

	/* fixed limit 16 with 16 in flight: never */
	struct bat_options o;
	char msg[MSG_CAP] = "";
	bat_options_defaults(&o);
	o.num_batch_threads = 16;
	CU_ASSERT_EQUAL_FATAL(bat_options_finalize(&o, msg, sizeof(msg)), 0);
	lim = bat_limiter_create(&o);
	CU_ASSERT_PTR_NOT_NULL_FATAL(lim);
	for (unsigned int i = 0; i < HELD; i++)
		CU_ASSERT_TRUE(bat_limiter_try_acquire(lim, &rng));
	CU_ASSERT_EQUAL(attempts_admitted(lim, ATTEMPTS, &rng), 0);
	bat_limiter_destroy(lim);
}

/* A limiter at 16.5 (min 16, initial 16, max 64), windows of `window` batches (table above). */
static struct bat_limiter *limiter_at_16_5(uint32_t window)
{
	static const uint64_t avg[] = {100, 90, 90, 90, 80, 80};
	struct bat_limiter *lim = limiter_adaptive(16, 16, 64, window);

	for (size_t w = 0; w < 6; w++) {
		for (uint32_t i = 0; i < window; i++)
			one_batch(lim, avg[w]);
	}
	CU_ASSERT_DOUBLE_EQUAL_FATAL(bat_limiter_limit(lim), 16.5, 0);
	return lim;
}

/*
 * The queue draws for a fractional headroom only when a batch closes or one completes (docs: as
 * TensorFlow; a draw on every poll would admit the batch almost at once). Limit 16.5 with 16 slots
 * held by other cores: a full batch goes on the poll after it closes with probability 1/2, and if it
 * does not, a thousand more polls leave it waiting; a slot given back (headroom 1.5) lets it go.
 */
static void test_queue_fractional_draw(void)
{
	enum { TRIALS = 200, HELD = 16 };
	struct bat_limiter *lim = limiter_at_16_5(20000);
	uint64_t rng = 99;
	unsigned int first_poll = 0;

	for (unsigned int i = 0; i < HELD; i++)
		CU_ASSERT_TRUE(bat_limiter_try_acquire(lim, &rng));
	for (unsigned int t = 0; t < TRIALS; t++) {
		struct harness h;
		struct bat_options o = opts_base(0, 4, 100);
		struct bw_executor exec = {.submit = stub_submit, .ctx = &h};
		struct job_rec a;
		char msg[MSG_CAP];

		o.batches_to_average_over = 20000; /* as the limiter's: the window never closes here */
		memset(&h, 0, sizeof(h));
		h.opts = o;
		CU_ASSERT_EQUAL_FATAL(bat_options_finalize(&h.opts, msg, sizeof(msg)), 0);
		h.rec = calloc(REC_BATCHES_MAX, sizeof(*h.rec));
		CU_ASSERT_PTR_NOT_NULL_FATAL(h.rec);
		h.lim = lim;
		h.q = bat_queue_create(&h.opts, lim, &exec, on_done, &h, TSC_HZ_1US, 1000 + t);
		CU_ASSERT_PTR_NOT_NULL_FATAL(h.q);

		CU_ASSERT_EQUAL(submit(&h, &a, 4, 1000), BW_STATUS_OK); /* closes FULL */
		bat_poll(h.q, 1000);
		if (h.nb_rec == 1) {
			first_poll++;
		} else {
			for (uint64_t now = 1001; now < 2001; now++)
				bat_poll(h.q, now);
			CU_ASSERT_EQUAL(h.nb_rec, 0);
			bat_limiter_release(lim, 80); /* another core's completion */
			CU_ASSERT_EQUAL(bat_poll(h.q, 2001), 1);
			CU_ASSERT_EQUAL(h.nb_rec, 1);
		}
		CU_ASSERT_EQUAL_FATAL(h.nb_rec, 1);
		complete(&h, 0, BW_STATUS_OK, 2100);
		check_done_once(&a, BW_STATUS_OK);
		if (bat_limiter_in_flight(lim) < HELD) /* the slot given back is held again */
			CU_ASSERT_TRUE(bat_limiter_try_acquire(lim, &rng));
		CU_ASSERT_EQUAL(bat_limiter_in_flight(lim), HELD);
		bat_queue_destroy(h.q);
		free(h.rec);
	}
	printf("\n  %u of %u went on the first poll ", first_poll, (unsigned int)TRIALS);
	CU_ASSERT(first_poll >= TRIALS / 4 && first_poll <= TRIALS * 3 / 4);
	CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(lim), 16.5, 0);
	for (unsigned int i = 0; i < HELD; i++)
		bat_limiter_release(lim, 80);
	bat_limiter_destroy(lim);
}

/* The queue feeds the adaptive rule with creation-to-completion latencies, and obeys the limit. */
static void test_queue_adaptive_latency(void)
{
	struct harness h;
	struct bat_options o = opts_base(0, 4, 100);
	struct job_rec a, b;

	o.min_inflight_batches = 1;
	o.initial_inflight_batches = 1;
	o.max_inflight_batches = 4;
	o.batches_to_average_over = 1;
	harness_init(&h, &o);
	CU_ASSERT_TRUE(h.opts.enable_large_batch_splitting);
	CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(h.lim), 1.0, 0);
	CU_ASSERT_EQUAL(submit(&h, &a, 4, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(submit(&h, &b, 4, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1000), 1); /* limit 1: one goes */
	CU_ASSERT_EQUAL(h.nb_rec, 1);
	/* window 1, latency 500 (created 1000, completed 1500): no decrease from 0, -1, 1 - 1/8 -> 1 */
	complete(&h, 0, BW_STATUS_OK, 1500);
	CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(h.lim), 1.0, 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1500), 1);
	/* window 2, latency 1700 - 1000 = 700: no decrease, +1, 1 + 1/8 */
	complete(&h, 1, BW_STATUS_OK, 1700);
	CU_ASSERT_DOUBLE_EQUAL(bat_limiter_limit(h.lim), 1.125, 0);
	CHECK_STATS(&h, .jobs = 2, .jobs_done = 2, .batches = 2, .rows = 8, .dispatch[BW_DISPATCH_FULL] = 2);
	harness_fini(&h);
}

/* ---- 9. priorities ----------------------------------------------------------------------------- */

static void test_priorities(void)
{
	struct harness h;
	struct bat_options o = opts_base(1, 4, 100);
	struct job_rec lo, hi, bad, lo1, hi1;

	o.priority_levels = 2;
	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit_full(&h, &lo, 600, 4, 1, 0, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(submit_full(&h, &hi, 601, 4, 0, 0, 1001), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1001), 1);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 1);
	CU_ASSERT_EQUAL(h.rec[0].priority, 0);
	check_task(&h.rec[0], 0, &hi, 4, 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1002), 0); /* the low one waits */
	complete(&h, 0, BW_STATUS_OK, 1010);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1010), 1);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 2);
	CU_ASSERT_EQUAL(h.rec[1].priority, 1);
	check_task(&h.rec[1], 0, &lo, 4, 0);
	complete(&h, 1, BW_STATUS_OK, 1020);

	/* priority >= levels */
	CU_ASSERT_EQUAL(submit_full(&h, &bad, 602, 1, 2, 0, 1030), BW_STATUS_INVALID_ARGUMENT);
	CU_ASSERT_EQUAL(bad.done_calls, 0);

	/* levels never share a batch */
	CU_ASSERT_EQUAL(submit_full(&h, &lo1, 603, 1, 1, 0, 1040), BW_STATUS_OK);
	CU_ASSERT_EQUAL(submit_full(&h, &hi1, 604, 1, 0, 0, 1041), BW_STATUS_OK);
	bat_queue_drain(h.q, 1042);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1042), 1);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 3);
	CU_ASSERT_EQUAL(h.rec[2].priority, 0);
	CU_ASSERT_EQUAL(h.rec[2].num_tasks, 1);
	check_task(&h.rec[2], 0, &hi1, 1, 0);
	complete(&h, 2, BW_STATUS_OK, 1050);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1050), 1);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 4);
	CU_ASSERT_EQUAL(h.rec[3].priority, 1);
	check_task(&h.rec[3], 0, &lo1, 1, 0);
	complete(&h, 3, BW_STATUS_OK, 1060);
	check_done_once(&lo, BW_STATUS_OK);
	check_done_once(&hi, BW_STATUS_OK);
	check_done_once(&lo1, BW_STATUS_OK);
	check_done_once(&hi1, BW_STATUS_OK);
	CU_ASSERT_EQUAL(hi.done_order, 1);
	CU_ASSERT_TRUE(bat_queue_empty(h.q));
	CHECK_STATS(&h, .jobs = 4, .jobs_done = 4, .batches = 4, .rows = 10, .dispatch[BW_DISPATCH_FULL] = 2,
		    .dispatch[BW_DISPATCH_DRAIN] = 2);
	harness_fini(&h);
}

/* ---- 10. extensions ---------------------------------------------------------------------------- */

static void test_slo(void)
{
	struct harness h;
	struct bat_options o = opts_base(1, 4, 10000);
	struct job_rec a, b, c, d;

	o.slo_micros = 500;
	harness_init(&h, &o);
	/* nothing learnt: only the age counts */
	CU_ASSERT_EQUAL(submit(&h, &a, 2, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1499), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1500), 2);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 1);
	CU_ASSERT_EQUAL(h.rec[0].reason, BW_DISPATCH_SLO);
	complete(&h, 0, BW_STATUS_OK, 1800); /* size 2 computes in 300 us */

	/* 200 + 300 >= 500 */
	CU_ASSERT_EQUAL(submit(&h, &b, 2, 2000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 2199), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 2200), 2);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 2);
	CU_ASSERT_EQUAL(h.rec[1].reason, BW_DISPATCH_SLO);
	complete(&h, 1, BW_STATUS_OK, 2600); /* 400 us: average 300 + (400 - 300) / 8 = 312.5 */

	CU_ASSERT_EQUAL(submit(&h, &c, 2, 3000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 3187), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 3188), 2); /* 188 + 312 >= 500 */
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 3);
	CU_ASSERT_EQUAL(h.rec[2].reason, BW_DISPATCH_SLO);
	complete(&h, 2, BW_STATUS_OK, 3200);

	/* a size not learnt yet predicts nothing */
	CU_ASSERT_EQUAL(submit(&h, &d, 3, 4000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 4499), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 4500), 2);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 4);
	CU_ASSERT_EQUAL(h.rec[3].reason, BW_DISPATCH_SLO);
	complete(&h, 3, BW_STATUS_OK, 4600);
	check_done_once(&d, BW_STATUS_OK);
	CHECK_STATS(&h, .jobs = 4, .jobs_done = 4, .batches = 4, .rows = 9, .dispatch[BW_DISPATCH_SLO] = 4);
	harness_fini(&h);
}

static void test_slo_off_by_default(void)
{
	struct harness h;
	struct bat_options o = opts_base(1, 4, 1000);
	struct job_rec a, b;

	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit(&h, &a, 2, 0), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1000), 2);
	complete(&h, 0, BW_STATUS_OK, 1900); /* learnt: 900 us */
	CU_ASSERT_EQUAL(submit(&h, &b, 2, 2000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 2999), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 3000), 2);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 2);
	CU_ASSERT_EQUAL(h.rec[1].reason, BW_DISPATCH_TIMEOUT);
	complete(&h, 1, BW_STATUS_OK, 3100);
	CHECK_STATS(&h, .jobs = 2, .jobs_done = 2, .batches = 2, .rows = 4, .dispatch[BW_DISPATCH_TIMEOUT] = 2);
	harness_fini(&h);
}

static void test_dispatch_when_idle(void)
{
	struct harness h;
	struct bat_options o = opts_base(2, 4, 1000);
	struct job_rec a, b, c;

	o.dispatch_when_idle = true;
	harness_init(&h, &o);
	CU_ASSERT_EQUAL(submit(&h, &a, 1, 1000), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1000), 2); /* nothing in flight: at once */
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 1);
	CU_ASSERT_EQUAL(h.rec[0].reason, BW_DISPATCH_IDLE);
	CU_ASSERT_EQUAL(h.rec[0].dispatched_tsc, 1000);
	/* a is in flight: b waits */
	CU_ASSERT_EQUAL(submit(&h, &b, 1, 1001), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1001), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1500), 0);
	CU_ASSERT_EQUAL(h.nb_rec, 1);
	complete(&h, 0, BW_STATUS_OK, 1600);
	CU_ASSERT_EQUAL(bat_poll(h.q, 1600), 2); /* idle again */
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 2);
	CU_ASSERT_EQUAL(h.rec[1].reason, BW_DISPATCH_IDLE);
	check_task(&h.rec[1], 0, &b, 1, 0);
	/* while b is in flight, c's window runs to its timeout */
	CU_ASSERT_EQUAL(submit(&h, &c, 1, 1700), BW_STATUS_OK);
	CU_ASSERT_EQUAL(bat_poll(h.q, 2699), 0);
	CU_ASSERT_EQUAL(bat_poll(h.q, 2700), 2);
	CU_ASSERT_EQUAL_FATAL(h.nb_rec, 3);
	CU_ASSERT_EQUAL(h.rec[2].reason, BW_DISPATCH_TIMEOUT);
	complete(&h, 1, BW_STATUS_OK, 2800);
	complete(&h, 2, BW_STATUS_OK, 2800);
	check_done_once(&a, BW_STATUS_OK);
	check_done_once(&b, BW_STATUS_OK);
	check_done_once(&c, BW_STATUS_OK);
	CHECK_STATS(&h, .jobs = 3, .jobs_done = 3, .batches = 3, .rows = 3, .dispatch[BW_DISPATCH_IDLE] = 2,
		    .dispatch[BW_DISPATCH_TIMEOUT] = 1);
	harness_fini(&h);
}

/* ---- 11. pools --------------------------------------------------------------------------------- */

/* Gives a blank job back: a job with no rows is refused with INVALID_ARGUMENT and returns to the pool. */
static void job_give_back(struct harness *h, struct bat_job *job)
{
	job->rows = 0;
	CU_ASSERT_EQUAL(bat_submit(h->q, job, 0), BW_STATUS_INVALID_ARGUMENT);
}

/* How many jobs the pool holds now (it is left as found). */
static unsigned int jobs_free(struct harness *h)
{
	enum { LIMIT = 200000 };
	struct bat_job **jobs = calloc(LIMIT, sizeof(*jobs));
	unsigned int n = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(jobs);
	while (n < LIMIT && (jobs[n] = bat_job_alloc(h->q)) != NULL)
		n++;
	CU_ASSERT(n < LIMIT);
	for (unsigned int i = 0; i < n; i++)
		job_give_back(h, jobs[i]);
	free(jobs);
	return n;
}

static void test_pool_exhausted(void)
{
	struct harness h;
	struct bat_options o = opts_base(1, 1, 100);
	struct bat_job *jobs[64];
	unsigned int n = 0;

	o.max_enqueued_batches = 1;
	harness_init(&h, &o);
	while (n < 64 && (jobs[n] = bat_job_alloc(h.q)) != NULL)
		n++;
	CU_ASSERT(n >= 1 && n < 64);
	CU_ASSERT_PTR_NULL(bat_job_alloc(h.q));
	job_give_back(&h, jobs[--n]);
	jobs[n] = bat_job_alloc(h.q);
	CU_ASSERT_PTR_NOT_NULL(jobs[n]);
	n++;
	CU_ASSERT_PTR_NULL(bat_job_alloc(h.q));
	/* a blank job comes back zeroed */
	for (unsigned int i = 0; i < n; i++)
		job_give_back(&h, jobs[i]);
	struct bat_job *j = bat_job_alloc(h.q);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	CU_ASSERT_EQUAL(j->rows, 0);
	CU_ASSERT_EQUAL(j->pieces_pending, 0);
	CU_ASSERT_PTR_NULL(j->owner[0]);
	job_give_back(&h, j);
	CU_ASSERT_EQUAL(jobs_free(&h), n);
	CHECK_STATS(&h, .jobs = 0);
	harness_fini(&h);
}

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

/* Drains: closes every window, then polls and completes until nothing is left. */
static void settle(struct harness *h, uint64_t now)
{
	bat_queue_drain(h->q, now);
	for (int round = 0; round < 1000 && !bat_queue_empty(h->q); round++) {
		bat_poll(h->q, now);
		for (unsigned int i = 0; i < h->nb_rec; i++) {
			if (!h->rec[i].completed)
				complete(h, i, BW_STATUS_OK, now);
		}
	}
	CU_ASSERT_TRUE(bat_queue_empty(h->q));
	CU_ASSERT_EQUAL(bat_limiter_in_flight(h->lim), 0);
}

static void test_random_cycles(void)
{
	enum { ITERATIONS = 1000, SETTLE_EVERY = 100 };
	struct harness h;
	struct bat_options o = opts_base(2, 8, 50);
	struct job_rec *recs = calloc(ITERATIONS, sizeof(*recs));
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	uint64_t now = 1000;
	unsigned int nb_recs = 0, pool, accepted = 0, settles = 0;
	uint64_t rows_real = 0, rows_padded = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(recs);
	o.enable_large_batch_splitting = true;
	set_sizes(&o, 2, (const uint32_t[]){2, 4}); /* L = 4 */
	o.max_enqueued_batches = 4;
	o.priority_levels = 2;
	o.max_queue_size = 12;
	o.default_timeout_micros = 400;
	harness_init(&h, &o);
	pool = jobs_free(&h);

	for (unsigned int it = 0; it < ITERATIONS; it++) {
		uint64_t op = xorshift(&seed) % 100;

		now += xorshift(&seed) % 20;
		if (op < 45) {
			struct job_rec *r = &recs[nb_recs];
			uint32_t rows = 1 + (uint32_t)(xorshift(&seed) % 9); /* 9: too large */
			uint8_t prio = xorshift(&seed) % 10 == 0 ? 2 : (uint8_t)(xorshift(&seed) % 2);
			uint64_t deadline = xorshift(&seed) % 4 == 0 ? now + 1 + xorshift(&seed) % 200 : 0;
			enum bw_status st = submit_full(&h, r, nb_recs, rows, prio, deadline, now);

			nb_recs++;
			if (rows > 8 || prio >= 2) {
				CU_ASSERT_EQUAL(st, BW_STATUS_INVALID_ARGUMENT);
			} else {
				CU_ASSERT(st == BW_STATUS_OK || st == BW_STATUS_UNAVAILABLE);
			}
			accepted += st == BW_STATUS_OK;
		} else if (op < 75) {
			h.submit_ret = xorshift(&seed) % 40 == 0 ? -EIO : 0;
			bat_poll(h.q, now);
			h.submit_ret = 0;
		} else {
			unsigned int pending[REC_BATCHES_MAX], n = 0;

			for (unsigned int i = 0; i < h.nb_rec; i++) {
				if (!h.rec[i].completed)
					pending[n++] = i;
			}
			if (n > 0) {
				unsigned int i = pending[xorshift(&seed) % n];
				complete(&h, i, xorshift(&seed) % 8 == 0 ? BW_STATUS_INTERNAL : BW_STATUS_OK, now);
			}
		}
		if ((it + 1) % SETTLE_EVERY == 0) {
			settle(&h, now);
			settles++;
			CU_ASSERT_EQUAL(jobs_free(&h), pool); /* every job is back */
			CU_ASSERT_EQUAL(bat_queue_stats(h.q)->jobs_done, accepted);
		}
	}
	settle(&h, now);

	const struct bat_stats *s = bat_queue_stats(h.q);
	uint64_t by_size = 0, by_reason = 0;
	unsigned int failed_jobs = 0;

	for (unsigned int i = 0; i < nb_recs; i++) {
		const struct job_rec *r = &recs[i];

		if (!r->accepted) {
			CU_ASSERT_EQUAL(r->done_calls, 0);
			continue;
		}
		CU_ASSERT_EQUAL(r->done_calls, 1);
		if (r->done_calls != 1)
			printf("\n  job %u: %u done() calls ", i, r->done_calls);
		if (r->status == BW_STATUS_OK) {
			CU_ASSERT_TRUE(job_output_ok(r));
		} else {
			failed_jobs++;
		}
	}
	for (unsigned int i = 0; i < h.nb_rec; i++) {
		rows_real += h.rec[i].size;
		rows_padded += h.rec[i].padded_size;
	}
	for (unsigned int i = 0; i <= BAT_BATCH_SIZE_MAX; i++)
		by_size += s->by_size[i];
	for (unsigned int i = 0; i < BW_DISPATCH_COUNT; i++)
		by_reason += s->dispatch[i];
	CU_ASSERT_EQUAL(s->jobs, accepted);
	CU_ASSERT_EQUAL(s->jobs_done, accepted);
	CU_ASSERT_EQUAL(s->batches, h.nb_rec);
	CU_ASSERT_EQUAL(s->rows, rows_real);
	CU_ASSERT_EQUAL(s->padding_rows, rows_padded - rows_real);
	CU_ASSERT_EQUAL(by_size, h.nb_rec);
	CU_ASSERT_EQUAL(by_reason, h.nb_rec);
	CU_ASSERT_EQUAL(h.done_calls, accepted);
	CU_ASSERT_TRUE(bat_queue_empty(h.q));
	CU_ASSERT_EQUAL(jobs_free(&h), pool);
	printf("\n  %u jobs (%u accepted, %u failed), %u batches, %llu splits, %llu expired, %llu full, %u settles ",
	       nb_recs, accepted, failed_jobs, h.nb_rec, (unsigned long long)s->splits,
	       (unsigned long long)s->deadline_expired, (unsigned long long)s->rejected_full, settles);
	/* the mix exercised what it is meant to */
	CU_ASSERT(s->splits > 0);
	CU_ASSERT(s->deadline_expired > 0);
	CU_ASSERT(s->rejected_full > 0);
	CU_ASSERT(s->batches_failed > 0);
	CU_ASSERT(accepted > 100);

	/* and the queue still takes a full load: batches and tasks are all back too */
	struct job_rec fill[4];
	unsigned int base = h.nb_rec;
	for (unsigned int i = 0; i < 4; i++)
		CU_ASSERT_EQUAL(submit(&h, &fill[i], 4, now), BW_STATUS_OK); /* 4 batches = max_enqueued */
	settle(&h, now);
	CU_ASSERT_EQUAL(h.nb_rec, base + 4);
	for (unsigned int i = 0; i < 4; i++)
		check_done_once(&fill[i], BW_STATUS_OK);
	free(recs);
	harness_fini(&h);
}

int main(void)
{
	static CU_TestInfo options_tests[] = {
		{"bat_options_defaults: TensorFlow's", test_defaults},
		{"defaults finalize: no splitting, capacity 32", test_defaults_finalize},
		{"bat_option_set numbers: min, max, below, above, junk", test_option_set_numbers},
		{"bat_option_set bools", test_option_set_bools},
		{"bat_option_set allowed_batch_sizes", test_option_set_sizes},
		{"bat_option_set unknown key", test_option_set_unknown},
		{"finalize allowed_batch_sizes", test_finalize_allowed_sizes},
		{"finalize max_execution_batch_size", test_finalize_execution_size},
		{"finalize in-flight limits and batches_to_average_over", test_finalize_inflight},
		{"finalize zero counts", test_finalize_zero_counts},
		{"finalize adaptive: splitting forced, execution size derived", test_finalize_adaptive},
		{"finalize refuses an allowed_batch_sizes entry 0 set in code", test_finalize_size_zero},
		{"finalize refuses max_batch_size > 1024 set in code", test_finalize_size_bound},
		{"bat_options_padded_size {2,4,8}", test_padded_size},
		{"bat_queue_create refuses bad arguments", test_queue_create_refuses},
		CU_TEST_INFO_NULL,
	};
	static CU_TestInfo window_tests[] = {
		{"closes FULL, dispatched on the same poll", test_window_full},
		{"closes at created + timeout, not a tick before", test_window_timeout},
		{"timeout 0 still batches what came before the poll", test_window_timeout_zero},
		{"drain closes DRAIN", test_window_drain},
		{"a task that does not fit closes the window", test_window_no_fit},
		CU_TEST_INFO_NULL,
	};
	static CU_TestInfo split_tests[] = {
		{"n=10 r=3 L=4: 3, 4, 3, once, joined in order", test_split_10_3_4},
		{"r=0: 4, 4, 1", test_split_no_open_window},
		{"first error wins, once", test_split_first_error},
		{"too large: INVALID_ARGUMENT at once", test_too_large},
		CU_TEST_INFO_NULL,
	};
	static CU_TestInfo full_tests[] = {
		{"max_enqueued_batches: open and closed count, in flight not", test_full_enqueued_batches},
		{"max_queue_size", test_full_queue_size},
		{"split refused whole: nothing half-queued", test_full_split_nothing_half_queued},
		CU_TEST_INFO_NULL,
	};
	static CU_TestInfo padding_tests[] = {
		{"3 rows in {2,4,8}: gather repeats row 0, scatter drops padding", test_padding_gather_scatter},
		{"padded sizes and counters by size", test_padding_counted_by_size},
		CU_TEST_INFO_NULL,
	};
	static CU_TestInfo error_tests[] = {
		{"INTERNAL fans out to every job once, split job included", test_error_fanout},
		{"a split job with one failed piece completes once with it", test_error_split_piece_ok_after_failure},
		{"submit -EIO: UNAVAILABLE to every job, slot released", test_error_submit_eio},
		CU_TEST_INFO_NULL,
	};
	static CU_TestInfo deadline_tests[] = {
		{"expires while the limit is held; slot freed", test_deadline_while_limit_held},
		{"default_timeout_micros and the job's own deadline", test_deadline_default_and_own},
		{"split job: dispatched piece runs, job DEADLINE_EXCEEDED once", test_deadline_split_piece_dispatched},
		{"learnt compute time closes the window early (DEADLINE)", test_deadline_close_early},
		{"budget shorter than the timeout runs at low load", test_deadline_before_timeout_idle},
		CU_TEST_INFO_NULL,
	};
	static CU_TestInfo limit_tests[] = {
		{"adaptive script, 2 batches a window, by hand", test_adaptive_script_window2},
		{"adaptive script, 10 batches a window, by hand", test_adaptive_script_window10},
		{"step floor 1/128", test_adaptive_step_floor},
		{"limit clamps, narrow range", test_adaptive_clamps_narrow},
		{"limit clamps at 1 and 64 over a long run", test_adaptive_clamps_long},
		{"fixed: num_batch_threads slots", test_limiter_fixed},
		{"fractional headroom 0.5 admits about half; 0 never", test_limiter_fractional},
		{"queue feeds creation-to-completion latency", test_queue_adaptive_latency},
		{"queue draws for a fractional headroom only on close or completion", test_queue_fractional_draw},
		CU_TEST_INFO_NULL,
	};
	static CU_TestInfo priority_tests[] = {
		{"strict levels, bad level refused, levels never share", test_priorities},
		CU_TEST_INFO_NULL,
	};
	static CU_TestInfo extension_tests[] = {
		{"slo_micros closes early on the learnt compute time", test_slo},
		{"slo off by default", test_slo_off_by_default},
		{"dispatch_when_idle", test_dispatch_when_idle},
		CU_TEST_INFO_NULL,
	};
	static CU_TestInfo pool_tests[] = {
		{"bat_job_alloc NULL when exhausted", test_pool_exhausted},
		{"1000 random submit/poll/complete: once each, all back", test_random_cycles},
		CU_TEST_INFO_NULL,
	};
	static CU_SuiteInfo suites[] = {
		{.pName = "batching options", .pTests = options_tests},
		{.pName = "batching windows", .pTests = window_tests},
		{.pName = "batching splitting", .pTests = split_tests},
		{.pName = "batching full queue", .pTests = full_tests},
		{.pName = "batching padding", .pTests = padding_tests},
		{.pName = "batching errors", .pTests = error_tests},
		{.pName = "batching deadlines", .pTests = deadline_tests},
		{.pName = "batching in-flight limit", .pTests = limit_tests},
		{.pName = "batching priorities", .pTests = priority_tests},
		{.pName = "batching extensions", .pTests = extension_tests},
		{.pName = "batching pools", .pTests = pool_tests},
		CU_SUITE_INFO_NULL,
	};

	return bw_cunit_run(suites);
}
