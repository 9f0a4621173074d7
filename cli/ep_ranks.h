/*
 * cli/ep_ranks.h - run the ranks of an expert-parallel group (docs/EP.md)
 * for `run --gpus`, the multi-process `run --ep-id-file` form and `conform
 * --mode ep`: each rank this process drives is a thread that joins the
 * group, creates its layer on it, loads the same synthetic checkpoint,
 * forwards its own tokens once (checked by the caller) and then `timed`
 * more times. The ranks are collective, so every rank runs the same number
 * of forwards.
 */
#ifndef FMOE_CLI_EP_RANKS_H
#define FMOE_CLI_EP_RANKS_H

#include <stdint.h>

#include "cli/synth/synth.h"
#include "fusedmoe/fusedmoe.h"

#define EP_MAX_RANKS 64

typedef struct ep_plan {
    fmoe_context *ctx;
    const fmoe_layer_config *cfg; /* ep_size 1 / ep_rank 0: the group sets them */
    const fmoe_scheme *scheme;
    const char *backend;   /* plugin-name glob for the group and the layers, or NULL */
    uint32_t size;         /* ranks in the group */
    uint32_t first, count; /* the ranks this process runs: first .. first+count-1 */
    uint32_t max_tokens;   /* per rank (the group's max_tokens_per_rank) */
    const uint32_t *m;     /* [size] tokens of each rank */
    int32_t dispatch, mode;
    const fmoe_ep_unique_id *id;
    /* Devices: rank r uses index device_base + r - first_device_rank of
     * device_kind, or any (FMOE_DEVICE_ANY / -1) when device_base < 0
     * (host plugins). first_device_rank is 0 when every rank's device is
     * visible; `first` when this process sees only its own. */
    int32_t device_kind, device_base;
    uint32_t first_device_rank;
    const synth_ckpt *built;
    /* Every rank's tokens, concatenated in rank order (host memory). */
    const void *x;
    const float *topk_w;
    const int32_t *topk_ids;
    void *out; /* [sum m, H] act dtype: the rows of this process's ranks are written */
    uint32_t timed;
    /* Forwards captured back to back in each replayed graph (0 or 1: one).
     * With more, the ranks run in step through the forwards' own waits, as
     * an engine's consecutive decode steps do, and only the first of a
     * replay pays the ranks' different start times; graph_median_s is then
     * per forward. */
    uint32_t replay_chain;
} ep_plan;

typedef struct ep_rank_result {
    fmoe_status status; /* OK, or why the rank failed (in `error`) */
    char error[1024];
    fmoe_ep_group *group; /* kept for the caller's report; ep_ranks_free */
    fmoe_layer *layer;
    double median_s; /* of the timed forwards (host clock, device synchronized) */
    fmoe_ep_timing timing;
    int have_timing; /* the plugin measured its phases */
    /* CUDA/HIP graphs (device plugins with time_replays): the forward
     * captured once, replayed, and its output fetched last, so the
     * caller's comparison checks the replayed output. */
    int graphs;            /* 1: replayed; 0: the plugin cannot (host plugin, or a
                              high_throughput group, which synchronizes) */
    double graph_median_s; /* of the timed replays (device events), per forward */
    /* A high_throughput group on a device: its forward waits on the host,
     * so capturing it must be refused, with the reason. 1: the capture was
     * tried and refused, the plugin's reason in capture_why. (Captured
     * instead: the rank fails.) */
    int capture_refused;
    char capture_why[512];
    /* The layer's expert load record (fmoe_layer_expert_load), read and
     * reset after the checked forward (load) and after the replays
     * (load_replayed, graphs only); each NULL with the read's status in
     * load_status / load_replayed_status when it failed (UNSUPPORTED: nobody
     * counted this routing). [global experts] each. */
    uint64_t *load, *load_replayed;
    fmoe_status load_status, load_replayed_status;
} ep_rank_result;

/* Run plan->count ranks as threads; res[count]. Returns the number of
 * ranks that failed. */
uint32_t ep_ranks_run(const ep_plan *plan, ep_rank_result *res);
void ep_ranks_free(ep_rank_result *res, uint32_t count);

/* The device kind and first index for `size` ranks of plugins matching
 * `backend`: `size` available devices of one accelerator kind (ranks on
 * indices 0..size-1), else host plugins share the host (base -1). 0, or -1
 * with the reason in `why`. */
int ep_devices_for(fmoe_context *ctx, const char *backend, uint32_t size, int32_t *kind, int32_t *base, char *why,
                   size_t cap);

/* Round x [rows, H] (act dtype) through the dispatch format, in place:
 * what the experts see of a token after an FP8 dispatch (e4m3 with f32
 * scales per token or per 1x128, dequantized to the act dtype). Feeding
 * the oracle these tokens compares like with like: FP8 dispatch is a
 * quantization of the activations, not an error of the group. A no-op for
 * FMOE_EP_DISPATCH_ACTIVATION. 0, or -1 (no memory). */
int ep_round_through_dispatch(fmoe_dtype act, int32_t dispatch, void *x, int64_t rows, uint32_t h);

/* The unique id through a file, for ranks in separate processes: rank 0
 * writes it (atomically: a temporary file, then rename), the others wait
 * for it at most wait_ms. 0, or -1 with the reason in `why`. */
int ep_id_file_write(const char *path, const fmoe_ep_unique_id *id, char *why, size_t cap);
int ep_id_file_read(const char *path, uint32_t wait_ms, fmoe_ep_unique_id *id, char *why, size_t cap);

#endif
