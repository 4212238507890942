/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The request mix (load.h): the spec parser, one table row per key (its name, its parser, its
 * message), and the weighted pick. The spec is read in place, as (pointer, length) slices, so that
 * no entry's length is bounded by a scratch buffer.
 */
#include <errno.h>
#include <stdarg.h>
#include <string.h>

#include "load.h"

#define ROWS_MAX UINT16_MAX   /* a request's rows travel in 16 bits */
#define KEY_ECHO_MAX 64       /* of a bad key or pair, what the message repeats */

struct slice {
	const char *p;
	size_t len;
};

struct mix_key {
	const char *name;
	bool repeatable;
	/* \return NULL, or the error message's text after "entry N: " */
	const char *(*parse)(struct load_mix_entry *e, struct slice v);
};

/* Decimal digits only (no sign, no blanks), within [lo, hi]. */
static bool parse_u64(struct slice v, uint64_t lo, uint64_t hi, uint64_t *out)
{
	uint64_t x = 0;

	if (v.len == 0)
		return false;
	for (size_t i = 0; i < v.len; i++) {
		unsigned int d = (unsigned int)(v.p[i] - '0');

		if (d > 9 || x > (UINT64_MAX - d) / 10)
			return false;
		x = x * 10 + d;
	}
	if (x < lo || x > hi)
		return false;
	*out = x;
	return true;
}

static const char *parse_model(struct load_mix_entry *e, struct slice v)
{
	if (v.len == 0 || v.len >= LOAD_NAME_MAX)
		return "model must be 1..255 characters";
	memcpy(e->model, v.p, v.len);
	e->model[v.len] = '\0';
	return NULL;
}

static const char *parse_weight(struct load_mix_entry *e, struct slice v)
{
	uint64_t x;

	/* 0 is refused: an entry that is never picked is a mistake in the spec, and an all-zero mix has
	 * nothing to pick from */
	if (!parse_u64(v, 1, UINT32_MAX, &x))
		return "weight must be 1..4294967295";
	e->weight = (uint32_t)x;
	return NULL;
}

static const char *parse_rows(struct load_mix_entry *e, struct slice v)
{
	uint64_t x;

	if (!parse_u64(v, 1, ROWS_MAX, &x))
		return "rows must be 1..65535";
	e->rows = (uint32_t)x;
	return NULL;
}

static const char *parse_priority(struct load_mix_entry *e, struct slice v)
{
	uint64_t x;

	if (!parse_u64(v, 0, UINT8_MAX, &x))
		return "priority must be 0..255";
	e->priority = (uint8_t)x;
	return NULL;
}

static const char *parse_deadline(struct load_mix_entry *e, struct slice v)
{
	uint64_t x;

	if (!parse_u64(v, 0, UINT32_MAX, &x))
		return "deadline_us must be 0..4294967295";
	e->deadline_us = (uint32_t)x;
	return NULL;
}

/*
 * NAME:FILE, split at the last ':': TensorFlow-exported models name tensors "x:0", while a .npy path
 * with a colon is rare.
 */
static const char *parse_input(struct load_mix_entry *e, struct slice v)
{
	const char *colon = NULL;
	size_t name_len, path_len;

	for (size_t i = 0; i < v.len; i++)
		if (v.p[i] == ':')
			colon = v.p + i;
	if (colon == NULL)
		return "input must be NAME:FILE";
	name_len = (size_t)(colon - v.p);
	path_len = v.len - name_len - 1;
	if (name_len == 0 || path_len == 0)
		return "input must be NAME:FILE";
	if (name_len >= LOAD_NAME_MAX)
		return "input name must be 1..255 characters";
	if (path_len >= LOAD_PATH_MAX)
		return "input file must be 1..1023 characters";
	for (unsigned int i = 0; i < e->nb_inputs; i++)
		if (strlen(e->input_name[i]) == name_len && memcmp(e->input_name[i], v.p, name_len) == 0)
			return "input name given twice";
	if (e->nb_inputs == LOAD_MIX_INPUTS_MAX)
		return "more than 8 input=";
	memcpy(e->input_name[e->nb_inputs], v.p, name_len);
	e->input_name[e->nb_inputs][name_len] = '\0';
	memcpy(e->input_path[e->nb_inputs], colon + 1, path_len);
	e->input_path[e->nb_inputs][path_len] = '\0';
	e->nb_inputs++;
	return NULL;
}

static const struct mix_key g_mix_keys[] = {
	{"model", false, parse_model},
	{"weight", false, parse_weight},
	{"rows", false, parse_rows},
	{"priority", false, parse_priority},
	{"deadline_us", false, parse_deadline},
	{"input", true, parse_input},
};
#define NB_MIX_KEYS (sizeof(g_mix_keys) / sizeof(g_mix_keys[0]))

_Static_assert(LOAD_NAME_MAX == 256 && LOAD_PATH_MAX == 1024 && LOAD_MIX_INPUTS_MAX == 8 && LOAD_MIX_MAX == 16,
	       "the messages spell these limits out");

static int fail(char *err, size_t cap, const char *fmt, ...)
{
	va_list ap;

	if (err != NULL && cap > 0) {
		va_start(ap, fmt);
		vsnprintf(err, cap, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

/* Cuts the next piece of *rest up to sep (or the end); *more says whether a sep ended it. */
static void next_piece(struct slice *rest, char sep, struct slice *piece, bool *more)
{
	const char *end = memchr(rest->p, sep, rest->len);

	piece->p = rest->p;
	piece->len = end != NULL ? (size_t)(end - rest->p) : rest->len;
	*more = end != NULL;
	if (end != NULL) {
		rest->len -= piece->len + 1;
		rest->p = end + 1;
	} else {
		rest->p += rest->len;
		rest->len = 0;
	}
}

static int parse_entry(struct slice entry, unsigned int nr, struct load_mix_entry *e, char *err, size_t cap)
{
	bool seen[NB_MIX_KEYS] = {false};
	struct slice rest = entry, pair;
	bool more = entry.len > 0; /* an empty entry has no pairs: refused below for its missing model= */

	e->weight = 1;
	e->rows = 1;
	e->priority = 0;
	e->deadline_us = BW_DEADLINE_NONE;
	while (more) {
		const char *eq;
		struct slice key, val;
		unsigned int k;
		const char *why;

		next_piece(&rest, ',', &pair, &more);
		eq = memchr(pair.p, '=', pair.len);
		if (eq == NULL || eq == pair.p)
			return fail(err, cap, "entry %u: expected key=value, got '%.*s'", nr,
				    (int)(pair.len < KEY_ECHO_MAX ? pair.len : KEY_ECHO_MAX), pair.p);
		key = (struct slice){pair.p, (size_t)(eq - pair.p)};
		val = (struct slice){eq + 1, pair.len - key.len - 1};
		for (k = 0; k < NB_MIX_KEYS; k++)
			if (strlen(g_mix_keys[k].name) == key.len && memcmp(g_mix_keys[k].name, key.p, key.len) == 0)
				break;
		if (k == NB_MIX_KEYS)
			return fail(err, cap, "entry %u: unknown key '%.*s'", nr,
				    (int)(key.len < KEY_ECHO_MAX ? key.len : KEY_ECHO_MAX), key.p);
		if (seen[k] && !g_mix_keys[k].repeatable)
			return fail(err, cap, "entry %u: duplicate key '%s'", nr, g_mix_keys[k].name);
		seen[k] = true;
		why = g_mix_keys[k].parse(e, val);
		if (why != NULL)
			return fail(err, cap, "entry %u: %s", nr, why);
	}
	if (!seen[0])
		return fail(err, cap, "entry %u: model= is required", nr);
	return 0;
}

int load_mix_parse(const char *spec, struct load_mix *mix, char *err, size_t cap)
{
	struct slice rest, entry;
	bool more = true;
	int ret;

	memset(mix, 0, sizeof(*mix));
	if (err != NULL && cap > 0)
		err[0] = '\0';
	rest = (struct slice){spec != NULL ? spec : "", spec != NULL ? strlen(spec) : 0};
	while (more) {
		next_piece(&rest, ';', &entry, &more);
		if (mix->nb_entries == LOAD_MIX_MAX) {
			ret = fail(err, cap, "entry %u: more than 16 entries", mix->nb_entries + 1);
			goto refused;
		}
		ret = parse_entry(entry, mix->nb_entries + 1, &mix->entries[mix->nb_entries], err, cap);
		if (ret < 0)
			goto refused;
		mix->weight_total += mix->entries[mix->nb_entries].weight;
		mix->nb_entries++;
	}
	return 0;

refused:
	/* no half-parsed mix for a caller that ignores the return */
	mix->nb_entries = 0;
	mix->weight_total = 0;
	return ret;
}

unsigned int load_mix_pick(const struct load_mix *mix, uint64_t *rng)
{
	uint64_t r, acc = 0;

	if (mix->nb_entries <= 1 || mix->weight_total == 0)
		return 0;
	if (*rng == 0) /* xorshift's fixed point: a state that was never seeded */
		*rng = load_rng_seed(0);
	/* the draw scaled to [0, weight_total) by one multiply: its bias, at most weight_total / 2^64,
	 * is far below what any run can see */
	r = (uint64_t)(((unsigned __int128)load_rng_next(rng) * mix->weight_total) >> 64);
	for (unsigned int i = 0; i < mix->nb_entries; i++) {
		acc += mix->entries[i].weight;
		if (r < acc)
			return i;
	}
	return mix->nb_entries - 1; /* unreachable while weight_total is the weights' sum */
}
