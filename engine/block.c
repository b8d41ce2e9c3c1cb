/* Composite layers' storage (engine/layer.h, struct mp_block): children as sequences. */
#include "engine/seq.h"

mp_seq mp_block_child(mp_block *b, int i)
{
    mp_seq s = {b->layers[i], b->n[i], b->acts[i], b->xcast[i], false};
    return s;
}

mp_layer *mp_block_append(mp_block *b, int child)
{
    if (b->n[child] >= MP_BLOCK_MAX)
        return NULL;
    if (child >= b->nchild)
        b->nchild = child + 1;
    return &b->layers[child][b->n[child]++];
}
