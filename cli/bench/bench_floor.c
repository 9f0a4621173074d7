/*
 * cli/bench/bench_floor.c - which rate the memory floor of `fusedmoe bench`
 * divides by, and the floor of one point (docs/BENCH.md, "The floor").
 *
 * A weight stream only reads. A device's copy rate counts read and written
 * bytes, but a copy spends DRAM time on writes and read/write turnarounds,
 * so a kernel that only streams weights can beat bytes / copy rate (on an
 * H100, 3.03 TB/s read by a Triton kernel against a 2.98 TB/s copy rate).
 * The floor takes the higher of the two rates the plugin measured, so that
 * no kernel can honestly beat it; a plugin without a read rate (plugin
 * ABI < 1.4) leaves the copy rate, and the table says so. The bytes of a
 * point are its experts' parameters as the layer declared them.
 */
#include <stdlib.h>

#include "cli/bench/bench.h"

double bench_memory_rate(double copy_rate, double read_rate, const char **source)
{
    int read = read_rate > 0 && read_rate >= copy_rate;
    if (source)
        *source = read ? "device read" : copy_rate > 0 ? "device copy" : "none";
    return read ? read_rate : copy_rate > 0 ? copy_rate : 0.0;
}

double bench_floor_seconds(double bytes, double rate, double flops, double peak_flops)
{
    double mem = rate > 0 ? bytes / rate : 0.0;
    double compute = peak_flops > 0 ? flops / peak_flops : 0.0;
    return mem > compute ? mem : compute;
}

/* Bytes of one local expert's parameters (weights, scales, zero points...),
 * from what the layer declared: the exact storage the backend holds. With
 * `streamed`, weights held wider than the scheme stores them count at the
 * scheme's width: int4 values held in int8 (Arm W4A8's checkpoint layout)
 * are half a byte each, what a kernel must stream at least. */
double bench_expert_bytes(const fmoe_layer *layer, const fmoe_scheme *s, int streamed)
{
    double total = 0;
    uint32_t n = fmoe_layer_param_count(layer), experts = 1;
    for (uint32_t i = 0; i < n; i++) {
        fmoe_param_info p = {.struct_size = sizeof p};
        if (fmoe_layer_param(layer, i, &p) != FMOE_STATUS_OK || !p.per_expert)
            continue;
        double numel = 1;
        for (uint32_t a = 0; a < p.ndim; a++)
            numel *= (double)p.shape[a];
        experts = (uint32_t)p.shape[0];
        double size = (double)fmoe_dtype_size(p.dtype);
        if (streamed && p.role == FMOE_ROLE_WEIGHT && p.dtype == FMOE_DTYPE_INT8 && s->w_dtype == FMOE_DTYPE_INT4)
            size = 0.5;
        total += numel * size;
    }
    return experts ? total / experts : 0;
}

uint32_t bench_busiest_rank_experts(const int32_t *ids, size_t count, uint32_t experts, uint32_t ranks)
{
    if (!ranks || !experts || experts % ranks)
        return 0;
    uint8_t *seen = calloc(experts, 1);
    uint32_t *per = calloc(ranks, sizeof *per), most = 0;
    for (size_t i = 0; seen && per && i < count; i++) {
        const int32_t e = ids[i];
        if (e < 0 || (uint32_t)e >= experts || seen[e])
            continue;
        seen[e] = 1;
        const uint32_t r = (uint32_t)e / (experts / ranks);
        most = ++per[r] > most ? per[r] : most;
    }
    if (!seen || !per)
        most = 0;
    free(seen), free(per);
    return most;
}
