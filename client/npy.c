/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * NumPy .npy files (numpy/lib/format.py, "NEP 1"): the tensor files bwcli and bwrun read and write,
 * so a user can feed the appliance what numpy.save wrote and check replies with numpy.load.
 *
 * A file is the magic "\x93NUMPY", a major and minor version, the header length (uint16 LE for
 * 1.0, uint32 LE for 2.0 and 3.0), then a Python dict literal padded with spaces and ended by a
 * newline: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }, then the raw data.
 * Only what maps onto a wire tensor is accepted: one numeric dtype, little-endian, C order, rank
 * up to BW_MAX_RANK, dims that fit a uint32_t. Everything else is refused with one line saying why,
 * since a silently misread input produces plausible wrong answers.
 *
 * The writer produces the bytes numpy.save produces for the same array (header padding included),
 * so files round-trip through either side byte for byte.
 */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <batchwire/err.h>

#include "bwclient.h"

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
#define NPY_PREFIX_V1_BYTES 10  /* magic, 2 version bytes, uint16 header length */
#define NPY_PREFIX_V2_BYTES 12  /* the same with a uint32 header length */
#define NPY_ALIGN_BYTES 64      /* numpy pads magic + header to this, so data starts aligned */
#define NPY_GROWTH_DIGITS 21    /* numpy leaves room for axis 0 to grow to this many digits */
#define NPY_HEADER_MAX_BYTES (1u << 20) /* numpy refuses headers past 10 KB by default; be generous */

/* numpy dtype strings (without the byte-order character) and what they are on the wire. */
static const struct {
	const char *code;
	uint8_t dtype;
} g_npy_dtypes[] = {
	{ "f4", BW_DTYPE_FLOAT },  { "f8", BW_DTYPE_DOUBLE },   { "f2", BW_DTYPE_FLOAT16 },
	{ "i8", BW_DTYPE_INT64 },  { "i4", BW_DTYPE_INT32 },    { "i2", BW_DTYPE_INT16 },
	{ "i1", BW_DTYPE_INT8 },   { "u1", BW_DTYPE_UINT8 },    { "u2", BW_DTYPE_UINT16 },
	{ "u4", BW_DTYPE_UINT32 }, { "u8", BW_DTYPE_UINT64 },   { "b1", BW_DTYPE_BOOL },
};

#define NPY_SUPPORTED "<f4 <f8 <f2 <i8 <i4 <i2 |i1 |u1 <u2 <u4 <u8 |b1"

/* One line into err (if any), printf-style; the callers return their own code. */
#define seterr(err, cap, ...) ((void)bw_err((err), (cap), 0, __VA_ARGS__))

/* ---- header parsing --------------------------------------------------------------------------- */

/* A cursor over the header text. */
struct hdr_cursor {
	const char *p, *end;
};

static void skip_ws(struct hdr_cursor *c)
{
	while (c->p < c->end && isspace((unsigned char)*c->p))
		c->p++;
}

static bool accept_char(struct hdr_cursor *c, char ch)
{
	skip_ws(c);
	if (c->p < c->end && *c->p == ch) {
		c->p++;
		return true;
	}
	return false;
}

/* A Python string literal in single or double quotes, without escapes (numpy writes none in the
 * three keys it uses). \return 0, or -EINVAL. */
static int parse_string(struct hdr_cursor *c, char *out, size_t cap)
{
	char quote;
	size_t n = 0;

	skip_ws(c);
	if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
		return -EINVAL;
	quote = *c->p++;
	while (c->p < c->end && *c->p != quote) {
		if (*c->p == '\\' || n + 1 >= cap)
			return -EINVAL;
		out[n++] = *c->p++;
	}
	if (c->p >= c->end)
		return -EINVAL;
	c->p++;
	out[n] = '\0';
	return 0;
}

static bool accept_word(struct hdr_cursor *c, const char *word)
{
	size_t n = strlen(word);

	skip_ws(c);
	if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0)
		return false;
	/* "Truer" is not True. */
	if ((size_t)(c->end - c->p) > n && (isalnum((unsigned char)c->p[n]) || c->p[n] == '_'))
		return false;
	c->p += n;
	return true;
}

/* A tuple of non-negative integers: (), (3,), (2, 3). Python 2 wrote longs as 3L. */
static int parse_shape(struct hdr_cursor *c, struct bwc_npy *t, const char *path, char *err, size_t cap)
{
	unsigned int rank = 0;

	if (!accept_char(c, '(')) {
		seterr(err, cap, "%s: .npy header: 'shape' is not a tuple", path);
		return -EINVAL;
	}
	for (;;) {
		unsigned long long v = 0;
		bool digits = false;

		if (accept_char(c, ')'))
			break;
		skip_ws(c);
		if (c->p < c->end && *c->p == '-') {
			seterr(err, cap, "%s: .npy header: negative dimension in 'shape'", path);
			return -EINVAL;
		}
		while (c->p < c->end && isdigit((unsigned char)*c->p)) {
			v = v * 10 + (unsigned long long)(*c->p - '0');
			if (v > UINT32_MAX) {
				seterr(err, cap, "%s: dimension %u of 'shape' is above %u", path, rank,
				       UINT32_MAX);
				return -EINVAL;
			}
			digits = true;
			c->p++;
		}
		if (!digits) {
			seterr(err, cap, "%s: .npy header: 'shape' holds something other than integers", path);
			return -EINVAL;
		}
		if (c->p < c->end && (*c->p == 'L' || *c->p == 'l'))
			c->p++;
		if (rank == BW_MAX_RANK) {
			seterr(err, cap, "%s: rank above %d is not supported", path, BW_MAX_RANK);
			return -EINVAL;
		}
		t->dims[rank++] = (uint32_t)v;
		if (accept_char(c, ','))
			continue;
		if (accept_char(c, ')'))
			break;
		seterr(err, cap, "%s: .npy header: malformed 'shape' tuple", path);
		return -EINVAL;
	}
	t->rank = (uint8_t)rank;
	return 0;
}

/* descr: a byte-order character and a type code ('<f4', '|u1'). */
static int parse_descr(struct hdr_cursor *c, struct bwc_npy *t, const char *path, char *err, size_t cap)
{
	char descr[32];
	const char *code;
	size_t i;

	skip_ws(c);
	if (c->p < c->end && *c->p == '[') {
		seterr(err, cap, "%s: structured dtypes (record arrays) are not supported", path);
		return -EINVAL;
	}
	if (parse_string(c, descr, sizeof(descr)) != 0) {
		seterr(err, cap, "%s: .npy header: 'descr' is not a dtype string", path);
		return -EINVAL;
	}
	if (descr[0] == '>') {
		seterr(err, cap, "%s: big-endian dtype '%s' is not supported (save it with "
		       "arr.astype(arr.dtype.newbyteorder('<')))", path, descr);
		return -EINVAL;
	}
	if (strchr(descr, 'O') != NULL) {
		seterr(err, cap, "%s: object arrays ('%s': pickled Python objects) are not supported",
		       path, descr);
		return -EINVAL;
	}
	/* '<' little-endian, '|' not applicable (one byte), '=' native: this host is little-endian
	 * (wire.h refuses to build otherwise). */
	code = descr;
	if (*code == '<' || *code == '|' || *code == '=')
		code++;
	for (i = 0; i < sizeof(g_npy_dtypes) / sizeof(g_npy_dtypes[0]); i++) {
		if (strcmp(code, g_npy_dtypes[i].code) == 0) {
			t->dtype = g_npy_dtypes[i].dtype;
			return 0;
		}
	}
	seterr(err, cap, "%s: dtype '%s' is not supported (supported: " NPY_SUPPORTED ")", path, descr);
	return -EINVAL;
}

/* The header dict: exactly the keys descr, fortran_order and shape, as numpy itself requires. */
static int parse_header(const char *text, size_t len, struct bwc_npy *t, const char *path, char *err,
			size_t cap)
{
	struct hdr_cursor c = { text, text + len };
	bool have_descr = false, have_order = false, have_shape = false, fortran = false;
	unsigned int non_unit = 0, d;
	char key[32];
	int rc;

	if (!accept_char(&c, '{')) {
		seterr(err, cap, "%s: .npy header is not a dict", path);
		return -EINVAL;
	}
	for (;;) {
		if (accept_char(&c, '}'))
			break;
		if (parse_string(&c, key, sizeof(key)) != 0 || !accept_char(&c, ':')) {
			seterr(err, cap, "%s: .npy header: malformed dict", path);
			return -EINVAL;
		}
		if (strcmp(key, "descr") == 0 && !have_descr) {
			rc = parse_descr(&c, t, path, err, cap);
			if (rc != 0)
				return rc;
			have_descr = true;
		} else if (strcmp(key, "fortran_order") == 0 && !have_order) {
			if (accept_word(&c, "True")) {
				fortran = true;
			} else if (!accept_word(&c, "False")) {
				seterr(err, cap, "%s: .npy header: 'fortran_order' is neither True nor False",
				       path);
				return -EINVAL;
			}
			have_order = true;
		} else if (strcmp(key, "shape") == 0 && !have_shape) {
			rc = parse_shape(&c, t, path, err, cap);
			if (rc != 0)
				return rc;
			have_shape = true;
		} else {
			seterr(err, cap, "%s: .npy header: unexpected or repeated key '%s'", path, key);
			return -EINVAL;
		}
		if (accept_char(&c, ','))
			continue;
		if (accept_char(&c, '}'))
			break;
		seterr(err, cap, "%s: .npy header: malformed dict", path);
		return -EINVAL;
	}
	skip_ws(&c);
	if (c.p != c.end) {
		seterr(err, cap, "%s: .npy header: text after the dict", path);
		return -EINVAL;
	}
	if (!have_descr || !have_order || !have_shape) {
		seterr(err, cap, "%s: .npy header lacks '%s'", path,
		       !have_descr ? "descr" : !have_order ? "fortran_order" : "shape");
		return -EINVAL;
	}
	/* With at most one dim above 1, Fortran and C order are the same bytes: only refuse what
	 * would be read transposed. */
	for (d = 0; d < t->rank; d++)
		non_unit += t->dims[d] > 1;
	if (fortran && non_unit > 1) {
		seterr(err, cap, "%s: Fortran-order arrays are not supported (save "
		       "numpy.ascontiguousarray(arr))", path);
		return -EINVAL;
	}
	return 0;
}

/* ---- reading ----------------------------------------------------------------------------------- */

int bwc_npy_read(const char *path, struct bwc_npy *t, char *err, size_t cap)
{
	uint8_t prefix[NPY_PREFIX_V2_BYTES];
	size_t prefix_len, elem_size, nbytes = 1;
	uint32_t hlen;
	char *header = NULL;
	struct stat st;
	FILE *f;
	int rc = -EINVAL;
	unsigned int d;

	memset(t, 0, sizeof(*t));
	f = fopen(path, "rb");
	if (f == NULL) {
		rc = -errno;
		seterr(err, cap, "%s: %s", path, strerror(errno));
		return rc;
	}
	if (fstat(fileno(f), &st) != 0) {
		rc = -errno;
		seterr(err, cap, "%s: %s", path, strerror(errno));
		goto out;
	}
	/* The size decides "truncated" before anything is allocated, so it must be a real one. */
	if (!S_ISREG(st.st_mode)) {
		seterr(err, cap, "%s: not a regular file", path);
		goto out;
	}
	if (fread(prefix, 1, NPY_PREFIX_V1_BYTES, f) != NPY_PREFIX_V1_BYTES ||
	    memcmp(prefix, NPY_MAGIC, NPY_MAGIC_LEN) != 0) {
		seterr(err, cap, "%s: not a NumPy .npy file (no \\x93NUMPY magic)", path);
		goto out;
	}
	switch (prefix[6]) {
	case 1:
		hlen = (uint32_t)prefix[8] | (uint32_t)prefix[9] << 8;
		prefix_len = NPY_PREFIX_V1_BYTES;
		break;
	case 2:
	case 3: /* 3.0 only allows UTF-8 in the header; the keys we accept are ASCII either way */
		if (fread(prefix + NPY_PREFIX_V1_BYTES, 1, 2, f) != 2) {
			seterr(err, cap, "%s: truncated .npy header", path);
			goto out;
		}
		hlen = (uint32_t)prefix[8] | (uint32_t)prefix[9] << 8 | (uint32_t)prefix[10] << 16 |
		       (uint32_t)prefix[11] << 24;
		prefix_len = NPY_PREFIX_V2_BYTES;
		break;
	default:
		seterr(err, cap, "%s: .npy format version %u.%u is not supported (1.0, 2.0, 3.0)", path,
		       prefix[6], prefix[7]);
		goto out;
	}
	if (hlen > NPY_HEADER_MAX_BYTES || (uint64_t)st.st_size < prefix_len + (uint64_t)hlen) {
		seterr(err, cap, "%s: truncated or oversized .npy header (%u bytes)", path, hlen);
		goto out;
	}
	header = malloc(hlen + 1u);
	if (header == NULL) {
		rc = -ENOMEM;
		seterr(err, cap, "%s: out of memory", path);
		goto out;
	}
	if (fread(header, 1, hlen, f) != hlen) {
		seterr(err, cap, "%s: truncated .npy header", path);
		goto out;
	}
	header[hlen] = '\0';
	if (memchr(header, '\0', hlen) != NULL) {
		seterr(err, cap, "%s: .npy header holds a NUL byte", path);
		goto out;
	}
	rc = parse_header(header, hlen, t, path, err, cap);
	if (rc != 0)
		goto out;
	rc = -EINVAL;
	elem_size = bw_dtype_size(t->dtype);
	nbytes = elem_size;
	for (d = 0; d < t->rank; d++) {
		if (t->dims[d] != 0 && nbytes > SIZE_MAX / t->dims[d]) {
			seterr(err, cap, "%s: shape too large", path);
			goto out;
		}
		nbytes *= t->dims[d];
	}
	if ((uint64_t)st.st_size - prefix_len - hlen != (uint64_t)nbytes) {
		uint64_t have = (uint64_t)st.st_size - prefix_len - hlen;

		seterr(err, cap, "%s: %s: the header's shape needs %zu data bytes, the file holds %llu",
		       path, have < nbytes ? "truncated data" : "bytes after the data", nbytes,
		       (unsigned long long)have);
		goto out;
	}
	/* malloc(0) may return NULL; an empty tensor still gets a pointer the caller can free. */
	t->data = malloc(nbytes != 0 ? nbytes : 1);
	if (t->data == NULL) {
		rc = -ENOMEM;
		seterr(err, cap, "%s: out of memory for %zu bytes", path, nbytes);
		goto out;
	}
	if (fread(t->data, 1, nbytes, f) != nbytes) {
		rc = ferror(f) ? -EIO : -EINVAL;
		seterr(err, cap, "%s: truncated data (file changed while being read?)", path);
		goto out;
	}
	t->nbytes = nbytes;
	rc = 0;
out:
	if (rc != 0) {
		free(t->data);
		memset(t, 0, sizeof(*t));
	}
	free(header);
	fclose(f);
	return rc;
}

void bwc_npy_free(struct bwc_npy *t)
{
	if (t == NULL)
		return;
	free(t->data);
	memset(t, 0, sizeof(*t));
}

/* ---- writing ----------------------------------------------------------------------------------- */

static const char *npy_descr(uint8_t dtype)
{
	switch (dtype) {
	case BW_DTYPE_FLOAT: return "<f4";
	case BW_DTYPE_DOUBLE: return "<f8";
	case BW_DTYPE_FLOAT16: return "<f2";
	case BW_DTYPE_INT64: return "<i8";
	case BW_DTYPE_INT32: return "<i4";
	case BW_DTYPE_INT16: return "<i2";
	case BW_DTYPE_INT8: return "|i1";
	case BW_DTYPE_UINT8: return "|u1";
	case BW_DTYPE_UINT16: return "<u2";
	case BW_DTYPE_UINT32: return "<u4";
	case BW_DTYPE_UINT64: return "<u8";
	case BW_DTYPE_BOOL: return "|b1";
	default: return NULL; /* bfloat16 has no numpy dtype */
	}
}

/* Header text as numpy's _write_array_header makes it: the dict, room for axis 0 to grow, spaces
 * to the alignment, a newline. \return its length (hdr holds at least 512 bytes). */
static size_t build_header(char *hdr, const char *descr, uint8_t rank, const uint32_t *dims,
			   size_t prefix_len)
{
	size_t n, total;
	unsigned int d;
	char dim0[16];

	n = (size_t)sprintf(hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
	for (d = 0; d < rank; d++)
		n += (size_t)sprintf(hdr + n, "%s%u", d == 0 ? "" : ", ", dims[d]);
	if (rank == 1)
		hdr[n++] = ','; /* Python's one-element tuple */
	n += (size_t)sprintf(hdr + n, "), }");
	if (rank > 0) {
		size_t digits = (size_t)snprintf(dim0, sizeof(dim0), "%u", dims[0]);

		memset(hdr + n, ' ', NPY_GROWTH_DIGITS - digits);
		n += NPY_GROWTH_DIGITS - digits;
	}
	/* numpy pads by ALIGN - (len + 1) % ALIGN, so a full multiple still gets ALIGN spaces. */
	total = NPY_ALIGN_BYTES - (prefix_len + n + 1) % NPY_ALIGN_BYTES;
	memset(hdr + n, ' ', total);
	n += total;
	hdr[n++] = '\n';
	return n;
}

int bwc_npy_write(const char *path, uint8_t dtype, uint8_t rank, const uint32_t *dims, const void *data,
		  char *err, size_t cap)
{
	/* 8 dims of 10 digits and the fixed text stay far below this. */
	char hdr[512];
	uint8_t prefix[NPY_PREFIX_V1_BYTES];
	const char *descr = npy_descr(dtype);
	size_t hlen, nbytes;
	unsigned int d;
	FILE *f;
	int rc = 0;

	if (descr == NULL) {
		seterr(err, cap, "%s: dtype %s has no NumPy equivalent", path,
		       bwc_dtype_name(dtype) != NULL ? bwc_dtype_name(dtype) : "unknown");
		return -EINVAL;
	}
	if (rank > BW_MAX_RANK || (rank > 0 && dims == NULL)) {
		seterr(err, cap, "%s: rank %u is not supported (at most %d)", path, rank, BW_MAX_RANK);
		return -EINVAL;
	}
	nbytes = bw_dtype_size(dtype);
	for (d = 0; d < rank; d++) {
		if (dims[d] != 0 && nbytes > SIZE_MAX / dims[d]) {
			seterr(err, cap, "%s: shape too large", path);
			return -EINVAL;
		}
		nbytes *= dims[d];
	}
	if (nbytes != 0 && data == NULL) {
		seterr(err, cap, "%s: no data", path);
		return -EINVAL;
	}
	hlen = build_header(hdr, descr, rank, dims, NPY_PREFIX_V1_BYTES);
	/* Version 1.0 always suffices: the header is far below its 64 KiB limit. */
	memcpy(prefix, NPY_MAGIC, NPY_MAGIC_LEN);
	prefix[6] = 1;
	prefix[7] = 0;
	prefix[8] = (uint8_t)(hlen & 0xff);
	prefix[9] = (uint8_t)(hlen >> 8);

	f = fopen(path, "wb");
	if (f == NULL) {
		rc = -errno;
		seterr(err, cap, "%s: %s", path, strerror(errno));
		return rc;
	}
	errno = 0;
	if (fwrite(prefix, 1, sizeof(prefix), f) != sizeof(prefix) || fwrite(hdr, 1, hlen, f) != hlen ||
	    (nbytes != 0 && fwrite(data, 1, nbytes, f) != nbytes))
		rc = errno != 0 ? -errno : -EIO;
	if (fclose(f) != 0 && rc == 0)
		rc = errno != 0 ? -errno : -EIO;
	if (rc != 0) {
		seterr(err, cap, "%s: write failed: %s", path, strerror(-rc));
		unlink(path); /* a half-written file would read as truncated later, far from the cause */
	}
	return rc;
}
