/*
 * cli/halfconv.h - bulk conversion between f32 and the storage dtypes the
 * synthetic layer of `run` uses (f32, bf16, f16). The scalar conversions are
 * the library's own (fusedmoe/kit/half.h, header-only), so the CLI rounds exactly
 * as the reference does.
 */
#ifndef FMOE_CLI_HALFCONV_H
#define FMOE_CLI_HALFCONV_H

#include <stddef.h>

#include "fusedmoe/common.h"

/* 1 for the dtypes below can store and load: F32, BF16, F16. */
int cli_is_float_storage(fmoe_dtype dtype);

/* dst (n elements of `dtype`) = src. dtype must satisfy cli_is_float_storage. */
void cli_store_floats(fmoe_dtype dtype, void *dst, const float *src, size_t n);

/* dst = src (n elements of `dtype`) as f32. */
void cli_load_floats(fmoe_dtype dtype, float *dst, const void *src, size_t n);

#endif
