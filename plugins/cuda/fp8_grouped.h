/*
 * plugins/cuda/fp8_grouped.h - our own Hopper grouped FP8 GEMM
 * (fp8_grouped_sm90.cu): D = round_bf16(acc * (s_row * s_col)) over the
 * expert-sorted rows of the prefill path, for the fp8 tensor and channel
 * schemes. Host-callable C++ (the prefill path and tests/cuda call it).
 *
 *   A  [rows_cap, K] e4m3, rows sorted by expert: expert e owns rows
 *      offsets[e] .. offsets[e+1] (device memory, written by the plan)
 *   B  [E, N, K] e4m3 (the expert's weight rows, K contiguous)
 *   D  [rows, N] bf16; only the rows of some expert are written
 *   s_row  per row (row_vec) or one value; s_col [E, N] (col_vec) or [E]
 *
 * Why not CUTLASS's grouped kernels: they rewrite a TMA descriptor per
 * expert whenever a persistent CTA moves to another group, and their
 * promoted FP8 main loop is limited to 128x128 cooperative or 64x192
 * ping-pong tiles. Here one 2-D descriptor covers all of A and one all of
 * B ([E*N, K]); a tile is (expert, 128-row block, BN-column block), its A
 * rows start at offsets[e] + 128*m (any row: TMA does not need alignment
 * to the tile), rows past the expert's end are computed and not stored,
 * and TMA zero-fills past K and past rows_cap.
 *
 * Accumulation: `promote` restarts wgmma's accumulator every 128 K and
 * adds it into f32 registers (the schedule of CUTLASS's promoted FP8 main
 * loop, DeepSeek-V3 3.3.2), else one accumulator over all of K ("fast
 * accumulation").
 */
#ifndef FMOE_PLUGIN_CUDA_FP8_GROUPED_H
#define FMOE_PLUGIN_CUDA_FP8_GROUPED_H

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

/* Gated SiLU in the epilogue (GEMM1 of a gated SiLU layer): B's rows are
 * gate rows 0..I-1 then up rows I..2I-1 of each expert (N = 2I, the
 * layout as loaded); a tile takes BN/2 gate rows and the same BN/2 up rows,
 * so each thread holds both halves of its activation columns, and the
 * epilogue writes a = act(round_bf16(g * s), round_bf16(u * s)) as bf16
 * [rows, I] instead of D. The f32 fast path's doubtful pairs (about 1 in
 * 1000, fmcu_act::act_bf16_fast) leave their rounded gate and up in gu at
 * (row, 2j) and their bit in slow (bit row * I + j, zeroed by the caller)
 * for prefill_sm90.cu's fixup_kernel. */
struct fmcu_fp8g_act {
    __nv_bfloat16 *out;      /* [rows_cap, I] */
    float limit;             /* SiLU limit, +inf for none */
    uint32_t *amax;          /* non-NULL: atomicMax of max |a| (f32 bits) */
    __nv_bfloat16 *gu;       /* [rows_cap, 2I] */
    uint32_t *slow;          /* [rows_cap * I / 32] */
};

struct fmcu_fp8g_args {
    const uint8_t *a;        /* [rows_cap, K] */
    const uint8_t *b;        /* [E, N, K] */
    __nv_bfloat16 *d;        /* [rows_cap, N] */
    const float *s_row;      /* [rows_cap] when row_vec, else [1] */
    const float *s_col;      /* [E, N] when col_vec, else [E] */
    const int32_t *offsets;  /* [E + 1], device */
    int row_vec, col_vec;
    uint32_t E, N, K;        /* K, N multiples of 16 */
    int64_t rows_cap;
    const fmcu_fp8g_act *act; /* NULL: store D */
};

/* Tile kinds: columns per tile and accumulation. */
enum fmcu_fp8g_kind {
    FMCU_FP8G_N128_PROMOTED,
    FMCU_FP8G_N192_PROMOTED,
    FMCU_FP8G_N256_FAST,
    FMCU_FP8G_N128_FAST,
    FMCU_FP8G_KINDS
};

/* The largest number of experts the kernel's tile table holds. */
#define FMCU_FP8G_MAX_EXPERTS 1024

/* Enqueue the GEMM on `st` on `sms` persistent CTAs (the device's
 * multiprocessor count). No allocation, no synchronization: graph
 * capturable. Returns cudaErrorInvalidValue for arguments it cannot
 * serve (E > FMCU_FP8G_MAX_EXPERTS, K or N not multiples of 16, misaligned
 * pointers; with act, N a multiple of 32), or the error of encoding the TMA
 * descriptors or launching. */
cudaError_t fmcu_fp8g_launch(const fmcu_fp8g_args *args, fmcu_fp8g_kind kind, int sms, cudaStream_t st);

#endif
