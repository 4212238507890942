/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The ONNX node tests as Debian's libonnx-testdata lays them out (DIR/test_x/model.onnx,
 * DIR/test_x/test_data_set_N/{input,output}_M.pb), read for the programs that run them: the
 * conformance runner and the no-allocation test. The claims table, a model's ops, and the
 * TensorProto files (decoded here, apart from the loader, so that the two check each other).
 */
#ifndef BW_TESTS_TESTDATA_H
#define BW_TESTS_TESTDATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "graph.h"

#define TESTDATA_TENSORS_MAX 64 /* input_N.pb or output_N.pb files of a data set, at the most */

/* ---- files -------------------------------------------------------------------------------------------- */

/** The whole file, malloc'd (one byte more than *len, for a terminator), or NULL. */
uint8_t *testdata_read_file(const char *path, size_t *len);

/** Whether path is a regular file. */
bool testdata_is_file(const char *path);

/**
 * Sorted names of the entries of dir that start with prefix (NULL: any but dot files), in *names
 * (NULL when there are none) to free with testdata_free_list.
 * \return 0, or -errno when dir cannot be opened or memory runs out (then *names NULL, *count 0).
 */
int testdata_list_dir(const char *dir, const char *prefix, char ***names, size_t *count);

void testdata_free_list(char **names, size_t count);

/** Whether name matches one of the fnmatch patterns (count 0: every name does). */
bool testdata_wanted(const char *name, char *const *patterns, int count);

/* ---- the claims table ------------------------------------------------------------------------------ */

/*
 * claims.txt: one op per line ("Add", or "domain.Op" outside the default domain), optionally
 * followed by notes; "!test_name reason" takes one test out of the claims (an attribute or a case the
 * kernel does not claim; the reason is printed with its line); '#' starts a comment.
 */
struct testdata_claims {
	char **ops;
	size_t num_ops;
	char **excluded; /* test names */
	char **excluded_why;
	size_t num_excluded;
};

/** \return 0, or -errno when the file cannot be read or memory runs out (free c all the same). */
int testdata_claims_load(struct testdata_claims *c, const char *path);

bool testdata_claims_has_op(const struct testdata_claims *c, const char *key);

/** The reason test is taken out of the claims, or NULL when it is not. */
const char *testdata_claims_excluded(const struct testdata_claims *c, const char *test);

void testdata_claims_free(struct testdata_claims *c);

/**
 * The ops of a model ("Op", or "domain.Op" outside the default domain), each once, read from the file
 * itself so that a model the loader refuses still counts against its ops.
 * \return the count (*ops_out to free with testdata_free_list), -1 if unreadable.
 */
int testdata_model_ops(const char *model_path, char ***ops_out);

/** Whether the model has ops and every one of them is claimed. */
bool testdata_model_claimed(const struct testdata_claims *c, const char *model_path);

/* ---- TensorProto files ------------------------------------------------------------------------------ */

/**
 * Reads dir/name, a TensorProto, into t (data malloc'd, *nbytes its size).
 * \return 0, or -errno with why naming the file by name only.
 */
int testdata_tensor_read(const char *dir, const char *name, struct rt_tensor *t, size_t *nbytes, char *why,
			 size_t cap);

struct testdata_tensors {
	struct rt_tensor t[TESTDATA_TENSORS_MAX];
	size_t nbytes[TESTDATA_TENSORS_MAX];
	unsigned int count;
};

/** Reads dir/prefix_0.pb, prefix_1.pb... until one is missing. \return 0, or -errno with why. */
int testdata_tensors_read(const char *dir, const char *prefix, struct testdata_tensors *ts, char *why, size_t cap);

void testdata_tensors_free(struct testdata_tensors *ts);

/**
 * numpy has no bfloat16: the ONNX test data store bfloat16 tensors as uint16. Retypes t, read from
 * a file, as bfloat16 where the graph declares (or produces) bfloat16 for it.
 */
void testdata_bfloat16(struct rt_tensor *t, uint8_t declared);

/** testdata_bfloat16 for each of a data set's inputs against the graph's inputs. */
void testdata_bfloat16_inputs(struct testdata_tensors *in, const struct rt_graph *g);

#endif /* BW_TESTS_TESTDATA_H */
