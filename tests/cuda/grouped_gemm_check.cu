/*
 * tests/cuda/grouped_gemm_check.cu - plugins/cuda's own grouped GEMM
 * (grouped_gemm.h) on an sm_90 GPU, against a double-precision reference
 * computed on the device from the same e4m3 codes (or bf16 values) and
 * scales.
 *
 *   check mode (default): cases with empty experts, experts of 1, 64, 65,
 *   128, 129 and more rows (the last row block a half tile wherever it has
 *   at most 64 rows), N not a multiple of the tile width, K not a
 *   multiple of 128 (TMA zero-fills the tail), per-row/column or scalar
 *   scales, and rows past the last expert that must stay untouched (D is
 *   NaN-poisoned first); bf16 operands. Every tile kind, with whole tiles
 *   only and with half tiles (in the kind's tile order and in the other),
 *   whose bits must be the whole tiles'; the counter must be left zero. Per element:
 *       |ours - v| <= 2^-8 |v| + tol * s * sum_k |a_k b_k|
 *   v = s * sum_k a_k b_k in double, s = s_row * s_col; tol = 2^-11 for
 *   promoted kinds, 2^-8 for fast accumulation (wgmma's FP8 accumulator
 *   keeps about 14 bits, DeepSeek-V3 3.3.2), 2^-14 for bf16 (f32
 *   accumulation, no scales); and NMSE <= 1e-5 (1e-4 fast e4m3).
 *   Data: random e4m3 codes with exponents 2^-2..2^1 (never zero), from a
 *   fixed seed (--seed N to change it), printed on failure. The e2m1 kinds
 *   (weights converted inside the kernel) must give the bits of the bf16
 *   n128-fast kind on the same weights dequantized first
 *   (prefill_dequant.h), biases and output factors included. The int4
 *   kind (codes and 128-column group scales, zero points or none,
 *   converted and promoted inside the kernel) against a double reference
 *   of sum_g s_g sum_k a_k (q_k - 8 - zp_g), with the bf16 bound above
 *   (f32 accumulation) over sum_k |a_k (q_k - 8 - zp_g) s_g|. The fp8
 *   block kind (128 x 128 weight-block and 1 x 128 activation-group scales
 *   promoted per 128-K group) against sum_g sa sb sum_{k in g} a_k b_k with
 *   the promoted bound, half tiles' bits equal to whole tiles', and its
 *   refusals (one scale array, K not a multiple of 128, bf16, epilogue
 *   scales).
 *
 *   --bench: the grouped GEMMs of spec/performance.md's shapes at uniform
 *   routing (rows per expert = M * k / E), each kind, median of 15 launches
 *   (CUDA events), us and TFLOP/s. --m 1024,8192 (default), --shapes
 *   qwen3,mixtral (name parts), --kinds 013 (kind digits: the order of
 *   fmcu_gg_kind) narrow it; --bf16 uses bf16 operands; --int4 too, and
 *   also times the int4 g128 kind on the same A (random codes and scales);
 *   --block (e4m3) also times the fp8 block kind on the same A and B;
 *   --routing random draws each token's k distinct experts (seeded)
 *   instead, so experts' rows vary as in a forward; --whole turns half tiles off, --order
 *   fixed|counter sets the tile order (the plugin's option
 *   prefill_tile_order; default: the kind's).
 *
 * Exit 0 pass, 1 fail, 77 no sm_90 device.
 */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "plugins/cuda/grouped_gemm.h"
#include "plugins/cuda/options.h"
#include "plugins/cuda/prefill_dequant.h"
#include "plugins/cuda/wq_pack.h"

#include "cuda_ok.h" /* tests/cuda */

static const char *KIND_NAMES[FMCU_GG_KINDS] = {"n192-promoted", "n256-fast", "n128-fast", "n192-fast"};

__device__ __host__ inline uint32_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return (uint32_t)x;
}

/* e4m3 codes with exponent field 5..8 (2^-2..2^1 times 1.m): finite, nonzero. */
__global__ void fill_e4m3(uint8_t *p, size_t n, uint64_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const uint32_t h = mix(seed * 0x9E3779B97F4A7C15ULL + i);
        p[i] = (uint8_t)((h & 0x80) | ((5 + ((h >> 8) & 3)) << 3) | ((h >> 12) & 7));
    }
}

/* The same values as bf16 (every e4m3 value is one). */
__global__ void fill_bf16(uint16_t *p, size_t n, uint64_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const uint32_t h = mix(seed * 0x9E3779B97F4A7C15ULL + i);
        const int s = h & 0x80, e = 5 + ((h >> 8) & 3), m = (h >> 12) & 7;
        const float v = ldexpf(1.0f + m / 8.0f, e - 7);
        p[i] = (uint16_t)(__float_as_uint(s ? -v : v) >> 16);
    }
}

/* Scales in [2^ex, 2^(ex+1)). */
__global__ void fill_scale(float *p, size_t n, uint64_t seed, int ex)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = ldexpf(1.0f + (mix(seed * 0x632BE59BD9B4E019ULL + i) >> 8) * (1.0f / 16777216.0f), ex);
}

__device__ double e4m3_value(uint8_t c)
{
    const int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
    const double v = e ? ldexp(1.0 + m / 8.0, e - 7) : ldexp(m / 8.0, -6);
    return s ? -v : v;
}

struct ref_args {
    const uint8_t *a, *b; /* e4m3, or bf16 when bf16 (then no scales) */
    const float *s_row, *s_col;
    const int32_t *offsets;
    int row_vec, col_vec;
    int E, N, K, R;
    double *v, *mag; /* [R, N] */
    int bf16;
};

__device__ double bf16_value(const uint8_t *p, int64_t i)
{
    const uint16_t u = reinterpret_cast<const uint16_t *>(p)[i];
    return (double)__uint_as_float((uint32_t)u << 16);
}

/* One thread per output: expert by scanning the offsets (E is small here). */
__global__ void ref_kernel(const ref_args r)
{
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= (int64_t)r.R * r.N)
        return;
    const int row = (int)(i / r.N), col = (int)(i % r.N);
    int e = 0;
    while (r.offsets[e + 1] <= row)
        e++;
    double dot = 0, mag = 0;
    for (int k = 0; k < r.K; k++) {
        const int64_t ia = (int64_t)row * r.K + k, ib = ((int64_t)e * r.N + col) * r.K + k;
        const double p = r.bf16 ? bf16_value(r.a, ia) * bf16_value(r.b, ib) : e4m3_value(r.a[ia]) * e4m3_value(r.b[ib]);
        dot += p;
        mag += fabs(p);
    }
    const double s =
        r.bf16 ? 1.0 : (double)__fmul_rn(r.s_row[r.row_vec ? row : 0], r.s_col[r.col_vec ? (int64_t)e * r.N + col : e]);
    r.v[i] = dot * s;
    r.mag[i] = mag * s;
}

static float bf16_to_float(__nv_bfloat16 h)
{
    uint16_t u;
    memcpy(&u, &h, 2);
    uint32_t w = (uint32_t)u << 16;
    float f;
    memcpy(&f, &w, 4);
    return f;
}

struct problem {
    int E, N, K;
    std::vector<int> rows; /* per expert */
    int extra_rows;        /* rows_cap - R: must stay poisoned */
    int row_vec, col_vec;
    int scale_exp = -7;    /* scales in [2^scale_exp, 2^(scale_exp+1)) */
    int bf16 = 0;          /* bf16 operands, no scales */
};

struct buffers {
    uint8_t *a = nullptr, *b = nullptr;
    float *s_row = nullptr, *s_col = nullptr;
    int32_t *offsets = nullptr;
    int32_t *sched = nullptr; /* the kernel's tile counter: zero before and after every launch */
    __nv_bfloat16 *d = nullptr;
    int R = 0, cap = 0;
};

static void make(const problem &pb, uint64_t seed, buffers &bf)
{
    std::vector<int32_t> off(pb.E + 1, 0);
    for (int e = 0; e < pb.E; e++)
        off[e + 1] = off[e] + pb.rows[e];
    bf.R = off[pb.E];
    bf.cap = bf.R + pb.extra_rows;
    const size_t es = pb.bf16 ? 2 : 1;
    CUDA_OK(cudaMalloc(&bf.a, (size_t)bf.cap * pb.K * es));
    CUDA_OK(cudaMalloc(&bf.b, (size_t)pb.E * pb.N * pb.K * es));
    CUDA_OK(cudaMalloc(&bf.s_row, sizeof(float) * (size_t)bf.cap));
    CUDA_OK(cudaMalloc(&bf.s_col, sizeof(float) * (size_t)pb.E * pb.N));
    CUDA_OK(cudaMalloc(&bf.offsets, sizeof(int32_t) * (pb.E + 1)));
    CUDA_OK(cudaMalloc(&bf.sched, 2 * sizeof(int32_t)));
    CUDA_OK(cudaMemset(bf.sched, 0, 2 * sizeof(int32_t)));
    CUDA_OK(cudaMalloc(&bf.d, sizeof(__nv_bfloat16) * (size_t)bf.cap * pb.N));
    if (pb.bf16) {
        fill_bf16<<<1024, 256>>>((uint16_t *)bf.a, (size_t)bf.cap * pb.K, seed * 4 + 1);
        fill_bf16<<<1024, 256>>>((uint16_t *)bf.b, (size_t)pb.E * pb.N * pb.K, seed * 4 + 2);
    } else {
        fill_e4m3<<<1024, 256>>>(bf.a, (size_t)bf.cap * pb.K, seed * 4 + 1);
        fill_e4m3<<<1024, 256>>>(bf.b, (size_t)pb.E * pb.N * pb.K, seed * 4 + 2);
    }
    fill_scale<<<64, 256>>>(bf.s_row, (size_t)bf.cap, seed * 4 + 3, pb.scale_exp);
    fill_scale<<<64, 256>>>(bf.s_col, (size_t)pb.E * pb.N, seed * 4 + 4, pb.scale_exp);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaMemcpy(bf.offsets, off.data(), sizeof(int32_t) * (pb.E + 1), cudaMemcpyHostToDevice));
}

static void release(buffers &bf)
{
    cudaFree(bf.a);
    cudaFree(bf.b);
    cudaFree(bf.s_row);
    cudaFree(bf.s_col);
    cudaFree(bf.offsets);
    cudaFree(bf.sched);
    cudaFree(bf.d);
    bf = buffers();
}

static fmcu_gg_args args_of(const problem &pb, const buffers &bf, int whole_tiles, int order)
{
    fmcu_gg_args a = {};
    a.a = bf.a;
    a.b = bf.b;
    a.d = bf.d;
    a.s_row = bf.s_row;
    a.s_col = bf.s_col;
    a.offsets = bf.offsets;
    a.row_vec = pb.row_vec;
    a.col_vec = pb.col_vec;
    a.E = (uint32_t)pb.E;
    a.N = (uint32_t)pb.N;
    a.K = (uint32_t)pb.K;
    a.rows_cap = bf.cap;
    a.bf16 = pb.bf16;
    a.whole_tiles = whole_tiles;
    a.sched = bf.sched;
    a.order = order;
    if (pb.bf16)
        a.s_row = a.s_col = nullptr;
    return a;
}

/* One problem, every kind; returns the number of failed kinds. */
static int check(const char *name, const problem &pb, uint64_t seed, int sms)
{
    buffers bf;
    make(pb, seed, bf);
    const size_t n = (size_t)bf.R * pb.N;
    double *v, *mag;
    CUDA_OK(cudaMalloc(&v, sizeof(double) * (n ? n : 1)));
    CUDA_OK(cudaMalloc(&mag, sizeof(double) * (n ? n : 1)));
    ref_args r = {bf.a, bf.b, bf.s_row, bf.s_col, bf.offsets, pb.row_vec, pb.col_vec, pb.E, pb.N, pb.K, bf.R, v, mag, pb.bf16};
    if (n)
        ref_kernel<<<(unsigned)((n + 255) / 256), 256>>>(r);
    CUDA_OK(cudaGetLastError());
    std::vector<double> hv(n), hm(n);
    CUDA_OK(cudaMemcpy(hv.data(), v, sizeof(double) * n, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(hm.data(), mag, sizeof(double) * n, cudaMemcpyDeviceToHost));
    const size_t all = (size_t)bf.cap * pb.N;
    std::vector<__nv_bfloat16> hd(all), whole(all);
    int failed = 0;
    /* Each kind three times: whole tiles only, then with half tiles, which
     * must give the whole tiles' bits (the same per-element wgmma sums),
     * in the kind's tile order and in the other one. */
    static const char *const FORM[3] = {"whole", "halves", "halves-other-order"};
    for (int run = 0; run < 3 * FMCU_GG_KINDS; run++) {
        const int kind = run / 3, whole_tiles = run % 3 == 0;
        const int order = run % 3 != 2                 ? FMCU_GG_ORDER_AUTO
                          : fmcu_gg_promoted(kind) ? FMCU_GG_ORDER_FIXED
                                                   : FMCU_GG_ORDER_COUNTER;
        const bool promoted = fmcu_gg_promoted(kind);
        if (pb.bf16 && promoted)
            continue;
        /* bf16: f32 accumulation of exact products, 2^-24 per addition. */
        const double tol = pb.bf16 ? ldexp(1, -14) : promoted ? ldexp(1, -11) : ldexp(1, -8);
        const double nmse_max = promoted || pb.bf16 ? 1e-5 : 1e-4;
        CUDA_OK(cudaMemset(bf.d, 0xFF, sizeof(__nv_bfloat16) * all)); /* NaN */
        const fmcu_gg_args a = args_of(pb, bf, whole_tiles, order);
        CUDA_OK(fmcu_gg_launch(&a, (fmcu_gg_kind)kind, sms, 0));
        CUDA_OK(cudaDeviceSynchronize());
        CUDA_OK(cudaMemcpy(hd.data(), bf.d, sizeof(__nv_bfloat16) * all, cudaMemcpyDeviceToHost));
        int32_t sched[2];
        CUDA_OK(cudaMemcpy(sched, bf.sched, sizeof sched, cudaMemcpyDeviceToHost));
        size_t differ = 0, first_differ = 0;
        if (whole_tiles)
            whole = hd;
        else
            for (size_t i = 0; i < all; i++)
                if (memcmp(&hd[i], &whole[i], 2) && !differ++)
                    first_differ = i;
        size_t bad = 0, first = n;
        double num = 0, den = 0;
        for (size_t i = 0; i < n; i++) {
            const double o = bf16_to_float(hd[i]);
            const double bound = ldexp(fabs(hv[i]), -8) + tol * hm[i];
            if (!(fabs(o - hv[i]) <= bound)) {
                if (!bad)
                    first = i;
                bad++;
            }
            if (o == o) {
                num += (o - hv[i]) * (o - hv[i]);
                den += hv[i] * hv[i];
            }
        }
        size_t touched = 0;
        for (size_t i = n; i < all; i++) {
            uint16_t u;
            memcpy(&u, &hd[i], 2);
            touched += u != 0xFFFF;
        }
        const double nmse = den > 0 ? num / den : 0;
        const bool reset = sched[0] == 0 && sched[1] == 0;
        const bool ok = !bad && !touched && !differ && reset && nmse <= nmse_max;
        printf("%s %-28s %-14s %-18s R=%d nmse=%.2e %s\n", ok ? "PASS" : "FAIL", name, KIND_NAMES[kind],
               FORM[run % 3], bf.R, nmse, ok ? "" : "<--");
        if (!ok) {
            failed++;
            if (bad)
                printf("  %zu of %zu outside the bound; first row %zu col %zu: got %g want %g (mag %g)\n", bad, n,
                       first / pb.N, first % pb.N, (double)bf16_to_float(hd[first]), hv[first], hm[first]);
            if (touched)
                printf("  %zu elements past the last expert's rows were written\n", touched);
            if (!reset)
                printf("  the tile counter was left at %d, %d (must be 0, 0 for the next launch)\n", sched[0],
                       sched[1]);
            if (differ)
                printf("  %zu elements differ from whole tiles' bits; first row %zu col %zu\n", differ,
                       first_differ / pb.N, first_differ % pb.N);
            printf("  seed %llu (--seed %llu reruns it)\n", (unsigned long long)seed, (unsigned long long)seed);
        }
    }
    cudaFree(v);
    cudaFree(mag);
    release(bf);
    return failed;
}

/* Random bytes: e2m1 code pairs (any), or block scale codes in a finite
 * range: UE8M0 120..135 (2^-7..2^8; what = 33: 113..128, 2^-14..2, which
 * the swapped form may fold), e4m3 with exponent field 4..11. */
__global__ void fill_w4(uint8_t *p, size_t n, uint64_t seed, int what)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const uint32_t h = mix(seed * 0x2545F4914F6CDD1DULL + i);
        p[i] = what == 0 ? (uint8_t)h
               : what == 32 ? (uint8_t)(120 + (h & 15))
               : what == 33 ? (uint8_t)(113 + (h & 15))
                            : (uint8_t)((h & 0x80) | ((4 + ((h >> 8) & 7)) << 3) | ((h >> 12) & 7));
    }
}

/* One e2m1 case: the weights' shape, the rows per expert, the grid (0:
 * the device's SMs; a few CTAs make each run many tiles, so a CTA's later
 * tiles, the converter's stage refills and the phases past the first wrap
 * run), whole tiles and the tile order. */
struct w4_case {
    const char *name;
    int N, K, kp;
    std::vector<int> rows;
    int ctas;
    int whole_tiles;
    int order;
};

/* The e2m1 kinds (w4, converted inside the kernel) against the same GEMM on
 * weights dequantized first (prefill_dequant.h) and the bf16 n128-fast
 * kind: the same bf16 operands and the same tile, so the same bits. With a
 * per-expert output factor and biases, empty experts, half tiles, N not a
 * multiple of 128, partial chunks and stages (K < kp), and K long enough
 * that the converter reloads its block scales (every 8 stages for MXFP4,
 * 4 for NVFP4). The swapped form (gg_w4_swap.cu) against the same; with
 * `fold` (MXFP4) its scale codes are all <= 128 and the swapped form is
 * told so (mx_fold: scales folded into one product; NVFP4 always folds). */
static int check_w4(int w4, const w4_case &c, uint64_t seed, int device_sms, bool fold)
{
    const int E = (int)c.rows.size(), N = c.N, K = c.K, kp = c.kp, sms = c.ctas ? c.ctas : device_sms;
    const std::vector<int> &rows = c.rows;
    std::vector<int32_t> off(E + 1, 0);
    for (int e = 0; e < E; e++)
        off[e + 1] = off[e] + rows[e];
    const int R = off[E], cap = R + 7;
    uint8_t *codes, *sf8, *a;
    __nv_bfloat16 *wdq, *bias, *d[2];
    float *omul;
    int32_t *offsets, *sched;
    CUDA_OK(cudaMalloc(&codes, (size_t)E * N * kp / 2));
    CUDA_OK(cudaMalloc(&sf8, (size_t)E * N * kp / w4));
    CUDA_OK(cudaMalloc(&a, (size_t)cap * K * 2));
    CUDA_OK(cudaMalloc(&wdq, (size_t)E * N * K * 2));
    CUDA_OK(cudaMalloc(&bias, (size_t)E * N * 2));
    CUDA_OK(cudaMalloc(&omul, E * sizeof(float)));
    CUDA_OK(cudaMalloc(&offsets, (E + 1) * sizeof(int32_t)));
    CUDA_OK(cudaMalloc(&sched, 2 * sizeof(int32_t)));
    CUDA_OK(cudaMemset(sched, 0, 2 * sizeof(int32_t)));
    for (int j = 0; j < 2; j++) {
        CUDA_OK(cudaMalloc(&d[j], (size_t)cap * N * 2));
        CUDA_OK(cudaMemset(d[j], 0xFF, (size_t)cap * N * 2)); /* NaN: rows never written stay so */
    }
    fill_w4<<<256, 256>>>(codes, (size_t)E * N * kp / 2, seed, 0);
    fill_w4<<<64, 256>>>(sf8, (size_t)E * N * kp / w4, seed + 1, fold && w4 == 32 ? 33 : w4);
    fill_bf16<<<1024, 256>>>((uint16_t *)a, (size_t)cap * K, seed + 2);
    fill_bf16<<<64, 256>>>((uint16_t *)bias, (size_t)E * N, seed + 3);
    fill_scale<<<1, 32>>>(omul, E, seed + 4, -3);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaMemcpy(offsets, off.data(), (E + 1) * sizeof(int32_t), cudaMemcpyHostToDevice));
    fmcu_pf::dequant_args dq = {};
    dq.w = codes;
    dq.sf8 = sf8;
    dq.block = (uint32_t)w4;
    dq.N = N;
    dq.K = K;
    dq.kp = kp;
    dq.e0 = 0;
    dq.count = E;
    dq.offsets = offsets;
    dq.dst = wdq;
    CUDA_OK(fmcu_pf::dequant_launch(dq, 0));
    fmcu_gg_args g = {};
    g.a = a;
    g.d = d[0];
    g.s_col = omul;
    g.bias = bias;
    g.offsets = offsets;
    g.E = E;
    g.N = N;
    g.K = K;
    g.rows_cap = cap;
    g.bf16 = 1;
    g.sched = sched;
    g.order = c.order;
    g.whole_tiles = c.whole_tiles;
    g.b = (const uint8_t *)wdq;
    CUDA_OK(fmcu_gg_launch(&g, FMCU_GG_N128_FAST, sms, 0));
    g.d = d[1];
    g.b = codes;
    g.w4 = w4;
    g.sf8 = sf8;
    g.kp = kp;
    g.mx_fold = fold && w4 == 32;
    CUDA_OK(fmcu_gg_launch(&g, FMCU_GG_N128_FAST, sms, 0));
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<uint16_t> h0((size_t)cap * N), h1((size_t)cap * N);
    CUDA_OK(cudaMemcpy(h0.data(), d[0], h0.size() * 2, cudaMemcpyDeviceToHost));
    bool all_ok = true;
    /* The converting kind (form 0), then the swapped form (fmcu_gg_w4_swap_launch), each against the
     * dequantized weights' GEMM bit for bit. */
    for (int form = 0; form < 2; form++) {
        if (form == 1) {
            CUDA_OK(cudaMemset(d[1], 0xFF, (size_t)cap * N * 2));
            CUDA_OK(fmcu_gg_w4_swap_launch(&g, sms, 0));
            CUDA_OK(cudaDeviceSynchronize());
        }
        CUDA_OK(cudaMemcpy(h1.data(), d[1], h1.size() * 2, cudaMemcpyDeviceToHost));
        int32_t left[2];
        CUDA_OK(cudaMemcpy(left, sched, sizeof left, cudaMemcpyDeviceToHost));
        size_t differ = 0, nan = 0, first = SIZE_MAX;
        for (size_t i = 0; i < (size_t)R * N; i++) {
            if (h0[i] != h1[i] && differ++ == 0)
                first = i;
            nan += (h0[i] & 0x7F80) == 0x7F80;
        }
        bool untouched = true; /* rows past R */
        for (size_t i = (size_t)R * N; i < h1.size(); i++)
            untouched &= h1[i] == 0xFFFF;
        const bool ok = differ == 0 && nan == 0 && untouched && left[0] == 0 && left[1] == 0;
        all_ok &= ok;
        printf("%s e2m1 w4=%d%s %s (%s vs dequantized, n128-fast) N=%d K=%d, %d CTAs: %zu of %zu differ, %zu NaN, "
               "rows past R %s, counter %d %d",
               ok ? "PASS" : "FAIL", w4, g.mx_fold ? " mx_fold" : "", c.name, form ? "swapped" : "fused", N, K, sms,
               differ, (size_t)R * N, nan,
               untouched ? "untouched" : "WRITTEN", left[0], left[1]);
        if (differ)
            printf(" (first at row %zu col %zu: %04x vs %04x)", first / N, first % N, h0[first], h1[first]);
        printf("\n");
        if (!ok)
            printf("  seed %llu (--seed reruns it)\n", (unsigned long long)seed);
    }
    cudaFree(codes);
    cudaFree(sf8);
    cudaFree(a);
    cudaFree(wdq);
    cudaFree(bias);
    cudaFree(omul);
    cudaFree(offsets);
    cudaFree(sched);
    cudaFree(d[0]);
    cudaFree(d[1]);
    return all_ok ? 0 : 1;
}

/* The int4 kind's reference, one thread an output: codes [E*N, K] one a
 * byte (value + 8), scales and zero points [E*N, groups]. */
struct int4_ref_args {
    const uint16_t *a; /* bf16 [R, K] */
    const uint8_t *q;
    const float *s;
    const int8_t *zp;
    const __nv_bfloat16 *bias;
    const int32_t *offsets;
    int E, N, K, groups, R;
    double *v, *mag;
};

__global__ void int4_ref_kernel(const int4_ref_args r)
{
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= (int64_t)r.R * r.N)
        return;
    const int row = (int)(i / r.N), col = (int)(i % r.N);
    int e = 0;
    while (r.offsets[e + 1] <= row)
        e++;
    const int64_t wrow = (int64_t)e * r.N + col;
    double dot = 0, mag = 0;
    for (int g = 0; g < r.groups; g++) {
        const double sg = r.s[wrow * r.groups + g], z = r.zp ? r.zp[wrow * r.groups + g] : 0;
        double part = 0, pmag = 0;
        for (int k = 128 * g; k < r.K && k < 128 * (g + 1); k++) {
            const double a = (double)__uint_as_float((uint32_t)r.a[(int64_t)row * r.K + k] << 16);
            const double w = (double)r.q[wrow * r.K + k] - 8.0 - z;
            part += a * w;
            pmag += fabs(a * w);
        }
        dot += part * sg;
        mag += pmag * fabs(sg);
    }
    if (r.bias)
        dot += (double)__bfloat162float(r.bias[wrow]);
    r.v[i] = dot;
    r.mag[i] = mag;
}

/* The int4 kind on one problem: codes packed by wq_pack.h (the plugin's
 * finalize layout), random scales and zero points (or none), biases,
 * empty experts, half tiles, N not a multiple of 128, K with a partial
 * last group and a partial last chunk (kp > K). Per element |ours - v| <=
 * 2^-8 |v| + 2^-14 mag; rows past R untouched; the counter left zero. */
static int check_int4(const char *name, int N, int K, const std::vector<int> &rows, int ctas, int zero_points,
                      int whole_tiles, uint64_t seed, int device_sms)
{
    const int E = (int)rows.size(), kp = (K + 31) / 32 * 32, groups = (K + 127) / 128;
    const int sms = ctas ? ctas : device_sms;
    std::vector<int32_t> off(E + 1, 0);
    for (int e = 0; e < E; e++)
        off[e + 1] = off[e] + rows[e];
    const int R = off[E], cap = R + 5;
    const size_t nrows = (size_t)E * N;
    std::vector<uint8_t> q(nrows * K), packed(nrows * kp / 2);
    std::vector<float> sc(nrows * groups);
    std::vector<int8_t> zp(nrows * groups);
    for (size_t i = 0; i < q.size(); i++)
        q[i] = (uint8_t)(mix(seed * 0x9E3779B97F4A7C15ULL + i) & 15);
    for (size_t i = 0; i < sc.size(); i++) {
        const uint32_t h = mix(seed * 0x632BE59BD9B4E019ULL + i);
        sc[i] = ldexpf(1.0f + (h >> 8) * (1.0f / 16777216.0f), -9);
        zp[i] = (int8_t)((int)(h & 15) - 8);
    }
    fmcu_wq_pack(FMCU_WQ_INT4, (uint32_t)nrows, (uint32_t)K, (uint32_t)kp, q.data(), nullptr, 8, packed.data());
    uint8_t *d_q, *d_packed;
    uint16_t *a;
    float *d_sc;
    int8_t *d_zp;
    __nv_bfloat16 *bias, *d;
    int32_t *offsets, *sched;
    double *v, *mag;
    CUDA_OK(cudaMalloc(&d_q, q.size()));
    CUDA_OK(cudaMalloc(&d_packed, packed.size()));
    CUDA_OK(cudaMalloc(&d_sc, sc.size() * sizeof(float)));
    CUDA_OK(cudaMalloc(&d_zp, zp.size()));
    CUDA_OK(cudaMalloc(&a, (size_t)cap * K * 2));
    CUDA_OK(cudaMalloc(&bias, nrows * 2));
    CUDA_OK(cudaMalloc(&d, (size_t)cap * N * 2));
    CUDA_OK(cudaMalloc(&offsets, (E + 1) * sizeof(int32_t)));
    CUDA_OK(cudaMalloc(&sched, 2 * sizeof(int32_t)));
    CUDA_OK(cudaMalloc(&v, (size_t)R * N * sizeof(double)));
    CUDA_OK(cudaMalloc(&mag, (size_t)R * N * sizeof(double)));
    CUDA_OK(cudaMemset(sched, 0, 2 * sizeof(int32_t)));
    CUDA_OK(cudaMemset(d, 0xFF, (size_t)cap * N * 2)); /* NaN: rows never written stay so */
    CUDA_OK(cudaMemcpy(d_q, q.data(), q.size(), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d_packed, packed.data(), packed.size(), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d_sc, sc.data(), sc.size() * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d_zp, zp.data(), zp.size(), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(offsets, off.data(), (E + 1) * sizeof(int32_t), cudaMemcpyHostToDevice));
    fill_bf16<<<1024, 256>>>(a, (size_t)cap * K, seed + 2);
    fill_bf16<<<64, 256>>>((uint16_t *)bias, nrows, seed + 3);
    CUDA_OK(cudaGetLastError());
    fmcu_gg_args g = {};
    g.a = (const uint8_t *)a;
    g.b = d_packed;
    g.d = d;
    g.bias = bias;
    g.offsets = offsets;
    g.E = E;
    g.N = N;
    g.K = K;
    g.rows_cap = cap;
    g.bf16 = 1;
    g.sched = sched;
    g.order = FMCU_GG_ORDER_AUTO;
    g.whole_tiles = whole_tiles;
    g.w4 = FMCU_GG_W4_INT4;
    g.kp = kp;
    g.gscale = d_sc;
    g.zero = zero_points ? d_zp : nullptr;
    g.groups = groups;
    int4_ref_args ra = {a, d_q, d_sc, zero_points ? d_zp : nullptr, bias, offsets, E, N, K, groups, R, v, mag};
    if (R > 0)
        int4_ref_kernel<<<(unsigned)(((int64_t)R * N + 255) / 256), 256>>>(ra);
    CUDA_OK(cudaGetLastError());
    std::vector<double> hv((size_t)R * N), hm((size_t)R * N);
    CUDA_OK(cudaMemcpy(hv.data(), v, hv.size() * sizeof(double), cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(hm.data(), mag, hm.size() * sizeof(double), cudaMemcpyDeviceToHost));
    /* Both forms: the converting kind, then the swapped one (its output
     * also compared with the first's bit for bit, reported). */
    std::vector<uint16_t> first_out;
    bool all_ok = true;
    for (int form = 0; form < 2; form++) {
        CUDA_OK(cudaMemset(d, 0xFF, (size_t)cap * N * 2));
        CUDA_OK(form == 0 ? fmcu_gg_launch(&g, FMCU_GG_N128_FAST, sms, 0) : fmcu_gg_w4_swap_launch(&g, sms, 0));
        CUDA_OK(cudaDeviceSynchronize());
        std::vector<uint16_t> hd((size_t)cap * N);
        CUDA_OK(cudaMemcpy(hd.data(), d, hd.size() * 2, cudaMemcpyDeviceToHost));
        int32_t left[2];
        CUDA_OK(cudaMemcpy(left, sched, sizeof left, cudaMemcpyDeviceToHost));
        size_t bad = 0, first = SIZE_MAX, differ = 0;
        double worst = 0;
        for (size_t i = 0; i < hv.size(); i++) {
            const uint32_t w = (uint32_t)hd[i] << 16;
            float f;
            memcpy(&f, &w, 4);
            const double err = fabs((double)f - hv[i]), bound = ldexp(fabs(hv[i]), -8) + ldexp(hm[i], -14);
            if (!(err <= bound) && bad++ == 0)
                first = i;
            if (bound > 0 && err / bound > worst)
                worst = err / bound;
            if (form == 1 && hd[i] != first_out[i])
                differ++;
        }
        bool untouched = true;
        for (size_t i = (size_t)R * N; i < hd.size(); i++)
            untouched &= hd[i] == 0xFFFF;
        const bool ok = bad == 0 && untouched && left[0] == 0 && left[1] == 0;
        all_ok &= ok;
        printf("%s int4 g128 %s %s%s N=%d K=%d, %d CTAs: %zu of %zu outside the bound (worst %.3f of it), rows past R "
               "%s, counter %d %d",
               ok ? "PASS" : "FAIL", form ? "swapped" : "converting", name, zero_points ? " zero points" : "", N, K, sms,
               bad, hv.size(), worst, untouched ? "untouched" : "WRITTEN", left[0], left[1]);
        if (form == 1)
            printf(", %zu differ from the converting kind", differ);
        if (bad)
            printf(" (first at row %zu col %zu: %04x vs %.6g)", first / N, first % N, hd[first], hv[first]);
        printf("\n");
        if (!ok)
            printf("  seed %llu (--seed reruns it)\n", (unsigned long long)seed);
        first_out.swap(hd);
    }
    cudaFree(d_q);
    cudaFree(d_packed);
    cudaFree(d_sc);
    cudaFree(d_zp);
    cudaFree(a);
    cudaFree(bias);
    cudaFree(d);
    cudaFree(offsets);
    cudaFree(sched);
    cudaFree(v);
    cudaFree(mag);
    return all_ok ? 0 : 1;
}

/* The fp8 block kind's reference: sum_g sa(row, g) sb(e, col / 128, g)
 * sum_{k in g} a_k b_k in double, activation scales grouped M-major as the
 * prefill path writes them (expert e's [K/128][M_e] from offsets[e] x
 * K/128), weight scales [E, N/128, K/128]. */
struct block_ref_args {
    const uint8_t *a, *b;
    const float *a_sf, *b_sf;
    const int32_t *offsets;
    int E, N, K, R;
    double *v, *mag;
};

__global__ void block_ref_kernel(const block_ref_args r)
{
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= (int64_t)r.R * r.N)
        return;
    const int row = (int)(i / r.N), col = (int)(i % r.N), kg = r.K / 128;
    int e = 0;
    while (r.offsets[e + 1] <= row)
        e++;
    const int start = r.offsets[e], rows = r.offsets[e + 1] - start;
    double dot = 0, mag = 0;
    for (int g = 0; g < kg; g++) {
        double part = 0, pmag = 0;
        for (int k = 128 * g; k < 128 * g + 128; k++) {
            const double p = e4m3_value(r.a[(int64_t)row * r.K + k]) * e4m3_value(r.b[((int64_t)e * r.N + col) * r.K + k]);
            part += p;
            pmag += fabs(p);
        }
        const double s = (double)r.a_sf[(int64_t)start * kg + (int64_t)g * rows + (row - start)] *
                         (double)r.b_sf[((int64_t)e * (r.N / 128) + col / 128) * kg + g];
        dot += part * s;
        mag += pmag * s;
    }
    r.v[i] = dot;
    r.mag[i] = mag;
}

/* The fp8 block kind on one problem: whole tiles, then half tiles (the
 * same bits, in both tile orders); per element |ours - v| <= 2^-8 |v| +
 * 2^-11 mag (the promoted kinds' bound: wgmma's e4m3 sums over one 128-K
 * group), rows past R untouched, the counter left zero; and the launch
 * refuses what the kind does not serve. */
static int check_block(const char *name, int N, int K, const std::vector<int> &rows, int ctas, uint64_t seed,
                       int device_sms)
{
    const int E = (int)rows.size(), kg = K / 128, sms = ctas ? ctas : device_sms;
    std::vector<int32_t> off(E + 1, 0);
    for (int e = 0; e < E; e++)
        off[e + 1] = off[e] + rows[e];
    const int R = off[E], cap = R + 7;
    uint8_t *a, *b;
    float *a_sf, *b_sf;
    __nv_bfloat16 *d;
    int32_t *offsets, *sched;
    double *v, *mag;
    CUDA_OK(cudaMalloc(&a, (size_t)cap * K));
    CUDA_OK(cudaMalloc(&b, (size_t)E * N * K));
    CUDA_OK(cudaMalloc(&a_sf, sizeof(float) * ((size_t)R * kg + 1)));
    CUDA_OK(cudaMalloc(&b_sf, sizeof(float) * (size_t)E * (N / 128) * kg));
    CUDA_OK(cudaMalloc(&d, (size_t)cap * N * 2));
    CUDA_OK(cudaMalloc(&offsets, (E + 1) * sizeof(int32_t)));
    CUDA_OK(cudaMalloc(&sched, 2 * sizeof(int32_t)));
    CUDA_OK(cudaMalloc(&v, ((size_t)R * N + 1) * sizeof(double)));
    CUDA_OK(cudaMalloc(&mag, ((size_t)R * N + 1) * sizeof(double)));
    CUDA_OK(cudaMemset(sched, 0, 2 * sizeof(int32_t)));
    CUDA_OK(cudaMemcpy(offsets, off.data(), (E + 1) * sizeof(int32_t), cudaMemcpyHostToDevice));
    fill_e4m3<<<1024, 256>>>(a, (size_t)cap * K, seed * 4 + 1);
    fill_e4m3<<<1024, 256>>>(b, (size_t)E * N * K, seed * 4 + 2);
    fill_scale<<<64, 256>>>(a_sf, (size_t)R * kg + 1, seed * 4 + 3, -7);
    fill_scale<<<64, 256>>>(b_sf, (size_t)E * (N / 128) * kg, seed * 4 + 4, -9);
    CUDA_OK(cudaGetLastError());
    block_ref_args ra = {a, b, a_sf, b_sf, offsets, E, N, K, R, v, mag};
    if (R > 0)
        block_ref_kernel<<<(unsigned)(((int64_t)R * N + 255) / 256), 256>>>(ra);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<double> hv((size_t)R * N), hm((size_t)R * N);
    CUDA_OK(cudaMemcpy(hv.data(), v, hv.size() * sizeof(double), cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(hm.data(), mag, hm.size() * sizeof(double), cudaMemcpyDeviceToHost));
    fmcu_gg_args g = {};
    g.a = a;
    g.b = b;
    g.d = d;
    g.offsets = offsets;
    g.E = E;
    g.N = N;
    g.K = K;
    g.rows_cap = cap;
    g.sched = sched;
    g.a_sf = a_sf;
    g.b_sf = b_sf;
    int failed = 0;
    std::vector<uint16_t> hd((size_t)cap * N), whole;
    static const char *const FORM[3] = {"whole", "halves", "halves-fixed-order"};
    for (int run = 0; run < 3; run++) {
        g.whole_tiles = run == 0;
        g.order = run == 2 ? FMCU_GG_ORDER_FIXED : FMCU_GG_ORDER_AUTO;
        CUDA_OK(cudaMemset(d, 0xFF, (size_t)cap * N * 2)); /* NaN: rows never written stay so */
        CUDA_OK(fmcu_gg_launch(&g, FMCU_GG_N192_PROMOTED, sms, 0)); /* kind ignored: the block kind */
        CUDA_OK(cudaDeviceSynchronize());
        CUDA_OK(cudaMemcpy(hd.data(), d, hd.size() * 2, cudaMemcpyDeviceToHost));
        int32_t left[2];
        CUDA_OK(cudaMemcpy(left, sched, sizeof left, cudaMemcpyDeviceToHost));
        if (run == 0)
            whole = hd;
        size_t bad = 0, first = SIZE_MAX, differ = 0;
        double worst = 0, num = 0, den = 0;
        for (size_t i = 0; i < hv.size(); i++) {
            const uint32_t w = (uint32_t)hd[i] << 16;
            float f;
            memcpy(&f, &w, 4);
            const double err = fabs((double)f - hv[i]), bound = ldexp(fabs(hv[i]), -8) + ldexp(hm[i], -11);
            if (!(err <= bound) && bad++ == 0)
                first = i;
            if (bound > 0 && err / bound > worst)
                worst = err / bound;
            num += err * err;
            den += hv[i] * hv[i];
        }
        for (size_t i = 0; i < hd.size(); i++)
            differ += hd[i] != whole[i];
        bool untouched = true;
        for (size_t i = (size_t)R * N; i < hd.size(); i++)
            untouched &= hd[i] == 0xFFFF;
        const double nmse = den > 0 ? num / den : 0;
        const bool ok = bad == 0 && untouched && differ == 0 && left[0] == 0 && left[1] == 0 && nmse <= 1e-5;
        printf("%s fp8 block %s %s N=%d K=%d, %d CTAs: %zu of %zu outside the bound (worst %.3f of it), nmse "
               "%.2e, %zu differ from whole tiles, rows past R %s, counter %d %d",
               ok ? "PASS" : "FAIL", name, FORM[run], N, K, sms, bad, hv.size(), worst, nmse, differ,
               untouched ? "untouched" : "WRITTEN", left[0], left[1]);
        if (bad)
            printf(" (first at row %zu col %zu: %04x vs %.6g)", first / N, first % N, hd[first], hv[first]);
        printf("\n");
        if (!ok) {
            printf("  seed %llu (--seed reruns it)\n", (unsigned long long)seed);
            failed++;
        }
    }
    /* What the kind does not serve is refused, not run. */
    fmcu_gg_args bad_args[4] = {g, g, g, g};
    bad_args[0].b_sf = nullptr;              /* one of the two scale arrays */
    bad_args[1].K = K - 16;                  /* K not a multiple of 128 */
    bad_args[2].bf16 = 1;                    /* bf16 operands */
    bad_args[3].s_row = a_sf;                /* scales in the epilogue too */
    for (int i = 0; i < 4; i++)
        if (fmcu_gg_launch(&bad_args[i], FMCU_GG_N128_FAST, sms, 0) != cudaErrorInvalidValue) {
            printf("FAIL fp8 block %s: refusal %d was launched\n", name, i);
            failed++;
        }
    cudaGetLastError();
    cudaFree(a);
    cudaFree(b);
    cudaFree(a_sf);
    cudaFree(b_sf);
    cudaFree(d);
    cudaFree(offsets);
    cudaFree(sched);
    cudaFree(v);
    cudaFree(mag);
    return failed;
}

static int run_checks(uint64_t seed, int sms)
{
    int failed = 0;
    /* Rows per expert cover empty experts and tile edges; K = 656 ends in a partial 128-K block. */
    problem p1 = {8, 400, 656, {0, 1, 64, 65, 128, 129, 0, 300}, 37, 1, 1};
    failed += check("edges N=400 K=656", p1, seed, sms);
    problem p2 = {5, 384, 1024, {200, 3, 256, 77, 192}, 0, 0, 0}; /* 192: a half tile of exactly 64 rows */
    failed += check("scalar scales N=384 K=1024", p2, seed + 1, sms);
    problem p3 = {3, 2048, 256, {500, 0, 129}, 5, 1, 1};
    failed += check("wide N=2048 K=256", p3, seed + 2, sms);
    /* More tiles than CTAs with many experts: the persistent loop and the tile search. */
    problem p4 = {160, 256, 384, {}, 9, 1, 1};
    for (int e = 0; e < 160; e++)
        p4.rows.push_back((int)(mix(seed + e) % 150) * (e % 7 != 3));
    failed += check("160 experts N=256 K=384", p4, seed + 3, sms);
    /* K below one stage and N below one tile. */
    problem p5 = {8, 128, 64, {30, 0, 200, 256, 1, 90, 0, 180}, 3, 0, 0};
    failed += check("small N=128 K=64", p5, seed + 4, sms);
    /* bf16 operands (K = 656: a partial last 64-K stage). */
    problem b1 = {8, 400, 656, {0, 1, 64, 65, 128, 129, 0, 300}, 37, 1, 1, -7, 1};
    failed += check("bf16 edges N=400 K=656", b1, seed + 8, sms);
    problem b2 = {160, 256, 208, {}, 9, 1, 1, -7, 1};
    for (int e = 0; e < 160; e++)
        b2.rows.push_back((int)(mix(seed + 2 * e) % 150) * (e % 5 != 2));
    failed += check("bf16 160 experts K=208", b2, seed + 9, sms);
    /* e2m1: the first case on the device's grid (a tile a CTA), the others
     * on 2-3 CTAs (many tiles each) with long K (MXFP4 reloads its scales
     * at stages 8 and 16, NVFP4 at 4, 8, 12, 16; the last stage partial,
     * the last chunk half padding), whole tiles, the counter order, N
     * below one tile (a tile spans three experts' rows), and kp a multiple
     * of 512 (every row's scale codes 16-byte aligned: load_sf's 16-byte
     * loads; K = kp, and K short of kp by half a stage); gpt-oss-120b's K =
     * 2880 (rows of 90 MXFP4 and 180 NVFP4 codes: the swapped form's 2- and
     * 4-byte scale loads, a half last stage). */
    const w4_case w4_cases[] = {
        {"edges", 320, 208, 224, {65, 0, 130, 17}, 0, 0, FMCU_GG_ORDER_AUTO},
        {"edges, 2 CTAs", 320, 208, 224, {65, 0, 130, 17}, 2, 0, FMCU_GG_ORDER_AUTO},
        {"long K", 320, 1040, 1056, {300, 0, 130, 17, 64}, 3, 0, FMCU_GG_ORDER_AUTO},
        {"long K, whole tiles", 320, 1040, 1056, {300, 0, 130, 17, 64}, 3, 1, FMCU_GG_ORDER_AUTO},
        {"long K, counter order", 320, 1040, 1056, {300, 0, 130, 17, 64}, 3, 0, FMCU_GG_ORDER_COUNTER},
        {"N below a tile", 48, 1040, 1056, {70, 200, 0, 5}, 2, 0, FMCU_GG_ORDER_AUTO},
        {"aligned scales", 320, 1024, 1024, {300, 0, 130, 17, 64}, 3, 0, FMCU_GG_ORDER_AUTO},
        {"aligned scales, K tail", 320, 992, 1024, {70, 200, 0, 5}, 2, 0, FMCU_GG_ORDER_AUTO},
        {"gpt-oss's K", 320, 2880, 2880, {70, 200, 0, 5}, 2, 0, FMCU_GG_ORDER_AUTO},
    };
    for (size_t i = 0; i < sizeof w4_cases / sizeof w4_cases[0]; i++) {
        failed += check_w4(32, w4_cases[i], seed + 10 + 2 * i, sms, false);
        failed += check_w4(32, w4_cases[i], seed + 10 + 2 * i, sms, true);
        failed += check_w4(16, w4_cases[i], seed + 11 + 2 * i, sms, false);
    }
    /* int4 g128: the device's grid and 2-3 CTAs (many tiles each); K a
     * whole number of groups, K ending in half a group (one 64-column
     * stage), and K ending inside a chunk (kp > K); whole tiles. */
    failed += check_int4("edges", 320, 256, {65, 0, 130, 17}, 0, 1, 0, seed + 40, sms);
    failed += check_int4("edges", 320, 256, {65, 0, 130, 17}, 2, 0, 0, seed + 41, sms);
    failed += check_int4("long K, half a last group", 320, 1088, {300, 0, 130, 17, 64}, 3, 1, 0, seed + 42, sms);
    failed += check_int4("K tail in a chunk, whole tiles", 192, 1008, {70, 200, 0, 5}, 2, 1, 1, seed + 43, sms);
    failed += check_int4("N below a tile", 48, 512, {70, 200, 0, 5}, 2, 0, 0, seed + 44, sms);
    /* fp8 block scales: empty experts, 1 row, half tiles (17, 64, 65 rows), several row blocks. */
    failed += check_block("edges", 256, 512, {65, 0, 130, 17, 1, 64, 129}, 0, seed + 50, sms);
    failed += check_block("3 CTAs, long K", 384, 2048, {300, 0, 40, 128}, 3, seed + 51, sms);
    failed += check_block("one group of K", 128, 128, {70, 5}, 2, seed + 52, sms);
    return failed;
}

struct bench_shape {
    const char *name;
    int E, k, H, I; /* GEMM1: N = 2I, K = H; GEMM2: N = H, K = I */
};

/* Does one comma-separated part of `list` occur in `name`? */
static bool names_match(const char *list, const char *name)
{
    char part[64];
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ",");
        if (n && n < sizeof part) {
            memcpy(part, p, n);
            part[n] = 0;
            if (strstr(name, part))
                return true;
        }
        p += n + (p[n] == ',');
    }
    return false;
}

/* What --bench times (the command line's choices). */
struct bench_opts {
    std::vector<int> Ms{1024, 8192};
    const char *shapes = nullptr; /* comma-separated name parts, or all */
    const char *kinds = nullptr;  /* kind digits, or all */
    bool bf16 = false, random_routing = false;
    bool int4 = false; /* also the int4 g128 kind (bf16 A, random codes and scales) */
    bool block = false; /* also the fp8 block kind (the same e4m3 A and B, random block scales) */
    int whole_tiles = 0;
    int order = FMCU_GG_ORDER_AUTO;
};

static void run_bench(int sms, const bench_opts &o)
{
    const bench_shape shapes[] = {{"qwen3-30b-a3b", 128, 8, 2048, 768},
                                  {"mixtral-8x7b", 8, 2, 4096, 14336},
                                  {"gpt-oss-120b", 128, 4, 2880, 2880},
                                  {"deepseek-v3", 256, 8, 7168, 2048}};
    cudaEvent_t e0, e1;
    CUDA_OK(cudaEventCreate(&e0));
    CUDA_OK(cudaEventCreate(&e1));
    /* Median of 15 launches after 3 warm-ups, us; kind FMCU_GG_KINDS: the
     * int4 kind's swapped form (fmcu_gg_w4_swap_launch). */
    auto median_us = [&](const fmcu_gg_args &a, fmcu_gg_kind kind) {
        std::vector<float> t;
        for (int it = 0; it < 18; it++) {
            CUDA_OK(cudaEventRecord(e0));
            CUDA_OK(kind == FMCU_GG_KINDS ? fmcu_gg_w4_swap_launch(&a, sms, 0) : fmcu_gg_launch(&a, kind, sms, 0));
            CUDA_OK(cudaEventRecord(e1));
            CUDA_OK(cudaEventSynchronize(e1));
            float ms_ = 0;
            CUDA_OK(cudaEventElapsedTime(&ms_, e0, e1));
            if (it >= 3)
                t.push_back(ms_);
        }
        std::sort(t.begin(), t.end());
        return t[t.size() / 2] * 1e3;
    };
    for (const bench_shape &s : shapes)
        for (int M : o.Ms)
            if (!o.shapes || names_match(o.shapes, s.name))
            for (int g = 1; g <= 2; g++) {
                problem pb;
                pb.E = s.E;
                pb.N = g == 1 ? 2 * s.I : s.H;
                pb.K = g == 1 ? s.H : s.I;
                pb.rows.assign(s.E, (int)((int64_t)M * s.k / s.E));
                if (o.random_routing) { /* k distinct experts per token, a fixed seed per point */
                    pb.rows.assign(s.E, 0);
                    std::vector<int> pick(s.E);
                    for (int tkn = 0; tkn < M; tkn++) {
                        for (int e = 0; e < s.E; e++)
                            pick[e] = e;
                        for (int j = 0; j < s.k; j++) { /* partial Fisher-Yates */
                            const int q = j + (int)(mix(((uint64_t)M << 32) + (uint64_t)tkn * 64 + j) % (s.E - j));
                            std::swap(pick[j], pick[q]);
                            pb.rows[pick[j]]++;
                        }
                    }
                }
                pb.extra_rows = 0;
                pb.row_vec = pb.col_vec = 1;
                pb.bf16 = o.bf16;
                buffers bf;
                make(pb, 7, bf);
                const double flop = 2.0 * bf.R * pb.N * pb.K;
                printf("%-14s M=%-5d GEMM%d rows/expert %-5d N=%-5d K=%-5d", s.name, M, g,
                       (int)((int64_t)M * s.k / s.E), pb.N, pb.K);
                for (int kind = 0; kind < FMCU_GG_KINDS; kind++) {
                    if ((o.kinds && !strchr(o.kinds, '0' + kind)) ||
                        (pb.bf16 && fmcu_gg_promoted(kind)))
                        continue;
                    const double us = median_us(args_of(pb, bf, o.whole_tiles, o.order), (fmcu_gg_kind)kind);
                    printf("  %s %.1f us %.0f TF", KIND_NAMES[kind], us, flop / us * 1e-6);
                }
                if (o.int4 && pb.bf16) { /* the int4 g128 kind on the same A */
                    const int kp = (pb.K + 31) / 32 * 32, groups = (pb.K + 127) / 128;
                    uint8_t *codes;
                    float *gsc;
                    CUDA_OK(cudaMalloc(&codes, (size_t)pb.E * pb.N * kp / 2));
                    CUDA_OK(cudaMalloc(&gsc, (size_t)pb.E * pb.N * groups * sizeof(float)));
                    fill_w4<<<256, 256>>>(codes, (size_t)pb.E * pb.N * kp / 2, 11, 0);
                    fill_scale<<<64, 256>>>(gsc, (size_t)pb.E * pb.N * groups, 12, -9);
                    CUDA_OK(cudaGetLastError());
                    fmcu_gg_args a = args_of(pb, bf, o.whole_tiles, o.order);
                    a.s_row = a.s_col = nullptr;
                    a.b = codes;
                    a.w4 = FMCU_GG_W4_INT4;
                    a.kp = kp;
                    a.gscale = gsc;
                    a.groups = groups;
                    const double us = median_us(a, FMCU_GG_N128_FAST);
                    printf("  int4-g128 %.1f us %.0f TF", us, flop / us * 1e-6);
                    const double us_s = median_us(a, FMCU_GG_KINDS); /* the swapped form */
                    printf("  int4-swap %.1f us %.0f TF", us_s, flop / us_s * 1e-6);
                    cudaFree(codes);
                    cudaFree(gsc);
                }
                if (o.block && !pb.bf16 && pb.N % 128 == 0 && pb.K % 128 == 0) { /* the fp8 block kind, same A, B */
                    const size_t na = (size_t)bf.R * (pb.K / 128) + 1, nb = (size_t)pb.E * (pb.N / 128) * (pb.K / 128);
                    float *a_sf, *b_sf;
                    CUDA_OK(cudaMalloc(&a_sf, na * sizeof(float)));
                    CUDA_OK(cudaMalloc(&b_sf, nb * sizeof(float)));
                    fill_scale<<<64, 256>>>(a_sf, na, 13, -7);
                    fill_scale<<<64, 256>>>(b_sf, nb, 14, -9);
                    CUDA_OK(cudaGetLastError());
                    fmcu_gg_args a = args_of(pb, bf, o.whole_tiles, o.order);
                    a.s_row = a.s_col = nullptr;
                    a.a_sf = a_sf;
                    a.b_sf = b_sf;
                    const double us = median_us(a, FMCU_GG_N192_PROMOTED);
                    printf("  fp8-block %.1f us %.0f TF", us, flop / us * 1e-6);
                    cudaFree(a_sf);
                    cudaFree(b_sf);
                }
                printf("%s\n", pb.bf16 ? " (bf16)" : "");
                fflush(stdout);
                release(bf);
            }
}

static int usage(void)
{
    fprintf(stderr, "usage: grouped_gemm_check [--seed N]\n"
                    "       grouped_gemm_check --bench [--m M,...] [--shapes PARTS] [--kinds DIGITS] [--bf16 | --int4 | --block]\n"
                    "                          [--routing random] [--whole] [--order fixed|counter]\n");
    return 2;
}

/* A comma-separated list of positive whole numbers. */
static bool parse_list(const char *s, std::vector<int> &out)
{
    out.clear();
    while (s && *s) {
        char *end = nullptr;
        const long v = strtol(s, &end, 10);
        if (end == s || v <= 0 || v > (1 << 20) || (*end && *end != ','))
            return false;
        out.push_back((int)v);
        s = *end ? end + 1 : end;
    }
    return !out.empty();
}

int main(int argc, char **argv)
{
    bool bench = false;
    bench_opts bo;
    uint64_t seed = 1;
    for (int a = 1; a < argc; a++) {
        const char *arg = argv[a], *next = a + 1 < argc ? argv[a + 1] : nullptr;
        char why[256];
        if (!strcmp(arg, "--bench")) {
            bench = true;
        } else if (!strcmp(arg, "--seed") && next) {
            char *end = nullptr;
            seed = strtoull(next, &end, 0);
            if (!*next || *end || *next == '-')
                return usage();
            a++;
        } else if (!strcmp(arg, "--m") && next) {
            if (!parse_list(next, bo.Ms))
                return usage();
            a++;
        } else if (!strcmp(arg, "--shapes") && next) {
            bo.shapes = argv[++a];
        } else if (!strcmp(arg, "--kinds") && next) {
            bo.kinds = argv[++a];
        } else if (!strcmp(arg, "--bf16")) {
            bo.bf16 = true;
        } else if (!strcmp(arg, "--int4")) {
            bo.bf16 = bo.int4 = true;
        } else if (!strcmp(arg, "--block")) {
            bo.block = true;
        } else if (!strcmp(arg, "--routing") && next && !strcmp(next, "random")) {
            bo.random_routing = true;
            a++;
        } else if (!strcmp(arg, "--whole")) {
            bo.whole_tiles = 1;
        } else if (!strcmp(arg, "--order") && next) {
            fmcu_options opt;
            fmcu_options_default(&opt);
            if (fmcu_options_set(&opt, "prefill_tile_order", next, why, sizeof why) != 0) {
                fprintf(stderr, "--order: %s\n", why);
                return 2;
            }
            bo.order = opt.prefill_tile_order;
            a++;
        } else {
            return usage();
        }
    }
    int dev = 0, major = 0, sms = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess || major != 9) {
        printf("SKIP: no sm_90 device\n");
        return 77;
    }
    CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    if (bench) {
        run_bench(sms, bo);
        return 0;
    }
    const int failed = run_checks(seed, sms);
    printf("%s: %d failed (seed %llu)\n", failed ? "FAIL" : "PASS", failed, (unsigned long long)seed);
    return failed ? 1 : 0;
}
