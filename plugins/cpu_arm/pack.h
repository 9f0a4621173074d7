/*
 * plugins/cpu_arm/pack.h - repacking a projection's int4 weights (held in
 * int8, vLLM CompressedTensorsW4A8Int8MoEMethod's checkpoint layout) into
 * the micro-kernels' row blocks (layout in kernels.h). Run once per layer
 * at finalize.
 */
#ifndef FMOE_PLUGIN_CPU_ARM_PACK_H
#define FMOE_PLUGIN_CPU_ARM_PACK_H

#include <stddef.h>
#include <stdint.h>

#include "plugins/cpu_arm/kernels.h"

/* The shape of one projection (per expert): N rows of K columns in
 * `groups` groups of `group` columns (channelwise: groups = 1, group = K). */
typedef struct carm_shape {
    uint32_t n, k;
    uint32_t groups, group;
    /* derived by carm_shape_init */
    uint32_t kp;         /* K rounded up to CARM_KC: activation row length */
    uint32_t bl;         /* packed group width: group, or kp when channelwise */
    uint32_t row_blocks; /* ceil(N / 8) */
    size_t block_bytes;  /* one row block: groups * carm_group_bytes(bl) */
    size_t expert_bytes; /* row_blocks * block_bytes */
} carm_shape;

/* Fill the derived fields. groups must be 1 or group a multiple of
 * CARM_KC with groups * group = k. 0, or -1 if not. */
int carm_shape_init(carm_shape *s, uint32_t n, uint32_t k, uint32_t groups, uint32_t group);

/* Pack one expert: values [n, k] int8 in [-8, 7], scales [n, groups] f32
 * -> dst (expert_bytes). Returns 0, or -1 (nothing defined in dst) if a
 * value is out of range; *bad receives its index. */
int carm_pack_expert(const carm_shape *s, const int8_t *values, const float *scales, uint8_t *dst, size_t *bad);

#endif
