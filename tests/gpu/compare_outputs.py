#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Compares model outputs saved as .npy: the worst max |ref - got| / max |ref| over the outputs.

  compare_outputs.py --tol T --label L REF GOT
REF and GOT are both .npy files, or both directories (every REF/*.npy against GOT's file of the same
name). Prints one line: "L: max error / scale E (tolerance T) ok|TOO LARGE" and exits 0 when E <= T,
1 when not (or a file is missing, or shapes differ).
"""
import argparse
import glob
import os
import sys

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tol", type=float, required=True)
    ap.add_argument("--label", required=True)
    ap.add_argument("ref")
    ap.add_argument("got")
    args = ap.parse_args()

    if os.path.isdir(args.ref):
        pairs = [(f, os.path.join(args.got, os.path.basename(f)))
                 for f in sorted(glob.glob(os.path.join(args.ref, "*.npy")))]
    else:
        pairs = [(args.ref, args.got)]
    if not pairs:
        print(f"{args.label}: no outputs in {args.ref}")
        return 1
    worst = 0.0
    for ref_path, got_path in pairs:
        if not os.path.exists(got_path):
            print(f"{args.label}: {got_path} is missing")
            return 1
        ref = np.load(ref_path).astype(np.float64)
        got = np.load(got_path).astype(np.float64)
        if ref.shape != got.shape:
            print(f"{args.label}: {os.path.basename(ref_path)} shape {ref.shape} against {got.shape}")
            return 1
        if not np.isfinite(got).all():
            print(f"{args.label}: {os.path.basename(got_path)} holds non-finite values TOO LARGE")
            return 1
        scale = max(float(np.abs(ref).max()), 1e-30)
        worst = max(worst, float(np.abs(ref - got).max()) / scale)
    ok = worst <= args.tol
    print(f"{args.label}: max error / scale {worst:.3g} (tolerance {args.tol:g}) {'ok' if ok else 'TOO LARGE'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
