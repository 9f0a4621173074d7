/*
 * core/context.h - what a context holds: the configuration it read, its
 * logger, and the registry of plugins. Shared by context.c and layer.c.
 */
#ifndef FMOE_CORE_CONTEXT_H
#define FMOE_CORE_CONTEXT_H

#include <pthread.h>

#include "registry/config.h"
#include "registry/log.h"
#include "registry/registry.h"

struct fmoe_context {
    fmoe_config *config;
    fmoe_logger logger;
    fmoe_registry registry;
    /* Serializes apply of methods flagged FMOE_METHOD_SERIALIZED_APPLY. */
    pthread_mutex_t serial_apply;
};

#endif
