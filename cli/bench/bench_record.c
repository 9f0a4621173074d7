/*
 * cli/bench/bench_record.c - what both benches' --json records share
 * (bench.h): the run's header and writing the document.
 */
#include <time.h>

#include "cli/bench/bench.h"
#include "cli/json_out.h"

json_t *bench_record_new(const char *command, uint64_t seed, const char *scheme_key, const char *backend)
{
    json_t *root = json_object();
    char date[64];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    cli_json_set(root, "command", cli_json_string(command));
    cli_json_set(root, "date", json_string(date));
    cli_json_set(root, "seed", json_integer((json_int_t)(seed & 0x7fffffffffffffffull)));
    cli_json_set(root, "scheme", cli_json_string(scheme_key));
    cli_json_set(root, "backend", cli_json_string(backend));
    return root;
}

int bench_record_write(json_t *root, const char *path)
{
    int rc = json_dump_file(root, path, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (rc != 0) {
        cli_error("--json %s: cannot write it", path);
        return CLI_EXIT_CONFIG;
    }
    return CLI_EXIT_OK;
}
