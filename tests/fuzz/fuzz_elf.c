/*
 * tests/fuzz/fuzz_elf.c - libFuzzer harness for the ELF64 export reader
 * `fusedmoe conform` runs on a plugin library before loading it
 * (cli/conform/elf_symbols.c): any bytes must give the exports or a clean
 * reason, never a read outside them. Seeds: two small shared objects
 * (gcc -shared -s: one exporting fmoe_plugin_entry and an object, one
 * needing libc.so.6) and a text file. Replayed over corpus/elf by meson.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cli/conform/elf_symbols.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static cf_elf_exports ex; /* 6 KB: off the fuzzer's stack */
    char why[160] = "";
    int rc = cf_elf_parse_exports(data, size, &ex, why, sizeof why);
    /* A failure says why; a success lists what it counted. */
    if (rc != 0 && (rc != -1 || why[0] == '\0'))
        __builtin_trap();
    if (rc == 0) {
        for (size_t i = 0; i < ex.n_defined && i < 16; i++)
            if (memchr(ex.names[i], '\0', sizeof ex.names[i]) == NULL)
                __builtin_trap();
        if (ex.entry_is_func && ex.n_defined == 0)
            __builtin_trap();
    }
    return 0;
}
