/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The fake device as a loadable module, so test_gpu exercises gpu_module_load as the daemon will use
 * it on the CUDA module. Built twice: as it should be, and with FAKE_MODULE_OTHER_ABI (a module
 * from another build, which must be refused).
 */
#include "fake.h"
#include "gpu.h"

__attribute__((visibility("default"))) const struct gpu_ops *bw_gpu_module_ops(uint32_t abi_version);

const struct gpu_ops *bw_gpu_module_ops(uint32_t abi_version)
{
#ifdef FAKE_MODULE_OTHER_ABI
	return abi_version == GPU_ABI_VERSION + 1 ? gpu_fake_ops() : NULL;
#else
	return abi_version == GPU_ABI_VERSION ? gpu_fake_ops() : NULL;
#endif
}
