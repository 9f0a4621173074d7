/*
 * plugins/cpu/layer.h - what every method of the CPU plugin shares: the
 * per-layer instance head (config, sizes, EP expert map, thread pool,
 * declared parameters) and the three steps around the GEMMs:
 *
 *   group    the (token, slot) pairs of a token chunk sorted by local
 *            expert (a counting sort; ascending pair order inside an
 *            expert), so each expert's rows are one contiguous range of
 *            "positions"; pairs whose id is out of range or not local get
 *            no position and contribute exactly 0;
 *   input    one token's GEMM1 input row in f32, pre-multiplied (and
 *            rounded) by w[t,0] with apply_router_weight_on_input;
 *   combine  out_t = round_act(sum_j y[pos(t,j)] * w[t,j]) in f32, slot
 *            order (weight 1 with the router weight on the input).
 *
 * Calls are processed in chunks of `chunk` tokens so that every buffer is
 * sized once at create from max_num_tokens and a byte budget.
 */
#ifndef FMOE_PLUGIN_CPU_LAYER_H
#define FMOE_PLUGIN_CPU_LAYER_H

#include "plugins/cpu/cpu.h"
#include "plugins/cpu/pool.h"

#define CPU_MAX_PARAMS 8

typedef struct cpu_layer {
    const fmoe_host *host;
    fmoe_layer_config cfg;
    fmoe_scheme scheme;
    int isa;
    uint32_t H, I, rI, k; /* rI = 2I gated, I otherwise */
    uint32_t local_experts, global_experts;
    int32_t *expert_map; /* NULL: identity */
    cpu_pool *pool;
    fmoe_param_desc descs[CPU_MAX_PARAMS];
    const fmoe_param_desc *desc_ptrs[CPU_MAX_PARAMS];
    uint32_t n_params;
    int32_t bias13, bias2; /* param indices, or -1 */
    /* The gated SiLU rounded to bf16 in AVX-512 (rowops.h) where the path
     * has it and the layer's activation is that; else NULL. */
    uint32_t (*act_bf16)(const fmoe_layer_config *cfg, const float *h, uint32_t I, float *out);
    const void *b13, *b2; /* after finalize (act dtype) */
    /* Per chunk of tokens. */
    uint32_t chunk;  /* tokens per chunk */
    int32_t *order;  /* [chunk*k] position -> pair (in chunk) */
    int32_t *pos;    /* [chunk*k] pair -> position, or -1 */
    uint32_t *start; /* [E_local + 1] expert -> first position */
    float *y;        /* [chunk*k][H] rounded GEMM2 outputs (+ b2) */
} cpu_layer;

/* Fill the head from create's args; per_token_bytes: what the method's
 * own chunk buffers need per token (for the chunk size). Allocates the
 * pool and the grouping buffers. 0, or an fmoe_status with text set. */
fmoe_status cpu_layer_init(cpu_layer *L, const fmoe_create_args *a, size_t per_token_bytes);
void cpu_layer_release(cpu_layer *L);

/* Declare a per-expert parameter [E_local, d1(, d2)] (ndim counts the expert axis). */
void cpu_layer_param(cpu_layer *L, const char *name, fmoe_dtype dtype, int32_t proj, int32_t role, int32_t scale_kind,
                     int32_t shard_axis, uint32_t ndim, int64_t d1, int64_t d2);
/* w13_bias [E, rI] and w2_bias [E, H] in the activation dtype, when has_bias. */
void cpu_layer_param_biases(cpu_layer *L);

/* Group pairs [t0*k, t1*k) by local expert; returns the number of local pairs. */
uint32_t cpu_layer_group(cpu_layer *L, const int32_t *topk_ids, int64_t t0, int64_t t1);

/* GEMM1 input of token t (absolute) as f32. */
void cpu_layer_input_row(const cpu_layer *L, const fmoe_tensor *x, const float *topk_w, int64_t t, float *dst);

/* out[I] = round_act(act(h)) for one pair's GEMM1 output h (gate | up, or
 * I values): L->act_bf16 where set, else core/activation.c in double and
 * the rounding; the same bits either way. */
void cpu_layer_activate(const cpu_layer *L, const float *h, float *out);
/* Its cost per pair in cpu_pool_run_elems units (~1 ns). */
size_t cpu_layer_activate_units(const cpu_layer *L);

/* Write out rows [t0, t1) from L->y (in parallel over tokens). */
void cpu_layer_combine(cpu_layer *L, const float *topk_w, int64_t t0, int64_t t1, fmoe_tensor *out);

/* Host allocation (64-byte aligned), n may be 0. */
void *cpu_alloc(const fmoe_host *h, size_t n);

/* A cpu_alloc_fn for repacked weights (ctx: the fmoe_host): the host's
 * allocator, but a buffer of 4 MiB or more is aligned to 2 MiB and asked
 * to be backed by transparent huge pages (madvise, Linux; advisory, so a
 * refusal changes nothing but speed). Why: decode streams each weight byte
 * once from DRAM, after the other layers have evicted the TLB; with 4 KiB
 * pages every 4 KiB of a stream costs a page walk and the hardware
 * prefetchers stop at each page boundary. Freed with the host's free. */
void *cpu_alloc_weights(void *ctx, size_t size, size_t alignment);

#endif
