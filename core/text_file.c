/* core/text_file.c - whole small text files (text_file.h). */
#include "core/text_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

fmoe_status fmoe_read_text_file(const char *path, size_t max_bytes, const char *what, char **out, size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return fmoe_error_set(errno == ENOENT ? FMOE_STATUS_NOT_FOUND : FMOE_STATUS_IO_ERROR, "%s: %s", path,
                              strerror(errno));
    char *buf = NULL;
    size_t len = 0, cap = 0;
    fmoe_status st = FMOE_STATUS_OK;
    for (;;) {
        if (len + 1 >= cap) { /* room for the NUL too */
            if (cap > max_bytes) {
                st = fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "%s: larger than %zu MiB; not a %s", path,
                                    max_bytes >> 20, what);
                break;
            }
            cap = cap ? cap * 2 : 16384;
            char *grown = realloc(buf, cap);
            if (!grown) {
                st = fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory reading %s", path);
                break;
            }
            buf = grown;
        }
        size_t n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
        if (n == 0) {
            if (ferror(f))
                st = fmoe_error_set(FMOE_STATUS_IO_ERROR, "%s: read error", path);
            break;
        }
    }
    fclose(f);
    if (st != FMOE_STATUS_OK) {
        free(buf);
        return st;
    }
    buf[len] = '\0';
    *out = buf;
    *out_len = len;
    return FMOE_STATUS_OK;
}
