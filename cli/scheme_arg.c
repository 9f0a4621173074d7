/* cli/scheme_arg.c - --scheme as a key or a config.json (see scheme_arg.h). */
#include "cli/scheme_arg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"

int cli_scheme_is_path(const char *value)
{
    size_t n = strlen(value);
    struct stat sb;
    /* Keys contain no '.', so "x.json" is never a key; and a key that
     * happens to name an existing file is unlikely enough to prefer the file. */
    return (n >= 5 && strcmp(value + n - 5, ".json") == 0) || stat(value, &sb) == 0;
}

/* A checkpoint directory stands for its config.json: the path to read,
 * malloc'd (a fixed buffer would cut a long path into another file's
 * name); NULL when memory ran out. */
static char *config_path(const char *value)
{
    struct stat sb;
    if (stat(value, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return strdup(value);
    size_t n = strlen(value) + sizeof "/config.json";
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/config.json", value);
    return p;
}

int cli_scheme_from_arg(const char *value, const char *modules, uint32_t num_experts, fmoe_scheme *out)
{
    memset(out, 0, sizeof *out);
    out->struct_size = sizeof *out;
    if (!cli_scheme_is_path(value)) {
        fmoe_status st = fmoe_scheme_parse(value, out);
        if (st != FMOE_STATUS_OK)
            return cli_fail(st, "bad --scheme");
        return CLI_EXIT_OK;
    }
    fmoe_quant_config *qc = NULL;
    char *path = config_path(value);
    if (!path) {
        cli_error("--scheme: out of memory");
        return CLI_EXIT_INTERNAL;
    }
    fmoe_status st = fmoe_quant_config_load(path, &qc);
    free(path);
    if (st == FMOE_STATUS_OK) {
        fmoe_expert_modules m;
        fmoe_expert_modules_init(&m);
        m.prefix = modules ? modules : CLI_SCHEME_DEFAULT_MODULES;
        m.num_experts = num_experts;
        st = fmoe_quant_config_scheme(qc, &m, out);
    }
    fmoe_quant_config_destroy(qc);
    if (st == FMOE_STATUS_OK)
        return CLI_EXIT_OK;
    /* An unreadable file or a scheme no MoE method exists for is an input
     * error, not "no backend": no backend could be asked. */
    cli_error("--scheme: %s", fmoe_last_error());
    return st == FMOE_STATUS_OUT_OF_MEMORY ? CLI_EXIT_INTERNAL : CLI_EXIT_CONFIG;
}
