/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Test support: the CPU kernels' instruction set a runtime test program runs at. meson runs some
 * programs again with BW_CPU_ISA set to each level (tests/runtime/meson.build); a level this CPU
 * lacks is a SKIP with the reason, a value that names no level a failure.
 */
#ifndef BW_TESTS_RUNTIME_ISA_LEVEL_H
#define BW_TESTS_RUNTIME_ISA_LEVEL_H

#include <errno.h>
#include <stdio.h>

#include "../bw_cunit.h"
#include "graph.h"

/** \return -1 to go on (the level is chosen and printed), else the exit status for main to return. */
static inline int isa_level_check(void)
{
	char line[256];
	int ret = rt_cpu_isa_select(line, sizeof(line));

	if (ret == -ENOTSUP)
		return bw_cunit_skip(line);
	if (ret != 0) {
		fprintf(stderr, "CPU kernels: %s\n", line);
		return 1;
	}
	rt_cpu_isa_describe(line, sizeof(line));
	printf("CPU kernels: %s\n", line);
	return -1;
}

#endif /* BW_TESTS_RUNTIME_ISA_LEVEL_H */
