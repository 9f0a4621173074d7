/*
 * registry/host.c - the services table the host hands each plugin: logging
 * under the plugin's name, host-owned error text, host memory.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry/registry.h"

static void host_log(void *ctx, int32_t level, const char *msg)
{
    fmoe_plugin_record *rec = ctx;
    char category[96];
    snprintf(category, sizeof category, "plugin:%s", rec->name ? rec->name : "?");
    fmoe_log(rec->logger, level, category, "%s", msg ? msg : "(null)");
}

static fmoe_status host_error_set(fmoe_error *err, fmoe_status status, const char *fmt, ...)
{
    if (!err)
        return status;
    err->status = status;
    if (!fmt) {
        err->text[0] = '\0';
        return status;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->text, sizeof err->text, fmt, ap);
    va_end(ap);
    return status;
}

static void *host_alloc(void *ctx, size_t size, size_t alignment)
{
    (void)ctx;
    if (alignment == 0)
        alignment = 64;
    if (alignment & (alignment - 1) || size > SIZE_MAX - alignment)
        return NULL;
    /* aligned_alloc needs a size that is a multiple of the alignment. */
    size_t rounded = (size + alignment - 1) / alignment * alignment;
    return aligned_alloc(alignment, rounded ? rounded : alignment);
}

static void host_free(void *ctx, void *ptr)
{
    (void)ctx;
    free(ptr);
}

void fmoe_host_table_init(fmoe_host *host, fmoe_plugin_record *rec)
{
    memset(host, 0, sizeof *host);
    host->struct_size = sizeof *host;
    host->abi_major = FMOE_ABI_MAJOR;
    host->abi_minor = FMOE_ABI_MINOR;
    host->host_version = fmoe_version();
    host->ctx = rec;
    host->log = host_log;
    host->error_set = host_error_set;
    host->alloc = host_alloc;
    host->free = host_free;
}

void fmoe_plugin_error_reset(fmoe_error *err)
{
    err->status = FMOE_STATUS_OK;
    err->text[0] = '\0';
}

const char *fmoe_plugin_error_text(const fmoe_error *err, const char *fallback)
{
    return err->text[0] ? err->text : fallback;
}
