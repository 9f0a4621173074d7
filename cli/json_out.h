/*
 * cli/json_out.h - JSON output through jansson: safe string values and
 * printing a document to stdout.
 */
#ifndef FMOE_CLI_JSON_OUT_H
#define FMOE_CLI_JSON_OUT_H

#include <jansson.h>

#include "fusedmoe/fusedmoe.h"

/* A JSON string for `s`: null for NULL; bytes that are not valid UTF-8 (a
 * plugin's device name, say) become '?' rather than failing the document. */
json_t *cli_json_string(const char *s);

/* Set key to value, consuming the reference. A NULL value (jansson out of
 * memory) leaves the key out instead of crashing the tool. */
void cli_json_set(json_t *obj, const char *key, json_t *value);

/* A float as the shortest decimal that reads back to it; null if not finite. */
json_t *cli_json_float(float v);

/* The layer config as an object: every field by name, plus "args", the
 * replay flags. NULL when out of memory. */
json_t *cli_layer_json(const fmoe_layer_config *cfg);

/* Print `root` (consumed) to stdout, indented, with a final newline.
 * Returns CLI_EXIT_OK, or CLI_EXIT_INTERNAL after reporting a failure. */
int cli_json_print(json_t *root);

#endif
