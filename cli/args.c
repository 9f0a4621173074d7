/* cli/args.c - option matching and strict number parsing (see args.h). */
#include "cli/args.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int cli_opt_value(int argc, char **argv, int *i, const char *name, const char **value)
{
    const char *arg = argv[*i];
    size_t n = strlen(name);
    if (strncmp(arg, name, n) != 0)
        return CLI_OPT_NO;
    if (arg[n] == '=') {
        *value = arg + n + 1;
        return CLI_OPT_YES;
    }
    if (arg[n] != '\0')
        return CLI_OPT_NO; /* "--top-kx" is some other (unknown) option */
    if (*i + 1 >= argc)
        return CLI_OPT_MISSING;
    *value = argv[++*i];
    return CLI_OPT_YES;
}

int cli_opt_flag(const char *arg, const char *name)
{
    return strcmp(arg, name) == 0;
}

int cli_parse_u64(const char *s, uint64_t *out)
{
    /* strtoull alone would accept " 7", "+7" and "-7" (wrapped), so digits
     * are checked first. */
    if (!s || !*s)
        return -1;
    for (const char *p = s; *p; p++)
        if (*p < '0' || *p > '9')
            return -1;
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno == ERANGE || *end != '\0')
        return -1;
    *out = (uint64_t)v;
    return 0;
}

int cli_parse_u32(const char *s, uint32_t *out)
{
    uint64_t v;
    if (cli_parse_u64(s, &v) != 0 || v > UINT32_MAX)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

int cli_parse_float(const char *s, float *out)
{
    if (!s || !*s || *s == ' ' || *s == '\t' || *s == '\n')
        return -1;
    errno = 0;
    char *end = NULL;
    float v = strtof(s, &end);
    /* ERANGE on underflow still gives a usable value; only overflow and
     * non-finite spellings ("inf", "nan") are refused. */
    if (end == s || *end != '\0' || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}
