/*
 * tests/ep/test_ep_reference.c - expert parallelism through the public API
 * on the reference plugin's groups (docs/EP.md), ranks being
 * threads of this process.
 *
 *   - the N-rank output equals the single-rank output of the same layer on
 *     the same tokens, bit for bit with dispatch "activation", within bf16's
 *     tolerance with FP8 dispatch: bf16, FP8 per channel, FP8 128x128
 *     blocks and MXFP4 x FP8 (MegaMoE: the weight before GEMM2); linear and round-robin placement, EPLB replicas, one
 * hot expert with M = 0 on some ranks; N = 2, 3, 4; both bootstraps (unique id, shared communicator);
 *   - the load record summed over the ranks equals the single-rank record;
 *     timing counts the forwards;
 *   - API validation: bad options, an id from another plugin, a layer that
 *     does not match its group, too many tokens, a rank that never joins or
 *     never forwards (bounded: an error naming it, not a hang).
 *
 * A plain TAP program (not Check): Check's fork-per-test adds nothing to a
 * threaded test and confuses ThreadSanitizer. Random values are seeded; the
 * seed is printed.
 */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fusedmoe/formats.h"
#include "fusedmoe/fusedmoe.h"

#define MAXR 4
#define MAXM 8
#define H    128
#define I    128

static int n_test, n_failed;
static uint64_t seed;

static void ok(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void ok(int cond, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%s %d - ", cond ? "ok" : "not ok", ++n_test);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    if (!cond) {
        n_failed++;
        printf("# seed %llu; last error: %s\n", (unsigned long long)seed, fmoe_last_error());
    }
}

/* A stream per (seed, a, b): values independent of the rank that draws them. */
static uint64_t mix(uint64_t s, uint64_t a, uint64_t b)
{
    uint64_t z = s ^ (a * 0x9E3779B97F4A7C15ull) ^ (b * 0xC2B2AE3D27D4EB4Full);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    return z ^ (z >> 27);
}

static float uniform(uint64_t *st)
{
    *st = *st * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*st >> 40) & 0xffffff) / (float)0x1000000 * 2.0f - 1.0f;
}

static uint32_t name_hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

/* ------------------------------------------------------------------------ */

typedef struct ep_case {
    const char *scheme;
    uint32_t ranks;
    uint32_t logical, redundant;
    int32_t placement;
    int32_t dispatch;
    int hot;          /* every token's slot 0 is expert 0 */
    uint32_t m[MAXR]; /* tokens per rank */
    int use_comm;     /* bootstrap by a shared "communicator" */
} ep_case;

static fmoe_context *ctx;

static void layer_config(const ep_case *c, fmoe_layer_config *cfg)
{
    fmoe_layer_config_init(cfg);
    cfg->num_experts = c->logical;
    cfg->num_redundant_experts = c->redundant;
    cfg->enable_eplb = c->redundant > 0;
    cfg->top_k = 3;
    cfg->hidden_size = H;
    cfg->intermediate_size = I;
    cfg->act_dtype = FMOE_DTYPE_BF16;
    cfg->placement = c->placement;
    cfg->max_num_tokens = 64;
}

/* Fill every declared per-expert parameter of every logical expert the same
 * way on every rank: fp8 bytes from small values, positive scales. */
static int load_layer(fmoe_layer *layer, const ep_case *c)
{
    uint32_t n = fmoe_layer_param_count(layer);
    for (uint32_t p = 0; p < n; p++) {
        fmoe_param_info info = {.struct_size = sizeof info};
        if (fmoe_layer_param(layer, p, &info) != FMOE_STATUS_OK || !info.per_expert)
            return -1;
        int64_t numel = 1;
        for (uint32_t d = 1; d < info.ndim; d++)
            numel *= info.shape[d];
        size_t es = fmoe_dtype_size(info.dtype);
        uint8_t *buf = malloc((size_t)numel * es);
        if (!buf)
            return -1;
        for (uint32_t e = 0; e < c->logical; e++) {
            uint64_t st = mix(seed, name_hash(info.name), e);
            for (int64_t i = 0; i < numel; i++) {
                float v = uniform(&st);
                if (info.dtype == FMOE_DTYPE_FP8_E4M3FN)
                    buf[i] = fmoe_fp8_e4m3fn_encode(4.0f * v);
                else if (info.dtype == FMOE_DTYPE_FP4_E2M1X2) /* any byte is two e2m1 values */
                    buf[i] = (uint8_t)(st >> 33);
                else if (info.dtype == FMOE_DTYPE_UE8M0) /* 2^-8 .. 2^-3 */
                    buf[i] = (uint8_t)(119 + (st >> 33) % 6);
                else if (info.dtype == FMOE_DTYPE_F32 && info.role == FMOE_ROLE_WEIGHT_SCALE)
                    ((float *)buf)[i] = 0.01f * (1.5f + v);
                else if (info.dtype == FMOE_DTYPE_F32)
                    ((float *)buf)[i] = 0.1f * v;
                else if (info.dtype == FMOE_DTYPE_BF16) {
                    float f = 0.1f * v;
                    uint32_t bits;
                    memcpy(&bits, &f, 4);
                    ((uint16_t *)buf)[i] = (uint16_t)(bits >> 16);
                } else {
                    free(buf);
                    return -1;
                }
            }
            fmoe_tensor t;
            if (fmoe_tensor_init(&t, info.dtype, info.ndim - 1, info.shape + 1, buf) != FMOE_STATUS_OK ||
                fmoe_layer_load(layer, info.name, (int32_t)e, FMOE_SHARD_FULL, &t, NULL) != FMOE_STATUS_OK) {
                free(buf);
                return -1;
            }
        }
        free(buf);
    }
    return fmoe_layer_finalize(layer) == FMOE_STATUS_OK ? 0 : -1;
}

/* All ranks' tokens, concatenated in rank order. */
typedef struct tokens {
    uint32_t total;
    uint16_t x[MAXR * MAXM][H];
    float w[MAXR * MAXM][3];
    int32_t ids[MAXR * MAXM][3];
    uint16_t want[MAXR * MAXM][H];
} tokens;

static float bf16_to_f32(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint16_t f32_to_bf16(float f) /* round to nearest even; finite inputs */
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* What the experts see of a token after an FP8 dispatch: e4m3 with f32
 * scales per token or per 128, dequantized to bf16. The oracle gets these
 * tokens, so FP8 dispatch is compared like with like. */
static void round_through_dispatch(int32_t dispatch, uint16_t *row)
{
    float f[H], scales[H / 128 + 1];
    uint8_t q[H];
    int64_t block = dispatch == FMOE_EP_DISPATCH_FP8_BLOCK ? 128 : H;
    for (int c = 0; c < H; c++)
        f[c] = bf16_to_f32(row[c]);
    fmoe_fp8_quantize_blocks(FMOE_DTYPE_FP8_E4M3FN, 448.0f, FMOE_FP8_SCALE_F32, 1, H, 1, block, f, q, scales);
    for (int c = 0; c < H; c++)
        row[c] = f32_to_bf16(fmoe_fp8_e4m3fn_decode(q[c]) * scales[c / block]);
}

static void make_tokens(const ep_case *c, tokens *tk, uint64_t salt)
{
    uint32_t global = c->logical + c->redundant;
    tk->total = 0;
    for (uint32_t r = 0; r < c->ranks; r++)
        tk->total += c->m[r];
    uint64_t st = mix(seed, 0xabcdef, salt);
    for (uint32_t t = 0; t < tk->total; t++) {
        for (uint32_t h = 0; h < H; h++) {
            float f = uniform(&st);
            uint32_t bits;
            memcpy(&bits, &f, 4);
            tk->x[t][h] = (uint16_t)(bits >> 16);
        }
        if (c->dispatch != FMOE_EP_DISPATCH_ACTIVATION)
            round_through_dispatch(c->dispatch, tk->x[t]);
        for (uint32_t j = 0; j < 3; j++) {
            int32_t e;
            int dup;
            do {
                e = (j == 0 && c->hot) ? 0 : (int32_t)((uniform(&st) * 0.5f + 0.5f) * (float)global) % (int32_t)global;
                dup = 0;
                for (uint32_t q = 0; q < j; q++)
                    dup |= tk->ids[t][q] == e;
            } while (dup);
            tk->ids[t][j] = e;
            tk->w[t][j] = 0.2f + 0.3f * (uniform(&st) + 1.0f);
        }
    }
}

static fmoe_status forward_rows(fmoe_layer *layer, tokens *tk, uint32_t first, uint32_t m, uint16_t (*out)[H])
{
    fmoe_tensor x, w, ids, y;
    const int64_t mh[2] = {m, H}, mk[2] = {m, 3};
    fmoe_tensor_init(&x, FMOE_DTYPE_BF16, 2, mh, tk->x[first]);
    fmoe_tensor_init(&w, FMOE_DTYPE_F32, 2, mk, tk->w[first]);
    fmoe_tensor_init(&ids, FMOE_DTYPE_INT32, 2, mk, tk->ids[first]);
    fmoe_tensor_init(&y, FMOE_DTYPE_BF16, 2, mh, out);
    fmoe_forward_args f = {.struct_size = sizeof f, .x = &x, .topk_weights = &w, .topk_ids = &ids, .out = &y};
    return fmoe_layer_forward(layer, &f);
}

typedef struct rank_job {
    const ep_case *c;
    uint32_t rank;
    const fmoe_ep_unique_id *id;
    void *comm;
    tokens *tk;
    uint32_t first;
    uint16_t got[MAXM][H];
    uint64_t load[16];
    fmoe_ep_timing timing;
    char error[512];
} rank_job;

static void *rank_main(void *p)
{
    rank_job *j = p;
    const ep_case *c = j->c;
    fmoe_ep_group_options o;
    fmoe_ep_group_options_init(&o);
    o.backend = "reference";
    o.rank = j->rank;
    o.size = c->ranks;
    o.max_tokens_per_rank = MAXM;
    o.hidden_size = H;
    o.top_k = 3;
    o.num_experts = c->logical + c->redundant;
    o.dispatch = c->dispatch;
    o.timing = 1;
    o.unique_id = j->id;
    o.comm = j->comm;
    fmoe_ep_group *g = NULL;
    fmoe_layer *layer = NULL;
    fmoe_layer_config cfg;
    layer_config(c, &cfg);
    fmoe_scheme s;
    fmoe_layer_options lo;
    fmoe_layer_options_init(&lo);
    if (fmoe_ep_group_create(ctx, &o, &g) != FMOE_STATUS_OK || fmoe_scheme_parse(c->scheme, &s) != FMOE_STATUS_OK)
        goto fail;
    lo.ep_group = g;
    if (fmoe_layer_create(ctx, &cfg, &s, &lo, &layer) != FMOE_STATUS_OK || load_layer(layer, c) != 0)
        goto fail;
    /* Two forwards: the group is reusable, the second result is checked. */
    for (int rep = 0; rep < 2; rep++)
        if (forward_rows(layer, j->tk, j->first, c->m[j->rank], j->got) != FMOE_STATUS_OK)
            goto fail;
    if (fmoe_layer_expert_load(layer, j->load, o.num_experts, 0) != FMOE_STATUS_OK)
        goto fail;
    j->timing.struct_size = sizeof j->timing;
    if (fmoe_ep_group_timing(g, 0, &j->timing) != FMOE_STATUS_OK)
        goto fail;
    fmoe_layer_destroy(layer);
    fmoe_ep_group_destroy(g);
    return NULL;
fail:
    snprintf(j->error, sizeof j->error, "%s", fmoe_last_error()[0] ? fmoe_last_error() : "load failed");
    fmoe_layer_destroy(layer);
    fmoe_ep_group_destroy(g);
    return NULL;
}

static int close_bf16(uint16_t a, uint16_t b)
{
    float fa = bf16_to_f32(a), fb = bf16_to_f32(b);
    return isfinite(fa) && isfinite(fb) && fabsf(fa - fb) <= 2e-2f + 2e-2f * fabsf(fb);
}

static void run_case(const ep_case *c, const char *label)
{
    static tokens tk;
    make_tokens(c, &tk, (uint64_t)c->ranks * 131 + (uint64_t)c->hot);
    /* The single-rank layer: the oracle. */
    fmoe_layer_config cfg;
    layer_config(c, &cfg);
    fmoe_scheme s;
    fmoe_layer *one = NULL;
    fmoe_layer_options lo;
    fmoe_layer_options_init(&lo);
    lo.backend = "reference";
    uint64_t load_one[16] = {0};
    uint32_t global = c->logical + c->redundant;
    if (fmoe_scheme_parse(c->scheme, &s) != FMOE_STATUS_OK || fmoe_layer_create(ctx, &cfg, &s, &lo, &one) != 0 ||
        load_layer(one, c) != 0 || forward_rows(one, &tk, 0, tk.total, tk.want) != FMOE_STATUS_OK ||
        fmoe_layer_expert_load(one, load_one, global, 0) != FMOE_STATUS_OK) {
        ok(0, "%s: single-rank layer", label);
        fmoe_layer_destroy(one);
        return;
    }
    fmoe_layer_destroy(one);
    fmoe_ep_unique_id id;
    fmoe_ep_group_options io;
    fmoe_ep_group_options_init(&io);
    io.backend = "reference";
    if (!c->use_comm && fmoe_ep_unique_id_make(ctx, &io, &id) != FMOE_STATUS_OK) {
        ok(0, "%s: unique id", label);
        return;
    }
    static int communicator; /* any object every rank shares */
    static rank_job jobs[MAXR];
    pthread_t th[MAXR];
    uint32_t first = 0;
    for (uint32_t r = 0; r < c->ranks; r++) {
        jobs[r] = (rank_job){.c = c, .rank = r, .id = c->use_comm ? NULL : &id, .tk = &tk, .first = first};
        memset(jobs[r].got, 0xff, sizeof jobs[r].got); /* NaN: unwritten rows show */
        jobs[r].comm = c->use_comm ? &communicator : NULL;
        first += c->m[r];
        pthread_create(&th[r], NULL, rank_main, &jobs[r]);
    }
    for (uint32_t r = 0; r < c->ranks; r++)
        pthread_join(th[r], NULL);
    int errors = 0, exact = 1, close = 1;
    uint64_t load_sum[16] = {0};
    for (uint32_t r = 0; r < c->ranks; r++) {
        if (jobs[r].error[0]) {
            printf("# rank %u: %s\n", r, jobs[r].error);
            errors++;
            continue;
        }
        for (uint32_t t = 0; t < c->m[r]; t++)
            for (uint32_t h = 0; h < H; h++) {
                uint16_t got = jobs[r].got[t][h], want = tk.want[jobs[r].first + t][h];
                exact &= got == want;
                close &= close_bf16(got, want);
            }
        for (uint32_t e = 0; e < global; e++)
            load_sum[e] += jobs[r].load[e];
        errors += jobs[r].timing.forwards != 2;
    }
    if (c->dispatch == FMOE_EP_DISPATCH_ACTIVATION)
        ok(!errors && exact, "%s: %u ranks equal one rank bit for bit", label, c->ranks);
    else
        ok(!errors && close,
           "%s: %u ranks equal one rank fed the tokens as the fp8 dispatch carries them, within bf16 tolerance", label,
           c->ranks);
    /* Two forwards on each rank, one on the oracle. */
    int load_ok = !errors;
    for (uint32_t e = 0; e < global; e++)
        load_ok &= load_sum[e] == 2 * load_one[e];
    ok(load_ok, "%s: the ranks' load records sum to the single-rank record", label);
}

/* ------------------------------------------------------------------------ */
/* Validation                                                                */
/* ------------------------------------------------------------------------ */

static void base_options(fmoe_ep_group_options *o, const fmoe_ep_unique_id *id)
{
    fmoe_ep_group_options_init(o);
    o->backend = "reference";
    o->size = 1;
    o->max_tokens_per_rank = 4;
    o->hidden_size = H;
    o->top_k = 2;
    o->num_experts = 8;
    o->unique_id = id;
}

static int create_fails(const fmoe_ep_group_options *o, fmoe_status want, const char *text)
{
    fmoe_ep_group *g = NULL;
    fmoe_status st = fmoe_ep_group_create(ctx, o, &g);
    int good = st == want && !g && strstr(fmoe_last_error(), text) != NULL;
    if (!good)
        printf("# got %s: %s (wanted '%s')\n", fmoe_status_name(st), fmoe_last_error(), text);
    fmoe_ep_group_destroy(g);
    return good;
}

static void test_options(void)
{
    fmoe_ep_unique_id id;
    fmoe_ep_group_options o;
    base_options(&o, NULL);
    ok(fmoe_ep_unique_id_make(ctx, &o, &id) == FMOE_STATUS_OK, "unique id from the reference plugin");
    base_options(&o, &id);
    o.size = 0;
    ok(create_fails(&o, FMOE_STATUS_INVALID_ARGUMENT, "size = 0"), "size 0 is refused");
    base_options(&o, &id);
    o.size = 2;
    o.rank = 2;
    ok(create_fails(&o, FMOE_STATUS_INVALID_ARGUMENT, "rank = 2, expected 0..1"), "rank out of range is refused");
    base_options(&o, &id);
    o.max_tokens_per_rank = 0;
    ok(create_fails(&o, FMOE_STATUS_INVALID_ARGUMENT, "max_tokens_per_rank = 0"), "max_tokens_per_rank 0 is refused");
    base_options(&o, NULL);
    ok(create_fails(&o, FMOE_STATUS_INVALID_ARGUMENT, "exactly one of comm"), "no bootstrap is refused");
    base_options(&o, &id);
    o.comm = &o;
    ok(create_fails(&o, FMOE_STATUS_INVALID_ARGUMENT, "got both"), "two bootstraps are refused");
    base_options(&o, &id);
    o.hidden_size = 100;
    o.dispatch = FMOE_EP_DISPATCH_FP8_BLOCK;
    ok(create_fails(&o, FMOE_STATUS_INVALID_ARGUMENT, "multiple of 128, got 100"),
       "fp8_block dispatch needs H a multiple of 128");
    base_options(&o, &id);
    o.num_experts = 1;
    o.size = 2;
    ok(create_fails(&o, FMOE_STATUS_INVALID_ARGUMENT, "num_experts = 1"), "fewer experts than ranks is refused");
    base_options(&o, &id);
    o.backend = "nosuch";
    ok(create_fails(&o, FMOE_STATUS_UNSUPPORTED, "no plugin matching nosuch"), "no plugin with EP: UNSUPPORTED");
    fmoe_ep_unique_id bad = id;
    memcpy(bad.bytes + 8, "cuda\0", 5);
    base_options(&o, &bad);
    ok(create_fails(&o, FMOE_STATUS_INVALID_ARGUMENT, "made by plugin 'cuda'"), "an id of another plugin is refused");
    memset(bad.bytes, 0, 8);
    ok(create_fails(&o, FMOE_STATUS_INVALID_ARGUMENT, "bad magic"), "random bytes are not an id");
    ok(strcmp(fmoe_ep_mode_name(FMOE_EP_MODE_HIGH_THROUGHPUT), "high_throughput") == 0 &&
           fmoe_ep_dispatch_from_name("fp8_block") == FMOE_EP_DISPATCH_FP8_BLOCK &&
           fmoe_ep_dispatch_from_name("fp8") == FMOE_EP_DISPATCH_INVALID,
       "mode and dispatch names");
}

static void test_layer_mismatch(void)
{
    fmoe_ep_unique_id id;
    fmoe_ep_group_options o;
    base_options(&o, NULL);
    fmoe_ep_unique_id_make(ctx, &o, &id);
    base_options(&o, &id);
    fmoe_ep_group *g = NULL;
    if (fmoe_ep_group_create(ctx, &o, &g) != FMOE_STATUS_OK) {
        ok(0, "a group of one rank");
        return;
    }
    ok(fmoe_ep_group_rank(g) == 0 && fmoe_ep_group_size(g) == 1 && strcmp(fmoe_ep_group_plugin(g), "reference") == 0 &&
           fmoe_ep_group_get_options(g)->device_kind == FMOE_DEVICE_CPU && !fmoe_ep_group_get_options(g)->unique_id,
       "group queries");
    fmoe_layer_config cfg;
    fmoe_layer_config_init(&cfg);
    cfg.num_experts = 8;
    cfg.top_k = 2;
    cfg.hidden_size = 64;
    cfg.intermediate_size = 64;
    fmoe_scheme s;
    fmoe_scheme_init_unquantized(&s, FMOE_DTYPE_BF16);
    fmoe_layer_options lo;
    fmoe_layer_options_init(&lo);
    lo.ep_group = g;
    fmoe_layer *layer = NULL;
    fmoe_status st = fmoe_layer_create(ctx, &cfg, &s, &lo, &layer);
    ok(st == FMOE_STATUS_INVALID_ARGUMENT && strstr(fmoe_last_error(), "hidden_size is 64, the group's 128"),
       "a layer whose hidden size is not the group's is refused naming both");
    cfg.hidden_size = H;
    cfg.ep_size = 2;
    cfg.ep_rank = 1;
    st = fmoe_layer_create(ctx, &cfg, &s, &lo, &layer);
    ok(st == FMOE_STATUS_INVALID_ARGUMENT &&
           strstr(fmoe_last_error(), "ep_size 2, ep_rank 1; the group is rank 0 of 1"),
       "a layer config with another EP rank/size is refused naming both");
    cfg.ep_size = 1;
    cfg.ep_rank = 0;
    cfg.top_k = 3;
    st = fmoe_layer_create(ctx, &cfg, &s, &lo, &layer);
    ok(st == FMOE_STATUS_INVALID_ARGUMENT && strstr(fmoe_last_error(), "top_k is 3, the group's 2"),
       "a layer whose top_k is not the group's is refused");
    cfg.top_k = 2;
    st = fmoe_layer_create(ctx, &cfg, &s, &lo, &layer);
    ok(st == FMOE_STATUS_OK && fmoe_layer_get_config(layer)->max_num_tokens == 1 * 4 * 2,
       "a matching layer is created; its methods see the group's capacity");
    /* Too many tokens: refused, never truncated. */
    static uint16_t x[5][H], y[5][H];
    static float w[5][2];
    static int32_t ids[5][2];
    fmoe_layer_param_count(layer);
    fmoe_tensor tx, tw, ti, ty;
    const int64_t mh[2] = {5, H}, mk[2] = {5, 2};
    fmoe_tensor_init(&tx, FMOE_DTYPE_BF16, 2, mh, x);
    fmoe_tensor_init(&tw, FMOE_DTYPE_F32, 2, mk, w);
    fmoe_tensor_init(&ti, FMOE_DTYPE_INT32, 2, mk, ids);
    fmoe_tensor_init(&ty, FMOE_DTYPE_BF16, 2, mh, y);
    fmoe_forward_args f = {.struct_size = sizeof f, .x = &tx, .topk_weights = &tw, .topk_ids = &ti, .out = &ty};
    ep_case c = {.logical = 8};
    if (st == FMOE_STATUS_OK && load_layer(layer, &c) == 0) {
        st = fmoe_layer_forward(layer, &f);
        ok(st == FMOE_STATUS_INVALID_ARGUMENT && strstr(fmoe_last_error(), "5 tokens on EP rank 0 exceed the group's "
                                                                           "max_tokens_per_rank = 4"),
           "more tokens than max_tokens_per_rank are refused");
        tx.shape[0] = ty.shape[0] = tw.shape[0] = ti.shape[0] = 0;
        ok(fmoe_layer_forward(layer, &f) == FMOE_STATUS_OK, "M = 0 on a group of one");
    } else {
        ok(0, "load the matching layer");
    }
    fmoe_layer_destroy(layer);
    fmoe_ep_group_destroy(g);
}

/* A group of three where only two ranks come: both fail, naming rank 2. */
typedef struct join_job {
    const fmoe_ep_unique_id *id;
    uint32_t rank, size;
    int forwards; /* 1: create a layer and forward once */
    uint32_t m;
    fmoe_status st;
    char error[512];
} join_job;

static fmoe_context *short_ctx; /* ep_timeout_ms = 300 */

static void *join_main(void *p)
{
    join_job *j = p;
    fmoe_ep_group_options o;
    base_options(&o, j->id);
    o.rank = j->rank;
    o.size = j->size;
    fmoe_ep_group *g = NULL;
    fmoe_layer *layer = NULL;
    j->st = fmoe_ep_group_create(short_ctx, &o, &g);
    if (j->st == FMOE_STATUS_OK && j->forwards) {
        fmoe_layer_config cfg;
        fmoe_layer_config_init(&cfg);
        cfg.num_experts = 8;
        cfg.top_k = 2;
        cfg.hidden_size = H;
        cfg.intermediate_size = 64;
        fmoe_scheme s;
        fmoe_scheme_init_unquantized(&s, FMOE_DTYPE_BF16);
        fmoe_layer_options lo;
        fmoe_layer_options_init(&lo);
        lo.ep_group = g;
        ep_case c = {.logical = 8};
        j->st = fmoe_layer_create(short_ctx, &cfg, &s, &lo, &layer);
        if (j->st == FMOE_STATUS_OK && load_layer(layer, &c) == 0) {
            static uint16_t x[2][8][H], y[2][8][H];
            static float w[2][8][2];
            static int32_t ids[2][8][2];
            for (int t = 0; t < 8; t++)
                ids[j->rank][t][0] = 1, ids[j->rank][t][1] = 6, w[j->rank][t][0] = w[j->rank][t][1] = 0.5f;
            fmoe_tensor tx, tw, ti, ty;
            const int64_t mh[2] = {j->m, H}, mk[2] = {j->m, 2};
            fmoe_tensor_init(&tx, FMOE_DTYPE_BF16, 2, mh, x[j->rank]);
            fmoe_tensor_init(&tw, FMOE_DTYPE_F32, 2, mk, w[j->rank]);
            fmoe_tensor_init(&ti, FMOE_DTYPE_INT32, 2, mk, ids[j->rank]);
            fmoe_tensor_init(&ty, FMOE_DTYPE_BF16, 2, mh, y[j->rank]);
            fmoe_forward_args f = {.struct_size = sizeof f, .x = &tx, .topk_weights = &tw, .topk_ids = &ti, .out = &ty};
            j->st = fmoe_layer_forward(layer, &f);
        }
    }
    snprintf(j->error, sizeof j->error, "%s", fmoe_last_error());
    fmoe_layer_destroy(layer);
    fmoe_ep_group_destroy(g);
    return NULL;
}

static void test_missing_ranks(void)
{
    fmoe_ep_unique_id id;
    fmoe_ep_group_options o;
    base_options(&o, NULL);
    fmoe_ep_unique_id_make(short_ctx, &o, &id);
    join_job jobs[2] = {{.id = &id, .rank = 0, .size = 3}, {.id = &id, .rank = 1, .size = 3}};
    pthread_t th[2];
    for (int r = 0; r < 2; r++)
        pthread_create(&th[r], NULL, join_main, &jobs[r]);
    for (int r = 0; r < 2; r++)
        pthread_join(th[r], NULL);
    int good = 1;
    for (int r = 0; r < 2; r++) {
        good &= jobs[r].st == FMOE_STATUS_DEVICE_ERROR && strstr(jobs[r].error, "rank(s) 2 of 3 never joined");
        if (!good)
            printf("# rank %d: %s\n", r, jobs[r].error);
    }
    ok(good, "a rank that never joins: the others fail after ep_timeout_ms naming it");

    /* Rank 0 passes too many tokens (refused before the collective), so
     * rank 1 waits for it at the dispatch and fails naming rank 0. */
    fmoe_ep_unique_id_make(short_ctx, &o, &id);
    join_job fw[2] = {{.id = &id, .rank = 0, .size = 2, .forwards = 1, .m = 5},
                      {.id = &id, .rank = 1, .size = 2, .forwards = 1, .m = 3}};
    for (int r = 0; r < 2; r++)
        pthread_create(&th[r], NULL, join_main, &fw[r]);
    for (int r = 0; r < 2; r++)
        pthread_join(th[r], NULL);
    ok(fw[0].st == FMOE_STATUS_INVALID_ARGUMENT && strstr(fw[0].error, "exceed the group's max_tokens_per_rank"),
       "rank 0 with too many tokens is refused");
    ok(fw[1].st == FMOE_STATUS_DEVICE_ERROR && strstr(fw[1].error, "rank(s) 0 of 2 never arrived"),
       "rank 1 then fails at the dispatch naming rank 0, after the timeout");
    if (fw[1].st != FMOE_STATUS_DEVICE_ERROR)
        printf("# rank 1: %s\n", fw[1].error);
}

/* Router logits on a bound layer: the core routes them on the host and
 * dispatches; every rank's output equals the single-rank layer's on the
 * same logits, bit for bit. */
#define LG_M 6
#define LG_E 8
typedef struct logits_job {
    const fmoe_ep_unique_id *id;
    uint32_t rank;
    uint16_t (*x)[H];
    float (*logits)[LG_E];
    uint16_t got[LG_M][H];
    fmoe_status st;
    char error[512];
} logits_job;

static void logits_config(fmoe_layer_config *cfg)
{
    fmoe_layer_config_init(cfg);
    cfg->num_experts = LG_E;
    cfg->top_k = 2;
    cfg->hidden_size = H;
    cfg->intermediate_size = 64;
    cfg->renormalize = 1;
}

static fmoe_status forward_logits(fmoe_layer *layer, uint16_t (*x)[H], float (*logits)[LG_E], uint32_t m,
                                  uint16_t (*out)[H])
{
    fmoe_tensor tx, tl, ty;
    const int64_t mh[2] = {m, H}, me[2] = {m, LG_E};
    fmoe_tensor_init(&tx, FMOE_DTYPE_BF16, 2, mh, x);
    fmoe_tensor_init(&tl, FMOE_DTYPE_F32, 2, me, logits);
    fmoe_tensor_init(&ty, FMOE_DTYPE_BF16, 2, mh, out);
    fmoe_forward_args f = {.struct_size = sizeof f, .x = &tx, .router_logits = &tl, .out = &ty};
    return fmoe_layer_forward(layer, &f);
}

static void *logits_main(void *p)
{
    logits_job *j = p;
    fmoe_ep_group_options o;
    base_options(&o, j->id);
    o.rank = j->rank;
    o.size = 2;
    o.max_tokens_per_rank = LG_M;
    o.num_experts = LG_E;
    fmoe_ep_group *g = NULL;
    fmoe_layer *layer = NULL;
    fmoe_layer_config cfg;
    logits_config(&cfg);
    fmoe_scheme s;
    fmoe_scheme_init_unquantized(&s, FMOE_DTYPE_BF16);
    fmoe_layer_options lo;
    fmoe_layer_options_init(&lo);
    ep_case c = {.logical = LG_E};
    j->st = fmoe_ep_group_create(ctx, &o, &g);
    lo.ep_group = g;
    if (j->st == FMOE_STATUS_OK)
        j->st = fmoe_layer_create(ctx, &cfg, &s, &lo, &layer);
    if (j->st == FMOE_STATUS_OK)
        j->st = load_layer(layer, &c) == 0 ? FMOE_STATUS_OK : FMOE_STATUS_INTERNAL;
    if (j->st == FMOE_STATUS_OK) /* rank 0 all tokens, rank 1 none */
        j->st = forward_logits(layer, j->x, j->logits, j->rank == 0 ? LG_M : 0, j->got);
    snprintf(j->error, sizeof j->error, "%s", fmoe_last_error());
    fmoe_layer_destroy(layer);
    fmoe_ep_group_destroy(g);
    return NULL;
}

static void test_logits(void)
{
    static uint16_t x[LG_M][H], want[LG_M][H];
    static float logits[LG_M][LG_E];
    uint64_t st = mix(seed, 77, 77);
    for (int t = 0; t < LG_M; t++) {
        for (int h = 0; h < H; h++)
            x[t][h] = f32_to_bf16(uniform(&st));
        for (int e = 0; e < LG_E; e++)
            logits[t][e] = 2.0f * uniform(&st);
    }
    fmoe_layer_config cfg;
    logits_config(&cfg);
    fmoe_scheme s;
    fmoe_scheme_init_unquantized(&s, FMOE_DTYPE_BF16);
    fmoe_layer_options lo;
    fmoe_layer_options_init(&lo);
    lo.backend = "reference";
    fmoe_layer *one = NULL;
    ep_case c = {.logical = LG_E};
    if (fmoe_layer_create(ctx, &cfg, &s, &lo, &one) != FMOE_STATUS_OK || load_layer(one, &c) != 0 ||
        forward_logits(one, x, logits, LG_M, want) != FMOE_STATUS_OK) {
        ok(0, "router logits: the single-rank layer");
        fmoe_layer_destroy(one);
        return;
    }
    fmoe_layer_destroy(one);
    fmoe_ep_unique_id id;
    fmoe_ep_group_options io;
    base_options(&io, NULL);
    fmoe_ep_unique_id_make(ctx, &io, &id);
    static logits_job jobs[2];
    pthread_t th[2];
    for (uint32_t r = 0; r < 2; r++) {
        jobs[r] = (logits_job){.id = &id, .rank = r, .x = x, .logits = logits};
        memset(jobs[r].got, 0xff, sizeof jobs[r].got);
        pthread_create(&th[r], NULL, logits_main, &jobs[r]);
    }
    for (int r = 0; r < 2; r++)
        pthread_join(th[r], NULL);
    int good = jobs[0].st == FMOE_STATUS_OK && jobs[1].st == FMOE_STATUS_OK &&
               memcmp(jobs[0].got, want, sizeof want) == 0;
    if (!good)
        printf("# rank 0: %s; rank 1: %s\n", jobs[0].error, jobs[1].error);
    ok(good, "router logits on a bound layer (M = 0 on rank 1): routed by the core, equal to one rank bit for bit");
}

/* Plugins without EP: one built for ABI 1.0 (no `ep` field at all) and one
 * built for this ABI with `ep` NULL. Both still load, and a group asked of
 * them is UNSUPPORTED with the reason. */
static void test_plugins_without_ep(const char *manifest, const char *v10, const char *current)
{
    fmoe_context_options o;
    fmoe_context_options_init(&o);
    const char *files[] = {manifest, v10, current};
    o.plugin_files = files;
    o.n_plugin_files = 3;
    o.ignore_environment = 1;
    o.isolated = 1;
    fmoe_context *c = NULL;
    if (fmoe_context_create(&o, &c) != FMOE_STATUS_OK) {
        ok(0, "a context with the fixture plugins");
        return;
    }
    int loaded = 0;
    for (uint32_t i = 0; i < fmoe_context_plugin_count(c); i++) {
        fmoe_plugin_info p = {.struct_size = sizeof p};
        if (fmoe_context_plugin(c, i, &p) == FMOE_STATUS_OK && p.state == FMOE_PLUGIN_STATE_LOADED &&
            (strcmp(p.name, "fixture_device_v10") == 0 || strcmp(p.name, "fixture_ok") == 0))
            loaded++;
    }
    ok(loaded == 2, "plugins built for ABI 1.0 and without EP still load");
    fmoe_ep_unique_id id;
    fmoe_ep_group_options g;
    base_options(&g, NULL);
    g.backend = "fixture_device_v10";
    fmoe_status st = fmoe_ep_unique_id_make(c, &g, &id);
    ok(st == FMOE_STATUS_UNSUPPORTED &&
           strstr(fmoe_last_error(), "fixture_device_v10: no expert parallelism (negotiated ABI < 1.3)"),
       "an ABI 1.0 plugin serves no EP group, and says why");
    g.backend = "fixture_ok";
    st = fmoe_ep_unique_id_make(c, &g, &id);
    ok(st == FMOE_STATUS_UNSUPPORTED && strstr(fmoe_last_error(), "fixture_ok: no expert parallelism"),
       "a plugin without an ep table serves no EP group");
    fmoe_context_destroy(c);
}

static fmoe_context *make_context(const char *manifest, const char *options)
{
    fmoe_context_options o;
    fmoe_context_options_init(&o);
    const char *files[] = {manifest};
    o.plugin_files = files;
    o.n_plugin_files = 1;
    o.ignore_environment = 1;
    o.isolated = 1;
    o.plugin_options = options;
    fmoe_context *c = NULL;
    return fmoe_context_create(&o, &c) == FMOE_STATUS_OK ? c : NULL;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s REFERENCE_MANIFEST FIXTURE_DEVICE_V10_SO FIXTURE_OK_SO\n", argv[0]);
        return 2;
    }
    seed = ((uint64_t)time(NULL) << 20) ^ (uint64_t)getpid();
    printf("TAP version 13\n# seed %llu\n", (unsigned long long)seed);
    ctx = make_context(argv[1], NULL);
    short_ctx = make_context(argv[1], "reference.ep_timeout_ms=300");
    if (!ctx || !short_ctx) {
        printf("not ok 1 - contexts: %s\n1..1\n", fmoe_last_error());
        return 1;
    }
    test_options();
    test_layer_mismatch();
    test_missing_ranks();
    test_logits();
    test_plugins_without_ep(argv[1], argv[2], argv[3]);

    /* The last weights before GEMM2 (MegaMoE): the double carries the weight
     * with the row for it, still bit for bit. */
    static const char *const schemes[] = {"bf16", "fp8e4m3:channel/fp8e4m3:token:dynamic",
                                          "fp8e4m3:block128x128/fp8e4m3:group128:dynamic",
                                          "fp4:group32:scale-ue8m0/fp8e4m3:group32:dynamic"};
    for (uint32_t n = 2; n <= 4; n++)
        for (size_t si = 0; si < sizeof schemes / sizeof schemes[0]; si++) {
            char label[160];
            ep_case c = {.scheme = schemes[si],
                         .ranks = n,
                         .logical = 8,
                         .placement = FMOE_PLACEMENT_LINEAR,
                         .dispatch = FMOE_EP_DISPATCH_ACTIVATION,
                         .m = {5, 8, 3, 6}};
            snprintf(label, sizeof label, "%s linear", schemes[si]);
            run_case(&c, label);
            c.placement = FMOE_PLACEMENT_ROUND_ROBIN;
            c.use_comm = 1;
            snprintf(label, sizeof label, "%s round-robin, comm bootstrap", schemes[si]);
            run_case(&c, label);
            c.placement = FMOE_PLACEMENT_LINEAR;
            c.use_comm = 0;
            c.logical = 6;
            c.redundant = n == 3 ? 3 : 2; /* EPLB needs the global count to divide by the ranks */
            snprintf(label, sizeof label, "%s EPLB %u replicas", schemes[si], c.redundant);
            run_case(&c, label);
            ep_case hot = {.scheme = schemes[si],
                           .ranks = n,
                           .logical = 8,
                           .placement = FMOE_PLACEMENT_LINEAR,
                           .dispatch = FMOE_EP_DISPATCH_ACTIVATION,
                           .hot = 1,
                           .m = {0, 7, 0, 4}};
            if (n == 2)
                hot.m[1] = 0, hot.m[0] = 6; /* still one rank with M = 0 */
            snprintf(label, sizeof label, "%s hot expert 0, M = 0 on some ranks", schemes[si]);
            run_case(&hot, label);
        }
    for (uint32_t n = 2; n <= 4; n += 2) {
        ep_case c = {.scheme = "bf16",
                     .ranks = n,
                     .logical = 8,
                     .placement = FMOE_PLACEMENT_LINEAR,
                     .dispatch = FMOE_EP_DISPATCH_FP8_TOKEN,
                     .m = {5, 8, 3, 6}};
        run_case(&c, "bf16, fp8 per-token dispatch");
        c.dispatch = FMOE_EP_DISPATCH_FP8_BLOCK;
        c.scheme = "fp8e4m3:block128x128/fp8e4m3:group128:dynamic";
        run_case(&c, "fp8 block, fp8 1x128 dispatch");
    }
    fmoe_context_destroy(ctx);
    fmoe_context_destroy(short_ctx);
    printf("1..%d\n", n_test);
    return n_failed ? 1 : 0;
}
