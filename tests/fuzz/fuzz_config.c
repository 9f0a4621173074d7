/*
 * tests/fuzz/fuzz_config.c - libFuzzer harness for the two TOML readers
 * that take files from outside: the user configuration and plugin
 * manifests. Any input must give OK or a clean error - never a crash, a
 * leak or undefined behaviour. The first byte picks the reader.
 *
 * Fuzz (clang):  see tests/fuzz/README.md
 * Replay:        `meson test` runs every file of tests/fuzz/corpus/ through
 *                this function (replay_main.c), so each crash once found
 *                stays a regression test.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "registry/config.h"
#include "registry/manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The manifest reader takes a path, so manifest inputs go through a file. */
static void fuzz_manifest(const uint8_t *data, size_t size)
{
    char path[] = "/tmp/fmoe-fuzz-manifest-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return;
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        close(fd);
        unlink(path);
        return;
    }
    fwrite(data, 1, size, f);
    fclose(f);
    fmoe_manifest *m = NULL;
    if (fmoe_manifest_load(path, &m) == FMOE_STATUS_OK)
        fmoe_manifest_free(m);
    unlink(path);
}

static void fuzz_config(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return;
    memcpy(text, data, size);
    text[size] = '\0';
    fmoe_config *cfg = NULL;
    if (fmoe_config_load_string(text, "fuzz.toml", &cfg) == FMOE_STATUS_OK)
        fmoe_config_free(cfg);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    if (data[0] & 1)
        fuzz_manifest(data + 1, size - 1);
    else
        fuzz_config(data + 1, size - 1);
    return 0;
}
