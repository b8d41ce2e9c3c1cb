/* The oneDNN primitives the CPU backend keeps (convolutions: conv_dnnl.c; bf16 GEMMs:
 * gemm_dnnl.c): one CPU engine for the process, a stream per thread, and a per-thread table of
 * primitives (256 entries, the least recently used replaced) keyed by bytes that name the
 * operation, its shapes, dtype and thread count (oneDNN fixes a primitive's thread count when it
 * is made, and with it the summation order: results repeat bit for bit). A primitive's
 * scratchpad comes from the CPU workspace (counted, grow-only), so steady-state steps allocate
 * nothing. Only with oneDNN at build time (MPDIST_HAVE_DNNL). */
#ifndef MP_DNNL_CACHE_H
#define MP_DNNL_CACHE_H

#ifdef MPDIST_HAVE_DNNL
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <oneapi/dnnl/dnnl.h>

/* The most bytes of a key (a struct whose first int names the operation, every byte set). */
enum { MP_DNNL_KEY_BYTES = 136 };

typedef struct mp_dnnl_entry {
    unsigned char key[MP_DNNL_KEY_BYTES];
    dnnl_primitive_t prim;      /* NULL: oneDNN has no fast implementation (the caller's runs) */
    dnnl_memory_t mem[3];       /* the operation's three tensors, their data bound per call */
    dnnl_primitive_t reorder;   /* a convolution's filter between KRSC and the primitive's */
    dnnl_memory_t wmem;         /* the filter in the primitive's layout (with reorder) */
    size_t wbytes;
    dnnl_memory_t scratch;
    size_t scratch_bytes;
    int64_t used;               /* the call count when last used (least recently used goes) */
} mp_dnnl_entry;

/* The process's CPU engine, made on first call; NULL when oneDNN cannot make one. */
dnnl_engine_t mp_dnnl_engine(void);

/* The calling thread's stream on mp_dnnl_engine(), made on first call; NULL on failure. */
dnnl_stream_t mp_dnnl_stream(void);

/* The calling thread's entry for the `bytes` (<= MP_DNNL_KEY_BYTES) of key, made by make(key, e)
 * on first use (e zeroed but for its key; make leaves e->prim NULL when it cannot or should
 * not make a primitive, and the caller then computes the operation itself). */
mp_dnnl_entry *mp_dnnl_entry_for(const void *key, size_t bytes,
                                 void (*make)(const void *key, mp_dnnl_entry *e));

/* Completes e from primitive descriptor pd (which it destroys) and the descriptors md[3] of
 * e->mem: the memories, the scratchpad and the primitive; false, with e emptied (its
 * primitive NULL), when any fails or pd is one of oneDNN's reference kernels ("ref:", far
 * slower than the caller's own path). */
bool mp_dnnl_entry_finish(mp_dnnl_entry *e, dnnl_primitive_desc_t pd,
                          const dnnl_memory_desc_t md[3]);

/* Frees what e holds and empties it (its key kept). */
void mp_dnnl_entry_free(mp_dnnl_entry *e);

/* Points e->mem[i] at data[i] (i < 3) and args[i] at {roles[i], e->mem[i]}; false when oneDNN
 * refuses. */
bool mp_dnnl_bind(mp_dnnl_entry *e, void *const data[3], const int roles[3],
                  dnnl_exec_arg_t args[3]);

/* Queues e's primitive with args (nargs <= 3) and e's scratchpad at `scratch` (e->scratch_bytes
 * of workspace, when it has one) on the thread's stream (dnnl_stream_wait waits for it); false
 * when oneDNN refuses. */
bool mp_dnnl_execute(mp_dnnl_entry *e, const dnnl_exec_arg_t *args, int nargs, void *scratch);

#endif
#endif
