/*
 * base/glob.h - name and scheme-key globs (fnmatch(3): *, ?, [...]) and
 * the comma/colon separated lists the environment variables use.
 */
#ifndef FMOE_REGISTRY_GLOB_H
#define FMOE_REGISTRY_GLOB_H

#include <stddef.h>

/* 1 if `name` matches `glob`. */
int fmoe_glob_match(const char *glob, const char *name);

/* Index of the first glob in `globs` matching `name`, or -1. */
int fmoe_glob_find(char *const *globs, size_t n, const char *name);

/* 1 if `s` is a valid plugin name: [a-z0-9_-]+. Names end up in file names,
 * log lines and FMOE_BACKENDS globs, so they use characters that need no
 * quoting anywhere. */
int fmoe_is_plugin_name(const char *s);

/* Split `text` at `sep` into a NULL-terminated array of trimmed, non-empty
 * strings (empty items are dropped: an empty PATH entry never means "."),
 * stored in one allocation: free the result with free(). NULL on OOM. */
char **fmoe_split_list(const char *text, char sep, size_t *count);

/* The `n` strings joined with ", " (a glob list for display), malloc'd;
 * NULL on OOM. */
char *fmoe_join_list(char *const *items, size_t n);

#endif
