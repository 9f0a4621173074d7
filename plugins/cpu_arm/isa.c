/*
 * plugins/cpu_arm/isa.c - which micro-kernel the CPU can run, from what the
 * kernel says the CPU and OS support: getauxval(AT_HWCAP) bit ASIMDDP
 * (SDOT/UDOT) and getauxval(AT_HWCAP2) bit I8MM (SMMLA). Reading ID
 * registers directly would trap on kernels that do not emulate them; HWCAP
 * is what the OS enabled. Called from init and probe, never from entry.
 */
#include <string.h>

#include "plugins/cpu_arm/kernels.h"

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
/* Bit values of the Linux arm64 uapi <asm/hwcap.h>, spelled out so that an
 * older libc header does not hide them. */
#define CARM_HWCAP_ASIMDDP (1ul << 20)
#define CARM_HWCAP2_I8MM   (1ul << 13)
#endif

static const char *const names[CARM_ISA_COUNT] = {"portable", "dotprod", "i8mm"};

const char *carm_isa_name(int isa)
{
    return isa >= 0 && isa < CARM_ISA_COUNT ? names[isa] : "?";
}

int carm_isa_parse(const char *name)
{
    for (int i = 0; i < CARM_ISA_COUNT; i++)
        if (strcmp(name, names[i]) == 0)
            return i;
    return -1;
}

int carm_isa_detect(void)
{
#if defined(__aarch64__) && defined(__linux__)
    unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    if (!(hw & CARM_HWCAP_ASIMDDP))
        return CARM_ISA_PORTABLE;
    /* Every i8mm CPU has dotprod; require both so the order holds. */
    return (hw2 & CARM_HWCAP2_I8MM) ? CARM_ISA_I8MM : CARM_ISA_DOTPROD;
#else
    return CARM_ISA_PORTABLE;
#endif
}

carm_kernel_fn carm_kernel(int isa)
{
#if defined(__aarch64__)
    if (isa == CARM_ISA_I8MM)
        return carm_kernel_i8mm;
    if (isa == CARM_ISA_DOTPROD)
        return carm_kernel_dotprod;
#else
    (void)isa;
#endif
    return carm_kernel_portable;
}
