#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Writes torchvision's ResNet-50 as ONNX with onnxruntime's outputs for it, for the GPU check.

The same network tests/gpu/torch_peer.py runs in PyTorch, so batchwire's times and PyTorch's are for
one model: torch.manual_seed(0), then torchvision.models.resnet50(weights=None) (random
initialisation, seeded: nothing is downloaded), eval mode. Exported with opset 17 and a dynamic batch
axis, input "input" [N, 3, 224, 224], output "logits" [N, 1000]. For each batch size, seeded inputs
(uniform in [-1, 1), float32) and onnxruntime's CPUExecutionProvider outputs are saved as .npy:

  OUT/resnet50.onnx
  OUT/input_b{N}.npy    what `bwrun --input input=OUT/input_b{N}.npy` takes
  OUT/ref_b{N}.npy      onnxruntime's logits for it

Last line: resnet50_onnx=OUT/resnet50.onnx batches=1,8,32 logits_scale_b1=<max |logit|>
Exit status: 0; 2 a module is missing (torch, torchvision, onnx, onnxruntime, numpy: named); 1 error.
"""
import argparse
import inspect
import os
import sys
import time

ORT_THREADS = 4  # onnxruntime and torch stay off most cores: GPU stages may be timing meanwhile


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="directory for resnet50.onnx and the .npy files")
    ap.add_argument("--batches", default="1,8,32", help="batch sizes (default 1,8,32)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the inputs (default 1)")
    args = ap.parse_args()
    batches = [int(b) for b in args.batches.split(",")]

    try:
        import numpy as np
        import onnx
        import onnxruntime as ort
        import torch
        import torchvision
    except ImportError as e:
        print(f"resnet50_onnx.py: needs torch, torchvision, onnx, onnxruntime and numpy: {e}", file=sys.stderr)
        return 2

    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "resnet50.onnx")
    torch.set_num_threads(ORT_THREADS)
    t0 = time.time()
    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None).eval()
    example = torch.zeros(1, 3, 224, 224)
    kwargs = dict(opset_version=17, input_names=["input"], output_names=["logits"],
                  dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}}, do_constant_folding=True)
    # torch >= 2.9 exports through dynamo by default (and needs onnxscript for it), and a later torch
    # may drop the TorchScript exporter: the TorchScript one first (it takes dynamic_axes as written
    # here), then dynamo (dynamic_shapes for the batch), whichever this torch has and manages
    attempts = [("torchscript", kwargs)]
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        dyn = {k: v for k, v in kwargs.items() if k != "dynamic_axes"}
        attempts = [("torchscript", dict(kwargs, dynamo=False)),
                    ("dynamo", dict(dyn, dynamo=True,
                                    dynamic_shapes=({0: torch.export.Dim("batch", min=1, max=4096)},)))]
    failures = []
    for name, kw in attempts:
        try:
            with torch.no_grad():
                torch.onnx.export(model, (example,), path, **kw)
            onnx.checker.check_model(path)
            print(f"exporter: {name}", flush=True)
            break
        except Exception as e:  # each exporter fails its own way (missing onnxscript, removed API...)
            failures.append(f"{name}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
            print(f"resnet50_onnx.py: the {name} exporter failed, {failures[-1]}", file=sys.stderr, flush=True)
    else:
        print("resnet50_onnx.py: no exporter worked: " + "; ".join(failures), file=sys.stderr)
        return 1
    print(f"exported {path} (torch {torch.__version__}, torchvision {torchvision.__version__}) "
          f"in {time.time() - t0:.1f} s", flush=True)

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = ORT_THREADS
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    scale_b1 = float("nan")
    for b in batches:
        rng = np.random.default_rng(args.seed + b)
        x = rng.uniform(-1.0, 1.0, size=(b, 3, 224, 224)).astype(np.float32)
        (y,) = sess.run(["logits"], {"input": x})
        np.save(os.path.join(args.out, f"input_b{b}.npy"), x)
        np.save(os.path.join(args.out, f"ref_b{b}.npy"), y)
        scale = float(np.abs(y).max())
        if b == 1:
            scale_b1 = scale
        print(f"batch {b}: logits {list(y.shape)} max |logit| {scale:.6g} (onnxruntime {ort.__version__})",
              flush=True)
    print(f"resnet50_onnx={path} batches={args.batches} logits_scale_b1={scale_b1:.6g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
