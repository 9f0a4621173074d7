/*
 * tests/cuda/test_nvfp4_quant.cu - the NVFP4 activation quantization the
 * W4A4 staging and the prefill gather run (plugins/cuda/nvfp4_quant.cuh),
 * on the host (no GPU), against the core's quantizer:
 *
 *   - e2m1_round(x) is the value of fmoe_fp4_e2m1_encode(x)'s code
 *     (fmoe_fp4_e2m1_decode), bit for bit, on every f32 within 4096 ulps of
 *     each rounding threshold and grid value (both signs), the specials,
 *     and every 251st f32 bit pattern;
 *   - a block of 16 (vmax_step, scale_of, quantize8 over its two halves)
 *     gives e2m1(code) * e4m3(sf) of fmoe_nvfp4_quantize (QUANT global) for
 *     random blocks at magnitudes from 2^-30 to 2^30, with zeros, NaNs and
 *     infinities mixed in, half of them with values on rounding ties once
 *     scaled, and random globals.
 *
 * Random inputs from a fixed seed (argv[1] to change it), printed on
 * failure. Exit 0 when all agree, 1 with the first difference.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusedmoe/formats.h"
#include "plugins/cuda/nvfp4_quant.cuh"

namespace {

uint64_t rng_state;

uint32_t next32()
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 32);
}

float bits_float(uint32_t b)
{
    float f;
    memcpy(&f, &b, 4);
    return f;
}

uint32_t float_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

/* 0 when e2m1_round(x) and the core's decoded code are the same bits. */
int check_round(uint32_t b)
{
    const float x = bits_float(b);
    const float want = fmoe_fp4_e2m1_decode(fmoe_fp4_e2m1_encode(x));
    const float got = fmcu_nvfp4::e2m1_round(x);
    if (float_bits(got) == float_bits(want))
        return 0;
    printf("FAIL e2m1_round(%a = 0x%08x) = %a, the core's code decodes to %a\n", (double)x, b, (double)got,
           (double)want);
    return 1;
}

int rounding()
{
    /* Thresholds (ties) and grid values: the places a wrong comparison shows. */
    const float at[] = {0.25f, 0.5f, 0.75f, 1.0f, 1.25f, 1.5f, 1.75f, 2.0f, 2.5f, 3.0f, 3.5f, 4.0f, 5.0f, 6.0f, 7.0f};
    for (float v : at)
        for (float s : {1.0f, -1.0f}) {
            const uint32_t c = float_bits(s * v);
            for (uint32_t d = 0; d <= 8192; d++)
                if (check_round(c - 4096 + d))
                    return 1;
        }
    const uint32_t specials[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x80000001u, 0x7f800000u, 0xff800000u,
                                 0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7f7fffffu, 0xff7fffffu};
    for (uint32_t b : specials)
        if (check_round(b))
            return 1;
    for (uint64_t b = 0; b < (1ull << 32); b += 251)
        if (check_round((uint32_t)b))
            return 1;
    return 0;
}

float random_value(int scale_exp)
{
    const uint32_t r = next32();
    if (r % 61 == 0)
        return 0.0f;
    if (r % 67 == 0)
        return r % 2 ? -0.0f : NAN;
    if (r % 71 == 0)
        return r % 2 ? INFINITY : -INFINITY;
    const float u = (float)(next32() >> 8) * (1.0f / 16777216.0f) * 2.0f - 1.0f; /* [-1, 1) */
    return ldexpf(u, scale_exp);
}

/* Half the blocks get values that land on e2m1 rounding ties once scaled
 * (x = tie / out with the core's out), except the block's largest, so
 * that an `out` one ulp off would move codes: random values almost never
 * sit on a tie. */
int put_ties(float (&x)[16], float g)
{
    static const float ties[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    uint8_t packed[8], sf;
    if (fmoe_nvfp4_quantize(1, 16, x, g, FMOE_NVFP4_GLOBAL_QUANT, packed, &sf) != FMOE_STATUS_OK)
        return 1;
    const float sfq = fmoe_fp8_e4m3fn_decode(sf);
    if (sfq == 0.0f)
        return 0;
    const float out = 1.0f / (sfq * (1.0f / g));
    int top = 0;
    for (int i = 1; i < 16; i++)
        if (fabsf(x[i]) > fabsf(x[top]) || x[top] != x[top])
            top = i;
    for (int i = 0; i < 16; i++) {
        const float v = ties[next32() % 7] / out * (next32() % 2 ? 1.0f : -1.0f);
        if (i != top && next32() % 2 && isfinite(v) && fabsf(v) < fabsf(x[top]))
            x[i] = v;
    }
    return 0;
}

int blocks(uint64_t seed)
{
    rng_state = seed;
    constexpr int N = fmcu_nvfp4::LANE_VALUES;
    for (int t = 0; t < 20000; t++) {
        const int e = (int)(next32() % 61) - 30;
        float x[16];
        for (float &v : x)
            v = random_value(e);
        const float g = t % 4 == 0 ? fmoe_nvfp4_global_from_amax(ldexpf(1.0f, e))
                                   : ldexpf(1.0f + (float)(next32() % 1000) / 1000.0f, (int)(next32() % 41) - 20);
        uint8_t packed[8], sf;
        if (t % 2 && put_ties(x, g))
            return 1;
        if (fmoe_nvfp4_quantize(1, 16, x, g, FMOE_NVFP4_GLOBAL_QUANT, packed, &sf) != FMOE_STATUS_OK) {
            printf("FAIL the core refused block %d (global %a, seed %llu)\n", t, (double)g, (unsigned long long)seed);
            return 1;
        }
        /* The device's path: each half's vmax, the pair's maximum, then
         * the scale and each half's values. */
        float half[2][N], vmax[2] = {0.0f, 0.0f};
        for (int h = 0; h < 2; h++)
            for (int i = 0; i < N; i++) {
                half[h][i] = x[h * N + i];
                vmax[h] = fmcu_nvfp4::vmax_step(vmax[h], fabsf(half[h][i]));
            }
        const float m = fmcu_nvfp4::vmax_step(vmax[0], vmax[1]);
        const fmcu_nvfp4::block_scale s = fmcu_nvfp4::scale_of(m, g, 1.0f / g);
        for (int h = 0; h < 2; h++) {
            float got[N];
            fmcu_nvfp4::quantize8(half[h], s, got);
            for (int i = 0; i < N; i++) {
                const int k = h * N + i;
                const uint8_t code = (uint8_t)(packed[k / 2] >> (4 * (k % 2)));
                const float want = fmoe_fp4_e2m1_decode(code) * fmoe_fp8_e4m3fn_decode(sf);
                if (float_bits(got[i]) != float_bits(want)) {
                    printf("FAIL block %d value %d: x %a, global %a: %a, the core's code 0x%x x scale 0x%02x = %a "
                           "(seed %llu)\n",
                           t, k, (double)x[k], (double)g, (double)got[i], code & 0xF, sf, (double)want,
                           (unsigned long long)seed);
                    return 1;
                }
            }
        }
    }
    return 0;
}

} // namespace

int main(int argc, char **argv)
{
    const uint64_t seed = argc > 1 ? strtoull(argv[1], nullptr, 0) : 20261201ull;
    if (rounding() || blocks(seed))
        return 1;
    printf("PASS e2m1_round and 20000 NVFP4 blocks against the core (seed %llu)\n", (unsigned long long)seed);
    return 0;
}
