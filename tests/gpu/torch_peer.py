#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The peer batchwire's GPU times are compared with: PyTorch running ResNet-50 the fast way.

The network is tests/gpu/resnet50_onnx.py's (torch.manual_seed(0), torchvision resnet50,
weights=None, eval), in FP16 with channels_last memory format, torch.backends.cudnn.benchmark on
(cuDNN picks its fastest algorithms during the warm-up), captured once per batch size with
torch.cuda.CUDAGraph and replayed, which is how a latency-minded PyTorch server runs it. Per batch:

  replay_ms     device time of one replay: --replays replays back to back between two CUDA events,
                divided by the count
  e2e_p50_us    host clock around replay() + torch.cuda.synchronize(), one replay at a time, --e2e
                times (p99 too): what a lone request sees
  e2e_vs_replay e2e_p50 / replay time

One line per batch: peer=torch model=resnet50 precision=fp16 batch=N replay_ms=X e2e_p50_us=X
e2e_p99_us=X e2e_vs_replay=X
Exit status: 0; 2 torch or torchvision missing; 77 no CUDA device; 1 error.
"""
import argparse
import math
import sys
import time

WARMUP_ITERS = 20  # eager runs before capture: cudnn.benchmark tries its algorithms here


def percentile(sorted_values, frac):
    """Nearest rank, as bench/gpu_launch computes it."""
    k = max(1, math.ceil(frac * len(sorted_values)))
    return sorted_values[k - 1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batches", default="1,8,32", help="batch sizes (default 1,8,32)")
    ap.add_argument("--replays", type=int, default=200, help="replays timed by CUDA events (default 200)")
    ap.add_argument("--e2e", type=int, default=200, help="replays timed one at a time (default 200)")
    args = ap.parse_args()

    try:
        import torch
        import torchvision
    except ImportError as e:
        print(f"torch_peer.py: needs torch and torchvision: {e}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("no CUDA device present: torch.cuda.is_available() is False", file=sys.stderr)
        return 77

    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None).eval()
    model = model.cuda().half().to(memory_format=torch.channels_last)
    print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
          f"{torch.cuda.get_device_name(0)}", flush=True)

    for b in (int(x) for x in args.batches.split(",")):
        gen = torch.Generator(device="cuda").manual_seed(b)
        x = torch.rand(b, 3, 224, 224, device="cuda", dtype=torch.float16, generator=gen) * 2 - 1
        x = x.contiguous(memory_format=torch.channels_last)
        with torch.no_grad():
            # warm up on a side stream, as torch.cuda.graphs' documentation asks before a capture
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(WARMUP_ITERS):
                    model(x)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                y = model(x)
        for _ in range(WARMUP_ITERS):
            graph.replay()
        torch.cuda.synchronize()

        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(args.replays):
            graph.replay()
        end.record()
        end.synchronize()
        replay_ms = start.elapsed_time(end) / args.replays

        times = []
        for _ in range(args.e2e):
            t0 = time.perf_counter_ns()
            graph.replay()
            torch.cuda.synchronize()
            times.append((time.perf_counter_ns() - t0) / 1e3)
        times.sort()
        p50, p99 = percentile(times, 0.50), percentile(times, 0.99)
        finite = bool(torch.isfinite(y).all().item())
        print(f"peer=torch model=resnet50 precision=fp16 batch={b} replay_ms={replay_ms:.6g} "
              f"e2e_p50_us={p50:.6g} e2e_p99_us={p99:.6g} e2e_vs_replay={p50 / (replay_ms * 1e3):.6g} "
              f"outputs_finite={'yes' if finite else 'no'}", flush=True)
        del graph, y
    return 0


if __name__ == "__main__":
    sys.exit(main())
