/*
 * tests/formats/golden.c - the reader behind golden.h. The whole file is read
 * into memory and split into lines once; lookups are linear (a file holds a
 * few hundred arrays at most).
 */
#include "tests/formats/golden.h"

#include <check.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct golden_array {
    char *name;
    int64_t count;
    uint32_t *values;
} golden_array;

struct golden {
    golden_array *arrays;
    size_t num;
};

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 65536 + 1 > cap) {
            cap = cap ? cap * 2 : 1u << 20;
            char *grown = realloc(buf, cap);
            if (!grown) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = grown;
        }
        size_t got = fread(buf + len, 1, 65536, f);
        len += got;
        if (got == 0)
            break;
    }
    fclose(f);
    buf[len] = '\0';
    return buf;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Parse one data line in place; 0 on malformed input. */
static int parse_line(char *line, golden_array *out)
{
    char *save = NULL;
    char *name = strtok_r(line, " ", &save);
    char *kind = strtok_r(NULL, " ", &save);
    char *count = strtok_r(NULL, " ", &save);
    char *hex = strtok_r(NULL, " ", &save);
    if (!name || !kind || !count || !hex)
        return 0;
    int width = strcmp(kind, "u8") == 0 ? 2 : strcmp(kind, "u16") == 0 ? 4 : strcmp(kind, "u32") == 0 ? 8 : 0;
    long long n = strtoll(count, NULL, 10);
    if (!width || n <= 0 || strlen(hex) != (size_t)n * (size_t)width)
        return 0;
    out->name = strdup(name);
    out->count = n;
    out->values = malloc((size_t)n * sizeof *out->values);
    if (!out->name || !out->values)
        return 0;
    for (long long i = 0; i < n; i++) {
        uint32_t v = 0;
        for (int d = 0; d < width; d++) {
            int h = hex_digit(hex[i * width + d]);
            if (h < 0)
                return 0;
            v = v << 4 | (uint32_t)h;
        }
        out->values[i] = v;
    }
    return 1;
}

golden *golden_load(const char *file)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", FMOE_TEST_DATA_DIR, file);
    char *text = read_file(path);
    ck_assert_msg(text != NULL, "cannot read golden table %s", path);
    golden *g = calloc(1, sizeof *g);
    ck_assert_ptr_nonnull(g);
    size_t cap = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#' || line[0] == '\0')
            continue;
        if (g->num == cap) {
            cap = cap ? cap * 2 : 64;
            g->arrays = realloc(g->arrays, cap * sizeof *g->arrays);
            ck_assert_ptr_nonnull(g->arrays);
        }
        ck_assert_msg(parse_line(line, &g->arrays[g->num]), "%s: malformed line %zu", path, g->num + 1);
        g->num++;
    }
    free(text);
    ck_assert_msg(g->num > 0, "%s holds no arrays", path);
    return g;
}

void golden_free(golden *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->num; i++) {
        free(g->arrays[i].name);
        free(g->arrays[i].values);
    }
    free(g->arrays);
    free(g);
}

static const golden_array *find(const golden *g, const char *name)
{
    for (size_t i = 0; i < g->num; i++)
        if (strcmp(g->arrays[i].name, name) == 0)
            return &g->arrays[i];
    return NULL;
}

int golden_has(const golden *g, const char *name)
{
    return find(g, name) != NULL;
}

const uint32_t *golden_u32(const golden *g, const char *name, int64_t expect, int64_t *count)
{
    const golden_array *a = find(g, name);
    ck_assert_msg(a != NULL, "golden array %s missing", name);
    ck_assert_msg(expect < 0 || a->count == expect, "golden array %s has %lld values, expected %lld", name,
                  (long long)a->count, (long long)expect);
    if (count)
        *count = a->count;
    return a->values;
}

/* Each accessor copies the widened values into an array of its own type. */
static void *copy_out(const golden *g, const char *name, int64_t expect, size_t elem, int64_t *count,
                      const uint32_t **values)
{
    *values = golden_u32(g, name, expect, count);
    void *out = malloc((size_t)*count * elem);
    ck_assert_ptr_nonnull(out);
    return out;
}

uint8_t *golden_bytes(const golden *g, const char *name, int64_t expect)
{
    int64_t n;
    const uint32_t *v;
    uint8_t *out = copy_out(g, name, expect, sizeof *out, &n, &v);
    for (int64_t i = 0; i < n; i++)
        out[i] = (uint8_t)v[i];
    return out;
}

int8_t *golden_i8(const golden *g, const char *name, int64_t expect)
{
    int64_t n;
    const uint32_t *v;
    int8_t *out = copy_out(g, name, expect, sizeof *out, &n, &v);
    for (int64_t i = 0; i < n; i++)
        out[i] = (int8_t)(uint8_t)v[i];
    return out;
}

float *golden_f32(const golden *g, const char *name, int64_t expect)
{
    int64_t n;
    const uint32_t *v;
    float *out = copy_out(g, name, expect, sizeof *out, &n, &v);
    memcpy(out, v, (size_t)n * sizeof *out); /* the values are f32 bit patterns */
    return out;
}

int32_t *golden_i32(const golden *g, const char *name, int64_t expect)
{
    int64_t n;
    const uint32_t *v;
    int32_t *out = copy_out(g, name, expect, sizeof *out, &n, &v);
    memcpy(out, v, (size_t)n * sizeof *out); /* two's complement */
    return out;
}

uint16_t *golden_u16(const golden *g, const char *name, int64_t expect)
{
    int64_t n;
    const uint32_t *v;
    uint16_t *out = copy_out(g, name, expect, sizeof *out, &n, &v);
    for (int64_t i = 0; i < n; i++)
        out[i] = (uint16_t)v[i];
    return out;
}

const char *golden_name(const char *fmt, ...)
{
    static char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return buf;
}

int golden_same_float(float a, float b)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    return memcmp(&a, &b, sizeof a) == 0;
}
