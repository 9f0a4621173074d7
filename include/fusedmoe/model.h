/*
 * fusedmoe/model.h - read a Hugging Face model config.json of a MoE family
 * and get, per decoder layer, the fused-MoE layer config and the names of
 * the checkpoint tensors that layer loads (docs/MODELS.md).
 *
 * Families (chosen by "architectures", else by "model_type"):
 *
 *   family        architectures                       model_type
 *   mixtral       MixtralForCausalLM                  mixtral
 *   qwen2_moe     Qwen2MoeForCausalLM                 qwen2_moe
 *   qwen3_moe     Qwen3MoeForCausalLM                 qwen3_moe
 *   deepseek_v2   DeepseekV2ForCausalLM               deepseek_v2
 *   deepseek_v3   DeepseekV3ForCausalLM               deepseek_v3, kimi_k2
 *   deepseek_v4   DeepseekV4ForCausalLM               deepseek_v4 (hash-routed layers refused)
 *   gpt_oss       GptOssForCausalLM                   gpt_oss
 *   llama4        Llama4ForConditionalGeneration      llama4 (MoE keys in "text_config")
 *   llama4_text   Llama4ForCausalLM                   llama4_text
 *
 * Strictness: every key that is read is checked (type, range, known value);
 * an error names the file, the JSON key path and what was expected, e.g.
 *
 *   config.json: text_config.num_experts_per_tok: expected an integer in
 *   [1, 2147483647], got "1"
 *
 * A known option we do not implement (a scoring function, a routing
 * method, an activation) is UNSUPPORTED naming the key and value; it is
 * never ignored. Keys we do not read are fine. An optional key that is
 * absent takes the default of the family's transformers config class (what
 * both transformers and vLLM see); docs/MODELS.md lists them.
 *
 * What the routed layer does not compute is reported, never dropped:
 * shared experts (fmoe_model_layer_shared) run beside the routed experts
 * and are the caller's to compute.
 *
 * Errors and threads follow fusedmoe.h: functions returning fmoe_status
 * clear the error text on entry; a model is immutable once read and may be
 * queried from any number of threads.
 */
#ifndef FUSEDMOE_MODEL_H
#define FUSEDMOE_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "fusedmoe/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef FMOE_API
#if defined(_WIN32)
#define FMOE_API
#else
#define FMOE_API __attribute__((visibility("default")))
#endif
#endif

struct fmoe_expert_modules; /* fusedmoe.h */

/* A model config as read. Opaque; owns every string it hands out, which
 * stay valid until fmoe_model_destroy. */
typedef struct fmoe_model fmoe_model;

/* Read config.json at `path` (messages name the path). NOT_FOUND /
 * IO_ERROR when it cannot be read, PARSE_ERROR for malformed JSON,
 * INVALID_ARGUMENT / UNSUPPORTED for the contents. *out is NULL on error. */
FMOE_API fmoe_status fmoe_model_config_load(const char *path, fmoe_model **out);
/* The same from text of `len` bytes; `source` names it in messages (NULL:
 * "config.json"). Takes a length, like fmoe_quant_config_parse, so a
 * caller can pass a buffer that is not NUL-terminated. */
FMOE_API fmoe_status fmoe_model_config_parse(const char *json, size_t len, const char *source, fmoe_model **out);
FMOE_API void fmoe_model_destroy(fmoe_model *m);

/* "mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3",
 * "deepseek_v4", "gpt_oss", "llama4", "llama4_text" (NULL for a NULL
 * model). */
FMOE_API const char *fmoe_model_family(const fmoe_model *m);
/* Decoder layers (num_hidden_layers), MoE or dense. DeepSeek-V3's
 * multi-token-prediction layer (num_nextn_predict_layers) is not counted. */
FMOE_API uint32_t fmoe_model_layer_count(const fmoe_model *m);
/* 1 if decoder layer `layer` is a MoE layer, 0 if it is dense or out of
 * range. */
FMOE_API int fmoe_model_layer_is_moe(const fmoe_model *m, uint32_t layer);
/* Activation dtype: torch_dtype (or dtype), F32 when absent as in
 * transformers; one of F32, BF16, F16. */
FMOE_API fmoe_dtype fmoe_model_dtype(const fmoe_model *m);

/* The config of MoE layer `layer`: experts, top-k, sizes, activation,
 * routing, act_dtype = fmoe_model_dtype. The parallel fields (tp/ep size
 * and rank, placement, EPLB) and max_num_tokens keep the defaults of
 * fmoe_layer_config_init for the caller to set. The result passes
 * fmoe_layer_config_validate. `cfg` is written up to its struct_size
 * (set it, e.g. with fmoe_layer_config_init). INVALID_ARGUMENT for a
 * dense or out-of-range layer, naming the keys that made it dense.
 *
 * Llama-4's router (top-1 of the raw logits, weight sigmoid(logit), no
 * renormalization, weight applied on the input) is given as scoring
 * SIGMOID, renormalize 0, apply_router_weight_on_input 1: sigmoid is
 * monotonic, so the same expert is chosen with the same weight, except
 * where two logits so large that their sigmoids round to the same f32
 * (above ~17) tie and the lower id wins instead of the larger logit. */
FMOE_API fmoe_status fmoe_model_layer_config(const fmoe_model *m, uint32_t layer, fmoe_layer_config *cfg);

/* Shared experts of a MoE layer: dense experts every token goes through,
 * added to the routed output. fmoe_layer does not compute them. */
typedef struct fmoe_model_shared {
    size_t struct_size;
    uint32_t count; /* 0: none (Mixtral, Qwen3-MoE, gpt-oss) */
    /* Intermediate size of the shared MLP (all shared experts together,
     * as one gated SiLU MLP): DeepSeek n_shared_experts *
     * moe_intermediate_size, Qwen2-MoE shared_expert_intermediate_size,
     * Llama-4 intermediate_size. */
    uint32_t intermediate_size;
    /* 1: the shared output is multiplied by sigmoid(x . shared_gate) before
     * it is added (Qwen2-MoE's shared_expert_gate). */
    uint32_t gated;
} fmoe_model_shared;

FMOE_API fmoe_status fmoe_model_layer_shared(const fmoe_model *m, uint32_t layer, fmoe_model_shared *shared);

/* The checkpoint tensor names of one MoE layer. Every pointer is owned by
 * the model; NULL means "this family / config has no such tensor".
 *
 * Experts come in one of two forms (a family may have both; a checkpoint
 * uses one, e.g. Llama-4's bf16 release is fused and its FP8 releases are
 * per expert):
 *  - per expert: "<experts>.<e>.<expert_gate|up|down>.weight" with
 *    [rows, K] weights as nn.Linear stores them (gate/up [I, H], down
 *    [H, I]); quantized checkpoints add their suffixes to the same module
 *    ("...weight_scale");
 *  - fused: one 3-D tensor per projection for all experts, stored
 *    transposed relative to [rows, K]: gate_up [E, H, 2I], down [E, I, H]
 *    (y = x @ W[e]). Along 2I, gate and up are either concatenated
 *    [gate | up] or interleaved [g0, u0, g1, u1, ...] (fused_interleaved).
 *    The names have no ".weight" suffix (they are nn.Parameters).
 * gpt-oss's MXFP4 form is not transposed: blocks [E, N, K/32, 16] uint8
 * (two e2m1 per byte, low nibble first) and scales [E, N, K/32] ue8m0, with
 * N = 2I interleaved rows for gate_up and N = H for down. */
typedef struct fmoe_model_names {
    size_t struct_size;
    const char *router_weight; /* [E, H]: "model.layers.3.mlp.gate.weight" */
    const char *router_bias;   /* [E] (gpt-oss) */
    /* [E] f32 selection bias (DeepSeek topk_method "noaux_tc"):
     * "model.layers.3.mlp.gate.e_score_correction_bias"; DeepSeek-V4
     * "layers.3.ffn.gate.bias", named on every layer that is not
     * hash-routed, so that a bias the config does not route with is
     * refused rather than ignored. */
    const char *correction_bias;
    const char *experts; /* "model.layers.3.mlp.experts" */
    /* Per-expert projection module names ("gate_proj", "up_proj",
     * "down_proj"; Mixtral "w1", "w3", "w2"); NULL without that form. */
    const char *expert_gate, *expert_up, *expert_down;
    /* Fused form; NULL without it. */
    const char *fused_gate_up;      /* [E, H, 2I] */
    const char *fused_gate_up_bias; /* [E, 2I], same order along 2I */
    const char *fused_down;         /* [E, I, H] */
    const char *fused_down_bias;    /* [E, H] */
    uint32_t fused_interleaved;     /* 1: [g0,u0,g1,u1,..]; 0: [gate | up] */
    /* gpt-oss MXFP4 form; NULL otherwise. */
    const char *mxfp4_gate_up_blocks, *mxfp4_gate_up_scales;
    const char *mxfp4_down_blocks, *mxfp4_down_scales;
    /* Shared experts (see fmoe_model_layer_shared); NULL when none.
     * "<shared>.gate_proj.weight", "<shared>.up_proj.weight",
     * "<shared>.down_proj.weight" (DeepSeek-V4: w1, w3, w2, as its routed
     * experts are named). */
    const char *shared;             /* "model.layers.3.mlp.shared_experts" */
    const char *shared_gate_weight; /* [1, H] (Qwen2-MoE) */
} fmoe_model_names;

FMOE_API fmoe_status fmoe_model_layer_names(const fmoe_model *m, uint32_t layer, fmoe_model_names *names);

/* Fill `modules` (set up with fmoe_expert_modules_init, fusedmoe.h) for
 * fmoe_quant_config_scheme: the experts prefix, count and per-expert
 * projection names; fused = 1 only for a family whose experts exist in the
 * fused form alone (gpt-oss). The strings are the model's. */
FMOE_API fmoe_status fmoe_model_layer_expert_modules(const fmoe_model *m, uint32_t layer,
                                                     struct fmoe_expert_modules *modules);

#ifdef __cplusplus
}
#endif
#endif /* FUSEDMOE_MODEL_H */
