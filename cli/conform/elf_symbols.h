/*
 * cli/conform/elf_symbols.h - what a plugin library exports, read from its
 * ELF64 dynamic symbol table without loading it (a small, validating
 * reader: every offset, size and index is checked against the file).
 */
#ifndef FMOE_CLI_CONFORM_ELF_SYMBOLS_H
#define FMOE_CLI_CONFORM_ELF_SYMBOLS_H

#include <stddef.h>

typedef struct cf_elf_exports {
    size_t n_defined;     /* defined GLOBAL/WEAK symbols of default/protected visibility */
    char names[16][128];  /* the first 16 of them */
    int entry_is_func;    /* fmoe_plugin_entry found and of type FUNC */
    size_t n_needed;      /* DT_NEEDED entries */
    char needed[32][128]; /* the first 32 of them */
} cf_elf_exports;

/* 0 on success; -1 with a reason in `why` for an unreadable or malformed
 * file (or one that is not a little-endian ELF64 shared object). */
int cf_elf_read_exports(const char *path, cf_elf_exports *out, char *why, size_t cap);

/* The same on the file's n bytes at f (tests/fuzz/fuzz_elf.c). */
int cf_elf_parse_exports(const unsigned char *f, size_t n, cf_elf_exports *out, char *why, size_t cap);

#endif
