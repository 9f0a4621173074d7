/*
 * fusedmoe/kit/cpu_name.h - the host CPU's model name, for device reports and
 * benchmark records. In the static math library, so the CPU plugins (which
 * must not link libfusedmoe) and the CLI share one reader.
 */
#ifndef FMOE_KIT_CPU_NAME_H
#define FMOE_KIT_CPU_NAME_H

#include <stddef.h>

/* "model name" of /proc/cpuinfo into buf; "" when there is none. */
void fmoe_cpu_model_name(char *buf, size_t cap);

#endif
