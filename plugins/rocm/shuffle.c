/*
 * plugins/rocm/shuffle.c - the 16x16 pre-shuffle and its inverse
 * (shuffle.h). One index function serves both directions, so the two can
 * only disagree if the function is wrong, and the round-trip tests catch
 * that against the hand-written tile of the spec.
 */
#include <stdio.h>
#include <string.h>

#include "plugins/rocm/shuffle.h"

int fmro_shuffle_check(uint64_t n, uint64_t k, size_t elem_bytes, char *why, size_t cap)
{
    if (elem_bytes != 1 && elem_bytes != 2 && elem_bytes != 4) {
        snprintf(why, cap, "pre-shuffle: elements of %zu bytes (expected 1, 2 or 4)", elem_bytes);
        return -1;
    }
    if (n == 0 || n % FMRO_SHUFFLE_ROWS != 0) {
        snprintf(why, cap, "pre-shuffle: %llu rows, expected a positive multiple of %d", (unsigned long long)n,
                 FMRO_SHUFFLE_ROWS);
        return -1;
    }
    if (k == 0 || k % FMRO_SHUFFLE_COLS != 0) {
        snprintf(why, cap, "pre-shuffle: %llu columns, expected a positive multiple of %d", (unsigned long long)k,
                 FMRO_SHUFFLE_COLS);
        return -1;
    }
    return 0;
}

size_t fmro_shuffle_index(uint64_t k, size_t elem_bytes, uint64_t row, uint64_t col)
{
    uint64_t vec = FMRO_SHUFFLE_VECTOR / elem_bytes;       /* elements of a K vector */
    uint64_t tile = FMRO_SHUFFLE_ROWS * FMRO_SHUFFLE_COLS; /* elements of a tile */
    uint64_t nb = row / FMRO_SHUFFLE_ROWS, n = row % FMRO_SHUFFLE_ROWS;
    uint64_t kb = col / FMRO_SHUFFLE_COLS, kk = (col % FMRO_SHUFFLE_COLS) / vec, j = col % vec;
    uint64_t k_tiles = k / FMRO_SHUFFLE_COLS;
    return (size_t)((nb * k_tiles + kb) * tile + kk * FMRO_SHUFFLE_ROWS * vec + n * vec + j);
}

/* A 16-byte K vector is contiguous in both layouts: copy whole vectors. */
static void permute(void *dst, const void *src, uint64_t experts, uint64_t n, uint64_t k, size_t eb, int forward)
{
    size_t matrix = (size_t)(n * k) * eb;
    uint64_t vec = FMRO_SHUFFLE_VECTOR / eb;
    for (uint64_t e = 0; e < experts; e++) {
        unsigned char *d = (unsigned char *)dst + e * matrix;
        const unsigned char *s = (const unsigned char *)src + e * matrix;
        for (uint64_t r = 0; r < n; r++)
            for (uint64_t c = 0; c < k; c += vec) {
                size_t plain = (size_t)(r * k + c) * eb, shuffled = fmro_shuffle_index(k, eb, r, c) * eb;
                if (forward)
                    memcpy(d + shuffled, s + plain, FMRO_SHUFFLE_VECTOR);
                else
                    memcpy(d + plain, s + shuffled, FMRO_SHUFFLE_VECTOR);
            }
    }
}

void fmro_shuffle(void *dst, const void *src, uint64_t experts, uint64_t n, uint64_t k, size_t elem_bytes)
{
    permute(dst, src, experts, n, k, elem_bytes, 1);
}

void fmro_unshuffle(void *dst, const void *src, uint64_t experts, uint64_t n, uint64_t k, size_t elem_bytes)
{
    permute(dst, src, experts, n, k, elem_bytes, 0);
}
