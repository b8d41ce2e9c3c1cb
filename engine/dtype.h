/* Element types and exact conversions between them.
 * Half values are stored as 16-bit words and rounded exactly as a GPU stores them: round to
 * nearest even, overflow to inf, subnormals kept, NaN stays NaN (quiet). FP64 exists for the
 * reference backend's finite-difference gradient checks. */
#ifndef MP_DTYPE_H
#define MP_DTYPE_H

#include <stddef.h>
#include <stdint.h>

typedef enum mp_dtype { MP_F32 = 0, MP_F16 = 1, MP_BF16 = 2, MP_F64 = 3 } mp_dtype;

/* Bytes per element of `dt`. */
size_t mp_dtype_size(mp_dtype dt);

/* The config name of `dt`: "fp32", "fp16", "bf16", "fp64". Static storage. */
const char *mp_dtype_name(mp_dtype dt);

/* Parses a config name into *dt. Returns 0 on success, -1 for an unknown name. */
int mp_dtype_parse(const char *name, mp_dtype *dt);

/* IEEE binary16 <-> binary32; the float->half direction rounds to nearest even. */
uint16_t mp_f32_to_f16(float f);
float mp_f16_to_f32(uint16_t h);

/* bfloat16 <-> binary32; the float->bf16 direction rounds to nearest even. */
uint16_t mp_f32_to_bf16(float f);
float mp_bf16_to_f32(uint16_t h);

/* Converts n elements from src (of type st) to dst (of type dt), rounding once.
 * src and dst must not overlap unless they are the same buffer with the same dtype. */
void mp_convert(void *dst, mp_dtype dt, const void *src, mp_dtype st, size_t n);

/* Reads element i of buf (of type dt) as a double; writes v rounded to dt into element i. */
double mp_load(const void *buf, mp_dtype dt, size_t i);
void mp_store(void *buf, mp_dtype dt, size_t i, double v);

#endif
