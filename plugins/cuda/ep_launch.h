/*
 * plugins/cuda/ep_launch.h - launches of the EP kernels (ep_kernels.cu),
 * called by ep_transport.cu. C++ (nvcc) only.
 */
#ifndef FMOE_PLUGIN_CUDA_EP_LAUNCH_H
#define FMOE_PLUGIN_CUDA_EP_LAUNCH_H

#include <cuda_runtime.h>

#include "plugins/cuda/ep_kernels.cuh"

/* load: the layer's load record [num_experts] u64, or null. */
cudaError_t fmcu_ep_launch_dispatch(const fmcu_ep_dev::common_args &c, const void *x, int64_t x_ld, const int32_t *ids,
                                    const float *w, int64_t m, uint64_t *load, cudaStream_t st);
/* HIGH_THROUGHPUT: pos[size x max_tokens] and R into host-mapped rows_host. */
cudaError_t fmcu_ep_launch_plan(const fmcu_ep_dev::common_args &c, int32_t *pos, int64_t *rows_host, cudaStream_t st);
/* pos: the plan (HIGH_THROUGHPUT), or null (LOW_LATENCY: row to row, live[] written). */
cudaError_t fmcu_ep_launch_unpack(const fmcu_ep_dev::common_args &c, void *x_in, int32_t *ids_in, float *w_in,
                                  uint8_t *live, const int32_t *pos, cudaStream_t st);
/* combine_send: rows by pos when given, else by live. */
cudaError_t fmcu_ep_launch_combine_send(const fmcu_ep_dev::common_args &c, const void *y, const uint8_t *live,
                                        const int32_t *pos, cudaStream_t st);
/* finish, then the forward count + 1 (collective: after the exchange). */
cudaError_t fmcu_ep_launch_finish(const fmcu_ep_dev::common_args &c, const int32_t *ids, void *out, int64_t out_ld,
                                  int64_t m, uint64_t *seq, cudaStream_t st);

/* The first 32 bytes of NCCL's device-side window (ncclWindow_t). */
cudaError_t fmcu_ep_read_window(const void *win, void *head32, cudaStream_t st);

#endif
