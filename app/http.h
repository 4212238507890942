/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The HTTP control server (http.c): Prometheus /metrics and KServe v2's health, metadata and
 * inference endpoints (http_infer.c) on a management address, on libmicrohttpd's threads. Started
 * on the control thread, before the models load (liveness answers while they do); ready once every
 * polling lcore serves.
 */
#ifndef BW_APP_HTTP_H
#define BW_APP_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "dataplane.h"

struct app_model;

/** Listens on cfg (nothing when disabled). \return 0, or a negative errno with one line in err. */
int app_http_start(const struct app_http_config *cfg, char *err, size_t cap);
void app_http_stop(void);

/** The polling lcores /metrics reads, once they are set up (count published last). */
void app_http_lcores(struct dp_lcore *const *lcores, unsigned int count);

/** Ready: every model loaded and every polling lcore serving; not ready again once stopping. */
void app_http_ready(bool ready);

/** Inference taken: from readiness to the end of the drain's grace period (async-signal-safe). */
void app_http_inference(bool on);

/* ---- http_infer.c: POST /v2/models/NAME/infer ---- */

/* A reply: its HTTP status and body (malloc'd; the caller frees it). header_len > 0: the body is
 * that many bytes of JSON, then binary outputs (Triton's Inference-Header-Content-Length). */
struct app_http_reply {
	unsigned int status;
	char *body;
	size_t len;
	size_t header_len;
};

struct app_inject;

/**
 * A request for model m, at its headers: refused (out filled, \return a negative errno) when the
 * model takes signed requests only, leaves client_addr (IPv4, network order) out of its allow list,
 * HTTP inference is off, or content_length (the header, or NULL) exceeds app_http_body_limit.
 */
int app_http_infer_admit(const struct app_model *m, uint32_t client_addr, const char *content_length,
			 struct app_http_reply *out);

/** The largest request body model m takes: its inputs at max_batch_size rows, as JSON numbers. */
uint64_t app_http_body_limit(const struct app_model *m);

/**
 * Runs one admitted KServe v2 inference request for model m in slot r (taken for it before its body
 * was read; given back here, whatever the outcome) through a polling lcore's batcher, and waits for
 * its answer (on an HTTP thread: it sleeps). header_len: the Inference-Header-Content-Length
 * header's value, or NULL for a body that is all JSON.
 */
void app_http_infer(const struct app_model *m, struct app_inject *r, const uint8_t *body, size_t len,
		    const char *header_len, struct app_http_reply *out);

/** KServe v2's datatype name for a dtype ("FP32"...; "BYTES" for one it has no name for). */
const char *app_kserve_datatype(uint8_t dtype);

#endif /* BW_APP_HTTP_H */
