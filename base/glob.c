/* base/glob.c - glob matching and list splitting (see glob.h). */
#include "base/glob.h"

#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

int fmoe_glob_match(const char *glob, const char *name)
{
    return fnmatch(glob, name, 0) == 0;
}

int fmoe_glob_find(char *const *globs, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (fmoe_glob_match(globs[i], name))
            return (int)i;
    return -1;
}

int fmoe_is_plugin_name(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_' || *s == '-'))
            return 0;
    return 1;
}

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

char **fmoe_split_list(const char *text, char sep, size_t *count)
{
    size_t len = strlen(text);
    size_t slots = 1;
    for (size_t i = 0; i < len; i++)
        slots += text[i] == sep;
    /* Pointer array followed by a copy of the text, so one free() releases all. */
    char **items = malloc((slots + 1) * sizeof *items + len + 1);
    if (!items)
        return NULL;
    char *copy = (char *)(items + slots + 1);
    memcpy(copy, text, len + 1);
    size_t n = 0;
    char *p = copy;
    for (;;) {
        char *end = strchr(p, sep);
        if (end)
            *end = '\0';
        while (is_space(*p))
            p++;
        char *tail = p + strlen(p);
        while (tail > p && is_space(tail[-1]))
            *--tail = '\0';
        if (*p)
            items[n++] = p;
        if (!end)
            break;
        p = end + 1;
    }
    items[n] = NULL;
    if (count)
        *count = n;
    return items;
}

char *fmoe_join_list(char *const *items, size_t n)
{
    size_t len = 1;
    for (size_t i = 0; i < n; i++)
        len += strlen(items[i]) + 2;
    char *s = malloc(len);
    if (!s)
        return NULL;
    s[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (i)
            strcat(s, ", ");
        strcat(s, items[i]);
    }
    return s;
}
