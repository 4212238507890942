/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The parts of the CUDA module's cuDNN code (gpu/cudnn.c, included here to reach its static functions)
 * that need no device, on any host where the module is built: where cuDNN is looked for and why it is
 * not used (BW_CUDNN=0, a missing $BW_CUDNN_LIB, a library without cuDNN's symbols), the library found
 * (the toolkit's, when it has one: every symbol resolved, version 9) with cudnnGetVersion, which works
 * without a device; the float16 conversion a bias goes through (program_math.h's, checked here for
 * the rounding cuDNN's HALF bias gets); and which CONV ops cuDNN is given (symmetric padding, one data
 * type, residual aliasing, either layout). Planning, recording and running need a GPU:
 * tests/gpu/test_gpu_cuda.c covers them there.
 */
#include <stdlib.h>
#include <unistd.h>

#include "../bw_cunit.h"

#include "../../gpu/cudnn.c"

/* cuda.c's, which this test does not link: nothing here reaches a CUDA call that fails */
int cuda_fail(struct gpu_dev *dev, const char *call, cudaError_t e, char *err, size_t cap)
{
	(void)dev;
	gpu_err(err, cap, "%s: error %d", call, (int)e);
	return -EIO;
}

static void env_reset(void)
{
	unsetenv(CUDNN_ENV_LIB);
	unsetenv(CUDNN_ENV_SWITCH);
}

static void test_open_disabled(void)
{
	struct gpu_dev dev = { 0 };

	env_reset();
	setenv(CUDNN_ENV_SWITCH, "0", 1);
	CU_ASSERT_EQUAL(cudnn_open(&dev), -ENOTSUP);
	CU_ASSERT_PTR_NULL(dev.dnn.lib);
	CU_ASSERT_PTR_NOT_NULL(strstr(dev.dnn_why, "BW_CUDNN=0"));
	/* asked once per device: the answer stands until the device closes */
	unsetenv(CUDNN_ENV_SWITCH);
	CU_ASSERT_EQUAL(cudnn_open(&dev), -ENOTSUP);
	CU_ASSERT_PTR_NOT_NULL(strstr(dev.dnn_why, "BW_CUDNN=0"));
	cudnn_close(&dev);
	CU_ASSERT_FALSE(dev.dnn_tried);
}

static void test_open_missing_file(void)
{
	struct gpu_dev dev = { 0 };

	env_reset();
	setenv(CUDNN_ENV_LIB, "/nonexistent/libcudnn.so.9", 1);
	CU_ASSERT_EQUAL(cudnn_open(&dev), -ENOTSUP);
	CU_ASSERT_PTR_NULL(dev.dnn.lib);
	CU_ASSERT_PTR_NOT_NULL(strstr(dev.dnn_why, "BW_CUDNN_LIB=/nonexistent/libcudnn.so.9"));
	cudnn_close(&dev);
	env_reset();
}

static void test_open_not_cudnn(void)
{
	struct gpu_dev dev = { 0 };

	env_reset();
	setenv(CUDNN_ENV_LIB, "libm.so.6", 1); /* loads, and has none of cuDNN's symbols */
	CU_ASSERT_EQUAL(cudnn_open(&dev), -ENOTSUP);
	CU_ASSERT_PTR_NULL(dev.dnn.lib);
	CU_ASSERT_PTR_NOT_NULL(strstr(dev.dnn_why, "no symbol cudnnGetVersion"));
	cudnn_close(&dev);
	env_reset();
}

/* Every function pointer of an opened struct cudnn_api is set. */
static void check_resolved(const struct cudnn_api *a)
{
	const char *p = (const char *)&a->get_version, *end = (const char *)(a + 1);

	for (; p + sizeof(void *) <= end; p += sizeof(void *)) {
		void *fn;

		memcpy(&fn, p, sizeof(fn));
		CU_ASSERT_PTR_NOT_NULL(fn);
	}
}

static void test_open_found(void)
{
	static const char toolkit[] = BW_CUDA_ROOT "/lib64/" CUDNN_SONAME;
	struct gpu_dev dev = { 0 };

	if (access(toolkit, R_OK) != 0) {
		printf("\n    (no %s: the found-library cases are not run)\n", toolkit);
		return;
	}
	env_reset();
	setenv(CUDNN_ENV_LIB, toolkit, 1);
	CU_ASSERT_EQUAL_FATAL(cudnn_open(&dev), 0);
	CU_ASSERT_STRING_EQUAL(dev.dnn.path, toolkit);
	CU_ASSERT_STRING_EQUAL(dev.dnn_why, "");
	CU_ASSERT_EQUAL(dev.dnn.version / 10000, 9);
	check_resolved(&dev.dnn);
	printf("\n    %s: cuDNN %zu\n", dev.dnn.path, dev.dnn.version);
	cudnn_close(&dev);
	CU_ASSERT_PTR_NULL(dev.dnn.lib);

	/* without the variable: the loader's path, then the toolkit, which has it */
	env_reset();
	CU_ASSERT_EQUAL(cudnn_open(&dev), 0);
	CU_ASSERT_STRING_EQUAL(dev.dnn_why, "");
	CU_ASSERT(strcmp(dev.dnn.path, CUDNN_SONAME) == 0 || strcmp(dev.dnn.path, toolkit) == 0);
	check_resolved(&dev.dnn);
	cudnn_close(&dev);
}

static float bits_f32(uint32_t x)
{
	float f;

	memcpy(&f, &x, sizeof(f));
	return f;
}

static void test_half(void)
{
	uint32_t v, bad = 0;

	CU_ASSERT_EQUAL(bw_float_to_half(0.0f), 0x0000);
	CU_ASSERT_EQUAL(bw_float_to_half(-0.0f), 0x8000);
	CU_ASSERT_EQUAL(bw_float_to_half(1.0f), 0x3c00);
	CU_ASSERT_EQUAL(bw_float_to_half(-2.0f), 0xc000);
	CU_ASSERT_EQUAL(bw_float_to_half(0.1f), 0x2e66);
	CU_ASSERT_EQUAL(bw_float_to_half(65504.0f), 0x7bff);     /* the largest half */
	CU_ASSERT_EQUAL(bw_float_to_half(65519.0f), 0x7bff);     /* below the midpoint to infinity */
	CU_ASSERT_EQUAL(bw_float_to_half(65520.0f), 0x7c00);     /* the midpoint rounds to even: infinity */
	CU_ASSERT_EQUAL(bw_float_to_half(1e10f), 0x7c00);
	CU_ASSERT_EQUAL(bw_float_to_half(-INFINITY), 0xfc00);
	CU_ASSERT_EQUAL(bw_float_to_half(NAN) & 0x7c00, 0x7c00);
	CU_ASSERT_NOT_EQUAL(bw_float_to_half(NAN) & 0x03ff, 0);
	CU_ASSERT_EQUAL(bw_float_to_half(1.0f + 0x1p-11f), 0x3c00);        /* a tie: to even */
	CU_ASSERT_EQUAL(bw_float_to_half(1.0f + 3 * 0x1p-11f), 0x3c02);    /* a tie: to even, upwards */
	CU_ASSERT_EQUAL(bw_float_to_half(0x1p-24f), 0x0001);               /* the smallest subnormal */
	CU_ASSERT_EQUAL(bw_float_to_half(0x1p-25f), 0x0000);               /* a tie with 0: to even */
	CU_ASSERT_EQUAL(bw_float_to_half(0x1.8p-25f), 0x0001);
	CU_ASSERT_EQUAL(bw_float_to_half(0x1p-14f), 0x0400);               /* the smallest normal */
	CU_ASSERT_EQUAL(bw_float_to_half(0x1.ffcp-15f), 0x0400);           /* a tie, up out of the subnormals */
	CU_ASSERT_EQUAL(bw_half_to_float(0x0001), 0x1p-24f);
	CU_ASSERT_EQUAL(bw_half_to_float(0x03ff), 0x1.ff8p-15f);
	CU_ASSERT_EQUAL(bw_half_to_float(0x3555), bits_f32(0x3eaaa000));   /* 0.333251953125 */
	CU_ASSERT(isinf(bw_half_to_float(0x7c00)) && bw_half_to_float(0x7c00) > 0);
	CU_ASSERT(isnan(bw_half_to_float(0x7e00)));
	/* every half that is not NaN goes to float and back unchanged */
	for (v = 0; v < 0x10000u; v++) {
		if ((v & 0x7c00u) == 0x7c00u && (v & 0x3ffu) != 0)
			continue;
		if (bw_float_to_half(bw_half_to_float((uint16_t)v)) != v && bad++ < 4)
			printf("\n    half 0x%04x -> %g -> 0x%04x", v, (double)bw_half_to_float((uint16_t)v),
			       bw_float_to_half(bw_half_to_float((uint16_t)v)));
	}
	CU_ASSERT_EQUAL(bad, 0);
}

static struct gpu_op conv_op(uint32_t dtype)
{
	struct gpu_op op = { .code = GPU_OP_CONV, .fn = GPU_ACT_RELU };

	op.in[0] = (struct gpu_ref){ .space = GPU_SPACE_ARENA, .dtype = dtype, .offset = 0 };
	op.in[1] = (struct gpu_ref){ .space = GPU_SPACE_CONST, .dtype = dtype, .offset = 0 };
	op.in[2] = (struct gpu_ref){ .space = GPU_SPACE_CONST, .dtype = dtype, .offset = 1024 };
	op.in[3] = (struct gpu_ref){ .space = GPU_SPACE_ARENA, .dtype = dtype, .offset = 8192 };
	op.out = (struct gpu_ref){ .space = GPU_SPACE_ARENA, .dtype = dtype, .offset = 4096 };
	/* x [2,4,7,7], 3x3 group 2 stride 2 pad 1 dilation 2 -> [2,4,3,3] */
	op.u.conv.n = 2, op.u.conv.c = 4, op.u.conv.h = 7, op.u.conv.w = 7, op.u.conv.m = 4;
	op.u.conv.oh = 3, op.u.conv.ow = 3, op.u.conv.kh = 3, op.u.conv.kw = 3;
	op.u.conv.stride_h = 2, op.u.conv.stride_w = 2, op.u.conv.pad_h = 1, op.u.conv.pad_w = 1;
	op.u.conv.dil_h = 2, op.u.conv.dil_w = 2, op.u.conv.group = 2;
	op.count = 72;
	return op;
}

static void test_conv_supported(void)
{
	struct gpu_op op = conv_op(BW_DTYPE_FLOAT);
	struct conv_key k, k2;
	char why[GPU_ERR_MAX];

	CU_ASSERT_TRUE(conv_supported(&op, &k, why, sizeof(why)));
	CU_ASSERT_EQUAL(k.geo[15], 2);
	CU_ASSERT_EQUAL(k.z_is_y, 0);
	/* the same op again: the same key, byte for byte (the search is shared) */
	CU_ASSERT_TRUE(conv_supported(&op, &k2, why, sizeof(why)));
	CU_ASSERT_EQUAL(memcmp(&k, &k2, sizeof(k)), 0);
	/* NHWC: the same problem in another layout, so another search */
	op.u.conv.nhwc = 1;
	CU_ASSERT_TRUE(conv_supported(&op, &k2, why, sizeof(why)));
	CU_ASSERT_EQUAL(k2.nhwc, 1);
	CU_ASSERT_NOT_EQUAL(memcmp(&k, &k2, sizeof(k)), 0);

	op = conv_op(BW_DTYPE_FLOAT16);
	CU_ASSERT_TRUE(conv_supported(&op, &k, why, sizeof(why)));
	op.in[2].dtype = BW_DTYPE_FLOAT; /* a float32 constant bias: converted at load */
	CU_ASSERT_TRUE(conv_supported(&op, &k, why, sizeof(why)));
	op.in[2].space = GPU_SPACE_ARENA; /* in the arena it cannot be */
	CU_ASSERT_FALSE(conv_supported(&op, &k, why, sizeof(why)));
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "bias dtype"));

	op = conv_op(BW_DTYPE_FLOAT);
	op.in[1].dtype = BW_DTYPE_FLOAT16;
	CU_ASSERT_FALSE(conv_supported(&op, &k, why, sizeof(why)));
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "mixed dtypes"));

	op = conv_op(BW_DTYPE_DOUBLE);
	CU_ASSERT_FALSE(conv_supported(&op, &k, why, sizeof(why)));

	/* ONNX end padding: one more output row than symmetric padding gives */
	op = conv_op(BW_DTYPE_FLOAT);
	op.u.conv.pad_h = 0;
	op.u.conv.oh = 2;
	CU_ASSERT_TRUE(conv_supported(&op, &k, why, sizeof(why))); /* (7 - 4 - 1) / 2 + 1 = 2: symmetric */
	op.u.conv.oh = 3;
	CU_ASSERT_FALSE(conv_supported(&op, &k, why, sizeof(why)));
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "symmetric"));

	/* a residual that is the output: allowed (beta = 1); one that straddles it: not */
	op = conv_op(BW_DTYPE_FLOAT);
	op.in[3].offset = op.out.offset;
	CU_ASSERT_TRUE(conv_supported(&op, &k, why, sizeof(why)));
	CU_ASSERT_EQUAL(k.z_is_y, 1);
	op.in[3].offset = op.out.offset + 64;
	CU_ASSERT_FALSE(conv_supported(&op, &k, why, sizeof(why)));
	op = conv_op(BW_DTYPE_FLOAT);
	op.out.offset = 64; /* inside x's 1568 bytes */
	CU_ASSERT_FALSE(conv_supported(&op, &k, why, sizeof(why)));
}

int main(void)
{
	static CU_TestInfo tests[] = {
		{ "BW_CUDNN=0: disabled, asked once", test_open_disabled },
		{ "BW_CUDNN_LIB missing: named, no fallback", test_open_missing_file },
		{ "BW_CUDNN_LIB not cuDNN: the missing symbol named", test_open_not_cudnn },
		{ "the toolkit's cuDNN: every symbol, version 9", test_open_found },
		{ "float16 conversion of a converted bias", test_half },
		{ "which CONV ops cuDNN is given", test_conv_supported },
		CU_TEST_INFO_NULL,
	};
	static CU_SuiteInfo suites[] = {
		{ "cudnn (no device)", NULL, NULL, NULL, NULL, tests },
		CU_SUITE_INFO_NULL,
	};

	return bw_cunit_run(suites);
}
