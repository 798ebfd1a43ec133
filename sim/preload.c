/* rvxsim: librvxsim_preload.so, loaded by rvxsim-env (LD_PRELOAD) for clients that look past
 * rdma-core at the kernel's files. UCX keeps a device only if /dev/infiniband/<dev_name> is a
 * character device it may open for reading and writing, and it reads some sysfs files by their
 * fixed /sys/class/infiniband/<dev>/ path rather than through ibdev_path. The model has no kernel
 * device, so for the model's device names only:
 *   stat/access of /dev/infiniband/uverbsN answer as /dev/null does (a character device anyone
 *   may open; nothing ever opens it, the model's verbs need no file descriptor);
 *   open of /sys/class/infiniband/mlx5_N/... opens the same file of the model's sysfs view.
 * Every other path goes to the C library untouched. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#define EXPORT __attribute__((visibility("default")))
#define MAX_DEVICES 2

static int model_devnode(const char *path)
{
	static const char pfx[] = "/dev/infiniband/uverbs";
	return path && !strncmp(path, pfx, sizeof(pfx) - 1) && path[sizeof(pfx) - 1] >= '0' &&
	       path[sizeof(pfx) - 1] < '0' + MAX_DEVICES && !path[sizeof(pfx)];
}

/* /sys/class/infiniband/mlx5_N/rest -> <fabric dir>/sys/class/infiniband/mlx5_N/rest */
static const char *model_sysfs(const char *path, char *buf, size_t size)
{
	static const char pfx[] = "/sys/class/infiniband/mlx5_";
	const char *dir = getenv("RVXSIM_FABRIC_DIR");
	char def[64];

	if (!path || strncmp(path, pfx, sizeof(pfx) - 1) || path[sizeof(pfx) - 1] < '0' ||
	    path[sizeof(pfx) - 1] >= '0' + MAX_DEVICES)
		return path;
	if (!dir || !*dir) {
		snprintf(def, sizeof(def), "/dev/shm/rvxsim-%u", (unsigned)getuid());
		dir = def;
	}
	if ((size_t)snprintf(buf, size, "%s%s", dir, path) >= size)
		return path;
	return buf;
}

#define REAL(name) \
	static __typeof__(name) *real_##name; \
	if (!real_##name) \
		real_##name = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)

EXPORT int stat(const char *path, struct stat *st)
{
	REAL(stat);
	return real_stat(model_devnode(path) ? "/dev/null" : path, st);
}

EXPORT int access(const char *path, int mode)
{
	REAL(access);
	return real_access(model_devnode(path) ? "/dev/null" : path, mode);
}

EXPORT int open(const char *path, int flags, ...)
{
	char buf[512];
	mode_t mode = 0;
	REAL(open);
	if (flags & (O_CREAT | O_TMPFILE)) {
		va_list ap;
		va_start(ap, flags);
		mode = va_arg(ap, mode_t);
		va_end(ap);
	}
	return real_open(model_sysfs(path, buf, sizeof(buf)), flags, mode);
}

EXPORT int open64(const char *path, int flags, ...)
{
	char buf[512];
	mode_t mode = 0;
	REAL(open64);
	if (flags & (O_CREAT | O_TMPFILE)) {
		va_list ap;
		va_start(ap, flags);
		mode = va_arg(ap, mode_t);
		va_end(ap);
	}
	return real_open64(model_sysfs(path, buf, sizeof(buf)), flags, mode);
}
