/*
 * plugins/cpu_arm/plugin.c - entry point, options, probe and query of the
 * Arm W4A8 backend (docs/CPU_ARM.md).
 *
 * Options ([plugins.cpu_arm.options], declared in cpu_arm.toml.in, parsed
 * in options.c): isa = "auto|portable|dotprod|i8mm" (highest kernel level
 * to use; a level the CPU lacks is never used: its kernels would fault),
 * threads (worker threads per apply; 0: the online CPUs).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "plugins/cpu_arm/cpu_arm.h"

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

/* What the option isa did, for the log and the probe: "" for auto. */
static void isa_note(const carm_state *st, char *note, size_t cap)
{
    note[0] = '\0';
    if (st->opt.isa == CARM_ISA_AUTO)
        return;
    if (st->opt.isa > st->hw_isa)
        snprintf(note, cap, "option isa = \"%s\": this CPU lacks it (HWCAP: %s); using %s", carm_isa_name(st->opt.isa),
                 carm_isa_name(st->hw_isa), carm_isa_name(st->isa));
    else
        snprintf(note, cap, "option isa = \"%s\": using %s", carm_isa_name(st->opt.isa), carm_isa_name(st->isa));
}

static fmoe_status arm_init(fmoe_init_args *a)
{
    const fmoe_host *h = a->host;
    carm_options opt;
    fmoe_status s = carm_options_parse(h, a->err, a->options, a->n_options, &opt);
    if (s != FMOE_STATUS_OK)
        return s;
    carm_state *st = h->alloc(h->ctx, sizeof *st, 0);
    if (!st)
        return h->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    memset(st, 0, sizeof *st);
    st->host = h;
    st->opt = opt;
    st->hw_isa = carm_isa_detect();
    st->isa = opt.isa == CARM_ISA_AUTO || opt.isa > st->hw_isa ? st->hw_isa : opt.isa;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    uint32_t online = cpus < 1 ? 1 : cpus > CARM_MAX_THREADS ? CARM_MAX_THREADS : (uint32_t)cpus;
    st->threads = opt.threads ? opt.threads : online;
    char note[160];
    isa_note(st, note, sizeof note);
    if (note[0])
        log_line(h, opt.isa > st->hw_isa ? FMOE_PLUGIN_LOG_WARN : FMOE_PLUGIN_LOG_INFO, "%s", note);
    log_line(h, FMOE_PLUGIN_LOG_INFO, "kernels: %s (CPU offers %s), %u thread(s)", carm_isa_name(st->isa),
             carm_isa_name(st->hw_isa), st->threads);
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
    char note[160];
    isa_note(st, note, sizeof note);
    snprintf(r->reason, sizeof r->reason, "W4A8 kernels: %s (from HWCAP: %s)%s%s", carm_isa_name(st->isa),
             carm_isa_name(st->hw_isa), note[0] ? "; " : "", note);
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

FMOE_DEFINE_PLUGIN_ENTRY(arm_plugin)
