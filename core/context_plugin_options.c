/*
 * core/context_plugin_options.c - the public view of a plugin's options
 * (fusedmoe.h: fmoe_context_plugin_option*), for `fusedmoe plugins
 * --verbose` and applications that log their configuration.
 */
#include <string.h>

#include "base/error.h"
#include "core/context.h"
#include "fusedmoe/fusedmoe.h"
#include "fusedmoe/plugin.h"

/* Resolved settings when init was reached, else the declarations. */
uint32_t fmoe_context_plugin_option_count(const fmoe_context *ctx, uint32_t plugin)
{
    if (!ctx || plugin >= ctx->registry.n_plugins)
        return 0;
    const fmoe_plugin_record *r = &ctx->registry.plugins[plugin];
    return (uint32_t)(r->n_options ? r->n_options : r->n_option_decls);
}

fmoe_status fmoe_context_plugin_option(const fmoe_context *ctx, uint32_t plugin, uint32_t index,
                                       fmoe_plugin_option_info *info)
{
    fmoe_error_clear();
    if (!info || info->struct_size < sizeof(size_t) + sizeof(char *))
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                              "fmoe_context_plugin_option: info is NULL or its struct_size is too small");
    uint32_t n = fmoe_context_plugin_option_count(ctx, plugin);
    if (!ctx || plugin >= ctx->registry.n_plugins || index >= n)
        return fmoe_error_set(FMOE_STATUS_INVALID_ARGUMENT,
                              "fmoe_context_plugin_option: plugin %u / option %u out of range (%u options)", plugin,
                              index, n);
    const fmoe_plugin_record *r = &ctx->registry.plugins[plugin];
    const fmoe_option_decl *d;
    const char *value, *source;
    if (r->n_options) {
        d = r->options[index].decl;
        value = r->options[index].value;
        source = r->options[index].source;
    } else {
        d = &r->option_decls[index];
        value = d->default_text;
        source = "default";
    }
    fmoe_plugin_option_info v = {
        .struct_size = info->struct_size,
        .name = d ? d->name : r->options[index].key,
        .type = d ? fmoe_option_type_name(d->type) : "",
        .domain = d ? d->domain : "",
        .default_value = d ? d->default_text : "",
        .value = value,
        .source = source,
        .help = d ? d->help : "",
    };
    memcpy(info, &v, info->struct_size < sizeof v ? info->struct_size : sizeof v);
    return FMOE_STATUS_OK;
}
