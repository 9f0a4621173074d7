/*
 * plugins/rocm/probe.h - device reports from the HIP runtime, apart from
 * the plugin entry so tests drive it with a pretend runtime
 * (tests/rocm/test_probe.c): no AMD GPU is needed to check what the plugin
 * says about one.
 */
#ifndef FMOE_PLUGINS_ROCM_PROBE_H
#define FMOE_PLUGINS_ROCM_PROBE_H

#include "fusedmoe/plugin.h"
#include "plugins/rocm/hip_runtime.h"

/* 1 for the gfx targets the kernels are meant for: gfx90a (MI200, CDNA2),
 * gfx940, gfx941, gfx942 (MI300, CDNA3). `base` has no feature suffix. */
int fmro_arch_targeted(const char *base);

/* What the plugin can do on a targeted GPU today (the probe's and the
 * query's wording, one place). */
#define FMRO_NOT_IMPLEMENTED "compute path not implemented yet (docs/ROCM.md): the HIP kernels are not written"

/* Fills reports[0 .. capacity) and returns the count. api NULL: the
 * runtime did not load and load_why says why (one unavailable slot).
 * Every device is reported with available 0 and score 0 until the compute
 * path exists; the reason says what is missing. */
uint32_t fmro_probe_reports(const fmro_hip_api *api, const char *load_why, fmoe_device_report *const *reports,
                            uint32_t capacity);

#endif /* FMOE_PLUGINS_ROCM_PROBE_H */
