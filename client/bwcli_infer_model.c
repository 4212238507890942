/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bwcli infer on a model that declares its inputs (MODEL_INFO lists them): every input from a --tensor
 * NumPy file or generated as bwrun generates it, and with --output-dir every output of the last OK
 * reply written as a NumPy file.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
		uint32_t model_id, struct run_stats *st)
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
	for (uint64_t i = 0; rc == EXIT_OK && i < a->count && !g_stop; i++) {
		char what[48];
		int ret;

		snprintf(what, sizeof(what), "request %" PRIu64, i + 1);
		st->sent++;
		ret = bwc_infer(cli->c, model_id, mi.t, (uint16_t)mi.n, a->deadline_us, a->priority, reply);
		note_datagrams(st, cli->c);
		if (ret != 0) {
			if (ret == -ETIMEDOUT)
				st->timeouts++;
			else
				st->errors++;
			note_failure(st, what, ret, cli->c);
			continue;
		}
		st->lat_ns[st->ok++] = reply->rtt_ns;
		if (a->output_dir != NULL) {
			reply_keep(last, last_body, reply);
			have_last = true;
		}
		if (!a->quiet)
			printf("%s: OK %u output%s rtt %.1f us\n", what, reply->num_tensors,
			       reply->num_tensors == 1 ? "" : "s", (double)reply->rtt_ns / 1000.0);
	}
	if (rc == EXIT_OK) {
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
