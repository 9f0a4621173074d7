/*
 * fusedmoe/kit/w4a8_row.h - the scale and zero point of one activation row
 * of fmoe_w4a8_quantize_activations (w4a8.c) from the row's range, shared
 * with the CPU plugin's vectorized quantizer (plugins/cpu/rowops_avx512.c),
 * which must give the same bits. Part of the plugin kit (fusedmoe-kit).
 */
#ifndef FMOE_KIT_W4A8_ROW_H
#define FMOE_KIT_W4A8_ROW_H

#include <stdint.h>

/* mn, mx: the smallest and largest of the row's (finite) values. s0: the
 * multiplier (codes are clamp(roundf(x * s0) + nzp, -128, 127)); the row's
 * offset is -nzp and its scale 1 / s0. */
void fmoe_w4a8_row_params(float mn, float mx, float *s0, int32_t *nzp);

#endif
