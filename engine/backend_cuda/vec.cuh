/* Tensors read and written V elements at a time, the dtype a compile-time constant, for kernels
 * that run at memory bandwidth (docs/performance.md): with V = MP_VEC (8) a vector is one 16-byte
 * load of a half type or two of FP32; with V = 1 it is one element (the path for tensors whose
 * rows are not a multiple of 8 or whose data is not aligned to a vector). The element rules
 * stay engine/cast_rule.h's and engine/elem_rule.h's: a kernel loads a vector into registers and
 * applies the scalar rule to element k of that register copy (mp_elem_load_f32(v.e, DT, k) with
 * DT constant folds to a register move and the rule's conversion), so a vector kernel gives the
 * bits of the element-by-element one by construction. Every loop over a vector's elements is
 * unrolled, so the vector lives in registers (ptxas -v: no stack frame) and the rules' accesses
 * through element pointers (relu_backward's bit copy reads FP32 as uint32_t) are register moves,
 * not memory that type-based alias analysis could reorder. Kernels only: the header builds
 * without the CUDA runtime's headers (tests/emu). */
#ifndef MP_BACKEND_CUDA_VEC_CUH
#define MP_BACKEND_CUDA_VEC_CUH

#include <stdint.h>

#include <initializer_list>

#include "engine/cast_rule.h"

enum { MP_VEC = 8 };

/* Bytes of one element of a dtype the CUDA backend stores. */
__host__ __device__ constexpr int mp_vec_elem_bytes(mp_dtype dt)
{
    return dt == MP_F32 ? 4 : 2;
}

/* The storage type of one element of DT: the type engine/cast_rule.h reads it as. */
template <mp_dtype DT> struct mp_vec_elem { typedef unsigned short type; };
template <> struct mp_vec_elem<MP_F32> { typedef float type; };

/* The alignment of V elements of DT: their size, at most 16 bytes (the widest load). */
__host__ __device__ constexpr int mp_vec_align(mp_dtype dt, int v)
{
    return v * mp_vec_elem_bytes(dt) < 16 ? v * mp_vec_elem_bytes(dt) : 16;
}

/* V elements of dtype DT, as stored (the bits of a tensor's elements i .. i + V - 1), aligned
 * so that a copy of the whole is vector loads or stores (one 16-byte load of 8 half elements,
 * two of 8 FP32), as PyTorch's aligned_vector is. */
template <mp_dtype DT, int V> struct alignas(mp_vec_align(DT, V)) mp_vec {
    typename mp_vec_elem<DT>::type e[V];

    /* Elements i .. i + V - 1 of p (i a multiple of V; p aligned to alignof(mp_vec)). */
    __device__ void load(const void *p, int64_t i)
    {
        *this = *(const mp_vec *)((const char *)p + i * mp_vec_elem_bytes(DT));
    }

    /* Stores this vector into elements i .. i + V - 1 of p. */
    __device__ void store(void *p, int64_t i) const
    {
        *(mp_vec *)((char *)p + i * mp_vec_elem_bytes(DT)) = *this;
    }

    /* Element k as a float, by engine/cast_rule.h. */
    __device__ float f32(int k) const { return mp_elem_load_f32(e, DT, k); }

    /* Element k := v rounded to DT, by engine/cast_rule.h. */
    __device__ void set(int k, float v) { mp_elem_store_f32(e, DT, k, v); }
};

/* Whether every pointer given is aligned to `bytes` (NULL counts as aligned). */
static inline bool mp_vec_aligned(size_t bytes, std::initializer_list<const void *> ps)
{
    for (const void *p : ps)
        if ((uintptr_t)p % bytes != 0)
            return false;
    return true;
}

/* Runs `body` with DT the compile-time constant equal to dt (MP_F32, MP_F16 or MP_BF16; the
 * CUDA backend stores no other, MP_CUDA_DTYPES has checked). */
#define MP_VEC_BY_DTYPE(dt, DT, ...)                                                        \
    do {                                                                                    \
        switch (dt) {                                                                       \
        case MP_F16: {                                                                      \
            constexpr mp_dtype DT = MP_F16;                                                 \
            __VA_ARGS__;                                                                    \
        } break;                                                                            \
        case MP_BF16: {                                                                     \
            constexpr mp_dtype DT = MP_BF16;                                                \
            __VA_ARGS__;                                                                    \
        } break;                                                                            \
        default: {                                                                          \
            constexpr mp_dtype DT = MP_F32;                                                 \
            __VA_ARGS__;                                                                    \
        } break;                                                                            \
        }                                                                                   \
    } while (0)

#endif
