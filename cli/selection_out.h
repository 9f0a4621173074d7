/*
 * cli/selection_out.h - printing a backend selection (fmoe_selection): the
 * candidate table and JSON shared by `explain` and `run`.
 */
#ifndef FMOE_CLI_SELECTION_OUT_H
#define FMOE_CLI_SELECTION_OUT_H

#include <jansson.h>
#include <stdio.h>

#include "fusedmoe/fusedmoe.h"

/* "selected", "accepted", "refused", ... */
const char *cli_verdict_name(int32_t verdict);

/* "reference/unquantized on cpu:0" for the chosen candidate; returns 0, or
 * -1 (buf = "none") when nothing was chosen. */
int cli_selection_chosen(const fmoe_selection *sel, char *buf, size_t cap);

/* Every candidate, one row each, its reason on an indented line. Returns 0,
 * or -1 when the library would not give a candidate (reported). */
int cli_selection_table(const fmoe_selection *sel, FILE *f);

/* {"scheme", "chosen" (index or null), "selected" ({plugin, method, device}
 * or null), "summary", "candidates": [...]}. NULL when out of memory or a
 * candidate could not be read (reported). */
json_t *cli_selection_json(const fmoe_selection *sel);

#endif
