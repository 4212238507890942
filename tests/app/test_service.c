/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of app/service.c, the glue between the dataplane, the batcher and the runtime, serving a
 * real ONNX model (models/mlp.onnx: input 'input' float [N,784], output 'logits' float [N,10]) over
 * an in-process ring PMD port. The test thread is lcore 0, the main lcore: it is the polling lcore
 * and, by default, the models' only worker, and it runs the pollers of app_service_pollers itself.
 *
 * A second model, "wide" (written here with protobuf-c: x float [N,2] -> MatMul -> y float [N,64]),
 * has output rows 32 times its input rows: where a request split across batches would lose its later
 * rows if the first piece's outputs were staged over the request body, and where a reply can outgrow
 * the datagram that the request fitted in.
 *
 * Every output row is compared bit for bit with the runtime run in-process on the same rows
 * (rt_graph_load + rt_graph_optimize, rt_plan_create at the batch size the service ran, padding rows
 * included): the executor runs the same kernels on the same plan shapes, so the only way to differ
 * is a row landing in the wrong place or being overwritten.
 *
 * A fourth MLP, "mlpg", has device = gpu on the fake device (gpu/fake.h, a CPU behind the GPU
 * interface): the pool's memory is registered with it, the lcore's GPU executor is made on this
 * thread, and its replies are compared with the runtime within a tolerance; a refused launch and a
 * lost device are injected into the fake.
 *
 * The app's sources are #included (SPDK style) to reach their statics: the engines' per-model and
 * per-lcore state (executor counters, the completion rings and the stash, the GPU executors) and the
 * per-lcore batchers that telemetry reads. So the executable is built from the sources (this file,
 * app/config.c) with app_dep's include directories only, rather than linked with app_lib, whose
 * objects would define every function a second time.
 *
 * Usage: test_service MLP.onnx (or BW_MODEL_MLP=MLP.onnx). Without the file the test is skipped
 * (exit 77). Cases of one suite run in order and share the service the first one sets up.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "../bw_cunit.h"
#include "../dataplane/dp_test.h"

/* the app's sources, one translation unit: their statics are reachable */
#include "../../app/engine_cpu.c"
#include "../../app/engine_echo.c"
#include "../../app/engine_gpu.c"
#include "../../app/http_infer.c"
#include "../../app/inject.c"
#include "../../app/lcores.c"
#include "../../app/models.c"
#include "../../app/requests.c"
#include "../../app/telemetry.c"
#include "../../app/versions.c"
#include "fake.h"
#include "onnx.pb-c.h"

/* This lcore's GPU executor instance of model id. */
static struct gpu_channel *gpu_channel_of(uint32_t id)
{
	return app_lcores[rte_lcore_id()].channels[id].executor.ctx;
}

#define T_RING_SIZE 64              /* RX and TX rings of the port: room for every frame of a case */
#define T_REPLIES_MAX 32
#define T_WAIT_US 20000000ull       /* a bound on a case's polling, never a timing assertion */
#define T_DRAIN_US 5000000ull
#define MLP_IN 784                  /* features of one row */
#define MLP_OUT 10                  /* logits of one row */
#define MLP_ROW_OUT_BYTES (MLP_OUT * 4u)
#define T_REF_BATCH_MAX 4
#define T_GPU_TOLERANCE 1e-5f       /* of the largest |logit|: the fake's GEMM sums in its own order */

static const char *g_mlp_path;

/* ---- the models: the MLP given, "wide" and "fixed" written here ------------------------------------ */

#define WIDE_IN 2
#define WIDE_OUT 64
#define FIXED_ROWS 3 /* "fixed": wide with a first dimension of 3, not the batch */

static char g_tmpdir[64];
static char g_wide_path[128];
static char g_vdir[128];       /* mlpv's directory of versions: N/model.onnx, links to the MLP */
static uint32_t g_id_v2, g_id_v1; /* mlpv's two members: versions 2 (named) and 1 at start-up */
static char g_fixed_path[128];

/*
 * x float [N,2] -> MatMul(x, W) -> y float [N,64], W an initializer; with fixed_rows > 0, N is that
 * number instead of a symbolic batch (a model the service must refuse). \return 0 or -1.
 */
static int wide_model_write(const char *path, int64_t fixed_rows)
{
	static float w[WIDE_IN * WIDE_OUT];
	Onnx__OperatorSetIdProto opset = ONNX__OPERATOR_SET_ID_PROTO__INIT;
	Onnx__OperatorSetIdProto *opsets[] = { &opset };
	Onnx__TensorShapeProto__Dimension dim_n = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
	Onnx__TensorShapeProto__Dimension dim_in = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
	Onnx__TensorShapeProto__Dimension dim_out = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
	Onnx__TensorShapeProto__Dimension *dims_x[] = { &dim_n, &dim_in }, *dims_y[] = { &dim_n, &dim_out };
	Onnx__TensorShapeProto shape_x = ONNX__TENSOR_SHAPE_PROTO__INIT, shape_y = ONNX__TENSOR_SHAPE_PROTO__INIT;
	Onnx__TypeProto__Tensor tensor_x = ONNX__TYPE_PROTO__TENSOR__INIT, tensor_y = ONNX__TYPE_PROTO__TENSOR__INIT;
	Onnx__TypeProto type_x = ONNX__TYPE_PROTO__INIT, type_y = ONNX__TYPE_PROTO__INIT;
	Onnx__ValueInfoProto x = ONNX__VALUE_INFO_PROTO__INIT, y = ONNX__VALUE_INFO_PROTO__INIT;
	Onnx__ValueInfoProto *inputs[] = { &x }, *outputs[] = { &y };
	Onnx__TensorProto weights = ONNX__TENSOR_PROTO__INIT;
	Onnx__TensorProto *initializers[] = { &weights };
	int64_t w_dims[] = { WIDE_IN, WIDE_OUT };
	char *node_in[] = { "x", "W" }, *node_out[] = { "y" };
	Onnx__NodeProto node = ONNX__NODE_PROTO__INIT;
	Onnx__NodeProto *nodes[] = { &node };
	Onnx__GraphProto graph = ONNX__GRAPH_PROTO__INIT;
	Onnx__ModelProto model = ONNX__MODEL_PROTO__INIT;
	uint8_t *buf;
	size_t len;
	FILE *f;
	int ret = -1;

	for (unsigned int i = 0; i < RTE_DIM(w); i++)
		w[i] = (float)((int)(i * 37u % 101u) - 50) / 64.0f;
	opset.domain = "";
	opset.has_version = true;
	opset.version = 13;
	if (fixed_rows > 0) {
		dim_n.value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
		dim_n.dim_value = fixed_rows;
	} else {
		dim_n.value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
		dim_n.dim_param = "N";
	}
	dim_in.value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
	dim_in.dim_value = WIDE_IN;
	dim_out.value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
	dim_out.dim_value = WIDE_OUT;
	shape_x.n_dim = 2;
	shape_x.dim = dims_x;
	shape_y.n_dim = 2;
	shape_y.dim = dims_y;
	tensor_x.has_elem_type = tensor_y.has_elem_type = true;
	tensor_x.elem_type = tensor_y.elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
	tensor_x.shape = &shape_x;
	tensor_y.shape = &shape_y;
	type_x.value_case = type_y.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
	type_x.tensor_type = &tensor_x;
	type_y.tensor_type = &tensor_y;
	x.name = "x";
	x.type = &type_x;
	y.name = "y";
	y.type = &type_y;
	weights.name = "W";
	weights.has_data_type = true;
	weights.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
	weights.n_dims = 2;
	weights.dims = w_dims;
	weights.has_raw_data = true;
	weights.raw_data.len = sizeof(w);
	weights.raw_data.data = (uint8_t *)w;
	node.name = "widen";
	node.op_type = "MatMul";
	node.n_input = 2;
	node.input = node_in;
	node.n_output = 1;
	node.output = node_out;
	graph.name = "wide";
	graph.n_node = 1;
	graph.node = nodes;
	graph.n_initializer = 1;
	graph.initializer = initializers;
	graph.n_input = 1;
	graph.input = inputs;
	graph.n_output = 1;
	graph.output = outputs;
	model.has_ir_version = true;
	model.ir_version = 8;
	model.producer_name = "test_service";
	model.n_opset_import = 1;
	model.opset_import = opsets;
	model.graph = &graph;

	len = onnx__model_proto__get_packed_size(&model);
	buf = malloc(len);
	f = fopen(path, "wb");
	if (buf != NULL && f != NULL && onnx__model_proto__pack(&model, buf) == len && fwrite(buf, 1, len, f) == len)
		ret = 0;
	if (f != NULL && fclose(f) != 0)
		ret = -1;
	free(buf);
	return ret;
}

/* ---- the in-process reference: the runtime on the same graph ------------------------------------ */

struct ref_model {
	struct rt_graph *graph;
	uint32_t in_row, out_row;               /* floats per row */
	struct {
		struct rt_plan *plan;
		void *arena;
		struct rt_tensor in, out;
	} plans[T_REF_BATCH_MAX + 1];           /* by batch size */
};

static struct ref_model g_ref_mlp = { .in_row = MLP_IN, .out_row = MLP_OUT };
static struct ref_model g_ref_wide = { .in_row = WIDE_IN, .out_row = WIDE_OUT };

static int ref_init(struct ref_model *r, const char *path)
{
	char err[RT_ERR_MAX];

	if (rt_cpu_kernels_register() != 0)
		return -1;
	r->graph = rt_graph_load(path, err, sizeof(err));
	if (r->graph == NULL || rt_graph_optimize(r->graph, RT_DEVICE_CPU, NULL, err, sizeof(err)) != 0) {
		fprintf(stderr, "reference: %s: %s\n", path, err);
		return -1;
	}
	for (int64_t b = 1; b <= T_REF_BATCH_MAX; b++) {
		struct rt_plan *p = rt_plan_create(r->graph, b, RT_DEVICE_CPU, err, sizeof(err));

		r->plans[b].plan = p;
		if (p == NULL || rt_plan_num_inputs(p) != 1 || rt_plan_num_outputs(p) != 1) {
			fprintf(stderr, "reference plan of %s at batch %" PRId64 ": %s\n", path, b,
				p == NULL ? err : "not 1 input and 1 output");
			return -1;
		}
		r->plans[b].arena = aligned_alloc(RT_PLAN_ALIGN, rt_plan_arena_bytes(p));
		if (r->plans[b].arena == NULL)
			return -1;
		rt_plan_bind(p, r->plans[b].arena, &r->plans[b].in, &r->plans[b].out);
	}
	return 0;
}

static void ref_fini(struct ref_model *r)
{
	for (unsigned int b = 1; b <= T_REF_BATCH_MAX; b++) {
		rt_plan_free(r->plans[b].plan);
		free(r->plans[b].arena);
		r->plans[b].plan = NULL;
		r->plans[b].arena = NULL;
	}
	if (r->graph != NULL)
		rt_graph_free(r->graph);
	r->graph = NULL;
}

/* Runs the reference on batch rows (each in_row floats) into out (batch * out_row floats): the same
 * rows in the same places as the service's batch, padding rows included. */
static void ref_run(struct ref_model *r, unsigned int batch, const float *const *rows, float *out)
{
	char err[RT_ERR_MAX];

	RTE_VERIFY(batch >= 1 && batch <= T_REF_BATCH_MAX);
	for (unsigned int i = 0; i < batch; i++)
		memcpy((float *)r->plans[batch].in.data + i * r->in_row, rows[i], r->in_row * sizeof(float));
	CU_ASSERT_EQUAL_FATAL(rt_plan_run(r->plans[batch].plan, r->plans[batch].arena, err, sizeof(err)), 0);
	memcpy(out, r->plans[batch].out.data, batch * r->out_row * sizeof(float));
}

/* n floats in [-1, 1), different for every seed. */
static void rows_fill(float *rows, unsigned int n, uint32_t seed)
{
	uint32_t x = seed * 2654435761u + 12345u;

	for (unsigned int i = 0; i < n; i++) {
		x = x * 1664525u + 1013904223u;
		rows[i] = (float)(x >> 8) / (float)(1u << 23) - 1.0f;
	}
}

/* One MLP row from seed, and the runtime's batch-1 logits for it. */
static void row_and_ref(float *row, float *ref, uint32_t seed)
{
	const float *rows[1] = { row };

	rows_fill(row, MLP_IN, seed);
	ref_run(&g_ref_mlp, 1, rows, ref);
}

/* ---- the port, the lcore and the service --------------------------------------------------------- */

static struct rte_ring *g_rx_ring, *g_tx_ring;
static int g_port = -1;
static struct app_config g_cfg;
static struct dp_lcore g_lc;
static struct app_service g_svc;
static bool g_svc_up;               /* app_service_init succeeded: app_service_fini owed */
static bool g_ready;                /* every piece up: the serving cases can run */
static struct plat_poller g_pollers[PLAT_POLLERS_MAX];
static unsigned int g_nb_pollers;
static uint32_t g_id_mlp, g_id_split, g_id_one, g_id_wide, g_id_gpu, g_id_gpu2; /* the models' ids, by name */

static struct msg g_m;
static struct frame g_f[T_REPLIES_MAX];      /* the requests of the case running, in injection order */
static unsigned int g_nb_f;
static struct rte_mbuf *g_rep[T_REPLIES_MAX]; /* replies taken off the TX ring */
static unsigned int g_nb_rep;

/* Parses "batchwire" followed by args into cfg; err receives what the parser prints. */
static int config_parse(struct app_config *cfg, FILE *err, const char *const *args, int nb)
{
	char *argv[64], *owned[64];
	int ret;

	RTE_VERIFY(nb + 2 <= (int)RTE_DIM(argv));
	argv[0] = owned[0] = strdup("batchwire");
	for (int i = 0; i < nb; i++)
		argv[i + 1] = owned[i + 1] = strdup(args[i]);
	argv[nb + 1] = NULL;
	ret = app_config_parse(nb + 1, argv, cfg, stdout, err);
	for (int i = 0; i <= nb; i++)
		free(owned[i]); /* getopt permutes argv: free through our own copy */
	return ret;
}

#define CONFIG_PARSE(cfg, err, ...) \
	config_parse(cfg, err, (const char *const[]){__VA_ARGS__}, \
		     (int)(sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *)))

static uint32_t model_id(const char *name)
{
	const struct rt_model *m = rt_registry_find_name(&g_svc.registry, name, (uint32_t)strlen(name));

	return m != NULL ? m->id : UINT32_MAX;
}

static void replies_free(void)
{
	for (unsigned int i = 0; i < g_nb_rep; i++)
		rte_pktmbuf_free(g_rep[i]);
	g_nb_rep = 0;
	g_nb_f = 0;
}

/* Takes whatever the TX ring holds into g_rep. */
static void tx_take(void)
{
	struct rte_mbuf *m;

	while (g_nb_rep < T_REPLIES_MAX && rte_ring_dequeue(g_tx_ring, (void **)&m) == 0)
		g_rep[g_nb_rep++] = m;
}

/* One RX burst and a TX flush, nothing else: what "answered at once" means. */
static void rx_once(void)
{
	dp_rx_poll(&g_lc);
	dp_tx_flush(&g_lc);
	tx_take();
}

/* Runs every poller of the lcore until count replies have been taken, or T_WAIT_US has passed. */
/* One turn of everything lcore 0 runs: its pollers, the MLPs' worker among them. */
static void pollers_turn(void)
{
	for (unsigned int i = 0; i < g_nb_pollers; i++)
		g_pollers[i].poll(g_pollers[i].arg);
}

static bool replies_wait(unsigned int count)
{
	uint64_t end = plat_tsc_now() + plat_us_to_tsc(T_WAIT_US);

	tx_take();
	while (g_nb_rep < count && plat_tsc_now() < end) {
		pollers_turn();
		tx_take();
	}
	return g_nb_rep >= count;
}

/* Builds an INFER for a model into g_f[g_nb_f]: tensors as specs say, tensor 0's payload replaced by
 * data when given. \return the frame. */
/* When set, an INFER pads itself to this many bytes after its header (flag PADDED): a reply larger
 * than its request is refused unless the request carried as much (docs/protocol.md). */
static uint32_t g_pad_to;

static struct frame *infer_add(uint32_t model, const struct tensor_spec *specs, unsigned int n, const float *data)
{
	struct frame *f = &g_f[g_nb_f++];

	RTE_VERIFY(g_nb_f <= T_REPLIES_MAX);
	msg_init(&g_m, BW_OP_INFER, model);
	msg_hdr(&g_m)->deadline_us = BW_DEADLINE_NONE; /* no deadline: a loaded host must not fail a case */
	msg_tensors(&g_m, specs, n);
	if (data != NULL)
		memcpy(msg_body(&g_m) + g_m.data_off[0], data, msg_desc(&g_m, 0)->data_len);
	if (g_pad_to > msg_hdr(&g_m)->body_len) {
		RTE_VERIFY(T_BW_LEN + g_pad_to <= sizeof(g_m.b));
		memset(g_m.b + g_m.len, 0, T_BW_LEN + g_pad_to - g_m.len);
		g_m.len = T_BW_LEN + g_pad_to;
		msg_hdr(&g_m)->flags |= BW_FLAG_PADDED;
	}
	frame_msg(f, &g_m);
	f_eth(f)->dst_addr = g_lc.mac;
	return f;
}

/* An INFER of float [rows,cols] by index 0. */
static struct frame *infer_matrix_add(uint32_t model, unsigned int rows, unsigned int cols, const float *data)
{
	const struct tensor_spec t = { .index = 0, .dtype = BW_DTYPE_FLOAT, .rank = 2, .dims = { rows, cols } };

	return infer_add(model, &t, 1, data);
}

/* An INFER of rows rows of the MLP's input. */
static struct frame *infer_rows_add(uint32_t model, unsigned int rows, const float *data)
{
	return infer_matrix_add(model, rows, MLP_IN, data);
}

static void inject(const struct frame *f)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(g_pool);

	CU_ASSERT_PTR_NOT_NULL_FATAL(m);
	RTE_VERIFY(f->len <= rte_pktmbuf_tailroom(m));
	memcpy(rte_pktmbuf_mtod(m, void *), f->b, f->len);
	m->data_len = (uint16_t)f->len;
	m->pkt_len = f->len;
	CU_ASSERT_EQUAL_FATAL(rte_ring_enqueue(g_rx_ring, m), 0);
}

static void inject_all(void)
{
	for (unsigned int i = 0; i < g_nb_f; i++)
		inject(&g_f[i]);
}

static const struct bw_hdr *mbuf_bw(const struct rte_mbuf *m)
{
	return rte_pktmbuf_mtod_offset(m, const struct bw_hdr *, T_UDP_HDRS_LEN);
}

/*
 * The reply to request frame f among those taken: its Ethernet, IPv4 and UDP layers (turned around,
 * checksums right) and its protocol header (reply opcode, request id, status, lengths) are checked.
 * \return its protocol header, or NULL (a failure is recorded).
 */
static const struct bw_hdr *reply_at(const struct frame *f, enum bw_status status, const char *file, int line)
{
	const struct bw_hdr *rq = f_bw(f);

	for (unsigned int i = 0; i < g_nb_rep; i++) {
		const struct rte_mbuf *m = g_rep[i];
		uint32_t len = rte_pktmbuf_pkt_len(m);
		const struct bw_hdr *h;
		const struct rte_ipv4_hdr *ip;
		const struct rte_udp_hdr *udp;

		if (len < T_UDP_HDRS_LEN + T_BW_LEN || mbuf_bw(m)->request_id != rq->request_id)
			continue;
		h = mbuf_bw(m);
		ip = rte_pktmbuf_mtod_offset(m, const struct rte_ipv4_hdr *, T_ETH_LEN);
		udp = rte_pktmbuf_mtod_offset(m, const struct rte_udp_hdr *, T_ETH_LEN + T_IP_LEN);
		ipv4_reply_check_at(&g_lc, f, m, IPPROTO_UDP, file, line);
		t_check(udp->src_port == f_udp(f)->dst_port && udp->dst_port == f_udp(f)->src_port, file, line,
			"reply UDP ports not turned around");
		t_check(udp->dgram_cksum != 0 && rte_ipv4_udptcp_cksum_verify(ip, udp) == 0, file, line,
			"reply UDP checksum wrong");
		t_check(h->magic == BW_PROTO_MAGIC && h->opcode == (rq->opcode | BW_OP_REPLY), file, line,
			"reply magic 0x%x opcode 0x%x", h->magic, h->opcode);
		t_check(h->body_len == len - T_UDP_HDRS_LEN - T_BW_LEN && h->total_body_len == h->body_len &&
				h->seg_index == 0 && h->seg_count == 1,
			file, line, "reply body_len %u in a frame of %u bytes", h->body_len, len);
		t_check(h->status == status, file, line, "reply status %s ('%.*s'), expected %s",
			bw_status_name(h->status), h->status != BW_STATUS_OK ? (int)RTE_MIN(h->body_len, 200u) : 0,
			(const char *)(h + 1), bw_status_name(status));
		return h->status == status ? h : NULL;
	}
	t_check(false, file, line, "no reply to request 0x%" PRIx64 " (%u replies taken)", rq->request_id, g_nb_rep);
	return NULL;
}
#define REPLY(f, status) reply_at(f, status, __FILE__, __LINE__)

/* An error reply to f with this status whose message contains text. */
static void refusal_check_at(const struct frame *f, enum bw_status status, const char *text, const char *file,
			     int line)
{
	const struct bw_hdr *h = reply_at(f, status, file, line);

	if (h == NULL)
		return;
	t_check(h->num_tensors == 0 && memmem(h + 1, h->body_len, text, strlen(text)) != NULL, file, line,
		"refusal message '%.*s' does not contain '%s'", (int)RTE_MIN(h->body_len, 300u), (const char *)(h + 1),
		text);
}
#define REFUSAL(f, text) refusal_check_at(f, BW_STATUS_INVALID_ARGUMENT, text, __FILE__, __LINE__)

/*
 * An OK reply to f carrying one output, name [rows,cols] float: its descriptor exactly as the model
 * declares it, and rows whose floats equal expect (rows * cols) bit for bit (tol 0), or within
 * tol * the largest |expect| (another device's kernels sum in another order).
 */
static void output_check_at(const struct frame *f, const char *name, unsigned int rows, unsigned int cols,
			    const float *expect, float tol, const char *file, int line)
{
	const struct bw_hdr *h = reply_at(f, BW_STATUS_OK, file, line);
	uint32_t name_len = (uint32_t)strlen(name), data_off = (uint32_t)sizeof(struct bw_tensor_desc) + bw_pad8(name_len);
	uint32_t data_len = rows * cols * (uint32_t)sizeof(float);
	static float got[T_REF_BATCH_MAX * WIDE_OUT];
	unsigned int differ = 0, first = 0;
	struct bw_tensor_desc d;
	const uint8_t *body;
	float scale = 0;

	if (h == NULL)
		return;
	body = (const uint8_t *)(h + 1);
	t_check(h->num_tensors == 1 && h->body_len == data_off + data_len, file, line,
		"reply: %u tensors, body of %u bytes; expected 1 and %u", h->num_tensors, h->body_len, data_off + data_len);
	if (h->body_len != data_off + data_len || rows * cols > RTE_DIM(got))
		return;
	memcpy(&d, body, sizeof(d));
	t_check(d.index == 0 && d.dtype == BW_DTYPE_FLOAT && d.rank == 2 && d.dims[0] == rows && d.dims[1] == cols &&
			d.dims[2] == 0 && d.name_len == name_len && d.reserved == 0 && d.reserved2 == 0 &&
			d.data_len == data_len,
		file, line, "output descriptor: index %u dtype %u rank %u dims [%u,%u,%u] name_len %u data_len %u",
		d.index, d.dtype, d.rank, d.dims[0], d.dims[1], d.dims[2], d.name_len, d.data_len);
	t_check(memcmp(body + sizeof(d), name, name_len) == 0, file, line, "output name '%.*s', expected '%s'",
		(int)name_len, (const char *)(body + sizeof(d)), name);
	memcpy(got, body + data_off, data_len);
	for (unsigned int i = 0; i < rows * cols; i++)
		scale = RTE_MAX(scale, fabsf(expect[i]));
	for (unsigned int i = 0; i < rows * cols; i++) {
		bool same = tol == 0 ? memcmp(&got[i], &expect[i], sizeof(float)) == 0
				     : fabsf(got[i] - expect[i]) <= tol * scale;
		if (!same && differ++ == 0)
			first = i;
	}
	t_check(differ == 0, file, line, "%u of %u outputs differ from the runtime's; the first, row %u column %u: "
		"%.9g, expected %.9g", differ, rows * cols, first / cols, first % cols, (double)got[first],
		(double)expect[first]);
}
#define LOGITS(f, rows, expect) output_check_at(f, "logits", rows, MLP_OUT, expect, 0, __FILE__, __LINE__)
#define LOGITS_NEAR(f, rows, expect) \
	output_check_at(f, "logits", rows, MLP_OUT, expect, T_GPU_TOLERANCE, __FILE__, __LINE__)
#define WIDE_Y(f, rows, expect) output_check_at(f, "y", rows, WIDE_OUT, expect, 0, __FILE__, __LINE__)

/* One model's batch counters on this lcore, and its executor's. */
struct model_counts {
	struct bat_stats bat;
	struct app_exec_stats exec;
};

static struct model_counts g_before[APP_MODELS_MAX];

static void counts_take(uint32_t id, struct model_counts *c)
{
	const struct app_model *m = g_svc.models[id];

	app_stats_sum((int)id, -1, &c->bat);
	/* on the GPU the executor is the polling lcore's: its counters are the channel's */
	memset(&c->exec, 0, sizeof(c->exec));
	if (m->engine->exec_stats != NULL)
		m->engine->exec_stats(m, &c->exec);
}

static void counts_mark(void)
{
	for (uint32_t id = 0; id < g_svc.nb_models; id++)
		counts_take(id, &g_before[id]);
}

/* What a case must have added to a model's counters. */
struct counts_delta {
	uint64_t jobs, batches, rows, padding, splits, rejected_too_large;
	int size, size_batches;            /* batches of this padded size (0: not checked) */
	int reason, reason_batches;        /* batches dispatched for reason - 1 (0: not checked); see REASON */
};

static void counts_check_at(uint32_t id, const struct counts_delta *e, const char *file, int line)
{
	struct model_counts now;
	const struct model_counts *b = &g_before[id];

	counts_take(id, &now);
	t_check(now.bat.jobs - b->bat.jobs == e->jobs && now.bat.jobs_done - b->bat.jobs_done == e->jobs, file, line,
		"model %u: jobs +%" PRIu64 ", done +%" PRIu64 "; expected +%" PRIu64, id, now.bat.jobs - b->bat.jobs,
		now.bat.jobs_done - b->bat.jobs_done, e->jobs);
	t_check(now.bat.batches - b->bat.batches == e->batches && now.bat.rows - b->bat.rows == e->rows &&
			now.bat.padding_rows - b->bat.padding_rows == e->padding && now.bat.splits - b->bat.splits == e->splits,
		file, line, "model %u: batches +%" PRIu64 " rows +%" PRIu64 " padding +%" PRIu64 " splits +%" PRIu64
		"; expected %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64, id, now.bat.batches - b->bat.batches,
		now.bat.rows - b->bat.rows, now.bat.padding_rows - b->bat.padding_rows, now.bat.splits - b->bat.splits,
		e->batches, e->rows, e->padding, e->splits);
	t_check(now.bat.rejected_too_large - b->bat.rejected_too_large == e->rejected_too_large &&
			now.bat.rejected_full == b->bat.rejected_full && now.bat.batches_failed == b->bat.batches_failed &&
			now.bat.deadline_expired == b->bat.deadline_expired,
		file, line, "model %u: rejected_too_large +%" PRIu64 " (expected +%" PRIu64 "), rejected_full +%" PRIu64
		", failed +%" PRIu64 ", expired +%" PRIu64, id, now.bat.rejected_too_large - b->bat.rejected_too_large,
		e->rejected_too_large, now.bat.rejected_full - b->bat.rejected_full,
		now.bat.batches_failed - b->bat.batches_failed, now.bat.deadline_expired - b->bat.deadline_expired);
	if (e->size > 0)
		t_check(now.bat.by_size[e->size] - b->bat.by_size[e->size] == (uint64_t)e->size_batches, file, line,
			"model %u: batches of size %d +%" PRIu64 ", expected +%d", id, e->size,
			now.bat.by_size[e->size] - b->bat.by_size[e->size], e->size_batches);
	if (e->reason > 0) {
		int r = e->reason - 1;

		t_check(now.bat.dispatch[r] - b->bat.dispatch[r] == (uint64_t)e->reason_batches, file, line,
			"model %u: batches dispatched for reason %d +%" PRIu64 ", expected +%d", id, r,
			now.bat.dispatch[r] - b->bat.dispatch[r], e->reason_batches);
	}
	/* the executor side: every batch the batcher dispatched was started and finished, none failed */
	t_check(now.exec.batches_started - b->exec.batches_started == e->batches &&
			now.exec.batches_done - b->exec.batches_done == e->batches &&
			now.exec.batches_failed == b->exec.batches_failed,
		file, line, "model %u: executor started +%" PRIu64 " done +%" PRIu64 " failed +%" PRIu64
		"; expected +%" PRIu64 " +%" PRIu64 " +0", id, now.exec.batches_started - b->exec.batches_started,
		now.exec.batches_done - b->exec.batches_done, now.exec.batches_failed - b->exec.batches_failed,
		e->batches, e->batches);
}
#define COUNTS(id, ...) counts_check_at(id, &(const struct counts_delta){__VA_ARGS__}, __FILE__, __LINE__)
#define REASON(r, n) .reason = (int)(r) + 1, .reason_batches = (n)

/* ---- app_service_init refusals (before the service of the other suites exists) ------------------- */

/* What one app_service_init printed on err and returned; the service must be left empty. */
static void init_refusal_check_at(const char *const *args, int nb, const char *model, const char *text,
				  const char *file, int line)
{
	struct app_config cfg;
	struct app_service svc;
	char *out = NULL;
	size_t out_len = 0, nl = 0;
	FILE *err;
	int ret;

	err = open_memstream(&out, &out_len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(err);
	ret = config_parse(&cfg, stderr, args, nb);
	t_check(ret == APP_CONFIG_RUN, file, line, "app_config_parse: %d", ret);
	if (ret != APP_CONFIG_RUN) {
		fclose(err);
		free(out);
		return;
	}
	memset(&svc, 0xa5, sizeof(svc));
	ret = app_service_init(&svc, &cfg, err);
	fclose(err);
	for (size_t i = 0; i < out_len; i++)
		nl += out[i] == '\n';
	t_check(ret < 0, file, line, "app_service_init returned %d, expected a negative errno", ret);
	t_check(nl == 1 && out_len > 0 && out[out_len - 1] == '\n', file, line, "expected one line on err, got '%s'",
		out);
	{
		char name[96];

		snprintf(name, sizeof(name), "model '%s'", model);
		t_check(strstr(out, name) != NULL, file, line, "err '%s' does not name %s", out, name);
	}
	t_check(strstr(out, text) != NULL, file, line, "err '%s' does not say '%s'", out, text);
	/* left empty: nothing served, nothing the fini below could free twice, no global left behind */
	t_check(svc.nb_models == 0, file, line, "%u models left in a refused service", svc.nb_models);
	t_check(app_current != &svc, file, line, "a refused service is the one telemetry reads");
	/* nor a registry pointing at the models it freed */
	t_check(svc.registry.count == 0, file, line, "a refused service's registry still lists %u freed models",
		svc.registry.count);
	app_service_fini(&svc);
	t_check(svc.nb_models == 0, file, line, "app_service_fini after a refusal");
	free(out);
}
#define INIT_REFUSAL(model, text, ...) \
	init_refusal_check_at((const char *const[]){__VA_ARGS__}, \
			      (int)(sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *)), model, text, \
			      __FILE__, __LINE__)

static void test_init_missing_file(void)
{
	INIT_REFUSAL("ghost", "cannot open '/nonexistent/ghost.onnx': No such file or directory", "--ip", "10.0.0.1",
		     "--model", "ghost=/nonexistent/ghost.onnx");
}

static void test_init_fixed_batch(void)
{
	char fixed[sizeof(g_fixed_path) + 8];

	snprintf(fixed, sizeof(fixed), "fixed=%s", g_fixed_path);
	INIT_REFUSAL("fixed", "first dimension must be the batch", "--ip", "10.0.0.1", "--model", fixed);
}

static void test_init_gpu(void)
{
	char model[APP_PATH_MAX + 8];

	snprintf(model, sizeof(model), "mlp=%s", g_mlp_path);
	/* the default module: not beside this test (or no device, where it is found) */
	INIT_REFUSAL("mlp", "has device = gpu, but the GPU cannot be used: ", "--ip", "10.0.0.1", "--model", model,
		     "--model-opt", "mlp.device=gpu", "--model-opt", "mlp.max_batch_size=2", "--model-opt",
		     "mlp.allowed_batch_sizes=1,2");
	INIT_REFUSAL("mlp", "GPU index 3: this host has 1 device(s)", "--ip", "10.0.0.1", "--gpu-module", "fake",
		     "--gpu-index", "3", "--model", model, "--model-opt", "mlp.device=gpu", "--model-opt",
		     "mlp.max_batch_size=2", "--model-opt", "mlp.allowed_batch_sizes=1,2");
}

/* A good model made first and a bad one after it: the good one (its executor, submit ring, limiter and
 * graph) is freed. The ring's name is its id's, so the serving suite's init, whose first ONNX model
 * takes the same id, would fail with EEXIST if it were not. */
static void test_init_second_model_bad(void)
{
	char model[APP_PATH_MAX + 8];

	snprintf(model, sizeof(model), "good=%s", g_mlp_path);
	INIT_REFUSAL("bad", "cannot open", "--ip", "10.0.0.1", "--model", model, "--model", "bad=/nonexistent/bad.onnx");
}

/* ---- serving ---------------------------------------------------------------------------------- */

/* Version v of mlpv: v/model.onnx, a link to the MLP. \return 0 or -1. */
static int version_link(unsigned int v)
{
	char path[192], target[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%u", g_vdir, v);
	if (realpath(g_mlp_path, target) == NULL || mkdir(path, 0700) != 0)
		return -1;
	snprintf(path, sizeof(path), "%s/%u/model.onnx", g_vdir, v);
	return symlink(target, path);
}

static void version_unlink(unsigned int v)
{
	char path[192];

	snprintf(path, sizeof(path), "%s/%u/model.onnx", g_vdir, v);
	unlink(path);
	snprintf(path, sizeof(path), "%s/%u", g_vdir, v);
	rmdir(path);
}

static void test_setup(void)
{
	char mlp[APP_PATH_MAX + 8], split[APP_PATH_MAX + 8], one[APP_PATH_MAX + 8], wide[APP_PATH_MAX + 8];
	char gpu[APP_PATH_MAX + 8], gpu2[APP_PATH_MAX + 8], vers[APP_PATH_MAX + 8], err[512];
	struct rte_mempool *pools[2] = { g_pool, NULL };
	int sockets[1] = { (int)rte_socket_id() };
	static const char *const names[] = { "rx", "http_infer", "batch_windows", "completions", "model_mlp", "model_mlps",
					     "model_mlp1", "model_wide", "model_mlpv", "model_mlpv", "tx_drain" };

	snprintf(mlp, sizeof(mlp), "mlp=%s", g_mlp_path);
	snprintf(split, sizeof(split), "mlps=%s", g_mlp_path);
	snprintf(one, sizeof(one), "mlp1=%s", g_mlp_path);
	snprintf(wide, sizeof(wide), "wide=%s", g_wide_path);
	snprintf(gpu, sizeof(gpu), "mlpg=%s", g_mlp_path);
	snprintf(gpu2, sizeof(gpu2), "mlpg2=%s", g_mlp_path);
	snprintf(g_vdir, sizeof(g_vdir), "%s/mlpv", g_tmpdir);
	CU_ASSERT_FATAL(mkdir(g_vdir, 0700) == 0);
	for (unsigned int v = 1; v <= 2; v++)
		CU_ASSERT_FATAL(version_link(v) == 0);
	snprintf(vers, sizeof(vers), "mlpv=%s", g_vdir);
	/* mlp: batches of 1, 2 or 4, no splitting, a batch of 4 run in chunks of 2 rows. mlps: splitting,
	 * batches of at most 2 (a 2-row request that finds a window with one row left is cut in two).
	 * mlp1: one row at most, no splitting.
	 * wide: requests of up to 2 rows run one row per batch. mlpg: mlp's batching, on the fake GPU; mlpg2:
	 * batches of one on it too, beside mlpg on the same lcore with a stream of its own. mlpv: the MLP's
	 * two latest versions of a directory served at once, mlp's batching. */
	CU_ASSERT_EQUAL_FATAL(CONFIG_PARSE(&g_cfg, stderr, "--ip", "10.0.0.1", "--mtu", "9000", "--tx-drain-us", "10",
					   "--model", mlp, "--model-opt", "mlp.max_batch_size=4",
					   "--model-opt", "mlp.allowed_batch_sizes=1,2,4", "--model-opt", "mlp.chunk_rows=2",
					   "--model", split, "--model-opt", "mlps.max_batch_size=2",
					   "--model-opt", "mlps.allowed_batch_sizes=1,2",
					   "--model-opt", "mlps.enable_large_batch_splitting=true",
					   "--model-opt", "mlps.max_execution_batch_size=2",
					   "--model", one, "--model-opt", "mlp1.max_batch_size=1",
					   "--model", wide, "--model-opt", "wide.max_batch_size=2",
					   "--model-opt", "wide.enable_large_batch_splitting=true",
					   "--model-opt", "wide.max_execution_batch_size=1",
					   "--gpu-module", "fake", "--model", gpu, "--model-opt", "mlpg.device=gpu",
					   "--model-opt", "mlpg.max_batch_size=4", "--model-opt", "mlpg.allowed_batch_sizes=1,2,4",
					   "--model", gpu2, "--model-opt", "mlpg2.device=gpu", "--model-opt", "mlpg2.max_batch_size=1",
					   "--model-opt", "mlpg2.allowed_batch_sizes=1", "--model", vers,
					   "--model-opt", "mlpv.version_policy=latest 2", "--model-opt", "mlpv.max_batch_size=4",
					   "--model-opt", "mlpv.allowed_batch_sizes=1,2,4"),
			      APP_CONFIG_RUN);
	CU_ASSERT_EQUAL_FATAL(app_service_init(&g_svc, &g_cfg, stderr), 0);
	g_svc_up = true;
	CU_ASSERT_EQUAL_FATAL(g_svc.nb_models, 9);
	/* mlpv: the highest version registered under the name, the other beside it with an id of its own */
	g_id_v2 = model_id("mlpv");
	g_id_v1 = g_id_v2 + 1;
	CU_ASSERT_EQUAL(g_id_v2, 7);
	CU_ASSERT_EQUAL(g_svc.models[g_id_v2]->version, 2);
	CU_ASSERT_EQUAL(g_svc.models[g_id_v1]->version, 1);
	CU_ASSERT_PTR_EQUAL(g_svc.models[g_id_v1]->served, g_svc.models[g_id_v2]->served);
	CU_ASSERT_PTR_NULL(rt_registry_find_id(&g_svc.registry, g_id_v1));
	CU_ASSERT_PTR_EQUAL(app_current, &g_svc);
	g_id_mlp = model_id("mlp");
	g_id_split = model_id("mlps");
	g_id_one = model_id("mlp1");
	g_id_wide = model_id("wide");
	g_id_gpu = model_id("mlpg");
	g_id_gpu2 = model_id("mlpg2");
	CU_ASSERT_EQUAL(model_id("echo"), 0);
	/* configuration order after echo */
	CU_ASSERT(g_id_mlp == 1 && g_id_split == 2 && g_id_one == 3 && g_id_wide == 4 && g_id_gpu == 5 && g_id_gpu2 == 6);
	CU_ASSERT_FATAL(g_id_mlp < 6 && g_id_split < 6 && g_id_one < 6 && g_id_wide < 6 && g_id_gpu < 6);
	/* the GPU model: compiled and loaded on the fake, no workers, a slot per batch in flight */
	CU_ASSERT_PTR_EQUAL(g_svc.models[g_id_gpu]->engine, &app_engine_gpu);
	CU_ASSERT_PTR_NOT_NULL(gpu_of(g_svc.models[g_id_gpu])->prog.loaded);
	CU_ASSERT_PTR_EQUAL(g_svc.models[g_id_mlp]->engine, &app_engine_cpu);
	CU_ASSERT_EQUAL(g_svc.models[g_id_gpu]->cfg.slots, 1); /* num_batch_threads 1 */
	CU_ASSERT_STRING_EQUAL(g_gpu.hd.ops->name, "fake");
	/* the workers default to the main lcore: this thread */
	CU_ASSERT_EQUAL(g_svc.models[g_id_mlp]->cfg.nb_workers, 1);
	CU_ASSERT_EQUAL(g_svc.models[g_id_mlp]->cfg.workers[0], rte_get_main_lcore());
	CU_ASSERT(app_service_is_worker(rte_lcore_id()));

	/* the HTTP server's inference slots: 2 of the defaults' size */
	CU_ASSERT_EQUAL_FATAL(app_inject_init(&g_svc, 2, APP_HTTP_INFER_BYTES_DEFAULT, stderr), 0);
	CU_ASSERT_EQUAL(app_inject_slot_bytes(), APP_INJECT_SLOT_MIN); /* the MLP at 4 rows needs less */
	g_port = rte_eth_from_rings("bwsvc", &g_rx_ring, 1, &g_tx_ring, 1, rte_socket_id());
	CU_ASSERT_FATAL(g_port >= 0);
	CU_ASSERT_EQUAL_FATAL(dp_port_init((uint16_t)g_port, 1, &g_cfg.dp, pools, sockets), 0);
	CU_ASSERT_EQUAL_FATAL(dp_lcore_init(&g_lc, rte_lcore_id(), (uint16_t)g_port, 0, (int)rte_socket_id(), &g_cfg.dp,
					    &g_svc.ops),
			      0);
	CU_ASSERT_EQUAL_FATAL(app_service_lcore_init(&g_svc, &g_lc), 0);
	/* the pool's memory registered with the device; this lcore's executor made on this thread */
	pools[1] = app_inject_pool(); /* a GPU model reads an HTTP request's rows in place too */
	CU_ASSERT_EQUAL_FATAL(app_service_memory_register(pools, 2, stderr), 0);
	CU_ASSERT(g_gpu.nb_regions >= 1 && g_gpu.registered_bytes >= (uint64_t)g_pool->size * g_pool->elt_size);
	CU_ASSERT_EQUAL_FATAL(app_service_lcore_start(rte_lcore_id(), err, sizeof(err)), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(gpu_channel_of(g_id_gpu)->gpu);
	CU_ASSERT_PTR_NOT_NULL(gpu_channel_of(g_id_gpu)->stream); /* the (lcore, model)'s own */
	CU_ASSERT_PTR_NOT_NULL_FATAL(gpu_channel_of(g_id_gpu2)->gpu);
	CU_ASSERT(gpu_channel_of(g_id_gpu2)->stream != NULL &&
		  gpu_channel_of(g_id_gpu2)->stream != gpu_channel_of(g_id_gpu)->stream);
	CU_ASSERT_PTR_EQUAL(app_lcores[rte_lcore_id()].channels[g_id_mlp].executor.ops, &cpu_executor);
	/* mlp's size 4 runs depth first, in 2 chunks of 2 (chunk_rows = 2); its other sizes whole */
	CU_ASSERT_EQUAL(rt_executor_chunk_rows(cpu_of(g_svc.models[g_id_mlp])->live->executor, 4), 2);
	CU_ASSERT_EQUAL(rt_executor_chunk_rows(cpu_of(g_svc.models[g_id_mlp])->live->executor, 2), 2);
	CU_ASSERT_EQUAL(rt_executor_chunk_rows(cpu_of(g_svc.models[g_id_mlp])->live->executor, 1), 1);
	CU_ASSERT_PTR_EQUAL(app_lcores[rte_lcore_id()].channels[0].executor.ops, &echo_executor);
	g_nb_pollers = app_service_pollers(rte_lcore_id(), true, true, g_pollers);
	CU_ASSERT_EQUAL_FATAL(g_nb_pollers, RTE_DIM(names));
	for (unsigned int i = 0; i < g_nb_pollers; i++)
		t_check(strcmp(g_pollers[i].name, names[i]) == 0, __FILE__, __LINE__, "poller %u is '%s', expected '%s'",
			i, g_pollers[i].name, names[i]);
	g_ready = true;
}

#define NEED_SERVICE() \
	do { \
		if (!g_ready) { \
			CU_FAIL("the service was not set up"); \
			return; \
		} \
		replies_free(); \
		counts_mark(); \
	} while (0)

/* 1. MODEL_INFO by name. */
/* MODEL_INFO for name, answered at RX (step 4: no poller but RX and a flush). \return its frame. */
static struct frame *model_info_send(const char *name)
{
	static uint8_t name_padded[1024]; /* zeros after it: no reply larger than its request */
	struct frame *f = &g_f[0];

	memset(name_padded, 0, sizeof(name_padded));
	snprintf((char *)name_padded, sizeof(name_padded), "%s", name);
	msg_init(&g_m, BW_OP_MODEL_INFO, BW_MODEL_ID_ANY);
	msg_body_set(&g_m, name_padded, sizeof(name_padded));
	frame_msg(f, &g_m);
	f_eth(f)->dst_addr = g_lc.mac;
	g_nb_f = 1;
	inject(f);
	rx_once();
	return f;
}

static void test_model_info(void)
{
	static const uint32_t sizes[] = { 1, 2, 4 };
	struct frame *f;
	const struct bw_hdr *h;
	struct bw_model_info info;
	struct bw_tensor_desc d;
	const uint8_t *p;
	uint32_t off, got_sizes[3];

	NEED_SERVICE();
	f = model_info_send("mlp");
	h = REPLY(f, BW_STATUS_OK);
	if (h == NULL)
		return;
	p = (const uint8_t *)(h + 1);
	memcpy(&info, p, sizeof(info));
	CU_ASSERT_EQUAL(info.model_id, g_id_mlp);
	CU_ASSERT_EQUAL(info.name_len, 3);
	CU_ASSERT_EQUAL(info.flags, 0);
	CU_ASSERT_EQUAL(info.num_inputs, 1);
	CU_ASSERT_EQUAL(info.num_outputs, 1);
	CU_ASSERT_EQUAL(info.num_batch_sizes, 3);
	CU_ASSERT_EQUAL(info.priority_levels, 1);
	CU_ASSERT_EQUAL(info.max_batch_size, 4);
	off = (uint32_t)sizeof(info);
	CU_ASSERT(memcmp(p + off, "mlp\0\0\0\0\0", 8) == 0);
	off += 8;
	memcpy(got_sizes, p + off, sizeof(got_sizes));
	CU_ASSERT(memcmp(got_sizes, sizes, sizeof(sizes)) == 0);
	off += bw_pad8((uint32_t)sizeof(sizes));
	/* input 'input' float [0,784] */
	memcpy(&d, p + off, sizeof(d));
	CU_ASSERT(d.index == 0 && d.dtype == BW_DTYPE_FLOAT && d.rank == 2 && d.dims[0] == 0 && d.dims[1] == MLP_IN &&
		  d.dims[2] == 0 && d.name_len == 5 && d.data_len == 0);
	off += (uint32_t)sizeof(d);
	CU_ASSERT(memcmp(p + off, "input\0\0\0", 8) == 0);
	off += 8;
	/* output 'logits' float [0,10] */
	memcpy(&d, p + off, sizeof(d));
	CU_ASSERT(d.index == 0 && d.dtype == BW_DTYPE_FLOAT && d.rank == 2 && d.dims[0] == 0 && d.dims[1] == MLP_OUT &&
		  d.dims[2] == 0 && d.name_len == 6 && d.data_len == 0);
	off += (uint32_t)sizeof(d);
	CU_ASSERT(memcmp(p + off, "logits\0\0", 8) == 0);
	off += 8;
	CU_ASSERT_EQUAL(h->body_len, off);
	CU_ASSERT_EQUAL(h->num_tensors, 0);
}

/* 2. One row: the reply is the runtime's batch-1 output, bit for bit. */
static void test_infer_one_row(void)
{
	static float in[MLP_IN], ref[MLP_OUT];
	const float *rows[1] = { in };
	struct frame *f;

	NEED_SERVICE();
	rows_fill(in, MLP_IN, 1);
	ref_run(&g_ref_mlp, 1, rows, ref);
	f = infer_rows_add(g_id_mlp, 1, in);
	inject(f);
	rx_once();
	CU_ASSERT_EQUAL(g_nb_rep, 0); /* held by the batcher, not answered at RX */
	CU_ASSERT_FATAL(replies_wait(1));
	LOGITS(f, 1, ref);
	COUNTS(g_id_mlp, .jobs = 1, .batches = 1, .rows = 1, .size = 1, .size_batches = 1,
	       REASON(BW_DISPATCH_TIMEOUT, 1));
}

/* 3a. Rows 1, 2, 1 in one burst fill one window of 4: one batch, each reply its own rows. */
static void test_infer_burst_full(void)
{
	static float a[MLP_IN], b[2 * MLP_IN], c[MLP_IN], ref[4 * MLP_OUT];
	const float *rows[4] = { a, b, b + MLP_IN, c };
	struct frame *fa, *fb, *fc;

	NEED_SERVICE();
	rows_fill(a, MLP_IN, 11);
	rows_fill(b, 2 * MLP_IN, 12);
	rows_fill(c, MLP_IN, 13);
	ref_run(&g_ref_mlp, 4, rows, ref);
	fa = infer_rows_add(g_id_mlp, 1, a);
	fb = infer_rows_add(g_id_mlp, 2, b);
	fc = infer_rows_add(g_id_mlp, 1, c);
	inject_all();
	CU_ASSERT_FATAL(replies_wait(3));
	LOGITS(fa, 1, ref);
	LOGITS(fb, 2, ref + MLP_OUT);
	LOGITS(fc, 1, ref + 3 * MLP_OUT);
	COUNTS(g_id_mlp, .jobs = 3, .batches = 1, .rows = 4, .size = 4, .size_batches = 1,
	       REASON(BW_DISPATCH_FULL, 1));
}

/* 3b. Rows 1 and 2: the window times out at 3 rows and runs at 4, the padding row repeating row 0. */
static void test_infer_burst_padded(void)
{
	static float a[MLP_IN], b[2 * MLP_IN], ref[4 * MLP_OUT];
	const float *rows[4] = { a, b, b + MLP_IN, a };
	struct frame *fa, *fb;

	NEED_SERVICE();
	rows_fill(a, MLP_IN, 21);
	rows_fill(b, 2 * MLP_IN, 22);
	ref_run(&g_ref_mlp, 4, rows, ref);
	fa = infer_rows_add(g_id_mlp, 1, a);
	fb = infer_rows_add(g_id_mlp, 2, b);
	inject_all();
	CU_ASSERT_FATAL(replies_wait(2));
	LOGITS(fa, 1, ref);
	LOGITS(fb, 2, ref + MLP_OUT);
	COUNTS(g_id_mlp, .jobs = 2, .batches = 1, .rows = 3, .padding = 1, .size = 4, .size_batches = 1,
	       REASON(BW_DISPATCH_TIMEOUT, 1));
}

/*
 * 3c. Splitting (mlps, batches of at most 2): rows 1, 2, 1 in one burst make [A0 B0] and [B1 C0]. B is
 * cut across two batches that run one after the other (one in flight): the first one's outputs are
 * scattered into B's mbuf before the second gathers B's row 1 from it. Had the outputs been staged
 * over the request body, B1 would be computed from overwritten bytes. (The model's 3136-byte rows
 * make a 3-row request larger than a 9000-byte datagram, hence 2 rows cut by a window's remainder.)
 */
static void test_infer_split(void)
{
	static float a[MLP_IN], b[2 * MLP_IN], c[MLP_IN], ref1[2 * MLP_OUT], ref2[2 * MLP_OUT], refb[2 * MLP_OUT];
	const float *rows1[2] = { a, b }, *rows2[2] = { b + MLP_IN, c };
	struct frame *fa, *fb, *fc;

	NEED_SERVICE();
	rows_fill(a, MLP_IN, 31);
	rows_fill(b, 2 * MLP_IN, 32);
	rows_fill(c, MLP_IN, 33);
	ref_run(&g_ref_mlp, 2, rows1, ref1);
	ref_run(&g_ref_mlp, 2, rows2, ref2);
	memcpy(refb, ref1 + MLP_OUT, MLP_ROW_OUT_BYTES);
	memcpy(refb + MLP_OUT, ref2, MLP_ROW_OUT_BYTES);
	fa = infer_rows_add(g_id_split, 1, a);
	fb = infer_rows_add(g_id_split, 2, b);
	fc = infer_rows_add(g_id_split, 1, c);
	inject_all();
	CU_ASSERT_FATAL(replies_wait(3));
	LOGITS(fa, 1, ref1);
	LOGITS(fb, 2, refb);
	LOGITS(fc, 1, ref2 + MLP_OUT);
	COUNTS(g_id_split, .jobs = 3, .batches = 2, .rows = 4, .splits = 1, .size = 2, .size_batches = 2,
	       REASON(BW_DISPATCH_FULL, 2));
}

/*
 * 3d. wide, one row per batch, output rows 32 times the input's: rows 2 and 1 in one burst run as three
 * batches [A0] [A1] [B0], one after the other. [A1] gathers A's row 1 after [A0] scattered A's first
 * 256 output bytes into A's mbuf: staged over the body (the reply's place, 56 bytes in), they would have
 * covered row 1 (8 bytes at 56 + 8) before it was read.
 */
static void test_wide_split(void)
{
	static float a[2 * WIDE_IN], b[WIDE_IN], ref_a[2 * WIDE_OUT], ref_b[WIDE_OUT];
	const float *a0[1] = { a }, *a1[1] = { a + WIDE_IN }, *b0[1] = { b };
	struct frame *fa, *fb;

	NEED_SERVICE();
	rows_fill(a, 2 * WIDE_IN, 51);
	rows_fill(b, WIDE_IN, 52);
	ref_run(&g_ref_wide, 1, a0, ref_a);
	ref_run(&g_ref_wide, 1, a1, ref_a + WIDE_OUT);
	ref_run(&g_ref_wide, 1, b0, ref_b);
	/* the outputs outgrow the inputs 32 times: the requests pad themselves to their replies */
	g_pad_to = 600;
	fa = infer_matrix_add(g_id_wide, 2, WIDE_IN, a);
	fb = infer_matrix_add(g_id_wide, 1, WIDE_IN, b);
	g_pad_to = 0;
	inject_all();
	CU_ASSERT_FATAL(replies_wait(2));
	WIDE_Y(fa, 2, ref_a);
	WIDE_Y(fb, 1, ref_b);
	COUNTS(g_id_wide, .jobs = 2, .batches = 3, .rows = 3, .splits = 1, .size = 1, .size_batches = 3,
	       REASON(BW_DISPATCH_FULL, 3));
}

/* ---- HTTP inference (http_infer.c, inject.c): an HTTP thread's request through this lcore -------- */

/* One POST /v2/models/NAME/infer body, run by app_http_infer on a thread of its own (as the HTTP
 * server's) while this lcore polls: the request enters the model's batcher here. */
struct http_call {
	const struct app_model *m;
	const char *body;
	size_t len;
	const char *header_len;      /* Inference-Header-Content-Length, or NULL */
	struct app_http_reply out;
	bool done;                   /* atomic */
};

static void *http_call_main(void *arg)
{
	struct http_call *c = arg;

	struct app_inject *slot;

	/* as the HTTP server does: admitted and given a slot at the headers, then the body */
	if (app_http_infer_admit(c->m, htonl(0x7f000001), NULL, &c->out) == 0) {
		slot = app_inject_take(1000000);
		CU_ASSERT_PTR_NOT_NULL(slot);
		if (slot != NULL)
			app_http_infer(c->m, slot, (const uint8_t *)c->body, c->len, c->header_len, &c->out);
	}
	__atomic_store_n(&c->done, true, __ATOMIC_RELEASE);
	return NULL;
}

/* Runs the call, polling this lcore until it has its answer (or T_WAIT_US). \return its HTTP status. */
static unsigned int http_call_run(struct http_call *c)
{
	uint64_t end = plat_tsc_now() + plat_us_to_tsc(T_WAIT_US);
	pthread_t thread;

	CU_ASSERT_EQUAL_FATAL(pthread_create(&thread, NULL, http_call_main, c), 0);
	while (!__atomic_load_n(&c->done, __ATOMIC_ACQUIRE) && plat_tsc_now() < end)
		pollers_turn();
	pthread_join(thread, NULL); /* it gives up by itself when nothing answers */
	return c->out.status;
}

/* A request of one input, JSON data unless binary (then the floats follow a JSON header). */
static char *http_body_mlp(const char *model_input, const char *datatype, unsigned int rows, unsigned int cols,
			   const float *data, bool binary, const char *extra, size_t *len, size_t *header_len)
{
	size_t cap = 256 + (size_t)rows * cols * 20 + (extra != NULL ? strlen(extra) : 0);
	char *b = malloc(cap + (size_t)rows * cols * sizeof(float));
	size_t n;

	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	n = (size_t)snprintf(b, cap, "{\"id\":\"t1\",\"inputs\":[{\"name\":\"%s\",\"datatype\":\"%s\",\"shape\":[%u,%u],",
			     model_input, datatype, rows, cols);
	if (binary) {
		n += (size_t)snprintf(b + n, cap - n, "\"parameters\":{\"binary_data_size\":%zu}}]",
				      (size_t)rows * cols * sizeof(float));
	} else {
		n += (size_t)snprintf(b + n, cap - n, "\"data\":[");
		for (unsigned int i = 0; i < rows * cols; i++)
			n += (size_t)snprintf(b + n, cap - n, "%s%.9g", i > 0 ? "," : "", (double)data[i]);
		n += (size_t)snprintf(b + n, cap - n, "]}]");
	}
	n += (size_t)snprintf(b + n, cap - n, "%s}", extra != NULL ? extra : "");
	*header_len = n;
	if (binary) {
		memcpy(b + n, data, (size_t)rows * cols * sizeof(float));
		n += (size_t)rows * cols * sizeof(float);
	}
	*len = n;
	return b;
}

/* The reply's output 'logits' against expect (rows x MLP_OUT), bit for bit (tol 0) or within tol of
 * the largest |logit|: from its JSON data or, after the header, its binary part. */
static void http_logits_check_at(const struct app_http_reply *out, unsigned int rows, const float *expect, float tol,
				 const char *file, int line)
{
	size_t json_len = out->header_len != 0 ? out->header_len : out->len;
	json_t *root = json_loadb(out->body, json_len, 0, NULL);
	json_t *o = json_array_get(json_object_get(root, "outputs"), 0);
	json_t *data = json_object_get(o, "data"), *shape = json_object_get(o, "shape");
	float got[4 * MLP_OUT], scale = 0;
	unsigned int differ = 0;

	t_check(root != NULL && json_array_size(json_object_get(root, "outputs")) == 1 &&
			strcmp(json_string_value(json_object_get(o, "name")), "logits") == 0 &&
			strcmp(json_string_value(json_object_get(o, "datatype")), "FP32") == 0 &&
			json_array_size(shape) == 2 && json_integer_value(json_array_get(shape, 0)) == rows &&
			json_integer_value(json_array_get(shape, 1)) == MLP_OUT &&
			strcmp(json_string_value(json_object_get(root, "model_version")), "1") == 0,
		file, line, "reply header: %.*s", (int)RTE_MIN(json_len, (size_t)400), out->body);
	if (data != NULL) {
		t_check(json_array_size(data) == rows * MLP_OUT, file, line, "%zu values", json_array_size(data));
		for (unsigned int i = 0; i < rows * MLP_OUT && i < json_array_size(data); i++)
			got[i] = (float)json_number_value(json_array_get(data, i));
	} else {
		t_check(out->len - json_len == rows * MLP_OUT * sizeof(float) &&
				json_integer_value(json_object_get(json_object_get(o, "parameters"), "binary_data_size")) ==
					(json_int_t)(rows * MLP_OUT * sizeof(float)),
			file, line, "binary part of %zu bytes", out->len - json_len);
		memcpy(got, out->body + json_len, RTE_MIN(out->len - json_len, sizeof(got)));
	}
	for (unsigned int i = 0; i < rows * MLP_OUT; i++)
		scale = RTE_MAX(scale, fabsf(expect[i]));
	for (unsigned int i = 0; i < rows * MLP_OUT; i++)
		differ += tol == 0 ? memcmp(&got[i], &expect[i], sizeof(float)) != 0 : fabsf(got[i] - expect[i]) > tol * scale;
	t_check(differ == 0, file, line, "%u of %u logits differ from the runtime's", differ, rows * MLP_OUT);
	json_decref(root);
}
#define HTTP_LOGITS(out, rows, expect, tol) http_logits_check_at(out, rows, expect, tol, __FILE__, __LINE__)

/* One row of JSON to model id, the reply's logits against the runtime's (within tol). */
static void http_one_row_check(uint32_t id, uint32_t seed, float tol)
{
	static float in[MLP_IN], ref[MLP_OUT];
	const float *rows[1] = { in };
	struct http_call c = { 0 };
	size_t header_len;
	char *body;

	rows_fill(in, MLP_IN, seed);
	ref_run(&g_ref_mlp, 1, rows, ref);
	body = http_body_mlp("input", "FP32", 1, MLP_IN, in, false, NULL, &c.len, &header_len);
	c.m = g_svc.models[id];
	c.body = body;
	CU_ASSERT_EQUAL(http_call_run(&c), 200);
	CU_ASSERT_EQUAL(c.out.header_len, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(c.out.body, "\"id\":\"t1\""));
	HTTP_LOGITS(&c.out, 1, ref, tol);
	COUNTS(id, .jobs = 1, .batches = 1, .rows = 1, .size = 1, .size_batches = 1, REASON(BW_DISPATCH_TIMEOUT, 1));
	free(c.out.body);
	free(body);
}

/* 4a. JSON in, JSON out: the runtime's logits, bit for bit (9 digits give a float back), through the
 * same batcher and counters as a datagram. */
static void test_http_json(void)
{
	NEED_SERVICE();
	http_one_row_check(g_id_mlp, 41, 0);
}

/* 4b. Binary in and out (Triton's extension): 2 rows, a batch of 2. */
static void test_http_binary(void)
{
	static float in[2 * MLP_IN], ref[2 * MLP_OUT];
	const float *rows[2] = { in, in + MLP_IN };
	struct http_call c = { 0 };
	char *body, header_len_text[24];
	size_t header_len;

	NEED_SERVICE();
	rows_fill(in, 2 * MLP_IN, 42);
	ref_run(&g_ref_mlp, 2, rows, ref);
	body = http_body_mlp("input", "FP32", 2, MLP_IN, in, true,
			     ",\"outputs\":[{\"name\":\"logits\",\"parameters\":{\"binary_data\":true}}]", &c.len, &header_len);
	snprintf(header_len_text, sizeof(header_len_text), "%zu", header_len);
	c.m = g_svc.models[g_id_mlp];
	c.body = body;
	c.header_len = header_len_text;
	CU_ASSERT_EQUAL(http_call_run(&c), 200);
	CU_ASSERT(c.out.header_len > 0 && c.out.header_len < c.out.len);
	HTTP_LOGITS(&c.out, 2, ref, 0);
	COUNTS(g_id_mlp, .jobs = 1, .batches = 1, .rows = 2, .size = 2, .size_batches = 1,
	       REASON(BW_DISPATCH_TIMEOUT, 1));
	free(c.out.body);
	free(body);
}

/* 4c. The echo model: its outputs are its inputs, whatever their dtypes; nested lists are flattened. */
static void test_http_echo(void)
{
	static const char body[] = "{\"inputs\":[{\"name\":\"a\",\"datatype\":\"INT64\",\"shape\":[2,2],"
				   "\"data\":[[1,-9007199254740993],[3,4]]},{\"name\":\"b\",\"datatype\":\"BOOL\","
				   "\"shape\":[2,1],\"data\":[true,false]}],\"outputs\":[{\"name\":\"a\"},{\"name\":\"b\"}]}";
	struct http_call c = { .m = g_svc.models[0], .body = body, .len = sizeof(body) - 1 };
	json_t *root, *outs;

	NEED_SERVICE();
	CU_ASSERT_EQUAL(http_call_run(&c), 200);
	root = json_loadb(c.out.body, c.out.len, 0, NULL);
	outs = json_object_get(root, "outputs");
	CU_ASSERT_EQUAL_FATAL(json_array_size(outs), 2);
	/* an int64 past 2^53 comes back exactly: no trip through a double */
	CU_ASSERT_EQUAL(json_integer_value(json_array_get(json_object_get(json_array_get(outs, 0), "data"), 1)),
			-9007199254740993LL);
	CU_ASSERT(json_is_true(json_array_get(json_object_get(json_array_get(outs, 1), "data"), 0)));
	CU_ASSERT(json_is_false(json_array_get(json_object_get(json_array_get(outs, 1), "data"), 1)));
	CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_array_get(outs, 1), "datatype")), "BOOL");
	{ /* echo has no executor counters: the batcher's alone */
		struct model_counts now;

		counts_take(0, &now);
		CU_ASSERT_EQUAL(now.bat.jobs - g_before[0].bat.jobs, 1);
		CU_ASSERT_EQUAL(now.bat.rows - g_before[0].bat.rows, 2);
	}
	json_decref(root);
	free(c.out.body);
}

/* 4d. Requests refused before they reach a batcher, each with its HTTP status and why. */
static void test_http_refusals(void)
{
	static float in[5 * MLP_IN];
	static const struct {
		const char *input, *datatype;
		unsigned int rows, cols;
		bool binary;
		const char *extra;
		const char *header_len;  /* instead of the real one */
		unsigned int status;
		const char *text;
	} cases[] = {
		{ "input", "FP64", 1, MLP_IN, false, NULL, NULL, 400, "datatype FP64, expected FP32" },
		{ "input", "FP32", 1, MLP_IN - 1, false, NULL, NULL, 400, "shape [1,783], expected [-1,784]" },
		{ "image", "FP32", 1, MLP_IN, false, NULL, NULL, 400, "has no input named 'image'" },
		{ "input", "FP32", 5, MLP_IN, false, NULL, NULL, 400, "takes at most 4 a request" },
		{ "input", "FP32", 1, MLP_IN, false, ",\"outputs\":[{\"name\":\"probs\"}]", NULL, 400,
		  "has no output named 'probs'" },
		{ "input", "FP32", 1, MLP_IN, false, ",\"parameters\":{\"priority\":3}", NULL, 400,
		  "'priority' must be an integer in 0..0" },
		{ "input", "FP32", 1, MLP_IN, true, NULL, "99999999", 400, "not a length within the body" },
		{ "input", "FP32", 1, MLP_IN, true, NULL, NULL, 400, "is not a JSON object" }, /* no header length */
	};
	char header_len_text[24];

	NEED_SERVICE();
	for (unsigned int k = 0; k < RTE_DIM(cases); k++) {
		struct http_call c = { .m = g_svc.models[g_id_mlp] };
		size_t header_len;
		char *body = http_body_mlp(cases[k].input, cases[k].datatype, cases[k].rows, cases[k].cols, in,
					   cases[k].binary, cases[k].extra, &c.len, &header_len);

		snprintf(header_len_text, sizeof(header_len_text), "%zu", header_len);
		c.body = body;
		c.header_len = cases[k].header_len != NULL ? cases[k].header_len
							   : cases[k].binary && k + 1 < RTE_DIM(cases) ? header_len_text : NULL;
		t_check(http_call_run(&c) == cases[k].status && c.out.body != NULL && strstr(c.out.body, cases[k].text),
			__FILE__, __LINE__, "case %u: %u %s; expected %u and '%s'", k, c.out.status,
			c.out.body != NULL ? c.out.body : "(none)", cases[k].status, cases[k].text);
		free(c.out.body);
		free(body);
	}
	/* data whose count is not the shape's, and a binary part one float short */
	{
		static const char short_data[] = "{\"inputs\":[{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[1,784],"
						 "\"data\":[1,2,3]}]}";
		struct http_call c = { .m = g_svc.models[g_id_mlp], .body = short_data, .len = sizeof(short_data) - 1 };

		CU_ASSERT_EQUAL(http_call_run(&c), 400);
		CU_ASSERT_PTR_NOT_NULL(strstr(c.out.body, "must hold its shape's 784 elements"));
		free(c.out.body);
	}
	{
		struct http_call c = { .m = g_svc.models[g_id_mlp] };
		size_t header_len;
		char *body = http_body_mlp("input", "FP32", 1, MLP_IN, in, true, NULL, &c.len, &header_len);

		snprintf(header_len_text, sizeof(header_len_text), "%zu", header_len);
		c.body = body;
		c.len -= sizeof(float);
		c.header_len = header_len_text;
		CU_ASSERT_EQUAL(http_call_run(&c), 400);
		CU_ASSERT_PTR_NOT_NULL(strstr(c.out.body, "ends 4 bytes short"));
		free(c.out.body);
		free(body);
	}
	for (uint32_t id = 0; id < g_svc.nb_models; id++)
		COUNTS(id, .jobs = 0);
	/* every slot went back: both can be taken */
	struct app_inject *a = app_inject_take(0), *b = app_inject_take(0);
	CU_ASSERT(a != NULL && b != NULL && app_inject_take(0) == NULL);
	app_inject_release(a);
	app_inject_release(b);
}

/* 4e. On the (fake) GPU: the slot's memory is registered, the device reads the rows in place. */
static void test_http_gpu(void)
{
	NEED_SERVICE();
	http_one_row_check(g_id_gpu, 43, T_GPU_TOLERANCE);
}

/* 5a. On the GPU (the fake): rows 1 and 2 make a batch of 3 run at 4, gathered from the request mbufs
 * and scattered into them by the device; the padding row is zeros, and no real row depends on it. */
static void test_gpu_padded(void)
{
	static float a[MLP_IN], b[2 * MLP_IN], ref[4 * MLP_OUT];
	const float *rows[4] = { a, b, b + MLP_IN, a };
	struct frame *fa, *fb;

	NEED_SERVICE();
	rows_fill(a, MLP_IN, 61);
	rows_fill(b, 2 * MLP_IN, 62);
	ref_run(&g_ref_mlp, 4, rows, ref);
	fa = infer_rows_add(g_id_gpu, 1, a);
	fb = infer_rows_add(g_id_gpu, 2, b);
	inject_all();
	CU_ASSERT_FATAL(replies_wait(2));
	LOGITS_NEAR(fa, 1, ref);
	LOGITS_NEAR(fb, 2, ref + MLP_OUT);
	COUNTS(g_id_gpu, .jobs = 2, .batches = 1, .rows = 3, .padding = 1, .size = 4, .size_batches = 1,
	       REASON(BW_DISPATCH_TIMEOUT, 1));
	CU_ASSERT_EQUAL(gpu_executor_in_flight(gpu_channel_of(g_id_gpu)->gpu), 0);
}

/* 5a'. Two GPU models on one lcore, each on its stream: a request to each in one burst, both answered
 * with the runtime's logits, each model's batch its own. */
static void test_gpu_two_models(void)
{
	static float a[MLP_IN], b[MLP_IN], ref_a[MLP_OUT], ref_b[MLP_OUT];
	struct frame *fa, *fb;

	NEED_SERVICE();
	replies_free();
	row_and_ref(a, ref_a, 63);
	row_and_ref(b, ref_b, 64);
	fa = infer_rows_add(g_id_gpu, 1, a);
	fb = infer_rows_add(g_id_gpu2, 1, b);
	inject_all();
	CU_ASSERT_FATAL(replies_wait(2));
	LOGITS_NEAR(fa, 1, ref_a);
	LOGITS_NEAR(fb, 1, ref_b);
	COUNTS(g_id_gpu2, .jobs = 1, .batches = 1, .rows = 1, .size = 1, .size_batches = 1);
	CU_ASSERT_EQUAL(gpu_executor_in_flight(gpu_channel_of(g_id_gpu2)->gpu), 0);
}

/* 5b. A launch the device refuses fails its batch's requests with INTERNAL; the device stays healthy
 * and the next request is served. */
static void test_gpu_launch_refused(void)
{
	static float a[MLP_IN], ref[MLP_OUT];
	const float *rows[1] = { a };
	struct app_exec_stats *st = &gpu_channel_of(g_id_gpu)->stats;
	uint64_t failed = st->batches_failed;
	struct frame *f;

	NEED_SERVICE();
	gpu_fake_inject(g_gpu.hd.dev, GPU_FAKE_FAULT_NEXT_LAUNCH, "injected: launch refused");
	rows_fill(a, MLP_IN, 71);
	f = infer_rows_add(g_id_gpu, 1, a);
	inject(f);
	CU_ASSERT_FATAL(replies_wait(1));
	refusal_check_at(f, BW_STATUS_INTERNAL, "the model failed on its batch", __FILE__, __LINE__);
	CU_ASSERT_EQUAL(st->batches_failed, failed + 1);
	CU_ASSERT_FALSE(gpu_lost());

	replies_free();
	g_nb_f = 0;
	ref_run(&g_ref_mlp, 1, rows, ref);
	f = infer_rows_add(g_id_gpu, 1, a);
	inject(f);
	CU_ASSERT_FATAL(replies_wait(1));
	LOGITS_NEAR(f, 1, ref);
}

/* 5c. The device is lost: the batch whose launch finds out fails with INTERNAL, the model answers
 * UNAVAILABLE from then on, saying why, and the models on the CPU go on. Last of the GPU cases. */
static void test_gpu_lost(void)
{
	static float a[MLP_IN], ref[MLP_OUT];
	const float *rows[1] = { a };
	struct frame *f_lost, *f_after, *f_cpu;

	NEED_SERVICE();
	gpu_fake_inject(g_gpu.hd.dev, GPU_FAKE_FAULT_STICKY, "injected: device lost");
	rows_fill(a, MLP_IN, 81);
	f_lost = infer_rows_add(g_id_gpu, 1, a);
	inject(f_lost);
	CU_ASSERT_FATAL(replies_wait(1));
	refusal_check_at(f_lost, BW_STATUS_INTERNAL, "the model failed on its batch", __FILE__, __LINE__);
	CU_ASSERT_TRUE(gpu_lost());
	CU_ASSERT(strstr(gpu_lost_why(), "injected: device lost") != NULL);

	ref_run(&g_ref_mlp, 1, rows, ref);
	f_after = infer_rows_add(g_id_gpu, 1, a);
	f_cpu = infer_rows_add(g_id_mlp, 1, a);
	inject(f_after);
	inject(f_cpu);
	CU_ASSERT_FATAL(replies_wait(3));
	refusal_check_at(f_after, BW_STATUS_UNAVAILABLE, "model 'mlpg' is unavailable: its GPU is unhealthy", __FILE__,
			 __LINE__);
	refusal_check_at(f_after, BW_STATUS_UNAVAILABLE, "injected: device lost", __FILE__, __LINE__);
	LOGITS(f_cpu, 1, ref);
}

/* 4. Refusals, answered at RX with the rule they break; and an input addressed by name, accepted. */
static void test_refusals(void)
{
	static float in[2 * MLP_IN], ref[MLP_OUT];
	const float *rows[1] = { in };
	const struct tensor_spec wrong_dtype = { .index = 0, .dtype = BW_DTYPE_INT32, .rank = 2, .dims = { 1, MLP_IN } };
	const struct tensor_spec wrong_dim = { .index = 0, .dtype = BW_DTYPE_FLOAT, .rank = 2, .dims = { 1, 783 } };
	const struct tensor_spec wrong_rank = { .index = 0, .dtype = BW_DTYPE_FLOAT, .rank = 1, .dims = { MLP_IN } };
	const struct tensor_spec no_rows = { .index = 0, .dtype = BW_DTYPE_FLOAT, .rank = 2, .dims = { 0, MLP_IN } };
	const struct tensor_spec two[2] = {
		{ .index = 0, .dtype = BW_DTYPE_FLOAT, .rank = 2, .dims = { 1, MLP_IN } },
		{ .index = 0, .dtype = BW_DTYPE_FLOAT, .rank = 2, .dims = { 1, MLP_IN } },
	};
	const struct tensor_spec unknown = { .index = BW_TENSOR_BY_NAME, .dtype = BW_DTYPE_FLOAT, .rank = 2,
					     .dims = { 1, MLP_IN }, .name = "pixels" };
	/* a peer's bytes in a name come back printable: an escape sequence and a byte not UTF-8 */
	const struct tensor_spec control = { .index = BW_TENSOR_BY_NAME, .dtype = BW_DTYPE_FLOAT, .rank = 2,
					     .dims = { 1, MLP_IN }, .name = "pix\x1b[2J\xff" "el" };
	const struct tensor_spec index_1 = { .index = 1, .dtype = BW_DTYPE_FLOAT, .rank = 2, .dims = { 1, MLP_IN } };
	const struct tensor_spec by_name = { .index = BW_TENSOR_BY_NAME, .dtype = BW_DTYPE_FLOAT, .rank = 2,
					     .dims = { 1, MLP_IN }, .name = "input" };
	struct frame *f_dtype, *f_dim, *f_rank, *f_rows, *f_two, *f_unknown, *f_index, *f_large, *f_name, *f_reply;
	struct frame *f_control;
	static float wide_in[40 * WIDE_IN];
	uint64_t invalid_before = g_lc.stats.replies[BW_STATUS_INVALID_ARGUMENT];

	NEED_SERVICE();
	rows_fill(in, 2 * MLP_IN, 41);
	ref_run(&g_ref_mlp, 1, rows, ref);
	f_dtype = infer_add(g_id_mlp, &wrong_dtype, 1, NULL);
	f_dim = infer_add(g_id_mlp, &wrong_dim, 1, NULL);
	f_rank = infer_add(g_id_mlp, &wrong_rank, 1, NULL);
	f_rows = infer_add(g_id_mlp, &no_rows, 1, NULL);
	f_two = infer_add(g_id_mlp, two, 2, NULL);
	f_unknown = infer_add(g_id_mlp, &unknown, 1, NULL);
	f_control = infer_add(g_id_mlp, &control, 1, NULL);
	f_index = infer_add(g_id_mlp, &index_1, 1, NULL);
	f_large = infer_rows_add(g_id_one, 2, in); /* mlp1 takes 1 row at most and does not split */
	f_name = infer_add(g_id_mlp, &by_name, 1, in);
	/* 40 wide rows are 320 bytes in, 10240 bytes out: the reply outgrows the datagram and gets reply
	 * pages, given back when the batcher refuses the rows (max_batch_size 2). */
	f_reply = infer_matrix_add(g_id_wide, 40, WIDE_IN, wide_in);
	inject_all();
	rx_once();
	/* every refusal is answered from RX alone; the request by name is held for its batch */
	CU_ASSERT_EQUAL(g_nb_rep, g_nb_f - 1);
	REFUSAL(f_dtype, "input 'input': dtype int32, expected float");
	REFUSAL(f_dim, "input 'input': shape [1,783], expected [N,784] with N > 0 rows");
	REFUSAL(f_rank, "input 'input': shape [784], expected [N,784]");
	/* a 48-byte body (one descriptor, no rows): its message cut to 48 bytes */
	REFUSAL(f_rows, "input 'input': shape [0,784], expected [N,784] w");
	REFUSAL(f_two, "model 'mlp' takes 1 input tensors, got 2");
	REFUSAL(f_unknown, "tensor 0: model 'mlp' has no input named 'pixels'");
	REFUSAL(f_control, "tensor 0: model 'mlp' has no input named 'pix?[2J?el'");
	REFUSAL(f_index, "tensor 0: input index 1 out of range: model 'mlp' has 1 inputs");
	REFUSAL(f_large, "batch of 2 rows refused: max_batch_size is 1");
	REFUSAL(f_reply, "batch of 40 rows refused: max_batch_size is 2");
	CU_ASSERT_EQUAL(g_lc.stats.replies[BW_STATUS_INVALID_ARGUMENT] - invalid_before, 10);
	CU_ASSERT_FATAL(replies_wait(g_nb_f));
	LOGITS(f_name, 1, ref);
	COUNTS(g_id_mlp, .jobs = 1, .batches = 1, .rows = 1, .size = 1, .size_batches = 1);
	COUNTS(g_id_one, .rejected_too_large = 1);
	COUNTS(g_id_wide, .rejected_too_large = 1);
}

/*
 * 4b. A forged unsigned INFER whose reply would be larger than it (a row of the wide model: 56 bytes
 * in, 304 out) is refused RESOURCE_EXHAUSTED at admission, before it costs anything: no job, no
 * batch, no reply pages held; the counter says so. (Padded, such rows are served: test_wide_split.)
 */
static void test_forged_large_reply(void)
{
	static float in[WIDE_IN];
	uint64_t refused = g_lc.stats.amplification_refused;
	uint64_t held_before = g_lc.stats.held_mbufs, held_msgs_before = g_lc.stats.held_messages;
	struct frame *f;

	NEED_SERVICE();
	rows_fill(in, WIDE_IN, 61);
	f = infer_matrix_add(g_id_wide, 1, WIDE_IN, in);
	inject(f);
	rx_once();
	CU_ASSERT_EQUAL(g_nb_rep, 1); /* answered from RX alone */
	CU_ASSERT_EQUAL(g_lc.stats.amplification_refused - refused, 1);
	CU_ASSERT_EQUAL(g_lc.stats.held_mbufs, held_before);
	CU_ASSERT_EQUAL(g_lc.stats.held_messages, held_msgs_before);
	refusal_check_at(f, BW_STATUS_RESOURCE_EXHAUSTED, "more than the request's 56", __FILE__, __LINE__);
	COUNTS(g_id_wide, .jobs = 0, .batches = 0);
}

/* ---- reloads ------------------------------------------------------------------------------------ */

struct reload_run {
	const char *name;
	char out[1024];
	int ret;
	bool done;
};

static void *reload_run_thread(void *arg)
{
	struct reload_run *r = arg;

	r->ret = app_models_reload(r->name, r->out, sizeof(r->out));
	__atomic_store_n(&r->done, true, __ATOMIC_RELEASE);
	return NULL;
}

/* The reload on a thread of its own, as the daemon's control threads run it, while this thread
 * polls what lcore 0 runs (the MLP's owner worker among them) until it is done. */
static void reload_drive(struct reload_run *r)
{
	uint64_t end = plat_tsc_now() + plat_us_to_tsc(60 * 1000000);
	pthread_t t;

	CU_ASSERT_FATAL(pthread_create(&t, NULL, reload_run_thread, r) == 0);
	while (!__atomic_load_n(&r->done, __ATOMIC_ACQUIRE) && plat_tsc_now() < end) {
		pollers_turn();
		tx_take();
	}
	pthread_join(t, NULL);
}

/*
 * 5a. A reload of the MLP (its one file again: version 1) while a request waits in its batcher: the
 * new version made beside the old, switched to between batches, the old freed; the waiting request
 * and one sent after are answered with the runtime's logits. Echo cannot reload, an unknown name is
 * NOT_FOUND's -ENOENT, and a request naming a version that does not serve is refused naming it.
 */
static void test_reload(void)
{
	static float a[MLP_IN], b[MLP_IN], ref_a[MLP_OUT], ref_b[MLP_OUT];
	struct app_model *m = g_svc.models[g_id_mlp];
	struct cpu_model *cm = cpu_of(m);
	const struct cpu_version *before = cm->live;
	struct reload_run r = { .name = "mlp" };
	struct frame *fa, *fb, *fv;
	char out[512];

	NEED_SERVICE();
	replies_free();
	row_and_ref(a, ref_a, 71);
	row_and_ref(b, ref_b, 72);
	CU_ASSERT_EQUAL(m->version, 1);
	fa = infer_rows_add(g_id_mlp, 1, a);
	inject(fa);
	rx_once(); /* held in its batching window */
	reload_drive(&r);
	CU_ASSERT_EQUAL(r.ret, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "model 'mlp': version 1 serves (from "));
	CU_ASSERT(cm->live != before);
	CU_ASSERT(cm->old == NULL && cm->pending == NULL && cm->retired == NULL);
	CU_ASSERT_EQUAL(m->reloads, 1);
	CU_ASSERT_EQUAL(m->reload_failures, 0);
	CU_ASSERT_FATAL(replies_wait(1));
	LOGITS(fa, 1, ref_a);
	replies_free(); /* fa is not sent again below: b runs alone, at batch size 1 as its reference */
	fb = infer_rows_add(g_id_mlp, 1, b);
	fv = infer_rows_add(g_id_mlp | (2u << BW_MODEL_ID_VERSION_SHIFT), 1, b);
	inject_all();
	CU_ASSERT_FATAL(replies_wait(2));
	LOGITS(fb, 1, ref_b);
	refusal_check_at(fv, BW_STATUS_NOT_FOUND, "model 'mlp' serves version 1, not version 2", __FILE__, __LINE__);
	CU_ASSERT_EQUAL(app_models_reload("echo", out, sizeof(out)), -ENOTSUP);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "the built-in echo model has no versions"));
	CU_ASSERT_EQUAL(app_models_reload("nope", out, sizeof(out)), -ENOENT);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "no model named 'nope'"));
}

/* 5b. The versions of a directory (Triton's layout) and the policy's choice; the tensors a new
 * version must keep. */
static void test_versions(void)
{
	char dir[] = "/tmp/bw-versions.XXXXXX", path[256], file[APP_PATH_MAX], why[256];
	static const char *const entries[] = { "1", "3", "03", "abc", "7" }; /* 7 has no model.onnx */
	struct app_model_config mc = { .name = "m" };
	struct rt_model served = g_svc.models[g_id_mlp]->spec, fresh = served;
	uint32_t v, list[8];

	CU_ASSERT_FATAL(mkdtemp(dir) != NULL);
	for (unsigned int i = 0; i < RTE_DIM(entries); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, entries[i]);
		CU_ASSERT_FATAL(mkdir(path, 0700) == 0);
		if (strcmp(entries[i], "7") == 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s/model.onnx", dir, entries[i]);
		FILE *f = fopen(path, "w");
		CU_ASSERT_FATAL(f != NULL);
		fclose(f);
	}
	CU_ASSERT_EQUAL(app_versions_list(dir, list, RTE_DIM(list)), 2);
	CU_ASSERT(list[0] == 1 && list[1] == 3);
	CU_ASSERT_EQUAL(app_version_resolve(dir, mc.version_specific, &v, file, sizeof(file), why, sizeof(why)), 0);
	CU_ASSERT_EQUAL(v, 3);
	snprintf(path, sizeof(path), "%s/3/model.onnx", dir);
	CU_ASSERT_STRING_EQUAL(file, path);
	mc.version_specific = 1;
	CU_ASSERT_EQUAL(app_version_resolve(dir, mc.version_specific, &v, file, sizeof(file), why, sizeof(why)), 0);
	CU_ASSERT_EQUAL(v, 1);
	mc.version_specific = 2;
	CU_ASSERT_EQUAL(app_version_resolve(dir, mc.version_specific, &v, file, sizeof(file), why, sizeof(why)), -ENOENT);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "has no 2/model.onnx (it has 1, 3)"));
	/* one file is version 1, and only 1 */
	CU_ASSERT_EQUAL(app_version_resolve(path, mc.version_specific, &v, file, sizeof(file), why, sizeof(why)), -ENOENT);
	mc.version_specific = 0;
	CU_ASSERT_EQUAL(app_version_resolve(path, mc.version_specific, &v, file, sizeof(file), why, sizeof(why)), 0);
	CU_ASSERT_EQUAL(v, 1);
	CU_ASSERT_EQUAL(app_versions_list(path, list, RTE_DIM(list)), 1);
	for (unsigned int i = 0; i < RTE_DIM(entries); i++) {
		snprintf(path, sizeof(path), "%s/%s/model.onnx", dir, entries[i]);
		unlink(path);
		snprintf(path, sizeof(path), "%s/%s", dir, entries[i]);
		rmdir(path);
	}
	CU_ASSERT_EQUAL(app_version_resolve(dir, mc.version_specific, &v, file, sizeof(file), why, sizeof(why)), -ENOENT);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "holds no version"));

	/* more versions than a list holds (made in an order of their own): the highest kept, ascending;
	 * latest the highest; specific N found below them too */
	{
		uint32_t many[APP_VERSIONS_MAX];
		const unsigned int count = APP_VERSIONS_MAX + 6;

		for (unsigned int i = 0; i < count; i++) {
			unsigned int ver = (i * 37) % count + 1; /* 37 is prime to 70: each of 1..70 once */
			FILE *f;

			snprintf(path, sizeof(path), "%s/%u", dir, ver);
			CU_ASSERT_FATAL(mkdir(path, 0700) == 0);
			snprintf(path, sizeof(path), "%s/%u/model.onnx", dir, ver);
			f = fopen(path, "w");
			CU_ASSERT_FATAL(f != NULL);
			fclose(f);
		}
		CU_ASSERT_EQUAL(app_versions_list(dir, many, APP_VERSIONS_MAX), APP_VERSIONS_MAX);
		for (unsigned int i = 0; i < APP_VERSIONS_MAX; i++)
			CU_ASSERT_EQUAL(many[i], count - APP_VERSIONS_MAX + 1 + i);
		mc.version_specific = 0;
		CU_ASSERT_EQUAL(app_version_resolve(dir, mc.version_specific, &v, file, sizeof(file), why, sizeof(why)), 0);
		CU_ASSERT_EQUAL(v, count);
		mc.version_specific = 3;
		CU_ASSERT_EQUAL(app_version_resolve(dir, mc.version_specific, &v, file, sizeof(file), why, sizeof(why)), 0);
		CU_ASSERT_EQUAL(v, 3);
		mc.version_specific = count + 1;
		CU_ASSERT_EQUAL(app_version_resolve(dir, mc.version_specific, &v, file, sizeof(file), why, sizeof(why)), -ENOENT);
		CU_ASSERT_PTR_NOT_NULL(strstr(why, "has no 71/model.onnx (it has 64 versions from 7 to 70 and lower ones)"));
		mc.version_specific = 0;
		for (unsigned int ver = 1; ver <= count; ver++) {
			snprintf(path, sizeof(path), "%s/%u/model.onnx", dir, ver);
			unlink(path);
			snprintf(path, sizeof(path), "%s/%u", dir, ver);
			rmdir(path);
		}
	}
	rmdir(dir);

	CU_ASSERT_EQUAL(app_model_signature_check(&served, &fresh, why, sizeof(why)), 0);
	fresh.inputs[0].dims[1]++;
	CU_ASSERT_EQUAL(app_model_signature_check(&served, &fresh, why, sizeof(why)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "its input 'input' is dtype 1 [N,785], the served version's dtype 1 [N,784]"));
	fresh = served;
	snprintf(fresh.outputs[0].name, sizeof(fresh.outputs[0].name), "scores");
	CU_ASSERT_EQUAL(app_model_signature_check(&served, &fresh, why, sizeof(why)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "its output 0 is 'scores', the served version's 'logits'"));
	fresh = served;
	fresh.num_outputs++;
	CU_ASSERT_EQUAL(app_model_signature_check(&served, &fresh, why, sizeof(why)), -EINVAL);
}

/* MODEL_INFO of mlpv by name: the registered id, the version a request naming none gets. */
static void versions_info_at(uint32_t version, const char *file, int line)
{
	struct frame *f = model_info_send("mlpv");
	struct bw_model_info info;
	const struct bw_hdr *h;

	h = reply_at(f, BW_STATUS_OK, file, line);
	if (h == NULL)
		return;
	memcpy(&info, h + 1, sizeof(info));
	t_check(info.model_id == g_id_v2 && info.version == version, file, line,
		"MODEL_INFO mlpv: id %u version %u; expected id %u version %u", info.model_id, info.version, g_id_v2,
		version);
	replies_free();
}

/* One row to mlpv naming version want (0: none), answered OK with the MLP's logits. */
static void versioned_infer_at(uint32_t want, const char *file, int line)
{
	static float a[MLP_IN], ref[MLP_OUT];
	struct frame *f;

	row_and_ref(a, ref, 80 + want);
	f = infer_rows_add(g_id_v2 | (want << BW_MODEL_ID_VERSION_SHIFT), 1, a);
	inject_all();
	t_check(replies_wait(1), file, line, "no reply to a request naming version %u", want);
	output_check_at(f, "logits", 1, MLP_OUT, ref, 0, file, line);
	replies_free();
}
#define VERSIONED_INFER(want) versioned_infer_at(want, __FILE__, __LINE__)

/*
 * 5c. latest 2: versions 2 and 1 of mlpv served at once, each on its own model id. A request naming
 * none goes to the highest, one naming a version to it, one naming another is NOT_FOUND listing
 * both. Version 3 appears: the reload moves the member serving 1 to it (2 reloads in place), and
 * requests naming none now go there. With 3 gone it moves back to 1; with 1 gone too, it serves on.
 */
static void test_versions_served(void)
{
	struct app_model *v2 = g_svc.models[g_id_v2], *v1 = g_svc.models[g_id_v1];
	struct reload_run r = { .name = "mlpv" };
	struct frame *f;
	char path[320];

	NEED_SERVICE();
	CU_ASSERT_PTR_EQUAL(app_model_version(v2, 0), v2);
	CU_ASSERT_PTR_EQUAL(app_model_version(v2, 1), v1);
	CU_ASSERT_PTR_NULL(app_model_version(v2, 3));
	versions_info_at(2, __FILE__, __LINE__);
	VERSIONED_INFER(0);
	COUNTS(g_id_v2, .jobs = 1, .batches = 1, .rows = 1, .size = 1, .size_batches = 1);
	COUNTS(g_id_v1, .jobs = 0);
	counts_mark();
	VERSIONED_INFER(1);
	COUNTS(g_id_v1, .jobs = 1, .batches = 1, .rows = 1, .size = 1, .size_batches = 1);
	COUNTS(g_id_v2, .jobs = 0);
	VERSIONED_INFER(2);
	f = infer_rows_add(g_id_v2 | (3u << BW_MODEL_ID_VERSION_SHIFT), 1, (const float[MLP_IN]){ 0 });
	inject_all();
	CU_ASSERT_FATAL(replies_wait(1));
	refusal_check_at(f, BW_STATUS_NOT_FOUND, "model 'mlpv' serves versions 1, 2, not version 3", __FILE__, __LINE__);
	replies_free();

	CU_ASSERT_EQUAL_FATAL(version_link(3), 0);
	reload_drive(&r);
	CU_ASSERT_EQUAL(r.ret, 0);
	snprintf(path, sizeof(path), "model 'mlpv': version 3 serves (from %s/3/model.onnx; version 1 before)", g_vdir);
	CU_ASSERT_PTR_NOT_NULL(strstr(r.out, path));
	snprintf(path, sizeof(path), "model 'mlpv': version 2 serves (from %s/2/model.onnx; version 2 before)", g_vdir);
	CU_ASSERT_PTR_NOT_NULL(strstr(r.out, path));
	CU_ASSERT(v1->version == 3 && v2->version == 2);
	CU_ASSERT_PTR_EQUAL(app_model_version(v2, 0), v1);
	versions_info_at(3, __FILE__, __LINE__);
	counts_mark();
	VERSIONED_INFER(0);
	COUNTS(g_id_v1, .jobs = 1, .batches = 1, .rows = 1, .size = 1, .size_batches = 1);
	COUNTS(g_id_v2, .jobs = 0);
	VERSIONED_INFER(3);
	VERSIONED_INFER(2);
	f = infer_rows_add(g_id_v2 | (1u << BW_MODEL_ID_VERSION_SHIFT), 1, (const float[MLP_IN]){ 0 });
	inject_all();
	CU_ASSERT_FATAL(replies_wait(1));
	refusal_check_at(f, BW_STATUS_NOT_FOUND, "model 'mlpv' serves versions 2, 3, not version 1", __FILE__, __LINE__);
	replies_free();

	/* 3 gone: back to 1 and 2, the highest 2 */
	version_unlink(3);
	r = (struct reload_run){ .name = "mlpv" };
	reload_drive(&r);
	CU_ASSERT_EQUAL(r.ret, 0);
	CU_ASSERT(v1->version == 1 && v2->version == 2);
	CU_ASSERT_PTR_EQUAL(app_model_version(v2, 0), v2);
	/* 1 gone too: one version left for two members; the one serving 1 serves on */
	version_unlink(1);
	r = (struct reload_run){ .name = "mlpv" };
	reload_drive(&r);
	CU_ASSERT_EQUAL(r.ret, 0);
	snprintf(path, sizeof(path), "model 'mlpv': version 1 serves on: %s holds fewer than 2 versions now", g_vdir);
	CU_ASSERT_PTR_NOT_NULL(strstr(r.out, path));
	CU_ASSERT(v1->version == 1 && v2->version == 2);
	VERSIONED_INFER(1);
	CU_ASSERT_EQUAL(v2->reloads, 3);
	CU_ASSERT_EQUAL(v1->reloads, 2);
	CU_ASSERT_EQUAL(version_link(1), 0);
}

/* Runs the poller named name until cond holds or T_WAIT_US passes. \return cond's last value. */
static bool poller_run_until(const char *name, bool (*cond)(void))
{
	uint64_t end = plat_tsc_now() + plat_us_to_tsc(T_WAIT_US);

	while (!cond() && plat_tsc_now() < end) {
		for (unsigned int i = 0; i < g_nb_pollers; i++)
			if (strcmp(g_pollers[i].name, name) == 0)
				g_pollers[i].poll(g_pollers[i].arg);
	}
	return cond();
}

static bool gpu_one_in_flight(void)
{
	return gpu_executor_in_flight(gpu_channel_of(g_id_gpu)->gpu) == 1;
}

static bool gpu_swap_published(void)
{
	return __atomic_load_n(&gpu_channel_of(g_id_gpu)->pending, __ATOMIC_ACQUIRE) != NULL;
}

/*
 * 5e. A GPU model reloaded (its file again) with a batch in flight on the old version: the reload
 * thread compiles and loads the new program and makes this lcore's executor of it; the lcore takes
 * it at its next poll, finishes the old one's launch (answered with the runtime's logits), hands
 * the old one back, and the next batch runs on the new one. The launch counters carry over.
 */
static void test_gpu_reload(void)
{
	static float a[MLP_IN], b[MLP_IN], ref_a[MLP_OUT], ref_b[MLP_OUT];
	struct gpu_channel *gc = gpu_channel_of(g_id_gpu);
	struct app_model *m = g_svc.models[g_id_gpu];
	struct gpu_executor *before = gc->gpu;
	const struct gpu_model *prog_before = gpu_of(m);
	struct reload_run r = { .name = "mlpg" };
	struct gpu_executor_stats es;
	struct frame *fa, *fb;
	pthread_t t;

	NEED_SERVICE();
	row_and_ref(a, ref_a, 91);
	row_and_ref(b, ref_b, 92);
	gpu_executor_stats(before, &es);
	fa = infer_rows_add(g_id_gpu, 1, a);
	inject(fa);
	rx_once();
	/* its window closes and it launches; its completion is not polled yet */
	CU_ASSERT_FATAL(poller_run_until("batch_windows", gpu_one_in_flight));
	CU_ASSERT_FATAL(pthread_create(&t, NULL, reload_run_thread, &r) == 0);
	while (!gpu_swap_published() && !__atomic_load_n(&r.done, __ATOMIC_ACQUIRE))
		usleep(100);
	CU_ASSERT_FATAL(gpu_swap_published());
	CU_ASSERT_PTR_EQUAL(gc->gpu, before); /* nothing changes on the lcore until it polls */
	while (!__atomic_load_n(&r.done, __ATOMIC_ACQUIRE)) {
		pollers_turn();
		tx_take();
	}
	pthread_join(t, NULL);
	CU_ASSERT_EQUAL(r.ret, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "model 'mlpg': version 1 serves (from "));
	CU_ASSERT(gc->gpu != NULL && gc->gpu != before);
	CU_ASSERT(gc->pending == NULL && gc->draining == NULL && gc->retired == NULL);
	CU_ASSERT(gpu_of(m) != prog_before && gpu_of(m)->before == NULL && gpu_of(m)->graph_spec != NULL);
	CU_ASSERT_EQUAL(m->reloads, 1);
	/* the old version's launch, delivered by the old executor before it went */
	CU_ASSERT_EQUAL(gc->freed.launched, es.launched + 1);
	CU_ASSERT_EQUAL(gc->freed.completed, es.completed + 1);
	CU_ASSERT_FATAL(replies_wait(1));
	LOGITS_NEAR(fa, 1, ref_a);
	replies_free();
	fb = infer_rows_add(g_id_gpu, 1, b);
	inject_all();
	CU_ASSERT_FATAL(replies_wait(1));
	LOGITS_NEAR(fb, 1, ref_b);
	gpu_executor_stats(gc->gpu, &es);
	CU_ASSERT_EQUAL(es.launched, 1);
	CU_ASSERT_EQUAL(gpu_executor_in_flight(gc->gpu), 0);
}

/* 6. Drain, and the books balance: every request answered, nothing queued or in flight. */
static void test_drain_balance(void)
{
	const struct dp_lcore_stats *s;
	const struct app_lcore *al;
	struct rte_tel_data *d;
	uint64_t replies = 0;

	NEED_SERVICE();
	CU_ASSERT(app_service_lcore_drain(rte_lcore_id(), T_DRAIN_US));
	tx_take();
	CU_ASSERT_EQUAL(g_nb_rep, 0); /* nothing was left to answer */
	s = &g_lc.stats;
	for (unsigned int k = 0; k < BW_STATUS_COUNT; k++)
		replies += s->replies[k];
	CU_ASSERT_EQUAL(replies, s->requests);
	CU_ASSERT(s->requests > 0);
	CU_ASSERT_EQUAL(s->rx_packets, s->requests); /* nothing dropped */
	CU_ASSERT_EQUAL(s->tx_packets, replies);
	CU_ASSERT_EQUAL(s->drops[DP_DROP_TX_FULL], 0);
	CU_ASSERT_EQUAL(rte_ring_count(g_rx_ring), 0);
	CU_ASSERT_EQUAL(rte_ring_count(g_tx_ring), 0);

	al = &app_lcores[rte_lcore_id()];
	CU_ASSERT_EQUAL(al->nb_channels, g_svc.nb_models);
	CU_ASSERT_EQUAL(al->deferred_count, 0);
	for (uint32_t id = 0; id < g_svc.nb_models; id++) {
		const struct app_model *m = g_svc.models[id];
		const struct app_channel *ch = &al->channels[id];
		struct bat_stats sum;

		app_stats_sum((int)id, -1, &sum);
		CU_ASSERT(bat_queue_empty(ch->queue));
		CU_ASSERT_EQUAL(bat_limiter_in_flight(m->limiter), 0);
		CU_ASSERT_EQUAL(sum.jobs, sum.jobs_done);
		/* the GPU's refused launch and the one that found the device lost */
		CU_ASSERT_EQUAL(sum.batches_failed, id == g_id_gpu ? 2 : 0);
		CU_ASSERT_EQUAL(sum.deadline_expired, 0);
		CU_ASSERT_EQUAL(sum.rejected_full, 0);
		if (m->engine == &app_engine_gpu) {
			const struct gpu_channel *gc = ch->executor.ctx;

			CU_ASSERT_EQUAL(gc->stats.batches_started, sum.batches);
			CU_ASSERT_EQUAL(gc->stats.batches_done, sum.batches);
			CU_ASSERT_EQUAL(gc->stats.batches_failed, id == g_id_gpu ? 2 : 0);
			CU_ASSERT_EQUAL(gpu_executor_in_flight(gc->gpu), 0);
			{ /* every launch counted once, under its size and slot */
				struct gpu_executor_stats gs;
				uint64_t launches = 0;

				gpu_executor_stats(gc->gpu, &gs);
				for (unsigned int z = 0; z < gpu_executor_nb_sizes(gc->gpu); z++)
					for (unsigned int sl = 0; sl < gpu_executor_nb_slots(gc->gpu); sl++)
						launches += gpu_executor_slot_launches(gc->gpu, z, sl);
				CU_ASSERT_EQUAL(launches, gs.launched);
				CU_ASSERT(gs.launched > 0);
				CU_ASSERT_EQUAL(gpu_executor_slot_launches(gc->gpu, gpu_executor_nb_sizes(gc->gpu), 0), 0);
				CU_ASSERT_EQUAL(gpu_executor_size(gc->gpu, 0), 1);
			}
		}
		if (m->engine != &app_engine_cpu)
			continue; /* echo, and the GPU's */
		const struct cpu_model *cm = cpu_of(m);
		const struct cpu_channel *cc = ch->executor.ctx;

		CU_ASSERT_PTR_NULL(cm->stash);
		CU_ASSERT_EQUAL(rte_ring_count(cm->submit_ring), 0);
		CU_ASSERT_EQUAL(rte_ring_count(cc->completions), 0);
		CU_ASSERT_EQUAL(cm->stats.batches_started, sum.batches);
		CU_ASSERT_EQUAL(cm->stats.batches_done, sum.batches);
		CU_ASSERT_EQUAL(cm->stats.batches_failed, 0);
		CU_ASSERT_EQUAL(cm->stats.busy_waits, 0); /* one batch in flight, one slot: never a wait */
	}
	/* the totals of the cases above: mlp ran 1 + 1 + 1 + 1 + 2 (the reload) + 2 (HTTP) + 1 (the GPU
	 * lost) batches, mlps 2, mlp1 none, wide 3 */
	CU_ASSERT_EQUAL(cpu_of(g_svc.models[g_id_mlp])->stats.batches_done, 9);
	CU_ASSERT_EQUAL(cpu_of(g_svc.models[g_id_split])->stats.batches_done, 2);
	CU_ASSERT_EQUAL(cpu_of(g_svc.models[g_id_one])->stats.batches_done, 0);
	CU_ASSERT_EQUAL(cpu_of(g_svc.models[g_id_wide])->stats.batches_done, 3);
	/* /batchwire/model refuses a name it does not serve. (Not called for a model it serves: the
	 * containers it nests are freed by the telemetry library once it has written them out, which a
	 * direct call never does; LeakSanitizer would rightly report them. The counters it reads are
	 * checked above.) */
	d = rte_tel_data_alloc();
	CU_ASSERT_PTR_NOT_NULL_FATAL(d);
	CU_ASSERT_EQUAL(model_cb("/batchwire/model", "nope", d), -EINVAL);
	CU_ASSERT_EQUAL(model_cb("/batchwire/model", NULL, d), -EINVAL);
	rte_tel_data_free(d);
}

/* ---- main --------------------------------------------------------------------------------------- */

static CU_TestInfo g_init_tests[] = {
	{ "refused: a file that does not exist (the loader's error)", test_init_missing_file },
	{ "refused: an input whose first dimension is fixed", test_init_fixed_batch },
	{ "refused: device gpu without a usable GPU", test_init_gpu },
	{ "refused: the second model; the first one freed", test_init_second_model_bad },
	CU_TEST_INFO_NULL,
};

/* Every command the service registers: DPDK refuses one whose help passes 127 bytes, and the
 * daemon would then run without it and the commands after it. */
static void test_telemetry_register(void)
{
	NEED_SERVICE();
	CU_ASSERT_EQUAL(app_service_telemetry_register(), 0);
}

static CU_TestInfo g_serve_tests[] = {
	{ "set-up: five MLPs (two on the fake GPU) and wide, a ring port, lcore 0 polling and working", test_setup },
	{ "MODEL_INFO by name: inputs, outputs, batch sizes", test_model_info },
	{ "telemetry: every command registered", test_telemetry_register },
	{ "INFER 1 row: the runtime's logits, bit for bit", test_infer_one_row },
	{ "INFER rows 1,2,1: one full batch of 4", test_infer_burst_full },
	{ "INFER rows 1,2: a batch of 3 padded to 4", test_infer_burst_padded },
	{ "INFER split: rows 1,2,1 over batches of 2", test_infer_split },
	{ "INFER split, outputs wider than inputs: rows 2,1 over batches of 1", test_wide_split },
	{ "refusals at RX naming their rule; an input by name", test_refusals },
	{ "a forged INFER whose reply outgrows it: refused at admission, nothing held", test_forged_large_reply },
	{ "reload: the MLP again while a request waits, switched between batches, the old version freed", test_reload },
	{ "versions: a directory's, the policy's choice, the tensors a new version must keep", test_versions },
	{ "versions served at once (latest 2): routed by the version named, moved by a reload", test_versions_served },
	{ "HTTP: JSON in and out, the runtime's logits through the batcher", test_http_json },
	{ "HTTP: binary tensors in and out, a batch of 2", test_http_binary },
	{ "HTTP: the echo model, int64 past 2^53 and bool", test_http_echo },
	{ "HTTP: refusals before the batcher, every slot given back", test_http_refusals },
	{ "HTTP: a GPU (fake) model reads the slot in place", test_http_gpu },
	{ "GPU (fake): rows 1,2 padded to 4, gathered from and scattered into the mbufs", test_gpu_padded },
	{ "GPU (fake): two models on one lcore, a stream each, both answered", test_gpu_two_models },
	{ "GPU (fake): a refused launch fails its batch INTERNAL, the next one is served", test_gpu_launch_refused },
	{ "GPU (fake): reloaded with a batch in flight, the old executor drained, the next on the new", test_gpu_reload },
	{ "GPU (fake): the device lost, its model UNAVAILABLE, the CPU models served", test_gpu_lost },
	{ "drain: nothing left, the counters balance", test_drain_balance },
	CU_TEST_INFO_NULL,
};

static void env_fini(void)
{
	replies_free();
	if (g_port >= 0) {
		dp_lcore_fini(&g_lc);
		dp_port_fini((uint16_t)g_port);
	}
	if (g_svc_up)
		app_service_fini(&g_svc);
	rte_ring_free(g_rx_ring);
	rte_ring_free(g_tx_ring);
	ref_fini(&g_ref_mlp);
	ref_fini(&g_ref_wide);
	if (g_wide_path[0] != '\0')
		unlink(g_wide_path);
	if (g_fixed_path[0] != '\0')
		unlink(g_fixed_path);
	if (g_vdir[0] != '\0') {
		for (unsigned int v = 1; v <= 3; v++)
			version_unlink(v);
		rmdir(g_vdir);
	}
	if (g_tmpdir[0] != '\0')
		rmdir(g_tmpdir);
	t_env_fini();
}

int main(int argc, char **argv)
{
	static CU_SuiteInfo suites[] = {
		{ .pName = "service: app_service_init refusals", .pTests = g_init_tests },
		{ .pName = "service: serving the MLP", .pTests = g_serve_tests },
		CU_SUITE_INFO_NULL,
	};
	int status;

	g_mlp_path = argc > 1 ? argv[1] : getenv("BW_MODEL_MLP");
	if (g_mlp_path == NULL || access(g_mlp_path, R_OK) != 0) {
		printf("skipped: no MLP model at '%s' (pass models/mlp.onnx as the argument; "
		       "python3 models/gen_models.py --out DIR mlp writes one)\n", g_mlp_path != NULL ? g_mlp_path : "");
		return BW_TEST_EXIT_SKIP;
	}
	if (t_env_init(argv[0]) != 0)
		return 1;
	snprintf(g_tmpdir, sizeof(g_tmpdir), "/tmp/bwtest-svc-XXXXXX");
	if (mkdtemp(g_tmpdir) == NULL) {
		perror("mkdtemp");
		g_tmpdir[0] = '\0';
		env_fini();
		return 1;
	}
	snprintf(g_wide_path, sizeof(g_wide_path), "%s/wide.onnx", g_tmpdir);
	snprintf(g_fixed_path, sizeof(g_fixed_path), "%s/fixed.onnx", g_tmpdir);
	if (plat_clock_init() != 0 || wide_model_write(g_wide_path, 0) != 0 ||
	    wide_model_write(g_fixed_path, FIXED_ROWS) != 0 || ref_init(&g_ref_mlp, g_mlp_path) != 0 ||
	    ref_init(&g_ref_wide, g_wide_path) != 0) {
		fprintf(stderr, "clock, wide.onnx, fixed.onnx or reference set-up failed\n");
		env_fini();
		return 1;
	}
	g_rx_ring = rte_ring_create("bwsvc_rx", T_RING_SIZE, (int)rte_socket_id(), RING_F_SP_ENQ | RING_F_SC_DEQ);
	g_tx_ring = rte_ring_create("bwsvc_tx", T_RING_SIZE, (int)rte_socket_id(), RING_F_SP_ENQ | RING_F_SC_DEQ);
	if (g_rx_ring == NULL || g_tx_ring == NULL) {
		fprintf(stderr, "rings: %s\n", rte_strerror(rte_errno));
		env_fini();
		return 1;
	}
	status = bw_cunit_run(suites);
	env_fini();
	return status;
}
