/* cli/selection_out.c - selection reports (see selection_out.h). */
#include "cli/selection_out.h"

#include "cli/cli.h"
#include "cli/json_out.h"
#include "cli/table.h"

const char *cli_verdict_name(int32_t verdict)
{
    switch (verdict) {
    case FMOE_VERDICT_SELECTED:
        return "selected";
    case FMOE_VERDICT_ACCEPTED:
        return "accepted";
    case FMOE_VERDICT_REFUSED:
        return "refused";
    case FMOE_VERDICT_EXCLUDED:
        return "excluded";
    case FMOE_VERDICT_UNAVAILABLE:
        return "unavailable";
    case FMOE_VERDICT_ERROR:
        return "error";
    default:
        return "unknown";
    }
}

static fmoe_status get_candidate(const fmoe_selection *sel, uint32_t i, fmoe_candidate *c)
{
    c->struct_size = sizeof *c;
    fmoe_status st = fmoe_selection_candidate(sel, i, c);
    if (st != FMOE_STATUS_OK)
        cli_fail(st, "reading the selection");
    return st;
}

int cli_selection_chosen(const fmoe_selection *sel, char *buf, size_t cap)
{
    int32_t chosen = fmoe_selection_chosen(sel);
    fmoe_candidate c;
    if (chosen < 0 || get_candidate(sel, (uint32_t)chosen, &c) != FMOE_STATUS_OK) {
        snprintf(buf, cap, "none");
        return -1;
    }
    char dev[48];
    cli_device_string(c.device_kind, c.device_index, dev, sizeof dev);
    snprintf(buf, cap, "%s/%s on %s", c.plugin, c.method && c.method[0] ? c.method : "-", dev);
    return 0;
}

int cli_selection_table(const fmoe_selection *sel, FILE *f)
{
    static const char *const headers[] = {"PLUGIN", "METHOD", "DEVICE", "VERDICT", "SCORE", "PREFERENCE"};
    uint32_t n = fmoe_selection_candidate_count(sel);
    if (n == 0) {
        fprintf(f, "no candidates: no plugin that serves this scheme is installed\n");
        return 0;
    }
    cli_table *t = table_new(6, headers);
    if (!t) {
        cli_error("out of memory");
        return -1;
    }
    int rc = 0;
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        fmoe_candidate c;
        if (get_candidate(sel, i, &c) != FMOE_STATUS_OK) {
            rc = -1;
            break;
        }
        char dev[48], score[16], pref[16];
        cli_device_string(c.device_kind, c.device_index, dev, sizeof dev);
        snprintf(score, sizeof score, "%u", c.score);
        /* -1: the configuration's preference order does not name it. */
        if (c.preference < 0)
            snprintf(pref, sizeof pref, "-");
        else
            snprintf(pref, sizeof pref, "%d", c.preference);
        const char *cells[] = {c.plugin, c.method && c.method[0] ? c.method : "-",
                               dev,      cli_verdict_name(c.verdict),
                               score,    pref};
        if (table_row(t, cells) != 0 || (c.reason && c.reason[0] && table_note(t, "%s", c.reason) != 0)) {
            cli_error("out of memory");
            rc = -1;
        }
    }
    if (rc == 0)
        table_print(t, f);
    table_free(t);
    return rc;
}

static json_t *candidate_json(const fmoe_candidate *c)
{
    char dev[48];
    cli_device_string(c->device_kind, c->device_index, dev, sizeof dev);
    json_t *o = json_object();
    cli_json_set(o, "plugin", cli_json_string(c->plugin));
    cli_json_set(o, "method", cli_json_string(c->method));
    cli_json_set(o, "device", json_string(dev));
    cli_json_set(o, "verdict", json_string(cli_verdict_name(c->verdict)));
    cli_json_set(o, "score", json_integer(c->score));
    cli_json_set(o, "preference", c->preference < 0 ? json_null() : json_integer(c->preference));
    cli_json_set(o, "reason", cli_json_string(c->reason));
    return o;
}

json_t *cli_selection_json(const fmoe_selection *sel)
{
    json_t *o = json_object();
    json_t *list = json_array();
    if (!o || !list) {
        json_decref(o);
        json_decref(list);
        return NULL;
    }
    int32_t chosen = fmoe_selection_chosen(sel);
    json_t *selected = json_null();
    for (uint32_t i = 0; i < fmoe_selection_candidate_count(sel); i++) {
        fmoe_candidate c;
        if (get_candidate(sel, i, &c) != FMOE_STATUS_OK) {
            json_decref(o);
            json_decref(list);
            return NULL;
        }
        json_array_append_new(list, candidate_json(&c));
        if ((int32_t)i == chosen) {
            json_decref(selected);
            selected = candidate_json(&c);
        }
    }
    cli_json_set(o, "scheme", cli_json_string(fmoe_selection_scheme_key(sel)));
    cli_json_set(o, "chosen", chosen < 0 ? json_null() : json_integer(chosen));
    cli_json_set(o, "selected", selected);
    cli_json_set(o, "summary", cli_json_string(fmoe_selection_summary(sel)));
    cli_json_set(o, "candidates", list);
    return o;
}
