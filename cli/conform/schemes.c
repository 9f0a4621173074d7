/*
 * cli/conform/schemes.c - THE tolerance table of the conformance suite, and
 * the weight generator of each scheme (see schemes.h, docs/CONFORMANCE.md).
 *
 * What is compared. The plugin and the reference plugin load the *same*
 * checkpoint (cli/synth: the same quantized bytes, scales, zero points and
 * g_idx), get the same x ~ N(0,1) and routing, and the reference quantizes
 * activations exactly where kernels do. So no tolerance below pays for
 * quantization error. What remains is
 *   (a) f32 accumulation order (~K * 2^-24 relative: < 1e-5 at K <= 1k);
 *   (b) rounding of intermediates to the activation dtype (a kernel that
 *       stores h and act(h) in bf16 / f16, or keeps them in f32): the
 *       act-dtype rows below;
 *   (c) activation-quantization ties: where (a) or (b) moves a GEMM input
 *       across a rounding midpoint of the activation format, the plugin
 *       and the reference pick neighbouring codes for that element.
 * For (c), with weights N(0,1)/sqrt(fan_in) every output is O(1) and an
 * element flipped by one step d (relative to its magnitude) changes
 * y = W2 a by d*|a_i|*|W2[:,i]|; with a fraction p of flipped elements the
 * relative error of y is about sqrt(p) * d. The worst realistic plugin
 * keeps act(h) in f32 while the reference rounds it to bf16 (2^-9): the
 * flip probability is then about 2^-9 / (relative step of the format):
 *   fp8 e4m3   step <= 2^-3:  p ~ 3%, error ~ 0.17 * 0.09 = 1.6% (rms);
 *              NMSE ~ 2.6e-4 -> gate 5e-4; 4 sigma of an O(0.5) output
 *              ~ 0.03 -> atol 5e-2, rtol 1e-2 (vLLM's CUTLASS fp8 row,
 *              which also covers block fp8's 3.5e-2).
 *   fp4 e2m1   step 1/3..1/2: p ~ 1%, error ~ 0.1 * 0.4 = 4%; NMSE
 *              ~ 1.6e-3 -> gate 5e-3; 4 sigma ~ 0.08 -> 1e-1 / 1e-1
 *              (vLLM's CUTLASS NVFP4 row).
 *   int8       step = row amax / 127 (~2.4% of the rms): bf16 rounding
 *              flips p ~ 8%, error ~ 0.28 * 0.024 = 0.7%; NMSE ~ 5e-5,
 *              4 sigma ~ 0.015 -> 2e-2 / 2e-2, NMSE 5e-4 (vLLM's
 *              KleidiAI W4A8 row).
 *   weight-only (W4A16, W8A16, MXFP4/NVFP4 W4A16): nothing is quantized
 *              on the way in; a kernel that dequantizes weights to bf16
 *              (Marlin) adds 2^-9 per weight, far below the bf16 row,
 *              which applies: 2e-2 / 2e-2, NMSE 1e-4.
 * Act-dtype rows (the coarser of scheme and act dtype applies):
 *   f32   1e-4 / 1e-4, NMSE 1e-8   vLLM's CPU fp32 1e-3 is for 4k-wide layers;
 *                                  ours are <= 1k wide and f32 accumulation
 *                                  order alone stays well below 1e-5.
 *   f16   3e-3 / 3e-3, NMSE 1e-5   Mixtral fp16 1e-3, widened by the f16
 *                                  rounding (2^-11) of the intermediate
 *                                  activation that real kernels store.
 *   bf16  2e-2 / 2e-2, NMSE 1e-4   vLLM bf16 Triton/modular 2e-2; bf16
 *                                  rounding (2^-8) of the intermediate.
 * The NMSE gate is what an all-zero or wrongly scaled output cannot pass
 * (spec/testing.md §6 #2): a scale off by 2x gives NMSE >= 0.25.
 *
 * Grid sizes follow each scheme's size rules (docs/REFERENCE-METHODS.md):
 * h_align divides H (K groups of w13, int32 pack factors), i_align the I
 * of each TP rank (K groups of w2, block_n of w13's rows).
 */
#include "cli/conform/schemes.h"

/* clang-format 14 splits brace-initializer macros over several lines. */
// clang-format off
#define TOL_F32 {1e-4, 1e-4, 1e-8}
#define TOL_F16 {3e-3, 3e-3, 1e-5}
#define TOL_BF16 {2e-2, 2e-2, 1e-4}
#define TOL_FP8 {5e-2, 1e-2, 5e-4}  /* fp8 activations */
#define TOL_FP4 {1e-1, 1e-1, 5e-3}  /* fp4 activations */
#define TOL_INT8 {2e-2, 2e-2, 5e-4} /* int8 activations */
#define TOL_WONLY TOL_BF16          /* weight-only: the activation dtype's row */
// clang-format on

#define BF FMOE_DTYPE_BF16

const cf_scheme cf_schemes[] = {
    {"f32", FMOE_DTYPE_F32, 1, 1, TOL_F32, synth_build, "f32 accumulation order only"},
    {"bf16", FMOE_DTYPE_BF16, 1, 1, TOL_BF16, synth_build, "vLLM bf16 2e-2 (spec §1.3)"},
    {"f16", FMOE_DTYPE_F16, 1, 1, TOL_F16, synth_build, "Mixtral fp16 1e-3, widened for f16 intermediates"},
    /* FP8 */
    {"fp8e4m3:tensor/fp8e4m3:tensor", BF, 1, 1, TOL_FP8, synth_build, "e4m3 ties; CUTLASS fp8 per-tensor"},
    {"fp8e4m3:tensor/fp8e4m3:tensor:dynamic", BF, 1, 1, TOL_FP8, synth_build, "e4m3 ties; CUTLASS fp8 per-tensor"},
    {"fp8e4m3:channel/fp8e4m3:token:dynamic", BF, 1, 1, TOL_FP8, synth_build,
     "e4m3 ties; CUTLASS fp8 per-channel/per-token"},
    {"fp8e4m3:block128x128/fp8e4m3:group128:dynamic", BF, 1, 128, TOL_FP8, synth_build,
     "e4m3 ties; block fp8 [128,128]"},
    {"fp8e4m3:block128x128:scale-ue8m0/fp8e4m3:group128:dynamic", BF, 1, 128, TOL_FP8, synth_build,
     "e4m3 ties; DeepGEMM UE8M0 blocks"},
    {"fp8e4m3:group32:scale-ue8m0/fp8e4m3:group32:dynamic", BF, 32, 32, TOL_FP8, synth_build, "e4m3 ties; MXFP8"},
    /* FP4 */
    {"fp4:group32:scale-ue8m0", BF, 32, 32, TOL_WONLY, synth_build, "weight-only: bf16 row (MXFP4 W4A16)"},
    {"fp4:group32:scale-ue8m0/fp4:group32:dynamic", BF, 32, 32, TOL_FP4, synth_build, "e2m1 ties; MXFP4 W4A4"},
    {"fp4:tgroup16:scale-fp8e4m3", BF, 16, 16, TOL_WONLY, synth_build, "weight-only: bf16 row (NVFP4 W4A16)"},
    {"fp4:tgroup16:scale-fp8e4m3/fp4:tgroup16:dynamic", BF, 16, 16, TOL_FP4, synth_build, "e2m1 ties; CUTLASS NVFP4"},
    /* MXFP4 weights x FP8 activations with UE8M0 per-32 scales (DeepSeek-V4 experts, plugins/megamoe): the
     * activations are the quantized input, so the e4m3 row; cli/synth/mx.c writes the MXFP4 weights. */
    {"fp4:group32:scale-ue8m0/fp8e4m3:group32:dynamic", BF, 32, 32, TOL_FP8, synth_build,
     "e4m3 ties; MXFP4 x FP8 (MegaMoE)"},
    /* WNA16 (weight-only integers) */
    {"int4:group128", BF, 128, 128, TOL_WONLY, synth_build, "weight-only: bf16 row (GPTQ / Marlin)"},
    {"int4:group32:asym", BF, 32, 32, TOL_WONLY, synth_build, "weight-only: bf16 row (AWQ zero points)"},
    {"int4:group32:actorder", BF, 32, 32, TOL_WONLY, synth_build, "weight-only: bf16 row (GPTQ act-order)"},
    {"int8:channel", BF, 4, 4, TOL_WONLY, synth_build, "weight-only: bf16 row (W8A16)"},
    /* 8-bit activations */
    {"int8:channel/int8:token:dynamic", BF, 1, 1, TOL_INT8, synth_build, "int8 ties; INT8 W8A8"},
    {"int8:tensor/int8:token:dynamic", BF, 1, 1, TOL_INT8, synth_build, "int8 ties; INT8 W8A8 per tensor"},
    {"int4:group128/fp8e4m3:token:dynamic", BF, 128, 128, TOL_FP8, synth_build, "e4m3 ties; W4A8-FP8"},
    {"int4:channel/int8:token:dynamic:asym", BF, 1, 1, TOL_INT8, synth_build, "int8 ties; KleidiAI W4A8"},
    {"int4:group32:scale-bf16/int8:token:dynamic:asym", BF, 32, 32, TOL_INT8, synth_build,
     "int8 ties; KleidiAI W4A8 group32"},
};
const size_t cf_n_schemes = sizeof cf_schemes / sizeof cf_schemes[0];

static int coarseness(fmoe_dtype d)
{
    return d == FMOE_DTYPE_F32 ? 0 : d == FMOE_DTYPE_F16 ? 1 : 2;
}

cf_tolerance cf_tolerance_for(const cf_scheme *s, fmoe_dtype act)
{
    static const cf_tolerance by_act[3] = {TOL_F32, TOL_F16, TOL_BF16};
    cf_tolerance t = s->tol;
    const cf_tolerance *a = &by_act[coarseness(act)];
    if (a->atol > t.atol)
        t.atol = a->atol;
    if (a->rtol > t.rtol)
        t.rtol = a->rtol;
    if (a->nmse > t.nmse)
        t.nmse = a->nmse;
    return t;
}
