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
 * ABI < 1.4) leaves the copy rate, and the table says so.
 */
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
