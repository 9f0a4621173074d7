/*
 * plugins/cpu/rowops_avx512.c - rowops.h in AVX-512F (compiled with
 * -mavx512f for this file only); called only where isa.c found AVX-512
 * enabled.
 */
#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "fusedmoe/kit/activation.h"
#include "fusedmoe/kit/half.h"
#include "fusedmoe/kit/w4a8_row.h"
#include "plugins/cpu/rowops.h"

/* ------------------------------------------------------------------------ */
/* Gated SiLU to bf16                                                        */
/* ------------------------------------------------------------------------ */

/* e^x for x in [-88, 88] in f32: x = n ln2 + r (Cody-Waite: ln2's high
 * part has 16 significant bits, so n * LN2_HI is exact for |n| <= 128 and
 * x - n * LN2_HI is exact), e^r by its Taylor polynomial to r^7 (|r| <=
 * 0.347: truncation 5e-9 relative), times 2^n exactly (vscalefps). Within
 * ~2 ulps of e^x. */
static inline __m512 exp_ps(__m512 x)
{
    const __m512 log2e = _mm512_set1_ps(1.44269504f), ln2_hi = _mm512_set1_ps(0.693145752f),
                 ln2_lo = _mm512_set1_ps(1.42860677e-6f);
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, ln2_hi, x);
    r = _mm512_fnmadd_ps(n, ln2_lo, r);
    __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

/* Lanes of v that are NaN or infinite (all exponent bits set). */
static inline __mmask16 not_finite(__m512 v)
{
    const __m512i e = _mm512_set1_epi32(0x7F800000);
    return _mm512_cmpeq_epi32_mask(_mm512_and_si512(_mm512_castps_si512(v), e), e);
}

/* The double path for one value (fmoe_activation_row on a row of one). */
static float silu_bf16_exact(const fmoe_layer_config *cfg, float g, float u)
{
    float h[2] = {g, u}, o;
    fmoe_activation_row(cfg, h, 1, &o);
    return fmoe_round_to(FMOE_DTYPE_BF16, o);
}

/*
 * f = silu(g) * u in f32: e^-g within ~2 ulps, then 1 + e, g / (1 + e) and
 * the product each correctly rounded: f is within ~4 ulps of the exact
 * value, which the double path rounds to f32 first (within 0.5 ulp). Both
 * round to the same bf16 unless a bf16 rounding midpoint lies between
 * them, so a value is taken when its 16 bits below bf16's precision are
 * more than 32 (ulps) from the midpoint 0x8000, it is finite and not tiny
 * (a product near the subnormals, or e^-g out of the polynomial's range:
 * g below -87), which is about 1 value in 1000 for random inputs.
 */
uint32_t cpu_silu_bf16_avx512(const fmoe_layer_config *cfg, const float *h, uint32_t I, float *out)
{
    uint32_t slow_count = 0;
    const float limit = cfg->swiglu_limit;
    const __m512 lim = _mm512_set1_ps(limit), nlim = _mm512_set1_ps(-limit), one = _mm512_set1_ps(1.0f),
                 tiny = _mm512_set1_ps(1e-30f), gmin = _mm512_set1_ps(-87.0f), gmax = _mm512_set1_ps(88.0f);
    const __m512i low = _mm512_set1_epi32(0xFFFF), mid = _mm512_set1_epi32(0x8000), margin = _mm512_set1_epi32(32),
                  keep = _mm512_set1_epi32((int)0xFFFF0000u), rnd = _mm512_set1_epi32(0x7FFF);
    for (uint32_t i = 0; i < I; i += 16) {
        __mmask16 k = I - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (I - i)) - 1);
        __m512 g = _mm512_maskz_loadu_ps(k, h + i), u = _mm512_maskz_loadu_ps(k, h + I + i);
        if (limit > 0.0f) { /* min/max return the second operand for NaN: NaN stays */
            g = _mm512_min_ps(lim, g);
            u = _mm512_max_ps(nlim, _mm512_min_ps(lim, u));
        }
        /* e^-g for g in [-87, 88] (above 88 it is 0 to f32 against 1 anyway;
         * below -87 the lane takes the double path). */
        __m512 e = exp_ps(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_min_ps(gmax, _mm512_max_ps(gmin, g))));
        __m512 f = _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), u);
        __m512i bits = _mm512_castps_si512(f);
        __m512i dist = _mm512_abs_epi32(_mm512_sub_epi32(_mm512_and_si512(bits, low), mid));
        __mmask16 ok = _mm512_cmpgt_epi32_mask(dist, margin);
        ok &= _mm512_cmp_ps_mask(_mm512_abs_ps(f), tiny, _CMP_GE_OQ) & ~not_finite(f);
        ok &= _mm512_cmp_ps_mask(g, gmin, _CMP_GE_OQ);
        /* Round to nearest bf16, ties to even (fmoe_f32_to_bf16 for finite values). */
        __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
        __m512i r = _mm512_and_si512(_mm512_add_epi32(bits, _mm512_add_epi32(rnd, lsb)), keep);
        _mm512_mask_storeu_ps(out + i, k, _mm512_castsi512_ps(r));
        for (__mmask16 slow = k & ~ok; slow; slow &= (__mmask16)(slow - 1)) {
            uint32_t j = i + (uint32_t)__builtin_ctz(slow);
            out[j] = silu_bf16_exact(cfg, h[j], h[I + j]);
            slow_count++;
        }
    }
    return slow_count;
}

/* ------------------------------------------------------------------------ */
/* Asymmetric int8 per row                                                   */
/* ------------------------------------------------------------------------ */

/* roundf: to nearest, halves away from zero. y - trunc(y) is exact. */
static inline __m512 round_half_away(__m512 y)
{
    __m512 t = _mm512_roundscale_ps(y, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __mmask16 up = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(y, t)), _mm512_set1_ps(0.5f), _CMP_GE_OQ);
    __m512i sign = _mm512_and_si512(_mm512_castps_si512(y), _mm512_set1_epi32((int)0x80000000u));
    __m512 step = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(_mm512_set1_ps(1.0f)), sign)); /* +-1 */
    return _mm512_mask_add_ps(t, up, t, step);
}

/* fmoe_w4a8_quantize_activations' arithmetic (core/formats/w4a8.c), step
 * for step: the range, the scale and zero point from the same function
 * (fmoe_w4a8_row_params), then q = clamp(roundf(x * s0) + zp) in 16 lanes. */
void cpu_quant_asym_avx512(const float *x, uint32_t n, uint32_t kp, uint32_t group, int8_t *q, int32_t *off,
                           float *scale, int32_t *qsum)
{
    __m512 vmn = _mm512_set1_ps(FLT_MAX), vmx = _mm512_set1_ps(-FLT_MAX);
    __mmask16 bad = 0;
    for (uint32_t i = 0; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        __m512 v = _mm512_maskz_loadu_ps(k, x + i);
        bad |= not_finite(v) & k;
        vmn = _mm512_mask_min_ps(vmn, k, vmn, v);
        vmx = _mm512_mask_max_ps(vmx, k, vmx, v);
    }
    memset(q, 0, kp);
    if (bad) {
        *off = 0;
        *scale = NAN;
    } else {
        float mn = _mm512_reduce_min_ps(vmn), mx = _mm512_reduce_max_ps(vmx);
        float s0;
        int32_t nzp;
        fmoe_w4a8_row_params(mn, mx, &s0, &nzp);
        const __m512 vs = _mm512_set1_ps(s0), vz = _mm512_set1_ps((float)nzp), lo = _mm512_set1_ps(-128.0f),
                     hi = _mm512_set1_ps(127.0f);
        for (uint32_t i = 0; i < n; i += 16) {
            __mmask16 k = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
            __m512 v = _mm512_add_ps(round_half_away(_mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), vs)), vz);
            v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
            _mm512_mask_cvtepi32_storeu_epi8(q + i, k, _mm512_cvtps_epi32(v));
        }
        *off = -nzp;
        *scale = 1.0f / s0;
    }
    for (uint32_t g = 0; g < kp / group; g++) {
        int32_t s = 0;
        for (uint32_t j = g * group; j < (g + 1) * group; j++)
            s += q[j];
        qsum[g] = s;
    }
}
