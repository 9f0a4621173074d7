/*
 * core/formats/intpack.c - int4 / int8 weights packed in 32-bit words, as
 * GPTQ (`qweight`, packed along K = rows) and compressed-tensors
 * `pack-quantized` (`weight_packed`, packed along K = the contiguous axis)
 * store them, and their symmetric dequantization with group or act-order
 * scales (spec/formats.md §4.1-§4.3). Contracts in fusedmoe/formats.h.
 *
 * Both checkpoint formats store value + 2^(bits-1) (uint4b8 / uint8b128), so a
 * symmetric model needs no zero points, and put element 0 in the low bits.
 * Only libc: this file is linked into plugins.
 */
#include "fusedmoe/formats.h"

static int valid_bits(int32_t bits)
{
    return bits == 4 || bits == 8;
}

static int in_range(int32_t bits, int8_t v)
{
    int32_t half = 1 << (bits - 1);
    return v >= -half && v < half;
}

/* Stored (offset, unsigned) field of a value, and back. */
static uint32_t stored(int32_t bits, int8_t v)
{
    return (uint32_t)(v + (1 << (bits - 1))) & ((1u << bits) - 1u);
}

static int8_t value_of(int32_t bits, uint32_t word, int32_t i)
{
    uint32_t field = (word >> (i * bits)) & ((1u << bits) - 1u);
    return (int8_t)((int32_t)field - (1 << (bits - 1)));
}

fmoe_status fmoe_int_pack_int32(int32_t bits, int64_t n, const int8_t *values, uint32_t *words)
{
    if (!valid_bits(bits) || n < 0 || n % (32 / bits) != 0)
        return FMOE_STATUS_INVALID_ARGUMENT;
    for (int64_t i = 0; i < n; i++)
        if (!in_range(bits, values[i]))
            return FMOE_STATUS_INVALID_ARGUMENT;
    int32_t pf = 32 / bits;
    for (int64_t j = 0; j < n / pf; j++) {
        uint32_t word = 0;
        for (int32_t i = 0; i < pf; i++)
            word |= stored(bits, values[j * pf + i]) << (i * bits);
        words[j] = word;
    }
    return FMOE_STATUS_OK;
}

fmoe_status fmoe_int_unpack_int32(int32_t bits, int64_t n, const uint32_t *words, int8_t *values)
{
    if (!valid_bits(bits) || n < 0 || n % (32 / bits) != 0)
        return FMOE_STATUS_INVALID_ARGUMENT;
    int32_t pf = 32 / bits;
    for (int64_t e = 0; e < n; e++)
        values[e] = value_of(bits, words[e / pf], (int32_t)(e % pf));
    return FMOE_STATUS_OK;
}

fmoe_status fmoe_int_pack_int32_rows(int32_t bits, int64_t k, int64_t n, const int8_t *values, uint32_t *words)
{
    if (!valid_bits(bits) || k < 0 || n < 0 || k % (32 / bits) != 0)
        return FMOE_STATUS_INVALID_ARGUMENT;
    for (int64_t i = 0; i < k * n; i++)
        if (!in_range(bits, values[i]))
            return FMOE_STATUS_INVALID_ARGUMENT;
    int32_t pf = 32 / bits;
    for (int64_t j = 0; j < k / pf; j++)
        for (int64_t c = 0; c < n; c++) {
            uint32_t word = 0;
            for (int32_t i = 0; i < pf; i++)
                word |= stored(bits, values[(j * pf + i) * n + c]) << (i * bits);
            words[j * n + c] = word;
        }
    return FMOE_STATUS_OK;
}

fmoe_status fmoe_int_unpack_int32_rows(int32_t bits, int64_t k, int64_t n, const uint32_t *words, int8_t *values)
{
    if (!valid_bits(bits) || k < 0 || n < 0 || k % (32 / bits) != 0)
        return FMOE_STATUS_INVALID_ARGUMENT;
    int32_t pf = 32 / bits;
    for (int64_t r = 0; r < k; r++)
        for (int64_t c = 0; c < n; c++)
            values[r * n + c] = value_of(bits, words[(r / pf) * n + c], (int32_t)(r % pf));
    return FMOE_STATUS_OK;
}

fmoe_status fmoe_int_dequantize(int64_t n, int64_t k, const int8_t *values, const float *scales,
                                int64_t scale_stride_row, int64_t scale_stride_group, int64_t group_size,
                                const int32_t *g_idx, int64_t num_groups, float *w)
{
    if (n < 0 || k < 0 || num_groups <= 0)
        return FMOE_STATUS_INVALID_ARGUMENT;
    if (g_idx) {
        for (int64_t c = 0; c < k; c++)
            if (g_idx[c] < 0 || g_idx[c] >= num_groups)
                return FMOE_STATUS_INVALID_ARGUMENT;
    } else if (group_size > 0 && (k + group_size - 1) / group_size > num_groups) {
        return FMOE_STATUS_INVALID_ARGUMENT;
    }
    for (int64_t r = 0; r < n; r++)
        for (int64_t c = 0; c < k; c++) {
            int64_t g = g_idx ? g_idx[c] : (group_size > 0 ? c / group_size : 0);
            float s = scales[r * scale_stride_row + g * scale_stride_group];
            w[r * k + c] = (float)values[r * k + c] * s;
        }
    return FMOE_STATUS_OK;
}
