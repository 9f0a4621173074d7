/*
 * plugins/cpu/plugin.c - entry point, options, probe and query of the CPU
 * backend (docs/CPU.md).
 *
 * Options ([plugins.cpu.options], declared in cpu.toml.in, parsed in
 * options.c): isa, amx, threads, spin_ms. Nothing happens in the entry
 * point; init detects the ISA and applies the options.
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <dnnl.h>

#include "fusedmoe/kit/cpu_name.h"
#include "plugins/cpu/cpu.h"

/* Device-level score per ISA: above the reference's 1. */
static const uint32_t isa_score[CPU_ISA_COUNT] = {10, 20, 30, 40};
/* The integer methods on the portable kernels: below any plugin with SIMD
 * kernels for the scheme (on aarch64, cpu_arm scores 10-30 for W4A8, and
 * would otherwise tie at 10 and lose on the name), still above the
 * reference. */
#define PORTABLE_INT_SCORE 5

void cpu_log(const fmoe_host *h, int32_t level, const char *fmt, ...)
{
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    h->log(h->ctx, level, text);
}

static uint32_t cpu_count(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return (uint32_t)CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (uint32_t)n : 1;
}

/* What the option amx changed: "" unless it kept the AMX kernel off on
 * kernels that would use it. */
static const char *amx_off_note(const cpu_state *st)
{
    return !st->opt.amx && st->isa >= CPU_ISA_AVX512_BF16 ? "; option amx = false: no amx_bf16" : "";
}

static fmoe_status cpu_init(fmoe_init_args *a)
{
    const fmoe_host *h = a->host;
    cpu_options opt;
    fmoe_status s = cpu_options_parse(h, a->err, a->options, a->n_options, &opt);
    if (s != FMOE_STATUS_OK)
        return s;
    cpu_state *st = h->alloc(h->ctx, sizeof *st, 0);
    if (!st)
        return h->error_set(a->err, FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    memset(st, 0, sizeof *st);
    st->host = h;
    st->opt = opt;
    st->threads = opt.threads ? opt.threads : cpu_count();
    st->spin_ms = opt.spin_ms;
    atomic_init(&st->last_pool, 0);
    st->isa_detected = cpu_isa_detect();
    st->isa = cpu_isa_choose(opt.isa, st->isa_detected, st->isa_note, sizeof st->isa_note);
    if (st->isa_note[0])
        cpu_log(h, st->isa < opt.isa ? FMOE_PLUGIN_LOG_WARN : FMOE_PLUGIN_LOG_INFO, "%s", st->isa_note);
    st->onednn_bf16 = cpu_onednn_bf16_optimized();
    st->amx = st->isa >= CPU_ISA_AVX512_BF16 && opt.amx && cpu_amx_enable();
    cpu_log(h, FMOE_PLUGIN_LOG_INFO, "kernels: %s%s (machine: %s)%s, %u thread(s) per layer, idle spin %u ms",
            cpu_isa_name(st->isa), st->amx ? " + amx_bf16" : "", cpu_isa_name(st->isa_detected), amx_off_note(st),
            st->threads, st->spin_ms);
    a->state = st;
    return FMOE_STATUS_OK;
}

static void cpu_shutdown(void *state)
{
    cpu_state *st = state;
    if (st)
        st->host->free(st->host->ctx, st);
}

static fmoe_status cpu_probe(fmoe_probe_args *a)
{
    const cpu_state *st = a->state;
    if (a->capacity < 1 || !st)
        return FMOE_STATUS_OK;
    fmoe_device_report *r = a->reports[0];
    struct utsname u;
    r->kind = FMOE_DEVICE_CPU;
    r->index = 0;
    r->available = 1;
    r->score = isa_score[st->isa];
    fmoe_cpu_model_name(r->name, sizeof r->name);
    if (!r->name[0])
        snprintf(r->name, sizeof r->name, "host CPU");
    snprintf(r->arch, sizeof r->arch, "%.24s %s", uname(&u) == 0 ? u.machine : "unknown", cpu_isa_name(st->isa));
    snprintf(r->id, sizeof r->id, "cpu");
    const dnnl_version_t *v = dnnl_version();
    snprintf(r->driver, sizeof r->driver, "oneDNN %d.%d.%d", v->major, v->minor, v->patch);
    snprintf(r->reason, sizeof r->reason, "kernels: %s%s (machine and OS: %s)%s%.120s%s, %u thread(s) per layer",
             cpu_isa_name(st->isa), st->amx ? " + amx_bf16" : "", cpu_isa_name(st->isa_detected),
             st->isa_note[0] ? "; " : "", st->isa_note, amx_off_note(st), st->threads);
    a->count = 1;
    return FMOE_STATUS_OK;
}

static fmoe_status cpu_query(fmoe_query_args *a)
{
    const cpu_state *st = a->state;
    const fmoe_scheme *s = a->scheme;
    if (!st)
        return FMOE_STATUS_INTERNAL;
    if (a->device_kind != FMOE_DEVICE_CPU) {
        snprintf(a->reason, sizeof a->reason, "runs on the host CPU only");
        return FMOE_STATUS_UNSUPPORTED;
    }
    char why[3][128];
    const fmoe_method *m = NULL;
    if (cpu_unquantized_serves(s, a->config, why[0], sizeof why[0]))
        m = &cpu_method_unquantized;
    else if (cpu_int8_serves(s, a->config, why[1], sizeof why[1]))
        m = &cpu_method_int8;
    else if (cpu_w4a8_serves(s, a->config, why[2], sizeof why[2]))
        m = &cpu_method_w4a8;
    if (!m) {
        const char *r = s->w_dtype == FMOE_DTYPE_INT8 ? why[1] : s->w_dtype == FMOE_DTYPE_INT4 ? why[2] : why[0];
        snprintf(a->reason, sizeof a->reason,
                 "'%s': %s (cpu serves f32/bf16/f16, int8:channel|tensor/int8:token:dynamic, "
                 "int4:channel|group<8k>/int8:token:dynamic:asym)",
                 a->scheme_key, r);
        return FMOE_STATUS_UNSUPPORTED;
    }
    a->method = m;
    a->score = m != &cpu_method_unquantized && st->isa == CPU_ISA_PORTABLE ? PORTABLE_INT_SCORE : isa_score[st->isa];
    if (m == &cpu_method_unquantized && s->w_dtype == FMOE_DTYPE_BF16 && a->config->act_dtype == FMOE_DTYPE_BF16)
        snprintf(a->reason, sizeof a->reason, "bf16 kernels (%s) for %s, %u thread(s)", cpu_isa_name(st->isa),
                 st->onednn_bf16 ? "experts with few rows, oneDNN matmul (bf16) above"
                                 : "every expert (this oneDNN has no optimized bf16 matmul)",
                 st->threads);
    else if (m == &cpu_method_unquantized)
        snprintf(a->reason, sizeof a->reason, "oneDNN matmul (f32), %u thread(s)", st->threads);
    else
        snprintf(a->reason, sizeof a->reason, "%s int8 dot-product kernels (%s), %u thread(s)", m->name,
                 cpu_isa_name(st->isa), st->threads);
    return FMOE_STATUS_OK;
}

static const fmoe_plugin cpu_plugin = {
    .struct_size = sizeof(fmoe_plugin),
    .abi_major = FMOE_ABI_MAJOR,
    .abi_minor = FMOE_ABI_MINOR,
    .name = "cpu",
    .vendor = "fusedmoe",
    .version = FMOE_PLUGIN_VERSION,
    .build_id = "",
    .init = cpu_init,
    .probe = cpu_probe,
    .query = cpu_query,
    .shutdown = cpu_shutdown,
};

FMOE_DEFINE_PLUGIN_ENTRY(cpu_plugin)
