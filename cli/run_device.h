/*
 * cli/run_device.h - run a layer wherever it lives: host inputs are copied
 * to the layer's device through fmoe_layer_tensor_alloc/copy (plugin ABI
 * 1.1) and results copied back, so `run` and `bench` need no device runtime.
 */
#ifndef FMOE_CLI_RUN_DEVICE_H
#define FMOE_CLI_RUN_DEVICE_H

#include "cli/run_timing.h"
#include "fusedmoe/fusedmoe.h"

/* Whether `layer` runs where memory is not host memory (a device layer,
 * whose forward tensors must come from fmoe_layer_tensor_alloc); its device
 * goes to *kind and *index (either may be NULL). */
int run_device_is_remote(const fmoe_layer *layer, int32_t *kind, int32_t *index);

/* The tensors of one forward on the layer's device, for callers that hold
 * them in host memory. A host layer forwards the host tensors themselves
 * (nothing is allocated or copied). */
typedef struct run_device_io {
    int remote;
    fmoe_tensor x, logits, w, ids, out, w_out, ids_out; /* device twins of those given */
    fmoe_forward_args args;                             /* the forward to run: on the twins, or the host's own */
} run_device_io;

/* Twins of every tensor `host` names: inputs copied in, outputs allocated. */
fmoe_status run_device_io_open(fmoe_layer *layer, const fmoe_forward_args *host, run_device_io *io);
/* After forwards on io->args: wait for the device, copy out (and the
 * top-k outputs) back into host's tensors. */
fmoe_status run_device_io_fetch(fmoe_layer *layer, const run_device_io *io, const fmoe_forward_args *host);
void run_device_io_close(fmoe_layer *layer, run_device_io *io);

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
