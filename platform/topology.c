/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The hwloc view of the machine, loaded once at start-up (never on the hot path). batchwire uses it to
 * tell the operator where polling lcores sit and to warn about placements that cost latency: two
 * polling lcores on SMT siblings share one core's execution units, and a port polled from another
 * NUMA node pays a cross-socket hop for every descriptor and packet.
 */
#include <errno.h>

#include <hwloc.h>

#include "platform.h"

static hwloc_topology_t g_topology;

static int topology_load(const char *synthetic)
{
	if (g_topology != NULL)
		plat_topology_fini();
	if (hwloc_topology_init(&g_topology) != 0)
		return -ENOMEM;
	if (synthetic != NULL && hwloc_topology_set_synthetic(g_topology, synthetic) != 0) {
		hwloc_topology_destroy(g_topology);
		g_topology = NULL;
		return -EINVAL;
	}
	if (hwloc_topology_load(g_topology) != 0) {
		hwloc_topology_destroy(g_topology);
		g_topology = NULL;
		return -EIO;
	}
	return 0;
}

int plat_topology_init(void)
{
	return topology_load(NULL);
}

int plat_topology_init_synthetic(const char *description)
{
	return topology_load(description);
}

void plat_topology_fini(void)
{
	if (g_topology != NULL)
		hwloc_topology_destroy(g_topology);
	g_topology = NULL;
}

static hwloc_obj_t pu_of_cpu(unsigned int cpu)
{
	if (g_topology == NULL)
		return NULL;
	return hwloc_get_pu_obj_by_os_index(g_topology, cpu);
}

int plat_cpu_locate(unsigned int cpu, struct plat_cpu_location *loc)
{
	hwloc_obj_t pu = pu_of_cpu(cpu);
	hwloc_obj_t core, package;
	hwloc_bitmap_t nodes;

	if (pu == NULL)
		return -ENOENT;
	core = hwloc_get_ancestor_obj_by_type(g_topology, HWLOC_OBJ_CORE, pu);
	package = hwloc_get_ancestor_obj_by_type(g_topology, HWLOC_OBJ_PACKAGE, pu);
	loc->core = core != NULL ? (int)core->logical_index : -1;
	loc->package = package != NULL ? (int)package->logical_index : -1;
	loc->smt_siblings = core != NULL ? (int)hwloc_bitmap_weight(core->cpuset) : 1;

	/* The NUMA node is the one whose nodeset the PU belongs to; a machine without NUMA has one. */
	loc->numa_node = -1;
	nodes = pu->nodeset;
	if (nodes != NULL && hwloc_bitmap_weight(nodes) == 1) {
		hwloc_obj_t node = hwloc_get_numanode_obj_by_os_index(g_topology,
								     (unsigned int)hwloc_bitmap_first(nodes));
		if (node != NULL)
			loc->numa_node = (int)node->os_index;
	}
	return 0;
}

bool plat_cpus_are_smt_siblings(unsigned int cpu_a, unsigned int cpu_b)
{
	hwloc_obj_t a = pu_of_cpu(cpu_a), b = pu_of_cpu(cpu_b);
	hwloc_obj_t core_a, core_b;

	if (a == NULL || b == NULL || cpu_a == cpu_b)
		return false;
	core_a = hwloc_get_ancestor_obj_by_type(g_topology, HWLOC_OBJ_CORE, a);
	core_b = hwloc_get_ancestor_obj_by_type(g_topology, HWLOC_OBJ_CORE, b);
	return core_a != NULL && core_a == core_b;
}

int plat_topology_report(const struct plat_lcore_place *places, unsigned int count)
{
	int warnings = 0;

	if (g_topology == NULL)
		return -ENODEV;
	for (unsigned int i = 0; i < count; i++) {
		struct plat_cpu_location loc;

		if (plat_cpu_locate(places[i].cpu, &loc) != 0) {
			PLAT_LOG(WARNING, plat, "lcore %u: cpu %u is not in the hwloc topology",
				 places[i].lcore_id, places[i].cpu);
			warnings++;
			continue;
		}
		PLAT_LOG(INFO, plat, "lcore %u: cpu %u, NUMA node %d, package %d, physical core %d (%d hw threads)",
			 places[i].lcore_id, places[i].cpu, loc.numa_node, loc.package, loc.core,
			 loc.smt_siblings);
		if (places[i].port_numa_node >= 0 && loc.numa_node >= 0 &&
		    places[i].port_numa_node != loc.numa_node) {
			PLAT_LOG(WARNING, plat,
				 "lcore %u on NUMA node %d polls a port on NUMA node %d: every packet crosses sockets",
				 places[i].lcore_id, loc.numa_node, places[i].port_numa_node);
			warnings++;
		}
		for (unsigned int j = 0; j < i; j++) {
			if (places[i].cpu == places[j].cpu) {
				PLAT_LOG(WARNING, plat, "polling lcores %u and %u share cpu %u: they take turns on it",
					 places[j].lcore_id, places[i].lcore_id, places[i].cpu);
				warnings++;
			} else if (plat_cpus_are_smt_siblings(places[i].cpu, places[j].cpu)) {
				PLAT_LOG(WARNING, plat,
					 "polling lcores %u and %u are SMT siblings (cpus %u, %u): they share one core",
					 places[j].lcore_id, places[i].lcore_id, places[j].cpu, places[i].cpu);
				warnings++;
			}
		}
	}
	return warnings;
}
