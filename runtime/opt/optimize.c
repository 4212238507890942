/* SPDX-License-Identifier: BSD-3-Clause */
/* Graph rewrites at load, before planning (graph.h: rt_graph_optimize). */
#include <errno.h>
#include <string.h>

#include "graph.h"

int rt_graph_optimize(struct rt_graph *graph, enum rt_device device, struct rt_opt_report *report, char *err,
		      size_t err_cap)
{
	(void)device;
	(void)err;
	(void)err_cap;
	if (report != NULL) {
		memset(report, 0, sizeof(*report));
		report->nodes_before = graph->num_nodes;
		report->nodes_after = graph->num_nodes;
	}
	return 0;
}
