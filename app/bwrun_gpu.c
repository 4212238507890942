/* SPDX-License-Identifier: BSD-3-Clause */
/* bwrun --device gpu: the model on the device through the GPU executor the daemon uses. */
#include "bwrun.h"

/*
 * Opens the device, compiles and loads the program, makes the executor on this thread's stream, and
 * puts the inputs and room for the outputs in one region registered with the device: the gather and
 * scatter kernels read and write it directly, as they do packet buffers in the daemon.
 */
void setup_gpu(struct runner *r, const struct opts *o)
{
	const struct rt_graph *g = r->g;
	static const char *const op_names[GPU_OP_CODE_COUNT] = {
		[GPU_OP_UNARY] = "unary", [GPU_OP_BINARY] = "binary", [GPU_OP_WHERE] = "where", [GPU_OP_CAST] = "cast",
		[GPU_OP_COPY] = "copy", [GPU_OP_PERMUTE] = "permute", [GPU_OP_GATHER] = "gather",
		[GPU_OP_SOFTMAX] = "softmax", [GPU_OP_LAYERNORM] = "layernorm", [GPU_OP_REDUCE] = "reduce",
		[GPU_OP_GEMM] = "gemm", [GPU_OP_CONV] = "conv", [GPU_OP_POOL] = "pool",
	};
	unsigned int counts[GPU_OP_CODE_COUNT] = { 0 };
	char err[GPU_ERR_MAX * 2], a[32], b[32];
	size_t off = 0;
	void *dev_addr;
	int rc;

	if (g->num_inputs > BW_BATCH_TENSORS_MAX || g->num_outputs > BW_BATCH_TENSORS_MAX)
		die("%s: the GPU executor takes at most %d inputs and outputs", o->model, BW_BATCH_TENSORS_MAX);
	rc = gpu_host_device_open(o->gpu_module, o->gpu_index, &r->gpu, err, sizeof(err));
	if (rc != 0)
		die("--device gpu: %s", err);
	rc = gpu_host_program_load(&r->gpu, g, &o->batch, 1, &(struct gpu_compile_options){ o->precision, o->layout },
				   &r->prog, err, sizeof(err));
	if (rc != 0)
		die("%s: on the GPU: %s", o->model, err);
	rc = r->gpu.ops->stream_create(r->gpu.dev, &r->gstream, err, sizeof(err));
	if (rc != 0)
		die("--device gpu: %s", err);
	r->gex = gpu_executor_create(r->gpu.ops, r->gpu.dev, r->prog.loaded, r->prog.compiled, r->gstream, 1, o->launch_mode, err,
				     sizeof(err));
	if (r->gex == NULL)
		die("%s: %s", o->model, err);
	for (uint32_t i = 0; i < r->prog.compiled->prog.sizes[0].nb_ops; i++)
		counts[r->prog.compiled->prog.sizes[0].ops[i].code]++;
	printf("device %s (%s module, %s, %s, %s launch): %u ops:", r->gpu.info.name, r->gpu.ops->name,
	       gpu_precision_name(o->precision), gpu_layout_name(r->prog.compiled->layout),
	       gpu_launch_mode_name(o->launch_mode), r->prog.compiled->prog.sizes[0].nb_ops);
	for (unsigned int c = 1; c < GPU_OP_CODE_COUNT; c++)
		if (counts[c] > 0)
			printf(" %s %u", op_names[c], counts[c]);
	printf("; arena %s, constants %s\n", bytes_str(r->prog.compiled->prog.sizes[0].arena_bytes, a, sizeof(a)),
	       bytes_str(r->prog.compiled->prog.const_bytes, b, sizeof(b)));

	for (uint32_t i = 0; i < g->num_inputs; i++)
		r->gmem_bytes += (r->in_bytes[i] + 63) & ~(size_t)63;
	for (uint32_t i = 0; i < g->num_outputs; i++)
		r->gmem_bytes += (r->out_bytes[i] + 63) & ~(size_t)63;
	r->gmem_bytes = (r->gmem_bytes + 4095) & ~(size_t)4095;
	r->gmem = aligned_alloc(4096, r->gmem_bytes);
	if (r->gmem == NULL)
		die("out of memory for %zu bytes of inputs and outputs", r->gmem_bytes);
	memset(r->gmem, 0, r->gmem_bytes);
	rc = r->gpu.ops->host_register(r->gpu.dev, r->gmem, r->gmem_bytes, &dev_addr, err, sizeof(err));
	if (rc != 0)
		die("--device gpu: registering %zu bytes: %s", r->gmem_bytes, err);
	one_task_batch(r, o);
	for (uint32_t i = 0; i < g->num_inputs; i++) {
		memcpy(r->gmem + off, r->in_data[i], r->in_bytes[i]);
		r->task.inputs[i] = bw_segment_flat(r->gmem + off, (uint32_t)r->in_bytes[i]);
		off += (r->in_bytes[i] + 63) & ~(size_t)63;
	}
	for (uint32_t i = 0; i < g->num_outputs; i++) {
		r->out_data[i] = r->gmem + off; /* not ours to free: part of gmem */
		r->task.outputs[i] = bw_segment_flat(r->gmem + off, (uint32_t)r->out_bytes[i]);
		off += (r->out_bytes[i] + 63) & ~(size_t)63;
	}
}

double run_once_gpu(struct runner *r, const struct opts *o)
{
	char why[GPU_ERR_MAX];
	int wait_s = r->gpu.module.handle == NULL ? FAKE_WAIT_S : GPU_WAIT_S;
	double t0, t;
	int rc;

	r->done = false;
	t0 = now_us();
	rc = gpu_executor_submit(r->gex, &r->batch);
	if (rc != 0)
		die("%s: launching on %s: %s%s%s", o->model, r->gpu.info.name, strerror(-rc), rc == -EIO ? ": " : "",
		    rc == -EIO ? gpu_executor_error(r->gex) : "");
	while (gpu_executor_poll(r->gex, on_done, r, 1) == 0) {
		if (now_us() - t0 > wait_s * 1e6) {
			r->gpu.ops->health(r->gpu.dev, why, sizeof(why));
			die("%s: no completion from %s after %d s (device: %s)", o->model, r->gpu.info.name, wait_s, why);
		}
	}
	t = now_us() - t0;
	if (r->status != BW_STATUS_OK)
		die("%s: %s: %s", o->model, bw_status_name(r->status), r->msg);
	return t;
}

void teardown_gpu(struct runner *r)
{
	gpu_executor_destroy(r->gex);
	if (r->gstream != NULL)
		r->gpu.ops->stream_destroy(r->gstream);
	gpu_host_program_unload(&r->gpu, &r->prog);
	if (r->gmem != NULL)
		r->gpu.ops->host_unregister(r->gpu.dev, r->gmem, NULL, 0);
	gpu_host_device_close(&r->gpu);
	free(r->gmem);
	for (uint32_t i = 0; i < TENSORS_MAX; i++)
		r->out_data[i] = NULL;
}
