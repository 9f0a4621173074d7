/*
 * plugins/megamoe/device.h - what the plugin asks the CUDA runtime
 * (device.c, linked statically with libcudart_static like plugins/cuda, so
 * the plugin loads on machines without a driver and probes to score 0):
 * devices, and the memory it lends callers without the runtime (ABI 1.1).
 */
#ifndef FMOE_PLUGIN_MEGAMOE_DEVICE_H
#define FMOE_PLUGIN_MEGAMOE_DEVICE_H

#include <stddef.h>

typedef struct mm_device {
    char name[256];
    char pci_id[32];
    int major, minor, sms;
} mm_device;

/* Number of CUDA devices; 0 with the runtime's reason in `why` if none. */
int mm_device_count(char *why, size_t cap);

/* Device i's properties; -1 with the reason. */
int mm_device_query(int i, mm_device *out, char *why, size_t cap);

/* Device i's compute capability (cheap: attributes, for every query). */
int mm_device_capability(int i, int *major, int *minor, char *why, size_t cap);

int mm_device_alloc(int i, void **ptr, size_t bytes, char *why, size_t cap);
void mm_device_free(int i, void *ptr);
/* to_device 1: host -> device, else device -> host; NULL stream: done on return. */
int mm_device_copy(int i, int to_device, void *dst, const void *src, size_t bytes, void *stream, char *why, size_t cap);
/* Wait for `stream`, or the whole device when NULL. */
int mm_device_sync(int i, void *stream, char *why, size_t cap);

#endif
