/*
 * plugins/rocm/kernel_lib.c - loading the kernel library (kernel_lib.h).
 */
#define _GNU_SOURCE /* dladdr */
#include "plugins/rocm/kernel_lib.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int fmro_kernel_lib_path(const char *path, const char *file, char *out, size_t cap)
{
    const char *slash = strrchr(path, '/');
    size_t dir = slash ? (size_t)(slash - path) + 1 : 0;
    int n = snprintf(out, cap, "%.*s%s", (int)dir, path, file);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

const fmro_kernels *fmro_kernel_lib_load(const char *file, char *why, size_t cap)
{
    Dl_info info;
    char path[4096];
    if (!dladdr((void *)(uintptr_t)&fmro_kernel_lib_load, &info) || !info.dli_fname) {
        snprintf(why, cap, "kernel library %s: cannot find the plugin's own directory (dladdr)", file);
        return NULL;
    }
    if (fmro_kernel_lib_path(info.dli_fname, file, path, sizeof path) != 0) {
        snprintf(why, cap, "kernel library %s: path too long", file);
        return NULL;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(why, cap, "kernel library not loaded: %.200s", e ? e : path);
        return NULL;
    }
    fmro_kernels_entry_fn entry;
    *(void **)&entry = dlsym(h, "fmro_kernels_entry");
    const fmro_kernels *k = entry ? entry() : NULL;
    if (!k || k->version != FMRO_KERNELS_VERSION) {
        snprintf(why, cap, "kernel library %s: no fmro_kernels_entry of version %d (a stale build?)", path,
                 FMRO_KERNELS_VERSION);
        return NULL;
    }
    return k;
}
