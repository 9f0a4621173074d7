/*
 * plugins/rocm/kernel_lib.h - finding and loading the plugin's kernel
 * library (kernels.h) from the plugin's own directory, with dlopen: the
 * plugin links no GPU runtime, so it loads on any machine and says why
 * when the kernels cannot.
 */
#ifndef FMOE_PLUGINS_ROCM_KERNEL_LIB_H
#define FMOE_PLUGINS_ROCM_KERNEL_LIB_H

#include <stddef.h>

#include "plugins/rocm/kernels.h"

/* dlopen `file` (a bare file name) from the directory of the library that
 * holds this function, and check its table. NULL with the reason in why.
 * The library stays loaded (GPU runtimes do not survive dlclose). */
const fmro_kernels *fmro_kernel_lib_load(const char *file, char *why, size_t cap);

/* The directory part of `path` joined with `file` into out: 0, or -1 when
 * it does not fit. (Split out for tests/rocm/test_kernel_lib.c.) */
int fmro_kernel_lib_path(const char *path, const char *file, char *out, size_t cap);

#endif /* FMOE_PLUGINS_ROCM_KERNEL_LIB_H */
