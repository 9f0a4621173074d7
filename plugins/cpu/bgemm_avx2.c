/*
 * plugins/cpu/bgemm_avx2.c - the AVX2 + FMA kernel of bgemm.h. Compiled
 * with -mavx2 -mfma for this file only; called only when isa.c found both
 * and the OS saving the AVX state.
 *
 * A pair step of a tile is eight ymm (8 rows each); the odd element of a
 * lane is its high half as an f32 (mask), the even one its low half
 * shifted up: two FMAs per ymm, odd first (bgemm.h's order). One tile and
 * one activation row at a time: its 8 accumulators, the weights and the
 * two broadcasts fit the 16 ymm (so the nt tiles of a call are one stream
 * after another here; the last one prefetches t->ahead into L2 in step).
 * With more rows each K block (CPU_BKBLOCK_BYTES) is streamed from memory
 * once and rerun from L1.
 */
#include <immintrin.h>
#include <string.h>

#include "plugins/cpu/bgemm.h"

#define INLINE static inline __attribute__((always_inline))
/* The register-blocked loops must be unrolled (GCC at -O2 keeps their
 * accumulators in memory otherwise). */
#define UNROLL   _Pragma("GCC unroll 16")
#define PF_STEPS 32

INLINE __m256i apair(const uint16_t *a, uint32_t s, uint32_t k)
{
    uint32_t v = a[2 * s];
    if (2 * s + 1 < k)
        memcpy(&v, a + 2 * s, sizeof v);
    return _mm256_set1_epi32((int)v);
}

static void block(cpu_btile *t, uint32_t i, uint32_t s0, uint32_t s1, uint32_t m)
{
    const __m256i mask = _mm256_set1_epi32((int)0xFFFF0000u);
    float *out = t->out[i][m];
    __m256 acc[8];
    UNROLL
    for (int j = 0; j < 8; j++)
        acc[j] = s0 == 0 ? _mm256_setzero_ps() : _mm256_loadu_ps(out + 8 * j);
    for (uint32_t s = s0; s < s1; s++) {
        const uint16_t *w = t->w[i] + (size_t)s * 2 * CPU_BNR;
        if (m == 0) { /* later rows find the block in L1 */
            UNROLL
            for (int l = 0; l < 4; l++)
                _mm_prefetch((const char *)(w + PF_STEPS * 2 * CPU_BNR + 32 * l), _MM_HINT_T0);
            if (i + 1 == t->nt && t->ahead) /* the next call's tile, into L2 */
                UNROLL
            for (int l = 0; l < 4; l++)
                _mm_prefetch((const char *)(t->ahead + (size_t)s * 2 * CPU_BNR + 32 * l), _MM_HINT_T1);
        }
        __m256i p = apair(t->a[m], s, t->k);
        __m256 ao = _mm256_castsi256_ps(_mm256_and_si256(p, mask));
        __m256 ae = _mm256_castsi256_ps(_mm256_slli_epi32(p, 16));
        UNROLL
        for (int j = 0; j < 8; j++) {
            __m256i v = _mm256_load_si256((const __m256i *)(w + 16 * j));
            acc[j] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(v, mask)), ao, acc[j]);
            acc[j] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(v, 16)), ae, acc[j]);
        }
    }
    UNROLL
    for (int j = 0; j < 8; j++)
        _mm256_storeu_ps(out + 8 * j, acc[j]);
}

static void avx2_tile(cpu_btile *t)
{
    uint32_t pairs = (t->k + 1) / 2, kb = CPU_BKBLOCK_BYTES / (2 * CPU_BNR * 2);
    for (uint32_t i = 0; i < t->nt; i++)
        for (uint32_t s0 = 0; s0 < pairs; s0 += kb) {
            uint32_t s1 = pairs - s0 < kb ? pairs : s0 + kb;
            for (uint32_t m = 0; m < t->mr; m++)
                block(t, i, s0, s1, m);
        }
}

const cpu_bkernels cpu_bkernels_avx2 = {.name = "avx2", .tile = avx2_tile};
