/*
 * plugins/cpu_arm/kernel_i8mm.c - the W4A8 micro-kernel with SMMLA
 * (FEAT_I8MM, Armv8.6; compiled with +i8mm, run only when HWCAP2 says
 * I8MM). The shape of KleidiAI's qai8dxp4x8_qsi4cxp8x8 GEMM: 4 activation
 * rows x 8 weight rows per pass.
 *
 * SMMLA acc, A, B multiplies two 2 x 8 int8 matrices, acc (2 x 2 int32,
 * row-major) += A . B^T. Per 16-column chunk the weights unpack as in the
 * dotprod kernel into lo[p] / hi[p] = [row 2p | row 2p+1] x 8 columns,
 * which is B as stored (kernels.h). A is two activation rows' 8 bytes side
 * by side, built with two 8-byte loads, so activations need no packing.
 * acc[r][p] then holds [a0.w2p, a0.w2p+1, a1.w2p, a1.w2p+1] for the row
 * pair r = (a0, a1); the low / high halves of acc[r][0..3] are row a0's /
 * a1's 8 sums. An odd last row is paired with itself and the copy dropped.
 * Zero point and scaling as in kernels.h (no fused multiply-add).
 */
#include <arm_neon.h>

#include "plugins/cpu_arm/kernels.h"

#define MR 4 /* activation rows per pass: two SMMLA row pairs */

static void finish(int32x4_t r03, int32x4_t r47, const int32_t *sums, const float *scales, int32_t o, float32x4_t *f)
{
    r03 = vmlaq_n_s32(r03, vld1q_s32(sums), o);
    r47 = vmlaq_n_s32(r47, vld1q_s32(sums + 4), o);
    f[0] = vaddq_f32(f[0], vmulq_f32(vcvtq_f32_s32(r03), vld1q_f32(scales)));
    f[1] = vaddq_f32(f[1], vmulq_f32(vcvtq_f32_s32(r47), vld1q_f32(scales + 4)));
}

static void rows(uint32_t m, const int8_t *const *a, const int32_t *o, const uint8_t *w, uint32_t groups, uint32_t bl,
                 float *out)
{
    size_t gbytes = carm_group_bytes(bl);
    const int8_t *x[MR];
    for (uint32_t i = 0; i < MR; i++)
        x[i] = a[i < m ? i : m - 1];
    uint32_t pairs = (m + 1) / 2;
    float32x4_t f[MR][2];
    for (uint32_t i = 0; i < MR; i++)
        f[i][0] = f[i][1] = vdupq_n_f32(0.0f);
    for (uint32_t g = 0; g < groups; g++) {
        const uint8_t *rec = w + g * gbytes;
        size_t g0 = (size_t)g * bl;
        int32x4_t acc[MR / 2][4];
        for (uint32_t r = 0; r < MR / 2; r++)
            for (uint32_t p = 0; p < 4; p++)
                acc[r][p] = vdupq_n_s32(0);
        for (uint32_t c = 0; c < bl / CARM_KC; c++) {
            const int8_t *b = (const int8_t *)rec + 64u * c;
            int8x16_t lo[4], hi[4];
            for (uint32_t p = 0; p < 4; p++) {
                int8x16_t v = vld1q_s8(b + 16u * p);
                lo[p] = vshrq_n_s8(vshlq_n_s8(v, 4), 4);
                hi[p] = vshrq_n_s8(v, 4);
            }
            size_t k = g0 + CARM_KC * c;
            for (uint32_t r = 0; r < pairs; r++) {
                const int8_t *x0 = x[2 * r] + k, *x1 = x[2 * r + 1] + k;
                int8x16_t a_lo = vcombine_s8(vld1_s8(x0), vld1_s8(x1));
                int8x16_t a_hi = vcombine_s8(vld1_s8(x0 + 8), vld1_s8(x1 + 8));
                for (uint32_t p = 0; p < 4; p++) {
                    acc[r][p] = vmmlaq_s32(acc[r][p], a_lo, lo[p]);
                    acc[r][p] = vmmlaq_s32(acc[r][p], a_hi, hi[p]);
                }
            }
        }
        const int32_t *sums = (const int32_t *)(rec + (size_t)bl * CARM_NR / 2);
        const float *scales = (const float *)(sums + CARM_NR);
        for (uint32_t r = 0; r < pairs; r++) {
            uint32_t i0 = 2 * r, i1 = 2 * r + 1 < m ? 2 * r + 1 : 2 * r;
            finish(vcombine_s32(vget_low_s32(acc[r][0]), vget_low_s32(acc[r][1])),
                   vcombine_s32(vget_low_s32(acc[r][2]), vget_low_s32(acc[r][3])), sums, scales, o[i0], f[i0]);
            if (i1 != i0)
                finish(vcombine_s32(vget_high_s32(acc[r][0]), vget_high_s32(acc[r][1])),
                       vcombine_s32(vget_high_s32(acc[r][2]), vget_high_s32(acc[r][3])), sums, scales, o[i1], f[i1]);
        }
    }
    for (uint32_t i = 0; i < m; i++) {
        vst1q_f32(out + i * CARM_NR, f[i][0]);
        vst1q_f32(out + i * CARM_NR + 4, f[i][1]);
    }
}

void carm_kernel_i8mm(uint32_t m, const int8_t *const *a, const int32_t *o, const uint8_t *w, uint32_t groups,
                      uint32_t bl, float *out)
{
    for (uint32_t i = 0; i < m; i += MR)
        rows(m - i < MR ? m - i : MR, a + i, o + i, w, groups, bl, out + (size_t)i * CARM_NR);
}
