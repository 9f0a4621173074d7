/*
 * cli/conform/mode_abi.c - `conform --mode abi`: the plugin against the
 * rules of docs/PLUGIN-ABI.md, call by call.
 *
 * The production loader (libfusedmoe, through the context) has already
 * loaded the library. This mode then plays a second host: it takes the
 * entry point from the image already in memory (dlopen with RTLD_NOLOAD,
 * which never loads anything: if the loader had not loaded the file, it
 * fails) and calls it with host tables it controls - older, newer, smaller,
 * larger - and drives init, probe, query and one layer's method calls with
 * every struct and buffer followed by canary bytes (guard.h). For a plugin
 * whose device is not host memory it also checks the memory table it lends
 * (ABI 1.1) and hands apply device buffers from it, canary included.
 *
 * Nothing here needs registry internals, so libfusedmoe exports nothing new
 * for conform (docs/CONFORMANCE.md, "Design").
 */
#include <dlfcn.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/conform/conform.h"
#include "cli/conform/elf_symbols.h"
#include "cli/conform/guard.h"
#include "cli/conform/schemes.h"
#include "cli/halfconv.h"
#include "cli/rng.h"
#include "fusedmoe/plugin.h"

extern char **environ;

int cf_plugin_claims_scheme(const cf_plugin *p, const char *key);

/* Conform is the host here, so the opaque error slot is ours. */
struct fmoe_error {
    fmoe_status status;
    int set;
    char text[256];
};

typedef struct host_stats {
    long allocs, frees, logs;
} host_stats;

static host_stats stats;

static void h_log(void *ctx, int32_t level, const char *msg)
{
    (void)ctx;
    (void)level;
    (void)msg;
    __atomic_fetch_add(&stats.logs, 1, __ATOMIC_RELAXED);
}

static fmoe_status h_error_set(fmoe_error *err, fmoe_status status, const char *fmt, ...)
{
    if (!err)
        return status;
    err->status = status;
    err->set = 1;
    err->text[0] = '\0';
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->text, sizeof err->text, fmt, ap);
        va_end(ap);
    }
    return status;
}

static void *h_alloc(void *ctx, size_t size, size_t alignment)
{
    (void)ctx;
    if (alignment == 0)
        alignment = 64;
    if (alignment & (alignment - 1) || size > SIZE_MAX - alignment)
        return NULL;
    void *p = aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment + alignment);
    if (p)
        __atomic_fetch_add(&stats.allocs, 1, __ATOMIC_RELAXED);
    return p;
}

static void h_free(void *ctx, void *p)
{
    (void)ctx;
    if (p)
        __atomic_fetch_add(&stats.frees, 1, __ATOMIC_RELAXED);
    free(p);
}

/* A host table of `size` bytes (>= sizeof: the tail is zero, as fields a
 * newer host appended would be to an older plugin that does not read them). */
static fmoe_host *make_host(size_t size, uint32_t major, uint32_t minor, int fenced)
{
    size_t alloc = size > sizeof(fmoe_host) ? size : sizeof(fmoe_host);
    fmoe_host *h = fenced ? cf_fenced_alloc(size) : cf_guarded_alloc(alloc);
    if (!h)
        return NULL;
    fmoe_host full = {.struct_size = size,
                      .abi_major = major,
                      .abi_minor = minor,
                      .host_version = fmoe_version(),
                      .ctx = &stats,
                      .log = h_log,
                      .error_set = h_error_set,
                      .alloc = h_alloc,
                      .free = h_free};
    memcpy(h, &full, size < sizeof full ? size : sizeof full);
    return h;
}

static void free_host(fmoe_host *h, size_t size, int fenced)
{
    if (fenced)
        cf_fenced_free(h, size);
    else
        cf_guarded_free(h);
}

static fmoe_plugin_entry_fn find_entry(const cf_plugin *p, char *why, size_t cap)
{
    dlerror();
    void *handle = dlopen(p->path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (!handle) {
        snprintf(why, cap, "%s is not in memory: the production loader did not load it (%s)", p->path,
                 dlerror() ? "dlopen RTLD_NOLOAD failed" : "unknown");
        return NULL;
    }
    fmoe_plugin_entry_fn entry;
    *(void **)&entry = dlsym(handle, FMOE_PLUGIN_ENTRY_SYMBOL);
    /* Drop the reference NOLOAD took; the loader's own keeps it resident. */
    dlclose(handle);
    if (!entry)
        snprintf(why, cap, "no symbol %s", FMOE_PLUGIN_ENTRY_SYMBOL);
    return entry;
}

/* Call the entry with a host of `host_size` bytes and entry args of
 * `args_size` bytes. */
typedef struct entry_call {
    fmoe_status st;
    const fmoe_plugin *table;
    fmoe_error err;
    int guards_ok;   /* canaries after the args and the host intact */
    int tail_clean;  /* bytes past the known fields still zero */
    int host_intact; /* the host table was not written */
} entry_call;

static int zero_tail(const void *p, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++)
        if (((const unsigned char *)p)[i])
            return 0;
    return 1;
}

static int call_entry(fmoe_plugin_entry_fn entry, size_t host_size, uint32_t major, uint32_t minor, int host_fenced,
                      size_t args_size, entry_call *out)
{
    memset(out, 0, sizeof *out);
    fmoe_host *h = make_host(host_size, major, minor, host_fenced);
    size_t alloc = args_size > sizeof(fmoe_entry_args) ? args_size : sizeof(fmoe_entry_args);
    fmoe_entry_args *a = cf_guarded_alloc(alloc);
    if (!h || !a) {
        free_host(h, host_size, host_fenced);
        cf_guarded_free(a);
        return -1;
    }
    unsigned char host_copy[sizeof(fmoe_host) + 64] = {0};
    memcpy(host_copy, h, host_size < sizeof host_copy ? host_size : sizeof host_copy);
    a->struct_size = args_size;
    a->host = h;
    a->err = &out->err;
    out->st = entry(a);
    if (args_size >= FMOE_STRUCT_SIZE_UPTO(fmoe_entry_args, plugin))
        out->table = a->plugin;
    else
        out->table = NULL;
    out->guards_ok = cf_guard_intact(a) && (host_fenced || cf_guard_intact(h));
    /* A short args struct: nothing past args_size may change (the canary
     * starts at sizeof, so check the bytes in between too). */
    out->tail_clean = args_size >= sizeof *a || zero_tail(a, args_size, sizeof *a);
    if (args_size > sizeof *a)
        out->tail_clean = zero_tail(a, sizeof *a, args_size);
    out->host_intact = memcmp(host_copy, h, host_size < sizeof host_copy ? host_size : sizeof host_copy) == 0;
    free_host(h, host_size, host_fenced);
    cf_guarded_free(a);
    return 0;
}

/* --- the cases ----------------------------------------------------------- */

static void case_exports(cf_run *r)
{
    if (!cf_begin(r, "exports"))
        return;
    cf_elf_exports ex;
    char why[256];
    if (cf_elf_read_exports(r->plugin->path, &ex, why, sizeof why) != 0) {
        cf_end(r, CF_FAIL, "cannot read the dynamic symbol table of %s: %s", r->plugin->path, why);
        return;
    }
    if (ex.n_defined == 1 && ex.entry_is_func) {
        cf_end(r, CF_PASS, "exports only %s", FMOE_PLUGIN_ENTRY_SYMBOL);
        return;
    }
    char list[1024] = "";
    for (size_t i = 0; i < ex.n_defined && i < 16; i++) {
        size_t len = strlen(list);
        snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", ex.names[i]);
    }
    cf_end(r, CF_FAIL,
           "exports %zu symbols (%s%s), expected exactly one function %s: build with hidden "
           "visibility and a version script",
           ex.n_defined, list, ex.n_defined > 16 ? ", ..." : "", FMOE_PLUGIN_ENTRY_SYMBOL);
}

static void case_no_libfusedmoe(cf_run *r)
{
    if (!cf_begin(r, "no-libfusedmoe"))
        return;
    cf_elf_exports ex;
    char why[256];
    if (cf_elf_read_exports(r->plugin->path, &ex, why, sizeof why) != 0) {
        cf_end(r, CF_FAIL, "cannot read %s: %s", r->plugin->path, why);
        return;
    }
    for (size_t i = 0; i < ex.n_needed && i < 32; i++)
        if (strncmp(ex.needed[i], "libfusedmoe.so", 14) == 0) {
            cf_end(r, CF_FAIL, "links %s: plugins take everything from the host table instead", ex.needed[i]);
            return;
        }
    cf_end(r, CF_PASS, NULL);
}

static int check_table(const cf_plugin *p, const fmoe_plugin *t, char *why, size_t cap)
{
    if (!t)
        return snprintf(why, cap, "entry returned OK but no table"), 0;
    if (t->struct_size < FMOE_STRUCT_SIZE_UPTO(fmoe_plugin, query))
        return snprintf(why, cap, "table struct_size %zu is below the ABI 1.0 minimum %zu", t->struct_size,
                        (size_t)FMOE_STRUCT_SIZE_UPTO(fmoe_plugin, query)),
               0;
    if (t->abi_major != FMOE_ABI_MAJOR)
        return snprintf(why, cap, "table says ABI major %u, host %d", t->abi_major, FMOE_ABI_MAJOR), 0;
    if (!t->name || !t->vendor || !t->version || !t->version[0] || !t->vendor[0])
        return snprintf(why, cap, "name, vendor and version must be non-empty strings"), 0;
    if (p->manifest[0] && strcmp(t->name, p->name) != 0)
        return snprintf(why, cap, "table name '%s' differs from the manifest's '%s'", t->name, p->name), 0;
    if (!t->probe || !t->query)
        return snprintf(why, cap, "mandatory slot %s is NULL", !t->probe ? "probe" : "query"), 0;
    return 1;
}

static const fmoe_plugin *case_entry_same(cf_run *r, fmoe_plugin_entry_fn entry)
{
    entry_call c;
    if (call_entry(entry, sizeof(fmoe_host), FMOE_ABI_MAJOR, FMOE_ABI_MINOR, 0, sizeof(fmoe_entry_args), &c) != 0)
        return NULL;
    char why[512];
    int ok = c.st == FMOE_STATUS_OK && check_table(r->plugin, c.table, why, sizeof why);
    if (cf_begin(r, "entry-same-host")) {
        if (c.st != FMOE_STATUS_OK)
            cf_end(r, CF_FAIL, "entry refused a host of its own ABI %d.%d (%s): %s", FMOE_ABI_MAJOR, FMOE_ABI_MINOR,
                   fmoe_status_name(c.st), c.err.text);
        else if (!ok)
            cf_end(r, CF_FAIL, "%s", why);
        else if (!c.guards_ok || !c.host_intact)
            cf_end(r, CF_FAIL, "entry wrote %s",
                   !c.guards_ok ? "past its args or the host table" : "into the host table");
        else
            cf_end(r, CF_PASS, "%s %s (%s), built for ABI %u.%u", c.table->name, c.table->version, c.table->vendor,
                   c.table->abi_major, c.table->abi_minor);
    }
    return ok ? c.table : NULL;
}

static void case_entry_variant(cf_run *r, fmoe_plugin_entry_fn entry, const char *id, size_t host_size, uint32_t major,
                               uint32_t minor, int fenced, size_t args_size, int must_accept, const char *rule)
{
    if (!cf_begin(r, "%s", id))
        return;
    entry_call c;
    if (call_entry(entry, host_size, major, minor, fenced, args_size, &c) != 0) {
        cf_end(r, CF_FAIL, "out of memory");
        return;
    }
    if (!c.guards_ok || !c.tail_clean) {
        cf_end(r, CF_FAIL, "entry wrote past the struct_size it was given (%s)", rule);
        return;
    }
    if (!c.host_intact) {
        cf_end(r, CF_FAIL, "entry wrote into the host table");
        return;
    }
    if (must_accept && c.st != FMOE_STATUS_OK) {
        cf_end(r, CF_FAIL, "entry refused (%s: %s); %s", fmoe_status_name(c.st), c.err.text, rule);
        return;
    }
    if (must_accept && c.table && (c.table->abi_major != FMOE_ABI_MAJOR)) {
        cf_end(r, CF_FAIL, "table reports ABI major %u", c.table->abi_major);
        return;
    }
    if (!must_accept && c.st == FMOE_STATUS_OK) {
        cf_end(r, CF_FAIL, "entry accepted; %s", rule);
        return;
    }
    if (!must_accept && (!c.err.set || !c.err.text[0]) && c.st == FMOE_STATUS_ABI_MISMATCH && major != FMOE_ABI_MAJOR) {
        cf_end(r, CF_FAIL, "refused with %s but set no error text through host->error_set", fmoe_status_name(c.st));
        return;
    }
    if (!must_accept && major != FMOE_ABI_MAJOR && c.st != FMOE_STATUS_ABI_MISMATCH) {
        cf_end(r, CF_FAIL, "refused with %s, expected abi-mismatch (plugin.h: entry)", fmoe_status_name(c.st));
        return;
    }
    cf_end(r, CF_PASS, "%s (%s)", fmoe_status_name(c.st), rule);
}

/* init with a host that stays valid until shutdown. */
typedef struct session {
    const fmoe_plugin *t;
    fmoe_host *host;
    void *state;
    int inited;
} session;

static int session_open(cf_run *r, const fmoe_plugin *t, session *s)
{
    memset(s, 0, sizeof *s);
    s->t = t;
    s->host = make_host(sizeof(fmoe_host), FMOE_ABI_MAJOR, FMOE_ABI_MINOR, 0);
    if (!s->host)
        return 0;
    if (!FMOE_HAS_FIELD(t, init) || !t->init) {
        s->inited = 1;
        return 1;
    }
    fmoe_error err = {0};
    fmoe_init_args *a = cf_guarded_alloc(sizeof *a);
    if (!a)
        return 0;
    *a = (fmoe_init_args){.struct_size = sizeof *a, .err = &err, .host = s->host, .abi_minor = FMOE_ABI_MINOR};
    fmoe_status st = t->init(a);
    int guard = cf_guard_intact(a);
    s->state = a->state;
    cf_guarded_free(a);
    if (cf_begin(r, "init")) {
        if (st != FMOE_STATUS_OK)
            cf_end(r, CF_FAIL, "init failed (%s): %s", fmoe_status_name(st), err.text);
        else if (!guard)
            cf_end(r, CF_FAIL, "init wrote past fmoe_init_args");
        else
            cf_end(r, CF_PASS, NULL);
    }
    s->inited = st == FMOE_STATUS_OK;
    return s->inited;
}

static void session_close(cf_run *r, session *s)
{
    if (s->inited && FMOE_HAS_FIELD(s->t, shutdown) && s->t->shutdown)
        s->t->shutdown(s->state);
    cf_guarded_free(s->host);
    if (cf_begin(r, "host-memory")) {
        if (stats.allocs != stats.frees)
            cf_end(r, CF_FAIL, "%ld host->alloc calls but %ld host->free calls by shutdown (a leak)", stats.allocs,
                   stats.frees);
        else
            cf_end(r, CF_PASS, "%ld allocations, all freed", stats.allocs);
    }
}

/* Bytes written through write(2) and friends by this process so far. */
static long long io_wchar(void)
{
    FILE *f = fopen("/proc/self/io", "r");
    if (!f)
        return -1;
    char line[128];
    long long v = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "wchar: %lld", &v) == 1)
            break;
    fclose(f);
    return v;
}

typedef struct probe_result {
    fmoe_status st;
    uint32_t count;
    fmoe_device_report *reports; /* guarded each */
    int guards_ok;
    char err[512];
} probe_result;

static void probe_free(probe_result *p, uint32_t capacity)
{
    for (uint32_t i = 0; p->reports && i < capacity; i++)
        cf_guarded_free(((fmoe_device_report **)(void *)p->reports)[i]);
    free(p->reports);
}

/* Probe with `capacity` reports of `report_size` bytes each. */
static void run_probe(const session *s, uint32_t capacity, size_t report_size, probe_result *out)
{
    memset(out, 0, sizeof *out);
    fmoe_device_report **reps = calloc(capacity + 1, sizeof *reps);
    fmoe_probe_args *a = cf_guarded_alloc(sizeof *a);
    out->reports = (fmoe_device_report *)(void *)reps;
    if (!reps || !a) {
        cf_guarded_free(a);
        out->st = FMOE_STATUS_OUT_OF_MEMORY;
        return;
    }
    for (uint32_t i = 0; i < capacity; i++) {
        reps[i] = cf_guarded_alloc(report_size);
        if (reps[i])
            reps[i]->struct_size = report_size;
    }
    fmoe_error err = {0};
    *a = (fmoe_probe_args){.struct_size = sizeof *a,
                           .err = &err,
                           .state = s->state,
                           .reports = (fmoe_device_report *const *)reps,
                           .capacity = capacity};
    out->st = s->t->probe(a);
    out->count = a->count;
    out->guards_ok = cf_guard_intact(a);
    for (uint32_t i = 0; i < capacity; i++)
        if (!cf_guard_intact(reps[i])) /* the canary starts right at report_size */
            out->guards_ok = 0;
    snprintf(out->err, sizeof out->err, "%s", err.text);
    cf_guarded_free(a);
}

static fmoe_device_report *report_at(const probe_result *p, uint32_t i)
{
    return ((fmoe_device_report **)(void *)p->reports)[i];
}

static int reports_equal(const fmoe_device_report *a, const fmoe_device_report *b)
{
    return a->kind == b->kind && a->index == b->index && a->available == b->available && a->score == b->score &&
           strncmp(a->name, b->name, sizeof a->name) == 0 && strncmp(a->arch, b->arch, sizeof a->arch) == 0 &&
           strncmp(a->id, b->id, sizeof a->id) == 0 && strncmp(a->driver, b->driver, sizeof a->driver) == 0;
}

static void case_probe(cf_run *r, const session *s, int32_t *dev_kind, int32_t *dev_index)
{
    enum { CAP = 16 };
    *dev_kind = FMOE_DEVICE_ANY;
    long long w0 = io_wchar();
    probe_result p1, p2;
    run_probe(s, CAP, sizeof(fmoe_device_report), &p1);
    run_probe(s, CAP, sizeof(fmoe_device_report), &p2);
    long long w1 = io_wchar();
    for (uint32_t i = 0; p1.st == FMOE_STATUS_OK && i < p1.count && i < CAP; i++)
        if (report_at(&p1, i)->available && *dev_kind == FMOE_DEVICE_ANY) {
            *dev_kind = report_at(&p1, i)->kind;
            *dev_index = report_at(&p1, i)->index;
        }
    if (cf_begin(r, "probe-twice")) {
        int same = p1.st == p2.st && p1.count == p2.count;
        for (uint32_t i = 0; same && i < p1.count && i < CAP; i++)
            same = reports_equal(report_at(&p1, i), report_at(&p2, i));
        if (p1.st != FMOE_STATUS_OK)
            cf_end(r, CF_FAIL, "probe failed (%s: %s); it must never be fatal (R7)", fmoe_status_name(p1.st), p1.err);
        else if (p1.count > CAP)
            cf_end(r, CF_FAIL, "probe reported %u devices into %d slots", p1.count, CAP);
        else if (!p1.guards_ok || !p2.guards_ok)
            cf_end(r, CF_FAIL, "probe wrote past fmoe_probe_args or a device report");
        else if (!same)
            cf_end(r, CF_FAIL, "two probes gave different answers (probe must not change observable state)");
        else if (w0 >= 0 && w1 > w0)
            cf_end(r, CF_FAIL,
                   "probe wrote %lld bytes to files or streams (it must have no side effects; log "
                   "through host->log)",
                   w1 - w0);
        else
            cf_end(r, CF_PASS, "%u device(s), same answers twice, no writes", p1.count);
    }
    probe_free(&p1, CAP);
    probe_free(&p2, CAP);

    if (cf_begin(r, "probe-no-room")) {
        probe_result p;
        run_probe(s, 0, sizeof(fmoe_device_report), &p);
        if (p.st != FMOE_STATUS_OK)
            cf_end(r, CF_FAIL, "probe with capacity 0 failed (%s: %s)", fmoe_status_name(p.st), p.err);
        else if (p.count != 0 || !p.guards_ok)
            cf_end(r, CF_FAIL, "probe with capacity 0 reported %u devices%s", p.count,
                   p.guards_ok ? "" : " and wrote past its args");
        else
            cf_end(r, CF_PASS, NULL);
        probe_free(&p, 0);
    }
    if (cf_begin(r, "probe-report-small")) {
        /* An ABI 1.0 host that knew reports only up to `reason`. */
        size_t small = FMOE_STRUCT_SIZE_UPTO(fmoe_device_report, reason);
        probe_result p;
        run_probe(s, CAP, small, &p);
        if (p.st != FMOE_STATUS_OK)
            cf_end(r, CF_FAIL, "probe failed with shorter reports (%s: %s)", fmoe_status_name(p.st), p.err);
        else if (!p.guards_ok)
            cf_end(r, CF_FAIL,
                   "probe wrote past the report struct_size %zu it was given (a field it did not check "
                   "with FMOE_HAS_FIELD, R1)",
                   small);
        else
            cf_end(r, CF_PASS, NULL);
        probe_free(&p, CAP);
    }
}

/* `fusedmoe plugins --json` in a child with every GPU hidden: the plugin
 * must still load (probe reports no device; it never fails). */
static void case_no_device(cf_run *r)
{
    if (!cf_begin(r, "probe-no-device"))
        return;
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) {
        cf_end(r, CF_UNSUPPORTED, "cannot find this executable (/proc/self/exe)");
        return;
    }
    exe[len] = '\0';
    const char *file = r->plugin->manifest[0] ? r->plugin->manifest : r->plugin->path;
    char *argv[8];
    int n = 0;
    argv[n++] = exe;
    if (r->g->config_path) {
        argv[n++] = "--config";
        argv[n++] = (char *)r->g->config_path;
    }
    argv[n++] = "--plugin";
    argv[n++] = (char *)file;
    argv[n++] = "plugins";
    argv[n++] = "--json";
    argv[n] = NULL;
    size_t ne = 0;
    while (environ[ne])
        ne++;
    char **env = calloc(ne + 4, sizeof *env);
    int fds[2];
    if (!env || pipe(fds) != 0) {
        free(env);
        cf_end(r, CF_FAIL, "cannot start a child process");
        return;
    }
    size_t k = 0;
    for (size_t i = 0; i < ne; i++)
        if (strncmp(environ[i], "CUDA_VISIBLE_DEVICES=", 21) && strncmp(environ[i], "HIP_VISIBLE_DEVICES=", 20) &&
            strncmp(environ[i], "ROCR_VISIBLE_DEVICES=", 21))
            env[k++] = environ[i];
    env[k++] = "CUDA_VISIBLE_DEVICES=";
    env[k++] = "HIP_VISIBLE_DEVICES=";
    env[k++] = "ROCR_VISIBLE_DEVICES=";
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", 1 /* O_WRONLY */, 0);
    pid_t pid;
    int sp = posix_spawn(&pid, exe, &fa, NULL, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    free(env);
    if (sp != 0) {
        /* The child could not be exec'd at all (e.g. an emulated aarch64
         * binary under qemu-user without binfmt_misc): nothing was tested. */
        close(fds[0]);
        cf_end(r, CF_UNSUPPORTED, "cannot start a child %s here (%s)", exe, strerror(sp));
        return;
    }
    FILE *f = fdopen(fds[0], "r");
    json_error_t jerr;
    json_t *doc = f ? json_loadf(f, 0, &jerr) : NULL;
    if (f)
        fclose(f);
    int status = 0;
    waitpid(pid, &status, 0);
    const char *state = NULL, *reason = NULL;
    json_t *plugins = json_object_get(doc, "plugins"), *it;
    size_t i;
    json_array_foreach(plugins, i, it) {
        const char *name = json_string_value(json_object_get(it, "name"));
        if (name && strcmp(name, r->plugin->name) == 0 && !state) {
            state = json_string_value(json_object_get(it, "state"));
            reason = json_string_value(json_object_get(it, "reason"));
        }
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127 && !doc)
        /* posix_spawn's child reports a failed exec as exit 127: no run. */
        cf_end(r, CF_UNSUPPORTED,
               "the child %s could not be exec'd here (exit 127, e.g. qemu-user without "
               "binfmt_misc)",
               exe);
    else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        cf_end(r, CF_FAIL, "'fusedmoe plugins' with no visible GPU %s", WIFSIGNALED(status) ? "crashed" : "failed");
    else if (!state || strcmp(state, "loaded") != 0)
        cf_end(r, CF_FAIL, "with no visible GPU the plugin is %s: %s (probe must report available = 0, not fail)",
               state ? state : "missing", reason ? reason : "");
    else
        cf_end(r, CF_PASS, "loads with CUDA/HIP/ROCR_VISIBLE_DEVICES empty");
    json_decref(doc);
}

/* --- device memory (ABI 1.1) --------------------------------------------- */

/* The plugin's own fmoe_device_memory, called by this host with guarded
 * args (cf_device_ops for guard.h's device buffers). */
typedef struct table_memory {
    const session *s;
    const fmoe_device_memory *mem;
    int32_t kind, index;
} table_memory;

static void *tm_alloc(void *ctx, size_t bytes, char *why, size_t cap)
{
    const table_memory *m = ctx;
    fmoe_memory_args *a = cf_guarded_alloc(sizeof *a);
    fmoe_error err = {0};
    if (!a) {
        snprintf(why, cap, "out of memory");
        return NULL;
    }
    *a = (fmoe_memory_args){.struct_size = sizeof *a,
                            .err = &err,
                            .state = m->s->state,
                            .device_kind = m->kind,
                            .device_index = m->index,
                            .bytes = bytes};
    fmoe_status st = m->mem->alloc(a);
    void *p = st == FMOE_STATUS_OK ? a->ptr : NULL;
    if (!cf_guard_intact(a))
        snprintf(why, cap, "memory.alloc wrote past fmoe_memory_args");
    else if (st != FMOE_STATUS_OK || !p)
        snprintf(why, cap, "memory.alloc of %zu bytes on %s:%d failed (%s): %s", bytes, fmoe_device_kind_name(m->kind),
                 m->index, fmoe_status_name(st), st ? err.text : "no pointer");
    else if ((uintptr_t)p % 256)
        snprintf(why, cap, "memory.alloc returned %p, not aligned to 256 bytes (§6a)", p);
    if (p && (!cf_guard_intact(a) || (uintptr_t)p % 256)) {
        a->ptr = p;
        m->mem->free(a);
        p = NULL;
    }
    cf_guarded_free(a);
    return p;
}

static int tm_copy(void *ctx, void *dst, const void *src, size_t bytes, int to_device, char *why, size_t cap)
{
    const table_memory *m = ctx;
    fmoe_copy_args *a = cf_guarded_alloc(sizeof *a);
    fmoe_error err = {0};
    if (!a) {
        snprintf(why, cap, "out of memory");
        return -1;
    }
    *a = (fmoe_copy_args){.struct_size = sizeof *a,
                          .err = &err,
                          .state = m->s->state,
                          .device_kind = m->kind,
                          .device_index = m->index,
                          .direction = to_device ? FMOE_COPY_TO_DEVICE : FMOE_COPY_FROM_DEVICE,
                          .dst = dst,
                          .src = src,
                          .bytes = bytes};
    fmoe_status st = m->mem->copy(a);
    int guard = cf_guard_intact(a);
    cf_guarded_free(a);
    if (!guard)
        snprintf(why, cap, "memory.copy wrote past fmoe_copy_args");
    else if (st != FMOE_STATUS_OK)
        snprintf(why, cap, "memory.copy of %zu bytes %s %s:%d failed (%s): %s", bytes, to_device ? "to" : "from",
                 fmoe_device_kind_name(m->kind), m->index, fmoe_status_name(st), err.text);
    return guard && st == FMOE_STATUS_OK ? 0 : -1;
}

static void tm_free(void *ctx, void *ptr)
{
    const table_memory *m = ctx;
    fmoe_memory_args a = {
        .struct_size = sizeof a, .state = m->s->state, .device_kind = m->kind, .device_index = m->index, .ptr = ptr};
    m->mem->free(&a);
}

/* Wait for the device: 0, or -1 with `why`. */
static int tm_sync(const table_memory *m, char *why, size_t cap)
{
    fmoe_sync_args *a = cf_guarded_alloc(sizeof *a);
    fmoe_error err = {0};
    if (!a)
        return snprintf(why, cap, "out of memory"), -1;
    *a = (fmoe_sync_args){
        .struct_size = sizeof *a, .err = &err, .state = m->s->state, .device_kind = m->kind, .device_index = m->index};
    fmoe_status st = m->mem->synchronize(a);
    int guard = cf_guard_intact(a);
    cf_guarded_free(a);
    if (!guard)
        return snprintf(why, cap, "memory.synchronize wrote past fmoe_sync_args"), -1;
    if (st != FMOE_STATUS_OK)
        return snprintf(why, cap, "memory.synchronize failed (%s): %s", fmoe_status_name(st), err.text), -1;
    return 0;
}

static cf_device_ops table_ops(table_memory *m)
{
    return (cf_device_ops){.ctx = m, .alloc = tm_alloc, .copy = tm_copy, .free = tm_free};
}

/* The table the host would use (core/layer_memory.c's rule), or NULL with
 * the reason and whether that is a failure. */
static const fmoe_device_memory *memory_table(const fmoe_plugin *t, int *bad, char *why, size_t cap)
{
    *bad = 0;
    if (t->abi_minor < 1 || !FMOE_HAS_FIELD(t, memory) || !t->memory) {
        snprintf(why, cap,
                 "the plugin lends no device memory (ABI 1.1 fmoe_plugin.memory), so conform, which links "
                 "no device runtime, cannot give its layers device tensors");
        return NULL;
    }
    const fmoe_device_memory *m = t->memory;
    *bad = 1;
    if (m->struct_size < FMOE_STRUCT_SIZE_UPTO(fmoe_device_memory, synchronize))
        snprintf(why, cap, "memory table struct_size %zu is below ABI 1.1's %zu: the host ignores it", m->struct_size,
                 (size_t)FMOE_STRUCT_SIZE_UPTO(fmoe_device_memory, synchronize));
    else if (!m->alloc || !m->free || !m->copy || !m->synchronize)
        snprintf(why, cap, "memory.%s is NULL (all four are mandatory): the host ignores the table",
                 !m->alloc  ? "alloc"
                 : !m->free ? "free"
                 : !m->copy ? "copy"
                            : "synchronize");
    else
        return *bad = 0, m;
    return NULL;
}

/* A round trip through the device: alloc (aligned, guarded args), copy in
 * and back (same bytes, nothing written past the host buffer),
 * synchronize, free(NULL), free. 1, or 0 with `why`. */
static int memory_round_trip(table_memory *m, char *why, size_t cap)
{
    enum { N = 1000 }; /* not a multiple of the alignment */
    const cf_device_ops ops = table_ops(m);
    unsigned char *in = malloc(N), *back = cf_guarded_alloc(N);
    void *dev = NULL;
    int ok = 0;
    if (!in || !back) {
        snprintf(why, cap, "out of memory");
        goto done;
    }
    for (int i = 0; i < N; i++)
        in[i] = (unsigned char)(i * 7 + 3);
    if (!(dev = tm_alloc(m, N, why, cap)) || tm_copy(m, dev, in, N, 1, why, cap) ||
        tm_copy(m, back, dev, N, 0, why, cap) || tm_sync(m, why, cap))
        goto done;
    if (memcmp(in, back, N) != 0)
        snprintf(why, cap, "%d bytes copied to %s:%d and back came back different", N, fmoe_device_kind_name(m->kind),
                 m->index);
    else if (!cf_guard_intact(back))
        snprintf(why, cap, "memory.copy from the device wrote past the %d bytes it was asked for", N);
    else
        ok = 1;
done:
    ops.free(ops.ctx, NULL); /* a no-op (§6a) */
    if (dev)
        ops.free(ops.ctx, dev);
    free(in);
    cf_guarded_free(back);
    return ok;
}

/* abi/device-memory, for a plugin whose device is not host memory: the
 * table the host uses to give its layers device tensors. Returns that
 * table when it can be used, else NULL. */
static const fmoe_device_memory *case_device_memory(cf_run *r, const session *s, int32_t kind, int32_t index)
{
    char why[512];
    int bad;
    const fmoe_device_memory *mem = memory_table(s->t, &bad, why, sizeof why);
    table_memory m = {.s = s, .mem = mem, .kind = kind, .index = index};
    if (mem && !memory_round_trip(&m, why, sizeof why)) {
        mem = NULL;
        bad = 1;
    }
    if (cf_begin(r, "device-memory")) {
        if (mem)
            cf_end(r, CF_PASS, "%s:%d: alloc aligned to 256, copies both ways, synchronize, free",
                   fmoe_device_kind_name(kind), index);
        else
            cf_end(r, bad ? CF_FAIL : CF_UNSUPPORTED, "%s", why);
    }
    return mem;
}

/* --- one layer's method calls, every struct and buffer guarded ---------- */

static int method_ok(const fmoe_method *m, char *why, size_t cap)
{
    if (m->struct_size < FMOE_STRUCT_SIZE_UPTO(fmoe_method, destroy))
        return snprintf(why, cap, "method struct_size %zu below the ABI 1.0 minimum %zu", m->struct_size,
                        (size_t)FMOE_STRUCT_SIZE_UPTO(fmoe_method, destroy)),
               0;
    if (!m->name || !m->name[0])
        return snprintf(why, cap, "method has no name"), 0;
    if (!m->create || !m->declare_params || !m->finalize || !m->destroy)
        return snprintf(why, cap, "method '%s': mandatory slot %s is NULL", m->name,
                        !m->create           ? "create"
                        : !m->declare_params ? "declare_params"
                        : !m->finalize       ? "finalize"
                                             : "destroy"),
               0;
    if (!m->apply && !m->apply_logits)
        return snprintf(why, cap, "method '%s' has neither apply nor apply_logits", m->name), 0;
    return 1;
}

/* Query (guarded, twice: same answer) for the first scheme the manifest
 * claims on the base layer; returns the method or NULL. */
static const fmoe_method *case_query(cf_run *r, const session *s, int32_t kind, int32_t index, fmoe_layer_config *cfg,
                                     fmoe_scheme *scheme, const cf_scheme **cs_out)
{
    const fmoe_method *found = NULL;
    int any = 0, bad = 0;
    char why[512] = "";
    for (size_t i = 0; i < cf_n_schemes && !found && !bad; i++) {
        const cf_scheme *cs = &cf_schemes[i];
        if (!cf_plugin_claims_scheme(r->plugin, cs->key) || !cs->store)
            continue;
        fmoe_layer_config_init(cfg);
        cfg->num_experts = 8;
        cfg->top_k = 2;
        cfg->hidden_size = 64;
        cfg->intermediate_size = 32;
        cfg->act_dtype = cs->act_dtype;
        cfg->max_num_tokens = 64;
        *scheme = (fmoe_scheme){.struct_size = sizeof *scheme};
        fmoe_scheme_parse(cs->key, scheme);
        fmoe_query_args res[2];
        for (int k = 0; k < 2; k++) {
            fmoe_query_args *a = cf_guarded_alloc(sizeof *a + 64);
            fmoe_error err = {0};
            if (!a)
                return NULL;
            /* a newer host's args: 64 more bytes the plugin must leave alone */
            *a = (fmoe_query_args){.struct_size = sizeof *a + 64,
                                   .err = &err,
                                   .state = s->state,
                                   .config = cfg,
                                   .scheme = scheme,
                                   .scheme_key = cs->key,
                                   .device_kind = kind,
                                   .device_index = index};
            fmoe_status st = s->t->query(a);
            if (!cf_guard_intact(a) || !zero_tail(a, sizeof *a, sizeof *a + 64)) {
                snprintf(why, sizeof why, "query wrote past the fields it knows in fmoe_query_args");
                bad = 1;
            }
            res[k] = *a;
            res[k].struct_size = (size_t)st; /* keep the status */
            cf_guarded_free(a);
        }
        any = 1;
        if (bad)
            break;
        if (res[0].struct_size != res[1].struct_size || res[0].method != res[1].method ||
            res[0].score != res[1].score || strncmp(res[0].reason, res[1].reason, sizeof res[0].reason) != 0) {
            snprintf(why, sizeof why, "two queries for %s gave different answers (query must have no side effects)",
                     cs->key);
            bad = 1;
        } else if (res[0].struct_size == FMOE_STATUS_OK && (!res[0].method || res[0].score == 0)) {
            snprintf(why, sizeof why, "query for %s returned OK without a method or with score 0", cs->key);
            bad = 1;
        } else if (res[0].struct_size != FMOE_STATUS_OK && res[0].struct_size != FMOE_STATUS_UNSUPPORTED) {
            snprintf(why, sizeof why, "query for %s failed with %s (expected ok or unsupported)", cs->key,
                     fmoe_status_name((fmoe_status)res[0].struct_size));
            bad = 1;
        } else if (res[0].struct_size == FMOE_STATUS_UNSUPPORTED && !res[0].reason[0]) {
            snprintf(why, sizeof why, "query refused %s without a reason", cs->key);
            bad = 1;
        } else if (res[0].struct_size == FMOE_STATUS_OK) {
            found = res[0].method;
            *cs_out = cs;
        }
    }
    if (cf_begin(r, "query")) {
        if (bad)
            cf_end(r, CF_FAIL, "%s", why);
        else if (!any)
            cf_end(r, CF_UNSUPPORTED, "the manifest claims no scheme the suite can build");
        else
            cf_end(r, CF_PASS, found ? "same answer twice, no writes past its args" : "refuses every base layer");
    }
    if (found && cf_begin(r, "method-slots")) {
        if (!method_ok(found, why, sizeof why)) {
            cf_end(r, CF_FAIL, "%s", why);
            found = NULL;
        } else {
            cf_end(r, CF_PASS, "method '%s'", found->name);
        }
    }
    return found;
}

/* A guarded tensor descriptor with a guarded buffer of `numel` elements;
 * for a device layer the descriptor points at a device copy instead. */
typedef struct gtensor {
    fmoe_tensor *t;
    void *data;
    size_t bytes;
    void *dev; /* device copy (canary after it), or NULL */
} gtensor;

static int gt_make(gtensor *g, fmoe_dtype dtype, uint32_t ndim, const int64_t *shape)
{
    memset(g, 0, sizeof *g);
    size_t numel = 1;
    for (uint32_t i = 0; i < ndim; i++)
        numel *= (size_t)shape[i];
    g->bytes = numel * fmoe_dtype_size(dtype);
    g->t = cf_guarded_alloc(sizeof *g->t);
    g->data = cf_guarded_alloc(g->bytes ? g->bytes : 1);
    if (!g->t || !g->data)
        return -1;
    return fmoe_tensor_init(g->t, dtype, ndim, shape, g->data) == FMOE_STATUS_OK ? 0 : -1;
}

static int gt_intact(const gtensor *g)
{
    return cf_guard_intact(g->t) && cf_guard_intact(g->data);
}

static void gt_free(gtensor *g)
{
    cf_guarded_free(g->t);
    cf_guarded_free(g->data);
}

/* Give the descriptor a device copy of the data (host `data` stays). */
static int gt_to_device(table_memory *m, gtensor *g, char *why, size_t cap)
{
    const cf_device_ops ops = table_ops(m);
    g->dev = cf_device_put(&ops, g->data, g->bytes, why, cap);
    if (!g->dev)
        return -1;
    g->t->data = g->dev;
    g->t->device_kind = m->kind;
    g->t->device_index = m->index;
    return 0;
}

/* gt_intact for a tensor wherever it is: a device copy's canary is fetched
 * (with `fetch`, its bytes too, into g->data). 1 intact, 0 written past,
 * -1 the fetch failed (`why`). */
static int gt_check(table_memory *m, gtensor *g, int fetch, char *why, size_t cap)
{
    if (!g->dev)
        return gt_intact(g);
    const cf_device_ops ops = table_ops(m);
    int got = cf_device_get(&ops, g->dev, g->bytes, fetch ? g->data : NULL, why, cap);
    return got < 0 ? -1 : got && cf_guard_intact(g->t);
}

static void gt_free_device(table_memory *m, gtensor *g)
{
    if (g->dev)
        tm_free(m, g->dev);
    g->dev = NULL;
}

/* Inputs and out of the hand-driven apply onto the device. 0 or -1. */
static int io_to_device(table_memory *m, gtensor *const *io, int n, char *why, size_t cap)
{
    for (int i = 0; i < n; i++)
        if (gt_to_device(m, io[i], why, cap) != 0)
            return -1;
    return 0;
}

/* Plausible contents for a declared parameter: small normal floats for
 * float weights/biases, 1.0 for scales, zero bytes for everything else. */
static void fill_param(const fmoe_param_desc *d, gtensor *g, uint64_t seed, uint32_t i)
{
    size_t numel = g->bytes / (fmoe_dtype_size(d->dtype) ? fmoe_dtype_size(d->dtype) : 1);
    if (!cli_is_float_storage(d->dtype))
        return;
    float *v = malloc((numel + 1) * sizeof(float));
    if (!v)
        return;
    int scale = d->role == FMOE_ROLE_WEIGHT_SCALE || d->role == FMOE_ROLE_WEIGHT_GLOBAL_SCALE ||
                d->role == FMOE_ROLE_INPUT_SCALE || d->role == FMOE_ROLE_INPUT_GLOBAL_SCALE;
    if (scale)
        for (size_t k = 0; k < numel; k++)
            v[k] = 1.0f;
    else
        cli_rng_fill_normal(v, numel, 0.1f, seed, "abi-param", i);
    cli_store_floats(d->dtype, g->data, v, numel);
    free(v);
}

/* One layer driven by hand. A plugin whose device is not host memory gets
 * x, the routing and out in its device memory (`mem`, abi/device-memory),
 * each with the canary after it, out poisoned there; after apply they come
 * back to be checked. Without usable device memory apply is not called. */
static void case_lifecycle(cf_run *r, const session *s, const fmoe_method *m, const fmoe_layer_config *cfg0,
                           const fmoe_scheme *scheme0, int32_t kind, int32_t index, const fmoe_device_memory *mem)
{
    if (!cf_begin(r, "method-guarded"))
        return;
    enum { M = 5, MAXP = 32 };
    fmoe_layer_config *cfg = cf_guarded_alloc(sizeof *cfg);
    fmoe_scheme *scheme = cf_guarded_alloc(sizeof *scheme);
    fmoe_create_args *ca = cf_guarded_alloc(sizeof *ca);
    fmoe_declare_params_args *da = cf_guarded_alloc(sizeof *da);
    fmoe_finalize_args *fa = cf_guarded_alloc(sizeof *fa);
    gtensor params[MAXP], x, w, ids, out, logits;
    gtensor *const io[] = {&x, &w, &ids, &out, &logits};
    table_memory tmem = {.s = s, .mem = mem, .kind = kind, .index = index};
    const int on_device = kind != FMOE_DEVICE_CPU;
    const fmoe_tensor **pptr = cf_guarded_alloc(MAXP * sizeof *pptr);
    uint32_t n_params = 0;
    int created = 0;
    char why[512] = "";
    int status = CF_FAIL;
    memset(params, 0, sizeof params);
    memset(&x, 0, sizeof x);
    w = ids = out = logits = x;
    if (!cfg || !scheme || !ca || !da || !fa || !pptr) {
        snprintf(why, sizeof why, "out of memory");
        goto done;
    }
    *cfg = *cfg0;
    *scheme = *scheme0;
    const fmoe_layer_config cfg_copy = *cfg;
    const fmoe_scheme scheme_copy = *scheme;
    fmoe_error err = {0};
    uint32_t hidden = cfg->hidden_size, inter = cfg->intermediate_size;
    if (m->roundup_sizes) {
        fmoe_roundup_args *ra = cf_guarded_alloc(sizeof *ra);
        if (!ra)
            goto done;
        *ra = (fmoe_roundup_args){.struct_size = sizeof *ra,
                                  .err = &err,
                                  .config = cfg,
                                  .scheme = scheme,
                                  .hidden_size = hidden,
                                  .intermediate_per_rank = inter};
        fmoe_status st = m->roundup_sizes(ra);
        int g = cf_guard_intact(ra);
        if (st == FMOE_STATUS_OK && (ra->hidden_size < hidden || ra->intermediate_per_rank < inter)) {
            snprintf(why, sizeof why, "roundup_sizes shrank the sizes (R: it may only grow them)");
            cf_guarded_free(ra);
            goto done;
        }
        if (st == FMOE_STATUS_OK)
            hidden = ra->hidden_size, inter = ra->intermediate_per_rank;
        cf_guarded_free(ra);
        if (!g) {
            snprintf(why, sizeof why, "roundup_sizes wrote past its args");
            goto done;
        }
    }
    *ca = (fmoe_create_args){.struct_size = sizeof *ca,
                             .err = &err,
                             .state = s->state,
                             .config = cfg,
                             .scheme = scheme,
                             .device_kind = kind,
                             .device_index = index,
                             .hidden_size = hidden,
                             .intermediate_per_rank = inter,
                             .num_local_experts = cfg->num_experts,
                             .num_global_experts = cfg->num_experts};
    fmoe_status st = m->create(ca);
    if (st != FMOE_STATUS_OK) {
        snprintf(why, sizeof why, "create refused a layer its query accepted (%s: %s)", fmoe_status_name(st), err.text);
        goto done;
    }
    created = 1;
    if (!cf_guard_intact(ca)) {
        snprintf(why, sizeof why, "create wrote past fmoe_create_args");
        goto done;
    }
    *da = (fmoe_declare_params_args){.struct_size = sizeof *da, .err = &err, .instance = ca->instance};
    st = m->declare_params(da);
    if (st != FMOE_STATUS_OK || !cf_guard_intact(da)) {
        snprintf(why, sizeof why, "declare_params %s", st != FMOE_STATUS_OK ? err.text : "wrote past its args");
        goto done;
    }
    if (da->n_params == 0 || da->n_params > MAXP || !da->params) {
        snprintf(why, sizeof why, "declare_params returned %u parameters", da->n_params);
        goto done;
    }
    for (uint32_t i = 0; i < da->n_params; i++) {
        const fmoe_param_desc *d = da->params[i];
        if (!d || d->struct_size < FMOE_STRUCT_SIZE_UPTO(fmoe_param_desc, flags) || !d->name || d->ndim == 0 ||
            d->ndim > FMOE_MAX_DIMS || fmoe_dtype_size(d->dtype) == 0) {
            snprintf(why, sizeof why, "parameter %u has a bad descriptor (struct_size, name, ndim or dtype)", i);
            goto done;
        }
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(da->params[j]->name, d->name) == 0) {
                snprintf(why, sizeof why, "two parameters are named '%s'", d->name);
                goto done;
            }
        for (uint32_t k = 0; k < d->ndim; k++)
            if (d->shape[k] <= 0 || d->shape[k] > (1 << 28)) {
                snprintf(why, sizeof why, "parameter %s has dimension %u = %lld", d->name, k, (long long)d->shape[k]);
                goto done;
            }
        if (gt_make(&params[i], d->dtype, d->ndim, d->shape) != 0) {
            snprintf(why, sizeof why, "out of memory for %s", d->name);
            goto done;
        }
        n_params = i + 1;
        fill_param(d, &params[i], r->o->seed, i);
        pptr[i] = params[i].t;
    }
    *fa = (fmoe_finalize_args){.struct_size = sizeof *fa,
                               .err = &err,
                               .instance = ca->instance,
                               .params = (const fmoe_tensor *const *)pptr,
                               .n_params = n_params};
    st = m->finalize(fa);
    if (st != FMOE_STATUS_OK) {
        snprintf(why, sizeof why, "finalize failed (%s: %s)", fmoe_status_name(st), err.text);
        goto done;
    }
    if (!cf_guard_intact(fa) || !cf_guard_intact(pptr)) {
        snprintf(why, sizeof why, "finalize wrote past its args");
        goto done;
    }
    for (uint32_t i = 0; i < n_params; i++)
        if (!gt_intact(&params[i])) {
            snprintf(why, sizeof why, "finalize wrote past parameter %s", da->params[i]->name);
            goto done;
        }
    const int64_t xs[2] = {M, cfg->hidden_size}, ks[2] = {M, cfg->top_k}, ls[2] = {M, cfg->num_experts};
    if (gt_make(&x, cfg->act_dtype, 2, xs) || gt_make(&w, FMOE_DTYPE_F32, 2, ks) ||
        gt_make(&ids, FMOE_DTYPE_INT32, 2, ks) || gt_make(&out, cfg->act_dtype, 2, xs) ||
        gt_make(&logits, FMOE_DTYPE_F32, 2, ls))
        goto done;
    {
        float xf[M * 1024];
        size_t nx = (size_t)M * cfg->hidden_size;
        cli_rng_fill_normal(xf, nx, 1.0f, r->o->seed, "abi-x", 0);
        cli_store_floats(cfg->act_dtype, x.data, xf, nx);
        cli_rng_fill_normal(logits.data, (size_t)M * cfg->num_experts, 1.0f, r->o->seed, "abi-logits", 0);
        for (int t = 0; t < M; t++)
            for (uint32_t j = 0; j < cfg->top_k; j++) {
                ((float *)w.data)[t * cfg->top_k + j] = 0.5f;
                ((int32_t *)ids.data)[t * cfg->top_k + j] = (int32_t)((t + j) % cfg->num_experts);
            }
    }
    memset(out.data, 0xFF, out.bytes);
    if (on_device && !mem) {
        status = CF_UNSUPPORTED;
        snprintf(why, sizeof why,
                 "create, declare_params (%u) and finalize pass; apply not called: no usable device "
                 "memory for %s:%d (abi/device-memory says why)",
                 n_params, fmoe_device_kind_name(kind), index);
        goto done;
    }
    if (on_device && io_to_device(&tmem, io, (int)(sizeof io / sizeof io[0]), why, sizeof why) != 0)
        goto done;
    if (m->apply) {
        fmoe_apply_args *aa = cf_guarded_alloc(sizeof *aa);
        if (!aa)
            goto done;
        *aa = (fmoe_apply_args){.struct_size = sizeof *aa,
                                .err = &err,
                                .instance = ca->instance,
                                .x = x.t,
                                .topk_weights = w.t,
                                .topk_ids = ids.t,
                                .out = out.t};
        st = m->apply(aa);
        if (!cf_guard_intact(aa))
            st = -1;
        cf_guarded_free(aa);
    } else {
        fmoe_apply_logits_args *aa = cf_guarded_alloc(sizeof *aa);
        if (!aa)
            goto done;
        *aa = (fmoe_apply_logits_args){.struct_size = sizeof *aa,
                                       .err = &err,
                                       .instance = ca->instance,
                                       .x = x.t,
                                       .router_logits = logits.t,
                                       .out = out.t};
        st = m->apply_logits(aa);
        if (!cf_guard_intact(aa))
            st = -1;
        cf_guarded_free(aa);
    }
    if (st == -1) {
        snprintf(why, sizeof why, "apply wrote past its args");
        goto done;
    }
    if (st != FMOE_STATUS_OK) {
        snprintf(why, sizeof why, "apply failed (%s: %s)", fmoe_status_name(st), err.text);
        goto done;
    }
    if (on_device && tm_sync(&tmem, why, sizeof why) != 0)
        goto done;
    int intact = gt_check(&tmem, &out, 1, why, sizeof why);
    if (intact < 0)
        goto done;
    if (!intact) {
        snprintf(why, sizeof why, "apply wrote past the end of out [%d, %u]%s (the canary after it changed)", M,
                 cfg->hidden_size, on_device ? " in device memory" : "");
        goto done;
    }
    for (int i = 0; i < (int)(sizeof io / sizeof io[0]); i++)
        if (io[i] != &out && (intact = gt_check(&tmem, io[i], 0, why, sizeof why)) != 1) {
            if (!intact)
                snprintf(why, sizeof why, "apply wrote past an input tensor");
            goto done;
        }
    {
        float of[M * 1024];
        size_t no = (size_t)M * cfg->hidden_size;
        cli_load_floats(cfg->act_dtype, of, out.data, no);
        for (size_t i = 0; i < no; i++)
            if (isnan(of[i])) {
                snprintf(why, sizeof why, "apply left out[%zu][%zu] unwritten (still the NaN poison)",
                         i / cfg->hidden_size, i % cfg->hidden_size);
                goto done;
            }
    }
    if (memcmp(cfg, &cfg_copy, sizeof cfg_copy) != 0 || memcmp(scheme, &scheme_copy, sizeof scheme_copy) != 0 ||
        !cf_guard_intact(cfg) || !cf_guard_intact(scheme)) {
        snprintf(why, sizeof why, "a method call wrote into the (const) layer config or scheme");
        goto done;
    }
    status = CF_PASS;
    snprintf(why, sizeof why, "method '%s': create, declare_params (%u), finalize, %s, destroy", m->name, n_params,
             m->apply ? "apply" : "apply_logits");
done:
    if (created) {
        fmoe_destroy_args *xa = cf_guarded_alloc(sizeof *xa);
        if (xa) {
            *xa = (fmoe_destroy_args){.struct_size = sizeof *xa, .instance = ca->instance};
            m->destroy(xa);
            if (!cf_guard_intact(xa) && status == CF_PASS) {
                status = CF_FAIL;
                snprintf(why, sizeof why, "destroy wrote past its args");
            }
            cf_guarded_free(xa);
        }
    }
    for (uint32_t i = 0; i < MAXP; i++)
        gt_free(&params[i]);
    for (int i = 0; i < (int)(sizeof io / sizeof io[0]); i++)
        gt_free_device(&tmem, io[i]);
    gt_free(&x);
    gt_free(&w);
    gt_free(&ids);
    gt_free(&out);
    gt_free(&logits);
    cf_guarded_free(pptr);
    cf_guarded_free(cfg);
    cf_guarded_free(scheme);
    cf_guarded_free(ca);
    cf_guarded_free(da);
    cf_guarded_free(fa);
    cf_end(r, status, "%s", why);
}

void cf_mode_abi(cf_run *r)
{
    cf_progress_start(r, 17);
    case_exports(r);
    case_no_libfusedmoe(r);
    char why[512];
    fmoe_plugin_entry_fn entry = find_entry(r->plugin, why, sizeof why);
    if (!entry) {
        if (cf_begin(r, "entry"))
            cf_end(r, CF_FAIL, "%s", why);
        return;
    }
    const fmoe_plugin *t = case_entry_same(r, entry);
    const size_t hs = sizeof(fmoe_host), as = sizeof(fmoe_entry_args);
    case_entry_variant(r, entry, "entry-newer-host", hs + 64, FMOE_ABI_MAJOR, FMOE_ABI_MINOR + 1, 0, as + 64, 1,
                       "a newer minor with a longer host table and args must be accepted (R1, negotiation)");
    case_entry_variant(r, entry, "entry-older-host", hs, FMOE_ABI_MAJOR, FMOE_ABI_MINOR_MIN, 0, as, 1,
                       "a host at FMOE_ABI_MINOR_MIN must be accepted: minor = min(host, plugin)");
    case_entry_variant(r, entry, "entry-other-major", hs, FMOE_ABI_MAJOR + 1, 0, 0, as, 0,
                       "another major must be refused with abi-mismatch and a message");
    case_entry_variant(r, entry, "entry-major0", hs, 0, 7, 0, as, 0,
                       "another major must be refused with abi-mismatch and a message");
    case_entry_variant(r, entry, "entry-host-small", FMOE_STRUCT_SIZE_UPTO(fmoe_host, error_set), FMOE_ABI_MAJOR,
                       FMOE_ABI_MINOR, 1, as, 0,
                       "a host table shorter than ABI 1.0 (no alloc/free) must be refused without reading past it");
    case_entry_variant(r, entry, "entry-args-small", hs, FMOE_ABI_MAJOR, FMOE_ABI_MINOR, 0,
                       offsetof(fmoe_entry_args, plugin), 0,
                       "entry args without room for `plugin` must be refused without writing past them");
    if (!t)
        return;
    session s;
    memset(&stats, 0, sizeof stats);
    if (!session_open(r, t, &s)) {
        cf_guarded_free(s.host);
        return;
    }
    int32_t kind = FMOE_DEVICE_ANY, index = 0;
    case_probe(r, &s, &kind, &index);
    case_no_device(r);
    if (kind != FMOE_DEVICE_ANY) {
        fmoe_layer_config cfg;
        fmoe_scheme scheme;
        const cf_scheme *cs = NULL;
        const fmoe_device_memory *mem = NULL;
        if (kind != FMOE_DEVICE_CPU)
            mem = case_device_memory(r, &s, kind, index);
        const fmoe_method *m = case_query(r, &s, kind, index, &cfg, &scheme, &cs);
        if (m)
            case_lifecycle(r, &s, m, &cfg, &scheme, kind, index, mem);
    } else if (cf_begin(r, "query")) {
        cf_end(r, CF_UNSUPPORTED, "no available device on this machine to query for");
    }
    session_close(r, &s);
}
