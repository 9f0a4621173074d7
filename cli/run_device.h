/*
 * cli/run_device.h - run a layer wherever it lives: host inputs are copied
 * to the layer's device through fmoe_layer_tensor_alloc/copy (plugin ABI
 * 1.1) and results copied back, so `run` and `bench` need no device runtime.
 */
#ifndef FMOE_CLI_RUN_DEVICE_H
#define FMOE_CLI_RUN_DEVICE_H

#include "cli/run_timing.h"
#include "fusedmoe/fusedmoe.h"

/* Forward `layer` on host x [M,H] and logits [M,E]; y [M,H] and the routing
 * used (tw, ti [M,k]) come back in host memory. A modular method on a device
 * cannot route host-side logits, so it gets the routing `route_w/route_ids`
 * (host, logical ids, e.g. the reference layer's) mapped to EPLB replicas.
 * Then times the forward (timing may be NULL). Returns the library status;
 * fmoe_last_error says why. */
fmoe_status run_device_forward(fmoe_layer *layer, const fmoe_layer_config *cfg, const fmoe_tensor *x,
                               const fmoe_tensor *logits, const float *route_w, const int32_t *route_ids,
                               fmoe_tensor *y, fmoe_tensor *tw, fmoe_tensor *ti, run_timing *timing);

#endif
