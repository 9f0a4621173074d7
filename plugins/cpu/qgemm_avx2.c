/*
 * plugins/cpu/qgemm_avx2.c - the AVX2 kernels of qgemm.h. Compiled with
 * -mavx2 for this file only; called only when isa.c found AVX2 and the OS
 * saving the AVX state.
 *
 * A tile's 64 bytes per K step are two ymm (rows 0-7 and 8-15). Products
 * go through vpmaddubsw (u8 x s8, pairs summed to s16 with saturation)
 * and vpmaddwd with ones (to int32), arranged so the s16 step cannot
 * saturate:
 *   int8: vpmaddubsw(|w|, sign(a, w)): |w| <= 128, |a| <= 127, a pair
 *         <= 32512;
 *   int4: vpmaddubsw(w + 8, a): a pair <= 2*15*128 = 3840, and the low and
 *         high nibble halves are added in s16 (<= 7680) before widening;
 *         the correction -8*qsum + off*wsum is applied per group.
 * mr = 2 rows per call: four int32 accumulators, the float sums and the
 * unpacked weights fit the 16 ymm registers. Prefetch as in
 * qgemm_avx512.c (own stream into L1, t->ahead into L2).
 */
#include <immintrin.h>
#include <string.h>

#include "plugins/cpu/qgemm.h"

#define INLINE   static inline __attribute__((always_inline))
#define PF_BYTES 2048

INLINE void prefetch_step(const cpu_qtile *t, size_t off)
{
    _mm_prefetch((const char *)(t->w + off + PF_BYTES), _MM_HINT_T0);
    if (t->ahead)
        _mm_prefetch((const char *)(t->ahead + off), _MM_HINT_T1);
}
#define AVX2_MR 2

INLINE __m256i bcast4(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

INLINE void i8_body(cpu_qtile *t, const uint32_t mr)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i acc[AVX2_MR][2];
    for (uint32_t m = 0; m < mr; m++)
        acc[m][0] = acc[m][1] = _mm256_setzero_si256();
    uint32_t steps = t->kp / 4;
    for (uint32_t s = 0; s < steps; s++) {
        prefetch_step(t, (size_t)s * 64);
        __m256i w0 = _mm256_loadu_si256((const __m256i *)(t->w + (size_t)s * 64));
        __m256i w1 = _mm256_loadu_si256((const __m256i *)(t->w + (size_t)s * 64 + 32));
        __m256i aw0 = _mm256_abs_epi8(w0), aw1 = _mm256_abs_epi8(w1);
        for (uint32_t m = 0; m < mr; m++) {
            __m256i a = bcast4(t->a[m] + 4 * s);
            __m256i p0 = _mm256_maddubs_epi16(aw0, _mm256_sign_epi8(a, w0));
            __m256i p1 = _mm256_maddubs_epi16(aw1, _mm256_sign_epi8(a, w1));
            acc[m][0] = _mm256_add_epi32(acc[m][0], _mm256_madd_epi16(p0, ones));
            acc[m][1] = _mm256_add_epi32(acc[m][1], _mm256_madd_epi16(p1, ones));
        }
    }
    for (uint32_t h = 0; h < 2; h++) {
        __m256 sc = _mm256_loadu_ps(t->gscale + 8 * h);
        for (uint32_t m = 0; m < mr; m++)
            _mm256_storeu_ps(t->out[m] + 8 * h, _mm256_mul_ps(sc, _mm256_cvtepi32_ps(acc[m][h])));
    }
}

INLINE void i4_body(cpu_qtile *t, const uint32_t mr)
{
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i mask = _mm256_set1_epi8(0x0F);
    __m256 f[AVX2_MR][2];
    __m256i acc[AVX2_MR][2];
    for (uint32_t m = 0; m < mr; m++)
        f[m][0] = f[m][1] = _mm256_setzero_ps();
    uint32_t steps = t->group / 8;
    for (uint32_t g = 0; g < t->groups; g++) {
        for (uint32_t m = 0; m < mr; m++)
            acc[m][0] = acc[m][1] = _mm256_setzero_si256();
        for (uint32_t s = g * steps; s < (g + 1) * steps; s++) {
            prefetch_step(t, (size_t)s * 64);
            __m256i v0 = _mm256_loadu_si256((const __m256i *)(t->w + (size_t)s * 64));
            __m256i v1 = _mm256_loadu_si256((const __m256i *)(t->w + (size_t)s * 64 + 32));
            __m256i lo0 = _mm256_and_si256(v0, mask), hi0 = _mm256_and_si256(_mm256_srli_epi16(v0, 4), mask);
            __m256i lo1 = _mm256_and_si256(v1, mask), hi1 = _mm256_and_si256(_mm256_srli_epi16(v1, 4), mask);
            for (uint32_t m = 0; m < mr; m++) {
                __m256i alo = bcast4(t->a[m] + 8 * s), ahi = bcast4(t->a[m] + 8 * s + 4);
                __m256i p0 = _mm256_add_epi16(_mm256_maddubs_epi16(lo0, alo), _mm256_maddubs_epi16(hi0, ahi));
                __m256i p1 = _mm256_add_epi16(_mm256_maddubs_epi16(lo1, alo), _mm256_maddubs_epi16(hi1, ahi));
                acc[m][0] = _mm256_add_epi32(acc[m][0], _mm256_madd_epi16(p0, ones));
                acc[m][1] = _mm256_add_epi32(acc[m][1], _mm256_madd_epi16(p1, ones));
            }
        }
        for (uint32_t h = 0; h < 2; h++) {
            __m256i ws = _mm256_loadu_si256((const __m256i *)(t->wsum + g * CPU_NR + 8 * h));
            __m256 sc = _mm256_loadu_ps(t->gscale + g * CPU_NR + 8 * h);
            for (uint32_t m = 0; m < mr; m++) {
                __m256i dot = _mm256_sub_epi32(acc[m][h], _mm256_set1_epi32(8 * t->qsum[m][g]));
                dot = _mm256_add_epi32(dot, _mm256_mullo_epi32(_mm256_set1_epi32(t->off[m]), ws));
                f[m][h] = _mm256_add_ps(f[m][h], _mm256_mul_ps(sc, _mm256_cvtepi32_ps(dot)));
            }
        }
    }
    for (uint32_t m = 0; m < mr; m++) {
        _mm256_storeu_ps(t->out[m], f[m][0]);
        _mm256_storeu_ps(t->out[m] + 8, f[m][1]);
    }
}

/* Callers pass mr <= cpu_kernels_avx2.mr. */
static void avx2_i8(cpu_qtile *t)
{
    if (t->mr == 1)
        i8_body(t, 1);
    else
        i8_body(t, 2);
}

static void avx2_i4(cpu_qtile *t)
{
    if (t->mr == 1)
        i4_body(t, 1);
    else
        i4_body(t, 2);
}

const cpu_kernels cpu_kernels_avx2 = {.name = "avx2", .mr = AVX2_MR, .i8 = avx2_i8, .i4 = avx2_i4};
