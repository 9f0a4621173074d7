/*
 * fusedmoe/common.h - types shared by the application API (fusedmoe.h) and the
 * plugin ABI (plugin.h): status codes, dtypes, devices, tensors, the layer
 * configuration and the quantization scheme.
 *
 * ABI rules that apply to everything in this file (docs/PLUGIN-ABI.md):
 *  - Every struct that crosses a boundary starts with `size_t struct_size`,
 *    set by whoever allocates it to sizeof() as that party compiled it.
 *    Fields are only ever appended. A reader accepts any size at least as
 *    large as the fields it reads and treats fields past the size as their
 *    documented default; it never writes past the size it was given.
 *  - Enumerations are plain int32_t fields with explicit, never-reused values.
 *    New values are appended; nothing is inserted or renumbered.
 *  - Value 0 of an enumeration is "unset/invalid" where a zeroed struct must
 *    not silently mean something.
 *
 * Pure C11, no dependencies beyond the C standard library.
 */
#ifndef FUSEDMOE_COMMON_H
#define FUSEDMOE_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Status codes. Stable values; append only.                                 */
/* ------------------------------------------------------------------------ */

typedef int32_t fmoe_status;

#define FMOE_STATUS_OK 0
/* Not handled here: a backend does not serve this case. Not an error; the
 * caller may try another backend. Always comes with a reason text. */
#define FMOE_STATUS_UNSUPPORTED      1
#define FMOE_STATUS_INVALID_ARGUMENT 2 /* bad config, tensor, call argument */
#define FMOE_STATUS_OUT_OF_MEMORY    3
#define FMOE_STATUS_NOT_FOUND        4  /* file, plugin, parameter, symbol */
#define FMOE_STATUS_IO_ERROR         5  /* reading or writing a file failed */
#define FMOE_STATUS_PARSE_ERROR      6  /* malformed TOML / manifest / file */
#define FMOE_STATUS_ABI_MISMATCH     7  /* plugin and host cannot agree on an ABI */
#define FMOE_STATUS_PLUGIN_ERROR     8  /* a plugin misbehaved or failed init */
#define FMOE_STATUS_DEVICE_ERROR     9  /* a device or driver call failed */
#define FMOE_STATUS_BAD_STATE        10 /* call out of order (e.g. forward before finalize) */
#define FMOE_STATUS_INTERNAL         11 /* a bug in fusedmoe or a plugin */

/* ------------------------------------------------------------------------ */
/* Element types. Stable values; append only.                                */
/* ------------------------------------------------------------------------ */

typedef int32_t fmoe_dtype;

#define FMOE_DTYPE_INVALID      0
#define FMOE_DTYPE_F32          1
#define FMOE_DTYPE_BF16         2
#define FMOE_DTYPE_F16          3
#define FMOE_DTYPE_F64          4
#define FMOE_DTYPE_FP8_E4M3FN   5 /* OCP e4m3, no inf, NaN = S.1111.111, max 448 */
#define FMOE_DTYPE_FP8_E4M3FNUZ 6 /* AMD e4m3, bias 8, NaN = 0x80 only, max 240 */
#define FMOE_DTYPE_FP8_E5M2     7
#define FMOE_DTYPE_INT8         8
#define FMOE_DTYPE_UINT8        9
#define FMOE_DTYPE_INT32        10
#define FMOE_DTYPE_INT64        11
/* Two e2m1 values per byte, element 0 in the low nibble. One tensor element
 * is one byte (a pair), so shapes count pairs along the packed axis. */
#define FMOE_DTYPE_FP4_E2M1X2 12
#define FMOE_DTYPE_UE8M0      13 /* power-of-two scale 2^(b-127); 255 = NaN */
/* A 4-bit integer *value type*, used in schemes; never a storage dtype
 * (4-bit weights are stored packed in INT32 or UINT8 tensors). */
#define FMOE_DTYPE_INT4   14
#define FMOE_DTYPE_COUNT_ 15 /* not a dtype; grows as values are appended */

/* ------------------------------------------------------------------------ */
/* Devices.                                                                  */
/* ------------------------------------------------------------------------ */

#define FMOE_DEVICE_ANY  (-1) /* selection only: any device */
#define FMOE_DEVICE_CPU  0    /* host memory */
#define FMOE_DEVICE_CUDA 1
#define FMOE_DEVICE_ROCM 2

/* ------------------------------------------------------------------------ */
/* Tensor descriptor. Describes memory; never owns it.                       */
/* ------------------------------------------------------------------------ */

#define FMOE_MAX_DIMS 4

typedef struct fmoe_tensor {
    size_t struct_size;
    fmoe_dtype dtype;
    int32_t device_kind; /* FMOE_DEVICE_* */
    int32_t device_index;
    uint32_t ndim; /* 0..FMOE_MAX_DIMS; 0 is a scalar */
    int64_t shape[FMOE_MAX_DIMS];
    /* Strides in elements (not bytes), one per dimension; always filled in.
     * Row-major contiguous: strides[ndim-1] == 1, strides[i] = strides[i+1]*shape[i+1]. */
    int64_t strides[FMOE_MAX_DIMS];
    void *data; /* may be NULL only when the tensor has 0 elements */
} fmoe_tensor;

/* ------------------------------------------------------------------------ */
/* Activations (spec/interface.md §5).                                       */
/* ------------------------------------------------------------------------ */

#define FMOE_ACT_INVALID   0
#define FMOE_ACT_SILU      1 /* gated: silu(g)*u; with swiglu_limit L: silu(min(g,L))*clamp(u,-L,L) */
#define FMOE_ACT_GELU      2 /* gated: gelu_erf(g)*u; non-gated: gelu_erf(h) */
#define FMOE_ACT_GELU_TANH 3 /* tanh approximation of gelu */
#define FMOE_ACT_RELU2     4 /* relu(x)^2; gated: relu(g)^2*u */
/* gpt-oss: gate/up rows interleaved [g0,u0,g1,u1,..] in w13; g=min(g,L),
 * u=clamp(u,-L,L), out = g*sigmoid(alpha*g)*(u+1). Gated only. */
#define FMOE_ACT_SWIGLUOAI  5
#define FMOE_ACT_SWIGLUSTEP 6 /* gated only: min(silu(g),7)*clamp(u,-7,7) */

/* ------------------------------------------------------------------------ */
/* Routing (spec/interface.md §4).                                           */
/* ------------------------------------------------------------------------ */

#define FMOE_SCORING_INVALID      0
#define FMOE_SCORING_SOFTMAX      1 /* softmax over all experts, in fp32 */
#define FMOE_SCORING_SIGMOID      2
#define FMOE_SCORING_SQRTSOFTPLUS 3 /* sqrt(softplus(logit)), DeepSeek-V4 */

/* Expert placement across expert-parallel ranks (spec/interface.md §7). */
#define FMOE_PLACEMENT_INVALID     0
#define FMOE_PLACEMENT_LINEAR      1 /* contiguous ranges; leftovers to the first ranks */
#define FMOE_PLACEMENT_ROUND_ROBIN 2 /* expert g on rank g % ep_size */

/* Upper bound on redundant (EPLB) experts, as vLLM's MAX_EXPERT_REDUNDANCY. */
#define FMOE_MAX_REDUNDANT_EXPERTS 1023

/* Expert-parallel groups (fusedmoe.h fmoe_ep_group, plugin.h fmoe_ep_ops;
 * docs/EP.md). How a group moves tokens between ranks: */
#define FMOE_EP_MODE_INVALID         0
#define FMOE_EP_MODE_LOW_LATENCY     1 /* decode: fixed-capacity buffers, no host sync, graph-capturable */
#define FMOE_EP_MODE_HIGH_THROUGHPUT 2 /* prefill: buffers sized by the actual counts, host sync allowed */
/* What a token travels as on its way to the rank of its expert (the
 * combine always carries the activation dtype): */
#define FMOE_EP_DISPATCH_INVALID    0
#define FMOE_EP_DISPATCH_ACTIVATION 1 /* unchanged, in the layer's act_dtype (bf16 for served models) */
#define FMOE_EP_DISPATCH_FP8_TOKEN  2 /* e4m3 + one f32 scale per token (amax / 448) */
#define FMOE_EP_DISPATCH_FP8_BLOCK  3 /* e4m3 + one f32 scale per 1x128 group of a token; H % 128 == 0 */
/* Bytes of an EP unique id (fmoe_ep_unique_id): the host's 64-byte header
 * (magic, plugin name) and up to FMOE_EP_ID_PAYLOAD_BYTES of the plugin's
 * own (NCCL's ncclUniqueId is 128). */
#define FMOE_EP_UNIQUE_ID_BYTES  256
#define FMOE_EP_ID_PAYLOAD_BYTES 192

/* ------------------------------------------------------------------------ */
/* Layer configuration. Initialise with fmoe_layer_config_init() (host) or   */
/* zero it and set struct_size; then fill in. fmoe_layer_config_validate()   */
/* rejects every inconsistent combination with a message.                    */
/* ------------------------------------------------------------------------ */

typedef struct fmoe_layer_config {
    size_t struct_size;

    /* Experts. num_experts counts logical (checkpoint) experts; with EPLB the
     * global physical count is num_experts + num_redundant_experts. */
    uint32_t num_experts;
    uint32_t num_redundant_experts; /* requires enable_eplb; <= FMOE_MAX_REDUNDANT_EXPERTS */
    uint32_t top_k;
    uint32_t hidden_size;       /* H, as in the checkpoint */
    uint32_t intermediate_size; /* I, full (before tensor-parallel split) */

    /* Expert function. gated: w13 produces [gate; up] (2*I rows per TP
     * shard) and the activation multiplies; non-gated: w13 has I rows. */
    int32_t activation; /* FMOE_ACT_* */
    uint32_t gated;     /* 0 or 1 */
    uint32_t has_bias;  /* w13_bias [E,rI] and w2_bias [E,H] present */
    float swiglu_alpha; /* SWIGLUOAI alpha (default 1.702) */
    /* Clamp limit L of gated SILU and SWIGLUOAI; 0 = no clamp (the default).
     * gpt-oss uses 7.0 (its config.json swiglu_limit): set it explicitly. */
    float swiglu_limit;

    /* Activation (x/out) dtype: F32, BF16 or F16. */
    fmoe_dtype act_dtype;

    /* Routing. */
    int32_t scoring;       /* FMOE_SCORING_* */
    uint32_t renormalize;  /* divide the top-k weights by their sum */
    uint32_t grouped_topk; /* DeepSeek grouped top-k; needs the two below */
    uint32_t num_expert_group;
    uint32_t topk_group;
    uint32_t has_correction_bias;          /* e_score_correction_bias[E]: selection only */
    float routed_scaling_factor;           /* multiplies the final weights (default 1.0) */
    uint32_t apply_router_weight_on_input; /* x *= w before GEMM1; top_k must be 1 */

    /* Parallelism. TP splits I across ranks; EP gives each rank whole experts.
     * (vLLM never uses both inside one MoE layer; neither do we.) */
    uint32_t tp_size, tp_rank;
    uint32_t ep_size, ep_rank;
    int32_t placement; /* FMOE_PLACEMENT_* (default LINEAR) */
    uint32_t enable_eplb;

    /* Largest number of tokens one forward may see (sizes workspaces). */
    uint32_t max_num_tokens;
} fmoe_layer_config;

/* ------------------------------------------------------------------------ */
/* Parameters: which projection and which role a declared parameter has.     */
/* ------------------------------------------------------------------------ */
#define FMOE_PROJ_NONE 0 /* not tied to a projection (e.g. correction bias) */
#define FMOE_PROJ_W13  1 /* gate (w1) and up (w3), fused */
#define FMOE_PROJ_W2   2 /* down */

#define FMOE_ROLE_WEIGHT              1
#define FMOE_ROLE_BIAS                2
#define FMOE_ROLE_WEIGHT_SCALE        3
#define FMOE_ROLE_WEIGHT_GLOBAL_SCALE 4
#define FMOE_ROLE_INPUT_SCALE         5
#define FMOE_ROLE_INPUT_GLOBAL_SCALE  6
#define FMOE_ROLE_ZERO_POINT          7
#define FMOE_ROLE_G_IDX               8
#define FMOE_ROLE_ROUTING_BIAS        9 /* e_score_correction_bias, declared by the core */

/* ------------------------------------------------------------------------ */
/* Quantization scheme: the canonical description the registry keys on.     */
/* One side describes weights, the other activations. Flat (no nested        */
/* structs) so it can grow by appending.                                     */
/* ------------------------------------------------------------------------ */

#define FMOE_QSTRATEGY_NONE         0 /* not quantized */
#define FMOE_QSTRATEGY_TENSOR       1 /* one scale per tensor (per expert for weights) */
#define FMOE_QSTRATEGY_CHANNEL      2 /* one scale per output row */
#define FMOE_QSTRATEGY_TOKEN        3 /* activations: one scale per token row */
#define FMOE_QSTRATEGY_GROUP        4 /* one scale per group_size elements along K */
#define FMOE_QSTRATEGY_BLOCK        5 /* one scale per block_n x block_k tile */
#define FMOE_QSTRATEGY_TENSOR_GROUP 6 /* NVFP4: group scales + a global scale */

#define FMOE_ACTORDER_NONE   0
#define FMOE_ACTORDER_GROUP  1 /* g_idx permutes K ("desc_act") */
#define FMOE_ACTORDER_WEIGHT 2 /* static reordering baked into the weights */

typedef struct fmoe_scheme {
    size_t struct_size;
    /* Weights. For an unquantized layer w_dtype is the storage dtype
     * (F32/BF16/F16) and w_strategy is NONE. */
    fmoe_dtype w_dtype;            /* value type: BF16, FP8_E4M3FN, INT4, FP4_E2M1X2, ... */
    int32_t w_strategy;            /* FMOE_QSTRATEGY_* */
    uint32_t w_group_size;         /* GROUP / TENSOR_GROUP */
    uint32_t w_block_n, w_block_k; /* BLOCK */
    fmoe_dtype w_scale_dtype;      /* F32, BF16, FP8_E4M3FN (NVFP4), UE8M0 (MX) */
    uint32_t w_symmetric;
    int32_t w_actorder; /* FMOE_ACTORDER_* */
    /* Activations. a_dtype INVALID and a_strategy NONE: not quantized. */
    fmoe_dtype a_dtype;
    int32_t a_strategy;
    uint32_t a_group_size;
    uint32_t a_dynamic;
    uint32_t a_symmetric;
} fmoe_scheme;

/* Longest canonical scheme key, including the terminating NUL. */
#define FMOE_SCHEME_KEY_MAX 128

/* Queues forward `index` on `stream` and returns (fmoe_layer_time_replays,
 * and the plugin slot behind it: plugin.h fmoe_replay_args). */
typedef fmoe_status (*fmoe_enqueue_fn)(void *ctx, uint32_t index, void *stream);

#ifdef __cplusplus
}
#endif
#endif /* FUSEDMOE_COMMON_H */
