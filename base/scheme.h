/*
 * base/scheme.h - internal helpers around fmoe_scheme (the public
 * fmoe_scheme_init_unquantized / _key / _parse are in fusedmoe.h; the key
 * grammar and the rules below are in docs/SCHEMES.md).
 */
#ifndef FMOE_BASE_SCHEME_H
#define FMOE_BASE_SCHEME_H

#include <stddef.h>
#include <stdint.h>

#include "fusedmoe/fusedmoe.h"

/* Bytes of fmoe_scheme that the core reads (through a_symmetric). */
#define FMOE_SCHEME_SIZE_V1 (offsetof(fmoe_scheme, a_symmetric) + sizeof(uint32_t))

/* Largest group size, block side or tgroup size a key may carry. */
#define FMOE_SCHEME_MAX_GROUP (1u << 20)

/* OK if `scheme` is a canonical, consistent scheme - exactly the structs
 * fmoe_scheme_parse produces - else INVALID_ARGUMENT with "scheme: <why>".
 * Defaults are explicit in the struct: a quantized side has symmetric 1
 * unless asymmetric, quantized weights have a scale dtype (F32 by default),
 * and every field a side does not use is 0. Does not clear the error text. */
fmoe_status fmoe_scheme_validate(const fmoe_scheme *scheme);

/* 1 if the scheme quantizes its weights (w_strategy != NONE). */
int fmoe_scheme_is_quantized(const fmoe_scheme *scheme);

#endif
