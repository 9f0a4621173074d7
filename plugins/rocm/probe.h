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

/* What runs on a targeted GPU (the probe's and the query's wording, one
 * place), and the device score of that path. */
#define FMRO_PATH_NOTE   "non-MFMA HIP kernels (AITER 2-stage semantics; docs/ROCM.md: never run on AMD hardware)"
#define FMRO_PROBE_SCORE 60
/* A build without hipcc has no kernel library. */
#define FMRO_NO_KERNELS "no kernel library: this build had no hipcc (docs/ROCM.md, Build)"

/* Fills reports[0 .. capacity) and returns the count. api NULL: the
 * runtime did not load and load_why says why (one unavailable slot).
 * kernels_why NULL: the kernel library is loaded and every targeted GPU
 * is available (score FMRO_PROBE_SCORE); otherwise it says why not. Other
 * GPUs are unavailable with the reason. */
uint32_t fmro_probe_reports(const fmro_hip_api *api, const char *load_why, const char *kernels_why,
                            fmoe_device_report *const *reports, uint32_t capacity);

#endif /* FMOE_PLUGINS_ROCM_PROBE_H */
