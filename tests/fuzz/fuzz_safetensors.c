/*
 * tests/fuzz/fuzz_safetensors.c - libFuzzer harness for the safetensors
 * reader (core/safetensors.c): any byte string must give a file or a clean
 * error, never a crash, leak or undefined behaviour. When it parses, every
 * tensor is viewed and its bytes read, so a bad offset check shows up as an
 * out-of-bounds read under ASan. Replayed over corpus/safetensors by meson.
 */
#include <stddef.h>
#include <stdint.h>

#include "core/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fmoe_st_file *f = NULL;
    if (fmoe_st_parse(data, size, "fuzz", &f) != FMOE_STATUS_OK)
        return 0;
    volatile unsigned sum = 0;
    for (size_t i = 0; i < f->n_tensors; i++) {
        const fmoe_st_tensor *t = &f->tensors[i];
        for (uint64_t b = 0; b < t->end - t->begin; b++)
            sum += t->data[b];
        fmoe_tensor view;
        (void)fmoe_st_view(f, t, &view);
    }
    fmoe_st_close(f);
    return 0;
}
