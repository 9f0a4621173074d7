/*
 * core/tensor.h - internal checks on fmoe_tensor descriptors (the public
 * fmoe_tensor_init / _numel / _is_contiguous are in fusedmoe.h).
 *
 * Every tensor that enters the library through the API is checked with
 * fmoe_tensor_expect before anything reads its fields or its memory, so the
 * rest of the core may assume well-formed descriptors.
 */
#ifndef FMOE_CORE_TENSOR_H
#define FMOE_CORE_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "fusedmoe/fusedmoe.h"

/* Bytes of fmoe_tensor that the core reads (everything up to and including
 * `data`). A caller's struct_size must be at least this. */
#define FMOE_TENSOR_SIZE_V1 (offsetof(fmoe_tensor, data) + sizeof(void *))

/* Longest text fmoe_shape_format writes for FMOE_MAX_DIMS dimensions,
 * including the NUL: "[" + 4 x 20 digits/sign + 3 x ", " + "]". */
#define FMOE_SHAPE_TEXT_MAX 96

/* OK if `t` is well-formed and matches the expectation, else INVALID_ARGUMENT
 * with a message that starts with "<what>: ".
 *
 * Well-formed: non-NULL; struct_size >= FMOE_TENSOR_SIZE_V1; ndim <=
 * FMOE_MAX_DIMS; a storage dtype (known, with a non-zero element size, so
 * INT4 is refused); every size and stride >= 0; the element count and the
 * largest element offset fit in int64 and the byte extent in size_t; data
 * non-NULL when there is at least one element.
 *
 * Matches: `dtype` (FMOE_DTYPE_INVALID = any dtype), `ndim`, and `shape`
 * (entries < 0 = any size; shape NULL = any shape of that ndim).
 *
 * Messages, for example:
 *   "x: expected bf16 [4, 8], got f32 [4, 9]"
 *   "x: expected [*, 8], got f32 [4, 9]"      (any dtype, any rows)
 *   "x: data is NULL for 32 elements"
 * `what` NULL is written as "tensor". */
fmoe_status fmoe_tensor_expect(const fmoe_tensor *t, const char *what, fmoe_dtype dtype, uint32_t ndim,
                               const int64_t *shape);

/* Write "[4, 8]" ("[]" for ndim 0) into buf, truncated to cap - 1
 * characters and always NUL-terminated when cap > 0. Sizes are printed as
 * given, negative ones included. */
void fmoe_shape_format(const int64_t *shape, uint32_t ndim, char *buf, size_t cap);

/* Byte size of a contiguous tensor: numel x element size. 0 for a malformed
 * descriptor, a value-only dtype and on overflow - and also for an empty
 * tensor, so tell those apart with fmoe_tensor_numel (-1 when malformed). */
size_t fmoe_tensor_nbytes(const fmoe_tensor *t);

#endif
