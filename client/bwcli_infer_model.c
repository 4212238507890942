/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bwcli infer on a model that declares its inputs (MODEL_INFO lists them): every input from a --tensor
 * NumPy file or generated as bwrun generates it, and with --output-dir every output of the last OK
 * reply written as a NumPy file. Also --expect, for this path and the raw one: every OK reply's outputs
 * compared with NumPy files, element by element.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include <batchwire/elem.h>
#include <batchwire/inputs.h>

#include "bwcli.h"

/* Inputs of a model that declares them: from --tensor files, or generated from MODEL_INFO. */
struct model_inputs {
	unsigned n;
	struct bwc_tensor t[TENSORS_MAX];
	struct bwc_npy npy[TENSORS_MAX];
	uint8_t *generated[TENSORS_MAX];
};

static void model_inputs_free(struct model_inputs *mi)
{
	for (unsigned i = 0; i < TENSORS_MAX; i++) {
		bwc_npy_free(&mi->npy[i]);
		free(mi->generated[i]);
	}
}

static int model_inputs_make(const struct infer_args *a, const struct bwc_model_info *info,
			     struct model_inputs *mi)
{
	char err[512];

	memset(mi, 0, sizeof(*mi));
	if (a->ntensors > 0) {
		for (unsigned i = 0; i < a->ntensors; i++) {
			struct bwc_npy *npy = &mi->npy[i];

			if (bwc_npy_read(a->tensor_paths[i], npy, err, sizeof(err)) != 0) {
				fprintf(stderr, "%s infer: --tensor %s: %s\n", PROG, a->tensor_names[i], err);
				return EXIT_USAGE;
			}
			mi->t[i] = (struct bwc_tensor){
				.index = BW_TENSOR_BY_NAME, .dtype = npy->dtype, .rank = npy->rank,
				.name = a->tensor_names[i], .data = npy->data, .data_len = (uint32_t)npy->nbytes,
			};
			memcpy(mi->t[i].dims, npy->dims, sizeof(npy->dims));
		}
		mi->n = a->ntensors;
		return EXIT_OK;
	}
	if (info->num_inputs > TENSORS_MAX) {
		fprintf(stderr, "%s infer: model '%s' has %u inputs; bwcli generates at most %d\n", PROG, info->name,
			info->num_inputs, TENSORS_MAX);
		return EXIT_FAIL;
	}
	for (unsigned i = 0; i < info->num_inputs; i++) {
		const struct bwc_tensor_info *ti = &info->inputs[i];
		uint64_t row_elems = 1, rows = a->rows != 0 ? a->rows : 1, state;
		struct bwc_tensor *t = &mi->t[i];

		for (uint8_t d = 1; d < ti->rank; d++)
			row_elems *= ti->dims[d];
		mi->generated[i] = malloc(rows * row_elems * bw_dtype_size(ti->dtype) + 1);
		if (mi->generated[i] == NULL || ti->rank == 0 || row_elems == 0) {
			fprintf(stderr, "%s infer: cannot generate input '%s' (rank %u)\n", PROG, ti->name, ti->rank);
			return EXIT_FAIL;
		}
		*t = (struct bwc_tensor){.index = ti->index, .dtype = ti->dtype, .rank = ti->rank, .name = ti->name,
					 .data = mi->generated[i],
					 .data_len = (uint32_t)(rows * row_elems * bw_dtype_size(ti->dtype))};
		memcpy(t->dims, ti->dims, sizeof(t->dims));
		t->dims[0] = (uint32_t)rows;
		/* bwrun's inputs at its default seed: input i's own stream, a mask's rows its last dimension */
		state = bw_input_stream(BW_INPUT_SEED_DEFAULT, i);
		bw_input_fill(ti->dtype, mi->generated[i], rows * row_elems, t->dims[t->rank - 1],
			      strstr(ti->name, "mask") != NULL, &state);
	}
	mi->n = info->num_inputs;
	return EXIT_OK;
}

/* Writes every output of a reply as DIR/NAME.npy (NAME from the reply, else output_INDEX). */
static int outputs_write(const char *dir, const struct bwc_reply *r)
{
	for (uint16_t o = 0; o < r->num_tensors; o++) {
		const struct bw_tensor_view *v = &r->tensors[o];
		uint32_t dims[BW_MAX_RANK];
		char path[4096], err[512];
		int n;

		memcpy(dims, v->desc->dims, sizeof(dims));
		if (v->desc->name_len > 0)
			n = snprintf(path, sizeof(path), "%s/%.*s.npy", dir, (int)v->desc->name_len, v->name);
		else
			n = snprintf(path, sizeof(path), "%s/output_%u.npy", dir, o);
		if (n >= (int)sizeof(path) || memchr(v->name, '/', v->desc->name_len) != NULL) {
			fprintf(stderr, "%s infer: --output-dir: output %u has a name that is no file name\n", PROG, o);
			return EXIT_FAIL;
		}
		if (bwc_npy_write(path, v->desc->dtype, v->desc->rank, dims, v->data, err, sizeof(err)) != 0) {
			fprintf(stderr, "%s infer: --output-dir: %s\n", PROG, err);
			return EXIT_FAIL;
		}
	}
	return EXIT_OK;
}

/* One expected output, DIR/NAME.npy, read once: a failure (rc, err) is kept and told to every reply
 * that names the output. */
struct expect_file {
	char name[BW_MAX_NAME_LEN + 1];
	char path[4096];
	int rc;
	char err[512];
	struct bwc_npy npy;
};

struct expect {
	const char *dir;
	double rtol, atol;
	uint64_t checked, differ; /* OK replies checked; those with an output that did not match */
	double worst;             /* the largest |got - want| / |want| of any element compared */
	unsigned nfiles;
	struct expect_file files[BW_MAX_TENSORS];
};

struct expect *expect_open(const char *dir, double rtol, double atol)
{
	struct expect *ex;
	struct stat sb;

	if (stat(dir, &sb) != 0) {
		fprintf(stderr, "%s infer: --expect: '%s': %s\n", PROG, dir, strerror(errno));
		return NULL;
	}
	if (!S_ISDIR(sb.st_mode)) {
		fprintf(stderr, "%s infer: --expect: '%s' is not a directory\n", PROG, dir);
		return NULL;
	}
	ex = calloc(1, sizeof(*ex));
	if (ex == NULL) {
		fprintf(stderr, "%s infer: out of memory\n", PROG);
		return NULL;
	}
	ex->dir = dir;
	ex->rtol = rtol;
	ex->atol = atol;
	return ex;
}

void expect_close(struct expect *ex)
{
	if (ex == NULL)
		return;
	for (unsigned f = 0; f < ex->nfiles; f++)
		bwc_npy_free(&ex->files[f].npy);
	free(ex);
}

/* The file of output name (len bytes, not NUL-terminated), read the first time it is asked for;
 * NULL when BW_MAX_TENSORS distinct names have been seen already. */
static struct expect_file *expect_file_get(struct expect *ex, const char *name, size_t len)
{
	const char *dir = ex->dir;
	struct expect_file *f;

	for (unsigned i = 0; i < ex->nfiles; i++)
		if (strlen(ex->files[i].name) == len && memcmp(ex->files[i].name, name, len) == 0)
			return &ex->files[i];
	if (ex->nfiles == BW_MAX_TENSORS)
		return NULL;
	f = &ex->files[ex->nfiles++];
	memcpy(f->name, name, len);
	f->name[len] = '\0';
	/* A name is the file's only if it stays inside DIR: no '/', no NUL, not "." or "..". */
	if (strlen(f->name) != len || strchr(f->name, '/') != NULL || strcmp(f->name, ".") == 0 ||
	    strcmp(f->name, "..") == 0 ||
	    snprintf(f->path, sizeof(f->path), "%s/%.*s.npy", dir, (int)len, name) >= (int)sizeof(f->path)) {
		f->rc = -EINVAL;
		snprintf(f->err, sizeof(f->err), "the name is no file name in '%s'", dir);
		return f;
	}
	f->rc = bwc_npy_read(f->path, &f->npy, f->err, sizeof(f->err));
	return f;
}

void expect_preload(struct expect *ex, const struct bwc_model_info *info)
{
	for (uint16_t o = 0; o < info->num_outputs; o++)
		expect_file_get(ex, info->outputs[o].name, strlen(info->outputs[o].name));
}

static bool dtype_is_float(uint8_t dtype)
{
	return dtype == BW_DTYPE_FLOAT || dtype == BW_DTYPE_DOUBLE || dtype == BW_DTYPE_FLOAT16 ||
	       dtype == BW_DTYPE_BFLOAT16;
}

/* Element i of data, copied out first: a reply's payloads are packed one after another, so one may
 * start at any byte. */
static double elem_at(uint8_t dtype, uint32_t esize, const void *data, uint64_t i, uint64_t *bits)
{
	*bits = 0;
	memcpy(bits, (const uint8_t *)data + i * esize, esize);
	return bw_elem_get(dtype, bits, 0);
}

/* Element i as its dtype prints it exactly: 64-bit integers as integers, not through a double. */
static void format_elem(char *out, size_t cap, uint8_t dtype, uint32_t esize, const void *data, uint64_t i)
{
	uint64_t bits;
	double v = elem_at(dtype, esize, data, i, &bits);

	if (dtype == BW_DTYPE_INT64)
		snprintf(out, cap, "%" PRId64, (int64_t)bits);
	else if (dtype == BW_DTYPE_UINT64)
		snprintf(out, cap, "%" PRIu64, bits);
	else
		snprintf(out, cap, dtype == BW_DTYPE_DOUBLE ? "%.17g" : "%.9g", v);
}

/* Compares output o of a reply with its file; false with why when it differs or cannot be compared. */
static bool output_matches(struct expect *ex, uint16_t o, const struct bw_tensor_view *v, char *why, size_t cap)
{
	const struct bw_tensor_desc *d = v->desc;
	uint32_t esize = bw_dtype_size(d->dtype), dims[BW_MAX_RANK];
	uint64_t n, bad = 0, first = 0;
	double worst = 0.0;
	char name[BW_MAX_NAME_LEN + 1], got[160], want[160];
	struct expect_file *f;

	if (d->name_len > 0) {
		memcpy(name, v->name, d->name_len); /* a NUL inside is kept: expect_file_get refuses it */
		name[d->name_len] = '\0';
	} else {
		snprintf(name, sizeof(name), "output_%u", o);
	}
	f = expect_file_get(ex, name, d->name_len > 0 ? d->name_len : strlen(name));
	if (f == NULL) {
		snprintf(why, cap, "--expect: output '%s': more than %d distinct output names", name, BW_MAX_TENSORS);
		return false;
	}
	if (f->rc != 0) {
		snprintf(why, cap, "--expect: output '%s': %s", name, f->err);
		return false;
	}
	if (d->dtype != f->npy.dtype) {
		snprintf(why, cap, "mismatch: output '%s': dtype %s, %s has %s", name, dtype_label(d->dtype), f->path,
			 bwc_dtype_name(f->npy.dtype));
		return false;
	}
	if (d->rank != f->npy.rank || memcmp(d->dims, f->npy.dims, d->rank * sizeof(d->dims[0])) != 0 ||
	    d->data_len != f->npy.nbytes) {
		memcpy(dims, d->dims, sizeof(dims)); /* the descriptor is packed: no pointer into it */
		format_dims(got, sizeof(got), d->rank, dims);
		format_dims(want, sizeof(want), f->npy.rank, f->npy.dims);
		snprintf(why, cap, "mismatch: output '%s': shape %s, %s has %s", name, got, f->path, want);
		return false;
	}
	n = esize != 0 ? d->data_len / esize : 0;
	for (uint64_t i = 0; i < n; i++) {
		uint64_t got_bits, want_bits;
		double x = elem_at(d->dtype, esize, v->data, i, &got_bits);
		double y = elem_at(d->dtype, esize, f->npy.data, i, &want_bits), rel;
		bool ok;

		if (dtype_is_float(d->dtype))
			ok = (isnan(x) && isnan(y)) || x == y || fabs(x - y) <= ex->atol + ex->rtol * fabs(y);
		else
			ok = got_bits == want_bits; /* exact, 64-bit integers too */
		if ((isnan(x) && isnan(y)) || x == y)
			rel = 0.0;
		else if (y != 0.0 && !isnan(x - y))
			rel = fabs(x - y) / fabs(y);
		else
			rel = INFINITY; /* a NaN against a number, or anything but 0 against 0 */
		if (rel > worst)
			worst = rel;
		if (!ok && bad++ == 0)
			first = i;
	}
	if (worst > ex->worst)
		ex->worst = worst;
	if (bad == 0)
		return true;
	format_elem(got, sizeof(got), d->dtype, esize, v->data, first);
	format_elem(want, sizeof(want), d->dtype, esize, f->npy.data, first);
	snprintf(why, cap, "mismatch: output '%s' %s: %" PRIu64 " of %" PRIu64 " elements differ, first at flat "
		 "index %" PRIu64 ": got %s, want %s; worst relative difference %.3g", name, dtype_label(d->dtype),
		 bad, n, first, got, want, worst);
	return false;
}

bool expect_check(struct expect *ex, const struct bwc_reply *r, char *why, size_t cap)
{
	unsigned failed = 0;
	char other[1024];

	ex->checked++;
	for (uint16_t o = 0; o < r->num_tensors; o++) {
		/* every output is compared, for the worst difference; the first that differs is told */
		if (!output_matches(ex, o, &r->tensors[o], failed == 0 ? why : other, failed == 0 ? cap : sizeof(other)))
			failed++;
	}
	if (failed == 0)
		return true;
	ex->differ++;
	if (failed > 1) {
		size_t len = strlen(why);

		snprintf(why + len, cap - len, " (and %u more output%s)", failed - 1, failed == 2 ? "" : "s");
	}
	return false;
}

void expect_print_summary(const struct expect *ex)
{
	printf("expect: %" PRIu64 " repl%s checked against %s, %" PRIu64 " differ (worst relative difference "
	       "%.3g)\n", ex->checked, ex->checked == 1 ? "y" : "ies", ex->dir, ex->differ, ex->worst);
}

/* Copies a reply whose views point into the connection's buffer, so that it outlives the next call. */
static void reply_keep(struct bwc_reply *dst, uint8_t *body, const struct bwc_reply *src)
{
	*dst = *src;
	memcpy(body, src->body, src->body_len);
	dst->body = body;
	for (uint16_t o = 0; o < src->num_tensors; o++) {
		dst->tensors[o].desc = (const void *)(body + ((const uint8_t *)src->tensors[o].desc - src->body));
		dst->tensors[o].name = (const char *)(body + ((const uint8_t *)src->tensors[o].name - src->body));
		dst->tensors[o].data = body + (src->tensors[o].data - src->body);
	}
}

int infer_model(struct cli *cli, const struct infer_args *a, const struct bwc_model_info *info,
		uint32_t model_id, struct expect *ex, struct run_stats *st)
{
	struct model_inputs mi;
	struct bwc_reply *reply = malloc(sizeof(*reply)), *last = malloc(sizeof(*last));
	uint8_t *last_body = malloc(reply_body_max(cli));
	bool have_last = false;
	int rc = model_inputs_make(a, info, &mi);

	if (reply == NULL || last == NULL || last_body == NULL) {
		fprintf(stderr, "%s infer: out of memory\n", PROG);
		rc = EXIT_FAIL;
	}
	if (ex != NULL)
		expect_preload(ex, info);
	for (uint64_t i = 0; rc == EXIT_OK && i < a->count && !g_stop; i++) {
		char what[48], why[1024];
		int ret;

		snprintf(what, sizeof(what), "request %" PRIu64, i + 1);
		st->sent++;
		ret = cli_infer(cli, model_id, mi.t, (uint16_t)mi.n, a->deadline_us, a->priority, reply);
		note_datagrams(st, cli->c);
		if (ret != 0) {
			if (ret == -ETIMEDOUT)
				st->timeouts++;
			else
				st->errors++;
			note_failure(st, what, ret, cli->c);
			continue;
		}
		if (ex != NULL && !expect_check(ex, reply, why, sizeof(why))) {
			st->errors++;
			note_mismatch(st, what, why);
			continue;
		}
		st->lat_ns[st->ok++] = reply->rtt_ns;
		if (a->output_dir != NULL) {
			reply_keep(last, last_body, reply);
			have_last = true;
		}
		if (!a->quiet)
			printf("%s: OK %u output%s rtt %.1f us%s\n", what, reply->num_tensors,
			       reply->num_tensors == 1 ? "" : "s", (double)reply->rtt_ns / 1000.0,
			       ex != NULL ? " (matches --expect)" : "");
	}
	if (rc == EXIT_OK) {
		if (ex != NULL)
			expect_print_summary(ex);
		print_pool_summary(cli);
		print_summary("infer", cli, st);
		rc = st->ok == a->count ? EXIT_OK : EXIT_FAIL;
	}
	if (a->output_dir != NULL && rc != EXIT_USAGE) {
		if (have_last) {
			if (outputs_write(a->output_dir, last) != EXIT_OK)
				rc = EXIT_FAIL;
		} else {
			fprintf(stderr, "%s infer: --output-dir: no OK reply; nothing written to '%s'\n", PROG,
				a->output_dir);
			rc = EXIT_FAIL;
		}
	}
	model_inputs_free(&mi);
	free(reply);
	free(last);
	free(last_body);
	return rc;
}
