/* SPDX-License-Identifier: BSD-3-Clause */
#include "platform.h"

void plat_poll_loop(const struct plat_poller *pollers, unsigned int count, const volatile bool *quit,
		    struct plat_poll_stats *stats)
{
	while (!*quit) {
		unsigned int busy = 0;

		for (unsigned int i = 0; i < count; i++)
			busy |= (unsigned int)pollers[i].poll(pollers[i].arg);
		stats->iterations++;
		stats->busy_iterations += busy;
	}
}
