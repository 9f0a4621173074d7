/*
 * tests/cpu/direct_plugin.h - a plugin's table called directly, without
 * libfusedmoe: a minimal host table that keeps the last error text and the
 * log, and helpers to load the built library, run init with a list of
 * options and probe. For the option tests of plugins/cpu and
 * plugins/cpu_arm: they check what init itself accepts and refuses, which
 * the host's manifest check in front of it would otherwise hide.
 *
 * Include once per test program (the callbacks are static).
 */
#ifndef FMOE_TEST_DIRECT_PLUGIN_H
#define FMOE_TEST_DIRECT_PLUGIN_H

#include <check.h>
#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusedmoe/plugin.h"

static char dp_error[512]; /* text of the last error_set */
static char dp_log[4096];  /* every log line since dp_init, '\n'-separated */

static void dp_host_log(void *ctx, int32_t level, const char *msg)
{
    (void)ctx;
    (void)level;
    size_t n = strlen(dp_log);
    snprintf(dp_log + n, sizeof dp_log - n, "%s\n", msg);
}

static fmoe_status dp_host_error_set(fmoe_error *err, fmoe_status st, const char *fmt, ...)
{
    (void)err;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dp_error, sizeof dp_error, fmt, ap);
    va_end(ap);
    return st;
}

static void *dp_host_alloc(void *ctx, size_t n, size_t align)
{
    (void)ctx;
    void *p = NULL;
    return posix_memalign(&p, align ? align : 64, n ? n : 1) == 0 ? p : NULL;
}

static void dp_host_free(void *ctx, void *p)
{
    (void)ctx;
    free(p);
}

static const fmoe_host dp_host = {
    .struct_size = sizeof(fmoe_host),
    .abi_major = FMOE_ABI_MAJOR,
    .abi_minor = FMOE_ABI_MINOR,
    .host_version = "test",
    .log = dp_host_log,
    .error_set = dp_host_error_set,
    .alloc = dp_host_alloc,
    .free = dp_host_free,
};

/* The entry point of the library at `path` (never dlclose'd, as the host). */
static inline fmoe_plugin_entry_fn dp_entry(const char *path)
{
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(lib != NULL, "dlopen %s: %s", path, dlerror());
    fmoe_plugin_entry_fn entry = (fmoe_plugin_entry_fn)(uintptr_t)dlsym(lib, FMOE_PLUGIN_ENTRY_SYMBOL);
    ck_assert_msg(entry != NULL, "%s exports no %s", path, FMOE_PLUGIN_ENTRY_SYMBOL);
    return entry;
}

/* The plugin table of the library at `path`. */
static inline const fmoe_plugin *dp_load(const char *path)
{
    fmoe_entry_args ea = {.struct_size = sizeof ea, .host = &dp_host};
    ck_assert_int_eq(dp_entry(path)(&ea), FMOE_STATUS_OK);
    ck_assert_ptr_nonnull(ea.plugin);
    ck_assert_ptr_nonnull(ea.plugin->init);
    return ea.plugin;
}

/* init with the options kv[0] = kv[1], kv[2] = kv[3], ... (n pairs), as
 * the host hands them. On OK *state is the plugin's; on an error it stays
 * NULL and dp_error holds the text. */
static inline fmoe_status dp_init(const fmoe_plugin *p, const char *const *kv, uint32_t n, void **state)
{
    fmoe_option opts[8];
    const fmoe_option *ptrs[8];
    ck_assert_uint_le(n, 8);
    for (uint32_t i = 0; i < n; i++) {
        opts[i] = (fmoe_option){.struct_size = sizeof opts[i], .key = kv[2 * i], .value = kv[2 * i + 1]};
        ptrs[i] = &opts[i];
    }
    dp_error[0] = '\0';
    dp_log[0] = '\0';
    fmoe_init_args ia = {
        .struct_size = sizeof ia, .host = &dp_host, .abi_minor = FMOE_ABI_MINOR, .options = ptrs, .n_options = n};
    fmoe_status st = p->init(&ia);
    *state = st == FMOE_STATUS_OK ? ia.state : NULL;
    if (st == FMOE_STATUS_OK)
        ck_assert_ptr_nonnull(ia.state);
    return st;
}

/* The one device report of an initialised plugin. */
static inline fmoe_device_report dp_probe(const fmoe_plugin *p, void *state)
{
    fmoe_device_report r;
    memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    fmoe_device_report *reports[1] = {&r};
    fmoe_probe_args pa = {.struct_size = sizeof pa, .state = state, .reports = reports, .capacity = 1};
    ck_assert_int_eq(p->probe(&pa), FMOE_STATUS_OK);
    ck_assert_uint_eq(pa.count, 1);
    return r;
}

/* init must refuse these options with INVALID_ARGUMENT, and its text must
 * contain each of the NULL-terminated `words`. */
static inline void dp_refused(const fmoe_plugin *p, const char *key, const char *value, const char *const *words)
{
    const char *kv[2] = {key, value};
    void *state = (void *)1;
    ck_assert_int_eq(dp_init(p, kv, 1, &state), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_ptr_null(state);
    for (int i = 0; words[i]; i++)
        ck_assert_msg(strstr(dp_error, words[i]) != NULL, "%s = '%s': error \"%s\" lacks \"%s\"", key, value, dp_error,
                      words[i]);
}

/* Two inits keep two states: one with isa = "portable" probes at score
 * 10, one with isa = "auto" at `auto_score`, whichever came first. */
static inline void dp_check_states_apart(const char *path, uint32_t auto_score)
{
    const fmoe_plugin *p = dp_load(path);
    const char *kv_portable[] = {"isa", "portable"}, *kv_auto[] = {"isa", "auto"};
    void *a, *b;
    ck_assert_int_eq(dp_init(p, kv_portable, 1, &a), FMOE_STATUS_OK);
    ck_assert_int_eq(dp_init(p, kv_auto, 1, &b), FMOE_STATUS_OK);
    fmoe_device_report ra = dp_probe(p, a), rb = dp_probe(p, b);
    ck_assert_uint_eq(ra.score, 10);
    ck_assert_uint_eq(rb.score, auto_score);
    p->shutdown(a);
    p->shutdown(b);
}

/* The entry point refuses a host of another ABI major with
 * ABI_MISMATCH, no table, and text naming the plugin `name`. */
static inline void dp_check_entry_refuses_other_major(const char *path, const char *name)
{
    fmoe_host other = dp_host;
    other.abi_major = FMOE_ABI_MAJOR + 1;
    fmoe_entry_args ea = {.struct_size = sizeof ea, .host = &other};
    dp_error[0] = '\0';
    ck_assert_int_eq(dp_entry(path)(&ea), FMOE_STATUS_ABI_MISMATCH);
    ck_assert_ptr_null(ea.plugin);
    char want[96];
    snprintf(want, sizeof want, "plugin '%s'", name);
    ck_assert_msg(strstr(dp_error, want) != NULL, "error \"%s\" lacks \"%s\"", dp_error, want);
}

#endif
