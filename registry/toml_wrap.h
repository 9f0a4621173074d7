/*
 * registry/toml_wrap.h - a read-only TOML document for C, over toml++.
 *
 * fmoe_toml_parse() turns text into a document; the document is a tree of
 * nodes (tables, arrays, scalars) that C code walks with the accessors below
 * and never modifies. Every node knows where it starts in the text, and so
 * does every key of a table, so a caller can point an error at the exact
 * line:column of the offending key or value. Table entries are kept in the
 * order their keys first appear in the text (toml++ itself sorts them).
 *
 * Ownership: the document owns every node and every string reachable from it;
 * pointers stay valid until fmoe_toml_free(doc). Functions that return
 * copies (fmoe_toml_copy_*) return malloc'd memory the caller frees.
 *
 * Errors go through base/error.h: a function returning fmoe_status sets the
 * thread's error text. Parse errors and the schema helpers at the end of
 * this file all use one format, "<source>:<line>:<column>: <description>",
 * with 1-based line and column (columns count characters, not bytes).
 *
 * No C++ exception ever leaves these functions.
 */
#ifndef FMOE_REGISTRY_TOML_WRAP_H
#define FMOE_REGISTRY_TOML_WRAP_H

#include <stddef.h>
#include <stdint.h>

#include "fusedmoe/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fmoe_toml_doc fmoe_toml_doc;
typedef struct fmoe_toml_node fmoe_toml_node;

/* Node kinds. A date, a time, a local date-time and an offset date-time are
 * all DATETIME; fmoe_toml_get_datetime() says which parts are present. */
typedef enum fmoe_toml_kind {
    FMOE_TOML_TABLE = 1,
    FMOE_TOML_ARRAY = 2,
    FMOE_TOML_STRING = 3,
    FMOE_TOML_INTEGER = 4,
    FMOE_TOML_FLOAT = 5,
    FMOE_TOML_BOOL = 6,
    FMOE_TOML_DATETIME = 7,
} fmoe_toml_kind;

/* A place in the text; 1-based. */
typedef struct fmoe_toml_pos {
    uint32_t line;
    uint32_t column;
} fmoe_toml_pos;

typedef struct fmoe_toml_datetime {
    int has_date, has_time, has_offset;
    int year, month, day;     /* when has_date */
    int hour, minute, second; /* when has_time */
    uint32_t nanosecond;      /* when has_time */
    int offset_minutes;       /* when has_offset: east of UTC */
} fmoe_toml_datetime;

/* ---- documents --------------------------------------------------------- */

/* Parse `len` bytes of `text` (need not be NUL-terminated). `source` names
 * the text in error messages (a path, "<string>"); NULL means "<string>".
 * Returns OK and *out, or PARSE_ERROR ("<source>:<line>:<column>: <what
 * toml++ reported>") or OUT_OF_MEMORY with *out NULL. */
fmoe_status fmoe_toml_parse(const char *text, size_t len, const char *source, fmoe_toml_doc **out);

/* Read and parse the file at `path` (which also becomes the source name).
 * NOT_FOUND when the file does not exist, IO_ERROR when it cannot be read,
 * otherwise as fmoe_toml_parse(). */
fmoe_status fmoe_toml_parse_file(const char *path, fmoe_toml_doc **out);

/* NULL is allowed. */
void fmoe_toml_free(fmoe_toml_doc *doc);

/* The root table. */
const fmoe_toml_node *fmoe_toml_root(const fmoe_toml_doc *doc);

/* The source name given at parse time. */
const char *fmoe_toml_source(const fmoe_toml_doc *doc);

/* ---- every node -------------------------------------------------------- */

fmoe_toml_kind fmoe_toml_kind_of(const fmoe_toml_node *node);

/* "table", "array", "string", "integer", "float", "boolean", "date-time". */
const char *fmoe_toml_kind_name(fmoe_toml_kind kind);

/* Where the node starts: the '[' of an array or a table header, the first
 * character of a scalar, the key of a dotted-key table. */
fmoe_toml_pos fmoe_toml_pos_of(const fmoe_toml_node *node);

/* Number of entries of a table or elements of an array; 0 for scalars. */
size_t fmoe_toml_size(const fmoe_toml_node *node);

/* ---- tables: entries 0..size-1 in the order their keys first appear ---- */

/* The key of entry `i` (NUL-terminated; a key may contain "\u0000", in
 * which case *len, if `len` is not NULL, is the full length). */
const char *fmoe_toml_key(const fmoe_toml_node *table, size_t i, size_t *len);
fmoe_toml_pos fmoe_toml_key_pos(const fmoe_toml_node *table, size_t i);
const fmoe_toml_node *fmoe_toml_value(const fmoe_toml_node *table, size_t i);

/* Index of `key` in `table`, or -1 when absent (or `table` is no table). */
long fmoe_toml_find(const fmoe_toml_node *table, const char *key);

/* The value of `key`, or NULL. */
const fmoe_toml_node *fmoe_toml_get(const fmoe_toml_node *table, const char *key);

/* ---- arrays ------------------------------------------------------------- */

/* Element `i` (< size), or NULL. */
const fmoe_toml_node *fmoe_toml_at(const fmoe_toml_node *array, size_t i);

/* ---- scalars: 1 and the value when the node has that kind, else 0 ------- */

/* The string (NUL-terminated, owned by the document); *len as for keys. */
int fmoe_toml_get_string(const fmoe_toml_node *node, const char **value, size_t *len);
int fmoe_toml_get_integer(const fmoe_toml_node *node, int64_t *value);
/* Only FLOAT nodes; an integer is not silently a float. */
int fmoe_toml_get_float(const fmoe_toml_node *node, double *value);
int fmoe_toml_get_bool(const fmoe_toml_node *node, int *value);
int fmoe_toml_get_datetime(const fmoe_toml_node *node, fmoe_toml_datetime *value);

/* The fewest digits that read back (strtod) as exactly `value`, laid out as
 * printf's "%g" would ("0.1", "123456.0", "1.234567e+06", "1e+300") and
 * always recognisable as a float ("2.0", not "2"); "inf", "-inf", "nan".
 * Independent of the C locale. `buf` holds at least 32 bytes. */
void fmoe_toml_format_float(double value, char buf[32]);

/* ---- schema helpers: strict readers for configuration files ------------
 *
 * `what` names the value in messages the way a user finds it in the file,
 * e.g. "[log] level" or "abi_major"; `expected` completes "(expected ...)",
 * e.g. "a non-empty string". Each returns OK or sets PARSE_ERROR at the
 * node's position ("<source>:<l>:<c>: <what> is an integer (expected ...)")
 * or OUT_OF_MEMORY. */

/* Set PARSE_ERROR "<source>:<line>:<column>: <fmt...>" and return it. */
fmoe_status fmoe_toml_error_at(const fmoe_toml_doc *doc, fmoe_toml_pos pos, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Every key of `table` must be in `allowed` (NULL-terminated). The first
 * other key, in file order, is an error at the key: "unknown key 'x' <where>
 * (expected one of: a, b, c)"; `where` is e.g. "in [select]". */
fmoe_status fmoe_toml_check_keys(const fmoe_toml_doc *doc, const fmoe_toml_node *table, const char *where,
                                 const char *const *allowed);

/* `node` must have `kind`: "<what> is a <kind> (expected <expected>)". */
fmoe_status fmoe_toml_expect(const fmoe_toml_doc *doc, const fmoe_toml_node *node, fmoe_toml_kind kind,
                             const char *what, const char *expected);

/* A non-empty string without NUL characters, copied to *out. */
fmoe_status fmoe_toml_copy_string(const fmoe_toml_doc *doc, const fmoe_toml_node *node, const char *what,
                                  const char *expected, char **out);

/* An array of strings, copied to a malloc'd array of malloc'd strings
 * (*out NULL when the array is empty). `expected` describes the array ("an
 * array of plugin-name globs"), `element` one element ("a plugin-name
 * glob"); each element is checked as by fmoe_toml_copy_string and named
 * "<what>[i]" (0-based) in messages. With `non_empty`, an empty array is an
 * error too. Free with fmoe_toml_free_strings(). */
fmoe_status fmoe_toml_copy_string_array(const fmoe_toml_doc *doc, const fmoe_toml_node *node, const char *what,
                                        const char *expected, const char *element, int non_empty, char ***out,
                                        size_t *n);

/* A path written in the document, made absolute: an absolute `path` is
 * copied as it is; a relative one is joined to the directory of the file the
 * document was read from (fmoe_toml_parse_file), or to the current
 * directory for text (fmoe_toml_parse). A leading "./" is dropped; nothing
 * else is normalised and the path need not exist. Malloc'd into *out;
 * OUT_OF_MEMORY, or IO_ERROR when the current directory is unknown. */
fmoe_status fmoe_toml_resolve_path(const fmoe_toml_doc *doc, const char *path, char **out);

/* Free `n` strings and the array holding them; NULL is allowed. */
void fmoe_toml_free_strings(char **strings, size_t n);

#ifdef __cplusplus
}
#endif
#endif
