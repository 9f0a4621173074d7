/*
 * tests/formats/golden.h - reads the golden tables that tools/gen_golden.py
 * writes under tests/data/golden (one named array per line: `name kind count
 * hex`, see the script). Every value comes back widened to uint32_t; the
 * accessors below narrow it to what a test needs. A missing name or a wrong
 * count fails the calling test with a message, so a test never runs on an
 * empty table.
 */
#ifndef FMOE_TESTS_FORMATS_GOLDEN_H
#define FMOE_TESTS_FORMATS_GOLDEN_H

#include <stddef.h>
#include <stdint.h>

typedef struct golden golden;

/* Load tests/data/golden/<file> (FMOE_TEST_DATA_DIR). Fails the test if the
 * file cannot be read or parsed. */
golden *golden_load(const char *file);
void golden_free(golden *g);

/* 1 if `name` is present (used to walk case families `fam.0.x`, `fam.1.x`). */
int golden_has(const golden *g, const char *name);

/* The array `name`; *count receives its length. Fails the test if absent,
 * or if expect >= 0 and the length differs. Owned by g. */
const uint32_t *golden_u32(const golden *g, const char *name, int64_t expect, int64_t *count);

/* Copies into freshly malloc'ed arrays of the narrow type (caller frees). */
uint8_t *golden_bytes(const golden *g, const char *name, int64_t expect);
int8_t *golden_i8(const golden *g, const char *name, int64_t expect);
float *golden_f32(const golden *g, const char *name, int64_t expect);
int32_t *golden_i32(const golden *g, const char *name, int64_t expect);
uint16_t *golden_u16(const golden *g, const char *name, int64_t expect);

/* printf into a static buffer, for `fam.%d.field` names. The next call
 * overwrites it: never pass its result back into it. */
const char *golden_name(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Float equality for golden data: same bits, or both NaN (NaN payloads and
 * signs are not part of any contract here). */
int golden_same_float(float a, float b);

#endif
