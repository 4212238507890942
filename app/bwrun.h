/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Private to bwrun (bwrun.c says what it is): its options, the runner every mode shares, and the
 * pieces its files share: bwrun_args.c (the command line), bwrun_report.c (the placement report
 * and the outputs), bwrun_gpu.c (--device gpu), bwrun.c (inputs, running, timing, main).
 */
#ifndef BW_APP_BWRUN_H
#define BW_APP_BWRUN_H

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "bwclient.h"
#include "exec/executor.h"
#include "exec/plan.h"
#include "graph.h"
#include "host.h"
#include "model_inputs.h"

#define PROG "bwrun"

#define BATCH_MAX 65536u
#define REPEAT_MAX 10000000u
#define INPUT_FILES_MAX 64

#define VALUES_SHOWN 8          /* first values printed per output */
#define OP_TYPES_MAX 256
#define TENSORS_MAX 64          /* graph inputs, and outputs, bwrun handles */
#define GPU_WAIT_S 30           /* a launch not finished by then is reported, not waited for */
#define FAKE_WAIT_S 900         /* the fake runs programs naively on one CPU thread: an encoder at fp16
				 * takes minutes on a loaded 2-core host */

struct input_file {
	const char *name;
	const char *path;
};

struct opts {
	const char *model;
	int64_t batch;
	bool batch_given;
	uint64_t seed;
	unsigned int repeat, warmup, workers;
	bool optimize;
	bool profile;                   /* --profile: per-step times of the timed runs */
	uint32_t profile_steps;         /* --profile-steps: the slowest steps listed, 0 every one */
	int64_t chunk;                  /* --chunk: 0 auto (measured), -1 off, else rows a run */
	bool gpu;                       /* --device gpu */
	const char *gpu_module;         /* NULL: libbwgpu.so where the loader looks; "fake": the fake device */
	int gpu_index;
	const char *precision_given;    /* --precision's value, NULL when not given */
	uint32_t precision;             /* enum gpu_precision */
	uint32_t cpu_precision;         /* enum rt_precision */
	uint32_t launch_mode;           /* enum gpu_launch_mode */
	uint32_t layout;                /* enum gpu_layout */
	const char *output_dir, *save_inputs;
	struct input_file inputs[INPUT_FILES_MAX];
	unsigned int num_inputs;
};

/* Everything one run of the model needs, whichever executor runs it. */
struct runner {
	const struct rt_graph *g;
	const struct rt_plan *plan;     /* of the batch size; the executor's own in executor mode */
	struct rt_plan *seq_plan;       /* sequential mode: ours to free */
	struct rt_executor *ex;         /* executor mode */
	void *arena;                    /* sequential mode */
	int64_t chunk_rows;             /* rows the plan has: the batch, or fewer run depth first */
	char chunk_report[320];         /* what rt_plan_chunk_auto measured, or why nothing */
	double *step_us;                /* --profile: per plan step, summed over the timed runs */
	struct rt_tensor in[TENSORS_MAX];  /* bound dtype and shape; data: in the arena (sequential) */
	struct rt_tensor out[TENSORS_MAX];
	size_t in_bytes[TENSORS_MAX], out_bytes[TENSORS_MAX];
	void *in_data[TENSORS_MAX];     /* the inputs' bytes, kept apart: the arena reuses them */
	void *out_data[TENSORS_MAX];    /* executor mode: where outputs are scattered to */
	/* executor mode: one batch of one task carrying every row */
	struct bw_batch_task task;
	struct bw_batch_task *tasks[1];
	struct bw_batch batch;
	bool done;
	enum bw_status status;
	char msg[RT_EXECUTOR_MSG_MAX];
	/* --device gpu */
	struct gpu_host_device gpu;
	struct gpu_stream *gstream;
	struct gpu_host_program prog;
	struct gpu_executor *gex;
	uint8_t *gmem;                  /* inputs and outputs, registered with the device */
	size_t gmem_bytes;
};

/** One line on stderr and exit 1: bwrun is run by hand and by scripts, both read the first line. */
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* bwrun_args.c */
void parse_args(int argc, char **argv, struct opts *o);

/* bwrun_report.c */
const char *dims_str(const struct rt_tensor *t, char *buf, size_t cap);
const char *bytes_str(size_t b, char *buf, size_t cap);
void print_model(const struct rt_graph *g, const char *path);
void print_placement(const struct runner *r, const struct opts *o, const struct rt_opt_report *rep);
void print_outputs(const struct runner *r, const struct opts *o);

/* bwrun_gpu.c */
void setup_gpu(struct runner *r, const struct opts *o);
double run_once_gpu(struct runner *r, const struct opts *o);
void teardown_gpu(struct runner *r);

/* bwrun.c */
double now_us(void);
/** Executor mode's batch of one task carrying every row, as a single request would. */
void one_task_batch(struct runner *r, const struct opts *o);
/** A batch's completion: the runner's outcome. */
void on_done(void *ctx, const struct bw_completion *c);
void write_npy(const char *dir, const char *name, const struct rt_tensor *t, const void *data);

#endif /* BW_APP_BWRUN_H */
