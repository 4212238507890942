/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Convolutions on NHWC bf16 tensors (precision bf16, the CPU at the amx level), and the two
 * conversions at the edges of the region of a graph that runs them (fused.h: FusedConvNhwc,
 * ToNhwcBf16, FromNhwcBf16).
 *
 * Why NHWC in bf16: with an image's channels contiguous, the pixels of a 1x1 conv are the rows of
 * the GEMM's A as they lie in memory, and AMX's tiles load them in place (rt_bf16_gemm_rows); a
 * stride-1 kh x kw conv is kh * kw such GEMMs at constant offsets into a zero-padded copy of the
 * image, summed in the same accumulators. NCHW fp32, where every conv packed an im2col of its
 * image into fp32 panels and rounded those into tiles, spent half of ResNet-50's time on that
 * packing and on fp32 stores. Tensors between these convs are bf16, so each layer also reads and
 * writes half the bytes. Strided convs gather their im2col rows (bf16, channels contiguous per tap)
 * into scratch, one memcpy per pixel and tap.
 */
#include <immintrin.h>
#include <inttypes.h>
#include <string.h>

#include "bf16.h"
#include "fused.h"

/* The most taps (kh * kw) a stride-1 conv sums as offsets; a larger kernel gathers. */
#define NHWC_TAPS_MAX 49

enum nhwc_mode {
	NHWC_DIRECT, /* 1x1, stride 1, no padding: A is X itself */
	NHWC_PADDED, /* stride 1: a zero-padded copy of X, one offset per tap */
	NHWC_S2D,    /* stride 2, at most 4 channels: stride 1 over a space-to-depth copy (s2d_applies) */
	NHWC_GATHER, /* any other: im2col rows gathered into scratch */
};

/*
 * A stride-2 conv of few channels (ResNet-50's stem: 3 channels, 7 x 7) as a stride-1 conv over a
 * space-to-depth copy of its padded image: each 2 x 2 block of pixels one pixel of S2D_CH channels
 * (4c of them the block's, the rest zeros), the kernel ceil(kh / 2) x ceil(kw / 2) such pixels. A
 * row of the kernel is then kw2 * 16 values contiguous in the copy, one tap of the GEMM whose rows
 * the tiles load in place, 16 values apart: no gathered rows (the stem's were 4 MiB an image, 320
 * bytes a pixel, and copying them took longer than the products). It costs depth: the stem's 147
 * become 4 x 64 = 256 (1 in 4 of the copy's channels and a row and column of the 8 x 8 kernel
 * zero), tiles the AMX unit runs faster than the copy ran. kw2 must be even for a tap to be a whole
 * number of 32-value tile rows.
 */
#define S2D_CH 16

static bool s2d_applies(int64_t c, int64_t kh, int64_t kw, const int64_t *strides)
{
	return strides[0] == 2 && strides[1] == 2 && 4 * c <= S2D_CH && kh >= 2 && (kw + 1) / 2 % 2 == 0;
}

int64_t rt_bf16_conv_depth(int64_t c, int64_t kh, int64_t kw, const int64_t *strides)
{
	return s2d_applies(c, kh, kw, strides) ? (kh + 1) / 2 * ((kw + 1) / 2) * S2D_CH : kh * kw * c;
}

void rt_bf16_conv_weights_kn(const float *w, int64_t m, int64_t c, int64_t kh, int64_t kw, const int64_t *strides,
			     float *kn)
{
	int64_t kw2 = (kw + 1) / 2;

	if (!s2d_applies(c, kh, kw, strides)) {
		for (int64_t o = 0; o < m; o++)
			for (int64_t i = 0; i < c; i++)
				for (int64_t t = 0; t < kh * kw; t++)
					kn[(t * c + i) * m + o] = w[(o * c + i) * kh * kw + t];
		return;
	}
	/* tap (ky / 2, kx / 2) of the copy, channel ((ky % 2) * 2 + kx % 2) * c + i */
	memset(kn, 0, (size_t)(rt_bf16_conv_depth(c, kh, kw, strides) * m) * sizeof(float));
	for (int64_t o = 0; o < m; o++)
		for (int64_t i = 0; i < c; i++)
			for (int64_t ky = 0; ky < kh; ky++)
				for (int64_t kx = 0; kx < kw; kx++) {
					int64_t kk = (ky / 2 * kw2 + kx / 2) * S2D_CH + (ky % 2 * 2 + kx % 2) * c + i;

					kn[kk * m + o] = w[((o * c + i) * kh + ky) * kw + kx];
				}
}

struct nhwc_plan {
	int64_t n, h, w, c, m, kh, kw, ho, wo, hp, wp; /* hp x wp: the padded image */
	int64_t depth; /* a gathered row: kh * kw * c rounded up to 32 (zeros after) */
	int64_t kh2, kw2, hp2, wp2; /* NHWC_S2D: the kernel and the image in the copy's pixels */
	struct rt_k_window win;
	enum nhwc_mode mode;
};

static int nhwc_plan(const struct rt_node *node, const struct rt_tensor *inputs, struct nhwc_plan *p, char *err,
		     size_t err_cap)
{
	const struct rt_attr *shape = rt_node_attr(node, "weight_shape");
	const struct rt_tensor *x = &inputs[0];
	struct rt_tensor x_nchw = { .dtype = BW_DTYPE_FLOAT, .rank = 4 };
	int64_t group, k;
	int rc;

	memset(p, 0, sizeof(*p));
	if ((rc = rt_k_need_input(node, inputs, 0, "X", RT_DTYPE_BIT(BW_DTYPE_BFLOAT16), err, err_cap)) < 0 ||
	    (rc = rt_k_need_input(node, inputs, 1, "W", RT_DTYPE_BIT(BW_DTYPE_BFLOAT16), err, err_cap)) < 0 ||
	    (rc = rt_k_attr_int(node, "group", 1, &group, err, err_cap)) < 0)
		return rc;
	if (!rt_bf16_available())
		return bw_err(err, err_cap, -ENOTSUP, "NHWC bf16 convolutions need the CPU kernels at the amx level");
	if (shape == NULL || shape->type != RT_ATTR_INTS || shape->count != 4)
		return bw_err(err, err_cap, -EINVAL, "attribute 'weight_shape' must be 4 ints");
	if (x->rank != 4 || group != 1)
		return bw_err(err, err_cap, -EINVAL, "input 'X' must be 4-D NHWC, the conv ungrouped");
	p->n = x->dims[0];
	p->h = x->dims[1];
	p->w = x->dims[2];
	p->c = x->dims[3];
	p->m = shape->ints[0];
	p->kh = shape->ints[2];
	p->kw = shape->ints[3];
	if (p->h < 0 || p->w < 0 || p->c < 0)
		return bw_err(err, err_cap, -ENOTSUP, "symbolic spatial or channel dims are not supported");
	if (shape->ints[1] != p->c || p->c < 1 || p->m < 1 || p->kh < 1 || p->kw < 1)
		return bw_err(err, err_cap, -EINVAL, "weight_shape [%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64
			      "] does not fit 'X' of %" PRId64 " channels", shape->ints[0], shape->ints[1], shape->ints[2],
			      shape->ints[3], p->c);
	x_nchw.dims[0] = p->n;
	x_nchw.dims[1] = p->c;
	x_nchw.dims[2] = p->h;
	x_nchw.dims[3] = p->w;
	if ((rc = rt_k_window_init(node, &x_nchw, &shape->ints[2], false, true, &p->win, err, err_cap)) < 0)
		return rc;
	if (p->win.dilation[0] != 1 || p->win.dilation[1] != 1)
		return bw_err(err, err_cap, -EINVAL, "NHWC convolutions are undilated");
	p->ho = p->win.out[0];
	p->wo = p->win.out[1];
	if (p->ho < 1 || p->wo < 1)
		return bw_err(err, err_cap, -EINVAL, "the output would be empty");
	k = rt_bf16_conv_depth(p->c, p->kh, p->kw, p->win.stride);
	if (inputs[1].rank != 1 || rt_tensor_elems(&inputs[1]) != (int64_t)rt_bf16_packed_b_elems(k, p->m))
		return bw_err(err, err_cap, -EINVAL, "input 'W' must hold %zu packed bf16 values",
			      rt_bf16_packed_b_elems(k, p->m));
	p->hp = p->h + p->win.pad_begin[0] + p->win.pad_end[0];
	p->wp = p->w + p->win.pad_begin[1] + p->win.pad_end[1];
	p->depth = (p->kh * p->kw * p->c + 31) / 32 * 32;
	if (s2d_applies(p->c, p->kh, p->kw, p->win.stride)) {
		p->mode = NHWC_S2D;
		p->kh2 = (p->kh + 1) / 2;
		p->kw2 = (p->kw + 1) / 2;
		/* every tap of every output pixel inside the copy */
		p->hp2 = (p->hp + 1) / 2 > p->ho + p->kh2 - 1 ? (p->hp + 1) / 2 : p->ho + p->kh2 - 1;
		p->wp2 = (p->wp + 1) / 2 > p->wo + p->kw2 - 1 ? (p->wp + 1) / 2 : p->wo + p->kw2 - 1;
	} else if (p->win.stride[0] != 1 || p->win.stride[1] != 1 || p->kh * p->kw > NHWC_TAPS_MAX || p->c % 32 != 0)
		p->mode = NHWC_GATHER;
	else if (p->kh == 1 && p->kw == 1 && p->hp == p->h && p->wp == p->w)
		p->mode = NHWC_DIRECT;
	else
		p->mode = NHWC_PADDED;
	return 0;
}

RT_K_INFER(fused_conv_nhwc)
{
	struct rt_k_act_spec act;
	struct nhwc_plan p;
	struct rt_tensor *y = &outputs[0];
	int rc = nhwc_plan(node, inputs, &p, err, err_cap);

	if (rc < 0 || (rc = rt_k_act_read(node, &act, err, err_cap)) < 0)
		return rc;
	if (act.kind == RT_K_ACT_GELU)
		return bw_err(err, err_cap, -ENOTSUP, "FusedConvNhwc does not apply Gelu");
	*y = (struct rt_tensor){ .dtype = BW_DTYPE_BFLOAT16, .rank = 4, .dims = { p.n, p.ho, p.wo, p.m } };
	if (rt_k_has_input(node, inputs, 2) && (inputs[2].dtype != BW_DTYPE_FLOAT || inputs[2].rank != 1 ||
						inputs[2].dims[0] != p.m))
		return bw_err(err, err_cap, -EINVAL, "input 'B' must be %" PRId64 " floats", p.m);
	if (rt_k_has_input(node, inputs, 3)) {
		const struct rt_tensor *z = &inputs[3];

		if (z->dtype != BW_DTYPE_BFLOAT16 || z->rank != 4 || memcmp(z->dims, y->dims, 4 * sizeof(int64_t)) != 0)
			return bw_err(err, err_cap, -EINVAL, "input 'Z' must be bf16 of the output's shape");
	}
	return 0;
}

/*
 * The padded copies and gathered rows are made a part at a time, each consumed by the GEMM while it
 * is still in L2: images of their padded copies, rows of their gathered ones, up to about
 * NHWC_PART_BYTES (at a batch of 32, ResNet-50's first stage would otherwise copy 13 MiB out to
 * memory and read it back; the stem's gathered rows are 4 MiB an image).
 */
#define NHWC_PART_BYTES (1 << 20)

/* Images a part holds when each image's copy is h x w pixels of c bf16 values: at least one. */
static int64_t part_images(const struct nhwc_plan *p, int64_t h, int64_t w, int64_t c)
{
	int64_t per = h * w * c * (int64_t)sizeof(uint16_t), k = NHWC_PART_BYTES / (per > 0 ? per : 1);

	return k < 1 ? 1 : k > p->n ? p->n : k;
}

static int64_t padded_images(const struct nhwc_plan *p)
{
	return part_images(p, p->hp, p->wp, p->c);
}

static int64_t s2d_images(const struct nhwc_plan *p)
{
	return part_images(p, p->hp2, p->wp2, S2D_CH);
}

static int64_t gathered_rows(const struct nhwc_plan *p)
{
	int64_t rows = p->n * p->ho * p->wo, k = NHWC_PART_BYTES / (p->depth * (int64_t)sizeof(uint16_t)) / 32 * 32;

	return k < 32 ? 32 : k > rows ? rows : k;
}

RT_K_SCRATCH(fused_conv_nhwc)
{
	struct nhwc_plan p;
	char err[RT_ERR_MAX];

	if (nhwc_plan(node, inputs, &p, err, sizeof(err)) < 0 || p.n < 0)
		return 0;
	switch (p.mode) {
	case NHWC_PADDED: return (size_t)(padded_images(&p) * p.hp * p.wp * p.c) * sizeof(uint16_t);
	case NHWC_GATHER: return (size_t)(gathered_rows(&p) * p.depth) * sizeof(uint16_t);
	case NHWC_S2D: return (size_t)(s2d_images(&p) * p.hp2 * p.wp2 * S2D_CH) * sizeof(uint16_t);
	default: return 0;
	}
}

/* Images first..first+count-1 of X into the interiors of their zero-padded copies. */
static void pad_copy(const struct nhwc_plan *p, const uint16_t *x, int64_t first, int64_t count, uint16_t *xp)
{
	int64_t top = p->win.pad_begin[0], left = p->win.pad_begin[1], right = p->wp - p->w - left;
	size_t px = (size_t)p->c * sizeof(uint16_t);

	x += first * p->h * p->w * p->c;
	for (int64_t b = 0; b < count; b++) {
		for (int64_t y = 0; y < p->hp; y++) {
			uint16_t *row = xp + ((b * p->hp + y) * p->wp) * p->c;
			int64_t iy = y - top;

			if (iy < 0 || iy >= p->h) {
				memset(row, 0, (size_t)p->wp * px);
				continue;
			}
			memset(row, 0, (size_t)left * px);
			memcpy(row + left * p->c, x + ((b * p->h + iy) * p->w) * p->c, (size_t)p->w * px);
			memset(row + (left + p->w) * p->c, 0, (size_t)right * px);
		}
	}
}

#define AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

/* n bf16 values from src (NULL: zeros) to dst, 32 to a masked vector move. */
AVX512_TARGET static inline void copy_bf16(uint16_t *dst, const uint16_t *src, int64_t n)
{
	for (int64_t i = 0; i < n; i += 32) {
		__mmask32 m = n - i >= 32 ? 0xffffffffu : (__mmask32)((1u << (n - i)) - 1);

		_mm512_mask_storeu_epi16(dst + i, m, src != NULL ? _mm512_maskz_loadu_epi16(m, src + i) : _mm512_setzero_si512());
	}
}

/* A window row that crosses the image's left or right edge: each tap's c channels, or zeros. */
AVX512_TARGET static void gather_edge(uint16_t *r, const uint16_t *line, int64_t ix0, int64_t kw, int64_t w, int64_t c)
{
	for (int64_t kx = 0; kx < kw; kx++) {
		int64_t ix = ix0 + kx;

		copy_bf16(r + kx * c, ix >= 0 && ix < w ? line + ix * c : NULL, c);
	}
}

/* n runs of at most 32 values (mask m), from src on at step apart into rows depth apart. */
AVX512_TARGET static inline void copy_runs(uint16_t *r, int64_t depth, const uint16_t *src, int64_t step, int64_t n,
					   __mmask32 m)
{
	for (int64_t i = 0; i < n; i++, r += depth, src += step)
		_mm512_mask_storeu_epi16(r, m, _mm512_maskz_loadu_epi16(m, src));
}

/*
 * Each output pixel's row: for every tap (ky, kx) the input pixel's c channels, or zeros in the
 * padding, then zeros up to depth. A window row wholly inside the image is one run of kw * c values
 * (the stem's 7 x 3 channels: one masked move). The pixels are taken an output row's run at a time,
 * window rows outside and pixels inside, so that a window row's input line, its mask and which
 * pixels cross an edge are worked out once per run, not per pixel and tap.
 */
AVX512_TARGET static void gather_rows(const struct nhwc_plan *p, const uint16_t *x, int64_t first, int64_t count,
				      uint16_t *rows)
{
	const int64_t c = p->c, kh = p->kh, kw = p->kw, h = p->h, w = p->w, ho = p->ho, wo = p->wo, depth = p->depth;
	const int64_t sy = p->win.stride[0], sx = p->win.stride[1], pad_y = p->win.pad_begin[0], pad_x = p->win.pad_begin[1];
	const int64_t run = kw * c, tail = depth - kh * run;
	/* the output columns whose window rows lie wholly inside the image: inner_lo..inner_hi */
	const int64_t inner_lo = (pad_x + sx - 1) / sx, inner_hi = w - kw + pad_x >= 0 ? (w - kw + pad_x) / sx : -1;
	const __mmask32 run_mask = run >= 32 ? 0xffffffffu : (__mmask32)((1u << run) - 1);
	const __mmask32 tail_mask = (__mmask32)((1ull << tail) - 1); /* depth: kh * run rounded up to 32 */
	int64_t b = first / (ho * wo), oy = first / wo % ho, ox = first % wo;

	for (int64_t q = 0; q < count;) {
		int64_t seg = count - q < wo - ox ? count - q : wo - ox, end = ox + seg;
		/* the run's pixels ox..end as edge ones below lo, inner ones lo..hi, edge ones from hi */
		int64_t lo = inner_lo < ox ? ox : inner_lo > end ? end : inner_lo;
		int64_t hi = inner_hi + 1 < lo ? lo : inner_hi + 1 > end ? end : inner_hi + 1;
		uint16_t *first_row = rows + q * depth;

		for (int64_t ky = 0; ky < kh; ky++) {
			int64_t iy = oy * sy + ky - pad_y, o = ox;
			uint16_t *r = first_row + ky * run;
			const uint16_t *line;

			if (iy < 0 || iy >= h) {
				for (; o < end; o++, r += depth)
					copy_bf16(r, NULL, run);
				continue;
			}
			line = x + (b * h + iy) * w * c;

			for (; o < lo; o++, r += depth)
				gather_edge(r, line, o * sx - pad_x, kw, w, c);
			if (run <= 32) {
				copy_runs(r, depth, line + (o * sx - pad_x) * c, sx * c, hi - o, run_mask);
				r += (hi - o) * depth;
				o = hi;
			}
			for (; o < hi; o++, r += depth)
				copy_bf16(r, line + (o * sx - pad_x) * c, run);
			for (; o < end; o++, r += depth)
				gather_edge(r, line, o * sx - pad_x, kw, w, c);
		}
		if (tail > 0)
			for (int64_t i = 0; i < seg; i++)
				_mm512_mask_storeu_epi16(first_row + i * depth + kh * run, tail_mask, _mm512_setzero_si512());
		q += seg;
		ox = end;
		if (ox == wo) {
			ox = 0;
			if (++oy == ho) {
				oy = 0;
				b++;
			}
		}
	}
}

/*
 * Images first..first+count-1 of X into their space-to-depth copies: pixel (Y, X) of a copy holds,
 * at channel (py * 2 + px) * c + i, the padded image's pixel (2Y + py, 2X + px) channel i; zeros
 * in the padding and in channels 4c..S2D_CH-1. A row of the block (py) is 2c values contiguous in
 * X when both its pixels are inside: one masked move.
 */
AVX512_TARGET static void s2d_copy(const struct nhwc_plan *p, const uint16_t *x, int64_t first, int64_t count,
				   uint16_t *xs)
{
	const int64_t c = p->c, h = p->h, w = p->w, hp2 = p->hp2, wp2 = p->wp2;
	const int64_t top = p->win.pad_begin[0], left = p->win.pad_begin[1];
	const __mmask8 pair = (__mmask8)((1u << (2 * c)) - 1);

	memset(xs, 0, (size_t)(count * hp2 * wp2 * S2D_CH) * sizeof(uint16_t));
	x += first * h * w * c;
	for (int64_t b = 0; b < count; b++) {
		for (int64_t yy = 0; yy < hp2; yy++) {
			for (int64_t py = 0; py < 2; py++) {
				int64_t iy = 2 * yy + py - top;
				const uint16_t *line;
				uint16_t *d = xs + ((b * hp2 + yy) * wp2) * S2D_CH + py * 2 * c;

				if (iy < 0 || iy >= h)
					continue;
				line = x + (b * h + iy) * w * c;
				for (int64_t xx = 0; xx < wp2; xx++, d += S2D_CH) {
					int64_t ix = 2 * xx - left;

					if (ix >= 0 && ix + 1 < w) {
						_mm_mask_storeu_epi16(d, pair, _mm_maskz_loadu_epi16(pair, line + ix * c));
						continue;
					}
					for (int64_t px = 0; px < 2; px++)
						if (ix + px >= 0 && ix + px < w)
							memcpy(d + px * c, line + (ix + px) * c, (size_t)c * sizeof(uint16_t));
				}
			}
		}
	}
}

/* Makes images first..first+count-1 of X into scratch, as a mode's taps read them. */
typedef void nhwc_copy_fn(const struct nhwc_plan *p, const uint16_t *x, int64_t first, int64_t count, uint16_t *xs);

/*
 * The batch a part of `part` images at a time: each part copied into scratch (padded, or space to
 * depth), then the GEMM over the copy's grid, hg x wg rows an image, output pixel (y, x) at grid
 * row (y, x); the last image's rows past its last pixel are not computed, so no tap reads past
 * the copy.
 */
static void run_on_copies(const struct nhwc_plan *p, const struct rt_bf16_rows *a, int64_t hg, int64_t wg, int64_t part,
			  nhwc_copy_fn *copy, const struct rt_tensor *inputs, const uint16_t *z,
			  struct rt_bf16_epilogue *ep, uint16_t *y, void *scratch)
{
	struct rt_bf16_grid grid = { .per_image = hg * wg, .width = wg, .valid_h = p->ho, .valid_w = p->wo };

	for (int64_t b = 0; b < p->n; b += part) {
		int64_t count = p->n - b < part ? p->n - b : part, out = b * p->ho * p->wo * p->m;

		copy(p, inputs[0].data, b, count, scratch);
		ep->z = z != NULL ? z + out : NULL;
		rt_bf16_gemm_rows((count - 1) * hg * wg + (p->ho - 1) * wg + p->wo, p->m, a, &grid, inputs[1].data, ep,
				  y + out);
	}
}

RT_K_RUN(fused_conv_nhwc)
{
	struct nhwc_plan p;
	int64_t tap_off[NHWC_TAPS_MAX] = { 0 }, part;
	struct rt_bf16_rows a = { .ntaps = 1, .tap_off = tap_off };
	uint16_t *y = outputs[0].data;
	struct rt_bf16_grid grid;
	const float *bias = rt_k_has_input(node, inputs, 2) ? inputs[2].data : NULL;
	const uint16_t *z = rt_k_has_input(node, inputs, 3) ? inputs[3].data : NULL;
	struct rt_bf16_epilogue ep = { .alpha = 1.0f, .bias = bias };
	int rc = nhwc_plan(node, inputs, &p, err, err_cap);

	if (rc < 0 || (rc = rt_k_act_read(node, &ep.act, err, err_cap)) < 0)
		return rc;
	ep.ldc = p.m;
	if (p.n == 0)
		return 0;
	if (p.mode != NHWC_DIRECT && scratch == NULL)
		return bw_err(err, err_cap, -EINVAL, "FusedConvNhwc needs scratch memory and got none");
	switch (p.mode) {
	case NHWC_DIRECT:
		a.base = inputs[0].data;
		a.row_stride = a.depth = p.c;
		grid = (struct rt_bf16_grid){ .per_image = p.ho * p.wo, .width = p.wo, .valid_h = p.ho, .valid_w = p.wo };
		ep.z = z;
		rt_bf16_gemm_rows(p.n * p.ho * p.wo, p.m, &a, &grid, inputs[1].data, &ep, y);
		break;
	case NHWC_PADDED:
		a.base = scratch;
		a.row_stride = a.depth = p.c;
		a.ntaps = (int)(p.kh * p.kw);
		for (int64_t ky = 0; ky < p.kh; ky++)
			for (int64_t kx = 0; kx < p.kw; kx++)
				tap_off[ky * p.kw + kx] = (ky * p.wp + kx) * p.c;
		run_on_copies(&p, &a, p.hp, p.wp, padded_images(&p), pad_copy, inputs, z, &ep, y, scratch);
		break;
	case NHWC_S2D:
		a.base = scratch;
		a.row_stride = S2D_CH;
		a.depth = p.kw2 * S2D_CH;
		a.ntaps = (int)p.kh2;
		for (int64_t t = 0; t < p.kh2; t++)
			tap_off[t] = t * p.wp2 * S2D_CH;
		run_on_copies(&p, &a, p.hp2, p.wp2, s2d_images(&p), s2d_copy, inputs, z, &ep, y, scratch);
		break;
	case NHWC_GATHER:
		a.base = scratch;
		a.row_stride = a.depth = p.depth;
		part = gathered_rows(&p);
		for (int64_t r = 0, rows = p.n * p.ho * p.wo; r < rows; r += part) {
			int64_t count = rows - r < part ? rows - r : part;

			gather_rows(&p, inputs[0].data, r, count, scratch);
			grid = (struct rt_bf16_grid){ .per_image = count, .width = count, .valid_h = 1, .valid_w = count };
			ep.z = z != NULL ? z + r * p.m : NULL;
			rt_bf16_gemm_rows(count, p.m, &a, &grid, inputs[1].data, &ep, y + r * p.m);
		}
		break;
	}
	return 0;
}

/*
 * The output may take the residual's bytes: every mode ends in rt_bf16_gemm_rows, whose epilogue
 * loads a row's 32 residual values and then stores the same row's 32 outputs, and nothing else
 * reads Z. Where Z dies here (a bottleneck block's last conv) that saves the output's own lines:
 * ResNet-50's 64 -> 256 conv with its residual, alone at batch 1 on a Sapphire Rapids core, took
 * 163-187 us in place against 193-219 (oneDNN's sum post-op is in place too).
 */
int rt_k_fused_conv_nhwc_in_place(const struct rt_node *node, const struct rt_tensor *inputs,
				  const struct rt_tensor *outputs)
{
	(void)outputs;
	return rt_k_has_input(node, inputs, 3) ? 3 : -1;
}

/* ---- the region's edges ------------------------------------------------------------------------- */

RT_K_INFER(to_nhwc_bf16)
{
	const struct rt_tensor *x = &inputs[0];
	int rc = rt_k_need_input(node, inputs, 0, "X", RT_DTYPE_BIT(BW_DTYPE_FLOAT), err, err_cap);

	if (rc < 0)
		return rc;
	if (!rt_bf16_available())
		return bw_err(err, err_cap, -ENOTSUP, "NHWC bf16 conversions need the CPU kernels at the amx level");
	if (x->rank != 4)
		return bw_err(err, err_cap, -EINVAL, "input 'X' must be 4-D NCHW");
	outputs[0] = (struct rt_tensor){ .dtype = BW_DTYPE_BFLOAT16, .rank = 4,
					 .dims = { x->dims[0], x->dims[2], x->dims[3], x->dims[1] } };
	return 0;
}

RT_K_RUN(to_nhwc_bf16)
{
	const struct rt_tensor *x = &inputs[0];
	int64_t n = x->dims[0], c = x->dims[1], hw = x->dims[2] * x->dims[3];
	const float *src = x->data;
	uint16_t *dst = outputs[0].data;

	for (int64_t b = 0; b < n; b++, src += c * hw, dst += c * hw)
		rt_bf16_nchw_to_nhwc(src, c, hw, dst);
	return 0;
}

RT_K_INFER(from_nhwc_bf16)
{
	const struct rt_tensor *x = &inputs[0];
	int rc = rt_k_need_input(node, inputs, 0, "X", RT_DTYPE_BIT(BW_DTYPE_BFLOAT16), err, err_cap);

	if (rc < 0)
		return rc;
	if (!rt_bf16_available())
		return bw_err(err, err_cap, -ENOTSUP, "NHWC bf16 conversions need the CPU kernels at the amx level");
	if (x->rank != 4)
		return bw_err(err, err_cap, -EINVAL, "input 'X' must be 4-D NHWC");
	outputs[0] = (struct rt_tensor){ .dtype = BW_DTYPE_FLOAT, .rank = 4,
					 .dims = { x->dims[0], x->dims[3], x->dims[1], x->dims[2] } };
	return 0;
}

RT_K_RUN(from_nhwc_bf16)
{
	const struct rt_tensor *x = &inputs[0];
	int64_t n = x->dims[0], c = x->dims[3], hw = x->dims[1] * x->dims[2];
	const uint16_t *src = x->data;
	float *dst = outputs[0].data;

	for (int64_t b = 0; b < n; b++, src += c * hw, dst += c * hw)
		rt_bf16_nhwc_to_nchw(src, c, hw, dst);
	return 0;
}

/* ---- MaxPool on NHWC bf16 (the stem's, between its conv and the first block) -------------------- */

static int maxpool_nhwc_setup(const struct rt_node *node, const struct rt_tensor *inputs, struct rt_k_window *w,
			      char *err, size_t err_cap)
{
	const struct rt_tensor *x = &inputs[0];
	struct rt_tensor x_nchw = { .dtype = BW_DTYPE_FLOAT, .rank = 4 };
	int rc = rt_k_need_input(node, inputs, 0, "X", RT_DTYPE_BIT(BW_DTYPE_BFLOAT16), err, err_cap);

	if (rc < 0)
		return rc;
	if (!rt_bf16_available())
		return bw_err(err, err_cap, -ENOTSUP, "NHWC bf16 pooling needs the CPU kernels at the amx level");
	if (x->rank != 4)
		return bw_err(err, err_cap, -EINVAL, "input 'X' must be 4-D NHWC");
	if (rt_k_has_output(node, 1))
		return bw_err(err, err_cap, -ENOTSUP, "output Indices is not computed here");
	x_nchw.dims[0] = x->dims[0];
	x_nchw.dims[1] = x->dims[3];
	x_nchw.dims[2] = x->dims[1];
	x_nchw.dims[3] = x->dims[2];
	return rt_k_window_init(node, &x_nchw, NULL, true, false, w, err, err_cap);
}

RT_K_INFER(maxpool_nhwc_bf16)
{
	struct rt_k_window w;
	int rc = maxpool_nhwc_setup(node, inputs, &w, err, err_cap);

	if (rc < 0)
		return rc;
	outputs[0] = (struct rt_tensor){ .dtype = BW_DTYPE_BFLOAT16, .rank = 4,
					 .dims = { inputs[0].dims[0], w.out[0], w.out[1], inputs[0].dims[3] } };
	return 0;
}

/* 32 bf16 of mask m as two fp32 vectors. */
AVX512_TARGET static inline void widen32(const uint16_t *p, __mmask32 m, __m512 *lo, __m512 *hi)
{
	__m512i v = _mm512_maskz_loadu_epi16(m, p);

	*lo = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(v)), 16));
	*hi = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(v, 1)), 16));
}

/*
 * Per output pixel and 32 channels, the max over the window's pixels inside the image, in fp32
 * (every bf16 is one exactly, so rounding back is exact). As the NCHW kernels do, the window's
 * first pixel is taken and replaced only by a greater value; a window wholly in the padding gives
 * -inf.
 */
AVX512_TARGET RT_K_RUN(maxpool_nhwc_bf16)
{
	struct rt_k_window w;
	const struct rt_tensor *x = &inputs[0];
	int64_t c = x->dims[3], ih = x->dims[1], iw = x->dims[2];
	const uint16_t *src = x->data;
	uint16_t *dst = outputs[0].data;
	int rc = maxpool_nhwc_setup(node, inputs, &w, err, err_cap);

	if (rc < 0)
		return rc;
	for (int64_t b = 0; b < x->dims[0]; b++) {
		for (int64_t oy = 0; oy < w.out[0]; oy++) {
			int64_t y0 = oy * w.stride[0] - w.pad_begin[0], y1 = y0 + w.kernel[0];

			y0 = y0 < 0 ? 0 : y0;
			y1 = y1 > ih ? ih : y1;
			for (int64_t ox = 0; ox < w.out[1]; ox++) {
				int64_t x0 = ox * w.stride[1] - w.pad_begin[1], x1 = x0 + w.kernel[1];
				uint16_t *out = dst + ((b * w.out[0] + oy) * w.out[1] + ox) * c;

				x0 = x0 < 0 ? 0 : x0;
				x1 = x1 > iw ? iw : x1;
				for (int64_t ch = 0; ch < c; ch += 32) {
					__mmask32 m = c - ch >= 32 ? 0xffffffffu : (__mmask32)((1u << (c - ch)) - 1);
					__m512 lo = _mm512_set1_ps(-__builtin_inff()), hi = lo;
					bool first = true;

					for (int64_t yy = y0; yy < y1; yy++) {
						for (int64_t xx = x0; xx < x1; xx++) {
							__m512 l, h;

							widen32(src + ((b * ih + yy) * iw + xx) * c + ch, m, &l, &h);
							/* max(acc, v) keeps acc where v is not greater, NaN included */
							lo = first ? l : _mm512_mask_mov_ps(lo, _mm512_cmp_ps_mask(l, lo, _CMP_GT_OQ), l);
							hi = first ? h : _mm512_mask_mov_ps(hi, _mm512_cmp_ps_mask(h, hi, _CMP_GT_OQ), h);
							first = false;
						}
					}
					_mm512_mask_storeu_epi16(out + ch, m, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
				}
			}
		}
	}
	return 0;
}
