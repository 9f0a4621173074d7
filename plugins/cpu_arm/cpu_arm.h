/*
 * plugins/cpu_arm/cpu_arm.h - the Arm W4A8 backend (docs/CPU_ARM.md): what
 * plugin.c (entry, init, probe, query), options.c (the options of
 * cpu_arm.toml.in), method_w4a8.c (the method) and parallel.c (threads)
 * share.
 */
#ifndef FMOE_PLUGIN_CPU_ARM_H
#define FMOE_PLUGIN_CPU_ARM_H

#include "fusedmoe/plugin.h"
#include "plugins/cpu_arm/kernels.h"

/* Option isa = "auto": the best level HWCAP reports. */
#define CARM_ISA_AUTO (-1)
/* Most worker threads per apply (option threads). */
#define CARM_MAX_THREADS 64

/* The plugin's options ([[option]] in cpu_arm.toml.in, docs/CPU_ARM.md
 * "Options"). */
typedef struct carm_options {
    int isa;          /* CARM_ISA_AUTO, or the CARM_ISA_* level asked for (a highest level) */
    uint32_t threads; /* worker threads per apply; 0: the online CPUs, at most CARM_MAX_THREADS */
} carm_options;

/* `out` = the defaults overridden by each of the n options; an unknown name
 * or a bad value returns INVALID_ARGUMENT through h->error_set, naming the
 * option and what it takes. */
fmoe_status carm_options_parse(const fmoe_host *h, fmoe_error *err, const fmoe_option *const *options, uint32_t n,
                               carm_options *out);

/* Per-context state (init). */
typedef struct carm_state {
    const fmoe_host *host;
    carm_options opt; /* as the user (or the defaults) asked */
    int hw_isa;       /* best level the CPU offers (HWCAP) */
    int isa;          /* level in use: min(hw_isa, option isa) */
    uint32_t threads; /* worker threads per apply (option threads, 0 resolved) */
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
