/*
 * plugins/rocm/runtime.hip - the kernel library's table (kernels.h): the
 * device runtime calls the plugin needs (count, properties, memory,
 * copies, synchronization), spelled once through dialect.h's FMRO_RT, and
 * the forward, which launches moe_sorting and the stages in order on the
 * caller's stream. The only exported symbol of the library is
 * fmro_kernels_entry.
 */
#include <stdio.h>
#include <string.h>

#include "plugins/rocm/launch.h"
#include "plugins/rocm/sorting.h"

static int fail(char *why, size_t cap, const char *what, fmro_error e)
{
    if (why && cap)
        snprintf(why, cap, "%s: %s (%s)", what, FMRO_RT(GetErrorString)(e), FMRO_RT(GetErrorName)(e));
    return -1;
}

static int device_count(int *count, char *why, size_t cap)
{
    *count = 0;
    fmro_error e = FMRO_RT(GetDeviceCount)(count);
    if (e != FMRO_SUCCESS) {
        *count = 0;
        (void)FMRO_LAST_ERROR(); /* leave no error behind for later calls */
        return fail(why, cap, FMRO_RT_PLATFORM " GetDeviceCount", e);
    }
    return 0;
}

static int device_info(int device, fmro_device_info *info, char *why, size_t cap)
{
    memset(info, 0, sizeof *info);
    fmro_device_prop p;
    fmro_error e = FMRO_RT(GetDeviceProperties)(&p, device);
    if (e != FMRO_SUCCESS)
        return fail(why, cap, FMRO_RT_PLATFORM " GetDeviceProperties", e);
    snprintf(info->name, sizeof info->name, "%.127s", p.name);
#if defined(__HIPCC__)
    snprintf(info->arch, sizeof info->arch, "%.63s", p.gcnArchName);
#else
    snprintf(info->arch, sizeof info->arch, "sm_%d%d", p.major, p.minor);
#endif
    if (FMRO_RT(DeviceGetPCIBusId)(info->pci_id, (int)sizeof info->pci_id, device) != FMRO_SUCCESS)
        snprintf(info->pci_id, sizeof info->pci_id, "%s:%d", FMRO_RT_PLATFORM, device);
    info->memory_bytes = p.totalGlobalMem;
    info->warp_size = p.warpSize;
    if (FMRO_RT(RuntimeGetVersion)(&info->runtime_version) != FMRO_SUCCESS)
        info->runtime_version = 0;
    if (FMRO_RT(DriverGetVersion)(&info->driver_version) != FMRO_SUCCESS)
        info->driver_version = 0;
    return 0;
}

static int alloc(int device, void **ptr, size_t bytes, char *why, size_t cap)
{
    *ptr = NULL;
    fmro_error e = FMRO_RT(SetDevice)(device);
    if (e == FMRO_SUCCESS)
        e = FMRO_RT(Malloc)(ptr, bytes ? bytes : 1);
    if (e != FMRO_SUCCESS) {
        *ptr = NULL;
        char what[64];
        snprintf(what, sizeof what, FMRO_RT_PLATFORM "Malloc(%zu bytes)", bytes);
        return fail(why, cap, what, e);
    }
    return 0;
}

static void release(int device, void *ptr)
{
    if (ptr && FMRO_RT(SetDevice)(device) == FMRO_SUCCESS)
        (void)FMRO_RT(Free)(ptr);
}

static int copy(int device, int to_device, void *dst, const void *src, size_t bytes, void *stream, char *why,
                size_t cap)
{
    fmro_error e = FMRO_RT(SetDevice)(device);
    if (e == FMRO_SUCCESS && bytes) {
        if (stream)
            e = FMRO_RT(MemcpyAsync)(dst, src, bytes, to_device ? FMRO_RT_H2D : FMRO_RT_D2H, (fmro_stream)stream);
        else
            e = FMRO_RT(Memcpy)(dst, src, bytes, to_device ? FMRO_RT_H2D : FMRO_RT_D2H);
    }
    return e == FMRO_SUCCESS ? 0 : fail(why, cap, to_device ? "copy to the device" : "copy from the device", e);
}

static int synchronize(int device, void *stream, char *why, size_t cap)
{
    fmro_error e = FMRO_RT(SetDevice)(device);
    if (e == FMRO_SUCCESS)
        e = stream ? FMRO_RT(StreamSynchronize)((fmro_stream)stream) : FMRO_RT(DeviceSynchronize)();
    return e == FMRO_SUCCESS ? 0 : fail(why, cap, "synchronize", e);
}

static int forward(const fmro_layer_dev *L, const fmro_call *c, char *why, size_t cap)
{
    if (c->m == 0 || c->m > L->max_tokens) {
        snprintf(why, cap, "forward of %u tokens: the layer was created for 1 to %u (max_num_tokens)", c->m,
                 L->max_tokens);
        return -1;
    }
    fmro_error e = FMRO_RT(SetDevice)(L->device);
    if (e != FMRO_SUCCESS)
        return fail(why, cap, "set device", e);
    fmro_sizes z;
    z.m = c->m;
    z.k = L->top_k;
    z.pairs = c->m * L->top_k;
    z.local = L->local_experts;
    uint32_t experts = z.local ? z.local : 1;
    z.capacity = fmro_sorting_capacity(z.m, z.k, experts, FMRO_SORT_BLOCK);
    z.blocks = fmro_sorting_blocks(z.m, z.k, experts, FMRO_SORT_BLOCK);
    fmro_stream s = (fmro_stream)c->stream;
    if (z.local > 0)
        fmro_launch_sorting(L, c, &z, s);
    else
        fmro_launch_fill((uint32_t *)((char *)L->workspace + L->ws.pos_of), z.pairs, 0xFFFFFFFFu, s);
    fmro_launch_stages(L, c, &z, s);
    e = FMRO_LAST_ERROR();
    return e == FMRO_SUCCESS ? 0 : fail(why, cap, "kernel launch", e);
}

static const fmro_kernels table = {
    FMRO_KERNELS_VERSION, FMRO_RT_PLATFORM, device_count, device_info, alloc, release, copy, synchronize, forward,
};

extern "C" __attribute__((visibility("default"))) const fmro_kernels *fmro_kernels_entry(void)
{
    return &table;
}
