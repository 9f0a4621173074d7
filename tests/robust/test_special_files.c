/*
 * tests/robust/test_special_files.c - every reader of a file from outside,
 * given a FIFO, a socket, a directory or a character device where it
 * expects a regular file (docs/ROBUSTNESS.md, "Special files").
 *
 * A FIFO nobody writes to blocks open(2) forever, so a reader that opens
 * before it checks hangs here; the test case timeout (and meson's) turns
 * that into a failure instead of a stuck run. Each refusal must be
 * IO_ERROR and name the path and what it is.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/error.h"
#include "base/text_file.h"
#include "core/safetensors.h"
#include "fusedmoe/fusedmoe.h"
#include "fusedmoe/model.h"
#include "registry/config.h"
#include "registry/manifest.h"
#include "test_util.h"

/* A fresh directory per test (each case runs in its own process). */
static char dir[64];

static void make_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/fmoe-special-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void remove_tree(const char *path)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    ck_assert_int_eq(system(cmd), 0);
}

static char *path_in(const char *name)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return path;
}

/* The kinds of non-regular file, made at `path` (the device is /dev/null,
 * which every Linux system has: its path is returned instead). */
enum { K_FIFO, K_SOCKET, K_DIR, K_DEVICE, K_COUNT };
static const char *const kind_text[K_COUNT] = {"a FIFO", "a socket", "a directory", "a character device"};

static const char *make_kind(int kind, const char *name)
{
    char *path = path_in(name);
    switch (kind) {
    case K_FIFO:
        ck_assert_msg(mkfifo(path, 0600) == 0, "mkfifo %s: %s", path, strerror(errno));
        return path;
    case K_SOCKET: {
        int s = socket(AF_UNIX, SOCK_STREAM, 0);
        ck_assert_int_ge(s, 0);
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        ck_assert_uint_lt(strlen(path), sizeof a.sun_path);
        memcpy(a.sun_path, path, strlen(path) + 1);
        ck_assert_msg(bind(s, (struct sockaddr *)&a, sizeof a) == 0, "bind %s: %s", path, strerror(errno));
        return path; /* the socket stays bound until the process ends */
    }
    case K_DIR:
        ck_assert_int_eq(mkdir(path, 0700), 0);
        return path;
    default:
        return "/dev/null";
    }
}

/* The refusal every reader must give: IO_ERROR, naming path and kind. */
static void expect_refusal(fmoe_status st, const char *path, int kind, const char *what)
{
    char want[512];
    snprintf(want, sizeof want, "%s: is %s, not a regular file (expected a %s)", path, kind_text[kind], what);
    ck_assert_msg(st == FMOE_STATUS_IO_ERROR, "%s (%s): status %d, expected IO_ERROR; message: %s", path,
                  kind_text[kind], st, fmoe_last_error());
    ck_assert_msg(strstr(fmoe_last_error(), want) != NULL, "message \"%s\" does not contain \"%s\"", fmoe_last_error(),
                  want);
}

/* ---- one reader per test, every kind each ------------------------------------ */

START_TEST(test_text_file)
{
    make_dir();
    for (int k = 0; k < K_COUNT; k++) {
        char name[32];
        snprintf(name, sizeof name, "text%d", k);
        const char *path = make_kind(k, name);
        char *buf = NULL;
        size_t len = 0;
        expect_refusal(fmoe_read_text_file(path, 1024, "config.json", &buf, &len), path, k, "config.json");
        ck_assert_ptr_null(buf);
    }
    remove_tree(dir);
}
END_TEST

START_TEST(test_model_config)
{
    make_dir();
    for (int k = 0; k < K_COUNT; k++) {
        char name[32];
        snprintf(name, sizeof name, "config%d.json", k);
        const char *path = make_kind(k, name);
        fmoe_model *m = NULL;
        expect_refusal(fmoe_model_config_load(path, &m), path, k, "config.json");
        ck_assert_ptr_null(m);
        fmoe_quant_config *qc = NULL;
        expect_refusal(fmoe_quant_config_load(path, &qc), path, k, "config.json");
        ck_assert_ptr_null(qc);
    }
    remove_tree(dir);
}
END_TEST

START_TEST(test_shard)
{
    make_dir();
    for (int k = 0; k < K_COUNT; k++) {
        char name[32];
        snprintf(name, sizeof name, "shard%d.safetensors", k);
        const char *path = make_kind(k, name);
        fmoe_st_file *f = NULL;
        expect_refusal(fmoe_st_open(path, &f), path, k, "safetensors file");
        ck_assert_ptr_null(f);
        if (k == K_DIR)
            continue; /* a directory given to fmoe_checkpoint_open is a checkpoint directory */
        fmoe_checkpoint *ck = NULL;
        expect_refusal(fmoe_checkpoint_open(path, &ck), path, k, "safetensors file");
        ck_assert_ptr_null(ck);
    }
    remove_tree(dir);
}
END_TEST

/* An index given by path, an index inside a checkpoint directory, the
 * single-file checkpoint inside one, and a shard an index names. */
START_TEST(test_checkpoint_files)
{
    make_dir();
    for (int k = 0; k < K_COUNT; k++) {
        if (k == K_DEVICE)
            continue; /* needs a name inside the directory: covered by the others */
        char sub[64], name[128];
        snprintf(sub, sizeof sub, "ck%d", k);
        ck_assert_int_eq(mkdir(path_in(sub), 0700), 0);

        snprintf(name, sizeof name, "%s/model.safetensors.index.json", sub);
        char index[256];
        snprintf(index, sizeof index, "%s", make_kind(k, name));
        fmoe_checkpoint *ck = NULL;
        if (k != K_DIR) /* a directory given by path is a checkpoint directory */
            expect_refusal(fmoe_checkpoint_open(index, &ck), index, k, "safetensors index");
        char ckdir[256];
        snprintf(ckdir, sizeof ckdir, "%s", path_in(sub));
        expect_refusal(fmoe_checkpoint_open(ckdir, &ck), index, k, "safetensors index");
        ck_assert_ptr_null(ck);

        /* The same directory with a real index naming a special shard. */
        snprintf(sub, sizeof sub, "sharded%d", k);
        ck_assert_int_eq(mkdir(path_in(sub), 0700), 0);
        snprintf(name, sizeof name, "%s/model.safetensors.index.json", sub);
        FILE *f = fopen(path_in(name), "w");
        ck_assert_ptr_nonnull(f);
        fputs("{\"weight_map\": {\"w\": \"part.safetensors\"}}", f);
        fclose(f);
        snprintf(name, sizeof name, "%s/part.safetensors", sub);
        char shard[256];
        snprintf(shard, sizeof shard, "%s", make_kind(k, name));
        snprintf(ckdir, sizeof ckdir, "%s", path_in(sub));
        expect_refusal(fmoe_checkpoint_open(ckdir, &ck), shard, k, "safetensors file");
        ck_assert_msg(strstr(fmoe_last_error(), "weight_map[\"w\"]") != NULL, "%s", fmoe_last_error());

        /* And a directory whose model.safetensors is special. */
        snprintf(sub, sizeof sub, "single%d", k);
        ck_assert_int_eq(mkdir(path_in(sub), 0700), 0);
        snprintf(name, sizeof name, "%s/model.safetensors", sub);
        snprintf(shard, sizeof shard, "%s", make_kind(k, name));
        snprintf(ckdir, sizeof ckdir, "%s", path_in(sub));
        expect_refusal(fmoe_checkpoint_open(ckdir, &ck), shard, k, "safetensors file");
    }
    remove_tree(dir);
}
END_TEST

START_TEST(test_toml)
{
    make_dir();
    for (int k = 0; k < K_COUNT; k++) {
        char name[32];
        snprintf(name, sizeof name, "file%d.toml", k);
        const char *path = make_kind(k, name);
        fmoe_config *cfg = NULL;
        expect_refusal(fmoe_config_load_file(path, &cfg), path, k, "TOML file");
        fmoe_manifest *m = NULL;
        expect_refusal(fmoe_manifest_load(path, &m), path, k, "TOML file");
    }
    remove_tree(dir);
}
END_TEST

/* A plugin library given by path: dlopen would block on a FIFO. The
 * context is still created; the plugin is recorded as failed, with why. */
START_TEST(test_plugin_library)
{
    make_dir();
    for (int k = 0; k < K_COUNT; k++) {
        char name[32];
        snprintf(name, sizeof name, "libplugin%d.so", k);
        const char *path = k == K_DEVICE ? "/dev/null" : make_kind(k, name);
        const char *files[] = {path};
        fmoe_context_options o;
        fmoe_context_options_init(&o);
        o.plugin_files = files;
        o.n_plugin_files = 1;
        o.ignore_environment = 1;
        o.isolated = 1;
        fmoe_context *ctx = NULL;
        ck_assert_msg(fmoe_context_create(&o, &ctx) == FMOE_STATUS_OK, "%s", fmoe_last_error());
        int seen = 0;
        for (uint32_t i = 0; i < fmoe_context_plugin_count(ctx); i++) {
            fmoe_plugin_info info = {.struct_size = sizeof info};
            ck_assert_int_eq(fmoe_context_plugin(ctx, i, &info), FMOE_STATUS_OK);
            if (strcmp(info.path, path) != 0)
                continue;
            seen = 1;
            char want[512];
            snprintf(want, sizeof want, "%s: is %s, not a regular file (expected a plugin library)", path,
                     kind_text[k]);
            ck_assert_msg(info.state == FMOE_PLUGIN_STATE_FAILED && strstr(info.reason, want),
                          "state %d, reason \"%s\"; expected \"%s\"", info.state, info.reason, want);
        }
        ck_assert_msg(seen, "the plugin %s is not listed", path);
        fmoe_context_destroy(ctx);
    }
    remove_tree(dir);
}
END_TEST

/* The regular-file path still works, and a missing file is NOT_FOUND. */
START_TEST(test_regular_and_missing)
{
    make_dir();
    const char *path = path_in("ok.json");
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("{\"a\": 1}", f);
    fclose(f);
    char *buf = NULL;
    size_t len = 0;
    ck_assert_int_eq(fmoe_read_text_file(path, 1024, "config.json", &buf, &len), FMOE_STATUS_OK);
    ck_assert_uint_eq(len, 8);
    ck_assert_str_eq(buf, "{\"a\": 1}");
    free(buf);
    const char *missing = path_in("missing.json");
    ck_assert_int_eq(fmoe_read_text_file(missing, 1024, "config.json", &buf, &len), FMOE_STATUS_NOT_FOUND);
    char want[512];
    snprintf(want, sizeof want, "%s: No such file or directory", missing);
    ck_assert_str_eq(fmoe_last_error(), want);
    remove_tree(dir);
}
END_TEST

/* A regular file whose size stat gives as 0 though it has content (procfs;
 * likewise one that grows while it is read) is read to its end, and past
 * the limit is refused with the bytes seen: the limit plus one, never more
 * read. /proc/self/status starts "Name:\t" and is longer than 16 bytes. */
START_TEST(test_size_unknown_to_stat)
{
    const char *path = "/proc/self/status";
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_msg(S_ISREG(sb.st_mode) && sb.st_size == 0, "%s: expected a regular file of stat size 0", path);
    char *buf = NULL;
    size_t len = 0;
    ck_assert_int_eq(fmoe_read_text_file(path, 1 << 20, "config.json", &buf, &len), FMOE_STATUS_OK);
    ck_assert_uint_gt(len, 16);
    ck_assert_uint_eq(strlen(buf), len);
    ck_assert_int_eq(strncmp(buf, "Name:\t", 6), 0);
    free(buf);
    ck_assert_int_eq(fmoe_read_text_file(path, 16, "config.json", &buf, &len), FMOE_STATUS_INVALID_ARGUMENT);
    ck_assert_ptr_null(buf);
    ck_assert_str_eq(fmoe_last_error(), "/proc/self/status: 17 bytes, larger than the 16-byte limit for a config.json");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("special_files");
    TCase *tc = tcase_create("readers");
    /* A reader that blocks on a FIFO fails here instead of hanging. */
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, test_text_file);
    tcase_add_test(tc, test_model_config);
    tcase_add_test(tc, test_shard);
    tcase_add_test(tc, test_checkpoint_files);
    tcase_add_test(tc, test_toml);
    tcase_add_test(tc, test_plugin_library);
    tcase_add_test(tc, test_regular_and_missing);
    tcase_add_test(tc, test_size_unknown_to_stat);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return fmoe_test_main(suite(), 8);
}
