/*
 * plugins/rocm/fnuz.h - e4m3fn checkpoints made e4m3fnuz, as the MI300's
 * (gfx94x) FP8 units read them (spec/formats.md §1.3, E2).
 *
 * The bits stay: every e4m3fn byte decodes in e4m3fnuz to half its value
 * (exponent bias 8 instead of 7), so doubling the dequant scale keeps
 * q * s exact. Two codes differ: 0x80 (-0 in fn) is the only NaN of fnuz
 * and becomes 0x00; 0x7F / 0xFF (NaN in fn) would read as +-240 in fnuz,
 * so a weight holding them is refused rather than silently changed.
 */
#ifndef FMOE_PLUGINS_ROCM_FNUZ_H
#define FMOE_PLUGINS_ROCM_FNUZ_H

#include <stddef.h>
#include <stdint.h>

/* Rewrites q[n] in place: 0x80 -> 0x00. Returns how many bytes changed and
 * sets *nan_codes to how many bytes are 0x7F or 0xFF (left as they are:
 * the caller refuses the tensor when it is not 0). */
size_t fmro_fnuz_from_fn_bytes(uint8_t *q, size_t n, size_t *nan_codes);

/* Doubles s[n] in place. Returns -1 (nothing changed, *bad = the index)
 * when a scale is NaN or infinite before or after doubling, else 0. */
int fmro_fnuz_double_scales(float *s, size_t n, size_t *bad);

#endif /* FMOE_PLUGINS_ROCM_FNUZ_H */
