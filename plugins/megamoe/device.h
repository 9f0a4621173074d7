/*
 * plugins/megamoe/device.h - what the plugin asks the CUDA runtime
 * (device.c, linked statically with libcudart_static like plugins/cuda, so
 * the plugin loads on machines without a driver and probes to score 0): a
 * device's compute capability. The probe's device list is the cuda
 * plugin's (cuda_api.h: fmcu_device_count, fmcu_device_query); the memory
 * it lends callers without the runtime is the cuda plugin's table
 * (plugins/cuda/memory_table.h).
 */
#ifndef FMOE_PLUGIN_MEGAMOE_DEVICE_H
#define FMOE_PLUGIN_MEGAMOE_DEVICE_H

#include <stddef.h>

/* Device i's compute capability (cheap: attributes, for every query). */
int mm_device_capability(int i, int *major, int *minor, char *why, size_t cap);

#endif
