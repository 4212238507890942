/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuBLASLt, opened with dlopen when the first program with a GEMM op is loaded on a device. The toolkit
 * has no static cuBLASLt, and linking the shared one would make libbwgpu.so need it on every host,
 * GEMM or not; so the module names no CUDA library at all (ldd shows none) and a host without
 * cuBLASLt still runs programs without GEMM ops. Where it is looked for (cuda_lib_open), in order:
 *   $BW_CUBLASLT_LIB                     a file (e.g. pip's nvidia/cu13/lib/libcublasLt.so.13)
 *   libcublasLt.so.13                     the loader's path (LD_LIBRARY_PATH, ld.so.cache)
 *   BW_CUDA_ROOT/lib64/libcublasLt.so.13  the toolkit the module was built against
 */
#include <dlfcn.h>
#include <errno.h>
#include <string.h>

#include "cuda_defs.h"

#define CUBLASLT_SONAME "libcublasLt.so.13"
#define CUBLASLT_ENV "BW_CUBLASLT_LIB"

/* One dlsym: \return 0, or -ENOTSUP with the symbol and the file named. */
static int resolve(struct cublaslt_api *lt, const char *name, void **fn, char *err, size_t cap)
{
	*fn = dlsym(lt->lib, name);
	if (*fn != NULL)
		return 0;
	gpu_err(err, cap, "cuBLASLt %s has no symbol %s (not cuBLASLt 13?)", lt->path, name);
	return -ENOTSUP;
}

int cublaslt_open(struct gpu_dev *dev, char *err, size_t cap)
{
	struct cublaslt_api *lt = &dev->lt;
	int rc = 0;

	if (lt->lib != NULL)
		return 0;
	lt->lib = cuda_lib_open("cuBLASLt", CUBLASLT_ENV, CUBLASLT_SONAME, lt->path, sizeof(lt->path), err, cap);
	if (lt->lib == NULL)
		return -ENOTSUP;
#define LT_RESOLVE(field, sym) \
	if (rc == 0) \
		rc = resolve(lt, #sym, (void **)&lt->field, err, cap)
	LT_RESOLVE(create, cublasLtCreate);
	LT_RESOLVE(destroy, cublasLtDestroy);
	LT_RESOLVE(status_string, cublasLtGetStatusString);
	LT_RESOLVE(desc_create, cublasLtMatmulDescCreate);
	LT_RESOLVE(desc_destroy, cublasLtMatmulDescDestroy);
	LT_RESOLVE(desc_set, cublasLtMatmulDescSetAttribute);
	LT_RESOLVE(layout_create, cublasLtMatrixLayoutCreate);
	LT_RESOLVE(layout_destroy, cublasLtMatrixLayoutDestroy);
	LT_RESOLVE(layout_set, cublasLtMatrixLayoutSetAttribute);
	LT_RESOLVE(pref_create, cublasLtMatmulPreferenceCreate);
	LT_RESOLVE(pref_destroy, cublasLtMatmulPreferenceDestroy);
	LT_RESOLVE(pref_set, cublasLtMatmulPreferenceSetAttribute);
	LT_RESOLVE(heuristic, cublasLtMatmulAlgoGetHeuristic);
	LT_RESOLVE(matmul, cublasLtMatmul);
#undef LT_RESOLVE
	if (rc < 0)
		cublaslt_close(dev);
	return rc;
}

void cublaslt_close(struct gpu_dev *dev)
{
	if (dev->lt.lib != NULL)
		dlclose(dev->lt.lib);
	memset(&dev->lt, 0, sizeof(dev->lt));
}
