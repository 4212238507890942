#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Writes batchwire's benchmark and test models as ONNX files, deterministically.

    gen_models.py --out DIR [mlp cnn resnet50 minilm]

Every model is opset 17 with IR version 8, the newest that Debian 12's onnx.proto (and so
batchwire's loader) reads. Weights come from numpy's PCG64 generator seeded per model, drawn in
float64 and rounded to float32, which numpy computes the same on every platform: the same command
writes the same bytes on every machine with the same numpy and onnx versions (numpy does not
promise Generator streams across its versions, so a numpy upgrade may change the weights; the
models stay valid, only their bytes differ). The batch dimension is the dim_param "batch";
every other dimension is static. File names, input and output names are a contract: tests,
benchmarks and the daemon's configs refer to them.

Needs the `onnx` and `numpy` packages (PyPI) only; nothing is trained or downloaded.
"""

import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8
BATCH = "batch"

# Per-model seeds: changing one model's recipe must not change another model's bytes.
SEEDS = {"mlp": 1, "cnn": 2, "resnet50": 3, "minilm": 4}


class Graph:
    """Nodes, initializers and fresh names for one model."""

    def __init__(self, name, seed):
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes = []
        self.inits = []
        self.counts = {}

    def fresh(self, stem):
        n = self.counts.get(stem, 0)
        self.counts[stem] = n + 1
        return stem if n == 0 else f"{stem}_{n}"

    def const(self, name, array):
        """Adds an initializer; returns its name."""
        name = self.fresh(name)
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def normal(self, name, shape, std):
        w = self.rng.standard_normal(shape) * std
        return self.const(name, w.astype(np.float32))

    def uniform(self, name, shape, lo, hi):
        w = self.rng.uniform(lo, hi, shape)
        return self.const(name, w.astype(np.float32))

    def op(self, op_type, inputs, name, outputs=1, **attrs):
        """Adds a node named name; returns its output name (or names when outputs > 1)."""
        name = self.fresh(name)
        outs = [name] if outputs == 1 else [f"{name}:{i}" for i in range(outputs)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=name, **attrs))
        return outs[0] if outputs == 1 else outs

    def model(self, inputs, outputs, doc):
        graph = helper.make_graph(self.nodes, self.name, inputs, outputs, self.inits)
        model = helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", OPSET)],
            producer_name="batchwire gen_models.py",
            doc_string=doc,
        )
        model.ir_version = IR_VERSION
        return model


def tensor(name, elem, dims):
    return helper.make_tensor_value_info(name, elem, [BATCH] + list(dims))


# ---- MLP --------------------------------------------------------------------------------------

def mlp():
    """784-1024-1024-10. Linear layers as MatMul + Add (+ Relu), the form PyTorch's exporter writes
    for Linear on inputs of rank > 2 and tf2onnx for Dense: the planner's MatMul+Add(+act) fusion
    has three to do. Weights [in, out], He-normal for the Relu layers."""
    g = Graph("mlp", SEEDS["mlp"])
    x = "input"
    sizes = [784, 1024, 1024, 10]
    for i in range(3):
        fan_in, fan_out = sizes[i], sizes[i + 1]
        w = g.normal(f"fc{i + 1}.weight", (fan_in, fan_out), np.sqrt(2.0 / fan_in))
        b = g.uniform(f"fc{i + 1}.bias", (fan_out,), -0.1, 0.1)
        x = g.op("MatMul", [x, w], f"fc{i + 1}.matmul")
        if i < 2:
            x = g.op("Add", [x, b], f"fc{i + 1}.add")
            x = g.op("Relu", [x], f"fc{i + 1}.relu")
        else:
            x = g.op("Add", [x, b], "logits")
    return g.model([tensor("input", TensorProto.FLOAT, [784])],
                   [tensor("logits", TensorProto.FLOAT, [10])],
                   "MLP 784-1024-1024-10 (MatMul+Add+Relu), seeded random weights")


# ---- small CNN --------------------------------------------------------------------------------

def batchnorm(g, x, name, channels, gamma_scale=1.0):
    """Inference BatchNormalization with plausible running statistics: scale and shift near 1 and
    0, so it is not an identity that a wrong fusion could get right by accident."""
    gamma = g.uniform(f"{name}.weight", (channels,), 0.8 * gamma_scale, 1.2 * gamma_scale)
    beta = g.uniform(f"{name}.bias", (channels,), -0.1, 0.1)
    mean = g.uniform(f"{name}.running_mean", (channels,), -0.1, 0.1)
    var = g.uniform(f"{name}.running_var", (channels,), 0.8, 1.2)
    return g.op("BatchNormalization", [x, gamma, beta, mean, var], name, epsilon=1e-5)


def conv(g, x, name, cin, cout, k, stride=1, pad=0, bias=False):
    """He-normal (fan-in) weights: Relu after every conv keeps the activations' second moment."""
    w = g.normal(f"{name}.weight", (cout, cin, k, k), np.sqrt(2.0 / (cin * k * k)))
    inputs = [x, w]
    if bias:
        inputs.append(g.uniform(f"{name}.bias", (cout,), -0.1, 0.1))
    return g.op("Conv", inputs, name, kernel_shape=[k, k], strides=[stride, stride],
                pads=[pad, pad, pad, pad])


def cnn():
    """Two conv blocks (Conv with bias + BatchNormalization + Relu, MaxPool 2) and two Gemms, the
    way PyTorch exports Linear on a flattened input (Gemm, transB=1, weight [out, in])."""
    g = Graph("cnn", SEEDS["cnn"])
    x = "image"
    for i, (cin, cout) in enumerate([(1, 16), (16, 32)], start=1):
        x = conv(g, x, f"conv{i}", cin, cout, 3, pad=1, bias=True)
        x = batchnorm(g, x, f"bn{i}", cout)
        x = g.op("Relu", [x], f"relu{i}")
        x = g.op("MaxPool", [x], f"pool{i}", kernel_shape=[2, 2], strides=[2, 2])
    x = g.op("Flatten", [x], "flatten", axis=1)
    for i, (fin, fout) in enumerate([(32 * 7 * 7, 128), (128, 10)], start=1):
        w = g.normal(f"fc{i}.weight", (fout, fin), np.sqrt(2.0 / fin))
        b = g.uniform(f"fc{i}.bias", (fout,), -0.1, 0.1)
        x = g.op("Gemm", [x, w, b], "logits" if i == 2 else f"fc{i}", transB=1)
        if i == 1:
            x = g.op("Relu", [x], "fc1.relu")
    return g.model([tensor("image", TensorProto.FLOAT, [1, 28, 28])],
                   [tensor("logits", TensorProto.FLOAT, [10])],
                   "Small CNN for 28x28 images (Conv+BN+Relu x2, Gemm x2), seeded random weights")


# ---- ResNet-50 v1.5 ---------------------------------------------------------------------------

# A bottleneck's last BatchNormalization scales its branch down (torchvision's zero_init_residual
# sets it to 0; 0 would leave the branch's convolutions untested). He-normal weights keep each
# branch's output at its input's scale; adding it to the identity path grows the variance by
# about (1 + RESIDUAL_GAMMA^2) per block, small enough over 16 blocks, and the downsampling
# blocks' projections reset it four times.
RESIDUAL_GAMMA = 0.3


def bottleneck(g, x, name, cin, planes, stride):
    """torchvision's Bottleneck (v1.5: the stride sits on the 3x3 conv)."""
    cout = planes * 4
    y = conv(g, x, f"{name}.conv1", cin, planes, 1)
    y = g.op("Relu", [batchnorm(g, y, f"{name}.bn1", planes)], f"{name}.relu1")
    y = conv(g, y, f"{name}.conv2", planes, planes, 3, stride=stride, pad=1)
    y = g.op("Relu", [batchnorm(g, y, f"{name}.bn2", planes)], f"{name}.relu2")
    y = conv(g, y, f"{name}.conv3", planes, cout, 1)
    y = batchnorm(g, y, f"{name}.bn3", cout, gamma_scale=RESIDUAL_GAMMA)
    if stride != 1 or cin != cout:
        x = conv(g, x, f"{name}.downsample.0", cin, cout, 1, stride=stride)
        x = batchnorm(g, x, f"{name}.downsample.1", cout)
    y = g.op("Add", [y, x], f"{name}.add")
    return g.op("Relu", [y], f"{name}.relu")


def resnet50():
    g = Graph("resnet50", SEEDS["resnet50"])
    x = conv(g, "image", "conv1", 3, 64, 7, stride=2, pad=3)
    x = g.op("Relu", [batchnorm(g, x, "bn1", 64)], "relu")
    x = g.op("MaxPool", [x], "maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for layer, (planes, blocks, stride) in enumerate(
            [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)], start=1):
        for b in range(blocks):
            x = bottleneck(g, x, f"layer{layer}.{b}", cin, planes, stride if b == 0 else 1)
            cin = planes * 4
    x = g.op("GlobalAveragePool", [x], "avgpool")
    x = g.op("Flatten", [x], "flatten", axis=1)
    # Unit-variance logits for unit-scale features: std 1/sqrt(fan_in).
    w = g.normal("fc.weight", (1000, 2048), 1.0 / np.sqrt(2048))
    b = g.uniform("fc.bias", (1000,), -0.1, 0.1)
    x = g.op("Gemm", [x, w, b], "logits", transB=1)
    return g.model([tensor("image", TensorProto.FLOAT, [3, 224, 224])],
                   [tensor("logits", TensorProto.FLOAT, [1000])],
                   "ResNet-50 v1.5 (torchvision's architecture), seeded random weights")


# ---- MiniLM-L6-shaped encoder -----------------------------------------------------------------

SEQ = 128
HIDDEN = 384
HEADS = 12
HEAD_DIM = HIDDEN // HEADS
INTERMEDIATE = 1536
LAYERS = 6
VOCAB = 30522
MAX_POSITIONS = 512
LN_EPS = 1e-12          # BERT's
MASK_BIAS = -10000.0    # BERT's additive bias for masked keys: exp() of it is 0 in float32


def layernorm(g, x, name):
    gamma = g.uniform(f"{name}.weight", (HIDDEN,), 0.9, 1.1)
    beta = g.uniform(f"{name}.bias", (HIDDEN,), -0.05, 0.05)
    return g.op("LayerNormalization", [x, gamma, beta], name, axis=-1, epsilon=LN_EPS)


def linear(g, x, name, fin, fout, std):
    """MatMul + Add with a [in, out] weight, as PyTorch exports Linear on rank-3 inputs."""
    w = g.normal(f"{name}.weight", (fin, fout), std)
    b = g.uniform(f"{name}.bias", (fout,), -0.02, 0.02)
    return g.op("Add", [g.op("MatMul", [x, w], f"{name}.matmul"), b], f"{name}.add")


def encoder_layer(g, x, name, mask_bias, heads_shape, hidden_shape):
    # Q and K at std 1/sqrt(hidden): on LayerNorm'd inputs the scaled scores then have a spread
    # near 1, so the softmax is neither uniform nor one-hot and the test sees it compute.
    std_qk = 1.0 / np.sqrt(HIDDEN)
    q = linear(g, x, f"{name}.attention.query", HIDDEN, HIDDEN, std_qk)
    k = linear(g, x, f"{name}.attention.key", HIDDEN, HIDDEN, std_qk)
    v = linear(g, x, f"{name}.attention.value", HIDDEN, HIDDEN, 1.0 / np.sqrt(HIDDEN))
    # [B, S, H] -> [B, heads, S, head_dim]; K straight to [B, heads, head_dim, S].
    q = g.op("Transpose", [g.op("Reshape", [q, heads_shape], f"{name}.q_reshape")],
             f"{name}.q_transpose", perm=[0, 2, 1, 3])
    k = g.op("Transpose", [g.op("Reshape", [k, heads_shape], f"{name}.k_reshape")],
             f"{name}.k_transpose", perm=[0, 2, 3, 1])
    v = g.op("Transpose", [g.op("Reshape", [v, heads_shape], f"{name}.v_reshape")],
             f"{name}.v_transpose", perm=[0, 2, 1, 3])
    scores = g.op("MatMul", [q, k], f"{name}.scores")
    scale = g.const(f"{name}.scale", np.array(np.sqrt(HEAD_DIM), dtype=np.float32))
    scores = g.op("Div", [scores, scale], f"{name}.scores_scaled")
    scores = g.op("Add", [scores, mask_bias], f"{name}.scores_masked")
    probs = g.op("Softmax", [scores], f"{name}.softmax", axis=-1)
    ctx = g.op("MatMul", [probs, v], f"{name}.context")
    ctx = g.op("Transpose", [ctx], f"{name}.context_transpose", perm=[0, 2, 1, 3])
    ctx = g.op("Reshape", [ctx, hidden_shape], f"{name}.context_reshape")
    attn = linear(g, ctx, f"{name}.attention.output", HIDDEN, HIDDEN, 1.0 / np.sqrt(HIDDEN))
    x = layernorm(g, g.op("Add", [attn, x], f"{name}.attention.residual"),
                  f"{name}.attention.LayerNorm")
    # Feed-forward with GELU written as PyTorch exports it: x * 0.5 * (1 + erf(x / sqrt(2))).
    h = linear(g, x, f"{name}.intermediate", HIDDEN, INTERMEDIATE, 1.0 / np.sqrt(HIDDEN))
    sqrt2 = g.const(f"{name}.gelu.sqrt2", np.array(np.sqrt(2.0), dtype=np.float32))
    one = g.const(f"{name}.gelu.one", np.array(1.0, dtype=np.float32))
    half = g.const(f"{name}.gelu.half", np.array(0.5, dtype=np.float32))
    e = g.op("Erf", [g.op("Div", [h, sqrt2], f"{name}.gelu.div")], f"{name}.gelu.erf")
    e = g.op("Add", [e, one], f"{name}.gelu.add")
    h = g.op("Mul", [g.op("Mul", [h, e], f"{name}.gelu.mul"), half], f"{name}.gelu.half_mul")
    out = linear(g, h, f"{name}.output", INTERMEDIATE, HIDDEN, 1.0 / np.sqrt(INTERMEDIATE))
    return layernorm(g, g.op("Add", [out, x], f"{name}.output.residual"), f"{name}.output.LayerNorm")


def minilm():
    """A 6-layer BERT encoder of all-MiniLM-L6's shape with sentence-transformers' mean pooling:
    embedding = sum(hidden * mask) / max(sum(mask), 1e-9) over the sequence."""
    g = Graph("minilm", SEEDS["minilm"])
    word = g.normal("embeddings.word_embeddings.weight", (VOCAB, HIDDEN), 1.0)
    pos = g.normal("embeddings.position_embeddings.weight", (MAX_POSITIONS, HIDDEN), 0.5)
    pos_ids = g.const("embeddings.position_ids", np.arange(SEQ, dtype=np.int64).reshape(1, SEQ))
    x = g.op("Gather", [word, "input_ids"], "embeddings.word", axis=0)
    x = g.op("Add", [x, g.op("Gather", [pos, pos_ids], "embeddings.position", axis=0)],
             "embeddings.add")
    x = layernorm(g, x, "embeddings.LayerNorm")

    # Mask [B, S] int64 -> additive bias [B, 1, 1, S]: 0 where attended, MASK_BIAS where not.
    mask = g.op("Cast", ["attention_mask"], "mask.cast", to=TensorProto.FLOAT)
    one = g.const("mask.one", np.array(1.0, dtype=np.float32))
    bias_scale = g.const("mask.bias_scale", np.array(MASK_BIAS, dtype=np.float32))
    bias = g.op("Mul", [g.op("Sub", [one, mask], "mask.invert"), bias_scale], "mask.bias")
    bias = g.op("Unsqueeze", [bias, g.const("mask.axes", np.array([1, 2], dtype=np.int64))],
                "mask.unsqueeze")

    heads_shape = g.const("shape.heads", np.array([-1, SEQ, HEADS, HEAD_DIM], dtype=np.int64))
    hidden_shape = g.const("shape.hidden", np.array([-1, SEQ, HIDDEN], dtype=np.int64))
    for layer in range(LAYERS):
        x = encoder_layer(g, x, f"encoder.layer.{layer}", bias, heads_shape, hidden_shape)

    # Masked mean pooling to [B, HIDDEN]: one 1.5 KB row per request fits a jumbo frame.
    m = g.op("Unsqueeze", [mask, g.const("pool.axes2", np.array([2], dtype=np.int64))],
             "pool.mask_unsqueeze")
    axis1 = g.const("pool.axis1", np.array([1], dtype=np.int64))
    total = g.op("ReduceSum", [g.op("Mul", [x, m], "pool.masked"), axis1], "pool.sum", keepdims=0)
    count = g.op("ReduceSum", [m, axis1], "pool.count", keepdims=0)
    count = g.op("Clip", [count, g.const("pool.min_count", np.array(1e-9, dtype=np.float32))],
                 "pool.clip")
    g.op("Div", [total, count], "embedding")
    return g.model([tensor("input_ids", TensorProto.INT64, [SEQ]),
                    tensor("attention_mask", TensorProto.INT64, [SEQ])],
                   [tensor("embedding", TensorProto.FLOAT, [HIDDEN])],
                   "6-layer BERT encoder of MiniLM-L6 shape with masked mean pooling, "
                   "seeded random weights")


MODELS = {"mlp": mlp, "cnn": cnn, "resnet50": resnet50, "minilm": minilm}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="directory to write NAME.onnx into")
    ap.add_argument("--check", action="store_true", help="also run onnx.checker on each model")
    ap.add_argument("names", nargs="*", metavar="NAME",
                    help=f"models to write (default: all of {', '.join(MODELS)})")
    args = ap.parse_args()
    names = args.names or list(MODELS)
    for name in names:
        if name not in MODELS:
            sys.exit(f"gen_models.py: unknown model '{name}' (known: {', '.join(MODELS)})")
    os.makedirs(args.out, exist_ok=True)
    for name in names:
        model = MODELS[name]()
        if args.check:
            onnx.checker.check_model(model, full_check=True)
        path = os.path.join(args.out, f"{name}.onnx")
        # Write beside the target and rename, so an interrupted run never leaves a truncated
        # model that a build would take for up to date.
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(model.SerializeToString())
        os.replace(tmp, path)


if __name__ == "__main__":
    main()
