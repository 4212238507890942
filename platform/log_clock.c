/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>

#include "platform.h"

RTE_LOG_REGISTER(plat_logtype_app, bw.app, INFO);
RTE_LOG_REGISTER(plat_logtype_plat, bw.plat, INFO);
RTE_LOG_REGISTER(plat_logtype_dp, bw.dp, INFO);

uint64_t plat_tsc_hz;

int plat_clock_init(void)
{
	plat_tsc_hz = rte_get_tsc_hz();
	return plat_tsc_hz == 0 ? -ENODEV : 0;
}
