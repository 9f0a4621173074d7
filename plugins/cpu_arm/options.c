/*
 * plugins/cpu_arm/options.c - the cpu_arm plugin's options: the [[option]]
 * tables of cpu_arm.toml.in, parsed from the text the host hands init
 * (docs/CPU_ARM.md, "Options"). The host checks names and types against the
 * manifest first; this is still the last word (a plugin may be loaded
 * without its manifest), and the defaults here are the manifest's.
 */
#include <string.h>

#include "plugins/cpu_arm/cpu_arm.h"

/* Option isa's values, in CARM_ISA_* order after "auto". */
static const char *const isa_values[] = {"auto", "portable", "dotprod", "i8mm", NULL};

static fmoe_status bad_value(const fmoe_host *h, fmoe_error *err, const fmoe_option *o, const char *expected)
{
    return h->error_set(err, FMOE_STATUS_INVALID_ARGUMENT, "option '%s': expected %s, got '%s'", o->key, expected,
                        o->value ? o->value : "(null)");
}

fmoe_status carm_options_parse(const fmoe_host *h, fmoe_error *err, const fmoe_option *const *options, uint32_t n,
                               carm_options *out)
{
    *out = (carm_options){.isa = CARM_ISA_AUTO, .threads = 0};
    for (uint32_t i = 0; i < n; i++) {
        const fmoe_option *o = options[i];
        if (!o || !o->key)
            return h->error_set(err, FMOE_STATUS_INVALID_ARGUMENT, "option %u has no name", i);
        if (strcmp(o->key, "isa") == 0) {
            int k;
            if (fmoe_option_parse_enum(o->value, isa_values, &k) != 0)
                return bad_value(h, err, o, "auto, portable, dotprod or i8mm");
            out->isa = k == 0 ? CARM_ISA_AUTO : k - 1;
        } else if (strcmp(o->key, "threads") == 0) {
            long long v;
            if (fmoe_option_parse_int(o->value, 0, CARM_MAX_THREADS, &v) != 0)
                return bad_value(h, err, o, "an integer from 0 (the online CPUs) to 64");
            out->threads = (uint32_t)v;
        } else {
            return h->error_set(err, FMOE_STATUS_INVALID_ARGUMENT,
                                "unknown option '%s' (the cpu_arm plugin takes: isa, threads)", o->key);
        }
    }
    return FMOE_STATUS_OK;
}
