/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The HTTP control server (http.c): Prometheus /metrics and KServe v2's health and metadata
 * endpoints on a management address, on libmicrohttpd's thread. Started on the control thread,
 * before the models load (liveness answers while they do); ready once every polling lcore serves.
 */
#ifndef BW_APP_HTTP_H
#define BW_APP_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "dataplane.h"

/** Listens on cfg (nothing when disabled). \return 0, or a negative errno with one line in err. */
int app_http_start(const struct app_http_config *cfg, char *err, size_t cap);
void app_http_stop(void);

/** The polling lcores /metrics reads, once they are set up (count published last). */
void app_http_lcores(struct dp_lcore *const *lcores, unsigned int count);

/** Ready: every model loaded and every polling lcore serving; not ready again once stopping. */
void app_http_ready(bool ready);

#endif /* BW_APP_HTTP_H */
