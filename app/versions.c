/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A model's versions: its configured path is one .onnx file (version 1), or a directory laid out as
 * Triton's model repository lays out one model, a numbered subdirectory per version holding
 * model.onnx (models/mlp/1/model.onnx, models/mlp/2/model.onnx). The version policy picks one:
 * latest (the highest number) or specific N. Read at start-up and again at each reload, on the
 * thread doing it (never an lcore's).
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "defs.h"

#define APP_VERSION_FILE "model.onnx"

/* The version a directory entry names: all digits, 1..BW_MODEL_ID_MODEL_MASK (what a request's
 * model_id can name), no leading zero; 0 otherwise. */
static uint32_t entry_version(const char *name)
{
	unsigned long v;
	char *end;

	if (!isdigit((unsigned char)name[0]) || name[0] == '0')
		return 0;
	v = strtoul(name, &end, 10);
	return *end == '\0' && v <= BW_MODEL_ID_MODEL_MASK ? (uint32_t)v : 0;
}

static bool is_file(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

int app_versions_list(const char *source, uint32_t *versions, unsigned int max)
{
	char file[APP_PATH_MAX + 32];
	struct dirent *e;
	unsigned int n = 0;
	struct stat st;
	DIR *d;

	if (stat(source, &st) != 0)
		return -errno;
	if (!S_ISDIR(st.st_mode)) {
		if (max > 0)
			versions[0] = 1;
		return 1;
	}
	d = opendir(source);
	if (d == NULL)
		return -errno;
	/* the highest max of them, whatever order the directory lists them in: kept ascending, the
	 * lowest dropped when a higher one comes and the list is full */
	while ((e = readdir(d)) != NULL) {
		uint32_t v = entry_version(e->d_name);
		unsigned int at;

		if (v == 0 || max == 0 || (n == max && v <= versions[0]))
			continue;
		snprintf(file, sizeof(file), "%s/%s/" APP_VERSION_FILE, source, e->d_name);
		if (!is_file(file))
			continue;
		if (n == max) {
			memmove(versions, versions + 1, (size_t)(n - 1) * sizeof(*versions));
			n--;
		}
		for (at = n; at > 0 && versions[at - 1] > v; at--)
			versions[at] = versions[at - 1];
		versions[at] = v;
		n++;
	}
	closedir(d);
	return (int)n;
}

int app_version_resolve(const char *source, uint32_t want, uint32_t *version, char *file, size_t file_cap, char *why,
			size_t why_cap)
{
	uint32_t versions[APP_VERSIONS_MAX];
	char have[160] = "";
	size_t off = 0;
	int n = app_versions_list(source, versions, APP_VERSIONS_MAX);
	struct stat st;

	if (n < 0 && n != -ENOENT) {
		snprintf(why, why_cap, "cannot read %s: %s", source, strerror(-n));
		return n;
	}
	/* a file, or nothing there: version 1 (the loader says what is wrong with it) */
	if (stat(source, &st) != 0 || !S_ISDIR(st.st_mode)) {
		/* one file: version 1, the only one a policy can name */
		if (want > 1) {
			snprintf(why, why_cap, "version_policy specific %u: %s is one file (version 1), not a directory "
				 "of versions", want, source);
			return -ENOENT;
		}
		*version = 1;
		if ((size_t)snprintf(file, file_cap, "%s", source) >= file_cap) {
			snprintf(why, why_cap, "path longer than %zu bytes", file_cap - 1);
			return -ENAMETOOLONG;
		}
		return 0;
	}
	if (n > 8)
		snprintf(have, sizeof(have), "%d versions from %u to %u%s", n, versions[0], versions[n - 1],
			 n == APP_VERSIONS_MAX ? " and lower ones" : "");
	for (int i = 0; n <= 8 && i < n && off < sizeof(have); i++)
		off += (size_t)snprintf(have + off, sizeof(have) - off, "%s%u", i > 0 ? ", " : "", versions[i]);
	if (n == 0) {
		snprintf(why, why_cap, "%s holds no version: expected subdirectories 1, 2, ... each with "
			 APP_VERSION_FILE, source);
		return -ENOENT;
	}
	if (want == 0) {
		*version = versions[n - 1];
	} else {
		char path[APP_PATH_MAX + 32];

		/* looked for itself: the list holds the highest APP_VERSIONS_MAX only */
		snprintf(path, sizeof(path), "%s/%u/" APP_VERSION_FILE, source, want);
		if (!is_file(path)) {
			snprintf(why, why_cap, "version_policy specific %u: %s has no %u/" APP_VERSION_FILE " (it has %s)",
				 want, source, want, have);
			return -ENOENT;
		}
		*version = want;
	}
	if ((size_t)snprintf(file, file_cap, "%s/%u/" APP_VERSION_FILE, source, *version) >= file_cap) {
		snprintf(why, why_cap, "path longer than %zu bytes", file_cap - 1);
		return -ENAMETOOLONG;
	}
	return 0;
}

static int spec_check(const char *what, uint16_t i, const struct rt_tensor_spec *a, const struct rt_tensor_spec *b,
		      char *why, size_t cap)
{
	char sa[96], sb[96];

	if (strcmp(a->name, b->name) != 0) {
		if (snprintf(why, cap, "its %s %u is '%s', the served version's '%s'", what, i, b->name, a->name) >= (int)cap)
			why[cap - 1] = '\0';
		return -EINVAL;
	}
	if (a->dtype != b->dtype || a->rank != b->rank || memcmp(a->dims, b->dims, a->rank * sizeof(a->dims[0])) != 0) {
		app_shape_format(sa, sizeof(sa), a->dims, a->rank, "N");
		app_shape_format(sb, sizeof(sb), b->dims, b->rank, "N");
		if (snprintf(why, cap, "its %s '%s' is dtype %u %s, the served version's dtype %u %s", what, b->name,
			     b->dtype, sb, a->dtype, sa) >= (int)cap)
			why[cap - 1] = '\0';
		return -EINVAL;
	}
	if (a->index_bound != b->index_bound) {
		if (snprintf(why, cap, "its %s '%s' indexes a table of %lld rows, the served version's %lld", what, b->name,
			     (long long)b->index_bound, (long long)a->index_bound) >= (int)cap)
			why[cap - 1] = '\0';
		return -EINVAL;
	}
	return 0;
}

/*
 * Requests are bound to the served version's tensors when they arrive and run on whichever version
 * is live when their batch starts, so every version must take and give the same tensors.
 */
int app_model_signature_check(const struct rt_model *served, const struct rt_model *fresh, char *why, size_t cap)
{
	char inner[200];
	int ret = 0;

	if (served->num_inputs != fresh->num_inputs || served->num_outputs != fresh->num_outputs) {
		snprintf(inner, sizeof(inner), "it has %u inputs and %u outputs, the served version %u and %u",
			 fresh->num_inputs, fresh->num_outputs, served->num_inputs, served->num_outputs);
		ret = -EINVAL;
	}
	for (uint16_t i = 0; ret == 0 && i < served->num_inputs; i++)
		ret = spec_check("input", i, &served->inputs[i], &fresh->inputs[i], inner, sizeof(inner));
	for (uint16_t i = 0; ret == 0 && i < served->num_outputs; i++)
		ret = spec_check("output", i, &served->outputs[i], &fresh->outputs[i], inner, sizeof(inner));
	if (ret != 0 && snprintf(why, cap, "not the served version's tensors: %s (a model with other tensors needs a "
				 "name of its own)", inner) >= (int)cap)
		why[cap - 1] = '\0';
	return ret;
}

unsigned int app_model_versions(const struct app_model *m, uint32_t *v)
{
	unsigned int n = 0;

	if (m->served == NULL) {
		v[n++] = __atomic_load_n(&m->version, __ATOMIC_ACQUIRE);
		return n;
	}
	for (unsigned int i = 0; i < m->served->nb; i++)
		v[n++] = __atomic_load_n(&m->served->member[i]->version, __ATOMIC_ACQUIRE);
	qsort(v, n, sizeof(v[0]), cmp_u32);
	return n;
}

int app_model_versions_format(const struct app_model *m, char *buf, size_t cap)
{
	uint32_t v[APP_VERSIONS_SERVED_MAX];
	unsigned int n = app_model_versions(m, v);
	size_t off = 0;

	if (cap > 0)
		buf[0] = '\0';
	for (unsigned int i = 0; i < n && off < cap; i++)
		off += (size_t)snprintf(buf + off, cap - off, "%s%u", i > 0 ? ", " : "", v[i]);
	return (int)off;
}
