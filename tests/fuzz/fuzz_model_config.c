/*
 * tests/fuzz/fuzz_model_config.c - libFuzzer harness for the model config
 * reader (core/model: config.json -> family, layer configs, tensor names).
 * Any input must give a model or a clean error - never a crash, a leak,
 * undefined behaviour or work beyond the ceilings of base/limits.h. When
 * it parses, every layer is queried, so a bad count or name table shows up
 * under ASan. Replayed over corpus/model_config by meson.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fusedmoe/fusedmoe.h"
#include "fusedmoe/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fmoe_model *m = NULL;
    if (fmoe_model_config_parse((const char *)data, size, "fuzz.json", &m) != FMOE_STATUS_OK)
        return 0;
    volatile size_t sum = 0;
    for (uint32_t layer = 0; layer < fmoe_model_layer_count(m); layer++) {
        if (!fmoe_model_layer_is_moe(m, layer))
            continue;
        fmoe_layer_config cfg;
        fmoe_layer_config_init(&cfg);
        (void)fmoe_model_layer_config(m, layer, &cfg);
        fmoe_model_names n = {.struct_size = sizeof n};
        if (fmoe_model_layer_names(m, layer, &n) == FMOE_STATUS_OK)
            sum += strlen(n.router_weight) + strlen(n.experts);
        fmoe_expert_modules mods;
        fmoe_expert_modules_init(&mods);
        (void)fmoe_model_layer_expert_modules(m, layer, &mods);
        fmoe_model_shared shared = {.struct_size = sizeof shared};
        (void)fmoe_model_layer_shared(m, layer, &shared);
    }
    fmoe_model_destroy(m);
    return 0;
}
