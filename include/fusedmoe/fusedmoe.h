/*
 * fusedmoe.h - the application API of libfusedmoe.
 *
 * fusedmoe runs the routed-expert (fused Mixture-of-Experts) layer through
 * backend plugins loaded at run time. An application:
 *
 *   1. creates a context (loads the TOML configuration, discovers plugins);
 *   2. creates a layer from a layer config and a quantization scheme - this
 *      selects a backend method and declares the parameters it needs;
 *   3. loads every declared parameter (fmoe_layer_load);
 *   4. finalizes the layer (the backend repacks/uploads its weights);
 *   5. calls fmoe_layer_forward as often as it likes;
 *   6. destroys the layer, then the context.
 *
 * Errors: every function that can fail returns an fmoe_status. On failure the
 * text of the error is available from fmoe_last_error() on the same thread
 * until the next call on that thread of a function returning fmoe_status
 * (those clear it on entry; infallible functions such as the *_name lookups
 * never touch it). The library owns that text.
 *
 * Threads: a context may be shared by any number of threads once created;
 * fmoe_context_* queries and fmoe_layer_create are safe to call concurrently.
 * Any thread may call fmoe_layer_load, fmoe_layer_finalize and
 * fmoe_layer_forward at any time: the library serializes them per layer
 * (a lock held for the call), so concurrent calls on one layer are safe and
 * run one after the other, while forwards on different layers run in
 * parallel. On a device the lock covers the call, which enqueues work: the
 * work itself runs in the order of the stream the caller passes. Destroy
 * functions must not race with any other use of the same object
 * (docs/PLUGIN-ABI.md, "Thread model", says the same for plugins).
 */
#ifndef FUSEDMOE_H
#define FUSEDMOE_H

#include "fusedmoe/common.h"
#include "fusedmoe/formats.h"
#include "fusedmoe/model.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define FMOE_API
#else
#define FMOE_API __attribute__((visibility("default")))
#endif

/* Library version (semantic). The plugin ABI version is in plugin.h. */
#define FUSEDMOE_VERSION_MAJOR 0
#define FUSEDMOE_VERSION_MINOR 1
#define FUSEDMOE_VERSION_PATCH 0

/* "0.1.0", the version of the library actually loaded. */
FMOE_API const char *fmoe_version(void);

/* The plugin ABI this library speaks (the FMOE_ABI_MAJOR/MINOR it was built
 * with; plugins negotiate down to it). Either pointer may be NULL. */
FMOE_API void fmoe_plugin_abi(uint32_t *major, uint32_t *minor);

/* ------------------------------------------------------------------------ */
/* Errors and names                                                          */
/* ------------------------------------------------------------------------ */

/* Text of the last error on this thread ("" if none). Owned by the library;
 * valid until the next fusedmoe call on this thread. Never NULL. */
FMOE_API const char *fmoe_last_error(void);

/* Stable lower-case names ("ok", "unsupported", "invalid-argument", ...).
 * Unknown values give "unknown". Never NULL. */
FMOE_API const char *fmoe_status_name(fmoe_status status);
FMOE_API const char *fmoe_dtype_name(fmoe_dtype dtype);          /* "bf16", "fp8_e4m3fn", ... */
FMOE_API const char *fmoe_activation_name(int32_t activation);   /* "silu", ... */
FMOE_API const char *fmoe_scoring_name(int32_t scoring);         /* "softmax", ... */
FMOE_API const char *fmoe_device_kind_name(int32_t device_kind); /* "cpu", "cuda", ... */

/* Parse the names above. Return the value, or the INVALID value (0) of the
 * enumeration for an unknown name. "gelu_pytorch_tanh" is accepted for
 * FMOE_ACT_GELU_TANH. Dtype aliases (PyTorch spellings): float32, float,
 * bfloat16, float16, half, float64, double, float8_e4m3fn, float8_e4m3fnuz,
 * float8_e5m2, float4_e2m1fn_x2, float8_e8m0fnu. Names are case-sensitive. */
FMOE_API fmoe_dtype fmoe_dtype_from_name(const char *name);
FMOE_API int32_t fmoe_activation_from_name(const char *name);
FMOE_API int32_t fmoe_scoring_from_name(const char *name);

/* Bytes per tensor element (FP4_E2M1X2: 1, a pair). 0 for INVALID and for
 * value-only types such as INT4. */
FMOE_API size_t fmoe_dtype_size(fmoe_dtype dtype);

/* ------------------------------------------------------------------------ */
/* Tensors                                                                   */
/* ------------------------------------------------------------------------ */

/* Describe contiguous row-major host memory: sets struct_size, dtype,
 * device CPU/0, shape and strides. ndim must be <= FMOE_MAX_DIMS. */
FMOE_API fmoe_status fmoe_tensor_init(fmoe_tensor *t, fmoe_dtype dtype, uint32_t ndim, const int64_t *shape,
                                      void *data);

/* Number of elements (product of the shape; 1 for a scalar); -1 if t is
 * NULL or malformed or the product overflows int64. */
FMOE_API int64_t fmoe_tensor_numel(const fmoe_tensor *t);

/* 1 if the strides describe dense row-major storage, else 0. */
FMOE_API int fmoe_tensor_is_contiguous(const fmoe_tensor *t);

/* ------------------------------------------------------------------------ */
/* Layer configuration                                                       */
/* ------------------------------------------------------------------------ */

/* Defaults: activation SILU, gated, act_dtype BF16, scoring SOFTMAX,
 * renormalize 0, routed_scaling_factor 1, tp/ep size 1 rank 0, placement
 * LINEAR, swiglu_alpha 1.702, swiglu_limit 0, max_num_tokens 8192. The sizes
 * (num_experts, top_k, hidden, intermediate) are 0 and must be set. */
FMOE_API void fmoe_layer_config_init(fmoe_layer_config *cfg);

/* Check a configuration. FMOE_STATUS_OK, or INVALID_ARGUMENT with a message
 * (fmoe_last_error) naming the field and what was expected. Rejects every
 * construction error of spec/interface.md §12 that a config can express. */
FMOE_API fmoe_status fmoe_layer_config_validate(const fmoe_layer_config *cfg);

/* Derived sizes. Global physical experts = logical + redundant. */
FMOE_API uint32_t fmoe_layer_config_global_experts(const fmoe_layer_config *cfg);
/* Experts this EP rank owns (linear or round-robin; leftovers to the first ranks). */
FMOE_API uint32_t fmoe_layer_config_local_experts(const fmoe_layer_config *cfg);
/* intermediate_size / tp_size (validate first: it must divide). */
FMOE_API uint32_t fmoe_layer_config_intermediate_per_rank(const fmoe_layer_config *cfg);

/* Fill expert_map[global_experts] for this EP rank: the local index of each
 * global expert, or -1 when another rank owns it. With ep_size 1 the map is
 * the identity. Fails if `len` is not the global expert count. */
FMOE_API fmoe_status fmoe_layer_config_expert_map(const fmoe_layer_config *cfg, int32_t *expert_map, uint32_t len);

/* Expert placement tables (spec/interface.md §7; docs/PLACEMENT.md). Each
 * validates cfg and the buffer length first (INVALID_ARGUMENT naming it).
 * "Global" ids are physical expert ids: logical experts 0..L-1, then the R
 * EPLB replicas L..L+R-1 (physical L+i holds logical i % L). */

/* AITER-style mask for this EP rank: mask[g] = 1 if global expert g is
 * local, else 0, and a last sentinel slot mask[global] = 0 (len = global+1). */
FMOE_API fmoe_status fmoe_layer_config_expert_mask(const fmoe_layer_config *cfg, int32_t *mask, uint32_t len);
/* local_to_global[i]: the global id of this rank's local expert i
 * (len = local experts). */
FMOE_API fmoe_status fmoe_layer_config_local_to_global(const fmoe_layer_config *cfg, int32_t *local_to_global,
                                                       uint32_t len);
/* EPLB: physical_to_logical[p] for every global physical expert (len =
 * global). Without EPLB it is the identity. */
FMOE_API fmoe_status fmoe_layer_config_physical_to_logical(const fmoe_layer_config *cfg, int32_t *physical_to_logical,
                                                           uint32_t len);
/* EPLB: logical_to_physical[l * max_replicas + r] = physical id of replica r
 * of logical l, -1 past its count; replica_count[l] (may be NULL). The
 * buffer is num_experts * max_replicas; max_replicas must be at least the
 * largest replica count (1 + ceil(R / L)). Replicas are in ascending
 * physical order, replica 0 being the logical expert itself. Routing picks
 * replica (token * top_k + slot) % count (docs/ROUTING.md). */
FMOE_API fmoe_status fmoe_layer_config_logical_to_physical(const fmoe_layer_config *cfg, int32_t *logical_to_physical,
                                                           uint32_t max_replicas, uint32_t *replica_count);
/* Dispatch order for all-to-all kernels (vLLM's "routing tables"): experts
 * renumbered so that each rank's experts are contiguous, rank 0 first.
 * With LINEAR placement this is the identity; with ROUND_ROBIN, expert g of
 * rank g % ep becomes rank_offset(g % ep) + g / ep. Both tables have len =
 * global; either may be NULL. */
FMOE_API fmoe_status fmoe_layer_config_dispatch_order(const fmoe_layer_config *cfg, int32_t *global_to_dispatch,
                                                      int32_t *dispatch_to_global, uint32_t len);

/* ------------------------------------------------------------------------ */
/* Schemes                                                                   */
/* ------------------------------------------------------------------------ */

/* An unquantized scheme whose weights are stored as `dtype` (F32/BF16/F16). */
FMOE_API void fmoe_scheme_init_unquantized(fmoe_scheme *scheme, fmoe_dtype dtype);

/* Canonical key, e.g. "bf16", "fp8e4m3:channel/fp8e4m3:token:dynamic",
 * "int4:group128:actorder". Grammar in docs/SCHEMES.md. Two schemes are the
 * same scheme iff their keys are equal. `cap` >= FMOE_SCHEME_KEY_MAX is
 * always enough. */
FMOE_API fmoe_status fmoe_scheme_key(const fmoe_scheme *scheme, char *key, size_t cap);

/* Parse a key (canonical or not: attributes in any order, defaults spelled
 * out) into a scheme. PARSE_ERROR names the offending token. */
FMOE_API fmoe_status fmoe_scheme_parse(const char *key, fmoe_scheme *scheme);

/* ------------------------------------------------------------------------ */
/* Schemes from a checkpoint's quantization_config (docs/SCHEMES.md,         */
/* "From a checkpoint")                                                      */
/* ------------------------------------------------------------------------ */

typedef struct fmoe_quant_config fmoe_quant_config;

/* Read a Hugging Face config.json (its "quantization_config", or the older
 * "compression_config", and "torch_dtype"/"dtype" for unquantized weights),
 * or a file that is a quantization_config object itself. quant_method
 * "compressed-tensors", "fp8", "modelopt", "modelopt_fp4", "gptq" and
 * "mxfp4" are read; any other method is UNSUPPORTED, naming it. Every
 * error names the file and the JSON path. No quantization_config: every
 * module is unquantized. */
FMOE_API fmoe_status fmoe_quant_config_load(const char *path, fmoe_quant_config **out);
/* The same from text; `source` names it in messages (NULL: "config.json"). */
FMOE_API fmoe_status fmoe_quant_config_parse(const char *json, size_t len, const char *source, fmoe_quant_config **out);
FMOE_API void fmoe_quant_config_destroy(fmoe_quant_config *qc);
/* "compressed-tensors", "fp8", "modelopt", "gptq", "mxfp4", or "none".
 * Checkpoint layouts differ by method even for one scheme (ModelOpt stores
 * the NVFP4 global scale as a dequant value, compressed-tensors as its
 * inverse; GPTQ packs along K), so loaders need it besides the scheme. */
FMOE_API const char *fmoe_quant_config_method(const fmoe_quant_config *qc);
/* Storage dtype of unquantized weights (torch_dtype; F32 when absent, as
 * in transformers). */
FMOE_API fmoe_dtype fmoe_quant_config_dtype(const fmoe_quant_config *qc);

/* How one MoE layer's expert modules are named in the checkpoint. */
typedef struct fmoe_expert_modules {
    size_t struct_size;
    const char *prefix;   /* "model.layers.3.mlp.experts" */
    uint32_t num_experts; /* experts 0 .. num_experts-1 are all checked */
    /* Per-expert projections: prefix.<e>.<gate|up|down>. `up` NULL for a
     * non-gated layer. Defaults: gate_proj, up_proj, down_proj. */
    const char *gate, *up, *down;
    /* 1: the experts are one fused module (gpt-oss): `prefix` itself is
     * resolved, and gate/up/down are ignored. */
    uint32_t fused;
} fmoe_expert_modules;

FMOE_API void fmoe_expert_modules_init(fmoe_expert_modules *m);

/* The scheme of one MoE layer: every projection of every expert is
 * resolved (targets, ignore lists, regexes, per-module overrides) and must
 * come out the same, or INVALID_ARGUMENT names the first two that differ.
 * Then the MoE method selection of spec/interface.md §9.3 decides;
 * UNSUPPORTED gives its reason. The message is prefixed with the file and
 * the layer prefix. */
FMOE_API fmoe_status fmoe_quant_config_scheme(const fmoe_quant_config *qc, const fmoe_expert_modules *modules,
                                              fmoe_scheme *out);

/* ------------------------------------------------------------------------ */
/* Checkpoints: safetensors files, one or sharded with an index              */
/* ------------------------------------------------------------------------ */

typedef struct fmoe_checkpoint fmoe_checkpoint;

/* Open a checkpoint: a directory holding model.safetensors.index.json (and
 * its shards) or model.safetensors, an index .json file, or one .safetensors
 * file. Every file is mapped read-only and validated strictly up front
 * (docs/CHECKPOINTS.md: header, dtypes, shapes, offsets; the index must
 * name shards by plain file names, every tensor it lists must be in its
 * shard, and every tensor of every shard must be listed, once). Errors name
 * the file and the tensor. */
FMOE_API fmoe_status fmoe_checkpoint_open(const char *path, fmoe_checkpoint **out);
FMOE_API void fmoe_checkpoint_close(fmoe_checkpoint *ck);
/* Tensors, in name order. */
FMOE_API size_t fmoe_checkpoint_tensor_count(const fmoe_checkpoint *ck);
FMOE_API const char *fmoe_checkpoint_tensor_name(const fmoe_checkpoint *ck, size_t index);
/* The index of tensor `name`, or (size_t)-1. */
FMOE_API size_t fmoe_checkpoint_find(const fmoe_checkpoint *ck, const char *name);
/* The file a tensor is stored in (for messages). */
FMOE_API const char *fmoe_checkpoint_tensor_file(const fmoe_checkpoint *ck, size_t index);
/* A host view of the tensor (read-only, valid until close). F4 (packed
 * e2m1) becomes FP4_E2M1X2 with the last axis halved; a dtype fusedmoe has
 * no type for is INVALID_ARGUMENT naming it. */
FMOE_API fmoe_status fmoe_checkpoint_tensor(const fmoe_checkpoint *ck, size_t index, fmoe_tensor *out);

/* ------------------------------------------------------------------------ */
/* Context                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct fmoe_context fmoe_context;

#define FMOE_LOG_ERROR 0
#define FMOE_LOG_WARN  1
#define FMOE_LOG_INFO  2
#define FMOE_LOG_DEBUG 3

/* Log sink. `category` is "loader", "probe", "select", "dispatch", "plugin:<name>",
 * ...; `msg` has no trailing newline. Called from any thread; must be
 * thread-safe. */
typedef void (*fmoe_log_fn)(void *user, int32_t level, const char *category, const char *msg);

typedef struct fmoe_context_options {
    size_t struct_size;
    /* TOML configuration file. NULL: $FMOE_CONFIG if set, else the installed
     * default (share/fusedmoe/fusedmoe.toml), else built-in defaults. */
    const char *config_path;
    /* Explicit plugin manifests or libraries loaded before any search path
     * (like FMOE_PLUGIN_FILES). May be NULL. */
    const char *const *plugin_files;
    uint32_t n_plugin_files;
    /* Log sink; NULL writes to stderr. Level threshold and categories come
     * from the TOML [log] table and FMOE_LOG. */
    fmoe_log_fn log_fn;
    void *log_user;
    /* 1: ignore FMOE_* environment variables (tests, embedding), including
     * FMOE_OPTIONS, the only way the environment reaches plugin options. */
    uint32_t ignore_environment;
    /* Log level and categories in the syntax of FMOE_LOG ("debug",
     * "info,dispatch"), applied after the TOML [log] level and FMOE_LOG.
     * NULL: none. */
    const char *log_spec;
    /* 1: the context sees nothing installed on the machine: no default
     * configuration file is read (config_path or $FMOE_CONFIG, else
     * built-in defaults), and plugins are searched only in plugin_files,
     * FMOE_PLUGIN_FILES/FMOE_PLUGIN_PATH and the configuration's [search],
     * never beside libfusedmoe or in the install directory. With
     * ignore_environment too, the context sees only what is passed here:
     * what tests and embedders that ship their own plugins want. */
    uint32_t isolated;
    /* Plugin options set by the application, in FMOE_OPTIONS' syntax
     * ("cpu.isa=avx2,cuda.tier=stream"), checked like the TOML's
     * [plugins.<name>.options] and applied after them and after
     * FMOE_OPTIONS: the application's word is last. NULL: none. A malformed
     * entry fails fmoe_context_create with INVALID_ARGUMENT naming it. */
    const char *plugin_options;
} fmoe_context_options;

FMOE_API void fmoe_context_options_init(fmoe_context_options *opts);

/* Read configuration, discover and load plugins, probe devices. A plugin that
 * fails to load (bad manifest, wrong architecture or ABI, dlopen or entry
 * failure, a refused option, init or probe returning an error, a malformed
 * reply) is recorded (see fmoe_context_plugin) and skipped; it never stops
 * the others. What this does not protect against: plugins run in this
 * process, so one that crashes (a segfault, an abort) or hangs in its entry,
 * init or probe takes the process with it. Vet a plugin with `fusedmoe
 * conform`, which reports a crash as a failure naming the case it happened
 * in, before letting a context load it (docs/ROBUSTNESS.md, "Plugins").
 * Fails only for a broken configuration (PARSE_ERROR with file:line:column),
 * a malformed FMOE_OPTIONS (INVALID_ARGUMENT) or out of memory. `opts` may
 * be NULL. */
FMOE_API fmoe_status fmoe_context_create(const fmoe_context_options *opts, fmoe_context **out);
FMOE_API void fmoe_context_destroy(fmoe_context *ctx);

/* Path of the configuration file actually read, or "" for built-in defaults. */
FMOE_API const char *fmoe_context_config_path(const fmoe_context *ctx);

/* --- Plugins as the registry saw them (for `fusedmoe plugins`) --------- */

#define FMOE_PLUGIN_STATE_LOADED   0 /* loaded, negotiated, initialised */
#define FMOE_PLUGIN_STATE_DISABLED 1 /* disabled by configuration; not loaded */
#define FMOE_PLUGIN_STATE_SKIPPED  2 /* manifest rules it out here (arch, ABI) */
#define FMOE_PLUGIN_STATE_FAILED   3 /* load, negotiation or init failed */

typedef struct fmoe_plugin_info {
    size_t struct_size;
    const char *name;    /* from the manifest (or file name if none) */
    const char *version; /* "" if unknown */
    const char *vendor;
    const char *path;     /* shared library path */
    const char *manifest; /* manifest path, "" if none */
    uint32_t abi_major;   /* from the plugin's table, else its manifest (0 if neither was read) */
    uint32_t abi_minor;   /* negotiated minor (0 unless loaded) */
    int32_t state;        /* FMOE_PLUGIN_STATE_* */
    const char *reason;   /* why disabled/skipped/failed; "" when loaded */
    const char *schemes;  /* scheme globs served, comma-separated */
} fmoe_plugin_info;

FMOE_API uint32_t fmoe_context_plugin_count(const fmoe_context *ctx);
/* Fill `info` (set info->struct_size first). Strings live as long as ctx. */
FMOE_API fmoe_status fmoe_context_plugin(const fmoe_context *ctx, uint32_t index, fmoe_plugin_info *info);

/* One option of a plugin (docs/PLUGIN-ABI.md, "Options"): what its manifest
 * declares and the value init received, with where that value came from.
 * A plugin that was not started (disabled, skipped, failed before init)
 * lists its declarations with their defaults. */
typedef struct fmoe_plugin_option_info {
    size_t struct_size;
    const char *name;
    const char *type;          /* "bool", "int", "enum", "string"; "" when undeclared (no manifest) */
    const char *domain;        /* "auto|avx2|portable", "1..64", "true|false", "text"; "" when undeclared */
    const char *default_value; /* "" when undeclared */
    const char *value;         /* in effect */
    const char *source;        /* "default", "config", "environment" (FMOE_OPTIONS) or "application"
                                  (fmoe_context_options.plugin_options) */
    const char *help;          /* one line; "" when undeclared */
} fmoe_plugin_option_info;

FMOE_API uint32_t fmoe_context_plugin_option_count(const fmoe_context *ctx, uint32_t plugin);
/* Fill `info` (set info->struct_size first). Strings live as long as ctx. */
FMOE_API fmoe_status fmoe_context_plugin_option(const fmoe_context *ctx, uint32_t plugin, uint32_t index,
                                                fmoe_plugin_option_info *info);

/* A looser conformance tolerance a plugin's manifest declares for a scheme
 * (its [[tolerance]] tables, docs/PLUGIN-ABI.md "Manifest"): what the
 * hardware needs beyond the suite's per-element bound, with the reason and
 * the issue or paper that shows it. `fusedmoe conform` applies and prints it. */
typedef struct fmoe_plugin_tolerance {
    size_t struct_size;
    double mismatch;     /* fraction of output elements allowed past the per-element bound, (0, 0.01] */
    const char *schemes; /* the entry's scheme globs, comma-separated */
    const char *reason;
    const char *link;
} fmoe_plugin_tolerance;

/* The first entry of plugin `index` whose globs match `scheme_key`: OK, or
 * NOT_FOUND when the manifest declares none for it (the suite's table
 * applies unchanged). Strings live as long as ctx. */
FMOE_API fmoe_status fmoe_context_plugin_tolerance(const fmoe_context *ctx, uint32_t index, const char *scheme_key,
                                                   fmoe_plugin_tolerance *out);

/* --- Devices as each loaded plugin reported them (for `fusedmoe probe`) --- */

typedef struct fmoe_device_info {
    size_t struct_size;
    const char *plugin; /* reporting plugin */
    int32_t kind;       /* FMOE_DEVICE_* */
    int32_t index;
    uint32_t available; /* 1 if the plugin can run on it */
    uint32_t score;     /* plugin's device-level preference; 0 = unusable */
    const char *name;
    const char *arch;   /* "x86-64 avx2", "sm_90a", ... */
    const char *id;     /* stable physical id (PCI bus id, UUID, "cpu") */
    const char *driver; /* driver/runtime versions actually resolved */
    const char *reason; /* why unavailable, or notes */
    uint64_t memory_bytes;
} fmoe_device_info;

FMOE_API uint32_t fmoe_context_device_count(const fmoe_context *ctx);
FMOE_API fmoe_status fmoe_context_device(const fmoe_context *ctx, uint32_t index, fmoe_device_info *info);

/* --- Selection, explained (for `fusedmoe explain`) ---------------------- */

#define FMOE_VERDICT_SELECTED    0 /* this candidate serves the layer */
#define FMOE_VERDICT_ACCEPTED    1 /* could serve, ranked lower */
#define FMOE_VERDICT_REFUSED     2 /* its query said unsupported */
#define FMOE_VERDICT_EXCLUDED    3 /* excluded by configuration or environment */
#define FMOE_VERDICT_UNAVAILABLE 4 /* plugin not loaded, or no usable device */
#define FMOE_VERDICT_ERROR       5 /* its query failed */

typedef struct fmoe_candidate {
    size_t struct_size;
    const char *plugin;
    const char *method; /* method name, "" if none */
    int32_t device_kind, device_index;
    int32_t verdict; /* FMOE_VERDICT_* */
    uint32_t score;
    int32_t preference; /* position in the configured order, -1 if not named */
    const char *reason; /* one line */
} fmoe_candidate;

typedef struct fmoe_selection fmoe_selection;

/* Run the selection for (config, scheme) without creating a layer. Always
 * produces a report when it returns OK or UNSUPPORTED (no candidate could
 * serve); INVALID_ARGUMENT for a bad config. Free with fmoe_selection_destroy. */
FMOE_API fmoe_status fmoe_context_explain(fmoe_context *ctx, const fmoe_layer_config *cfg, const fmoe_scheme *scheme,
                                          fmoe_selection **out);
FMOE_API uint32_t fmoe_selection_candidate_count(const fmoe_selection *sel);
FMOE_API fmoe_status fmoe_selection_candidate(const fmoe_selection *sel, uint32_t index, fmoe_candidate *out);
/* Index of the selected candidate, or -1 when none was selected. */
FMOE_API int32_t fmoe_selection_chosen(const fmoe_selection *sel);
/* One-line summary ("reference/unquantized on cpu:0: preferred by [schemes]"
 * or why nothing could serve). */
FMOE_API const char *fmoe_selection_summary(const fmoe_selection *sel);
/* The canonical scheme key the selection ran for. */
FMOE_API const char *fmoe_selection_scheme_key(const fmoe_selection *sel);
FMOE_API void fmoe_selection_destroy(fmoe_selection *sel);

/* ------------------------------------------------------------------------ */
/* Layer                                                                     */
/* ------------------------------------------------------------------------ */

typedef struct fmoe_layer fmoe_layer;
/* An expert-parallel group: this rank's membership (below, "Expert
 * parallelism across devices"). */
typedef struct fmoe_ep_group fmoe_ep_group;

/* What a backend method declares it needs loaded (FMOE_PROJ_* and
 * FMOE_ROLE_* are in common.h). Strings live as long as the layer. Shapes
 * are local to this rank (EP: local experts; TP: this rank's share of I)
 * and include any padding the method asked for. */
typedef struct fmoe_param_info {
    size_t struct_size;
    const char *name; /* "w13_weight", "w2_bias", ... */
    fmoe_dtype dtype;
    uint32_t ndim;
    int64_t shape[FMOE_MAX_DIMS];
    int32_t projection;  /* FMOE_PROJ_* */
    int32_t role;        /* FMOE_ROLE_* */
    uint32_t per_expert; /* 1: axis 0 indexes local experts */
    uint32_t required;   /* 1: finalize refuses the layer until fully loaded */
} fmoe_param_info;

typedef struct fmoe_layer_options {
    size_t struct_size;
    /* Restrict selection to a device kind/index; FMOE_DEVICE_ANY (default) for any. */
    int32_t device_kind;
    int32_t device_index;
    /* Restrict selection to plugins whose name matches this glob (NULL: any).
     * Strict: if none of them accepts the layer, create fails with their reasons. */
    const char *backend;
    /* Bind the layer to this rank's EP group (NULL: none; docs/EP.md). The
     * layer then runs on the group's plugin and device (backend and device
     * above must agree with them or be left unset), its ep_size/ep_rank are
     * the group's (a config that sets other values than the default 1/0 is
     * refused naming both), its hidden_size, top_k, global expert count
     * and act_dtype must be the group's, tp_size must be 1, and its
     * max_num_tokens becomes the group's expert capacity. Its forward is
     * collective (fmoe_layer_forward). The group must outlive the layer. */
    fmoe_ep_group *ep_group;
} fmoe_layer_options;

FMOE_API void fmoe_layer_options_init(fmoe_layer_options *opts);

/* Validate cfg, select a backend method for (cfg, scheme) per the selection
 * policy (docs/CONFIG.md), create its per-layer state and declare its
 * parameters (host buffers are allocated here, filled with NaN/0xFF so that
 * anything left unloaded is visible). UNSUPPORTED when no backend can serve,
 * with every candidate's reason in the error text. `opts` may be NULL. */
FMOE_API fmoe_status fmoe_layer_create(fmoe_context *ctx, const fmoe_layer_config *cfg, const fmoe_scheme *scheme,
                                       const fmoe_layer_options *opts, fmoe_layer **out);
FMOE_API void fmoe_layer_destroy(fmoe_layer *layer);

/* The selection this layer was created from (owned by the layer). */
FMOE_API const fmoe_selection *fmoe_layer_selection(const fmoe_layer *layer);
FMOE_API const fmoe_layer_config *fmoe_layer_get_config(const fmoe_layer *layer);

FMOE_API uint32_t fmoe_layer_param_count(const fmoe_layer *layer);
FMOE_API fmoe_status fmoe_layer_param(const fmoe_layer *layer, uint32_t index, fmoe_param_info *info);

/* Shard ids for fmoe_layer_load: which projection a checkpoint tensor is. */
#define FMOE_SHARD_W1   1 /* gate_proj: first half of w13 */
#define FMOE_SHARD_W2   2 /* down_proj */
#define FMOE_SHARD_W3   3 /* up_proj: second half of w13 */
#define FMOE_SHARD_FULL 4 /* the whole parameter slice for the expert(s), as declared */

/* Pass as `expert` to load all local experts at once: the tensor then has a
 * leading expert axis over this rank's local experts. */
#define FMOE_ALL_LOCAL_EXPERTS (-1)

/* Copy one checkpoint tensor into a declared parameter.
 *
 *  - `expert` is a *global* logical expert id. If no local slot holds it
 *    (another EP rank owns it), nothing is copied and *taken = 0 (not an
 *    error). With EPLB every local physical replica of it is filled.
 *  - For per-expert parameters `tensor` is that expert's slice as stored in
 *    the checkpoint (full, unsharded: the loader narrows it for TP).
 *  - W1/W3 go to the first/second half of a W13 parameter; W2 to a W2
 *    parameter; FULL copies the parameter's whole per-expert slice (or, with
 *    FMOE_ALL_LOCAL_EXPERTS, the whole parameter, already sharded).
 *
 * Shape and dtype must match exactly (after TP narrowing); every mismatch is
 * INVALID_ARGUMENT naming the parameter, the expert and both shapes. Loading
 * the same slot twice is allowed (last write wins). `taken` may be NULL. */
FMOE_API fmoe_status fmoe_layer_load(fmoe_layer *layer, const char *param, int32_t expert, int32_t shard,
                                     const fmoe_tensor *tensor, uint32_t *taken);

/* Refuse the layer if any required (param, expert, shard) slot is still
 * unloaded (naming the first ones missing); otherwise let the backend
 * process the weights. After OK the layer is ready for forward. */
FMOE_API fmoe_status fmoe_layer_finalize(fmoe_layer *layer);

typedef struct fmoe_forward_args {
    size_t struct_size;
    const fmoe_tensor *x; /* [M, H], act_dtype, on the layer's device */
    /* Either routing given (modular): */
    const fmoe_tensor *topk_weights; /* [M, k] F32 */
    const fmoe_tensor *topk_ids;     /* [M, k] INT32 global physical expert ids */
    /* or router logits (routing done by the backend, or by the core for a
     * modular backend): */
    const fmoe_tensor *router_logits; /* [M, E_logical] F32 or BF16 */
    fmoe_tensor *out;                 /* [M, H], act_dtype; written completely */
    /* Optional outputs when router_logits is given (host or device memory
     * like x): the routing that was used. May be NULL. */
    fmoe_tensor *topk_weights_out;
    fmoe_tensor *topk_ids_out;
    void *stream; /* cudaStream_t / hipStream_t; NULL on CPU */
} fmoe_forward_args;

/* Run the layer. Exactly one of (topk_weights + topk_ids) or router_logits
 * must be given. M = 0 is a successful no-op.
 *
 * A layer bound to an EP group: x is this rank's M_local tokens, with
 * M_local <= the group's max_tokens_per_rank (more is refused, never
 * truncated), and the routing is over global physical expert ids; out is
 * this rank's output. The call is collective: every rank of the group
 * calls it for its layer, M_local = 0 included, concurrently (one thread
 * or process per rank), and the ranks' layers must be called in the same
 * order. A rank that fails before joining makes the others fail after the
 * plugin's timeout, naming it. */
FMOE_API fmoe_status fmoe_layer_forward(fmoe_layer *layer, const fmoe_forward_args *args);

/* The expert load record (docs/PLACEMENT.md, "Load record"): counts[p] =
 * routing slots this layer's forwards sent to physical expert p since the
 * layer was finalized or the last reset (len = global physical experts).
 * On an EP group each rank counts its own tokens; the sum over ranks is the
 * load EPLB balances. Counted by the core where the routing is on the
 * host (host layers, and logits routed by the core), and by the group's
 * plugin on the device for a layer on an EP group whose routing is there
 * (plugin ABI 1.5; the cuda plugin does, also inside CUDA graphs); then the
 * read synchronizes the layer's device. UNSUPPORTED when the routing stayed
 * on a device and nobody counted it. reset = 1 zeroes it after the read. */
FMOE_API fmoe_status fmoe_layer_expert_load(fmoe_layer *layer, uint64_t *counts, uint32_t len, uint32_t reset);

/* Tensors on the layer's device. For a host (CPU) layer these are host
 * allocations; for a device layer the plugin's allocator is used (ABI 1.1
 * fmoe_device_memory), so callers need not link the device runtime.
 * UNSUPPORTED when the layer's plugin lends no allocator for its device.
 * The tensor is contiguous; free it with fmoe_layer_tensor_free on the same
 * layer (a zeroed or already-freed tensor is a no-op). */
FMOE_API fmoe_status fmoe_layer_tensor_alloc(fmoe_layer *layer, fmoe_dtype dtype, uint32_t ndim, const int64_t *shape,
                                             fmoe_tensor *out);
FMOE_API void fmoe_layer_tensor_free(fmoe_layer *layer, fmoe_tensor *t);
/* Copy between host and the layer's device (either direction, or host to
 * host): same dtype, same shape, both contiguous. Complete on return. */
FMOE_API fmoe_status fmoe_layer_tensor_copy(fmoe_layer *layer, fmoe_tensor *dst, const fmoe_tensor *src);
/* Wait for work queued on `stream` (NULL: the whole device) of the layer's
 * device; a no-op for host layers. */
FMOE_API fmoe_status fmoe_layer_synchronize(fmoe_layer *layer, void *stream);

/* Time forwards on the layer's device as its vendor does (plugin ABI 1.2,
 * fmoe_device_memory.time_replays: e.g. CUDA graphs timed by events):
 * enqueue(ctx, i, stream) must queue forward i on `stream` (pass it as
 * fmoe_forward_args.stream) and return; it is called once for each
 * i < n_graphs and recorded, and the records are replayed `warmup` times,
 * then `reps` times timed (record r % n_graphs): seconds[r]. UNSUPPORTED
 * for host layers and plugins without the slot: time with a host clock. */
FMOE_API fmoe_status fmoe_layer_time_replays(fmoe_layer *layer, uint32_t n_graphs, uint32_t warmup, uint32_t reps,
                                             fmoe_enqueue_fn enqueue, void *ctx, double *seconds);
/* The device's copy rate (read + written bytes per second, best of reps,
 * buffers of `bytes`) as its plugin measures it (ABI 1.2, copy_rate);
 * UNSUPPORTED as above. */
FMOE_API fmoe_status fmoe_layer_device_copy_rate(fmoe_layer *layer, uint64_t bytes, uint32_t reps,
                                                 double *bytes_per_second);
/* The device's pure read bandwidth (bytes read per second by a read-only
 * streaming kernel, best of reps, a buffer of at least `bytes`) as its
 * plugin measures it (ABI 1.4, read_rate); UNSUPPORTED for host layers and
 * plugins without the slot (use the copy rate then). */
FMOE_API fmoe_status fmoe_layer_device_read_rate(fmoe_layer *layer, uint64_t bytes, uint32_t reps,
                                                 double *bytes_per_second);

/* ------------------------------------------------------------------------ */
/* Expert parallelism across devices (docs/EP.md)                            */
/* ------------------------------------------------------------------------ */

/* A layer whose experts do not fit one device runs on an EP group: each rank
 * (one device) holds its share of the experts (docs/PLACEMENT.md), takes its
 * own tokens and routing, and gets its own output back; the group's plugin
 * moves the tokens (NCCL on CUDA; the reference plugin's one-machine double
 * in tests). The application owns the communication: it passes its
 * communicator, or broadcasts a unique id that one rank made, to every
 * rank. One process per device and one process driving several devices
 * (a thread per rank) both work; nothing assumes one host.
 *
 *   rank 0:   fmoe_ep_unique_id_make(ctx, &opts, &id); send id to all ranks
 *   each:     opts.rank = r; opts.unique_id = &id;
 *             fmoe_ep_group_create(ctx, &opts, &group);   collective
 *             lopts.ep_group = group; fmoe_layer_create(..., &lopts, &layer);
 *             load, finalize; fmoe_layer_forward(...)     collective
 *             fmoe_layer_destroy(layer); fmoe_ep_group_destroy(group);
 */

/* Opaque bytes a plugin's bootstrap needs (NCCL's unique id, ...), tagged
 * with the plugin's name. Plain data: copy and send it as it is. */
typedef struct fmoe_ep_unique_id {
    uint8_t bytes[FMOE_EP_UNIQUE_ID_BYTES];
} fmoe_ep_unique_id;

typedef struct fmoe_ep_group_options {
    size_t struct_size;
    /* The plugin: a name glob (NULL: any loaded plugin with EP support on
     * the device; the highest device score wins, then the name). */
    const char *backend;
    /* This rank's device. FMOE_DEVICE_ANY / -1 (default): the plugin's
     * first available device. */
    int32_t device_kind;
    int32_t device_index;
    uint32_t rank; /* < size */
    uint32_t size; /* ranks in the group, >= 1 */
    /* The same on every rank: */
    uint32_t max_tokens_per_rank; /* most tokens one rank passes one forward (>= 1) */
    uint32_t hidden_size;         /* H of the group's layers */
    uint32_t top_k;               /* k of the group's layers */
    uint32_t num_experts;         /* global physical experts (logical + redundant) of its layers, >= size */
    fmoe_dtype act_dtype;         /* x / out dtype of its layers (default BF16) */
    int32_t dispatch;             /* FMOE_EP_DISPATCH_* (default ACTIVATION) */
    int32_t mode;                 /* FMOE_EP_MODE_* (default LOW_LATENCY) */
    uint32_t timing;              /* 1: the plugin measures its phases (fmoe_ep_group_timing) */
    /* Bootstrap, exactly one: the application's communicator for this rank
     * (an ncclComm_t for the cuda plugin; for the reference plugin, any
     * object the ranks, threads of one process, share; borrowed, must
     * outlive the group), or the unique id made by fmoe_ep_unique_id_make on
     * one rank. */
    void *comm;
    const fmoe_ep_unique_id *unique_id;
} fmoe_ep_group_options;

/* Defaults as listed; rank 0, size 1, sizes 0 (must be set). */
FMOE_API void fmoe_ep_group_options_init(fmoe_ep_group_options *opts);

/* Make a unique id on one rank with the plugin `opts` selects (backend,
 * device; the other fields are not read). The application sends the bytes
 * to every rank (MPI, a file, a TCP store: its choice). */
FMOE_API fmoe_status fmoe_ep_unique_id_make(fmoe_context *ctx, const fmoe_ep_group_options *opts,
                                            fmoe_ep_unique_id *out);

/* Join this rank to its group. Collective: returns when all `size` ranks
 * have joined with the same sizes, dtype, dispatch and mode, or fails
 * (INVALID_ARGUMENT naming the field, a unique id from another plugin,
 * DEVICE_ERROR naming the ranks missing after the plugin's timeout,
 * UNSUPPORTED when no plugin serves EP on the device, with each one's
 * reason). */
FMOE_API fmoe_status fmoe_ep_group_create(fmoe_context *ctx, const fmoe_ep_group_options *opts, fmoe_ep_group **out);
/* Destroy after every layer bound to it. Call it on every rank (a plugin
 * may make it collective). */
FMOE_API void fmoe_ep_group_destroy(fmoe_ep_group *group);

FMOE_API uint32_t fmoe_ep_group_rank(const fmoe_ep_group *group);
FMOE_API uint32_t fmoe_ep_group_size(const fmoe_ep_group *group);
/* The options the group was created with (defaults resolved, the device
 * the plugin chose; comm and unique_id cleared). Owned by the group. */
FMOE_API const fmoe_ep_group_options *fmoe_ep_group_get_options(const fmoe_ep_group *group);
/* The serving plugin's name. */
FMOE_API const char *fmoe_ep_group_plugin(const fmoe_ep_group *group);

/* Seconds the group's forwards spent dispatching, in the experts and
 * combining, summed since creation or the last reset, as the plugin
 * measures them (docs/EP.md, "Timing"). UNSUPPORTED when the group was
 * created without `timing` or the plugin does not measure. */
typedef struct fmoe_ep_timing {
    size_t struct_size;
    uint64_t forwards;
    double dispatch_seconds, experts_seconds, combine_seconds;
} fmoe_ep_timing;

FMOE_API fmoe_status fmoe_ep_group_timing(fmoe_ep_group *group, uint32_t reset, fmoe_ep_timing *out);

/* "low_latency", "high_throughput"; "activation", "fp8_token", "fp8_block";
 * "unknown" for other values. The parsers return 0 (INVALID) for an
 * unknown name. */
FMOE_API const char *fmoe_ep_mode_name(int32_t mode);
FMOE_API const char *fmoe_ep_dispatch_name(int32_t dispatch);
FMOE_API int32_t fmoe_ep_mode_from_name(const char *name);
FMOE_API int32_t fmoe_ep_dispatch_from_name(const char *name);

/* ------------------------------------------------------------------------ */
/* Loading a layer from a checkpoint                                         */
/* ------------------------------------------------------------------------ */

/* What fmoe_model_load_layer did. */
typedef struct fmoe_model_load_stats {
    size_t struct_size;
    uint64_t tensors;   /* checkpoint tensors (or per-expert views of fused ones) loaded */
    uint64_t not_local; /* of those, experts another EP rank holds (nothing copied) */
} fmoe_model_load_stats;

/* Fill `layer` (created for MoE layer `index` of model `m`: its layer
 * config, with the scheme `qc` gives) from the checkpoint: every tensor
 * under the layer's experts prefix, per-expert or fused 3-D (gpt-oss
 * MXFP4 included), plus the routing correction bias. A tensor no declared
 * parameter takes, an expert id out of range, a shape or dtype that does
 * not match is INVALID_ARGUMENT naming the tensor; nothing is skipped
 * silently. bf16/f16 tensors are widened for f32 parameters. The router
 * weight is not part of the layer (the caller computes the logits). Then
 * call fmoe_layer_finalize. `qc` may be NULL (unquantized); `stats` may be
 * NULL. (docs/CHECKPOINTS.md) */
FMOE_API fmoe_status fmoe_model_load_layer(const fmoe_model *m, uint32_t index, const fmoe_checkpoint *ck,
                                           const fmoe_quant_config *qc, fmoe_layer *layer,
                                           fmoe_model_load_stats *stats);

/* ------------------------------------------------------------------------ */
/* Reference math (the oracle every backend is measured against).            */
/* Host memory only; f32 accumulation; semantics of spec/interface.md §4-6.  */
/* ------------------------------------------------------------------------ */

/* Route: logits [M, E_logical] (F32/BF16) -> topk_weights [M,k] F32 and
 * topk_ids [M,k] INT32 (logical ids, lower index wins ties, unique and in
 * range even for NaN logits). `correction_bias` [E] F32 or NULL. */
FMOE_API fmoe_status fmoe_reference_route(const fmoe_layer_config *cfg, const fmoe_tensor *logits,
                                          const fmoe_tensor *correction_bias, fmoe_tensor *topk_weights,
                                          fmoe_tensor *topk_ids);

#ifdef __cplusplus
}
#endif
#endif /* FUSEDMOE_H */
