/*
 * tests/registry/registry_fixtures.h - helpers for the registry tests:
 * temporary directories with manifests written at run time (pointing at
 * the fixture plugins meson built), config files, log capture, lookups.
 */
#ifndef FMOE_TEST_REGISTRY_FIXTURES_H
#define FMOE_TEST_REGISTRY_FIXTURES_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fusedmoe/fusedmoe.h"
#include "fusedmoe/plugin.h"
#include "tests/test_util.h"

/* A fresh directory under $TMPDIR (removed by the OS; tests run in fork children). */
static inline void fx_tempdir(char *out, size_t cap)
{
    const char *base = getenv("TMPDIR");
    snprintf(out, cap, "%s/fmoe-registry-XXXXXX", base && *base ? base : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(out));
}

static inline void fx_write(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

/* Write <dir>/<file> as a manifest for plugin `name` built at `library`. */
static inline void fx_manifest(const char *dir, const char *file, const char *name, const char *library, int abi_major,
                               const char *arch, const char *schemes)
{
    char path[1024], text[2048];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    snprintf(text, sizeof text,
             "name = \"%s\"\nlibrary = \"%s\"\nversion = \"0.0.1\"\nvendor = \"tests\"\n"
             "abi_major = %d\nabi_minor = 0\narch = [\"%s\"]\ndevices = [\"cpu\"]\nschemes = [%s]\n",
             name, library, abi_major, arch, schemes);
    fx_write(path, text);
}

/* Log capture: every line appended to one buffer. */
typedef struct fx_log {
    char text[16384];
    size_t len;
} fx_log;

static inline void fx_log_fn(void *user, int32_t level, const char *category, const char *msg)
{
    fx_log *lg = user;
    int n = snprintf(lg->text + lg->len, sizeof lg->text - lg->len, "%d [%s] %s\n", level, category, msg);
    if (n > 0 && lg->len + (size_t)n < sizeof lg->text)
        lg->len += (size_t)n;
}

/* A context that sees only the given files/config, never what is installed
 * on the machine (isolated), and no environment unless use_env; logging
 * into `lg` (may be NULL). */
static inline fmoe_context *fx_context(const char *const *files, uint32_t n, const char *config, int use_env,
                                       fx_log *lg)
{
    fmoe_context_options o;
    fmoe_context_options_init(&o);
    o.plugin_files = files;
    o.n_plugin_files = n;
    o.config_path = config;
    o.ignore_environment = !use_env;
    o.isolated = 1;
    o.log_fn = lg ? fx_log_fn : NULL;
    o.log_user = lg;
    fmoe_context *ctx = NULL;
    fmoe_status st = fmoe_context_create(&o, &ctx);
    ck_assert_msg(st == FMOE_STATUS_OK, "context: %s", fmoe_last_error());
    return ctx;
}

/* The plugin record named `name`, which must exist (first match). */
static inline fmoe_plugin_info fx_plugin(const fmoe_context *ctx, const char *name)
{
    fmoe_plugin_info info = {.struct_size = sizeof info};
    for (uint32_t i = 0; i < fmoe_context_plugin_count(ctx); i++) {
        ck_assert_int_eq(fmoe_context_plugin(ctx, i, &info), FMOE_STATUS_OK);
        if (strcmp(info.name, name) == 0)
            return info;
    }
    ck_abort_msg("no plugin named %s", name);
    return info;
}

/* A small valid layer config. */
static inline fmoe_layer_config fx_layer(void)
{
    fmoe_layer_config c;
    fmoe_layer_config_init(&c);
    c.num_experts = 4;
    c.top_k = 2;
    c.hidden_size = 8;
    c.intermediate_size = 6;
    c.act_dtype = FMOE_DTYPE_F32;
    return c;
}

#endif
