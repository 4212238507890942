/* SPDX-License-Identifier: BSD-3-Clause */
/* The planner's arena layout (plan_arena.c), a step of rt_plan_create_layout (plan.c). */
#ifndef BW_RT_EXEC_PLAN_ARENA_H
#define BW_RT_EXEC_PLAN_ARENA_H

#include <stddef.h>
#include <stdint.h>

#include "defs.h"

/**
 * Lays out p's arena in p->layout once every node is planned and the steps linked: the steps'
 * descriptors first, then the arena tensors (and, sequential, the steps' scratch); writes their
 * offsets and the plan's sizes. step_of: each node's step, or -1 (folded).
 * \return 0, or -ENOMEM with err.
 */
int layout_arena(struct rt_plan *p, const int32_t *step_of, char *err, size_t cap);

#endif /* BW_RT_EXEC_PLAN_ARENA_H */
