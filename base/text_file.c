/* base/text_file.c - files from outside, opened without blocking (text_file.h). */
#include "base/text_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"

/* What a non-regular file is, for "<path>: is a FIFO". */
static const char *kind_of(mode_t mode)
{
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISFIFO(mode))
        return "a FIFO";
    if (S_ISSOCK(mode))
        return "a socket";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    return "not a plain file";
}

static fmoe_status special(const char *path, const char *what, mode_t mode)
{
    return fmoe_error_set(FMOE_STATUS_IO_ERROR, "%s: is %s, not a regular file (expected a %s)", path, kind_of(mode),
                          what);
}

static fmoe_status open_failed(const char *path, int err)
{
    if (err == ENOMEM)
        return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory opening %s", path);
    return fmoe_error_set(err == ENOENT || err == ENOTDIR ? FMOE_STATUS_NOT_FOUND : FMOE_STATUS_IO_ERROR, "%s: %s",
                          path, strerror(err));
}

fmoe_status fmoe_check_not_special(const char *path, const char *what)
{
    struct stat sb;
    if (stat(path, &sb) != 0 || S_ISREG(sb.st_mode))
        return FMOE_STATUS_OK;
    return special(path, what, sb.st_mode);
}

fmoe_status fmoe_open_regular_file(const char *path, const char *what, int *fd, uint64_t *size)
{
    *fd = -1;
    *size = 0;
    /* stat first: a device is refused before it is ever opened. */
    struct stat sb;
    if (stat(path, &sb) != 0)
        return open_failed(path, errno);
    if (!S_ISREG(sb.st_mode))
        return special(path, what, sb.st_mode);
    /* O_NONBLOCK: should the path have become a FIFO since, open returns
     * at once instead of waiting for a writer; O_NOCTTY for a terminal. */
    int f = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (f < 0)
        return open_failed(path, errno);
    if (fstat(f, &sb) != 0) {
        int err = errno;
        close(f);
        return open_failed(path, err);
    }
    if (!S_ISREG(sb.st_mode)) {
        close(f);
        return special(path, what, sb.st_mode);
    }
    int flags = fcntl(f, F_GETFL);
    if (flags < 0 || fcntl(f, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        int err = errno;
        close(f);
        return open_failed(path, err);
    }
    *fd = f;
    *size = sb.st_size > 0 ? (uint64_t)sb.st_size : 0;
    return FMOE_STATUS_OK;
}

static fmoe_status too_large(const char *path, uint64_t bytes, size_t max_bytes, const char *what)
{
    return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "%s: %llu bytes, larger than the %zu-byte limit for a %s", path,
                          (unsigned long long)bytes, max_bytes, what);
}

fmoe_status fmoe_read_text_file(const char *path, size_t max_bytes, const char *what, char **out, size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    int fd;
    uint64_t size;
    fmoe_status st = fmoe_open_regular_file(path, what, &fd, &size);
    if (st != FMOE_STATUS_OK)
        return st;
    if (size > max_bytes) {
        close(fd);
        return too_large(path, size, max_bytes, what);
    }
    /* Room for the size fstat gave, one byte more to notice a file that
     * grows while we read it, and the NUL. (max_bytes is a small constant,
     * so max_bytes + 2 does not wrap.) */
    size_t cap = (size_t)size + 2;
    char *buf = malloc(cap);
    if (!buf) {
        close(fd);
        return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory reading %s", path);
    }
    size_t len = 0;
    for (;;) {
        if (len == cap - 1) {
            if (len > max_bytes) {
                st = too_large(path, len, max_bytes, what);
                break;
            }
            /* The file grew: keep reading, up to the limit plus one. */
            size_t grown_cap = cap <= (max_bytes + 2) / 2 ? 2 * cap : max_bytes + 2;
            char *grown = realloc(buf, grown_cap);
            if (!grown) {
                st = fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory reading %s", path);
                break;
            }
            buf = grown;
            cap = grown_cap;
        }
        ssize_t n = read(fd, buf + len, cap - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            st = fmoe_error_set(FMOE_STATUS_IO_ERROR, "%s: read error: %s", path, strerror(errno));
            break;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    if (st == FMOE_STATUS_OK && len > max_bytes)
        st = too_large(path, len, max_bytes, what);
    if (st != FMOE_STATUS_OK) {
        free(buf);
        return st;
    }
    buf[len] = '\0';
    *out = buf;
    *out_len = len;
    return FMOE_STATUS_OK;
}
