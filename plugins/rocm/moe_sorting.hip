/*
 * plugins/rocm/moe_sorting.hip - AITER's moe_sorting on the device, the
 * same arrays as sorting.c (spec/formats.md §6.2): each local expert's
 * (token, slot) pairs in ascending pair order, its run padded to a
 * multiple of FMRO_SORT_BLOCK with FMRO_SORT_ID(m, k) at weight 0; block
 * expert ids local, -1 past the end; num_valid = [padded total, m]. Also
 * pos_of[pair]: the sorted entry of each pair (-1 when dropped), which the
 * combine uses to sum a token's slots in slot order.
 *
 * Three launches: count (one atomic per routed pair), starts (one thread:
 * a running sum over the local experts), scatter (one block per expert,
 * each thread a contiguous stretch of pairs, so the order inside a run is
 * the pair order without any sort). Nothing depends on the wave size.
 */
#include "plugins/rocm/launch.h"
#include "plugins/rocm/sorting.h"

#define THREADS 256

static __device__ inline int32_t local_expert(const int32_t *local_of, uint32_t global, int32_t id)
{
    return id >= 0 && (uint32_t)id < global ? local_of[id] : -1;
}

FMRO_KERNEL void fmro_fill_u32(uint32_t *p, size_t n, uint32_t v)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = v;
}

FMRO_KERNEL void fmro_sort_count(const int32_t *ids, uint32_t pairs, const int32_t *local_of, uint32_t global,
                                 uint32_t *counts)
{
    for (uint32_t q = blockIdx.x * blockDim.x + threadIdx.x; q < pairs; q += gridDim.x * blockDim.x) {
        int32_t l = local_expert(local_of, global, ids[q]);
        if (l >= 0)
            fmro_atomic_add(&counts[l], 1u);
    }
}

FMRO_KERNEL void fmro_sort_starts(const uint32_t *counts, uint32_t local, uint32_t m, uint32_t blocks,
                                  uint32_t *starts, int32_t *sorted_expert, uint32_t *num_valid)
{
    FMRO_SHARED uint32_t used;
    if (threadIdx.x == 0) {
        uint32_t start = 0, blk = 0;
        for (uint32_t l = 0; l < local; l++) {
            uint32_t b = (counts[l] + FMRO_SORT_BLOCK - 1) / FMRO_SORT_BLOCK;
            starts[l] = start;
            for (uint32_t j = 0; j < b && blk < blocks; j++)
                sorted_expert[blk++] = (int32_t)l;
            start += b * FMRO_SORT_BLOCK;
        }
        num_valid[0] = start;
        num_valid[1] = m;
        used = blk;
    }
    __syncthreads();
    for (uint32_t b = used + threadIdx.x; b < blocks; b += blockDim.x)
        sorted_expert[b] = -1;
}

FMRO_KERNEL void fmro_sort_scatter(const int32_t *ids, const float *w, uint32_t pairs, uint32_t k,
                                   const int32_t *local_of, uint32_t global, const uint32_t *counts,
                                   const uint32_t *starts, uint32_t *sorted_ids, float *sorted_w, int32_t *pos_of)
{
    FMRO_SHARED uint32_t before[THREADS];
    uint32_t l = blockIdx.x;
    if (counts[l] == 0)
        return;
    uint32_t per = (pairs + blockDim.x - 1) / blockDim.x;
    uint32_t q0 = threadIdx.x * per, q1 = q0 + per < pairs ? q0 + per : pairs;
    uint32_t mine = 0;
    for (uint32_t q = q0; q < q1; q++)
        mine += local_expert(local_of, global, ids[q]) == (int32_t)l;
    before[threadIdx.x] = mine;
    __syncthreads();
    if (threadIdx.x == 0) {
        uint32_t run = 0;
        for (uint32_t t = 0; t < blockDim.x; t++) {
            uint32_t c = before[t];
            before[t] = run;
            run += c;
        }
    }
    __syncthreads();
    uint32_t at = starts[l] + before[threadIdx.x];
    for (uint32_t q = q0; q < q1; q++)
        if (local_expert(local_of, global, ids[q]) == (int32_t)l) {
            sorted_ids[at] = FMRO_SORT_ID(q / k, q % k);
            sorted_w[at] = w[q];
            pos_of[q] = (int32_t)at;
            at++;
        }
}

static uint32_t grid_for(size_t n)
{
    size_t g = (n + THREADS - 1) / THREADS;
    return (uint32_t)(g < 1 ? 1 : g > 65535 ? 65535 : g);
}

void fmro_launch_fill(uint32_t *p, size_t n, uint32_t v, fmro_stream s)
{
    if (n)
        FMRO_LAUNCH(fmro_fill_u32, grid_for(n), THREADS, 0, s, p, n, v);
}

void fmro_launch_sorting(const fmro_layer_dev *L, const fmro_call *c, const fmro_sizes *z, fmro_stream s)
{
    char *ws = (char *)L->workspace;
    uint32_t *counts = (uint32_t *)(ws + L->ws.counts), *starts = (uint32_t *)(ws + L->ws.starts);
    int32_t *pos_of = (int32_t *)(ws + L->ws.pos_of), *sorted_expert = (int32_t *)(ws + L->ws.sorted_expert);
    uint32_t *sorted_ids = (uint32_t *)(ws + L->ws.sorted_ids), *num_valid = (uint32_t *)(ws + L->ws.num_valid);
    float *sorted_w = (float *)(ws + L->ws.sorted_w);
    fmro_launch_fill((uint32_t *)pos_of, z->pairs, 0xFFFFFFFFu, s);
    fmro_launch_fill(counts, z->local, 0u, s);
    fmro_launch_fill(sorted_ids, z->capacity, FMRO_SORT_ID(z->m, z->k), s);
    fmro_launch_fill((uint32_t *)sorted_w, z->capacity, 0u, s);
    FMRO_LAUNCH(fmro_sort_count, grid_for(z->pairs), THREADS, 0, s, c->topk_ids, z->pairs, L->local_of,
                L->global_experts, counts);
    FMRO_LAUNCH(fmro_sort_starts, 1, THREADS, 0, s, (const uint32_t *)counts, z->local, z->m, z->blocks, starts,
                sorted_expert, num_valid);
    FMRO_LAUNCH(fmro_sort_scatter, z->local, THREADS, 0, s, c->topk_ids, c->topk_w, z->pairs, z->k, L->local_of,
                L->global_experts, (const uint32_t *)counts, (const uint32_t *)starts, sorted_ids, sorted_w, pos_of);
}
