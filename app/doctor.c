/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * batchwire --doctor (doctor.h): what EAL and the lcores will need, checked against the host before
 * EAL starts, from sysfs and procfs under in->root. Nothing here changes the host; every finding
 * says what, why it matters and the command that fixes it. FAIL: batchwire would not start, or not
 * serve (exit 1); WARN: it would, slower or less safely than it could.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "doctor.h"

#define DOC_CPUS_MAX 1024
#define DOC_NODES_MAX 64
#define DOC_PCI_MAX 16

struct eal_view {
	int lcore_cpu[DOC_CPUS_MAX];   /* by lcore id: its CPU, -1 when not an lcore */
	int main_lcore;                /* -1: the first lcore */
	char pci[DOC_PCI_MAX][32];     /* -a / --allow / -w addresses, options cut */
	unsigned int nb_pci;
	unsigned int nb_vdev;
	bool no_pci, no_huge;
	bool memif;                    /* a --vdev net_memif port */
	unsigned long mem_mb;          /* -m; 0: not given */
	unsigned long socket_mem[DOC_NODES_MAX]; /* --socket-mem, MB per node */
	bool socket_mem_given;
};

struct doctor {
	const struct app_doctor_input *in;
	FILE *out;
	unsigned int fails, warns;
	struct eal_view eal;
	bool poll_cpu[DOC_CPUS_MAX];   /* CPUs of the polling lcores */
	bool lcore_cpu[DOC_CPUS_MAX];  /* CPUs of every lcore */
	bool node_used[DOC_NODES_MAX]; /* NUMA nodes of the polling lcores */
};

static void __attribute__((format(printf, 3, 4))) say(struct doctor *d, const char *level, const char *fmt, ...)
{
	va_list ap;

	if (strcmp(level, "FAIL") == 0)
		d->fails++;
	else if (strcmp(level, "WARN") == 0)
		d->warns++;
	fprintf(d->out, "doctor: %-4s  ", level);
	va_start(ap, fmt);
	vfprintf(d->out, fmt, ap);
	va_end(ap);
	fputc('\n', d->out);
}

/* The first line of root/path, without its newline. \return whether it could be read. */
static bool read_line(const struct doctor *d, const char *path, char *buf, size_t cap)
{
	char full[PATH_MAX];
	FILE *f;
	bool ok;

	snprintf(full, sizeof(full), "%s%s", d->in->root, path);
	f = fopen(full, "r");
	if (f == NULL)
		return false;
	ok = fgets(buf, (int)cap, f) != NULL;
	fclose(f);
	if (!ok)
		buf[0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return true;
}

static bool exists(const struct doctor *d, const char *path)
{
	char full[PATH_MAX];

	snprintf(full, sizeof(full), "%s%s", d->in->root, path);
	return access(full, F_OK) == 0;
}

/* "0-3,8,10-11" into set. \return false for anything else. */
static bool cpu_list_parse(const char *s, bool *set, unsigned int max)
{
	while (*s != '\0' && *s != '\n') {
		char *end;
		unsigned long lo = strtoul(s, &end, 10), hi = lo;

		if (end == s)
			return false;
		if (*end == '-') {
			s = end + 1;
			hi = strtoul(s, &end, 10);
			if (end == s)
				return false;
		}
		for (unsigned long c = lo; c <= hi && c < max; c++)
			set[c] = true;
		s = *end == ',' ? end + 1 : end;
		if (*end != ',' && *end != '\0' && *end != '\n')
			return false;
	}
	return true;
}

static void cpu_list_format(const bool *set, unsigned int max, char *buf, size_t cap)
{
	size_t off = 0;

	buf[0] = '\0';
	for (unsigned int c = 0; c < max && off < cap; c++) {
		unsigned int e = c;

		if (!set[c])
			continue;
		while (e + 1 < max && set[e + 1])
			e++;
		off += (size_t)snprintf(buf + off, cap - off, off > 0 ? ",%u" : "%u", c);
		if (e > c && off < cap)
			off += (size_t)snprintf(buf + off, cap - off, "-%u", e);
		c = e;
	}
}

/* The NUMA node of a CPU (its nodeN entry in sysfs), or -1. */
static int cpu_node(const struct doctor *d, unsigned int cpu)
{
	char path[PATH_MAX];
	struct dirent *e;
	int node = -1;
	DIR *dir;

	snprintf(path, sizeof(path), "%s/sys/devices/system/cpu/cpu%u", d->in->root, cpu);
	dir = opendir(path);
	if (dir == NULL)
		return -1;
	while ((e = readdir(dir)) != NULL) {
		if (strncmp(e->d_name, "node", 4) == 0 && isdigit((unsigned char)e->d_name[4])) {
			node = atoi(e->d_name + 4);
			break;
		}
	}
	closedir(dir);
	return node;
}

/* ---- EAL's arguments ------------------------------------------------------------------------------ */

/* -l's "0-3,5": lcore n on CPU n. */
static int lcore_list_apply(struct eal_view *e, const char *s)
{
	bool set[DOC_CPUS_MAX] = { false };

	if (!cpu_list_parse(s, set, DOC_CPUS_MAX))
		return -EINVAL;
	for (unsigned int c = 0; c < DOC_CPUS_MAX; c++)
		if (set[c])
			e->lcore_cpu[c] = (int)c;
	return 0;
}

/* --lcores' "0@2,1@(3,4),5-6": each lcore's CPU (one without '@' is its own CPU's). */
static int lcores_parse(struct eal_view *e, const char *s)
{
	while (*s != '\0') {
		char *end;
		unsigned long lo = strtoul(s, &end, 10), hi = lo;

		if (end == s)
			return -EINVAL;
		if (*end == '-')
			hi = strtoul(end + 1, &end, 10);
		if (*end == '@') { /* lcore@cpu (or @(cpus): the first counts) */
			const char *c = end + 1 + (end[1] == '(');
			unsigned long cpu = strtoul(c, &end, 10);

			if (lo >= DOC_CPUS_MAX)
				return -EINVAL;
			e->lcore_cpu[lo] = (int)cpu;
			while (*end != '\0' && *end != ',')
				end++;
		} else {
			for (unsigned long l = lo; l <= hi && l < DOC_CPUS_MAX; l++)
				e->lcore_cpu[l] = (int)l;
		}
		s = *end == ',' ? end + 1 : end;
		if (*end != ',' && *end != '\0')
			return -EINVAL;
	}
	return 0;
}

static int eal_parse(struct eal_view *e, int argc, char **argv, FILE *out)
{
	memset(e, 0, sizeof(*e));
	for (unsigned int l = 0; l < DOC_CPUS_MAX; l++)
		e->lcore_cpu[l] = -1;
	e->main_lcore = -1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int rc = 0;

		if (strcmp(a, "-l") == 0 && v != NULL) {
			rc = lcore_list_apply(e, v);
			i++;
		} else if (strcmp(a, "--lcores") == 0 && v != NULL) {
			rc = lcores_parse(e, v);
			i++;
		} else if (strncmp(a, "-l", 2) == 0 && a[2] != '\0') {
			rc = lcore_list_apply(e, a + 2);
		} else if (strcmp(a, "-c") == 0 && v != NULL) {
			unsigned long long mask = strtoull(v, NULL, 16);

			for (unsigned int c = 0; c < 64; c++)
				if (mask & (1ull << c))
					e->lcore_cpu[c] = (int)c;
			i++;
		} else if (strcmp(a, "--main-lcore") == 0 && v != NULL) {
			e->main_lcore = atoi(v);
			i++;
		} else if ((strcmp(a, "-a") == 0 || strcmp(a, "--allow") == 0 || strcmp(a, "-w") == 0) && v != NULL) {
			if (e->nb_pci < DOC_PCI_MAX) {
				snprintf(e->pci[e->nb_pci], sizeof(e->pci[0]), "%.*s", (int)strcspn(v, ","), v);
				e->nb_pci++;
			}
			i++;
		} else if (strcmp(a, "--vdev") == 0 && v != NULL) {
			e->nb_vdev++;
			e->memif |= strncmp(v, "net_memif", 9) == 0;
			i++;
		} else if (strcmp(a, "--no-pci") == 0) {
			e->no_pci = true;
		} else if (strcmp(a, "--no-huge") == 0) {
			e->no_huge = true;
		} else if (strcmp(a, "-m") == 0 && v != NULL) {
			e->mem_mb = strtoul(v, NULL, 10);
			i++;
		} else if (strcmp(a, "--socket-mem") == 0 && v != NULL) {
			const char *p = v;

			for (unsigned int n = 0; n < DOC_NODES_MAX && *p != '\0'; n++) {
				char *end;

				e->socket_mem[n] = strtoul(p, &end, 10);
				p = *end == ',' ? end + 1 : end;
			}
			e->socket_mem_given = true;
			i++;
		}
		if (rc != 0) {
			fprintf(out, "doctor: cannot read the lcore list '%s'\n", v != NULL ? v : a);
			return -EINVAL;
		}
	}
	return 0;
}

/* ---- the checks ----------------------------------------------------------------------------------- */

/* Which CPUs poll, which are lcores, on which nodes the polling ones sit. */
static int lcores_check(struct doctor *d)
{
	const struct app_config *cfg = d->in->cfg;
	int main_lcore = d->eal.main_lcore;
	char list[256];
	unsigned int n = 0;

	for (unsigned int l = 0; l < DOC_CPUS_MAX; l++) {
		if (d->eal.lcore_cpu[l] < 0)
			continue;
		if (main_lcore < 0)
			main_lcore = (int)l;
		if (d->eal.lcore_cpu[l] < DOC_CPUS_MAX)
			d->lcore_cpu[d->eal.lcore_cpu[l]] = true;
		n++;
	}
	if (n == 0) {
		/* EAL's default: every CPU the process may run on */
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);

		for (long c = 0; c < cpus && c < DOC_CPUS_MAX; c++) {
			d->eal.lcore_cpu[c] = (int)c;
			d->lcore_cpu[c] = true;
		}
		main_lcore = 0;
		n = (unsigned int)(cpus > 0 ? cpus : 1);
	}
	if (cfg->nb_poll_lcores > 0) {
		for (unsigned int i = 0; i < cfg->nb_poll_lcores; i++) {
			unsigned int l = cfg->poll_lcores[i];

			if (l >= DOC_CPUS_MAX || d->eal.lcore_cpu[l] < 0) {
				say(d, "FAIL", "polling lcore %u is not among EAL's lcores: batchwire stops at start-up. Fix: "
				    "add it to -l, or change poll_lcores", l);
				continue;
			}
			d->poll_cpu[d->eal.lcore_cpu[l]] = true;
		}
	} else {
		for (unsigned int l = 0; l < DOC_CPUS_MAX; l++)
			if (d->eal.lcore_cpu[l] >= 0 && ((int)l != main_lcore || n == 1))
				d->poll_cpu[d->eal.lcore_cpu[l]] = true;
	}
	for (unsigned int c = 0; c < DOC_CPUS_MAX; c++) {
		int node = d->poll_cpu[c] ? cpu_node(d, c) : -1;

		if (node >= 0 && node < DOC_NODES_MAX)
			d->node_used[node] = true;
	}
	cpu_list_format(d->poll_cpu, DOC_CPUS_MAX, list, sizeof(list));
	say(d, "ok", "lcores: %u, polling on CPUs %s", n, list);
	return 0;
}

/* Free hugepage bytes on a node, over every page size; the page size of the largest pool in *size. */
static uint64_t hugepages_free(const struct doctor *d, int node, unsigned long *size_kb)
{
	char path[PATH_MAX], line[64];
	struct dirent *e;
	uint64_t total = 0, best = 0;
	DIR *dir;

	*size_kb = 2048;
	snprintf(path, sizeof(path), "%s/sys/devices/system/node/node%d/hugepages", d->in->root, node);
	dir = opendir(path);
	if (dir == NULL)
		return 0;
	while ((e = readdir(dir)) != NULL) {
		unsigned long kb;
		char file[PATH_MAX];

		if (sscanf(e->d_name, "hugepages-%lukB", &kb) != 1)
			continue;
		snprintf(file, sizeof(file), "/sys/devices/system/node/node%d/hugepages/%s/free_hugepages", node, e->d_name);
		if (read_line(d, file, line, sizeof(line))) {
			uint64_t bytes = strtoull(line, NULL, 10) * kb * 1024;

			total += bytes;
			if (bytes > best) {
				best = bytes;
				*size_kb = kb;
			}
		}
	}
	closedir(dir);
	return total;
}

static void hugepages_check(struct doctor *d)
{
	uint64_t all_free = 0;

	if (d->eal.no_huge) {
		say(d, "WARN", "hugepages: --no-huge: fine for tests, not for serving: every mbuf and arena on 4 KiB "
		    "pages (TLB misses), and no physical addresses for a PCI NIC's DMA. Fix: reserve hugepages "
		    "(below) and drop --no-huge");
		return;
	}
	for (int node = 0; node < DOC_NODES_MAX; node++) {
		unsigned long kb;
		uint64_t free_b;
		uint64_t need_mb;

		if (!d->node_used[node])
			continue;
		free_b = hugepages_free(d, node, &kb);
		all_free += free_b;
		need_mb = d->eal.socket_mem_given ? d->eal.socket_mem[node] : 0;
		if (need_mb > 0 && free_b < need_mb << 20) {
			say(d, "FAIL", "hugepages: node %d has %" PRIu64 " MiB free, --socket-mem asks %" PRIu64 " MiB there: "
			    "EAL fails to start. Fix: echo %" PRIu64 " > /sys/devices/system/node/node%d/hugepages/"
			    "hugepages-%lukB/nr_hugepages (or hugepagesz= hugepages= on the kernel command line)", node,
			    free_b >> 20, need_mb, ((need_mb << 10) + kb - 1) / kb, node, kb);
		} else if (free_b == 0) {
			say(d, "FAIL", "hugepages: node %d has none free, and its polling lcores' mbuf pools and arenas live "
			    "there: EAL fails to start. Fix: echo 1024 > /sys/devices/system/node/node%d/hugepages/"
			    "hugepages-2048kB/nr_hugepages (2 GiB; --socket-mem lets the doctor check the amount)", node, node);
		} else {
			say(d, "ok", "hugepages: node %d has %" PRIu64 " MiB free%s", node, free_b >> 20,
			    need_mb > 0 ? " for its --socket-mem" : "");
		}
	}
	if (d->eal.mem_mb > 0 && all_free < (uint64_t)d->eal.mem_mb << 20)
		say(d, "FAIL", "hugepages: -m %lu needs %lu MiB, %" PRIu64 " MiB are free on the polling lcores' nodes. "
		    "Fix: reserve more (nr_hugepages, above) or lower -m", d->eal.mem_mb, d->eal.mem_mb, all_free >> 20);
}

/* A kernel parameter's value in /proc/cmdline ("" when absent). */
static void cmdline_param(const struct doctor *d, const char *name, char *buf, size_t cap)
{
	char line[4096];
	const char *p;
	size_t n = strlen(name);

	buf[0] = '\0';
	if (!read_line(d, "/proc/cmdline", line, sizeof(line)))
		return;
	for (p = line; (p = strstr(p, name)) != NULL; p += n) {
		if ((p == line || p[-1] == ' ') && p[n] == '=') {
			snprintf(buf, cap, "%.*s", (int)strcspn(p + n + 1, " "), p + n + 1);
			return;
		}
	}
}

static void isolation_check(struct doctor *d)
{
	static const struct {
		const char *name, *sysfs, *why;
	} params[] = {
		{"isolcpus", "/sys/devices/system/cpu/isolated",
		 "the scheduler may put other tasks on them, and a polling loop loses its core for milliseconds"},
		{"nohz_full", "/sys/devices/system/cpu/nohz_full", "the scheduler tick interrupts them 100-1000 times a second"},
		{"rcu_nocbs", NULL, "RCU callbacks run on them"},
	};
	bool missing[DOC_CPUS_MAX];
	char list[256], have[512];

	for (unsigned int k = 0; k < sizeof(params) / sizeof(params[0]); k++) {
		bool set[DOC_CPUS_MAX] = { false }, any = false;

		have[0] = '\0';
		if (params[k].sysfs != NULL)
			read_line(d, params[k].sysfs, have, sizeof(have));
		if (have[0] == '\0' || strcmp(have, "(null)") == 0)
			cmdline_param(d, params[k].name, have, sizeof(have));
		/* isolcpus may carry flags first ("managed_irq,domain,2-5"): the list is what parses */
		for (char *p = have; *p != '\0'; p++)
			if (isdigit((unsigned char)*p)) {
				cpu_list_parse(p, set, DOC_CPUS_MAX);
				break;
			}
		for (unsigned int c = 0; c < DOC_CPUS_MAX; c++) {
			missing[c] = d->poll_cpu[c] && !set[c];
			any |= missing[c];
		}
		if (!any)
			continue;
		cpu_list_format(missing, DOC_CPUS_MAX, list, sizeof(list));
		say(d, "WARN", "polling CPUs %s are not in %s: %s. Fix: add %s=%s to GRUB_CMDLINE_LINUX in "
		    "/etc/default/grub, update-grub, reboot", list, params[k].name, params[k].why, params[k].name, list);
	}
}

static void smt_check(struct doctor *d)
{
	for (unsigned int c = 0; c < DOC_CPUS_MAX; c++) {
		bool sib[DOC_CPUS_MAX] = { false };
		char path[128], line[256];

		if (!d->poll_cpu[c])
			continue;
		snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%u/topology/thread_siblings_list", c);
		if (!read_line(d, path, line, sizeof(line)) || !cpu_list_parse(line, sib, DOC_CPUS_MAX))
			continue;
		for (unsigned int s = c + 1; s < DOC_CPUS_MAX; s++) {
			if (sib[s] && d->lcore_cpu[s])
				say(d, "WARN", "CPUs %u and %u are SMT siblings and both lcores: they share one core's "
				    "execution units, so the polling lcore on %u runs at about half speed. Fix: give -l one "
				    "CPU of each core (thread_siblings_list), or echo off > /sys/devices/system/cpu/smt/control",
				    c, s, c);
		}
	}
}

static void governor_check(struct doctor *d)
{
	bool slow[DOC_CPUS_MAX] = { false }, any = false, seen = false;
	char list[256], gov[64] = "";

	for (unsigned int c = 0; c < DOC_CPUS_MAX; c++) {
		char path[128], line[64];

		if (!d->poll_cpu[c])
			continue;
		snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%u/cpufreq/scaling_governor", c);
		if (!read_line(d, path, line, sizeof(line)))
			continue;
		seen = true;
		if (strcmp(line, "performance") != 0) {
			slow[c] = any = true;
			snprintf(gov, sizeof(gov), "%s", line);
		}
	}
	if (!seen) {
		say(d, "ok", "frequency governor: none exposed (a VM's host decides)");
		return;
	}
	if (!any) {
		say(d, "ok", "frequency governor: performance on every polling CPU");
		return;
	}
	cpu_list_format(slow, DOC_CPUS_MAX, list, sizeof(list));
	say(d, "WARN", "polling CPUs %s run the '%s' frequency governor: a polling loop looks idle to it between "
	    "bursts, and the clock drops under load's first packets. Fix: cpupower -c %s frequency-set -g performance",
	    list, gov, list);
}

/* A PCI port: present, bound to a driver DPDK can use, on the polling lcores' node. */
static void pci_check(struct doctor *d, const char *addr)
{
	char path[PATH_MAX], link[PATH_MAX], line[32];
	const char *driver;
	ssize_t n;
	int node;

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s", addr);
	if (!exists(d, path)) {
		say(d, "FAIL", "port %s: no such PCI device: EAL finds no port. Fix: the address in -a (lspci -D lists "
		    "them)", addr);
		return;
	}
	snprintf(path, sizeof(path), "%s/sys/bus/pci/devices/%s/driver", d->in->root, addr);
	n = readlink(path, link, sizeof(link) - 1);
	link[n > 0 ? n : 0] = '\0';
	driver = n > 0 ? strrchr(link, '/') != NULL ? strrchr(link, '/') + 1 : link : "";
	if (strcmp(driver, "vfio-pci") == 0) {
		char groups[PATH_MAX];
		DIR *dir;
		bool any = false;
		struct dirent *e;

		snprintf(groups, sizeof(groups), "%s/sys/kernel/iommu_groups", d->in->root);
		dir = opendir(groups);
		while (dir != NULL && (e = readdir(dir)) != NULL)
			any |= e->d_name[0] != '.';
		if (dir != NULL)
			closedir(dir);
		if (any) {
			say(d, "ok", "port %s: vfio-pci, behind the IOMMU", addr);
		} else if (read_line(d, "/sys/module/vfio/parameters/enable_unsafe_noiommu_mode", line, sizeof(line)) &&
			   line[0] == 'Y') {
			say(d, "WARN", "port %s: vfio-pci in no-IOMMU mode: the NIC may DMA anywhere in memory. Fix: "
			    "intel_iommu=on iommu=pt (or amd_iommu=on) on the kernel command line", addr);
		} else {
			say(d, "FAIL", "port %s: vfio-pci without an IOMMU: EAL cannot map DMA memory for it. Fix: "
			    "intel_iommu=on iommu=pt (or amd_iommu=on) on the kernel command line, and the IOMMU on in "
			    "the firmware", addr);
		}
	} else if (strcmp(driver, "uio_pci_generic") == 0 || strcmp(driver, "igb_uio") == 0) {
		say(d, "WARN", "port %s: %s: no IOMMU protection, and no interrupts for the link state. Fix: "
		    "dpdk-devbind.py --bind=vfio-pci %s", addr, driver, addr);
	} else if (strcmp(driver, "mlx5_core") == 0 || strcmp(driver, "mlx4_core") == 0) {
		say(d, "ok", "port %s: %s (a bifurcated driver: DPDK shares it with the kernel)", addr, driver);
	} else {
		say(d, "FAIL", "port %s: bound to %s%s: EAL cannot drive it. Fix: dpdk-devbind.py --bind=vfio-pci %s "
		    "(modprobe vfio-pci first)", addr, driver[0] != '\0' ? "the kernel's driver " : "no driver", driver,
		    addr);
	}
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/numa_node", addr);
	if (read_line(d, path, line, sizeof(line)) && (node = atoi(line)) >= 0 && node < DOC_NODES_MAX &&
	    !d->node_used[node]) {
		char cpus[256] = "";

		snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/cpulist", node);
		read_line(d, path, cpus, sizeof(cpus));
		say(d, "WARN", "port %s is on NUMA node %d, its polling lcores are not: every packet and its mbuf "
		    "cross the socket interconnect. Fix: -l with CPUs of node %d (%s)", addr, node, node,
		    cpus[0] != '\0' ? cpus : "lscpu -e lists them");
	}
}

static void ports_check(struct doctor *d)
{
	if (d->eal.memif)
		say(d, "WARN", "ports: net_memif is for local tools and tests (docs/deploy.md): when its peer leaves, the "
		    "memif PMD unmaps the peer's memory on its interrupt thread with nothing keeping a polling lcore out "
		    "of it, and batchwire has crashed so. Fix: serve on a PCI NIC (net_af_packet for tests)");
	if (d->eal.nb_pci == 0) {
		say(d, "ok", "ports: %s", d->eal.nb_vdev > 0 ? "virtual (--vdev): no PCI device to check"
					 : d->eal.no_pci ? "--no-pci and no --vdev: EAL will find no port"
							 : "no -a: EAL probes every PCI device bound to a DPDK driver");
		return;
	}
	for (unsigned int i = 0; i < d->eal.nb_pci; i++)
		pci_check(d, d->eal.pci[i]);
}

/* The GPU of the models with device = gpu: an NVIDIA device on the PCI bus, near the polling lcores. */
static void gpu_check(struct doctor *d)
{
	char path[PATH_MAX], line[32];
	unsigned int index = 0;
	struct dirent *e;
	bool wanted = false, found = false;
	DIR *dir;

	for (unsigned int i = 0; i < d->in->cfg->nb_models; i++)
		wanted |= d->in->cfg->models[i].device == APP_DEVICE_GPU;
	if (!wanted)
		return;
	snprintf(path, sizeof(path), "%s/sys/bus/pci/devices", d->in->root);
	dir = opendir(path);
	while (dir != NULL && (e = readdir(dir)) != NULL && !found) {
		char vendor[32] = "", cls[32] = "";

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/vendor", e->d_name);
		read_line(d, path, vendor, sizeof(vendor));
		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/class", e->d_name);
		read_line(d, path, cls, sizeof(cls));
		if (strcmp(vendor, "0x10de") != 0 || strncmp(cls, "0x03", 4) != 0 || index++ != d->in->cfg->gpu_index)
			continue;
		found = true;
		snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/numa_node", e->d_name);
		int node = read_line(d, path, line, sizeof(line)) ? atoi(line) : -1;

		if (node >= 0 && node < DOC_NODES_MAX && !d->node_used[node])
			say(d, "WARN", "GPU %u (%s) is on NUMA node %d, the polling lcores that launch its batches are not: "
			    "its reads of request rows cross the interconnect. Fix: -l with CPUs of node %d", d->in->cfg->gpu_index,
			    e->d_name, node, node);
		else
			say(d, "ok", "GPU %u: %s", d->in->cfg->gpu_index, e->d_name);
	}
	if (dir != NULL)
		closedir(dir);
	if (!found)
		say(d, "FAIL", "models with device = gpu, and no NVIDIA GPU %u on the PCI bus: batchwire stops at "
		    "start-up. Fix: the GPU's driver (nvidia-smi lists the devices), or gpu_index", d->in->cfg->gpu_index);
}

static void limits_check(struct doctor *d)
{
	if (d->in->memlock != (unsigned long long)RLIM_INFINITY && !d->eal.no_huge && getuid() != 0)
		say(d, "WARN", "ulimit -l is %llu KiB: vfio-pci locks the DMA memory it maps, beyond that EAL fails. Fix: "
		    "ulimit -l unlimited (LimitMEMLOCK=infinity in the unit; memlock in limits.conf)", d->in->memlock >> 10);
	else
		say(d, "ok", "locked memory: %s", d->in->memlock == (unsigned long long)RLIM_INFINITY ? "unlimited"
						  : getuid() == 0 ? "root may lock any" : "not needed without hugepages");
	if (d->in->openblas_threads == NULL || strcmp(d->in->openblas_threads, "1") != 0)
		say(d, "WARN", "OPENBLAS_NUM_THREADS is %s: OpenBLAS starts a thread pool beside the lcores, which "
		    "competes with them for their cores. Fix: export OPENBLAS_NUM_THREADS=1 (the systemd unit sets it)",
		    d->in->openblas_threads != NULL ? d->in->openblas_threads : "unset");
}

int app_doctor(const struct app_doctor_input *in, FILE *out)
{
	static struct doctor d; /* large: off the stack */
	int rc;

	memset(&d, 0, sizeof(d));
	d.in = in;
	d.out = out;
	rc = eal_parse(&d.eal, in->eal_argc, in->eal_argv, out);
	if (rc != 0)
		return rc;
	lcores_check(&d);
	hugepages_check(&d);
	isolation_check(&d);
	smt_check(&d);
	governor_check(&d);
	ports_check(&d);
	gpu_check(&d);
	limits_check(&d);
	fprintf(out, "doctor: %u blocking, %u warnings: %s\n", d.fails, d.warns,
		d.fails > 0 ? "batchwire would not start or not serve (exit 1)" : "nothing blocks a start (exit 0)");
	return (int)d.fails;
}
