/* SPDX-License-Identifier: BSD-3-Clause */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <rte_cfgfile.h>

#include "config.h"
#include "graph.h"
#include "host.h"

#define APP_INI_SECTION "dataplane"

struct app_option;
typedef int (*app_option_parse_fn)(const struct app_option *opt, const char *value, struct app_config *cfg);

/* One parameter: its command-line name (--mtu), its INI key (mtu), how to parse it, what it accepts. */
struct app_option {
	const char *flag;
	const char *key;
	app_option_parse_fn parse;
	uint64_t min, max;
	size_t offset, width;      /* integer target inside struct app_config */
	const char *accepted;
	const char *help;
};

static int parse_uint(const struct app_option *opt, const char *value, struct app_config *cfg)
{
	char *end;
	unsigned long long v;

	if (!isdigit((unsigned char)value[0])) /* strtoull would take " 12", "-1" and "+1" */
		return -EINVAL;
	errno = 0;
	v = strtoull(value, &end, 10);
	if (errno != 0 || *end != '\0' || v < opt->min || v > opt->max)
		return -EINVAL;
	uint8_t *target = (uint8_t *)cfg + opt->offset;
	switch (opt->width) {
	case sizeof(uint16_t):
		*(uint16_t *)target = (uint16_t)v;
		break;
	case sizeof(uint32_t):
		*(uint32_t *)target = (uint32_t)v;
		break;
	default:
		return -EINVAL;
	}
	return 0;
}

static int parse_gpu_module(const struct app_option *opt __rte_unused, const char *value, struct app_config *cfg)
{
	if (value[0] == '\0' || strlen(value) >= sizeof(cfg->gpu_module))
		return -EINVAL;
	snprintf(cfg->gpu_module, sizeof(cfg->gpu_module), "%s", value);
	return 0;
}

static int parse_ipv4(const struct app_option *opt __rte_unused, const char *value, struct app_config *cfg)
{
	struct in_addr addr;

	if (inet_pton(AF_INET, value, &addr) != 1)
		return -EINVAL;
	/* 0/8, loopback, multicast, reserved (240/4) and broadcast cannot be an appliance's address. */
	uint32_t host = ntohl(addr.s_addr);
	if ((host >> 24) == 0 || (host >> 24) == 127 || (host >> 28) >= 0xe)
		return -EINVAL;
	cfg->dp.ipv4_addr = addr.s_addr;
	cfg->have_ip = true;
	return 0;
}

/* "ADDR:PORT" or "off". */
/* "ADDR:PORT" (IPv4) or "off". \return 0 or -EINVAL. */
static int addr_port_parse(const char *value, bool *enabled, uint32_t *addr_out, uint16_t *port_out)
{
	char addr[INET_ADDRSTRLEN];
	const char *colon = strrchr(value, ':');
	struct in_addr in;
	char *end;
	unsigned long port;

	if (strcmp(value, "off") == 0) {
		*enabled = false;
		return 0;
	}
	if (colon == NULL || colon == value || (size_t)(colon - value) >= sizeof(addr) || !isdigit((unsigned char)colon[1]))
		return -EINVAL;
	memcpy(addr, value, (size_t)(colon - value));
	addr[colon - value] = '\0';
	port = strtoul(colon + 1, &end, 10);
	if (*end != '\0' || port == 0 || port > 65535 || inet_pton(AF_INET, addr, &in) != 1)
		return -EINVAL;
	*enabled = true;
	*addr_out = in.s_addr;
	*port_out = (uint16_t)port;
	return 0;
}

static int parse_http(const struct app_option *opt __rte_unused, const char *value, struct app_config *cfg)
{
	return addr_port_parse(value, &cfg->http.enabled, &cfg->http.addr, &cfg->http.port);
}

static int parse_http_probes(const struct app_option *opt __rte_unused, const char *value, struct app_config *cfg)
{
	return addr_port_parse(value, &cfg->http.probes_enabled, &cfg->http.probes_addr, &cfg->http.probes_port);
}

/* "1,3-5": ids 0..APP_LCORE_ID_MAX, each once, at most max of them. \return the count, or -EINVAL. */
static int parse_allow(const struct app_option *opt __rte_unused, const char *value, struct app_config *cfg)
{
	char err[128];

	return dp_allowlist_parse(value, &cfg->dp.allow, err, sizeof(err));
}

static int parse_key_file(const struct app_option *opt __rte_unused, const char *value, struct app_config *cfg)
{
	if (value[0] == '\0' || strlen(value) >= sizeof(cfg->dp.auth.key_file))
		return -EINVAL;
	snprintf(cfg->dp.auth.key_file, sizeof(cfg->dp.auth.key_file), "%s", value);
	return 0;
}

static int lcore_list_parse(const char *value, unsigned int *ids, unsigned int max)
{
	bool seen[APP_LCORE_ID_MAX + 1] = {false};
	unsigned int count = 0;
	const char *p = value;

	while (*p != '\0') {
		char *end;
		unsigned long first, last;

		if (*p < '0' || *p > '9')
			return -EINVAL;
		first = strtoul(p, &end, 10);
		last = first;
		if (*end == '-') {
			p = end + 1;
			if (*p < '0' || *p > '9')
				return -EINVAL;
			last = strtoul(p, &end, 10);
		}
		if (first > last || last > APP_LCORE_ID_MAX)
			return -EINVAL;
		for (unsigned long id = first; id <= last; id++) {
			if (seen[id] || count == max)
				return -EINVAL;
			seen[id] = true;
			ids[count++] = (unsigned int)id;
		}
		if (*end == ',' && end[1] != '\0')
			end++;
		else if (*end != '\0')
			return -EINVAL;
		p = end;
	}
	return count == 0 ? -EINVAL : (int)count;
}

static int parse_lcores(const struct app_option *opt __rte_unused, const char *value, struct app_config *cfg)
{
	int count = lcore_list_parse(value, cfg->poll_lcores, DP_MAX_POLL_LCORES);

	if (count < 0)
		return count;
	cfg->nb_poll_lcores = (unsigned int)count;
	return 0;
}

#define U16_FIELD(f) offsetof(struct app_config, f), sizeof(uint16_t)
#define U32_FIELD(f) offsetof(struct app_config, f), sizeof(uint32_t)
#define STR(x) #x
#define XSTR(x) STR(x)

static const struct app_option g_options[] = {
	{"ip", "ip", parse_ipv4, 0, 0, 0, 0, "a unicast, non-loopback IPv4 address such as 10.0.0.1",
	 "IPv4 address the appliance answers on (required)"},
	{"udp-port", "udp_port", parse_uint, 1, 65535, U16_FIELD(dp.udp_port), "an integer in 1..65535",
	 "UDP port of protocol v1 (default " XSTR(BW_UDP_PORT_DEFAULT) ")"},
	{"mtu", "mtu", parse_uint, DP_MTU_MIN, DP_MTU_MAX, U16_FIELD(dp.mtu),
	 "an integer in " XSTR(DP_MTU_MIN) ".." XSTR(DP_MTU_MAX),
	 "IP MTU of the port; up to 9000 for jumbo frames (default " XSTR(DP_MTU_DEFAULT) ")"},
	{"port", "port", parse_uint, 0, RTE_MAX_ETHPORTS - 1, U16_FIELD(port_id),
	 "a DPDK port id in 0.." XSTR(RTE_MAX_ETHPORTS) " (exclusive)", "DPDK port to serve on (default 0)"},
	{"poll-lcores", "poll_lcores", parse_lcores, 0, 0, 0, 0,
	 "a list of distinct lcore ids below " XSTR(RTE_MAX_LCORE) " such as 1,3-5",
	 "lcores that poll the port, one RX/TX queue each (default: every EAL worker lcore)"},
	{"tx-drain-us", "tx_drain_us", parse_uint, 1, DP_TX_DRAIN_US_MAX, U32_FIELD(dp.tx_drain_us),
	 "an integer in 1.." XSTR(DP_TX_DRAIN_US_MAX),
	 "longest a reply waits in the TX buffer, in us (default " XSTR(DP_TX_DRAIN_US_DEFAULT) ")"},
	{"rx-desc", "rx_desc", parse_uint, 64, DP_DESC_MAX, U16_FIELD(dp.rx_desc), "an integer in 64..16384",
	 "RX descriptors per queue (default " XSTR(DP_RX_DESC_DEFAULT) ")"},
	{"tx-desc", "tx_desc", parse_uint, 64, DP_DESC_MAX, U16_FIELD(dp.tx_desc), "an integer in 64..16384",
	 "TX descriptors per queue (default " XSTR(DP_TX_DESC_DEFAULT) ")"},
	{"mbufs-held", "mbufs_held", parse_uint, 0, 1u << 20, U32_FIELD(dp.mbufs_held),
	 "an integer in 0..1048576",
	 "extra mbufs per socket for requests held in queued batches; each polling\n"
	 "                   lcore holds at most mbufs_held / polling lcores, then refuses\n"
	 "                   RESOURCE_EXHAUSTED (default " XSTR(DP_MBUFS_HELD_DEFAULT) ")"},
	{"max-message-bytes", "max_message_bytes", parse_uint, 1024, 1u << 30, U32_FIELD(dp.msg_max),
	 "an integer in 1024..1073741824",
	 "largest request (and reply) body, in bytes, across all its datagrams (default 16777216)"},
	{"reassembly-messages", "reassembly_messages", parse_uint, 1, DP_REASM_MSGS_MAX, U32_FIELD(dp.reasm_msgs),
	 "an integer in 1.." XSTR(DP_REASM_MSGS_MAX),
	 "per polling lcore: multi-datagram messages being reassembled or served at once (default "
	 XSTR(DP_REASM_MSGS_DEFAULT) ")"},
	{"reassembly-mbufs", "reassembly_mbufs", parse_uint, 0, 1u << 22, U32_FIELD(dp.reasm_mbufs),
	 "an integer in 0..4194304",
	 "per polling lcore: mbufs those messages may hold (default 0: one maximal\n"
	 "                   request at the MTU, and 1024 more)"},
	{"reassembly-timeout-ms", "reassembly_timeout_ms", parse_uint, 1, DP_REASM_TIMEOUT_MS_MAX,
	 U32_FIELD(dp.reasm_timeout_ms), "an integer in 1.." XSTR(DP_REASM_TIMEOUT_MS_MAX),
	 "the longest a multi-datagram message may take to arrive whole; a longer\n"
	 "                   deadline does not hold its segments past it (default "
	 XSTR(DP_REASM_TIMEOUT_MS_DEFAULT) ")"},
	{"ping-max-bytes", "ping_max_bytes", parse_uint, 0, 1u << 30, U32_FIELD(dp.ping_max),
	 "an integer in 0..1073741824",
	 "largest PING body: PING is echoed, unsigned, to whatever source it names\n"
	 "                   (default " XSTR(DP_PING_MAX_DEFAULT) "; above max_message_bytes changes nothing)"},
	{"error-reply-rate", "error_reply_rate", parse_uint, 0, DP_RATE_MAX, U32_FIELD(dp.error_rate),
	 "an integer in 0.." XSTR(DP_RATE_MAX),
	 "per polling lcore: error replies a second to requests refused as they arrive;\n"
	 "                   more are dropped (rate_error_reply); 0: no limit (default " XSTR(DP_ERROR_RATE_DEFAULT) ")"},
	{"icmp-rate", "icmp_rate", parse_uint, 0, DP_RATE_MAX, U32_FIELD(dp.icmp_rate), "an integer in 0.." XSTR(DP_RATE_MAX),
	 "per polling lcore: ICMP echo replies a second (rate_icmp past it); 0: no limit\n"
	 "                   (default " XSTR(DP_ICMP_RATE_DEFAULT) ")"},
	{"arp-rate", "arp_rate", parse_uint, 0, DP_RATE_MAX, U32_FIELD(dp.arp_rate), "an integer in 0.." XSTR(DP_RATE_MAX),
	 "per polling lcore: ARP replies a second (rate_arp past it); 0: no limit (default " XSTR(DP_ARP_RATE_DEFAULT) ")"},
	{"http", "http", parse_http, 0, 0, 0, 0, "ADDR:PORT (an IPv4 address) or 'off'",
	 "the HTTP control server: /metrics (Prometheus), /v2/health/live|ready, /v2,\n"
	 "                   /v2/models/NAME[/ready|/infer] (KServe v2); a management address, never\n"
	 "                   the data port (default " APP_HTTP_ADDR_DEFAULT ":" XSTR(APP_HTTP_PORT_DEFAULT) ")"},
	{"http-probes", "http_probes", parse_http_probes, 0, 0, 0, 0, "ADDR:PORT (an IPv4 address) or 'off'",
	 "a second HTTP listener answering /v2/health/live|ready and /metrics only,\n"
	 "                   with connections of its own: probes and scrapes are answered even when\n"
	 "                   slow or large clients hold every connection of --http (default off)"},
	{"http-infer-slots", "http_infer_slots", parse_uint, 0, APP_HTTP_INFER_SLOTS_MAX, U32_FIELD(http.infer_slots),
	 "an integer in 0.." XSTR(APP_HTTP_INFER_SLOTS_MAX),
	 "POST /v2/models/NAME/infer requests (KServe v2) served at once; more wait\n"
	 "                   for a slot or get 503; 0: refused (default " XSTR(APP_HTTP_INFER_SLOTS_DEFAULT) ")"},
	{"http-infer-bytes", "http_infer_bytes", parse_uint, 4096, 1u << 30, U32_FIELD(http.infer_bytes),
	 "an integer in 4096..1073741824",
	 "largest HTTP inference request: its input and output tensors' bytes\n"
	 "                   (default 16777216; each slot takes at most what the largest model needs)"},
	{"allow", "allow", parse_allow, 0, 0, 0, 0,
	 "'any' or up to " XSTR(DP_ALLOW_MAX) " IPv4 prefixes such as 10.0.0.0/8,192.168.1.7 (host bits zero)",
	 "sources that get any answer (requests, ARP, ping); others are dropped\n"
	 "                   unanswered (src_not_allowed). A model's own allow key narrows it (default any)"},
	{"auth-keys", "auth_keys", parse_key_file, 0, 0, 0, 0, "a file path below 4096 bytes",
	 "key file of signed requests: lines 'KEY_ID HEX_SECRET', readable by its owner\n"
	 "                   only; SIGHUP or /batchwire/auth/reload reads it again (default none:\n"
	 "                   a signed request is refused UNAUTHENTICATED)"},
	{"auth-window-ms", "auth_window_ms", parse_uint, 1, DP_AUTH_WINDOW_MS_MAX, U32_FIELD(dp.auth.window_ms),
	 "an integer in 1.." XSTR(DP_AUTH_WINDOW_MS_MAX),
	 "how far a signed request_id (the client's clock, ns) may be from ours\n"
	 "                   (default " XSTR(DP_AUTH_WINDOW_MS_DEFAULT) ")"},
	{"auth-overlap-s", "auth_overlap_s", parse_uint, 0, DP_AUTH_OVERLAP_S_MAX, U32_FIELD(dp.auth.overlap_s),
	 "an integer in 0.." XSTR(DP_AUTH_OVERLAP_S_MAX),
	 "seconds a key taken out of the key file is still accepted after a reload\n"
	 "                   (default " XSTR(DP_AUTH_OVERLAP_S_DEFAULT) ")"},
	{"auth-flows", "auth_flows", parse_uint, 8, DP_AUTH_FLOWS_MAX, U32_FIELD(dp.auth.flows),
	 "an integer in 8..1048576",
	 "per polling lcore: signed sources whose recent request_ids are kept against\n"
	 "                   replays (default " XSTR(DP_AUTH_FLOWS_DEFAULT) ")"},
	{"gpu-module", "gpu_module", parse_gpu_module, 0, 0, 0, 0, "a file path below 4096 bytes, or 'fake'",
	 "device module of the models with device = gpu (default libbwgpu.so\n"
	 "                   beside batchwire, then libdir/batchwire); 'fake': the CPU fake device, for tests"},
	{"drain-grace-ms", "drain_grace_ms", parse_uint, 0, APP_DRAIN_GRACE_MS_MAX, U32_FIELD(drain_grace_ms),
	 "an integer in 0.." XSTR(APP_DRAIN_GRACE_MS_MAX),
	 "on SIGTERM or SIGINT: readiness off (HTTP, PING's DRAINING flag) and still\n"
	 "                   serving for this long, so load balancers move away; then no new\n"
	 "                   requests, those in flight answered, exit 0; a second signal skips\n"
	 "                   the wait (default 0)"},
	{"gpu-index", "gpu_index", parse_uint, 0, APP_GPU_INDEX_MAX, U16_FIELD(gpu_index),
	 "an integer in 0.." XSTR(APP_GPU_INDEX_MAX), "CUDA device of the models with device = gpu (default 0)"},
};

#define APP_NB_OPTIONS RTE_DIM(g_options)
enum { OPT_CONFIG = 256, OPT_MODEL, OPT_MODEL_OPT, OPT_HELP, OPT_VERSION };

void app_config_usage(FILE *out, const char *prgname)
{
	fprintf(out,
		"Usage: %s [EAL options] -- [options]\n"
		"batchwire serves inference requests (protocol v1 over UDP) on DPDK polling lcores.\n\n"
		"Options (each also a key of the [" APP_INI_SECTION "] section of --config, '-' spelled '_'):\n",
		prgname);
	for (unsigned int i = 0; i < APP_NB_OPTIONS; i++)
		fprintf(out, "  --%-14s %s\n", g_options[i].flag, g_options[i].help);
	fprintf(out,
		"  --config FILE    INI file with the options above; the command line overrides it\n"
		"  --model M=FILE   serve the ONNX model FILE as M (repeatable; [model M] path = FILE)\n"
		"  --model-opt M.K=V  option K of model M, repeatable; also key K of [model M] of --config:\n"
		"                   path (an .onnx file, or a directory of versions N/model.onnx as\n"
		"                   Triton lays them out), version_policy (latest, the default; latest N, the N\n"
		"                   highest served at once; or specific N),\n"
		"                   device (cpu or gpu), workers (worker lcores, default the main lcore;\n"
		"                   cpu only), slots, max_request_bytes (largest request body, default\n"
		"                   max_message_bytes), allow (sources that may use it, as --allow), auth\n"
		"                   (required: signed requests only; default optional),\n"
		"                   precision (cpu: fp32 or bf16, the latter on AMX;\n"
		"                   gpu: fp32 or fp16), chunk_rows (cpu: auto, off or N: run a batch\n"
		"                   depth first, N rows at a time; auto measures at load, the default),\n"
		"                   and the batching options of docs/batching.md\n"
		"                   (max_batch_size...); device = gpu needs allowed_batch_sizes and takes\n"
		"                   layout (auto, nchw, nhwc) and launch_mode (graph, doorbell)\n"
		"  The built-in model 'echo' replies with its inputs; [model echo] sets its batching.\n"
		"  --doctor         check this host against the configuration (hugepages, isolated cores, SMT,\n"
		"                   governors, the NIC's driver and NUMA node, the GPU, limits) and exit:\n"
		"                   0 when nothing blocks a start, 1 otherwise (docs/deploy.md)\n"
		"  --help           this text\n"
		"  --version        print the version\n\n"
		"Example (af_packet on a veth end, polling on lcore 1):\n"
		"  %s -l 0-1 --no-huge -m 1024 --file-prefix bw --vdev net_af_packet0,iface=veth0 -- --ip 10.0.0.1 \\\n"
		"      --model mlp=models/mlp.onnx --model-opt mlp.allowed_batch_sizes=1,2,4,8\n"
		"Ports: a PCI NIC (vfio-pci) to serve; net_af_packet on a veth pair for tests; net_memif\n"
		"  for local tools and tests only, never production: a memif peer that leaves under\n"
		"  load can crash the PMD (docs/deploy.md).\n"
		"Telemetry: dpdk-telemetry.py -f PREFIX, then /batchwire/stats, /batchwire/lcores,\n"
		"  /batchwire/model,NAME and /batchwire/gpu; /batchwire/reload[,NAME] reloads a model.\n"
		"Reload: SIGHUP (every model, and the key file), /batchwire/reload, or HTTP POST\n"
		"  /v2/repository/models/NAME/load: the version the policy selects now is loaded beside the\n"
		"  served one and takes over between batches; one that fails to load changes nothing.\n"
		"Environment: BW_CPU_ISA=baseline|avx2|avx512|amx caps the CPU kernels' instruction set (default:\n"
		"  the highest this CPU runs; logged at start-up); OPENBLAS_NUM_THREADS=1 (see README.md).\n"
		"Exit status: 0 after a clean stop (SIGINT/SIGTERM), 1 on a bad parameter or a start-up failure.\n",
		prgname);
}

static int option_apply(const struct app_option *opt, const char *value, struct app_config *cfg, FILE *err,
			const char *origin)
{
	if (opt->parse(opt, value, cfg) == 0)
		return 0;
	if (origin == NULL)
		fprintf(err, "batchwire: invalid --%s '%s': expected %s\n", opt->flag, value, opt->accepted);
	else
		fprintf(err, "batchwire: invalid %s '%s' in [" APP_INI_SECTION "] of %s: expected %s\n", opt->key,
			value, origin, opt->accepted);
	return -EINVAL;
}

#define APP_INI_SECTIONS_MAX (1 + APP_MODELS_MAX)
#define APP_INI_MODEL_PREFIX "model "

static bool section_name_ok(const char *name, size_t len)
{
	size_t prefix = strlen(APP_INI_MODEL_PREFIX);

	if (len == strlen(APP_INI_SECTION) && strncmp(name, APP_INI_SECTION, len) == 0)
		return true;
	return len > prefix && strncmp(name, APP_INI_MODEL_PREFIX, prefix) == 0 && len < CFG_NAME_LEN;
}

/* Remembers a section name; \return true when it was seen before (or too many to remember). */
static bool section_seen(char (*seen)[CFG_NAME_LEN], unsigned int *nb_seen, const char *name, size_t len)
{
	for (unsigned int i = 0; i < *nb_seen; i++) {
		if (strlen(seen[i]) == len && strncmp(seen[i], name, len) == 0)
			return true;
	}
	if (*nb_seen == APP_INI_SECTIONS_MAX)
		return true;
	snprintf(seen[(*nb_seen)++], CFG_NAME_LEN, "%.*s", (int)len, name);
	return false;
}

/*
 * rte_cfgfile (22.11) silently skips a line without '=' and keeps a repeated section apart where we
 * would read only the first: a typo would go unnoticed. This pass refuses what it would skip.
 */
static int config_file_check(const char *path, FILE *err)
{
	struct stat st;
	char line[1024];
	char seen[APP_INI_SECTIONS_MAX][CFG_NAME_LEN];
	unsigned int lineno = 0, nb_seen = 0;
	bool in_section = false;
	FILE *f;
	int ret = 0;

	f = fopen(path, "r");
	if (f == NULL || fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
		fprintf(err, "batchwire: invalid --config '%s': expected a readable INI file (%s)\n", path,
			f == NULL ? strerror(errno) : "not a regular file");
		if (f != NULL)
			fclose(f);
		return -EINVAL;
	}
	while (ret == 0 && fgets(line, sizeof(line), f) != NULL) {
		char *p = line, *eq;

		lineno++;
		while (isspace((unsigned char)*p))
			p++;
		if (*p == '\0' || *p == ';')
			continue;
		if (*p == '[') {
			size_t len = strcspn(p + 1, "]");
			in_section = true;
			if (!section_name_ok(p + 1, len)) {
				fprintf(err, "batchwire: invalid section '[%.*s]' in %s line %u: expected [" APP_INI_SECTION
					"] or [model NAME]\n", (int)len, p + 1, path, lineno);
				ret = -EINVAL;
			} else if (section_seen(seen, &nb_seen, p + 1, len)) {
				fprintf(err, "batchwire: invalid --config '%s' line %u: section [%.*s] appears twice: "
					"expected each section once\n", path, lineno, (int)len, p + 1);
				ret = -EINVAL;
			}
			continue;
		}
		eq = strchr(p, '=');
		if (eq == NULL || eq == p) {
			fprintf(err, "batchwire: invalid --config '%s' line %u: expected 'key = value' or a ; comment\n",
				path, lineno);
			ret = -EINVAL;
		} else if (!in_section) {
			fprintf(err, "batchwire: invalid --config '%s' line %u: expected keys inside [" APP_INI_SECTION
				"]\n", path, lineno);
			ret = -EINVAL;
		} else {
			char *v = eq + 1;
			while (isspace((unsigned char)*v))
				v++;
			if (*v == '\0' || *v == ';') {
				*eq = '\0';
				fprintf(err, "batchwire: invalid --config '%s' line %u: key '%s' has no value\n", path,
					lineno, strtok(p, " \t"));
				ret = -EINVAL;
			}
		}
	}
	fclose(f);
	return ret;
}

static int dataplane_section_apply(const struct rte_cfgfile_entry *entries, int nb_entries,
				   struct app_config *cfg, const char *path, FILE *err)
{
	for (int e = 0; e < nb_entries; e++) {
		const struct app_option *opt = NULL;

		for (unsigned int i = 0; i < APP_NB_OPTIONS; i++) {
			if (strcmp(entries[e].name, g_options[i].key) == 0)
				opt = &g_options[i];
		}
		if (opt == NULL) {
			fprintf(err, "batchwire: invalid key '%s' in [" APP_INI_SECTION "] of %s: expected one of "
				"the options in --help, '-' spelled '_'\n", entries[e].name, path);
			return -EINVAL;
		}
		if (option_apply(opt, entries[e].value, cfg, err, path) != 0)
			return -EINVAL;
	}
	return 0;
}

/* A model's name goes on the wire and into telemetry command parameters: keep it plain. */
static bool model_name_ok(const char *name, size_t len)
{
	if (len == 0 || len >= APP_MODEL_NAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (!isalnum((unsigned char)name[i]) && name[i] != '_' && name[i] != '-' && name[i] != '.')
			return false;
	}
	return true;
}

/* The model with this name, created (batching defaults) when it is new. */
static struct app_model_config *model_get(struct app_config *cfg, const char *name, size_t len, FILE *err,
					  const char *where)
{
	struct app_model_config *model = app_config_model(cfg, name, len);

	if (model != NULL)
		return model;
	if (!model_name_ok(name, len)) {
		fprintf(err, "batchwire: invalid model name '%.*s' %s: expected 1..%d letters, digits, '_', '-' "
			"or '.'\n", (int)len, name, where, APP_MODEL_NAME_MAX - 1);
		return NULL;
	}
	if (cfg->nb_models == APP_MODELS_MAX) {
		fprintf(err, "batchwire: invalid model '%.*s' %s: expected at most %d models\n", (int)len, name, where,
			APP_MODELS_MAX);
		return NULL;
	}
	model = &cfg->models[cfg->nb_models++];
	memset(model, 0, sizeof(*model));
	snprintf(model->name, sizeof(model->name), "%.*s", (int)len, name);
	bat_options_defaults(&model->batching);
	return model;
}

/*
 * Sets one key of a model: its own (path, device, workers, slots, max_request_bytes, precision, layout,
 * launch_mode) or a batching option. A relative path in a file is taken relative to the file's
 * directory (base), on the command line to the working directory (base NULL). \return 0, or -EINVAL with one line in msg.
 */
static int model_key_set(struct app_model_config *model, const char *key, const char *value, const char *base,
			 char *msg, size_t cap)
{
	if (strcmp(key, "path") == 0) {
		int len;

		if (strcmp(model->name, "echo") == 0) {
			snprintf(msg, cap, "invalid path '%s': 'echo' is the built-in model; expected another name",
				 value);
			return -EINVAL;
		}
		if (value[0] == '\0') {
			snprintf(msg, cap, "invalid path '': expected an .onnx file or a directory of versions");
			return -EINVAL;
		}
		if (value[0] != '/' && base != NULL) {
			const char *slash = strrchr(base, '/');
			len = snprintf(model->path, sizeof(model->path), "%.*s%s", slash != NULL ? (int)(slash - base + 1) : 0,
				       base, value);
		} else {
			len = snprintf(model->path, sizeof(model->path), "%s", value);
		}
		if (len >= (int)sizeof(model->path)) {
			snprintf(msg, cap, "invalid path: longer than %d bytes", APP_PATH_MAX - 1);
			return -EINVAL;
		}
		return 0;
	}
	if (strcmp(key, "version_policy") == 0) {
		char *end;
		unsigned long v;

		if (strcmp(value, "latest") == 0) {
			model->version_specific = 0;
			model->version_latest = 1;
			return 0;
		}
		if (strncmp(value, "latest ", 7) == 0) {
			v = isdigit((unsigned char)value[7]) ? strtoul(value + 7, &end, 10) : 0;
			if (v == 0 || *end != '\0' || v > APP_VERSIONS_SERVED_MAX) {
				snprintf(msg, cap, "invalid version_policy '%s': expected latest N with N in 1..%u (the "
					 "versions served at once)", value, APP_VERSIONS_SERVED_MAX);
				return -EINVAL;
			}
			model->version_specific = 0;
			model->version_latest = (uint32_t)v;
			return 0;
		}
		v = strncmp(value, "specific ", 9) == 0 && isdigit((unsigned char)value[9]) ? strtoul(value + 9, &end, 10)
											  : 0;
		if (v == 0 || *end != '\0' || v > BW_MODEL_ID_MODEL_MASK) {
			snprintf(msg, cap, "invalid version_policy '%s': expected latest, latest N or specific N (N in "
				 "1..%u)", value, BW_MODEL_ID_MODEL_MASK);
			return -EINVAL;
		}
		model->version_specific = (uint32_t)v;
		model->version_latest = 0;
		return 0;
	}
	if (strcmp(key, "device") == 0) {
		if (strcmp(value, "cpu") == 0)
			model->device = APP_DEVICE_CPU;
		else if (strcmp(value, "gpu") == 0)
			model->device = APP_DEVICE_GPU;
		else {
			snprintf(msg, cap, "invalid device '%s': expected cpu or gpu", value);
			return -EINVAL;
		}
		return 0;
	}
	if (strcmp(key, "workers") == 0) {
		int count = lcore_list_parse(value, model->workers, APP_MODEL_WORKERS_MAX);

		if (count < 0) {
			snprintf(msg, cap, "invalid workers '%s': expected 1..%d distinct lcore ids below %d such as 2,4-5",
				 value, APP_MODEL_WORKERS_MAX, RTE_MAX_LCORE);
			return -EINVAL;
		}
		model->nb_workers = (unsigned int)count;
		return 0;
	}
	if (strcmp(key, "slots") == 0) {
		char *end;
		unsigned long v = isdigit((unsigned char)value[0]) ? strtoul(value, &end, 10) : 0;

		if (!isdigit((unsigned char)value[0]) || *end != '\0' || v == 0 || v > APP_MODEL_SLOTS_MAX) {
			snprintf(msg, cap, "invalid slots '%s': expected an integer in 1..%d", value, APP_MODEL_SLOTS_MAX);
			return -EINVAL;
		}
		model->slots = (unsigned int)v;
		return 0;
	}
	if (strcmp(key, "memory_budget_mb") == 0) {
		char *end;
		unsigned long long v = isdigit((unsigned char)value[0]) ? strtoull(value, &end, 10) : 0;

		if (!isdigit((unsigned char)value[0]) || *end != '\0' || v > APP_MEMORY_BUDGET_MB_MAX) {
			snprintf(msg, cap, "invalid memory_budget_mb '%s': expected an integer in 0..%llu (0: half the "
				 "host's memory)", value, (unsigned long long)APP_MEMORY_BUDGET_MB_MAX);
			return -EINVAL;
		}
		model->memory_budget_mb = v;
		return 0;
	}
	if (strcmp(key, "chunk_rows") == 0) {
		char *end;
		unsigned long v = isdigit((unsigned char)value[0]) ? strtoul(value, &end, 10) : 0;

		if (strcmp(value, "auto") == 0) {
			model->chunk_rows = 0;
		} else if (strcmp(value, "off") == 0) {
			model->chunk_rows = -1;
		} else if (!isdigit((unsigned char)value[0]) || *end != '\0' || v == 0 || v > BAT_BATCH_SIZE_MAX) {
			snprintf(msg, cap, "invalid chunk_rows '%s': expected auto, off or an integer in 1..%d", value,
				 BAT_BATCH_SIZE_MAX);
			return -EINVAL;
		} else {
			model->chunk_rows = (int64_t)v;
		}
		model->chunk_given = true;
		return 0;
	}
	if (strcmp(key, "max_request_bytes") == 0) {
		char *end;
		unsigned long v = isdigit((unsigned char)value[0]) ? strtoul(value, &end, 10) : 0;

		if (!isdigit((unsigned char)value[0]) || *end != '\0' || v < 1024 || v > (1ul << 30)) {
			snprintf(msg, cap, "invalid max_request_bytes '%s': expected an integer in 1024..1073741824", value);
			return -EINVAL;
		}
		model->max_request_bytes = (uint32_t)v;
		return 0;
	}
	if (strcmp(key, "allow") == 0) {
		char why[128];

		if (dp_allowlist_parse(value, &model->allow, why, sizeof(why)) != 0) {
			snprintf(msg, cap, "invalid allow '%s': %s", value, why);
			return -EINVAL;
		}
		return 0;
	}
	if (strcmp(key, "auth") == 0) {
		if (strcmp(value, "required") == 0)
			model->auth_required = true;
		else if (strcmp(value, "optional") == 0)
			model->auth_required = false;
		else {
			snprintf(msg, cap, "invalid auth '%s': expected required or optional", value);
			return -EINVAL;
		}
		return 0;
	}
	if (strcmp(key, "precision") == 0) {
		/* one key for both devices; which values the model's device takes is checked at the end */
		int gpu = gpu_precision_parse(value), cpu = rt_precision_parse(value);

		if (gpu < 0 && cpu < 0) {
			snprintf(msg, cap, "invalid precision '%s': expected fp32, bf16 (device cpu) or fp16 (device gpu)",
				 value);
			return -EINVAL;
		}
		model->precision = gpu >= 0 ? (uint32_t)gpu : GPU_PRECISION_FP32;
		model->cpu_precision = cpu >= 0 ? (uint32_t)cpu : RT_PRECISION_FP32;
		snprintf(model->precision_given, sizeof(model->precision_given), "%s", value);
		return 0;
	}
	if (strcmp(key, "launch_mode") == 0 || strcmp(key, "layout") == 0) {
		static const struct {
			const char *key;
			int (*parse)(const char *name);
			const char *expected;
			size_t field;
		} gpu_keys[] = {
			{ "layout", gpu_layout_parse, "auto, nchw or nhwc", offsetof(struct app_model_config, layout) },
			{ "launch_mode", gpu_launch_mode_parse, "graph or doorbell",
			  offsetof(struct app_model_config, launch_mode) },
		};

		for (unsigned int i = 0; i < sizeof(gpu_keys) / sizeof(gpu_keys[0]); i++) {
			int v;

			if (strcmp(key, gpu_keys[i].key) != 0)
				continue;
			v = gpu_keys[i].parse(value);
			if (v < 0) {
				snprintf(msg, cap, "invalid %s '%s': expected %s", key, value, gpu_keys[i].expected);
				return -EINVAL;
			}
			*(uint32_t *)(void *)((char *)model + gpu_keys[i].field) = (uint32_t)v;
			model->gpu_keys_set = true;
		}
		return 0;
	}
	return bat_option_set(&model->batching, key, value, msg, cap);
}

static int model_section_apply(const char *name, const struct rte_cfgfile_entry *entries, int nb_entries,
			       struct app_config *cfg, const char *path, FILE *err)
{
	char where[4200], msg[APP_PATH_MAX + 256];
	struct app_model_config *model;

	snprintf(where, sizeof(where), "in [model %s] of %s", name, path);
	model = model_get(cfg, name, strlen(name), err, where);
	if (model == NULL)
		return -EINVAL;
	for (int e = 0; e < nb_entries; e++) {
		if (model_key_set(model, entries[e].name, entries[e].value, path, msg, sizeof(msg)) != 0) {
			fprintf(err, "batchwire: %s %s\n", msg, where);
			return -EINVAL;
		}
	}
	return 0;
}

/* --model NAME=PATH */
static int model_path_apply(const char *arg, struct app_config *cfg, FILE *err)
{
	const char *eq = strchr(arg, '=');
	struct app_model_config *model;
	char msg[APP_PATH_MAX + 256];

	if (eq == NULL || eq == arg || eq[1] == '\0') {
		fprintf(err, "batchwire: invalid --model '%s': expected NAME=FILE.onnx, e.g. mlp=models/mlp.onnx\n", arg);
		return -EINVAL;
	}
	model = model_get(cfg, arg, (size_t)(eq - arg), err, "in --model");
	if (model == NULL)
		return -EINVAL;
	if (model_key_set(model, "path", eq + 1, NULL, msg, sizeof(msg)) != 0) {
		fprintf(err, "batchwire: invalid --model '%s': %s\n", arg, msg);
		return -EINVAL;
	}
	return 0;
}

/* --model-opt NAME.KEY=VALUE */
static int model_opt_apply(const char *arg, struct app_config *cfg, FILE *err)
{
	const char *dot = strchr(arg, '.'), *eq = strchr(arg, '=');
	struct app_model_config *model;
	char key[64], msg[APP_PATH_MAX + 256];

	if (dot == NULL || eq == NULL || eq < dot || dot == arg || eq == dot + 1 ||
	    (size_t)(eq - dot - 1) >= sizeof(key)) {
		fprintf(err, "batchwire: invalid --model-opt '%s': expected MODEL.OPTION=VALUE, e.g. "
			"echo.max_batch_size=8\n", arg);
		return -EINVAL;
	}
	model = model_get(cfg, arg, (size_t)(dot - arg), err, "in --model-opt");
	if (model == NULL)
		return -EINVAL;
	snprintf(key, sizeof(key), "%.*s", (int)(eq - dot - 1), dot + 1);
	if (model_key_set(model, key, eq + 1, NULL, msg, sizeof(msg)) != 0) {
		fprintf(err, "batchwire: invalid --model-opt '%s': %s\n", arg, msg);
		return -EINVAL;
	}
	return 0;
}

struct app_model_config *app_config_model(struct app_config *cfg, const char *name, size_t name_len)
{
	for (unsigned int i = 0; i < cfg->nb_models; i++) {
		if (strlen(cfg->models[i].name) == name_len && strncmp(cfg->models[i].name, name, name_len) == 0)
			return &cfg->models[i];
	}
	return NULL;
}

static int config_file_load(const char *path, struct app_config *cfg, FILE *err)
{
	struct rte_cfgfile *file;
	int ret = config_file_check(path, err);

	if (ret != 0)
		return ret;
	file = rte_cfgfile_load(path, 0);
	if (file == NULL) {
		fprintf(err, "batchwire: invalid --config '%s': expected an INI file rte_cfgfile can parse\n", path);
		return -EINVAL;
	}
	int nb_sections = rte_cfgfile_num_sections(file, NULL, 0);
	char (*sections)[CFG_NAME_LEN] = calloc((size_t)RTE_MAX(nb_sections, 1), CFG_NAME_LEN);
	char *names[RTE_MAX(nb_sections, 1)];

	if (sections == NULL) {
		fprintf(err, "batchwire: cannot read --config '%s': out of memory for its %d sections\n", path,
			nb_sections);
		rte_cfgfile_close(file);
		return -ENOMEM;
	}
	for (int s = 0; s < nb_sections; s++)
		names[s] = sections[s];
	rte_cfgfile_sections(file, names, nb_sections);
	for (int s = 0; s < nb_sections && ret == 0; s++) {
		int nb_entries = rte_cfgfile_section_num_entries(file, names[s]);
		struct rte_cfgfile_entry *entries = calloc((size_t)RTE_MAX(nb_entries, 1), sizeof(*entries));

		if (entries == NULL) {
			fprintf(err, "batchwire: cannot read --config '%s': out of memory for the %d entries of [%s]\n",
				path, nb_entries, names[s]);
			ret = -ENOMEM;
			break;
		}
		rte_cfgfile_section_entries(file, names[s], entries, nb_entries);
		if (strcmp(names[s], APP_INI_SECTION) == 0)
			ret = dataplane_section_apply(entries, nb_entries, cfg, path, err);
		else
			ret = model_section_apply(names[s] + strlen(APP_INI_MODEL_PREFIX), entries, nb_entries, cfg, path,
						  err);
		free(entries);
	}
	free(sections);
	rte_cfgfile_close(file);
	return ret;
}

static void long_options_build(struct option *longopts)
{
	unsigned int i;

	for (i = 0; i < APP_NB_OPTIONS; i++)
		longopts[i] = (struct option){g_options[i].flag, required_argument, NULL, (int)i};
	longopts[i++] = (struct option){"config", required_argument, NULL, OPT_CONFIG};
	longopts[i++] = (struct option){"model", required_argument, NULL, OPT_MODEL};
	longopts[i++] = (struct option){"model-opt", required_argument, NULL, OPT_MODEL_OPT};
	longopts[i++] = (struct option){"help", no_argument, NULL, OPT_HELP};
	longopts[i++] = (struct option){"version", no_argument, NULL, OPT_VERSION};
	longopts[i] = (struct option){NULL, 0, NULL, 0};
}

/*
 * A model on the GPU runs on its polling lcores (no workers), one CUDA graph per allowed batch size,
 * and each polling lcore keeps a slot per batch the in-flight limit lets through, so that a batch
 * dispatched always finds one.
 */
static int gpu_model_check(struct app_model_config *m, FILE *err)
{
	unsigned int inflight = app_model_inflight_max(m);

	if (m->batching.num_allowed_batch_sizes == 0) {
		fprintf(err, "batchwire: model '%s': device = gpu needs allowed_batch_sizes (one CUDA graph is captured "
			"per size): expected e.g. allowed_batch_sizes = 1,2,4,8\n", m->name);
		return -EINVAL;
	}
	if (m->nb_workers != 0) {
		fprintf(err, "batchwire: model '%s': device = gpu runs on the polling lcores that batch it: expected no "
			"workers\n", m->name);
		return -EINVAL;
	}
	if (m->slots == 0 && inflight > APP_MODEL_SLOTS_MAX) {
		fprintf(err, "batchwire: model '%s': device = gpu holds at most %d batches of one size in flight per "
			"polling lcore, and its in-flight limit is %u: expected max_inflight_batches (or "
			"num_batch_threads) <= %d\n", m->name, APP_MODEL_SLOTS_MAX, inflight, APP_MODEL_SLOTS_MAX);
		return -EINVAL;
	}
	if (m->slots != 0 && m->slots < inflight) {
		fprintf(err, "batchwire: model '%s': slots %u is below its in-flight limit %u: a batch the limit lets "
			"through could find no slot on the GPU: expected slots >= %u, or a lower max_inflight_batches "
			"(or num_batch_threads)\n", m->name, m->slots, inflight, inflight);
		return -EINVAL;
	}
	return 0;
}

int app_config_parse(int argc, char **argv, struct app_config *cfg, FILE *out, FILE *err)
{
	struct option longopts[APP_NB_OPTIONS + 6];
	const char *prgname = argc > 0 ? argv[0] : "batchwire";
	int opt;

	memset(cfg, 0, sizeof(*cfg));
	dp_config_defaults(&cfg->dp);
	cfg->http = (struct app_http_config){ .enabled = true, .addr = htonl(INADDR_LOOPBACK),
					      .port = APP_HTTP_PORT_DEFAULT, .infer_slots = APP_HTTP_INFER_SLOTS_DEFAULT,
					      .infer_bytes = APP_HTTP_INFER_BYTES_DEFAULT };
	cfg->nb_models = 1;
	snprintf(cfg->models[0].name, sizeof(cfg->models[0].name), "echo");
	bat_options_defaults(&cfg->models[0].batching);
	long_options_build(longopts);

	/* Pass 1: --help, --version, --config and unknown options. The file is loaded before pass 2 so
	 * that the command line overrides it whatever the order of the arguments. */
	opterr = 0;
	optind = 0; /* glibc: 0 re-initialises getopt completely, so tests can call us repeatedly */
	while ((opt = getopt_long(argc, argv, ":", longopts, NULL)) != -1) {
		switch (opt) {
		case OPT_HELP:
			app_config_usage(out, prgname);
			return APP_CONFIG_HELP;
		case OPT_VERSION:
			fprintf(out, "batchwire %s (protocol v%u)\n", BW_VERSION, BW_PROTO_VERSION);
			return APP_CONFIG_HELP;
		case OPT_CONFIG:
			snprintf(cfg->config_path, sizeof(cfg->config_path), "%s", optarg);
			break;
		case ':':
			fprintf(err, "batchwire: option '%s' needs a value: expected '%s VALUE'; see --help\n",
				argv[optind - 1], argv[optind - 1]);
			return -EINVAL;
		case '?':
			/* For a short option getopt may not have moved past its cluster: name it by optopt. */
			if (optopt != 0)
				fprintf(err, "batchwire: unknown option '-%c'; see --help\n", optopt);
			else
				fprintf(err, "batchwire: unknown option '%s'; see --help\n", argv[optind - 1]);
			return -EINVAL;
		default:
			break;
		}
	}
	if (optind < argc) {
		fprintf(err, "batchwire: unexpected argument '%s'; see --help\n", argv[optind]);
		return -EINVAL;
	}
	if (cfg->config_path[0] != '\0' && config_file_load(cfg->config_path, cfg, err) != 0)
		return -EINVAL;

	optind = 0;
	while ((opt = getopt_long(argc, argv, ":", longopts, NULL)) != -1) {
		if (opt >= 0 && (unsigned int)opt < APP_NB_OPTIONS &&
		    option_apply(&g_options[opt], optarg, cfg, err, NULL) != 0)
			return -EINVAL;
		if (opt == OPT_MODEL && model_path_apply(optarg, cfg, err) != 0)
			return -EINVAL;
		if (opt == OPT_MODEL_OPT && model_opt_apply(optarg, cfg, err) != 0)
			return -EINVAL;
	}
	for (unsigned int i = 0; i < cfg->nb_models; i++) {
		struct app_model_config *m = &cfg->models[i];
		char msg[256];

		if (strcmp(m->name, "echo") != 0 && app_model_is_echo(m)) {
			fprintf(err, "batchwire: model '%s' has no path: expected path = FILE.onnx in [model %s] or "
				"--model %s=FILE.onnx\n", m->name, m->name, m->name);
			return -EINVAL;
		}
		if (app_model_is_echo(m) && (m->nb_workers != 0 || m->device != APP_DEVICE_CPU || m->slots != 0 ||
					     m->precision_given[0] != '\0' || m->chunk_given || m->version_specific != 0 ||
					     m->version_latest > 1)) {
			fprintf(err, "batchwire: model 'echo' is built in and runs on its polling lcores: expected no "
				"device, workers, slots, precision, chunk_rows or version_policy for it\n");
			return -EINVAL;
		}
		if (m->chunk_given && m->device == APP_DEVICE_GPU) {
			fprintf(err, "batchwire: model '%s': chunk_rows is the CPU runtime's: device gpu runs each batch "
				"in one graph\n", m->name);
			return -EINVAL;
		}
		if (bat_options_finalize(&m->batching, msg, sizeof(msg)) != 0) {
			fprintf(err, "batchwire: batching of model '%s': %s\n", m->name, msg);
			return -EINVAL;
		}
		if (m->device == APP_DEVICE_GPU && gpu_model_check(m, err) != 0)
			return -EINVAL;
		if (m->device != APP_DEVICE_GPU && m->gpu_keys_set) {
			fprintf(err, "batchwire: model '%s': layout and launch_mode are the GPU's: expected "
				"device = gpu, or neither of them\n", m->name);
			return -EINVAL;
		}
		if (m->precision_given[0] != '\0' && m->device == APP_DEVICE_GPU &&
		    gpu_precision_parse(m->precision_given) < 0) {
			fprintf(err, "batchwire: model '%s': precision %s is the CPU's: device gpu takes fp32 or fp16\n",
				m->name, m->precision_given);
			return -EINVAL;
		}
		if (m->precision_given[0] != '\0' && m->device != APP_DEVICE_GPU &&
		    rt_precision_parse(m->precision_given) < 0) {
			fprintf(err, "batchwire: model '%s': precision %s is the GPU's: device cpu takes fp32 or bf16\n",
				m->name, m->precision_given);
			return -EINVAL;
		}
	}
	{
		unsigned int served = 0;

		for (unsigned int i = 0; i < cfg->nb_models; i++)
			served += RTE_MAX(1u, cfg->models[i].version_latest);
		if (served > APP_MODELS_MAX) {
			fprintf(err, "batchwire: %u models with their versions served (version_policy latest N counts N): "
				"expected at most %d\n", served, APP_MODELS_MAX);
			return -EINVAL;
		}
	}
	{
		char msg[256];

		if (dp_config_finalize(&cfg->dp, msg, sizeof(msg)) != 0) {
			fprintf(err, "batchwire: %s\n", msg);
			return -EINVAL;
		}
	}
	if (!cfg->have_ip) {
		fprintf(err, "batchwire: missing --ip (or ip in [" APP_INI_SECTION "]): expected the appliance's "
			"unicast IPv4 address\n");
		return -EINVAL;
	}
	return APP_CONFIG_RUN;
}

unsigned int app_model_inflight_max(const struct app_model_config *m)
{
	const struct bat_options *o = &m->batching;

	return o->num_batch_threads > 0 ? (unsigned int)o->num_batch_threads : o->max_inflight_batches;
}

void app_args_split(int argc, char **argv, int *eal_argc, int *app_argc, char ***app_argv)
{
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0) {
			*eal_argc = i;
			argv[i] = argv[0]; /* the app's argv[0] is the program name, as getopt expects */
			*app_argc = argc - i;
			*app_argv = &argv[i];
			return;
		}
	}
	*eal_argc = argc;
	*app_argc = 1;
	*app_argv = argv;
}
