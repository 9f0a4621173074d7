/*
 * tests/cpu/test_cpu_bgemm.c - the CPU plugin's bf16 kernels
 * (plugins/cpu/bgemm_*.c) and their weight layout (bprep.c):
 *
 *   - every ISA this machine enables against a float64 model of the dot
 *     products, on random seeded inputs: the error stays inside the f32
 *     summation bound, the values are real (never all zero), and rows past
 *     N in the last tile come out 0; shapes with K odd and off the 32
 *     block, N off the 64-row tile, and row counts 1 to 16 off the
 *     kernels' register blocks (1, 4);
 *   - every ISA, with 1 to 4 tiles per call, bit for bit against the
 *     portable kernel (bgemm.h: the same additions in the same order; the
 *     inputs here are never subnormal);
 *   - the AMX-BF16 kernel, where the machine and OS enable it, against the
 *     same model (its order of additions differs, so not bit for bit);
 *   - the repacking byte for byte against oneDNN's reorder into
 *     BA16a64b2a, the layout its matmul reads from the same memory.
 */
#include <dnnl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fusedmoe/kit/half.h"
#include "plugins/cpu/bgemm.h"
#include "plugins/cpu/cpu.h"
#include "tests/test_util.h"

static void *test_alloc(void *ctx, size_t size, size_t alignment)
{
    (void)ctx;
    void *p = NULL;
    return posix_memalign(&p, alignment < sizeof(void *) ? sizeof(void *) : alignment, size ? size : 1) == 0 ? p : NULL;
}

static uint16_t *random_bf16(fmoe_rng *r, size_t n, float scale)
{
    uint16_t *v = malloc((n ? n : 1) * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (size_t i = 0; i < n; i++)
        v[i] = fmoe_f32_to_bf16(scale * fmoe_rng_normal(r));
    return v;
}

/* One output against the float64 model: padding rows (n >= N) give 0,
 * the rest are inside the bound of K sequential f32 additions of exact
 * products, and never 0 where the products are not. */
static void check_value(const char *name, const uint16_t *w, const uint16_t *a, uint32_t N, uint32_t K, uint32_t M,
                        uint32_t e, uint32_t n, uint32_t row, float got)
{
    if (n >= N) {
        ck_assert_msg(got == 0.0f, "%s: padding row %u gives %g", name, n, got);
        return;
    }
    double exact = 0, mag = 0;
    for (uint32_t k = 0; k < K; k++) {
        double p = (double)fmoe_bf16_to_f32(w[((size_t)e * N + n) * K + k]) * fmoe_bf16_to_f32(a[(size_t)row * K + k]);
        exact += p;
        mag += fabs(p);
    }
    double bound = (K + 1) * ldexp(1.0, -24) * mag + 1e-30;
    ck_assert_msg(fabs(got - exact) <= bound,
                  "%s N%u K%u M%u: expert %u row %u act %u: got %.9g, exact %.12g, bound %.3g (seed %llu)", name, N, K,
                  M, e, n, row, got, exact, bound, (unsigned long long)fmoe_test_seed());
    ck_assert_msg(mag == 0 || got != 0.0f, "%s: a zero where %g was due", name, exact);
}

#if defined(FMOE_CPU_HAVE_AMX)
/* The AMX kernel (one tile a call, the rows packed K-padded to 32 with a
 * stride wider than that, as bgemv.c packs them) against the model. Its
 * order of additions is not the others', so no bit comparison. */
static void check_amx(const cpu_bweights *b, const uint16_t *w, const uint16_t *a, uint32_t E, uint32_t N, uint32_t K,
                      uint32_t M)
{
    uint32_t stride = (K + 31) / 32 * 32 + 32;
    uint16_t *pk = malloc(sizeof(uint16_t) * CPU_BMR * stride);
    ck_assert_ptr_nonnull(pk);
    for (uint32_t e = 0; e < E; e++)
        for (uint32_t m0 = 0; m0 < M; m0 += CPU_BMR) {
            static cpu_btile tile;
            memset(&tile, 0xFF, sizeof tile); /* out starts as NaN */
            tile.nt = 1;
            tile.k = K;
            tile.mr = M - m0 < CPU_BMR ? M - m0 : CPU_BMR;
            memset(pk, 0xFF, sizeof(uint16_t) * CPU_BMR * stride); /* NaN past the padding */
            for (uint32_t m = 0; m < tile.mr; m++) {
                memcpy(pk + (size_t)m * stride, a + (size_t)(m0 + m) * K, K * sizeof(uint16_t));
                memset(pk + (size_t)m * stride + K, 0, ((K + 31) / 32 * 32 - K) * sizeof(uint16_t));
            }
            tile.apk = pk;
            tile.apk_stride = stride;
            for (uint32_t t = 0; t < b->tiles; t++) {
                tile.w[0] = cpu_bweights_tile(b, e, t);
                tile.ahead = t + 1 < b->tiles ? cpu_bweights_tile(b, e, t + 1) : NULL;
                cpu_bkernels_amx.tile(&tile);
                for (uint32_t m = 0; m < tile.mr; m++)
                    for (uint32_t rr = 0; rr < CPU_BNR; rr++)
                        check_value("amx_bf16", w, a, N, K, M, e, t * CPU_BNR + rr, m0 + m, tile.out[0][m][rr]);
            }
        }
    free(pk);
}
#endif

/* One (E, N, K, M) case through every enabled ISA. */
static void check_shape(uint32_t E, uint32_t N, uint32_t K, uint32_t M, uint64_t stream)
{
    fmoe_rng r = fmoe_rng_for(stream);
    uint16_t *w = random_bf16(&r, (size_t)E * N * K, 1.0f);
    /* Activation rows are K wide and back to back, as in the plugin: a
     * kernel must not read a[K] of an odd K (it is the next row's first). */
    uint16_t *a = random_bf16(&r, (size_t)M * K + 1, 1.0f);
    cpu_bweights b;
    ck_assert_int_eq(cpu_bweights_pack(&b, E, N, K, w, test_alloc, NULL), 0);
    ck_assert_uint_eq(b.kp % CPU_BKP, 0);
    ck_assert_uint_eq(b.tiles, (N + CPU_BNR - 1) / CPU_BNR);
    float *first = malloc(sizeof(float) * E * b.tiles * CPU_BNR * M);
    int best = cpu_isa_detect();
    for (int isa = CPU_ISA_PORTABLE; isa <= best; isa++) {
        const cpu_bkernels *kern = cpu_bkernels_for(isa);
        ck_assert_str_eq(kern->name, cpu_isa_name(isa));
        /* Every tile count per call (the last call of an expert takes the rest). */
        for (uint32_t nt = 1; nt <= CPU_BNT; nt++)
            for (uint32_t e = 0; e < E; e++)
                for (uint32_t t0 = 0; t0 < b.tiles; t0 += nt)
                    for (uint32_t m0 = 0; m0 < M; m0 += CPU_BMR) {
                        static cpu_btile tile;
                        memset(&tile, 0xFF, sizeof tile); /* out starts as NaN */
                        tile.nt = b.tiles - t0 < nt ? b.tiles - t0 : nt;
                        for (uint32_t i = 0; i < tile.nt; i++)
                            tile.w[i] = cpu_bweights_tile(&b, e, t0 + i);
                        tile.ahead = t0 + tile.nt < b.tiles ? cpu_bweights_tile(&b, e, t0 + tile.nt) : NULL;
                        tile.k = K;
                        tile.mr = M - m0 < CPU_BMR ? M - m0 : CPU_BMR;
                        for (uint32_t m = 0; m < tile.mr; m++)
                            tile.a[m] = a + (size_t)(m0 + m) * K;
                        kern->tile(&tile);
                        for (uint32_t i = 0; i < tile.nt; i++)
                            for (uint32_t m = 0; m < tile.mr; m++)
                                for (uint32_t rr = 0; rr < CPU_BNR; rr++) {
                                    uint32_t t = t0 + i, n = t * CPU_BNR + rr;
                                    float got = tile.out[i][m][rr];
                                    float *keep = &first[(((size_t)e * b.tiles + t) * CPU_BNR + rr) * M + m0 + m];
                                    if (isa == CPU_ISA_PORTABLE && nt == 1)
                                        *keep = got;
                                    else
                                        ck_assert_msg(
                                            memcmp(&got, keep, sizeof got) == 0,
                                            "%s (%u tiles a call) vs portable N%u K%u M%u: expert %u row %u act %u: "
                                            "%.9g != %.9g (seed %llu)",
                                            kern->name, tile.nt, N, K, M, e, n, m0 + m, got, *keep,
                                            (unsigned long long)fmoe_test_seed());
                                    check_value(kern->name, w, a, N, K, M, e, n, m0 + m, got);
                                }
                    }
    }
#if defined(FMOE_CPU_HAVE_AMX)
    if (cpu_amx_enable())
        check_amx(&b, w, a, E, N, K, M);
#endif
    free(first), free(w), free(a), free(b.w);
}

START_TEST(random_shapes)
{
    /* K odd / off the 32 block, N off the 64-row tile; rows 1..16 and more
     * than one call's worth, off the register blocks of 1 and 4. */
    check_shape(1, 64, 32, 1, 1);
    check_shape(2, 40, 130, 7, 2);
    check_shape(1, 100, 67, 5, 3);
    check_shape(1, 17, 1, 3, 4);
    check_shape(2, 130, 95, 16, 5);
    check_shape(1, 64, 200, 19, 6);
    check_shape(1, 192, 513, 2, 7);
    check_shape(1, 65, 33, 13, 8);
}
END_TEST

START_TEST(qwen3_decode_shape)
{
    /* One expert of the benchmark's shape: K long enough for many K blocks. */
    check_shape(1, 1536 / 8, 2048, 4, 11);
    check_shape(1, 2048 / 16, 768, 9, 12);
}
END_TEST

START_TEST(repack_matches_onednn)
{
    static const uint32_t shapes[][2] = {{128, 128}, {40, 130}, {1536, 2048}, {17, 1}, {64, 33}};
    dnnl_engine_t eng;
    dnnl_stream_t stream;
    ck_assert_int_eq(dnnl_engine_create(&eng, dnnl_cpu, 0), dnnl_success);
    ck_assert_int_eq(dnnl_stream_create(&stream, eng, dnnl_stream_default_flags), dnnl_success);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        uint32_t N = shapes[i][0], K = shapes[i][1];
        fmoe_rng r = fmoe_rng_for(100 + i);
        uint16_t *w = random_bf16(&r, (size_t)N * K, 1.0f);
        cpu_bweights b;
        ck_assert_int_eq(cpu_bweights_pack(&b, 1, N, K, w, test_alloc, NULL), 0);
        /* The checkpoint's [N, K] is oneDNN's [K, N] weights in "ba". */
        dnnl_memory_desc_t plain, blocked;
        dnnl_dims_t d = {K, N};
        ck_assert_int_eq(dnnl_memory_desc_init_by_tag(&plain, 2, d, dnnl_bf16, dnnl_ba), dnnl_success);
        ck_assert_int_eq(dnnl_memory_desc_init_by_tag(&blocked, 2, d, dnnl_bf16, dnnl_BA16a64b2a), dnnl_success);
        size_t size = dnnl_memory_desc_get_size(&blocked);
        ck_assert_uint_eq(size, b.expert_elems * sizeof(uint16_t));
        uint16_t *want = malloc(size);
        memset(want, 0xA5, size);
        dnnl_memory_t src, dst;
        dnnl_primitive_desc_t pd;
        dnnl_primitive_t reorder;
        ck_assert_int_eq(dnnl_memory_create(&src, &plain, eng, w), dnnl_success);
        ck_assert_int_eq(dnnl_memory_create(&dst, &blocked, eng, want), dnnl_success);
        ck_assert_int_eq(dnnl_reorder_primitive_desc_create(&pd, &plain, eng, &blocked, eng, NULL), dnnl_success);
        ck_assert_int_eq(dnnl_primitive_create(&reorder, pd), dnnl_success);
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}};
        ck_assert_int_eq(dnnl_primitive_execute(reorder, stream, 2, args), dnnl_success);
        ck_assert_int_eq(dnnl_stream_wait(stream), dnnl_success);
        ck_assert_msg(memcmp(want, cpu_bweights_expert(&b, 0), size) == 0, "N%u K%u: the tiles differ from BA16a64b2a",
                      N, K);
        dnnl_primitive_destroy(reorder);
        dnnl_primitive_desc_destroy(pd);
        dnnl_memory_destroy(src);
        dnnl_memory_destroy(dst);
        free(want), free(w), free(b.w);
    }
    dnnl_stream_destroy(stream);
    dnnl_engine_destroy(eng);
}
END_TEST

START_TEST(isa_levels)
{
    char note[160];
    int best = cpu_isa_detect();
    ck_assert_int_eq(cpu_isa_choose(CPU_ISA_AVX512_BF16, CPU_ISA_AVX512_VNNI, note, sizeof note), CPU_ISA_AVX512_VNNI);
    ck_assert_ptr_nonnull(strstr(note, "only enables avx512_vnni"));
    ck_assert_int_eq(cpu_isa_choose(CPU_ISA_AVX512_VNNI, CPU_ISA_AVX512_BF16, note, sizeof note), CPU_ISA_AVX512_VNNI);
    ck_assert_str_eq(cpu_bkernels_for(CPU_ISA_PORTABLE)->name, "portable");
    /* What CPUID + XCR0 allow is never more than the kernel reports. */
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[4096];
        int fma = 0, bf16 = 0;
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "flags", 5) == 0) {
                fma = strstr(line, " fma") != NULL;
                bf16 = strstr(line, " avx512_bf16") != NULL;
                break;
            }
        fclose(f);
        if (best >= CPU_ISA_AVX2)
            ck_assert(fma);
        if (best >= CPU_ISA_AVX512_BF16)
            ck_assert(bf16);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cpu_bgemm");
    TCase *tc = tcase_create("kernels");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, random_shapes);
    tcase_add_test(tc, qwen3_decode_shape);
    tcase_add_test(tc, repack_matches_onednn);
    tcase_add_test(tc, isa_levels);
    suite_add_tcase(s, tc);
    return fmoe_test_main(s, 4);
}
