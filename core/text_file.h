/*
 * core/text_file.h - read a small text file (config.json, an index) whole,
 * with the size bound and the messages every reader of such files wants.
 */
#ifndef FMOE_CORE_TEXT_FILE_H
#define FMOE_CORE_TEXT_FILE_H

#include <stddef.h>

#include "fusedmoe/common.h"

/* *buf (malloc'd, NUL-terminated, free it) and *len. NOT_FOUND / IO_ERROR
 * "<path>: <strerror>", INVALID_ARGUMENT "<path>: larger than N MiB; not a
 * <what>" past max_bytes, OUT_OF_MEMORY. */
fmoe_status fmoe_read_text_file(const char *path, size_t max_bytes, const char *what, char **buf, size_t *len);

#endif
