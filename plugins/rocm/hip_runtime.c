/*
 * plugins/rocm/hip_runtime.c - the HIP runtime through dlopen
 * (hip_runtime.h).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "plugins/rocm/hip_runtime.h"

const char *const fmro_hip_library_names[] = {"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5", NULL};

/* dlsym returns void *; C11 has no conversion to a function pointer, so
 * copy the bits (POSIX guarantees they are the same size). */
#define RESOLVE(lib, field, symbol) \
    do { \
        void *p_ = dlsym(lib, symbol); \
        memcpy(&(field), &p_, sizeof p_); \
    } while (0)

int fmro_hip_load(const char *const *names, fmro_hip_api *api, char *why, size_t cap)
{
    memset(api, 0, sizeof *api);
    void *lib = NULL;
    const char *found = NULL;
    for (size_t i = 0; names && names[i] && !lib; i++) {
        lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        found = names[i];
    }
    if (!lib) {
        snprintf(why, cap, "no AMD GPU: %s not found (the HIP runtime of ROCm)",
                 names && names[0] ? names[0] : "libamdhip64.so");
        return -1;
    }
    snprintf(api->library, sizeof api->library, "%s", found);
    RESOLVE(lib, api->get_device_count, "hipGetDeviceCount");
    RESOLVE(lib, api->device_get_name, "hipDeviceGetName");
    RESOLVE(lib, api->device_total_mem, "hipDeviceTotalMem");
    RESOLVE(lib, api->device_get_pci_bus_id, "hipDeviceGetPCIBusId");
    /* ROCm 6 keeps hipGetDeviceProperties for old binaries and adds the
     * new layout under its own name; either holds gcnArchName. */
    RESOLVE(lib, api->get_device_properties, "hipGetDevicePropertiesR0600");
    if (!api->get_device_properties)
        RESOLVE(lib, api->get_device_properties, "hipGetDeviceProperties");
    RESOLVE(lib, api->driver_get_version, "hipDriverGetVersion");
    RESOLVE(lib, api->runtime_get_version, "hipRuntimeGetVersion");
    RESOLVE(lib, api->get_error_name, "hipGetErrorName");
    if (!api->get_device_count || !api->device_get_name || !api->device_total_mem || !api->device_get_pci_bus_id) {
        snprintf(why, cap,
                 "no AMD GPU: %s lacks hipGetDeviceCount, hipDeviceGetName, hipDeviceTotalMem or "
                 "hipDeviceGetPCIBusId (not a HIP runtime?)",
                 found);
        return -1;
    }
    return 0;
}

static int arch_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == ':' || c == '+' || c == '-';
}

int fmro_arch_from_props(const unsigned char *props, size_t len, char *arch, size_t cap)
{
    const size_t name_bytes = 256; /* hipDeviceProp_t.name, first in every layout */
    for (size_t i = name_bytes; i + 4 <= len; i++) {
        if (props[i] != 'g' || props[i + 1] != 'f' || props[i + 2] != 'x')
            continue;
        size_t j = i + 3;
        while (j < len && j - i < 64 && arch_char(props[j]))
            j++;
        if (j < len && props[j] == 0 && j > i + 3 && j - i < cap) {
            memcpy(arch, props + i, j - i);
            arch[j - i] = '\0';
            return 0;
        }
    }
    return -1;
}

void fmro_arch_base(const char *arch, char *base, size_t cap)
{
    size_t n = strcspn(arch, ":");
    if (n >= cap)
        n = cap - 1;
    memcpy(base, arch, n);
    base[n] = '\0';
}
