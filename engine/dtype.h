/* Element types and exact conversions between them (the enum and the one-element conversions,
 * which kernels inline, are in engine/half.h).
 * Half values are stored as 16-bit words and rounded exactly as a GPU stores them: round to
 * nearest even, overflow to inf, subnormals kept, NaN stays NaN (quiet). FP64 exists for the
 * reference backend's finite-difference gradient checks. */
#ifndef MP_DTYPE_H
#define MP_DTYPE_H

#include <stddef.h>
#include <stdint.h>

#include "engine/half.h"


/* Bytes per element of `dt`. */
size_t mp_dtype_size(mp_dtype dt);

/* The largest finite value of `dt` (65504 for fp16). */
double mp_dtype_max(mp_dtype dt);

/* The smallest magnitude that rounds to infinity in `dt` (65520 for fp16: the largest value
 * plus half its last place, where round-to-nearest-even goes up); inf for fp64. A value below
 * it in magnitude converts to a finite one (mp_convert). */
double mp_dtype_overflow(mp_dtype dt);

/* The config name of `dt`: "fp32", "fp16", "bf16", "fp64". Static storage. */
const char *mp_dtype_name(mp_dtype dt);

/* Parses a config name into *dt. Returns 0 on success, -1 for an unknown name. */
int mp_dtype_parse(const char *name, mp_dtype *dt);

/* Converts n elements from src (of type st) to dst (of type dt), rounding once.
 * src and dst must not overlap unless they are the same buffer with the same dtype. */
void mp_convert(void *dst, mp_dtype dt, const void *src, mp_dtype st, size_t n);

/* io[i] = in[i] + io[i] for n elements of the half type dt (MP_F16 or MP_BF16), added in FP32
 * and rounded once, as tensor cores accumulate and store: gradient sums over ranks. Bit-exact
 * with the element-wise functions of engine/half.h except that a NaN result may carry another NaN payload
 * (IEEE 754 leaves payload propagation open; what matters downstream is that it is a NaN). */
void mp_half_add(uint16_t *io, const uint16_t *in, size_t n, mp_dtype dt);

/* Reads element i of buf (of type dt) as a double; writes v rounded to dt into element i
 * (engine/cast_rule.h's mp_elem_load_f64 / mp_elem_store_f64, which the GPU kernels share). */
double mp_load(const void *buf, mp_dtype dt, size_t i);
void mp_store(void *buf, mp_dtype dt, size_t i, double v);

#endif
