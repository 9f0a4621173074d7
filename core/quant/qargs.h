/*
 * core/quant/qargs.h - one side (weights or activations) of a module's
 * quantization, in the vocabulary of compressed-tensors' QuantizationArgs.
 *
 * Every quant_method is read into this vocabulary (fp8's weight_block_size
 * becomes strategy "block", GPTQ's desc_act becomes actorder "group", ...)
 * so that one selection tree (select.c, spec/interface.md §9.3) decides the
 * MoE scheme for all of them, with one set of messages.
 */
#ifndef FMOE_CORE_QUANT_QARGS_H
#define FMOE_CORE_QUANT_QARGS_H

#include <stddef.h>
#include <stdint.h>

#include "core/quant/qjson.h"

#define QTYPE_INT   1
#define QTYPE_FLOAT 2

/* QuantizationStrategy; QS_NONE only before inference has run. */
#define QS_NONE         0
#define QS_TENSOR       1
#define QS_CHANNEL      2
#define QS_GROUP        3
#define QS_BLOCK        4
#define QS_TOKEN        5
#define QS_TENSOR_GROUP 6
#define QS_ATTN_HEAD    7

/* "dynamic": false, true, or "local" (NVFP4: group scales per forward,
 * global scale from the checkpoint). */
#define QDYN_STATIC  0
#define QDYN_DYNAMIC 1
#define QDYN_LOCAL   2

/* ActivationOrdering, aliases folded in ("dynamic" = group, "static" =
 * weight, true = group). */
#define QORDER_NONE   0
#define QORDER_GROUP  1
#define QORDER_WEIGHT 2

/* Largest group or block side a config may give (the key's limit). */
#define QARGS_MAX_SIZE (1u << 20)

typedef struct qargs {
    int type;           /* QTYPE_* */
    uint32_t num_bits;  /* 1..32 */
    int strategy;       /* QS_* */
    int32_t group_size; /* 0: None; -1: per channel; > 0: elements per group */
    uint32_t block_n;   /* block_structure [rows, cols]; 0 when absent */
    uint32_t block_k;
    int symmetric;
    int dynamic;            /* QDYN_* */
    int actorder;           /* QORDER_* */
    fmoe_dtype scale_dtype; /* FMOE_DTYPE_INVALID when not given */
} qargs;

/* QuantizationArgs' defaults: int, 8 bits, symmetric, static, no groups,
 * strategy not yet inferred. */
void qargs_defaults(qargs *a);

/* Read a QuantizationArgs object at the current path of `j`: unknown keys
 * and wrong types are INVALID_ARGUMENT (compressed-tensors forbids extra
 * keys too), then the strategy is inferred and compressed-tensors' own
 * consistency rules are applied, each failure naming the path. */
fmoe_status qargs_read(qjson *j, const json_t *obj, qargs *out);

/* "type=int num_bits=4 strategy=group group_size=128 symmetric=true
 * dynamic=false" (+ actorder, block_structure, scale_dtype when set). */
void qargs_describe(const qargs *a, char *buf, size_t cap);

/* "group", "tensor_group", ... */
const char *qargs_strategy_name(int strategy);

#endif
