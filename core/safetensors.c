/*
 * core/safetensors.c - the strict safetensors reader (see safetensors.h).
 *
 * Order of checks follows upstream's, so a file upstream rejects is
 * rejected here for the same first reason: header length, header bounds,
 * JSON (jansson validates UTF-8 and, with JSON_REJECT_DUPLICATES, rejects
 * duplicate keys), entries, then the offsets sorted by position, sizes, and
 * finally that the tensors cover the data buffer exactly.
 */
#define _DEFAULT_SOURCE /* MAP_PRIVATE etc. under strict C11 */
#include "core/safetensors.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/error.h"
#include "base/text_file.h"
#include "core/tensor.h"
#include "fusedmoe/fusedmoe.h"

typedef struct st_dtype {
    const char *name;
    uint32_t bits;
    fmoe_dtype fmoe; /* FMOE_DTYPE_INVALID: no fusedmoe type */
} st_dtype;

/* Every dtype of upstream's enum with its bit size. */
static const st_dtype st_dtypes[] = {
    {"BOOL", 8, FMOE_DTYPE_INVALID},
    {"F4", 4, FMOE_DTYPE_FP4_E2M1X2},
    {"F6_E2M3", 6, FMOE_DTYPE_INVALID},
    {"F6_E3M2", 6, FMOE_DTYPE_INVALID},
    {"U8", 8, FMOE_DTYPE_UINT8},
    {"I8", 8, FMOE_DTYPE_INT8},
    {"F8_E5M2", 8, FMOE_DTYPE_FP8_E5M2},
    {"F8_E4M3", 8, FMOE_DTYPE_FP8_E4M3FN},
    {"F8_E8M0", 8, FMOE_DTYPE_UE8M0},
    {"F8_E4M3FNUZ", 8, FMOE_DTYPE_FP8_E4M3FNUZ},
    {"F8_E5M2FNUZ", 8, FMOE_DTYPE_INVALID},
    {"I16", 16, FMOE_DTYPE_INVALID},
    {"U16", 16, FMOE_DTYPE_INVALID},
    {"F16", 16, FMOE_DTYPE_F16},
    {"BF16", 16, FMOE_DTYPE_BF16},
    {"I32", 32, FMOE_DTYPE_INT32},
    {"U32", 32, FMOE_DTYPE_INVALID},
    {"F32", 32, FMOE_DTYPE_F32},
    {"C64", 64, FMOE_DTYPE_INVALID},
    {"F64", 64, FMOE_DTYPE_F64},
    {"I64", 64, FMOE_DTYPE_INT64},
    {"U64", 64, FMOE_DTYPE_INVALID},
};

static const st_dtype *find_dtype(const char *name)
{
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (strcmp(st_dtypes[i].name, name) == 0)
            return &st_dtypes[i];
    return NULL;
}

static fmoe_status bad(const char *file, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static fmoe_status bad(const char *file, const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    return fmoe_error_set(FMOE_STATUS_PARSE_ERROR, "%s: %s", file, text);
}

static uint64_t read_le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* A JSON integer >= 0 into *out. */
static int get_u64(const json_t *v, uint64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return 0;
    *out = (uint64_t)json_integer_value(v);
    return 1;
}

static fmoe_status parse_metadata(fmoe_st_file *f, json_t *meta)
{
    if (!json_is_object(meta))
        return bad(f->path, "__metadata__ must be an object of strings");
    f->meta = calloc(json_object_size(meta) ? json_object_size(meta) : 1, sizeof *f->meta);
    if (!f->meta)
        return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    const char *key;
    json_t *value;
    json_object_foreach(meta, key, value) {
        if (!json_is_string(value))
            return bad(f->path, "__metadata__ value of '%s' is not a string", key);
        fmoe_st_meta *m = &f->meta[f->n_meta];
        m->key = strdup(key);
        m->value = strdup(json_string_value(value));
        f->n_meta++;
        if (!m->key || !m->value)
            return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    return FMOE_STATUS_OK;
}

static fmoe_status parse_entry(fmoe_st_file *f, const char *name, json_t *e, fmoe_st_tensor *t)
{
    if (!name[0])
        return bad(f->path, "a tensor has an empty name");
    size_t name_len = strlen(name);
    if (name_len > FMOE_ST_MAX_NAME)
        return bad(f->path, "tensor '%.64s...': its name has %zu bytes, more than the %u allowed", name, name_len,
                   FMOE_ST_MAX_NAME);
    if (!json_is_object(e))
        return bad(f->path, "tensor '%s': entry is not an object", name);
    const char *key;
    json_t *value;
    json_object_foreach(e, key, value) {
        if (strcmp(key, "dtype") && strcmp(key, "shape") && strcmp(key, "data_offsets"))
            return bad(f->path, "tensor '%s': unknown field '%s' (expected dtype, shape, data_offsets)", name, key);
    }
    json_t *dt = json_object_get(e, "dtype"), *shape = json_object_get(e, "shape"),
           *offs = json_object_get(e, "data_offsets");
    if (!dt || !shape || !offs)
        return bad(f->path, "tensor '%s': missing %s", name, !dt ? "dtype" : !shape ? "shape" : "data_offsets");
    const st_dtype *d = json_is_string(dt) ? find_dtype(json_string_value(dt)) : NULL;
    if (!d)
        return bad(f->path, "tensor '%s': unknown dtype %s", name,
                   json_is_string(dt) ? json_string_value(dt) : "(not a string)");
    if (!json_is_array(shape) || json_array_size(shape) > FMOE_ST_MAX_RANK)
        return bad(f->path, "tensor '%s': shape must be an array of at most %d sizes", name, FMOE_ST_MAX_RANK);
    if (!json_is_array(offs) || json_array_size(offs) != 2 || !get_u64(json_array_get(offs, 0), &t->begin) ||
        !get_u64(json_array_get(offs, 1), &t->end))
        return bad(f->path, "tensor '%s': data_offsets must be [begin, end], two integers >= 0", name);
    t->name = strdup(name);
    if (!t->name)
        return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    snprintf(t->dtype, sizeof t->dtype, "%s", d->name);
    t->bits = d->bits;
    t->ndim = (uint32_t)json_array_size(shape);
    for (uint32_t i = 0; i < t->ndim; i++)
        if (!get_u64(json_array_get(shape, i), &t->shape[i]))
            return bad(f->path, "tensor '%s': shape[%u] is not an integer >= 0", name, i);
    return FMOE_STATUS_OK;
}

static int by_offset(const void *a, const void *b)
{
    const fmoe_st_tensor *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* Byte size of a tensor from dtype and shape; PARSE_ERROR on overflow or a
 * size that is not a whole number of bytes. */
static fmoe_status tensor_bytes(const fmoe_st_file *f, const fmoe_st_tensor *t, uint64_t *bytes)
{
    uint64_t n = 1;
    for (uint32_t i = 0; i < t->ndim; i++) {
        if (t->shape[i] && n > UINT64_MAX / t->shape[i])
            return bad(f->path, "tensor '%s': shape overflows 64 bits", t->name);
        n *= t->shape[i];
    }
    if (n > UINT64_MAX / t->bits)
        return bad(f->path, "tensor '%s': shape overflows 64 bits", t->name);
    uint64_t bits = n * t->bits;
    if (bits % 8)
        return bad(f->path, "tensor '%s': %llu elements of %s are %llu bits, not a whole number of bytes", t->name,
                   (unsigned long long)n, t->dtype, (unsigned long long)bits);
    *bytes = bits / 8;
    return FMOE_STATUS_OK;
}

static int by_name(const void *a, const void *b)
{
    return strcmp((*(const fmoe_st_tensor *const *)a)->name, (*(const fmoe_st_tensor *const *)b)->name);
}

/* The name index fmoe_st_find searches (names are unique: the JSON parser
 * rejects duplicate keys). */
static fmoe_status index_names(fmoe_st_file *f)
{
    f->by_name = malloc((f->n_tensors ? f->n_tensors : 1) * sizeof *f->by_name);
    if (!f->by_name)
        return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < f->n_tensors; i++)
        f->by_name[i] = &f->tensors[i];
    qsort(f->by_name, f->n_tensors, sizeof *f->by_name, by_name);
    return FMOE_STATUS_OK;
}

static fmoe_status check_layout(fmoe_st_file *f, uint64_t data_start)
{
    qsort(f->tensors, f->n_tensors, sizeof *f->tensors, by_offset);
    uint64_t running = 0;
    for (size_t i = 0; i < f->n_tensors; i++) {
        fmoe_st_tensor *t = &f->tensors[i];
        if (t->begin != running || t->end < t->begin)
            return bad(f->path, "tensor '%s': data_offsets [%llu, %llu] %s (expected to start at %llu)", t->name,
                       (unsigned long long)t->begin, (unsigned long long)t->end,
                       t->end < t->begin    ? "end before begin"
                       : t->begin > running ? "leave a hole"
                                            : "overlap",
                       (unsigned long long)running);
        uint64_t want = 0;
        fmoe_status st = tensor_bytes(f, t, &want);
        if (st != FMOE_STATUS_OK)
            return st;
        if (t->end - t->begin != want) {
            char shape[FMOE_SHAPE_TEXT_MAX];
            int64_t s64[FMOE_ST_MAX_RANK];
            for (uint32_t k = 0; k < t->ndim; k++)
                s64[k] = t->shape[k] > INT64_MAX ? -1 : (int64_t)t->shape[k];
            fmoe_shape_format(s64, t->ndim < FMOE_MAX_DIMS ? t->ndim : FMOE_MAX_DIMS, shape, sizeof shape);
            return bad(f->path, "tensor '%s': %s %s%s needs %llu bytes, data_offsets give %llu", t->name, t->dtype,
                       shape, t->ndim > FMOE_MAX_DIMS ? "..." : "", (unsigned long long)want,
                       (unsigned long long)(t->end - t->begin));
        }
        running = t->end;
        t->data = f->bytes + data_start + t->begin;
    }
    if (data_start + running != f->size)
        return bad(f->path, "the data buffer has %llu bytes but the tensors cover %llu (%s)",
                   (unsigned long long)(f->size - data_start), (unsigned long long)running,
                   data_start + running < f->size ? "trailing bytes" : "truncated file");
    return FMOE_STATUS_OK;
}

static fmoe_status parse_header(fmoe_st_file *f, uint64_t n)
{
    const char *text = (const char *)f->bytes + 8;
    if (n == 0 || text[0] != '{')
        return bad(f->path, "the header does not begin with '{'");
    json_error_t jerr;
    json_t *root = json_loadb(text, (size_t)n, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return bad(f->path, "header is not valid JSON: %s (line %d, column %d)", jerr.text, jerr.line, jerr.column);
    fmoe_status st = FMOE_STATUS_OK;
    size_t count = json_object_size(root);
    if (!json_is_object(root))
        st = bad(f->path, "header is not a JSON object");
    else if (count > FMOE_ST_MAX_TENSORS)
        st = bad(f->path, "header lists %zu tensors, more than the %u allowed", count, FMOE_ST_MAX_TENSORS);
    else if (!(f->tensors = calloc(count ? count : 1, sizeof *f->tensors)))
        st = fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    const char *key;
    json_t *value;
    if (st == FMOE_STATUS_OK) {
        json_object_foreach(root, key, value) {
            if (strcmp(key, "__metadata__") == 0)
                st = parse_metadata(f, value);
            else
                st = parse_entry(f, key, value, &f->tensors[f->n_tensors++]);
            if (st != FMOE_STATUS_OK)
                break;
        }
    }
    json_decref(root);
    if (st == FMOE_STATUS_OK)
        st = check_layout(f, 8 + n);
    if (st == FMOE_STATUS_OK)
        st = index_names(f);
    return st;
}

fmoe_status fmoe_st_parse(const void *buf, size_t size, const char *name, fmoe_st_file **out)
{
    fmoe_error_clear();
    *out = NULL;
    fmoe_st_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(name ? name : "<buffer>"))) {
        free(f);
        return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    f->bytes = buf;
    f->size = size;
    fmoe_status st;
    if (size < 8) {
        st = bad(f->path, "%zu bytes: too short for the 8-byte header length", size);
    } else {
        uint64_t n = read_le64(f->bytes);
        if (n > FMOE_ST_MAX_HEADER)
            st = bad(f->path, "header length %llu exceeds the %u-byte limit", (unsigned long long)n,
                     FMOE_ST_MAX_HEADER);
        else if (n > size - 8)
            st = bad(f->path, "header of %llu bytes runs past the end of the file (%zu bytes)", (unsigned long long)n,
                     size);
        else
            st = parse_header(f, n);
    }
    if (st != FMOE_STATUS_OK) {
        fmoe_st_close(f);
        return st;
    }
    *out = f;
    return FMOE_STATUS_OK;
}

fmoe_status fmoe_st_open(const char *path, fmoe_st_file **out)
{
    fmoe_error_clear();
    *out = NULL;
    int fd;
    uint64_t file_size;
    fmoe_status opened = fmoe_open_regular_file(path, "safetensors file", &fd, &file_size);
    if (opened != FMOE_STATUS_OK)
        return opened;
    if (file_size > SIZE_MAX) {
        close(fd);
        return fmoe_error_set(FMOE_STATUS_IO_ERROR, "%s: %llu bytes do not fit the address space", path,
                              (unsigned long long)file_size);
    }
    size_t size = (size_t)file_size;
    void *map = NULL;
    if (size > 0) {
        map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            int e = errno;
            close(fd);
            return fmoe_error_set(FMOE_STATUS_IO_ERROR, "%s: mmap failed: %s", path, strerror(e));
        }
    }
    close(fd); /* the mapping stays valid */
    static const unsigned char empty[1];
    fmoe_status st = fmoe_st_parse(map ? map : empty, size, path, out);
    if (st != FMOE_STATUS_OK) {
        if (map)
            munmap(map, size);
        return st;
    }
    (*out)->mapped = map != NULL;
    return FMOE_STATUS_OK;
}

void fmoe_st_close(fmoe_st_file *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->n_tensors; i++)
        free(f->tensors[i].name);
    for (size_t i = 0; i < f->n_meta; i++) {
        free(f->meta[i].key);
        free(f->meta[i].value);
    }
    if (f->mapped)
        munmap((void *)f->bytes, f->size);
    free(f->tensors);
    free(f->by_name);
    free(f->meta);
    free(f->path);
    free(f);
}

const fmoe_st_tensor *fmoe_st_find(const fmoe_st_file *f, const char *name)
{
    const fmoe_st_tensor key = {.name = (char *)name}, *pkey = &key;
    const fmoe_st_tensor *const *hit = bsearch(&pkey, f->by_name, f->n_tensors, sizeof *f->by_name, by_name);
    return hit ? *hit : NULL;
}

fmoe_status fmoe_st_view(const fmoe_st_file *f, const fmoe_st_tensor *t, fmoe_tensor *out)
{
    fmoe_error_clear();
    const st_dtype *d = find_dtype(t->dtype);
    if (!d || d->fmoe == FMOE_DTYPE_INVALID)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                              "%s: tensor '%s' has dtype %s, which fusedmoe does not read", f->path, t->name, t->dtype);
    if (t->ndim > FMOE_MAX_DIMS)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "%s: tensor '%s' has rank %u, fusedmoe takes at most %d",
                              f->path, t->name, t->ndim, FMOE_MAX_DIMS);
    int64_t shape[FMOE_MAX_DIMS];
    for (uint32_t i = 0; i < t->ndim; i++) {
        if (t->shape[i] > (uint64_t)INT64_MAX)
            return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "%s: tensor '%s' is too large", f->path, t->name);
        shape[i] = (int64_t)t->shape[i];
    }
    if (d->fmoe == FMOE_DTYPE_FP4_E2M1X2) {
        /* Two 4-bit values per byte: the pair is fusedmoe's element. */
        if (t->ndim == 0 || shape[t->ndim - 1] % 2)
            return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                                  "%s: tensor '%s' (F4) needs an even last dimension to pack pairs", f->path, t->name);
        shape[t->ndim - 1] /= 2;
    }
    fmoe_status st = fmoe_tensor_init(out, d->fmoe, t->ndim, shape, (void *)t->data);
    if (st != FMOE_STATUS_OK)
        fmoe_error_prefix("%s: tensor '%s'", f->path, t->name);
    return st;
}
