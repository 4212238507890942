/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Loads a device module (libbwgpu.so) with dlopen: the host side's only link to CUDA, so a host
 * without CUDA runs every batchwire binary and is told plainly why there is no GPU.
 *
 * GPU_MODULE_BUILT and GPU_MODULE_DIR come from meson (gpu/meson.build).
 */
#include <dlfcn.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "defs.h"

#ifndef GPU_MODULE_BUILT
#define GPU_MODULE_BUILT 0
#endif
#ifndef GPU_MODULE_DIR
#define GPU_MODULE_DIR "/usr/local/lib/batchwire"
#endif
#define GPU_MODULE_FILE "libbwgpu.so"

int gpu_module_built(void)
{
	return GPU_MODULE_BUILT;
}

/* Where a module is looked for by default: beside the executable, the build tree's gpu/, libdir. */
static int default_path(char *path, size_t path_cap, char *err, size_t cap)
{
	char exe[PATH_MAX], looked[3 * PATH_MAX] = "";
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	const char *dirs[3];
	unsigned int i, nb_dirs = 0;
	char build_gpu[PATH_MAX];

	if (n > 0) {
		exe[n] = '\0';
		dirs[nb_dirs++] = dirname(exe); /* dirname may write into exe: exe is ours */
		snprintf(build_gpu, sizeof(build_gpu), "%s/../gpu", dirs[0]);
		dirs[nb_dirs++] = build_gpu;
	}
	dirs[nb_dirs++] = GPU_MODULE_DIR;
	for (i = 0; i < nb_dirs; i++) {
		snprintf(path, path_cap, "%s/%s", dirs[i], GPU_MODULE_FILE);
		if (access(path, R_OK) == 0)
			return 0;
		snprintf(looked + strlen(looked), sizeof(looked) - strlen(looked), "%s%s", i ? ", " : "", dirs[i]);
	}
	gpu_err(err, cap, "GPU module %s not found (looked in %s)", GPU_MODULE_FILE, looked);
	return -ENOENT;
}

int gpu_module_load(const char *path, struct gpu_module *mod, char *err, size_t cap)
{
	gpu_module_entry_fn entry;
	const struct gpu_ops *ops;
	void *handle;
	int rc;

	memset(mod, 0, sizeof(*mod));
	if (path == NULL) {
		if (!GPU_MODULE_BUILT) {
			gpu_err(err, cap, "GPU module not built: this build has no CUDA (-Dcuda=disabled, or nvcc not found)");
			return -ENOENT;
		}
		rc = default_path(mod->path, sizeof(mod->path), err, cap);
		if (rc < 0)
			return rc;
	} else {
		snprintf(mod->path, sizeof(mod->path), "%s", path);
	}
	/*
	 * RTLD_LOCAL: the module's statically linked CUDA runtime stays out of the global namespace.
	 * RTLD_NODELETE: unloading never unmaps it, since the runtime's exit-time clean-up would then
	 * call into unmapped code.
	 */
	handle = dlopen(mod->path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	if (handle == NULL) {
		gpu_err(err, cap, "dlopen %s: %s", mod->path, dlerror());
		return -ENOEXEC;
	}
	entry = (gpu_module_entry_fn)dlsym(handle, GPU_MODULE_SYMBOL);
	if (entry == NULL) {
		gpu_err(err, cap, "%s: no symbol %s: not a batchwire GPU module", mod->path, GPU_MODULE_SYMBOL);
		dlclose(handle);
		return -ENOEXEC;
	}
	ops = entry(GPU_ABI_VERSION);
	if (ops == NULL || ops->abi_version != GPU_ABI_VERSION) {
		if (ops == NULL)
			gpu_err(err, cap, "%s: the module does not speak ABI %u: rebuild it with this program",
				mod->path, GPU_ABI_VERSION);
		else
			gpu_err(err, cap, "%s: module ABI %u, this program's %u: rebuild them together", mod->path,
				ops->abi_version, GPU_ABI_VERSION);
		dlclose(handle);
		return -EPROTO;
	}
	mod->ops = ops;
	mod->handle = handle;
	return 0;
}

void gpu_module_unload(struct gpu_module *mod)
{
	if (mod->handle != NULL)
		dlclose(mod->handle);
	memset(mod, 0, sizeof(*mod));
}
