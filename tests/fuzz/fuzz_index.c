/*
 * tests/fuzz/fuzz_index.c - libFuzzer harness for model.safetensors.index.json
 * (core/checkpoint.c): the index is read from a file, so each input is
 * written to a private directory beside two small valid shards it may name
 * ("a.safetensors" holding tensors "x" and "y", "b.safetensors" holding
 * "z"). Any input must open a checkpoint or give a clean error. Replayed
 * over corpus/index by meson.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fusedmoe/fusedmoe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64];
static char index_path[128];

static int write_file(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    size_t put = fwrite(data, 1, size, f);
    return fclose(f) == 0 && put == size;
}

static int write_shard(const char *name, const char *header, size_t data_bytes)
{
    char path[160];
    unsigned char buf[256];
    size_t n = strlen(header);
    for (int b = 0; b < 8; b++)
        buf[b] = (unsigned char)((uint64_t)n >> (8 * b));
    memcpy(buf + 8, header, n);
    memset(buf + 8 + n, 0x3c, data_bytes);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return write_file(path, buf, 8 + n + data_bytes);
}

static void cleanup(void)
{
    static const char *const names[] = {"a.safetensors", "b.safetensors", "model.safetensors.index.json"};
    char path[160];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
}

/* The directory and its shards, once per process. */
static int setup(void)
{
    if (dir[0])
        return 1;
    snprintf(dir, sizeof dir, "/tmp/fmoe-fuzz-index-XXXXXX");
    if (!mkdtemp(dir))
        return 0;
    atexit(cleanup);
    snprintf(index_path, sizeof index_path, "%s/model.safetensors.index.json", dir);
    return write_shard("a.safetensors",
                       "{\"x\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]},"
                       "\"y\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[4,7]}}",
                       7) &&
           write_shard("b.safetensors", "{\"z\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!setup() || !write_file(index_path, data, size))
        return 0;
    fmoe_checkpoint *ck = NULL;
    if (fmoe_checkpoint_open(index_path, &ck) != FMOE_STATUS_OK)
        return 0;
    volatile unsigned sum = 0;
    for (size_t i = 0; i < fmoe_checkpoint_tensor_count(ck); i++) {
        fmoe_tensor t;
        if (fmoe_checkpoint_tensor(ck, i, &t) == FMOE_STATUS_OK)
            sum += *(const unsigned char *)t.data;
        sum += (unsigned)fmoe_checkpoint_find(ck, fmoe_checkpoint_tensor_name(ck, i));
    }
    fmoe_checkpoint_close(ck);
    return 0;
}
