/*
 * core/quant/method_mxfp4.c - quant_method "mxfp4" (gpt-oss):
 *
 *   {"quant_method": "mxfp4", "modules_to_not_convert":
 *     ["model.layers.*.self_attn", "model.layers.*.mlp.router",
 *      "model.embed_tokens", "lm_head"]}
 *
 * The experts are MXFP4 (e2m1 values, one UE8M0 scale per 32), with
 * unquantized activations: fp4:group32:scale-ue8m0. vLLM's Mxfp4Config
 * reads no keys at all and makes every MoE layer MXFP4; transformers honours
 * modules_to_not_convert (globs), and so do we: a checkpoint that lists its
 * experts there stores them unquantized, whatever vLLM would assume.
 */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "core/quant/module_match.h"
#include "core/quant/quant.h"

typedef struct mxfp4_state {
    module_list skip;
} mxfp4_state;

static void mxfp4_destroy(void *state)
{
    mxfp4_state *s = state;
    if (!s)
        return;
    module_list_free(&s->skip);
    free(s);
}

static fmoe_status mxfp4_parse(qjson *j, const json_t *qcfg, void **state)
{
    mxfp4_state *s = calloc(1, sizeof *s);
    if (!s)
        return fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory");
    fmoe_status st = module_list_read(j, qcfg, "modules_to_not_convert", &s->skip);
    module_list_finish(&s->skip);
    if (st != FMOE_STATUS_OK) {
        mxfp4_destroy(s);
        return st;
    }
    *state = s;
    return FMOE_STATUS_OK;
}

static fmoe_status mxfp4_resolve(const void *state, const char *module, qspec *out)
{
    const mxfp4_state *s = state;
    memset(out, 0, sizeof *out);
    int skipped = module_list_contains(&s->skip, module);
    if (skipped)
        return skipped < 0 ? fmoe_error_set(FMOE_STATUS_OUT_OF_MEMORY, "out of memory") : FMOE_STATUS_OK;
    out->quantized = 1;
    qargs_defaults(&out->weights);
    out->weights.type = QTYPE_FLOAT;
    out->weights.num_bits = 4;
    out->weights.strategy = QS_GROUP;
    out->weights.group_size = 32;
    out->weights.scale_dtype = FMOE_DTYPE_UE8M0;
    return FMOE_STATUS_OK;
}

const quant_method fmoe_qm_mxfp4 = {
    .name = "mxfp4",
    .parse = mxfp4_parse,
    .resolve = mxfp4_resolve,
    .destroy = mxfp4_destroy,
};
