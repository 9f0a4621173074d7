/*
 * cli/table.h - aligned columns for human output.
 *
 * A table collects rows of cells (copied), each row optionally followed by
 * indented note lines (reasons, paths: things too long for a column), and
 * prints them with every column as wide as its widest cell. The last column
 * is not padded, so lines carry no trailing blanks.
 */
#ifndef FMOE_CLI_TABLE_H
#define FMOE_CLI_TABLE_H

#include <stdio.h>

typedef struct cli_table cli_table;

/* A table with `ncols` columns titled `headers`. NULL when out of memory. */
cli_table *table_new(unsigned ncols, const char *const *headers);
void table_free(cli_table *t);

/* Append a row of `ncols` cells (NULL cells print as "-"). 0, or -1 when out of memory. */
int table_row(cli_table *t, const char *const *cells);

/* Append a note line under the last row. 0, or -1 when out of memory. */
int table_note(cli_table *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void table_print(const cli_table *t, FILE *f);

#endif
