/*
 * plugins/cuda/memory_table.h - the device memory a plugin on the CUDA
 * runtime lends callers without it (plugin ABI 1.1 alloc, free, copy and
 * synchronize; 1.2 time_replays; 1.3 copy_rate; 1.4 read_rate), one table
 * for plugins/cuda and plugins/megamoe: both link runtime.cu and timing.cu,
 * which it calls.
 *
 * Every call's `state` must be the plugin's state, and that state must
 * begin with the plugin's `const fmoe_host *host` (fmcu_state and mm_state
 * do): the table reports errors through it. The core names the plugin in
 * front of each message (core/layer_memory.c, core/layer_timing.c).
 */
#ifndef FMOE_PLUGIN_CUDA_MEMORY_TABLE_H
#define FMOE_PLUGIN_CUDA_MEMORY_TABLE_H

#include "fusedmoe/plugin.h"

extern const fmoe_device_memory fmcu_memory_table;

#endif
