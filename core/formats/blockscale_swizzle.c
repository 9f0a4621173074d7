/*
 * core/formats/blockscale_swizzle.c - the 128x4-tile swizzled layout in which
 * CUTLASS, cuBLASLt and FlashInfer read NVFP4 / MXFP8 block scales
 * (spec/formats.md §2.5). Contracts in fusedmoe/formats.h.
 *
 * A tile covers 128 rows x 4 scale columns (512 bytes), stored [32, 4, 4]:
 * the 16 contiguous bytes at (m % 32) * 16 hold rows m, m+32, m+64, m+96
 * (of the tile) times its 4 scale columns. Tiles are ordered row-tile major.
 * Only libc: this file is linked into plugins.
 */
#include "fusedmoe/formats.h"

#include <string.h>

int64_t fmoe_blockscale_swizzle_offset(int64_t m, int64_t kb, int64_t sf_cols)
{
    int64_t k_tiles = (sf_cols + 3) / 4;
    return ((m / 128) * k_tiles + kb / 4) * 512 + (m % 32) * 16 + ((m / 32) % 4) * 4 + kb % 4;
}

int64_t fmoe_blockscale_swizzled_bytes(int64_t rows, int64_t sf_cols)
{
    if (rows <= 0 || sf_cols <= 0)
        return 0;
    return (rows + 127) / 128 * 128 * ((sf_cols + 3) / 4 * 4);
}

fmoe_status fmoe_blockscale_swizzle(int64_t rows, int64_t sf_cols, const uint8_t *linear, uint8_t *swizzled)
{
    if (rows <= 0 || sf_cols <= 0)
        return FMOE_STATUS_INVALID_ARGUMENT;
    /* Padding rows and columns read as scale 0. */
    memset(swizzled, 0, (size_t)fmoe_blockscale_swizzled_bytes(rows, sf_cols));
    for (int64_t m = 0; m < rows; m++)
        for (int64_t kb = 0; kb < sf_cols; kb++)
            swizzled[fmoe_blockscale_swizzle_offset(m, kb, sf_cols)] = linear[m * sf_cols + kb];
    return FMOE_STATUS_OK;
}
