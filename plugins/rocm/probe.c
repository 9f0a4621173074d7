/*
 * plugins/rocm/probe.c - device reports from the HIP runtime (probe.h).
 * Never fatal: every failure becomes an unavailable report with its reason.
 */
#include <stdio.h>
#include <string.h>

#include "plugins/rocm/probe.h"

int fmro_arch_targeted(const char *base)
{
    static const char *const targets[] = {"gfx90a", "gfx940", "gfx941", "gfx942", NULL};
    for (int i = 0; targets[i]; i++)
        if (strcmp(base, targets[i]) == 0)
            return 1;
    return 0;
}

static void error_text(const fmro_hip_api *api, int e, char *buf, size_t cap)
{
    const char *name = api->get_error_name ? api->get_error_name(e) : NULL;
    snprintf(buf, cap, "%s (%d)", name ? name : "hipError", e);
}

static void versions(const fmro_hip_api *api, char *buf, size_t cap)
{
    int rt = 0, drv = 0;
    /* HIP_VERSION style: major * 10^7 + minor * 10^5 + patch */
    if (api->runtime_get_version && api->runtime_get_version(&rt) == FMRO_HIP_SUCCESS && rt > 0) {
        if (api->driver_get_version && api->driver_get_version(&drv) == FMRO_HIP_SUCCESS && drv > 0)
            snprintf(buf, cap, "HIP runtime %d.%d, driver %d.%d (%.24s)", rt / 10000000, (rt / 100000) % 100,
                     drv / 10000000, (drv / 100000) % 100, api->library);
        else
            snprintf(buf, cap, "HIP runtime %d.%d (%.24s)", rt / 10000000, (rt / 100000) % 100, api->library);
    } else {
        snprintf(buf, cap, "%.60s", api->library);
    }
}

static void no_device(fmoe_device_report *r, const char *driver, const char *why)
{
    r->kind = FMOE_DEVICE_ROCM;
    r->index = 0;
    r->available = 0;
    r->score = 0;
    snprintf(r->name, sizeof r->name, "no AMD GPU");
    snprintf(r->arch, sizeof r->arch, "none");
    snprintf(r->id, sizeof r->id, "none");
    snprintf(r->driver, sizeof r->driver, "%s", driver);
    snprintf(r->reason, sizeof r->reason, "%s", why);
}

static void one_device(const fmro_hip_api *api, int i, const char *driver, const char *kernels_why,
                       fmoe_device_report *r)
{
    r->kind = FMOE_DEVICE_ROCM;
    r->index = i;
    r->available = 0;
    r->score = 0;
    snprintf(r->driver, sizeof r->driver, "%s", driver);
    char err[96];
    int e = api->device_get_name(r->name, (int)sizeof r->name, i);
    if (e != FMRO_HIP_SUCCESS) {
        error_text(api, e, err, sizeof err);
        snprintf(r->name, sizeof r->name, "AMD GPU %d", i);
        snprintf(r->arch, sizeof r->arch, "unknown");
        snprintf(r->id, sizeof r->id, "unknown");
        snprintf(r->reason, sizeof r->reason, "hipDeviceGetName(%d) failed: %s", i, err);
        return;
    }
    r->name[sizeof r->name - 1] = '\0';
    if (api->device_get_pci_bus_id(r->id, (int)sizeof r->id, i) != FMRO_HIP_SUCCESS)
        snprintf(r->id, sizeof r->id, "unknown");
    r->id[sizeof r->id - 1] = '\0';
    size_t mem = 0;
    if (api->device_total_mem(&mem, i) == FMRO_HIP_SUCCESS && FMOE_HAS_FIELD(r, memory_bytes))
        r->memory_bytes = mem;
    unsigned char props[FMRO_HIP_PROPS_BYTES] = {0};
    char arch[64] = "";
    if (!api->get_device_properties || api->get_device_properties(props, i) != FMRO_HIP_SUCCESS ||
        fmro_arch_from_props(props, sizeof props, arch, sizeof arch) != 0) {
        snprintf(r->arch, sizeof r->arch, "unknown");
        snprintf(r->reason, sizeof r->reason, "the HIP runtime did not give the gfx arch of device %d", i);
        return;
    }
    snprintf(r->arch, sizeof r->arch, "%s", arch);
    char base[32];
    fmro_arch_base(arch, base, sizeof base);
    if (fmro_arch_targeted(base) && kernels_why) {
        snprintf(r->reason, sizeof r->reason, "%s: %.200s", base, kernels_why);
    } else if (fmro_arch_targeted(base)) {
        r->available = 1;
        r->score = FMRO_PROBE_SCORE;
        snprintf(r->reason, sizeof r->reason, "%s: %s", base, FMRO_PATH_NOTE);
    } else
        snprintf(r->reason, sizeof r->reason, "%s: not a target of this plugin (gfx90a, gfx940, gfx941, gfx942)", base);
}

uint32_t fmro_probe_reports(const fmro_hip_api *api, const char *load_why, const char *kernels_why,
                            fmoe_device_report *const *reports, uint32_t capacity)
{
    if (capacity == 0)
        return 0;
    if (!api) {
        no_device(reports[0], "none", load_why ? load_why : "no AMD GPU: the HIP runtime did not load");
        return 1;
    }
    char driver[64], why[256], err[96];
    versions(api, driver, sizeof driver);
    int count = 0;
    int e = api->get_device_count(&count);
    if (e != FMRO_HIP_SUCCESS || count <= 0) {
        if (e != FMRO_HIP_SUCCESS) {
            error_text(api, e, err, sizeof err);
            snprintf(why, sizeof why, "no AMD GPU: hipGetDeviceCount: %s (%s)", err, api->library);
        } else {
            snprintf(why, sizeof why, "no AMD GPU: the HIP runtime (%s) sees no device", api->library);
        }
        no_device(reports[0], driver, why);
        return 1;
    }
    uint32_t n = (uint32_t)count < capacity ? (uint32_t)count : capacity;
    for (uint32_t i = 0; i < n; i++)
        one_device(api, (int)i, driver, kernels_why, reports[i]);
    return n;
}
