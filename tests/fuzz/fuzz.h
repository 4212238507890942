/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the fuzz targets of tests/fuzz share: CHECK, which aborts (so that libFuzzer keeps the input)
 * when what must hold does not, and, for code under test that reads a path, a file rewritten for
 * every input in a directory private to the process, removed at exit. The directory is made under
 * $TMPDIR, else /dev/shm (tmpfs: a file on ext4 rewritten thousands of times a second is written
 * back each time, and the target waits on the disk), else /tmp.
 */
#ifndef BW_FUZZ_H
#define BW_FUZZ_H

#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHECK(cond)                                                                                        \
	do {                                                                                               \
		if (!(cond)) {                                                                             \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);           \
			abort();                                                                           \
		}                                                                                          \
	} while (0)

static inline char *fuzz_dir(void)
{
	static char dir[PATH_MAX];

	return dir;
}

static inline char *fuzz_path(void)
{
	static char path[PATH_MAX];

	return path;
}

static inline void fuzz_file_remove(void)
{
	unlink(fuzz_path());
	rmdir(fuzz_dir());
}

/** Makes BASE/bwfuzz-STEM-XXXXXX and \return the path of the file name in it; exits on failure. */
static inline char *fuzz_file_make(const char *stem, const char *name)
{
	const char *base = getenv("TMPDIR");
	struct stat st;

	if (base == NULL || base[0] == '\0')
		base = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK) == 0 ? "/dev/shm"
													     : "/tmp";
	if ((size_t)snprintf(fuzz_dir(), PATH_MAX, "%s/bwfuzz-%s-XXXXXX", base, stem) >= PATH_MAX ||
	    mkdtemp(fuzz_dir()) == NULL ||
	    (size_t)snprintf(fuzz_path(), PATH_MAX, "%s/%s", fuzz_dir(), name) >= PATH_MAX) {
		perror("fuzz: a private directory");
		exit(1);
	}
	atexit(fuzz_file_remove);
	return fuzz_path();
}

/** Replaces the file with size bytes of data. */
static inline void fuzz_file_write(const uint8_t *data, size_t size)
{
	int fd = open(fuzz_path(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	size_t done = 0;

	CHECK(fd >= 0);
	while (done < size) {
		ssize_t n = write(fd, data + done, size - done);

		CHECK(n > 0);
		done += (size_t)n;
	}
	CHECK(close(fd) == 0);
}

#endif /* BW_FUZZ_H */
