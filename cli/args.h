/*
 * cli/args.h - reading options and numbers off the command line.
 *
 * Options are "--name value" or "--name=value". Numbers are strict: decimal
 * digits only for integers (no sign, no spaces, no trailing junk, no
 * overflow), finite values for floats. Callers name the flag in the error.
 */
#ifndef FMOE_CLI_ARGS_H
#define FMOE_CLI_ARGS_H

#include <stdint.h>

/* Results of cli_opt_value. */
#define CLI_OPT_NO      0    /* argv[*i] is not this option */
#define CLI_OPT_YES     1    /* matched; *value set and *i advanced past a separate value */
#define CLI_OPT_MISSING (-1) /* matched but no value follows */

/* Match argv[*i] against option `name` ("--experts") taking a value. */
int cli_opt_value(int argc, char **argv, int *i, const char *name, const char **value);

/* 1 if arg is exactly the value-less flag `name`. */
int cli_opt_flag(const char *arg, const char *name);

/* 0 on success, -1 when `s` is not a number of that kind. */
int cli_parse_u32(const char *s, uint32_t *out);
int cli_parse_u64(const char *s, uint64_t *out);
int cli_parse_float(const char *s, float *out);

#endif
