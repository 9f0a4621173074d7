/* core/cpu_name.c - the host CPU's model name (cpu_name.h). */
#include "fusedmoe/kit/cpu_name.h"

#include <stdio.h>
#include <string.h>

void fmoe_cpu_model_name(char *buf, size_t cap)
{
    buf[0] = '\0';
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || !colon)
            continue;
        snprintf(buf, cap, "%s", colon + 2);
        buf[strcspn(buf, "\n")] = '\0';
        break;
    }
    fclose(f);
}
