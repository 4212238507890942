#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""
Writes act512.h's GELU table: Phi(x), the normal distribution, as one degree-4 polynomial per
interval of 0.375 over [-6, 6), in the interval's own variable d = x - start (0 <= d < 0.375).
Each is a least-squares fit on 256 Chebyshev points of its interval, in double; intervals below
0 fit Phi's relative error (the tail keeps its digits), the others its absolute error. Then the
kernel's own float32 steps are replayed over [-10, 10] and the largest errors printed.

    python3 runtime/kernels/gelu_table.py

prints the body of act512.h's rt_gelu_phi_table (its error line, then five rows of 32
coefficients), which goes after the line there that names this script.
"""
import math
import sys

import numpy as np

INTERVALS, WIDTH, START, DEGREE = 32, 0.375, -6.0, 4
POINTS = 256


def phi(x):
    return 0.5 * np.vectorize(math.erfc)(-np.asarray(x, dtype=np.float64) / math.sqrt(2.0))


def c_float(v):
    text = f"{v:.9g}"
    return (text if "." in text or "e" in text else text + ".0") + "f"


def fit():
    table = np.zeros((DEGREE + 1, INTERVALS), dtype=np.float32)
    k = np.arange(POINTS)
    d = WIDTH * (0.5 - 0.5 * np.cos(np.pi * (k + 0.5) / POINTS))
    for i in range(INTERVALS):
        a = START + i * WIDTH
        y = phi(a + d)
        weight = 1.0 / y if a < 0 else np.ones_like(y)
        v = np.vander(d, DEGREE + 1, increasing=True)
        c, *_ = np.linalg.lstsq(v * weight[:, None], y * weight, rcond=None)
        table[:, i] = c
    return table


def f32(v):
    return np.float32(v)


def fma(a, b, c):
    # a * b of two floats is exact in double; the sum is rounded to double, then to float, where
    # the FMA rounds once: the same float but for rare double-rounding cases, a last bit apart
    return f32(np.float64(a) * np.float64(b) + np.float64(c))


def kernel(x, table):
    """act512.h's rt_gelu16_bf16, step for step."""
    x = f32(x)
    xc = np.minimum(np.maximum(x, f32(-5.9999995)), f32(5.99))
    t = fma(xc, f32(1.0 / WIDTH), f32(-START / WIDTH))
    fi = np.floor(t)
    d = f32(xc - fma(fi, f32(WIDTH), f32(START)))
    idx = fi.astype(np.int64) & (INTERVALS - 1)
    p = table[DEGREE][idx]
    for n in range(DEGREE - 1, -1, -1):
        p = fma(p, d, table[n][idx])
    p = np.where(~(x < f32(START)), p, f32(0))
    return f32(x * p)


def main():
    table = fit()
    x = np.linspace(-10, 10, 400001).astype(np.float32)
    want = np.float64(x) * phi(x)
    got = np.float64(kernel(x, table))
    err = np.abs(got - want)
    scaled = err / (np.abs(want) + np.abs(np.float64(x)) * 0.1 + 1e-30)
    rel = err / np.maximum(np.abs(want), 1e-30)
    print(f"\t/* largest error over [-10, 10]: {scaled.max():.3g} of |gelu(x)| + |x| / 10; relative")
    print(f"\t * {rel[x > -4].max():.3g} above x = -4, {rel[(x > -5.4)].max():.3g} above -5.4 */")
    for n in range(DEGREE + 1):
        rows = [", ".join(c_float(v) for v in table[n][r:r + 6]) for r in range(0, INTERVALS, 6)]
        print("\t{ " + ",\n\t  ".join(rows) + " },")
    return 0


if __name__ == "__main__":
    sys.exit(main())
