/* Float inputs for the tests of half conversions (mp_convert's bulk paths, the kernels' vector
 * loads and stores): the cases at rounding and range edges, and random bit patterns. */
#ifndef MP_TEST_FLOATS_H
#define MP_TEST_FLOATS_H

#include <stddef.h>
#include <stdint.h>

/* Writes the floats worth checking around rounding and range edges to out: every fp16 value, its
 * float neighbours, the midpoints to the next half up and theirs, and fixed bit patterns (NaN
 * payloads, subnormals, overflow edges, bf16 midpoints). Returns how many (at most
 * 65536 * 6 + 64). */
size_t mp_test_boundary_floats(float *out);

/* n random float bit patterns from `seed`: a quarter anywhere, the rest inside or near the fp16
 * range (subnormals included), with random signs and NaN payloads among them. */
void mp_test_random_floats(float *out, size_t n, uint64_t seed);

#endif
