/* SPDX-License-Identifier: BSD-3-Clause */
/* bwrun's command line: --help and the options, each checked with one line naming it when wrong. */
#include "bwrun.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " [options] MODEL.onnx\n"
		"Runs an ONNX model through batchwire's CPU runtime and reports placement, outputs and timings.\n"
		"\n"
		"  --batch N            bind the batch dimension to N (default 1)\n"
		"  --input NAME=FILE    input NAME from a NumPy .npy file (repeatable); its dtype and shape must be\n"
		"                       the model's with the batch dimension = N\n"
		"  --seed S             seed for inputs not given (default %u): floats uniform in [-1,1); integers\n"
		"                       in [0,%d), except names containing \"mask\": ones, last quarter of each row 0\n"
		"  --save-inputs DIR    write the inputs used as DIR/NAME.npy\n"
		"  --output-dir DIR     write each output as DIR/NAME.npy\n"
		"  --repeat N           timed runs (default 1)\n"
		"  --warmup N           untimed runs before them (default 0)\n"
		"  --workers N          1 (default): rt_plan_run on this thread; N > 1: the daemon's multi-worker\n"
		"                       executor with N workers (this thread is worker 0)\n"
		"  --no-optimize        skip the load-time graph rewrites (fusions, layouts)\n"
		"  --chunk auto|off|N   run a batch depth first, N rows at a time through a plan of N rows\n"
		"                       (cpu); auto (default) times whole against chunks of 1, 2, 4 and 8\n"
		"                       rows when the batch's arena passes 1 MiB, as the daemon does\n"
		"  --profile            time every step of the timed runs: the ops' shares and the slowest\n"
		"                       steps (cpu, one worker; the timing adds two clock reads a step)\n"
		"  --profile-steps N    with --profile, how many of the slowest steps to list (default 12;\n"
		"                       0: every step)\n"
		"  --device cpu|gpu     where the model runs (default cpu); gpu: the GPU executor, the time is\n"
		"                       launch to completion seen, gather and scatter included\n"
		"  --gpu-module PATH    the device module for --device gpu (default: libbwgpu.so beside bwrun or\n"
		"                       in the build or install tree); 'fake': the fake device, on the CPU\n"
		"  --gpu-index N        the device to use (default 0)\n"
		"  --precision P        fp32 (default); bf16 (cpu): FusedGemm weights and activations in bf16 on\n"
		"                       AMX tiles, fp32 accumulation; fp16 (gpu): float tensors and weights in\n"
		"                       half precision on the device, fp32 accumulation; inputs and outputs\n"
		"                       stay fp32 either way\n"
		"  --layout L           auto (default: nhwc for fp16, nchw for fp32), nchw or nhwc: where the\n"
		"                       device's convolutions keep their channels\n"
		"  --launch-mode M      graph (default): one graph launch per batch; doorbell: the launch is a\n"
		"                       memory write the device's dispatcher picks up\n"
		"  -h, --help           this text\n"
		"\n"
		"File names: a tensor name's characters other than [A-Za-z0-9._-] become '_'.\n"
		"Environment: BW_CPU_ISA=baseline|avx2|avx512|amx caps the CPU kernels' instruction set (default:\n"
		"  the highest this CPU runs; the 'cpu' line says which run and why).\n"
		"Last line: model=F batch=N workers=N runs=N mean_us=X p50_us=X p99_us=X min_us=X device=D\n"
		"Exit status: 0 on success, 1 on any error (one line on stderr).\n",
		BW_INPUT_SEED_DEFAULT, BW_INPUT_INT_RANGE);
}

static unsigned long long parse_uint(const char *opt, const char *s, unsigned long long lo, unsigned long long hi)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno != 0 || end == s || *end != '\0' || s[0] == '-' || v < lo || v > hi)
		die("%s: '%s' is not an integer in [%llu, %llu]", opt, s, lo, hi);
	return v;
}

void parse_args(int argc, char **argv, struct opts *o)
{
	enum { OPT_BATCH = 256, OPT_INPUT, OPT_SEED, OPT_SAVE_INPUTS, OPT_OUTPUT_DIR, OPT_REPEAT, OPT_WARMUP,
	       OPT_WORKERS, OPT_NO_OPTIMIZE, OPT_DEVICE, OPT_GPU_MODULE, OPT_GPU_INDEX, OPT_PRECISION, OPT_LAUNCH_MODE,
	       OPT_LAYOUT, OPT_PROFILE, OPT_PROFILE_STEPS, OPT_CHUNK };
	static const struct option longopts[] = {
		{ "batch", required_argument, NULL, OPT_BATCH },
		{ "input", required_argument, NULL, OPT_INPUT },
		{ "seed", required_argument, NULL, OPT_SEED },
		{ "save-inputs", required_argument, NULL, OPT_SAVE_INPUTS },
		{ "output-dir", required_argument, NULL, OPT_OUTPUT_DIR },
		{ "repeat", required_argument, NULL, OPT_REPEAT },
		{ "warmup", required_argument, NULL, OPT_WARMUP },
		{ "workers", required_argument, NULL, OPT_WORKERS },
		{ "no-optimize", no_argument, NULL, OPT_NO_OPTIMIZE },
		{ "device", required_argument, NULL, OPT_DEVICE },
		{ "gpu-module", required_argument, NULL, OPT_GPU_MODULE },
		{ "gpu-index", required_argument, NULL, OPT_GPU_INDEX },
		{ "precision", required_argument, NULL, OPT_PRECISION },
		{ "launch-mode", required_argument, NULL, OPT_LAUNCH_MODE },
		{ "layout", required_argument, NULL, OPT_LAYOUT },
		{ "profile", no_argument, NULL, OPT_PROFILE },
		{ "profile-steps", required_argument, NULL, OPT_PROFILE_STEPS },
		{ "chunk", required_argument, NULL, OPT_CHUNK },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool gpu_only = false; /* an option only --device gpu takes was given */
	bool chunk_given = false;
	bool profile_steps_given = false;
	int c, rc;

	*o = (struct opts){ .batch = 1, .seed = BW_INPUT_SEED_DEFAULT, .repeat = 1, .workers = 1, .optimize = true,
			     .profile_steps = 12 };
	opterr = 0; /* our own one-line messages */
	/* The leading ':' tells a missing argument (':') from an unknown option ('?'). */
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_BATCH:
			o->batch = (int64_t)parse_uint("--batch", optarg, 1, BATCH_MAX);
			o->batch_given = true;
			break;
		case OPT_INPUT: {
			char *eq = strchr(optarg, '=');

			if (eq == NULL || eq == optarg || eq[1] == '\0')
				die("--input: '%s' is not NAME=FILE.npy", optarg);
			if (o->num_inputs == INPUT_FILES_MAX)
				die("--input: more than %d inputs", INPUT_FILES_MAX);
			*eq = '\0';
			for (unsigned int i = 0; i < o->num_inputs; i++)
				if (strcmp(o->inputs[i].name, optarg) == 0)
					die("--input: %s given twice", optarg);
			o->inputs[o->num_inputs++] = (struct input_file){ optarg, eq + 1 };
			break;
		}
		case OPT_SEED:
			o->seed = parse_uint("--seed", optarg, 0, UINT64_MAX);
			break;
		case OPT_SAVE_INPUTS:
			o->save_inputs = optarg;
			break;
		case OPT_OUTPUT_DIR:
			o->output_dir = optarg;
			break;
		case OPT_REPEAT:
			o->repeat = (unsigned int)parse_uint("--repeat", optarg, 1, REPEAT_MAX);
			break;
		case OPT_WARMUP:
			o->warmup = (unsigned int)parse_uint("--warmup", optarg, 0, REPEAT_MAX);
			break;
		case OPT_WORKERS:
			o->workers = (unsigned int)parse_uint("--workers", optarg, 1, RT_EXECUTOR_WORKERS_MAX);
			break;
		case OPT_NO_OPTIMIZE:
			o->optimize = false;
			break;
		case OPT_DEVICE:
			if (strcmp(optarg, "cpu") != 0 && strcmp(optarg, "gpu") != 0)
				die("--device: '%s' is neither cpu nor gpu", optarg);
			o->gpu = strcmp(optarg, "gpu") == 0;
			break;
		case OPT_GPU_MODULE:
			o->gpu_module = optarg;
			break;
		case OPT_GPU_INDEX:
			o->gpu_index = (int)parse_uint("--gpu-index", optarg, 0, GPU_DEVICES_MAX - 1);
			break;
		case OPT_PRECISION:
			/* which device takes the value is checked once --device is known */
			o->precision_given = optarg;
			if (gpu_precision_parse(optarg) < 0 && rt_precision_parse(optarg) < 0)
				die("--precision: '%s' is none of fp32, bf16 (cpu), fp16 (gpu)", optarg);
			break;
		case OPT_LAYOUT:
			rc = gpu_layout_parse(optarg);
			if (rc < 0)
				die("--layout: '%s' is none of auto, nchw, nhwc", optarg);
			o->layout = (uint32_t)rc;
			gpu_only = true;
			break;
		case OPT_LAUNCH_MODE:
			rc = gpu_launch_mode_parse(optarg);
			if (rc < 0)
				die("--launch-mode: '%s' is neither graph nor doorbell", optarg);
			o->launch_mode = (uint32_t)rc;
			gpu_only = true;
			break;
		case OPT_PROFILE:
			o->profile = true;
			break;
		case OPT_PROFILE_STEPS:
			o->profile_steps = (uint32_t)parse_uint("--profile-steps", optarg, 0, UINT32_MAX);
			profile_steps_given = true;
			break;
		case OPT_CHUNK:
			if (strcmp(optarg, "auto") == 0)
				o->chunk = 0;
			else if (strcmp(optarg, "off") == 0)
				o->chunk = -1;
			else
				o->chunk = (int64_t)parse_uint("--chunk", optarg, 1, BATCH_MAX);
			chunk_given = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case ':':
			die("option %s needs an argument (see --help)", argv[optind - 1]);
		case '?':
		default:
			if (optopt > 0 && optopt < 256)
				die("option -%c is unknown (see --help)", optopt);
			die("option %s is unknown (see --help)", argv[optind - 1]);
		}
	}
	if (optind != argc - 1)
		die(optind == argc ? "no model file given (see --help)" : "one model file at a time (see --help)");
	if (!o->gpu && (o->gpu_module != NULL || o->gpu_index != 0 || gpu_only))
		die("--gpu-module, --gpu-index, --layout and --launch-mode go with --device gpu");
	if (o->precision_given != NULL && o->gpu) {
		rc = gpu_precision_parse(o->precision_given);
		if (rc < 0)
			die("--precision %s is the CPU's: --device gpu takes fp32 or fp16", o->precision_given);
		o->precision = (uint32_t)rc;
	} else if (o->precision_given != NULL) {
		rc = rt_precision_parse(o->precision_given);
		if (rc < 0)
			die("--precision %s is the GPU's: --device cpu takes fp32 or bf16", o->precision_given);
		if (rc != RT_PRECISION_FP32 && !o->optimize)
			die("--precision %s is made by the load-time rewrites: not with --no-optimize", o->precision_given);
		o->cpu_precision = (uint32_t)rc;
	}
	if (o->profile && (o->gpu || o->workers != 1))
		die("--profile times the steps of one plan run on this thread: not with --device gpu or --workers");
	if (profile_steps_given && !o->profile)
		die("--profile-steps says how many steps --profile lists: give --profile too");
	if (o->gpu && chunk_given)
		die("--chunk is the CPU runtime's: --device gpu runs a batch whole");
	if (o->chunk > 0 && o->batch % o->chunk != 0)
		die("--chunk %lld does not divide --batch %lld", (long long)o->chunk, (long long)o->batch);
	if (o->gpu && o->workers != 1)
		die("--workers is the CPU executor's: --device gpu runs on one polling thread");
	o->model = argv[optind];
}
