#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""batchwire's CPU runtime against onnxruntime and OpenVINO, one thread each: a benchmark, not a test.

    bench_vs_ort.py --bwrun BUILD/app/bwrun --models BUILD/models [--models-list mlp,cnn,...]
                    [--batches 1,8,32] [--rounds N] [--reps-scale X] [--work DIR]
                    [--no-openvino] [--no-bf16] [--cpu N|last|none]

(or `meson compile -C BUILD bench-vs-ort`, which builds bwrun and the models first.)

For each model and batch size: one set of inputs is drawn (seeded; floats uniform in [-1, 1),
token ids uniform in [0, 1000), attention masks of ones with the last quarter of each row 0) and
saved as .npy; both runtimes run those same inputs, each in a process of its own:

  batchwire  `bwrun --workers 1 --input NAME=FILE ...` (load, rt_graph_optimize, plan, then the
             timed rt_plan_run calls on one thread); its p50 is the median. OPENBLAS_NUM_THREADS=1
             in its environment, as the README says to run bwrun and the daemon: OpenBLAS's
             pthread build otherwise starts a pool whose idle thread spins on the other core.
  ORT        onnxruntime's CPU execution provider, intra_op_num_threads=1,
             inter_op_num_threads=1, sequential execution, ORT_ENABLE_ALL; the median of the
             session.run() calls, timed around session.run only.
  OV         OpenVINO's CPU plugin (PyPI's openvino, when importable; --no-openvino leaves it
             out): the model reshaped to the batch's static shapes, INFERENCE_NUM_THREADS 1,
             NUM_STREAMS 1, PERFORMANCE_HINT LATENCY, INFERENCE_PRECISION_HINT f32; the median of
             infer_request.infer() calls.

Where the CPU's kernels run at batchwire's amx level (bwrun's 'cpu kernels' line; AMX-BF16), the
same cases again in bf16: `bwrun --precision bf16` against OpenVINO with INFERENCE_PRECISION_HINT
bf16 (its AMX path), each side's outputs compared with onnxruntime's fp32 ones (bf16 err: the
largest |difference| over the largest |output|). Elsewhere those columns read na: nothing is
measured that the CPU cannot run. bench/bf16_accuracy.py measures bf16's error and top-1 agreement
over many inputs.

Both warm up first. Every measured process runs on one CPU (--cpu, default the last this script may
use; 'none' leaves it to the scheduler): on a shared VM one vCPU can be a third slower than the
other for minutes. A neighbour's load can still fall on one side's process and not the other's,
so the two alternate: --rounds (default 3) pairs of processes, ours then ORT's (then OpenVINO's),
three times as many where a round's timed runs take under a second (the MLP, the CNN, the
transformer at 1: CHEAP), and each side's figure is the median of its rounds' medians. Each ratio
is the median of the rounds' own ratios (ours / ORT in the same round, seconds apart), not the
ratio of the two medians: this host's speed drifts by up to 2x over minutes, which a round's pair
shares, and a burst on a neighbour that hits one process spoils one round's ratio, not the median
of nine. Each output is compared: max abs error and max rel error, the latter
|ours - ort| / max(|ort|, 1e-3) (so that outputs near 0 do not divide by nothing). The table
gives the medians and the ratios; the last line is machine-readable:

    mlp_b1_vs_ort=<x> resnet50_b1_vs_ort=<x> transformer_b1_vs_ort=<x> worst_vs_ort=<x>
    resnet50_b1_bf16_vs_ov=<x> transformer_b1_bf16_vs_ov=<x>

(worst: the largest fp32 ours / ORT over every model and batch run; bf16 ratios na where the CPU
lacks AMX or OpenVINO is not there). The CPU model (lscpu) and the kernels' level and GEMM path
(bwrun's report) are printed first.

"transformer" is the MiniLM-shaped encoder (minilm.onnx). Repetitions are bounded per model and
batch size (REPS), and with them the whole run: 11 minutes on the 2-core AMD EPYC VM with
OpenVINO's column (655 and 672 s), less without it; --reps-scale multiplies them.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

MODELS = ["mlp", "cnn", "resnet50", "minilm"]
LABEL = {"mlp": "mlp", "cnn": "cnn", "resnet50": "resnet50", "minilm": "transformer"}
BATCHES = [1, 8, 32]
SEED = 20261129
REL_FLOOR = 1e-3

# (warm-up, timed) runs per model, batch size and round: about a second of timed runs where that is
# cheap, at least 3 where one run takes seconds (ResNet-50 at 32 is ~4 s a run here).
REPS = {
    ("mlp", 1): (50, 500), ("mlp", 8): (20, 300), ("mlp", 32): (20, 200),
    ("cnn", 1): (20, 300), ("cnn", 8): (10, 100), ("cnn", 32): (5, 50),
    ("minilm", 1): (3, 30), ("minilm", 8): (1, 8), ("minilm", 32): (1, 3),
    ("resnet50", 1): (2, 15), ("resnet50", 8): (1, 5), ("resnet50", 32): (1, 3),
}
# Cases whose round (each side's timed runs) takes under a second: CHEAP_ROUNDS x --rounds rounds.
CHEAP = {("mlp", 1), ("mlp", 8), ("mlp", 32), ("cnn", 1), ("cnn", 8), ("cnn", 32), ("minilm", 1)}
CHEAP_ROUNDS = 3


def ort_session(path):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def ort_worker(args):
    """Runs in its own process: times session.run on the saved inputs, saves the outputs."""
    sess = ort_session(args.model)
    feed = {i.name: np.load(os.path.join(args.inputs, f"{i.name}.npy")) for i in sess.get_inputs()}
    names = [o.name for o in sess.get_outputs()]
    for _ in range(args.warmup):
        sess.run(names, feed)
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        outs = sess.run(names, feed)
        times.append((time.perf_counter() - t0) * 1e6)
    os.makedirs(args.outputs, exist_ok=True)
    for name, out in zip(names, outs):
        np.save(os.path.join(args.outputs, f"{name}.npy"), out)
    print(json.dumps({"median_us": float(np.median(times)), "min_us": float(np.min(times)),
                      "runs": len(times)}))


def ov_worker(args):
    """Runs in its own process: OpenVINO at one thread and the precision asked, on the saved inputs."""
    import openvino as ov

    core = ov.Core()
    model = core.read_model(args.model)
    feed = {}
    for port in model.inputs:
        feed[port.get_any_name()] = np.load(os.path.join(args.inputs, f"{port.get_any_name()}.npy"))
    model.reshape({name: list(a.shape) for name, a in feed.items()})
    compiled = core.compile_model(model, "CPU", {
        "INFERENCE_NUM_THREADS": 1, "NUM_STREAMS": 1, "PERFORMANCE_HINT": "LATENCY",
        "INFERENCE_PRECISION_HINT": args.ov_precision})
    request = compiled.create_infer_request()
    for _ in range(args.warmup):
        request.infer(feed)
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        request.infer(feed)
        times.append((time.perf_counter() - t0) * 1e6)
    os.makedirs(args.outputs, exist_ok=True)
    for port in compiled.outputs:
        np.save(os.path.join(args.outputs, f"{port.get_any_name()}.npy"), request.get_tensor(port).data.copy())
    print(json.dumps({"median_us": float(np.median(times)), "min_us": float(np.min(times)),
                      "runs": len(times), "precision": str(compiled.get_property("INFERENCE_PRECISION_HINT"))}))


def make_inputs(model_path, batch, out_dir, rng):
    """The model's inputs at this batch size (shapes and dtypes from ORT's view of the model)."""
    sess = ort_session(model_path)
    os.makedirs(out_dir, exist_ok=True)
    files = []
    for i in sess.get_inputs():
        shape = [batch if not isinstance(d, int) else d for d in i.shape]
        if i.type == "tensor(int64)":
            if "mask" in i.name:
                a = np.ones(shape, np.int64)
                a[..., shape[-1] - shape[-1] // 4:] = 0
            else:
                a = rng.integers(0, 1000, shape, dtype=np.int64)
        elif i.type == "tensor(float)":
            a = rng.uniform(-1.0, 1.0, shape).astype(np.float32)
        else:
            sys.exit(f"bench_vs_ort: input {i.name} of {model_path} is {i.type}, not float or int64")
        path = os.path.join(out_dir, f"{i.name}.npy")
        np.save(path, a)
        files.append((i.name, path))
    return files, [o.name for o in sess.get_outputs()]


def safe(name):
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)


# One thread everywhere: no BLAS pool in either process (numpy's wheels bundle a threaded OpenBLAS).
SINGLE_THREAD_ENV = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")


def run_bwrun(bwrun, model_path, batch, files, out_dir, warmup, repeat, precision="fp32"):
    cmd = [bwrun, "--batch", str(batch), "--workers", "1", "--warmup", str(warmup), "--repeat", str(repeat),
           "--precision", precision, "--output-dir", out_dir]
    for name, path in files:
        cmd += ["--input", f"{name}={path}"]
    cmd.append(model_path)
    p = subprocess.run(cmd, capture_output=True, text=True, env=SINGLE_THREAD_ENV)
    if p.returncode != 0:
        sys.exit(f"bench_vs_ort: {' '.join(cmd)} failed:\n{p.stderr}")
    last = p.stdout.strip().splitlines()[-1]
    kv = dict(f.split("=", 1) for f in last.split())
    return {"median_us": float(kv["p50_us"]), "min_us": float(kv["min_us"]), "runs": int(kv["runs"])}


def run_worker(kind, model_path, inputs_dir, out_dir, warmup, repeat, ov_precision="f32"):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", kind, "--model", model_path, "--inputs", inputs_dir,
           "--outputs", out_dir, "--warmup", str(warmup), "--repeat", str(repeat), "--ov-precision", ov_precision]
    p = subprocess.run(cmd, capture_output=True, text=True, env=SINGLE_THREAD_ENV)
    if p.returncode != 0:
        sys.exit(f"bench_vs_ort: {kind} on {model_path} failed:\n{p.stderr}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def cpu_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    except OSError:
        return "unknown (no lscpu)"
    for line in out.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def bwrun_kernels(bwrun, model_path):
    """bwrun's 'cpu kernels' line: the level and GEMM path that run (the first word is the level)."""
    p = subprocess.run([bwrun, model_path], capture_output=True, text=True, env=SINGLE_THREAD_ENV)
    for line in p.stdout.splitlines():
        if line.startswith("cpu    kernels "):
            return line[len("cpu    kernels "):]
    sys.exit(f"bench_vs_ort: {bwrun} {model_path} printed no 'cpu kernels' line:\n{p.stdout}{p.stderr}")


def errors(ours_dir, ort_dir, names, ours_safe=True):
    """max abs error, max rel error (floor REL_FLOOR), and max abs error over the largest |ORT| (the
    bf16 columns': a rounding that moves every output by a part in a few hundred is not a 3x error
    on the outputs nearest 0)."""
    max_abs = max_rel = max_scaled = 0.0
    for name in names:
        a = np.load(os.path.join(ours_dir, f"{safe(name) if ours_safe else name}.npy")).astype(np.float64)
        b = np.load(os.path.join(ort_dir, f"{name}.npy")).astype(np.float64)
        if a.shape != b.shape:
            sys.exit(f"bench_vs_ort: output {name}: shape {a.shape} against onnxruntime's {b.shape}")
        d = np.abs(a - b)
        max_abs = max(max_abs, float(d.max(initial=0.0)))
        max_rel = max(max_rel, float((d / np.maximum(np.abs(b), REL_FLOOR)).max(initial=0.0)))
        max_scaled = max(max_scaled, float(d.max(initial=0.0)) / max(float(np.abs(b).max(initial=0.0)), 1e-30))
    return max_abs, max_rel, max_scaled


def pin_cpu(ap, spec):
    """Pins this process, and so every process it starts, to one CPU (returned), or to none ('none').

    On a shared VM one vCPU can run a third slower than the other for minutes (seen on a 2-core AMD EPYC
    guest: the small CNN at batch 8 took 417-433 us on CPU 0 against 290-430 on CPU 1, in alternating
    runs): left to the scheduler, the two sides of a ratio may land on different ones."""
    allowed = sorted(os.sched_getaffinity(0))
    if spec == "none":
        return None
    if spec == "last":
        cpu = allowed[-1]
    else:
        try:
            cpu = int(spec)
        except ValueError:
            ap.error(f"--cpu {spec}: not a CPU number, 'last' or 'none'")
        if cpu not in allowed:
            ap.error(f"--cpu {spec}: not one of the CPUs this process may use ({allowed})")
    os.sched_setaffinity(0, {cpu})
    return cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bwrun", help="path to the bwrun executable")
    ap.add_argument("--models", help="directory holding mlp.onnx, cnn.onnx, resnet50.onnx, minilm.onnx")
    ap.add_argument("--models-list", default=",".join(MODELS))
    ap.add_argument("--batches", default=",".join(map(str, BATCHES)))
    ap.add_argument("--reps-scale", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=3, help="alternating process pairs per case (default 3)")
    ap.add_argument("--work", help="directory for inputs and outputs (default: a temporary one)")
    ap.add_argument("--no-openvino", action="store_true", help="leave OpenVINO out")
    ap.add_argument("--no-bf16", action="store_true", help="leave the bf16 columns out")
    ap.add_argument("--cpu", default="last",
                    help="the CPU every measured process runs on: a number, 'last' (default: the highest "
                         "this script may use) or 'none' (left to the scheduler)")
    # the other runtimes' own processes
    ap.add_argument("--worker", choices=["ort", "ov"], help=argparse.SUPPRESS)
    ap.add_argument("--ov-precision", default="f32", help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--inputs", help=argparse.SUPPRESS)
    ap.add_argument("--outputs", help=argparse.SUPPRESS)
    ap.add_argument("--warmup", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--repeat", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker == "ort":
        ort_worker(args)
        return
    if args.worker == "ov":
        ov_worker(args)
        return
    if not args.bwrun or not args.models:
        ap.error("--bwrun and --models are required")

    import onnxruntime

    pinned = pin_cpu(ap, args.cpu)
    openvino_version = None
    if not args.no_openvino:
        try:
            import openvino
            openvino_version = openvino.__version__
        except ImportError:
            print("bench_vs_ort: openvino is not importable (pip install openvino): its columns read na")
    work = args.work or tempfile.mkdtemp(prefix="bench_vs_ort.")
    rng = np.random.default_rng(SEED)
    models = [m for m in args.models_list.split(",") if m]
    batches = [int(b) for b in args.batches.split(",") if b]
    started = time.monotonic()
    kernels = bwrun_kernels(args.bwrun, os.path.join(args.models, f"{models[0]}.onnx"))
    bf16 = not args.no_bf16 and kernels.split()[0] == "amx"
    print(f"CPU: {cpu_model()}; batchwire's kernels: {kernels}")
    print(f"batchwire (bwrun, 1 worker) vs onnxruntime {onnxruntime.__version__} (CPU EP, 1 intra-op and 1 "
          f"inter-op thread, sequential, ORT_ENABLE_ALL) and OpenVINO {openvino_version or 'na'} (CPU, 1 "
          f"inference thread, 1 stream, latency hint); median of {args.rounds} alternating rounds' medians "
          f"({args.rounds * CHEAP_ROUNDS} for the cheap cases; runs: rounds x timed runs per round; ratios: "
          f"the median of the rounds' ratios); errors against onnxruntime's; work dir {work}; "
          f"{'every process on CPU ' + str(pinned) if pinned is not None else 'processes not pinned'}", flush=True)
    if not bf16:
        print("bf16: " + ("left out (--no-bf16)" if args.no_bf16 else
                          f"na: batchwire's kernels run at {kernels.split()[0]}, not amx"))
    header = (f"{'model':<12} {'batch':>5} {'runs':>7} {'bw us':>11} {'ORT us':>11} {'OV us':>11} {'bw/ORT':>7} "
              f"{'bw/OV':>6} {'max rel err':>11} {'bw bf16 us':>11} {'OV bf16 us':>11} {'bf16/OV':>7} "
              f"{'bf16 err':>9} {'OVbf16 err':>10}")
    print(header)
    print("-" * len(header), flush=True)
    ratios, bf16_ratios = {}, {}

    def paired(ours, theirs):
        """The median of the rounds' ratios, each round's two figures measured seconds apart."""
        return float(np.median(np.array(ours) / np.array(theirs))) if ours and theirs else None

    def fmt(x, spec):
        return format(x, spec) if x is not None else "na"

    for m in models:
        path = os.path.join(args.models, f"{m}.onnx")
        if not os.path.exists(path):
            sys.exit(f"bench_vs_ort: {path} is missing (meson compile -C BUILD model_{m})")
        for b in batches:
            warm, reps = REPS.get((m, b), (1, 5))
            reps = max(3, int(reps * args.reps_scale))
            case = os.path.join(work, f"{m}_b{b}")
            inputs = os.path.join(case, "inputs")
            files, outputs = make_inputs(path, b, inputs, rng)
            t = {"bw": [], "ort": [], "ov": [], "bw16": [], "ov16": []}
            for _ in range(max(1, args.rounds) * (CHEAP_ROUNDS if (m, b) in CHEAP else 1)):
                t["bw"].append(run_bwrun(args.bwrun, path, b, files, os.path.join(case, "batchwire"), warm,
                                         reps)["median_us"])
                t["ort"].append(run_worker("ort", path, inputs, os.path.join(case, "ort"), warm, reps)["median_us"])
                if openvino_version:
                    t["ov"].append(run_worker("ov", path, inputs, os.path.join(case, "ov"), warm, reps)["median_us"])
                if bf16:
                    t["bw16"].append(run_bwrun(args.bwrun, path, b, files, os.path.join(case, "batchwire_bf16"),
                                               warm, reps, "bf16")["median_us"])
                    if openvino_version:
                        t["ov16"].append(run_worker("ov", path, inputs, os.path.join(case, "ov_bf16"), warm, reps,
                                                    "bf16")["median_us"])
            med = {k: float(np.median(v)) if v else None for k, v in t.items()}
            _, max_rel, _ = errors(os.path.join(case, "batchwire"), os.path.join(case, "ort"), outputs)
            rel16 = ov_rel16 = None
            if med["bw16"] is not None:
                rel16 = errors(os.path.join(case, "batchwire_bf16"), os.path.join(case, "ort"), outputs)[2]
            if med["ov16"] is not None:
                ov_rel16 = errors(os.path.join(case, "ov_bf16"), os.path.join(case, "ort"), outputs, False)[2]
            ratios[(m, b)] = paired(t["bw"], t["ort"])
            vs_ov = paired(t["bw"], t["ov"])
            if t["bw16"] and t["ov16"]:
                bf16_ratios[(m, b)] = paired(t["bw16"], t["ov16"])
            print(f"{LABEL[m]:<12} {b:>5} {len(t['bw'])}x{reps:<5} {med['bw']:>11.1f} {med['ort']:>11.1f} "
                  f"{fmt(med['ov'], '>11.1f'):>11} {ratios[(m, b)]:>7.3f} {fmt(vs_ov, '>6.3f'):>6} {max_rel:>11.3g} "
                  f"{fmt(med['bw16'], '>11.1f'):>11} {fmt(med['ov16'], '>11.1f'):>11} "
                  f"{fmt(bf16_ratios.get((m, b)), '>7.3f'):>7} {fmt(rel16, '>9.3g'):>9} {fmt(ov_rel16, '>10.3g'):>10}",
                  flush=True)
    print(f"({time.monotonic() - started:.0f} s)")

    def r(table, m):
        return f"{table[(m, 1)]:.3f}" if (m, 1) in table else "na"

    worst = f"{max(ratios.values()):.3f}" if ratios else "na"
    print(f"mlp_b1_vs_ort={r(ratios, 'mlp')} resnet50_b1_vs_ort={r(ratios, 'resnet50')} "
          f"transformer_b1_vs_ort={r(ratios, 'minilm')} worst_vs_ort={worst} "
          f"resnet50_b1_bf16_vs_ov={r(bf16_ratios, 'resnet50')} transformer_b1_bf16_vs_ov={r(bf16_ratios, 'minilm')}")


if __name__ == "__main__":
    main()
