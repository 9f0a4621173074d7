/*
 * plugins/cpu/cpu.h - the fast CPU backend (docs/CPU.md).
 *
 * What lives where:
 *   plugin.c            entry, init, probe, query
 *   options.c           the options of cpu.toml.in's [[option]] tables
 *   isa.c               which SIMD path runs: CPUID + XGETBV (what the CPU
 *                       *and* the OS enable), the option isa's choice
 *   pool.c              the per-layer thread pool (fork/join over items)
 *   layer.c             what every method shares: instance, expert map,
 *                       pair grouping by expert, combine
 *   method_unquantized.c  f32/bf16/f16 experts through oneDNN matmul
 *   method_int.c        INT8 W8A8 and Arm-style W4A8 through qgemm
 *   qgemm.h, qgemm_*.c  the int8 dot-product kernels, one file per ISA
 *   qprep.c             weight repacking and activation quantization
 *   bgemm.h, bgemm_*.c  the bf16 small-M (decode) kernels, one file per ISA
 *   bprep.c             their weight layout (oneDNN's BA16a64b2a)
 *   bgemv.c             running them over the experts with the pool
 *
 * The math is the reference plugin's (docs/REFERENCE-METHODS.md): the same
 * rounding points (h, act(h), y rounded to the activation dtype), routing
 * weights applied in f32 after GEMM2 in slot order, and the same parameter
 * names, dtypes and shapes, so the same checkpoints load.
 */
#ifndef FMOE_PLUGIN_CPU_H
#define FMOE_PLUGIN_CPU_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "fusedmoe/plugin.h"

/* SIMD paths, lowest first; a higher value needs everything below. The
 * int8 kernels have no AVX-512 BF16 variant: at that level they are the
 * VNNI ones, the bf16 kernels use vdpbf16ps (bgemm.h). */
#define CPU_ISA_PORTABLE    0
#define CPU_ISA_AVX2        1
#define CPU_ISA_AVX512_VNNI 2
#define CPU_ISA_AVX512_BF16 3
#define CPU_ISA_COUNT       4
/* Option isa = "auto": the best the machine enables. */
#define CPU_ISA_AUTO (-1)

/* The best path this CPU and OS support (CPUID feature bits and, for the
 * AVX state, XCR0 through XGETBV). CPU_ISA_PORTABLE off x86-64. */
int cpu_isa_detect(void);

/* 1 if the AMX-BF16 kernel may run: the CPU has AMX-BF16, the OS saves
 * the tile state and granted this process the tile data; 0 otherwise (and
 * off x86-64 Linux, or when the compiler could not build the kernel). */
int cpu_amx_enable(void);

/* "portable", "avx2", "avx512_vnni", "avx512_bf16". */
const char *cpu_isa_name(int isa);

/* The path to use given the option isa (`request`: CPU_ISA_AUTO or a
 * CPU_ISA_* level) and the detected one. A request above `detected` is
 * clamped to it; `note` (cap bytes) names the option and says what runs,
 * or is "" for auto. */
int cpu_isa_choose(int request, int detected, char *note, size_t cap);

/* The plugin's options ([[option]] in cpu.toml.in, docs/CPU.md "Options"). */
typedef struct cpu_options {
    int isa;          /* CPU_ISA_AUTO, or the CPU_ISA_* level asked for */
    int amx;          /* 1: the AMX-BF16 kernel where the machine offers it; 0: never */
    uint32_t threads; /* threads per layer; 0: one per CPU this process may run on */
    uint32_t spin_ms; /* idle pool threads spin this long before sleeping */
} cpu_options;

/* `out` = the defaults overridden by each of the n options; an unknown name
 * or a bad value returns INVALID_ARGUMENT through h->error_set, naming the
 * option and what it takes. */
fmoe_status cpu_options_parse(const fmoe_host *h, fmoe_error *err, const fmoe_option *const *options, uint32_t n,
                              cpu_options *out);

/* Allocation callbacks for the weight repacking (the host's in the plugin,
 * posix_memalign in tests). */
typedef void *(*cpu_alloc_fn)(void *ctx, size_t size, size_t alignment);

/* Per-context state from init. */
typedef struct cpu_state {
    const fmoe_host *host;
    cpu_options opt;            /* as the user (or the defaults) asked */
    int isa_detected;           /* what the machine has */
    int isa;                    /* what the kernels use (option isa, clamped to isa_detected) */
    int amx;                    /* AMX-BF16 kernel for bf16 experts of 3..16 rows (isa avx512_bf16,
                                   option amx and cpu_amx_enable()) */
    uint32_t threads;           /* threads per layer (option threads, 0 resolved to the CPUs we may run on) */
    uint32_t spin_ms;           /* idle pool threads spin this long before sleeping (option spin_ms) */
    int onednn_bf16;            /* oneDNN has an optimized bf16 matmul on the kernels' weight
                                   layout (cpu_onednn_bf16_optimized; not on aarch64 without ACL) */
    atomic_uintptr_t last_pool; /* the layers' pools: which one ran last (pool.h) */
    char isa_note[160];
} cpu_state;

/* Log one line through the host. */
void cpu_log(const fmoe_host *h, int32_t level, const char *fmt, ...) FMOE_PRINTF_LIKE(3, 4);

/* The methods. */
extern const fmoe_method cpu_method_unquantized;
extern const fmoe_method cpu_method_int8;
extern const fmoe_method cpu_method_w4a8;

/* Does this oneDNN have a bf16 matmul that is not its reference code for
 * bgemm.h's weight layout (BA16a64b2a)? Decides whether bf16 experts above
 * the kernels' row limit go to oneDNN (each layer checks its own shapes
 * again at finalize) and what the query says. */
int cpu_onednn_bf16_optimized(void);

/* Does a method serve `s` on a layer `c`? 1, or 0 with reason written. */
int cpu_unquantized_serves(const fmoe_scheme *s, const fmoe_layer_config *c, char *reason, size_t cap);
int cpu_int8_serves(const fmoe_scheme *s, const fmoe_layer_config *c, char *reason, size_t cap);
int cpu_w4a8_serves(const fmoe_scheme *s, const fmoe_layer_config *c, char *reason, size_t cap);

#endif
