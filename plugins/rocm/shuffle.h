/*
 * plugins/rocm/shuffle.h - AITER's 16x16 weight pre-shuffle
 * (aiter/ops/shuffle.py::shuffle_weight(x, layout=(16, 16)); spec/formats.md
 * §6.3) and its inverse.
 *
 * Each expert's [N, K] matrix is cut into tiles of 16 rows x 32 elements,
 * stored tile after tile in (N tile, K tile) row-major order. Inside a tile
 * the 32 elements of a row are cut into 16-byte vectors (16 fp8 / int8
 * values, or 8 bf16 / f16 values); the tile holds vector 0 of rows 0..15,
 * then vector 1 of rows 0..15, and so on: what one MFMA wave loads as a
 * unit. For fp8: out[tile*512 + kk*256 + n*16 + j] = W[16*nb + n][32*kb + 16*kk + j].
 *
 * N must be a multiple of 16 and K of 32 (AITER asserts the same).
 */
#ifndef FMOE_PLUGINS_ROCM_SHUFFLE_H
#define FMOE_PLUGINS_ROCM_SHUFFLE_H

#include <stddef.h>
#include <stdint.h>

#define FMRO_SHUFFLE_ROWS   16 /* IN: rows of a tile */
#define FMRO_SHUFFLE_COLS   32 /* BK = 2 * IK: elements of a tile row */
#define FMRO_SHUFFLE_VECTOR 16 /* bytes of one K vector */

/* 0 when a [n, k] matrix of `elem_bytes`-byte elements (1, 2 or 4) can be
 * shuffled; else -1 with the reason in why. */
int fmro_shuffle_check(uint64_t n, uint64_t k, size_t elem_bytes, char *why, size_t cap);

/* Index (in elements) in the shuffled matrix of element (row, col). */
size_t fmro_shuffle_index(uint64_t k, size_t elem_bytes, uint64_t row, uint64_t col);

/* dst = shuffle(src) for `experts` consecutive [n, k] matrices. dst and src
 * must not overlap. Shapes must pass fmro_shuffle_check. */
void fmro_shuffle(void *dst, const void *src, uint64_t experts, uint64_t n, uint64_t k, size_t elem_bytes);
/* dst = the matrices src was shuffled from. */
void fmro_unshuffle(void *dst, const void *src, uint64_t experts, uint64_t n, uint64_t k, size_t elem_bytes);

#endif /* FMOE_PLUGINS_ROCM_SHUFFLE_H */
