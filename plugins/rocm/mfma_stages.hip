/*
 * plugins/rocm/mfma_stages.hip - stage 2 on the matrix cores of CDNA2/3
 * (AMD targets only: the MFMA builtins have no NVIDIA spelling, so the
 * NVIDIA test build does not compile this file).
 *
 * One wave (64 lanes) computes a 16 x 16 tile of y = a2 . W2^T for 16
 * sorted rows of one expert, reading W2 in the 16x16 pre-shuffled layout:
 *   bf16 (gfx90a, gfx94x): v_mfma_f32_16x16x16bf16_1k, K steps of 16;
 *   e4m3fnuz (gfx94x):     v_mfma_f32_16x16x32_fp8_fp8, K steps of 32
 *                          (the MI300's FP8 is fnuz: the bytes prepare.c
 *                          and the quantizers produce).
 * Operands: lane l gives A[row l % 16][k0 + (l / 16) * kv + j] and
 * B[k ...][col l % 16] (kv = 4 bf16 or 8 fp8 values); it receives
 * D[row 4 * (l / 16) + i][col l % 16], i < 4. Partial sums are scaled per
 * scale group as in moe_stages.hip's stage 2, then rounded to bf16.
 *
 * STATUS: compiled into libfmoe-rocm-kernels.so for every AMD target and
 * checked for the MFMA instructions (tests/rocm), but NOT launched by the
 * forward yet: it has never run anywhere (no AMD GPU here), and the
 * non-MFMA stage 2 is the one the conformance suite has checked. Wiring
 * it in (behind a declared option first) needs a run on MI200/MI300.
 */
#include "plugins/rocm/device_math.h"
#include "plugins/rocm/launch.h"
#include "plugins/rocm/sorting.h"

#if !defined(__HIPCC__)
#error "mfma_stages.hip is for AMD targets (hipcc) only"
#endif

typedef float fmro_v4f __attribute__((ext_vector_type(4)));
typedef short fmro_v4s __attribute__((ext_vector_type(4)));

#define MFMA_TILE 16

template <bool FP8>
static __device__ inline fmro_v4f mfma_step(const fmro_layer_dev &L, const char *ws, int32_t entry, uint32_t expert,
                                            uint32_t n, uint32_t k0, unsigned lane, fmro_v4f acc)
{
#if defined(__gfx90a__) || defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__)
    uint32_t Ip = L.inter_pad, Hp = L.hidden_pad;
    if (!FP8) {
        const uint16_t *a = (const uint16_t *)(ws + L.ws.act);
        const uint16_t *w = (const uint16_t *)L.w2 + (size_t)expert * Hp * Ip;
        fmro_v4s av, bv;
        for (int j = 0; j < 4; j++) {
            uint32_t k = k0 + (lane / 16) * 4 + (uint32_t)j;
            av[j] = entry >= 0 ? (short)a[(size_t)entry * Ip + k] : (short)0;
            bv[j] = (short)w[fmro_shuffled_at(Ip, 2, n, k)];
        }
        return __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(av, bv, acc, 0, 0, 0);
    }
#if defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__)
    const uint8_t *a = (const uint8_t *)(ws + L.ws.a2);
    const uint8_t *w = (const uint8_t *)L.w2 + (size_t)expert * Hp * Ip;
    long av = 0, bv = 0;
    for (int j = 0; j < 8; j++) {
        uint32_t k = k0 + (lane / 16) * 8 + (uint32_t)j;
        long ab = entry >= 0 ? a[(size_t)entry * Ip + k] : 0;
        av |= ab << (8 * j);
        bv |= (long)w[fmro_shuffled_at(Ip, 1, n, k)] << (8 * j);
    }
    return __builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8(av, bv, acc, 0, 0, 0);
#else
    __builtin_trap(); /* gfx90a has no FP8 matrix cores: the launcher never sends it here */
#endif
#else
    (void)L, (void)ws, (void)entry, (void)expert, (void)n, (void)k0, (void)lane;
    __builtin_trap();
    return acc;
#endif
}

/* grid (sorted blocks, ceil(H / 16)), one wave per block. */
template <bool FP8> FMRO_KERNEL_TEMPLATE void fmro_mfma_stage2(fmro_layer_dev L, uint32_t m)
{
    uint32_t blk = blockIdx.x, n0 = blockIdx.y * MFMA_TILE, lane = threadIdx.x;
    const char *ws = (const char *)L.workspace;
    int32_t expert = ((const int32_t *)(ws + L.ws.sorted_expert))[blk];
    const uint32_t *num_valid = (const uint32_t *)(ws + L.ws.num_valid);
    if (expert < 0 || lane >= 64)
        return;
    uint32_t kstep = FP8 ? 32 : 16, groups = L.quant == FMRO_Q_BLOCK ? (L.inter + L.group - 1) / L.group : 1;
    uint32_t width = L.quant == FMRO_Q_BLOCK ? L.group : L.inter_pad;
    const float *a_scale = (const float *)(ws + L.ws.a2_scale);
    float *y = (float *)(ws + L.ws.y);
    for (uint32_t r0 = 0; r0 < FMRO_SORT_BLOCK; r0 += MFMA_TILE) {
        uint32_t e_in = blk * FMRO_SORT_BLOCK + r0 + lane % 16;
        int32_t entry = -1;
        if (e_in < num_valid[0] && FMRO_SORT_TOKEN(((const uint32_t *)(ws + L.ws.sorted_ids))[e_in]) < m)
            entry = (int32_t)e_in;
        uint32_t n_b = n0 + lane % 16 < L.hidden ? n0 + lane % 16 : L.hidden - 1; /* B column of this lane */
        fmro_v4f total = {0.0f, 0.0f, 0.0f, 0.0f};
        for (uint32_t g = 0; g < groups; g++) {
            uint32_t k0 = g * width, k1 = g + 1 == groups ? L.inter_pad : k0 + width;
            fmro_v4f part = {0.0f, 0.0f, 0.0f, 0.0f};
            for (uint32_t k = k0; k < k1; k += kstep)
                part = mfma_step<FP8>(L, ws, entry, (uint32_t)expert, n_b, k, lane, part);
            /* lane holds D[row 4 * (lane / 16) + i][col lane % 16] */
            for (int i = 0; i < 4; i++) {
                uint32_t e_out = blk * FMRO_SORT_BLOCK + r0 + 4 * (lane / 16) + (uint32_t)i;
                float sa = FP8 ? a_scale[(size_t)e_out * groups + g] : 1.0f;
                float sw = 1.0f;
                if (FP8) {
                    const float *s = L.w2_scale;
                    sw = L.quant == FMRO_Q_TENSOR    ? s[expert]
                         : L.quant == FMRO_Q_CHANNEL ? s[(size_t)expert * L.hidden + n_b]
                                                     : s[((size_t)expert * ((L.hidden + L.group - 1) / L.group) +
                                                          n_b / L.group) * groups + g];
                }
                total[i] += part[i] * sa * sw;
            }
        }
        uint32_t n = n0 + lane % 16;
        for (int i = 0; i < 4; i++) {
            uint32_t e_out = blk * FMRO_SORT_BLOCK + r0 + 4 * (lane / 16) + (uint32_t)i;
            if (n >= L.hidden || e_out >= num_valid[0] ||
                FMRO_SORT_TOKEN(((const uint32_t *)(ws + L.ws.sorted_ids))[e_out]) >= m)
                continue;
            float b = L.b2 && L.add_b2 ? fmro_bf16_to_f32(L.b2[(size_t)expert * L.hidden + n]) : 0.0f;
            y[(size_t)e_out * L.hidden + n] = fmro_round_bf16(total[i] + b);
        }
    }
}

/* Not called by the forward yet (see STATUS above). fp8: gfx94x only. */
void fmro_launch_mfma_stage2(const fmro_layer_dev *L, const fmro_sizes *z, int fp8, fmro_stream s)
{
    dim3 grid(z->blocks, (L->hidden + MFMA_TILE - 1) / MFMA_TILE);
    if (fp8)
        FMRO_LAUNCH(fmro_mfma_stage2<true>, grid, 64, 0, s, *L, z->m);
    else
        FMRO_LAUNCH(fmro_mfma_stage2<false>, grid, 64, 0, s, *L, z->m);
}
