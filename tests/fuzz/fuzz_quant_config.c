/*
 * tests/fuzz/fuzz_quant_config.c - libFuzzer harness for quantization_config
 * (core/quant: the method readers, their regexes and globs, the selection
 * tree). Any input must give a config or a clean error; when it parses,
 * the scheme of a small per-expert layer and of a fused one is resolved,
 * which runs every module-name pattern the input holds. Replayed over
 * corpus/quant_config by meson.
 */
#include <stddef.h>
#include <stdint.h>

#include "fusedmoe/fusedmoe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fmoe_quant_config *qc = NULL;
    if (fmoe_quant_config_parse((const char *)data, size, "fuzz.json", &qc) != FMOE_STATUS_OK)
        return 0;
    fmoe_expert_modules mods;
    fmoe_expert_modules_init(&mods);
    mods.prefix = "model.layers.1.mlp.experts";
    mods.num_experts = 8;
    fmoe_scheme s;
    (void)fmoe_quant_config_scheme(qc, &mods, &s);
    mods.fused = 1;
    (void)fmoe_quant_config_scheme(qc, &mods, &s);
    fmoe_quant_config_destroy(qc);
    return 0;
}
