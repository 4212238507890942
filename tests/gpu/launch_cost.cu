// SPDX-License-Identifier: BSD-3-Clause
/*
 * launch_cost: what CUDA itself charges the host for a launch, the floor under bench/gpu_launch's
 * launch_cpu_us. Host time spent inside cudaLaunchKernel of an empty kernel, and inside
 * cudaGraphLaunch of a graph holding one empty kernel, on a non-blocking stream: the mean over
 * LAUNCHES calls after a warm-up, timed around the calls only, in chunks of CHUNK with the stream
 * synchronised between chunks outside the timed region (so the queue never fills and blocks a
 * launch). Also, for context, an empty kernel launched and waited for one at a time (launch plus
 * cudaStreamSynchronize): the host-observed round trip.
 *
 * Then the same graph launches from 1, 2, 4 and 8 threads at once, each with a stream and a graph
 * of its own, as polling lcores launch their batches: cudaGraphLaunch takes locks of the context
 * every thread shares, so the mean host time per launch as threads are added says what one lcore's
 * launch costs while the others launch too (graph_launch_threads_ratio: 8 threads' ÷ 1's).
 *
 * Built by nvcc with the static CUDA runtime, as the module is (gpu/meson.build), so it runs where
 * only the driver is installed. No device: prints "no CUDA device present: ..." and exits 77.
 * Last line: launch_kernel_us=<x> launch_graph_us=<x>; the line before it
 * launch_graph_us_threads1=<x> ..._threads8=<x> graph_launch_threads_ratio=<x>
 */
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <thread>
#include <vector>

#include <cuda_runtime.h>

#define EXIT_SKIP 77    /* meson's SKIP */
#define LAUNCHES 10000  /* timed launches of each kind */
#define CHUNK 500       /* launches between synchronisations: well under the launch queue's depth */
#define WARMUP 1000     /* untimed launches of each kind first */
#define ROUND_TRIPS 1000

#define CHECK(call)                                                                                               \
	do {                                                                                                      \
		cudaError_t e_ = (call);                                                                          \
		if (e_ != cudaSuccess) {                                                                          \
			fprintf(stderr, "launch_cost: %s: %s (%s)\n", #call, cudaGetErrorString(e_),              \
				cudaGetErrorName(e_));                                                            \
			exit(1);                                                                                  \
		}                                                                                                 \
	} while (0)

__global__ void empty_kernel(void)
{
}

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts); /* vDSO: no system call of its own in the timed region */
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void launch_kernel(cudaStream_t s)
{
	CHECK(cudaLaunchKernel((const void *)empty_kernel, dim3(1), dim3(1), nullptr, 0, s));
}

static void launch_graph(cudaGraphExec_t g, cudaStream_t s)
{
	CHECK(cudaGraphLaunch(g, s));
}

/* Mean host time per launch over LAUNCHES, after WARMUP: the timer runs around the calls only. */
template <typename F> static double mean_launch_us(cudaStream_t s, F launch)
{
	double inside = 0;

	for (int i = 0; i < WARMUP; i++)
		launch();
	CHECK(cudaStreamSynchronize(s));
	for (int done = 0; done < LAUNCHES; done += CHUNK) {
		double t0 = now_us();

		for (int i = 0; i < CHUNK; i++)
			launch();
		inside += now_us() - t0;
		CHECK(cudaStreamSynchronize(s));
	}
	return inside / LAUNCHES;
}

/*
 * nthreads threads, each launching its own one-kernel graph on its own stream, all started together:
 * the mean over threads of each one's host time per launch.
 */
static double threads_graph_us(int nthreads)
{
	std::vector<std::thread> threads;
	std::vector<double> per(nthreads, 0.0);
	std::atomic<int> ready(0);

	for (int t = 0; t < nthreads; t++) {
		threads.emplace_back([&, t] {
			cudaStream_t st;
			cudaGraph_t g;
			cudaGraphExec_t ex;

			CHECK(cudaSetDevice(0));
			CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
			CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
			empty_kernel<<<1, 1, 0, st>>>();
			CHECK(cudaStreamEndCapture(st, &g));
			CHECK(cudaGraphInstantiate(&ex, g, 0));
			CHECK(cudaGraphUpload(ex, st));
			ready++;
			while (ready.load() < nthreads)
				; /* every thread launches at once */
			per[t] = mean_launch_us(st, [&] { launch_graph(ex, st); });
			CHECK(cudaGraphExecDestroy(ex));
			CHECK(cudaGraphDestroy(g));
			CHECK(cudaStreamDestroy(st));
		});
	}
	for (auto &th : threads)
		th.join();
	double sum = 0;
	for (double v : per)
		sum += v;
	return sum / nthreads;
}

int main(void)
{
	cudaDeviceProp prop;
	cudaStream_t s;
	cudaGraph_t graph;
	cudaGraphExec_t exec;
	int n = 0, runtime = 0, driver = 0;
	cudaError_t e = cudaGetDeviceCount(&n);
	double kernel_us, graph_us, rt_sum = 0;

	if (e != cudaSuccess || n == 0) {
		if (e != cudaSuccess)
			printf("no CUDA device present: cudaGetDeviceCount: %s (%s)\n", cudaGetErrorString(e),
			       cudaGetErrorName(e));
		else
			printf("no CUDA device present: cudaGetDeviceCount found none\n");
		return EXIT_SKIP;
	}
	CHECK(cudaSetDevice(0));
	CHECK(cudaGetDeviceProperties(&prop, 0));
	cudaRuntimeGetVersion(&runtime);
	cudaDriverGetVersion(&driver);
	printf("device 0: %s, compute capability %d.%d; CUDA runtime %d, driver %d\n", prop.name, prop.major,
	       prop.minor, runtime, driver);
	/* non-blocking: as the module's streams are, so the legacy default stream never serialises them */
	CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

	kernel_us = mean_launch_us(s, [&] { launch_kernel(s); });

	CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
	empty_kernel<<<1, 1, 0, s>>>();
	CHECK(cudaStreamEndCapture(s, &graph));
	CHECK(cudaGraphInstantiate(&exec, graph, 0));
	CHECK(cudaGraphUpload(exec, s)); /* as the module does: the first launch pays nothing extra */
	graph_us = mean_launch_us(s, [&] { launch_graph(exec, s); });

	for (int i = 0; i < WARMUP + ROUND_TRIPS; i++) {
		double t0 = now_us();

		launch_kernel(s);
		CHECK(cudaStreamSynchronize(s));
		if (i >= WARMUP)
			rt_sum += now_us() - t0;
	}
	printf("kernel_launch_sync_us=%.3f launches=%d chunk=%d\n", rt_sum / ROUND_TRIPS, LAUNCHES, CHUNK);

	CHECK(cudaGraphExecDestroy(exec));
	CHECK(cudaGraphDestroy(graph));
	CHECK(cudaStreamDestroy(s));
	{
		static const int counts[] = {1, 2, 4, 8};
		double us[4];

		for (int i = 0; i < 4; i++)
			us[i] = threads_graph_us(counts[i]);
		printf("launch_graph_us_threads1=%.3f launch_graph_us_threads2=%.3f launch_graph_us_threads4=%.3f "
		       "launch_graph_us_threads8=%.3f graph_launch_threads_ratio=%.3f\n", us[0], us[1], us[2], us[3],
		       us[0] > 0 ? us[3] / us[0] : 0.0);
	}
	printf("launch_kernel_us=%.3f launch_graph_us=%.3f\n", kernel_us, graph_us);
	return 0;
}
