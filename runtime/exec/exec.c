/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The sequential executor: a plan's steps in order on the calling thread. The hot path: no
 * allocation, no lock, no system call; a step's tensor descriptors are written into its own slot at
 * the start of the arena, so steps never share anything but the tensors the plan says they share
 * (what the multi-worker executor, executor.c, walking the same step table by pending counts, relies
 * on).
 *
 * Steps run with denormals flushed to zero (MXCSR's FTZ and DAZ, per thread), as TensorFlow's
 * executors run theirs: a denormal operand costs a microcode assist per vector instruction on x86,
 * and a softmax or GELU that makes a few of them slowed the transformer's GEMMs two-fold (56 ms ->
 * 30 ms a run on a Sapphire Rapids core). Only values below 2^-126 change, to 0. The mode is set on
 * the thread that runs the step, once (the check is a read of MXCSR), and left set.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>

#include <xmmintrin.h>

#include "defs.h"

#define MXCSR_FLUSH_DENORMALS 0x8040u /* FTZ (bit 15) and DAZ (bit 6) */

static inline void flush_denormals(void)
{
	unsigned int csr = _mm_getcsr();

	if (unlikely((csr & MXCSR_FLUSH_DENORMALS) != MXCSR_FLUSH_DENORMALS))
		_mm_setcsr(csr | MXCSR_FLUSH_DENORMALS);
}

int rt_exec_step(const struct rt_plan_step *s, uint8_t *arena, uint8_t *scratch, char *kerr, size_t kerr_cap)
{
	struct rt_tensor *t = (struct rt_tensor *)(void *)(arena + s->desc_offset);
	unsigned int count = (unsigned int)s->num_inputs + s->num_outputs;

	flush_denormals();
	for (unsigned int i = 0; i < count; i++) {
		const struct rt_plan_operand *o = &s->operands[i];

		t[i] = o->tensor;
		if (o->offset != RT_PLAN_OFFSET_NONE)
			t[i].data = (o->in_scratch ? scratch : arena) + o->offset;
	}
	kerr[0] = '\0';
	return s->kernel->run(s->node, t, t + s->num_inputs, s->scratch_bytes != 0 ? scratch : NULL, kerr, kerr_cap);
}

int rt_plan_run_steps(const struct rt_plan *p, void *arena, uint32_t first, uint32_t count, char *err, size_t cap)
{
	char kerr[RT_ERR_MAX];

	if (unlikely(((uintptr_t)arena & (RT_PLAN_ALIGN - 1)) != 0 || arena == NULL)) {
		snprintf(err, cap, "arena %p is not %d-byte aligned", arena, RT_PLAN_ALIGN);
		return -EINVAL;
	}
	if (unlikely(p->layout != RT_PLAN_LAYOUT_SEQUENTIAL)) {
		snprintf(err, cap, "the plan has the concurrent layout: rt_executor runs it");
		return -EINVAL;
	}
	if (unlikely(p->device != RT_DEVICE_CPU)) {
		snprintf(err, cap, "the plan is for a device: its runtime runs it, not the host");
		return -EINVAL;
	}
	if (unlikely(first > p->num_steps || count > p->num_steps - first)) {
		snprintf(err, cap, "steps %u..%u are past the plan's %u", first, first + count, p->num_steps);
		return -EINVAL;
	}
	for (uint32_t i = first; i < first + count; i++) {
		const struct rt_plan_step *s = &p->steps[i];
		int rc = rt_exec_step(s, arena, (uint8_t *)arena + s->scratch_offset, kerr, sizeof(kerr));

		if (unlikely(rc != 0)) {
			/* the cold path: formatting is fine here */
			snprintf(err, cap, "node %s (%s): %s", s->node->name, s->node->op_type,
				 kerr[0] != '\0' ? kerr : "kernel failed");
			return rc < 0 ? rc : -EIO;
		}
	}
	return 0;
}

int rt_plan_run(const struct rt_plan *p, void *arena, char *err, size_t cap)
{
	return rt_plan_run_steps(p, arena, 0, p->num_steps, err, cap);
}
