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
 *
 *   [[tolerance]]                      # optional, repeatable: a looser conformance
 *   schemes = ["fp8e4m3:*"]            #   tolerance for these scheme globs
 *   mismatch = 0.001                   #   fraction of output elements allowed past the
 *                                      #   suite's per-element bound, in (0, 0.01]
 *   reason = "..."                     #   why the hardware needs it (non-empty)
 *   link = "https://..."               #   the issue or paper that shows it
 *
 *   [[option]]                         # optional, repeatable: an option the plugin takes
 *   name = "isa"  type = "enum"  values = [...]  default = "auto"  help = "..."
 *                                      #   (registry/option_decl.h has the schema)
 * (spec/testing.md: "where a plugin needs a looser tolerance, record the
 * tolerance and the issue link in the plugin's manifest"; the suite's own
 * table does not move for one plugin, docs/CONFORMANCE.md.)
 */
#ifndef FMOE_REGISTRY_MANIFEST_H
#define FMOE_REGISTRY_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "fusedmoe/common.h"
#include "registry/option_decl.h"

typedef struct fmoe_manifest_tolerance {
    char **schemes;
    size_t n_schemes;
    char *joined; /* the globs, ", "-separated (for messages) */
    double mismatch;
    char *reason;
    char *link;
} fmoe_manifest_tolerance;

/* At most this fraction of elements may be declared past the bound: a
 * manifest cannot turn the per-element check off. */
#define FMOE_MANIFEST_MAX_MISMATCH 0.01

typedef struct fmoe_manifest {
    char *path; /* the manifest file */
    char *name;
    char *library; /* resolved: directory of the manifest + library */
    char *version;
    char *vendor;
    char *description; /* "" if absent */
    uint32_t abi_major;
    uint32_t abi_minor;
    char **arch;
    size_t n_arch;
    char **devices;
    size_t n_devices;
    char **schemes;
    size_t n_schemes;
    char **requires;
    size_t n_requires;
    fmoe_manifest_tolerance *tolerances;
    size_t n_tolerances;
    fmoe_option_decl *options;
    size_t n_options;
} fmoe_manifest;

/* Strict like the config: unknown keys, wrong types, missing required keys
 * are PARSE_ERROR "<file>:<line>:<column>: ...". */
fmoe_status fmoe_manifest_load(const char *path, fmoe_manifest **out);
void fmoe_manifest_free(fmoe_manifest *m);
void fmoe_manifest_tolerances_free(fmoe_manifest_tolerance *t, size_t n);

/* 1 if the manifest's arch list contains `machine` (uname -m) or "any". */
int fmoe_manifest_matches_arch(const fmoe_manifest *m, const char *machine);

#endif
