/*
 * plugins/cpu_arm/plugin.c - entry point, options, probe and query of the
 * Arm W4A8 backend (docs/CPU_ARM.md).
 *
 * Options ([plugins.cpu_arm.options]): threads = "<n>" (worker threads per
 * apply; default: the online CPUs), isa = "portable|dotprod|i8mm" (highest
 * kernel level to use). The environment variable FMOE_ARM_ISA does the
 * same as `isa`; the lower of the two wins, and a level the CPU lacks is
 * never used (logged at init).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plugins/cpu_arm/cpu_arm.h"

#define MAX_THREADS 64
#define SCORE_PER_LEVEL 10 /* query score: 10 portable, 20 dotprod, 30 i8mm (reference: 1) */

static void log_line(const fmoe_host *h, int32_t level, const char *fmt, ...) FMOE_PRINTF_LIKE(3, 4);

static void log_line(const fmoe_host *h, int32_t level, const char *fmt, ...)
{
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    h->log(h->ctx, level, line);
}

/* Lower st->isa to the level `name` asks for (from `source`). */
static fmoe_status limit_isa(carm_state *st, const char *name, const char *source, fmoe_error *err)
{
    const fmoe_host *h = st->host;
    int want = carm_isa_parse(name);
    if (want < 0)
        return h->error_set(err, FMOE_STATUS_INVALID_ARGUMENT, "%s = \"%s\": expected portable, dotprod or i8mm",
                            source, name);
    if (want > st->hw_isa)
        log_line(h, FMOE_PLUGIN_LOG_WARN, "%s asks for %s, which this CPU lacks; not used", source, name);
    if (want < st->isa) {
        st->isa = want;
        st->forced = 1;
    }
    return FMOE_STATUS_OK;
}

static fmoe_status arm_init(fmoe_init_args *a)
{
    const fmoe_host *h = a->host;
    carm_state *st = h->alloc(h->ctx, sizeof *st, 0);
    if (!st)
        return h->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    memset(st, 0, sizeof *st);
    st->host = h;
    st->hw_isa = st->isa = carm_isa_detect();
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    st->threads = cpus < 1 ? 1 : cpus > MAX_THREADS ? MAX_THREADS : (uint32_t)cpus;
    fmoe_status s = FMOE_STATUS_OK;
    for (uint32_t i = 0; i < a->n_options && s == FMOE_STATUS_OK; i++) {
        const fmoe_option *o = a->options[i];
        if (strcmp(o->key, "isa") == 0) {
            s = limit_isa(st, o->value, "option isa", a->err);
        } else if (strcmp(o->key, "threads") == 0) {
            char *end;
            long n = strtol(o->value, &end, 10);
            if (*o->value == '\0' || *end != '\0' || n < 1 || n > MAX_THREADS)
                s = h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT,
                                 "option threads = \"%s\": expected an integer from 1 to %d", o->value, MAX_THREADS);
            else
                st->threads = (uint32_t)n;
        } else {
            s = h->error_set(a->err, FMOE_STATUS_INVALID_ARGUMENT,
                             "unknown option '%s' (the cpu_arm plugin takes: isa, threads)", o->key);
        }
    }
    const char *env = getenv(CARM_ISA_ENV);
    if (s == FMOE_STATUS_OK && env && *env)
        s = limit_isa(st, env, CARM_ISA_ENV, a->err);
    if (s != FMOE_STATUS_OK) {
        h->free(h->ctx, st);
        return s;
    }
    log_line(h, FMOE_PLUGIN_LOG_INFO, "kernels: %s (CPU offers %s)", carm_isa_name(st->isa), carm_isa_name(st->hw_isa));
    a->state = st;
    return FMOE_STATUS_OK;
}

static void arm_shutdown(void *state)
{
    carm_state *st = state;
    if (st)
        st->host->free(st->host->ctx, st);
}

static fmoe_status arm_probe(fmoe_probe_args *a)
{
    const carm_state *st = a->state;
    if (a->capacity < 1 || !st)
        return FMOE_STATUS_OK;
    fmoe_device_report *r = a->reports[0];
    r->kind = FMOE_DEVICE_CPU;
    r->index = 0;
    r->available = 1;
    r->score = (uint32_t)(st->isa + 1) * SCORE_PER_LEVEL;
    snprintf(r->name, sizeof r->name, "Arm CPU (%u threads)", st->threads);
    snprintf(r->arch, sizeof r->arch, "aarch64 asimd%s%s", st->hw_isa >= CARM_ISA_DOTPROD ? " dotprod" : "",
             st->hw_isa >= CARM_ISA_I8MM ? " i8mm" : "");
    snprintf(r->id, sizeof r->id, "cpu");
    snprintf(r->driver, sizeof r->driver, "kernels %s", carm_isa_name(st->isa));
    snprintf(r->reason, sizeof r->reason, "W4A8 kernels: %s%s (from HWCAP: %s)", carm_isa_name(st->isa),
             st->forced ? ", lowered by option isa or " CARM_ISA_ENV : "", carm_isa_name(st->hw_isa));
    a->count = 1;
    return FMOE_STATUS_OK;
}

static fmoe_status arm_query(fmoe_query_args *a)
{
    const carm_state *st = a->state;
    if (!st)
        return FMOE_STATUS_INTERNAL; /* init always runs first */
    char why[256];
    if (!carm_w4a8_serves(a->scheme, a->config, why, sizeof why)) {
        snprintf(a->reason, sizeof a->reason, "%.60s: %.180s", a->scheme_key, why);
        return FMOE_STATUS_UNSUPPORTED;
    }
    if (a->device_kind != FMOE_DEVICE_CPU) {
        snprintf(a->reason, sizeof a->reason, "runs on the host CPU only");
        return FMOE_STATUS_UNSUPPORTED;
    }
    a->method = &carm_method_w4a8;
    a->score = (uint32_t)(st->isa + 1) * SCORE_PER_LEVEL;
    snprintf(a->reason, sizeof a->reason, "%.180s, %s kernels, %u threads", why, carm_isa_name(st->isa), st->threads);
    return FMOE_STATUS_OK;
}

static const fmoe_plugin arm_plugin = {
    .struct_size = sizeof(fmoe_plugin),
    .abi_major = FMOE_ABI_MAJOR,
    .abi_minor = FMOE_ABI_MINOR,
    .name = "cpu_arm",
    .vendor = "fusedmoe",
    .version = FMOE_PLUGIN_VERSION,
    .build_id = "",
    .init = arm_init,
    .probe = arm_probe,
    .query = arm_query,
    .shutdown = arm_shutdown,
};

FMOE_PLUGIN_EXPORT fmoe_status fmoe_plugin_entry(fmoe_entry_args *a)
{
    if (!a || a->struct_size < FMOE_STRUCT_SIZE_UPTO(fmoe_entry_args, plugin) || !a->host)
        return FMOE_STATUS_INVALID_ARGUMENT;
    const fmoe_host *h = a->host;
    if (h->abi_major != FMOE_ABI_MAJOR || h->struct_size < FMOE_STRUCT_SIZE_UPTO(fmoe_host, free))
        return h->struct_size >= FMOE_STRUCT_SIZE_UPTO(fmoe_host, error_set) && h->error_set
                   ? h->error_set(a->err, FMOE_STATUS_ABI_MISMATCH, "cpu_arm plugin speaks ABI %d.x, host %u.%u",
                                  FMOE_ABI_MAJOR, h->abi_major, h->abi_minor)
                   : FMOE_STATUS_ABI_MISMATCH;
    a->plugin = &arm_plugin;
    return FMOE_STATUS_OK;
}
