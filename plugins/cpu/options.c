/*
 * plugins/cpu/options.c - the cpu plugin's options: the [[option]] tables
 * of cpu.toml.in, parsed from the text the host hands init (docs/CPU.md,
 * "Options"). The host checks names and types against the manifest first;
 * this is still the last word (a plugin may be loaded without its
 * manifest), and the defaults here are the manifest's.
 */
#include <string.h>

#include "plugins/cpu/cpu.h"

/* Option isa's values, in CPU_ISA_* order after "auto". */
static const char *const isa_values[] = {"auto", "portable", "avx2", "avx512_vnni", "avx512_bf16", NULL};
#define ISA_EXPECTED "auto, portable, avx2, avx512_vnni or avx512_bf16"

#define THREADS_MAX 1024
#define SPIN_MS_MAX 60000
/* How long idle pool threads spin before they sleep: Intel OpenMP's
 * KMP_BLOCKTIME default. An engine calls its MoE layers every few ms; a
 * thread that slept costs a wake-up, which on a VM (the other vCPU halted)
 * measured 50 us to 1.6 ms on the CI machine - a whole decode step. */
#define SPIN_MS_DEFAULT 200

static fmoe_status bad_value(const fmoe_host *h, fmoe_error *err, const fmoe_option *o, const char *expected)
{
    return h->error_set(err, FMOE_STATUS_INVALID_ARGUMENT, "option '%s': expected %s, got '%s'", o->key, expected,
                        o->value ? o->value : "(null)");
}

fmoe_status cpu_options_parse(const fmoe_host *h, fmoe_error *err, const fmoe_option *const *options, uint32_t n,
                              cpu_options *out)
{
    *out = (cpu_options){.isa = CPU_ISA_AUTO, .amx = 1, .threads = 0, .spin_ms = SPIN_MS_DEFAULT};
    for (uint32_t i = 0; i < n; i++) {
        const fmoe_option *o = options[i];
        long long v = 0;
        int k = 0;
        if (!o || !o->key)
            return h->error_set(err, FMOE_STATUS_INVALID_ARGUMENT, "option %u has no name", i);
        if (strcmp(o->key, "isa") == 0) {
            if (fmoe_option_parse_enum(o->value, isa_values, &k) != 0)
                return bad_value(h, err, o, ISA_EXPECTED);
            out->isa = k == 0 ? CPU_ISA_AUTO : k - 1;
        } else if (strcmp(o->key, "amx") == 0) {
            if (fmoe_option_parse_bool(o->value, &k) != 0)
                return bad_value(h, err, o, "true or false");
            out->amx = k;
        } else if (strcmp(o->key, "threads") == 0) {
            if (fmoe_option_parse_int(o->value, 0, THREADS_MAX, &v) != 0)
                return bad_value(h, err, o, "an integer from 0 (one per CPU this process may run on) to 1024");
            out->threads = (uint32_t)v;
        } else if (strcmp(o->key, "spin_ms") == 0) {
            if (fmoe_option_parse_int(o->value, 0, SPIN_MS_MAX, &v) != 0)
                return bad_value(h, err, o, "an integer from 0 to 60000 (milliseconds)");
            out->spin_ms = (uint32_t)v;
        } else {
            return h->error_set(err, FMOE_STATUS_INVALID_ARGUMENT,
                                "unknown option '%s' (the cpu plugin takes: isa, amx, threads, spin_ms)", o->key);
        }
    }
    return FMOE_STATUS_OK;
}
