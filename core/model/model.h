/*
 * core/model/model.h - internals of the model config reader
 * (include/fusedmoe/model.h): the model object, the per-family readers and
 * the naming tables.
 *
 * Reading is in three steps, each in its own file:
 *   model.c     the public entry points: parse the JSON, pick the family
 *               from "architectures" / "model_type", run its reader, check
 *               the result, build the names;
 *   family_*.c  one reader per family: which keys, their defaults, the
 *               routing they give and which layers are MoE layers;
 *   naming.c    the checkpoint tensor names of one MoE layer.
 * mjson.c adds the typed reads qjson (core/quant/qjson.h) does not have.
 */
#ifndef FMOE_CORE_MODEL_MODEL_H
#define FMOE_CORE_MODEL_MODEL_H

#include <jansson.h>
#include <stdint.h>

#include "base/limits.h"
#include "core/quant/qjson.h"
#include "fusedmoe/model.h"

/* Ceilings of what a config.json can state (base/limits.h, documented in
 * docs/ROBUSTNESS.md): far above every published model, and checked when
 * the key is read, before any per-layer or per-expert work. */
#define MODEL_MAX_LAYERS       FMOE_LIMIT_LAYERS
#define MODEL_MAX_EXPERTS      FMOE_LIMIT_EXPERTS
#define MODEL_MAX_TOP_K        FMOE_LIMIT_TOP_K
#define MODEL_MAX_HIDDEN       FMOE_LIMIT_HIDDEN
#define MODEL_MAX_INTERMEDIATE FMOE_LIMIT_INTERMEDIATE

/* How a family spells one expert's projections:
 * <block>.experts.<e>.<gate|up|down>.weight. */
typedef struct model_expert_names {
    const char *gate, *up, *down;
} model_expert_names;

/* The spellings the families share (naming.c): Hugging Face's gate_proj,
 * up_proj, down_proj; and w1 (gate), w3 (up), w2 (down) of the original
 * Mixtral and DeepSeek-V4 checkpoints (vLLM's ckpt_*_proj_name). */
extern const model_expert_names model_experts_proj;
extern const model_expert_names model_experts_w1_w3_w2;

/* How a family names the tensors of one MoE layer, relative to
 * "<layer prefix>.<N>." (naming.c turns it into full names). */
typedef struct model_naming {
    const char *layer_prefix; /* "model.layers" */
    const char *block;        /* the MoE module of a layer: "mlp", "block_sparse_moe", "feed_forward" */
    const char *router;       /* the router linear under block: "gate", "router" */
    uint32_t router_bias;     /* the router has a bias (gpt-oss) */
    /* The selection bias under router; NULL: "e_score_correction_bias",
     * named only when the config routes with it. Set (DeepSeek-V4's
     * "bias"): named on every layer that is not hash-routed, so the loader
     * refuses a bias the config does not route with. */
    const char *correction_bias;
    /* The per-expert form; NULL: no such form (fused tensors only). */
    const model_expert_names *experts;
    /* Fused 3-D form <block>.experts.gate_up_proj / down_proj. */
    uint32_t fused;
    uint32_t fused_bias;        /* + gate_up_proj_bias / down_proj_bias */
    uint32_t fused_interleaved; /* gate/up alternate along 2I (gpt-oss) */
    uint32_t mxfp4;             /* + the *_blocks / *_scales MXFP4 form */
    /* Shared experts, when the config has any. */
    const char *shared;      /* module under block: "shared_experts" */
    const char *shared_gate; /* sigmoid gate of the shared output (Qwen2-MoE) */
} model_naming;

typedef struct model_reader model_reader;

typedef struct model_family {
    const char *name;                 /* fmoe_model_family() */
    const char *const *architectures; /* NULL-terminated */
    const char *const *model_types;   /* NULL-terminated; [0] is the canonical one */
    const char *text_config;          /* member holding the text model's config, or NULL */
    const model_naming *naming;
    /* Fill r->model from r->obj; every error names the key. */
    fmoe_status (*read)(model_reader *r);
} model_family;

extern const model_family fmoe_family_mixtral;
extern const model_family fmoe_family_qwen2_moe;
extern const model_family fmoe_family_qwen3_moe;
extern const model_family fmoe_family_deepseek_v2;
extern const model_family fmoe_family_deepseek_v3;
extern const model_family fmoe_family_deepseek_v4;
extern const model_family fmoe_family_gpt_oss;
extern const model_family fmoe_family_llama4;
extern const model_family fmoe_family_llama4_text;

/* Names of one MoE layer, owned by the model (NULL where absent). */
enum {
    MN_ROUTER_WEIGHT,
    MN_ROUTER_BIAS,
    MN_CORRECTION_BIAS,
    MN_EXPERTS,
    MN_FUSED_GATE_UP,
    MN_FUSED_GATE_UP_BIAS,
    MN_FUSED_DOWN,
    MN_FUSED_DOWN_BIAS,
    MN_MXFP4_GATE_UP_BLOCKS,
    MN_MXFP4_GATE_UP_SCALES,
    MN_MXFP4_DOWN_BLOCKS,
    MN_MXFP4_DOWN_SCALES,
    MN_SHARED,
    MN_SHARED_GATE,
    MN_COUNT
};

struct fmoe_model {
    char *source;
    const model_family *family;
    uint32_t num_layers;
    uint8_t *is_moe;       /* [num_layers] */
    char pattern[160];     /* the keys that decided is_moe, for messages */
    fmoe_layer_config cfg; /* every MoE layer's config (all are alike) */
    fmoe_dtype dtype;
    uint32_t shared_count;        /* shared experts per MoE layer */
    uint32_t shared_intermediate; /* their combined intermediate size */
    uint32_t shared_gated;        /* output scaled by sigmoid(x . w_gate) */
    /* Layers that pick their experts by token id (DeepSeek-V4's hash MoE):
     * MoE layers whose layer config is refused. [num_layers], all 0 for
     * the other families; hash_key names the config key that said so. */
    uint8_t *hash_routed;
    char hash_key[32];
    char **names; /* [num_layers * MN_COUNT], rows of dense layers NULL */
};

/* What a family reader works on. */
struct model_reader {
    qjson j;           /* positioned at obj (e.g. "text_config") */
    const json_t *obj; /* the (text) model's config object */
    fmoe_model *model;
};

/* ---- mjson.c: typed reads on top of qjson ------------------------------- */

/* An integer in [lo, hi]; absent and not required: *out untouched. */
fmoe_status mjson_uint(qjson *j, const json_t *obj, const char *key, int required, uint32_t lo, uint32_t hi,
                       uint32_t *out);
/* A number (JSON integer or real), finite; absent and not required: *out
 * untouched, *given 0 (given may be NULL). */
fmoe_status mjson_real(qjson *j, const json_t *obj, const char *key, int required, double *out, int *given);
/* INVALID_ARGUMENT at obj.key: "expected <what>, got <value>". */
fmoe_status mjson_expected_at(qjson *j, const json_t *obj, const char *key, const char *what);
/* qjson_fail with `status` at obj.key. */
fmoe_status mjson_fail_at(qjson *j, const char *key, fmoe_status status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* hidden_act, when given, must be "silu" (the only expert and shared
 * activation these families' vLLM models implement). */
fmoe_status mjson_require_silu(qjson *j, const json_t *obj);

/* ---- helpers for family readers (model.c) ------------------------------- */

/* Allocate the per-layer flags (is_moe, hash_routed: all 0) of
 * num_layers decoder layers. */
fmoe_status model_set_layers(fmoe_model *m, uint32_t num_layers);
/* DeepSeek's n_shared_experts (V2, V3, V4): required, null = none; the
 * shared MLP is n * moe_intermediate_size wide (cfg.intermediate_size must
 * be read first). */
fmoe_status model_read_shared_count(model_reader *r);
/* Every one of the num_layers decoder layers (model_set_layers) is a MoE
 * layer; `pattern` says so in messages. */
void model_all_layers_moe(fmoe_model *m, const char *pattern);
/* Check top_k <= num_experts with the families' key names. */
fmoe_status model_check_top_k(model_reader *r, const char *experts_key, const char *top_k_key);

/* An integer in [lo, hi] that the family's transformers config class reads
 * under several names (its attribute_map: Qwen3MoeConfig maps "num_experts"
 * to "num_local_experts", so a config.json may carry either). keys:
 * NULL-terminated, keys[0] the name the class saves. Each present key is
 * checked as mjson_uint does; two present with different values are an
 * error naming both keys and values (transformers keeps whichever it sets
 * last, which differs between classes: never pick one silently);
 * none present: *out untouched, or "missing required key" listing them.
 * *used (may be NULL): the first present key, else keys[0], for messages. */
fmoe_status model_uint_spellings(model_reader *r, const char *const *keys, int required, uint32_t lo, uint32_t hi,
                                 uint32_t *out, const char **used);

/* ---- naming.c ------------------------------------------------------------ */

/* Build the names of every MoE layer of m. */
fmoe_status model_build_names(fmoe_model *m);

#endif
