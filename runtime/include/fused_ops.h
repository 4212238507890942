/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What a device runtime's kernels read of the nodes the runtime hands them: batchwire's own domain
 * (the fused ops rt_graph_optimize writes, documented in runtime/kernels/fused.h), their activation
 * attributes, and the window geometry of Conv and pooling nodes, each read one way for the CPU's
 * kernels and a device's alike.
 */
#ifndef BW_RT_FUSED_OPS_H
#define BW_RT_FUSED_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "graph.h"

#define RT_K_DOMAIN "ai.batchwire"
#define RT_K_DOMAIN_OPSET 1

/* A fused op's activation, applied after its product ("activation", "activation_params"). */
enum rt_k_act {
	RT_K_ACT_NONE,
	RT_K_ACT_RELU,
	RT_K_ACT_LEAKY_RELU,
	RT_K_ACT_CLIP,
	RT_K_ACT_GELU,
};

struct rt_k_act_spec {
	enum rt_k_act kind;
	float a, b; /* LeakyRelu: alpha; Clip: min, max */
};

/**
 * Reads "activation" and "activation_params" of a fused node.
 * \return 0, or -EINVAL/-ENOTSUP naming the attribute.
 */
int rt_k_act_read(const struct rt_node *node, struct rt_k_act_spec *act, char *err, size_t err_cap);

/** The activation's ONNX name ("Relu"...), "" for none. */
const char *rt_k_act_name(enum rt_k_act kind);

/* The window geometry of Conv, ConvTranspose and pooling. */
struct rt_k_window {
	int nsp;                      /* spatial dims */
	int64_t in[RT_MAX_RANK];      /* input spatial dims */
	int64_t kernel[RT_MAX_RANK];
	int64_t stride[RT_MAX_RANK];
	int64_t dilation[RT_MAX_RANK];
	int64_t pad_begin[RT_MAX_RANK];
	int64_t pad_end[RT_MAX_RANK];
	int64_t out[RT_MAX_RANK];     /* output spatial dims */
};

/**
 * Reads kernel_shape (or takes kernel from the caller when kernel_from_w), strides, dilations, pads,
 * auto_pad and, for pooling, ceil_mode, and computes the output spatial dims.
 */
int rt_k_window_init(const struct rt_node *node, const struct rt_tensor *x, const int64_t *kernel_from_w,
		     bool pooling, bool allow_dilations, struct rt_k_window *w, char *err, size_t err_cap);

#endif /* BW_RT_FUSED_OPS_H */
