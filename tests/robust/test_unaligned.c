/*
 * tests/robust/test_unaligned.c - safetensors does not align tensor data: a
 * header whose length is odd puts every tensor at an odd address, and the
 * file is still legal. Reading such data through a typed pointer (a bf16 as
 * uint16_t, an int64 as int64_t) is undefined behaviour, which UBSan's
 * alignment check reports and CI's sanitizer build stops on
 * (docs/ROBUSTNESS.md, "Unaligned data").
 *
 *  - every dtype fusedmoe reads, at an odd address, viewed and read back
 *    through the library's own accessors (fmoe_load_float for the float
 *    types), value for value;
 *  - every checkpoint fixture (tests/data/models) rewritten with odd-length
 *    headers, loaded into the reference backend and run: the output must
 *    equal, bit for bit, that of the original (aligned) checkpoint. This
 *    covers the loader's own reads: widening bf16 scales to f32, the input
 *    scales w1 and w3 must agree on, compressed-tensors' int64 weight_shape,
 *    g_idx, the f32 global scales.
 * In a release build the first part checks the values; in the sanitizer
 * build any typed read at an odd address aborts the test.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/safetensors.h"
#include "fusedmoe/fusedmoe.h"
#include "fusedmoe/kit/half.h"
#include "fusedmoe/model.h"
#include "test_util.h"

#define MODELS FMOE_TEST_DATA_DIR "/models"

/* ---- every dtype at an odd address ------------------------------------------- */

typedef struct dtype_case {
    const char *name;
    size_t bytes; /* of the 8-value tensor */
    fmoe_dtype dtype;
} dtype_case;

static const dtype_case dtypes[] = {
    {"F4", 4, FMOE_DTYPE_FP4_E2M1X2},
    {"U8", 8, FMOE_DTYPE_UINT8},
    {"I8", 8, FMOE_DTYPE_INT8},
    {"F8_E5M2", 8, FMOE_DTYPE_FP8_E5M2},
    {"F8_E4M3", 8, FMOE_DTYPE_FP8_E4M3FN},
    {"F8_E8M0", 8, FMOE_DTYPE_UE8M0},
    {"F8_E4M3FNUZ", 8, FMOE_DTYPE_FP8_E4M3FNUZ},
    {"F16", 16, FMOE_DTYPE_F16},
    {"BF16", 16, FMOE_DTYPE_BF16},
    {"I32", 32, FMOE_DTYPE_INT32},
    {"F32", 32, FMOE_DTYPE_F32},
    {"F64", 64, FMOE_DTYPE_F64},
    {"I64", 64, FMOE_DTYPE_INT64},
};

/* A file of one tensor "t" of 8 values whose data starts `misalign` bytes
 * past an 8-byte boundary of `buf` (which malloc aligns). */
static size_t odd_file(unsigned char *buf, const dtype_case *d, size_t misalign, const unsigned char *data)
{
    char header[256];
    int n = snprintf(header, sizeof header, "{\"t\": {\"dtype\": \"%s\", \"shape\": [8], \"data_offsets\": [0, %zu]}}",
                     d->name, d->bytes);
    size_t len = (size_t)n;
    while ((8 + len) % 8 != misalign) /* JSON allows trailing spaces */
        header[len++] = ' ';
    for (int b = 0; b < 8; b++)
        buf[b] = (unsigned char)((uint64_t)len >> (8 * b));
    memcpy(buf + 8, header, len);
    memcpy(buf + 8 + len, data, d->bytes);
    return 8 + len + d->bytes;
}

START_TEST(test_every_dtype)
{
    fmoe_rng r = fmoe_rng_for(1);
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++) {
        const dtype_case *d = &dtypes[i];
        unsigned char data[64];
        for (size_t b = 0; b < d->bytes; b++)
            data[b] = (unsigned char)fmoe_rng_u64(&r);
        if (d->dtype == FMOE_DTYPE_F16 || d->dtype == FMOE_DTYPE_BF16 || d->dtype == FMOE_DTYPE_F32) {
            /* Finite values, so equality is a real comparison. */
            for (size_t e = 0; e < 8; e++) {
                float v = fmoe_rng_normal(&r);
                if (d->dtype == FMOE_DTYPE_F32)
                    memcpy(data + 4 * e, &v, 4);
                else {
                    uint16_t h = d->dtype == FMOE_DTYPE_F16 ? fmoe_f32_to_f16(v) : fmoe_f32_to_bf16(v);
                    memcpy(data + 2 * e, &h, 2);
                }
            }
        }
        for (size_t misalign = 1; misalign < 8; misalign += 2) {
            unsigned char *buf = malloc(512);
            ck_assert_ptr_nonnull(buf);
            size_t size = odd_file(buf, d, misalign, data);
            fmoe_st_file *f = NULL;
            ck_assert_msg(fmoe_st_parse(buf, size, "odd.safetensors", &f) == FMOE_STATUS_OK, "%s: %s", d->name,
                          fmoe_last_error());
            const fmoe_st_tensor *t = fmoe_st_find(f, "t");
            ck_assert_ptr_nonnull(t);
            ck_assert_uint_eq((uintptr_t)t->data % 8, misalign);
            fmoe_tensor v;
            ck_assert_msg(fmoe_st_view(f, t, &v) == FMOE_STATUS_OK, "%s: %s", d->name, fmoe_last_error());
            ck_assert_int_eq(v.dtype, d->dtype);
            ck_assert_int_eq(memcmp(v.data, data, d->bytes), 0);
            if (d->dtype == FMOE_DTYPE_F16 || d->dtype == FMOE_DTYPE_BF16 || d->dtype == FMOE_DTYPE_F32) {
                size_t esize = d->bytes / 8;
                for (int64_t e = 0; e < 8; e++) {
                    float want;
                    if (esize == 4) {
                        memcpy(&want, data + 4 * e, 4);
                    } else {
                        uint16_t h;
                        memcpy(&h, data + 2 * e, 2);
                        want = d->dtype == FMOE_DTYPE_F16 ? fmoe_f16_to_f32(h) : fmoe_bf16_to_f32(h);
                    }
                    float got = fmoe_load_float(v.data, d->dtype, e);
                    ck_assert_msg(got == want, "%s element %lld at odd address: %g, expected %g", d->name, (long long)e,
                                  (double)got, (double)want);
                }
            }
            fmoe_st_close(f);
            free(buf);
        }
    }
}
END_TEST

/* ---- every fixture checkpoint, rewritten with odd headers ------------------------- */

static char dir[64];

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    long size = ftell(f);
    ck_assert_int_ge(size, 0);
    rewind(f);
    unsigned char *buf = malloc((size_t)size + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(fread(buf, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    *n = (size_t)size;
    return buf;
}

static void spit(const char *path, const void *a, size_t na, const void *b, size_t nb, const void *c, size_t nc)
{
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
    ck_assert_uint_eq(fwrite(a, 1, na, f), na);
    ck_assert_uint_eq(fwrite(b, 1, nb, f), nb);
    ck_assert_uint_eq(fwrite(c, 1, nc, f), nc);
    ck_assert_int_eq(fclose(f), 0);
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Copy fixture `name` to <dir>/<name>: JSON files as they are, every
 * .safetensors with spaces added to its header so the data starts at an
 * odd offset (1 mod 8). */
static void misaligned_copy(const char *name, char *out, size_t cap)
{
    char src[512];
    snprintf(src, sizeof src, "%s/%s", MODELS, name);
    snprintf(out, cap, "%s/%s", dir, name);
    ck_assert_int_eq(mkdir(out, 0700), 0);
    DIR *d = opendir(src);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    int shards = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char from[1024], to[1024];
        snprintf(from, sizeof from, "%s/%s", src, e->d_name);
        snprintf(to, sizeof to, "%s/%s", out, e->d_name);
        size_t n = 0;
        unsigned char *bytes = slurp(from, &n);
        if (!ends_with(e->d_name, ".safetensors")) {
            spit(to, bytes, n, "", 0, "", 0);
            free(bytes);
            continue;
        }
        uint64_t hlen = 0;
        for (int b = 7; b >= 0; b--)
            hlen = hlen << 8 | bytes[b];
        ck_assert_uint_le(8 + hlen, n);
        uint64_t padded = hlen;
        while ((8 + padded) % 8 != 1)
            padded++;
        unsigned char *header = malloc(8 + padded);
        ck_assert_ptr_nonnull(header);
        for (int b = 0; b < 8; b++)
            header[b] = (unsigned char)(padded >> (8 * b));
        memcpy(header + 8, bytes + 8, hlen);
        memset(header + 8 + hlen, ' ', padded - hlen);
        spit(to, header, 8 + padded, bytes + 8 + hlen, n - 8 - hlen, "", 0);
        free(header);
        free(bytes);
        shards++;
    }
    closedir(d);
    ck_assert_int_gt(shards, 0);
}

static fmoe_context *reference_context(void)
{
    const char *files[] = {REFERENCE_MANIFEST};
    fmoe_context_options o;
    fmoe_context_options_init(&o);
    o.plugin_files = files;
    o.n_plugin_files = 1;
    o.ignore_environment = 1;
    fmoe_context *ctx = NULL;
    ck_assert_msg(fmoe_context_create(&o, &ctx) == FMOE_STATUS_OK, "context: %s", fmoe_last_error());
    return ctx;
}

#define TOKENS 4

/* Layer `layer` of the checkpoint in `model_dir` on the reference backend,
 * forwarded on x / logits; its output bytes into y. */
static void run_layer(fmoe_context *ctx, const char *model_dir, uint32_t layer, const void *x, const float *logits,
                      void *y)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/config.json", model_dir);
    fmoe_model *m = NULL;
    fmoe_quant_config *qc = NULL;
    fmoe_checkpoint *ck = NULL;
    ck_assert_msg(fmoe_model_config_load(path, &m) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    ck_assert_msg(fmoe_quant_config_load(path, &qc) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    ck_assert_msg(fmoe_checkpoint_open(model_dir, &ck) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    fmoe_layer_config cfg;
    fmoe_layer_config_init(&cfg);
    ck_assert_int_eq(fmoe_model_layer_config(m, layer, &cfg), FMOE_STATUS_OK);
    cfg.max_num_tokens = TOKENS;
    fmoe_expert_modules mods;
    fmoe_expert_modules_init(&mods);
    fmoe_scheme s;
    ck_assert_int_eq(fmoe_model_layer_expert_modules(m, layer, &mods), FMOE_STATUS_OK);
    ck_assert_msg(fmoe_quant_config_scheme(qc, &mods, &s) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    fmoe_layer_options lo;
    fmoe_layer_options_init(&lo);
    lo.backend = "reference";
    fmoe_layer *l = NULL;
    ck_assert_msg(fmoe_layer_create(ctx, &cfg, &s, &lo, &l) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    ck_assert_msg(fmoe_model_load_layer(m, layer, ck, qc, l, NULL) == FMOE_STATUS_OK, "%s layer %u: %s", model_dir,
                  layer, fmoe_last_error());
    ck_assert_msg(fmoe_layer_finalize(l) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    fmoe_tensor tx, ty, tl;
    const int64_t xs[2] = {TOKENS, cfg.hidden_size}, ls[2] = {TOKENS, cfg.num_experts};
    fmoe_tensor_init(&tx, cfg.act_dtype, 2, xs, (void *)x);
    fmoe_tensor_init(&ty, cfg.act_dtype, 2, xs, y);
    fmoe_tensor_init(&tl, FMOE_DTYPE_F32, 2, ls, (void *)logits);
    fmoe_forward_args a = {.struct_size = sizeof a, .x = &tx, .router_logits = &tl, .out = &ty};
    ck_assert_msg(fmoe_layer_forward(l, &a) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    fmoe_layer_destroy(l);
    fmoe_checkpoint_close(ck);
    fmoe_quant_config_destroy(qc);
    fmoe_model_destroy(m);
}

static const char *const fixtures[] = {
    "bf16", "bf16-fused", "fp8-block", "fp8-channel", "fp8-tensor", "mxfp4", "nvfp4", "w4a16", "w4a16-actorder", "w4a8",
};

START_TEST(test_fixture_checkpoints)
{
    snprintf(dir, sizeof dir, "/tmp/fmoe-unaligned-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    fmoe_context *ctx = reference_context();
    fmoe_rng r = fmoe_rng_for(2);
    /* H = 128 and E = 8 in every fixture (tests/data/models/README.md). */
    enum { H = 128, E = 8 };
    float x32[TOKENS * H], logits[TOKENS * E];
    for (size_t i = 0; i < TOKENS * H; i++)
        x32[i] = fmoe_rng_normal(&r);
    for (size_t i = 0; i < TOKENS * E; i++)
        logits[i] = fmoe_rng_normal(&r);
    for (size_t f = 0; f < sizeof fixtures / sizeof fixtures[0]; f++) {
        char aligned[512], odd[512];
        snprintf(aligned, sizeof aligned, "%s/%s", MODELS, fixtures[f]);
        misaligned_copy(fixtures[f], odd, sizeof odd);
        /* x in whatever activation dtype the model runs in: as f32 bytes,
         * big enough for any. */
        unsigned char x[TOKENS * H * 4], y_aligned[TOKENS * H * 4], y_odd[TOKENS * H * 4];
        memcpy(x, x32, sizeof x);
        for (uint32_t layer = 0; layer < 2; layer++) {
            char path[600];
            snprintf(path, sizeof path, "%s/config.json", aligned);
            fmoe_model *m = NULL;
            ck_assert_msg(fmoe_model_config_load(path, &m) == FMOE_STATUS_OK, "%s", fmoe_last_error());
            fmoe_dtype act = fmoe_model_dtype(m);
            ck_assert_uint_eq(fmoe_model_layer_count(m), 2);
            fmoe_model_destroy(m);
            if (act != FMOE_DTYPE_F32)
                for (size_t i = 0; i < TOKENS * H; i++)
                    fmoe_store_float(x, act, (int64_t)i, x32[i]);
            memset(y_aligned, 0, sizeof y_aligned);
            memset(y_odd, 0xA5, sizeof y_odd);
            run_layer(ctx, aligned, layer, x, logits, y_aligned);
            run_layer(ctx, odd, layer, x, logits, y_odd);
            size_t bytes = TOKENS * H * fmoe_dtype_size(act);
            int nonzero = 0;
            for (size_t i = 0; i < bytes; i++)
                nonzero |= y_aligned[i];
            ck_assert_msg(nonzero, "%s layer %u: the output is all zeros", fixtures[f], layer);
            ck_assert_msg(memcmp(y_aligned, y_odd, bytes) == 0,
                          "%s layer %u: the output differs when the tensors are at odd addresses", fixtures[f], layer);
        }
    }
    fmoe_context_destroy(ctx);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("unaligned");
    TCase *tc = tcase_create("odd_offsets");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_every_dtype);
    tcase_add_test(tc, test_fixture_checkpoints);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 2);
}
