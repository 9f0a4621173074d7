/*
 * plugins/cuda/sm100_layout.c - the host side of the native SM100
 * block-scaled path (sm100_layout.h): when it is chosen, its workspace, and
 * the weight scales swizzled at finalize.
 */
#include "plugins/cuda/sm100_layout.h"

#include <string.h>

#include "plugins/cuda/cuda_api.h"

int fmcu_sm100_native(int quant, int major, int minor, uint32_t hidden, uint32_t inter)
{
    (void)minor; /* sm_100a code runs on every 10.x (B200, GB200, B300) */
    if (major != 10 || hidden % FMCU_SM100_K_ALIGN || inter % FMCU_SM100_K_ALIGN || hidden == 0 || inter == 0)
        return 0;
    return quant == FMCU_Q_NVFP4_A4 ? FMCU_SM100_NVFP4 : quant == FMCU_Q_MXFP4_A4 ? FMCU_SM100_MXFP4 : 0;
}

static size_t align256(size_t x)
{
    return (x + 255) & ~(size_t)255;
}

void fmcu_sm100_workspace_layout(uint64_t rows, uint32_t experts, uint32_t hidden, uint32_t inter, int gated,
                                 uint32_t vec, size_t args_bytes, size_t gemm13_bytes, size_t gemm2_bytes,
                                 fmcu_sm100_ws *ws)
{
    const uint64_t kmax = hidden > inter ? hidden : inter;
    const uint64_t rows13 = (gated ? 2ull : 1ull) * inter;
    const uint64_t nmax = rows13 > hidden ? rows13 : hidden;
    size_t at = 0;
    memset(ws, 0, sizeof *ws);
    ws->a_codes = at;
    at = align256(at + (size_t)(rows * (kmax / 2)));
    ws->a_sf = at;
    ws->a_sf_bytes = (size_t)fmcu_sm100_a_sf_rows((int64_t)rows, experts) * (size_t)((kmax / vec + 3) / 4 * 4);
    at = align256(at + ws->a_sf_bytes);
    ws->d = at;
    at = align256(at + (size_t)(rows * nmax * sizeof(float)));
    ws->args13 = at;
    at = align256(at + args_bytes);
    ws->args2 = at;
    at = align256(at + args_bytes);
    ws->gemm13 = at;
    at = align256(at + gemm13_bytes);
    ws->gemm2 = at;
    at = align256(at + gemm2_bytes);
    ws->total = at;
}

void fmcu_sm100_swizzle_weight_sf(uint32_t experts, uint32_t rows, uint32_t sf_cols, const uint8_t *linear,
                                  uint8_t *out)
{
    const size_t per = (size_t)fmcu_sm100_sf_bytes(rows, sf_cols);
    memset(out, 0, per * experts);
    for (uint32_t e = 0; e < experts; e++) {
        const uint8_t *src = linear + (size_t)e * rows * sf_cols;
        uint8_t *dst = out + (size_t)e * per;
        for (uint32_t m = 0; m < rows; m++)
            for (uint32_t kb = 0; kb < sf_cols; kb++)
                dst[fmcu_sm100_sf_offset(m, kb, sf_cols)] = src[(size_t)m * sf_cols + kb];
    }
}
