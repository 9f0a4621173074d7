/*
 * cli/conform/guard.h - memory handed to a plugin, with a way to tell
 * whether it wrote (or read) past what it was given.
 *
 * guarded:  n bytes followed by CF_GUARD_BYTES of a canary pattern; a write
 *           past the end changes the canary (checked after every call).
 * fenced:   n bytes ending exactly where an inaccessible page begins; a
 *           read or write past the end faults at once (for structs whose
 *           struct_size says they are shorter than the plugin may think).
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

#endif
