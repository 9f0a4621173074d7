/*
 * tests/cpu/test_cpu_kernels.c - the CPU plugin's int8 dot-product kernels
 * (plugins/cpu/qgemm_*.c) against a plain model of qgemm.h's contract, on
 * random data and on the values that would saturate a careless vpmaddubsw,
 * for every ISA this machine enables; the repacking (qprep.c) against the
 * unpacked weights; the activation quantizers against the reference
 * codecs; and the ISA choice (the option isa, clamped).
 *
 * The kernels must agree bit for bit: their integer sums are exact and
 * their float steps are the same operations in the same order.
 */
#include <stdlib.h>
#include <string.h>

#include "fusedmoe/formats.h"
#include "fusedmoe/kit/half.h"
#include "plugins/cpu/cpu.h"
#include "plugins/cpu/qgemm.h"
#include "tests/test_util.h"

static void *test_alloc(void *ctx, size_t size, size_t alignment)
{
    (void)ctx;
    void *p = NULL;
    return posix_memalign(&p, alignment < sizeof(void *) ? sizeof(void *) : alignment, size ? size : 1) == 0 ? p : NULL;
}

static void qw_free(cpu_qweights *q)
{
    free(q->w);
    free(q->gscale);
    free(q->gscale16);
    free(q->wsum);
}

/* How values are drawn: random, or the extremes of each range. */
enum { DRAW_RANDOM, DRAW_EXTREME };

/* The contract of qgemm.h computed directly from the unpacked weights. */
static void model_row(const cpu_qweights *q, const int8_t *w, const float *scales, uint32_t e, uint32_t n,
                      const int8_t *a, int32_t off, float *out)
{
    uint32_t K = q->k, G = q->groups, g_src = q->group >= K ? 1 : K / q->group;
    const int8_t *row = w + ((size_t)e * q->n + n) * K;
    if (!q->int4) {
        int32_t acc = 0;
        for (uint32_t k = 0; k < K; k++)
            acc += (int32_t)a[k] * row[k];
        *out = scales[(size_t)e * q->n + n] * (float)acc;
        return;
    }
    float f = 0.0f;
    for (uint32_t g = 0; g < G; g++) {
        int32_t acc = 0;
        for (uint32_t k = g * q->group; k < (g + 1) * q->group && k < K; k++)
            acc += ((int32_t)a[k] + off) * row[k];
        float term = scales[((size_t)e * q->n + n) * g_src + g] * (float)acc;
        f += term;
    }
    *out = f;
}

/* One shape through every enabled ISA: E experts, N x K, group (K: one). */
static void check_shape(int int4, uint32_t E, uint32_t N, uint32_t K, uint32_t group, uint32_t M, int draw,
                        uint64_t stream)
{
    fmoe_rng r = fmoe_rng_for(stream);
    uint32_t G = group >= K ? 1 : K / group;
    int8_t *w = malloc((size_t)E * N * K);
    float *sc = malloc(sizeof(float) * E * N * G);
    for (size_t i = 0; i < (size_t)E * N * K; i++) {
        int lo = int4 ? -8 : -128, hi = int4 ? 7 : 127;
        int v = draw == DRAW_EXTREME ? (fmoe_rng_u64(&r) & 1 ? lo : hi) : lo + (int)(fmoe_rng_u64(&r) % (hi - lo + 1));
        w[i] = (int8_t)v;
    }
    /* Odd streams: bf16 group scales (the scheme's), which the repacking
     * also keeps as bf16 for the kernels that stream those. */
    int bf16_scales = int4 && G > 1 && (stream & 1);
    for (size_t i = 0; i < (size_t)E * N * G; i++) {
        sc[i] = fmoe_rng_uniform(&r, 0.001f, 0.1f);
        if (bf16_scales)
            sc[i] = fmoe_bf16_to_f32(fmoe_f32_to_bf16(sc[i]));
    }
    cpu_qweights q;
    int rc = int4 ? cpu_qweights_int4(&q, E, N, K, group, w, sc, test_alloc, NULL)
                  : cpu_qweights_int8(&q, E, N, K, w, sc, test_alloc, NULL);
    ck_assert_int_eq(rc, 0);
    ck_assert_uint_eq(q.kp % (int4 ? 8 : 4), 0);
    ck_assert_int_eq(q.gscale16 != NULL, bf16_scales);

    /* Activation rows, padded with zeros, and their per-group sums. */
    int8_t *a = calloc((size_t)M * q.kp, 1);
    int32_t *off = calloc(M, sizeof(int32_t)), *qsum = calloc((size_t)M * q.groups, sizeof(int32_t));
    int32_t *qcorr = calloc((size_t)M * q.groups, sizeof(int32_t));
    for (uint32_t m = 0; m < M; m++) {
        for (uint32_t k = 0; k < K; k++) {
            /* int8 weights need |a| <= 127 (symmetric per-token quantization). */
            int lo = int4 ? -128 : -127;
            int v = draw == DRAW_EXTREME ? (fmoe_rng_u64(&r) & 1 ? lo : 127)
                                         : lo + (int)(fmoe_rng_u64(&r) % (127 - lo + 1));
            a[(size_t)m * q.kp + k] = (int8_t)v;
        }
        off[m] = int4 ? (int32_t)(fmoe_rng_u64(&r) % 256) - 128 : 0;
        for (uint32_t g = 0; g < q.groups; g++)
            for (uint32_t k = g * q.group; k < (g + 1) * q.group; k++)
                qsum[(size_t)m * q.groups + g] += a[(size_t)m * q.kp + k];
        cpu_qcorr(off[m], qsum + (size_t)m * q.groups, q.groups, q.group, qcorr + (size_t)m * q.groups);
    }
    /* int4 with small groups: each call also with the correction words
     * (the VNNI kernel's one-vpdpwssd form; the others ignore them). */
    int forms = int4 && cpu_qcorr_fits(q.group) ? 2 : 1;

    int best = cpu_isa_detect();
    /* avx512_bf16 has no int8 kernels of its own: the VNNI ones serve it. */
    int top = best > CPU_ISA_AVX512_VNNI ? CPU_ISA_AVX512_VNNI : best;
    ck_assert_ptr_eq(cpu_kernels_for(best), cpu_kernels_for(top));
    for (int isa = CPU_ISA_PORTABLE; isa <= top; isa++) {
        const cpu_kernels *kern = cpu_kernels_for(isa);
        ck_assert_str_eq(kern->name, cpu_isa_name(isa));
        for (int form = 0; form < forms; form++)
            for (uint32_t e = 0; e < E; e++)
                for (uint32_t t = 0; t < q.tiles; t++)
                    for (uint32_t m0 = 0; m0 < M; m0 += kern->mr) {
                        cpu_qtile tile;
                        memset(&tile, 0, sizeof tile);
                        tile.w = cpu_qweights_tile(&q, e, t);
                        tile.gscale = cpu_qweights_gscale(&q, e, t);
                        tile.wsum = cpu_qweights_wsum(&q, e, t);
                        tile.gscale16 = cpu_qweights_gscale16(&q, e, t);
                        tile.ahead = t + 1 < q.tiles ? cpu_qweights_tile(&q, e, t + 1) : NULL;
                        tile.kp = q.kp;
                        tile.group = q.group;
                        tile.groups = q.groups;
                        tile.mr = M - m0 < kern->mr ? M - m0 : kern->mr;
                        for (uint32_t m = 0; m < tile.mr; m++) {
                            tile.a[m] = a + (size_t)(m0 + m) * q.kp;
                            tile.off[m] = off[m0 + m];
                            tile.qsum[m] = qsum + (size_t)(m0 + m) * q.groups;
                            tile.qcorr[m] = form ? qcorr + (size_t)(m0 + m) * q.groups : NULL;
                        }
                        (int4 ? kern->i4 : kern->i8)(&tile);
                        for (uint32_t m = 0; m < tile.mr; m++)
                            for (uint32_t rr = 0; rr < CPU_NR && t * CPU_NR + rr < N; rr++) {
                                float want;
                                model_row(&q, w, sc, e, t * CPU_NR + rr, a + (size_t)(m0 + m) * q.kp, off[m0 + m],
                                          &want);
                                ck_assert_msg(
                                    tile.out[m][rr] == want,
                                    "%s %s%s N%u K%u g%u: expert %u row %u token %u: got %.9g want %.9g (seed %llu)",
                                    kern->name, int4 ? "int4" : "int8", form ? " qcorr" : "", N, K, group, e,
                                    t * CPU_NR + rr, m0 + m, tile.out[m][rr], want,
                                    (unsigned long long)fmoe_test_seed());
                            }
                    }
    }
    qw_free(&q);
    free(w), free(sc), free(a), free(off), free(qsum), free(qcorr);
}

START_TEST(int8_random_shapes)
{
    /* K not a multiple of 4, N not of 16, several rows per call. */
    check_shape(0, 2, 40, 130, 130, 7, DRAW_RANDOM, 1);
    check_shape(0, 1, 16, 4, 4, 1, DRAW_RANDOM, 2);
    check_shape(0, 3, 33, 257, 257, 5, DRAW_RANDOM, 3);
    /* More rows than any kernel's mr (8): full calls and a remainder. */
    check_shape(0, 1, 24, 96, 96, 11, DRAW_RANDOM, 17);
}
END_TEST

START_TEST(int8_extremes_do_not_saturate)
{
    /* w in {-128, 127}, a in {-127, 127}: each vpmaddubsw pair is at its largest. */
    check_shape(0, 1, 32, 512, 512, 4, DRAW_EXTREME, 4);
}
END_TEST

START_TEST(int4_channel_random)
{
    check_shape(1, 2, 40, 130, 130, 6, DRAW_RANDOM, 5);
    check_shape(1, 1, 17, 8, 8, 1, DRAW_RANDOM, 6);
}
END_TEST

START_TEST(int4_groups_random)
{
    check_shape(1, 2, 48, 256, 32, 5, DRAW_RANDOM, 7);
    check_shape(1, 1, 20, 192, 64, 3, DRAW_RANDOM, 8);
    check_shape(1, 1, 16, 64, 8, 2, DRAW_RANDOM, 9);
    /* More tiles, and rows off the kernels' blocks of 2 and 4. */
    check_shape(1, 2, 100, 256, 32, 7, DRAW_RANDOM, 13);
    check_shape(1, 1, 72, 128, 32, 1, DRAW_RANDOM, 14);
    check_shape(1, 1, 40, 256, 32, 11, DRAW_RANDOM, 15);
}
END_TEST

START_TEST(int4_extremes)
{
    check_shape(1, 1, 32, 1024, 32, 4, DRAW_EXTREME, 10);
    /* The largest groups the correction words take (64: both halves at
     * their widest, |-qsum - group off| up to 16384). */
    check_shape(1, 1, 32, 512, 64, 4, DRAW_EXTREME, 18);
    check_shape(1, 1, 32, 1024, 1024, 4, DRAW_EXTREME, 11);
    /* Groups above 2048 values: the nibble sum no longer fits the 16 bits
     * the VNNI kernel's vpdpwssd takes, so it multiplies in 32 bits. */
    check_shape(1, 1, 16, 4096, 4096, 8, DRAW_EXTREME, 12);
    check_shape(1, 1, 16, 2048, 2048, 8, DRAW_EXTREME, 16);
}
END_TEST

START_TEST(int4_repack_refuses_out_of_range)
{
    int8_t w[16] = {0, 1, 2, 8};
    float s[2] = {1.0f, 1.0f};
    cpu_qweights q;
    ck_assert_int_eq(cpu_qweights_int4(&q, 1, 2, 8, 8, w, s, test_alloc, NULL), -2);
}
END_TEST

START_TEST(quant_sym_matches_vllm)
{
    fmoe_rng r = fmoe_rng_for(20);
    float x[37];
    for (int i = 0; i < 37; i++)
        x[i] = fmoe_rng_normal(&r) * 3.0f;
    int8_t q[40];
    float s;
    cpu_quant_sym(x, 37, 40, q, &s);
    float amax = 0.0f;
    for (int i = 0; i < 37; i++)
        amax = fmaxf(amax, fabsf(x[i]));
    ck_assert_float_eq(s, amax / 127.0f);
    for (int i = 0; i < 37; i++) {
        ck_assert_float_eq((float)q[i], rintf(x[i] * (127.0f / amax)));
        ck_assert_int_ge(q[i], -127);
    }
    for (int i = 37; i < 40; i++)
        ck_assert_int_eq(q[i], 0);
    x[3] = NAN;
    cpu_quant_sym(x, 37, 40, q, &s);
    ck_assert(isnan(s));
}
END_TEST

START_TEST(quant_asym_matches_codec)
{
    fmoe_rng r = fmoe_rng_for(21);
    float x[64];
    for (int i = 0; i < 64; i++)
        x[i] = fmoe_rng_normal(&r) + 0.7f;
    int8_t q[64], want[64];
    int32_t off, want_off, qsum[2];
    float s, want_s;
    cpu_quant_asym(x, 60, 64, 32, q, &off, &s, qsum);
    ck_assert_int_eq(fmoe_w4a8_quantize_activations(1, 60, x, want, &want_off, &want_s), FMOE_STATUS_OK);
    ck_assert_int_eq(off, want_off);
    ck_assert_float_eq(s, want_s);
    int32_t s0 = 0, s1 = 0;
    for (int i = 0; i < 60; i++) {
        ck_assert_int_eq(q[i], want[i]);
        *(i < 32 ? &s0 : &s1) += q[i];
    }
    for (int i = 60; i < 64; i++)
        ck_assert_int_eq(q[i], 0);
    ck_assert_int_eq(qsum[0], s0);
    ck_assert_int_eq(qsum[1], s1);
}
END_TEST

START_TEST(isa_choice)
{
    char note[160];
    int best = cpu_isa_detect();
    ck_assert_int_eq(cpu_isa_choose(CPU_ISA_AUTO, best, note, sizeof note), best);
    ck_assert_str_eq(note, "");
    ck_assert_int_eq(cpu_isa_choose(CPU_ISA_PORTABLE, best, note, sizeof note), CPU_ISA_PORTABLE);
    ck_assert_str_eq(note, "option isa = \"portable\": using portable");
    /* Never above what the machine enables: clamped, with a note. */
    ck_assert_int_eq(cpu_isa_choose(CPU_ISA_AVX512_VNNI, CPU_ISA_AVX2, note, sizeof note), CPU_ISA_AVX2);
    ck_assert_str_eq(note, "option isa = \"avx512_vnni\": this machine (with its OS) only enables avx2; using avx2");
    ck_assert_int_eq(cpu_isa_choose(CPU_ISA_AVX2, CPU_ISA_PORTABLE, note, sizeof note), CPU_ISA_PORTABLE);
    ck_assert_ptr_nonnull(strstr(note, "only enables portable"));
    ck_assert_int_eq(cpu_isa_choose(CPU_ISA_AVX2, CPU_ISA_AVX512_VNNI, note, sizeof note), CPU_ISA_AVX2);
    /* What CPUID + XCR0 allow is never more than the kernel reports in /proc/cpuinfo. */
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[4096];
        int has_avx2 = 0, has_vnni = 0;
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "flags", 5) == 0) {
                has_avx2 = strstr(line, " avx2") != NULL;
                has_vnni = strstr(line, " avx512_vnni") != NULL && strstr(line, " avx512bw") != NULL;
                break;
            }
        fclose(f);
        if (best >= CPU_ISA_AVX2)
            ck_assert(has_avx2);
        if (best >= CPU_ISA_AVX512_VNNI)
            ck_assert(has_vnni);
        fprintf(stderr, "# detected: %s\n", cpu_isa_name(best));
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cpu_kernels");
    TCase *tc = tcase_create("kernels");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, int8_random_shapes);
    tcase_add_test(tc, int8_extremes_do_not_saturate);
    tcase_add_test(tc, int4_channel_random);
    tcase_add_test(tc, int4_groups_random);
    tcase_add_test(tc, int4_extremes);
    tcase_add_test(tc, int4_repack_refuses_out_of_range);
    tcase_add_test(tc, quant_sym_matches_vllm);
    tcase_add_test(tc, quant_asym_matches_codec);
    tcase_add_test(tc, isa_choice);
    suite_add_tcase(s, tc);
    return fmoe_test_main(s, 9);
}
