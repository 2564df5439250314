/* Types of libsluice's C ABI (see docs/python.md). The functions are
 * declared in the header that go build -buildmode=c-shared writes next to
 * the library. */
#ifndef SLUICE_H
#define SLUICE_H
#include <stdint.h>

/* A file's attributes in Linux form. */
typedef struct {
	int64_t size;
	int64_t atime_ns, mtime_ns, ctime_ns;
	uint64_t ino;
	uint32_t mode; /* st_mode: type and permission bits */
	uint32_t nlink, uid, gid;
} sluice_stat_t;

#endif
