/*
 * plugins/cpu/bgemm_avx512bf16.c - the AVX-512 BF16 kernel of bgemm.h.
 * Compiled with -mavx512f -mavx512bf16 for this file only; called only
 * when isa.c found AVX512_BF16 and the OS saving the AVX-512 state.
 *
 * A zmm of a tile's pair step holds 16 rows' (w[2s], w[2s+1]); with the
 * activation's (a[2s], a[2s+1]) word broadcast, one vdpbf16ps adds both
 * products into 16 f32 lanes, odd element first, each step rounded - the
 * order bgemm.h defines. Blocking: bgemm_avx512_body.h.
 */
#include <immintrin.h>

#define ACC_STEP(acc, w, p) ((acc) = _mm512_dpbf16_ps((acc), (__m512bh)(w), (__m512bh)(p)))
#define KERNEL_FN           bf16_tile
#define KERNEL_NAME         "avx512_bf16"
#define KERNEL_SET          cpu_bkernels_avx512_bf16

#include "plugins/cpu/bgemm_avx512_body.h"
