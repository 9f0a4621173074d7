/*
 * plugins/cpu/qprep.c - the finalize-time weight repacking into the
 * kernels' tile layout (qgemm.h) and the activation quantizers apply runs
 * per row. Portable C: none of this is in a hot loop over weights.
 */
#include <math.h>
#include <string.h>

#include "fusedmoe/formats.h"
#include "plugins/cpu/qgemm.h"

static size_t round_up(size_t v, size_t m)
{
    return (v + m - 1) / m * m;
}

static int alloc_common(cpu_qweights *q, uint32_t E, uint32_t N, uint32_t K, int int4, uint32_t group,
                        cpu_alloc_fn alloc, void *ctx)
{
    memset(q, 0, sizeof *q);
    q->int4 = int4;
    q->experts = E;
    q->n = N;
    q->k = K;
    q->kp = (uint32_t)round_up(K, int4 ? 8 : 4);
    q->tiles = (N + CPU_NR - 1) / CPU_NR;
    q->group = group >= K ? q->kp : group;
    q->groups = q->kp / q->group;
    q->tile_bytes = (size_t)CPU_NR * q->kp / (int4 ? 2 : 1);
    size_t tiles = (size_t)E * q->tiles, per = (size_t)q->groups * CPU_NR;
    q->w = alloc(ctx, tiles * q->tile_bytes + 64, 64);
    q->gscale = alloc(ctx, tiles * per * sizeof(float) + 64, 64);
    q->wsum = alloc(ctx, tiles * per * sizeof(int32_t) + 64, 64);
    if (!q->w || !q->gscale || !q->wsum)
        return -1;
    memset(q->gscale, 0, tiles * per * sizeof(float));
    memset(q->wsum, 0, tiles * per * sizeof(int32_t));
    return 0;
}

const uint8_t *cpu_qweights_tile(const cpu_qweights *q, uint32_t e, uint32_t t)
{
    return q->w + ((size_t)e * q->tiles + t) * q->tile_bytes;
}

const uint16_t *cpu_qweights_gscale16(const cpu_qweights *q, uint32_t e, uint32_t t)
{
    return q->gscale16 ? q->gscale16 + ((size_t)e * q->tiles + t) * q->groups * CPU_NR : NULL;
}

const float *cpu_qweights_gscale(const cpu_qweights *q, uint32_t e, uint32_t t)
{
    return q->gscale + ((size_t)e * q->tiles + t) * q->groups * CPU_NR;
}

const int32_t *cpu_qweights_wsum(const cpu_qweights *q, uint32_t e, uint32_t t)
{
    return q->wsum + ((size_t)e * q->tiles + t) * q->groups * CPU_NR;
}

int cpu_qweights_int8(cpu_qweights *q, uint32_t E, uint32_t N, uint32_t K, const int8_t *w, const float *row_scale,
                      cpu_alloc_fn alloc, void *ctx)
{
    if (alloc_common(q, E, N, K, 0, K, alloc, ctx) != 0)
        return -1;
    for (uint32_t e = 0; e < E; e++)
        for (uint32_t t = 0; t < q->tiles; t++) {
            int8_t *dst = (int8_t *)(q->w + ((size_t)e * q->tiles + t) * q->tile_bytes);
            float *gs = q->gscale + ((size_t)e * q->tiles + t) * CPU_NR;
            int32_t *ws = q->wsum + ((size_t)e * q->tiles + t) * CPU_NR;
            for (uint32_t r = 0; r < CPU_NR; r++) {
                uint32_t n = t * CPU_NR + r;
                const int8_t *row = n < N ? w + ((size_t)e * N + n) * K : NULL;
                int32_t sum = 0;
                for (uint32_t k = 0; k < q->kp; k++) {
                    int8_t v = row && k < K ? row[k] : 0;
                    dst[(size_t)(k / 4) * 64 + 4 * r + k % 4] = v;
                    sum += v;
                }
                ws[r] = sum;
                gs[r] = n < N ? row_scale[(size_t)e * N + n] : 0.0f;
            }
        }
    return 0;
}

/* Group-wise int4 scales stream as much as the weights' nibbles per group
 * over 4 (f32) or 8 (bf16): when every scale is a bf16 exactly (the
 * scheme's bf16 group scales), keep a bf16 copy for the kernels to read.
 * 0, or -1 (no memory). */
static int group_scales_bf16(cpu_qweights *q, cpu_alloc_fn alloc, void *ctx)
{
    size_t n = (size_t)q->experts * q->tiles * q->groups * CPU_NR;
    if (q->groups < 2)
        return 0; /* per channel: one scale per row, nothing to save */
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &q->gscale[i], sizeof u);
        if (u & 0xFFFFu)
            return 0;
    }
    q->gscale16 = alloc(ctx, n * sizeof(uint16_t) + 64, 64);
    if (!q->gscale16)
        return -1;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &q->gscale[i], sizeof u);
        q->gscale16[i] = (uint16_t)(u >> 16);
    }
    return 0;
}

int cpu_qweights_int4(cpu_qweights *q, uint32_t E, uint32_t N, uint32_t K, uint32_t group, const int8_t *w,
                      const float *scales, cpu_alloc_fn alloc, void *ctx)
{
    for (size_t i = 0; i < (size_t)E * N * K; i++)
        if (w[i] < -8 || w[i] > 7)
            return -2;
    if (group < K && (group % 8 != 0 || K % group != 0))
        return -2;
    if (alloc_common(q, E, N, K, 1, group, alloc, ctx) != 0)
        return -1;
    uint32_t G = q->groups, Gsrc = group >= K ? 1 : K / group;
    for (uint32_t e = 0; e < E; e++)
        for (uint32_t t = 0; t < q->tiles; t++) {
            uint8_t *dst = q->w + ((size_t)e * q->tiles + t) * q->tile_bytes;
            float *gs = q->gscale + ((size_t)e * q->tiles + t) * G * CPU_NR;
            int32_t *ws = q->wsum + ((size_t)e * q->tiles + t) * G * CPU_NR;
            for (uint32_t r = 0; r < CPU_NR; r++) {
                uint32_t n = t * CPU_NR + r;
                const int8_t *row = n < N ? w + ((size_t)e * N + n) * K : NULL;
                for (uint32_t s = 0; s < q->kp / 8; s++)
                    for (uint32_t j = 0; j < 4; j++) {
                        uint32_t k0 = 8 * s + j, k1 = k0 + 4;
                        int lo = row && k0 < K ? row[k0] : 0, hi = row && k1 < K ? row[k1] : 0;
                        dst[(size_t)s * 64 + 4 * r + j] = (uint8_t)((lo + 8) | (hi + 8) << 4);
                    }
                for (uint32_t g = 0; g < G; g++) {
                    int32_t sum = 0;
                    for (uint32_t k = g * q->group; k < (g + 1) * q->group && row; k++)
                        sum += k < K ? row[k] : 0;
                    ws[g * CPU_NR + r] = sum;
                    gs[g * CPU_NR + r] = n < N ? scales[((size_t)e * N + n) * Gsrc + g] : 0.0f;
                }
            }
        }
    return group_scales_bf16(q, alloc, ctx);
}

void cpu_quant_sym(const float *x, uint32_t n, uint32_t kp, int8_t *q, float *scale)
{
    float amax = 0.0f;
    int finite = 1;
    for (uint32_t i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        finite &= isfinite(a) != 0;
        amax = a > amax ? a : amax;
    }
    memset(q, 0, kp);
    if (!finite) {
        *scale = NAN;
        return;
    }
    if (amax == 0.0f) {
        *scale = 0.0f;
        return;
    }
    float inv = 127.0f / amax;
    for (uint32_t i = 0; i < n; i++) {
        float v = rintf(x[i] * inv);
        v = v < -127.0f ? -127.0f : v > 127.0f ? 127.0f : v; /* |x * 127/amax| <= 127 anyway */
        q[i] = (int8_t)v;
    }
    *scale = amax / 127.0f;
}

void cpu_quant_asym(const float *x, uint32_t n, uint32_t kp, uint32_t group, int8_t *q, int32_t *off, float *scale,
                    int32_t *qsum)
{
    int finite = 1;
    for (uint32_t i = 0; i < n; i++)
        finite &= isfinite(x[i]) != 0;
    memset(q, 0, kp);
    if (!finite || fmoe_w4a8_quantize_activations(1, n, x, q, off, scale) != FMOE_STATUS_OK) {
        *off = 0;
        *scale = NAN;
    }
    for (uint32_t g = 0; g < kp / group; g++) {
        int32_t s = 0;
        for (uint32_t k = g * group; k < (g + 1) * group; k++)
            s += q[k];
        qsum[g] = s;
    }
}

void cpu_qcorr(int32_t off, const int32_t *qsum, uint32_t groups, uint32_t group, int32_t *qcorr)
{
    for (uint32_t g = 0; g < groups; g++) {
        uint32_t hi = (uint32_t)(-qsum[g] - (int32_t)group * off) & 0xFFFFu, lo = (uint32_t)off & 0xFFFFu;
        qcorr[g] = (int32_t)(hi << 16 | lo);
    }
}
