/*
 * cli/st_write.h - write a small safetensors file (`run --output`): the
 * tensors given, in order, with an 8-aligned header, as the format's
 * reference writer does, so other engines (and our own strict reader) read
 * it back.
 */
#ifndef FMOE_CLI_ST_WRITE_H
#define FMOE_CLI_ST_WRITE_H

#include <stddef.h>

#include "fusedmoe/fusedmoe.h"

typedef struct st_out_tensor {
    const char *name;
    const fmoe_tensor *tensor; /* host, contiguous; F32/BF16/F16/INT32 */
} st_out_tensor;

/* Returns 0, or -1 with the reason printed (cli_error). */
int st_write_file(const char *path, const st_out_tensor *tensors, size_t n);

#endif
