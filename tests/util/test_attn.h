/* Helpers of the attention tests (tests/unit/test_attention.c, test_attention_flash.c). */
#ifndef MP_TEST_ATTN_H
#define MP_TEST_ATTN_H

#include <stdlib.h>
#include <string.h>

#include "engine/ops.h"
#include "engine/rng.h"
#include "tests/util/test_util.h"

/* A call's description: heads, mask and dropout p, with a fixed dropout seed and offset. */
static inline mp_attn_desc mp_test_attn_desc(int heads, bool causal, double p)
{
    mp_attn_desc d;
    memset(&d, 0, sizeof d);
    d.heads = heads;
    d.causal = causal;
    d.dropout_p = p;
    d.seed = 1234;
    d.offset = 77;
    return d;
}

/* t's elements drawn from U(lo, hi) by r, stored in t's dtype. */
static inline void mp_test_fill(mp_tensor *t, mp_rng *r, double lo, double hi)
{
    for (int64_t i = 0; i < mp_tensor_numel(t); i++)
        mp_store(t->data, t->dtype, (size_t)i, lo + (hi - lo) * mp_rng_uniform(r));
}

/* t's elements as doubles, malloc'd (the caller frees). */
static inline double *mp_test_values(const mp_tensor *t)
{
    int64_t n = mp_tensor_numel(t);
    double *v = malloc((size_t)(n + 1) * sizeof *v);
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++)
        v[i] = mp_load(t->data, t->dtype, (size_t)i);
    return v;
}

#endif
