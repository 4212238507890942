/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * batchwire --doctor (doctor.c): the host checked against what the configuration needs, before EAL
 * starts: hugepages per NUMA node, isolated cores, SMT siblings and frequency governors of the
 * polling lcores, the NUMA node and driver of each PCI port (vfio-pci, the IOMMU), the locked-memory
 * limit and the CPU libraries' environment. One line per finding: what, why it matters, the command
 * that fixes it. Read from sysfs and procfs under a root directory, so that tests can give it a
 * fake tree.
 */
#ifndef BW_APP_DOCTOR_H
#define BW_APP_DOCTOR_H

#include <stdio.h>

#include "config.h"

struct app_doctor_input {
	const char *root;           /* "" for the host's /sys and /proc; a fake tree's directory in tests */
	int eal_argc;               /* EAL's arguments, as batchwire would pass them (argv[0] first) */
	char **eal_argv;
	const struct app_config *cfg;
	unsigned long long memlock; /* RLIMIT_MEMLOCK's soft limit in bytes (RLIM_INFINITY: none) */
	const char *openblas_threads; /* $OPENBLAS_NUM_THREADS, or NULL */
};

/**
 * Runs every check, writing one line per finding and a last line with the counts to out.
 * \return the findings that block a start (0: batchwire may start; exit 0), or -EINVAL for EAL
 *         arguments it cannot read (one line).
 */
int app_doctor(const struct app_doctor_input *in, FILE *out);

#endif /* BW_APP_DOCTOR_H */
