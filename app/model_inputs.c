/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Generated model inputs, shared by bwrun and the GPU benchmark (bench/gpu_launch.c), so that both
 * feed a model the same data for the same seed: a graph tensor's shape and name turned into
 * bw_input_fill's arguments.
 */
#include <stdbool.h>
#include <string.h>

#include "model_inputs.h"

void bw_input_generate(const struct rt_tensor *t, size_t nbytes, uint32_t index, uint64_t seed, const char *name,
		       void *data)
{
	size_t elem = rt_dtype_size(t->dtype), n = elem != 0 ? nbytes / elem : 0;
	size_t row = t->rank > 0 && t->dims[t->rank - 1] > 0 ? (size_t)t->dims[t->rank - 1] : 1;
	uint64_t state = bw_input_stream(seed, index);

	bw_input_fill(t->dtype, data, n, row, strstr(name, "mask") != NULL, &state);
}
