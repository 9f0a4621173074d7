/*
 * cli/cli.h - what the `fusedmoe` commands share: exit codes, the global
 * options, the command entry points, error reporting and context opening.
 *
 * The tool uses the public API only (fusedmoe.h); the one internal piece it
 * compiles in is base/config_args.c, so the replay lines it prints use the
 * exact flag spelling the library logs.
 */
#ifndef FMOE_CLI_H
#define FMOE_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "fusedmoe/fusedmoe.h"

/* Exit codes: part of the interface (docs/CLI.md); never renumber. */
#define CLI_EXIT_OK         0 /* success */
#define CLI_EXIT_CHECK      1 /* a check failed: `run` found a mismatch */
#define CLI_EXIT_USAGE      2 /* bad command line */
#define CLI_EXIT_CONFIG     3 /* configuration or input error: TOML, layer config, scheme key */
#define CLI_EXIT_NO_BACKEND 4 /* no backend can serve the layer */
#define CLI_EXIT_INTERNAL   5 /* plugin or internal error */

/* Options given before the command; they shape the context. */
typedef struct cli_globals {
    const char *config_path;   /* --config, or NULL for the library's default */
    const char **plugin_files; /* --plugin, in order given */
    uint32_t n_plugin_files;
    const char *log_spec; /* --log, already exported as FMOE_LOG */
    int isolated;         /* --isolated: fmoe_context_options.isolated */
} cli_globals;

/* A command gets argv starting at its own name (argv[0]) and returns the
 * process exit code. */
int cmd_plugins(const cli_globals *g, int argc, char **argv);
int cmd_probe(const cli_globals *g, int argc, char **argv);
int cmd_explain(const cli_globals *g, int argc, char **argv);
int cmd_run(const cli_globals *g, int argc, char **argv);
int cmd_conform(const cli_globals *g, int argc, char **argv);
int cmd_bench(const cli_globals *g, int argc, char **argv);

/* --- errors.c ------------------------------------------------------------ */

/* "fusedmoe: <message>" on stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A usage error in command `cmd` (NULL for the global options): prints the
 * message and a pointer to --help, returns CLI_EXIT_USAGE. */
int cli_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The exit code for a failed library call. */
int cli_exit_for_status(fmoe_status st);

/* Report a failed library call ("fusedmoe: <what>: <fmoe_last_error>") and
 * return its exit code. `what` may be NULL when the library text says it all. */
int cli_fail(fmoe_status st, const char *what);

/* --- context.c ----------------------------------------------------------- */

/* Create the context from the global options. Returns CLI_EXIT_OK, or an exit
 * code after reporting the error. */
int cli_open_context(const cli_globals *g, fmoe_context **out);

/* The body of a listing command (`plugins`, `probe`): parse --help / --json,
 * open the context, print it as a table or as JSON. Returns the exit code. */
int cli_run_listing(const cli_globals *g, int argc, char **argv, const char *command, void (*help)(FILE *out),
                    int (*print_table)(const fmoe_context *ctx), int (*print_json)(const fmoe_context *ctx));

/* "cpu:0"; "any" for FMOE_DEVICE_ANY. */
void cli_device_string(int32_t kind, int32_t index, char *buf, size_t cap);

#endif
