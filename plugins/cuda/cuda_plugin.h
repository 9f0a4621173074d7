/*
 * plugins/cuda/cuda_plugin.h - what plugin.c (entry, probe, query) and
 * method.c (the per-layer calls) share.
 */
#ifndef FMOE_PLUGIN_CUDA_PLUGIN_H
#define FMOE_PLUGIN_CUDA_PLUGIN_H

#include "fusedmoe/plugin.h"
#include "plugins/cuda/ep.h"
#include "plugins/cuda/options.h"

/* Per-context state (from init). */
typedef struct fmcu_state {
    const fmoe_host *host;
    fmcu_options opt;       /* parsed at init; each layer takes a copy at create */
    fmcu_ep_options ep_opt; /* nccl_library, ep_timeout_ms (ep.h) */
} fmcu_state;

/* The method serving FMCU_Q_* `quant`: both modular and monolithic
 * (apply takes top-k, apply_logits routes on the GPU), or with `modular`
 * the same without apply_logits, for layers on an EP group. */
const fmoe_method *fmcu_method(int quant, int modular);

/* The method query picks for device `device` (hidden, per-rank
 * intermediate): the native SM100 block-scaled one where it applies
 * (compute capability 10.x, sm100_layout.h fmcu_sm100_native), else
 * fmcu_method's. */
const fmoe_method *fmcu_method_on_device(int quant, int modular, int device, uint32_t hidden, uint32_t inter);

/* Compute capability major versions the plugin carries code for. */
int fmcu_arch_supported(int major, int minor);

#endif
