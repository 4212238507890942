/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * IEEE 754 binary16 (float16) and bfloat16 <-> float by their bits: the one conversion the CPU kernels,
 * the GPU programs (host and device: nvcc compiles this into program_math.h's kernels), bwrun's inputs
 * and the tests share. No libc beyond memcpy, no __half or _Float16, so it is the same code everywhere.
 *
 * float16 -> float is exact. float -> float16 rounds to nearest, ties to even; overflows to infinity;
 * keeps a NaN a NaN: sign, the quiet bit set and the payload's top bits (what x86's F16C and CUDA's
 * conversions do), so a quiet NaN goes float16 -> float -> float16 unchanged.
 */
#ifndef BATCHWIRE_HALF_H
#define BATCHWIRE_HALF_H

#include <stdint.h>
#include <string.h>

#include <batchwire/compiler.h>

#define BW_F32_QUIET_BIT 0x00400000u
#define BW_F16_QUIET_BIT 0x0200u

static inline BW_HD float bw_f32_from_bits(uint32_t bits)
{
	float f;

	memcpy(&f, &bits, sizeof(f));
	return f;
}

static inline BW_HD uint32_t bw_f32_bits(float f)
{
	uint32_t bits;

	memcpy(&bits, &f, sizeof(bits));
	return bits;
}

static inline BW_HD float bw_half_to_float(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;

	if (exp == 0x1f) /* infinity; NaN comes out quiet (a signalling one is quieted), payload kept */
		return bw_f32_from_bits(sign | 0x7f800000u | (man << 13) | (man != 0 ? BW_F32_QUIET_BIT : 0u));
	if (exp != 0)
		return bw_f32_from_bits(sign | ((exp + 112u) << 23) | (man << 13));
	/* zero or subnormal: man * 2^-24, a product float holds exactly (and a normal float: no FTZ) */
	return bw_f32_from_bits(sign | bw_f32_bits((float)man * 0x1p-24f));
}

static inline BW_HD uint16_t bw_float_to_half(float f)
{
	uint32_t x = bw_f32_bits(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
	uint32_t m, shift, q, rem, halfway;

	if (ax > 0x7f800000u) /* NaN: quiet, the top payload bits */
		return (uint16_t)(sign | 0x7c00u | BW_F16_QUIET_BIT | ((ax & 0x7fffffu) >> 13));
	if (ax >= 0x477ff000u) /* infinity, and 65520 and up: past the largest half (65504) once rounded */
		return (uint16_t)(sign | 0x7c00u);
	if (ax >= 0x38800000u) { /* a normal half: rebias the exponent, round the 13 dropped bits to even */
		uint32_t r = ax - 0x38000000u;

		r += 0xfffu + ((r >> 13) & 1u); /* a carry into the exponent is still the right answer */
		return (uint16_t)(sign | (r >> 13));
	}
	if (ax < 0x33000000u) /* below 2^-25: nearer 0 than the smallest subnormal */
		return (uint16_t)sign;
	/* a subnormal half, in units of 2^-24: the 24-bit significand shifted right, rounded to even */
	m = (ax & 0x7fffffu) | 0x800000u;
	shift = 126u - (ax >> 23);
	q = m >> shift;
	rem = m & ((1u << shift) - 1u);
	halfway = 1u << (shift - 1u);
	q += rem > halfway || (rem == halfway && (q & 1u)); /* may carry into the smallest normal: right too */
	return (uint16_t)(sign | q);
}

static inline BW_HD float bw_bf16_to_float(uint16_t b)
{
	return bw_f32_from_bits((uint32_t)b << 16);
}

/*
 * Truncation, not rounding: what ONNX 1.12's Cast tests (test_cast_FLOAT_to_BFLOAT16) expect and the
 * conformance runner checks. A NaN stays a NaN (quiet: truncation alone could leave no payload bit).
 */
static inline BW_HD uint16_t bw_float_to_bf16(float f)
{
	uint32_t x = bw_f32_bits(f);

	if ((x & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((x >> 16) | (BW_F32_QUIET_BIT >> 16));
	return (uint16_t)(x >> 16);
}

#endif /* BATCHWIRE_HALF_H */
