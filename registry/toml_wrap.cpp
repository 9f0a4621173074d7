/*
 * registry/toml_wrap.cpp - the C view of a toml++ document (see toml_wrap.h).
 *
 * toml++ parses into its own tree; we keep that tree alive inside the
 * document and build beside it a mirror of plain nodes that C can walk by
 * index. The mirror exists for two reasons: toml++ stores a table's entries
 * in a sorted std::map, whereas users expect file order (and the first match
 * of [select.schemes] depends on it); and handing C stable pointers to
 * plain structs is simpler than handing it pointers into toml++'s classes.
 *
 * The installed libtomlplusplus is built with TOML_EXCEPTIONS=1, so parse
 * errors arrive as toml::parse_error exceptions; allocation failures arrive
 * as std::bad_alloc. Every extern "C" function that can reach either catches
 * everything, because an exception unwinding into C is undefined behaviour.
 */
#include "registry/toml_wrap.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <unistd.h>

#include <toml++/toml.h>

extern "C" {
#include "base/error.h"
}
#include "base/limits.h"
#include "base/text_file.h"

// The exception-mode API is the one libtomlplusplus exports; a build with
// exceptions off would fail to link with a far less helpful message.
static_assert(TOML_EXCEPTIONS, "libtomlplusplus is built with exceptions; compile toml_wrap.cpp with them");

// A node of the mirror. For tables, keys[i] names items[i]; for arrays, keys
// is empty. Scalars read their value from `value`, the toml++ node.
struct fmoe_toml_node {
    fmoe_toml_kind kind = FMOE_TOML_TABLE;
    fmoe_toml_pos pos = {0, 0};
    const toml::node *value = nullptr;
    std::vector<const toml::key *> keys;
    std::vector<fmoe_toml_node> items;
};

struct fmoe_toml_doc {
    std::string source;
    bool from_file = false; // relative paths resolve against the file's directory
    toml::table table;
    fmoe_toml_node root;
};

static fmoe_toml_pos pos_from(const toml::source_position &p)
{
    return fmoe_toml_pos{p.line, p.column};
}

static fmoe_toml_kind kind_from(toml::node_type type)
{
    switch (type) {
    case toml::node_type::table:
        return FMOE_TOML_TABLE;
    case toml::node_type::array:
        return FMOE_TOML_ARRAY;
    case toml::node_type::string:
        return FMOE_TOML_STRING;
    case toml::node_type::integer:
        return FMOE_TOML_INTEGER;
    case toml::node_type::floating_point:
        return FMOE_TOML_FLOAT;
    case toml::node_type::boolean:
        return FMOE_TOML_BOOL;
    default:
        return FMOE_TOML_DATETIME; // date, time, date_time
    }
}

// A key's first appearance decides its place: "[a.b]" before "[a]" puts
// "a" where "[a.b]" is, which is what a reader of the file sees first.
static bool key_before(const toml::key *a, const toml::key *b)
{
    const toml::source_position &pa = a->source().begin;
    const toml::source_position &pb = b->source().begin;
    return pa.line != pb.line ? pa.line < pb.line : pa.column < pb.column;
}

// Recursion depth is bounded by toml++'s own nesting limit.
static void mirror(fmoe_toml_node &out, const toml::node &in)
{
    out.value = &in;
    out.kind = kind_from(in.type());
    out.pos = pos_from(in.source().begin);
    if (const toml::table *table = in.as_table()) {
        std::vector<const toml::key *> keys;
        keys.reserve(table->size());
        for (const auto &entry : *table)
            keys.push_back(&entry.first);
        std::stable_sort(keys.begin(), keys.end(), key_before);
        out.items.resize(keys.size());
        for (size_t i = 0; i < keys.size(); i++)
            mirror(out.items[i], *table->get(keys[i]->str()));
        out.keys = std::move(keys);
    } else if (const toml::array *array = in.as_array()) {
        out.items.resize(array->size());
        for (size_t i = 0; i < array->size(); i++)
            mirror(out.items[i], *array->get(i));
    }
}

static fmoe_status parse_error(const toml::parse_error &e, const std::string &source)
{
    const toml::source_position &p = e.source().begin;
    std::string_view what = e.description();
    return fmoe_error_set(FMOE_STATUS_PARSE_ERROR, "%s:%u:%u: %.*s", source.c_str(), p.line, p.column, (int)what.size(),
                          what.data());
}

static fmoe_status out_of_memory(void)
{
    return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
}

extern "C" fmoe_status fmoe_toml_parse(const char *text, size_t len, const char *source, fmoe_toml_doc **out)
{
    *out = nullptr;
    if (!source)
        source = "<string>";
    try {
        std::unique_ptr<fmoe_toml_doc> doc(new fmoe_toml_doc);
        doc->source = source;
        try {
            // No source path for toml++: it would copy it into a shared_ptr
            // inside a noexcept constructor, where running out of memory
            // calls std::terminate. Messages get the name from doc->source.
            doc->table = toml::parse(std::string_view(text, len));
        } catch (const toml::parse_error &e) {
            return parse_error(e, doc->source);
        }
        mirror(doc->root, doc->table);
        *out = doc.release();
        return FMOE_STATUS_OK;
    } catch (const std::bad_alloc &) {
        return out_of_memory();
    } catch (...) {
        return fmoe_error_set(FMOE_STATUS_INTERNAL, "%s: unexpected failure in the TOML parser", source);
    }
}

extern "C" fmoe_status fmoe_toml_parse_file(const char *path, fmoe_toml_doc **out)
{
    *out = nullptr;
    try {
        // The shared reader refuses FIFOs, devices and directories without
        // blocking on them, and enforces the size limit exactly.
        char *text = nullptr;
        size_t len = 0;
        fmoe_status st = fmoe_read_text_file(path, FMOE_LIMIT_TOML_BYTES, "TOML file", &text, &len);
        if (st != FMOE_STATUS_OK)
            return st;
        std::unique_ptr<char, void (*)(void *)> owned(text, std::free);
        st = fmoe_toml_parse(text, len, path, out);
        if (st == FMOE_STATUS_OK)
            (*out)->from_file = true;
        return st;
    } catch (const std::bad_alloc &) {
        return out_of_memory();
    } catch (...) {
        return fmoe_error_set(FMOE_STATUS_INTERNAL, "%s: unexpected failure reading the file", path);
    }
}

extern "C" void fmoe_toml_free(fmoe_toml_doc *doc)
{
    delete doc;
}

extern "C" const fmoe_toml_node *fmoe_toml_root(const fmoe_toml_doc *doc)
{
    return &doc->root;
}

extern "C" const char *fmoe_toml_source(const fmoe_toml_doc *doc)
{
    return doc->source.c_str();
}

extern "C" fmoe_toml_kind fmoe_toml_kind_of(const fmoe_toml_node *node)
{
    return node->kind;
}

extern "C" const char *fmoe_toml_kind_name(fmoe_toml_kind kind)
{
    switch (kind) {
    case FMOE_TOML_TABLE:
        return "table";
    case FMOE_TOML_ARRAY:
        return "array";
    case FMOE_TOML_STRING:
        return "string";
    case FMOE_TOML_INTEGER:
        return "integer";
    case FMOE_TOML_FLOAT:
        return "float";
    case FMOE_TOML_BOOL:
        return "boolean";
    case FMOE_TOML_DATETIME:
        return "date-time";
    }
    return "value";
}

extern "C" fmoe_toml_pos fmoe_toml_pos_of(const fmoe_toml_node *node)
{
    return node->pos;
}

extern "C" size_t fmoe_toml_size(const fmoe_toml_node *node)
{
    return node->items.size();
}

extern "C" const char *fmoe_toml_key(const fmoe_toml_node *table, size_t i, size_t *len)
{
    if (i >= table->keys.size())
        return nullptr;
    // data() is the key's own std::string, so it is NUL-terminated.
    const toml::key *key = table->keys[i];
    if (len)
        *len = key->str().size();
    return key->data();
}

extern "C" fmoe_toml_pos fmoe_toml_key_pos(const fmoe_toml_node *table, size_t i)
{
    if (i >= table->keys.size())
        return fmoe_toml_pos{0, 0};
    return pos_from(table->keys[i]->source().begin);
}

extern "C" const fmoe_toml_node *fmoe_toml_value(const fmoe_toml_node *table, size_t i)
{
    if (table->kind != FMOE_TOML_TABLE || i >= table->items.size())
        return nullptr;
    return &table->items[i];
}

extern "C" long fmoe_toml_find(const fmoe_toml_node *table, const char *key)
{
    for (size_t i = 0; i < table->keys.size(); i++)
        if (table->keys[i]->str() == key)
            return (long)i;
    return -1;
}

extern "C" const fmoe_toml_node *fmoe_toml_get(const fmoe_toml_node *table, const char *key)
{
    long i = fmoe_toml_find(table, key);
    return i < 0 ? nullptr : &table->items[(size_t)i];
}

extern "C" const fmoe_toml_node *fmoe_toml_at(const fmoe_toml_node *array, size_t i)
{
    if (array->kind != FMOE_TOML_ARRAY || i >= array->items.size())
        return nullptr;
    return &array->items[i];
}

extern "C" int fmoe_toml_get_string(const fmoe_toml_node *node, const char **value, size_t *len)
{
    const toml::value<std::string> *s = node->value->as_string();
    if (!s)
        return 0;
    *value = s->get().c_str();
    if (len)
        *len = s->get().size();
    return 1;
}

extern "C" int fmoe_toml_get_integer(const fmoe_toml_node *node, int64_t *value)
{
    const toml::value<int64_t> *v = node->value->as_integer();
    if (!v)
        return 0;
    *value = v->get();
    return 1;
}

extern "C" int fmoe_toml_get_float(const fmoe_toml_node *node, double *value)
{
    const toml::value<double> *v = node->value->as_floating_point();
    if (!v)
        return 0;
    *value = v->get();
    return 1;
}

extern "C" int fmoe_toml_get_bool(const fmoe_toml_node *node, int *value)
{
    const toml::value<bool> *v = node->value->as_boolean();
    if (!v)
        return 0;
    *value = v->get() ? 1 : 0;
    return 1;
}

static void set_date(fmoe_toml_datetime *out, const toml::date &d)
{
    out->has_date = 1;
    out->year = d.year;
    out->month = d.month;
    out->day = d.day;
}

static void set_time(fmoe_toml_datetime *out, const toml::time &t)
{
    out->has_time = 1;
    out->hour = t.hour;
    out->minute = t.minute;
    out->second = t.second;
    out->nanosecond = t.nanosecond;
}

extern "C" int fmoe_toml_get_datetime(const fmoe_toml_node *node, fmoe_toml_datetime *value)
{
    *value = fmoe_toml_datetime{};
    if (const toml::value<toml::date> *d = node->value->as_date()) {
        set_date(value, d->get());
        return 1;
    }
    if (const toml::value<toml::time> *t = node->value->as_time()) {
        set_time(value, t->get());
        return 1;
    }
    const toml::value<toml::date_time> *dt = node->value->as_date_time();
    if (!dt)
        return 0;
    set_date(value, dt->get().date);
    set_time(value, dt->get().time);
    if (dt->get().offset) {
        value->has_offset = 1;
        value->offset_minutes = dt->get().offset->minutes;
    }
    return 1;
}

extern "C" void fmoe_toml_format_float(double value, char buf[32])
{
    // NaN's sign carries no meaning in a configuration value.
    if (std::isnan(value)) {
        std::strcpy(buf, "nan");
        return;
    }
    // Without a precision, to_chars gives the fewest digits that read back
    // exactly; "general" picks fixed or exponent notation as printf's "%g"
    // would, but unlike printf it never consults the locale.
    std::to_chars_result r = std::to_chars(buf, buf + 31, value, std::chars_format::general);
    *r.ptr = '\0';
    if (std::isinf(value) || std::strpbrk(buf, ".e"))
        return;
    std::strcat(buf, ".0");
}

/* ---- schema helpers ---------------------------------------------------- */

extern "C" fmoe_status fmoe_toml_error_at(const fmoe_toml_doc *doc, fmoe_toml_pos pos, const char *fmt, ...)
{
    char what[FMOE_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return fmoe_error_set(FMOE_STATUS_PARSE_ERROR, "%s:%u:%u: %s", doc->source.c_str(), pos.line, pos.column, what);
}

static bool is_allowed(std::string_view key, const char *const *allowed)
{
    for (; *allowed; allowed++)
        if (key == *allowed)
            return true;
    return false;
}

extern "C" fmoe_status fmoe_toml_check_keys(const fmoe_toml_doc *doc, const fmoe_toml_node *table, const char *where,
                                            const char *const *allowed)
{
    for (size_t i = 0; i < table->keys.size(); i++) {
        if (is_allowed(table->keys[i]->str(), allowed))
            continue;
        // Formatted here rather than with std::string so that a failed
        // allocation cannot turn an error report into an exception.
        char list[512] = "";
        for (const char *const *a = allowed; *a; a++) {
            if (a != allowed)
                std::strncat(list, ", ", sizeof list - std::strlen(list) - 1);
            std::strncat(list, *a, sizeof list - std::strlen(list) - 1);
        }
        return fmoe_toml_error_at(doc, fmoe_toml_key_pos(table, i), "unknown key '%s' %s (expected one of: %s)",
                                  table->keys[i]->data(), where, list);
    }
    return FMOE_STATUS_OK;
}

static const char *article(fmoe_toml_kind kind)
{
    return kind == FMOE_TOML_ARRAY || kind == FMOE_TOML_INTEGER ? "an" : "a";
}

extern "C" fmoe_status fmoe_toml_expect(const fmoe_toml_doc *doc, const fmoe_toml_node *node, fmoe_toml_kind kind,
                                        const char *what, const char *expected)
{
    if (node->kind == kind)
        return FMOE_STATUS_OK;
    return fmoe_toml_error_at(doc, node->pos, "%s is %s %s (expected %s)", what, article(node->kind),
                              fmoe_toml_kind_name(node->kind), expected);
}

extern "C" fmoe_status fmoe_toml_copy_string(const fmoe_toml_doc *doc, const fmoe_toml_node *node, const char *what,
                                             const char *expected, char **out)
{
    *out = nullptr;
    fmoe_status st = fmoe_toml_expect(doc, node, FMOE_TOML_STRING, what, expected);
    if (st != FMOE_STATUS_OK)
        return st;
    const char *text = "";
    size_t len = 0;
    fmoe_toml_get_string(node, &text, &len);
    if (len == 0)
        return fmoe_toml_error_at(doc, node->pos, "%s is empty (expected %s)", what, expected);
    // A C string would silently end at the NUL; refuse rather than truncate.
    if (std::strlen(text) != len)
        return fmoe_toml_error_at(doc, node->pos, "%s contains a NUL character (expected %s)", what, expected);
    *out = strdup(text);
    return *out ? FMOE_STATUS_OK : out_of_memory();
}

extern "C" void fmoe_toml_free_strings(char **strings, size_t n)
{
    if (!strings)
        return;
    for (size_t i = 0; i < n; i++)
        std::free(strings[i]);
    std::free(strings);
}

extern "C" fmoe_status fmoe_toml_copy_string_array(const fmoe_toml_doc *doc, const fmoe_toml_node *node,
                                                   const char *what, const char *expected, const char *element,
                                                   int non_empty, char ***out, size_t *n)
{
    *out = nullptr;
    *n = 0;
    fmoe_status st = fmoe_toml_expect(doc, node, FMOE_TOML_ARRAY, what, expected);
    if (st != FMOE_STATUS_OK)
        return st;
    size_t count = node->items.size();
    if (count == 0)
        return non_empty ? fmoe_toml_error_at(doc, node->pos, "%s is empty (expected %s)", what, expected)
                         : FMOE_STATUS_OK;
    char **strings = static_cast<char **>(std::calloc(count, sizeof *strings));
    if (!strings)
        return out_of_memory();
    for (size_t i = 0; i < count; i++) {
        char name[256];
        std::snprintf(name, sizeof name, "%s[%zu]", what, i);
        st = fmoe_toml_copy_string(doc, &node->items[i], name, element, &strings[i]);
        if (st != FMOE_STATUS_OK) {
            fmoe_toml_free_strings(strings, i);
            return st;
        }
    }
    *out = strings;
    *n = count;
    return FMOE_STATUS_OK;
}

/* ---- paths --------------------------------------------------------------- */

// `dir` + "/" + `rel`, without a doubled slash or a leading "./" on `rel`.
static std::string join_path(const std::string &dir, const char *rel)
{
    while (rel[0] == '.' && rel[1] == '/') {
        rel += 2;
        while (*rel == '/')
            rel++;
    }
    if (std::strcmp(rel, ".") == 0)
        rel = "";
    std::string out = dir;
    if (!out.empty() && out.back() != '/' && *rel)
        out += '/';
    return out + rel;
}

// The absolute directory that relative paths of `doc` resolve against.
static fmoe_status base_directory(const fmoe_toml_doc *doc, std::string &dir)
{
    const std::string &file = doc->source;
    size_t slash = doc->from_file ? file.rfind('/') : std::string::npos;
    if (doc->from_file && file[0] == '/') {
        dir = file.substr(0, slash == 0 ? 1 : slash);
        return FMOE_STATUS_OK;
    }
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd))
        return fmoe_error_set(FMOE_STATUS_IO_ERROR, "%s: cannot resolve relative paths: %s", file.c_str(),
                              std::strerror(errno));
    dir = slash == std::string::npos ? std::string(cwd) : join_path(cwd, file.substr(0, slash).c_str());
    return FMOE_STATUS_OK;
}

extern "C" fmoe_status fmoe_toml_resolve_path(const fmoe_toml_doc *doc, const char *path, char **out)
{
    *out = nullptr;
    try {
        std::string resolved = path;
        if (path[0] != '/') {
            std::string dir;
            fmoe_status st = base_directory(doc, dir);
            if (st != FMOE_STATUS_OK)
                return st;
            resolved = join_path(dir, path);
        }
        *out = strdup(resolved.c_str());
        return *out ? FMOE_STATUS_OK : out_of_memory();
    } catch (const std::bad_alloc &) {
        return out_of_memory();
    } catch (...) {
        return fmoe_error_set(FMOE_STATUS_INTERNAL, "%s: unexpected failure resolving '%s'", doc->source.c_str(), path);
    }
}
