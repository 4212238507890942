/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Launch/poll/complete on one stream (gpu.h). Slot i owns completion word i and a generation: a
 * launch queues signal(i, ++generation), and the slot is done when its word holds that generation.
 * Words are never reset, so there is no race between the host clearing a word and the device writing
 * it; generation 0 is skipped because it is what a fresh word holds.
 *
 * Free slots are a stack and in-flight slots a dense list, so launch is O(1) and poll visits only
 * what is in flight, whatever order the device finishes in.
 */
#include <errno.h>
#include <stdlib.h>

#include "defs.h"

struct gpu_inflight {
	const struct gpu_ops *ops;
	struct gpu_stream *stream;
	volatile uint32_t *words;
	uint32_t nb_slots;
	uint32_t nb_free, nb_busy;
	uint32_t *free_stack;  /* nb_free slot indices */
	uint32_t *busy;        /* nb_busy slot indices, in launch order until a poll reorders them */
	uint32_t *generation;  /* per slot: the value its word will hold when its launch is done */
	void **cookie;         /* per slot */
};

struct gpu_inflight *gpu_inflight_create(const struct gpu_ops *ops, struct gpu_stream *stream, uint32_t nb_slots)
{
	struct gpu_inflight *fl;
	uint32_t i;

	if (ops == NULL || stream == NULL || nb_slots == 0 || nb_slots > GPU_STREAM_WORDS_MAX) {
		errno = EINVAL;
		return NULL;
	}
	fl = calloc(1, sizeof(*fl));
	if (fl == NULL)
		return NULL;
	fl->ops = ops;
	fl->stream = stream;
	fl->words = ops->stream_words(stream);
	fl->nb_slots = nb_slots;
	fl->free_stack = calloc(nb_slots, sizeof(*fl->free_stack));
	fl->busy = calloc(nb_slots, sizeof(*fl->busy));
	fl->generation = calloc(nb_slots, sizeof(*fl->generation));
	fl->cookie = calloc(nb_slots, sizeof(*fl->cookie));
	if (fl->free_stack == NULL || fl->busy == NULL || fl->generation == NULL || fl->cookie == NULL) {
		gpu_inflight_free(fl);
		errno = ENOMEM;
		return NULL;
	}
	/* slot 0 on top: the lowest words are used first */
	for (i = 0; i < nb_slots; i++)
		fl->free_stack[i] = nb_slots - 1 - i;
	fl->nb_free = nb_slots;
	for (i = 0; i < nb_slots; i++)
		fl->generation[i] = fl->words[i]; /* a reused stream's words keep their last values */
	return fl;
}

void gpu_inflight_free(struct gpu_inflight *fl)
{
	if (fl == NULL)
		return;
	free(fl->free_stack);
	free(fl->busy);
	free(fl->generation);
	free(fl->cookie);
	free(fl);
}

int gpu_inflight_launch(struct gpu_inflight *fl, void *cookie, uint32_t *slot, char *err, size_t cap)
{
	uint32_t s, gen;
	int rc;

	if (fl->nb_free == 0) {
		gpu_err(err, cap, "all %u slots in flight", fl->nb_slots);
		return -EBUSY;
	}
	s = fl->free_stack[fl->nb_free - 1];
	gen = fl->generation[s] + 1;
	if (gen == 0)
		gen = 1;
	rc = fl->ops->signal(fl->stream, s, gen, err, cap);
	if (rc < 0)
		return rc; /* nothing queued: the slot stays free, its word keeps its old generation */
	fl->nb_free--;
	fl->generation[s] = gen;
	fl->cookie[s] = cookie;
	fl->busy[fl->nb_busy++] = s;
	*slot = s;
	return 0;
}

unsigned int gpu_inflight_poll(struct gpu_inflight *fl, void **cookies, unsigned int max)
{
	unsigned int found = 0;
	uint32_t i = 0;

	while (i < fl->nb_busy && found < max) {
		uint32_t s = fl->busy[i];

		if (!gpu_word_reached(&fl->words[s], fl->generation[s])) {
			i++;
			continue;
		}
		cookies[found++] = fl->cookie[s];
		fl->cookie[s] = NULL;
		fl->busy[i] = fl->busy[--fl->nb_busy];
		fl->free_stack[fl->nb_free++] = s;
	}
	return found;
}

uint32_t gpu_inflight_pending(const struct gpu_inflight *fl)
{
	return fl->nb_busy;
}
