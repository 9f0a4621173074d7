/*
 * cli/conform/guard.h - memory handed to a plugin, with a way to tell
 * whether it wrote (or read) past what it was given.
 *
 * guarded:  n bytes followed by CF_GUARD_BYTES of a canary pattern; a write
 *           past the end changes the canary (checked after every call).
 * fenced:   n bytes ending exactly where an inaccessible page begins; a
 *           read or write past the end faults at once (for structs whose
 *           struct_size says they are shorter than the plugin may think).
 * device:   n bytes in a device's memory, which the host reaches only
 *           through copies, followed by CF_GUARD_BYTES of the same canary:
 *           the canary is copied in with the data and copied back out to be
 *           checked, so a write past the end is caught on a GPU too.
 */
#ifndef FMOE_CLI_CONFORM_GUARD_H
#define FMOE_CLI_CONFORM_GUARD_H

#include <stddef.h>

#define CF_GUARD_BYTES 64

/* n usable bytes (zeroed), 64-byte aligned, canary after. NULL on OOM. */
void *cf_guarded_alloc(size_t n);
/* 1 when the canary after the block is untouched. NULL: 1. */
int cf_guard_intact(const void *p);
void cf_guarded_free(void *p);

/* n usable bytes (zeroed) ending at a PROT_NONE page, 8-byte aligned. */
void *cf_fenced_alloc(size_t n);
void cf_fenced_free(void *p, size_t n);

/* How to reach one device's memory: conform's own host table in abi mode
 * (the plugin's fmoe_device_memory), the public API elsewhere
 * (fmoe_layer_tensor_*). Failures put the reason in `why`. */
typedef struct cf_device_ops {
    void *ctx;
    /* `bytes` of device memory, or NULL */
    void *(*alloc)(void *ctx, size_t bytes, char *why, size_t cap);
    /* host <-> device (to_device: dst is device memory), complete on
     * return; 0, or -1 */
    int (*copy)(void *ctx, void *dst, const void *src, size_t bytes, int to_device, char *why, size_t cap);
    void (*free)(void *ctx, void *ptr);
} cf_device_ops;

/* n usable bytes of device memory, then the canary, holding host[0, n).
 * NULL with `why`. Free with ops->free. */
void *cf_device_put(const cf_device_ops *ops, const void *host, size_t n, char *why, size_t cap);
/* Store host[0, n) and the canary into dev again (a fresh poison). 0 or -1. */
int cf_device_fill(const cf_device_ops *ops, void *dev, const void *host, size_t n, char *why, size_t cap);
/* Copy dev's n bytes into host (NULL: only the canary is fetched) and
 * check the canary: 1 intact, 0 changed, -1 the copy failed (`why`). */
int cf_device_get(const cf_device_ops *ops, const void *dev, size_t n, void *host, char *why, size_t cap);

#endif
