/*
 * core/tensor.c - tensor descriptors: construction, element counts,
 * contiguity and the validation every API entry point runs (tensor.h).
 *
 * Shapes and strides come from applications and plugins, so every product
 * and sum here is checked for int64 overflow before it is formed: a wrapped
 * element count would turn into a short allocation or an out-of-bounds copy.
 */
#include "core/tensor.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"

/* a * b into *out; 0 (and *out untouched) if it does not fit in int64.
 * Both operands are non-negative. */
static int mul_i64(int64_t a, int64_t b, int64_t *out)
{
    if (a != 0 && b > INT64_MAX / a)
        return 0;
    *out = a * b;
    return 1;
}

static int add_i64(int64_t a, int64_t b, int64_t *out)
{
    if (b > INT64_MAX - a)
        return 0;
    *out = a + b;
    return 1;
}

static int tensor_readable(const fmoe_tensor *t)
{
    return t && t->struct_size >= FMOE_TENSOR_SIZE_V1 && t->ndim <= FMOE_MAX_DIMS;
}

static int shape_has_negative(const int64_t *shape, uint32_t ndim)
{
    for (uint32_t i = 0; i < ndim; i++)
        if (shape[i] < 0)
            return 1;
    return 0;
}

/* Product of the sizes; -1 if one is negative or the product overflows.
 * A zero size makes the count 0 whatever the others are, so it is looked
 * for first: [0, 2^40, 2^40] is a valid empty tensor, not an overflow. */
static int64_t shape_numel(const int64_t *shape, uint32_t ndim)
{
    if (shape_has_negative(shape, ndim))
        return -1;
    for (uint32_t i = 0; i < ndim; i++)
        if (shape[i] == 0)
            return 0;
    int64_t n = 1;
    for (uint32_t i = 0; i < ndim; i++)
        if (!mul_i64(n, shape[i], &n))
            return -1;
    return n;
}

/* Row-major strides. A size-0 dimension counts as 1 here (as PyTorch does),
 * so the strides of an empty tensor stay meaningful. 0 on overflow. */
static int strides_contiguous(const int64_t *shape, uint32_t ndim, int64_t *strides)
{
    int64_t step = 1;
    for (uint32_t i = ndim; i > 0; i--) {
        strides[i - 1] = step;
        if (!mul_i64(step, shape[i - 1] > 0 ? shape[i - 1] : 1, &step))
            return 0;
    }
    return 1;
}

/* Offset of the last element, sum of (size - 1) * stride; 0 on overflow.
 * Only meaningful for a tensor with at least one element. */
static int last_offset(const fmoe_tensor *t, int64_t *out)
{
    int64_t off = 0;
    for (uint32_t i = 0; i < t->ndim; i++) {
        int64_t term;
        if (!mul_i64(t->shape[i] - 1, t->strides[i], &term) || !add_i64(off, term, &off))
            return 0;
    }
    *out = off;
    return 1;
}

/* `count` elements of `size` bytes fit in size_t. */
static int bytes_fit(int64_t count, size_t size)
{
    return size == 0 || (uint64_t)count <= SIZE_MAX / size;
}

fmoe_status fmoe_tensor_init(fmoe_tensor *t, fmoe_dtype dtype, uint32_t ndim, const int64_t *shape, void *data)
{
    fmoe_error_clear();
    if (!t)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "fmoe_tensor_init: tensor is NULL");
    memset(t, 0, sizeof *t);
    t->struct_size = sizeof *t;
    if (ndim > FMOE_MAX_DIMS)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                              "fmoe_tensor_init: ndim %" PRIu32 " exceeds FMOE_MAX_DIMS (%d)", ndim, FMOE_MAX_DIMS);
    if (ndim > 0 && !shape)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "fmoe_tensor_init: shape is NULL for ndim %" PRIu32, ndim);
    if (fmoe_dtype_size(dtype) == 0)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "fmoe_tensor_init: %s (%" PRId32 ") is not a storage dtype",
                              fmoe_dtype_name(dtype), dtype);
    char text[FMOE_SHAPE_TEXT_MAX];
    fmoe_shape_format(shape, ndim, text, sizeof text);
    if (shape_has_negative(shape, ndim))
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "fmoe_tensor_init: negative size in shape %s", text);
    int64_t strides[FMOE_MAX_DIMS];
    if (!strides_contiguous(shape, ndim, strides) || !bytes_fit(shape_numel(shape, ndim), fmoe_dtype_size(dtype)))
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "fmoe_tensor_init: shape %s is too large", text);
    /* data may be NULL: a descriptor is often built before its memory is
     * allocated; fmoe_tensor_expect refuses it when it is used. */
    t->dtype = dtype;
    t->device_kind = FMOE_DEVICE_CPU;
    t->ndim = ndim;
    if (ndim > 0) { /* shape may be NULL for a scalar; memcpy must not see it */
        memcpy(t->shape, shape, ndim * sizeof *shape);
        memcpy(t->strides, strides, ndim * sizeof *strides);
    }
    t->data = data;
    return FMOE_STATUS_OK;
}

int64_t fmoe_tensor_numel(const fmoe_tensor *t)
{
    if (!tensor_readable(t))
        return -1;
    return shape_numel(t->shape, t->ndim);
}

int fmoe_tensor_is_contiguous(const fmoe_tensor *t)
{
    int64_t n = fmoe_tensor_numel(t);
    if (n < 0)
        return 0;
    if (n == 0)
        return 1; /* no element is ever addressed */
    int64_t step = 1;
    for (uint32_t i = t->ndim; i > 0; i--) {
        int64_t size = t->shape[i - 1];
        /* The stride of a size-1 dimension never multiplies a non-zero
         * index, so it cannot break density. */
        if (size == 1)
            continue;
        if (t->strides[i - 1] != step)
            return 0;
        step *= size; /* bounded by n, which did not overflow */
    }
    return 1;
}

size_t fmoe_tensor_nbytes(const fmoe_tensor *t)
{
    int64_t n = fmoe_tensor_numel(t);
    if (n <= 0)
        return 0;
    size_t size = fmoe_dtype_size(t->dtype);
    if (!bytes_fit(n, size))
        return 0;
    return (size_t)n * size;
}

void fmoe_shape_format(const int64_t *shape, uint32_t ndim, char *buf, size_t cap)
{
    if (!buf || cap == 0)
        return;
    size_t len = 0;
    buf[0] = '\0';
    len += (size_t)snprintf(buf, cap, "[");
    for (uint32_t i = 0; i < ndim && shape && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%" PRId64, i ? ", " : "", shape[i]);
    if (len < cap)
        snprintf(buf + len, cap - len, "]");
}

/* The expectation as text: "bf16 [4, *]", or "[4, *]" for any dtype; a
 * negative or missing size is written "*". */
static void expectation_format(fmoe_dtype dtype, uint32_t ndim, const int64_t *shape, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    if (dtype != FMOE_DTYPE_INVALID)
        len += (size_t)snprintf(buf, cap, "%s ", fmoe_dtype_name(dtype));
    if (len < cap)
        len += (size_t)snprintf(buf + len, cap - len, "[");
    for (uint32_t i = 0; i < ndim && len < cap; i++) {
        const char *sep = i ? ", " : "";
        if (shape && shape[i] >= 0)
            len += (size_t)snprintf(buf + len, cap - len, "%s%" PRId64, sep, shape[i]);
        else
            len += (size_t)snprintf(buf + len, cap - len, "%s*", sep);
    }
    if (len < cap)
        snprintf(buf + len, cap - len, "]");
}

/* Structure checks, in the order a reader needs them: each one makes the
 * fields used by the next one safe to read. */
static fmoe_status tensor_check_form(const fmoe_tensor *t, const char *what)
{
    if (!t)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "%s: tensor is NULL", what);
    if (t->struct_size < FMOE_TENSOR_SIZE_V1)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                              "%s: struct_size %zu is smaller than %zu (set it to sizeof(fmoe_tensor))", what,
                              t->struct_size, (size_t)FMOE_TENSOR_SIZE_V1);
    if (t->ndim > FMOE_MAX_DIMS)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "%s: ndim %" PRIu32 " exceeds FMOE_MAX_DIMS (%d)", what,
                              t->ndim, FMOE_MAX_DIMS);
    if (fmoe_dtype_size(t->dtype) == 0)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "%s: %s (%" PRId32 ") is not a storage dtype", what,
                              fmoe_dtype_name(t->dtype), t->dtype);
    char shape[FMOE_SHAPE_TEXT_MAX], strides[FMOE_SHAPE_TEXT_MAX];
    fmoe_shape_format(t->shape, t->ndim, shape, sizeof shape);
    fmoe_shape_format(t->strides, t->ndim, strides, sizeof strides);
    if (shape_has_negative(t->shape, t->ndim))
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "%s: negative size in shape %s", what, shape);
    if (shape_has_negative(t->strides, t->ndim))
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "%s: negative stride in strides %s", what, strides);
    int64_t n = shape_numel(t->shape, t->ndim);
    if (n < 0)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "%s: element count of shape %s overflows int64", what,
                              shape);
    if (n == 0)
        return FMOE_STATUS_OK;
    int64_t last;
    if (!last_offset(t, &last) || last == INT64_MAX || !bytes_fit(last + 1, fmoe_dtype_size(t->dtype)))
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                              "%s: shape %s with strides %s spans more memory than can be addressed", what, shape,
                              strides);
    if (!t->data)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "%s: data is NULL for %" PRId64 " elements", what, n);
    return FMOE_STATUS_OK;
}

static int tensor_matches(const fmoe_tensor *t, fmoe_dtype dtype, uint32_t ndim, const int64_t *shape)
{
    if (dtype != FMOE_DTYPE_INVALID && t->dtype != dtype)
        return 0;
    if (t->ndim != ndim)
        return 0;
    for (uint32_t i = 0; shape && i < ndim; i++)
        if (shape[i] >= 0 && t->shape[i] != shape[i])
            return 0;
    return 1;
}

fmoe_status fmoe_tensor_expect(const fmoe_tensor *t, const char *what, fmoe_dtype dtype, uint32_t ndim,
                               const int64_t *shape)
{
    if (!what)
        what = "tensor";
    fmoe_status st = tensor_check_form(t, what);
    if (st != FMOE_STATUS_OK)
        return st;
    if (tensor_matches(t, dtype, ndim, shape))
        return FMOE_STATUS_OK;
    char want[FMOE_SHAPE_TEXT_MAX + 32], got[FMOE_SHAPE_TEXT_MAX];
    /* An expectation of more than FMOE_MAX_DIMS dimensions can never match;
     * print only the part that fits the format buffer. */
    expectation_format(dtype, ndim, shape, want, sizeof want);
    fmoe_shape_format(t->shape, t->ndim, got, sizeof got);
    return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "%s: expected %s, got %s %s", what, want,
                          fmoe_dtype_name(t->dtype), got);
}
