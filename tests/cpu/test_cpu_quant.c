/*
 * tests/cpu/test_cpu_quant.c - the CPU plugin's INT8 W8A8 and W4A8 methods
 * end to end, through the public API, against the independent float64
 * model of tests/reference_quant (harness.c, built here with the cpu
 * plugin's manifest in place of the reference's): checkpoint tensors in
 * the reference's parameter names and layouts, TP and EP shards summed,
 * biases, weights on the input, invalid ids. meson runs this once per
 * kernel path, FMOE_CPU_ISA=portable|avx2|avx512_vnni|avx512_bf16 (a path this
 * machine lacks is clamped by the plugin and the run repeats the best one).
 */
#include <string.h>

#include "tests/reference_quant/harness.h"

static const char *const keys[] = {
    "int8:channel/int8:token:dynamic",
    "int8:tensor/int8:token:dynamic",
    "int4:channel/int8:token:dynamic:asym",
    "int4:group32:scale-bf16/int8:token:dynamic:asym",
};
#define N_KEYS (sizeof keys / sizeof keys[0])

/* The case defaults, with int4's quantization error allowed for in the
 * loose comparison with the unquantized model (as tests/reference_quant). */
static qcase make(int i)
{
    qcase c = qcase_init(keys[i]);
    c.loose = strncmp(keys[i], "int4", 4) == 0 ? 0.4 : 0.05;
    return c;
}

START_TEST(basic)
{
    qcase c = make(_i);
    c.M = 16;
    qcase_run(&c, 100 + (uint64_t)_i);
}
END_TEST

START_TEST(odd_sizes_bias_nongated)
{
    qcase c = make(_i);
    c.H = 96, c.I = 160, c.E = 5, c.topk = 3, c.M = 13, c.bias = 1;
    qcase_run(&c, 200 + (uint64_t)_i);
    c.gated = 0;
    qcase_run(&c, 300 + (uint64_t)_i);
}
END_TEST

START_TEST(sharded_and_on_input)
{
    qcase c = make(_i);
    c.tp = 2;
    c.bias = 1;
    qcase_run(&c, 400 + (uint64_t)_i);
    c = make(_i);
    c.ep = 2, c.E = 6, c.invalid_ids = 1;
    qcase_run(&c, 500 + (uint64_t)_i);
    c = make(_i);
    c.topk = 1, c.on_input = 1, c.M = 5;
    qcase_run(&c, 600 + (uint64_t)_i);
}
END_TEST

START_TEST(decode_many_experts)
{
    qcase c = make(_i);
    c.E = 32, c.topk = 4, c.M = 1, c.H = 256, c.I = 128;
    qcase_run(&c, 700 + (uint64_t)_i);
    c.M = 4;
    qcase_run(&c, 800 + (uint64_t)_i);
}
END_TEST

START_TEST(experts_of_several_rows)
{
    /* ~7 rows an expert: more than the kernels' mr, so each tile is run
     * by two calls (the second from L1), and rows left over after them. */
    qcase c = make(_i);
    c.E = 4, c.topk = 3, c.M = 10, c.H = 128, c.I = 192;
    qcase_run(&c, 900 + (uint64_t)_i);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cpu_quant");
    TCase *tc = tcase_create("methods");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, basic, 0, N_KEYS);
    tcase_add_loop_test(tc, experts_of_several_rows, 0, N_KEYS);
    tcase_add_loop_test(tc, odd_sizes_bias_nongated, 0, N_KEYS);
    tcase_add_loop_test(tc, sharded_and_on_input, 0, N_KEYS);
    tcase_add_loop_test(tc, decode_many_experts, 0, N_KEYS);
    suite_add_tcase(s, tc);
    return fmoe_test_main(s, 5 * N_KEYS);
}
