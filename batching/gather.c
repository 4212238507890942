/* SPDX-License-Identifier: BSD-3-Clause */
/* Gather and scatter for executors that run on the CPU: the only place batch data is copied. */
#include <string.h>

#include "batching.h"

void bat_batch_gather(const struct bw_batch *batch, unsigned int input, uint8_t *dst, uint32_t row_bytes)
{
	uint8_t *out = dst;

	for (uint16_t i = 0; i < batch->num_tasks; i++) {
		const struct bw_segment *s = &batch->tasks[i]->inputs[input];
		memcpy(out, s->data, s->len);
		out += s->len;
	}
	/* Padding rows repeat row 0 of the first task: real data, so no kernel sees garbage or NaNs. */
	for (uint32_t r = batch->size; r < batch->padded_size; r++) {
		memcpy(out, dst, row_bytes);
		out += row_bytes;
	}
}

void bat_batch_scatter(const struct bw_batch *batch, unsigned int output, const uint8_t *src, uint32_t row_bytes)
{
	(void)row_bytes; /* each task's segment already knows its length; rows past them are padding */
	for (uint16_t i = 0; i < batch->num_tasks; i++) {
		const struct bw_segment *s = &batch->tasks[i]->outputs[output];
		if (s->data != src) /* an executor may have computed in place */
			memmove(s->data, src, s->len);
		src += s->len;
	}
}
