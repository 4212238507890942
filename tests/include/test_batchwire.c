/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the header-only primitives in include/batchwire/ that every module and the client
 * share: float16/bfloat16 conversion (half.h), dtype names (dtype.h), microseconds <-> ticks
 * (clock.h), error lines (err.h), element access by dtype (elem.h), the seeded input generator
 * (inputs.h) and the branch hints (compiler.h). Also that gpu/program_math.h goes into one file with
 * wire.h, before it: a dtype name of its own would break wire.h's enum.
 */
#include "program_math.h" /* first: see the top of this file */

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <batchwire/clock.h>
#include <batchwire/compiler.h>
#include <batchwire/dtype.h>
#include <batchwire/elem.h>
#include <batchwire/err.h>
#include <batchwire/half.h>
#include <batchwire/hist.h>
#include <batchwire/inputs.h>
#include <batchwire/wire.h>

#include "../bw_cunit.h"

#define DIM(a) (sizeof(a) / sizeof((a)[0]))
#define RANDOM_FLOATS 1000000u /* random float bit patterns checked against _Float16 */

static uint32_t bits_of(float f)
{
	return bw_f32_bits(f);
}

static float float_of(uint32_t bits)
{
	return bw_f32_from_bits(bits);
}

/* ---- half.h ------------------------------------------------------------------------------------------ */

/* Every float16 that is not a NaN widens exactly and narrows back to itself. */
static void test_half_round_trip(void)
{
	uint32_t bad = 0;

	for (uint32_t h = 0; h < 0x10000u; h++) {
		if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0)
			continue;
		if (bw_float_to_half(bw_half_to_float((uint16_t)h)) != h && bad++ < 4)
			printf("\n    half %#06x -> %a -> %#06x", h, (double)bw_half_to_float((uint16_t)h),
			       bw_float_to_half(bw_half_to_float((uint16_t)h)));
	}
	CU_ASSERT_EQUAL(bad, 0);
}

/* Rounding to nearest, ties to even, at every boundary a float16 has. */
static void test_half_rounding(void)
{
	CU_ASSERT_EQUAL(bw_float_to_half(0.0f), 0x0000);
	CU_ASSERT_EQUAL(bw_float_to_half(-0.0f), 0x8000);
	CU_ASSERT_EQUAL(bw_float_to_half(1.0f), 0x3c00);
	CU_ASSERT_EQUAL(bw_float_to_half(-2.0f), 0xc000);
	CU_ASSERT_EQUAL(bw_float_to_half(0.1f), 0x2e66);
	/* ties between two normals: to the even one, down and up */
	CU_ASSERT_EQUAL(bw_float_to_half(1.0f + 0x1p-11f), 0x3c00);
	CU_ASSERT_EQUAL(bw_float_to_half(1.0f + 3 * 0x1p-11f), 0x3c02);
	CU_ASSERT_EQUAL(bw_float_to_half(-(1.0f + 3 * 0x1p-11f)), 0xbc02);
	/* just past a tie: up */
	CU_ASSERT_EQUAL(bw_float_to_half(float_of(0x3f801001u)), 0x3c01);
	/* just below a tie: down */
	CU_ASSERT_EQUAL(bw_float_to_half(float_of(0x3f800fffu)), 0x3c00);
	/* the mantissa carries into the exponent */
	CU_ASSERT_EQUAL(bw_float_to_half(float_of(0x3fffffffu)), 0x4000);
}

static void test_half_infinities(void)
{
	CU_ASSERT_EQUAL(bw_float_to_half(INFINITY), 0x7c00);
	CU_ASSERT_EQUAL(bw_float_to_half(-INFINITY), 0xfc00);
	CU_ASSERT_EQUAL(bw_float_to_half(65504.0f), 0x7bff);      /* the largest half */
	CU_ASSERT_EQUAL(bw_float_to_half(65519.996f), 0x7bff);    /* below the midpoint to infinity */
	CU_ASSERT_EQUAL(bw_float_to_half(65520.0f), 0x7c00);      /* the midpoint rounds to even: infinity */
	CU_ASSERT_EQUAL(bw_float_to_half(-65520.0f), 0xfc00);
	CU_ASSERT_EQUAL(bw_float_to_half(1e10f), 0x7c00);
	CU_ASSERT_EQUAL(bw_float_to_half(3.4e38f), 0x7c00);
	CU_ASSERT_EQUAL(bits_of(bw_half_to_float(0x7c00)), 0x7f800000u);
	CU_ASSERT_EQUAL(bits_of(bw_half_to_float(0xfc00)), 0xff800000u);
	CU_ASSERT_EQUAL(bw_half_to_float(0x7bff), 65504.0f);
}

static void test_half_subnormals(void)
{
	CU_ASSERT_EQUAL(bw_float_to_half(0x1p-24f), 0x0001);        /* the smallest subnormal */
	CU_ASSERT_EQUAL(bw_float_to_half(-0x1p-24f), 0x8001);
	CU_ASSERT_EQUAL(bw_float_to_half(0x1p-25f), 0x0000);        /* a tie with 0: to even */
	CU_ASSERT_EQUAL(bw_float_to_half(-0x1p-25f), 0x8000);
	CU_ASSERT_EQUAL(bw_float_to_half(float_of(0x33000001u)), 0x0001); /* just past that tie */
	CU_ASSERT_EQUAL(bw_float_to_half(0x1.8p-25f), 0x0001);
	CU_ASSERT_EQUAL(bw_float_to_half(0x1.8p-24f), 0x0002);      /* a tie between 1 and 2: to even */
	CU_ASSERT_EQUAL(bw_float_to_half(0x1.4p-23f), 0x0002);      /* a tie between 2 and 3: to even */
	CU_ASSERT_EQUAL(bw_float_to_half(0x1p-30f), 0x0000);        /* far below: zero */
	CU_ASSERT_EQUAL(bw_float_to_half(float_of(0x00000001u)), 0x0000); /* a float subnormal */
	CU_ASSERT_EQUAL(bw_float_to_half(0x1.ff8p-15f), 0x03ff);    /* the largest subnormal */
	CU_ASSERT_EQUAL(bw_float_to_half(0x1.ffcp-15f), 0x0400);    /* a tie, up into the smallest normal */
	CU_ASSERT_EQUAL(bw_float_to_half(0x1p-14f), 0x0400);        /* the smallest normal */
	CU_ASSERT_EQUAL(bw_half_to_float(0x0001), 0x1p-24f);
	CU_ASSERT_EQUAL(bw_half_to_float(0x8001), -0x1p-24f);
	CU_ASSERT_EQUAL(bw_half_to_float(0x03ff), 0x1.ff8p-15f);
	CU_ASSERT_EQUAL(bits_of(bw_half_to_float(0x8000)), 0x80000000u); /* -0 keeps its sign */
	CU_ASSERT_EQUAL(bits_of(bw_half_to_float(0x3555)), 0x3eaaa000u);
}

/* A NaN stays a NaN both ways: its sign, the quiet bit set, the top bits of its payload. */
static void test_half_nan(void)
{
	uint32_t bad = 0;

	/* float -> float16 */
	CU_ASSERT_EQUAL(bw_float_to_half(float_of(0x7fc00000u)), 0x7e00);  /* the default quiet NaN */
	CU_ASSERT_EQUAL(bw_float_to_half(float_of(0xffc00000u)), 0xfe00);  /* its sign */
	CU_ASSERT_EQUAL(bw_float_to_half(float_of(0x7fc02000u)), 0x7e01);  /* payload's lowest kept bit */
	CU_ASSERT_EQUAL(bw_float_to_half(float_of(0x7fffe000u)), 0x7fff);  /* every payload bit kept */
	CU_ASSERT_EQUAL(bw_float_to_half(float_of(0x7fc01fffu)), 0x7e00);  /* bits below them dropped */
	CU_ASSERT_EQUAL(bw_float_to_half(float_of(0x7f802000u)), 0x7e01);  /* signalling: quieted, payload kept */
	CU_ASSERT_EQUAL(bw_float_to_half(float_of(0x7f800001u)), 0x7e00);  /* payload too low: still a NaN */
	CU_ASSERT_EQUAL(bw_float_to_half(float_of(0xff800001u)), 0xfe00);
	/* float16 -> float */
	CU_ASSERT_EQUAL(bits_of(bw_half_to_float(0x7e00)), 0x7fc00000u);
	CU_ASSERT_EQUAL(bits_of(bw_half_to_float(0xfe00)), 0xffc00000u);
	CU_ASSERT_EQUAL(bits_of(bw_half_to_float(0x7e01)), 0x7fc02000u);
	CU_ASSERT_EQUAL(bits_of(bw_half_to_float(0x7c01)), 0x7fc02000u);  /* signalling: quieted */
	CU_ASSERT_EQUAL(bits_of(bw_half_to_float(0xfdff)), 0xffffe000u);
	/* every NaN float16 widens to a quiet NaN with its payload and comes back quiet, payload intact */
	for (uint32_t h = 0; h < 0x10000u; h++) {
		uint32_t f;

		if ((h & 0x7c00u) != 0x7c00u || (h & 0x3ffu) == 0)
			continue;
		f = bits_of(bw_half_to_float((uint16_t)h));
		bad += !isnan(float_of(f)) || (f & BW_F32_QUIET_BIT) == 0 || (f >> 31) != (h >> 15) ||
		       ((f >> 13) & 0x1ffu) != (h & 0x1ffu) ||
		       bw_float_to_half(float_of(f)) != (uint16_t)(h | BW_F16_QUIET_BIT);
	}
	CU_ASSERT_EQUAL(bad, 0);
}

/* Narrowing agrees with the compiler's own _Float16 conversion (round to nearest even) off NaN. */
static void test_half_vs_float16(void)
{
#ifdef __FLT16_MAX__
	uint64_t state = 12345;
	uint32_t bad = 0;

	for (uint32_t i = 0; i < RANDOM_FLOATS; i++) {
		uint32_t bits = (uint32_t)bw_splitmix64(&state);
		float f = float_of(bits);
		_Float16 want;
		uint16_t want_bits;

		if (isnan(f))
			continue;
		want = (_Float16)f;
		memcpy(&want_bits, &want, sizeof(want_bits));
		if (bw_float_to_half(f) != want_bits && bad++ < 4)
			printf("\n    %#x: %#x, _Float16 %#x", bits, bw_float_to_half(f), want_bits);
	}
	CU_ASSERT_EQUAL(bad, 0);
#else
	printf("\n    this compiler has no _Float16: the fixed cases above stand alone");
#endif
}

static void test_bf16(void)
{
	CU_ASSERT_EQUAL(bw_float_to_bf16(1.0f), 0x3f80);
	CU_ASSERT_EQUAL(bw_float_to_bf16(float_of(0x3f80ffffu)), 0x3f80); /* truncated, not rounded */
	CU_ASSERT_EQUAL(bw_float_to_bf16(-INFINITY), 0xff80);
	CU_ASSERT_EQUAL(bw_float_to_bf16(float_of(0x7f800001u)), 0x7fc0); /* a NaN truncation would lose */
	CU_ASSERT_EQUAL(bw_float_to_bf16(float_of(0xffc00000u)), 0xffc0);
	CU_ASSERT_EQUAL(bits_of(bw_bf16_to_float(0x3f80)), 0x3f800000u);
	CU_ASSERT_EQUAL(bits_of(bw_bf16_to_float(0x7fc1)), 0x7fc10000u);
}

/* ---- dtype.h ----------------------------------------------------------------------------------------- */

static void test_dtype_names(void)
{
	static const struct {
		uint32_t dtype;
		const char *name;
		uint32_t size;
	} want[] = {
		{ BW_DTYPE_FLOAT, "float", 4 },       { BW_DTYPE_UINT8, "uint8", 1 },
		{ BW_DTYPE_INT8, "int8", 1 },         { BW_DTYPE_UINT16, "uint16", 2 },
		{ BW_DTYPE_INT16, "int16", 2 },       { BW_DTYPE_INT32, "int32", 4 },
		{ BW_DTYPE_INT64, "int64", 8 },       { BW_DTYPE_BOOL, "bool", 1 },
		{ BW_DTYPE_FLOAT16, "float16", 2 },   { BW_DTYPE_DOUBLE, "double", 8 },
		{ BW_DTYPE_UINT32, "uint32", 4 },     { BW_DTYPE_UINT64, "uint64", 8 },
		{ BW_DTYPE_BFLOAT16, "bfloat16", 2 },
	};
	unsigned int named = 0;

	for (size_t i = 0; i < DIM(want); i++) {
		CU_ASSERT_PTR_NOT_NULL_FATAL(bw_dtype_name(want[i].dtype));
		CU_ASSERT_STRING_EQUAL(bw_dtype_name(want[i].dtype), want[i].name);
		CU_ASSERT_EQUAL(bw_dtype_size(want[i].dtype), want[i].size);
	}
	/* a name exactly for the dtypes the wire carries */
	for (uint32_t d = 0; d <= UINT8_MAX; d++) {
		CU_ASSERT_EQUAL(bw_dtype_name(d) != NULL, bw_dtype_size(d) != 0);
		named += bw_dtype_name(d) != NULL;
	}
	CU_ASSERT_EQUAL(named, DIM(want));
	CU_ASSERT_PTR_NULL(bw_dtype_name(8)); /* ONNX's STRING */
	CU_ASSERT_PTR_NULL(bw_dtype_name(1000));
}

/* ---- clock.h ----------------------------------------------------------------------------------------- */

static void test_us_to_ticks(void)
{
	/* rounded down */
	CU_ASSERT_EQUAL(bw_us_to_ticks(0, 3000000000u), 0);
	CU_ASSERT_EQUAL(bw_us_to_ticks(1, 999999), 0);
	CU_ASSERT_EQUAL(bw_us_to_ticks(3, 1500000), 4);
	CU_ASSERT_EQUAL(bw_us_to_ticks(10, 2400000000u), 24000);
	/* a wire deadline's largest budget at 5 GHz, and batching's largest default timeout (an hour)
	 * at 5.1 GHz, whose product with the frequency is past 64 bits */
	CU_ASSERT_EQUAL(bw_us_to_ticks(UINT32_MAX, 5000000000u), 21474836475000ull);
	CU_ASSERT_EQUAL(bw_us_to_ticks(3600000000u, 5100000000u), 18360000000000ull);
	CU_ASSERT_EQUAL(bw_us_to_ticks(UINT64_MAX / 1000, 1000000000u), UINT64_MAX / 1000 * 1000);
	CU_ASSERT_EQUAL(bw_us_to_ticks(1000000000000000ull, 3000000000u), 3000000000000000000ull);
	/* too many ticks for 64 bits: saturated */
	CU_ASSERT_EQUAL(bw_us_to_ticks(UINT64_MAX, 3000000000u), UINT64_MAX);
	CU_ASSERT_EQUAL(bw_us_to_ticks(UINT64_MAX / 1000 + 1, 1000000000u), UINT64_MAX);
	/* a 1 MHz clock is a microsecond clock */
	CU_ASSERT_EQUAL(bw_us_to_ticks(UINT64_MAX, 1000000u), UINT64_MAX);
}

static void test_ticks_to_us(void)
{
	CU_ASSERT_EQUAL(bw_ticks_to_us(0, 3000000000u), 0);
	CU_ASSERT_EQUAL(bw_ticks_to_us(2999, 3000000000u), 0);
	CU_ASSERT_EQUAL(bw_ticks_to_us(3000, 3000000000u), 1);
	/* ticks * 10^6 past 64 bits: a 64-bit product overflows after 1.8e13 ticks, 1.7 hours at 3 GHz */
	CU_ASSERT_EQUAL(bw_ticks_to_us(UINT64_MAX, 3000000000u), 6148914691236517ull);
	CU_ASSERT_EQUAL(bw_ticks_to_us(21600000000000ull, 3000000000u), 7200000000ull);
	/* saturated */
	CU_ASSERT_EQUAL(bw_ticks_to_us(UINT64_MAX, 1), UINT64_MAX);
	/* and back: exact where the frequency is a whole number of MHz */
	for (uint64_t us = 1; us < UINT64_MAX / 4000; us = us * 3 + 1)
		CU_ASSERT_EQUAL(bw_ticks_to_us(bw_us_to_ticks(us, 4000000000u), 4000000000u), us);
}

/* ---- err.h ------------------------------------------------------------------------------------------- */

static int verr_via(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* bw_verr under a caller's va_list, as opt_error and onnx_fail use it. */
static int verr_via(char *err, size_t cap, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = bw_verr(err, cap, -ENOTSUP, fmt, ap);
	va_end(ap);
	return rc;
}

static void test_err(void)
{
	char err[16];

	memset(err, 'x', sizeof(err));
	CU_ASSERT_EQUAL(bw_err(err, sizeof(err), -EINVAL, "op %s: %d", "Add", 42), -EINVAL);
	CU_ASSERT_STRING_EQUAL(err, "op Add: 42");
	CU_ASSERT_EQUAL(bw_err(err, sizeof(err), -E2BIG, "%s", "a line longer than the buffer"), -E2BIG);
	CU_ASSERT_STRING_EQUAL(err, "a line longer t"); /* cut, terminated */
	CU_ASSERT_EQUAL(bw_err(NULL, 64, -ENOMEM, "nowhere"), -ENOMEM);
	memset(err, 'x', sizeof(err));
	CU_ASSERT_EQUAL(bw_err(err, 0, 0, "no room"), 0);
	CU_ASSERT_EQUAL(err[0], 'x'); /* untouched */
	CU_ASSERT_EQUAL(verr_via(err, sizeof(err), "%u%u", 1u, 2u), -ENOTSUP);
	CU_ASSERT_STRING_EQUAL(err, "12");
}

/* ---- inputs.h, elem.h -------------------------------------------------------------------------------- */

#define GEN_ELEMS 4096
#define GEN_ROW 8

/* The first numbers of seed 1, input 0 and 1: pinned, because bwrun, bwcli and the GPU benchmark all
 * send these and results are compared across them and across runs. */
static void test_inputs_known(void)
{
	float f[4];
	int64_t ids[4];
	uint8_t b[4];
	uint64_t state = bw_input_stream(BW_INPUT_SEED_DEFAULT, 0);

	bw_input_fill(BW_DTYPE_FLOAT, f, 4, 4, false, &state);
	CU_ASSERT_EQUAL(f[0], (float)(0x9baf3 * 0x1p-23 - 1.0));
	CU_ASSERT_EQUAL(f[1], (float)(0xcab01 * 0x1p-23 - 1.0));
	CU_ASSERT_EQUAL(f[2], (float)(0xc04c93 * 0x1p-23 - 1.0));
	CU_ASSERT_EQUAL(f[3], (float)(0x891eec * 0x1p-23 - 1.0));
	state = bw_input_stream(BW_INPUT_SEED_DEFAULT, 0);
	bw_input_fill(BW_DTYPE_INT64, ids, 4, 4, false, &state);
	CU_ASSERT_EQUAL(ids[0], 348);
	CU_ASSERT_EQUAL(ids[1], 853);
	CU_ASSERT_EQUAL(ids[2], 369);
	CU_ASSERT_EQUAL(ids[3], 774);
	state = bw_input_stream(BW_INPUT_SEED_DEFAULT, 0);
	bw_input_fill(BW_DTYPE_BOOL, b, 4, 4, false, &state);
	CU_ASSERT(b[0] == 0 && b[1] == 0 && b[2] == 1 && b[3] == 1);
	state = bw_input_stream(BW_INPUT_SEED_DEFAULT, 1); /* input 1: a stream of its own */
	bw_input_fill(BW_DTYPE_INT64, ids, 1, 1, false, &state);
	CU_ASSERT_EQUAL(ids[0], 691);
}

static void test_inputs_values(void)
{
	static float f[GEN_ELEMS], again[GEN_ELEMS];
	static uint16_t h[GEN_ELEMS];
	static int32_t ids[GEN_ELEMS], mask[GEN_ELEMS];
	static uint8_t bools[GEN_ELEMS];
	uint64_t s1, s2;
	unsigned int bad = 0, ones = 0;

	s1 = bw_input_stream(7, 3);
	bw_input_fill(BW_DTYPE_FLOAT, f, GEN_ELEMS, GEN_ROW, false, &s1);
	s2 = bw_input_stream(7, 3);
	bw_input_fill(BW_DTYPE_FLOAT, again, GEN_ELEMS, GEN_ROW, false, &s2);
	CU_ASSERT_EQUAL(memcmp(f, again, sizeof(f)), 0); /* the same seed, the same data */
	CU_ASSERT_EQUAL(s1, s2);
	s2 = bw_input_stream(7, 4);
	bw_input_fill(BW_DTYPE_FLOAT, again, GEN_ELEMS, GEN_ROW, false, &s2);
	CU_ASSERT_NOT_EQUAL(memcmp(f, again, sizeof(f)), 0); /* another input, another stream */
	for (unsigned int i = 0; i < GEN_ELEMS; i++) {
		double scaled = ((double)f[i] + 1.0) * 0x1p23; /* 24 bits: a whole number in [0, 2^24) */

		bad += !(f[i] >= -1.0f && f[i] < 1.0f) || scaled != floor(scaled);
	}
	CU_ASSERT_EQUAL(bad, 0);
	/* float16: the same numbers, rounded once */
	s1 = bw_input_stream(7, 3);
	bw_input_fill(BW_DTYPE_FLOAT16, h, GEN_ELEMS, GEN_ROW, false, &s1);
	for (unsigned int i = 0; i < GEN_ELEMS; i++)
		bad += h[i] != bw_float_to_half(f[i]);
	CU_ASSERT_EQUAL(bad, 0);
	/* integers in range, bools 0 or 1 and not all one value */
	s1 = bw_input_stream(7, 3);
	bw_input_fill(BW_DTYPE_INT32, ids, GEN_ELEMS, GEN_ROW, false, &s1);
	s1 = bw_input_stream(7, 3);
	bw_input_fill(BW_DTYPE_BOOL, bools, GEN_ELEMS, GEN_ROW, false, &s1);
	for (unsigned int i = 0; i < GEN_ELEMS; i++) {
		bad += ids[i] < 0 || ids[i] >= BW_INPUT_INT_RANGE || bools[i] > 1;
		ones += bools[i];
	}
	CU_ASSERT_EQUAL(bad, 0);
	CU_ASSERT(ones > 0 && ones < GEN_ELEMS);
	/* a mask: each row of 8 is 6 ones then 2 zeros */
	s1 = bw_input_stream(7, 3);
	bw_input_fill(BW_DTYPE_INT32, mask, GEN_ELEMS, GEN_ROW, true, &s1);
	for (unsigned int i = 0; i < GEN_ELEMS; i++)
		bad += mask[i] != (i % GEN_ROW < 6 ? 1 : 0);
	CU_ASSERT_EQUAL(bad, 0);
	/* row 0 counts as 1: a row of one is kept */
	s1 = 1;
	bw_input_fill(BW_DTYPE_INT32, mask, 4, 0, true, &s1);
	CU_ASSERT(mask[0] == 1 && mask[3] == 1);
}

/* bw_elem_set then bw_elem_get gives the value back in every dtype that holds it. */
static void test_elem_access(void)
{
	static const uint32_t dtypes[] = { BW_DTYPE_FLOAT,  BW_DTYPE_DOUBLE, BW_DTYPE_FLOAT16, BW_DTYPE_BFLOAT16,
					   BW_DTYPE_INT64,  BW_DTYPE_INT32,  BW_DTYPE_INT16,   BW_DTYPE_INT8,
					   BW_DTYPE_UINT64, BW_DTYPE_UINT32, BW_DTYPE_UINT16,  BW_DTYPE_UINT8,
					   BW_DTYPE_BOOL };
	uint8_t buf[4 * 8];

	for (size_t k = 0; k < DIM(dtypes); k++) {
		memset(buf, 0xa5, sizeof(buf));
		bw_elem_set(dtypes[k], buf, 2, 1.0);
		CU_ASSERT_EQUAL(bw_elem_get(dtypes[k], buf, 2), 1.0);
		bw_elem_set(dtypes[k], buf, 3, 0.0);
		CU_ASSERT_EQUAL(bw_elem_get(dtypes[k], buf, 3), 0.0);
	}
	bw_elem_set(BW_DTYPE_BOOL, buf, 0, 0.5); /* any value but 0 is true */
	CU_ASSERT_EQUAL(buf[0], 1);
	bw_elem_set(BW_DTYPE_BOOL, buf, 0, -0.0);
	CU_ASSERT_EQUAL(buf[0], 0);
	bw_elem_set(BW_DTYPE_INT8, buf, 0, -5.0);
	CU_ASSERT_EQUAL(bw_elem_get(BW_DTYPE_INT8, buf, 0), -5.0);
	bw_elem_set(BW_DTYPE_FLOAT16, buf, 0, 0.1);
	CU_ASSERT_EQUAL(((uint16_t *)buf)[0], 0x2e66);
	bw_elem_set(BW_DTYPE_BFLOAT16, buf, 0, 1.0 + 0x1p-9); /* truncated to 1 */
	CU_ASSERT_EQUAL(bw_elem_get(BW_DTYPE_BFLOAT16, buf, 0), 1.0);
	CU_ASSERT(isnan(bw_elem_get(8, buf, 0))); /* STRING: not read */
}

/* ---- compiler.h -------------------------------------------------------------------------------------- */

/* hist.h: every value below 2^20 lands in a bucket whose upper edge is at or above it and whose
 * predecessor's is below it, within a quarter of it; at bwload's 7 bits too; quantiles and counts. */
static void test_hist(void)
{
	static struct bw_hist h;
	unsigned int prev = 0;

	for (uint64_t v = 0; v < (1u << 20); v++) {
		unsigned int b = bw_hist_bucket(v, BW_HIST_SUB_BITS);

		if (b != prev && b != prev + 1) {
			CU_FAIL("buckets skipped");
			break;
		}
		prev = b;
		if (bw_hist_bucket_upper(b, BW_HIST_SUB_BITS) < v ||
		    (b > 0 && bw_hist_bucket_upper(b - 1, BW_HIST_SUB_BITS) >= v) ||
		    bw_hist_bucket_upper(b, BW_HIST_SUB_BITS) - v > v / 4) {
			CU_FAIL("a value outside its bucket");
			break;
		}
	}
	CU_ASSERT_EQUAL(bw_hist_bucket((UINT64_C(1) << 32) - 1, BW_HIST_SUB_BITS), BW_HIST_BUCKETS - 1);
	CU_ASSERT_EQUAL(bw_hist_bucket_upper(BW_HIST_BUCKETS - 1, BW_HIST_SUB_BITS), (UINT64_C(1) << 32) - 1);
	for (uint64_t v = 1; v < (UINT64_C(1) << 40); v = v * 3 + 1) {
		unsigned int b = bw_hist_bucket(v, 7);

		CU_ASSERT(bw_hist_bucket_upper(b, 7) >= v && bw_hist_bucket_upper(b, 7) - v <= v / 64);
	}
	memset(&h, 0, sizeof(h));
	CU_ASSERT_EQUAL(bw_hist_quantile(&h, 0.5), 0);
	for (uint64_t v = 1; v <= 100; v++)
		bw_hist_record(&h, v);
	bw_hist_record(&h, UINT64_C(1) << 40); /* beyond the range: the last bucket */
	CU_ASSERT_EQUAL(h.count, 101);
	CU_ASSERT_EQUAL(h.buckets[BW_HIST_BUCKETS - 1], 1);
	CU_ASSERT_EQUAL(bw_hist_quantile(&h, 0.005), 1); /* rank 1 of 101 */
	CU_ASSERT_EQUAL(bw_hist_quantile(&h, 0.01), 2); /* rank ceil(1.01) */
	CU_ASSERT(bw_hist_quantile(&h, 0.5) >= 51 && bw_hist_quantile(&h, 0.5) <= 63);
	CU_ASSERT_EQUAL(bw_hist_count_le(&h, 7), 7);
	CU_ASSERT_EQUAL(bw_hist_count_le(&h, UINT64_MAX), 101);
	{
		static struct bw_hist sum;

		memset(&sum, 0, sizeof(sum));
		bw_hist_merge(&sum, &h);
		bw_hist_merge(&sum, &h);
		CU_ASSERT_EQUAL(sum.count, 202);
		CU_ASSERT_EQUAL(sum.sum, 2 * h.sum);
		CU_ASSERT_EQUAL(bw_hist_count_le(&sum, 7), 14);
	}
}

static void test_branch_hints(void)
{
	int n = 0;

	/* the value of the condition, as a plain if would see it */
	CU_ASSERT_EQUAL(likely(5), 1);
	CU_ASSERT_EQUAL(unlikely(0), 0);
	CU_ASSERT_EQUAL(unlikely(-3), 1);
	if (unlikely(n++ == 0))
		n += 10;
	CU_ASSERT_EQUAL(n, 11); /* evaluated once */
}

int main(void)
{
	static CU_TestInfo half_tests[] = {
		{ "float16 -> float -> float16: every non-NaN unchanged", test_half_round_trip },
		{ "rounding: ties to even, carries", test_half_rounding },
		{ "infinities and overflow", test_half_infinities },
		{ "subnormals: both ways, ties with 0 and into the normals", test_half_subnormals },
		{ "NaN: sign, quiet bit, payload, both ways", test_half_nan },
		{ "against the compiler's _Float16 on random floats", test_half_vs_float16 },
		{ "bfloat16: truncation, NaN kept", test_bf16 },
		CU_TEST_INFO_NULL,
	};
	static CU_TestInfo other_tests[] = {
		{ "dtype.h: names and sizes", test_dtype_names },
		{ "clock.h: us -> ticks at large values, saturated", test_us_to_ticks },
		{ "clock.h: ticks -> us at large values, saturated, round trip", test_ticks_to_us },
		{ "err.h: bw_err, bw_verr", test_err },
		{ "inputs.h: the pinned first values of seed 1", test_inputs_known },
		{ "inputs.h: determinism, streams, ranges, masks, float16", test_inputs_values },
		{ "elem.h: bw_elem_set and bw_elem_get", test_elem_access },
		{ "compiler.h: likely, unlikely", test_branch_hints },
		{ "hist.h: buckets, edges, quantiles, merge", test_hist },
		CU_TEST_INFO_NULL,
	};
	static CU_SuiteInfo suites[] = {
		{ .pName = "batchwire/half.h", .pTests = half_tests },
		{ .pName = "batchwire/ headers", .pTests = other_tests },
		CU_SUITE_INFO_NULL,
	};

	return bw_cunit_run(suites);
}
