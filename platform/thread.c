/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>

#include "platform.h"

int plat_thread_pin_and_name(unsigned int cpu, const char *name)
{
	cpu_set_t set;
	int ret;

	if (cpu >= CPU_SETSIZE)
		return -EINVAL;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	ret = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	if (ret != 0)
		return -ret;
	/* Linux thread names are 15 characters; a longer one is refused, so truncate instead. */
	char short_name[16];
	snprintf(short_name, sizeof(short_name), "%s", name);
	ret = pthread_setname_np(pthread_self(), short_name);
	return -ret;
}
