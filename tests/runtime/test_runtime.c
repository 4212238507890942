/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the runtime: the model registry (ids, names as they come off the wire), the built-in
 * echo model, and the MODEL_INFO body decoded byte by byte at the offsets docs/protocol.md gives, so
 * the tests check the spec and not merely that the encoder agrees with wire.h's structs.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../bw_cunit.h"

#include "graph.h"
#include "runtime.h"

/* Little-endian reads at literal offsets. */
static uint16_t rd16(const uint8_t *p, size_t off)
{
	return (uint16_t)(p[off] | p[off + 1] << 8);
}

static uint32_t rd32(const uint8_t *p, size_t off)
{
	return (uint32_t)rd16(p, off) | (uint32_t)rd16(p, off + 2) << 16;
}

static bool all_zero(const uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (p[i] != 0)
			return false;
	}
	return true;
}

/* ---- registry ------------------------------------------------------------------------------------- */

static struct rt_model g_models[RT_MODELS_MAX + 1];

static void model_named(struct rt_model *m, uint32_t id, const char *name)
{
	CU_ASSERT_EQUAL_FATAL(rt_echo_init(m, id, name), 0);
}

static void test_registry_add(void)
{
	struct rt_registry reg = {0};
	struct rt_model echo, same_id, same_name, empty;

	model_named(&echo, 0, "echo");
	CU_ASSERT_EQUAL(rt_registry_add(&reg, &echo), 0);
	CU_ASSERT_EQUAL(reg.count, 1);
	CU_ASSERT_PTR_EQUAL(reg.models[0], &echo);

	model_named(&same_id, 0, "other");
	CU_ASSERT_EQUAL(rt_registry_add(&reg, &same_id), -EEXIST);
	model_named(&same_name, 7, "echo");
	CU_ASSERT_EQUAL(rt_registry_add(&reg, &same_name), -EEXIST);
	/* the same model twice */
	CU_ASSERT_EQUAL(rt_registry_add(&reg, &echo), -EEXIST);

	memset(&empty, 0, sizeof(empty));
	empty.id = 9;
	CU_ASSERT_EQUAL(rt_registry_add(&reg, &empty), -EINVAL);
	CU_ASSERT_EQUAL(rt_echo_init(&empty, 9, ""), 0);
	CU_ASSERT_EQUAL(rt_registry_add(&reg, &empty), -EINVAL);
	CU_ASSERT_EQUAL(reg.count, 1);

	/* Names differing only by a prefix are distinct models. */
	struct rt_model echo2;
	model_named(&echo2, 2, "echo2");
	CU_ASSERT_EQUAL(rt_registry_add(&reg, &echo2), 0);
	CU_ASSERT_EQUAL(reg.count, 2);
}

static void test_registry_full(void)
{
	struct rt_registry reg = {0};

	for (unsigned int i = 0; i < RT_MODELS_MAX; i++) {
		char name[16];
		snprintf(name, sizeof(name), "model%u", i);
		model_named(&g_models[i], 100 + i, name);
		CU_ASSERT_EQUAL(rt_registry_add(&reg, &g_models[i]), 0);
	}
	CU_ASSERT_EQUAL(reg.count, RT_MODELS_MAX);
	model_named(&g_models[RT_MODELS_MAX], 5000, "one-too-many");
	CU_ASSERT_EQUAL(rt_registry_add(&reg, &g_models[RT_MODELS_MAX]), -ENOSPC);
	CU_ASSERT_EQUAL(reg.count, RT_MODELS_MAX);
	/* every one is still found */
	for (unsigned int i = 0; i < RT_MODELS_MAX; i++)
		CU_ASSERT_PTR_EQUAL(rt_registry_find_id(&reg, 100 + i), &g_models[i]);
	CU_ASSERT_PTR_NULL(rt_registry_find_id(&reg, 5000));
	CU_ASSERT_PTR_EQUAL(rt_registry_find_name(&reg, "model63", 7), &g_models[63]);
}

static void test_registry_find(void)
{
	struct rt_registry reg = {0};
	struct rt_model echo, echo2, other;

	model_named(&echo, RT_ECHO_MODEL_ID, RT_ECHO_MODEL_NAME);
	model_named(&echo2, 42, "echo2");
	model_named(&other, 0xfffffffeu, "resnet50");
	CU_ASSERT_EQUAL(rt_registry_add(&reg, &echo), 0);
	CU_ASSERT_EQUAL(rt_registry_add(&reg, &echo2), 0);
	CU_ASSERT_EQUAL(rt_registry_add(&reg, &other), 0);

	CU_ASSERT_PTR_EQUAL(rt_registry_find_id(&reg, RT_ECHO_MODEL_ID), &echo);
	CU_ASSERT_PTR_EQUAL(rt_registry_find_id(&reg, 42), &echo2);
	CU_ASSERT_PTR_EQUAL(rt_registry_find_id(&reg, 0xfffffffeu), &other);
	CU_ASSERT_PTR_NULL(rt_registry_find_id(&reg, 1));
	CU_ASSERT_PTR_NULL(rt_registry_find_id(&reg, BW_MODEL_ID_ANY));

	/* Names straight off the wire: no NUL after them. */
	const char wire[] = {'e', 'c', 'h', 'o', '2', 'X', 'Y'};
	CU_ASSERT_PTR_EQUAL(rt_registry_find_name(&reg, wire, 4), &echo);
	CU_ASSERT_PTR_EQUAL(rt_registry_find_name(&reg, wire, 5), &echo2);
	CU_ASSERT_PTR_NULL(rt_registry_find_name(&reg, wire, 3));   /* "ech": a prefix is no match */
	CU_ASSERT_PTR_NULL(rt_registry_find_name(&reg, wire, 6));   /* "echo2X" */
	CU_ASSERT_PTR_NULL(rt_registry_find_name(&reg, wire, 0));
	const char resnet[] = {'r', 'e', 's', 'n', 'e', 't', '5', '0'};
	CU_ASSERT_PTR_EQUAL(rt_registry_find_name(&reg, resnet, sizeof(resnet)), &other);
	/* an embedded NUL is part of the name on the wire, so it cannot match */
	CU_ASSERT_PTR_NULL(rt_registry_find_name(&reg, "echo\0", 5));
	CU_ASSERT_PTR_NULL(rt_registry_find_name(&reg, "ECHO", 4));

	/* An empty registry finds nothing. */
	struct rt_registry none = {0};
	CU_ASSERT_PTR_NULL(rt_registry_find_id(&none, 0));
	CU_ASSERT_PTR_NULL(rt_registry_find_name(&none, "echo", 4));
}

/* ---- echo ------------------------------------------------------------------------------------------- */

static void test_echo_init(void)
{
	struct rt_model m;

	memset(&m, 0xa5, sizeof(m));
	CU_ASSERT_EQUAL(rt_echo_init(&m, 17, "echo"), 0);
	CU_ASSERT_EQUAL(m.id, 17);
	CU_ASSERT_STRING_EQUAL(m.name, "echo");
	CU_ASSERT_EQUAL(m.kind, RT_MODEL_ECHO);
	CU_ASSERT_EQUAL(m.flags, BW_MODEL_F_ANY_TENSORS);
	CU_ASSERT_EQUAL(m.priority_levels, 1);
	CU_ASSERT_EQUAL(m.max_batch_size, 0);
	CU_ASSERT_EQUAL(m.num_batch_sizes, 0);
	CU_ASSERT_EQUAL(m.num_inputs, 0);
	CU_ASSERT_EQUAL(m.num_outputs, 0);
	CU_ASSERT_TRUE(all_zero((const uint8_t *)m.batch_sizes, sizeof(m.batch_sizes)));
	CU_ASSERT_TRUE(all_zero((const uint8_t *)m.inputs, sizeof(m.inputs)));

	/* The longest name that fits: RT_MODEL_NAME_MAX - 1 characters. */
	char name[RT_MODEL_NAME_MAX + 1];
	memset(name, 'n', RT_MODEL_NAME_MAX - 1);
	name[RT_MODEL_NAME_MAX - 1] = '\0';
	CU_ASSERT_EQUAL(rt_echo_init(&m, 1, name), 0);
	CU_ASSERT_EQUAL(strlen(m.name), RT_MODEL_NAME_MAX - 1);

	name[RT_MODEL_NAME_MAX - 1] = 'n';
	name[RT_MODEL_NAME_MAX] = '\0';
	CU_ASSERT_EQUAL(rt_echo_init(&m, 1, name), -EINVAL);

	char longer[300];
	memset(longer, 'x', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	CU_ASSERT_EQUAL(rt_echo_init(&m, 1, longer), -EINVAL);
}

/* ---- MODEL_INFO ------------------------------------------------------------------------------------- */

#define INFO_BUF 4096

static void test_describe_echo(void)
{
	struct rt_model echo;
	uint8_t buf[INFO_BUF];
	int len;

	CU_ASSERT_EQUAL_FATAL(rt_echo_init(&echo, RT_ECHO_MODEL_ID, RT_ECHO_MODEL_NAME), 0);
	memset(buf, 0xee, sizeof(buf));
	len = rt_model_describe(&echo, buf, sizeof(buf));
	CU_ASSERT_EQUAL_FATAL(len, 24 + 8);
	CU_ASSERT_EQUAL(rd32(buf, 0), RT_ECHO_MODEL_ID);
	CU_ASSERT_EQUAL(rd16(buf, 4), 4);                      /* name_len */
	CU_ASSERT_EQUAL(rd16(buf, 6), BW_MODEL_F_ANY_TENSORS); /* flags */
	CU_ASSERT_EQUAL(rd16(buf, 8), 0);                      /* num_inputs */
	CU_ASSERT_EQUAL(rd16(buf, 10), 0);                     /* num_outputs */
	CU_ASSERT_EQUAL(rd16(buf, 12), 0);                     /* num_batch_sizes */
	CU_ASSERT_EQUAL(rd16(buf, 14), 1);                     /* priority_levels */
	CU_ASSERT_EQUAL(rd32(buf, 16), 0);                     /* max_batch_size */
	CU_ASSERT_EQUAL(rd32(buf, 20), 0);                     /* reserved */
	CU_ASSERT_EQUAL(memcmp(buf + 24, "echo\0\0\0\0", 8), 0);
	CU_ASSERT_EQUAL(buf[32], 0xee); /* nothing written past the length */

	/* A name of exactly 8 bytes takes no padding; of 9, it takes 7. */
	struct rt_model m;
	CU_ASSERT_EQUAL_FATAL(rt_echo_init(&m, 5, "eightchr"), 0);
	CU_ASSERT_EQUAL(rt_model_describe(&m, buf, sizeof(buf)), 24 + 8);
	CU_ASSERT_EQUAL(memcmp(buf + 24, "eightchr", 8), 0);
	CU_ASSERT_EQUAL_FATAL(rt_echo_init(&m, 5, "ninechars"), 0);
	memset(buf, 0xee, sizeof(buf));
	CU_ASSERT_EQUAL(rt_model_describe(&m, buf, sizeof(buf)), 24 + 16);
	CU_ASSERT_EQUAL(rd16(buf, 4), 9);
	CU_ASSERT_EQUAL(memcmp(buf + 24, "ninechars", 9), 0);
	CU_ASSERT_TRUE(all_zero(buf + 33, 7));
}

/* A model as the ONNX loader fills one: 2 inputs, 1 output, 3 batch sizes. */
static void model_two_in_one_out(struct rt_model *m)
{
	memset(m, 0, sizeof(*m));
	m->id = 0x01020304;
	snprintf(m->name, sizeof(m->name), "%s", "classifier"); /* 10 bytes: padded to 16 */
	m->kind = RT_MODEL_ECHO;
	m->flags = 0;
	m->priority_levels = 3;
	m->max_batch_size = 32;
	m->num_batch_sizes = 3;
	m->batch_sizes[0] = 1;
	m->batch_sizes[1] = 8;
	m->batch_sizes[2] = 32;
	m->num_inputs = 2;
	m->num_outputs = 1;
	m->inputs[0] = (struct rt_tensor_spec){.name = "images", .dtype = BW_DTYPE_FLOAT, .rank = 4,
					       .dims = {0, 3, 224, 224}};
	m->inputs[1] = (struct rt_tensor_spec){.name = "scale_factor", .dtype = BW_DTYPE_INT64, .rank = 1,
					       .dims = {0}};
	m->outputs[0] = (struct rt_tensor_spec){.name = "probabilities", .dtype = BW_DTYPE_FLOAT16, .rank = 2,
						.dims = {0, 1000}};
}

/* Checks one descriptor and its name at off; returns the offset after the padded name. */
static size_t check_desc(const uint8_t *buf, size_t off, uint16_t index, const struct rt_tensor_spec *spec)
{
	size_t name_len = strlen(spec->name);

	CU_ASSERT_EQUAL(rd16(buf, off + 0), index);
	CU_ASSERT_EQUAL(buf[off + 2], spec->dtype);
	CU_ASSERT_EQUAL(buf[off + 3], spec->rank);
	CU_ASSERT_EQUAL(rd16(buf, off + 4), name_len);
	CU_ASSERT_EQUAL(rd16(buf, off + 6), 0);  /* reserved */
	CU_ASSERT_EQUAL(rd32(buf, off + 8), 0);  /* data_len: 0 in MODEL_INFO */
	CU_ASSERT_EQUAL(rd32(buf, off + 12), 0); /* reserved2 */
	for (unsigned int d = 0; d < BW_MAX_RANK; d++)
		CU_ASSERT_EQUAL(rd32(buf, off + 16 + 4 * d), d < spec->rank ? spec->dims[d] : 0);
	off += 48;
	CU_ASSERT_EQUAL(memcmp(buf + off, spec->name, name_len), 0);
	CU_ASSERT_TRUE(all_zero(buf + off + name_len, bw_pad8((uint32_t)name_len) - name_len));
	return off + bw_pad8((uint32_t)name_len);
}

static void test_describe_model(void)
{
	struct rt_model m;
	uint8_t buf[INFO_BUF];
	size_t off;
	int len;

	model_two_in_one_out(&m);
	memset(buf, 0xee, sizeof(buf));
	len = rt_model_describe(&m, buf, sizeof(buf));
	/* 24 + name 16 + batch sizes 12 -> 16 + (48 + 8 "images") + (48 + 16 "scale_factor")
	 * + (48 + 16 "probabilities") */
	const int expected = 24 + 16 + 16 + (48 + 8) + (48 + 16) + (48 + 16);
	CU_ASSERT_EQUAL_FATAL(len, expected);

	CU_ASSERT_EQUAL(rd32(buf, 0), 0x01020304);
	CU_ASSERT_EQUAL(rd16(buf, 4), 10);
	CU_ASSERT_EQUAL(rd16(buf, 6), 0);
	CU_ASSERT_EQUAL(rd16(buf, 8), 2);
	CU_ASSERT_EQUAL(rd16(buf, 10), 1);
	CU_ASSERT_EQUAL(rd16(buf, 12), 3);
	CU_ASSERT_EQUAL(rd16(buf, 14), 3);
	CU_ASSERT_EQUAL(rd32(buf, 16), 32);
	CU_ASSERT_EQUAL(rd32(buf, 20), 0);
	off = 24;
	CU_ASSERT_EQUAL(memcmp(buf + off, "classifier", 10), 0);
	CU_ASSERT_TRUE(all_zero(buf + off + 10, 6));
	off += 16;
	CU_ASSERT_EQUAL(rd32(buf, off + 0), 1);
	CU_ASSERT_EQUAL(rd32(buf, off + 4), 8);
	CU_ASSERT_EQUAL(rd32(buf, off + 8), 32);
	CU_ASSERT_TRUE(all_zero(buf + off + 12, 4));
	off += 16;
	off = check_desc(buf, off, 0, &m.inputs[0]);
	off = check_desc(buf, off, 1, &m.inputs[1]);
	off = check_desc(buf, off, 0, &m.outputs[0]); /* outputs are numbered from 0 too */
	CU_ASSERT_EQUAL(off, (size_t)expected);
	CU_ASSERT_EQUAL(buf[expected], 0xee);

	/* The descriptors are a valid tensor body by wire.h's own rules (data_len 0 needs a dim 0). */
	const char *why = NULL;
	CU_ASSERT_EQUAL(bw_body_parse(buf + 56, (uint32_t)(expected - 56), 3, NULL, &why), 0);
}

static void test_describe_caps(void)
{
	struct rt_model models[2];
	uint8_t buf[INFO_BUF];

	CU_ASSERT_EQUAL_FATAL(rt_echo_init(&models[0], RT_ECHO_MODEL_ID, RT_ECHO_MODEL_NAME), 0);
	model_two_in_one_out(&models[1]);
	for (unsigned int k = 0; k < 2; k++) {
		int len = rt_model_describe(&models[k], buf, sizeof(buf));
		unsigned int refused = 0;

		CU_ASSERT_FATAL(len > 0);
		for (uint32_t cap = 0; cap < (uint32_t)len; cap++) {
			uint8_t small[INFO_BUF + 16];

			/* The bytes after cap are a canary: describe must not touch them. */
			memset(small, 0xee, sizeof(small));
			if (rt_model_describe(&models[k], small, cap) == -EMSGSIZE)
				refused++;
			else
				printf("\n  model %u: cap %u of %d not refused ", k, cap, len);
			CU_ASSERT_TRUE(small[cap] == 0xee);
		}
		CU_ASSERT_EQUAL(refused, (unsigned int)len);
		CU_ASSERT_EQUAL(rt_model_describe(&models[k], buf, (uint32_t)len), len);
		CU_ASSERT_EQUAL(rt_model_describe(&models[k], buf, (uint32_t)len + 1), len);
	}
}

/* rt_dtype_name: the wire's names (batchwire/dtype.h), "string" for ONNX's STRING, "unknown" else. */
static void test_dtype_name(void)
{
	CU_ASSERT_STRING_EQUAL(rt_dtype_name(BW_DTYPE_FLOAT), "float");
	CU_ASSERT_STRING_EQUAL(rt_dtype_name(BW_DTYPE_FLOAT16), "float16");
	CU_ASSERT_STRING_EQUAL(rt_dtype_name(BW_DTYPE_BFLOAT16), "bfloat16");
	CU_ASSERT_STRING_EQUAL(rt_dtype_name(BW_DTYPE_UINT64), "uint64");
	CU_ASSERT_STRING_EQUAL(rt_dtype_name(RT_DTYPE_STRING), "string");
	CU_ASSERT_STRING_EQUAL(rt_dtype_name(0), "unknown");
	CU_ASSERT_STRING_EQUAL(rt_dtype_name(14), "unknown"); /* COMPLEX128: not carried */
	CU_ASSERT_STRING_EQUAL(rt_dtype_name(255), "unknown");
	/* the same names (not the same pointers: each translation unit has its own copy of an inline's
	 * string literals unless the compiler merges them, which the sanitizer build does not) */
	for (unsigned int d = 0; d <= UINT8_MAX; d++) {
		if (d != RT_DTYPE_STRING && bw_dtype_name(d) != NULL)
			CU_ASSERT_STRING_EQUAL(rt_dtype_name((uint8_t)d), bw_dtype_name(d));
	}
}

int main(void)
{
	static CU_TestInfo tests[] = {
		{"rt_dtype_name", test_dtype_name},
		{"rt_registry_add", test_registry_add},
		{"rt_registry_add full", test_registry_full},
		{"rt_registry_find by id and name", test_registry_find},
		{"rt_echo_init", test_echo_init},
		{"rt_model_describe echo", test_describe_echo},
		{"rt_model_describe 2 inputs 1 output 3 batch sizes", test_describe_model},
		{"rt_model_describe every short cap", test_describe_caps},
		CU_TEST_INFO_NULL,
	};
	static CU_SuiteInfo suites[] = {
		{.pName = "runtime", .pTests = tests},
		CU_SUITE_INFO_NULL,
	};

	return bw_cunit_run(suites);
}
