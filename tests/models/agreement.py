#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Agreement of batchwire's CPU runtime with onnxruntime on the generated models.

    agreement.py --bwrun PATH [--workdir DIR] [--batches 1,8] NAME=MODEL.onnx...

For each model and batch size: seeded inputs made here with numpy (floats uniform in [-1, 1);
token ids uniform in [0, 30522); attention masks of ones with a different number of trailing
zeros per row), saved as .npy; the model run by onnxruntime (CPU execution provider) and by
`bwrun --input NAME=FILE --output-dir DIR`; then per output:

  - both finite;
  - agreement: |bw - ort| <= ATOL_REL * max|ort| + RTOL * |ort| elementwise (see TOLERANCES);
  - not degenerate: std of the output > STD_MIN_REL * max|ort|, and at batch > 1 every pair of
    rows differs by more than the tolerance (a model that ignored its input, or a plan that ran one
    row for all, would fail here, since the inputs of different rows differ);
  - batch consistency: row 0 at batch 8 equals the batch-1 result on the same row of input
    (the batch-1 inputs are the first rows of the batch-8 ones), within the same tolerance;
  - at the largest batch, more runs, each checked the same way: the multi-worker executor
    (`bwrun --workers 2`, "exec"), which must also give the same bytes as the sequential run (same
    kernels, same shapes, so the same rounding), the graph as loaded (`--no-optimize`, "no-opt"),
    so that the kernels and the fusions are each checked against onnxruntime, and the batch run
    depth first in chunks of one row (`--chunk 1`, "chunks"; and in the executor, "exec chunks",
    which must give the same bytes as "chunks"). Every other run has `--chunk off`.

Prints one table row per model, batch and output. Exit status: 0 when all agree, 1 otherwise, 77
(meson's SKIP) when onnxruntime or numpy cannot be imported, or when --skip says why.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

SKIP = 77

# Tolerances, fp32 throughout. Both runtimes compute the same function in float32 but in different
# orders (GEMM blocking, convolution algorithm, reduction order in Softmax and LayerNorm; after
# rt_graph_optimize, BatchNormalization folded into convolution weights), so each dot product of
# length K differs by a few ulps (eps = 1.2e-7) times sqrt(K) times its terms' magnitude, and the
# differences grow through the layers. Measured on the 2-core dev VM (OpenBLAS 0.3.21 against
# onnxruntime 1.32), max|bw - ort| / max|ort| was 6e-7 (MLP), 7e-7 (CNN), 4e-7 (MiniLM) and 6e-7
# (ResNet-50, 53 convolutions with K up to 4608), and the largest relative error on elements above
# 1% of the scale 3.3e-5. The bound, |bw - ort| <= 1e-4 * max|ort| + 1e-4 * |ort|, leaves more than
# 100x headroom for other BLAS kernels, CPUs and exact rewrites (fusions, blocked layouts),
# and still sits two orders of magnitude below what a wrong kernel gives: a mis-indexed weight, a
# missing bias, a wrong epsilon or a row computed from another row's input all give errors of 1e-2
# or more of the output's scale. The absolute part is relative to max|ort| because elements near
# zero have no meaningful relative error.
TOLERANCES = {             # (ATOL_REL, RTOL)
    "mlp": (1e-4, 1e-4),
    "cnn": (1e-4, 1e-4),
    "minilm": (1e-4, 1e-4),
    "resnet50": (1e-4, 1e-4),
}
TOLERANCE_DEFAULT = (1e-4, 1e-4)
STD_MIN_REL = 1e-3          # an output whose spread is below 0.1% of its scale counts as constant
VOCAB = 30522
SEED = 20240505


def make_inputs(np, sess, batch, rng):
    """Inputs for every graph input of an onnxruntime session, batch dimension = batch."""
    feeds = {}
    for inp in sess.get_inputs():
        shape = [batch if not isinstance(d, int) else d for d in inp.shape]
        if inp.type == "tensor(float)":
            feeds[inp.name] = rng.uniform(-1.0, 1.0, shape).astype(np.float32)
        elif inp.type == "tensor(int64)" and "mask" in inp.name:
            # Ones, then zeros: each row a different length, at least a quarter of the row.
            seq = shape[-1]
            lengths = rng.integers(seq // 4, seq + 1, shape[0])
            lengths[0] = seq - seq // 4  # row 0: bwrun's own default mask, for a familiar case
            m = (np.arange(seq)[None, :] < lengths[:, None]).astype(np.int64)
            feeds[inp.name] = np.broadcast_to(m.reshape([shape[0]] + [1] * (len(shape) - 2) + [seq]),
                                              shape).copy()
        elif inp.type == "tensor(int64)":
            high = VOCAB if "ids" in inp.name else 1000
            feeds[inp.name] = rng.integers(0, high, shape, dtype=np.int64)
        else:
            raise SystemExit(f"agreement.py: input {inp.name}: type {inp.type} not generated here")
    return feeds


def run_bwrun(bwrun, model, batch, feeds, workdir, tag, extra):
    """Runs bwrun on feeds with extra options; returns ({output name: array}, seconds)."""
    import numpy as np

    indir = os.path.join(workdir, f"{tag}_in")
    outdir = os.path.join(workdir, f"{tag}_out")
    os.makedirs(indir, exist_ok=True)
    cmd = [bwrun, "--batch", str(batch), "--output-dir", outdir] + extra
    for name, arr in feeds.items():
        path = os.path.join(indir, f"{name}.npy")
        np.save(path, arr)
        cmd += ["--input", f"{name}={path}"]
    cmd.append(model)
    t0 = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seconds = time.monotonic() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()}")
    last = p.stdout.strip().splitlines()[-1]
    if not last.startswith("model="):
        raise RuntimeError(f"bwrun's last line is not machine-readable: {last}")
    outs = {}
    for f in sorted(os.listdir(outdir)):
        outs[f[:-4]] = np.load(os.path.join(outdir, f))
    return outs, seconds


def compare(np, name, got, ref, tol):
    """\\return (ok, max_abs, max_rel, scale, why)."""
    atol_rel, rtol = tol
    if got.shape != ref.shape or got.dtype != ref.dtype:
        return False, np.inf, np.inf, 0.0, f"{got.dtype}{list(got.shape)} vs ort {ref.dtype}{list(ref.shape)}"
    g = got.astype(np.float64)
    r = ref.astype(np.float64)
    if not np.isfinite(g).all():
        return False, np.inf, np.inf, 0.0, "batchwire output not finite"
    if not np.isfinite(r).all():
        return False, np.inf, np.inf, 0.0, "onnxruntime output not finite"
    scale = float(np.abs(r).max()) if r.size else 0.0
    diff = np.abs(g - r)
    max_abs = float(diff.max()) if diff.size else 0.0
    # Relative error where it means something: elements at least 1% of the output's scale.
    big = np.abs(r) >= 0.01 * scale
    max_rel = float((diff[big] / np.abs(r[big])).max()) if big.any() else 0.0
    bad = diff > atol_rel * scale + rtol * np.abs(r)
    if bad.any():
        i = np.unravel_index(int(np.argmax(diff - (atol_rel * scale + rtol * np.abs(r)))), r.shape)
        return (False, max_abs, max_rel, scale,
                f"{int(bad.sum())} of {r.size} elements outside tolerance, worst at {[int(x) for x in i]}: "
                f"got {g[i]:.7g}, ort {r[i]:.7g}")
    return True, max_abs, max_rel, scale, ""


def degenerate(np, out, scale, tol):
    """\\return why out looks constant, or ''."""
    a = out.astype(np.float64)
    if scale == 0.0 or a.std() <= STD_MIN_REL * scale:
        return f"constant output (std {a.std():.3g}, scale {scale:.3g})"
    if a.ndim >= 1 and a.shape[0] > 1:
        rows = a.reshape(a.shape[0], -1)
        # Rows must differ by more than the agreement tolerance, or "different" means nothing.
        limit = tol[0] * scale * 10
        for i in range(rows.shape[0]):
            for j in range(i + 1, rows.shape[0]):
                d = float(np.abs(rows[i] - rows[j]).max())
                if d <= limit:
                    return f"rows {i} and {j} differ by only {d:.3g} (limit {limit:.3g})"
    return ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bwrun", required=True)
    ap.add_argument("--workdir", help="keep inputs and outputs here (default: a temporary directory)")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--skip", default="", help="skip (exit 77) with this reason")
    ap.add_argument("models", nargs="+", metavar="NAME=MODEL.onnx")
    args = ap.parse_args()

    if args.skip:
        print(f"SKIP: {args.skip}")
        return SKIP
    try:
        import numpy as np
        import onnxruntime as ort
    except ImportError as e:
        print(f"SKIP: cannot import onnxruntime and numpy ({e}); pip install onnxruntime numpy")
        return SKIP

    # BW_CPU_ISA may name a level this CPU lacks (meson runs this at each level): bwrun says so,
    # and that is a skip, not a disagreement
    first_model = args.models[0].partition("=")[2]
    probe = subprocess.run([args.bwrun, first_model], capture_output=True, text=True)
    if probe.returncode != 0 and "this CPU lacks" in probe.stderr:
        print(f"SKIP: {probe.stderr.strip()}")
        return SKIP
    for line in probe.stdout.splitlines():
        if line.startswith("cpu    kernels "):
            print(line)
    batches = [int(b) for b in args.batches.split(",")]
    workdir = args.workdir or tempfile.mkdtemp(prefix="bw_agreement.")
    os.makedirs(workdir, exist_ok=True)
    print(f"onnxruntime {ort.__version__}, numpy {np.__version__}, work directory {workdir}")
    print(f"{'model':20} {'batch':>5} {'output':10} {'shape':>14} {'max_abs':>9} {'max_rel':>9} "
          f"{'scale':>8} {'tol_abs':>9} {'std':>8} {'ort_s':>6} {'bw_s':>6}  verdict")
    failures = []
    for spec in args.models:
        name, _, path = spec.partition("=")
        if not path or not os.path.exists(path):
            failures.append(f"{name}: model file {path!r} not found")
            print(f"{name:20} model file {path!r} not found: FAIL")
            continue
        tol = TOLERANCES.get(name, TOLERANCE_DEFAULT)
        so = ort.SessionOptions()
        so.log_severity_level = 3
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        rng = np.random.default_rng(SEED)
        big = make_inputs(np, sess, max(batches), rng)
        first_rows = {}
        for batch in batches:
            feeds = {k: np.ascontiguousarray(v[:batch]) for k, v in big.items()}
            t0 = time.monotonic()
            ref = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
            ort_s = time.monotonic() - t0
            # The default run (optimised, rt_plan_run, the batch whole); at the largest batch also
            # the daemon's executor, the graph as loaded and the batch depth first in chunks of one
            # row (sequential and in the executor), each checked against onnxruntime on its own.
            # Chunking is set, never measured (--chunk auto's choice depends on timing): runs that
            # must give the same bytes run the same shapes.
            variants = [("", ["--chunk", "off"])]
            if batch == max(batches) and batch > 1:
                variants += [("exec", ["--workers", "2", "--chunk", "off"]), ("no-opt", ["--no-optimize", "--chunk", "off"]),
                             ("chunks", ["--chunk", "1"]), ("exec chunks", ["--workers", "2", "--chunk", "1"])]
            base = None
            bases = {}
            for vname, extra in variants:
                tag = f"{name}_b{batch}" + (f"_{vname}" if vname else "")
                label = f"{name}" + (f" {vname}" if vname else "")
                try:
                    got, bw_s = run_bwrun(args.bwrun, path, batch, feeds, workdir, tag, extra)
                except RuntimeError as e:
                    failures.append(f"{label} batch {batch}: {e}")
                    print(f"{label:20} {batch:5} bwrun failed: {e}")
                    continue
                if not vname:
                    base = got
                if vname in ("", "chunks"):
                    bases[vname] = got
                for oname, r in ref.items():
                    if oname not in got:
                        failures.append(f"{label} batch {batch}: bwrun wrote no output {oname}")
                        print(f"{label:20} {batch:5} {oname:10} missing from bwrun's outputs: FAIL")
                        continue
                    g = got[oname]
                    ok, max_abs, max_rel, scale, why = compare(np, oname, g, r, tol)
                    if ok:
                        why = degenerate(np, g, scale, tol)
                        ok = not why
                    if ok and batch == 1 and not vname:
                        first_rows[oname] = g
                    if ok and batch > 1 and not vname and oname in first_rows:
                        ok2, _, _, _, w = compare(np, oname, g[:1], first_rows[oname], tol)
                        if not ok2:
                            ok, why = False, f"row 0 differs from the batch-1 run: {w}"
                    note = ""
                    same_as = {"exec": "", "exec chunks": "chunks"}.get(vname)
                    if ok and same_as is not None and oname in bases.get(same_as, {}):
                        # Same kernels on the same shapes: the executor must give the same bits.
                        # This caught Debian's serial OpenBLAS (0.3.21, without USE_LOCKING)
                        # corrupting concurrent calls (OpenBLAS #2126) where independent steps
                        # run at once (Q/K/V, ResNet's downsampling branch); the runtime links
                        # the pthread build since (runtime/kernels/meson.build).
                        ref_bytes = bases[same_as][oname]
                        if np.array_equal(g, ref_bytes):
                            note = " (same bytes as rt_plan_run)"
                        else:
                            d = float(np.abs(g.astype(np.float64) - ref_bytes).max())
                            ok, why = False, f"differs from rt_plan_run's output by up to {d:.3g}"
                    verdict = "ok" + note
                    if not ok:
                        verdict = f"FAIL: {why}"
                        failures.append(f"{label} batch {batch} {oname}: {why}")
                    print(f"{label:20} {batch:5} {oname:10} {str(list(g.shape)):>14} {max_abs:9.2e} "
                          f"{max_rel:9.2e} {scale:8.3g} {tol[0] * scale:9.2e} "
                          f"{g.astype(np.float64).std():8.3g} {ort_s:6.2f} {bw_s:6.2f}  {verdict}")
    if not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    if failures:
        print(f"{len(failures)} failure(s):")
        for f in failures:
            print(f"  {f}")
        return 1
    print("all models agree with onnxruntime")
    return 0


if __name__ == "__main__":
    sys.exit(main())
