/*
 * plugins/cpu_arm/cpu_arm.h - the Arm W4A8 backend (docs/CPU_ARM.md): what
 * plugin.c (entry, init, probe, query), method_w4a8.c (the method) and
 * parallel.c (threads) share.
 */
#ifndef FMOE_PLUGIN_CPU_ARM_H
#define FMOE_PLUGIN_CPU_ARM_H

#include "fusedmoe/plugin.h"
#include "plugins/cpu_arm/kernels.h"

/* Environment variable that forces a lower kernel level (for testing):
 * portable, dotprod or i8mm. A level the CPU lacks is never used. */
#define CARM_ISA_ENV "FMOE_ARM_ISA"

/* Per-context state (init). */
typedef struct carm_state {
    const fmoe_host *host;
    int hw_isa;       /* best level the CPU offers (HWCAP) */
    int isa;          /* level in use: min(hw_isa, option isa, $FMOE_ARM_ISA) */
    int forced;       /* 1: option or environment lowered it */
    uint32_t threads; /* worker threads per apply (option threads; default: online CPUs) */
} carm_state;

/* The W4A8 method. */
extern const fmoe_method carm_method_w4a8;

/* Does the method serve (scheme, config)? 1, or 0 with a one-line reason. */
int carm_w4a8_serves(const fmoe_scheme *s, const fmoe_layer_config *cfg, char *reason, size_t cap);

/* Run fn(ctx, worker, item) for item in [0, items) on up to `threads`
 * threads (the caller's included; worker < threads indexes per-thread
 * scratch). Falls back to fewer threads if one cannot be started. */
typedef void (*carm_task_fn)(void *ctx, uint32_t worker, uint32_t item);
void carm_parallel(uint32_t threads, uint32_t items, carm_task_fn fn, void *ctx);

#endif
