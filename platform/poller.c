/* SPDX-License-Identifier: BSD-3-Clause */
#include "platform.h"

void plat_poll_loop(const struct plat_poller *pollers, unsigned int count, const volatile bool *quit,
		    struct plat_poll_stats *stats)
{
	uint64_t last = rte_rdtsc();

	while (!*quit) {
		unsigned int busy = 0;
		uint64_t now, spent;

		for (unsigned int i = 0; i < count; i++)
			busy |= (unsigned int)pollers[i].poll(pollers[i].arg);
		/* one TSC read an iteration: the iteration's cost is the time since the last one */
		now = rte_rdtsc();
		spent = now - last;
		last = now;
		stats->iterations++;
		stats->busy_iterations += busy;
		stats->cycles += spent;
		stats->busy_cycles += busy ? spent : 0;
	}
}
