#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Writes the seed inputs of the fuzz targets in tests/fuzz/, deterministically.

    gen_seeds.py --out DIR [body onnx config]

Each kind goes to DIR/KIND/. The committed corpora (tests/fuzz/corpus/KIND/) are these seeds after
libFuzzer's -merge=1 (which kept them all), and for onnx the inputs of the findings (finding-*,
docs/fuzzing.md); this script is how the seeds were made, and how to make them again when an input
format changes.

- body: inputs of fuzz_body.c (an 8-byte split header, then a protocol v1 body of tensors), valid
  bodies of every dtype and rank, names, by-name tensors, zero-sized dims, 64 tensors, and the
  same bodies seen as a prefix, with a trailer, or with payloads beyond the bytes given.
- onnx: small models the daemon would serve (opset 17, IR 8, the batch dimension symbolic), a few
  that fold constants at load or read external data (their own file), and a handful of the ONNX
  node test models of libonnx-testdata (fixed shapes, unsupported ops, subgraphs: all refused, at
  different depths of the loader).
- config: inputs of fuzz_config.c (a mode digit, then an INI file or NUL-separated arguments):
  configs/*.ini and hand-written ones.

Needs the onnx and numpy packages for onnx only.
"""

import argparse
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
NODE_TESTS = "/usr/share/libonnx-testdata/data/node"

# ---- body ----------------------------------------------------------------------------------------

DTYPE_SIZE = {1: 4, 2: 1, 3: 1, 4: 2, 5: 2, 6: 4, 7: 8, 9: 1, 10: 2, 11: 8, 12: 4, 13: 8, 16: 2}
BY_NAME = 0xFFFF


def tensor(index, dtype, dims, name=b""):
    """A descriptor with its padded name, and its payload."""
    elems = 1
    for d in dims:
        elems *= d
    data_len = elems * DTYPE_SIZE[dtype]
    desc = struct.pack("<HBBHHII", index, dtype, len(dims), len(name), 0, data_len, 0)
    desc += struct.pack("<8I", *(list(dims) + [0] * (8 - len(dims))))
    pad = (-len(name)) % 8
    payload = bytes((i * 37 + dtype) & 0xFF for i in range(data_len))
    return desc + name + b"\0" * pad, payload


def body(tensors):
    descs = b"".join(t[0] for t in tensors)
    return descs + b"".join(t[1] for t in tensors)


def body_input(n, raw, mode=0, extra=0, cut=0):
    """fuzz_body's input: num_tensors, the mode byte, extra and cut, then the body's bytes."""
    return struct.pack("<BBIH", n, mode, extra, cut) + raw


def body_seeds():
    one = [tensor(0, 1, [2, 3], b"x")]
    three = [tensor(0, 1, [1, 4], b"input"), tensor(1, 7, [1, 2]), tensor(BY_NAME, 10, [3], b"mask")]
    every = [tensor(i, dt, [2] * (i % 4), b"t%d" % i) for i, dt in enumerate(sorted(DTYPE_SIZE))]
    seeds = {
        "empty": body_input(0, b""),
        "one_float": body_input(1, body(one)),
        "three": body_input(3, body(three)),
        "every_dtype": body_input(len(every), body(every)),
        "scalar": body_input(1, body([tensor(0, 7, [])])),
        "zero_dim": body_input(1, body([tensor(0, 1, [0, 5, 7], b"z")])),
        "rank8": body_input(1, body([tensor(0, 2, [1, 2, 1, 2, 1, 2, 1, 2], b"eight")])),
        "long_name": body_input(1, body([tensor(BY_NAME, 2, [4], b"n" * 255)])),
        "max_tensors": body_input(64, body([tensor(i, 2, [1]) for i in range(64)])),
        "too_many": body_input(65, body([tensor(i, 2, [1]) for i in range(65)])),
        # a message's first slice: the descriptors here, the payloads not (yet)
        "first_slice": body_input(3, body(three)[:170], mode=1, extra=len(body(three)) - 170),
        # the descriptors cut short: parse more of the body
        "prefix": body_input(3, body(three), mode=4, cut=len(body(three)) - 60),
        # the body shorter than the bytes: the rest is a trailer
        "trailer": body_input(1, body(one) + b"\x01" * 40, mode=2, extra=40),
        # body_len given outright
        "body_len": body_input(1, body(one), mode=3, extra=len(body(one))),
        "big_payload": body_input(1, body([tensor(0, 1, [1, 256, 256])])[:48], mode=1, extra=256 * 256 * 4),
    }
    bad = bytearray(body(one))
    bad[6] = 1  # reserved
    seeds["reserved"] = body_input(1, bytes(bad))
    bad = bytearray(body(one))
    bad[49] = 1  # name padding
    seeds["padding"] = body_input(1, bytes(bad))
    return seeds


# ---- onnx ----------------------------------------------------------------------------------------

NODE_MODELS = [
    "test_conv_with_strides_padding", "test_gemm_all_attributes", "test_matmul_3d", "test_softmax_axis_1",
    "test_gather_1", "test_reshape_extended_dims", "test_slice", "test_resize_upsample_scales_linear",
    "test_constant_pad", "test_lstm_defaults", "test_maxpool_2d_pads", "test_top_k",
    "test_layer_normalization_2d_axis0", "test_batchnorm_example", "test_constantofshape_float_ones",
    "test_expand_dim_changed", "test_onehot_with_axis", "test_scatter_elements_with_axis", "test_where_example",
    "test_split_equal_parts_1d", "test_convtranspose_pads", "test_cast_FLOAT_to_STRING", "test_if",
    "test_einsum_batch_matmul",
]


def onnx_seeds():
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(7)

    def init(name, shape, dtype=np.float32):
        if np.issubdtype(dtype, np.integer):
            return numpy_helper.from_array(rng.integers(0, 4, shape).astype(dtype), name)
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.5).astype(dtype), name)

    def const(name, values, dtype=np.int64):
        return numpy_helper.from_array(np.array(values, dtype=dtype), name)

    def model(name, nodes, inputs, outputs, inits, opset=17):
        graph = helper.make_graph(nodes, name, inputs, outputs, inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="batchwire tests/fuzz/gen_seeds.py")
        m.ir_version = 8
        return m.SerializeToString()

    def vi(name, dtype, shape):
        return helper.make_tensor_value_info(name, dtype, shape)

    F = TensorProto.FLOAT
    seeds = {}
    seeds["mlp"] = model("mlp", [
        helper.make_node("MatMul", ["x", "w1"], ["h"]),
        helper.make_node("Add", ["h", "b1"], ["hb"]),
        helper.make_node("Relu", ["hb"], ["r"]),
        helper.make_node("Gemm", ["r", "w2", "b2"], ["g"], transB=1),
        helper.make_node("Softmax", ["g"], ["y"], axis=-1),
    ], [vi("x", F, ["batch", 8])], [vi("y", F, ["batch", 3])],
        [init("w1", [8, 6]), init("b1", [6]), init("w2", [3, 6]), init("b2", [3])])
    seeds["cnn"] = model("cnn", [
        helper.make_node("Conv", ["x", "w", "cb"], ["c"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        helper.make_node("BatchNormalization", ["c", "s", "bb", "m", "v"], ["n"]),
        helper.make_node("Relu", ["n"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["p"], ["gp"]),
        helper.make_node("Flatten", ["gp"], ["f"]),
        helper.make_node("Gemm", ["f", "w2"], ["y"]),
    ], [vi("x", F, ["batch", 1, 6, 6])], [vi("y", F, ["batch", 4])],
        [init("w", [2, 1, 3, 3]), init("cb", [2]), init("s", [2]), init("bb", [2]), init("m", [2]),
         numpy_helper.from_array(np.ones([2], np.float32), "v"), init("w2", [2, 4])])
    seeds["embed"] = model("embed", [
        helper.make_node("Gather", ["table", "ids"], ["e"], axis=0),
        helper.make_node("ReduceMean", ["e"], ["y"], axes=[1], keepdims=0),
    ], [vi("ids", TensorProto.INT64, ["batch", 4])], [vi("y", F, ["batch", 3])], [init("table", [10, 3])])
    seeds["attention"] = model("attention", [
        helper.make_node("LayerNormalization", ["x", "g", "b"], ["ln"], axis=-1),
        helper.make_node("MatMul", ["ln", "wq"], ["q"]),
        helper.make_node("Transpose", ["q"], ["qt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "qt"], ["s"]),
        helper.make_node("Softmax", ["s"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "ln"], ["o"]),
        helper.make_node("Reshape", ["o", "shape"], ["y"]),
    ], [vi("x", F, ["batch", 4, 8])], [vi("y", F, ["batch", 32])],
        [init("g", [8]), init("b", [8]), init("wq", [8, 8]), const("shape", [-1, 32])])
    # constants the planner folds at load: Shape, Gather, Concat, Range, Tile, Expand of initializers
    seeds["fold"] = model("fold", [
        helper.make_node("Shape", ["x"], ["xs"]),
        helper.make_node("Gather", ["xs", "zero"], ["b"], axis=0),
        helper.make_node("Unsqueeze", ["b", "axes0"], ["bu"]),
        helper.make_node("Concat", ["bu", "six"], ["shape"], axis=0),
        helper.make_node("Range", ["start", "limit", "delta"], ["r"]),
        helper.make_node("Cast", ["r"], ["rf"], to=F),
        helper.make_node("Tile", ["rf", "reps"], ["t"]),
        helper.make_node("Reshape", ["t", "c23"], ["t23"]),
        helper.make_node("Expand", ["t23", "eshape"], ["te"]),
        helper.make_node("Add", ["x", "te"], ["s"]),
        helper.make_node("Reshape", ["s", "shape"], ["y"]),
    ], [vi("x", F, ["batch", 2, 3])], [vi("y", F, ["batch", 6])],
        [const("zero", 0), const("axes0", [0]), const("six", [6]), const("start", 0), const("limit", 3),
         const("delta", 1), const("reps", [2]), const("c23", [2, 3]), const("eshape", [1, 2, 3])])
    seeds["elementwise"] = model("elementwise", [
        helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(np.float32(0.5).reshape([]))),
        helper.make_node("Mul", ["x", "k"], ["m"]),
        helper.make_node("Sigmoid", ["m"], ["s"]),
        helper.make_node("Greater", ["s", "k"], ["gt"]),
        helper.make_node("Where", ["gt", "s", "m"], ["w"]),
        helper.make_node("Slice", ["w", "st", "en", "ax"], ["sl"]),
        helper.make_node("Pad", ["sl", "pads"], ["p"], mode="constant"),
        helper.make_node("Clip", ["p", "lo", "hi"], ["y"]),
    ], [vi("x", F, ["batch", 6])], [vi("y", F, ["batch", 6])],
        [const("st", [1]), const("en", [5]), const("ax", [1]), const("pads", [0, 1, 0, 1]),
         numpy_helper.from_array(np.float32(-1).reshape([]), "lo"),
         numpy_helper.from_array(np.float32(1).reshape([]), "hi")])
    seeds["fp16"] = model("fp16", [
        helper.make_node("Cast", ["x"], ["xf"], to=F),
        helper.make_node("Resize", ["xf", "", "scales"], ["r"], mode="nearest"),
        helper.make_node("AveragePool", ["r"], ["ap"], kernel_shape=[2, 2]),
        helper.make_node("Flatten", ["ap"], ["f"]),
        helper.make_node("Cast", ["f"], ["y"], to=TensorProto.FLOAT16),
    ], [vi("x", TensorProto.FLOAT16, ["batch", 1, 2, 2])], [vi("y", TensorProto.FLOAT16, ["batch", 9])],
        [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")])
    seeds["two_io"] = model("two_io", [
        helper.make_node("Concat", ["a", "b"], ["c"], axis=1),
        helper.make_node("Split", ["c", "split"], ["y", "z"], axis=1),
    ], [vi("a", F, ["batch", 2]), vi("b", F, ["batch", 3])], [vi("y", F, ["batch", 1]), vi("z", F, ["batch", 4])],
        [const("split", [1, 4])])
    # an initializer read from external data: the model's own file, its first 16 bytes
    ext = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "external",
                            [vi("x", F, ["batch", 4])], [vi("y", F, ["batch", 4])], [])
    w = TensorProto(name="w", data_type=F, dims=[4], data_location=TensorProto.EXTERNAL)
    for k, v in (("location", "model.onnx"), ("offset", "0"), ("length", "16")):
        w.external_data.add(key=k, value=v)
    ext.initializer.append(w)
    m = helper.make_model(ext, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    seeds["external"] = m.SerializeToString()
    for t in NODE_MODELS:
        path = os.path.join(NODE_TESTS, t, "model.onnx")
        if os.path.exists(path):
            with open(path, "rb") as f:
                seeds["node_" + t[len("test_"):]] = f.read()
        else:
            print(f"gen_seeds.py: {path} not found (libonnx-testdata): left out", file=sys.stderr)
    return seeds


# ---- config --------------------------------------------------------------------------------------

def args(mode, *pieces):
    return mode + b"\0".join(p.encode() for p in pieces)


def config_seeds():
    seeds = {}
    for name in sorted(os.listdir(os.path.join(ROOT, "configs"))):
        if name.endswith(".ini"):
            with open(os.path.join(ROOT, "configs", name), "rb") as f:
                seeds["file_" + name[:-4]] = b"0" + f.read()
    seeds["file_minimal"] = b"0[dataplane]\nip = 10.0.0.1\n"
    seeds["file_models"] = (b"0[dataplane]\nip = 10.1.2.3\nmtu = 1500\npoll_lcores = 1,3-5\nallow = 10.0.0.0/8, 192.168.1.0/24\n"
                            b"[model a]\npath = a.onnx\nworkers = 2-3\nslots = 4\nmax_request_bytes = 65536\n"
                            b"max_batch_size = 8\nallowed_batch_sizes = 2,4,8\nprecision = bf16\nallow = 10.1.0.0/16\n"
                            b"[model g]\npath = /m/g.onnx\ndevice = gpu\nmax_batch_size = 2\nallowed_batch_sizes = 1,2\nlayout = nhwc\n"
                            b"launch_mode = doorbell\nprecision = fp16\n[model echo]\nmax_batch_size = 4\n")
    seeds["file_bad"] = (b"0[dataplane]\nip = 10.0.0.1\n; comment\n[model x]\npath=\n[dataplane]\nnoequals\n")
    seeds["args_minimal"] = args(b"1", "--ip", "10.0.0.1")
    seeds["args_all"] = args(b"1", "--ip=10.9.8.7", "--udp-port", "9000", "--mtu", "9000", "--port", "1",
                             "--poll-lcores", "1-2", "--tx-drain-us", "50", "--rx-desc", "512", "--tx-desc", "512",
                             "--mbufs-held", "0", "--max-message-bytes", "1048576", "--reassembly-messages", "8",
                             "--reassembly-mbufs", "2048", "--error-reply-rate", "0", "--icmp-rate", "10",
                             "--arp-rate", "10", "--gpu-module", "fake", "--gpu-index", "1", "--allow", "any")
    seeds["args_models"] = args(b"1", "--ip", "10.0.0.1", "--model", "mlp=models/mlp.onnx", "--model-opt",
                                "mlp.max_batch_size=16", "--model-opt", "mlp.batch_timeout_micros=100",
                                "--model-opt", "echo.priority_levels=2", "--model-opt", "mlp.device=cpu")
    seeds["args_help"] = args(b"1", "--help")
    seeds["args_version"] = args(b"1", "--version")
    seeds["args_bad"] = args(b"1", "-x", "--mtu")
    seeds["both"] = b"2[dataplane]\nip = 10.0.0.1\nmtu = 1500\n[model m]\npath = m.onnx\n\0--mtu\0009000\0--model-opt\0m.slots=2"
    return seeds


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("kinds", nargs="*", default=["body", "onnx", "config"])
    opts = ap.parse_args()
    makers = {"body": body_seeds, "onnx": onnx_seeds, "config": config_seeds}
    for kind in opts.kinds:
        out = os.path.join(opts.out, kind)
        os.makedirs(out, exist_ok=True)
        for name, data in sorted(makers[kind]().items()):
            with open(os.path.join(out, name), "wb") as f:
                f.write(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
