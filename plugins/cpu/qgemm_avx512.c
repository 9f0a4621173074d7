/*
 * plugins/cpu/qgemm_avx512.c - the AVX-512 VNNI kernels of qgemm.h.
 * Compiled with -mavx512f/bw/vl/vnni for this file only; called only when
 * isa.c found the CPU and the OS enable AVX-512 state and VNNI.
 *
 * One zmm holds the tile's 16 rows x 4 K values (64 bytes); each
 * activation row contributes a broadcast 32-bit word (4 K values) and one
 * vpdpbusd per 64 weight bytes: u8 x s8 products summed four at a time
 * into the 16 int32 lanes, without saturation.
 *   int8: the activation is the u8 operand (a + 128), corrected by
 *         -128 * wsum at the end;
 *   int4: the nibbles (w + 8, unsigned) are the u8 operand: low nibbles
 *         hold K values 0-3 of the 8-value step, high nibbles 4-7; the
 *         correction -8*qsum + off*wsum is applied per group, then the
 *         group's scale, accumulating in f32.
 * mr (rows per call) is a compile-time constant in each instantiation so
 * the accumulators stay in registers.
 *
 * Prefetch: each 64-byte step's line PF_BYTES ahead into L1, and, when the
 * caller names a later tile (t->ahead), that tile's matching line into L2:
 * two memory streams per thread instead of one, which is what lets decode
 * approach the machine's read bandwidth (one stream per thread reads ~23
 * GB/s on the CI machine, several ~30).
 */
#include <immintrin.h>
#include <string.h>

#include "plugins/cpu/qgemm.h"

#define INLINE static inline __attribute__((always_inline))
/* The register-blocked loops must be unrolled (GCC at -O2 keeps their
 * accumulators in memory otherwise). */
#define UNROLL _Pragma("GCC unroll 16")
#ifndef PF_BYTES
#define PF_BYTES 2048
#endif

INLINE void prefetch_step(const cpu_qtile *t, size_t off)
{
    _mm_prefetch((const char *)(t->w + off + PF_BYTES), _MM_HINT_T0);
    if (t->ahead)
        _mm_prefetch((const char *)(t->ahead + off), _MM_HINT_T1);
}

INLINE __m512i bcast4(const int8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

INLINE void i8_body(cpu_qtile *t, const uint32_t mr)
{
    __m512i acc[CPU_MR_MAX];
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    for (uint32_t m = 0; m < mr; m++)
        acc[m] = _mm512_setzero_si512();
    uint32_t steps = t->kp / 4;
    for (uint32_t s = 0; s < steps; s++) {
        prefetch_step(t, (size_t)s * 64);
        __m512i w = _mm512_loadu_si512((const void *)(t->w + (size_t)s * 64));
        for (uint32_t m = 0; m < mr; m++)
            acc[m] = _mm512_dpbusd_epi32(acc[m], _mm512_xor_si512(bcast4(t->a[m] + 4 * s), flip), w);
    }
    __m512i corr = _mm512_slli_epi32(_mm512_loadu_si512((const void *)t->wsum), 7);
    __m512 sc = _mm512_loadu_ps(t->gscale);
    for (uint32_t m = 0; m < mr; m++)
        _mm512_storeu_ps(t->out[m], _mm512_mul_ps(sc, _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[m], corr))));
}

/* int4. What it streams is only the nibbles and the scales (their bf16
 * copy when the tile has one, s16): the group's weight sum is computed
 * here instead of read from wsum, as sum(u) - 8 * group with u the
 * unsigned nibbles (padding nibbles are 8, weight 0), by one more vpdpbusd
 * per step of lo + hi against ones, shared by the rows - compute this
 * kernel has to spare, bytes it has not.
 *
 * The group's integer dot, qgemm.h's sum u*a - 8 qsum + off (sum(u) - 8
 * group), is gathered as: the accumulator starts at the row's constant
 * -8 qsum - 8 group off (scalar arithmetic), the vpdpbusd add sum u*a, and
 * the end adds off * sum(u). One or two rows keep a low-nibble and a
 * high-nibble chain each (vpdpbusd's latency would bound one chain); from
 * three rows one chain per row, as many independent chains as before and
 * fewer vector operations per group, which at those row counts is what
 * limits the kernel. Integer sums are exact, so the result is the same
 * bits as the portable kernel's. */
INLINE void i4_body(cpu_qtile *t, const uint32_t mr, const int s16, const int packed)
{
    const __m512i mask = _mm512_set1_epi8(0x0F), ones = _mm512_set1_epi8(1), eight_hi = _mm512_set1_epi32(8 << 16);
    const int two = mr <= 2;
    /* The group correction -8 qsum - 8 group off + off sum(u):
     *   packed: one vpdpwssd of (sum(u), 8) by the row's cpu_qcorr word
     *           (off, -qsum - group off) onto an accumulator that starts at 0;
     *   else, where sum(u) fits 16 bits (groups up to 2048 values): the
     *           constant part starts the accumulator and one vpdpwssd adds
     *           off * sum(u) (zero upper halves);
     *   else a 32-bit multiply. */
    const int narrow = t->group <= 2048;
    __m512 f[CPU_MR_MAX];
    __m512i alo[CPU_MR_MAX], ahi[CPU_MR_MAX];
    UNROLL
    for (uint32_t m = 0; m < mr; m++)
        f[m] = _mm512_setzero_ps();
    uint32_t steps = t->group / 8;
    for (uint32_t g = 0; g < t->groups; g++) {
        __m512i us = _mm512_setzero_si512();
        UNROLL
        for (uint32_t m = 0; m < mr; m++) {
            alo[m] = packed ? _mm512_setzero_si512()
                            : _mm512_set1_epi32(-8 * t->qsum[m][g] - 8 * (int32_t)t->group * t->off[m]);
            if (two)
                ahi[m] = _mm512_setzero_si512();
        }
        for (uint32_t s = g * steps; s < (g + 1) * steps; s++) {
            prefetch_step(t, (size_t)s * 64);
            __m512i v = _mm512_loadu_si512((const void *)(t->w + (size_t)s * 64));
            __m512i lo = _mm512_and_si512(v, mask);
            __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), mask);
            us = _mm512_dpbusd_epi32(us, _mm512_add_epi8(lo, hi), ones); /* bytes <= 30 */
            UNROLL
            for (uint32_t m = 0; m < mr; m++) {
                alo[m] = _mm512_dpbusd_epi32(alo[m], lo, bcast4(t->a[m] + 8 * s));
                if (two)
                    ahi[m] = _mm512_dpbusd_epi32(ahi[m], hi, bcast4(t->a[m] + 8 * s + 4));
                else
                    alo[m] = _mm512_dpbusd_epi32(alo[m], hi, bcast4(t->a[m] + 8 * s + 4));
            }
        }
        __m512 sc = s16 ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(
                                                                    (const __m256i *)(t->gscale16 + g * CPU_NR))),
                                                                16))
                        : _mm512_loadu_ps(t->gscale + g * CPU_NR);
        __m512i us8 = _mm512_add_epi32(us, eight_hi);
        UNROLL
        for (uint32_t m = 0; m < mr; m++) {
            __m512i dot = two ? _mm512_add_epi32(alo[m], ahi[m]) : alo[m];
            if (packed)
                dot = _mm512_dpwssd_epi32(dot, us8, _mm512_set1_epi32(t->qcorr[m][g]));
            else if (narrow)
                dot = _mm512_dpwssd_epi32(dot, us, _mm512_set1_epi32((int32_t)(uint16_t)t->off[m]));
            else
                dot = _mm512_add_epi32(dot, _mm512_mullo_epi32(_mm512_set1_epi32(t->off[m]), us));
            f[m] = _mm512_add_ps(f[m], _mm512_mul_ps(sc, _mm512_cvtepi32_ps(dot)));
        }
    }
    UNROLL
    for (uint32_t m = 0; m < mr; m++)
        _mm512_storeu_ps(t->out[m], f[m]);
}

static void vnni_i8(cpu_qtile *t)
{
    switch (t->mr) {
    case 1:
        i8_body(t, 1);
        break;
    case 2:
        i8_body(t, 2);
        break;
    case 3:
        i8_body(t, 3);
        break;
    case 4:
        i8_body(t, 4);
        break;
    case 5:
        i8_body(t, 5);
        break;
    case 6:
        i8_body(t, 6);
        break;
    case 7:
        i8_body(t, 7);
        break;
    default:
        i8_body(t, 8);
        break;
    }
}

/* One instantiation per row count, scale copy and correction form. */
#define I4_ROWS(S16, P) \
    switch (t->mr) { \
    case 1: \
        i4_body(t, 1, S16, P); \
        break; \
    case 2: \
        i4_body(t, 2, S16, P); \
        break; \
    case 3: \
        i4_body(t, 3, S16, P); \
        break; \
    case 4: \
        i4_body(t, 4, S16, P); \
        break; \
    case 5: \
        i4_body(t, 5, S16, P); \
        break; \
    case 6: \
        i4_body(t, 6, S16, P); \
        break; \
    case 7: \
        i4_body(t, 7, S16, P); \
        break; \
    default: \
        i4_body(t, 8, S16, P); \
        break; \
    }

static void vnni_i4(cpu_qtile *t)
{
    int packed = t->qcorr[0] != NULL && cpu_qcorr_fits(t->group);
    if (t->gscale16) {
        if (packed)
            I4_ROWS(1, 1)
        else
            I4_ROWS(1, 0)
        return;
    }
    if (packed)
        I4_ROWS(0, 1)
    else
        I4_ROWS(0, 0)
}

const cpu_kernels cpu_kernels_avx512_vnni = {.name = "avx512_vnni", .mr = 8, .i8 = vnni_i8, .i4 = vnni_i4};
