/* cli/table.c - aligned columns (see table.h). */
#include "cli/table.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define COLUMN_GAP  2
#define NOTE_INDENT 4

/* A row holds its cells, or (ncols == 0) one note line in cells[0]. */
typedef struct row {
    char **cells;
    unsigned ncols;
} row;

struct cli_table {
    unsigned ncols;
    row *rows; /* rows[0] is the header */
    size_t n, cap;
};

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* Width on a terminal, counting UTF-8 code points rather than bytes (device
 * names may hold a non-ASCII character). */
static size_t text_width(const char *s)
{
    size_t w = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        w += (*p & 0xC0) != 0x80;
    return w;
}

static void free_row(row *r)
{
    unsigned n = r->ncols ? r->ncols : 1;
    for (unsigned c = 0; r->cells && c < n; c++)
        free(r->cells[c]);
    free(r->cells);
}

static int push(cli_table *t, row r)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        row *rows = realloc(t->rows, cap * sizeof *rows);
        if (!rows)
            return -1;
        t->rows = rows;
        t->cap = cap;
    }
    t->rows[t->n++] = r;
    return 0;
}

static int add_cells(cli_table *t, unsigned ncols, const char *const *cells)
{
    unsigned n = ncols ? ncols : 1;
    row r = {calloc(n, sizeof(char *)), ncols};
    if (!r.cells)
        return -1;
    for (unsigned c = 0; c < n; c++) {
        r.cells[c] = dup_str(cells[c] ? cells[c] : "-");
        if (!r.cells[c]) {
            free_row(&r);
            return -1;
        }
    }
    if (push(t, r) != 0) {
        free_row(&r);
        return -1;
    }
    return 0;
}

cli_table *table_new(unsigned ncols, const char *const *headers)
{
    if (ncols == 0)
        return NULL;
    cli_table *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->ncols = ncols;
    if (add_cells(t, ncols, headers) != 0) {
        table_free(t);
        return NULL;
    }
    return t;
}

void table_free(cli_table *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n; i++)
        free_row(&t->rows[i]);
    free(t->rows);
    free(t);
}

int table_row(cli_table *t, const char *const *cells)
{
    return add_cells(t, t->ncols, cells);
}

int table_note(cli_table *t, const char *fmt, ...)
{
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    const char *cell = line;
    return add_cells(t, 0, &cell);
}

void table_print(const cli_table *t, FILE *f)
{
    size_t *width = calloc(t->ncols, sizeof *width);
    if (!width)
        return;
    for (size_t i = 0; i < t->n; i++)
        for (unsigned c = 0; c < t->rows[i].ncols; c++) {
            size_t w = text_width(t->rows[i].cells[c]);
            if (w > width[c])
                width[c] = w;
        }
    for (size_t i = 0; i < t->n; i++) {
        const row *r = &t->rows[i];
        if (r->ncols == 0) {
            fprintf(f, "%*s%s\n", NOTE_INDENT, "", r->cells[0]);
            continue;
        }
        for (unsigned c = 0; c < r->ncols; c++) {
            fputs(r->cells[c], f);
            if (c + 1 < r->ncols)
                fprintf(f, "%*s", (int)(width[c] - text_width(r->cells[c]) + COLUMN_GAP), "");
        }
        fputc('\n', f);
    }
    free(width);
}
