/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Finding the CUDA libraries the module opens with dlopen rather than links (cublaslt.c, cudnn.c): one
 * search for all of them, so that an operator points at each the same way. In order:
 *   $ENV                         a file: when set, the only place looked (no falling back to another
 *                                file behind the operator's back)
 *   SONAME                       the loader's path (LD_LIBRARY_PATH, ld.so.cache)
 *   BW_CUDA_ROOT/lib64/SONAME    the toolkit the module was built against
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_defs.h"

#ifndef BW_CUDA_ROOT
#define BW_CUDA_ROOT "/usr/local/cuda"
#endif

void *cuda_lib_open(const char *what, const char *env, const char *soname, char *path, size_t path_cap, char *why,
		    size_t why_cap)
{
	const char *file = getenv(env);
	char toolkit[512], tried[GPU_ERR_MAX / 2] = "";
	const char *fixed[2] = { soname, toolkit };
	void *lib;

	if (file != NULL && file[0] != '\0') {
		lib = dlopen(file, RTLD_NOW | RTLD_LOCAL);
		if (lib == NULL)
			gpu_err(why, why_cap, "%s: %s=%s: %s", what, env, file, dlerror());
		else
			snprintf(path, path_cap, "%s", file);
		return lib;
	}
	snprintf(toolkit, sizeof(toolkit), "%s/lib64/%s", BW_CUDA_ROOT, soname);
	for (unsigned int i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
		lib = dlopen(fixed[i], RTLD_NOW | RTLD_LOCAL);
		if (lib != NULL) {
			snprintf(path, path_cap, "%s", fixed[i]);
			return lib;
		}
		/* a long toolkit path is cut short in the message, which is all this list is for */
		if (snprintf(tried + strlen(tried), sizeof(tried) - strlen(tried), "%s%s", i ? ", " : "", fixed[i]) < 0)
			break;
	}
	gpu_err(why, why_cap, "%s not found (tried %s; set %s or LD_LIBRARY_PATH)", what, tried, env);
	return NULL;
}
