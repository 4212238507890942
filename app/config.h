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

#include "dataplane.h"

#define APP_LCORE_ID_MAX (RTE_MAX_LCORE - 1)

struct app_config {
	struct dp_config dp;
	uint16_t port_id;
	bool have_ip;
	unsigned int nb_poll_lcores;  /* 0: every EAL worker lcore, or the main lcore alone */
	unsigned int poll_lcores[DP_MAX_POLL_LCORES];
	char config_path[4096];
};

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
