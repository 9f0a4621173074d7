/*
 * plugins/reference/plugin.c - entry point, options, probe and query of the
 * reference backend.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

#include "fusedmoe/kit/cpu_name.h"
#include "plugins/reference/ep.h"
#include "plugins/reference/reference.h"

static fmoe_status ref_init(fmoe_init_args *a)
{
    const fmoe_host *h = a->host;
    ref_state *st = h->alloc(h->ctx, sizeof *st, 0);
    if (!st)
        return h->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    memset(st, 0, sizeof *st);
    st->host = h;
    st->ep_timeout_ms = 10000;
    /* The host has already checked names and types against the manifest;
     * this is the plugin's own check, for a load without the manifest. */
    static const char *const globals[] = {"quant", "dequant", NULL};
    for (uint32_t i = 0; i < a->n_options; i++) {
        const fmoe_option *o = a->options[i];
        int v = 0;
        if (strcmp(o->key, "monolithic") == 0 && fmoe_option_parse_bool(o->value, &v) == 0) {
            st->monolithic = v;
            continue;
        }
        if (strcmp(o->key, "nvfp4_globals") == 0 && fmoe_option_parse_enum(o->value, globals, &v) == 0) {
            st->nvfp4_dequant = v == 1;
            continue;
        }
        long long ms = 0;
        if (strcmp(o->key, "ep_timeout_ms") == 0 && fmoe_option_parse_int(o->value, 1, 3600000, &ms) == 0) {
            st->ep_timeout_ms = (long)ms;
            continue;
        }
        h->free(h->ctx, st);
        if (strcmp(o->key, "monolithic") == 0)
            return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT,
                                "option 'monolithic' = \"%s\": expected true or false", o->value);
        if (strcmp(o->key, "nvfp4_globals") == 0)
            return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT,
                                "option 'nvfp4_globals' = \"%s\": expected \"quant\" (compressed-tensors) or "
                                "\"dequant\" (ModelOpt)",
                                o->value);
        if (strcmp(o->key, "ep_timeout_ms") == 0)
            return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT,
                                "option 'ep_timeout_ms' = \"%s\": expected milliseconds, 1..3600000", o->value);
        return h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT,
                            "unknown option '%s' (the reference plugin takes: monolithic, nvfp4_globals, "
                            "ep_timeout_ms)",
                            o->key);
    }
    a->state = st;
    return FMOE_STATUS_OK;
}

static void ref_shutdown(void *state)
{
    ref_state *st = state;
    if (st)
        st->host->free(st->host->ctx, st);
}

static fmoe_status ref_probe(fmoe_probe_args *a)
{
    if (a->capacity < 1)
        return FMOE_STATUS_OK;
    fmoe_device_report *r = a->reports[0];
    struct utsname u;
    r->kind = FMOE_DEVICE_CPU;
    r->index = 0;
    r->available = 1;
    r->score = 1;
    fmoe_cpu_model_name(r->name, sizeof r->name);
    if (!r->name[0])
        snprintf(r->name, sizeof r->name, "host CPU");
    snprintf(r->arch, sizeof r->arch, "%.32s (portable C)", uname(&u) == 0 ? u.machine : "unknown");
    snprintf(r->id, sizeof r->id, "cpu");
    snprintf(r->reason, sizeof r->reason, "reference implementation: correct, not fast");
    a->count = 1;
    return FMOE_STATUS_OK;
}

static fmoe_status ref_query(fmoe_query_args *a)
{
    const fmoe_scheme *s = a->scheme;
    const ref_state *st = a->state;
    if (!st)
        return FMOE_STATUS_INTERNAL; /* init always runs first */
    int unquantized = s->w_strategy == FMOE_QSTRATEGY_NONE && s->a_strategy == FMOE_QSTRATEGY_NONE &&
                      (s->w_dtype == FMOE_DTYPE_F32 || s->w_dtype == FMOE_DTYPE_BF16 || s->w_dtype == FMOE_DTYPE_F16);
    const fmoe_method *quant = unquantized ? NULL : ref_quant_method(s, st->monolithic);
    if (!unquantized && !quant) {
        snprintf(a->reason, sizeof a->reason,
                 "no reference method for '%s' (it serves what the selection tree produces: docs/REFERENCE-METHODS.md)",
                 a->scheme_key);
        return FMOE_STATUS_UNSUPPORTED;
    }
    if (a->device_kind != FMOE_DEVICE_CPU) {
        snprintf(a->reason, sizeof a->reason, "runs on the host CPU only");
        return FMOE_STATUS_UNSUPPORTED;
    }
    if (FMOE_HAS_FIELD(a, ep_group) && a->ep_group && st->monolithic) {
        snprintf(a->reason, sizeof a->reason,
                 "option monolithic: a layer on an EP group needs a modular method (routing travels with the tokens)");
        return FMOE_STATUS_UNSUPPORTED;
    }
    if (quant && !ref_quant_layer_ok(s, a->config, a->reason, sizeof a->reason))
        return FMOE_STATUS_UNSUPPORTED;
    if (quant)
        a->method = quant;
    else
        a->method = st->monolithic ? &ref_method_unquantized_monolithic : &ref_method_unquantized;
    a->score = 1;
    snprintf(a->reason, sizeof a->reason, "reference %s%s", quant ? quant->name : "f32-accumulation loop",
             st->monolithic ? " (monolithic: routes inside apply_logits)" : "");
    return FMOE_STATUS_OK;
}

static const fmoe_plugin ref_plugin = {
    .struct_size = sizeof(fmoe_plugin),
    .abi_major = FMOE_ABI_MAJOR,
    .abi_minor = FMOE_ABI_MINOR,
    .name = "reference",
    .vendor = "fusedmoe",
    .version = FMOE_PLUGIN_VERSION,
    .build_id = "",
    .init = ref_init,
    .probe = ref_probe,
    .query = ref_query,
    .shutdown = ref_shutdown,
    .ep = &ref_ep_ops,
};

FMOE_DEFINE_PLUGIN_ENTRY(ref_plugin)
