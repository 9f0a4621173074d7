/*
 * tests/safetensors/test_checkpoint.c - checkpoints made of one safetensors
 * file or of shards with model.safetensors.index.json: lookup across
 * shards with the bytes each tensor holds, and every index rule with its
 * exact message (docs/CHECKPOINTS.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fusedmoe/fusedmoe.h"
#include "test_util.h"

static char dir[256];

/* A safetensors file holding F32 tensors named names[i] with n[i] values
 * each; tensor i's values are base + i*100 + j. */
static void write_st(const char *file, const char *const *names, const int *n, int count, float base)
{
    char header[1024] = "{";
    size_t off = 0;
    for (int i = 0; i < count; i++) {
        char e[160];
        snprintf(e, sizeof e, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%d],\"data_offsets\":[%zu,%zu]}", i ? "," : "",
                 names[i], n[i], off, off + 4 * (size_t)n[i]);
        strcat(header, e);
        off += 4 * (size_t)n[i];
    }
    strcat(header, "}");
    size_t hlen = strlen(header);
    while (hlen % 8) /* upstream pads with spaces; so do we */
        header[hlen++] = ' ';
    header[hlen] = '\0';
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    uint64_t len = hlen;
    unsigned char le[8];
    for (int b = 0; b < 8; b++)
        le[b] = (unsigned char)(len >> (8 * b));
    fwrite(le, 1, 8, f);
    fwrite(header, 1, hlen, f);
    for (int i = 0; i < count; i++)
        for (int j = 0; j < n[i]; j++) {
            float v = base + (float)(i * 100 + j);
            fwrite(&v, 4, 1, f);
        }
    fclose(f);
}

static void write_text(const char *file, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static void setup(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/fmoe-ck-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* Two shards and their index. */
static void write_sharded(void)
{
    static const char *const a[] = {"layer.1.w", "layer.0.w"};
    static const char *const b[] = {"layer.0.b"};
    static const int na[] = {3, 2}, nb[] = {4};
    write_st("model-00001-of-00002.safetensors", a, na, 2, 0.5f);
    write_st("model-00002-of-00002.safetensors", b, nb, 1, 1000.5f);
}

#define INDEX_OK \
    "{\"metadata\": {\"total_size\": 36}, \"weight_map\": {\"layer.0.b\": \"model-00002-of-00002.safetensors\", " \
    "\"layer.0.w\": \"model-00001-of-00002.safetensors\", \"layer.1.w\": \"model-00001-of-00002.safetensors\"}}"

static void expect_open_error(const char *path, fmoe_status want, const char *want_msg)
{
    fmoe_checkpoint *ck = (fmoe_checkpoint *)1;
    ck_assert_int_eq(fmoe_checkpoint_open(path, &ck), want);
    ck_assert_ptr_null(ck);
    ck_assert_str_eq(fmoe_last_error(), want_msg);
}

START_TEST(single_file_and_directory)
{
    static const char *const names[] = {"b", "a"};
    static const int n[] = {2, 3};
    write_st("model.safetensors", names, n, 2, 7.0f);
    char file[512];
    snprintf(file, sizeof file, "%s/model.safetensors", dir);
    for (int pass = 0; pass < 2; pass++) {
        fmoe_checkpoint *ck = NULL;
        ck_assert_int_eq(fmoe_checkpoint_open(pass ? dir : file, &ck), FMOE_STATUS_OK);
        ck_assert_uint_eq(fmoe_checkpoint_tensor_count(ck), 2);
        ck_assert_str_eq(fmoe_checkpoint_tensor_name(ck, 0), "a"); /* name order */
        ck_assert_str_eq(fmoe_checkpoint_tensor_name(ck, 1), "b");
        size_t i = fmoe_checkpoint_find(ck, "a");
        ck_assert_uint_eq(i, 0);
        ck_assert_str_eq(fmoe_checkpoint_tensor_file(ck, i), file);
        fmoe_tensor t;
        ck_assert_int_eq(fmoe_checkpoint_tensor(ck, i, &t), FMOE_STATUS_OK);
        ck_assert_int_eq(t.dtype, FMOE_DTYPE_F32);
        ck_assert_uint_eq(t.ndim, 1);
        ck_assert_int_eq(t.shape[0], 3);
        /* "a" is tensor 1 of the file: 7 + 100 + j */
        ck_assert_float_eq(((const float *)t.data)[2], 109.0f);
        ck_assert_uint_eq(fmoe_checkpoint_find(ck, "c"), (size_t)-1);
        fmoe_checkpoint_close(ck);
    }
}
END_TEST

START_TEST(sharded_with_index)
{
    write_sharded();
    write_text("model.safetensors.index.json", INDEX_OK);
    fmoe_checkpoint *ck = NULL;
    ck_assert_msg(fmoe_checkpoint_open(dir, &ck) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    ck_assert_uint_eq(fmoe_checkpoint_tensor_count(ck), 3);
    static const char *const order[] = {"layer.0.b", "layer.0.w", "layer.1.w"};
    static const float first[] = {1000.5f, 100.5f, 0.5f};
    for (size_t i = 0; i < 3; i++) {
        ck_assert_str_eq(fmoe_checkpoint_tensor_name(ck, i), order[i]);
        ck_assert_uint_eq(fmoe_checkpoint_find(ck, order[i]), i);
        fmoe_tensor t;
        ck_assert_int_eq(fmoe_checkpoint_tensor(ck, i, &t), FMOE_STATUS_OK);
        ck_assert_float_eq(((const float *)t.data)[0], first[i]);
    }
    ck_assert_ptr_nonnull(strstr(fmoe_checkpoint_tensor_file(ck, 0), "model-00002-of-00002.safetensors"));
    fmoe_checkpoint_close(ck);
    /* The index file itself may be given. */
    char index[512];
    snprintf(index, sizeof index, "%s/model.safetensors.index.json", dir);
    ck_assert_int_eq(fmoe_checkpoint_open(index, &ck), FMOE_STATUS_OK);
    fmoe_checkpoint_close(ck);
}
END_TEST

START_TEST(index_errors)
{
    char index[512], msg[1400];
    snprintf(index, sizeof index, "%s/model.safetensors.index.json", dir);
    write_sharded();

    write_text("model.safetensors.index.json",
               "{\"weight_map\": {\"layer.0.b\": \"model-00002-of-00002.safetensors\", \"layer.0.w\": "
               "\"model-00001-of-00002.safetensors\"}}");
    snprintf(msg, sizeof msg,
             "%s/model-00001-of-00002.safetensors: tensor 'layer.1.w' is not in the index %s (it would never be "
             "loaded)",
             dir, index);
    expect_open_error(dir, FMOE_STATUS_PARSE_ERROR, msg);

    write_text("model.safetensors.index.json",
               "{\"weight_map\": {\"layer.0.b\": \"model-00001-of-00002.safetensors\", \"layer.0.w\": "
               "\"model-00001-of-00002.safetensors\", \"layer.1.w\": \"model-00001-of-00002.safetensors\"}}");
    snprintf(msg, sizeof msg, "%s: weight_map[\"layer.0.b\"]: the tensor is not in %s/model-00001-of-00002.safetensors",
             index, dir);
    expect_open_error(dir, FMOE_STATUS_PARSE_ERROR, msg);

    write_text("model.safetensors.index.json", "{\"weight_map\": {\"layer.0.b\": \"../model.safetensors\"}}");
    snprintf(msg, sizeof msg, "%s: weight_map[\"layer.0.b\"]: expected the file name of a shard in the same directory",
             index);
    expect_open_error(dir, FMOE_STATUS_PARSE_ERROR, msg);

    write_text("model.safetensors.index.json", "{\"weight_map\": {\"layer.0.b\": \"missing.safetensors\"}}");
    snprintf(msg, sizeof msg, "%s: weight_map[\"layer.0.b\"]: %s/missing.safetensors: No such file or directory", index,
             dir);
    expect_open_error(dir, FMOE_STATUS_NOT_FOUND, msg);

    write_text("model.safetensors.index.json", "{\"weight_map\": []}");
    snprintf(msg, sizeof msg, "%s: expected an object with a \"weight_map\" object", index);
    expect_open_error(dir, FMOE_STATUS_PARSE_ERROR, msg);

    write_text("model.safetensors.index.json", "{\"weight_map\": {}}");
    snprintf(msg, sizeof msg, "%s: weight_map is empty", index);
    expect_open_error(dir, FMOE_STATUS_PARSE_ERROR, msg);

    write_text("model.safetensors.index.json", "{\"weight_map\": {\"a\": \"x\", \"a\": \"y\"}}");
    fmoe_checkpoint *ck = NULL;
    ck_assert_int_eq(fmoe_checkpoint_open(dir, &ck), FMOE_STATUS_PARSE_ERROR);
    snprintf(msg, sizeof msg, "%s:1:", index);
    ck_assert_msg(strncmp(fmoe_last_error(), msg, strlen(msg)) == 0 && strstr(fmoe_last_error(), "duplicate"), "%s",
                  fmoe_last_error());
}
END_TEST

START_TEST(tensor_in_two_shards)
{
    static const char *const a[] = {"x", "y"};
    static const char *const b[] = {"y"};
    static const int na[] = {1, 1}, nb[] = {1};
    write_st("s1.safetensors", a, na, 2, 1.0f);
    write_st("s2.safetensors", b, nb, 1, 2.0f);
    write_text("model.safetensors.index.json",
               "{\"weight_map\": {\"x\": \"s1.safetensors\", \"y\": \"s2.safetensors\"}}");
    char msg[1024];
    /* s1's y is listed (under s2), so it passes the index check; the table
     * then finds it twice. */
    snprintf(msg, sizeof msg, "tensor 'y' is stored twice: in %s/s1.safetensors and in %s/s2.safetensors", dir, dir);
    char *got = NULL;
    fmoe_checkpoint *ck = NULL;
    ck_assert_int_eq(fmoe_checkpoint_open(dir, &ck), FMOE_STATUS_PARSE_ERROR);
    got = strdup(fmoe_last_error());
    /* Either order of the two files is a correct report. */
    char alt[1024];
    snprintf(alt, sizeof alt, "tensor 'y' is stored twice: in %s/s2.safetensors and in %s/s1.safetensors", dir, dir);
    ck_assert_msg(strcmp(got, msg) == 0 || strcmp(got, alt) == 0, "%s", got);
    free(got);
}
END_TEST

START_TEST(missing_directory_contents)
{
    char msg[600];
    snprintf(msg, sizeof msg, "%s: no model.safetensors.index.json or model.safetensors in this directory", dir);
    expect_open_error(dir, FMOE_STATUS_NOT_FOUND, msg);
    char path[512];
    snprintf(path, sizeof path, "%s/none.safetensors", dir);
    snprintf(msg, sizeof msg, "%s: No such file or directory", path);
    expect_open_error(path, FMOE_STATUS_NOT_FOUND, msg);
    /* A shard that is not a valid safetensors file: its own message. */
    write_text("model.safetensors", "not a safetensors file");
    fmoe_checkpoint *ck = NULL;
    ck_assert_int_eq(fmoe_checkpoint_open(dir, &ck), FMOE_STATUS_PARSE_ERROR);
    ck_assert_msg(strstr(fmoe_last_error(), "model.safetensors") != NULL, "%s", fmoe_last_error());
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("checkpoint");
    TCase *tc = tcase_create("checkpoint");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, single_file_and_directory);
    tcase_add_test(tc, sharded_with_index);
    tcase_add_test(tc, index_errors);
    tcase_add_test(tc, tensor_in_two_shards);
    tcase_add_test(tc, missing_directory_contents);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 5);
}
