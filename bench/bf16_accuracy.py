#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""How far precision bf16 moves a CPU model's outputs from fp32: a measurement, not a test.

    bf16_accuracy.py --bwrun BUILD/app/bwrun --models BUILD/models [--models-list resnet50,minilm]
                     [--images N] [--batch B] [--seed S] [--no-openvino]

For each model, N seeded inputs (in batches of B; floats uniform in [-1, 1), token ids in [0, 1000),
masks of ones with the last quarter 0, as bench_vs_ort.py draws them) run through `bwrun` at fp32
and at `--precision bf16`, and, when PyPI's openvino is importable, through OpenVINO at
INFERENCE_PRECISION_HINT bf16 (its AMX path) for comparison. Against batchwire's fp32 outputs:

  max rel err   the largest |x - fp32| over an output row, divided by that row's largest |fp32|
                (so that entries near 0 do not divide by nothing), maximum over rows;
  mean rel err  the same, averaged over rows;
  min cosine    the smallest cosine similarity of a row with fp32's (what an embedding is used by);
  top-1         for a classifier's logits (an output named "logits": ResNet-50's), the share of rows
                whose argmax is fp32's; top-5 the share whose fp32 argmax is among the five largest.

bf16 needs batchwire's kernels at the amx level (AMX-BF16): elsewhere the script says so and exits 0.
The last line: <model>_bf16_max_rel_err=.. [<model>_bf16_top1=..] per model.
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_vs_ort as bvo  # noqa: E402  (the same inputs and single-thread environment)


def run_bwrun(bwrun, model, batch, files, out, precision):
    cmd = [bwrun, "--batch", str(batch), "--precision", precision, "--output-dir", out]
    for name, path in files:
        cmd += ["--input", f"{name}={path}"]
    cmd.append(model)
    p = subprocess.run(cmd, capture_output=True, text=True, env=bvo.SINGLE_THREAD_ENV)
    if p.returncode != 0:
        sys.exit(f"bf16_accuracy: {' '.join(cmd)} failed:\n{p.stdout}{p.stderr}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bwrun", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--models-list", default="resnet50,minilm")
    ap.add_argument("--images", type=int, default=128, help="inputs per model (default 128)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seed", type=int, default=20261202)
    ap.add_argument("--no-openvino", action="store_true")
    args = ap.parse_args()

    kernels = bvo.bwrun_kernels(args.bwrun, os.path.join(args.models, "mlp.onnx"))
    print(f"CPU: {bvo.cpu_model()}; batchwire's kernels: {kernels}")
    if kernels.split()[0] != "amx":
        print(f"bf16: na: batchwire's kernels run at {kernels.split()[0]}, not amx; nothing measured")
        return
    have_ov = False
    if not args.no_openvino:
        try:
            import openvino  # noqa: F401
            have_ov = True
        except ImportError:
            print("openvino is not importable: its column reads na")
    rng = np.random.default_rng(args.seed)
    work = tempfile.mkdtemp(prefix="bf16_accuracy.")
    summary = []
    print(f"{'model':<12} {'inputs':>6} {'side':<14} {'max rel err':>11} {'mean rel err':>12} {'min cosine':>11} "
          f"{'top-1':>7} {'top-5':>7}")
    for m in [x for x in args.models_list.split(",") if x]:
        path = os.path.join(args.models, f"{m}.onnx")
        stats = {"batchwire bf16": [], "OpenVINO bf16": []}
        cosines = {k: [] for k in stats}
        tops = {k: [0, 0, 0] for k in stats}  # top-1 hits, top-5 hits, rows
        for first in range(0, args.images, args.batch):
            b = min(args.batch, args.images - first)
            case = os.path.join(work, f"{m}_{first}")
            files, outputs = bvo.make_inputs(path, b, os.path.join(case, "inputs"), rng)
            run_bwrun(args.bwrun, path, b, files, os.path.join(case, "fp32"), "fp32")
            run_bwrun(args.bwrun, path, b, files, os.path.join(case, "bf16"), "bf16")
            sides = {"batchwire bf16": (os.path.join(case, "bf16"), True)}
            if have_ov:
                bvo.run_worker("ov", path, os.path.join(case, "inputs"), os.path.join(case, "ov"), 0, 1, "bf16")
                sides["OpenVINO bf16"] = (os.path.join(case, "ov"), False)
            for side, (d, safe) in sides.items():
                for name in outputs:
                    ref = np.load(os.path.join(case, "fp32", f"{bvo.safe(name)}.npy")).astype(np.float64)
                    got = np.load(os.path.join(d, f"{bvo.safe(name) if safe else name}.npy")).astype(np.float64)
                    rows_ref, rows_got = ref.reshape(ref.shape[0], -1), got.reshape(got.shape[0], -1)
                    scale = np.maximum(np.abs(rows_ref).max(axis=1), 1e-30)
                    stats[side].extend((np.abs(rows_got - rows_ref).max(axis=1) / scale).tolist())
                    norms = np.maximum(np.linalg.norm(rows_ref, axis=1) * np.linalg.norm(rows_got, axis=1), 1e-30)
                    cosines[side].extend(((rows_ref * rows_got).sum(axis=1) / norms).tolist())
                    if name == "logits" and ref.ndim == 2 and ref.shape[1] >= 5:
                        want = rows_ref.argmax(axis=1)
                        top5 = np.argsort(-rows_got, axis=1)[:, :5]
                        tops[side][0] += int((rows_got.argmax(axis=1) == want).sum())
                        tops[side][1] += int((top5 == want[:, None]).any(axis=1).sum())
                        tops[side][2] += len(want)
        for side, errs in stats.items():
            if not errs:
                continue
            t1 = f"{100.0 * tops[side][0] / tops[side][2]:.1f}%" if tops[side][2] else "na"
            t5 = f"{100.0 * tops[side][1] / tops[side][2]:.1f}%" if tops[side][2] else "na"
            print(f"{bvo.LABEL.get(m, m):<12} {args.images:>6} {side:<14} {max(errs):>11.3g} {np.mean(errs):>12.3g} "
                  f"{min(cosines[side]):>11.6f} {t1:>7} {t5:>7}", flush=True)
            if side == "batchwire bf16":
                summary.append(f"{bvo.LABEL.get(m, m)}_bf16_max_rel_err={max(errs):.3g}")
                if tops[side][2]:
                    summary.append(f"{bvo.LABEL.get(m, m)}_bf16_top1={tops[side][0] / tops[side][2]:.4f}")
    print(" ".join(summary))


if __name__ == "__main__":
    main()
