/*
 * plugins/rocm/fnuz.c - e4m3fn -> e4m3fnuz (fnuz.h; spec/formats.md §1.3).
 */
#include <math.h>

#include "plugins/rocm/fnuz.h"

size_t fmro_fnuz_from_fn_bytes(uint8_t *q, size_t n, size_t *nan_codes)
{
    size_t changed = 0, nans = 0;
    for (size_t i = 0; i < n; i++) {
        if (q[i] == 0x80u) {
            q[i] = 0x00u; /* fn's -0 is fnuz's NaN; +0 is the same number */
            changed++;
        } else if ((q[i] & 0x7Fu) == 0x7Fu) {
            nans++;
        }
    }
    if (nan_codes)
        *nan_codes = nans;
    return changed;
}

int fmro_fnuz_double_scales(float *s, size_t n, size_t *bad)
{
    /* Check everything first so a refused tensor is left untouched. */
    for (size_t i = 0; i < n; i++)
        if (!isfinite(s[i]) || !isfinite(2.0f * s[i])) {
            if (bad)
                *bad = i;
            return -1;
        }
    for (size_t i = 0; i < n; i++)
        s[i] *= 2.0f; /* exact: a power-of-two multiply of a finite float */
    return 0;
}
