/* SPDX-License-Identifier: BSD-3-Clause */
/* bwcli info: a model's MODEL_INFO reply, printed one field a line. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "bwcli.h"

const char g_usage_info[] =
	"Usage: " PROG " [GLOBAL OPTIONS] info --model M\n"
	"Prints a model's name, id, flags, batch sizes, inputs and outputs.\n"
	"  --model M       model id (0..4294967294) or name (all digits: an id)\n";

static void print_tensor_infos(const char *label, const struct bwc_tensor_info *t, uint16_t n)
{
	char dims[160];
	uint16_t i;

	printf("%s: %u\n", label, n);
	for (i = 0; i < n; i++) {
		format_dims(dims, sizeof(dims), t[i].rank, t[i].dims);
		printf("  [%u] %s: %s %s\n", t[i].index, t[i].name[0] ? t[i].name : "(unnamed)",
		       dtype_label(t[i].dtype), dims);
	}
}

int cmd_info(struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "model", required_argument, NULL, 'm' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct bwc_model_info *info;
	const char *model = NULL;
	bool have_info;
	uint32_t model_id, i;
	int opt, rc;

	while ((opt = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'm':
			model = optarg;
			break;
		case 'h':
			fputs(g_usage_info, stdout);
			return EXIT_OK;
		default:
			return command_opt_error("info", opt, argv);
		}
	}
	if (no_operands("info", argc, argv) != EXIT_OK)
		return EXIT_USAGE;
	if (model == NULL) {
		usage_error("info", "--model is required (a model id or name)");
		return EXIT_USAGE;
	}
	info = malloc(sizeof(*info));
	if (info == NULL) {
		fprintf(stderr, "%s info: out of memory\n", PROG);
		return EXIT_FAIL;
	}
	rc = open_client(cli);
	if (rc == EXIT_OK)
		rc = resolve_model(cli, "info", model, info, &have_info, &model_id);
	if (rc == EXIT_OK && !have_info) {
		int err = bwc_model_info(cli->c, model_id, info);

		if (err != 0) {
			char what[64];

			snprintf(what, sizeof(what), PROG " info: model %u", model_id);
			print_failure(what, err, cli->c);
			rc = EXIT_FAIL;
		}
	}
	if (rc != EXIT_OK) {
		free(info);
		return rc;
	}

	printf("name: %s\n", info->name);
	printf("id: %u\n", info->model_id);
	if (info->version != 0)
		printf("version: %u\n", info->version);
	else
		printf("version: none\n");
	printf("flags: 0x%04x%s\n", info->flags,
	       (info->flags & BW_MODEL_F_ANY_TENSORS) ? " (ANY_TENSORS)" : "");
	printf("priority levels: %u\n", info->priority_levels);
	printf("max batch size: %u\n", info->max_batch_size);
	if (info->num_batch_sizes == 0) {
		printf(info->max_batch_size == 0 ? "batch sizes: none (not batched)\n"
						 : "batch sizes: any (no padding)\n");
	} else {
		printf("batch sizes:");
		for (i = 0; i < info->num_batch_sizes; i++)
			printf(" %u", info->batch_sizes[i]);
		printf("\n");
	}
	if (info->flags & BW_MODEL_F_ANY_TENSORS) {
		printf("inputs: any\noutputs: any\n");
	} else {
		print_tensor_infos("inputs", info->inputs, info->num_inputs);
		print_tensor_infos("outputs", info->outputs, info->num_outputs);
	}
	free(info);
	return EXIT_OK;
}
