/*
 * cli/bench/cmd_bench.c - `fusedmoe bench`: for each shape, one layer on
 * the chosen backend (and one on the reference), random weights of the
 * scheme, and for each token count M: fresh routing sets rotated between
 * runs, the median forward time, and where it stands against the floor of
 * this machine measured in the same run (docs/BENCH.md).
 *
 *   floor = max(bytes / read bandwidth, flops / peak) where
 *   bytes = D * (bytes of one expert's parameters, scales included)
 *         + activations in and out, D = distinct experts the routing touches.
 * On a CPU the read bandwidth is the host's (bench_machine.c) and the
 * compute peak is not measured, so the floor shown is the memory floor; it
 * is the binding one for decode (M <= 16), and prefill is reported in TOP/s
 * (int8) or TFLOP/s instead. On a device it is the higher of the device's
 * read and copy rates as its plugin measures them (bench_floor.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/bench/bench.h"
#include "cli/bench/bench_ep.h"
#include "cli/cli.h"
#include "cli/halfconv.h"
#include "cli/json_out.h"
#include "cli/rng.h"
#include "cli/run_weights.h"
#include "cli/selection_out.h"
#include "fusedmoe/kit/cpu_name.h"

#define MAX_SHAPES   8
#define MAX_TOKENS   16
#define ROUTING_SETS 4
/* Seconds of warm-up forwards (flushes included) before a point is timed. */
#define WARMUP_S 1.0

typedef struct bench_opts {
    const char *backend;
    const char *scheme_key;
    bench_shape shapes[MAX_SHAPES];
    size_t n_shapes;
    uint32_t tokens[MAX_TOKENS];
    size_t n_tokens;
    double max_gib; /* weights of one layer, per backend, at most this */
    uint32_t iters;
    int reference;
    double reference_max_gflop;
    double gemm_peak_tflops; /* device compute floor; 0: memory floor only */
    uint64_t seed;
    const char *json_path;
    /* --gpus N: on an EP group of N ranks (bench_ep.c) */
    uint32_t gpus;
    int32_t ep_dispatch, ep_mode;
    uint32_t ep_max_tokens; /* the group's max_tokens_per_rank; 0: each --tokens value */
} bench_opts;

/* One measured point. */
typedef struct bench_point {
    bench_shape shape;     /* as run (experts possibly scaled) */
    uint32_t full_experts; /* the model's */
    uint32_t m;
    double distinct; /* experts touched, averaged over the routing sets */
    double bytes, flops;
    double us, floor_us, ref_us; /* ref_us < 0: not timed */
    int on_device;               /* timed on a device, against its rates */
    double copy_rate;            /* device: bytes/s (read + written); 0: not measured */
    double read_rate;            /* device: bytes/s read (plugin ABI 1.4); 0: not measured */
    double floor_rate;           /* bytes/s the memory floor divides by; 0: none */
    const char *floor_source;    /* "host read", "device read", "device copy", "none" */
} bench_point;

static void help(FILE *f)
{
    fputs("Usage: fusedmoe [global options] bench [--backend GLOB] [--scheme KEY] [--shape S]...\n"
          "                                       [--tokens M,M,...] [--max-gib G] [--iters N]\n"
          "                                       [--no-reference] [--gemm-peak T] [--seed N]\n"
          "                                       [--json FILE]\n"
          "\n"
          "Times one backend's MoE layer forward (routing given, bf16 activations) on model\n"
          "shapes and token counts, against the floor of this machine measured in the same\n"
          "run: weight bytes of the experts the routing touches / read bandwidth (on a device:\n"
          "the higher of its read and copy rates). Prints us, % of the floor, the effective\n"
          "GB/s (bytes / time), TOP/s (int8 schemes) or TFLOP/s, and the reference's time.\n"
          "\n"
          "Options:\n"
          "  --backend GLOB   plugin(s) that may serve (also --plugin NAME); default: selection\n"
          "  --scheme KEY     weight scheme (default bf16)\n"
          "  --shape S        qwen3-30b-a3b, mixtral-8x7b, gpt-oss-120b, deepseek-v3 or E,k,H,I;\n"
          "                   repeatable (default: qwen3-30b-a3b and mixtral-8x7b)\n"
          "  --tokens LIST    token counts (default 1,4,16,256,2048)\n"
          "  --max-gib G      scale the expert count down so one layer's weights fit G GiB\n"
          "                   (default 1; E never below top-k; the table says when it scaled)\n"
          "  --iters N        timed forwards per point (default 20; median reported)\n"
          "  --no-reference   do not time the reference method\n"
          "  --gemm-peak T    a device's GEMM peak in TFLOP/s (tools/bench_peers.py measures it\n"
          "                   in the same call): the floor is then max(bytes / memory rate,\n"
          "                   flops / T), the memory rate the higher of the device's read\n"
          "                   and copy rates; without it, a device's floor is the memory floor\n"
          "  --seed N         weights and routing (default: fresh, printed)\n"
          "  --json FILE      write the record (machine, command, every point) as JSON\n"
          "  --gpus N         on an EP group of N ranks (threads; N devices of the plugin, or the\n"
          "                   host): --tokens are per rank, the model's full expert count is\n"
          "                   spread over the ranks; prints the layer time and the plugin's\n"
          "                   dispatch / experts / combine split (docs/EP.md)\n"
          "  --ep-dispatch D  activation (default), fp8_token or fp8_block (with --gpus)\n"
          "  --ep-mode M      low_latency (default) or high_throughput (with --gpus)\n"
          "  --ep-max-tokens N  the group's max_tokens_per_rank, at least every --tokens value\n"
          "                   (default: each --tokens value; with --gpus): a group sized for\n"
          "                   more tokens than a forward passes, as a server sizes it\n"
          "\n"
          "Documentation: docs/BENCH.md. Results are recorded under bench/.\n",
          f);
}

static int parse_list(const char *v, bench_opts *o)
{
    o->n_tokens = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", v);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        uint32_t m;
        if (o->n_tokens == MAX_TOKENS || cli_parse_u32(t, &m) != 0 || m == 0)
            return -1;
        o->tokens[o->n_tokens++] = m;
    }
    return o->n_tokens ? 0 : -1;
}

static int parse_args(int argc, char **argv, bench_opts *o)
{
    static const uint32_t default_tokens[] = {1, 4, 16, 256, 2048};
    memset(o, 0, sizeof *o);
    o->scheme_key = "bf16";
    o->max_gib = 1.0;
    o->iters = 20;
    o->reference = 1;
    o->reference_max_gflop = 50.0;
    o->seed = cli_rng_fresh_seed();
    o->ep_dispatch = FMOE_EP_DISPATCH_ACTIVATION;
    o->ep_mode = FMOE_EP_MODE_LOW_LATENCY;
    memcpy(o->tokens, default_tokens, sizeof default_tokens);
    o->n_tokens = sizeof default_tokens / sizeof default_tokens[0];
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int r;
        if (cli_opt_flag(argv[i], "--help") || cli_opt_flag(argv[i], "-h")) {
            help(stdout);
            return CLI_EXIT_OK;
        }
        if (cli_opt_flag(argv[i], "--no-reference")) {
            o->reference = 0;
        } else if ((r = cli_opt_value(argc, argv, &i, "--backend", &v)) != CLI_OPT_NO ||
                   (r = cli_opt_value(argc, argv, &i, "--plugin", &v)) != CLI_OPT_NO) {
            if (r == CLI_OPT_MISSING || !v[0])
                return cli_usage("bench", "--backend needs a plugin-name glob");
            o->backend = v;
        } else if ((r = cli_opt_value(argc, argv, &i, "--scheme", &v)) != CLI_OPT_NO) {
            if (r == CLI_OPT_MISSING)
                return cli_usage("bench", "--scheme needs a key");
            o->scheme_key = v;
        } else if ((r = cli_opt_value(argc, argv, &i, "--shape", &v)) != CLI_OPT_NO) {
            if (r == CLI_OPT_MISSING || o->n_shapes == MAX_SHAPES || bench_shape_parse(v, &o->shapes[o->n_shapes]))
                return cli_usage("bench", "--shape: '%s' (expected a model name or E,k,H,I; at most %d)", v ? v : "",
                                 MAX_SHAPES);
            o->n_shapes++;
        } else if ((r = cli_opt_value(argc, argv, &i, "--tokens", &v)) != CLI_OPT_NO) {
            if (r == CLI_OPT_MISSING || parse_list(v, o))
                return cli_usage("bench", "--tokens: expected a comma-separated list of counts from 1");
        } else if ((r = cli_opt_value(argc, argv, &i, "--max-gib", &v)) != CLI_OPT_NO) {
            char *end = NULL;
            o->max_gib = r == CLI_OPT_MISSING ? 0 : strtod(v, &end);
            if (r == CLI_OPT_MISSING || !end || *end || !(o->max_gib > 0 && o->max_gib < 4096))
                return cli_usage("bench", "--max-gib: expected a size in GiB");
        } else if ((r = cli_opt_value(argc, argv, &i, "--iters", &v)) != CLI_OPT_NO) {
            if (r == CLI_OPT_MISSING || cli_parse_u32(v, &o->iters) || o->iters == 0 || o->iters > 100000)
                return cli_usage("bench", "--iters: expected a count from 1");
        } else if ((r = cli_opt_value(argc, argv, &i, "--gemm-peak", &v)) != CLI_OPT_NO) {
            char *end = NULL;
            o->gemm_peak_tflops = r == CLI_OPT_MISSING ? 0 : strtod(v, &end);
            if (r == CLI_OPT_MISSING || !end || *end || !(o->gemm_peak_tflops > 0 && o->gemm_peak_tflops < 1e6))
                return cli_usage("bench", "--gemm-peak: expected TFLOP/s, a number above 0");
        } else if ((r = cli_opt_value(argc, argv, &i, "--seed", &v)) != CLI_OPT_NO) {
            if (r == CLI_OPT_MISSING || cli_parse_u64(v, &o->seed))
                return cli_usage("bench", "--seed: expected a whole number");
        } else if ((r = cli_opt_value(argc, argv, &i, "--gpus", &v)) != CLI_OPT_NO) {
            if (r == CLI_OPT_MISSING || cli_parse_u32(v, &o->gpus) != 0 || o->gpus == 0 || o->gpus > 64)
                return cli_usage("bench", "--gpus: expected a number of ranks from 1 to 64");
        } else if ((r = cli_opt_value(argc, argv, &i, "--ep-dispatch", &v)) != CLI_OPT_NO) {
            if (r == CLI_OPT_MISSING || !(o->ep_dispatch = fmoe_ep_dispatch_from_name(v)))
                return cli_usage("bench", "--ep-dispatch: expected activation, fp8_token or fp8_block");
        } else if ((r = cli_opt_value(argc, argv, &i, "--ep-mode", &v)) != CLI_OPT_NO) {
            if (r == CLI_OPT_MISSING || !(o->ep_mode = fmoe_ep_mode_from_name(v)))
                return cli_usage("bench", "--ep-mode: expected low_latency or high_throughput");
        } else if ((r = cli_opt_value(argc, argv, &i, "--ep-max-tokens", &v)) != CLI_OPT_NO) {
            if (r == CLI_OPT_MISSING || cli_parse_u32(v, &o->ep_max_tokens) != 0 || o->ep_max_tokens == 0)
                return cli_usage("bench", "--ep-max-tokens: expected a number of tokens per rank, at least 1");
        } else if ((r = cli_opt_value(argc, argv, &i, "--json", &v)) != CLI_OPT_NO) {
            if (r == CLI_OPT_MISSING || !v[0])
                return cli_usage("bench", "--json needs a file");
            o->json_path = v;
        } else {
            return cli_usage("bench", "unknown option '%s'", argv[i]);
        }
    }
    if (o->ep_max_tokens && !o->gpus)
        return cli_usage("bench", "--ep-max-tokens sizes an EP group: it needs --gpus");
    for (size_t t = 0; o->ep_max_tokens && t < o->n_tokens; t++)
        if (o->tokens[t] > o->ep_max_tokens)
            return cli_usage("bench", "--tokens %u exceeds --ep-max-tokens %u (the most tokens a rank may pass)",
                             o->tokens[t], o->ep_max_tokens);
    if (o->n_shapes == 0) {
        bench_shape_parse("qwen3-30b-a3b", &o->shapes[0]);
        bench_shape_parse("mixtral-8x7b", &o->shapes[1]);
        o->n_shapes = 2;
    }
    return -1;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The stream index of routing set r at M = m: a point's routing depends only
 * on the seed, M and r (not on where M stands in --tokens or which call ran
 * it), so that a peer harness can draw the same sets (tools/bench_routing.py
 * reproduces the stream and the router) and both layers read the same
 * experts. */
static uint64_t bench_routing_index(uint32_t m, uint32_t r)
{
    return (uint64_t)m * ROUTING_SETS + r;
}

/* One routing set: random logits routed by the reference router (host),
 * and its copy on the timed layer's device. */
typedef struct routing_set {
    fmoe_tensor w, ids;
    float *wbuf;
    int32_t *ibuf;
    double distinct;
    fmoe_tensor dw, dids;
} routing_set;

/* A tensor like `t` on the layer's device, with its values. */
static int to_device(fmoe_layer *layer, const fmoe_tensor *t, fmoe_tensor *out)
{
    fmoe_status st = fmoe_layer_tensor_alloc(layer, t->dtype, t->ndim, t->shape, out);
    if (st == FMOE_STATUS_OK)
        st = fmoe_layer_tensor_copy(layer, out, t);
    return st == FMOE_STATUS_OK ? CLI_EXIT_OK : cli_fail(st, "device tensor");
}

static int make_routing(const fmoe_layer_config *cfg, uint32_t m, uint64_t seed, uint64_t index, routing_set *rs)
{
    size_t e = cfg->num_experts, k = cfg->top_k;
    float *logits = malloc((size_t)m * e * sizeof(float));
    rs->wbuf = malloc((size_t)m * k * sizeof(float));
    rs->ibuf = malloc((size_t)m * k * sizeof(int32_t));
    uint8_t *seen = calloc(e, 1);
    if (!logits || !rs->wbuf || !rs->ibuf || !seen) {
        free(logits), free(seen);
        cli_error("out of memory for the routing");
        return CLI_EXIT_INTERNAL;
    }
    cli_rng_fill_normal(logits, (size_t)m * e, 1.0f, seed, "bench_logits", index);
    fmoe_tensor tl;
    const int64_t ls[2] = {m, (int64_t)e}, ks[2] = {m, (int64_t)k};
    fmoe_tensor_init(&tl, FMOE_DTYPE_F32, 2, ls, logits);
    fmoe_tensor_init(&rs->w, FMOE_DTYPE_F32, 2, ks, rs->wbuf);
    fmoe_tensor_init(&rs->ids, FMOE_DTYPE_INT32, 2, ks, rs->ibuf);
    fmoe_status st = fmoe_reference_route(cfg, &tl, NULL, &rs->w, &rs->ids);
    size_t d = 0;
    for (size_t i = 0; st == FMOE_STATUS_OK && i < (size_t)m * k; i++)
        if (!seen[rs->ibuf[i]]) { /* a flag, not a count: a char count wraps at 256 ids */
            seen[rs->ibuf[i]] = 1;
            d++;
        }
    rs->distinct = (double)d;
    free(logits), free(seen);
    return st == FMOE_STATUS_OK ? CLI_EXIT_OK : cli_fail(st, "routing");
}

/* Caches are flushed before every timed forward by reading a buffer twice
 * the last-level cache (outside the timed region): a model has dozens of
 * layers, so a layer's experts are never cache-resident when it runs, but a
 * benchmark that reruns one layer would otherwise read them from a large
 * L3 (480 MiB on the CI machine) and beat the DRAM floor. Read, not
 * written: what evicts a layer's weights in a model is the other layers'
 * weights, read, so the cache holds clean lines. A written buffer leaves
 * the cache full of dirty lines that the timed forward would then pay to
 * write back, and glibc's memset of this size uses non-temporal stores,
 * which may evict nothing. The buffer is written once, with a nonzero pattern. */
static unsigned char *flush_buf;
static size_t flush_bytes;
static volatile uint64_t flush_sink;

static void flush_caches(void)
{
    if (!flush_buf) {
        long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
        flush_bytes = 2 * (size_t)(llc > (64l << 20) ? llc : (64l << 20));
        flush_buf = malloc(flush_bytes);
        if (flush_buf)
            memset(flush_buf, 0x5A, flush_bytes);
    }
    if (flush_buf) {
        /* One word of every cache line, four independent chains. */
        const uint64_t *p = (const uint64_t *)flush_buf;
        size_t lines = flush_bytes / 64 / 4 * 4;
        uint64_t a = 0, b = 0, c = 0, d = 0;
        for (size_t i = 0; i < lines; i += 4) {
            a += p[8 * i];
            b += p[8 * (i + 1)];
            c += p[8 * (i + 2)];
            d += p[8 * (i + 3)];
        }
        flush_sink = a ^ b ^ c ^ d;
    }
}

/* One forward on routing set rs, caches flushed first (outside the time):
 * 1 with its seconds in *dt, or 0 after reporting the error. */
static int one_forward(fmoe_layer *layer, const fmoe_tensor *x, fmoe_tensor *out, routing_set *rs, int device,
                       double *dt)
{
    fmoe_forward_args a = {.struct_size = sizeof a, .x = x, .out = out};
    a.topk_weights = device ? &rs->dw : &rs->w;
    a.topk_ids = device ? &rs->dids : &rs->ids;
    flush_caches();
    double t0 = now_s();
    fmoe_status st = fmoe_layer_forward(layer, &a);
    if (st == FMOE_STATUS_OK) /* a device layer queues: wait for it */
        st = fmoe_layer_synchronize(layer, NULL);
    *dt = now_s() - t0;
    if (st != FMOE_STATUS_OK) {
        cli_fail(st, "forward");
        return 0;
    }
    return 1;
}

/* Median time of `iters` forwards rotating the routing sets (after a
 * warm-up, below), caches flushed before each. Returns
 * seconds, or < 0 after an error. */
static double time_layer(fmoe_layer *layer, const fmoe_tensor *x, fmoe_tensor *out, routing_set *sets, uint32_t iters,
                         int device)
{
    if (device) {
        const fmoe_tensor *w[ROUTING_SETS], *ids[ROUTING_SETS];
        for (uint32_t r = 0; r < ROUTING_SETS; r++)
            w[r] = &sets[r].dw, ids[r] = &sets[r].dids;
        double s = bench_device_median(layer, x, out, w, ids, ROUTING_SETS, iters);
        if (s != -2)
            return s; /* timed by the plugin, or failed */
    }
    double *t = malloc(iters * sizeof *t);
    if (!t)
        return -1;
    /* Warm-up: every routing set at least once and at least WARMUP_S of
     * forwards, so a point starts in steady state (threads spinning, the
     * kernel done with whatever the previous layer's setup freed: the first
     * point of a run measured up to 40% slower after a one-set pass). */
    double warm_t0 = now_s(), dt = 0;
    uint32_t warm = 0;
    for (; warm < ROUTING_SETS || now_s() - warm_t0 < WARMUP_S; warm++)
        if (!one_forward(layer, x, out, &sets[warm % ROUTING_SETS], device, &dt)) {
            free(t);
            return -1;
        }
    for (uint32_t i = 0; i < iters; i++) {
        if (!one_forward(layer, x, out, &sets[(warm + i) % ROUTING_SETS], device, &t[i])) {
            free(t);
            return -1;
        }
    }
    qsort(t, iters, sizeof *t, cmp_double);
    double med = iters % 2 ? t[iters / 2] : 0.5 * (t[iters / 2 - 1] + t[iters / 2]);
    free(t);
    return med;
}

static int create(fmoe_context *ctx, const fmoe_layer_config *cfg, const fmoe_scheme *s, const char *backend,
                  const char *who, uint64_t seed, fmoe_layer **out)
{
    fmoe_layer_options lo;
    fmoe_layer_options_init(&lo);
    lo.backend = backend;
    fmoe_status st = fmoe_layer_create(ctx, cfg, s, &lo, out);
    if (st != FMOE_STATUS_OK) {
        cli_error("%s layer: %s", who, fmoe_last_error());
        return cli_exit_for_status(st);
    }
    run_checkpoint ck = {.seed = seed, .cfg = cfg};
    return run_load_layer(*out, who, &ck);
}

/* The experts of `s` scaled down (never below top-k) so one layer's
 * weights fit the budget; `per_expert` is the bytes of one expert. */
static uint32_t fit_experts(const bench_shape *s, double per_expert, double max_bytes)
{
    double fit = floor(max_bytes / per_expert);
    uint32_t e = fit >= s->experts ? s->experts : (uint32_t)fit;
    return e < s->top_k ? s->top_k : e;
}

static void base_config(const bench_shape *s, uint32_t experts, uint32_t max_m, fmoe_layer_config *cfg)
{
    fmoe_layer_config_init(cfg);
    cfg->num_experts = experts;
    cfg->top_k = s->top_k;
    cfg->hidden_size = s->hidden;
    cfg->intermediate_size = s->inter;
    cfg->act_dtype = FMOE_DTYPE_BF16;
    cfg->renormalize = 1;
    cfg->max_num_tokens = max_m;
}

/* A device's floor: the higher of its read rate (a read-only kernel, ABI
 * 1.4) and its copy rate (read and written bytes counted, as
 * spec/performance.md's floor does) as its plugin measures them, and the
 * GEMM peak given by --gemm-peak (bench_floor.c). Measured once per run;
 * the host's read bandwidth is not a device's floor, so a device that
 * measures neither rate has only the compute floor, or none. */
static int device_floor(fmoe_layer *layer, const bench_opts *o, bench_point *p)
{
    static int measured;
    static double copy_rate, read_rate;
    if (!measured) {
        copy_rate = bench_device_copy_rate(layer);
        read_rate = copy_rate < 0 ? -1 : bench_device_read_rate(layer);
        if (copy_rate < 0 || read_rate < 0)
            return CLI_EXIT_INTERNAL;
        measured = 1;
    }
    p->on_device = 1;
    p->copy_rate = copy_rate;
    p->read_rate = read_rate;
    p->floor_rate = bench_memory_rate(copy_rate, read_rate, &p->floor_source);
    p->floor_us = bench_floor_seconds(p->bytes, p->floor_rate, p->flops, o->gemm_peak_tflops * 1e12) * 1e6;
    return CLI_EXIT_OK;
}

/* A shape the backend refused at create (its reason kept): reported beside
 * the table and in the JSON, and the other shapes still run. */
typedef struct bench_skip {
    char shape[48];
    char reason[512];
    fmoe_status status;
} bench_skip;

/* One shape: every token count. Points appended to pts; a shape the
 * backend refuses (invalid for the scheme, or unsupported) fills *skip and
 * sets *skipped instead of failing the run. */
static int bench_shape_run(fmoe_context *ctx, const bench_opts *o, const bench_shape *shape, const fmoe_scheme *scheme,
                           double bandwidth, bench_point *pts, size_t *n_pts, bench_skip *skip, int *skipped)
{
    uint32_t max_m = 0;
    for (size_t i = 0; i < o->n_tokens; i++)
        max_m = o->tokens[i] > max_m ? o->tokens[i] : max_m;
    /* Size one expert with a 1-expert probe layer of the same scheme. */
    fmoe_layer_config cfg;
    base_config(shape, shape->top_k, 1, &cfg);
    fmoe_layer_options lo;
    fmoe_layer_options_init(&lo);
    lo.backend = o->backend;
    fmoe_layer *probe = NULL;
    fmoe_status st = fmoe_layer_create(ctx, &cfg, scheme, &lo, &probe);
    if (st == FMOE_STATUS_INVALID_ARGUMENT || st == FMOE_STATUS_UNSUPPORTED) {
        snprintf(skip->shape, sizeof skip->shape, "%s", shape->name);
        snprintf(skip->reason, sizeof skip->reason, "%s", fmoe_last_error());
        skip->status = st;
        *skipped = 1;
        return CLI_EXIT_OK;
    }
    if (st != FMOE_STATUS_OK) {
        cli_error("%s: %s", shape->name, fmoe_last_error());
        return cli_exit_for_status(st);
    }
    double per_expert = bench_expert_bytes(probe, scheme, 0), floor_expert = bench_expert_bytes(probe, scheme, 1);
    fmoe_layer_destroy(probe);
    uint32_t experts = fit_experts(shape, per_expert, o->max_gib * 1073741824.0);
    base_config(shape, experts, max_m, &cfg);

    fmoe_layer *sel = NULL, *ref = NULL;
    int rc = create(ctx, &cfg, scheme, o->backend, "selected", o->seed, &sel);
    if (rc == CLI_EXIT_OK && o->reference)
        rc = create(ctx, &cfg, scheme, "reference", "reference", o->seed, &ref);
    size_t h = shape->hidden;
    uint16_t *x = malloc((size_t)max_m * h * 2), *y = malloc((size_t)max_m * h * 2);
    float *xf = malloc((size_t)max_m * h * sizeof(float));
    if (rc == CLI_EXIT_OK && (!x || !y || !xf)) {
        cli_error("out of memory for %u tokens", max_m);
        rc = CLI_EXIT_INTERNAL;
    }
    if (rc == CLI_EXIT_OK) {
        cli_rng_fill_normal(xf, (size_t)max_m * h, 1.0f, o->seed, "bench_x", 0);
        cli_store_floats(FMOE_DTYPE_BF16, x, xf, (size_t)max_m * h);
    }
    for (size_t t = 0; t < o->n_tokens && rc == CLI_EXIT_OK; t++) {
        uint32_t m = o->tokens[t];
        routing_set sets[ROUTING_SETS] = {0};
        for (uint32_t r = 0; r < ROUTING_SETS && rc == CLI_EXIT_OK; r++)
            rc = make_routing(&cfg, m, o->seed, bench_routing_index(m, r), &sets[r]);
        fmoe_tensor tx, ty;
        const int64_t xs[2] = {m, (int64_t)h};
        fmoe_tensor_init(&tx, FMOE_DTYPE_BF16, 2, xs, x);
        fmoe_tensor_init(&ty, FMOE_DTYPE_BF16, 2, xs, y);
        bench_point *p = &pts[*n_pts];
        memset(p, 0, sizeof *p);
        p->shape = *shape;
        p->shape.experts = experts;
        p->full_experts = shape->experts;
        p->m = m;
        for (uint32_t r = 0; r < ROUTING_SETS; r++)
            p->distinct += sets[r].distinct / ROUTING_SETS;
        double gated_rows = 3.0; /* w1, w3, w2 */
        p->flops = 2.0 * m * shape->top_k * gated_rows * (double)h * shape->inter;
        p->bytes = p->distinct * floor_expert + 2.0 * 2.0 * m * (double)h;
        p->floor_rate = bandwidth;
        p->floor_source = "host read";
        p->floor_us = p->bytes / bandwidth * 1e6;
        p->ref_us = -1;
        /* The selected layer reads everything from its own device. */
        fmoe_tensor dx = {0}, dy = {0};
        if (rc == CLI_EXIT_OK)
            rc = to_device(sel, &tx, &dx);
        if (rc == CLI_EXIT_OK)
            rc = to_device(sel, &ty, &dy);
        for (uint32_t r = 0; r < ROUTING_SETS && rc == CLI_EXIT_OK; r++) {
            rc = to_device(sel, &sets[r].w, &sets[r].dw);
            if (rc == CLI_EXIT_OK)
                rc = to_device(sel, &sets[r].ids, &sets[r].dids);
        }
        if (rc == CLI_EXIT_OK && dx.device_kind != FMOE_DEVICE_CPU)
            rc = device_floor(sel, o, p);
        if (rc == CLI_EXIT_OK) {
            double s = time_layer(sel, &dx, &dy, sets, o->iters, dx.device_kind != FMOE_DEVICE_CPU);
            rc = s < 0 ? CLI_EXIT_INTERNAL : CLI_EXIT_OK;
            p->us = s * 1e6;
        }
        fmoe_layer_tensor_free(sel, &dx);
        fmoe_layer_tensor_free(sel, &dy);
        for (uint32_t r = 0; r < ROUTING_SETS; r++)
            fmoe_layer_tensor_free(sel, &sets[r].dw), fmoe_layer_tensor_free(sel, &sets[r].dids);
        /* The reference is a plain loop: time it once, and only where it
         * finishes in reasonable time. */
        if (rc == CLI_EXIT_OK && ref && p->flops <= o->reference_max_gflop * 1e9) {
            double s = time_layer(ref, &tx, &ty, sets, 1, 0);
            rc = s < 0 ? CLI_EXIT_INTERNAL : CLI_EXIT_OK;
            p->ref_us = s * 1e6;
        }
        for (uint32_t r = 0; r < ROUTING_SETS; r++)
            free(sets[r].wbuf), free(sets[r].ibuf);
        if (rc == CLI_EXIT_OK) {
            (*n_pts)++;
            /* Each point as it is measured: the table comes at the end, and
             * a run cut short (a time limit, a lost machine) keeps these. */
            fprintf(stderr, "measured %s M=%u: %.1f us", shape->name, m, p->us);
            if (p->floor_us > 0)
                fprintf(stderr, " (floor %.1f us)", p->floor_us);
            fputc('\n', stderr);
            fflush(stderr);
        }
    }
    free(x), free(y), free(xf);
    fmoe_layer_destroy(sel);
    fmoe_layer_destroy(ref);
    return rc;
}

static int is_int8(const fmoe_scheme *s)
{
    return s->a_dtype == FMOE_DTYPE_INT8;
}

/* "-" where a point has no floor (a device that measures no rate, no
 * --gemm-peak given). */
static void print_table(const bench_point *pts, size_t n, const fmoe_scheme *s)
{
    printf("%-16s %8s %6s %5s %11s %11s %7s %8s %9s %11s\n", "shape", "experts", "M", "D", "us", "floor us", "%floor",
           "eff GB/s", is_int8(s) ? "int8 TOP/s" : "TFLOP/s", "reference us");
    for (size_t i = 0; i < n; i++) {
        const bench_point *p = &pts[i];
        char experts[32], ref[32], floor_us[32], pct[32];
        if (p->shape.experts == p->full_experts)
            snprintf(experts, sizeof experts, "%u", p->shape.experts);
        else
            snprintf(experts, sizeof experts, "%u/%u", p->shape.experts, p->full_experts);
        if (p->ref_us >= 0)
            snprintf(ref, sizeof ref, "%.0f", p->ref_us);
        else
            snprintf(ref, sizeof ref, "-");
        if (p->floor_us > 0) {
            snprintf(floor_us, sizeof floor_us, "%.1f", p->floor_us);
            snprintf(pct, sizeof pct, "%.0f%%", 100.0 * p->floor_us / p->us);
        } else {
            snprintf(floor_us, sizeof floor_us, "-");
            snprintf(pct, sizeof pct, "-");
        }
        printf("%-16s %8s %6u %5.1f %11.1f %11s %7s %8.1f %9.3f %11s\n", p->shape.name, experts, p->m, p->distinct,
               p->us, floor_us, pct, p->bytes / p->us * 1e-3, p->flops / p->us * 1e-6, ref);
    }
}

/* A rate in GB/s, or null when it was not measured. */
static json_t *json_gbps(double bytes_per_second)
{
    return bytes_per_second > 0 ? json_real(bytes_per_second * 1e-9) : json_null();
}

static int write_json(const char *path, const bench_point *pts, size_t n, const bench_skip *skips, size_t n_skips,
                      const char *scheme_key, const char *backend, const char *cpu, double bw1, double bwn, long cpus,
                      const char *command, uint64_t seed, double gemm_peak_tflops)
{
    json_t *root = bench_record_new(command, seed, scheme_key, backend), *arr = json_array(), *machine = json_object();
    cli_json_set(machine, "cpu", cli_json_string(cpu));
    cli_json_set(machine, "cpus", json_integer(cpus));
    cli_json_set(machine, "read_bandwidth_1_thread_GBps", json_real(bw1 * 1e-9));
    cli_json_set(machine, "read_bandwidth_all_threads_GBps", json_real(bwn * 1e-9));
    cli_json_set(machine, "read_bandwidth_method", cli_json_string(bench_read_method()));
    cli_json_set(root, "machine", machine);
    if (gemm_peak_tflops > 0)
        cli_json_set(root, "gemm_peak_tflops", json_real(gemm_peak_tflops));
    if (n > 0 && pts[0].on_device) {
        /* Measured once per run: every point has the same. */
        json_t *device = json_object();
        cli_json_set(device, "copy_GBps", json_gbps(pts[0].copy_rate));
        cli_json_set(device, "read_GBps", json_gbps(pts[0].read_rate));
        cli_json_set(device, "floor_rate", cli_json_string(pts[0].floor_source));
        cli_json_set(root, "device", device);
    }
    for (size_t i = 0; i < n; i++) {
        const bench_point *p = &pts[i];
        json_t *o = json_object();
        cli_json_set(o, "shape", cli_json_string(p->shape.name));
        cli_json_set(o, "experts", json_integer(p->shape.experts));
        cli_json_set(o, "model_experts", json_integer(p->full_experts));
        cli_json_set(o, "top_k", json_integer(p->shape.top_k));
        cli_json_set(o, "hidden", json_integer(p->shape.hidden));
        cli_json_set(o, "intermediate", json_integer(p->shape.inter));
        cli_json_set(o, "tokens", json_integer(p->m));
        cli_json_set(o, "distinct_experts", json_real(p->distinct));
        cli_json_set(o, "bytes", json_real(p->bytes));
        cli_json_set(o, "flops", json_real(p->flops));
        cli_json_set(o, "us", json_real(p->us));
        cli_json_set(o, "floor_us", p->floor_us > 0 ? json_real(p->floor_us) : json_null());
        cli_json_set(o, "pct_of_floor", p->floor_us > 0 ? json_real(100.0 * p->floor_us / p->us) : json_null());
        cli_json_set(o, "effective_GBps", json_real(p->bytes / p->us * 1e-3));
        cli_json_set(o, "floor_GBps", json_gbps(p->floor_rate));
        cli_json_set(o, "floor_rate", cli_json_string(p->floor_source));
        if (p->on_device) {
            cli_json_set(o, "device_copy_GBps", json_gbps(p->copy_rate));
            cli_json_set(o, "device_read_GBps", json_gbps(p->read_rate));
        }
        cli_json_set(o, "reference_us", p->ref_us >= 0 ? json_real(p->ref_us) : json_null());
        json_array_append_new(arr, o);
    }
    cli_json_set(root, "points", arr);
    json_t *sk = json_array();
    for (size_t i = 0; i < n_skips; i++) {
        json_t *o = json_object();
        cli_json_set(o, "shape", cli_json_string(skips[i].shape));
        cli_json_set(o, "reason", cli_json_string(skips[i].reason));
        json_array_append_new(sk, o);
    }
    cli_json_set(root, "skipped", sk);
    return bench_record_write(root, path);
}

/* Both device rates and which one the floor divides by: the host read
 * bandwidth printed first is not a device layer's floor. */
static void print_device_floor(const bench_point *p, double gemm_peak_tflops)
{
    char copy[64] = "not measured", read[96] = "not measured (the plugin does not offer read_rate, plugin ABI 1.4)";
    if (p->copy_rate > 0)
        snprintf(copy, sizeof copy, "%.0f GB/s (read + written)", p->copy_rate * 1e-9);
    if (p->read_rate > 0)
        snprintf(read, sizeof read, "%.0f GB/s (read-only kernel)", p->read_rate * 1e-9);
    printf("device:    read rate %s; copy rate %s; timed by the plugin\n", read, copy);
    if (gemm_peak_tflops > 0)
        printf("           GEMM peak %.0f TFLOP/s (--gemm-peak)\n", gemm_peak_tflops);
    const char *rate = strcmp(p->floor_source, "device read") == 0   ? "the read rate, the higher"
                       : p->read_rate > 0                            ? "the copy rate, the higher"
                       : strcmp(p->floor_source, "device copy") == 0 ? "the copy rate: no read rate"
                                                                     : NULL;
    printf("floor:     ");
    if (rate && gemm_peak_tflops > 0)
        printf("max(bytes / %.0f GB/s (%s), flops / GEMM peak)", p->floor_rate * 1e-9, rate);
    else if (rate)
        printf("bytes / %.0f GB/s (%s)", p->floor_rate * 1e-9, rate);
    else if (gemm_peak_tflops > 0)
        printf("flops / GEMM peak (no memory rate measured)");
    else
        printf("none: the device measures no rate and no --gemm-peak was given");
    printf("; forwards timed on the device\n");
}

/* --gpus N: every shape on an EP group (bench_ep.c); owns ctx. */
static int bench_ep(fmoe_context *ctx, const bench_opts *o, const fmoe_scheme *scheme, const char *command)
{
    bench_ep_opts eo = {.gpus = o->gpus,
                        .backend = o->backend,
                        .dispatch = o->ep_dispatch,
                        .mode = o->ep_mode,
                        .max_tokens = o->ep_max_tokens,
                        .tokens = o->tokens,
                        .n_tokens = o->n_tokens,
                        .iters = o->iters,
                        .seed = o->seed};
    printf("scheme:    %s; seed %llu; median of %u forwards per rank\n", o->scheme_key, (unsigned long long)o->seed,
           o->iters);
    bench_ep_point *pts = calloc(MAX_SHAPES * MAX_TOKENS, sizeof *pts);
    size_t n = 0;
    int rc = pts ? CLI_EXIT_OK : (cli_error("out of memory"), CLI_EXIT_INTERNAL);
    for (size_t s = 0; s < o->n_shapes && rc == CLI_EXIT_OK; s++)
        rc = bench_ep_shape(ctx, &eo, &o->shapes[s], scheme, pts, &n);
    if (rc == CLI_EXIT_OK)
        bench_ep_print(&eo, pts, n);
    if (rc == CLI_EXIT_OK && o->json_path)
        rc = bench_ep_write_json(o->json_path, &eo, pts, n, o->scheme_key, command);
    free(pts);
    fmoe_context_destroy(ctx);
    return rc;
}

int cmd_bench(const cli_globals *g, int argc, char **argv)
{
    bench_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    fmoe_scheme scheme = {.struct_size = sizeof scheme};
    fmoe_status st = fmoe_scheme_parse(o.scheme_key, &scheme);
    if (st != FMOE_STATUS_OK)
        return cli_fail(st, "bad --scheme");
    fmoe_context *ctx = NULL;
    if ((rc = cli_open_context(g, &ctx)) != CLI_EXIT_OK)
        return rc;
    char cpu[256], command[2048] = "fusedmoe";
    for (int i = 0; i < argc; i++) {
        size_t len = strlen(command);
        snprintf(command + len, sizeof command - len, " %s", argv[i]);
    }
    if (o.gpus)
        return bench_ep(ctx, &o, &scheme, command);
    fmoe_cpu_model_name(cpu, sizeof cpu);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    size_t read_bytes = bench_read_bytes();
    double bw1 = bench_read_bandwidth(read_bytes, 1, 5);
    double bwn = bench_read_bandwidth(read_bytes, cpus > 0 && cpus <= 256 ? (int)cpus : 1, 5);
    double bw = bwn > bw1 ? bwn : bw1;
    printf("machine:   %s, %ld CPUs; read bandwidth %.1f GB/s (1 thread), %.1f GB/s (%ld threads)\n",
           cpu[0] ? cpu : "unknown CPU", cpus, bw1 * 1e-9, bwn * 1e-9, cpus);
    printf("scheme:    %s; seed %llu; median of %u forwards, %d routing sets rotated\n", o.scheme_key,
           (unsigned long long)o.seed, o.iters, ROUTING_SETS);
    printf("floor:     weight bytes of the experts touched / %.1f GB/s (read: %s, %zu MiB)\n\n", bw * 1e-9,
           bench_read_method(), read_bytes >> 20);
    bench_point *pts = calloc(MAX_SHAPES * MAX_TOKENS, sizeof *pts);
    size_t n = 0;
    char backend[256] = "";
    if (!pts) {
        cli_error("out of memory");
        rc = CLI_EXIT_INTERNAL;
    }
    bench_skip skips[MAX_SHAPES];
    size_t n_skips = 0;
    for (size_t s = 0; s < o.n_shapes && rc == CLI_EXIT_OK; s++) {
        int skipped = 0;
        rc = bench_shape_run(ctx, &o, &o.shapes[s], &scheme, bw, pts, &n, &skips[n_skips], &skipped);
        n_skips += skipped;
    }
    if (rc == CLI_EXIT_OK && n == 0 && n_skips > 0) {
        /* Nothing measured: the refusals are the answer. */
        for (size_t i = 0; i < n_skips; i++)
            cli_error("%s: %s", skips[i].shape, skips[i].reason);
        rc = cli_exit_for_status(skips[0].status);
    } else if (rc == CLI_EXIT_OK) {
        /* The backend that served, by name, for the record. */
        fmoe_selection *sel = NULL;
        fmoe_layer_config cfg;
        base_config(&o.shapes[0], o.shapes[0].top_k, 1, &cfg);
        if (fmoe_context_explain(ctx, &cfg, &scheme, &sel) == FMOE_STATUS_OK && !o.backend)
            cli_selection_chosen(sel, backend, sizeof backend);
        else
            snprintf(backend, sizeof backend, "%s", o.backend ? o.backend : "?");
        fmoe_selection_destroy(sel);
        printf("backend:   %s\n", backend);
        if (n > 0 && pts[0].on_device)
            print_device_floor(&pts[0], o.gemm_peak_tflops);
        print_table(pts, n, &scheme);
        for (size_t i = 0; i < n_skips; i++)
            printf("skipped:   %s: %s\n", skips[i].shape, skips[i].reason);
        if (o.json_path)
            rc = write_json(o.json_path, pts, n, skips, n_skips, o.scheme_key, backend, cpu, bw1, bwn, cpus, command,
                            o.seed, o.gemm_peak_tflops);
    }
    free(pts);
    free(flush_buf);
    flush_buf = NULL;
    fmoe_context_destroy(ctx);
    return rc;
}
