/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the .npy codec (client/npy.c): files numpy itself wrote (embedded below, so the test
 * needs no Python), the writer's bytes against numpy's, round trips of every dtype and rank, and each
 * kind of file the reader must refuse, with the reason it gives.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../bw_cunit.h"

#include "bwclient.h"

/*
 * Written by numpy 2.4 (numpy.save, or numpy.lib.format.write_array for versions 2.0 and 3.0):
 *   f32_2x3      np.arange(6, dtype='<f4').reshape(2, 3) * 0.5 - 1
 *   i64_3        np.array([1, -2, 3], dtype='<i8')
 *   f64_scalar   np.array(3.5, dtype='<f8')
 *   b1_2         np.array([True, False])
 *   u1_0x4       np.zeros((0, 4), dtype='|u1')
 *   f16_4        np.array([1, -2, 0.5, 65504], dtype='<f2')
 *   f32_v2/_v3   np.arange(4, dtype='<f4').reshape(2, 2), version (2, 0) / (3, 0)
 *   f32_fortran  np.asfortranarray(np.arange(6, dtype='<f4').reshape(2, 3))
 *   f32_big      np.array([1, 2], dtype='>f4')
 *   object       np.array([1, 'a'], dtype=object), allow_pickle=True (first 200 bytes)
 *   structured   np.zeros(2, dtype=[('a', '<f4'), ('b', '<i4')])
 *   u4_big_dims  np.zeros((1,) * 8, dtype='<u4')
 * String literals carry a NUL of their own: a fixture's length is sizeof - 1.
 */
static const char g_np_f32_2x3[] =
	"\223NUMPY\001\000v\000{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }         "
	"                                                 \012\000\000\200\277\000\000\000\277\000\000"
	"\000\000\000\000\000\077\000\000\200\077\000\000\300\077";
static const char g_np_i64_3[] =
	"\223NUMPY\001\000v\000{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }           "
	"                                                 \012\001\000\000\000\000\000\000\000\376\377"
	"\377\377\377\377\377\377\003\000\000\000\000\000\000\000";
static const char g_np_f64_scalar[] =
	"\223NUMPY\001\000v\000{'descr': '<f8', 'fortran_order': False, 'shape': (), }             "
	"                                                 \012\000\000\000\000\000\000\014@";
static const char g_np_b1_2[] =
	"\223NUMPY\001\000v\000{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }           "
	"                                                 \012\001\000";
static const char g_np_u1_0x4[] =
	"\223NUMPY\001\000v\000{'descr': '|u1', 'fortran_order': False, 'shape': (0, 4), }         "
	"                                                 \012";
static const char g_np_f16_4[] =
	"\223NUMPY\001\000v\000{'descr': '<f2', 'fortran_order': False, 'shape': (4,), }           "
	"                                                 \012\000<\000\300\0008\377{";
static const char g_np_f32_v2[] =
	"\223NUMPY\002\000t\000\000\000{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), } "
	"                                                       \012\000\000\000\000\000\000\200\077"
	"\000\000\000@\000\000@@";
static const char g_np_f32_v3[] =
	"\223NUMPY\003\000t\000\000\000{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), } "
	"                                                       \012\000\000\000\000\000\000\200\077"
	"\000\000\000@\000\000@@";
static const char g_np_f32_fortran[] =
	"\223NUMPY\001\000v\000{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }          "
	"                                                 \012\000\000\000\000\000\000@@\000\000\200"
	"\077\000\000\200@\000\000\000@\000\000\240@";
static const char g_np_f32_big[] =
	"\223NUMPY\001\000v\000{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }           "
	"                                                 \012\077\200\000\000@\000\000\000";
static const char g_np_object[] =
	"\223NUMPY\001\000v\000{'descr': '|O', 'fortran_order': False, 'shape': (2,), }            "
	"                                                 \012\200\004\225\220\000\000\000\000\000\000"
	"\000\214\026numpy._core.multiarray\224\214\014_reconstruct\224\223\224\214\005numpy\224\214"
	"\007ndarray\224\223";
static const char g_np_structured[] =
	"\223NUMPY\001\000v\000{'descr': [('a', '<f4'), ('b', '<i4')], 'fortran_order': False, 'sha"
	"pe': (2,), }                                     \012\000\000\000\000\000\000\000\000\000\000"
	"\000\000\000\000\000\000";
static const char g_np_u4_big_dims[] =
	"\223NUMPY\001\000v\000{'descr': '<u4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1,"
	" 1, 1), }                                        \012\000\000\000\000";

#define FIXTURE(name) g_np_##name, sizeof(g_np_##name) - 1

static char g_dir[] = "/tmp/bw_test_npy.XXXXXX";
static char g_err[256];

static const char *tmp_path(const char *name)
{
	static char path[512];

	snprintf(path, sizeof(path), "%s/%s", g_dir, name);
	return path;
}

static void put_file(const char *path, const void *bytes, size_t len)
{
	FILE *f = fopen(path, "wb");

	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL(fwrite(bytes, 1, len, f), len);
	CU_ASSERT_EQUAL(fclose(f), 0);
}

/* \return the file's bytes (malloc'd) and their count in *len. */
static uint8_t *get_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	long n;

	if (f == NULL)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = malloc((size_t)n + 1);
	*len = fread(buf, 1, (size_t)n, f);
	fclose(f);
	return buf;
}

/* Reads bytes as a file; \return bwc_npy_read's result. */
static int read_bytes(const void *bytes, size_t len, struct bwc_npy *t)
{
	const char *path = tmp_path("in.npy");

	put_file(path, bytes, len);
	g_err[0] = '\0';
	return bwc_npy_read(path, t, g_err, sizeof(g_err));
}

/* The reader must refuse the bytes with -EINVAL and a message naming the path and the reason. */
static void expect_refused(const void *bytes, size_t len, const char *reason)
{
	struct bwc_npy t;

	CU_ASSERT_EQUAL(read_bytes(bytes, len, &t), -EINVAL);
	CU_ASSERT_PTR_NULL(t.data);
	CU_ASSERT_PTR_NOT_NULL(strstr(g_err, "in.npy"));
	CU_ASSERT_PTR_NOT_NULL(strstr(g_err, reason));
	CU_ASSERT_PTR_NULL(strchr(g_err, '\n'));
	if (strstr(g_err, reason) == NULL)
		printf("\n  expected '%s' in: %s\n", reason, g_err);
}

/* A v1.0 file with a hand-written header, padded the way numpy pads. */
static size_t make_npy(uint8_t *out, const char *dict, const void *data, size_t nbytes)
{
	size_t n = strlen(dict), pad = 64 - (10 + n + 1) % 64, hlen = n + pad + 1;

	memcpy(out, "\x93NUMPY\x01\x00", 8);
	out[8] = (uint8_t)hlen;
	out[9] = (uint8_t)(hlen >> 8);
	memcpy(out + 10, dict, n);
	memset(out + 10 + n, ' ', pad);
	out[10 + n + pad] = '\n';
	memcpy(out + 10 + hlen, data, nbytes);
	return 10 + hlen + nbytes;
}

static void test_read_numpy_files(void)
{
	static const float f32[6] = { -1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f };
	static const int64_t i64[3] = { 1, -2, 3 };
	static const uint16_t f16[4] = { 0x3c00, 0xc000, 0x3800, 0x7bff };
	static const float f32_4[4] = { 0.0f, 1.0f, 2.0f, 3.0f };
	struct bwc_npy t;
	double d;

	CU_ASSERT_EQUAL_FATAL(read_bytes(FIXTURE(f32_2x3), &t), 0);
	CU_ASSERT_EQUAL(t.dtype, BW_DTYPE_FLOAT);
	CU_ASSERT_EQUAL(t.rank, 2);
	CU_ASSERT_EQUAL(t.dims[0], 2);
	CU_ASSERT_EQUAL(t.dims[1], 3);
	CU_ASSERT_EQUAL(t.nbytes, sizeof(f32));
	CU_ASSERT(memcmp(t.data, f32, sizeof(f32)) == 0);
	bwc_npy_free(&t);
	CU_ASSERT_PTR_NULL(t.data);

	CU_ASSERT_EQUAL_FATAL(read_bytes(FIXTURE(i64_3), &t), 0);
	CU_ASSERT_EQUAL(t.dtype, BW_DTYPE_INT64);
	CU_ASSERT_EQUAL(t.rank, 1);
	CU_ASSERT_EQUAL(t.dims[0], 3);
	CU_ASSERT(t.nbytes == sizeof(i64) && memcmp(t.data, i64, sizeof(i64)) == 0);
	bwc_npy_free(&t);

	CU_ASSERT_EQUAL_FATAL(read_bytes(FIXTURE(f64_scalar), &t), 0);
	CU_ASSERT_EQUAL(t.dtype, BW_DTYPE_DOUBLE);
	CU_ASSERT_EQUAL(t.rank, 0);
	CU_ASSERT_EQUAL_FATAL(t.nbytes, 8);
	memcpy(&d, t.data, 8);
	CU_ASSERT_EQUAL(d, 3.5);
	bwc_npy_free(&t);

	CU_ASSERT_EQUAL_FATAL(read_bytes(FIXTURE(b1_2), &t), 0);
	CU_ASSERT_EQUAL(t.dtype, BW_DTYPE_BOOL);
	CU_ASSERT(t.nbytes == 2 && ((uint8_t *)t.data)[0] == 1 && ((uint8_t *)t.data)[1] == 0);
	bwc_npy_free(&t);

	CU_ASSERT_EQUAL_FATAL(read_bytes(FIXTURE(u1_0x4), &t), 0);
	CU_ASSERT_EQUAL(t.dtype, BW_DTYPE_UINT8);
	CU_ASSERT(t.rank == 2 && t.dims[0] == 0 && t.dims[1] == 4 && t.nbytes == 0);
	CU_ASSERT_PTR_NOT_NULL(t.data); /* an empty tensor still gets something to free */
	bwc_npy_free(&t);

	CU_ASSERT_EQUAL_FATAL(read_bytes(FIXTURE(f16_4), &t), 0);
	CU_ASSERT_EQUAL(t.dtype, BW_DTYPE_FLOAT16);
	CU_ASSERT(t.nbytes == sizeof(f16) && memcmp(t.data, f16, sizeof(f16)) == 0);
	bwc_npy_free(&t);

	CU_ASSERT_EQUAL_FATAL(read_bytes(FIXTURE(f32_v2), &t), 0);
	CU_ASSERT(t.rank == 2 && t.dims[0] == 2 && t.dims[1] == 2);
	CU_ASSERT(t.nbytes == sizeof(f32_4) && memcmp(t.data, f32_4, sizeof(f32_4)) == 0);
	bwc_npy_free(&t);

	CU_ASSERT_EQUAL_FATAL(read_bytes(FIXTURE(f32_v3), &t), 0);
	CU_ASSERT(t.nbytes == sizeof(f32_4) && memcmp(t.data, f32_4, sizeof(f32_4)) == 0);
	bwc_npy_free(&t);

	CU_ASSERT_EQUAL_FATAL(read_bytes(FIXTURE(u4_big_dims), &t), 0);
	CU_ASSERT(t.dtype == BW_DTYPE_UINT32 && t.rank == 8 && t.dims[7] == 1 && t.nbytes == 4);
	bwc_npy_free(&t);
}

/* The writer's bytes equal numpy's for the same arrays, padding and all. */
static void expect_same_as_numpy(const char *numpy_bytes, size_t numpy_len)
{
	const char *path = tmp_path("out.npy");
	struct bwc_npy t;
	uint8_t *mine;
	size_t len = 0;

	CU_ASSERT_EQUAL_FATAL(read_bytes(numpy_bytes, numpy_len, &t), 0);
	CU_ASSERT_EQUAL_FATAL(bwc_npy_write(path, t.dtype, t.rank, t.dims, t.data, g_err, sizeof(g_err)), 0);
	mine = get_file(path, &len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(mine);
	CU_ASSERT_EQUAL(len, numpy_len);
	CU_ASSERT(len == numpy_len && memcmp(mine, numpy_bytes, len) == 0);
	free(mine);
	bwc_npy_free(&t);
}

static void test_write_matches_numpy(void)
{
	expect_same_as_numpy(FIXTURE(f32_2x3));
	expect_same_as_numpy(FIXTURE(i64_3));
	expect_same_as_numpy(FIXTURE(f64_scalar));
	expect_same_as_numpy(FIXTURE(b1_2));
	expect_same_as_numpy(FIXTURE(u1_0x4));
	expect_same_as_numpy(FIXTURE(f16_4));
	expect_same_as_numpy(FIXTURE(u4_big_dims));
}

/* Every dtype at ranks 0..8, with data that differs per byte so a shifted read would show. */
static void test_round_trip(void)
{
	static const uint8_t dtypes[] = {
		BW_DTYPE_FLOAT, BW_DTYPE_DOUBLE, BW_DTYPE_FLOAT16, BW_DTYPE_INT64, BW_DTYPE_INT32,
		BW_DTYPE_INT16, BW_DTYPE_INT8, BW_DTYPE_UINT8, BW_DTYPE_UINT16, BW_DTYPE_UINT32,
		BW_DTYPE_UINT64, BW_DTYPE_BOOL,
	};
	const char *path = tmp_path("rt.npy");
	uint32_t dims[BW_MAX_RANK];
	uint8_t data[4096];
	struct bwc_npy t;
	unsigned int i, rank, d;
	size_t nbytes;

	for (i = 0; i < sizeof(dtypes); i++) {
		for (rank = 0; rank <= BW_MAX_RANK; rank++) {
			nbytes = bw_dtype_size(dtypes[i]);
			for (d = 0; d < rank; d++) {
				dims[d] = 1 + (rank + d) % 3; /* 1..3: at most 3^8 elements */
				nbytes *= dims[d];
			}
			if (nbytes > sizeof(data))
				continue;
			for (d = 0; d < nbytes; d++)
				data[d] = dtypes[i] == BW_DTYPE_BOOL ? (uint8_t)(d & 1) : (uint8_t)(d * 37 + i);
			CU_ASSERT_EQUAL_FATAL(bwc_npy_write(path, dtypes[i], (uint8_t)rank, dims, data, g_err,
							    sizeof(g_err)), 0);
			CU_ASSERT_EQUAL_FATAL(bwc_npy_read(path, &t, g_err, sizeof(g_err)), 0);
			CU_ASSERT_EQUAL(t.dtype, dtypes[i]);
			CU_ASSERT_EQUAL(t.rank, rank);
			CU_ASSERT(memcmp(t.dims, dims, rank * sizeof(dims[0])) == 0);
			CU_ASSERT_EQUAL(t.nbytes, nbytes);
			CU_ASSERT(memcmp(t.data, data, nbytes) == 0);
			bwc_npy_free(&t);
		}
	}
	/* A large dim: 70000 floats, past anything a uint16 count could hold. */
	{
		uint32_t big = 70000;
		float *v = malloc(big * sizeof(float));

		CU_ASSERT_PTR_NOT_NULL_FATAL(v);
		for (d = 0; d < big; d++)
			v[d] = (float)d * 0.25f;
		CU_ASSERT_EQUAL(bwc_npy_write(path, BW_DTYPE_FLOAT, 1, &big, v, g_err, sizeof(g_err)), 0);
		CU_ASSERT_EQUAL_FATAL(bwc_npy_read(path, &t, g_err, sizeof(g_err)), 0);
		CU_ASSERT(t.dims[0] == big && t.nbytes == big * sizeof(float));
		CU_ASSERT(memcmp(t.data, v, big * sizeof(float)) == 0);
		bwc_npy_free(&t);
		free(v);
	}
}

static void test_refused(void)
{
	uint8_t buf[1024];
	static const float two[2] = { 1.0f, 2.0f };
	size_t n;

	expect_refused(FIXTURE(f32_fortran), "Fortran");
	expect_refused(FIXTURE(f32_big), "big-endian");
	expect_refused(FIXTURE(object), "object");
	expect_refused(FIXTURE(structured), "structured");
	/* Data one byte short, and one byte too many. */
	expect_refused(g_np_f32_2x3, sizeof(g_np_f32_2x3) - 2, "truncated data");
	memcpy(buf, g_np_f32_2x3, sizeof(g_np_f32_2x3) - 1);
	buf[sizeof(g_np_f32_2x3) - 1] = 0;
	expect_refused(buf, sizeof(g_np_f32_2x3), "bytes after the data");
	/* Header cut short; no magic; an unknown version. */
	expect_refused(g_np_f32_2x3, 40, "truncated");
	expect_refused("PK\003\004 not numpy at all", 22, "magic");
	memcpy(buf, g_np_f32_2x3, sizeof(g_np_f32_2x3) - 1);
	buf[6] = 4;
	expect_refused(buf, sizeof(g_np_f32_2x3) - 1, "version 4.0");

	n = make_npy(buf, "{'descr': '<U4', 'fortran_order': False, 'shape': (2,), }", two, 8);
	expect_refused(buf, n, "'<U4' is not supported");
	n = make_npy(buf, "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", two, 8);
	expect_refused(buf, n, "'<c8' is not supported");
	n = make_npy(buf, "{'descr': '<f4', 'shape': (2,), }", two, 8);
	expect_refused(buf, n, "lacks 'fortran_order'");
	n = make_npy(buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1, }", two, 8);
	expect_refused(buf, n, "unexpected or repeated key 'x'");
	n = make_npy(buf, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
		     two, 8);
	expect_refused(buf, n, "repeated");
	n = make_npy(buf, "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }", two, 8);
	expect_refused(buf, n, "neither True nor False");
	n = make_npy(buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, -1), }", two, 8);
	expect_refused(buf, n, "negative");
	n = make_npy(buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296,), }", two, 8);
	expect_refused(buf, n, "above 4294967295");
	n = make_npy(buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,2), }",
		     two, 8);
	expect_refused(buf, n, "rank above 8");
	n = make_npy(buf, "{'descr': '<f4', 'fortran_order': False, 'shape': [2], }", two, 8);
	expect_refused(buf, n, "not a tuple");
	n = make_npy(buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } junk", two, 8);
	expect_refused(buf, n, "text after the dict");
	n = make_npy(buf, "['descr', '<f4']", two, 8);
	expect_refused(buf, n, "not a dict");
}

/* What numpy accepts beyond its own output: double quotes, Python 2 longs, '=' byte order, and a
 * Fortran-order flag on a shape where both orders are the same bytes. */
static void test_lenient(void)
{
	static const float three[3] = { 1.0f, 2.0f, 3.0f };
	struct bwc_npy t;
	uint8_t buf[1024];
	size_t n;

	n = make_npy(buf, "{\"descr\": \"=f4\", \"fortran_order\": False, \"shape\": (3L,)}", three, 12);
	CU_ASSERT_EQUAL_FATAL(read_bytes(buf, n, &t), 0);
	CU_ASSERT(t.dtype == BW_DTYPE_FLOAT && t.rank == 1 && t.dims[0] == 3);
	CU_ASSERT(memcmp(t.data, three, sizeof(three)) == 0);
	bwc_npy_free(&t);

	n = make_npy(buf, "{'descr': '<f4', 'fortran_order': True, 'shape': (3, 1), }", three, 12);
	CU_ASSERT_EQUAL_FATAL(read_bytes(buf, n, &t), 0);
	CU_ASSERT(t.rank == 2 && t.dims[0] == 3 && t.dims[1] == 1);
	bwc_npy_free(&t);
}

static void test_io_errors(void)
{
	static const float one = 1.0f;
	static const uint32_t dims9[9] = { 1, 1, 1, 1, 1, 1, 1, 1, 1 };
	struct bwc_npy t;
	char path[600];

	CU_ASSERT_EQUAL(bwc_npy_read(tmp_path("missing.npy"), &t, g_err, sizeof(g_err)), -ENOENT);
	CU_ASSERT_PTR_NOT_NULL(strstr(g_err, "missing.npy"));
	CU_ASSERT_EQUAL(bwc_npy_read(g_dir, &t, g_err, sizeof(g_err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(g_err, "not a regular file"));

	snprintf(path, sizeof(path), "%s/no/such/dir.npy", g_dir);
	CU_ASSERT_EQUAL(bwc_npy_write(path, BW_DTYPE_FLOAT, 0, NULL, &one, g_err, sizeof(g_err)), -ENOENT);
	CU_ASSERT_EQUAL(bwc_npy_write(tmp_path("bf16.npy"), BW_DTYPE_BFLOAT16, 0, NULL, &one, g_err,
				      sizeof(g_err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(g_err, "bfloat16"));
	CU_ASSERT_EQUAL(access(tmp_path("bf16.npy"), F_OK), -1);
	CU_ASSERT_EQUAL(bwc_npy_write(tmp_path("r9.npy"), BW_DTYPE_FLOAT, 9, dims9, &one, g_err,
				      sizeof(g_err)), -EINVAL);
	/* A full disk: the write fails and leaves no half-file behind. */
	if (access("/dev/full", W_OK) == 0) {
		uint32_t dim = 100000;
		float *v = calloc(dim, sizeof(float));

		CU_ASSERT_EQUAL(bwc_npy_write("/dev/full", BW_DTYPE_FLOAT, 1, &dim, v, g_err, sizeof(g_err)),
				-ENOSPC);
		free(v);
	}
	/* A NULL err is allowed. */
	CU_ASSERT_EQUAL(bwc_npy_read(tmp_path("missing.npy"), &t, NULL, 0), -ENOENT);
}

static int suite_init(void)
{
	return mkdtemp(g_dir) == NULL ? -1 : 0;
}

static int suite_clean(void)
{
	static const char *names[] = { "in.npy", "out.npy", "rt.npy" };
	unsigned int i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		unlink(tmp_path(names[i]));
	return rmdir(g_dir) == 0 ? 0 : -1;
}

int main(void)
{
	static CU_TestInfo tests[] = {
		{ "read files numpy wrote", test_read_numpy_files },
		{ "writer's bytes equal numpy's", test_write_matches_numpy },
		{ "round trip of every dtype and rank", test_round_trip },
		{ "refused files say why", test_refused },
		{ "numpy's other spellings", test_lenient },
		{ "I/O errors", test_io_errors },
		CU_TEST_INFO_NULL,
	};
	static CU_SuiteInfo suites[] = {
		{ "npy", suite_init, suite_clean, NULL, NULL, tests },
		CU_SUITE_INFO_NULL,
	};

	return bw_cunit_run(suites);
}
