/*
 * registry/selection.c - choose the backend method for one layer.
 *
 * Every plugin becomes one candidate per device (or one candidate saying
 * why it never got that far). Ranking among the candidates that accepted:
 *   0. a backend the application asked for (fmoe_layer_options.backend)
 *      restricts the candidates to it and overrides [select.schemes];
 *   1. a backend named for the scheme in [select.schemes] wins outright; if
 *      it refused, that is an error (strict) unless [select] fallback = true,
 *      in which case a warning is logged and ranking continues;
 *   2. preference order: FMOE_BACKENDS plain globs if set, else [select] prefer;
 *   3. the plugin's score, higher first;
 *   4. plugin name, then device index (a stable tie-break).
 * Each decision is logged (category "select") and written to the dispatch
 * log as one JSON line with a replay command.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config_args.h"
#include "base/error.h"
#include "base/glob.h"
#include "base/strbuf.h"
#include "registry/registry.h"

#define FMOE_METHOD_MIN_SIZE FMOE_STRUCT_SIZE_UPTO(fmoe_method, destroy)

static const char *config_name(const fmoe_registry *reg)
{
    return reg->config && reg->config->path[0] ? reg->config->path : "the built-in configuration";
}

static int serves_scheme(const fmoe_plugin_record *p, const char *key)
{
    return fmoe_glob_find(p->scheme_globs, p->n_scheme_globs, key) >= 0;
}

static int preference_of(const fmoe_registry *reg, const char *name)
{
    if (reg->n_env_select)
        return fmoe_glob_find(reg->env_select, reg->n_env_select, name);
    if (reg->config)
        return fmoe_glob_find(reg->config->prefer, reg->config->n_prefer, name);
    return -1;
}

/* A method table from a plugin is checked before the host relies on it. */
static const char *method_defect(const fmoe_method *m)
{
    if (!m)
        return "query returned OK without a method";
    if (m->struct_size < FMOE_METHOD_MIN_SIZE)
        return "method table struct_size is smaller than the ABI 1.0 minimum";
    if (!m->name || !m->create || !m->declare_params || !m->finalize || !m->destroy)
        return "method table lacks a mandatory slot (name, create, declare_params, finalize or destroy)";
    if (!m->apply && !m->apply_logits)
        return "method has neither apply nor apply_logits";
    if ((m->flags & FMOE_METHOD_MONOLITHIC) && !m->apply_logits)
        return "method is flagged monolithic but has no apply_logits";
    return NULL;
}

static void query_candidate(const fmoe_plugin_record *p, const fmoe_device_report *dev, const fmoe_layer_config *cfg,
                            const fmoe_scheme *scheme, const char *key, void *ep_group, fmoe_candidate_rec *c)
{
    fmoe_error err;
    fmoe_plugin_error_reset(&err);
    fmoe_query_args q = {.struct_size = sizeof q,
                         .err = &err,
                         .state = p->plugin_state,
                         .config = cfg,
                         .scheme = scheme,
                         .scheme_key = key,
                         .device_kind = dev->kind,
                         .device_index = dev->index,
                         /* Only the plugin that made the group is asked (the caller's filter). */
                         .ep_group = p->abi_minor >= 3 ? ep_group : NULL};
    fmoe_status st = p->table->query(&q);
    q.reason[sizeof q.reason - 1] = '\0';
    const char *why = q.reason[0] ? q.reason : fmoe_plugin_error_text(&err, "");
    if (st == FMOE_STATUS_UNSUPPORTED) {
        c->verdict = FMOE_VERDICT_REFUSED;
        snprintf(c->reason, sizeof c->reason, "%s", why[0] ? why : "refused without a reason");
        return;
    }
    if (st != FMOE_STATUS_OK) {
        c->verdict = FMOE_VERDICT_ERROR;
        snprintf(c->reason, sizeof c->reason, "query failed (%s): %s", fmoe_status_name(st),
                 fmoe_plugin_error_text(&err, "no message"));
        return;
    }
    const char *defect = method_defect(q.method);
    if (!defect && q.score == 0)
        defect = "query accepted with score 0 (0 means unusable)";
    if (defect) {
        c->verdict = FMOE_VERDICT_ERROR;
        snprintf(c->reason, sizeof c->reason, "plugin bug: %s", defect);
        return;
    }
    if (cfg->enable_eplb && !(q.method->flags & FMOE_METHOD_EPLB)) {
        c->verdict = FMOE_VERDICT_REFUSED;
        snprintf(c->reason, sizeof c->reason, "method '%s' does not support EPLB", q.method->name);
        return;
    }
    c->verdict = FMOE_VERDICT_ACCEPTED;
    c->method = q.method;
    c->score = q.score;
    snprintf(c->reason, sizeof c->reason, "%s", why[0] ? why : "accepted");
}

static int device_wanted(const fmoe_device_report *d, int32_t kind, int32_t index)
{
    if (kind != FMOE_DEVICE_ANY && d->kind != kind)
        return 0;
    return index < 0 || d->index == index;
}

static fmoe_candidate_rec *push(fmoe_selection *sel, size_t *cap, const fmoe_plugin_record *p)
{
    if (sel->n_candidates == *cap) {
        size_t n = *cap ? *cap * 2 : 8;
        fmoe_candidate_rec *c = realloc(sel->candidates, n * sizeof *c);
        if (!c)
            return NULL;
        sel->candidates = c;
        *cap = n;
    }
    fmoe_candidate_rec *c = &sel->candidates[sel->n_candidates++];
    memset(c, 0, sizeof *c);
    c->plugin = p;
    c->device_kind = FMOE_DEVICE_ANY;
    c->device_index = -1;
    c->preference = -1;
    return c;
}

static fmoe_status gather(const fmoe_registry *reg, const fmoe_layer_config *cfg, const fmoe_scheme *scheme,
                          const fmoe_select_filter *filter, fmoe_selection *sel)
{
    int32_t kind = filter->device_kind, index = filter->device_index;
    size_t cap = 0;
    for (size_t i = 0; i < reg->n_plugins; i++) {
        const fmoe_plugin_record *p = &reg->plugins[i];
        int pref = p->name ? preference_of(reg, p->name) : -1;
        int unwanted = filter->backend && p->name && !fmoe_glob_match(filter->backend, p->name);
        if (unwanted || p->state != FMOE_PLUGIN_STATE_LOADED || !serves_scheme(p, sel->scheme_key) ||
            p->n_devices == 0) {
            fmoe_candidate_rec *c = push(sel, &cap, p);
            if (!c)
                return FMOE_STATUS_OUT_OF_MEMORY;
            c->preference = pref;
            if (filter->backend && p->name && !fmoe_glob_match(filter->backend, p->name)) {
                c->verdict = FMOE_VERDICT_EXCLUDED;
                snprintf(c->reason, sizeof c->reason, "not requested (the layer asks for backend '%s')",
                         filter->backend);
            } else if (p->state == FMOE_PLUGIN_STATE_DISABLED) {
                c->verdict = FMOE_VERDICT_EXCLUDED;
                snprintf(c->reason, sizeof c->reason, "%s", p->reason);
            } else if (p->state != FMOE_PLUGIN_STATE_LOADED) {
                c->verdict = FMOE_VERDICT_UNAVAILABLE;
                snprintf(c->reason, sizeof c->reason, "not loaded: %s", p->reason);
            } else if (!serves_scheme(p, sel->scheme_key)) {
                c->verdict = FMOE_VERDICT_REFUSED;
                snprintf(c->reason, sizeof c->reason, "does not serve scheme '%s' (serves %s)", sel->scheme_key,
                         p->schemes);
            } else {
                c->verdict = FMOE_VERDICT_UNAVAILABLE;
                snprintf(c->reason, sizeof c->reason, "reported no devices");
            }
            continue;
        }
        for (uint32_t d = 0; d < p->n_devices; d++) {
            const fmoe_device_report *dev = &p->devices[d];
            fmoe_candidate_rec *c = push(sel, &cap, p);
            if (!c)
                return FMOE_STATUS_OUT_OF_MEMORY;
            c->preference = pref;
            c->device_kind = dev->kind;
            c->device_index = dev->index;
            if (!device_wanted(dev, kind, index)) {
                c->verdict = FMOE_VERDICT_EXCLUDED;
                snprintf(c->reason, sizeof c->reason, "device %s:%d not requested (layer asks for %s:%d)",
                         fmoe_device_kind_name(dev->kind), dev->index, fmoe_device_kind_name(kind), index);
            } else if (!dev->available) {
                c->verdict = FMOE_VERDICT_UNAVAILABLE;
                snprintf(c->reason, sizeof c->reason, "device %s:%d unavailable: %s", fmoe_device_kind_name(dev->kind),
                         dev->index, dev->reason[0] ? dev->reason : "no reason given");
            } else {
                query_candidate(p, dev, cfg, scheme, sel->scheme_key, filter->ep_group, c);
            }
        }
    }
    return FMOE_STATUS_OK;
}

/* Is a better than b? (rules 2-4 of the header comment) */
static int ranks_before(const fmoe_candidate_rec *a, const fmoe_candidate_rec *b)
{
    unsigned pa = a->preference < 0 ? ~0u : (unsigned)a->preference;
    unsigned pb = b->preference < 0 ? ~0u : (unsigned)b->preference;
    if (pa != pb)
        return pa < pb;
    if (a->score != b->score)
        return a->score > b->score;
    int byname = strcmp(a->plugin->name, b->plugin->name);
    if (byname)
        return byname < 0;
    return a->device_index < b->device_index;
}

static int32_t best_accepted(const fmoe_selection *sel, const char *only_plugin)
{
    int32_t best = -1;
    for (uint32_t i = 0; i < sel->n_candidates; i++) {
        const fmoe_candidate_rec *c = &sel->candidates[i];
        if (c->verdict != FMOE_VERDICT_ACCEPTED)
            continue;
        if (only_plugin && strcmp(c->plugin->name, only_plugin) != 0)
            continue;
        if (best < 0 || ranks_before(c, &sel->candidates[best]))
            best = (int32_t)i;
    }
    return best;
}

/* Reasons of every candidate of `plugin` (or of all when NULL), one per line. */
static void list_reasons(const fmoe_selection *sel, const char *plugin, char *buf, size_t cap)
{
    size_t len = strlen(buf);
    for (uint32_t i = 0; i < sel->n_candidates && len + 1 < cap; i++) {
        const fmoe_candidate_rec *c = &sel->candidates[i];
        if (plugin && strcmp(c->plugin->name ? c->plugin->name : "", plugin) != 0)
            continue;
        int n = snprintf(buf + len, cap - len, "\n  %s%s%s: %s", c->plugin->name ? c->plugin->name : "?",
                         c->device_index >= 0 ? " on " : "",
                         c->device_index >= 0 ? fmoe_device_kind_name(c->device_kind) : "", c->reason);
        if (n < 0)
            break;
        len += (size_t)n < cap - len ? (size_t)n : cap - len - 1;
    }
}

static const fmoe_config_scheme_choice *named_choice(const fmoe_registry *reg, const char *key)
{
    if (!reg->config)
        return NULL;
    for (size_t i = 0; i < reg->config->n_schemes; i++)
        if (fmoe_glob_match(reg->config->schemes[i].scheme_glob, key))
            return &reg->config->schemes[i];
    return NULL;
}

static int named_is_loaded_elsewhere(const fmoe_selection *sel, const char *name)
{
    for (uint32_t i = 0; i < sel->n_candidates; i++)
        if (sel->candidates[i].plugin->name && strcmp(sel->candidates[i].plugin->name, name) == 0)
            return 1;
    return 0;
}

static fmoe_status decide(const fmoe_registry *reg, const fmoe_select_filter *filter, fmoe_selection *sel)
{
    /* A backend the application asks for overrides the one the TOML names. */
    const fmoe_config_scheme_choice *named = filter->backend ? NULL : named_choice(reg, sel->scheme_key);
    if (named) {
        int32_t best = best_accepted(sel, named->backend);
        if (best >= 0) {
            sel->chosen = best;
            snprintf(sel->summary, sizeof sel->summary, "%s named for scheme '%s' in %s", named->backend,
                     named->scheme_glob, config_name(reg));
            return FMOE_STATUS_OK;
        }
        char why[4096];
        snprintf(why, sizeof why, "backend '%s', named for scheme '%s' in %s, cannot serve this layer:", named->backend,
                 named->scheme_glob, config_name(reg));
        if (named_is_loaded_elsewhere(sel, named->backend))
            list_reasons(sel, named->backend, why, sizeof why);
        else
            snprintf(why + strlen(why), sizeof why - strlen(why), "\n  no plugin of that name was found");
        if (!reg->config->fallback) {
            snprintf(sel->summary, sizeof sel->summary, "%s", why);
            return fmoe_error_set(FMOE_STATUS_UNSUPPORTED, "%s\n(set [select] fallback = true to allow others)", why);
        }
        fmoe_log(reg->logger, FMOE_LOG_WARN, "select", "%s\nfalling back ([select] fallback = true)", why);
    }
    int32_t best = best_accepted(sel, NULL);
    if (best < 0) {
        char why[4096];
        snprintf(why, sizeof why, "no backend can serve scheme '%s' for this layer:", sel->scheme_key);
        list_reasons(sel, NULL, why, sizeof why);
        if (sel->n_candidates == 0)
            snprintf(why + strlen(why), sizeof why - strlen(why), "\n  no plugins were found (see `fusedmoe plugins`)");
        snprintf(sel->summary, sizeof sel->summary, "%s", why);
        return fmoe_error_set(FMOE_STATUS_UNSUPPORTED, "%s", why);
    }
    sel->chosen = best;
    const fmoe_candidate_rec *c = &sel->candidates[best];
    if (named)
        snprintf(sel->summary, sizeof sel->summary, "fallback from '%s': %s", named->backend,
                 c->preference >= 0 ? "first in preference order" : "highest score");
    else if (c->preference >= 0)
        snprintf(sel->summary, sizeof sel->summary, "position %d in the preference order (%s)", c->preference,
                 reg->n_env_select ? "FMOE_BACKENDS" : "[select] prefer");
    else
        snprintf(sel->summary, sizeof sel->summary, "highest score (%u) among %s", c->score,
                 "the backends that accepted");
    return FMOE_STATUS_OK;
}

static void log_decision(const fmoe_registry *reg, const fmoe_layer_config *cfg, const fmoe_selection *sel,
                         fmoe_status st)
{
    char args[512];
    fmoe_layer_config_format_args(cfg, args, sizeof args);
    const fmoe_candidate_rec *c = sel->chosen >= 0 ? &sel->candidates[sel->chosen] : NULL;
    if (c) {
        fmoe_strbuf opts = {0};
        for (size_t i = 0; i < c->plugin->n_options; i++)
            fmoe_strbuf_append(&opts, "%s%s=%s", i ? "," : "; options ", c->plugin->options[i].key,
                               c->plugin->options[i].value);
        fmoe_log(reg->logger, FMOE_LOG_INFO, "select", "scheme %s, %s: %s/%s on %s:%d (%s%s)", sel->scheme_key, args,
                 c->plugin->name, c->method->name, fmoe_device_kind_name(c->device_kind), c->device_index, sel->summary,
                 fmoe_strbuf_text(&opts));
        fmoe_strbuf_free(&opts);
    }
    for (uint32_t i = 0; i < sel->n_candidates; i++) {
        const fmoe_candidate_rec *k = &sel->candidates[i];
        fmoe_log(reg->logger, FMOE_LOG_DEBUG, "select", "  candidate %s: verdict %d score %u: %s",
                 k->plugin->name ? k->plugin->name : "?", k->verdict, k->score, k->reason);
    }
    if (!reg->logger->dispatch)
        return;
    fmoe_strbuf j = {0};
    fmoe_strbuf_append(&j, "{\"v\":1,\"event\":\"select\",\"status\":\"%s\",\"scheme\":", fmoe_status_name(st));
    fmoe_strbuf_append_json(&j, sel->scheme_key);
    fmoe_strbuf_append(&j, ",\"chosen\":");
    if (c) {
        char chosen[256];
        snprintf(chosen, sizeof chosen, "%s/%s", c->plugin->name, c->method->name);
        fmoe_strbuf_append_json(&j, chosen);
        /* The options in effect: the same layer on the same plugin with
         * other options can run other kernels. */
        fmoe_strbuf_append(&j, ",\"options\":{");
        for (size_t i = 0; i < c->plugin->n_options; i++) {
            fmoe_strbuf_append(&j, "%s", i ? "," : "");
            fmoe_strbuf_append_json(&j, c->plugin->options[i].key);
            fmoe_strbuf_append(&j, ":");
            fmoe_strbuf_append_json(&j, c->plugin->options[i].value);
        }
        fmoe_strbuf_append(&j, "}");
    } else {
        fmoe_strbuf_append(&j, "null");
    }
    fmoe_strbuf_append(&j, ",\"why\":");
    fmoe_strbuf_append_json(&j, sel->summary);
    fmoe_strbuf_append(&j, ",\"replay\":");
    fmoe_strbuf replay = {0};
    fmoe_strbuf_append(&replay, "fusedmoe explain --scheme %s %s", sel->scheme_key, args);
    fmoe_strbuf_append_json(&j, fmoe_strbuf_text(&replay));
    fmoe_strbuf_free(&replay);
    fmoe_strbuf_append(&j, ",\"candidates\":[");
    for (uint32_t i = 0; i < sel->n_candidates; i++) {
        const fmoe_candidate_rec *k = &sel->candidates[i];
        fmoe_strbuf_append(&j, "%s{\"plugin\":", i ? "," : "");
        fmoe_strbuf_append_json(&j, k->plugin->name ? k->plugin->name : "");
        fmoe_strbuf_append(&j, ",\"verdict\":%d,\"score\":%u,\"reason\":", k->verdict, k->score);
        fmoe_strbuf_append_json(&j, k->reason);
        fmoe_strbuf_append(&j, "}");
    }
    fmoe_strbuf_append(&j, "]}");
    if (fmoe_strbuf_ok(&j))
        fmoe_log_dispatch_record(reg->logger, fmoe_strbuf_text(&j));
    else
        fmoe_log(reg->logger, FMOE_LOG_WARN, "dispatch", "out of memory writing the dispatch line of %s",
                 sel->scheme_key);
    fmoe_strbuf_free(&j);
}

fmoe_status fmoe_registry_select(const fmoe_registry *reg, const fmoe_layer_config *cfg, const fmoe_scheme *scheme,
                                 const fmoe_select_filter *filter, fmoe_selection **out)
{
    *out = NULL;
    fmoe_selection *sel = calloc(1, sizeof *sel);
    if (!sel)
        return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    sel->chosen = -1;
    fmoe_status st = fmoe_scheme_key(scheme, sel->scheme_key, sizeof sel->scheme_key);
    if (st != FMOE_STATUS_OK) {
        free(sel);
        return st;
    }
    st = gather(reg, cfg, scheme, filter, sel);
    if (st != FMOE_STATUS_OK) {
        fmoe_selection_destroy(sel);
        return fmoe_error_set(st, "out of memory while selecting a backend");
    }
    st = decide(reg, filter, sel);
    if (sel->chosen >= 0)
        sel->candidates[sel->chosen].verdict = FMOE_VERDICT_SELECTED;
    log_decision(reg, cfg, sel, st);
    *out = sel;
    return st;
}
