/*
 * registry/selection_api.c - the public read-only view of a selection
 * (fusedmoe.h: fmoe_selection_*). It lives beside the selection it reads,
 * so core/ calls into the registry and never the other way round.
 */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "fusedmoe/fusedmoe.h"
#include "fusedmoe/plugin.h"
#include "registry/registry.h"

/* Out-structs are filled only up to the size the caller declared. */
#define FILL_UPTO(dst, src) memcpy((dst), &(src), (dst)->struct_size < sizeof(src) ? (dst)->struct_size : sizeof(src))

uint32_t fmoe_selection_candidate_count(const fmoe_selection *sel)
{
    return sel ? sel->n_candidates : 0;
}

fmoe_status fmoe_selection_candidate(const fmoe_selection *sel, uint32_t index, fmoe_candidate *out)
{
    fmoe_error_clear();
    if (!out)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "fmoe_selection_candidate: out is NULL");
    if (out->struct_size < sizeof(size_t) + sizeof(char *))
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                              "fmoe_selection_candidate: struct_size %zu too small (set it to sizeof)",
                              out->struct_size);
    if (!sel || index >= sel->n_candidates)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT, "fmoe_selection_candidate: index %u out of range", index);
    const fmoe_candidate_rec *c = &sel->candidates[index];
    fmoe_candidate v = {
        .struct_size = out->struct_size,
        .plugin = c->plugin->name ? c->plugin->name : "",
        .method = c->method ? c->method->name : "",
        .device_kind = c->device_kind,
        .device_index = c->device_index,
        .verdict = c->verdict,
        .score = c->score,
        .preference = c->preference,
        .reason = c->reason,
    };
    FILL_UPTO(out, v);
    return FMOE_STATUS_OK;
}

int32_t fmoe_selection_chosen(const fmoe_selection *sel)
{
    return sel ? sel->chosen : -1;
}

const char *fmoe_selection_summary(const fmoe_selection *sel)
{
    return sel ? sel->summary : "";
}

const char *fmoe_selection_scheme_key(const fmoe_selection *sel)
{
    return sel ? sel->scheme_key : "";
}

void fmoe_selection_destroy(fmoe_selection *sel)
{
    if (!sel)
        return;
    free(sel->candidates);
    free(sel);
}
