/*
 * plugins/cpu_arm/kernel_dotprod.c - the W4A8 micro-kernel with SDOT
 * (FEAT_DotProd, Armv8.2; compiled with +dotprod, run only when HWCAP says
 * ASIMDDP). The shape of KleidiAI's qai8dxp1x8_qsi4cxp8x8 GEMV, four
 * activation rows at a time so each unpacked weight chunk serves four rows.
 *
 * Per 16-column chunk of a group: four 16-byte loads hold the 8 rows x 16
 * columns (layout in kernels.h); shifting each byte left then arithmetic
 * right by 4 sign-extends the low nibbles (columns 0..7), an arithmetic
 * right shift the high nibbles (columns 8..15). For activation row i the
 * 8 bytes of columns 0..7 are duplicated into both halves of a vector, and
 *   SDOT acc[i][p], w_lo[p], a_lo
 * adds to lane 0/1 the dot products of row 2p with columns 0..3 / 4..7 and
 * to lanes 2/3 those of row 2p+1; the same with the high halves. At the end
 * of a group pairwise adds (ADDP) fold the lanes into the 8 row sums, the
 * zero-point term o * sum(w) is added in int32, and the f32 scaling follows
 * the contract (multiply, then add: no fused multiply-add).
 */
#include <arm_neon.h>

#include "plugins/cpu_arm/kernels.h"

#define MR 4 /* activation rows per pass */

static void rows(uint32_t m, const int8_t *const *a, const int32_t *o, const uint8_t *w, uint32_t groups, uint32_t bl,
                 float *out)
{
    size_t gbytes = carm_group_bytes(bl);
    float32x4_t f[MR][2];
    for (uint32_t i = 0; i < MR; i++)
        f[i][0] = f[i][1] = vdupq_n_f32(0.0f);
    for (uint32_t g = 0; g < groups; g++) {
        const uint8_t *rec = w + g * gbytes;
        int32x4_t acc[MR][4];
        for (uint32_t i = 0; i < MR; i++)
            for (uint32_t p = 0; p < 4; p++)
                acc[i][p] = vdupq_n_s32(0);
        for (uint32_t c = 0; c < bl / CARM_KC; c++) {
            const int8_t *b = (const int8_t *)rec + 64u * c;
            int8x16_t lo[4], hi[4];
            for (uint32_t p = 0; p < 4; p++) {
                int8x16_t v = vld1q_s8(b + 16u * p);
                lo[p] = vshrq_n_s8(vshlq_n_s8(v, 4), 4);
                hi[p] = vshrq_n_s8(v, 4);
            }
            for (uint32_t i = 0; i < m; i++) {
                const int8_t *x = a[i] + (size_t)g * bl + CARM_KC * c;
                int8x8_t x_lo = vld1_s8(x), x_hi = vld1_s8(x + 8);
                int8x16_t d_lo = vcombine_s8(x_lo, x_lo), d_hi = vcombine_s8(x_hi, x_hi);
                for (uint32_t p = 0; p < 4; p++) {
                    acc[i][p] = vdotq_s32(acc[i][p], lo[p], d_lo);
                    acc[i][p] = vdotq_s32(acc[i][p], hi[p], d_hi);
                }
            }
        }
        const int32_t *sums = (const int32_t *)(rec + (size_t)bl * CARM_NR / 2);
        const float *scales = (const float *)(sums + CARM_NR);
        int32x4_t sum03 = vld1q_s32(sums), sum47 = vld1q_s32(sums + 4);
        float32x4_t sc03 = vld1q_f32(scales), sc47 = vld1q_f32(scales + 4);
        for (uint32_t i = 0; i < m; i++) {
            int32x4_t r03 = vmlaq_n_s32(vpaddq_s32(acc[i][0], acc[i][1]), sum03, o[i]);
            int32x4_t r47 = vmlaq_n_s32(vpaddq_s32(acc[i][2], acc[i][3]), sum47, o[i]);
            f[i][0] = vaddq_f32(f[i][0], vmulq_f32(vcvtq_f32_s32(r03), sc03));
            f[i][1] = vaddq_f32(f[i][1], vmulq_f32(vcvtq_f32_s32(r47), sc47));
        }
    }
    for (uint32_t i = 0; i < m; i++) {
        vst1q_f32(out + i * CARM_NR, f[i][0]);
        vst1q_f32(out + i * CARM_NR + 4, f[i][1]);
    }
}

void carm_kernel_dotprod(uint32_t m, const int8_t *const *a, const int32_t *o, const uint8_t *w, uint32_t groups,
                         uint32_t bl, float *out)
{
    for (uint32_t i = 0; i < m; i += MR)
        rows(m - i < MR ? m - i : MR, a + i, o + i, w, groups, bl, out + (size_t)i * CARM_NR);
}
