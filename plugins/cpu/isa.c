/*
 * plugins/cpu/isa.c - which SIMD path the kernels take.
 *
 * A feature counts only when the CPU has it (CPUID) *and* the OS saves its
 * register state (XCR0, read with XGETBV once CPUID says OSXSAVE): a
 * hypervisor or kernel may hide AVX-512 state even on a CPU that has it,
 * and executing such an instruction then faults.
 *
 *   avx2         CPUID.7.0:EBX.AVX2 and CPUID.1:ECX.FMA (the bf16
 *                kernels' widening path multiplies with FMA; every AVX2
 *                CPU has it), XCR0 bits 1-2 (SSE, AVX)
 *   avx512_vnni  CPUID.7.0:EBX.AVX512F/BW/VL, ECX.AVX512_VNNI,
 *                XCR0 bits 1-2 and 5-7 (opmask, ZMM_Hi256, Hi16_ZMM)
 *   avx512_bf16  and CPUID.7.1:EAX.AVX512_BF16 (vdpbf16ps)
 *
 * The option isa = "portable|avx2|avx512_vnni|avx512_bf16" forces a lower
 * path (tests, or to compare); a request above what the machine has is
 * clamped, with a note the plugin logs and its probe reports (the kernels
 * of a level the OS does not enable would fault).
 */
#define _DEFAULT_SOURCE /* syscall under strict C11 */
#include <stdio.h>
#include <string.h>

#include "plugins/cpu/cpu.h"

#if defined(__x86_64__)
#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

static uint64_t xgetbv0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

int cpu_isa_detect(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) /* OSXSAVE */
        return CPU_ISA_PORTABLE;
    int fma = (c & (1u << 12)) != 0;
    uint64_t xcr0 = xgetbv0();
    if ((xcr0 & 0x6) != 0x6 || __get_cpuid_max(0, NULL) < 7)
        return CPU_ISA_PORTABLE;
    unsigned max7;
    __cpuid_count(7, 0, max7, b, c, d);
    if (!(b & (1u << 5)) || !fma) /* AVX2, FMA */
        return CPU_ISA_PORTABLE;
    int avx512 = (b & (1u << 16)) && (b & (1u << 30)) && (b & (1u << 31)) && (c & (1u << 11));
    if (!avx512 || (xcr0 & 0xE0) != 0xE0)
        return CPU_ISA_AVX2;
    if (max7 >= 1) {
        __cpuid_count(7, 1, a, b, c, d);
        if (a & (1u << 5)) /* AVX512_BF16 */
            return CPU_ISA_AVX512_BF16;
    }
    return CPU_ISA_AVX512_VNNI;
}
#else
int cpu_isa_detect(void)
{
    return CPU_ISA_PORTABLE;
}
#endif

#if defined(__x86_64__) && defined(__linux__) && defined(SYS_arch_prctl) && defined(FMOE_CPU_HAVE_AMX)
/* AMX-BF16 needs the CPU (CPUID.7.0:EDX bits 22 AMX-BF16, 24 AMX-TILE),
 * the OS saving the tile state (XCR0 bits 17-18) and, on Linux, this
 * process's permission to use the tile data (arch_prctl
 * ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA; granted once, for every
 * thread; oneDNN asks the same). */
int cpu_amx_enable(void)
{
    unsigned a, b, c, d;
    if (cpu_isa_detect() < CPU_ISA_AVX512_BF16)
        return 0;
    __cpuid_count(7, 0, a, b, c, d);
    if (!(d & (1u << 22)) || !(d & (1u << 24)))
        return 0;
    if ((xgetbv0() & 0x60000) != 0x60000)
        return 0;
    return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0;
}
#else
int cpu_amx_enable(void)
{
    return 0;
}
#endif

static const char *const isa_names[CPU_ISA_COUNT] = {"portable", "avx2", "avx512_vnni", "avx512_bf16"};

const char *cpu_isa_name(int isa)
{
    return isa >= 0 && isa < CPU_ISA_COUNT ? isa_names[isa] : "?";
}

int cpu_isa_choose(int request, int detected, char *note, size_t cap)
{
    note[0] = '\0';
    if (request == CPU_ISA_AUTO || request < 0 || request >= CPU_ISA_COUNT)
        return detected;
    if (request > detected) {
        snprintf(note, cap, "option isa = \"%s\": this machine (with its OS) only enables %s; using %s",
                 isa_names[request], isa_names[detected], isa_names[detected]);
        return detected;
    }
    snprintf(note, cap, "option isa = \"%s\": using %s", isa_names[request], isa_names[request]);
    return request;
}
