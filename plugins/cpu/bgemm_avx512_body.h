/*
 * plugins/cpu/bgemm_avx512_body.h - the blocking shared by the two AVX-512
 * kernels of bgemm.h, included by bgemm_avx512.c (FMA on widened values)
 * and bgemm_avx512bf16.c (vdpbf16ps), each defining first:
 *
 *   ACC_STEP(acc, w, p)  acc += the pair products of weight zmm w (16 rows'
 *                        pairs) and activation pair p (a broadcast word),
 *                        odd element first (bgemm.h's order)
 *   KERNEL_FN, KERNEL_NAME, KERNEL_SET
 *
 * A call runs nt tiles side by side (nt memory streams, each prefetched
 * PF_STEPS pair steps ahead) against a group of g activation rows: 4 zmm
 * per tile and row, nt * g <= 4, so 16 accumulators stay in registers.
 * More rows than g: the K block (CPU_BKBLOCK_BYTES of the nt tiles) is
 * streamed by the first group and rerun from L1 by the others, the
 * partial sums kept in t->out between blocks; the first group then also
 * prefetches the next block into L2, so memory keeps streaming while the
 * other groups compute. t->ahead (the next call's first tile) is
 * prefetched over this call's last PF_STEPS steps, as if it continued
 * tile 0's stream: the next call starts warm. It used to be prefetched in
 * step from the first step, a fifth stream nt tiles (2 MiB at K = 4096)
 * ahead, which is the size of L2: the lines were evicted before use and
 * streaming at one row fell from ~30 to ~17 GB/s on two threads of the CI
 * machine (docs/CPU.md, "bf16 decode").
 */
#include <immintrin.h>
#include <string.h>

#include "plugins/cpu/bgemm.h"

#define INLINE static inline __attribute__((always_inline))
/* The register-blocked loops must be unrolled (GCC at -O2 keeps their
 * accumulators in memory otherwise). */
#define UNROLL _Pragma("GCC unroll 16")
/* 8 KiB ahead in each stream: measured best with 16-32 on the CI machine. */
#ifndef PF_STEPS
#define PF_STEPS 32
#endif
#ifndef PF_HINT
#define PF_HINT _MM_HINT_T0
#endif

/* The activation pair of step s (a[2s+1] = 0 past an odd K). */
INLINE __m512i apair(const uint16_t *a, uint32_t s, uint32_t k)
{
    uint32_t v = a[2 * s];
    if (2 * s + 1 < k)
        memcpy(&v, a + 2 * s, sizeof v);
    return _mm512_set1_epi32((int)v);
}

INLINE void block(cpu_btile *t, uint32_t s0, uint32_t s1, uint32_t m0, uint32_t far, const uint32_t nt,
                  const uint32_t g)
{
    const uint32_t pairs = (t->k + 1) / 2;
    __m512 acc[4][4][4]; /* [tile][row][16-row strip]; nt * g <= 4 used */
    UNROLL
    for (uint32_t i = 0; i < nt; i++)
        UNROLL
    for (uint32_t m = 0; m < g; m++)
        UNROLL
    for (int j = 0; j < 4; j++)
        acc[i][m][j] = s0 == 0 ? _mm512_setzero_ps() : _mm512_loadu_ps(t->out[i][m0 + m] + 16 * j);
    for (uint32_t s = s0; s < s1; s++) {
        __m512i p[4];
        UNROLL
        for (uint32_t m = 0; m < g; m++)
            p[m] = apair(t->a[m0 + m], s, t->k);
        UNROLL
        for (uint32_t i = 0; i < nt; i++) {
            const uint16_t *w = t->w[i] + (size_t)s * 2 * CPU_BNR;
            if (m0 == 0) { /* later groups find the block in L1 */
                UNROLL
                for (int l = 0; l < 4; l++)
                    _mm_prefetch((const char *)(w + PF_STEPS * 2 * CPU_BNR + 32 * l), PF_HINT);
                if (far)
                    UNROLL
                for (int l = 0; l < 4; l++)
                    _mm_prefetch((const char *)(w + (size_t)far * 2 * CPU_BNR + 32 * l), _MM_HINT_T1);
                if (i == 0 && t->ahead && s + PF_STEPS >= pairs)
                    UNROLL
                for (int l = 0; l < 4; l++)
                    _mm_prefetch((const char *)(t->ahead + (size_t)(s + PF_STEPS - pairs) * 2 * CPU_BNR + 32 * l),
                                 PF_HINT);
            }
            UNROLL
            for (int j = 0; j < 4; j++) {
                __m512i wv = _mm512_load_si512((const void *)(w + 32 * j));
                UNROLL
                for (uint32_t m = 0; m < g; m++)
                    ACC_STEP(acc[i][m][j], wv, p[m]);
            }
        }
    }
    UNROLL
    for (uint32_t i = 0; i < nt; i++)
        UNROLL
    for (uint32_t m = 0; m < g; m++)
        UNROLL
    for (int j = 0; j < 4; j++)
        _mm512_storeu_ps(t->out[i][m0 + m] + 16 * j, acc[i][m][j]);
}

/* Every group of rows over one K block, with nt and the group size fixed. */
INLINE void groups(cpu_btile *t, uint32_t s0, uint32_t s1, uint32_t kb, const uint32_t nt, const uint32_t g)
{
    uint32_t m0 = 0, far = t->mr > g ? kb : 0;
    for (; m0 + g <= t->mr; m0 += g)
        block(t, s0, s1, m0, far, nt, g);
    switch (t->mr - m0) { /* the rows left: fewer than g */
    case 1:
        block(t, s0, s1, m0, far, nt, 1);
        break;
    case 2:
        block(t, s0, s1, m0, far, nt, 2);
        break;
    case 3:
        block(t, s0, s1, m0, far, nt, 3);
        break;
    default:
        break;
    }
}

static void KERNEL_FN(cpu_btile *t)
{
    uint32_t pairs = (t->k + 1) / 2, nt = t->nt;
    uint32_t kb = CPU_BKBLOCK_BYTES / (nt * 2 * CPU_BNR * 2);
    for (uint32_t s0 = 0; s0 < pairs; s0 += kb) {
        uint32_t s1 = pairs - s0 < kb ? pairs : s0 + kb;
        switch (nt) {
        case 1:
            groups(t, s0, s1, kb, 1, 4);
            break;
        case 2:
            groups(t, s0, s1, kb, 2, 2);
            break;
        case 3:
            groups(t, s0, s1, kb, 3, 1);
            break;
        default:
            groups(t, s0, s1, kb, 4, 1);
            break;
        }
    }
}

const cpu_bkernels KERNEL_SET = {.name = KERNEL_NAME, .tile = KERNEL_FN};
