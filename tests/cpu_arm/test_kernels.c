/*
 * tests/cpu_arm/test_kernels.c - the W4A8 micro-kernels of plugins/cpu_arm
 * against a scalar model of their contract (kernels.h), on random int4
 * weights packed by carm_pack_expert and random int8 activation rows:
 * every kernel level the CPU offers (HWCAP) is forced in turn, and all
 * must agree with the model bit for bit (integer dot products are exact,
 * and the f32 steps are the same two roundings everywhere).
 *
 * The model reads the unpacked int8 weights, not the packed blob, so a
 * packing mistake fails too. Shapes cover channelwise K padded to 16,
 * groups of 32 and 64, N not a multiple of 8, and every row tail (m = 1..9).
 */
#include <string.h>

#include "fusedmoe/formats.h"
#include "plugins/cpu_arm/kernels.h"
#include "plugins/cpu_arm/pack.h"
#include "tests/cpu_arm/hwcap_arg.h"
#include "tests/test_util.h"

typedef struct kshape {
    uint32_t n, k, groups, group;
} kshape;

static const kshape shapes[] = {
    {8, 64, 1, 64},    /* channelwise, one block */
    {13, 40, 1, 40},   /* K padded to 48, N to 16 */
    {24, 136, 1, 136}, /* K padded to 144 */
    {16, 128, 4, 32},  /* groups of 32 */
    {21, 256, 4, 64},  /* groups of 64, N tail */
    {8, 96, 3, 32},
};

#define M_MAX 9

/* Random int4 values in [-8, 7], never all zero. */
static void random_weights(fmoe_rng *r, int8_t *w, size_t n)
{
    int any = 0;
    for (size_t i = 0; i < n; i++) {
        w[i] = (int8_t)((int)(fmoe_rng_u64(r) % 16) - 8);
        any |= w[i] != 0;
    }
    if (!any)
        w[0] = 7;
}

/* Activation rows: half quantized from random floats (realistic offsets),
 * half raw random bytes with offsets in [-127, 128] (the extremes). */
static void random_rows(fmoe_rng *r, uint32_t m, uint32_t k, uint32_t kp, int8_t *q, int32_t *o)
{
    float x[512];
    memset(q, 0, (size_t)m * kp);
    for (uint32_t i = 0; i < m; i++) {
        if (i % 2 == 0) {
            float shift = fmoe_rng_uniform(r, -1.0f, 1.0f);
            for (uint32_t c = 0; c < k; c++)
                x[c] = fmoe_rng_normal(r) + shift;
            float s;
            ck_assert_int_eq(fmoe_w4a8_quantize_activations(1, k, x, q + (size_t)i * kp, &o[i], &s), FMOE_STATUS_OK);
        } else {
            for (uint32_t c = 0; c < k; c++)
                q[(size_t)i * kp + c] = (int8_t)(fmoe_rng_u64(r) & 0xFF);
            o[i] = (int32_t)(fmoe_rng_u64(r) % 256) - 127;
        }
    }
}

/* The contract of kernels.h, from the unpacked weights. */
static void model(const kshape *s, uint32_t m, const int8_t *q, uint32_t kp, const int32_t *o, const int8_t *w,
                  const float *scales, uint32_t row0, float *out)
{
    for (uint32_t i = 0; i < m; i++)
        for (uint32_t j = 0; j < CARM_NR; j++) {
            uint32_t n = row0 + j;
            float f = 0.0f;
            for (uint32_t g = 0; g < s->groups; g++) {
                int64_t acc = 0;
                for (uint32_t c = g * s->group; c < (g + 1) * s->group && n < s->n; c++)
                    acc += (int64_t)(q[(size_t)i * kp + c] + o[i]) * w[(size_t)n * s->k + c];
                ck_assert(acc >= INT32_MIN && acc <= INT32_MAX);
                float term = (float)acc * (n < s->n ? scales[(size_t)n * s->groups + g] : 0.0f);
                f = f + term;
            }
            out[i * CARM_NR + j] = f;
        }
}

static void check_level(int isa)
{
    int hw = carm_isa_detect();
    if (isa > hw) {
        printf("# %s: skipped, this CPU lacks it (HWCAP offers %s)\n", carm_isa_name(isa), carm_isa_name(hw));
        fflush(stdout);
        return;
    }
    carm_kernel_fn fn = carm_kernel(isa);
    fmoe_rng r = fmoe_rng_for(100 + (uint64_t)isa);
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const kshape *s = &shapes[si];
        carm_shape cs;
        ck_assert_int_eq(carm_shape_init(&cs, s->n, s->k, s->groups, s->group), 0);
        int8_t *w = malloc((size_t)s->n * s->k);
        float *scales = malloc(sizeof(float) * s->n * s->groups);
        uint8_t *packed = malloc(cs.expert_bytes);
        int8_t *q = malloc((size_t)M_MAX * cs.kp);
        ck_assert(w && scales && packed && q);
        random_weights(&r, w, (size_t)s->n * s->k);
        for (uint32_t i = 0; i < s->n * s->groups; i++)
            scales[i] = fmoe_rng_uniform(&r, 0.001f, 0.1f) * (fmoe_rng_u64(&r) & 1 ? 1.0f : -1.0f);
        ck_assert_int_eq(carm_pack_expert(&cs, w, scales, packed, NULL), 0);
        for (uint32_t m = 1; m <= M_MAX; m++) {
            int32_t o[M_MAX];
            const int8_t *rows[M_MAX];
            random_rows(&r, m, s->k, cs.kp, q, o);
            for (uint32_t i = 0; i < m; i++)
                rows[i] = q + (size_t)i * cs.kp;
            for (uint32_t b = 0; b < cs.row_blocks; b++) {
                float got[M_MAX * CARM_NR], want[M_MAX * CARM_NR];
                fn(m, rows, o, packed + b * cs.block_bytes, cs.groups, cs.bl, got);
                model(s, m, q, cs.kp, o, w, scales, b * CARM_NR, want);
                for (uint32_t e = 0; e < m * CARM_NR; e++)
                    ck_assert_msg(memcmp(&got[e], &want[e], sizeof(float)) == 0,
                                  "%s: n %u k %u groups %u, m %u, block %u, row %u col %u: got %a want %a",
                                  carm_isa_name(isa), s->n, s->k, s->groups, m, b, e / CARM_NR, e % CARM_NR,
                                  (double)got[e], (double)want[e]);
            }
        }
        free(w);
        free(scales);
        free(packed);
        free(q);
    }
    printf("# %s: %zu shapes x m = 1..%d bit-exact\n", carm_isa_name(isa), sizeof shapes / sizeof shapes[0], M_MAX);
    fflush(stdout);
}

START_TEST(portable)
{
    check_level(CARM_ISA_PORTABLE);
}
END_TEST

START_TEST(dotprod)
{
    check_level(CARM_ISA_DOTPROD);
}
END_TEST

START_TEST(i8mm)
{
    check_level(CARM_ISA_I8MM);
}
END_TEST

/* The CPU the tests run on, as the plugin sees it (qemu -cpu max: i8mm;
 * neoverse-n1: dotprod; cortex-a72: portable). --expect-hwcap=LEVEL, when
 * given, is what the runner expects. */
START_TEST(detect)
{
    int hw = carm_isa_detect();
    printf("# HWCAP: %s\n", carm_isa_name(hw));
    ck_assert_msg(carm_test_expected_hwcap < 0 || carm_test_expected_hwcap == hw,
                  "--expect-hwcap=%s, but HWCAP offers %s", carm_isa_name(carm_test_expected_hwcap), carm_isa_name(hw));
    for (int i = 0; i < CARM_ISA_COUNT; i++)
        ck_assert_int_eq(carm_isa_parse(carm_isa_name(i)), i);
    ck_assert_int_eq(carm_isa_parse("sve"), -1);
}
END_TEST

START_TEST(pack_range)
{
    carm_shape cs;
    ck_assert_int_eq(carm_shape_init(&cs, 3, 32, 1, 32), 0);
    int8_t w[3 * 32] = {0};
    float sc[3] = {1, 1, 1};
    uint8_t *dst = malloc(cs.expert_bytes);
    size_t bad = 0;
    w[2 * 32 + 5] = 8;
    ck_assert_int_eq(carm_pack_expert(&cs, w, sc, dst, &bad), -1);
    ck_assert_uint_eq(bad, 2 * 32 + 5);
    w[2 * 32 + 5] = -9;
    ck_assert_int_eq(carm_pack_expert(&cs, w, sc, dst, &bad), -1);
    w[2 * 32 + 5] = -8;
    ck_assert_int_eq(carm_pack_expert(&cs, w, sc, dst, &bad), 0);
    free(dst);
    /* groups must be multiples of 16 and cover K */
    ck_assert_int_eq(carm_shape_init(&cs, 8, 64, 2, 24), -1);
    ck_assert_int_eq(carm_shape_init(&cs, 8, 48, 2, 24), -1);
}
END_TEST

int main(int argc, char **argv)
{
    if (carm_test_args_parse(argc, argv) != 0)
        return EXIT_FAILURE;
    Suite *s = suite_create("cpu_arm_kernels");
    TCase *tc = tcase_create("kernels");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, detect);
    tcase_add_test(tc, pack_range);
    tcase_add_test(tc, portable);
    tcase_add_test(tc, dotprod);
    tcase_add_test(tc, i8mm);
    suite_add_tcase(s, tc);
    return fmoe_test_main(s, 5);
}
