/*
 * tests/cuda/quant_row_check.cu - plugins/cuda/quant_row.cuh (the row
 * quantization of the quant, amax and plan kernels) on an sm_90 GPU,
 * against the core library's fp8 quantization (include/fusedmoe/formats.h:
 * fmoe_fp8_quantize_blocks, fmoe_fp8_quantize, fmoe_fp8_dynamic_scale),
 * which is the reference's arithmetic. Codes and scales must be equal bit
 * for bit.
 *
 * Cases: bf16 and f16 rows; per token, per tensor (static and dynamic: the
 * amax from row_amax, checked too), per 1x128 group (f32 and UE8M0 scales;
 * row lengths that end in a partial group) and per 1x64 group; with and
 * without a router weight on the input; blocks of 256 and 1024 threads;
 * row lengths that take the register path (multiples of 8 up to 8 pieces
 * a thread) and ones that take the scalar loop (not a multiple of 8, too
 * long for the block, a row stride that is not a multiple of 8); a row
 * marked invalid must stay untouched. Values: random signs, mantissas and
 * exponents over a wide range (e4m3 subnormals, codes that round to zero,
 * saturation under a static scale), never all zero; from a fixed seed
 * (--seed N to change it), printed on failure.
 *
 * Exit 0 pass, 1 fail, 77 no sm_90 device.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "fusedmoe/formats.h"
#include "plugins/cuda/quant_row.cuh"

#include "cuda_ok.h" /* tests/cuda */

using fmcu_quant::quant_args;

namespace {

__global__ void quant_rows_kernel(const quant_args a)
{
    __shared__ float red[32];
    fmcu_quant::quant_row(a, blockIdx.x, red);
}

__global__ void amax_rows_kernel(const quant_args a, uint32_t *amax)
{
    __shared__ float red[32];
    if (a.row_valid && a.row_valid[blockIdx.x] < 0)
        return;
    const float m = fmcu_quant::row_amax(a, blockIdx.x, red);
    if (threadIdx.x == 0)
        atomicMax(amax, __float_as_uint(m));
}

uint64_t rng_state;

uint32_t next_u32()
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

/* A random finite value of the dtype, never zero: |v| in 2^lo .. 2^hi. */
uint16_t random_bits(int32_t dtype, int lo, int hi)
{
    const float m = 1.0f + (next_u32() & 0xFFFF) / 65536.0f;
    const float v = ldexpf(next_u32() & 1 ? -m : m, lo + (int)(next_u32() % (uint32_t)(hi - lo + 1)));
    if (dtype == FMOE_DTYPE_BF16)
        return __nv_bfloat16_raw(__float2bfloat16_rn(v)).x;
    return __half_raw(__float2half_rn(v)).x;
}

float decode(int32_t dtype, uint16_t b)
{
    if (dtype == FMOE_DTYPE_BF16) {
        __nv_bfloat16_raw r;
        r.x = b;
        return __bfloat162float(__nv_bfloat16(r));
    }
    __half_raw r;
    r.x = b;
    return __half2float(__half(r));
}

float round_to(int32_t dtype, float v)
{
    return dtype == FMOE_DTYPE_BF16 ? __bfloat162float(__float2bfloat16_rn(v)) : __half2float(__float2half_rn(v));
}

enum mode { TOKEN, TENSOR_STATIC, TENSOR_DYNAMIC, GROUP128, GROUP128_UE8M0, GROUP64 };
const char *MODE_NAMES[] = {"token", "tensor-static", "tensor-dynamic", "group128", "group128-ue8m0", "group64"};

struct qcase {
    int32_t dtype;
    uint32_t cols;
    int64_t ld;      /* row stride in values, >= cols */
    mode m;
    bool weighted;
    unsigned threads;
};

int failures;

void fail(uint64_t seed, const qcase &c, const char *what)
{
    fprintf(stderr, "FAIL (seed %llu) %s cols=%u ld=%lld %s%s threads=%u: %s\n", (unsigned long long)seed,
            c.dtype == FMOE_DTYPE_BF16 ? "bf16" : "f16", c.cols, (long long)c.ld, MODE_NAMES[c.m],
            c.weighted ? " weighted" : "", c.threads, what);
    failures++;
}

/* Rows 0 and 2 valid, row 1 marked invalid (its output must stay 0xA5). */
void run_case(uint64_t seed, const qcase &c)
{
    const int rows = 3;
    const int64_t n_in = (int64_t)rows * c.ld;
    std::vector<uint16_t> bits((size_t)n_in);
    for (int r = 0; r < rows; r++) {
        /* Row 2 spans a wide range: subnormal e4m3 codes and codes that round to zero. */
        const int lo = r == 2 ? -40 : -6, hi = r == 2 ? 12 : 6;
        for (int64_t i = 0; i < c.ld; i++)
            bits[(size_t)(r * c.ld + i)] = random_bits(c.dtype, lo, hi);
    }
    const float w[rows] = {0.8125f + (next_u32() % 1000) / 4096.0f, 1.0f, 0.3f + (next_u32() % 1000) / 8192.0f};
    const int32_t valid[rows] = {0, -1, 5};

    /* What the kernels should see: the row weight applied and rounded to the dtype. */
    std::vector<float> x((size_t)rows * c.cols);
    for (int r = 0; r < rows; r++)
        for (uint32_t i = 0; i < c.cols; i++) {
            float v = decode(c.dtype, bits[(size_t)(r * c.ld + i)]);
            x[(size_t)r * c.cols + i] = c.weighted ? round_to(c.dtype, v * w[r]) : v;
        }

    const uint32_t group = c.m == GROUP64 ? 64 : 128;
    const bool grouped = c.m == GROUP128 || c.m == GROUP128_UE8M0 || c.m == GROUP64;
    const int groups = grouped ? (int)((c.cols + group - 1) / group) : 1;
    const int32_t rule = c.m == GROUP128_UE8M0 ? FMOE_FP8_SCALE_UE8M0 : FMOE_FP8_SCALE_F32;
    float amax_all = 0.0f;
    for (int r = 0; r < rows; r += 2)
        for (uint32_t i = 0; i < c.cols; i++)
            amax_all = fmaxf(amax_all, fabsf(x[(size_t)r * c.cols + i]));
    /* A static scale that some values exceed 448 times (they saturate). */
    const float static_scale = amax_all / 300.0f;

    std::vector<uint8_t> want_q((size_t)rows * c.cols, 0xA5);
    std::vector<float> want_s((size_t)rows * groups, -1.0f);
    float want_tensor_scale = 0.0f;
    for (int r = 0; r < rows; r += 2) {
        const float *xr = &x[(size_t)r * c.cols];
        uint8_t *qr = &want_q[(size_t)r * c.cols];
        fmoe_status st;
        if (c.m == TOKEN || grouped) {
            st = fmoe_fp8_quantize_blocks(FMOE_DTYPE_FP8_E4M3FN, 448.0f, rule, 1, c.cols, 1, grouped ? group : c.cols,
                                          xr, qr, &want_s[(size_t)r * groups]);
        } else {
            want_tensor_scale =
                c.m == TENSOR_STATIC ? static_scale : fmoe_fp8_dynamic_scale(amax_all, 448.0f, FMOE_FP8_SCALE_F32);
            st = fmoe_fp8_quantize(FMOE_DTYPE_FP8_E4M3FN, 448.0f, want_tensor_scale, xr, c.cols, qr);
        }
        if (st != FMOE_STATUS_OK) {
            fail(seed, c, "the core library refused the reference quantization");
            return;
        }
    }

    uint16_t *d_src;
    uint8_t *d_q;
    float *d_w, *d_scale, *d_static;
    int32_t *d_valid;
    uint32_t *d_amax;
    CUDA_OK(cudaMalloc(&d_src, bits.size() * 2));
    CUDA_OK(cudaMalloc(&d_q, want_q.size()));
    CUDA_OK(cudaMalloc(&d_w, sizeof w));
    CUDA_OK(cudaMalloc(&d_scale, want_s.size() * sizeof(float)));
    CUDA_OK(cudaMalloc(&d_static, sizeof(float)));
    CUDA_OK(cudaMalloc(&d_valid, sizeof valid));
    CUDA_OK(cudaMalloc(&d_amax, sizeof(uint32_t)));
    CUDA_OK(cudaMemcpy(d_src, bits.data(), bits.size() * 2, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(d_q, 0xA5, want_q.size()));
    CUDA_OK(cudaMemcpy(d_w, w, sizeof w, cudaMemcpyHostToDevice));
    std::vector<float> neg(want_s.size(), -1.0f);
    CUDA_OK(cudaMemcpy(d_scale, neg.data(), neg.size() * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d_static, &static_scale, sizeof(float), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(d_valid, valid, sizeof valid, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(d_amax, 0, sizeof(uint32_t)));

    quant_args a = {};
    a.src = d_src;
    a.ld = c.ld;
    a.dtype = c.dtype;
    a.cols = c.cols;
    a.row_weight = c.weighted ? d_w : nullptr;
    a.row_valid = d_valid;
    a.mode = c.m == TOKEN ? fmcu_quant::QM_TOKEN : grouped ? fmcu_quant::QM_GROUP : fmcu_quant::QM_TENSOR;
    a.group = group;
    a.ue8m0 = c.m == GROUP128_UE8M0;
    a.static_scale = c.m == TENSOR_STATIC ? d_static : nullptr;
    a.amax = c.m == TENSOR_DYNAMIC ? d_amax : nullptr;
    a.dst = d_q;
    a.scale = d_scale;
    if (c.m == TENSOR_DYNAMIC) {
        amax_rows_kernel<<<rows, c.threads>>>(a, d_amax);
        CUDA_OK(cudaGetLastError());
    }
    quant_rows_kernel<<<rows, c.threads>>>(a);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaDeviceSynchronize());

    std::vector<uint8_t> got_q(want_q.size());
    std::vector<float> got_s(want_s.size());
    uint32_t got_amax;
    CUDA_OK(cudaMemcpy(got_q.data(), d_q, got_q.size(), cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(got_s.data(), d_scale, got_s.size() * sizeof(float), cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(&got_amax, d_amax, sizeof got_amax, cudaMemcpyDeviceToHost));

    char msg[256];
    if (c.m == TENSOR_DYNAMIC) {
        float a_got;
        memcpy(&a_got, &got_amax, 4);
        if (a_got != amax_all) {
            snprintf(msg, sizeof msg, "row_amax gave %a, expected %a", a_got, amax_all);
            fail(seed, c, msg);
        }
    }
    for (size_t i = 0; i < want_q.size(); i++)
        if (got_q[i] != want_q[i]) {
            snprintf(msg, sizeof msg, "code of row %zu column %zu: 0x%02x, expected 0x%02x (x = %a)", i / c.cols,
                     i % c.cols, got_q[i], want_q[i], x[i]);
            fail(seed, c, msg);
            break;
        }
    if (c.m == TOKEN || grouped) {
        for (size_t i = 0; i < want_s.size(); i++)
            if (memcmp(&got_s[i], &want_s[i], 4) != 0) {
                snprintf(msg, sizeof msg, "scale %zu: %a, expected %a", i, got_s[i], want_s[i]);
                fail(seed, c, msg);
                break;
            }
    } else if (c.m == TENSOR_DYNAMIC && memcmp(&got_s[0], &want_tensor_scale, 4) != 0) {
        snprintf(msg, sizeof msg, "tensor scale %a, expected %a", got_s[0], want_tensor_scale);
        fail(seed, c, msg);
    }
    cudaFree(d_src);
    cudaFree(d_q);
    cudaFree(d_w);
    cudaFree(d_scale);
    cudaFree(d_static);
    cudaFree(d_valid);
    cudaFree(d_amax);
}

} // namespace

int main(int argc, char **argv)
{
    uint64_t seed = 1;
    if (argc == 3 && !strcmp(argv[1], "--seed")) {
        char *end = nullptr;
        seed = strtoull(argv[2], &end, 0);
        if (!*argv[2] || *end || *argv[2] == '-') {
            fprintf(stderr, "usage: quant_row_check [--seed N]\n");
            return 2;
        }
    } else if (argc != 1) {
        fprintf(stderr, "usage: quant_row_check [--seed N]\n");
        return 2;
    }
    int dev = 0, major = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess || major != 9) {
        printf("quant_row_check: no sm_90 device, skipped\n");
        return 77;
    }
    rng_state = seed * 0x9E3779B97F4A7C15ULL + 1;

    /* Register path (2 pieces of 8 values a thread): multiples of 8 up to
     * 4096 values at 256 threads and 16384 at 1024, a partial last
     * 128-group (2880, 4104); scalar loop: 100 and 2884 (not multiples of
     * 8), 4104 and 14336 at 256 threads and 16392 at 1024 (too long), and a
     * row stride not a multiple of 8. */
    const uint32_t lengths[] = {8, 768, 2048, 2880, 4096, 4104, 14336, 16384, 16392, 100, 2884};
    int cases = 0;
    for (int32_t dtype : {FMOE_DTYPE_BF16, FMOE_DTYPE_F16})
        for (uint32_t cols : lengths)
            for (unsigned threads : {256u, 1024u})
                for (int m = TOKEN; m <= GROUP64; m++)
                    for (bool weighted : {false, true}) {
                        const int64_t ld = cols == 2048 && weighted ? cols + 3 : cols + (cols % 64 == 0 ? 64 : 0);
                        run_case(seed, {dtype, cols, ld, (mode)m, weighted, threads});
                        cases++;
                    }
    if (failures) {
        printf("quant_row_check: %d of %d cases failed (seed %llu; --seed %llu reruns it)\n", failures, cases,
               (unsigned long long)seed, (unsigned long long)seed);
        return 1;
    }
    printf("quant_row_check: %d cases passed (seed %llu)\n", cases, (unsigned long long)seed);
    return 0;
}
