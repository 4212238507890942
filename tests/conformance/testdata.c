/* SPDX-License-Identifier: BSD-3-Clause */
/* The ONNX node tests' files, read for the conformance runner and the no-allocation test (testdata.h). */
#include "testdata.h"

#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "onnx.pb-c.h"

/* ---- files --------------------------------------------------------------------------------------- */

uint8_t *testdata_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long size;

	if (f == NULL)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
		buf = malloc((size_t)size + 1);
		if (buf != NULL && fread(buf, 1, (size_t)size, f) != (size_t)size) {
			free(buf);
			buf = NULL;
		}
		*len = (size_t)size;
	}
	fclose(f);
	return buf;
}

bool testdata_is_file(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int testdata_list_dir(const char *dir, const char *prefix, char ***names_out, size_t *count)
{
	DIR *d = opendir(dir);
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	int rc = 0;

	*names_out = NULL;
	*count = 0;
	if (d == NULL)
		return -errno;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.' || (prefix != NULL && strncmp(e->d_name, prefix, strlen(prefix)) != 0))
			continue;
		if (n == cap) {
			char **grown = realloc(names, (cap = cap ? cap * 2 : 64) * sizeof(char *));

			if (grown == NULL) {
				rc = -ENOMEM;
				break;
			}
			names = grown;
		}
		names[n] = strdup(e->d_name);
		if (names[n] == NULL) {
			rc = -ENOMEM;
			break;
		}
		n++;
	}
	closedir(d);
	if (rc != 0) {
		testdata_free_list(names, n);
		return rc;
	}
	if (n > 0)
		qsort(names, n, sizeof(char *), cmp_str);
	*names_out = names;
	*count = n;
	return 0;
}

void testdata_free_list(char **names, size_t count)
{
	for (size_t i = 0; i < count; i++)
		free(names[i]);
	free(names);
}

bool testdata_wanted(const char *name, char *const *patterns, int count)
{
	if (count == 0)
		return true;
	for (int i = 0; i < count; i++) {
		if (fnmatch(patterns[i], name, 0) == 0)
			return true;
	}
	return false;
}

/* ---- the claims table ------------------------------------------------------------------------------ */

/* Sets (*v)[n] to a copy of s, growing *v to n + 1 entries. */
static int push_copy(char ***v, size_t n, const char *s)
{
	char **grown = realloc(*v, (n + 1) * sizeof(char *));

	if (grown == NULL)
		return -ENOMEM;
	*v = grown;
	grown[n] = strdup(s);
	return grown[n] != NULL ? 0 : -ENOMEM;
}

int testdata_claims_load(struct testdata_claims *c, const char *path)
{
	char line[1024];
	FILE *f = fopen(path, "r");
	int rc = 0;

	memset(c, 0, sizeof(*c));
	if (f == NULL)
		return -errno;
	while (rc == 0 && fgets(line, sizeof(line), f) != NULL) {
		char *hash = strchr(line, '#'), *name, *rest, *save = NULL;

		if (hash != NULL)
			*hash = '\0';
		name = strtok_r(line, " \t\r\n", &save);
		if (name == NULL)
			continue;
		rest = strtok_r(NULL, "\r\n", &save);
		while (rest != NULL && (*rest == ' ' || *rest == '\t'))
			rest++;
		if (name[0] == '!') {
			rc = push_copy(&c->excluded, c->num_excluded, name + 1);
			if (rc == 0) {
				rc = push_copy(&c->excluded_why, c->num_excluded,
					       rest != NULL && *rest != '\0' ? rest : "excluded");
				if (rc != 0)
					free(c->excluded[c->num_excluded]);
			}
			c->num_excluded += rc == 0;
		} else {
			rc = push_copy(&c->ops, c->num_ops, name);
			c->num_ops += rc == 0;
		}
	}
	fclose(f);
	return rc;
}

bool testdata_claims_has_op(const struct testdata_claims *c, const char *key)
{
	for (size_t i = 0; i < c->num_ops; i++) {
		if (strcmp(c->ops[i], key) == 0)
			return true;
	}
	return false;
}

const char *testdata_claims_excluded(const struct testdata_claims *c, const char *test)
{
	for (size_t i = 0; i < c->num_excluded; i++) {
		if (strcmp(c->excluded[i], test) == 0)
			return c->excluded_why[i];
	}
	return NULL;
}

void testdata_claims_free(struct testdata_claims *c)
{
	testdata_free_list(c->ops, c->num_ops);
	testdata_free_list(c->excluded, c->num_excluded);
	testdata_free_list(c->excluded_why, c->num_excluded);
	memset(c, 0, sizeof(*c));
}

int testdata_model_ops(const char *model_path, char ***ops_out)
{
	Onnx__ModelProto *m;
	size_t len = 0;
	uint8_t *buf = testdata_read_file(model_path, &len);
	char **ops = NULL;
	int count = 0;

	*ops_out = NULL;
	if (buf == NULL)
		return -1;
	m = onnx__model_proto__unpack(NULL, len, buf);
	free(buf);
	if (m == NULL || m->graph == NULL) {
		if (m != NULL)
			onnx__model_proto__free_unpacked(m, NULL);
		return -1;
	}
	ops = calloc(m->graph->n_node + 1, sizeof(char *));
	for (size_t i = 0; ops != NULL && i < m->graph->n_node; i++) {
		const Onnx__NodeProto *n = m->graph->node[i];
		const char *dom = n->domain != NULL ? n->domain : "", *op = n->op_type != NULL ? n->op_type : "";
		char key[256];
		bool seen = false;

		if (dom[0] == '\0' || strcmp(dom, "ai.onnx") == 0)
			snprintf(key, sizeof(key), "%s", op);
		else
			snprintf(key, sizeof(key), "%s.%s", dom, op);
		for (int j = 0; j < count && !seen; j++)
			seen = strcmp(ops[j], key) == 0;
		if (!seen)
			ops[count++] = strdup(key);
	}
	onnx__model_proto__free_unpacked(m, NULL);
	*ops_out = ops;
	return ops != NULL ? count : -1;
}

bool testdata_model_claimed(const struct testdata_claims *c, const char *model_path)
{
	char **ops;
	int count = testdata_model_ops(model_path, &ops);
	bool claimed = count > 0;

	for (int i = 0; i < count; i++)
		claimed = claimed && ops[i] != NULL && testdata_claims_has_op(c, ops[i]);
	testdata_free_list(ops, count > 0 ? (size_t)count : 0);
	return claimed;
}

/* ---- TensorProto files ------------------------------------------------------------------------------ */

int testdata_tensor_read(const char *dir, const char *name, struct rt_tensor *t, size_t *nbytes, char *why,
			 size_t cap)
{
	Onnx__TensorProto *tp;
	char path[4096];
	size_t len = 0, esize, n = 1;
	uint8_t *buf;
	int rc = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	buf = testdata_read_file(path, &len);

	memset(t, 0, sizeof(*t));
	if (buf == NULL) {
		snprintf(why, cap, "%s: cannot read", name);
		return -EIO;
	}
	tp = onnx__tensor_proto__unpack(NULL, len, buf);
	free(buf);
	if (tp == NULL) {
		snprintf(why, cap, "%s: not a TensorProto (a sequence or map?)", name);
		return -ENOTSUP;
	}
	esize = rt_dtype_size((uint8_t)tp->data_type);
	if (tp->data_type <= 0 || tp->data_type > 255 || esize == 0) {
		snprintf(why, cap, "%s: element type %d (%s) is not supported", name, tp->data_type,
			 rt_dtype_name((uint8_t)tp->data_type));
		rc = -ENOTSUP;
		goto out;
	}
	if (tp->n_dims > RT_MAX_RANK || tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
		snprintf(why, cap, "%s: rank %zu or external data is not supported", name, tp->n_dims);
		rc = -ENOTSUP;
		goto out;
	}
	t->dtype = (uint8_t)tp->data_type;
	t->rank = (uint8_t)tp->n_dims;
	for (size_t d = 0; d < tp->n_dims; d++) {
		if (tp->dims[d] < 0) {
			snprintf(why, cap, "%s: negative dimension", name);
			rc = -EINVAL;
			goto out;
		}
		t->dims[d] = tp->dims[d];
		n *= (size_t)tp->dims[d];
	}
	*nbytes = n * esize;
	t->data = malloc(*nbytes + 1);
	if (t->data == NULL) {
		snprintf(why, cap, "%s: no memory for %zu bytes", name, *nbytes);
		rc = -ENOMEM;
		goto out;
	}
	if (tp->has_raw_data) {
		if (tp->raw_data.len != *nbytes) {
			snprintf(why, cap, "%s: raw_data has %zu bytes, the shape says %zu", name, tp->raw_data.len,
				 *nbytes);
			rc = -EINVAL;
		} else if (*nbytes > 0) {
			memcpy(t->data, tp->raw_data.data, *nbytes); /* little-endian, as the host */
		}
		goto out;
	}
	switch (t->dtype) {
	case BW_DTYPE_FLOAT:
		rc = tp->n_float_data == n ? 0 : -EINVAL;
		if (rc == 0 && n > 0)
			memcpy(t->data, tp->float_data, n * sizeof(float));
		break;
	case BW_DTYPE_DOUBLE:
		rc = tp->n_double_data == n ? 0 : -EINVAL;
		if (rc == 0 && n > 0)
			memcpy(t->data, tp->double_data, n * sizeof(double));
		break;
	case BW_DTYPE_INT64:
		rc = tp->n_int64_data == n ? 0 : -EINVAL;
		if (rc == 0 && n > 0)
			memcpy(t->data, tp->int64_data, n * sizeof(int64_t));
		break;
	case BW_DTYPE_UINT32:
	case BW_DTYPE_UINT64:
		rc = tp->n_uint64_data == n ? 0 : -EINVAL;
		for (size_t i = 0; rc == 0 && i < n; i++) {
			if (t->dtype == BW_DTYPE_UINT32)
				((uint32_t *)t->data)[i] = (uint32_t)tp->uint64_data[i];
			else
				((uint64_t *)t->data)[i] = tp->uint64_data[i];
		}
		break;
	default:
		/* int32, int16, int8, uint16, uint8, bool, float16, bfloat16: int32_data, low bytes */
		rc = tp->n_int32_data == n ? 0 : -EINVAL;
		for (size_t i = 0; rc == 0 && i < n; i++) {
			uint32_t v = (uint32_t)tp->int32_data[i];

			if (esize == 1)
				((uint8_t *)t->data)[i] = (uint8_t)v;
			else if (esize == 2)
				((uint16_t *)t->data)[i] = (uint16_t)v;
			else
				((uint32_t *)t->data)[i] = v;
		}
		break;
	}
	if (rc != 0)
		snprintf(why, cap, "%s: typed data does not match the shape", name);
out:
	onnx__tensor_proto__free_unpacked(tp, NULL);
	if (rc != 0) {
		free(t->data);
		t->data = NULL;
	}
	return rc;
}

int testdata_tensors_read(const char *dir, const char *prefix, struct testdata_tensors *ts, char *why, size_t cap)
{
	char path[4096], name[32];

	ts->count = 0;
	for (unsigned int i = 0; i < TESTDATA_TENSORS_MAX; i++) {
		int rc;

		snprintf(name, sizeof(name), "%s_%u.pb", prefix, i);
		snprintf(path, sizeof(path), "%s/%s", dir, name);
		if (!testdata_is_file(path))
			break;
		rc = testdata_tensor_read(dir, name, &ts->t[i], &ts->nbytes[i], why, cap);
		if (rc != 0)
			return rc;
		ts->count++;
	}
	return 0;
}

void testdata_tensors_free(struct testdata_tensors *ts)
{
	for (unsigned int i = 0; i < ts->count; i++)
		free(ts->t[i].data);
	ts->count = 0;
}

void testdata_bfloat16(struct rt_tensor *t, uint8_t declared)
{
	if (t->dtype == BW_DTYPE_UINT16 && declared == BW_DTYPE_BFLOAT16)
		t->dtype = BW_DTYPE_BFLOAT16;
}

void testdata_bfloat16_inputs(struct testdata_tensors *in, const struct rt_graph *g)
{
	for (unsigned int i = 0; i < in->count && i < g->num_inputs; i++)
		testdata_bfloat16(&in->t[i], g->values[g->inputs[i]].tensor.dtype);
}
