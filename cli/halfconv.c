/* cli/halfconv.c - bulk f32 <-> f32/bf16/f16 (see halfconv.h). */
#include "cli/halfconv.h"

#include "fusedmoe/kit/half.h"

int cli_is_float_storage(fmoe_dtype dtype)
{
    return dtype == FMOE_DTYPE_F32 || dtype == FMOE_DTYPE_BF16 || dtype == FMOE_DTYPE_F16;
}

void cli_store_floats(fmoe_dtype dtype, void *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        fmoe_store_float(dst, dtype, (int64_t)i, src[i]);
}

void cli_load_floats(fmoe_dtype dtype, float *dst, const void *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = fmoe_load_float(src, dtype, (int64_t)i);
}
