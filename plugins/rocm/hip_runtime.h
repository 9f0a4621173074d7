/*
 * plugins/rocm/hip_runtime.h - the few HIP runtime calls the probe makes,
 * through dlopen: the plugin links no ROCm library, so it loads (and
 * reports "no AMD GPU") on any machine.
 *
 * Only calls whose C signature is the same in every ROCm release are used
 * (int handles and error codes, char buffers, size_t). The device
 * properties struct changed layout in ROCm 6 (hipGetDevicePropertiesR0600),
 * so nothing is read from it by offset: the arch name is found by its
 * form (fmro_arch_from_props).
 */
#ifndef FMOE_PLUGINS_ROCM_HIP_RUNTIME_H
#define FMOE_PLUGINS_ROCM_HIP_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

/* hipError_t values the probe names. */
#define FMRO_HIP_SUCCESS         0
#define FMRO_HIP_ERROR_NO_DEVICE 100

/* Bytes handed to hipGetDeviceProperties: several times the largest
 * hipDeviceProp_t of any release (about 1.5 KiB in ROCm 6). */
#define FMRO_HIP_PROPS_BYTES 8192

typedef struct fmro_hip_api {
    char library[64]; /* the name dlopen found */
    int (*get_device_count)(int *count);
    int (*device_get_name)(char *name, int len, int device);
    int (*device_total_mem)(size_t *bytes, int device);
    int (*device_get_pci_bus_id)(char *id, int len, int device);
    int (*get_device_properties)(void *props, int device); /* optional: arch name */
    int (*driver_get_version)(int *version);               /* optional */
    int (*runtime_get_version)(int *version);              /* optional */
    const char *(*get_error_name)(int error);              /* optional */
} fmro_hip_api;

/* The sonames tried, in order, NULL-terminated: the unversioned name
 * (ROCm installs, Debian's -dev package), then the versioned ones. */
extern const char *const fmro_hip_library_names[];

/* dlopen the first of `names` that loads and resolve the calls. 0, or -1
 * with "no AMD GPU: ..." in why. The library stays loaded (the HIP
 * runtime does not support being unloaded). */
int fmro_hip_load(const char *const *names, fmro_hip_api *api, char *why, size_t cap);

/* The arch name ("gfx942:sramecc+:xnack-") in a hipDeviceProp_t of either
 * layout: the first "gfx" string after the 256-byte name that is NUL
 * terminated and made of [a-z0-9:+-]. 0, or -1 when there is none. */
int fmro_arch_from_props(const unsigned char *props, size_t len, char *arch, size_t cap);

/* "gfx942" of "gfx942:sramecc+:xnack-". */
void fmro_arch_base(const char *arch, char *base, size_t cap);

#endif /* FMOE_PLUGINS_ROCM_HIP_RUNTIME_H */
