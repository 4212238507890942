/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Generated model inputs and element access by dtype (app/model_inputs.c, library bwinputs): what bwrun
 * and bench/gpu_launch feed a model, the same for the same seed on every host. DPDK-free.
 */
#ifndef BW_MODEL_INPUTS_H
#define BW_MODEL_INPUTS_H

#include <stddef.h>
#include <stdint.h>

#include "graph.h"

#define BW_INPUT_INT_RANGE 1000 /* generated integer inputs (not masks): uniform in [0, this) */

/** \return element i of data as a double (NAN for a dtype it does not read). */
double bw_elem_get(uint8_t dtype, const void *data, size_t i);
/** Stores v as element i of data in its dtype (float16 rounded to nearest even; others truncated). */
void bw_elem_set(uint8_t dtype, void *data, size_t i, double v);

/**
 * Fills nbytes of data for graph input index of tensor type t from seed: floats uniform in [-1, 1)
 * (24 bits, exact in float), a tensor whose name holds "mask" ones with the last quarter of each row 0,
 * bools a random bit, other integers uniform in [0, BW_INPUT_INT_RANGE). Each input has its own stream,
 * so giving one input from a file does not change what the others get.
 */
void bw_input_generate(const struct rt_tensor *t, size_t nbytes, uint32_t index, uint64_t seed, const char *name,
		       void *data);

#endif /* BW_MODEL_INPUTS_H */
