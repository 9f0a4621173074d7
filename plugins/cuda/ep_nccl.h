/*
 * plugins/cuda/ep_nccl.h - the part of NCCL that expert parallelism uses,
 * loaded with dlopen when the first EP group is made (ep_nccl.c).
 *
 * Why dlopen: the plugin must load and serve single-GPU layers on machines
 * without NCCL, and NCCL is the application's (the engine's) library: an
 * engine that runs PyTorch already has one, and a second copy in the same
 * process would be a second NCCL. The option `nccl_library` names the file
 * (default "libnccl.so.2", found the loader's usual way).
 *
 * nccl.h is included for the types and signatures only (CUDA 13 ships it);
 * nothing links against libnccl. C++ (nvcc) only: the C side sees ep_api.h.
 */
#ifndef FMOE_PLUGIN_CUDA_EP_NCCL_H
#define FMOE_PLUGIN_CUDA_EP_NCCL_H

#include <nccl.h>
#include <nccl_device/core.h>
#include <stddef.h>

/* The oldest NCCL with symmetric windows whose device layout we read
 * (ncclWindow_vidmem's lsaFlatBase and stride4G, ep_window.cu). */
#define FMCU_NCCL_MIN_VERSION 22800

typedef struct fmcu_nccl {
    int version; /* ncclGetVersion: 22809 = 2.28.9 */
    ncclResult_t (*GetVersion)(int *);
    ncclResult_t (*GetUniqueId)(ncclUniqueId *);
    ncclResult_t (*CommInitRankConfig)(ncclComm_t *, int, ncclUniqueId, int, ncclConfig_t *);
    ncclResult_t (*CommGetAsyncError)(ncclComm_t, ncclResult_t *);
    ncclResult_t (*CommDestroy)(ncclComm_t);
    ncclResult_t (*CommAbort)(ncclComm_t);
    ncclResult_t (*CommCount)(const ncclComm_t, int *);
    ncclResult_t (*CommUserRank)(const ncclComm_t, int *);
    ncclResult_t (*CommCuDevice)(const ncclComm_t, int *);
    ncclResult_t (*MemAlloc)(void **, size_t);
    ncclResult_t (*MemFree)(void *);
    ncclResult_t (*CommWindowRegister)(ncclComm_t, void *, size_t, ncclWindow_t *, int);
    ncclResult_t (*CommWindowDeregister)(ncclComm_t, ncclWindow_t);
    /* Host form of the team of ranks reachable by load/store (NVLink). */
    struct ncclTeam (*TeamLsa)(ncclComm_t);
    ncclResult_t (*AllGather)(const void *, void *, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
    /* The collective transport (ep_transport=collective): a blocking child
     * communicator, and point-to-point sends in one group per exchange. */
    ncclResult_t (*CommSplit)(ncclComm_t, int, int, ncclComm_t *, ncclConfig_t *);
    ncclResult_t (*Send)(const void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*Recv)(void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*GroupStart)(void);
    ncclResult_t (*GroupEnd)(void);
    const char *(*GetErrorString)(ncclResult_t);
} fmcu_nccl;

/* The table for the library at `path` (loaded once per path and kept:
 * never dlclose'd, as the host keeps plugins), or NULL with the reason:
 * not found, a missing symbol, a version older than FMCU_NCCL_MIN_VERSION. */
extern "C" const fmcu_nccl *fmcu_nccl_load(const char *path, char *why, size_t cap);

#endif
