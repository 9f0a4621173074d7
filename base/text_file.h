/*
 * base/text_file.h - files from outside (config.json, an index, a TOML
 * file, a manifest, a shard), opened the one safe way and read whole with
 * an exact size bound.
 *
 * A path a user or a checkpoint names may be a FIFO, a socket, a device or
 * a directory. open(2) on a FIFO blocks until a writer comes, a read from a
 * character device may never end, and opening some devices has side
 * effects. So every reader goes through fmoe_open_regular_file: the type is
 * checked with stat(2) before opening, the file is opened with O_NONBLOCK
 * (which cannot block) and checked again with fstat(2) on the descriptor
 * (the path may have been swapped in between), and only then is O_NONBLOCK
 * cleared for the reads. Anything but a regular file is refused with a
 * message that names the path and what it is ("is a FIFO").
 */
#ifndef FMOE_BASE_TEXT_FILE_H
#define FMOE_BASE_TEXT_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "fusedmoe/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Open `path` read-only (O_CLOEXEC) if it is a regular file: *fd (close
 * it) and its size in *size. `what` names the expected content in
 * messages ("config.json"). NOT_FOUND / IO_ERROR "<path>: <strerror>";
 * IO_ERROR "<path>: is a FIFO, not a regular file (expected a <what>)" for
 * a FIFO, socket, character or block device, directory or anything else. */
fmoe_status fmoe_open_regular_file(const char *path, const char *what, int *fd, uint64_t *size);

/* The check alone, without opening, for callers whose library opens the
 * file itself (dlopen): OK for a regular file or a path that does not
 * exist (the opener reports that), the IO_ERROR above otherwise. */
fmoe_status fmoe_check_not_special(const char *path, const char *what);

/* *buf (malloc'd, NUL-terminated, free it) and *len of a regular file of
 * at most max_bytes bytes: exactly, a file of max_bytes + 1 bytes is
 * INVALID_ARGUMENT "<path>: N bytes, larger than the M-byte limit for a
 * <what>" (also when it grows while being read). Errors of
 * fmoe_open_regular_file, IO_ERROR on a read error, OUT_OF_MEMORY. */
fmoe_status fmoe_read_text_file(const char *path, size_t max_bytes, const char *what, char **buf, size_t *len);

#ifdef __cplusplus
}
#endif

#endif
