/* Token embedding on the CPU: forward copies table rows (rounded to y's dtype), backward sums
 * the gradient rows of each id. ids hold integers in [0, V) in any dtype; every id is checked
 * before anything is written, and an id that is not such an integer fails the op
 * (MP_EINTERNAL, naming the row). Backward gives each id that occurs a slot, in order of first
 * occurrence, with an accumulator row (FP32; FP64 when dy or dtable is FP64) that starts at
 * dtable's old row (accumulate) or 0 and adds dy's rows in increasing r, then rounds it once
 * into dtable; rows of ids that do not occur are zeroed (or left alone when accumulating).
 * Deterministic; the buffers (V slot numbers, a row per distinct id) are the backend's
 * grow-only workspace (mp_cpu_workspace), sized for the most distinct ids a call of its shape
 * can have (min(R, V)), so that it grows with the shapes, not with the batch's ids (a growth
 * makes a captured graph stale, as a GPU's workspace move does). */
#include <math.h>
#include <string.h>

#include "engine/alloc.h"
#include "engine/backend_cpu/cpu.h"

/* The row width D of a table (V, D...): the product of its dimensions after the first. */
static int64_t width(const mp_tensor *t)
{
    int64_t d = 1;
    for (int i = 1; i < t->ndim; i++)
        d *= t->shape[i];
    return d;
}

/* The id of row r as an index, or -1 when ids[r] is not an integer in [0, V). */
static int64_t id_at(const mp_tensor *ids, int64_t r, int64_t V)
{
    double v = mp_load(ids->data, ids->dtype, (size_t)r);
    if (!(v >= 0 && v < (double)V) || v != floor(v))
        return -1;
    return (int64_t)v;
}

static mp_status bad_id(const char *op, const mp_tensor *ids, int64_t r, int64_t V)
{
    return mp_fail(MP_EINTERNAL, "cpu %s: id %g of row %lld is not an integer in [0, %lld)", op,
                   mp_load(ids->data, ids->dtype, (size_t)r), (long long)r, (long long)V);
}

mp_status mp_cpu_embedding_forward(const mp_tensor *ids, const mp_tensor *table, mp_tensor *y)
{
    int64_t R = mp_tensor_numel(ids);
    MP_CPU_REQUIRE(table->ndim >= 1, "embedding_forward");
    int64_t V = table->shape[0], D = width(table);
    MP_CPU_REQUIRE(mp_tensor_numel(y) == R * D, "embedding_forward");
    for (int64_t r = 0; r < R; r++)
        if (id_at(ids, r, V) < 0)
            return bad_id("embedding_forward", ids, r, V);
    for (int64_t r = 0; r < R; r++)
        mp_convert(mp_cpu_at(y, r * D), y->dtype, mp_cpu_at(table, id_at(ids, r, V) * D),
                   table->dtype, (size_t)D);
    return MP_OK;
}

/* Backward for accumulator ACC of dtype ADT, given slot[v] (1-based, 0: v does not occur) for
 * the `used` distinct ids. */
#define MP_EMB_BWD(ACC, SFX, ADT)                                                            \
    static void emb_bwd_##SFX(const mp_tensor *ids, const mp_tensor *dy, bool accumulate,   \
                              mp_tensor *dtable, const int64_t *slot, int64_t used,         \
                              int64_t V, int64_t D)                                         \
    {                                                                                       \
        int64_t R = mp_tensor_numel(ids), most = R < V ? R : V; /* distinct ids at most */  \
        ACC *acc = mp_cpu_workspace(MP_CPU_WS_EMBED_ACC,                                     \
                                    ((size_t)most * (size_t)D + (size_t)D) * sizeof(ACC));  \
        memset(acc, 0, (size_t)used * (size_t)D * sizeof(ACC));                             \
        ACC *row = acc + used * D;                                                          \
        for (int64_t v = 0; accumulate && v < V; v++)                                       \
            if (slot[v])                                                                    \
                mp_convert(acc + (slot[v] - 1) * D, ADT, mp_cpu_at(dtable, v * D), dtable->dtype,  \
                           (size_t)D);                                                      \
        for (int64_t r = 0; r < R; r++) {                                                   \
            ACC *a = acc + (slot[id_at(ids, r, V)] - 1) * D;                                \
            const ACC *g = row;                                                             \
            if (dy->dtype == ADT)                                                           \
                g = mp_cpu_at(dy, r * D);                                                          \
            else                                                                            \
                mp_convert(row, ADT, mp_cpu_at(dy, r * D), dy->dtype, (size_t)D);                  \
            for (int64_t j = 0; j < D; j++)                                                 \
                a[j] += g[j];                                                               \
        }                                                                                   \
        for (int64_t v = 0; v < V; v++) {                                                   \
            if (slot[v])                                                                    \
                mp_convert(mp_cpu_at(dtable, v * D), dtable->dtype, acc + (slot[v] - 1) * D, ADT,  \
                           (size_t)D);                                                      \
            else if (!accumulate)                                                           \
                memset(mp_cpu_at(dtable, v * D), 0, (size_t)D * mp_dtype_size(dtable->dtype));    \
        }                                                                                   \
    }
MP_EMB_BWD(float, f32, MP_F32)
MP_EMB_BWD(double, f64, MP_F64)

mp_status mp_cpu_embedding_backward(const mp_tensor *ids, const mp_tensor *dy, bool accumulate,
                                    mp_tensor *dtable)
{
    int64_t R = mp_tensor_numel(ids);
    MP_CPU_REQUIRE(dtable->ndim >= 1, "embedding_backward");
    int64_t V = dtable->shape[0], D = width(dtable);
    MP_CPU_REQUIRE(mp_tensor_numel(dy) == R * D, "embedding_backward");
    int64_t *slot = mp_cpu_workspace(MP_CPU_WS_EMBED_IDS, (size_t)V * sizeof(int64_t) + 1);
    int64_t used = 0;
    memset(slot, 0, (size_t)V * sizeof(int64_t));
    for (int64_t r = 0; r < R; r++) {
        int64_t v = id_at(ids, r, V);
        if (v < 0)
            return bad_id("embedding_backward", ids, r, V);
        if (!slot[v])
            slot[v] = ++used;
    }
    if (dy->dtype == MP_F64 || dtable->dtype == MP_F64)
        emb_bwd_f64(ids, dy, accumulate, dtable, slot, used, V, D);
    else
        emb_bwd_f32(ids, dy, accumulate, dtable, slot, used, V, D);
    return MP_OK;
}
