/*
 * fusedmoe/kit/half.h - scalar conversions between f32 and the 16-bit float types,
 * and element access for the activation dtypes (F32/BF16/F16). Header-only so
 * that the core and every plugin that compiles the reference math get the
 * same bits. Rounding is round-to-nearest-even; NaN stays NaN (quiet);
 * overflow to F16 gives +-inf, as hardware conversions do.
 */
#ifndef FMOE_KIT_HALF_H
#define FMOE_KIT_HALF_H

#include <stdint.h>

#include "fusedmoe/common.h"

static inline uint16_t fmoe_f32_to_bf16(float f);
static inline float fmoe_bf16_to_f32(uint16_t b);
static inline uint16_t fmoe_f32_to_f16(float f);
static inline float fmoe_f16_to_f32(uint16_t h);

/* Element i of a F32/BF16/F16 array, as float. Other dtypes: NaN. */
static inline float fmoe_load_float(const void *data, fmoe_dtype dtype, int64_t i);
/* Store v into element i of a F32/BF16/F16 array (rounded). */
static inline void fmoe_store_float(void *data, fmoe_dtype dtype, int64_t i, float v);
/* v rounded to the precision of `dtype` (F32: unchanged). */
static inline float fmoe_round_to(fmoe_dtype dtype, float v);

#include "fusedmoe/kit/half_impl.h"

#endif
