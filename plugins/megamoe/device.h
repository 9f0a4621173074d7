/*
 * plugins/megamoe/device.h - what the plugin asks the CUDA runtime
 * (device.c, linked statically with libcudart_static like plugins/cuda, so
 * the plugin loads on machines without a driver and probes to score 0):
 * devices. The memory it lends callers without the runtime is the cuda
 * plugin's table (plugins/cuda/memory_table.h).
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

#endif
