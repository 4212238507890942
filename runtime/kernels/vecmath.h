/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The vector math (vecmath.c's opening comment says what and why), written once over VL lanes of
 * GCC vector types, for the translation units that build it at one width each: vecmath.c at 8 lanes
 * (its baseline and x86-64-v3 variants) and vecmath_avx512.c at 16. Each defines VL, includes this,
 * and makes its variants with VM_VARIANTS under its own target attribute. An element's result is
 * the same operations at every width, so the 8- and 16-lane builds with FMA give the same bits for
 * exp, erf and the activations; only the order of a row's sums (softmax, layernorm) differs with the
 * width, by a rounding or two.
 *
 * Private to those two files, and to sgemm.c, whose AVX2 tiles apply vgelu to their registers (the
 * same bits as rt_vm_act's): the bodies are static, so each includer gets its own copy.
 */
#ifndef BW_RUNTIME_KERNELS_VECMATH_H
#define BW_RUNTIME_KERNELS_VECMATH_H

#ifndef VL
#error "define VL, the lanes of a vector (8 or 16), before including vecmath.h"
#endif

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fused.h"

/*
 * The helpers below pass 32- and 64-byte vectors by value. They are always inlined into each variant
 * (a helper left out of line, or split by GCC's partial inlining, would be a real call with the
 * baseline ABI's "AVX vector return without AVX" warning), so no such call exists.
 */
#pragma GCC diagnostic ignored "-Wpsabi"

#define VM_INLINE static inline __attribute__((always_inline))

typedef float vf __attribute__((vector_size(VL * sizeof(float))));
typedef int32_t vi __attribute__((vector_size(VL * sizeof(int32_t))));

VM_INLINE vf vload(const float *p)
{
	vf v;

	memcpy(&v, p, sizeof(v));
	return v;
}

VM_INLINE void vstore(float *p, vf v)
{
	memcpy(p, &v, sizeof(v));
}

VM_INLINE vf vsplat(float x)
{
	vf v = {0};

	for (int i = 0; i < VL; i++)
		v[i] = x;
	return v;
}

/* Lanes of a where mask is set (all ones), of b elsewhere. */
VM_INLINE vf vselect(vi mask, vf a, vf b)
{
	return (vf)((mask & (vi)a) | (~mask & (vi)b));
}

VM_INLINE vf vmax(vf a, vf b)
{
	return vselect(a > b, a, b);
}

VM_INLINE vf vmin(vf a, vf b)
{
	return vselect(a < b, a, b);
}

/*
 * The sums and maxima of lanes fold a vector wider than 8 lanes in halves down to 8 first, then go
 * through those 8 in order: at 8 lanes that is the order the AVX2 and baseline builds always had, and
 * at 16 the serial chain a softmax or layernorm row ends on stays 8 long.
 */
#define VM_FOLD_LANES 8

VM_INLINE float vsum(vf v)
{
	float l[VL], s = 0;

	memcpy(l, &v, sizeof(l));
	for (int w = VL / 2; w >= VM_FOLD_LANES; w /= 2)
		for (int i = 0; i < w; i++)
			l[i] += l[i + w];
	for (int i = 0; i < VM_FOLD_LANES; i++)
		s += l[i];
	return s;
}

VM_INLINE float vhmax(vf v)
{
	float l[VL], m;

	memcpy(l, &v, sizeof(l));
	for (int w = VL / 2; w >= VM_FOLD_LANES; w /= 2)
		for (int i = 0; i < w; i++)
			l[i] = l[i + w] > l[i] ? l[i + w] : l[i];
	m = l[0];
	for (int i = 1; i < VM_FOLD_LANES; i++)
		m = l[i] > m ? l[i] : m;
	return m;
}

/*
 * exp(x): Cephes expf. Below -87.3 it gives exp(-87.3) (1e-38) where expf gives a subnormal or 0;
 * above 88.37, 2.4e38 where expf overflows; NaN stays NaN. With VM_AVX512_OPS (vecmath_avx512.c)
 * the clamp is AVX-512's max and min (max_ps(a, b) is a > b ? a : b, as vmax) and the final 2^n a
 * scalef, the exact scaling the shifted exponent's multiply makes: the same bits for every one of
 * the 2^32 inputs (checked), exp 27 % and a 128 x 128 softmax 10 % faster on a Sapphire Rapids core.
 */
VM_INLINE vf vexp(vf x0)
{
	const vf magic = vsplat(12582912.0f); /* 1.5 * 2^23: adding it rounds to an integer */
	vf fx, r, y, x;

#ifdef VM_AVX512_OPS
	x = (vf)_mm512_min_ps(_mm512_max_ps((__m512)x0, (__m512)vsplat(-87.3365447505531f)),
			      (__m512)vsplat(88.3762626647949f));
#else
	x = vmin(vmax(x0, vsplat(-87.3365447505531f)), vsplat(88.3762626647949f));
#endif
	fx = x * 1.44269504088896341f;
	fx = (fx + magic) - magic;
	r = x - fx * 0.693359375f;
	r = r - fx * -2.12194440e-4f;
	y = vsplat(1.9875691500e-4f);
	y = y * r + 1.3981999507e-3f;
	y = y * r + 8.3334519073e-3f;
	y = y * r + 4.1665795894e-2f;
	y = y * r + 1.6666665459e-1f;
	y = y * r + 5.0000001201e-1f;
	y = y * (r * r) + r + 1.0f;
#ifdef VM_AVX512_OPS
	/* NaN: x0 itself, through a mask blend (one instruction where vselect's bit operations take two) */
	return (vf)_mm512_mask_mov_ps(_mm512_scalef_ps((__m512)y, (__m512)fx),
				      _mm512_cmp_ps_mask((__m512)x0, (__m512)x0, _CMP_UNORD_Q), (__m512)x0);
#else
	vi e = __builtin_convertvector(fx, vi) + 127;

	return vselect(x0 != x0, x0, y * (vf)(e << 23));
#endif
}

#define ERF_SPLIT 0.921875f
#define ERF_ONE_FROM 3.925f

/* erf(x); NaN stays NaN. */
VM_INLINE vf verf(vf x)
{
	const vi sign_bit = (vi)vsplat(-0.0f);
	vi sign = (vi)x & sign_bit;
	vf ax = (vf)((vi)x & ~sign_bit), u = ax * ax, p, q, small, big;

	/* erf(x) / x as a polynomial in x^2, on [0, ERF_SPLIT] */
	p = vsplat(8.392699237447232e-05f);
	p = p * u - 0.0008148509077727795f;
	p = p * u + 0.005201592575758696f;
	p = p * u - 0.026859648525714874f;
	p = p * u + 0.11283700913190842f;
	p = p * u - 0.37612634897232056f;
	p = p * u + 1.128379225730896f;
	small = ax * p;
	/* log(erfc(x)) as a polynomial in x, on [ERF_SPLIT, ERF_ONE_FROM] */
	vf t = vmin(ax, vsplat(ERF_ONE_FROM));
	q = vsplat(-2.4807224718870202e-08f);
	q = q * t + 2.1766065856354544e-06f;
	q = q * t - 5.111168138682842e-05f;
	q = q * t + 0.0006234912434592843f;
	q = q * t - 0.004846824798732996f;
	q = q * t + 0.026603464037179947f;
	q = q * t - 0.11032271385192871f;
	q = q * t - 0.6316288113594055f;
	q = q * t - 1.130321741104126f;
	q = q * t + 0.00033662255736999214f;
	big = 1.0f - vexp(q);
	big = vselect(ax >= ERF_ONE_FROM, vsplat(1.0f), big);
	vf r = vselect(ax <= ERF_SPLIT, small, big);
	r = vselect(ax != ax, ax, r); /* NaN */
	return (vf)((vi)r | sign);
}

/*
 * table[idx] in each lane, idx in [0, 8): one permute of the table's first VL floats (vpermps where
 * the variant has AVX2). Clang (it builds only the fuzzers) has no variable __builtin_shuffle: a
 * lane at a time there.
 */
VM_INLINE vf vlookup8(const float *table, vi idx)
{
#ifdef __clang__
	vf r;

	for (int i = 0; i < VL; i++)
		r[i] = table[idx[i]];
	return r;
#else
	return __builtin_shuffle(vload(table), idx);
#endif
}

#define GELU_TAIL_INTERVALS 8
#define GELU_TAIL_WIDTH 0.75f
#define GELU_TAIL_END 6.0f /* GELU_TAIL_INTERVALS * GELU_TAIL_WIDTH */
#define GELU_TAIL_DEGREE 6

/*
 * Q(a) = Phi(-a), the normal distribution's tail, for a in [0, 6): one degree-6 polynomial per
 * interval of 0.75, in d = a - start, each fitted to Q's relative error. Rows of 16 (the last 8
 * zero) so that a 16-lane variant loads a whole vector.
 */
static const float vm_gelu_tail[GELU_TAIL_DEGREE + 1][16] __attribute__((aligned(64))) = {
	/* coefficient n of interval i at [n][i], from gelu_table.py fp32 */
	/* largest error over [-10, 10]: 1.62e-07 of |gelu(x)| + |x| / 10; relative
	 * 1.89e-05 above x = -4, 0.000337 above -5.4 */
	{ 0.5f, 0.226627335f, 0.066807203f, 0.0122244833f, 0.00134989759f, 8.84156179e-05f,
	  3.39733674e-06f, 7.60239729e-08f },
	{ -0.398944229f, -0.301134795f, -0.129517436f, -0.0317406952f, -0.00443181908f, -0.000352455303f,
	  -1.59573865e-05f, -4.10986672e-07f },
	{ 3.9942428e-05f, 0.112876698f, 0.0971343517f, 0.0357253589f, 0.00664745225f, 0.000658895995f,
	  3.55595039e-05f, 1.05622792e-06f },
	{ 0.0661762655f, 0.0223188438f, -0.0269464049f, -0.0216166582f, -0.00590852415f, -0.000753324246f,
	  -4.87020407e-05f, -1.65478889e-06f },
	{ 0.00120607205f, -0.0241937637f, -0.00624545151f, 0.00656952709f, 0.00332959788f, 0.000562926347f,
	  4.31782173e-05f, 1.64434675e-06f },
	{ -0.0124264611f, 0.00236999127f, 0.0063325013f, -0.000322964712f, -0.00114166841f, -0.000260161905f,
	  -2.30628593e-05f, -9.57602083e-07f },
	{ 0.00259678974f, 0.00120644236f, -0.00135601684f, -0.000264363654f, 0.000186924372f, 5.69028198e-05f,
	  5.62864625e-06f, 2.48067295e-07f },
};

/*
 * GELU, its erf form: x * Phi(x), Phi(x) = Q(|x|) below 0 and 1 - Q(|x|) above, Q from the table
 * (0 from 6 on, where it is below 1e-9). Why not x / 2 * (1 + erf(x / sqrt 2)) on verf: that is an
 * exp and two polynomials, about 55 instructions and a dependent chain of some 120 cycles a
 * vector, and 1 + erf cancels below 0 (a relative error of 5e-4 at x = -4, a third at -5.4); this
 * is an index, seven permutes and six FMAs, about 25 instructions: 16.5-17 -> 6.3-7.4 ns a vector
 * on an AMD EPYC (Zen 3), and the transformer's FFN-up (GELU in its tiles' epilogue) went from
 * 1.15-1.17x its FFN-down's time (the same FLOPs) to 1.00-1.04x. 1.9e-5 relative above -4.
 * +inf gives +inf; -inf and NaN give NaN (-inf * 0), as before.
 */
VM_INLINE vf vgelu(vf x)
{
	const vi sign_bit = (vi)vsplat(-0.0f);
	vf a = (vf)((vi)x & ~sign_bit), ac, d, q;
	vi inside = a < GELU_TAIL_END, idx; /* false for inf and NaN, whose lanes take the last interval */

	ac = vselect(inside, a, vsplat(5.9999995f)); /* the float below 6: an index of 7 at most */
	idx = __builtin_convertvector(ac * (1.0f / GELU_TAIL_WIDTH), vi);
	d = ac - __builtin_convertvector(idx, vf) * GELU_TAIL_WIDTH; /* exact: idx * 0.75 is */
	q = vlookup8(vm_gelu_tail[GELU_TAIL_DEGREE], idx);
#pragma GCC unroll 8
	for (int n = GELU_TAIL_DEGREE - 1; n >= 0; n--)
		q = q * d + vlookup8(vm_gelu_tail[n], idx);
	q = (vf)(inside & (vi)q);
	return x * vselect(x < 0.0f, q, 1.0f - q);
}

/* ---- the entry points' bodies ---------------------------------------------------------------------- */

/* y[i] = EXPR of v, the vector holding x[i], for i in [0, n) (n: the caller's), the tail on a padded
 * copy; y may be x. */
#define VM_MAP(y, x, EXPR)                                                                                   \
	do {                                                                                                 \
		float tail_[VL] = {0};                                                                       \
		int64_t i_ = 0;                                                                              \
		vf v;                                                                                        \
		for (; i_ + VL <= n; i_ += VL) {                                                             \
			v = vload((x) + i_);                                                                 \
			vstore((y) + i_, (EXPR));                                                            \
		}                                                                                            \
		if (i_ < n) {                                                                                \
			memcpy(tail_, (x) + i_, (size_t)(n - i_) * sizeof(float));                           \
			v = vload(tail_);                                                                    \
			vstore(tail_, (EXPR));                                                               \
			memcpy((y) + i_, tail_, (size_t)(n - i_) * sizeof(float));                           \
		}                                                                                            \
	} while (0)

/* Relu maps NaN to 0 as Relu's x > 0 ? x : 0 does; Clip is x < min ? min : x > max ? max : x. */
VM_INLINE void vm_act(float *y, int64_t n, const struct rt_k_act_spec *act)
{
	const float a = act->a, b = act->b;

	switch (act->kind) {
	case RT_K_ACT_RELU: VM_MAP(y, y, vselect(v > 0.0f, v, vsplat(0.0f))); break;
	case RT_K_ACT_LEAKY_RELU: VM_MAP(y, y, vselect(v < 0.0f, v * a, v)); break;
	case RT_K_ACT_CLIP: VM_MAP(y, y, vselect(v < a, vsplat(a), vselect(v > b, vsplat(b), v))); break;
	case RT_K_ACT_GELU: VM_MAP(y, y, vgelu(v)); break;
	default: break;
	}
}

VM_INLINE void vm_fill_rows(float *y, const float *bias, const float *z, int64_t rows, int64_t n)
{
	for (int64_t r = 0; r < rows; r++, y += n) {
		if (z == NULL) {
			memcpy(y, bias, (size_t)n * sizeof(float));
			continue;
		}
		for (int64_t j = 0; j < n; j++)
			y[j] = bias[j] + z[j];
		z += n;
	}
}

VM_INLINE void vm_fill(float *y, float v, const float *z, int64_t n)
{
	if (z == NULL) {
		for (int64_t i = 0; i < n; i++)
			y[i] = v;
	} else {
		for (int64_t i = 0; i < n; i++)
			y[i] = z[i] + v;
	}
}

VM_INLINE void vm_exp(float *y, const float *x, int64_t n)
{
	VM_MAP(y, x, vexp(v));
}

VM_INLINE void vm_erf(float *y, const float *x, int64_t n)
{
	VM_MAP(y, x, verf(v));
}

/*
 * Softmax of one row: max, then exp(x - max) stored and summed, then scaled by 1 / sum (ONNX's
 * definition; the reference kernel divides, which differs from multiplying by the reciprocal by at
 * most one rounding). A row of -inf gives NaN there as here.
 */
VM_INLINE void vm_softmax_rows(float *y, const float *x, int64_t rows, int64_t n)
{
	for (int64_t r = 0; r < rows; r++, x += n, y += n) {
		vf vm = vsplat(-INFINITY), vs = vsplat(0.0f);
		float mx = -INFINITY, sum, inv, tail[VL];
		int64_t i = 0;

		for (; i + VL <= n; i += VL)
			vm = vmax(vm, vload(x + i));
		mx = vhmax(vm);
		for (; i < n; i++)
			mx = x[i] > mx ? x[i] : mx;
		for (i = 0; i + VL <= n; i += VL) {
			vf e = vexp(vload(x + i) - mx);

			vs += e;
			vstore(y + i, e);
		}
		sum = vsum(vs);
		if (i < n) {
			for (int k = 0; k < VL; k++)
				tail[k] = i + k < n ? x[i + k] - mx : -INFINITY;
			vstore(tail, vexp(vload(tail)));
			for (int64_t k = 0; i + k < n; k++) {
				y[i + k] = tail[k];
				sum += tail[k];
			}
		}
		inv = 1.0f / sum;
		for (i = 0; i < n; i++)
			y[i] *= inv;
	}
}

/*
 * Mean, then the variance as the mean of squared differences (two passes, as the reference kernel
 * does, in float lanes rather than one double: for rows of hundreds of values of like magnitude the
 * difference is an ulp or two), then the scale and shift.
 */
VM_INLINE void vm_layernorm_rows(float *y, const float *x, int64_t rows, int64_t n, const float *scale,
				  int64_t n_scale, const float *bias, int64_t n_bias, float eps)
{
	for (int64_t r = 0; r < rows; r++, x += n, y += n) {
		vf acc = vsplat(0.0f);
		float mean, var, inv, s = 0;
		int64_t i = 0;

		for (; i + VL <= n; i += VL)
			acc += vload(x + i);
		s = vsum(acc);
		for (; i < n; i++)
			s += x[i];
		mean = s / (float)n;
		acc = vsplat(0.0f);
		s = 0;
		for (i = 0; i + VL <= n; i += VL) {
			vf d = vload(x + i) - mean;

			acc += d * d;
		}
		s = vsum(acc);
		for (; i < n; i++)
			s += (x[i] - mean) * (x[i] - mean);
		var = s / (float)n;
		inv = 1.0f / sqrtf(var + eps);
		if (n_scale == n && (bias == NULL || n_bias == n)) {
			for (i = 0; i < n; i++)
				y[i] = (x[i] - mean) * inv * scale[i] + (bias != NULL ? bias[i] : 0.0f);
			continue;
		}
		for (i = 0; i < n; i++)
			y[i] = (x[i] - mean) * inv * scale[n_scale == 1 ? 0 : i] +
			       (bias != NULL ? bias[n_bias == 1 ? 0 : i] : 0.0f);
	}
}

/* ---- variants and their tables ---------------------------------------------------------------------- */

struct vm_ops {
	void (*act)(float *y, int64_t n, const struct rt_k_act_spec *act);
	void (*fill_rows)(float *y, const float *bias, const float *z, int64_t rows, int64_t n);
	void (*fill)(float *y, float v, const float *z, int64_t n);
	void (*exp)(float *y, const float *x, int64_t n);
	void (*erf)(float *y, const float *x, int64_t n);
	void (*softmax_rows)(float *y, const float *x, int64_t rows, int64_t n);
	void (*layernorm_rows)(float *y, const float *x, int64_t rows, int64_t n, const float *scale, int64_t n_scale,
			       const float *bias, int64_t n_bias, float eps);
};

/* The entry points of one variant, vm_act##suffix and so on: each body above, always inlined into a
 * function compiled with target (an __attribute__((target(...))), or nothing for the baseline). */
#define VM_VARIANTS(suffix, target)                                                                          \
	target static void vm_act##suffix(float *y, int64_t n, const struct rt_k_act_spec *act)               \
	{                                                                                                    \
		vm_act(y, n, act);                                                                           \
	}                                                                                                    \
	target static void vm_fill_rows##suffix(float *y, const float *bias, const float *z, int64_t rows,    \
						int64_t n)                                                   \
	{                                                                                                    \
		vm_fill_rows(y, bias, z, rows, n);                                                           \
	}                                                                                                    \
	target static void vm_fill##suffix(float *y, float v, const float *z, int64_t n)                      \
	{                                                                                                    \
		vm_fill(y, v, z, n);                                                                         \
	}                                                                                                    \
	target static void vm_exp##suffix(float *y, const float *x, int64_t n)                                \
	{                                                                                                    \
		vm_exp(y, x, n);                                                                             \
	}                                                                                                    \
	target static void vm_erf##suffix(float *y, const float *x, int64_t n)                                \
	{                                                                                                    \
		vm_erf(y, x, n);                                                                             \
	}                                                                                                    \
	target static void vm_softmax_rows##suffix(float *y, const float *x, int64_t rows, int64_t n)         \
	{                                                                                                    \
		vm_softmax_rows(y, x, rows, n);                                                              \
	}                                                                                                    \
	target static void vm_layernorm_rows##suffix(float *y, const float *x, int64_t rows, int64_t n,       \
						     const float *scale, int64_t n_scale, const float *bias, \
						     int64_t n_bias, float eps)                              \
	{                                                                                                    \
		vm_layernorm_rows(y, x, rows, n, scale, n_scale, bias, n_bias, eps);                         \
	}

/* The table of the variant VM_VARIANTS(suffix, ...) made. */
#define VM_OPS(suffix)                                                                                       \
	{                                                                                                    \
		.act = vm_act##suffix, .fill_rows = vm_fill_rows##suffix, .fill = vm_fill##suffix,           \
		.exp = vm_exp##suffix, .erf = vm_erf##suffix, .softmax_rows = vm_softmax_rows##suffix,       \
		.layernorm_rows = vm_layernorm_rows##suffix,                                                 \
	}

/* vecmath_avx512.c's: 16 lanes, for the AVX-512 and AMX levels. */
extern const struct vm_ops rt_vm_ops_avx512;

#endif /* BW_RUNTIME_KERNELS_VECMATH_H */
