#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
/* cli/conform/guard.c - guarded and fenced allocations (see guard.h). */
#include "cli/conform/guard.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Each block is preceded by its size; the canary follows the n bytes. */
#define HEADER 64

static unsigned char canary_byte(size_t i)
{
    return (unsigned char)(0xA5u ^ (unsigned)(i * 29u));
}

void *cf_guarded_alloc(size_t n)
{
    if (n > SIZE_MAX - HEADER - CF_GUARD_BYTES - 64)
        return NULL;
    size_t total = (HEADER + n + CF_GUARD_BYTES + 63) / 64 * 64;
    unsigned char *base = aligned_alloc(64, total);
    if (!base)
        return NULL;
    memset(base, 0, HEADER + n);
    memcpy(base, &n, sizeof n);
    for (size_t i = 0; i < CF_GUARD_BYTES; i++)
        base[HEADER + n + i] = canary_byte(i);
    return base + HEADER;
}

int cf_guard_intact(const void *p)
{
    if (!p)
        return 1;
    const unsigned char *base = (const unsigned char *)p - HEADER;
    size_t n;
    memcpy(&n, base, sizeof n);
    for (size_t i = 0; i < CF_GUARD_BYTES; i++)
        if (base[HEADER + n + i] != canary_byte(i))
            return 0;
    return 1;
}

void cf_guarded_free(void *p)
{
    if (p)
        free((unsigned char *)p - HEADER);
}

static size_t page_size(void)
{
    long ps = sysconf(_SC_PAGESIZE);
    return ps > 0 ? (size_t)ps : 4096;
}

static size_t fenced_span(size_t n, size_t ps)
{
    size_t body = (n + 7) / 8 * 8;
    return (body + ps - 1) / ps * ps + ps;
}

void *cf_fenced_alloc(size_t n)
{
    size_t ps = page_size(), span = fenced_span(n, ps);
    unsigned char *m = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    if (mprotect(m + span - ps, ps, PROT_NONE) != 0) {
        munmap(m, span);
        return NULL;
    }
    return m + span - ps - (n + 7) / 8 * 8;
}

void cf_fenced_free(void *p, size_t n)
{
    if (!p)
        return;
    size_t ps = page_size(), span = fenced_span(n, ps);
    unsigned char *end = (unsigned char *)p + (n + 7) / 8 * 8 + ps;
    munmap(end - span, span);
}

int cf_device_fill(const cf_device_ops *ops, void *dev, const void *host, size_t n, char *why, size_t cap)
{
    unsigned char *staging = malloc(n + CF_GUARD_BYTES);
    if (!staging) {
        snprintf(why, cap, "out of memory for a %zu-byte staging buffer", n + CF_GUARD_BYTES);
        return -1;
    }
    if (n)
        memcpy(staging, host, n);
    for (size_t i = 0; i < CF_GUARD_BYTES; i++)
        staging[n + i] = canary_byte(i);
    int rc = ops->copy(ops->ctx, dev, staging, n + CF_GUARD_BYTES, 1, why, cap);
    free(staging);
    return rc;
}

void *cf_device_put(const cf_device_ops *ops, const void *host, size_t n, char *why, size_t cap)
{
    if (n > SIZE_MAX - CF_GUARD_BYTES) {
        snprintf(why, cap, "a %zu-byte device buffer is too large", n);
        return NULL;
    }
    void *dev = ops->alloc(ops->ctx, n + CF_GUARD_BYTES, why, cap);
    if (dev && cf_device_fill(ops, dev, host, n, why, cap) != 0) {
        ops->free(ops->ctx, dev);
        dev = NULL;
    }
    return dev;
}

int cf_device_get(const cf_device_ops *ops, const void *dev, size_t n, void *host, char *why, size_t cap)
{
    /* Without a host buffer only the canary crosses (an interior pointer
     * of the allocation, which device copies accept). */
    size_t from = host ? 0 : n, bytes = n - from + CF_GUARD_BYTES;
    unsigned char *staging = malloc(bytes);
    if (!staging) {
        snprintf(why, cap, "out of memory for a %zu-byte staging buffer", bytes);
        return -1;
    }
    if (ops->copy(ops->ctx, staging, (const unsigned char *)dev + from, bytes, 0, why, cap) != 0) {
        free(staging);
        return -1;
    }
    if (host && n)
        memcpy(host, staging, n);
    int intact = 1;
    for (size_t i = 0; i < CF_GUARD_BYTES; i++)
        if (staging[n - from + i] != canary_byte(i))
            intact = 0;
    free(staging);
    return intact;
}
