/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of app/doctor.c on fake sysfs/procfs trees made here (the host's own state is
 * integration-doctor's): a host where everything is in order (no finding), one where everything
 * is wrong (each finding, with its fix), --socket-mem against the free pages, EAL arguments it
 * cannot read.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../bw_cunit.h"
#include "config.h"
#include "doctor.h"

static char g_root[64];

static void mkpath(const char *path)
{
	char buf[512];

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1; *p != '\0'; p++) {
		if (*p == '/') {
			*p = '\0';
			mkdir(buf, 0755);
			*p = '/';
		}
	}
	mkdir(buf, 0755);
}

/* root/path holding text (its directories made). */
static void put(const char *path, const char *text)
{
	char full[512], dir[512];
	FILE *f;

	snprintf(full, sizeof(full), "%s%s", g_root, path);
	snprintf(dir, sizeof(dir), "%s", full);
	*strrchr(dir, '/') = '\0';
	mkpath(dir);
	f = fopen(full, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs(text, f);
	fclose(f);
}

static void link_to(const char *path, const char *target)
{
	char full[512], dir[512];

	snprintf(full, sizeof(full), "%s%s", g_root, path);
	snprintf(dir, sizeof(dir), "%s", full);
	*strrchr(dir, '/') = '\0';
	mkpath(dir);
	unlink(full);
	CU_ASSERT_EQUAL(symlink(target, full), 0);
}

/* A host of 4 CPUs (2 nodes when two_nodes: CPUs 2-3 on node 1), every CPU its own core. */
static void host_make(bool two_nodes)
{
	char path[256], text[32];

	CU_ASSERT_EQUAL_FATAL(system("rm -rf /tmp/bwtest-doctor-*") == -1, 0);
	snprintf(g_root, sizeof(g_root), "/tmp/bwtest-doctor-XXXXXX");
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(g_root));
	for (int c = 0; c < 4; c++) {
		int node = two_nodes && c >= 2 ? 1 : 0;

		snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/node%d", c, node);
		mkpath(strcat(strcpy((char[512]){0}, g_root), path));
		snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", c);
		snprintf(text, sizeof(text), "%d\n", c);
		put(path, text);
	}
	put("/sys/devices/system/node/node0/cpulist", two_nodes ? "0-1\n" : "0-3\n");
	if (two_nodes)
		put("/sys/devices/system/node/node1/cpulist", "2-3\n");
}

static void cfg_make(struct app_config *cfg, const char *poll, bool gpu)
{
	char *args[] = { "batchwire", "--ip", "10.0.0.1", "--poll-lcores", (char *)poll, NULL };
	FILE *null = fopen("/dev/null", "w");

	CU_ASSERT_EQUAL_FATAL(app_config_parse(5, args, cfg, null, null), APP_CONFIG_RUN);
	fclose(null);
	if (gpu) {
		cfg->nb_models = 2;
		cfg->models[1].device = APP_DEVICE_GPU;
	}
}

/* Runs the doctor on the tree; its output in *text (the caller frees it). */
static int run(const struct app_config *cfg, char **eal, const char *openblas, char **text)
{
	struct app_doctor_input in = { .root = g_root, .cfg = cfg, .memlock = RLIM_INFINITY, .openblas_threads = openblas };
	size_t len;
	FILE *out = open_memstream(text, &len);
	int rc;

	while (eal[in.eal_argc] != NULL)
		in.eal_argc++;
	in.eal_argv = eal;
	rc = app_doctor(&in, out);
	fclose(out);
	printf("\n%s", *text);
	return rc;
}

static int count(const char *text, const char *what)
{
	int n = 0;

	for (const char *p = text; (p = strstr(p, what)) != NULL; p += strlen(what))
		n++;
	return n;
}

/* Everything in order: hugepages, isolation, no SMT, performance, vfio-pci behind an IOMMU, near. */
static void test_healthy(void)
{
	static struct app_config cfg;
	char *eal[] = { "batchwire", "-l", "0-3", "-a", "0000:3b:00.0,rxq=2", "--socket-mem", "1024", NULL };
	char *text;

	host_make(false);
	put("/sys/devices/system/node/node0/hugepages/hugepages-2048kB/free_hugepages", "1024\n");
	put("/sys/devices/system/node/node0/hugepages/hugepages-1048576kB/free_hugepages", "0\n");
	put("/sys/devices/system/cpu/isolated", "1-3\n");
	put("/sys/devices/system/cpu/nohz_full", "1-3\n");
	put("/proc/cmdline", "BOOT_IMAGE=/vmlinuz isolcpus=managed_irq,1-3 rcu_nocbs=1-3 quiet\n");
	for (int c = 0; c < 4; c++) {
		char path[128];

		snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/cpufreq/scaling_governor", c);
		put(path, "performance\n");
	}
	put("/sys/bus/pci/devices/0000:3b:00.0/numa_node", "0\n");
	link_to("/sys/bus/pci/devices/0000:3b:00.0/driver", "../../../bus/pci/drivers/vfio-pci");
	mkpath(strcat(strcpy((char[512]){0}, g_root), "/sys/kernel/iommu_groups/12"));
	cfg_make(&cfg, "1-3", false);
	CU_ASSERT_EQUAL(run(&cfg, eal, "1", &text), 0);
	CU_ASSERT_EQUAL(count(text, "WARN"), 0);
	CU_ASSERT_EQUAL(count(text, "FAIL"), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "polling on CPUs 1-3"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "hugepages: node 0 has 2048 MiB free for its --socket-mem"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "port 0000:3b:00.0: vfio-pci, behind the IOMMU"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "doctor: 0 blocking, 0 warnings: nothing blocks a start (exit 0)"));
	free(text);
}

/* Everything wrong, each finding once with its fix. */
static void test_broken(void)
{
	static struct app_config cfg;
	char *eal[] = { "batchwire", "--lcores", "0@0,1@1,2@2,3@3", "-a", "0000:3b:00.0", "-a", "0000:5e:00.0",
			"-a", "0000:af:00.0", NULL };
	char *text;

	host_make(true);
	put("/sys/devices/system/node/node0/hugepages/hugepages-2048kB/free_hugepages", "0\n");
	put("/sys/devices/system/node/node1/hugepages/hugepages-2048kB/free_hugepages", "512\n");
	put("/proc/cmdline", "BOOT_IMAGE=/vmlinuz quiet\n");
	put("/sys/devices/system/cpu/cpu1/topology/thread_siblings_list", "1,3\n");
	put("/sys/devices/system/cpu/cpu1/cpufreq/scaling_governor", "powersave\n");
	put("/sys/bus/pci/devices/0000:3b:00.0/numa_node", "0\n");
	link_to("/sys/bus/pci/devices/0000:3b:00.0/driver", "../../../bus/pci/drivers/ixgbe");
	put("/sys/bus/pci/devices/0000:5e:00.0/numa_node", "1\n");
	link_to("/sys/bus/pci/devices/0000:5e:00.0/driver", "../../../bus/pci/drivers/vfio-pci");
	cfg_make(&cfg, "1,3", true);
	CU_ASSERT_EQUAL(run(&cfg, eal, NULL, &text), 5);
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "hugepages: node 0 has none free"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "echo 1024 > /sys/devices/system/node/node0/hugepages/hugepages-2048kB/"
					    "nr_hugepages"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "hugepages: node 1 has 1024 MiB free"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "polling CPUs 1,3 are not in isolcpus"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "add nohz_full=1,3 to GRUB_CMDLINE_LINUX"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "add rcu_nocbs=1,3"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "CPUs 1 and 3 are SMT siblings and both lcores"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "polling CPUs 1 run the 'powersave' frequency governor"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "cpupower -c 1 frequency-set -g performance"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "port 0000:3b:00.0: bound to the kernel's driver ixgbe"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "dpdk-devbind.py --bind=vfio-pci 0000:3b:00.0"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "port 0000:5e:00.0: vfio-pci without an IOMMU"));
	CU_ASSERT_PTR_NULL(strstr(text, "0000:5e:00.0 is on NUMA node")); /* node 1 polls: cpu 3 */
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "port 0000:af:00.0: no such PCI device"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "no NVIDIA GPU 0 on the PCI bus"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "OPENBLAS_NUM_THREADS is unset"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "doctor: 5 blocking, 6 warnings: batchwire would not start or not serve"));
	free(text);

	/* the port's node has no polling lcore: the CPUs of its node named; the IOMMU's no-IOMMU mode */
	char *eal2[] = { "batchwire", "-l", "0-1", "-a", "0000:5e:00.0", NULL };
	put("/sys/devices/system/node/node0/hugepages/hugepages-2048kB/free_hugepages", "512\n");
	put("/sys/module/vfio/parameters/enable_unsafe_noiommu_mode", "Y\n");
	cfg_make(&cfg, "1", false);
	CU_ASSERT_EQUAL(run(&cfg, eal2, "1", &text), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "port 0000:5e:00.0 is on NUMA node 1, its polling lcores are not"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "-l with CPUs of node 1 (2-3)"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "vfio-pci in no-IOMMU mode"));
	free(text);
}

/* --socket-mem beyond the free pages of a node; -m beyond all of them; --no-huge; a bad lcore list. */
static void test_memory_and_arguments(void)
{
	static struct app_config cfg;
	char *eal[] = { "batchwire", "-l", "0-1", "--socket-mem", "4096", "--vdev", "net_null0", NULL };
	char *eal_m[] = { "batchwire", "-l", "0-1", "-m", "8192", "--vdev", "net_null0", NULL };
	char *eal_nohuge[] = { "batchwire", "-l", "0-1", "--no-huge", "--vdev", "net_null0", NULL };
	char *eal_memif[] = { "batchwire", "-l", "0-1", "--no-huge", "--vdev", "net_memif0,role=server,socket=/tmp/m.sock",
			      NULL };
	char *eal_bad[] = { "batchwire", "-l", "0-x", NULL };
	char *text;

	host_make(false);
	put("/sys/devices/system/node/node0/hugepages/hugepages-1048576kB/free_hugepages", "2\n");
	cfg_make(&cfg, "1", false);
	CU_ASSERT_EQUAL(run(&cfg, eal, "1", &text), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "node 0 has 2048 MiB free, --socket-mem asks 4096 MiB there"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "echo 4 > /sys/devices/system/node/node0/hugepages/hugepages-1048576kB/"
					    "nr_hugepages"));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "ports: virtual (--vdev)"));
	free(text);
	CU_ASSERT_EQUAL(run(&cfg, eal_m, "1", &text), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "-m 8192 needs 8192 MiB, 2048 MiB are free"));
	free(text);
	CU_ASSERT_EQUAL(run(&cfg, eal_nohuge, "1", &text), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "WARN  hugepages: --no-huge"));
	CU_ASSERT_PTR_NULL(strstr(text, "net_memif"));
	free(text);
	/* memif serves tests and local tools, not production: a warning, not a refusal */
	CU_ASSERT_EQUAL(run(&cfg, eal_memif, "1", &text), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "WARN  ports: net_memif is for local tools and tests"));
	free(text);
	CU_ASSERT_EQUAL(run(&cfg, eal_bad, "1", &text), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "cannot read the lcore list '0-x'"));
	free(text);
	/* a polling lcore EAL does not have */
	cfg_make(&cfg, "5", false);
	CU_ASSERT_EQUAL(run(&cfg, eal_nohuge, "1", &text), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "polling lcore 5 is not among EAL's lcores"));
	free(text);
}

static void cleanup(void)
{
	char cmd[128];

	if (g_root[0] != '\0') {
		snprintf(cmd, sizeof(cmd), "rm -rf %s", g_root);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", g_root);
	}
}

int main(void)
{
	static CU_TestInfo tests[] = {
		{ "a host in order: no finding, exit 0", test_healthy },
		{ "a host with everything wrong: each finding and its fix", test_broken },
		{ "hugepages against --socket-mem, -m, --no-huge; arguments it cannot read", test_memory_and_arguments },
		CU_TEST_INFO_NULL,
	};
	static CU_SuiteInfo suites[] = { { "doctor on fake sysfs and procfs trees", NULL, NULL, NULL, NULL, tests },
					 CU_SUITE_INFO_NULL };
	int status = bw_cunit_run(suites);

	cleanup();
	return status;
}
