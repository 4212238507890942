/* SPDX-License-Identifier: BSD-3-Clause */
/* The app's glue between the dataplane and the runtime: the models served, as dp_model_ops. */
#ifndef BW_APP_SERVICE_H
#define BW_APP_SERVICE_H

#include "dataplane.h"
#include "runtime.h"

struct app_service {
	struct rt_registry registry;
	struct rt_model echo;
	struct dp_model_ops ops;
};

/** Registers the built-in models and fills svc->ops. \return 0 or a negative errno. */
int app_service_init(struct app_service *svc);

#endif /* BW_APP_SERVICE_H */
