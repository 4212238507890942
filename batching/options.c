/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Batching options: defaults, parsing from text (INI and command line) and TensorFlow's validation
 * rules. Runs at configuration only.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batching.h"

void bat_options_defaults(struct bat_options *opts)
{
	*opts = (struct bat_options){
		.num_batch_threads = 1,
		.max_batch_size = 32,
		.batch_timeout_micros = 1000,
		.max_enqueued_batches = 10, /* BatchFunction's default */
		/* the seed kernel's adaptive defaults, used when num_batch_threads <= 0 */
		.min_inflight_batches = 16,
		.initial_inflight_batches = 16,
		.max_inflight_batches = 64,
		.batches_to_average_over = 10,
		.priority_levels = 1,
	};
}

enum opt_kind { OPT_U32, OPT_I32, OPT_U64, OPT_BOOL, OPT_SIZES };

struct opt_desc {
	const char *name;
	enum opt_kind kind;
	size_t offset;
	int64_t min, max;
	const char *accepted;
};

#define F(field) offsetof(struct bat_options, field)
static const struct opt_desc g_opts[] = {
	{"num_batch_threads", OPT_I32, F(num_batch_threads), -1, BAT_INFLIGHT_MAX,
	 "an integer <= 1024 (<= 0: adaptive in-flight limit)"},
	{"max_batch_size", OPT_U32, F(max_batch_size), 1, BAT_BATCH_SIZE_MAX, "an integer in 1..1024"},
	{"batch_timeout_micros", OPT_U32, F(batch_timeout_micros), 0, 60000000, "an integer in 0..60000000"},
	{"max_enqueued_batches", OPT_U32, F(max_enqueued_batches), 1, BAT_ENQUEUED_BATCHES_MAX,
	 "an integer in 1..4096"},
	{"allowed_batch_sizes", OPT_SIZES, F(allowed_batch_sizes), 1, BAT_BATCH_SIZE_MAX,
	 "a comma-separated list of up to 32 sizes in 1..1024"},
	{"enable_large_batch_splitting", OPT_BOOL, F(enable_large_batch_splitting), 0, 1, "true or false"},
	{"max_execution_batch_size", OPT_U32, F(max_execution_batch_size), 1, BAT_BATCH_SIZE_MAX,
	 "an integer in 1..1024"},
	{"min_inflight_batches", OPT_U32, F(min_inflight_batches), 1, BAT_INFLIGHT_MAX, "an integer in 1..1024"},
	{"initial_inflight_batches", OPT_U32, F(initial_inflight_batches), 1, BAT_INFLIGHT_MAX,
	 "an integer in 1..1024"},
	{"max_inflight_batches", OPT_U32, F(max_inflight_batches), 1, BAT_INFLIGHT_MAX, "an integer in 1..1024"},
	{"batches_to_average_over", OPT_U32, F(batches_to_average_over), 1, 1000000, "an integer in 1..1000000"},
	{"default_timeout_micros", OPT_U64, F(default_timeout_micros), 0, 3600000000LL,
	 "an integer in 0..3600000000 (0: no deadline)"},
	{"priority_levels", OPT_U32, F(priority_levels), 1, BAT_PRIORITY_LEVELS_MAX, "an integer in 1..8"},
	{"max_queue_size", OPT_U32, F(max_queue_size), 0, 1000000, "an integer in 0..1000000 (0: no limit)"},
	{"slo_micros", OPT_U32, F(slo_micros), 0, 60000000, "an integer in 0..60000000 (0: off)"},
	{"dispatch_when_idle", OPT_BOOL, F(dispatch_when_idle), 0, 1, "true or false"},
};
#undef F

static int parse_int(const char *text, int64_t min, int64_t max, int64_t *out)
{
	const char *p = text[0] == '-' ? text + 1 : text;
	char *end;
	long long v;

	if (!isdigit((unsigned char)*p))
		return -EINVAL;
	errno = 0;
	v = strtoll(text, &end, 10);
	if (errno != 0 || *end != '\0' || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

/* Into a scratch list first: a refused value leaves the option as it was. */
static int parse_sizes(const char *text, struct bat_options *opts)
{
	uint32_t sizes[BAT_ALLOWED_SIZES_MAX];
	uint16_t count = 0;
	const char *p = text;

	while (*p != '\0') {
		char item[16];
		size_t len = strcspn(p, ",");
		int64_t v;

		if (len == 0 || len >= sizeof(item) || count == BAT_ALLOWED_SIZES_MAX)
			return -EINVAL;
		memcpy(item, p, len);
		item[len] = '\0';
		if (parse_int(item, 1, BAT_BATCH_SIZE_MAX, &v) != 0)
			return -EINVAL;
		sizes[count++] = (uint32_t)v;
		p += len;
		if (*p == ',' && *++p == '\0')
			return -EINVAL;
	}
	memcpy(opts->allowed_batch_sizes, sizes, count * sizeof(sizes[0]));
	opts->num_allowed_batch_sizes = count;
	return 0;
}

int bat_option_set(struct bat_options *opts, const char *key, const char *value, char *msg, size_t cap)
{
	const struct opt_desc *d = NULL;
	uint8_t *field;
	int64_t v;
	int ret = 0;

	for (size_t i = 0; i < sizeof(g_opts) / sizeof(g_opts[0]); i++) {
		if (strcmp(g_opts[i].name, key) == 0)
			d = &g_opts[i];
	}
	if (d == NULL) {
		snprintf(msg, cap, "unknown batching option '%s': expected one of the options of docs/batching.md",
			 key);
		return -EINVAL;
	}
	field = (uint8_t *)opts + d->offset;
	switch (d->kind) {
	case OPT_SIZES:
		ret = parse_sizes(value, opts);
		break;
	case OPT_BOOL:
		if (strcmp(value, "true") == 0 || strcmp(value, "1") == 0)
			*(bool *)field = true;
		else if (strcmp(value, "false") == 0 || strcmp(value, "0") == 0)
			*(bool *)field = false;
		else
			ret = -EINVAL;
		break;
	default:
		ret = parse_int(value, d->min, d->max, &v);
		if (ret != 0)
			break;
		if (d->kind == OPT_I32)
			*(int32_t *)field = (int32_t)v;
		else if (d->kind == OPT_U32)
			*(uint32_t *)field = (uint32_t)v;
		else
			*(uint64_t *)field = (uint64_t)v;
		break;
	}
	if (ret != 0)
		snprintf(msg, cap, "invalid %s '%s': expected %s", key, value, d->accepted);
	return ret;
}

uint32_t bat_options_batch_capacity(const struct bat_options *opts)
{
	return opts->enable_large_batch_splitting ? opts->max_execution_batch_size : opts->max_batch_size;
}

uint32_t bat_options_padded_size(const struct bat_options *opts, uint32_t size)
{
	for (uint16_t i = 0; i < opts->num_allowed_batch_sizes; i++) {
		if (opts->allowed_batch_sizes[i] >= size)
			return opts->allowed_batch_sizes[i];
	}
	return size;
}

/* The ranges bat_option_set enforces, again for options filled in code. */
static int ranges_check(const struct bat_options *opts, char *msg, size_t cap)
{
	const struct {
		const char *name;
		int64_t value, min, max;
	} ranges[] = {
		{"num_batch_threads", opts->num_batch_threads, INT32_MIN, BAT_INFLIGHT_MAX},
		{"max_batch_size", opts->max_batch_size, 1, BAT_BATCH_SIZE_MAX},
		{"max_enqueued_batches", opts->max_enqueued_batches, 1, BAT_ENQUEUED_BATCHES_MAX},
		{"num_allowed_batch_sizes", opts->num_allowed_batch_sizes, 0, BAT_ALLOWED_SIZES_MAX},
		{"max_execution_batch_size", opts->max_execution_batch_size, 0, BAT_BATCH_SIZE_MAX},
		{"min_inflight_batches", opts->min_inflight_batches, 0, BAT_INFLIGHT_MAX},
		{"initial_inflight_batches", opts->initial_inflight_batches, 0, BAT_INFLIGHT_MAX},
		{"max_inflight_batches", opts->max_inflight_batches, 0, BAT_INFLIGHT_MAX},
		{"priority_levels", opts->priority_levels, 1, BAT_PRIORITY_LEVELS_MAX},
	};

	for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++) {
		if (ranges[i].value < ranges[i].min || ranges[i].value > ranges[i].max) {
			snprintf(msg, cap, "invalid %s %lld: expected %lld..%lld", ranges[i].name,
				 (long long)ranges[i].value, (long long)ranges[i].min, (long long)ranges[i].max);
			return -EINVAL;
		}
	}
	for (uint16_t i = 0; i < opts->num_allowed_batch_sizes; i++) {
		if (opts->allowed_batch_sizes[i] < 1 || opts->allowed_batch_sizes[i] > BAT_BATCH_SIZE_MAX) {
			snprintf(msg, cap, "invalid allowed_batch_sizes entry %u: expected sizes in 1..%u",
				 opts->allowed_batch_sizes[i], BAT_BATCH_SIZE_MAX);
			return -EINVAL;
		}
	}
	return 0;
}

int bat_options_finalize(struct bat_options *opts, char *msg, size_t cap)
{
	uint16_t n = opts->num_allowed_batch_sizes;

	if (ranges_check(opts, msg, cap) != 0)
		return -EINVAL;

	/* The seed kernel: num_batch_threads <= 0 selects the adaptive scheduler, which splits. */
	if (opts->num_batch_threads <= 0)
		opts->enable_large_batch_splitting = true;
	for (uint16_t i = 1; i < n; i++) {
		if (opts->allowed_batch_sizes[i] <= opts->allowed_batch_sizes[i - 1]) {
			snprintf(msg, cap, "invalid allowed_batch_sizes: entries must be strictly increasing (%u after %u)",
				 opts->allowed_batch_sizes[i], opts->allowed_batch_sizes[i - 1]);
			return -EINVAL;
		}
	}
	if (!opts->enable_large_batch_splitting) {
		if (n > 0 && opts->allowed_batch_sizes[n - 1] != opts->max_batch_size) {
			snprintf(msg, cap, "invalid allowed_batch_sizes: the last entry (%u) must equal max_batch_size "
				 "(%u) unless enable_large_batch_splitting is true", opts->allowed_batch_sizes[n - 1],
				 opts->max_batch_size);
			return -EINVAL;
		}
		if (opts->max_execution_batch_size != 0) {
			snprintf(msg, cap, "invalid max_execution_batch_size %u: it applies only with "
				 "enable_large_batch_splitting", opts->max_execution_batch_size);
			return -EINVAL;
		}
	} else if (n > 0) {
		/* TensorFlow: with splitting, batches execute at the largest allowed size. */
		if (opts->allowed_batch_sizes[n - 1] > opts->max_batch_size) {
			snprintf(msg, cap, "invalid allowed_batch_sizes: the last entry (%u) must not exceed "
				 "max_batch_size (%u)", opts->allowed_batch_sizes[n - 1], opts->max_batch_size);
			return -EINVAL;
		}
		if (opts->max_execution_batch_size != 0 &&
		    opts->max_execution_batch_size != opts->allowed_batch_sizes[n - 1]) {
			snprintf(msg, cap, "invalid max_execution_batch_size %u: with allowed_batch_sizes it must equal "
				 "their last entry (%u)", opts->max_execution_batch_size, opts->allowed_batch_sizes[n - 1]);
			return -EINVAL;
		}
		opts->max_execution_batch_size = opts->allowed_batch_sizes[n - 1];
	} else if (opts->max_execution_batch_size == 0) {
		opts->max_execution_batch_size = opts->max_batch_size;
	} else if (opts->max_execution_batch_size > opts->max_batch_size) {
		snprintf(msg, cap, "invalid max_execution_batch_size %u: must not exceed max_batch_size (%u)",
			 opts->max_execution_batch_size, opts->max_batch_size);
		return -EINVAL;
	}
	if (opts->num_batch_threads <= 0) {
		if (!(opts->min_inflight_batches >= 1 && opts->min_inflight_batches <= opts->initial_inflight_batches &&
		      opts->initial_inflight_batches <= opts->max_inflight_batches)) {
			snprintf(msg, cap, "invalid in-flight limits: expected 1 <= min_inflight_batches (%u) <= "
				 "initial_inflight_batches (%u) <= max_inflight_batches (%u)", opts->min_inflight_batches,
				 opts->initial_inflight_batches, opts->max_inflight_batches);
			return -EINVAL;
		}
		if (opts->batches_to_average_over < 1) {
			snprintf(msg, cap, "invalid batches_to_average_over 0: expected >= 1");
			return -EINVAL;
		}
	}
	if (opts->max_batch_size < 1 || opts->max_enqueued_batches < 1 || opts->priority_levels < 1) {
		snprintf(msg, cap, "invalid %s 0: expected >= 1",
			 opts->max_batch_size < 1 ? "max_batch_size"
			 : opts->max_enqueued_batches < 1 ? "max_enqueued_batches" : "priority_levels");
		return -EINVAL;
	}
	return 0;
}
