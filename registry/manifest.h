/*
 * registry/manifest.h - the small TOML file shipped beside every plugin
 * library (docs/PLUGIN-ABI.md, "Manifest"). The registry reads it before
 * dlopen so it can skip a plugin built for another architecture or ABI
 * major without loading it.
 *
 *   name = "reference"                 # required; [a-z0-9_-]+, unique
 *   library = "libfmoe-reference.so"   # required; relative to the manifest
 *   version = "0.1.0"                  # required
 *   vendor = "fusedmoe"                # required
 *   description = "..."                # optional
 *   abi_major = 1                      # required
 *   abi_minor = 0                      # required: the minor it was built against
 *   arch = ["x86_64", "aarch64"]       # required; "any" allowed
 *   devices = ["cpu"]                  # required; cpu|cuda|rocm
 *   schemes = ["bf16", "f16", "f32"]   # required; scheme-key globs served
 *   requires = ["cuda>=12.8"]          # optional; free text shown to users
 */
#ifndef FMOE_REGISTRY_MANIFEST_H
#define FMOE_REGISTRY_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "fusedmoe/common.h"

typedef struct fmoe_manifest {
    char *path;          /* the manifest file */
    char *name;
    char *library;       /* resolved: directory of the manifest + library */
    char *version;
    char *vendor;
    char *description;   /* "" if absent */
    uint32_t abi_major;
    uint32_t abi_minor;
    char **arch;     size_t n_arch;
    char **devices;  size_t n_devices;
    char **schemes;  size_t n_schemes;
    char **requires; size_t n_requires;
} fmoe_manifest;

/* Strict like the config: unknown keys, wrong types, missing required keys
 * are PARSE_ERROR "<file>:<line>:<column>: ...". */
fmoe_status fmoe_manifest_load(const char *path, fmoe_manifest **out);
void fmoe_manifest_free(fmoe_manifest *m);

/* 1 if the manifest's arch list contains `machine` (uname -m) or "any". */
int fmoe_manifest_matches_arch(const fmoe_manifest *m, const char *machine);

#endif
