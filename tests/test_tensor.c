/*
 * tests/test_tensor.c - tensor descriptors: fmoe_tensor_init, numel,
 * contiguity, byte sizes, shape text, and every fmoe_tensor_expect failure
 * with its exact message, overflow cases included.
 */
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "core/tensor.h"
#include "fusedmoe/fusedmoe.h"
#include "test_util.h"

#define EXPECT_ERROR(call, status, text) \
    do { \
        ck_assert_int_eq((call), (status)); \
        ck_assert_str_eq(fmoe_last_error(), (text)); \
    } while (0)

static float storage[64];

/* A valid contiguous f32 [4, 8] tensor over `storage`. */
static fmoe_tensor f32_4x8(void)
{
    fmoe_tensor t;
    int64_t shape[2] = {4, 8};
    ck_assert_int_eq(fmoe_tensor_init(&t, FMOE_DTYPE_F32, 2, shape, storage), FMOE_STATUS_OK);
    return t;
}

START_TEST(test_init_fills_descriptor)
{
    fmoe_tensor t;
    memset(&t, 0xAB, sizeof t);
    fmoe_error_set(FMOE_STATUS_INTERNAL, "stale");
    int64_t shape[3] = {2, 3, 4};
    ck_assert_int_eq(fmoe_tensor_init(&t, FMOE_DTYPE_BF16, 3, shape, storage), FMOE_STATUS_OK);
    ck_assert_str_eq(fmoe_last_error(), ""); /* entry points clear the text */
    ck_assert_uint_eq(t.struct_size, sizeof t);
    ck_assert_int_eq(t.dtype, FMOE_DTYPE_BF16);
    ck_assert_int_eq(t.device_kind, FMOE_DEVICE_CPU);
    ck_assert_int_eq(t.device_index, 0);
    ck_assert_uint_eq(t.ndim, 3);
    ck_assert_int_eq(t.shape[0], 2);
    ck_assert_int_eq(t.shape[1], 3);
    ck_assert_int_eq(t.shape[2], 4);
    ck_assert_int_eq(t.shape[3], 0);
    ck_assert_int_eq(t.strides[0], 12);
    ck_assert_int_eq(t.strides[1], 4);
    ck_assert_int_eq(t.strides[2], 1);
    ck_assert_int_eq(t.strides[3], 0);
    ck_assert_ptr_eq(t.data, storage);
    ck_assert_int_eq(fmoe_tensor_numel(&t), 24);
    ck_assert_int_eq(fmoe_tensor_is_contiguous(&t), 1);
    ck_assert_uint_eq(fmoe_tensor_nbytes(&t), 48);
    ck_assert_int_eq(fmoe_tensor_expect(&t, "x", FMOE_DTYPE_BF16, 3, shape), FMOE_STATUS_OK);
}
END_TEST

START_TEST(test_init_scalar_and_empty)
{
    fmoe_tensor t;
    float one = 1.0f;
    ck_assert_int_eq(fmoe_tensor_init(&t, FMOE_DTYPE_F32, 0, NULL, &one), FMOE_STATUS_OK);
    ck_assert_uint_eq(t.ndim, 0);
    ck_assert_int_eq(fmoe_tensor_numel(&t), 1);
    ck_assert_int_eq(fmoe_tensor_is_contiguous(&t), 1);
    ck_assert_uint_eq(fmoe_tensor_nbytes(&t), 4);
    ck_assert_int_eq(fmoe_tensor_expect(&t, "s", FMOE_DTYPE_F32, 0, NULL), FMOE_STATUS_OK);

    /* A zero size counts as 1 in the strides, so they stay meaningful. */
    int64_t shape[3] = {3, 0, 2};
    ck_assert_int_eq(fmoe_tensor_init(&t, FMOE_DTYPE_INT32, 3, shape, NULL), FMOE_STATUS_OK);
    ck_assert_int_eq(t.strides[0], 2);
    ck_assert_int_eq(t.strides[1], 2);
    ck_assert_int_eq(t.strides[2], 1);
    ck_assert_int_eq(fmoe_tensor_numel(&t), 0);
    ck_assert_int_eq(fmoe_tensor_is_contiguous(&t), 1);
    ck_assert_uint_eq(fmoe_tensor_nbytes(&t), 0);
    /* Empty tensors may have NULL data. */
    ck_assert_int_eq(fmoe_tensor_expect(&t, "e", FMOE_DTYPE_INT32, 3, shape), FMOE_STATUS_OK);

    /* A descriptor may be built before its memory exists. */
    int64_t rows[1] = {5};
    ck_assert_int_eq(fmoe_tensor_init(&t, FMOE_DTYPE_UINT8, 1, rows, NULL), FMOE_STATUS_OK);
    ck_assert_int_eq(fmoe_tensor_numel(&t), 5);
}
END_TEST

START_TEST(test_init_errors)
{
    fmoe_tensor t;
    int64_t shape[5] = {4, 8, 1, 1, 1};
    EXPECT_ERROR(fmoe_tensor_init(NULL, FMOE_DTYPE_F32, 2, shape, storage), FMOE_STATUS_INVALID_ARGUMENT,
                 "fmoe_tensor_init: tensor is NULL");
    EXPECT_ERROR(fmoe_tensor_init(&t, FMOE_DTYPE_F32, 5, shape, storage), FMOE_STATUS_INVALID_ARGUMENT,
                 "fmoe_tensor_init: ndim 5 exceeds FMOE_MAX_DIMS (4)");
    /* A failed init still leaves a defined, empty descriptor behind. */
    ck_assert_uint_eq(t.struct_size, sizeof t);
    ck_assert_uint_eq(t.ndim, 0);
    ck_assert_ptr_null(t.data);
    EXPECT_ERROR(fmoe_tensor_init(&t, FMOE_DTYPE_F32, 2, NULL, storage), FMOE_STATUS_INVALID_ARGUMENT,
                 "fmoe_tensor_init: shape is NULL for ndim 2");
    EXPECT_ERROR(fmoe_tensor_init(&t, FMOE_DTYPE_INVALID, 2, shape, storage), FMOE_STATUS_INVALID_ARGUMENT,
                 "fmoe_tensor_init: unknown (0) is not a storage dtype");
    EXPECT_ERROR(fmoe_tensor_init(&t, FMOE_DTYPE_INT4, 2, shape, storage), FMOE_STATUS_INVALID_ARGUMENT,
                 "fmoe_tensor_init: int4 (14) is not a storage dtype");
    EXPECT_ERROR(fmoe_tensor_init(&t, 99, 2, shape, storage), FMOE_STATUS_INVALID_ARGUMENT,
                 "fmoe_tensor_init: unknown (99) is not a storage dtype");
    int64_t negative[2] = {4, -3};
    EXPECT_ERROR(fmoe_tensor_init(&t, FMOE_DTYPE_F32, 2, negative, storage), FMOE_STATUS_INVALID_ARGUMENT,
                 "fmoe_tensor_init: negative size in shape [4, -3]");
    /* 2^32 x 2^32 elements overflow int64. */
    int64_t huge[2] = {INT64_C(1) << 32, INT64_C(1) << 32};
    EXPECT_ERROR(fmoe_tensor_init(&t, FMOE_DTYPE_F32, 2, huge, storage), FMOE_STATUS_INVALID_ARGUMENT,
                 "fmoe_tensor_init: shape [4294967296, 4294967296] is too large");
    /* 2^62 f64 elements fit in int64 but their bytes do not fit in size_t. */
    int64_t wide[1] = {INT64_C(1) << 62};
    EXPECT_ERROR(fmoe_tensor_init(&t, FMOE_DTYPE_F64, 1, wide, storage), FMOE_STATUS_INVALID_ARGUMENT,
                 "fmoe_tensor_init: shape [4611686018427387904] is too large");
    /* Empty, but the strides of the leading dimension would overflow. */
    int64_t empty_huge[3] = {0, INT64_C(1) << 40, INT64_C(1) << 40};
    EXPECT_ERROR(fmoe_tensor_init(&t, FMOE_DTYPE_F32, 3, empty_huge, NULL), FMOE_STATUS_INVALID_ARGUMENT,
                 "fmoe_tensor_init: shape [0, 1099511627776, 1099511627776] is too large");
}
END_TEST

START_TEST(test_numel)
{
    fmoe_tensor t = f32_4x8();
    ck_assert_int_eq(fmoe_tensor_numel(&t), 32);
    ck_assert_int_eq(fmoe_tensor_numel(NULL), -1);
    fmoe_tensor bad = t;
    bad.struct_size = 8;
    ck_assert_int_eq(fmoe_tensor_numel(&bad), -1);
    bad = t;
    bad.ndim = FMOE_MAX_DIMS + 1;
    ck_assert_int_eq(fmoe_tensor_numel(&bad), -1);
    bad = t;
    bad.shape[1] = -1;
    ck_assert_int_eq(fmoe_tensor_numel(&bad), -1);
    /* Overflow is reported, never wrapped. */
    bad = t;
    bad.ndim = 3;
    bad.shape[0] = bad.shape[1] = bad.shape[2] = INT64_C(1) << 21;
    ck_assert_int_eq(fmoe_tensor_numel(&bad), -1);
    bad.shape[2] = (INT64_C(1) << 21) - 1; /* 2^42 * (2^21 - 1) < 2^63 */
    ck_assert_int_eq(fmoe_tensor_numel(&bad), (INT64_C(1) << 42) * ((INT64_C(1) << 21) - 1));
    bad.ndim = 2;
    bad.shape[0] = INT64_MAX;
    bad.shape[1] = 1;
    ck_assert_int_eq(fmoe_tensor_numel(&bad), INT64_MAX);
    bad.shape[1] = 2;
    ck_assert_int_eq(fmoe_tensor_numel(&bad), -1);
    /* A zero size wins over sizes whose product would overflow. */
    bad.ndim = 3;
    bad.shape[0] = 0;
    bad.shape[1] = bad.shape[2] = INT64_C(1) << 40;
    ck_assert_int_eq(fmoe_tensor_numel(&bad), 0);
}
END_TEST

START_TEST(test_contiguity)
{
    fmoe_tensor t = f32_4x8();
    ck_assert_int_eq(fmoe_tensor_is_contiguous(&t), 1);
    fmoe_tensor v = t;
    v.strides[0] = 1; /* transposed view */
    v.strides[1] = 4;
    ck_assert_int_eq(fmoe_tensor_is_contiguous(&v), 0);
    v = t;
    v.strides[0] = 16; /* padded rows */
    ck_assert_int_eq(fmoe_tensor_is_contiguous(&v), 0);
    v = t;
    v.strides[1] = 2; /* every other column */
    ck_assert_int_eq(fmoe_tensor_is_contiguous(&v), 0);
    v = t;
    v.strides[0] = 0; /* broadcast rows */
    ck_assert_int_eq(fmoe_tensor_is_contiguous(&v), 0);
    /* A size-1 dimension's stride is never used. */
    v = t;
    v.ndim = 3;
    v.shape[0] = 4, v.shape[1] = 1, v.shape[2] = 8;
    v.strides[0] = 8, v.strides[1] = 999, v.strides[2] = 1;
    ck_assert_int_eq(fmoe_tensor_is_contiguous(&v), 1);
    v.shape[2] = 1, v.strides[2] = 7, v.strides[0] = 1;
    ck_assert_int_eq(fmoe_tensor_is_contiguous(&v), 1);
    /* No element is addressed in an empty tensor. */
    v = t;
    v.shape[0] = 0;
    v.strides[0] = 5, v.strides[1] = 3;
    ck_assert_int_eq(fmoe_tensor_is_contiguous(&v), 1);
    /* Malformed descriptors are never contiguous. */
    ck_assert_int_eq(fmoe_tensor_is_contiguous(NULL), 0);
    v = t;
    v.struct_size = 0;
    ck_assert_int_eq(fmoe_tensor_is_contiguous(&v), 0);
    v = t;
    v.shape[0] = -4;
    ck_assert_int_eq(fmoe_tensor_is_contiguous(&v), 0);
}
END_TEST

START_TEST(test_nbytes)
{
    fmoe_tensor t = f32_4x8();
    ck_assert_uint_eq(fmoe_tensor_nbytes(&t), 128);
    t.dtype = FMOE_DTYPE_FP4_E2M1X2; /* one element is a byte holding a pair */
    ck_assert_uint_eq(fmoe_tensor_nbytes(&t), 32);
    t.dtype = FMOE_DTYPE_INT64;
    ck_assert_uint_eq(fmoe_tensor_nbytes(&t), 256);
    t.dtype = FMOE_DTYPE_INT4; /* a value type has no storage size */
    ck_assert_uint_eq(fmoe_tensor_nbytes(&t), 0);
    t.dtype = FMOE_DTYPE_F64;
    t.ndim = 1;
    t.shape[0] = INT64_C(1) << 62; /* 2^65 bytes */
    ck_assert_uint_eq(fmoe_tensor_nbytes(&t), 0);
    t.shape[0] = INT64_C(1) << 40;
    ck_assert_uint_eq(fmoe_tensor_nbytes(&t), (size_t)1 << 43);
    ck_assert_uint_eq(fmoe_tensor_nbytes(NULL), 0);
}
END_TEST

START_TEST(test_shape_format)
{
    char buf[FMOE_SHAPE_TEXT_MAX];
    int64_t shape[4] = {4, 8, -3, 0};
    fmoe_shape_format(shape, 2, buf, sizeof buf);
    ck_assert_str_eq(buf, "[4, 8]");
    fmoe_shape_format(shape, 4, buf, sizeof buf);
    ck_assert_str_eq(buf, "[4, 8, -3, 0]");
    fmoe_shape_format(shape, 0, buf, sizeof buf);
    ck_assert_str_eq(buf, "[]");
    fmoe_shape_format(NULL, 0, buf, sizeof buf);
    ck_assert_str_eq(buf, "[]");
    int64_t extreme[4] = {INT64_MIN, INT64_MIN, INT64_MIN, INT64_MIN};
    fmoe_shape_format(extreme, 4, buf, sizeof buf);
    ck_assert_str_eq(buf, "[-9223372036854775808, -9223372036854775808, -9223372036854775808, "
                          "-9223372036854775808]");
    /* Truncated, always terminated. */
    fmoe_shape_format(shape, 2, buf, 4);
    ck_assert_str_eq(buf, "[4,");
    fmoe_shape_format(shape, 2, buf, 1);
    ck_assert_str_eq(buf, "");
    buf[0] = 'z';
    fmoe_shape_format(shape, 2, buf, 0);
    ck_assert_int_eq(buf[0], 'z');
}
END_TEST

START_TEST(test_expect_malformed)
{
    fmoe_tensor t = f32_4x8();
    int64_t shape[2] = {4, 8};
    char want[256];
    EXPECT_ERROR(fmoe_tensor_expect(NULL, "x", FMOE_DTYPE_F32, 2, shape), FMOE_STATUS_INVALID_ARGUMENT,
                 "x: tensor is NULL");
    EXPECT_ERROR(fmoe_tensor_expect(NULL, NULL, FMOE_DTYPE_F32, 2, shape), FMOE_STATUS_INVALID_ARGUMENT,
                 "tensor: tensor is NULL");

    fmoe_tensor v = t;
    v.struct_size = 8;
    snprintf(want, sizeof want, "x: struct_size 8 is smaller than %zu (set it to sizeof(fmoe_tensor))",
             (size_t)FMOE_TENSOR_SIZE_V1);
    EXPECT_ERROR(fmoe_tensor_expect(&v, "x", FMOE_DTYPE_F32, 2, shape), FMOE_STATUS_INVALID_ARGUMENT, want);

    v = t;
    v.ndim = 5;
    EXPECT_ERROR(fmoe_tensor_expect(&v, "x", FMOE_DTYPE_F32, 2, shape), FMOE_STATUS_INVALID_ARGUMENT,
                 "x: ndim 5 exceeds FMOE_MAX_DIMS (4)");

    v = t;
    v.dtype = FMOE_DTYPE_INVALID;
    EXPECT_ERROR(fmoe_tensor_expect(&v, "x", FMOE_DTYPE_INVALID, 2, shape), FMOE_STATUS_INVALID_ARGUMENT,
                 "x: unknown (0) is not a storage dtype");
    v.dtype = FMOE_DTYPE_INT4;
    EXPECT_ERROR(fmoe_tensor_expect(&v, "x", FMOE_DTYPE_INVALID, 2, shape), FMOE_STATUS_INVALID_ARGUMENT,
                 "x: int4 (14) is not a storage dtype");
    v.dtype = 1234;
    EXPECT_ERROR(fmoe_tensor_expect(&v, "x", FMOE_DTYPE_INVALID, 2, shape), FMOE_STATUS_INVALID_ARGUMENT,
                 "x: unknown (1234) is not a storage dtype");

    v = t;
    v.shape[1] = -3;
    EXPECT_ERROR(fmoe_tensor_expect(&v, "x", FMOE_DTYPE_F32, 2, shape), FMOE_STATUS_INVALID_ARGUMENT,
                 "x: negative size in shape [4, -3]");

    v = t;
    v.strides[0] = -8;
    EXPECT_ERROR(fmoe_tensor_expect(&v, "x", FMOE_DTYPE_F32, 2, shape), FMOE_STATUS_INVALID_ARGUMENT,
                 "x: negative stride in strides [-8, 1]");

    v = t;
    v.data = NULL;
    EXPECT_ERROR(fmoe_tensor_expect(&v, "x", FMOE_DTYPE_F32, 2, shape), FMOE_STATUS_INVALID_ARGUMENT,
                 "x: data is NULL for 32 elements");
}
END_TEST

START_TEST(test_expect_overflow)
{
    fmoe_tensor t = f32_4x8();
    fmoe_tensor v = t;
    v.shape[0] = v.shape[1] = INT64_C(1) << 32;
    EXPECT_ERROR(fmoe_tensor_expect(&v, "x", FMOE_DTYPE_INVALID, 2, NULL), FMOE_STATUS_INVALID_ARGUMENT,
                 "x: element count of shape [4294967296, 4294967296] overflows int64");

    /* Few elements, but the strides reach past int64. */
    v = t;
    v.shape[0] = v.shape[1] = 2;
    v.strides[0] = INT64_MAX;
    EXPECT_ERROR(fmoe_tensor_expect(&v, "x", FMOE_DTYPE_INVALID, 2, NULL), FMOE_STATUS_INVALID_ARGUMENT,
                 "x: shape [2, 2] with strides [9223372036854775807, 1] spans more memory than can be addressed");
    /* The last offset is exactly INT64_MAX: the element count beyond it is not. */
    v.strides[0] = INT64_MAX - 1;
    EXPECT_ERROR(fmoe_tensor_expect(&v, "x", FMOE_DTYPE_INVALID, 2, NULL), FMOE_STATUS_INVALID_ARGUMENT,
                 "x: shape [2, 2] with strides [9223372036854775806, 1] spans more memory than can be addressed");
    v.dtype = FMOE_DTYPE_UINT8;
    v.strides[0] = INT64_MAX - 2; /* last offset INT64_MAX - 1: fits as bytes */
    ck_assert_int_eq(fmoe_tensor_expect(&v, "x", FMOE_DTYPE_INVALID, 2, NULL), FMOE_STATUS_OK);

    /* Fits in int64 elements, not in size_t bytes. */
    v = t;
    v.ndim = 1;
    v.shape[0] = INT64_C(1) << 62;
    v.strides[0] = 1;
    EXPECT_ERROR(fmoe_tensor_expect(&v, "x", FMOE_DTYPE_F32, 1, NULL), FMOE_STATUS_INVALID_ARGUMENT,
                 "x: shape [4611686018427387904] with strides [1] spans more memory than can be addressed");

    /* Empty with huge sizes and strides: nothing is addressed, so it is fine. */
    v = t;
    v.ndim = 3;
    v.shape[0] = 0;
    v.shape[1] = v.shape[2] = INT64_C(1) << 40;
    v.strides[0] = v.strides[1] = INT64_MAX;
    v.strides[2] = 1;
    v.data = NULL;
    ck_assert_int_eq(fmoe_tensor_expect(&v, "x", FMOE_DTYPE_F32, 3, NULL), FMOE_STATUS_OK);
}
END_TEST

START_TEST(test_expect_mismatch)
{
    fmoe_tensor t = f32_4x8();
    int64_t want[3] = {4, 8, 1};
    int64_t rows_any[2] = {-1, 8};
    int64_t other[2] = {4, 9};
    EXPECT_ERROR(fmoe_tensor_expect(&t, "x", FMOE_DTYPE_BF16, 2, want), FMOE_STATUS_INVALID_ARGUMENT,
                 "x: expected bf16 [4, 8], got f32 [4, 8]");
    EXPECT_ERROR(fmoe_tensor_expect(&t, "x", FMOE_DTYPE_F32, 2, other), FMOE_STATUS_INVALID_ARGUMENT,
                 "x: expected f32 [4, 9], got f32 [4, 8]");
    EXPECT_ERROR(fmoe_tensor_expect(&t, "x", FMOE_DTYPE_F32, 3, want), FMOE_STATUS_INVALID_ARGUMENT,
                 "x: expected f32 [4, 8, 1], got f32 [4, 8]");
    EXPECT_ERROR(fmoe_tensor_expect(&t, "w13_weight", FMOE_DTYPE_BF16, 2, other), FMOE_STATUS_INVALID_ARGUMENT,
                 "w13_weight: expected bf16 [4, 9], got f32 [4, 8]");
    /* Wildcards: any dtype, any size, any shape of the given rank. */
    EXPECT_ERROR(fmoe_tensor_expect(&t, "x", FMOE_DTYPE_INVALID, 2, other), FMOE_STATUS_INVALID_ARGUMENT,
                 "x: expected [4, 9], got f32 [4, 8]");
    int64_t cols9[2] = {-1, 9};
    EXPECT_ERROR(fmoe_tensor_expect(&t, "x", FMOE_DTYPE_INVALID, 2, cols9), FMOE_STATUS_INVALID_ARGUMENT,
                 "x: expected [*, 9], got f32 [4, 8]");
    EXPECT_ERROR(fmoe_tensor_expect(&t, "x", FMOE_DTYPE_F32, 1, NULL), FMOE_STATUS_INVALID_ARGUMENT,
                 "x: expected f32 [*], got f32 [4, 8]");
    ck_assert_int_eq(fmoe_tensor_expect(&t, "x", FMOE_DTYPE_INVALID, 2, rows_any), FMOE_STATUS_OK);
    ck_assert_int_eq(fmoe_tensor_expect(&t, "x", FMOE_DTYPE_F32, 2, rows_any), FMOE_STATUS_OK);
    ck_assert_int_eq(fmoe_tensor_expect(&t, "x", FMOE_DTYPE_F32, 2, NULL), FMOE_STATUS_OK);
    ck_assert_int_eq(fmoe_tensor_expect(&t, "x", FMOE_DTYPE_INVALID, 2, NULL), FMOE_STATUS_OK);

    /* A strided view is well-formed; layout is the caller's business. */
    fmoe_tensor v = t;
    v.strides[0] = 1;
    v.strides[1] = 4;
    ck_assert_int_eq(fmoe_tensor_expect(&v, "x", FMOE_DTYPE_F32, 2, NULL), FMOE_STATUS_OK);
}
END_TEST

/* Random shapes: init, numel and nbytes agree with a wide-integer model. */
START_TEST(test_random_shapes)
{
    fmoe_rng rng = fmoe_rng_for(1);
    int accepted = 0, rejected = 0;
    for (int iter = 0; iter < 20000; iter++) {
        uint32_t ndim = (uint32_t)(fmoe_rng_u64(&rng) % (FMOE_MAX_DIMS + 1));
        int64_t shape[FMOE_MAX_DIMS];
        for (uint32_t i = 0; i < ndim; i++) {
            /* Mostly small sizes, sometimes up to 2^40 so products overflow. */
            unsigned bits = (unsigned)(fmoe_rng_u64(&rng) % 41);
            shape[i] = (int64_t)(fmoe_rng_u64(&rng) & ((UINT64_C(1) << bits) - 1));
        }
        fmoe_dtype dtype = (fmoe_dtype)(1 + fmoe_rng_u64(&rng) % 13); /* F32 .. UE8M0 */
        size_t size = fmoe_dtype_size(dtype);
        /* Model: product of max(size, 1) in long double, exact enough to tell
         * a fit from an overflow with a wide margin around the limits. */
        long double strides_prod = 1, numel = 1;
        for (uint32_t i = 0; i < ndim; i++) {
            strides_prod *= shape[i] > 0 ? (long double)shape[i] : 1.0L;
            numel *= (long double)shape[i];
        }
        int fits = strides_prod <= (long double)INT64_MAX && numel * (long double)size <= (long double)SIZE_MAX;
        fmoe_tensor t;
        fmoe_status st = fmoe_tensor_init(&t, dtype, ndim, shape, storage);
        if (!fits) {
            ck_assert_int_eq(st, FMOE_STATUS_INVALID_ARGUMENT);
            rejected++;
            continue;
        }
        ck_assert_int_eq(st, FMOE_STATUS_OK);
        accepted++;
        ck_assert_int_eq(fmoe_tensor_numel(&t), (int64_t)numel);
        ck_assert_uint_eq(fmoe_tensor_nbytes(&t), (size_t)numel * size);
        ck_assert_int_eq(fmoe_tensor_is_contiguous(&t), 1);
        /* Only tensors small enough for `storage` may pass the data check. */
        if (numel * size <= sizeof storage || numel == 0)
            ck_assert_int_eq(fmoe_tensor_expect(&t, "r", dtype, ndim, shape), FMOE_STATUS_OK);
    }
    /* Both outcomes were exercised. */
    ck_assert_int_gt(accepted, 1000);
    ck_assert_int_gt(rejected, 100);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("tensor");
    TCase *tc = tcase_create("tensor");
    tcase_add_test(tc, test_init_fills_descriptor);
    tcase_add_test(tc, test_init_scalar_and_empty);
    tcase_add_test(tc, test_init_errors);
    tcase_add_test(tc, test_numel);
    tcase_add_test(tc, test_contiguity);
    tcase_add_test(tc, test_nbytes);
    tcase_add_test(tc, test_shape_format);
    tcase_add_test(tc, test_expect_malformed);
    tcase_add_test(tc, test_expect_overflow);
    tcase_add_test(tc, test_expect_mismatch);
    tcase_add_test(tc, test_random_shapes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 11);
}
