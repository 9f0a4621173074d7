/*
 * tests/robust/test_limits.c - every count and size a file can state has a
 * ceiling (base/limits.h, docs/ROBUSTNESS.md) checked before any work per
 * item, size limits are exact, and the lookups a large but legal file
 * causes are O(n log n), not quadratic. Each ceiling is tried at the limit
 * (accepted) and one past it (refused, with a message naming the key).
 * The cases that used to run for minutes are bounded by the test case
 * timeout.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "base/limits.h"
#include "base/text_file.h"
#include "core/safetensors.h"
#include "fusedmoe/fusedmoe.h"
#include "fusedmoe/model.h"
#include "registry/config.h"
#include "test_util.h"

static char dir[64];

static void make_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/fmoe-limits-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void remove_dir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

static const char *path_in(const char *name)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return path;
}

static void write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
    ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

/* A file of `size` bytes that are all '{' ... '}' spaces: sparse, so a
 * limit-sized file costs no disk. */
static void sized_file(const char *path, uint64_t size)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(ftruncate(fileno(f), (off_t)size), 0);
    ck_assert_int_eq(fclose(f), 0);
}

/* A growing text buffer. */
typedef struct text {
    char *p;
    size_t len, cap;
} text;

static void add(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void add(text *t, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->p ? t->p + t->len : NULL, t->p ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        ck_assert_int_ge(n, 0);
        if (t->p && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        t->cap = (t->cap ? t->cap : 4096) * 2 + (size_t)n;
        t->p = realloc(t->p, t->cap);
        ck_assert_ptr_nonnull(t->p);
    }
}

/* ---- model config ceilings --------------------------------------------------- */

static fmoe_status mixtral(uint64_t layers, uint64_t experts, uint64_t top_k, uint64_t hidden, uint64_t inter,
                           fmoe_model **out)
{
    char json[512];
    snprintf(json, sizeof json,
             "{\"architectures\": [\"MixtralForCausalLM\"], \"num_hidden_layers\": %llu, \"num_local_experts\": "
             "%llu, \"num_experts_per_tok\": %llu, \"hidden_size\": %llu, \"intermediate_size\": %llu}",
             (unsigned long long)layers, (unsigned long long)experts, (unsigned long long)top_k,
             (unsigned long long)hidden, (unsigned long long)inter);
    *out = NULL;
    return fmoe_model_config_parse(json, strlen(json), "config.json", out);
}

static void expect_range(fmoe_status st, const char *key, unsigned limit, unsigned long long got)
{
    char want[256];
    snprintf(want, sizeof want, "config.json: %s: expected an integer in [1, %u], got %llu", key, limit, got);
    ck_assert_int_eq(st, FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(), want);
}

START_TEST(test_model_ceilings)
{
    fmoe_model *m = NULL;
    /* At every ceiling at once: accepted. */
    ck_assert_msg(mixtral(FMOE_LIMIT_LAYERS, FMOE_LIMIT_EXPERTS, FMOE_LIMIT_TOP_K, FMOE_LIMIT_HIDDEN,
                          FMOE_LIMIT_INTERMEDIATE, &m) == FMOE_STATUS_OK,
                  "%s", fmoe_last_error());
    fmoe_layer_config cfg;
    fmoe_layer_config_init(&cfg);
    ck_assert_int_eq(fmoe_model_layer_config(m, 0, &cfg), FMOE_STATUS_OK);
    ck_assert_uint_eq(cfg.num_experts, FMOE_LIMIT_EXPERTS);
    ck_assert_uint_eq(fmoe_model_layer_count(m), FMOE_LIMIT_LAYERS);
    fmoe_model_destroy(m);
    /* One past each: refused, naming the key and the range. */
    expect_range(mixtral(4, FMOE_LIMIT_EXPERTS + 1ull, 2, 64, 32, &m), "num_local_experts", FMOE_LIMIT_EXPERTS,
                 FMOE_LIMIT_EXPERTS + 1ull);
    expect_range(mixtral(4, 2147483647ull, 2, 64, 32, &m), "num_local_experts", FMOE_LIMIT_EXPERTS, 2147483647ull);
    expect_range(mixtral(4, 8, FMOE_LIMIT_TOP_K + 1ull, 64, 32, &m), "num_experts_per_tok", FMOE_LIMIT_TOP_K,
                 FMOE_LIMIT_TOP_K + 1ull);
    expect_range(mixtral(4, 8, 2, FMOE_LIMIT_HIDDEN + 1ull, 32, &m), "hidden_size", FMOE_LIMIT_HIDDEN,
                 FMOE_LIMIT_HIDDEN + 1ull);
    expect_range(mixtral(4, 8, 2, 64, FMOE_LIMIT_INTERMEDIATE + 1ull, &m), "intermediate_size", FMOE_LIMIT_INTERMEDIATE,
                 FMOE_LIMIT_INTERMEDIATE + 1ull);
    expect_range(mixtral(FMOE_LIMIT_LAYERS + 1ull, 8, 2, 64, 32, &m), "num_hidden_layers", FMOE_LIMIT_LAYERS,
                 FMOE_LIMIT_LAYERS + 1ull);
    ck_assert_ptr_null(m);
}
END_TEST

/* ---- the scheme of a layer of many experts ------------------------------------- */

static fmoe_quant_config *quant(const char *json)
{
    fmoe_quant_config *qc = NULL;
    ck_assert_msg(fmoe_quant_config_parse(json, strlen(json), "config.json", &qc) == FMOE_STATUS_OK, "%s",
                  fmoe_last_error());
    return qc;
}

static fmoe_status scheme_for(const fmoe_quant_config *qc, uint32_t experts, char *key, size_t cap)
{
    fmoe_expert_modules mods;
    fmoe_expert_modules_init(&mods);
    mods.prefix = "model.layers.3.mlp.experts";
    mods.num_experts = experts;
    fmoe_scheme s;
    fmoe_status st = fmoe_quant_config_scheme(qc, &mods, &s);
    if (st == FMOE_STATUS_OK)
        fmoe_scheme_key(&s, key, cap);
    return st;
}

#define W_INT4 "{\"num_bits\": 4, \"type\": \"int\", \"symmetric\": true, \"strategy\": \"group\", \"group_size\": 128}"

/* The expert count of the API call has the same ceiling; 2^31 - 1 experts
 * used to run for minutes formatting module names. */
START_TEST(test_scheme_expert_ceiling)
{
    fmoe_quant_config *qc = quant("{\"torch_dtype\": \"bfloat16\"}");
    char key[FMOE_SCHEME_KEY_MAX];
    ck_assert_int_eq(scheme_for(qc, FMOE_LIMIT_EXPERTS, key, sizeof key), FMOE_STATUS_OK);
    ck_assert_str_eq(key, "bf16");
    ck_assert_int_eq(scheme_for(qc, 2147483647u, key, sizeof key), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(),
                     "fmoe_quant_config_scheme: modules.num_experts = 2147483647, more than the 65536 allowed");
    fmoe_quant_config_destroy(qc);
}
END_TEST

/* Long literal lists (ignore lists, targets, module lists) cost a binary
 * search per name, not their length: 65536 experts against 20000 ignored
 * names and 20000 targets, and an fp8 skip list of 20000 modules. */
START_TEST(test_long_lists)
{
    text t = {0};
    add(&t, "{\"torch_dtype\": \"bfloat16\", \"quantization_config\": {\"quant_method\": \"compressed-tensors\", "
            "\"format\": \"pack-quantized\", \"config_groups\": {\"g\": {\"weights\": " W_INT4 ", \"targets\": [");
    for (int i = 0; i < 20000; i++)
        add(&t, "%s\"model.layers.%d.self_attn.q_proj\"", i ? ", " : "", i);
    add(&t, ", \"Linear\"]}}, \"ignore\": [");
    for (int i = 0; i < 20000; i++)
        add(&t, "%s\"model.layers.%d.mlp.gate\"", i ? ", " : "", i);
    add(&t, ", \"model.layers.3.mlp.experts.65535.down_proj\"]}}");
    fmoe_quant_config *qc = quant(t.p);
    char key[FMOE_SCHEME_KEY_MAX];
    /* Expert 65535's down_proj is ignored: the layer is mixed. */
    ck_assert_int_eq(scheme_for(qc, FMOE_LIMIT_EXPERTS, key, sizeof key), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_msg(strstr(fmoe_last_error(), "model.layers.3.mlp.experts.65535.down_proj is 'bf16'"), "%s",
                  fmoe_last_error());
    ck_assert_int_eq(scheme_for(qc, 65535, key, sizeof key), FMOE_STATUS_OK);
    ck_assert_str_eq(key, "int4:group128");
    fmoe_quant_config_destroy(qc);

    t.len = 0;
    add(&t, "{\"torch_dtype\": \"bfloat16\", \"quantization_config\": {\"quant_method\": \"fp8\", "
            "\"activation_scheme\": \"dynamic\", \"ignored_layers\": [");
    for (int i = 0; i < 20000; i++)
        add(&t, "%s\"model.layers.%d.mlp.experts.%d\"", i ? ", " : "", i % 7, i);
    add(&t, "]}}");
    qc = quant(t.p);
    ck_assert_int_eq(scheme_for(qc, 20000, key, sizeof key), FMOE_STATUS_INVALID_ARGUMENT); /* layer 3 is mixed */
    ck_assert_msg(strstr(fmoe_last_error(), "experts.3.gate_proj is 'bf16'"), "%s", fmoe_last_error());
    fmoe_quant_config_destroy(qc);
    free(t.p);
}
END_TEST

/* ---- safetensors and checkpoint ceilings ---------------------------------------- */

/* A safetensors file of `n` one-byte U8 tensors named "<prefix><i>" (i
 * zero-padded to `digits`), tensor i holding the byte i * 7. */
static void shard_bytes(text *t, const char *prefix, size_t n, size_t digits)
{
    text h = {0};
    add(&h, "{");
    for (size_t i = 0; i < n; i++)
        add(&h, "%s\"%s%0*zu\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [%zu, %zu]}", i ? ", " : "",
            prefix, (int)digits, i, i, i + 1);
    add(&h, "}");
    free(t->p);
    t->len = t->cap = 8 + h.len + n;
    t->p = malloc(t->len);
    ck_assert_ptr_nonnull(t->p);
    for (int b = 0; b < 8; b++)
        t->p[b] = (char)((uint64_t)h.len >> (8 * b));
    memcpy(t->p + 8, h.p, h.len);
    for (size_t i = 0; i < n; i++)
        t->p[8 + h.len + i] = (char)(i * 7);
    free(h.p);
}

START_TEST(test_name_length)
{
    text t = {0};
    fmoe_st_file *f = NULL;
    shard_bytes(&t, "w", 1, FMOE_LIMIT_NAME_BYTES - 1); /* "w" + 1023 digits: 1024 bytes */
    ck_assert_msg(fmoe_st_parse(t.p, t.len, "ok.safetensors", &f) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    ck_assert_uint_eq(strlen(f->tensors[0].name), FMOE_LIMIT_NAME_BYTES);
    fmoe_st_close(f);
    shard_bytes(&t, "w", 1, FMOE_LIMIT_NAME_BYTES);
    ck_assert_int_eq(fmoe_st_parse(t.p, t.len, "long.safetensors", &f), FMOE_STATUS_PARSE_ERROR);
    ck_assert_msg(strstr(fmoe_last_error(), "its name has 1025 bytes, more than the 1024 allowed"), "%s",
                  fmoe_last_error());
    free(t.p);
}
END_TEST

/* 2^17 tensors in two shards of one index: every index entry is checked
 * against its shard. A linear search per entry made this 2^33 string
 * compares (minutes for 2^20); a binary search takes well under a second. */
START_TEST(test_large_index)
{
    make_dir();
    const size_t per = 1u << 16;
    text t = {0}, index = {0};
    add(&index, "{\"metadata\": {}, \"weight_map\": {");
    for (int s = 0; s < 2; s++) {
        char prefix[8], file[32];
        snprintf(prefix, sizeof prefix, "%c.", 'a' + s);
        snprintf(file, sizeof file, "part-%d.safetensors", s);
        shard_bytes(&t, prefix, per, 6);
        write_file(path_in(file), t.p, t.len);
        for (size_t i = 0; i < per; i++)
            add(&index, "%s\"%s%06zu\": \"%s\"", s || i ? ", " : "", prefix, i, file);
    }
    add(&index, "}}");
    write_file(path_in("model.safetensors.index.json"), index.p, index.len);
    fmoe_checkpoint *ck = NULL;
    ck_assert_msg(fmoe_checkpoint_open(dir, &ck) == FMOE_STATUS_OK, "%s", fmoe_last_error());
    ck_assert_uint_eq(fmoe_checkpoint_tensor_count(ck), 2 * per);
    size_t i = fmoe_checkpoint_find(ck, "b.065535");
    ck_assert_uint_ne(i, (size_t)-1);
    fmoe_tensor v;
    ck_assert_int_eq(fmoe_checkpoint_tensor(ck, i, &v), FMOE_STATUS_OK);
    ck_assert_uint_eq(*(const unsigned char *)v.data, (unsigned char)(65535 * 7));
    fmoe_checkpoint_close(ck);
    free(t.p);
    free(index.p);
    remove_dir();
}
END_TEST

/* More shard files than allowed: refused before any is opened (none of
 * these exists). */
START_TEST(test_shard_ceiling)
{
    make_dir();
    text index = {0};
    add(&index, "{\"weight_map\": {");
    for (unsigned i = 0; i <= FMOE_LIMIT_SHARDS; i++)
        add(&index, "%s\"t%u\": \"s%u.safetensors\"", i ? ", " : "", i, i);
    add(&index, "}}");
    const char *path = path_in("model.safetensors.index.json");
    write_file(path, index.p, index.len);
    fmoe_checkpoint *ck = NULL;
    ck_assert_int_eq(fmoe_checkpoint_open(path, &ck), FMOE_STATUS_PARSE_ERROR);
    char want[512];
    snprintf(want, sizeof want, "%s: weight_map names 16385 shard files, more than the 16384 allowed", path);
    ck_assert_str_eq(fmoe_last_error(), want);
    free(index.p);
    remove_dir();
}
END_TEST

/* ---- exact size limits -------------------------------------------------------------- */

START_TEST(test_size_limits_exact)
{
    make_dir();
    char *buf = NULL;
    size_t len = 0;
    /* The reader itself, with a small limit: 100 bytes pass, 101 do not. */
    const char *small = path_in("small.json");
    sized_file(small, 100);
    ck_assert_int_eq(fmoe_read_text_file(small, 100, "config.json", &buf, &len), FMOE_STATUS_OK);
    ck_assert_uint_eq(len, 100);
    free(buf);
    char want[512];
    snprintf(want, sizeof want, "%s: 100 bytes, larger than the 99-byte limit for a config.json", small);
    ck_assert_int_eq(fmoe_read_text_file(small, 99, "config.json", &buf, &len), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(), want);
    ck_assert_ptr_null(buf);

    /* config.json at its limit is read whole; one byte more is refused
     * without being read (it used to pass up to twice the limit). */
    const char *config = path_in("config.json");
    sized_file(config, FMOE_LIMIT_CONFIG_BYTES);
    ck_assert_int_eq(fmoe_read_text_file(config, FMOE_LIMIT_CONFIG_BYTES, "config.json", &buf, &len), FMOE_STATUS_OK);
    ck_assert_uint_eq(len, FMOE_LIMIT_CONFIG_BYTES);
    free(buf);
    sized_file(config, FMOE_LIMIT_CONFIG_BYTES + 1ull);
    fmoe_model *m = NULL;
    ck_assert_int_eq(fmoe_model_config_load(config, &m), FMOE_STATUS_INVALID_ARGUMENT);
    snprintf(want, sizeof want, "%s: 67108865 bytes, larger than the 67108864-byte limit for a config.json", config);
    ck_assert_str_eq(fmoe_last_error(), want);
    fmoe_quant_config *qc = NULL;
    ck_assert_int_eq(fmoe_quant_config_load(config, &qc), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(fmoe_last_error(), want);

    /* The index and TOML files likewise. */
    const char *index = path_in("model.safetensors.index.json");
    sized_file(index, FMOE_LIMIT_INDEX_BYTES + 1ull);
    fmoe_checkpoint *ck = NULL;
    ck_assert_int_eq(fmoe_checkpoint_open(dir, &ck), FMOE_STATUS_INVALID_ARGUMENT);
    snprintf(want, sizeof want, "%s: 268435457 bytes, larger than the 268435456-byte limit for a safetensors index",
             index);
    ck_assert_str_eq(fmoe_last_error(), want);
    const char *toml = path_in("fusedmoe.toml");
    sized_file(toml, FMOE_LIMIT_TOML_BYTES + 1ull);
    fmoe_config *cfg = NULL;
    ck_assert_int_eq(fmoe_config_load_file(toml, &cfg), FMOE_STATUS_INVALID_ARGUMENT);
    snprintf(want, sizeof want, "%s: 16777217 bytes, larger than the 16777216-byte limit for a TOML file", toml);
    ck_assert_str_eq(fmoe_last_error(), want);
    remove_dir();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("limits");
    TCase *tc = tcase_create("ceilings");
    /* The quadratic and per-item cases used to take minutes: a hang or a
     * slow path fails here. ASan builds are several times slower. */
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_model_ceilings);
    tcase_add_test(tc, test_scheme_expert_ceiling);
    tcase_add_test(tc, test_long_lists);
    tcase_add_test(tc, test_name_length);
    tcase_add_test(tc, test_large_index);
    tcase_add_test(tc, test_shard_ceiling);
    tcase_add_test(tc, test_size_limits_exact);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 7);
}
