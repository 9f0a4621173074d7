/*
 * core/safetensors.h - a strict reader of .safetensors files (mmap'd).
 *
 * The format: an 8-byte little-endian header length N, N bytes of JSON
 * {"name": {"dtype", "shape", "data_offsets": [begin, end]}, ...,
 *  "__metadata__": {string: string}}, then the data buffer, which the
 * tensors must cover exactly (no holes, no overlap, no trailing bytes).
 *
 * We apply every rejection rule of the reference implementation
 * (huggingface/safetensors tensor.rs; spec/testing.md §5.3) and are
 * stricter where it is lax: duplicate keys, unknown entry fields, a header
 * not starting with '{', empty names, names longer than 1024 bytes, rank > 8
 * are errors. Every error names the file and, where there is one, the
 * tensor. Tensor data need not be aligned (the format does not promise it):
 * read it through memcpy, never through a typed pointer.
 */
#ifndef FMOE_CORE_SAFETENSORS_H
#define FMOE_CORE_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "base/limits.h"
#include "fusedmoe/common.h"

/* Limits (base/limits.h): the header size limit is upstream's; the rest are
 * ours. */
#define FMOE_ST_MAX_HEADER  FMOE_LIMIT_ST_HEADER_BYTES
#define FMOE_ST_MAX_RANK    FMOE_LIMIT_ST_RANK
#define FMOE_ST_MAX_TENSORS FMOE_LIMIT_ST_TENSORS
#define FMOE_ST_MAX_NAME    FMOE_LIMIT_NAME_BYTES

typedef struct fmoe_st_tensor {
    char *name;
    char dtype[16]; /* the file's dtype string: "BF16", "F8_E4M3", ... */
    uint32_t bits;  /* bits per element of that dtype */
    uint32_t ndim;
    uint64_t shape[FMOE_ST_MAX_RANK];
    uint64_t begin, end;       /* byte offsets in the data buffer */
    const unsigned char *data; /* start of the bytes (inside the mapping) */
} fmoe_st_tensor;

typedef struct fmoe_st_meta {
    char *key;
    char *value;
} fmoe_st_meta;

typedef struct fmoe_st_file {
    char *path;                 /* as opened, for messages */
    const unsigned char *bytes; /* the whole file */
    size_t size;
    int mapped;              /* 1: bytes is an mmap to unmap on close */
    fmoe_st_tensor *tensors; /* in data-offset order */
    size_t n_tensors;
    const fmoe_st_tensor **by_name; /* the same tensors in name order (fmoe_st_find) */
    fmoe_st_meta *meta;
    size_t n_meta;
} fmoe_st_file;

/* Map and validate a file. NOT_FOUND / IO_ERROR / PARSE_ERROR with text. */
fmoe_status fmoe_st_open(const char *path, fmoe_st_file **out);

/* Validate a buffer the caller keeps alive (fuzzing, tests); `name` is used
 * in messages. The file refers into `buf`. */
fmoe_status fmoe_st_parse(const void *buf, size_t size, const char *name, fmoe_st_file **out);

void fmoe_st_close(fmoe_st_file *f);

/* The tensor called `name`, or NULL (a binary search: O(log n)). */
const fmoe_st_tensor *fmoe_st_find(const fmoe_st_file *f, const char *name);

/* Describe a tensor as an fmoe_tensor over the mapped bytes (host memory,
 * read-only: the loader only copies from it). F4 becomes FP4_E2M1X2 with
 * the last axis halved (it must be even). A dtype fusedmoe has no type for
 * (e.g. C64, U16) is INVALID_ARGUMENT naming it. */
fmoe_status fmoe_st_view(const fmoe_st_file *f, const fmoe_st_tensor *t, fmoe_tensor *out);

#endif
