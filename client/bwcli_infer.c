/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bwcli infer: its options, and requests of one raw tensor (from --input, or generated) with the
 * --expect-echo or --expect check and --output. A model that declares its inputs is bwcli_infer_model.c's.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bwcli.h"

#define INFER_DIM_DEFAULT 16  /* shape [1,16] when neither --shape nor --input says */

const char g_usage_infer[] =
	"Usage: " PROG " [GLOBAL OPTIONS] infer --model M [OPTIONS]\n"
	"Sends INFER requests with one input tensor, one after another.\n"
	"  --model M          model id (0..4294967294) or name (all digits: an id); a name is\n"
	"                     looked up once with MODEL_INFO\n"
	"  --input FILE       raw little-endian bytes of the tensor; without it the data is\n"
	"                     generated, deterministic and different for every request\n"
	"  --dtype T          element type (default float): float uint8 int8 uint16 int16 int32\n"
	"                     int64 bool float16 double uint32 uint64 bfloat16\n"
	"                     (aliases float32 fp32 float64 fp64 fp16 half bf16)\n"
	"  --shape D,D,...    dims, 1..8 of them; repeat to cycle: request i uses shape\n"
	"                     number i mod the number of shapes\n"
	"                     (default: [1, FILE bytes / element size] with --input, else [1,16])\n"
	"  --input-name NAME  address the tensor by name (index 0xFFFF) instead of index 0\n"
	"  --count N          requests to send, 1..10000000 (default 1)\n"
	"  --deadline-us N    budget at the server, 0..4294967295; 0: the model's default (default 0)\n"
	"  --priority N       0..255, 0 most urgent (default 0)\n"
	"  --expect-echo      each OK reply's tensors must equal the inputs (dtype, dims, data)\n"
	"  --expect DIR       each OK reply's outputs must match DIR/NAME.npy (NAME: the output's\n"
	"                     name in the reply, output_INDEX if it has none): the same dtype and\n"
	"                     shape; integers and bool equal, floats within\n"
	"                     |got - want| <= atol + rtol * |want|; not with --expect-echo\n"
	"  --rtol X           relative tolerance of --expect, >= 0 (default 1e-4)\n"
	"  --atol X           absolute tolerance of --expect, >= 0 (default 1e-5)\n"
	"  --output FILE      write the first output tensor of the last OK reply\n"
	"Models with declared inputs (MODEL_INFO lists them; e.g. ONNX models):\n"
	"  --tensor NAME=FILE.npy  input NAME from a NumPy file, sent by name; repeat per input\n"
	"                     (without --tensor, --input or --shape, every input is generated:\n"
	"                     floats in [-1,1), '*mask*' integers 1 with the last quarter 0,\n"
	"                     other integers in [0,1000), with --rows rows)\n"
	"  --rows N           rows (batch dimension) of generated inputs, 1..1024 (default 1)\n"
	"  --output-dir DIR   write every output of the last OK reply as DIR/NAME.npy\n"
	"  -q, --quiet        no line per request, only errors and the summary\n";

/* Parses "1,3,224,224" into t's rank and dims. */
static bool parse_shape(const char *s, uint8_t *rank, uint32_t dims[BW_MAX_RANK])
{
	char buf[256], *tok, *save = NULL;
	unsigned n = 0;

	if (strlen(s) >= sizeof(buf) || s[0] == '\0')
		return false;
	strcpy(buf, s);
	/* strtok_r would skip empty fields and accept "1,,2". */
	if (buf[strlen(buf) - 1] == ',' || strstr(buf, ",,") != NULL)
		return false;
	for (tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
		uint64_t v;

		if (n == BW_MAX_RANK || !parse_u64(tok, 0, UINT32_MAX, &v))
			return false;
		dims[n++] = (uint32_t)v;
	}
	*rank = (uint8_t)n;
	return n > 0;
}

static uint64_t shape_elems(uint8_t rank, const uint32_t *dims)
{
	uint64_t elems = 1;
	uint8_t d;

	for (d = 0; d < rank; d++) {
		elems *= dims[d];
		if (elems > UINT32_MAX)
			return UINT64_MAX;
	}
	return elems;
}

static int parse_infer(int argc, char **argv, struct infer_args *a)
{
	static const struct option longopts[] = {
		{ "model", required_argument, NULL, 'm' },
		{ "input", required_argument, NULL, 'i' },
		{ "input-name", required_argument, NULL, 'n' },
		{ "dtype", required_argument, NULL, 'd' },
		{ "shape", required_argument, NULL, 's' },
		{ "count", required_argument, NULL, 'c' },
		{ "deadline-us", required_argument, NULL, 'D' },
		{ "priority", required_argument, NULL, 'P' },
		{ "expect-echo", no_argument, NULL, 'e' },
		{ "expect", required_argument, NULL, 'E' },
		{ "rtol", required_argument, NULL, 'R' },
		{ "atol", required_argument, NULL, 'A' },
		{ "output", required_argument, NULL, 'o' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "tensor", required_argument, NULL, 't' },
		{ "rows", required_argument, NULL, 'r' },
		{ "output-dir", required_argument, NULL, 'O' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t v;
	int opt;
	const char *eq;
	bool tolerance_given = false;

	while ((opt = getopt_long(argc, argv, ":qh", longopts, NULL)) != -1) {
		switch (opt) {
		case 'm':
			a->model = optarg;
			break;
		case 'i':
			a->input_path = optarg;
			break;
		case 'n':
			if (optarg[0] == '\0' || strlen(optarg) > BW_MAX_NAME_LEN) {
				usage_error("infer", "--input-name: invalid value '%s' (expected a "
					    "name of 1..255 bytes)", optarg);
				return EXIT_USAGE;
			}
			a->input_name = optarg;
			break;
		case 'd':
			a->dtype = bwc_dtype_parse(optarg);
			if (a->dtype < 0) {
				usage_error("infer", "--dtype: invalid value '%s' (expected float, "
					    "uint8, int8, uint16, int16, int32, int64, bool, float16, "
					    "double, uint32, uint64 or bfloat16)", optarg);
				return EXIT_USAGE;
			}
			break;
		case 's':
			if (a->nshapes == SHAPES_MAX) {
				usage_error("infer", "--shape: too many shapes at '%s' (at most %d)",
					    optarg, SHAPES_MAX);
				return EXIT_USAGE;
			}
			if (!parse_shape(optarg, &a->ranks[a->nshapes], a->dims[a->nshapes])) {
				usage_error("infer", "--shape: invalid value '%s' (expected 1..8 "
					    "comma-separated dims 0..4294967295, e.g. 1,3,224,224)",
					    optarg);
				return EXIT_USAGE;
			}
			a->nshapes++;
			break;
		case 'c':
			if (!opt_u64("infer", "--count", optarg, 1, COUNT_MAX, &a->count))
				return EXIT_USAGE;
			break;
		case 'D':
			if (!opt_u64("infer", "--deadline-us", optarg, 0, UINT32_MAX, &v))
				return EXIT_USAGE;
			a->deadline_us = (uint32_t)v;
			break;
		case 'P':
			if (!opt_u64("infer", "--priority", optarg, 0, UINT8_MAX, &v))
				return EXIT_USAGE;
			a->priority = (uint8_t)v;
			break;
		case 'e':
			a->expect_echo = true;
			break;
		case 'E':
			if (optarg[0] == '\0') {
				usage_error("infer", "--expect: invalid value '' (expected a directory)");
				return EXIT_USAGE;
			}
			a->expect_dir = optarg;
			break;
		case 'R':
			if (!opt_nonneg_double("infer", "--rtol", optarg, &a->rtol))
				return EXIT_USAGE;
			tolerance_given = true;
			break;
		case 'A':
			if (!opt_nonneg_double("infer", "--atol", optarg, &a->atol))
				return EXIT_USAGE;
			tolerance_given = true;
			break;
		case 'o':
			a->output_path = optarg;
			break;
		case 'q':
			a->quiet = true;
			break;
		case 't':
			eq = strchr(optarg, '=');
			if (eq == NULL || eq == optarg || eq[1] == '\0' || (size_t)(eq - optarg) > BW_MAX_NAME_LEN) {
				usage_error("infer", "--tensor: invalid value '%s' (expected NAME=FILE.npy)", optarg);
				return EXIT_USAGE;
			}
			if (a->ntensors == TENSORS_MAX) {
				usage_error("infer", "--tensor: too many at '%s' (at most %d)", optarg, TENSORS_MAX);
				return EXIT_USAGE;
			}
			/* NUL-terminate the name in place: optarg points into argv, ours for the run */
			*(char *)eq = '\0';
			a->tensor_names[a->ntensors] = optarg;
			a->tensor_paths[a->ntensors++] = eq + 1;
			break;
		case 'r':
			if (!opt_u64("infer", "--rows", optarg, 1, 1024, &a->rows))
				return EXIT_USAGE;
			break;
		case 'O':
			a->output_dir = optarg;
			break;
		case 'h':
			fputs(g_usage_infer, stdout);
			return -1;
		default:
			return command_opt_error("infer", opt, argv);
		}
	}
	if (no_operands("infer", argc, argv) != EXIT_OK)
		return EXIT_USAGE;
	if (a->model == NULL) {
		usage_error("infer", "--model is required (a model id or name)");
		return EXIT_USAGE;
	}
	if (a->ntensors > 0 && (a->input_path != NULL || a->nshapes > 0 || a->expect_echo)) {
		usage_error("infer", "--tensor cannot be combined with --input, --shape or --expect-echo");
		return EXIT_USAGE;
	}
	if (a->expect_dir != NULL && a->expect_echo) {
		usage_error("infer", "--expect and --expect-echo cannot be combined (one check per reply)");
		return EXIT_USAGE;
	}
	if (tolerance_given && a->expect_dir == NULL) {
		usage_error("infer", "--rtol and --atol need --expect");
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

/* The room left for data in the largest request body with one tensor descriptor and its name. */
static uint64_t data_room(const struct infer_args *a)
{
	uint32_t name_len = a->input_name != NULL ? (uint32_t)strlen(a->input_name) : 0;

	return REQUEST_BODY_MAX - sizeof(struct bw_tensor_desc) - bw_pad8(name_len);
}

/* Reads --input; fills in the default shape or checks the given ones against the file size. */
static int load_input(struct infer_args *a, uint8_t *buf, uint64_t *len)
{
	uint32_t elem = bw_dtype_size((uint32_t)a->dtype);
	uint64_t room = data_room(a);
	char dims[160];
	FILE *f;
	size_t n;
	unsigned s;

	f = fopen(a->input_path, "rb");
	if (f == NULL) {
		fprintf(stderr, "%s infer: --input: cannot open '%s': %s\n", PROG, a->input_path,
			strerror(errno));
		return EXIT_FAIL;
	}
	/* Read one byte past the room so that a too-big file is recognised without stat(). */
	n = fread(buf, 1, room + 1, f);
	if (ferror(f)) {
		fprintf(stderr, "%s infer: --input: cannot read '%s': %s\n", PROG, a->input_path,
			strerror(errno));
		fclose(f);
		return EXIT_FAIL;
	}
	fclose(f);
	if (n > room) {
		usage_error("infer", "--input: file '%s' is larger than one request carries (at most "
			    "%" PRIu64 " bytes)", a->input_path, room);
		return EXIT_USAGE;
	}
	*len = n;
	if (a->nshapes == 0) {
		if (n % elem != 0) {
			usage_error("infer", "--input: file '%s' has %zu bytes, not a multiple of the "
				    "%s element size %u", a->input_path, n, dtype_label((uint32_t)a->dtype),
				    elem);
			return EXIT_USAGE;
		}
		a->nshapes = 1;
		a->ranks[0] = 2;
		a->dims[0][0] = 1;
		a->dims[0][1] = (uint32_t)(n / elem);
		return EXIT_OK;
	}
	for (s = 0; s < a->nshapes; s++) {
		if (shape_elems(a->ranks[s], a->dims[s]) * elem != n) {
			format_dims(dims, sizeof(dims), a->ranks[s], a->dims[s]);
			usage_error("infer", "--shape: %s of %s needs %" PRIu64 " bytes but --input "
				    "'%s' has %zu", dims, dtype_label((uint32_t)a->dtype),
				    shape_elems(a->ranks[s], a->dims[s]) * elem, a->input_path, n);
			return EXIT_USAGE;
		}
	}
	return EXIT_OK;
}

/* Checks that a reply echoes the input; returns NULL or what differs. */
static const char *echo_mismatch(const struct bwc_reply *r, const struct bwc_tensor *in)
{
	const struct bw_tensor_desc *d;

	if (r->num_tensors != 1)
		return "reply tensor count differs from the request";
	d = r->tensors[0].desc;
	if (d->dtype != in->dtype)
		return "reply dtype differs from the request";
	if (d->rank != in->rank || memcmp(d->dims, in->dims, in->rank * sizeof(in->dims[0])) != 0)
		return "reply dims differ from the request";
	if (d->data_len != in->data_len ||
	    (in->data_len > 0 && memcmp(r->tensors[0].data, in->data, in->data_len) != 0))
		return "reply data differs from the request";
	return NULL;
}

static int write_output(const char *path, const uint8_t *data, uint32_t len)
{
	FILE *f = fopen(path, "wb");

	if (f == NULL || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
		fprintf(stderr, "%s infer: --output: cannot write '%s': %s\n", PROG, path,
			strerror(errno));
		if (f != NULL)
			fclose(f);
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

int cmd_infer(struct cli *cli, int argc, char **argv)
{
	struct infer_args a = { .dtype = BW_DTYPE_FLOAT, .count = 1, .rtol = EXPECT_RTOL_DEFAULT,
				.atol = EXPECT_ATOL_DEFAULT };
	struct run_stats st = { 0 };
	struct bwc_model_info *info = NULL;
	struct bwc_reply *reply = NULL;
	struct expect *ex = NULL;
	uint8_t *data = NULL, *out = NULL;
	uint64_t input_len = 0, i, room;
	uint32_t model_id, out_len = 0, elem;
	bool have_info, have_out = false;
	char dims[160];
	unsigned s;
	int rc;

	rc = parse_infer(argc, argv, &a);
	if (rc != EXIT_OK)
		return rc < 0 ? EXIT_OK : rc;
	unsigned user_shapes = a.nshapes;

	elem = bw_dtype_size((uint32_t)a.dtype);
	room = data_room(&a);
	data = malloc(room + 1); /* load_input reads a byte past the room to see a file too large */
	out = malloc(reply_body_max(cli));
	reply = malloc(sizeof(*reply));
	info = malloc(sizeof(*info));
	st.lat_ns = malloc(a.count * sizeof(st.lat_ns[0]));
	if (data == NULL || out == NULL || reply == NULL || info == NULL || st.lat_ns == NULL) {
		fprintf(stderr, "%s infer: out of memory\n", PROG);
		rc = EXIT_FAIL;
		goto done;
	}
	if (a.input_path != NULL) {
		rc = load_input(&a, data, &input_len);
		if (rc != EXIT_OK)
			goto done;
	} else if (a.nshapes == 0) {
		a.nshapes = 1;
		a.ranks[0] = 2;
		a.dims[0][0] = 1;
		a.dims[0][1] = INFER_DIM_DEFAULT;
	}
	for (s = 0; s < a.nshapes; s++) {
		uint64_t elems = shape_elems(a.ranks[s], a.dims[s]);

		if (elems == UINT64_MAX || elems * elem > room) {
			format_dims(dims, sizeof(dims), a.ranks[s], a.dims[s]);
			usage_error("infer", "--shape: %s of %s does not fit one request (at most "
				    "%" PRIu64 " bytes of data)", dims, dtype_label((uint32_t)a.dtype),
				    room);
			rc = EXIT_USAGE;
			goto done;
		}
	}

	if (a.expect_dir != NULL) {
		ex = expect_open(a.expect_dir, a.rtol, a.atol);
		if (ex == NULL) {
			rc = EXIT_FAIL;
			goto done;
		}
	}

	rc = open_client(cli);
	if (rc != EXIT_OK)
		goto done;
	rc = resolve_model(cli, "infer", a.model, info, &have_info, &model_id);
	if (rc != EXIT_OK)
		goto done;
	/* A model that declares its inputs gets them by name or generated, unless raw data was asked for. */
	if (a.ntensors > 0 || (a.input_path == NULL && user_shapes == 0 && !a.expect_echo)) {
		if (!have_info) {
			rc = bwc_model_info(cli->c, model_id, info);
			if (rc != 0) {
				fprintf(stderr, "%s infer: MODEL_INFO of model %u: %s\n", PROG, model_id,
					bwc_last_error(cli->c));
				rc = EXIT_FAIL;
				goto done;
			}
			have_info = true;
		}
		if (a.ntensors > 0 || (!(info->flags & BW_MODEL_F_ANY_TENSORS) && info->num_inputs > 0)) {
			rc = infer_model(cli, &a, info, model_id, ex, &st);
			goto done;
		}
	}
	if (a.output_dir != NULL || a.rows != 0) {
		usage_error("infer", "--output-dir and --rows need a model that declares its inputs");
		rc = EXIT_USAGE;
		goto done;
	}
	if (ex != NULL && have_info)
		expect_preload(ex, info);

	for (i = 0; i < a.count && !g_stop; i++) {
		unsigned shape = (unsigned)(i % a.nshapes);
		struct bwc_tensor in = {
			.index = a.input_name != NULL ? BW_TENSOR_BY_NAME : 0,
			.dtype = (uint8_t)a.dtype,
			.rank = a.ranks[shape],
			.name = a.input_name,
			.data = data,
		};
		const char *mismatch;
		char what[48], why[1024];
		uint64_t elems = shape_elems(in.rank, a.dims[shape]);

		memcpy(in.dims, a.dims[shape], sizeof(in.dims));
		in.data_len = (uint32_t)(elems * elem);
		if (a.input_path == NULL)
			generate_data(data, in.dtype, elems, i);

		snprintf(what, sizeof(what), "request %" PRIu64, i + 1);
		st.sent++;
		rc = cli_infer(cli, model_id, &in, 1, a.deadline_us, a.priority, reply);
		note_datagrams(&st, cli->c);
		if (rc != 0) {
			if (rc == -ETIMEDOUT)
				st.timeouts++;
			else
				st.errors++;
			note_failure(&st, what, rc, cli->c);
			continue;
		}
		mismatch = NULL;
		if (a.expect_echo && (mismatch = echo_mismatch(reply, &in)) != NULL) {
			snprintf(why, sizeof(why), "mismatch: %s", mismatch);
			mismatch = why;
		} else if (ex != NULL && !expect_check(ex, reply, why, sizeof(why))) {
			mismatch = why;
		}
		if (mismatch != NULL) {
			st.errors++;
			note_mismatch(&st, what, mismatch);
			continue;
		}
		st.lat_ns[st.ok++] = reply->rtt_ns;
		/* The reply's views die with the next request: keep the bytes --output wants. */
		if (a.output_path != NULL && reply->num_tensors > 0) {
			out_len = reply->tensors[0].desc->data_len;
			memcpy(out, reply->tensors[0].data, out_len);
			have_out = true;
		}
		if (!a.quiet)
			printf("%s: OK %u output%s rtt %.1f us%s\n", what, reply->num_tensors,
			       reply->num_tensors == 1 ? "" : "s", (double)reply->rtt_ns / 1000.0,
			       a.expect_echo ? " (echo matches)" : ex != NULL ? " (matches --expect)" : "");
	}
	if (ex != NULL)
		expect_print_summary(ex);
	print_pool_summary(cli);
	print_summary("infer", cli, &st);
	rc = st.ok == a.count ? EXIT_OK : EXIT_FAIL;
	if (a.output_path != NULL) {
		if (have_out) {
			if (write_output(a.output_path, out, out_len) != EXIT_OK)
				rc = EXIT_FAIL;
		} else {
			fprintf(stderr, "%s infer: --output: no OK reply with an output tensor; '%s' "
				"not written\n", PROG, a.output_path);
			rc = EXIT_FAIL;
		}
	}
done:
	free(data);
	free(out);
	free(reply);
	free(info);
	free(st.lat_ns);
	expect_close(ex);
	return rc;
}
