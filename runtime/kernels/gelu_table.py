#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""
Writes the GELU tables: Phi(x), the normal distribution, as polynomials per interval, each in
the interval's own variable d (from the interval's start), fitted by least squares on 256
Chebyshev points of the interval in double. Then the kernel's own float32 steps are replayed over
[-10, 10] and the largest errors printed.

    python3 runtime/kernels/gelu_table.py [bf16]

prints the body of act512.h's rt_gelu_phi_table, for the bf16 paths' epilogues: one degree-4
polynomial per interval of 0.375 over [-6, 6), d = x - start (0 <= d < 0.375); intervals below 0
fit Phi's relative error (the tail keeps its digits), the others its absolute error.

    python3 runtime/kernels/gelu_table.py fp32

prints the body of vecmath.h's vm_gelu_tail, for every fp32 GELU: Q(a) = Phi(-a), the tail, one
degree-6 polynomial per interval of 0.75 over a = |x| in [0, 6) (8 intervals: a vector's permute
looks a coefficient up), each fitted to Q's relative error; Phi(x) is Q(|x|) below 0, 1 - Q(|x|)
above, and Q is 0 from 6 on (1e-9 there).

Each prints its error line, then a row of coefficients per degree, which go after the line in the
header that names this script.
"""
import math
import sys

import numpy as np

INTERVALS, WIDTH, START, DEGREE = 32, 0.375, -6.0, 4
TAIL_INTERVALS, TAIL_WIDTH, TAIL_DEGREE = 8, 0.75, 6
POINTS = 256


def phi(x):
    return 0.5 * np.vectorize(math.erfc)(-np.asarray(x, dtype=np.float64) / math.sqrt(2.0))


def c_float(v):
    text = f"{v:.9g}"
    return (text if "." in text or "e" in text else text + ".0") + "f"


def fit(intervals, width, degree, func, relative):
    """Per interval i (start i * width), func's polynomial in d; relative(start): fit the relative error."""
    table = np.zeros((degree + 1, intervals), dtype=np.float32)
    k = np.arange(POINTS)
    d = width * (0.5 - 0.5 * np.cos(np.pi * (k + 0.5) / POINTS))
    for i in range(intervals):
        y = func(i, d)
        weight = 1.0 / y if relative(i) else np.ones_like(y)
        v = np.vander(d, degree + 1, increasing=True)
        c, *_ = np.linalg.lstsq(v * weight[:, None], y * weight, rcond=None)
        table[:, i] = c
    return table


def f32(v):
    return np.float32(v)


def fma(a, b, c):
    # a * b of two floats is exact in double; the sum is rounded to double, then to float, where
    # the FMA rounds once: the same float but for rare double-rounding cases, a last bit apart
    return f32(np.float64(a) * np.float64(b) + np.float64(c))


def horner(table, idx, d):
    p = table[-1][idx]
    for n in range(len(table) - 2, -1, -1):
        p = fma(p, d, table[n][idx])
    return p


def kernel(x, table):
    """act512.h's rt_gelu16_bf16, step for step."""
    x = f32(x)
    xc = np.minimum(np.maximum(x, f32(-5.9999995)), f32(5.99))
    t = fma(xc, f32(1.0 / WIDTH), f32(-START / WIDTH))
    fi = np.floor(t)
    d = f32(xc - fma(fi, f32(WIDTH), f32(START)))
    idx = fi.astype(np.int64) & (INTERVALS - 1)
    p = np.where(~(x < f32(START)), horner(table, idx, d), f32(0))
    return f32(x * p)


def kernel_fp32(x, table):
    """vecmath.h's vgelu, step for step (the vector's lanes: a NaN's interval is the last)."""
    x = f32(x)
    top = f32(TAIL_INTERVALS * TAIL_WIDTH)
    a = np.abs(x)
    ac = np.where(a < top, a, np.nextafter(top, f32(0)))
    idx = f32(ac * f32(1.0 / TAIL_WIDTH)).astype(np.int64)
    d = fma(f32(idx), f32(-TAIL_WIDTH), ac)
    q = np.where(a < top, horner(table, idx, d), f32(0))
    return f32(x * np.where(x < 0, q, f32(f32(1) - q)))


def main():
    fp32 = len(sys.argv) > 1 and sys.argv[1] == "fp32"
    if len(sys.argv) > 1 and sys.argv[1] not in ("fp32", "bf16"):
        print("usage: gelu_table.py [bf16|fp32]", file=sys.stderr)
        return 2
    if fp32:
        table = fit(TAIL_INTERVALS, TAIL_WIDTH, TAIL_DEGREE, lambda i, d: phi(-(i * TAIL_WIDTH + d)),
                    lambda i: True)
    else:
        table = fit(INTERVALS, WIDTH, DEGREE, lambda i, d: phi(START + i * WIDTH + d),
                    lambda i: START + i * WIDTH < 0)
    x = np.linspace(-10, 10, 400001).astype(np.float32)
    want = np.float64(x) * phi(x)
    got = np.float64(kernel_fp32(x, table) if fp32 else kernel(x, table))
    err = np.abs(got - want)
    scaled = err / (np.abs(want) + np.abs(np.float64(x)) * 0.1 + 1e-30)
    rel = err / np.maximum(np.abs(want), 1e-30)
    print(f"\t/* largest error over [-10, 10]: {scaled.max():.3g} of |gelu(x)| + |x| / 10; relative")
    print(f"\t * {rel[x > -4].max():.3g} above x = -4, {rel[(x > -5.4)].max():.3g} above -5.4 */")
    for n in range(len(table)):
        rows = [", ".join(c_float(v) for v in table[n][r:r + 6]) for r in range(0, len(table[n]), 6)]
        print("\t{ " + ",\n\t  ".join(rows) + " },")
    return 0


if __name__ == "__main__":
    sys.exit(main())
