/*
 * fusedmoe/plugin.h - the plugin ABI, version 1. The only header a backend
 * plugin needs. docs/PLUGIN-ABI.md explains every rule and keeps the changelog.
 *
 * A plugin is a shared library that exports exactly one symbol,
 * fmoe_plugin_entry, and links nothing of libfusedmoe: logging, error text
 * and host memory come through the fmoe_host table the host hands it.
 *
 * Life of a plugin, as the host drives it:
 *
 *   dlopen(RTLD_NOW | RTLD_LOCAL)          never dlclose'd
 *   fmoe_plugin_entry(&entry_args)          side-effect free: returns the table
 *   host checks abi_major, negotiates minor = min(host, plugin)
 *   plugin->init(&init_args)                optional; heavy set-up goes here
 *   plugin->probe(&probe_args)              cheap, never fatal: device reports
 *   plugin->query(&query_args)              per (layer config, scheme, device):
 *                                            supported + score + method, or
 *                                            UNSUPPORTED + reason
 *   method->roundup_sizes / create / declare_params / finalize / apply... /
 *   destroy                                  per layer
 *
 * Rules (each one has a reason in docs/PLUGIN-ABI.md):
 *  R1 Every struct crossing the boundary starts with size_t struct_size and
 *     only ever grows by appending. A receiver reads a field only if
 *     FMOE_HAS_FIELD(ptr, field) says the sender's struct has it, and treats
 *     missing fields as their documented default (0/NULL unless stated).
 *     A receiver never writes an out-field past the struct_size it was given.
 *  R2 Enumerations are int32_t with explicit values, appended, never reused.
 *  R3 Every call returns an fmoe_status (common.h). UNSUPPORTED is not an
 *     error. Error text is set through host->error_set on the `err` handle
 *     passed in the args; the host owns and frees it.
 *  R4 Mandatory slots are marked [mandatory]; others may be NULL and the host
 *     checks before every call.
 *  R5 Strings and tables the plugin returns (names, method tables, param
 *     descriptors) must stay valid for as long as stated at each field.
 *  R6 No C++ exceptions, longjmp or abort across the boundary.
 *
 * Thread model: entry is called once per process and load; init and
 * shutdown once per context (each context gets its own state from init),
 * serialized by the host. probe and query may be called from any thread, concurrently, and
 * must not change observable state. Per-layer calls (create ... destroy) on
 * one instance are serialized by the host, except that apply/apply_logits
 * on different instances may run concurrently. A method that cannot allow
 * that sets FMOE_METHOD_SERIALIZED_APPLY and the host serializes it.
 * Host services are thread-safe.
 */
#ifndef FUSEDMOE_PLUGIN_H
#define FUSEDMOE_PLUGIN_H

#include <stdarg.h>

#include "fusedmoe/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Version                                                                   */
/* ------------------------------------------------------------------------ */

/* Major must match exactly. Minor: host and plugin agree on min(host, plugin);
 * each side then only uses what that minor provides. */
#define FMOE_ABI_MAJOR 1
#define FMOE_ABI_MINOR 5
/* Oldest plugin minor this host still accepts. */
#define FMOE_ABI_MINOR_MIN 0

/* Export macro for the entry symbol. Build plugins with hidden visibility
 * (-fvisibility=hidden) so this is the only exported symbol. */
#if defined(_WIN32)
#define FMOE_PLUGIN_EXPORT __declspec(dllexport)
#else
#define FMOE_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

#if defined(__GNUC__)
#define FMOE_PRINTF_LIKE(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define FMOE_PRINTF_LIKE(fmt, args)
#endif

/* Size of a struct up to and including `field`; for struct_size minimums. */
#define FMOE_STRUCT_SIZE_UPTO(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))
/* 1 if the struct at `ptr` (whose struct_size the sender set) holds `field`. */
#define FMOE_HAS_FIELD(ptr, field) \
    ((ptr)->struct_size >= (size_t)((const char *)&(ptr)->field - (const char *)(ptr)) + sizeof((ptr)->field))

/* ------------------------------------------------------------------------ */
/* Host services (host -> plugin). Valid for the life of the process.        */
/* ------------------------------------------------------------------------ */

/* Opaque, host-owned error slot handed to every call. */
typedef struct fmoe_error fmoe_error;

/* Log levels (same values as FMOE_LOG_* in fusedmoe.h). */
#define FMOE_PLUGIN_LOG_ERROR 0
#define FMOE_PLUGIN_LOG_WARN  1
#define FMOE_PLUGIN_LOG_INFO  2
#define FMOE_PLUGIN_LOG_DEBUG 3

typedef struct fmoe_host {
    size_t struct_size;
    uint32_t abi_major;       /* FMOE_ABI_MAJOR of the host */
    uint32_t abi_minor;       /* highest minor the host speaks */
    const char *host_version; /* libfusedmoe version, "0.1.0" */
    void *ctx;                /* pass back to log/alloc/free; per plugin */
    /* Log one line (no trailing newline) under this plugin's name. */
    void (*log)(void *ctx, int32_t level, const char *msg);
    /* Record error text for the current call and return `status` unchanged,
     * so a plugin can write `return host->error_set(err, ST, "...", ...)`.
     * The text is copied; formatting follows printf. */
    fmoe_status (*error_set)(fmoe_error *err, fmoe_status status, const char *fmt, ...) FMOE_PRINTF_LIKE(3, 4);
    /* Host memory (for anything handed to the host to free, and for plugins
     * that want the host's allocator). alignment: power of two, or 0 for the
     * default (64 bytes). NULL on failure. free(NULL) is a no-op. */
    void *(*alloc)(void *ctx, size_t size, size_t alignment);
    void (*free)(void *ctx, void *ptr);
} fmoe_host;

/* ------------------------------------------------------------------------ */
/* Entry point                                                               */
/* ------------------------------------------------------------------------ */

struct fmoe_plugin;

typedef struct fmoe_entry_args {
    size_t struct_size;
    /* in; valid during this call only: one library may be entered by several
     * contexts. The host table to keep comes with init. */
    const fmoe_host *host;
    fmoe_error *err;                  /* in */
    const struct fmoe_plugin *plugin; /* out: static table, valid forever */
} fmoe_entry_args;

/* The one exported symbol. Must not initialise devices, start threads or
 * allocate beyond trivial bookkeeping. Returns ABI_MISMATCH (with text) if
 * host->abi_major is not the plugin's major. */
FMOE_PLUGIN_EXPORT fmoe_status fmoe_plugin_entry(fmoe_entry_args *args);
typedef fmoe_status (*fmoe_plugin_entry_fn)(fmoe_entry_args *args);
#define FMOE_PLUGIN_ENTRY_SYMBOL "fmoe_plugin_entry"

/* The whole entry point of a plugin, checks included: every in-tree plugin
 * and the vendor example write exactly
 *
 *     FMOE_DEFINE_PLUGIN_ENTRY(my_plugin_table)
 *
 * at file scope. The checks are those R1 asks of any receiver: the args and
 * the host table are large enough for what is read, and the host's major is
 * the plugin's; a mismatch is reported through error_set when the host
 * table has one. `plugin_name` appears in the refusal text. */
static inline fmoe_status fmoe_plugin_entry_check(fmoe_entry_args *a, const struct fmoe_plugin *table,
                                                  const char *plugin_name);
#define FMOE_DEFINE_PLUGIN_ENTRY(table) \
    FMOE_PLUGIN_EXPORT fmoe_status fmoe_plugin_entry(fmoe_entry_args *a) \
    { \
        return fmoe_plugin_entry_check(a, &(table), (table).name); \
    }

/* ------------------------------------------------------------------------ */
/* Plugin-level calls                                                        */
/* ------------------------------------------------------------------------ */

/* A key/value option from the user's TOML ([plugins.<name>.options]). */
typedef struct fmoe_option {
    size_t struct_size;
    const char *key;
    const char *value; /* always a string; the plugin parses it */
} fmoe_option;

/* Options, as the host hands them to init (docs/PLUGIN-ABI.md, "Options").
 * A plugin declares each option it takes in its manifest ([[option]]: name,
 * type, default, help); the host refuses undeclared names and values of the
 * wrong type before init, then passes every declared option, the user's
 * value or the default, as text: bool "true"/"false", int in decimal, enum
 * and string as given. A plugin loaded without a manifest gets exactly
 * the user's options. init still checks each (name and value) and fails
 * with INVALID_ARGUMENT naming the option: it is the last word on ranges.
 * The helpers below parse one value; each returns 0, or -1 when the text
 * is not a value of that type. */
static inline int fmoe_option_parse_bool(const char *text, int *out);
static inline int fmoe_option_parse_int(const char *text, long long min, long long max, long long *out);
/* Index of `text` in the NULL-terminated `values`, or -1. */
static inline int fmoe_option_parse_enum(const char *text, const char *const *values, int *out);

typedef struct fmoe_init_args {
    size_t struct_size;
    fmoe_error *err;
    /* This context's host services: valid until shutdown(state). A plugin
     * that logs or allocates after init keeps it in its state. */
    const fmoe_host *host;
    uint32_t abi_minor;                /* negotiated: min(host, plugin) */
    const fmoe_option *const *options; /* user options; valid during the call */
    uint32_t n_options;
    void *state; /* out: handed back to every later call */
} fmoe_init_args;

/* One device as the plugin sees it. The host pre-sets struct_size. */
typedef struct fmoe_device_report {
    size_t struct_size;
    int32_t kind; /* FMOE_DEVICE_* */
    int32_t index;
    uint32_t available; /* 1: the plugin can run on it */
    uint32_t score;     /* device-level preference, 0 = unusable */
    char name[128];
    char arch[64];    /* "x86-64 avx2 avx512_vnni", "sm_90a" */
    char id[64];      /* stable physical id (PCI bus id, UUID) */
    char driver[64];  /* versions actually resolved */
    char reason[256]; /* why unavailable, or notes */
    uint64_t memory_bytes;
} fmoe_device_report;

typedef struct fmoe_probe_args {
    size_t struct_size;
    fmoe_error *err;
    void *state;
    fmoe_device_report *const *reports; /* host-owned, `capacity` entries */
    uint32_t capacity;
    uint32_t count; /* out: devices reported (<= capacity) */
} fmoe_probe_args;

struct fmoe_method;

typedef struct fmoe_query_args {
    size_t struct_size;
    fmoe_error *err;
    void *state;
    const fmoe_layer_config *config; /* validated by the host */
    const fmoe_scheme *scheme;
    const char *scheme_key;            /* canonical key of `scheme` */
    int32_t device_kind, device_index; /* one the plugin reported available */
    /* out (on OK): */
    const struct fmoe_method *method; /* valid forever */
    uint32_t score;                   /* > 0; higher wins */
    /* out (always): one line; why it refused, or notes on what it will run */
    char reason[256];
    /* \since 1.3. The plugin's EP group (fmoe_ep_group_args.group) the layer
     * will be bound to, or NULL for a layer without one. Only the plugin
     * that made the group is asked. Refuse (UNSUPPORTED + reason) a method
     * the plugin cannot run on its group. */
    void *ep_group;
} fmoe_query_args;

/* ------------------------------------------------------------------------ */
/* Device memory (\since 1.1)                                               */
/* ------------------------------------------------------------------------ */

/* A plugin whose devices do not use host memory lends its allocator and
 * copies to the host, so applications and tools that do not link the
 * device runtime (`fusedmoe run`, `conform`, `bench`) can hand its layers
 * device tensors (fmoe_layer_tensor_alloc and friends, fusedmoe.h). */

#define FMOE_COPY_TO_DEVICE   1 /* src host, dst device */
#define FMOE_COPY_FROM_DEVICE 2 /* src device, dst host */

typedef struct fmoe_memory_args {
    size_t struct_size;
    fmoe_error *err;
    void *state;         /* from init */
    int32_t device_kind; /* FMOE_DEVICE_*: one the plugin reported */
    int32_t device_index;
    size_t bytes; /* alloc: > 0 */
    void *ptr;    /* alloc: out (aligned to 256 bytes); free: in */
} fmoe_memory_args;

typedef struct fmoe_copy_args {
    size_t struct_size;
    fmoe_error *err;
    void *state;
    int32_t device_kind;
    int32_t device_index;
    int32_t direction; /* FMOE_COPY_* */
    void *dst;
    const void *src;
    size_t bytes;
    void *stream; /* NULL: complete when copy returns */
} fmoe_copy_args;

typedef struct fmoe_sync_args {
    size_t struct_size;
    fmoe_error *err;
    void *state;
    int32_t device_kind;
    int32_t device_index;
    void *stream; /* NULL: the whole device */
} fmoe_sync_args;

/* \since 1.2. Timing a device the way its vendor does, for tools that do
 * not link the device runtime (`fusedmoe bench`). The host's enqueue(ctx,
 * i, stream) queues forward i on `stream` and returns; the plugin records
 * it once per i < n_graphs (a CUDA graph, say), replays the records warmup
 * times untimed and then reps times, record r % n_graphs, each timed on
 * the device, and reports each replay's time (fmoe_enqueue_fn: common.h). */
typedef struct fmoe_replay_args {
    size_t struct_size;
    fmoe_error *err;
    void *state;
    int32_t device_kind;
    int32_t device_index;
    uint32_t n_graphs;     /* >= 1 */
    uint32_t warmup, reps; /* reps >= 1 */
    fmoe_enqueue_fn enqueue;
    void *ctx;
    double *seconds; /* [reps] out: device time of each timed replay */
} fmoe_replay_args;

/* \since 1.2. Device-to-device copy rate, the memory floor of a benchmark:
 * the plugin allocates two buffers of `bytes`, copies one into the other
 * `reps` times and reports the best rate, counting bytes read and written.
 * \since 1.4 the same arguments serve read_rate (below). */
typedef struct fmoe_copy_rate_args {
    size_t struct_size;
    fmoe_error *err;
    void *state;
    int32_t device_kind;
    int32_t device_index;
    uint64_t bytes;
    uint32_t reps;
    double bytes_per_second; /* out */
} fmoe_copy_rate_args;

typedef struct fmoe_device_memory {
    size_t struct_size;
    fmoe_status (*alloc)(fmoe_memory_args *args);     /* [mandatory in the table] */
    void (*free)(fmoe_memory_args *args);             /* [mandatory] NULL ptr: no-op */
    fmoe_status (*copy)(fmoe_copy_args *args);        /* [mandatory] */
    fmoe_status (*synchronize)(fmoe_sync_args *args); /* [mandatory] */
    /* \since 1.2, optional (NULL: the host times with its own clock). */
    fmoe_status (*time_replays)(fmoe_replay_args *args);
    fmoe_status (*copy_rate)(fmoe_copy_rate_args *args);
    /* \since 1.4, optional (NULL: the host's floor falls back to the copy
     * rate). Pure read bandwidth: a read-only kernel streams a buffer of at
     * least `bytes` (the plugin may enlarge it to several times its caches)
     * `reps` times and reports the best rate, counting bytes read. A weight
     * stream only reads, and a copy's write half can hold it below what the
     * device reads (docs/PLUGIN-ABI.md §6b). */
    fmoe_status (*read_rate)(fmoe_copy_rate_args *args);
} fmoe_device_memory;

typedef struct fmoe_plugin {
    size_t struct_size;
    uint32_t abi_major; /* FMOE_ABI_MAJOR the plugin was built with */
    uint32_t abi_minor; /* FMOE_ABI_MINOR the plugin was built with */
    const char *name;   /* must equal the manifest name */
    const char *vendor;
    const char *version;
    const char *build_id;                        /* git hash / toolchain; may be "" */
    fmoe_status (*init)(fmoe_init_args *args);   /* optional */
    fmoe_status (*probe)(fmoe_probe_args *args); /* [mandatory] never fatal: no device = available 0 */
    /* [mandatory] OK + method + score, or UNSUPPORTED + reason. No side effects. */
    fmoe_status (*query)(fmoe_query_args *args);
    void (*shutdown)(void *state); /* optional; when the context that ran init goes */
    /* \since 1.1. Memory on the plugin's non-host devices; NULL when all
     * its devices compute on host memory. */
    const fmoe_device_memory *memory;
    /* \since 1.3. Expert parallelism across devices; NULL when the plugin
     * has none (docs/EP.md, docs/PLUGIN-ABI.md §6c). */
    const struct fmoe_ep_ops *ep;
} fmoe_plugin;

/* ------------------------------------------------------------------------ */
/* The method contract (FusedMoEMethod)                                      */
/* ------------------------------------------------------------------------ */

/* How a parameter's scale applies (vLLM quant_method attribute). */
#define FMOE_SCALE_NONE    0
#define FMOE_SCALE_TENSOR  1
#define FMOE_SCALE_CHANNEL 2
#define FMOE_SCALE_GROUP   3
#define FMOE_SCALE_BLOCK   4

/* Parameter flags. */
#define FMOE_PARAM_OPTIONAL       (1u << 0) /* finalize does not require it */
#define FMOE_PARAM_TRANSPOSED     (1u << 1) /* checkpoint stores each expert slice transposed */
#define FMOE_PARAM_LOAD_FULL      (1u << 2) /* not narrowed for TP (e.g. act-order w2 scales) */
#define FMOE_PARAM_GLOBAL_EXPERTS (1u << 3) /* axis 0 indexes global, not local, experts */

typedef struct fmoe_param_desc {
    size_t struct_size;
    const char *name; /* "w13_weight"; unique within the method */
    fmoe_dtype dtype;
    uint32_t ndim;
    int64_t shape[FMOE_MAX_DIMS]; /* local: [E_local, ...] for per-expert params */
    int32_t projection;           /* FMOE_PROJ_* (common.h) */
    int32_t role;                 /* FMOE_ROLE_* (common.h) */
    int32_t scale_kind;           /* FMOE_SCALE_* */
    /* Axis of one expert's slice (i.e. excluding the expert axis) that holds
     * the intermediate dimension split across TP ranks and, for W13, the
     * gate/up halves. -1: neither (e.g. a per-tensor scale). A W13
     * per-tensor scale (FMOE_SCALE_TENSOR) of a gated layer whose slice is
     * [2] holds w1's scale at 0 and w3's at 1; each is loaded from a scalar
     * (0-d or shape [1]) checkpoint tensor. */
    int32_t shard_axis;
    uint32_t per_expert; /* 1: axis 0 indexes experts */
    uint32_t flags;      /* FMOE_PARAM_* */
} fmoe_param_desc;

/* Method flags. */
#define FMOE_METHOD_MONOLITHIC       (1u << 0) /* does routing itself: prefers apply_logits */
#define FMOE_METHOD_EPLB             (1u << 1) /* supports redundant experts / rearrangement */
#define FMOE_METHOD_EXPERT_MASK      (1u << 2) /* consumes an AITER expert mask, not a map */
#define FMOE_METHOD_HANDLES_COMM     (1u << 3) /* does its own EP dispatch/combine (fmoe_ep_ops) */
#define FMOE_METHOD_SERIALIZED_APPLY (1u << 4) /* apply must not run concurrently, even across layers */
#define FMOE_METHOD_GRAPH_SAFE       (1u << 5) /* apply may be captured in a CUDA/HIP graph */

typedef struct fmoe_roundup_args {
    size_t struct_size;
    fmoe_error *err;
    const fmoe_layer_config *config;
    const fmoe_scheme *scheme;
    uint32_t hidden_size;           /* in/out: padded hidden size */
    uint32_t intermediate_per_rank; /* in/out: padded per-rank intermediate size */
} fmoe_roundup_args;

typedef struct fmoe_create_args {
    size_t struct_size;
    fmoe_error *err;
    void *state;                     /* plugin state from init */
    const fmoe_layer_config *config; /* validated */
    const fmoe_scheme *scheme;
    int32_t device_kind, device_index;
    uint32_t hidden_size; /* padded sizes (after roundup_sizes) */
    uint32_t intermediate_per_rank;
    uint32_t num_local_experts;
    uint32_t num_global_experts; /* physical */
    /* expert_map[num_global_experts]: local index or -1. Host memory, valid
     * during the call; copy it. NULL when ep_size == 1 (identity). */
    const int32_t *expert_map;
    void *instance; /* out: per-layer state */
    /* \since 1.3. The plugin's EP group this layer is bound to (the one its
     * query accepted), or NULL. config->ep_size/ep_rank are the group's;
     * config->max_num_tokens is the group's expert_capacity: the most rows
     * the group's forward hands this instance's apply. */
    void *ep_group;
} fmoe_create_args;

typedef struct fmoe_declare_params_args {
    size_t struct_size;
    fmoe_error *err;
    void *instance;
    /* out: descriptors, valid until destroy. */
    const fmoe_param_desc *const *params;
    uint32_t n_params;
} fmoe_declare_params_args;

typedef struct fmoe_finalize_args {
    size_t struct_size;
    fmoe_error *err;
    void *instance;
    /* The loaded parameters in declaration order: host memory, contiguous,
     * owned by the host and valid until destroy (a method may keep using
     * them, or repack/upload and ignore them afterwards). */
    const fmoe_tensor *const *params;
    uint32_t n_params;
    /* e_score_correction_bias [E_logical] F32 when config->has_correction_bias, else NULL. */
    const fmoe_tensor *correction_bias;
} fmoe_finalize_args;

typedef struct fmoe_apply_args {
    size_t struct_size;
    fmoe_error *err;
    void *instance;
    const fmoe_tensor *x;            /* [M, H_ckpt] act_dtype */
    const fmoe_tensor *topk_weights; /* [M, k] F32 */
    const fmoe_tensor *topk_ids;     /* [M, k] INT32 global physical ids; ids outside
                                        [0, E_global) and non-local experts contribute 0 */
    fmoe_tensor *out;                /* [M, H_ckpt] act_dtype; write every element */
    void *stream;
} fmoe_apply_args;

typedef struct fmoe_apply_logits_args {
    size_t struct_size;
    fmoe_error *err;
    void *instance;
    const fmoe_tensor *x;             /* [M, H_ckpt] */
    const fmoe_tensor *router_logits; /* [M, E_logical] F32 or BF16 */
    fmoe_tensor *out;                 /* [M, H_ckpt] */
    fmoe_tensor *topk_weights_out;    /* optional [M, k] F32 */
    fmoe_tensor *topk_ids_out;        /* optional [M, k] INT32 */
    void *stream;
} fmoe_apply_logits_args;

typedef struct fmoe_destroy_args {
    size_t struct_size;
    void *instance;
} fmoe_destroy_args;

typedef struct fmoe_method {
    size_t struct_size;
    const char *name;                                              /* "unquantized", "fp8_w8a8_block", ... */
    uint32_t flags;                                                /* FMOE_METHOD_* */
    fmoe_status (*roundup_sizes)(fmoe_roundup_args *args);         /* optional */
    fmoe_status (*create)(fmoe_create_args *args);                 /* [mandatory] */
    fmoe_status (*declare_params)(fmoe_declare_params_args *args); /* [mandatory] */
    fmoe_status (*finalize)(fmoe_finalize_args *args);             /* [mandatory] */
    /* At least one of apply / apply_logits is non-NULL. */
    fmoe_status (*apply)(fmoe_apply_args *args);
    fmoe_status (*apply_logits)(fmoe_apply_logits_args *args);
    void (*destroy)(fmoe_destroy_args *args); /* [mandatory] */
} fmoe_method;

/* ------------------------------------------------------------------------ */
/* Expert parallelism across devices (\since 1.3; docs/EP.md)              */
/* ------------------------------------------------------------------------ */

/* A plugin that runs layers across EP ranks sets fmoe_plugin.ep. The host
 * uses it only when the negotiated minor is at least 3, the plugin table
 * holds the field and every mandatory slot is set.
 *
 * The application owns the communication: it hands each rank either its own
 * communicator (an ncclComm_t as an opaque pointer: `comm`) or the same
 * unique id, made once by unique_id on one rank and broadcast by the
 * application (`unique_id`). Every rank creates its group (group_create is
 * collective: it returns when all `size` ranks have joined, or fails). A
 * layer bound to the group gets it at query and create; its forward is
 * collective too: the host calls `forward` on every rank, M_local = 0
 * included, and the plugin dispatches each rank's tokens to the ranks that
 * hold their experts, runs the method there (`apply`, unless the method is
 * FMOE_METHOD_HANDLES_COMM and does it all itself) and combines the
 * results back on the rank that owns each token.
 *
 * Contract a plugin keeps:
 *  - No rank waits forever: every wait has a bound (a declared plugin
 *    option), and a rank that does not arrive fails the others with a
 *    message naming the missing ranks (FMOE_STATUS_DEVICE_ERROR).
 *  - LOW_LATENCY: buffers sized at group_create for max_tokens_per_rank on
 *    every rank; forward does no host synchronization and allocates nothing,
 *    so a forward can be captured in a CUDA/HIP graph (and the method's
 *    FMOE_METHOD_GRAPH_SAFE then holds for the bound layer).
 *  - HIGH_THROUGHPUT: may size by the real counts and synchronize.
 *  - The output equals the single-device output of the same layer within
 *    the scheme's tolerance (bit for bit when the plugin can order the
 *    combine as its single-device path sums). */

typedef struct fmoe_ep_unique_id_args {
    size_t struct_size;
    fmoe_error *err;
    void *state;
    int32_t device_kind, device_index; /* one the plugin reported */
    uint8_t *bytes;                    /* out: `capacity` bytes (FMOE_EP_ID_PAYLOAD_BYTES) */
    uint32_t capacity;
    uint32_t length; /* out: bytes written, 1..capacity */
} fmoe_ep_unique_id_args;

typedef struct fmoe_ep_group_args {
    size_t struct_size;
    fmoe_error *err;
    void *state;
    int32_t device_kind, device_index; /* this rank's device, one the plugin reported */
    uint32_t rank, size;               /* validated: rank < size */
    /* The same on every rank (a plugin checks what it can and names the
     * field that differs). */
    uint32_t max_tokens_per_rank; /* most tokens one rank passes one forward */
    uint32_t hidden_size;
    uint32_t top_k;
    uint32_t num_experts; /* global physical experts of the group's layers */
    fmoe_dtype act_dtype; /* x / out of the group's layers: F32, BF16, F16 */
    int32_t dispatch;     /* FMOE_EP_DISPATCH_* */
    int32_t mode;         /* FMOE_EP_MODE_* */
    uint32_t timing;      /* 1: measure dispatch / experts / combine for `timing` */
    /* Exactly one of: */
    void *comm;                /* the application's communicator (ncclComm_t), borrowed */
    const uint8_t *unique_id;  /* the payload unique_id made, `unique_id_length` bytes */
    uint32_t unique_id_length; /* valid during the call */
    /* out: */
    void *group;              /* the plugin's group, handed back to every call below */
    uint64_t expert_capacity; /* most rows forward hands one rank's apply (the
                                 max_num_tokens the bound methods are created with) */
} fmoe_ep_group_args;

typedef struct fmoe_ep_group_destroy_args {
    size_t struct_size;
    void *state;
    void *group;
} fmoe_ep_group_destroy_args;

typedef struct fmoe_ep_forward_args {
    size_t struct_size;
    fmoe_error *err;
    void *state;
    void *group;
    /* The bound layer's method and instance (created with this group). */
    const struct fmoe_method *method;
    void *instance;
    const fmoe_layer_config *config; /* the layer's, with the group's ep size/rank */
    /* expert_owner[num_global_experts]: the rank holding each physical
     * expert (docs/PLACEMENT.md; EPLB replicas included). Host memory,
     * valid during the call. */
    const int32_t *expert_owner;
    uint32_t num_global_experts;
    /* This rank's tokens, on its device (M_local = x->shape[0] may be 0). */
    const fmoe_tensor *x;            /* [M_local, H] act_dtype */
    const fmoe_tensor *topk_weights; /* [M_local, k] F32 */
    const fmoe_tensor *topk_ids;     /* [M_local, k] INT32 global physical ids; out of
                                        range contributes 0 */
    fmoe_tensor *out;                /* [M_local, H]: written completely */
    void *stream;
    /* \since 1.5. The bound layer's expert load record on its device
     * (docs/PLACEMENT.md, "Load record"), when topk_ids is on the device:
     * num_global_experts u64 counters the host allocated (fmoe_device_memory)
     * and zeroes, the same address on every forward of the layer; NULL when
     * the routing is on the host (the host counts it then). A plugin that
     * adds this forward's slots to it on `stream` (+1 per slot whose id is in
     * 0..num_global_experts-1, in a way a graph capture keeps) sets
     * load_recorded = 1; otherwise the host's record says UNSUPPORTED. */
    uint64_t *load_counts;
    uint32_t load_recorded; /* out */
} fmoe_ep_forward_args;

/* Seconds the group's forwards spent in each phase since creation or the
 * last reset, as the plugin measures them (device events on a GPU; a
 * host clock in the reference double, waits for peers included in
 * dispatch and combine). UNSUPPORTED when created without `timing`. */
typedef struct fmoe_ep_timing_args {
    size_t struct_size;
    fmoe_error *err;
    void *state;
    void *group;
    uint32_t reset;    /* in: 1 = zero the sums after reading them */
    uint64_t forwards; /* out */
    double dispatch_seconds, experts_seconds, combine_seconds;
} fmoe_ep_timing_args;

typedef struct fmoe_ep_ops {
    size_t struct_size;
    fmoe_status (*unique_id)(fmoe_ep_unique_id_args *args);  /* [mandatory] */
    fmoe_status (*group_create)(fmoe_ep_group_args *args);   /* [mandatory] collective */
    void (*group_destroy)(fmoe_ep_group_destroy_args *args); /* [mandatory] */
    fmoe_status (*forward)(fmoe_ep_forward_args *args);      /* [mandatory] collective */
    fmoe_status (*timing)(fmoe_ep_timing_args *args);        /* optional */
} fmoe_ep_ops;

/* ------------------------------------------------------------------------ */
/* Inline helpers (header-only: a plugin still links nothing of ours)        */
/* ------------------------------------------------------------------------ */

static inline fmoe_status fmoe_plugin_entry_check(fmoe_entry_args *a, const struct fmoe_plugin *table,
                                                  const char *plugin_name)
{
    if (!a || a->struct_size < FMOE_STRUCT_SIZE_UPTO(fmoe_entry_args, plugin) || !a->host ||
        a->host->struct_size < FMOE_STRUCT_SIZE_UPTO(fmoe_host, abi_minor))
        return FMOE_STATUS_INVALID_ARGUMENT;
    const fmoe_host *h = a->host;
    if (h->abi_major != FMOE_ABI_MAJOR || h->struct_size < FMOE_STRUCT_SIZE_UPTO(fmoe_host, free)) {
        if (h->struct_size >= FMOE_STRUCT_SIZE_UPTO(fmoe_host, error_set) && h->error_set)
            return h->error_set(a->err, FMOE_STATUS_ABI_MISMATCH,
                                "plugin '%s' speaks ABI %d.x; the host speaks %u.%u with a %zu-byte host table",
                                plugin_name ? plugin_name : "?", FMOE_ABI_MAJOR, h->abi_major, h->abi_minor,
                                h->struct_size);
        return FMOE_STATUS_ABI_MISMATCH;
    }
    a->plugin = table;
    return FMOE_STATUS_OK;
}

static inline int fmoe_option_text_eq_(const char *a, const char *b)
{
    while (*a && *a == *b)
        a++, b++;
    return *a == *b;
}

static inline int fmoe_option_parse_bool(const char *text, int *out)
{
    if (!text)
        return -1;
    if (fmoe_option_text_eq_(text, "true") || fmoe_option_text_eq_(text, "1")) {
        *out = 1;
        return 0;
    }
    if (fmoe_option_text_eq_(text, "false") || fmoe_option_text_eq_(text, "0")) {
        *out = 0;
        return 0;
    }
    return -1;
}

static inline int fmoe_option_parse_int(const char *text, long long min, long long max, long long *out)
{
    if (!text || !*text)
        return -1;
    const char *p = text;
    int neg = 0;
    if (*p == '-' || *p == '+')
        neg = *p++ == '-';
    if (!*p)
        return -1;
    unsigned long long v = 0;
    for (; *p; p++) {
        if (*p < '0' || *p > '9' || v > (~0ull >> 1) / 10)
            return -1;
        v = v * 10 + (unsigned long long)(*p - '0');
    }
    /* The magnitude of the most negative long long is one past the largest. */
    if (v > (~0ull >> 1) + (unsigned long long)neg)
        return -1;
    long long s = neg && v ? -(long long)(v - 1) - 1 : (long long)v;
    if (s < min || s > max)
        return -1;
    *out = s;
    return 0;
}

static inline int fmoe_option_parse_enum(const char *text, const char *const *values, int *out)
{
    for (int i = 0; text && values && values[i]; i++)
        if (fmoe_option_text_eq_(text, values[i])) {
            *out = i;
            return 0;
        }
    return -1;
}

#ifdef __cplusplus
}
#endif
#endif /* FUSEDMOE_PLUGIN_H */
