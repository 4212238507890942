/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Fuzz target for the ONNX loader as the daemon calls it: rt_onnx_model_load (runtime.h) on a file
 * holding the input. That is the whole of loading a served model: the nesting check and protobuf-c's
 * unpacking, the loader's checks (IR version, opsets, initializers and their external data, inputs,
 * nodes, attributes, declarations, the topological sort), the kernel check, the optimiser's
 * rewrites at fp32 (constant folding runs kernels on the file's constants), the batching checks and
 * planning at batch sizes 1 and 2 (shape inference of every node).
 *
 * The loader reads a path, so each input is written to model.onnx in a directory private to the
 * process (fuzz.h; removed at exit); external data resolves against it, so a model naming
 * model.onnx as its external data reads itself, and nothing outside it.
 * (runtime/onnx has rt_graph_load_buffer too, from memory, but it is only a part of the path above.)
 *
 * What must hold (abort() otherwise; AddressSanitizer, UndefinedBehaviorSanitizer and the leak
 * checker watch the rest): an error is a negative errno with a one-line message and leaves nothing
 * allocated; a model that loads has a graph, 1..BW_BATCH_TENSORS_MAX inputs and outputs with dtypes
 * the wire carries, names, ranks <= 8, rows of bytes > 0, and MODEL_INFO describes it; rt_model_fini
 * frees everything (the leak checker runs after every input).
 *
 * Run it with OPENBLAS_NUM_THREADS=1 in the environment (meson's test does): OpenBLAS's pthread
 * build would otherwise start its threads before main. Build and runs: docs/fuzzing.md.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <batchwire/batch.h>
#include <batchwire/wire.h>

#include "fuzz.h"
#include "graph.h"
#include "runtime.h"

#define F_DESCRIBE_CAP 65536

static const char *g_path;
static bool g_verbose; /* BW_FUZZ_VERBOSE set: each input's outcome on stderr */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	g_path = fuzz_file_make("onnx", "model.onnx");
	g_verbose = getenv("BW_FUZZ_VERBOSE") != NULL;
	return 0;
}

static void spec_check(const struct rt_tensor_spec *s, uint32_t row_bytes)
{
	CHECK(memchr(s->name, '\0', sizeof(s->name)) != NULL);
	CHECK(bw_dtype_size(s->dtype) != 0);
	CHECK(s->rank >= 1 && s->rank <= BW_MAX_RANK);
	CHECK(s->dims[0] == 0); /* the batch */
	CHECK(row_bytes > 0 && row_bytes % bw_dtype_size(s->dtype) == 0);
}

static void loaded_check(const struct rt_model *m)
{
	static uint8_t info[F_DESCRIBE_CAP];
	struct bw_model_info head;
	int len;

	CHECK(m->graph != NULL && m->kind == RT_MODEL_ONNX);
	CHECK(m->num_inputs >= 1 && m->num_inputs <= BW_BATCH_TENSORS_MAX);
	CHECK(m->num_outputs >= 1 && m->num_outputs <= BW_BATCH_TENSORS_MAX);
	for (uint16_t i = 0; i < m->num_inputs; i++)
		spec_check(&m->inputs[i], m->input_row_bytes[i]);
	for (uint16_t i = 0; i < m->num_outputs; i++)
		spec_check(&m->outputs[i], m->output_row_bytes[i]);
	len = rt_model_describe(m, info, sizeof(info));
	CHECK(len >= (int)sizeof(head) && len <= (int)sizeof(info) && len % 8 == 0);
	memcpy(&head, info, sizeof(head));
	CHECK(head.num_inputs == m->num_inputs && head.num_outputs == m->num_outputs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rt_model model;
	struct rt_opt_report report;
	char err[512];
	int rc;

	fuzz_file_write(data, size);
	memset(err, 0x5a, sizeof(err));
	rc = rt_onnx_model_load(&model, 1, "fuzz", g_path, RT_DEVICE_CPU, NULL, &report, err, sizeof(err));
	if (g_verbose)
		fprintf(stderr, "fuzz_onnx: %zu bytes: %s\n", size, rc == 0 ? "loaded" : err);
	if (rc != 0) {
		CHECK(rc < 0 && rc > -4096);
		CHECK(memchr(err, '\0', sizeof(err)) != NULL && err[0] != '\0' && strchr(err, '\n') == NULL);
		CHECK(model.graph == NULL);
		return 0;
	}
	loaded_check(&model);
	rt_model_fini(&model);
	return 0;
}
