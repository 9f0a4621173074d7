/* cli/cmd_explain.c - `fusedmoe explain`: how a backend is chosen for a layer. */
#include <stdio.h>

#include "base/config_args.h"
#include "cli/args.h"
#include "cli/cli.h"
#include "cli/json_out.h"
#include "cli/layer_flags.h"
#include "cli/scheme_arg.h"
#include "cli/selection_out.h"

static void help(FILE *f)
{
    fputs("Usage: fusedmoe [global options] explain [--scheme KEY|CONFIG.json [--modules P]]\n"
          "                                         [layer flags] [--json]\n"
          "\n"
          "Runs the backend selection for a layer without creating it and prints every\n"
          "candidate (plugin, method, device, verdict, score, preference, reason) and the\n"
          "choice with the rule that decided it.\n"
          "\n"
          "Options:\n"
          "  --scheme KEY           quantization scheme key, e.g. bf16, fp8e4m3:channel/fp8e4m3:token\n"
          "                         (docs/SCHEMES.md; default bf16), or the path of a checkpoint's\n"
          "                         config.json: its quantization_config decides the scheme of the\n"
          "                         experts under --modules (every expert's gate/up/down_proj)\n"
          "  --modules P            expert module prefix in that config.json\n"
          "                         (default " CLI_SCHEME_DEFAULT_MODULES ")\n"
          "  --json                 one JSON document instead of text\n"
          "  --help                 this help\n"
          "\n",
          f);
    layer_flags_help(f);
    fputs("\n"
          "Exit codes: 0 a backend is selected; 2 usage; 3 bad configuration, layer or scheme;\n"
          "4 no backend can serve the layer; 5 internal error.\n",
          f);
}

static int print_text(const fmoe_context *ctx, const fmoe_layer_config *cfg, const fmoe_selection *sel)
{
    char args[1024], chosen[256];
    fmoe_layer_config_format_args(cfg, args, sizeof args);
    const char *path = fmoe_context_config_path(ctx);
    printf("scheme:  %s\n", fmoe_selection_scheme_key(sel));
    printf("layer:   %s\n", args);
    printf("config:  %s\n\n", path[0] ? path : "(built-in defaults)");
    if (cli_selection_table(sel, stdout) != 0)
        return CLI_EXIT_INTERNAL;
    putchar('\n');
    if (cli_selection_chosen(sel, chosen, sizeof chosen) == 0) {
        printf("selected: %s\n", chosen);
        printf("why:      %s\n", fmoe_selection_summary(sel));
        return CLI_EXIT_OK;
    }
    printf("selected: none\n");
    printf("why:      %s\n", fmoe_selection_summary(sel));
    return CLI_EXIT_NO_BACKEND;
}

static int print_json(const fmoe_context *ctx, const fmoe_layer_config *cfg, const fmoe_selection *sel)
{
    json_t *root = cli_selection_json(sel);
    if (!root)
        return CLI_EXIT_INTERNAL;
    const char *path = fmoe_context_config_path(ctx);
    cli_json_set(root, "layer", cli_layer_json(cfg));
    cli_json_set(root, "config", path[0] ? cli_json_string(path) : json_null());
    int none = fmoe_selection_chosen(sel) < 0;
    int rc = cli_json_print(root);
    return rc != CLI_EXIT_OK ? rc : none ? CLI_EXIT_NO_BACKEND : CLI_EXIT_OK;
}

int cmd_explain(const cli_globals *g, int argc, char **argv)
{
    const char *key = "bf16", *modules = NULL;
    int json = 0;
    fmoe_layer_config cfg;
    layer_flags_defaults(&cfg);
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int r;
        if (cli_opt_flag(argv[i], "--help") || cli_opt_flag(argv[i], "-h")) {
            help(stdout);
            return CLI_EXIT_OK;
        }
        if (cli_opt_flag(argv[i], "--json")) {
            json = 1;
        } else if ((r = cli_opt_value(argc, argv, &i, "--scheme", &v)) != CLI_OPT_NO) {
            if (r == CLI_OPT_MISSING)
                return cli_usage("explain", "--scheme needs a key (e.g. bf16) or a config.json path");
            key = v;
        } else if ((r = cli_opt_value(argc, argv, &i, "--modules", &v)) != CLI_OPT_NO) {
            if (r == CLI_OPT_MISSING || !v[0])
                return cli_usage("explain", "--modules needs a module prefix (e.g. model.layers.3.mlp.experts)");
            modules = v;
        } else if ((r = layer_flags_parse(&cfg, "explain", argc, argv, &i)) != LAYER_FLAG_NOT_MINE) {
            if (r == LAYER_FLAG_BAD)
                return CLI_EXIT_USAGE;
        } else {
            return cli_usage("explain", "unknown option '%s'", argv[i]);
        }
    }
    int rc = layer_flags_validate(&cfg);
    if (rc != CLI_EXIT_OK)
        return rc;
    fmoe_scheme scheme;
    if ((rc = cli_scheme_from_arg(key, modules, cfg.num_experts, &scheme)) != CLI_EXIT_OK)
        return rc;
    fmoe_status st;

    fmoe_context *ctx = NULL;
    if ((rc = cli_open_context(g, &ctx)) != CLI_EXIT_OK)
        return rc;
    fmoe_selection *sel = NULL;
    st = fmoe_context_explain(ctx, &cfg, &scheme, &sel);
    if (sel && (st == FMOE_STATUS_OK || st == FMOE_STATUS_UNSUPPORTED))
        rc = json ? print_json(ctx, &cfg, sel) : print_text(ctx, &cfg, sel);
    else
        rc = cli_fail(st == FMOE_STATUS_OK ? FMOE_STATUS_INTERNAL : st, "explain");
    fmoe_selection_destroy(sel);
    fmoe_context_destroy(ctx);
    return rc;
}
