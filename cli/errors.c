/* cli/errors.c - error messages and the mapping from library status to exit code. */
#include <stdarg.h>
#include <stdio.h>

#include "cli/cli.h"

void cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("fusedmoe: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int cli_usage(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("fusedmoe: ", stderr);
    if (cmd)
        fprintf(stderr, "%s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    fprintf(stderr, "Try 'fusedmoe%s%s --help'.\n", cmd ? " " : "", cmd ? cmd : "");
    return CLI_EXIT_USAGE;
}

int cli_exit_for_status(fmoe_status st)
{
    switch (st) {
    case FMOE_STATUS_OK:
        return CLI_EXIT_OK;
    case FMOE_STATUS_UNSUPPORTED:
        return CLI_EXIT_NO_BACKEND;
    /* Everything the user can fix by changing what they gave us. */
    case FMOE_STATUS_INVALID_ARGUMENT:
    case FMOE_STATUS_NOT_FOUND:
    case FMOE_STATUS_IO_ERROR:
    case FMOE_STATUS_PARSE_ERROR:
        return CLI_EXIT_CONFIG;
    default:
        return CLI_EXIT_INTERNAL;
    }
}

int cli_fail(fmoe_status st, const char *what)
{
    const char *msg = fmoe_last_error();
    if (!msg[0])
        msg = fmoe_status_name(st);
    if (what)
        cli_error("%s: %s", what, msg);
    else
        cli_error("%s", msg);
    return cli_exit_for_status(st);
}
