/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Generated model inputs for a graph's tensors (app/model_inputs.c, library bwinputs): what bwrun and
 * bench/gpu_launch feed a model, the same for the same seed on every host. The generator itself is
 * include/batchwire/inputs.h's, shared with bwcli, and element access by dtype (bw_elem_get,
 * bw_elem_set) batchwire/elem.h's, which it includes. DPDK-free.
 */
#ifndef BW_MODEL_INPUTS_H
#define BW_MODEL_INPUTS_H

#include <stddef.h>
#include <stdint.h>

#include <batchwire/inputs.h>

#include "graph.h"

/**
 * Fills nbytes of data for graph input index of tensor type t from seed with bw_input_fill: rows of
 * t's last dimension, a mask when name holds "mask", input index's own stream of the seed.
 */
void bw_input_generate(const struct rt_tensor *t, size_t nbytes, uint32_t index, uint64_t seed, const char *name,
		       void *data);

#endif /* BW_MODEL_INPUTS_H */
