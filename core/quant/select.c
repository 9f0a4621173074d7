/*
 * core/quant/select.c - the MoE method selection tree of spec/interface.md
 * §9.3 (vLLM CompressedTensorsMoEMethod.get_moe_method), producing a
 * canonical scheme instead of a method class.
 *
 * The branches are tried in vLLM's order; the first whose predicate holds
 * decides, and its own checks produce vLLM's messages. Where vLLM's
 * predicates would let a config through that its method then misreads, we
 * add the missing condition and let the config fall to "Unsupported
 * FusedMoe scheme" instead:
 *
 *  - value types are checked (WNA16 and W4A8 need int weights, FP8 needs
 *    float 8-bit weights and activations);
 *  - the W4A8 branch vLLM picks by GPU capability (FP8 activations on
 *    exactly sm90, int8 on Arm CPUs) is picked by the activation type the
 *    config gives, so the answer does not depend on the machine reading it;
 *  - actorder="group" (g_idx) is accepted only where a g_idx exists in the
 *    scheme grammar and in a kernel: WNA16;
 *  - actorder="weight" is dropped: it changes how GPTQ calibrated, not the
 *    stored format or the arithmetic (compressed-tensors' own definition).
 *
 * Scale types follow docs/SCHEMES.md: e4m3 for NVFP4, UE8M0 for MX formats
 * and for FP8 blocks whose config stores UE8M0 scales, bf16 for grouped Arm
 * W4A8, f32 otherwise.
 */
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "base/scheme.h"
#include "core/quant/quant.h"

/* ---- predicates (vLLM's names, our added conditions marked) -------------- */

static int is_float(const qargs *a, uint32_t bits)
{
    return a->type == QTYPE_FLOAT && a->num_bits == bits;
}

static int is_mxfp4(const qargs *w)
{
    return w->strategy == QS_GROUP && is_float(w, 4) && w->group_size == 32 && w->symmetric;
}

static int is_ue8m0_scale(fmoe_dtype scale)
{
    return scale == FMOE_DTYPE_UINT8 || scale == FMOE_DTYPE_UE8M0;
}

static int is_mxfp8(const qargs *w)
{
    return w->strategy == QS_GROUP && is_float(w, 8) && w->group_size == 32 && w->symmetric &&
           is_ue8m0_scale(w->scale_dtype);
}

static int is_wna16_group_channel(const qspec *s)
{
    const qargs *w = &s->weights;
    return (w->strategy == QS_CHANNEL || w->strategy == QS_GROUP) && !s->has_input && w->dynamic == QDYN_STATIC;
}

static int is_nvfp4(const qargs *a)
{
    return a->strategy == QS_TENSOR_GROUP && is_float(a, 4) && a->group_size == 16 && a->symmetric;
}

static int is_fp8_w8a8(const qspec *s)
{
    const qargs *w = &s->weights, *a = &s->input;
    if (!s->has_input || w->type != QTYPE_FLOAT || a->type != QTYPE_FLOAT)
        return 0;
    if (w->num_bits != 8 || a->num_bits != 8) /* added: vLLM never checks the bits */
        return 0;
    int w_ok = w->strategy == QS_TENSOR || w->strategy == QS_CHANNEL || w->strategy == QS_BLOCK;
    if (!w->symmetric || w->dynamic != QDYN_STATIC || !w_ok)
        return 0;
    return a->dynamic != QDYN_STATIC || (a->symmetric && a->strategy == QS_TENSOR);
}

static int is_dynamic_token_w8a8(const qspec *s)
{
    const qargs *w = &s->weights, *a = &s->input;
    return s->has_input && w->num_bits == 8 && a->num_bits == 8 &&
           (w->strategy == QS_TENSOR || w->strategy == QS_CHANNEL) && a->strategy == QS_TOKEN && w->symmetric &&
           w->dynamic == QDYN_STATIC && a->dynamic != QDYN_STATIC && w->type == QTYPE_INT &&
           a->type == QTYPE_INT; /* types added */
}

/* 4-bit weights, 8-bit per-token dynamic activations: the two W4A8 paths. */
static int is_w4a8_shape(const qspec *s)
{
    const qargs *w = &s->weights, *a = &s->input;
    return s->has_input && w->num_bits == 4 && a->num_bits == 8 && a->strategy == QS_TOKEN && w->symmetric &&
           w->dynamic == QDYN_STATIC && a->dynamic != QDYN_STATIC && w->type == QTYPE_INT;
}

static int is_fp8_w4a8(const qspec *s)
{
    return is_w4a8_shape(s) && s->weights.strategy == QS_GROUP && s->input.symmetric && s->input.type == QTYPE_FLOAT;
}

static int is_dynamic_token_w4a8_int(const qspec *s)
{
    return is_w4a8_shape(s) && (s->weights.strategy == QS_GROUP || s->weights.strategy == QS_CHANNEL) &&
           s->input.type == QTYPE_INT;
}

/* ---- messages ------------------------------------------------------------------ */

static void describe_input(const qspec *s, char *buf, size_t cap)
{
    if (s->has_input)
        qargs_describe(&s->input, buf, cap);
    else
        snprintf(buf, cap, "None");
}

static fmoe_status unsupported_scheme(const qspec *s)
{
    char w[256], a[256];
    qargs_describe(&s->weights, w, sizeof w);
    describe_input(s, a, sizeof a);
    return fmoe_error_set(FMOE_STATUS_UNSUPPORTED, "Unsupported FusedMoe scheme: weights {%s}, input_activations {%s}",
                          w, a);
}

/* Every branch but WNA16 refuses a g_idx. */
static fmoe_status no_group_actorder(const qspec *s, const char *what)
{
    if (s->weights.actorder != QORDER_GROUP)
        return FMOE_STATUS_OK;
    return fmoe_error_set(FMOE_STATUS_UNSUPPORTED,
                          "actorder=group (g_idx) is only supported for WNA16 MoE weights (pack-quantized int4/int8 "
                          "without input activations), not for %s",
                          what);
}

/* ---- scheme builders ------------------------------------------------------------ */

static void weights(fmoe_scheme *out, fmoe_dtype dtype, int32_t strategy, uint32_t group, fmoe_dtype scale)
{
    memset(out, 0, sizeof *out);
    out->struct_size = sizeof *out;
    out->w_dtype = dtype;
    out->w_strategy = strategy;
    out->w_group_size = group;
    out->w_scale_dtype = scale;
    out->w_symmetric = 1;
}

static void activations(fmoe_scheme *out, fmoe_dtype dtype, int32_t strategy, uint32_t group, int symmetric)
{
    out->a_dtype = dtype;
    out->a_strategy = strategy;
    out->a_group_size = group;
    out->a_dynamic = 1;
    out->a_symmetric = (uint32_t)symmetric;
}

/* 1. MXFP4 weights; activations MXFP4 too, or none. */
static fmoe_status build_mxfp4(const qspec *s, fmoe_scheme *out)
{
    fmoe_status st = no_group_actorder(s, "MXFP4 weights");
    if (st != FMOE_STATUS_OK)
        return st;
    if (s->has_input && !is_mxfp4(&s->input)) {
        char a[256];
        describe_input(s, a, sizeof a);
        return fmoe_error_set(FMOE_STATUS_UNSUPPORTED,
                              "For MXFP4 weights, input quantization must also be MXFP4 format or None for MXFP4A16, "
                              "found {%s}",
                              a);
    }
    weights(out, FMOE_DTYPE_FP4_E2M1X2, FMOE_QSTRATEGY_GROUP, 32, FMOE_DTYPE_UE8M0);
    if (s->has_input)
        activations(out, FMOE_DTYPE_FP4_E2M1X2, FMOE_QSTRATEGY_GROUP, 32, 1);
    return FMOE_STATUS_OK;
}

/* 1b. (not in vLLM's tree) DeepSeek-V4 MXFP4 experts on FP8 activations
 * quantized per 32 with UE8M0 scales (DeepGEMM MegaMoE); only the fp8
 * reader's expert_dtype "fp4" asks for it (qspec.mxfp4_fp8). */
static fmoe_status build_mxfp4_fp8(const qspec *s, fmoe_scheme *out)
{
    const qargs *a = &s->input;
    if (!is_mxfp4(&s->weights) || !s->has_input || !is_float(a, 8) || a->strategy != QS_GROUP || a->group_size != 32 ||
        a->dynamic == QDYN_STATIC || !a->symmetric)
        return unsupported_scheme(s);
    weights(out, FMOE_DTYPE_FP4_E2M1X2, FMOE_QSTRATEGY_GROUP, 32, FMOE_DTYPE_UE8M0);
    activations(out, FMOE_DTYPE_FP8_E4M3FN, FMOE_QSTRATEGY_GROUP, 32, 1);
    return FMOE_STATUS_OK;
}

/* 2. MXFP8: the method quantizes activations to MXFP8 itself. */
static fmoe_status build_mxfp8(const qspec *s, fmoe_scheme *out)
{
    fmoe_status st = no_group_actorder(s, "MXFP8 weights");
    if (st != FMOE_STATUS_OK)
        return st;
    const qargs *a = &s->input;
    if (s->has_input && !(is_float(a, 8) && a->strategy == QS_GROUP && a->group_size == 32 && a->symmetric)) {
        char text[256];
        describe_input(s, text, sizeof text);
        return fmoe_error_set(FMOE_STATUS_UNSUPPORTED,
                              "For MXFP8 weights, input quantization must also be MXFP8 format or None, found {%s}",
                              text);
    }
    weights(out, FMOE_DTYPE_FP8_E4M3FN, FMOE_QSTRATEGY_GROUP, 32, FMOE_DTYPE_UE8M0);
    activations(out, FMOE_DTYPE_FP8_E4M3FN, FMOE_QSTRATEGY_GROUP, 32, 1);
    return FMOE_STATUS_OK;
}

/* 3. Weight-only int4/int8 (Marlin-style). */
static fmoe_status build_wna16(const qspec *s, fmoe_scheme *out)
{
    const qargs *w = &s->weights;
    int pack = s->format && strcmp(s->format, "pack-quantized") == 0;
    if ((w->num_bits != 4 && w->num_bits != 8) || !pack) {
        char format[96];
        if (s->format)
            snprintf(format, sizeof format, "'%s'", s->format);
        else
            snprintf(format, sizeof format, "None");
        return fmoe_error_set(FMOE_STATUS_UNSUPPORTED,
                              "For Fused MoE layers, only format 'pack-quantized' and bits [4, 8] are supported, "
                              "but got format %s and bits %u.",
                              format, w->num_bits);
    }
    if (w->type != QTYPE_INT) /* added: the packed int32 words hold integers */
        return unsupported_scheme(s);
    int grouped = w->strategy == QS_GROUP;
    weights(out, w->num_bits == 4 ? FMOE_DTYPE_INT4 : FMOE_DTYPE_INT8,
            grouped ? FMOE_QSTRATEGY_GROUP : FMOE_QSTRATEGY_CHANNEL, grouped ? (uint32_t)w->group_size : 0,
            FMOE_DTYPE_F32);
    out->w_symmetric = (uint32_t)w->symmetric;
    if (grouped && w->actorder == QORDER_GROUP)
        out->w_actorder = FMOE_ACTORDER_GROUP;
    return FMOE_STATUS_OK;
}

/* 4. NVFP4 weights; activations NVFP4 too (W4A4) or none (W4A16). */
static fmoe_status build_nvfp4(const qspec *s, fmoe_scheme *out)
{
    fmoe_status st = no_group_actorder(s, "NVFP4 weights");
    if (st != FMOE_STATUS_OK)
        return st;
    if (s->has_input && !is_nvfp4(&s->input)) {
        char a[256];
        describe_input(s, a, sizeof a);
        return fmoe_error_set(FMOE_STATUS_UNSUPPORTED,
                              "For NVFP4 weights, input quantization must also be NVFP4 format or None for NVFP4A16, "
                              "found {%s}",
                              a);
    }
    weights(out, FMOE_DTYPE_FP4_E2M1X2, FMOE_QSTRATEGY_TENSOR_GROUP, 16, FMOE_DTYPE_FP8_E4M3FN);
    /* Group scales are computed per forward whatever "dynamic" says; the
     * global scale is the checkpoint's. */
    if (s->has_input)
        activations(out, FMOE_DTYPE_FP4_E2M1X2, FMOE_QSTRATEGY_TENSOR_GROUP, 16, 1);
    return FMOE_STATUS_OK;
}

/* 5. FP8 W8A8: per tensor, per channel with per-token activations, or blocks. */
static fmoe_status build_fp8(const qspec *s, fmoe_scheme *out)
{
    const qargs *w = &s->weights, *a = &s->input;
    int per_tensor = w->strategy == QS_TENSOR && a->strategy == QS_TENSOR;
    int per_channel = w->strategy == QS_CHANNEL && a->strategy == QS_TOKEN;
    if (!a->symmetric) /* added: e4m3 has no zero point */
        return unsupported_scheme(s);
    if (w->strategy == QS_BLOCK) {
        if (a->dynamic == QDYN_STATIC)
            return fmoe_error_set(FMOE_STATUS_UNSUPPORTED,
                                  "The block-wise quantization only supports dynamic activation scheme for now, but "
                                  "got static activation scheme.");
        /* The block kernels quantize activations in 1 x block_k groups,
         * whatever strategy the config names for them. */
        fmoe_dtype scale = is_ue8m0_scale(w->scale_dtype) ? FMOE_DTYPE_UE8M0 : FMOE_DTYPE_F32;
        weights(out, FMOE_DTYPE_FP8_E4M3FN, FMOE_QSTRATEGY_BLOCK, 0, scale);
        out->w_block_n = w->block_n;
        out->w_block_k = w->block_k;
        activations(out, FMOE_DTYPE_FP8_E4M3FN, FMOE_QSTRATEGY_GROUP, w->block_k, 1);
        return FMOE_STATUS_OK;
    }
    if (!per_tensor && !per_channel)
        return fmoe_error_set(FMOE_STATUS_UNSUPPORTED, "For FP8 Fused MoE layer, we require either per tensor or "
                                                       "channelwise, dynamic per token quantization.");
    weights(out, FMOE_DTYPE_FP8_E4M3FN, per_tensor ? FMOE_QSTRATEGY_TENSOR : FMOE_QSTRATEGY_CHANNEL, 0, FMOE_DTYPE_F32);
    activations(out, FMOE_DTYPE_FP8_E4M3FN, per_tensor ? FMOE_QSTRATEGY_TENSOR : FMOE_QSTRATEGY_TOKEN, 0, 1);
    out->a_dynamic = a->dynamic != QDYN_STATIC;
    return FMOE_STATUS_OK;
}

/* 6. INT8 W8A8 with dynamic per-token activations. */
static fmoe_status build_w8a8_int8(const qspec *s, fmoe_scheme *out)
{
    weights(out, FMOE_DTYPE_INT8, s->weights.strategy == QS_TENSOR ? FMOE_QSTRATEGY_TENSOR : FMOE_QSTRATEGY_CHANNEL, 0,
            FMOE_DTYPE_F32);
    activations(out, FMOE_DTYPE_INT8, FMOE_QSTRATEGY_TOKEN, 0, s->input.symmetric);
    return FMOE_STATUS_OK;
}

/* 7. int4 groups x FP8 per-token activations (Hopper mixed input). */
static fmoe_status build_w4a8_fp8(const qspec *s, fmoe_scheme *out)
{
    weights(out, FMOE_DTYPE_INT4, FMOE_QSTRATEGY_GROUP, (uint32_t)s->weights.group_size, FMOE_DTYPE_F32);
    activations(out, FMOE_DTYPE_FP8_E4M3FN, FMOE_QSTRATEGY_TOKEN, 0, 1);
    return FMOE_STATUS_OK;
}

/* 8. Arm W4A8 (KleidiAI): activations are quantized per row, dynamic and
 * asymmetric, whatever the config says (docs/SCHEMES.md). */
static fmoe_status build_w4a8_int(const qspec *s, fmoe_scheme *out)
{
    int grouped = s->weights.strategy == QS_GROUP;
    weights(out, FMOE_DTYPE_INT4, grouped ? FMOE_QSTRATEGY_GROUP : FMOE_QSTRATEGY_CHANNEL,
            grouped ? (uint32_t)s->weights.group_size : 0, grouped ? FMOE_DTYPE_BF16 : FMOE_DTYPE_F32);
    activations(out, FMOE_DTYPE_INT8, FMOE_QSTRATEGY_TOKEN, 0, 0);
    return FMOE_STATUS_OK;
}

/* ---- the tree ---------------------------------------------------------------------- */

static fmoe_status select_quantized(const qspec *s, fmoe_scheme *out)
{
    fmoe_status st;
    if (s->mxfp4_fp8)
        return build_mxfp4_fp8(s, out);
    if (is_mxfp4(&s->weights))
        return build_mxfp4(s, out);
    if (is_mxfp8(&s->weights))
        return build_mxfp8(s, out);
    if (is_wna16_group_channel(s))
        return build_wna16(s, out);
    if (is_nvfp4(&s->weights))
        return build_nvfp4(s, out);
    if (is_fp8_w8a8(s)) {
        st = no_group_actorder(s, "FP8 weights");
        return st != FMOE_STATUS_OK ? st : build_fp8(s, out);
    }
    if (is_dynamic_token_w8a8(s))
        return build_w8a8_int8(s, out);
    if (is_fp8_w4a8(s) || is_dynamic_token_w4a8_int(s)) {
        st = no_group_actorder(s, "W4A8 weights");
        if (st != FMOE_STATUS_OK)
            return st;
        return is_fp8_w4a8(s) ? build_w4a8_fp8(s, out) : build_w4a8_int(s, out);
    }
    return unsupported_scheme(s);
}

fmoe_status fmoe_quant_select(const qspec *spec, fmoe_dtype unquantized_dtype, fmoe_scheme *out)
{
    fmoe_scheme s;
    if (!spec->quantized) {
        fmoe_scheme_init_unquantized(out, unquantized_dtype);
        return FMOE_STATUS_OK;
    }
    fmoe_status st = select_quantized(spec, &s);
    if (st != FMOE_STATUS_OK)
        return st;
    /* The builders only make canonical schemes; a failure here is a bug. */
    if (fmoe_scheme_validate(&s) != FMOE_STATUS_OK) {
        char text[512];
        snprintf(text, sizeof text, "%s", fmoe_error_text());
        return fmoe_error_set(FMOE_STATUS_INTERNAL, "selection built a non-canonical scheme (%s)", text);
    }
    memcpy(out, &s, sizeof s);
    return FMOE_STATUS_OK;
}
