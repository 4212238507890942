/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of batching/options.c: TensorFlow's defaults, every option parsed from text at its bounds
 * and refused with its one-line message, and what bat_options_finalize derives and refuses
 * (docs/batching.md).
 */
#include <stddef.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../bw_cunit.h"

#include "bat_test.h"

/* ---- defaults ------------------------------------------------------------------------------------ */

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

/* ---- bat_option_set ------------------------------------------------------------------------------ */

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

/* ---- bat_options_finalize ------------------------------------------------------------------------ */

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
 * Allowed sizes are >= 1 (docs/batching.md). bat_option_set refuses "0"; options built in code reach
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

/* ---- bat_options_padded_size --------------------------------------------------------------------- */

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
		CU_TEST_INFO_NULL,
	};
	static CU_SuiteInfo suites[] = {
		{.pName = "batching options", .pTests = options_tests},
		CU_SUITE_INFO_NULL,
	};

	return bw_cunit_run(suites);
}
