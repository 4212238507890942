/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * TensorProto -> rt_tensor: dims, element type and data from raw_data, the typed fields, or an
 * external file confined to the model's directory; TypeProto -> declared dtype and shape. Sizes are
 * checked against what dims and type need before anything is allocated, so a hostile file cannot ask
 * for more memory than it carries.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx_defs.h"

static bool dtype_known(int32_t dtype)
{
	return dtype > 0 && dtype <= UINT8_MAX && (rt_dtype_size((uint8_t)dtype) != 0 || dtype == RT_DTYPE_STRING);
}

static const char *dtype_label(int32_t dtype, char *buf, size_t cap)
{
	if (dtype_known(dtype))
		return rt_dtype_name((uint8_t)dtype);
	snprintf(buf, cap, "%" PRId32, dtype);
	return buf;
}

int onnx_type_read(struct onnx_ctx *c, const Onnx__TypeProto *tp, const char *what, struct rt_tensor *t)
{
	const Onnx__TypeProto__Tensor *tt;
	const Onnx__TensorShapeProto *shape;
	char label[16];

	if (tp == NULL || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || tp->tensor_type == NULL)
		return 0;
	tt = tp->tensor_type;
	if (!tt->has_elem_type || tt->elem_type == 0)
		return 0;
	if (!dtype_known(tt->elem_type))
		return onnx_fail(c, "%s: element type %s is not supported", what,
				 dtype_label(tt->elem_type, label, sizeof(label)));
	shape = tt->shape;
	if (shape == NULL)
		return 0;
	if (shape->n_dim > RT_MAX_RANK)
		return onnx_fail(c, "%s: rank %zu is above the supported %d", what, shape->n_dim, RT_MAX_RANK);
	memset(t, 0, sizeof(*t));
	for (size_t d = 0; d < shape->n_dim; d++) {
		const Onnx__TensorShapeProto__Dimension *dim = shape->dim[d];

		if (dim->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
			t->dims[d] = RT_DIM_SYMBOLIC; /* dim_param or unknown: the batch dimension */
			continue;
		}
		if (dim->dim_value < 0)
			return onnx_fail(c, "%s: dim %zu is negative (%" PRId64 ")", what, d, dim->dim_value);
		t->dims[d] = dim->dim_value;
	}
	t->dtype = (uint8_t)tt->elem_type;
	t->rank = (uint8_t)shape->n_dim;
	return 1;
}

/* ---- external data ------------------------------------------------------------------------------- */

static int parse_count(struct onnx_ctx *c, const char *what, const char *key, const char *s, uint64_t *out)
{
	uint64_t v = 0;

	if (*s == '\0')
		return onnx_fail(c, "%s: external data %s is empty", what, key);
	for (; *s != '\0'; s++) {
		if (*s < '0' || *s > '9' || __builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, *s - '0', &v))
			return onnx_fail(c, "%s: external data %s is not a byte count", what, key);
	}
	*out = v;
	return 0;
}

static bool has_dotdot(const char *path)
{
	for (const char *p = path; *p != '\0';) {
		size_t n = strcspn(p, "/");

		if (n == 2 && p[0] == '.' && p[1] == '.')
			return true;
		p += n;
		p += *p == '/';
	}
	return false;
}

/* Resolves location inside the model's directory: no absolute path, no "..", no symlink out of it. */
static int resolve_location(struct onnx_ctx *c, const char *what, const char *location, char **out)
{
	char *joined, *real;
	size_t dl;

	if (c->dir == NULL)
		return onnx_fail(c, "%s: external data " Q " needs the model's directory (loaded from memory)", what,
				 location);
	if (location[0] == '/')
		return onnx_fail(c, "%s: external data path " Q " is absolute, not relative to the model", what, location);
	if (has_dotdot(location))
		return onnx_fail(c, "%s: external data path " Q " leaves the model's directory", what, location);
	if (c->dir_real == NULL) {
		c->dir_real = realpath(c->dir, NULL);
		if (c->dir_real == NULL)
			return onnx_fail(c, "%s: model directory " Q ": %s", what, c->dir, strerror(errno));
	}
	if (asprintf(&joined, "%s/%s", c->dir_real, location) < 0)
		return onnx_fail_errno(c, -ENOMEM, "model: out of memory");
	real = realpath(joined, NULL);
	free(joined);
	if (real == NULL)
		return onnx_fail(c, "%s: external data file " Q ": %s", what, location,
				 errno == ENOENT ? "not found" : strerror(errno));
	dl = strlen(c->dir_real);
	if (strncmp(real, c->dir_real, dl) != 0 || (real[dl] != '/' && strcmp(c->dir_real, "/") != 0)) {
		free(real);
		return onnx_fail(c, "%s: external data path " Q " resolves outside the model's directory", what,
				 location);
	}
	*out = real;
	return 0;
}

static int read_external(struct onnx_ctx *c, const Onnx__TensorProto *tp, const char *what, size_t bytes,
			 void **out)
{
	const char *location = NULL;
	uint64_t offset = 0, length = 0;
	bool has_length = false;
	char *path = NULL;
	uint8_t *data = NULL;
	struct stat st;
	size_t done = 0;
	int fd, rc;

	for (size_t i = 0; i < tp->n_external_data; i++) {
		const char *key = onnx_str(tp->external_data[i]->key);
		const char *value = onnx_str(tp->external_data[i]->value);

		rc = 0;
		if (strcmp(key, "location") == 0)
			location = value;
		else if (strcmp(key, "offset") == 0)
			rc = parse_count(c, what, key, value, &offset);
		else if (strcmp(key, "length") == 0) {
			rc = parse_count(c, what, key, value, &length);
			has_length = true;
		} /* "checksum" and keys from later versions: not needed to read the bytes */
		if (rc != 0)
			return rc;
	}
	if (location == NULL || location[0] == '\0')
		return onnx_fail(c, "%s: external data without a location", what);
	if (has_length && length != bytes)
		return onnx_fail(c, "%s: external data length is %" PRIu64 " bytes, dims and type need %zu", what, length,
				 bytes);
	rc = resolve_location(c, what, location, &path);
	if (rc != 0)
		return rc;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW); /* path has no links left: none may appear */
	free(path);
	if (fd < 0)
		return onnx_fail(c, "%s: external data file " Q ": %s", what, location, strerror(errno));
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		rc = onnx_fail(c, "%s: external data " Q " is not a regular file", what, location);
		goto out;
	}
	if (offset > (uint64_t)st.st_size || bytes > (uint64_t)st.st_size - offset) {
		rc = onnx_fail(c, "%s: external data " Q ": offset %" PRIu64 " + %zu bytes runs past its end (%lld bytes)",
			       what, location, offset, bytes, (long long)st.st_size);
		goto out;
	}
	if (!has_length && (uint64_t)st.st_size - offset != bytes) {
		rc = onnx_fail(c, "%s: external data " Q " holds %" PRIu64 " bytes from offset %" PRIu64
			       ", dims and type need %zu", what, location, (uint64_t)st.st_size - offset, offset, bytes);
		goto out;
	}
	data = malloc(bytes + 1);
	if (data == NULL) {
		rc = onnx_fail_errno(c, -ENOMEM, "%s: out of memory for %zu bytes", what, bytes);
		goto out;
	}
	while (done < bytes) {
		ssize_t n = pread(fd, data + done, bytes - done, (off_t)(offset + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = onnx_fail(c, "%s: reading external data " Q ": %s", what, location,
				       n < 0 ? strerror(errno) : "file shrank");
			goto out;
		}
		done += (size_t)n;
	}
	*out = data;
	data = NULL;
	rc = 0;
out:
	free(data);
	close(fd);
	return rc;
}

/* ---- typed fields -------------------------------------------------------------------------------- */

/* Types stored in int32_data (ONNX packs the small ones there) and the values each may hold. */
static bool int32_packed(int32_t dtype, int64_t *lo, int64_t *hi)
{
	switch (dtype) {
	case BW_DTYPE_INT32: *lo = INT32_MIN; *hi = INT32_MAX; return true;
	case BW_DTYPE_INT8: *lo = INT8_MIN; *hi = INT8_MAX; return true;
	case BW_DTYPE_UINT8: *lo = 0; *hi = UINT8_MAX; return true;
	case BW_DTYPE_INT16: *lo = INT16_MIN; *hi = INT16_MAX; return true;
	case BW_DTYPE_UINT16: *lo = 0; *hi = UINT16_MAX; return true;
	case BW_DTYPE_BOOL: *lo = 0; *hi = 1; return true;
	/* the 16 bits of a half, written as uint16 by ONNX's helpers, as int16 by some exporters */
	case BW_DTYPE_FLOAT16:
	case BW_DTYPE_BFLOAT16: *lo = INT16_MIN; *hi = UINT16_MAX; return true;
	default: return false;
	}
}

static int decode_typed(struct onnx_ctx *c, const Onnx__TensorProto *tp, const char *what, int32_t dtype,
			uint64_t elems, size_t bytes, void **out)
{
	size_t total = tp->n_float_data + tp->n_int32_data + tp->n_string_data + tp->n_int64_data +
		       tp->n_double_data + tp->n_uint64_data;
	const char *field;
	size_t count;
	int64_t lo = 0, hi = 0;
	uint8_t *data;

	if (dtype == BW_DTYPE_FLOAT) {
		field = "float_data";
		count = tp->n_float_data;
	} else if (int32_packed(dtype, &lo, &hi)) {
		field = "int32_data";
		count = tp->n_int32_data;
	} else if (dtype == BW_DTYPE_INT64) {
		field = "int64_data";
		count = tp->n_int64_data;
	} else if (dtype == BW_DTYPE_DOUBLE) {
		field = "double_data";
		count = tp->n_double_data;
	} else if (dtype == BW_DTYPE_UINT32 || dtype == BW_DTYPE_UINT64) {
		field = "uint64_data";
		count = tp->n_uint64_data;
	} else {
		return onnx_fail(c, "%s: type %s has no typed field; it needs raw_data", what,
				 rt_dtype_name((uint8_t)dtype));
	}
	if (total != count)
		return onnx_fail(c, "%s: data in a field other than %s, which type %s uses", what, field,
				 rt_dtype_name((uint8_t)dtype));
	if (count != elems)
		return onnx_fail(c, "%s: %s holds %zu elements, dims need %" PRIu64 "%s", what, field, count, elems,
				 count == 0 ? " (and there is no raw_data)" : "");

	data = malloc(bytes + 1);
	if (data == NULL)
		return onnx_fail_errno(c, -ENOMEM, "%s: out of memory for %zu bytes", what, bytes);
	if (count == 0) { /* an empty tensor: the field's array may be NULL */
		*out = data;
		return 0;
	}
	switch (dtype) {
	case BW_DTYPE_FLOAT:
		memcpy(data, tp->float_data, bytes);
		break;
	case BW_DTYPE_INT64:
		memcpy(data, tp->int64_data, bytes);
		break;
	case BW_DTYPE_DOUBLE:
		memcpy(data, tp->double_data, bytes);
		break;
	case BW_DTYPE_UINT64:
		memcpy(data, tp->uint64_data, bytes);
		break;
	case BW_DTYPE_UINT32:
		for (size_t i = 0; i < count; i++) {
			if (tp->uint64_data[i] > UINT32_MAX) {
				free(data);
				return onnx_fail(c, "%s: uint64_data[%zu] = %" PRIu64 " is out of range for uint32", what, i,
						 tp->uint64_data[i]);
			}
			((uint32_t *)data)[i] = (uint32_t)tp->uint64_data[i];
		}
		break;
	default: /* int32_data */
		for (size_t i = 0; i < count; i++) {
			int32_t v = tp->int32_data[i];

			if (v < lo || v > hi) {
				free(data);
				return onnx_fail(c, "%s: int32_data[%zu] = %" PRId32 " is out of range for %s", what, i, v,
						 rt_dtype_name((uint8_t)dtype));
			}
			switch (rt_dtype_size((uint8_t)dtype)) {
			case 1: data[i] = (uint8_t)v; break;
			case 2: ((uint16_t *)data)[i] = (uint16_t)v; break;
			default: ((int32_t *)data)[i] = v; break;
			}
		}
		break;
	}
	*out = data;
	return 0;
}

/* raw_data and external files are little-endian */
static void le_to_host(void *data, uint64_t elems, size_t esize)
{
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	uint8_t *p = data;

	for (uint64_t i = 0; i < elems; i++, p += esize) {
		for (size_t a = 0, b = esize - 1; a < b; a++, b--) {
			uint8_t t = p[a];
			p[a] = p[b];
			p[b] = t;
		}
	}
#else
	(void)data;
	(void)elems;
	(void)esize;
#endif
}

int onnx_tensor_decode(struct onnx_ctx *c, const Onnx__TensorProto *tp, const char *what, struct rt_tensor *t,
		       size_t *nbytes)
{
	int32_t dtype = tp->has_data_type ? tp->data_type : 0;
	bool external = tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
	size_t typed = tp->n_float_data + tp->n_int32_data + tp->n_string_data + tp->n_int64_data +
		       tp->n_double_data + tp->n_uint64_data;
	uint64_t elems = 1;
	size_t esize, bytes;
	void *data = NULL;
	char label[16];
	int rc;

	if (dtype == 0)
		return onnx_fail(c, "%s: no data_type", what);
	if (!dtype_known(dtype))
		return onnx_fail(c, "%s: element type %s is not supported", what, dtype_label(dtype, label, sizeof(label)));
	if (tp->n_dims > RT_MAX_RANK)
		return onnx_fail(c, "%s: rank %zu is above the supported %d", what, tp->n_dims, RT_MAX_RANK);
	if (tp->segment != NULL)
		return onnx_fail(c, "%s: segmented tensors are not supported", what);
	for (size_t d = 0; d < tp->n_dims; d++) {
		if (tp->dims[d] < 0)
			return onnx_fail(c, "%s: dim %zu is negative (%" PRId64 ")", what, d, tp->dims[d]);
		if (__builtin_mul_overflow(elems, (uint64_t)tp->dims[d], &elems) || elems > INT64_MAX)
			return onnx_fail(c, "%s: dims overflow (dim %zu = %" PRId64 ")", what, d, tp->dims[d]);
	}
	memset(t, 0, sizeof(*t));
	t->dtype = (uint8_t)dtype;
	t->rank = (uint8_t)tp->n_dims;
	for (size_t d = 0; d < tp->n_dims; d++)
		t->dims[d] = tp->dims[d];
	*nbytes = 0;

	if (dtype == RT_DTYPE_STRING) {
		/* kept for its shape; no kernel computes strings */
		if (external || tp->has_raw_data || typed != tp->n_string_data)
			return onnx_fail(c, "%s: a string tensor keeps its data in string_data", what);
		return 0;
	}
	esize = rt_dtype_size((uint8_t)dtype);
	if (elems > SIZE_MAX / esize)
		return onnx_fail(c, "%s: dims overflow (%" PRIu64 " elements of %zu bytes)", what, elems, esize);
	bytes = (size_t)elems * esize;

	if (external) {
		if (tp->has_raw_data || typed > 0)
			return onnx_fail(c, "%s: data both external and in the model", what);
		rc = read_external(c, tp, what, bytes, &data);
	} else if (tp->has_raw_data) {
		if (typed > 0)
			return onnx_fail(c, "%s: both raw_data and typed data", what);
		if (tp->raw_data.len != bytes)
			return onnx_fail(c, "%s: raw_data holds %zu bytes, dims and type need %zu", what, tp->raw_data.len,
					 bytes);
		data = malloc(bytes + 1);
		if (data == NULL)
			return onnx_fail_errno(c, -ENOMEM, "%s: out of memory for %zu bytes", what, bytes);
		if (bytes > 0)
			memcpy(data, tp->raw_data.data, bytes);
		rc = 0;
	} else {
		rc = decode_typed(c, tp, what, dtype, elems, bytes, &data); /* protobuf-c gave host order */
		if (rc != 0)
			return rc;
		t->data = data;
		*nbytes = bytes;
		return 0;
	}
	if (rc != 0)
		return rc;
	le_to_host(data, elems, esize);
	t->data = data;
	*nbytes = bytes;
	return 0;
}
