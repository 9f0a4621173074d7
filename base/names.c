/*
 * base/names.c - the library version and the stable names of the public
 * enumerations (status, dtype, activation, scoring, device kind).
 *
 * One table per enumeration, so that adding a value is one line here and the
 * name and parse directions cannot drift apart. These lookups cannot fail and
 * deliberately leave the thread's error text alone: an application commonly
 * writes printf("%s: %s", fmoe_status_name(st), fmoe_last_error()), and
 * clearing the text here would erase the very message being printed.
 */
#include <string.h>

#include "fusedmoe/fusedmoe.h"

#ifndef FMOE_VERSION_STRING
#define FMOE_VERSION_STRING "0.1.0"
#endif

/* One (value, name) pair of an enumeration. */
typedef struct fmoe_name_entry {
    int32_t value;
    const char *name;
} fmoe_name_entry;

#define FMOE_COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

static const fmoe_name_entry status_names[] = {
    {FMOE_STATUS_OK, "ok"},
    {FMOE_STATUS_UNSUPPORTED, "unsupported"},
    {FMOE_STATUS_INVALID_ARGUMENT, "invalid-argument"},
    {FMOE_STATUS_OUT_OF_MEMORY, "out-of-memory"},
    {FMOE_STATUS_NOT_FOUND, "not-found"},
    {FMOE_STATUS_IO_ERROR, "io-error"},
    {FMOE_STATUS_PARSE_ERROR, "parse-error"},
    {FMOE_STATUS_ABI_MISMATCH, "abi-mismatch"},
    {FMOE_STATUS_PLUGIN_ERROR, "plugin-error"},
    {FMOE_STATUS_DEVICE_ERROR, "device-error"},
    {FMOE_STATUS_BAD_STATE, "bad-state"},
    {FMOE_STATUS_INTERNAL, "internal"},
};

/* The dtype table carries the element size as well: it is the one place that
 * knows every dtype. Size 0 marks a value-only type (INT4). */
typedef struct fmoe_dtype_entry {
    fmoe_dtype value;
    const char *name;
    size_t size;
} fmoe_dtype_entry;

static const fmoe_dtype_entry dtype_names[] = {
    {FMOE_DTYPE_F32, "f32", 4},
    {FMOE_DTYPE_BF16, "bf16", 2},
    {FMOE_DTYPE_F16, "f16", 2},
    {FMOE_DTYPE_F64, "f64", 8},
    {FMOE_DTYPE_FP8_E4M3FN, "fp8_e4m3fn", 1},
    {FMOE_DTYPE_FP8_E4M3FNUZ, "fp8_e4m3fnuz", 1},
    {FMOE_DTYPE_FP8_E5M2, "fp8_e5m2", 1},
    {FMOE_DTYPE_INT8, "int8", 1},
    {FMOE_DTYPE_UINT8, "uint8", 1},
    {FMOE_DTYPE_INT32, "int32", 4},
    {FMOE_DTYPE_INT64, "int64", 8},
    {FMOE_DTYPE_FP4_E2M1X2, "fp4_e2m1x2", 1},
    {FMOE_DTYPE_UE8M0, "ue8m0", 1},
    {FMOE_DTYPE_INT4, "int4", 0},
};

/* Accepted by fmoe_dtype_from_name besides the canonical names: the spellings
 * of PyTorch (torch.<name>) and of the common C/numpy vocabulary, so that a
 * dtype copied from a model config or a Python script is understood. */
static const fmoe_name_entry dtype_aliases[] = {
    {FMOE_DTYPE_F32, "float32"},
    {FMOE_DTYPE_F32, "float"},
    {FMOE_DTYPE_BF16, "bfloat16"},
    {FMOE_DTYPE_F16, "float16"},
    {FMOE_DTYPE_F16, "half"},
    {FMOE_DTYPE_F64, "float64"},
    {FMOE_DTYPE_F64, "double"},
    {FMOE_DTYPE_FP8_E4M3FN, "float8_e4m3fn"},
    {FMOE_DTYPE_FP8_E4M3FNUZ, "float8_e4m3fnuz"},
    {FMOE_DTYPE_FP8_E5M2, "float8_e5m2"},
    {FMOE_DTYPE_FP4_E2M1X2, "float4_e2m1fn_x2"},
    {FMOE_DTYPE_UE8M0, "float8_e8m0fnu"},
};

static const fmoe_name_entry activation_names[] = {
    {FMOE_ACT_SILU, "silu"},   {FMOE_ACT_GELU, "gelu"},           {FMOE_ACT_GELU_TANH, "gelu_tanh"},
    {FMOE_ACT_RELU2, "relu2"}, {FMOE_ACT_SWIGLUOAI, "swigluoai"}, {FMOE_ACT_SWIGLUSTEP, "swiglustep"},
};

/* The Hugging Face config spelling of the tanh approximation. */
static const fmoe_name_entry activation_aliases[] = {
    {FMOE_ACT_GELU_TANH, "gelu_pytorch_tanh"},
};

static const fmoe_name_entry scoring_names[] = {
    {FMOE_SCORING_SOFTMAX, "softmax"},
    {FMOE_SCORING_SIGMOID, "sigmoid"},
    {FMOE_SCORING_SQRTSOFTPLUS, "sqrtsoftplus"},
};

static const fmoe_name_entry device_kind_names[] = {
    {FMOE_DEVICE_ANY, "any"},
    {FMOE_DEVICE_CPU, "cpu"},
    {FMOE_DEVICE_CUDA, "cuda"},
    {FMOE_DEVICE_ROCM, "rocm"},
};

static const char *name_of(const fmoe_name_entry *table, size_t n, int32_t value)
{
    for (size_t i = 0; i < n; i++)
        if (table[i].value == value)
            return table[i].name;
    return "unknown";
}

/* 1 and the value in *out if `name` is in the table. */
static int value_of(const fmoe_name_entry *table, size_t n, const char *name, int32_t *out)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(table[i].name, name) == 0) {
            *out = table[i].value;
            return 1;
        }
    }
    return 0;
}

static const fmoe_dtype_entry *dtype_entry(fmoe_dtype dtype)
{
    for (size_t i = 0; i < FMOE_COUNT_OF(dtype_names); i++)
        if (dtype_names[i].value == dtype)
            return &dtype_names[i];
    return NULL;
}

const char *fmoe_version(void)
{
    return FMOE_VERSION_STRING;
}

const char *fmoe_status_name(fmoe_status status)
{
    return name_of(status_names, FMOE_COUNT_OF(status_names), status);
}

const char *fmoe_dtype_name(fmoe_dtype dtype)
{
    const fmoe_dtype_entry *e = dtype_entry(dtype);
    return e ? e->name : "unknown";
}

fmoe_dtype fmoe_dtype_from_name(const char *name)
{
    if (!name)
        return FMOE_DTYPE_INVALID;
    for (size_t i = 0; i < FMOE_COUNT_OF(dtype_names); i++)
        if (strcmp(dtype_names[i].name, name) == 0)
            return dtype_names[i].value;
    int32_t value;
    if (value_of(dtype_aliases, FMOE_COUNT_OF(dtype_aliases), name, &value))
        return value;
    return FMOE_DTYPE_INVALID;
}

size_t fmoe_dtype_size(fmoe_dtype dtype)
{
    const fmoe_dtype_entry *e = dtype_entry(dtype);
    return e ? e->size : 0;
}

const char *fmoe_activation_name(int32_t activation)
{
    return name_of(activation_names, FMOE_COUNT_OF(activation_names), activation);
}

int32_t fmoe_activation_from_name(const char *name)
{
    int32_t value;
    if (!name)
        return FMOE_ACT_INVALID;
    if (value_of(activation_names, FMOE_COUNT_OF(activation_names), name, &value))
        return value;
    if (value_of(activation_aliases, FMOE_COUNT_OF(activation_aliases), name, &value))
        return value;
    return FMOE_ACT_INVALID;
}

const char *fmoe_scoring_name(int32_t scoring)
{
    return name_of(scoring_names, FMOE_COUNT_OF(scoring_names), scoring);
}

int32_t fmoe_scoring_from_name(const char *name)
{
    int32_t value;
    if (name && value_of(scoring_names, FMOE_COUNT_OF(scoring_names), name, &value))
        return value;
    return FMOE_SCORING_INVALID;
}

const char *fmoe_device_kind_name(int32_t device_kind)
{
    return name_of(device_kind_names, FMOE_COUNT_OF(device_kind_names), device_kind);
}
