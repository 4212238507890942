/* SPDX-License-Identifier: BSD-3-Clause */
/* Files the platform leaves behind (platform.h). */
#include <dirent.h>
#include <string.h>
#include <unistd.h>

#include "platform.h"

void plat_runtime_dir_remove(const char *path)
{
	DIR *dir;
	struct dirent *e;

	if (path == NULL || path[0] == '\0' || (dir = opendir(path)) == NULL)
		return;
	while ((e = readdir(dir)) != NULL)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			unlinkat(dirfd(dir), e->d_name, 0);
	closedir(dir);
	rmdir(path);
}
