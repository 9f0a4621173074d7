/*
 * tests/safetensors/test_safetensors.c - the safetensors reader: a valid
 * file read back field by field, every rejection rule of spec/testing.md
 * §5.3 (upstream's test vectors) and our stricter ones, each with its exact
 * message, and the view as an fmoe_tensor.
 */
#include <stdio.h>
#include <string.h>

#include "core/safetensors.h"
#include "fusedmoe/fusedmoe.h"
#include "tests/test_util.h"

/* A file image: 8-byte length, header, data. */
typedef struct image {
    unsigned char bytes[4096];
    size_t size;
} image;

static void build(image *im, const char *header, const void *data, size_t data_len)
{
    uint64_t n = strlen(header);
    for (int i = 0; i < 8; i++)
        im->bytes[i] = (unsigned char)(n >> (8 * i));
    memcpy(im->bytes + 8, header, n);
    if (data_len) /* memcpy from NULL is undefined even for 0 bytes */
        memcpy(im->bytes + 8 + n, data, data_len);
    im->size = 8 + n + data_len;
}

/* Parse and expect a PARSE_ERROR with exactly `want` (prefixed by "t.st: "). */
static void rejects(const image *im, const char *want)
{
    fmoe_st_file *f = NULL;
    ck_assert_int_eq(fmoe_st_parse(im->bytes, im->size, "t.st", &f), FMOE_STATUS_PARSE_ERROR);
    ck_assert_ptr_null(f);
    char full[1200];
    snprintf(full, sizeof full, "t.st: %s", want);
    ck_assert_str_eq(fmoe_last_error(), full);
}

static const unsigned char data16[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

START_TEST(valid_file_read_back)
{
    image im;
    /* Listed out of data order, with metadata: both must be handled. */
    build(&im,
          "{\"b\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[12,16]},"
          "\"__metadata__\":{\"format\":\"pt\"},"
          "\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]}}   ",
          data16, 16);
    fmoe_st_file *f = NULL;
    ck_assert_msg(fmoe_st_parse(im.bytes, im.size, "t.st", &f) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    ck_assert_uint_eq(f->n_tensors, 2);
    ck_assert_uint_eq(f->n_meta, 1);
    ck_assert_str_eq(f->meta[0].key, "format");
    ck_assert_str_eq(f->meta[0].value, "pt");
    const fmoe_st_tensor *a = fmoe_st_find(f, "a"), *b = fmoe_st_find(f, "b");
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_ptr_null(fmoe_st_find(f, "c"));
    ck_assert_str_eq(a->dtype, "F32");
    ck_assert_uint_eq(a->ndim, 1);
    ck_assert_uint_eq(a->shape[0], 3);
    ck_assert_uint_eq(b->begin, 12);
    ck_assert_uint_eq(b->end, 16);
    size_t header = im.size - 16;
    ck_assert_ptr_eq(a->data, im.bytes + header);
    ck_assert_ptr_eq(b->data, im.bytes + header + 12);
    fmoe_tensor t;
    ck_assert_int_eq(fmoe_st_view(f, b, &t), FMOE_STATUS_OK);
    ck_assert_int_eq(t.dtype, FMOE_DTYPE_BF16);
    ck_assert_int_eq(t.shape[0], 2);
    ck_assert_ptr_eq(t.data, im.bytes + header + 12);
    fmoe_st_close(f);
}
END_TEST

START_TEST(zero_size_tensor_is_valid)
{
    image im;
    build(&im, "{\"z\":{\"dtype\":\"F32\",\"shape\":[2,0],\"data_offsets\":[0,0]}}", NULL, 0);
    fmoe_st_file *f = NULL;
    ck_assert_msg(fmoe_st_parse(im.bytes, im.size, "t.st", &f) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    ck_assert_uint_eq(f->tensors[0].shape[1], 0);
    fmoe_st_close(f);
}
END_TEST

START_TEST(header_length_rules)
{
    image im = {.size = 0};
    rejects(&im, "0 bytes: too short for the 8-byte header length");
    im.size = 8; /* "<" followed by zeros: length 60, nothing after it */
    memset(im.bytes, 0, 8);
    im.bytes[0] = '<';
    rejects(&im, "header of 60 bytes runs past the end of the file (8 bytes)");
    uint64_t big = 100000001;
    for (int i = 0; i < 8; i++)
        im.bytes[i] = (unsigned char)(big >> (8 * i));
    rejects(&im, "header length 100000001 exceeds the 100000000-byte limit");
    memset(im.bytes, 0xff, 8);
    rejects(&im, "header length 18446744073709551615 exceeds the 100000000-byte limit");
}
END_TEST

START_TEST(header_json_rules)
{
    image im;
    build(&im, "\t\n{}\r ", NULL, 0);
    rejects(&im, "the header does not begin with '{'");
    build(&im, "{\"a\":", NULL, 0);
    fmoe_st_file *f = NULL;
    ck_assert_int_eq(fmoe_st_parse(im.bytes, im.size, "t.st", &f), FMOE_STATUS_PARSE_ERROR);
    ck_assert_ptr_nonnull(strstr(fmoe_last_error(), "t.st: header is not valid JSON: "));
    build(&im, "{\"\xff\":{}}", NULL, 0); /* not UTF-8 */
    ck_assert_int_eq(fmoe_st_parse(im.bytes, im.size, "t.st", &f), FMOE_STATUS_PARSE_ERROR);
    ck_assert_ptr_nonnull(strstr(fmoe_last_error(), "t.st: header is not valid JSON: "));
    build(&im,
          "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
          "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
          data16, 2);
    ck_assert_int_eq(fmoe_st_parse(im.bytes, im.size, "t.st", &f), FMOE_STATUS_PARSE_ERROR);
    ck_assert_ptr_nonnull(strstr(fmoe_last_error(), "duplicate object key"));
    build(&im, "[1,2]", NULL, 0);
    rejects(&im, "the header does not begin with '{'");
}
END_TEST

START_TEST(entry_rules)
{
    image im;
    build(&im, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"extra\":1}}", data16, 4);
    rejects(&im, "tensor 'a': unknown field 'extra' (expected dtype, shape, data_offsets)");
    build(&im, "{\"a\":{\"dtype\":\"F31\",\"shape\":[1],\"data_offsets\":[0,4]}}", data16, 4);
    rejects(&im, "tensor 'a': unknown dtype F31");
    build(&im, "{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", data16, 4);
    rejects(&im, "tensor 'a': missing dtype");
    build(&im, "{\"\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", data16, 4);
    rejects(&im, "a tensor has an empty name");
    build(&im, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,-2],\"data_offsets\":[0,4]}}", data16, 4);
    rejects(&im, "tensor 'a': shape[1] is not an integer >= 0");
    build(&im, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", data16, 4);
    rejects(&im, "tensor 'a': shape must be an array of at most 8 sizes");
    build(&im, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", data16, 4);
    rejects(&im, "tensor 'a': data_offsets must be [begin, end], two integers >= 0");
    build(&im, "{\"__metadata__\":{\"n\":1}}", NULL, 0);
    rejects(&im, "__metadata__ value of 'n' is not a string");
}
END_TEST

START_TEST(offset_and_size_rules)
{
    image im;
    /* upstream's vector: a 2x2 I32 tensor needs 16 bytes, not 4 */
    build(&im, "{\"a\":{\"dtype\":\"I32\",\"shape\":[2,2],\"data_offsets\":[0,4]}}", data16, 4);
    rejects(&im, "tensor 'a': I32 [2, 2] needs 16 bytes, data_offsets give 4");
    build(&im,
          "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
          "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[6,10]}}",
          data16, 10);
    rejects(&im, "tensor 'b': data_offsets [6, 10] leave a hole (expected to start at 4)");
    build(&im,
          "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
          "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[2,6]}}",
          data16, 6);
    rejects(&im, "tensor 'b': data_offsets [2, 6] overlap (expected to start at 4)");
    build(&im,
          "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
          "\"b\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[4,3]}}",
          data16, 4);
    rejects(&im, "tensor 'b': data_offsets [4, 3] end before begin (expected to start at 4)");
    build(&im, "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,4]}}", data16, 4);
    rejects(&im, "tensor 'a': shape overflows 64 bits");
    build(&im, "{\"a\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}", data16, 2);
    rejects(&im, "tensor 'a': 3 elements of F4 are 12 bits, not a whole number of bytes");
    /* upstream: 2^64-2 cannot even be read as a JSON integer here */
    fmoe_st_file *f = NULL;
    build(&im, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,18446744073709551614],\"data_offsets\":[0,16]}}", data16, 16);
    ck_assert_int_eq(fmoe_st_parse(im.bytes, im.size, "t.st", &f), FMOE_STATUS_PARSE_ERROR);
    ck_assert_ptr_nonnull(strstr(fmoe_last_error(), "too big"));
}
END_TEST

START_TEST(buffer_must_be_covered_exactly)
{
    image im;
    const char *h = "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}";
    unsigned char poly[64];
    memcpy(poly, data16, 16);
    memcpy(poly + 16, "extra_bogus_data_for_polyglot_file", 34);
    build(&im, h, poly, 50);
    rejects(&im, "the data buffer has 50 bytes but the tensors cover 16 (trailing bytes)");
    build(&im, h, data16, 14);
    rejects(&im, "the data buffer has 14 bytes but the tensors cover 16 (truncated file)");
}
END_TEST

START_TEST(view_of_fp4_and_unsupported)
{
    image im;
    build(&im,
          "{\"q\":{\"dtype\":\"F4\",\"shape\":[2,4],\"data_offsets\":[0,4]},"
          "\"c\":{\"dtype\":\"C64\",\"shape\":[1],\"data_offsets\":[4,12]}}",
          data16, 12);
    fmoe_st_file *f = NULL;
    ck_assert_msg(fmoe_st_parse(im.bytes, im.size, "t.st", &f) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    fmoe_tensor t;
    ck_assert_int_eq(fmoe_st_view(f, fmoe_st_find(f, "q"), &t), FMOE_STATUS_OK);
    ck_assert_int_eq(t.dtype, FMOE_DTYPE_FP4_E2M1X2);
    ck_assert_int_eq(t.shape[0], 2);
    ck_assert_int_eq(t.shape[1], 2); /* pairs */
    ck_assert_int_eq(fmoe_st_view(f, fmoe_st_find(f, "c"), &t), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(), "t.st: tensor 'c' has dtype C64, which fusedmoe does not read");
    fmoe_st_close(f);
}
END_TEST

START_TEST(open_maps_a_real_file)
{
    char path[512];
    const char *dir = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/fmoe-st-%llu.safetensors", dir && *dir ? dir : "/tmp",
             (unsigned long long)fmoe_test_seed());
    image im;
    build(&im, "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", data16, 16);
    FILE *out = fopen(path, "wb");
    ck_assert_ptr_nonnull(out);
    fwrite(im.bytes, 1, im.size, out);
    fclose(out);
    fmoe_st_file *f = NULL;
    ck_assert_msg(fmoe_st_open(path, &f) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    ck_assert_int_eq(memcmp(fmoe_st_find(f, "a")->data, data16, 16), 0);
    fmoe_st_close(f);
    remove(path);
    ck_assert_int_eq(fmoe_st_open(path, &f), FMOE_STATUS_NOT_FOUND);
    char want[600];
    snprintf(want, sizeof want, "%s: No such file or directory", path);
    ck_assert_str_eq(fmoe_last_error(), want);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("safetensors");
    TCase *tc = tcase_create("safetensors");
    tcase_add_test(tc, valid_file_read_back);
    tcase_add_test(tc, zero_size_tensor_is_valid);
    tcase_add_test(tc, header_length_rules);
    tcase_add_test(tc, header_json_rules);
    tcase_add_test(tc, entry_rules);
    tcase_add_test(tc, offset_and_size_rules);
    tcase_add_test(tc, buffer_must_be_covered_exactly);
    tcase_add_test(tc, view_of_fp4_and_unsupported);
    tcase_add_test(tc, open_maps_a_real_file);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 9);
}
