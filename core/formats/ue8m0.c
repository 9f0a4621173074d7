/*
 * core/formats/ue8m0.c - UE8M0 power-of-two scales: decode, the two encoders
 * DeepGEMM uses (round up; take the exponent), and the int32 packings of
 * DeepGEMM / MegaMoE (spec/formats.md §3.1-§3.3, §7.1). Contracts in
 * fusedmoe/formats.h.
 *
 * The byte is an f32 exponent field, so everything is bit manipulation. The
 * decoder follows the OCP spec at the two edge bytes (0 -> 2^-127,
 * 255 -> NaN) where vLLM's and DeepGEMM's "<< 23" gives 0.0 and +inf.
 * DeepGEMM's producers clamp to [1, 254]; the OCP MXFP4 recipe emits 0 only
 * for blocks below 2^-125 (all-zero blocks included), where 0.0 and 2^-127
 * differ by less than anything the codes can show.
 * Only libc: this file is linked into plugins.
 */
#include "fusedmoe/formats.h"

#include <math.h>

#include "fusedmoe/kit/half.h"

float fmoe_ue8m0_decode(uint8_t b)
{
    if (b == 0xFF)
        return NAN;
    if (b == 0)
        return fmoe_f32_from_bits(0x00400000u); /* 2^-127: the f32 subnormal with the top mantissa bit */
    return fmoe_f32_from_bits((uint32_t)b << 23);
}

uint8_t fmoe_ue8m0_encode_ceil(float x)
{
    uint32_t u = fmoe_f32_bits(x);
    uint32_t exp = ((u >> 23) & 0xFFu) + ((u & 0x7FFFFFu) != 0);
    if (exp < 1)
        exp = 1;
    if (exp > 254)
        exp = 254;
    return (uint8_t)exp;
}

uint8_t fmoe_ue8m0_encode_floor(float x)
{
    return (uint8_t)((fmoe_f32_bits(x) >> 23) & 0xFFu);
}

void fmoe_ue8m0_pack_int32(const uint8_t *exps, int64_t n, uint32_t *words)
{
    for (int64_t w = 0; w < (n + 3) / 4; w++) {
        uint32_t word = 0;
        for (int64_t j = 0; j < 4 && 4 * w + j < n; j++)
            word |= (uint32_t)exps[4 * w + j] << (8 * j);
        words[w] = word;
    }
}

void fmoe_ue8m0_unpack_int32(const uint32_t *words, int64_t n, uint8_t *exps)
{
    for (int64_t i = 0; i < n; i++)
        exps[i] = (uint8_t)(words[i / 4] >> (8 * (i % 4)));
}

int64_t fmoe_ue8m0_mn_major_words(int64_t mn, int64_t sf_k)
{
    if (mn <= 0 || sf_k <= 0)
        return 0;
    /* TMA wants each MN column 16-byte aligned: 4 int32 words. */
    return (sf_k + 3) / 4 * ((mn + 3) / 4 * 4);
}

fmoe_status fmoe_ue8m0_pack_mn_major(int64_t mn, int64_t sf_k, const uint8_t *exps, uint32_t *words)
{
    if (mn <= 0 || sf_k <= 0)
        return FMOE_STATUS_INVALID_ARGUMENT;
    int64_t aligned_mn = (mn + 3) / 4 * 4;
    int64_t num_words = (sf_k + 3) / 4;
    for (int64_t w = 0; w < num_words; w++)
        for (int64_t m = 0; m < aligned_mn; m++) {
            uint32_t word = 0;
            for (int64_t j = 0; m < mn && j < 4 && 4 * w + j < sf_k; j++)
                word |= (uint32_t)exps[m * sf_k + 4 * w + j] << (8 * j);
            words[w * aligned_mn + m] = word;
        }
    return FMOE_STATUS_OK;
}
