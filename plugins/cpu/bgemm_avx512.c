/*
 * plugins/cpu/bgemm_avx512.c - the AVX-512F kernel of bgemm.h, for CPUs
 * with AVX-512 but without BF16 (Skylake-SP to Ice Lake). Compiled with
 * -mavx512f for this file only; called only when isa.c found AVX-512 and
 * the OS saving its state.
 *
 * A bf16 is the high half of an f32, so a lane holding (w[2s], w[2s+1])
 * gives w[2s+1] as an f32 by masking off the low half and w[2s] by
 * shifting it up: two FMAs per zmm and activation row, odd element first
 * (bgemm.h's order; the products are exact, so an FMA rounds as
 * vdpbf16ps's add does). Blocking: bgemm_avx512_body.h.
 */
#include <immintrin.h>

static inline __attribute__((always_inline)) __m512 odd_f32(__m512i v)
{
    return _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32((int)0xFFFF0000u)));
}

static inline __attribute__((always_inline)) __m512 even_f32(__m512i v)
{
    return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
}

#define ACC_STEP(acc, w, p) \
    ((acc) = _mm512_fmadd_ps(even_f32(w), even_f32(p), _mm512_fmadd_ps(odd_f32(w), odd_f32(p), (acc))))
#define KERNEL_FN   avx512_tile
#define KERNEL_NAME "avx512_vnni"
#define KERNEL_SET  cpu_bkernels_avx512

#include "plugins/cpu/bgemm_avx512_body.h"
