/*
 * registry/option_decl.h - the options a plugin declares in its manifest
 * (docs/PLUGIN-ABI.md, "Options"), and the check of a value against one.
 *
 *   [[option]]
 *   name = "isa"                          # [a-z0-9_]+, unique in the manifest
 *   type = "enum"                         # bool | int | enum | string
 *   values = ["auto", "avx512", "avx2"]   # enum only, non-empty
 *   min = 1                               # int only, optional
 *   max = 64                              # int only, optional
 *   default = "auto"                      # required, a value of the type
 *   help = "one line of meaning"          # required, non-empty
 *
 * Values travel as text (the ABI's fmoe_option): bool "true"/"false", int
 * in decimal, enum and string verbatim. The checks here are the host's:
 * init still has the last word on what a value means.
 */
#ifndef FMOE_REGISTRY_OPTION_DECL_H
#define FMOE_REGISTRY_OPTION_DECL_H

#include <stddef.h>
#include <stdint.h>

#include "fusedmoe/common.h"
#include "registry/toml_wrap.h"

#define FMOE_OPTION_BOOL   0
#define FMOE_OPTION_INT    1
#define FMOE_OPTION_ENUM   2
#define FMOE_OPTION_STRING 3

/* Ceilings: a manifest is small, and every option is shown to users. */
#define FMOE_OPTION_MAX_DECLS  64
#define FMOE_OPTION_MAX_VALUES 64
#define FMOE_OPTION_NAME_MAX   48
#define FMOE_OPTION_TEXT_MAX   1024 /* a value, default or help text */

typedef struct fmoe_option_decl {
    char *name;
    int32_t type;  /* FMOE_OPTION_* */
    char **values; /* enum: the allowed values */
    size_t n_values;
    int has_min, has_max; /* int only */
    int64_t min, max;
    char *domain;       /* for messages and listings: "auto|avx2", "1..64", "true|false", "text" */
    char *default_text; /* the default as the plugin receives it */
    char *help;
} fmoe_option_decl;

/* Read every [[option]] of a manifest (none: *out NULL, *n 0). Errors are
 * PARSE_ERROR "<file>:<line>:<col>: option[i]: ..." as the rest of the
 * manifest's. */
fmoe_status fmoe_option_decls_read(const fmoe_toml_doc *doc, const fmoe_toml_node *root, fmoe_option_decl **out,
                                   size_t *n);
void fmoe_option_decls_free(fmoe_option_decl *d, size_t n);

const char *fmoe_option_type_name(int32_t type);

/* The declaration named `name`, or NULL. */
const fmoe_option_decl *fmoe_option_decl_find(const fmoe_option_decl *d, size_t n, const char *name);

/* 0 when `text` is a value of `d`; otherwise -1 and `why` says what was
 * expected ("expected one of auto|avx2|portable"). */
int fmoe_option_value_check(const fmoe_option_decl *d, const char *text, char *why, size_t cap);

#endif
