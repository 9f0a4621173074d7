/*
 * cli/conform/elf_symbols.c - ELF64 dynamic symbol reader (see elf_symbols.h).
 *
 * It walks the section headers to .dynsym (SHT_DYNSYM) and the string table
 * its sh_link names, and .dynamic for DT_NEEDED. <elf.h> gives the layouts;
 * nothing is trusted: sizes, entry sizes, offsets and string indices are
 * checked against the file before use.
 */
#include "cli/conform/elf_symbols.h"

#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_FILE (1u << 30)

static int bad(char *why, size_t cap, const char *msg)
{
    snprintf(why, cap, "%s", msg);
    return -1;
}

/* [off, off+len) inside a file of n bytes. */
static int in_file(size_t n, uint64_t off, uint64_t len)
{
    return off <= n && len <= n - off;
}

/* The NUL-terminated string at `idx` of a string table, or NULL. */
static const char *string_at(const unsigned char *f, size_t n, const Elf64_Shdr *strtab, uint64_t idx)
{
    if (!in_file(n, strtab->sh_offset, strtab->sh_size) || idx >= strtab->sh_size)
        return NULL;
    const char *s = (const char *)f + strtab->sh_offset + idx;
    if (!memchr(s, '\0', strtab->sh_size - idx))
        return NULL;
    return s;
}

static unsigned char *slurp(const char *path, size_t *n, char *why, size_t cap)
{
    /* O_NONBLOCK and a type check first: a FIFO would block fopen for
     * good, a device never end (docs/ROBUSTNESS.md). */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        snprintf(why, cap, fd < 0 ? "cannot open %s" : "%s is not a regular file", path);
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    int flags = fcntl(fd, F_GETFL);
    FILE *fp = flags >= 0 && fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0 ? fdopen(fd, "rb") : NULL;
    if (!fp) {
        close(fd);
        snprintf(why, cap, "cannot open %s", path);
        return NULL;
    }
    unsigned char *buf = NULL;
    size_t len = 0, cap_buf = 0;
    for (;;) {
        if (len == cap_buf) {
            size_t nc = cap_buf ? cap_buf * 2 : 65536;
            unsigned char *nb = nc <= MAX_FILE ? realloc(buf, nc) : NULL;
            if (!nb) {
                free(buf);
                fclose(fp);
                snprintf(why, cap, "%s is too large or memory ran out", path);
                return NULL;
            }
            buf = nb;
            cap_buf = nc;
        }
        size_t got = fread(buf + len, 1, cap_buf - len, fp);
        len += got;
        if (got == 0)
            break;
    }
    fclose(fp);
    *n = len;
    return buf;
}

static int read_symbols(const unsigned char *f, size_t n, const Elf64_Shdr *sh, size_t shnum, cf_elf_exports *out,
                        char *why, size_t cap)
{
    const Elf64_Shdr *dynsym = NULL;
    for (size_t i = 0; i < shnum; i++)
        if (sh[i].sh_type == SHT_DYNSYM)
            dynsym = &sh[i];
    if (!dynsym)
        return bad(why, cap, "no .dynsym section (a stripped section table, or not a shared object)");
    if (dynsym->sh_entsize != sizeof(Elf64_Sym) || dynsym->sh_size % sizeof(Elf64_Sym) ||
        !in_file(n, dynsym->sh_offset, dynsym->sh_size) || dynsym->sh_link >= shnum)
        return bad(why, cap, ".dynsym has a bad size, entry size, offset or string table link");
    const Elf64_Shdr *strtab = &sh[dynsym->sh_link];
    if (strtab->sh_type != SHT_STRTAB)
        return bad(why, cap, ".dynsym links to a section that is not a string table");
    size_t count = dynsym->sh_size / sizeof(Elf64_Sym);
    for (size_t i = 1; i < count; i++) {
        Elf64_Sym sym;
        memcpy(&sym, f + dynsym->sh_offset + i * sizeof sym, sizeof sym);
        int bind = ELF64_ST_BIND(sym.st_info), vis = ELF64_ST_VISIBILITY(sym.st_other);
        if (sym.st_shndx == SHN_UNDEF || (bind != STB_GLOBAL && bind != STB_WEAK && bind != STB_GNU_UNIQUE) ||
            (vis != STV_DEFAULT && vis != STV_PROTECTED))
            continue;
        const char *name = string_at(f, n, strtab, sym.st_name);
        if (!name)
            return bad(why, cap, ".dynsym holds a symbol name outside its string table");
        /* A version definition (ABS, OBJECT of size 0 named like the version node) is not an export. */
        if (sym.st_shndx == SHN_ABS && sym.st_value == 0 && ELF64_ST_TYPE(sym.st_info) == STT_OBJECT &&
            sym.st_size == 0)
            continue;
        if (out->n_defined < 16)
            snprintf(out->names[out->n_defined], sizeof out->names[0], "%s", name);
        out->n_defined++;
        if (strcmp(name, "fmoe_plugin_entry") == 0 && ELF64_ST_TYPE(sym.st_info) == STT_FUNC)
            out->entry_is_func = 1;
    }
    return 0;
}

static int read_needed(const unsigned char *f, size_t n, const Elf64_Shdr *sh, size_t shnum, cf_elf_exports *out,
                       char *why, size_t cap)
{
    for (size_t i = 0; i < shnum; i++) {
        if (sh[i].sh_type != SHT_DYNAMIC)
            continue;
        if (sh[i].sh_entsize != sizeof(Elf64_Dyn) || !in_file(n, sh[i].sh_offset, sh[i].sh_size) ||
            sh[i].sh_link >= shnum || sh[i].sh_size % sizeof(Elf64_Dyn))
            return bad(why, cap, ".dynamic has a bad size, entry size, offset or link");
        const Elf64_Shdr *strtab = &sh[sh[i].sh_link];
        for (size_t j = 0; j < sh[i].sh_size / sizeof(Elf64_Dyn); j++) {
            Elf64_Dyn d;
            memcpy(&d, f + sh[i].sh_offset + j * sizeof d, sizeof d);
            if (d.d_tag == DT_NULL)
                break;
            if (d.d_tag != DT_NEEDED)
                continue;
            const char *name = string_at(f, n, strtab, d.d_un.d_val);
            if (!name)
                return bad(why, cap, "a DT_NEEDED name lies outside the dynamic string table");
            if (out->n_needed < 32)
                snprintf(out->needed[out->n_needed], sizeof out->needed[0], "%s", name);
            out->n_needed++;
        }
    }
    return 0;
}

int cf_elf_parse_exports(const unsigned char *f, size_t n, cf_elf_exports *out, char *why, size_t cap)
{
    memset(out, 0, sizeof *out);
    Elf64_Ehdr eh;
    if (n < sizeof eh)
        return bad(why, cap, "shorter than an ELF64 header");
    memcpy(&eh, f, sizeof eh);
    if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
        return bad(why, cap, "not an ELF file");
    if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB ||
        eh.e_ident[EI_VERSION] != EV_CURRENT)
        return bad(why, cap, "not a little-endian ELF64 file of version 1");
    if (eh.e_type != ET_DYN)
        return bad(why, cap, "not a shared object (e_type is not ET_DYN)");
    if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 ||
        !in_file(n, eh.e_shoff, (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr)))
        return bad(why, cap, "bad section header table (offset, count or entry size)");
    Elf64_Shdr *sh = malloc((size_t)eh.e_shnum * sizeof *sh);
    if (!sh)
        return bad(why, cap, "out of memory");
    memcpy(sh, f + eh.e_shoff, (size_t)eh.e_shnum * sizeof *sh);
    int rc = read_symbols(f, n, sh, eh.e_shnum, out, why, cap);
    if (rc == 0)
        rc = read_needed(f, n, sh, eh.e_shnum, out, why, cap);
    free(sh);
    return rc;
}

int cf_elf_read_exports(const char *path, cf_elf_exports *out, char *why, size_t cap)
{
    memset(out, 0, sizeof *out);
    size_t n = 0;
    unsigned char *f = slurp(path, &n, why, cap);
    if (!f)
        return -1;
    int rc = cf_elf_parse_exports(f, n, out, why, cap);
    free(f);
    return rc;
}
