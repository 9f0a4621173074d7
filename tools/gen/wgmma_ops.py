#!/usr/bin/env python3
"""Writes the inline-PTX wgmma wrappers, one per shape. The accumulator
is N/2 registers per thread, each an asm operand, which is what makes the
wrappers tedious to write by hand.

    python3 tools/gen/wgmma_ops.py > plugins/cuda/wgmma_ops.cuh
        both operands in shared memory (grouped_gemm_sm90.cu, and
        stream_wgmma.cu's and stream_bf16_wgmma.cu's N = 8..32): m64nNk32 e4m3 x e4m3 and m64nNk16
        bf16 x bf16, f32 accumulators;
    python3 tools/gen/wgmma_ops.py rs > plugins/cuda/wgmma_rs_ops.cuh
        A in registers, B in shared memory (wq_wgmma.cu and wq_ring.cu, whose
        A operand is dequantized in registers): m64nNk16 bf16 and f16, f32
        accumulators;
    python3 tools/gen/wgmma_ops.py rs-e4m3 > plugins/megamoe/wgmma_rs_e4m3.cuh
        A in registers, B in shared memory (the MegaMoE SM90 GEMM, whose A
        operand is MXFP4 decoded to e4m3 in registers): m64nNk32 e4m3 for
        the small N of a tile of up to 32 pairs, f32 accumulators.
"""
import sys

# 64 and 96: each warp group's half of a 128- or 192-column tile when the
# two split a tile's columns (an expert's last <= 64 rows).
SHAPES = (64, 96, 128, 192, 256)
# Both operands in shared memory: the weight streams' one to four n8 slices
# of a stream tile of up to 32 pairs (stream_wgmma.cu: e4m3,
# stream_bf16_wgmma.cu: bf16).
SS_SMALL = (8, 16, 24, 32)
# (name suffix, K per instruction, PTX types, immediates after scale-d):
# bf16 takes transpose flags too, both 0 for K-major operands.
TYPES = (("e4m3", 32, "e4m3.e4m3", "1, 1"), ("bf16", 16, "bf16.bf16", "1, 1, 0, 0"))

def asm_body(regs, instr, operands, inputs):
    """The body of one wrapper: `instr` (the wgmma with its shape and types)
    on the accumulator list and then `operands` (the rest of the PTX
    operand list, predicate p last but its immediates), p set from the
    operand after `inputs`' registers."""
    lines = [
        "{",
        "    asm volatile(",
        '        "{\\n.reg .pred p;\\n"',
        f'        "setp.ne.b32 p, %{regs + len(inputs)}, 0;\\n"',
        f'        "{instr} "',
    ]
    # split the register list over several source lines
    names = [f"%{i}" for i in range(regs)]
    chunks = [", ".join(names[i:i + 16]) for i in range(0, regs, 16)]
    lines.append('        "{" ')
    for i, c in enumerate(chunks):
        sep = ", " if i + 1 < len(chunks) else ""
        lines.append(f'        "{c}{sep}"')
    lines.append(f'        "}}, {operands};\\n}}\\n"')
    ops = [f'"+f"(d[{i}])' for i in range(regs)]
    lines.append("        : " + ", ".join(ops[:4]) + ("," if regs > 4 else ""))
    for i in range(4, regs, 4):
        end = "," if i + 4 < regs else ""
        lines.append("          " + ", ".join(ops[i:i + 4]) + end)
    lines.append("        : " + ", ".join(inputs + ['"r"(accumulate)']) + ");")
    lines.append("}")
    return lines

def wrapper(n, t):
    suffix, k, types, imms = t
    regs = n // 2
    return "\n".join([
        f"/* D (+)= A * B, m64n{n}k{k} {suffix}; {regs} accumulator registers per thread. */",
        f"__device__ __forceinline__ void wgmma_m64n{n}k{k}_{suffix}(float (&d)[{regs}], uint64_t desc_a, uint64_t desc_b,",
        f"                                                     int accumulate)",
    ] + asm_body(regs, f"wgmma.mma_async.sync.aligned.m64n{n}k{k}.f32.{types}",
                 f"%{regs}, %{regs + 1}, p, {imms}", ['"l"(desc_a)', '"l"(desc_b)']))

# A in registers: the 4-bit kernels' token tiles (bf16, f16: k16, transpose
# flag for B; wq_wgmma.cu's 64 and 128 rows, wq_ring.cu's 16 to 64 pairs)
# and the MegaMoE SM90 tile's one to four n8 slices (e4m3: k32, no
# transpose flags).
RS_SHAPES = (16, 32, 48, 64, 128)
RS_TYPES = (("bf16", 16, "bf16.bf16", "1, 1, 0"), ("f16", 16, "f16.f16", "1, 1, 0"))
RS_E4M3_SHAPES = (8, 16, 24, 32)
RS_E4M3 = ("e4m3", 32, "e4m3.e4m3", "1, 1")

def wrapper_rs(n, t):
    suffix, k, types, imms = t
    regs = n // 2
    return "\n".join([
        f"/* D (+)= A * B, m64n{n}k{k} {suffix}, A from registers; {regs} accumulator registers per thread. */",
        f"__device__ __forceinline__ void wgmma_m64n{n}k{k}_{suffix}_rs(float (&d)[{regs}], const uint32_t (&a)[4],",
        f"                                                     uint64_t desc_b, int accumulate)",
    ] + asm_body(regs, f"wgmma.mma_async.sync.aligned.m64n{n}k{k}.f32.{types}",
                 f"{{%{regs}, %{regs + 1}, %{regs + 2}, %{regs + 3}}}, %{regs + 4}, p, {imms}",
                 ['"r"(a[0])', '"r"(a[1])', '"r"(a[2])', '"r"(a[3])', '"l"(desc_b)']))

def emit(doc, guard, namespace, wrappers):
    """One generated header: its comment (`doc`, lines without the comment
    markers), include guard, namespace and the wrappers."""
    out = sys.stdout
    out.write("/*\n" + "".join(f" * {line}\n" for line in doc) + " */\n")
    out.write(f"#ifndef {guard}\n#define {guard}\n\n#include <stdint.h>\n\n")
    out.write(f"namespace {namespace} {{\n\n")
    out.write("\n\n".join(wrappers))
    out.write(f"\n\n}} // namespace {namespace}\n\n#endif\n")

def main():
    if sys.argv[1:] == ["rs"]:
        return emit(["plugins/cuda/wgmma_rs_ops.cuh - GENERATED by tools/gen/wgmma_ops.py rs;",
                     "edit that script, not this file. Inline-PTX wgmma m64nNk16 bf16 and f16",
                     "with A from registers (each warp's 16 rows in mma.sync m16n8k16's A",
                     "fragment layout) and B K-major in shared memory through a matrix",
                     "descriptor, f32 accumulators (sm_90a); accumulate = 0 overwrites D."],
                    "FMOE_PLUGIN_CUDA_WGMMA_RS_OPS_CUH", "fmcu_wgmma",
                    [wrapper_rs(n, t) for t in RS_TYPES for n in RS_SHAPES])
    if sys.argv[1:] == ["rs-e4m3"]:
        return emit(["plugins/megamoe/wgmma_rs_e4m3.cuh - GENERATED by tools/gen/wgmma_ops.py",
                     "rs-e4m3; edit that script, not this file. Inline-PTX wgmma m64nNk32",
                     "e4m3 x e4m3, N = 8..32, with A from registers (each warp's 16 rows in",
                     "mma.sync m16n8k32's 8-bit A fragment layout) and B K-major in shared",
                     "memory through a matrix descriptor, f32 accumulators (sm_90a);",
                     "accumulate = 0 overwrites D."],
                    "FMOE_PLUGIN_MEGAMOE_WGMMA_RS_E4M3_CUH", "mm_wgmma",
                    [wrapper_rs(n, RS_E4M3) for n in RS_E4M3_SHAPES])
    return emit(["plugins/cuda/wgmma_ops.cuh - GENERATED by tools/gen/wgmma_ops.py; edit",
                 "that script, not this file. Inline-PTX wgmma m64nNk32 e4m3 x e4m3 and",
                 "m64nNk16 bf16 x bf16 with f32 accumulators (sm_90a), both operands",
                 "K-major in shared memory",
                 "through matrix descriptors; accumulate = 0 overwrites D."],
                "FMOE_PLUGIN_CUDA_WGMMA_OPS_CUH", "fmcu_wgmma",
                [wrapper(n, t) for t in TYPES for n in SHAPES] + [wrapper(n, t) for t in TYPES for n in SS_SMALL])

main()
