/*
 * base/limits.h - the ceiling of every size or count that a file from
 * outside (a checkpoint, config.json, an index, a TOML file) can state.
 *
 * Each is checked before any work per item, so a file that states a
 * billion experts or tensors is refused at once, with a message naming the
 * file and key, instead of being worked through. Each is far above every
 * published model (the comments say by how much), and docs/ROBUSTNESS.md
 * lists them all with what happens at each. A limit means the limit: a
 * value equal to it is accepted, one more is refused.
 */
#ifndef FMOE_BASE_LIMITS_H
#define FMOE_BASE_LIMITS_H

/* ---- files ------------------------------------------------------------- */

/* config.json (model and quantization_config): kilobytes in practice. */
#define FMOE_LIMIT_CONFIG_BYTES (64u << 20)
/* model.safetensors.index.json: a few MB for the largest models. */
#define FMOE_LIMIT_INDEX_BYTES (256u << 20)
/* fusedmoe.toml and plugin manifests. */
#define FMOE_LIMIT_TOML_BYTES (16u << 20)

/* ---- safetensors and checkpoints ---------------------------------------- */

/* The JSON header of one .safetensors file (upstream's own limit). */
#define FMOE_LIMIT_ST_HEADER_BYTES 100000000u
/* Tensors in one .safetensors file (DeepSeek-V3's largest shard: ~1600). */
#define FMOE_LIMIT_ST_TENSORS (1u << 20)
/* Dimensions of one tensor. */
#define FMOE_LIMIT_ST_RANK 8
/* Bytes of one tensor name, in a shard header or an index (real names:
 * under 100). */
#define FMOE_LIMIT_NAME_BYTES 1024u
/* Entries of an index's weight_map, and tensors of a whole checkpoint
 * (Kimi-K2: ~200 k). */
#define FMOE_LIMIT_CHECKPOINT_TENSORS (1u << 22)
/* Shards of one checkpoint (DeepSeek-V3: 163). */
#define FMOE_LIMIT_SHARDS 16384u

/* ---- model config -------------------------------------------------------- */

/* Decoder layers (the deepest MoE models: under 100). */
#define FMOE_LIMIT_LAYERS 4096u
/* Routed experts per layer (Qwen3-Next: 512). */
#define FMOE_LIMIT_EXPERTS 65536u
/* Experts per token (real models: 1 to 16). */
#define FMOE_LIMIT_TOP_K 1024u
/* hidden_size and the expert intermediate size (real models: up to ~20 k). */
#define FMOE_LIMIT_HIDDEN       1048576u
#define FMOE_LIMIT_INTERMEDIATE 1048576u

/* ---- module-name patterns of a quantization_config ----------------------- */

/* Bytes of one pattern (a "re:" regex, a GPTQ dynamic key, a glob). */
#define FMOE_LIMIT_PATTERN_BYTES 1024u
/* Instructions one compiled pattern may take: a{1000} is 1000 of them. */
#define FMOE_LIMIT_PATTERN_PROGRAM 4096u
/* Nesting of groups in one regex. */
#define FMOE_LIMIT_PATTERN_DEPTH 64u
/* Instructions of all the patterns of one config together. */
#define FMOE_LIMIT_PATTERN_TOTAL 65536u
/* Matcher steps one layer's scheme may cost: every expert module name times
 * its length times the patterns' instructions, estimated before any name is
 * matched (about a second at the limit). */
#define FMOE_LIMIT_MATCH_WORK (1ull << 30)

#endif
