/*
 * core/checkpoint.c - a checkpoint: one safetensors file or a sharded set
 * with model.safetensors.index.json, opened and validated as a whole, with
 * one name table over all shards (fusedmoe.h, docs/CHECKPOINTS.md).
 *
 * transformers trusts the index: a tensor a shard holds but the index does
 * not list is never read, and a listed tensor missing from its shard fails
 * only when that layer loads. Both are errors here, at open, so a
 * checkpoint either opens whole or not at all.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/error.h"
#include "base/limits.h"
#include "base/text_file.h"
#include "core/safetensors.h"
#include "fusedmoe/fusedmoe.h"

#define INDEX_NAME  "model.safetensors.index.json"
#define SINGLE_NAME "model.safetensors"

typedef struct ck_entry {
    const char *name; /* owned by the shard's tensor */
    uint32_t shard;
    const fmoe_st_tensor *t;
} ck_entry;

struct fmoe_checkpoint {
    fmoe_st_file **shards;
    uint32_t n_shards;
    ck_entry *entries; /* sorted by name */
    size_t n_entries;
};

void fmoe_checkpoint_close(fmoe_checkpoint *ck)
{
    if (!ck)
        return;
    for (uint32_t i = 0; i < ck->n_shards; i++)
        fmoe_st_close(ck->shards[i]);
    free(ck->shards);
    free(ck->entries);
    free(ck);
}

static fmoe_status oom(void)
{
    return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory opening a checkpoint");
}

static int is_dir(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* Anything there, even a FIFO or a directory: the reader refuses those
 * with a message that says what the path is, which is better than "no
 * index in this directory". */
static int exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static fmoe_status add_shard(fmoe_checkpoint *ck, const char *path, uint32_t *index)
{
    fmoe_st_file **grown = realloc(ck->shards, (ck->n_shards + 1) * sizeof *grown);
    if (!grown)
        return oom();
    ck->shards = grown;
    fmoe_status st = fmoe_st_open(path, &grown[ck->n_shards]);
    if (st != FMOE_STATUS_OK)
        return st;
    *index = ck->n_shards++;
    return FMOE_STATUS_OK;
}

static int entry_cmp(const void *a, const void *b)
{
    return strcmp(((const ck_entry *)a)->name, ((const ck_entry *)b)->name);
}

/* The name table over all shards; a name in two shards is an error. */
static fmoe_status build_table(fmoe_checkpoint *ck)
{
    size_t n = 0;
    for (uint32_t s = 0; s < ck->n_shards; s++)
        n += ck->shards[s]->n_tensors;
    if (n > FMOE_LIMIT_CHECKPOINT_TENSORS)
        return fmoe_error_set(FMOE_STATUS_PARSE_ERROR, "%s: the checkpoint holds %zu tensors, more than the %u allowed",
                              ck->shards[0]->path, n, FMOE_LIMIT_CHECKPOINT_TENSORS);
    ck->entries = malloc((n ? n : 1) * sizeof *ck->entries);
    if (!ck->entries)
        return oom();
    for (uint32_t s = 0; s < ck->n_shards; s++) {
        const fmoe_st_file *f = ck->shards[s];
        for (size_t i = 0; i < f->n_tensors; i++)
            ck->entries[ck->n_entries++] = (ck_entry){f->tensors[i].name, s, &f->tensors[i]};
    }
    qsort(ck->entries, ck->n_entries, sizeof *ck->entries, entry_cmp);
    for (size_t i = 1; i < ck->n_entries; i++)
        if (strcmp(ck->entries[i - 1].name, ck->entries[i].name) == 0)
            return fmoe_error_set(FMOE_STATUS_PARSE_ERROR, "tensor '%s' is stored twice: in %s and in %s",
                                  ck->entries[i].name, ck->shards[ck->entries[i - 1].shard]->path,
                                  ck->shards[ck->entries[i].shard]->path);
    return FMOE_STATUS_OK;
}

/* A shard is named by a plain file name beside the index: no directories,
 * so an index cannot reach outside its checkpoint. */
static int plain_file_name(const char *s)
{
    return s[0] && strcmp(s, ".") != 0 && strcmp(s, "..") != 0 && !strchr(s, '/') && !strchr(s, '\\');
}

/* One weight_map entry while the shards are assigned. */
typedef struct map_entry {
    const char *tensor, *file;
    size_t order; /* position in the map (jansson keeps file order) */
} map_entry;

static int by_file_then_order(const void *a, const void *b)
{
    const map_entry *x = a, *y = b;
    int c = strcmp(x->file, y->file);
    return c ? c : (x->order > y->order) - (x->order < y->order);
}

static int by_order(const void *a, const void *b)
{
    const map_entry *x = *(const map_entry *const *)a, *y = *(const map_entry *const *)b;
    return (x->order > y->order) - (x->order < y->order);
}

/* Every entry's shard file, checked: a plain name, a name of bounded
 * length. */
static fmoe_status collect_entries(const char *index_path, json_t *map, map_entry *entries)
{
    const char *name;
    json_t *value;
    size_t i = 0;
    json_object_foreach(map, name, value) {
        if (strlen(name) > FMOE_LIMIT_NAME_BYTES)
            return fmoe_error_set(FMOE_STATUS_PARSE_ERROR,
                                  "%s: weight_map[\"%.64s...\"]: a tensor name of %zu bytes, more than the %u allowed",
                                  index_path, name, strlen(name), FMOE_LIMIT_NAME_BYTES);
        if (!json_is_string(value) || !plain_file_name(json_string_value(value)) ||
            strlen(json_string_value(value)) > FMOE_LIMIT_NAME_BYTES)
            return fmoe_error_set(FMOE_STATUS_PARSE_ERROR,
                                  "%s: weight_map[\"%s\"]: expected the file name of a shard in the same directory",
                                  index_path, name);
        entries[i] = (map_entry){name, json_string_value(value), i};
        i++;
    }
    return FMOE_STATUS_OK;
}

/* Open every shard the weight map names, once each, in the order the map
 * first names them. shard_of[i] is the shard of the i-th map entry (in
 * jansson's iteration order). Grouping by file name through a sort keeps
 * this O(n log n) for an index of a million entries. */
static fmoe_status open_shards(fmoe_checkpoint *ck, const char *index_path, const char *dir, json_t *map,
                               uint32_t *shard_of)
{
    size_t n = json_object_size(map), n_files = 0;
    map_entry *entries = malloc(n * sizeof *entries);
    map_entry **firsts = malloc(n * sizeof *firsts);
    fmoe_status st = entries && firsts ? collect_entries(index_path, map, entries) : oom();
    if (st == FMOE_STATUS_OK) {
        qsort(entries, n, sizeof *entries, by_file_then_order);
        for (size_t i = 0; i < n; i++)
            if (i == 0 || strcmp(entries[i - 1].file, entries[i].file) != 0)
                firsts[n_files++] = &entries[i];
        if (n_files > FMOE_LIMIT_SHARDS)
            st = fmoe_error_set(FMOE_STATUS_PARSE_ERROR,
                                "%s: weight_map names %zu shard files, more than the %u allowed", index_path, n_files,
                                FMOE_LIMIT_SHARDS);
    }
    if (st == FMOE_STATUS_OK) {
        /* Shard ids in first-mention order. Each file's entries are
         * contiguous in `entries`, from its first mention on. */
        qsort(firsts, n_files, sizeof *firsts, by_order);
        for (size_t f = 0; st == FMOE_STATUS_OK && f < n_files; f++) {
            const map_entry *head = firsts[f];
            char *path = join(dir, head->file);
            uint32_t s = 0;
            if (!path) {
                st = oom();
                break;
            }
            st = add_shard(ck, path, &s);
            free(path);
            if (st != FMOE_STATUS_OK)
                fmoe_error_prefix("%s: weight_map[\"%s\"]", index_path, head->tensor);
            for (const map_entry *e = head; st == FMOE_STATUS_OK && e < entries + n && strcmp(e->file, head->file) == 0;
                 e++)
                shard_of[e->order] = s;
        }
    }
    free(entries);
    free(firsts);
    return st;
}

/* Every listed tensor is in its shard, and every shard tensor is listed
 * with that shard. */
static fmoe_status check_index(const fmoe_checkpoint *ck, const char *index_path, json_t *map, const uint32_t *shard_of)
{
    const char *name;
    json_t *value;
    size_t i = 0;
    json_object_foreach(map, name, value) {
        const fmoe_st_file *f = ck->shards[shard_of[i++]];
        if (!fmoe_st_find(f, name))
            return fmoe_error_set(FMOE_STATUS_PARSE_ERROR, "%s: weight_map[\"%s\"]: the tensor is not in %s",
                                  index_path, name, f->path);
    }
    for (uint32_t s = 0; s < ck->n_shards; s++) {
        const fmoe_st_file *f = ck->shards[s];
        for (size_t t = 0; t < f->n_tensors; t++) {
            json_t *listed = json_object_get(map, f->tensors[t].name);
            if (!listed)
                return fmoe_error_set(FMOE_STATUS_PARSE_ERROR,
                                      "%s: tensor '%s' is not in the index %s (it would never be loaded)", f->path,
                                      f->tensors[t].name, index_path);
        }
    }
    return FMOE_STATUS_OK;
}

static fmoe_status open_index(fmoe_checkpoint *ck, const char *index_path)
{
    char *text = NULL, *dir = NULL;
    size_t len = 0;
    fmoe_status st = fmoe_read_text_file(index_path, FMOE_LIMIT_INDEX_BYTES, "safetensors index", &text, &len);
    if (st != FMOE_STATUS_OK)
        return st;
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    free(text);
    if (!root)
        return fmoe_error_set(FMOE_STATUS_PARSE_ERROR, "%s:%d:%d: %s", index_path, jerr.line, jerr.column, jerr.text);
    json_t *map = json_is_object(root) ? json_object_get(root, "weight_map") : NULL;
    json_t *meta = json_is_object(root) ? json_object_get(root, "metadata") : NULL;
    uint32_t *shard_of = NULL;
    if (!map || !json_is_object(map))
        st = fmoe_error_set(FMOE_STATUS_PARSE_ERROR, "%s: expected an object with a \"weight_map\" object", index_path);
    else if (meta && !json_is_object(meta) && !json_is_null(meta))
        st = fmoe_error_set(FMOE_STATUS_PARSE_ERROR, "%s: metadata: expected an object", index_path);
    else if (json_object_size(map) == 0)
        st = fmoe_error_set(FMOE_STATUS_PARSE_ERROR, "%s: weight_map is empty", index_path);
    else if (json_object_size(map) > FMOE_LIMIT_CHECKPOINT_TENSORS)
        st = fmoe_error_set(FMOE_STATUS_PARSE_ERROR, "%s: weight_map lists %zu tensors, more than the %u allowed",
                            index_path, json_object_size(map), FMOE_LIMIT_CHECKPOINT_TENSORS);
    if (st == FMOE_STATUS_OK) {
        const char *slash = strrchr(index_path, '/');
        dir = slash ? strndup(index_path, (size_t)(slash - index_path)) : strdup(".");
        shard_of = malloc(json_object_size(map) * sizeof *shard_of);
        if (!dir || !shard_of)
            st = oom();
    }
    if (st == FMOE_STATUS_OK)
        st = open_shards(ck, index_path, dir, map, shard_of);
    if (st == FMOE_STATUS_OK)
        st = check_index(ck, index_path, map, shard_of);
    free(shard_of);
    free(dir);
    json_decref(root);
    return st;
}

static fmoe_status open_path(fmoe_checkpoint *ck, const char *path)
{
    uint32_t s;
    if (!is_dir(path)) {
        size_t n = strlen(path);
        if (n >= 5 && strcmp(path + n - 5, ".json") == 0)
            return open_index(ck, path);
        return add_shard(ck, path, &s);
    }
    char *index = join(path, INDEX_NAME), *single = join(path, SINGLE_NAME);
    fmoe_status st;
    if (!index || !single)
        st = oom();
    else if (exists(index))
        st = open_index(ck, index);
    else if (exists(single))
        st = add_shard(ck, single, &s);
    else
        st = fmoe_error_set(FMOE_STATUS_NOT_FOUND, "%s: no %s or %s in this directory", path, INDEX_NAME, SINGLE_NAME);
    free(index);
    free(single);
    return st;
}

fmoe_status fmoe_checkpoint_open(const char *path, fmoe_checkpoint **out)
{
    fmoe_error_clear();
    if (!path || !out)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "fmoe_checkpoint_open: path and out must not be NULL");
    *out = NULL;
    fmoe_checkpoint *ck = calloc(1, sizeof *ck);
    if (!ck)
        return oom();
    fmoe_status st = open_path(ck, path);
    if (st == FMOE_STATUS_OK)
        st = build_table(ck);
    if (st != FMOE_STATUS_OK) {
        fmoe_checkpoint_close(ck);
        return st;
    }
    *out = ck;
    return FMOE_STATUS_OK;
}

size_t fmoe_checkpoint_tensor_count(const fmoe_checkpoint *ck)
{
    return ck ? ck->n_entries : 0;
}

const char *fmoe_checkpoint_tensor_name(const fmoe_checkpoint *ck, size_t index)
{
    return ck && index < ck->n_entries ? ck->entries[index].name : NULL;
}

size_t fmoe_checkpoint_find(const fmoe_checkpoint *ck, const char *name)
{
    if (!ck || !name)
        return (size_t)-1;
    ck_entry key = {.name = name};
    const ck_entry *hit = bsearch(&key, ck->entries, ck->n_entries, sizeof key, entry_cmp);
    return hit ? (size_t)(hit - ck->entries) : (size_t)-1;
}

const char *fmoe_checkpoint_tensor_file(const fmoe_checkpoint *ck, size_t index)
{
    return ck && index < ck->n_entries ? ck->shards[ck->entries[index].shard]->path : NULL;
}

fmoe_status fmoe_checkpoint_tensor(const fmoe_checkpoint *ck, size_t index, fmoe_tensor *out)
{
    fmoe_error_clear();
    if (!ck || !out || index >= ck->n_entries)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "fmoe_checkpoint_tensor: no tensor %zu", index);
    const ck_entry *e = &ck->entries[index];
    return fmoe_st_view(ck->shards[e->shard], e->t, out);
}
