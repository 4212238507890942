/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * batchwire's own parameters: the app arguments after EAL's `--`, and the INI file given with
 * --config. Both go through one option table, so every parameter has one name, one parser and one
 * message: "invalid --mtu '70000': expected an integer in 576..9000". The command line overrides the
 * file. Parsing needs no EAL, so a bad value is refused before EAL starts or any port is touched.
 */
#ifndef BW_APP_CONFIG_H
#define BW_APP_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "batching.h"
#include "dataplane.h"

#define APP_LCORE_ID_MAX (RTE_MAX_LCORE - 1)
#define APP_MODELS_MAX 16         /* the built-in echo model and up to 15 ONNX models */
#define APP_MODEL_NAME_MAX 64
#define APP_MODEL_WORKERS_MAX 16  /* worker lcores of one model */
#define APP_MODEL_SLOTS_MAX 64    /* batches of one size one model can hold in flight */
#define APP_PATH_MAX 4096
#define APP_GPU_INDEX_MAX 15      /* gpu.h's GPU_DEVICES_MAX - 1 */
#define APP_VERSIONS_SERVED_MAX 4 /* version_policy = latest N: versions of one model served at once */

enum app_device {
	APP_DEVICE_CPU,
	APP_DEVICE_GPU,
};

/*
 * One model's configuration: [model NAME] in the file, --model NAME=PATH and --model-opt
 * NAME.KEY=VALUE on the line. The built-in echo model has no path and runs on its polling lcores.
 */
struct app_model_config {
	char name[APP_MODEL_NAME_MAX];
	char path[APP_PATH_MAX];      /* the .onnx file, or a directory of numbered versions (N/model.onnx);
				       * "" for echo */
	uint32_t version_specific;    /* version_policy: 0 latest, else specific N */
	uint32_t version_latest;      /* version_policy latest N: the N highest served at once (0 and 1:
				       * the highest alone); each takes a model id of its own */
	enum app_device device;
	unsigned int nb_workers;      /* 0: the main lcore (set once EAL has started) */
	unsigned int workers[APP_MODEL_WORKERS_MAX];
	unsigned int slots;           /* batches of one size in flight at once (device gpu: per polling
				       * lcore); 0: derived */
	uint32_t precision;           /* device gpu: enum gpu_precision (fp32 unless set) */
	uint32_t cpu_precision;       /* device cpu: enum rt_precision (fp32 unless set) */
	uint64_t memory_budget_mb;    /* device cpu: its constants and arenas, at most (0: half the host's memory) */
	char precision_given[8];      /* the value of key precision, "" when not given */
	uint32_t launch_mode;         /* device gpu: enum gpu_launch_mode (graph unless set) */
	uint32_t layout;              /* device gpu: enum gpu_layout (auto unless set) */
	bool gpu_keys_set;            /* precision, layout or launch_mode given: refused for a CPU model */
	uint32_t max_request_bytes;   /* largest request body, all datagrams; 0: max_message_bytes */
	int64_t chunk_rows;           /* device cpu: 0 auto (measured at load), -1 off, else rows a run */
	bool chunk_given;
	struct dp_allowlist allow;    /* sources that may use it (within the global list); empty: all */
	bool auth_required;           /* unsigned INFER and MODEL_INFO refused UNAUTHENTICATED */
	struct bat_options batching;
};

/* The HTTP control server (app/http.c): a kernel socket on a management address. */
#define APP_MEMORY_BUDGET_MB_MAX (UINT64_C(1) << 30) /* a PiB: no host has more */
#define APP_HTTP_ADDR_DEFAULT "127.0.0.1"
#define APP_HTTP_PORT_DEFAULT 8000 /* Triton's HTTP port: its clients and probes expect it */
#define APP_DRAIN_GRACE_MS_MAX 600000
#define APP_HTTP_INFER_SLOTS_DEFAULT 4
#define APP_HTTP_INFER_SLOTS_MAX 1024
#define APP_HTTP_INFER_BYTES_DEFAULT (16u << 20)
struct app_http_config {
	bool enabled;
	uint32_t addr;  /* IPv4, network byte order */
	uint16_t port;  /* host byte order */
	bool probes_enabled;   /* a second listener for health and metrics only */
	uint32_t probes_addr;
	uint16_t probes_port;
	uint32_t infer_slots;  /* POST /v2/models/NAME/infer requests in flight at once; 0: refused */
	uint32_t infer_bytes;  /* one such request's tensors (inputs and outputs), at most */
};

struct app_config {
	struct dp_config dp;
	struct app_http_config http;
	uint16_t port_id;
	bool have_ip;
	unsigned int nb_poll_lcores;  /* 0: every EAL worker lcore, or the main lcore alone */
	unsigned int poll_lcores[DP_MAX_POLL_LCORES];
	unsigned int nb_models;
	struct app_model_config models[APP_MODELS_MAX];
	char config_path[4096];
	char gpu_module[APP_PATH_MAX]; /* "": libbwgpu.so where the loader looks; "fake": the fake device */
	uint16_t gpu_index;
	uint32_t drain_grace_ms;      /* SIGTERM: readiness off this long, still serving, before the drain */
};

/** \return true for the built-in echo model's configuration. */
static inline bool app_model_is_echo(const struct app_model_config *m)
{
	return m->path[0] == '\0';
}

/** \return batches the model may have in flight at most, over every polling lcore: its in-flight limit. */
unsigned int app_model_inflight_max(const struct app_model_config *m);

/** \return the configuration of the model with this name, or NULL. */
struct app_model_config *app_config_model(struct app_config *cfg, const char *name, size_t name_len);

enum app_config_result {
	APP_CONFIG_RUN = 0,
	APP_CONFIG_HELP = 1,    /* --help or --version printed: exit 0 */
};

/**
 * Parses app arguments (argv[0] is the program name) and the --config file they name.
 * Messages (one line per error) go to err; --help and --version text to out.
 * \return APP_CONFIG_RUN, APP_CONFIG_HELP, or -EINVAL after printing what was wrong.
 */
int app_config_parse(int argc, char **argv, struct app_config *cfg, FILE *out, FILE *err);

/** Prints the usage text. */
void app_config_usage(FILE *out, const char *prgname);

/**
 * Splits argv at the first "--" into EAL arguments (before) and app arguments (after; app_argv[0] is
 * the program name). Without "--", every argument is EAL's.
 */
void app_args_split(int argc, char **argv, int *eal_argc, int *app_argc, char ***app_argv);

#endif /* BW_APP_CONFIG_H */
