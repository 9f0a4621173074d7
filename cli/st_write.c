/* cli/st_write.c - a minimal safetensors writer (st_write.h). */
#include "cli/st_write.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static const char *st_dtype(fmoe_dtype d)
{
    switch (d) {
    case FMOE_DTYPE_F32:
        return "F32";
    case FMOE_DTYPE_BF16:
        return "BF16";
    case FMOE_DTYPE_F16:
        return "F16";
    case FMOE_DTYPE_INT32:
        return "I32";
    default:
        return NULL;
    }
}

static size_t nbytes(const fmoe_tensor *t)
{
    return (size_t)fmoe_tensor_numel(t) * fmoe_dtype_size(t->dtype);
}

int st_write_file(const char *path, const st_out_tensor *tensors, size_t n)
{
    json_t *header = json_object();
    size_t offset = 0;
    for (size_t i = 0; header && i < n; i++) {
        const fmoe_tensor *t = tensors[i].tensor;
        json_t *shape = json_array(), *offs = json_array(), *e = json_object();
        for (uint32_t a = 0; a < t->ndim; a++)
            json_array_append_new(shape, json_integer(t->shape[a]));
        json_array_append_new(offs, json_integer((json_int_t)offset));
        offset += nbytes(t);
        json_array_append_new(offs, json_integer((json_int_t)offset));
        json_object_set_new(e, "dtype", json_string(st_dtype(t->dtype)));
        json_object_set_new(e, "shape", shape);
        json_object_set_new(e, "data_offsets", offs);
        json_object_set_new(header, tensors[i].name, e);
    }
    char *text = header ? json_dumps(header, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(header);
    if (!text) {
        cli_error("--output %s: out of memory", path);
        return -1;
    }
    size_t len = strlen(text), padded = (len + 7) / 8 * 8;
    FILE *f = fopen(path, "wb");
    int ok = f != NULL;
    unsigned char le[8];
    for (int b = 0; b < 8; b++)
        le[b] = (unsigned char)((uint64_t)padded >> (8 * b));
    if (ok)
        ok = fwrite(le, 1, 8, f) == 8 && fwrite(text, 1, len, f) == len;
    for (size_t p = len; ok && p < padded; p++)
        ok = fputc(' ', f) != EOF;
    for (size_t i = 0; ok && i < n; i++)
        ok = fwrite(tensors[i].tensor->data, 1, nbytes(tensors[i].tensor), f) == nbytes(tensors[i].tensor);
    int err = errno;
    if (f && fclose(f) != 0 && ok) {
        ok = 0;
        err = errno;
    }
    free(text);
    if (!ok) {
        cli_error("--output %s: %s", path, strerror(err));
        return -1;
    }
    return 0;
}
