/* Host copies of backend tensors (see host_swap.h). */
#include "engine/host_swap.h"

#include <string.h>

/* The index of an earlier swapped tensor with the same backend storage, or -1. */
static int shared_with(const mp_host_swap *s, const void *dev)
{
    for (int i = 0; i < s->n; i++)
        if (s->dev[i] == dev)
            return i;
    return -1;
}

/* Whether tensor t is swapped already (listed twice). */
static bool listed(const mp_host_swap *s, const mp_tensor *t)
{
    for (int i = 0; i < s->n; i++)
        if (s->t[i] == t)
            return true;
    return false;
}

mp_status mp_host_begin(mp_host_swap *s, const mp_ops *ops, mp_tensor *const *ts, int n,
                        bool download)
{
    s->ops = ops;
    s->n = 0;
    if (ops->host_memory)
        return MP_OK;
    if (n > MP_HOST_SWAP_MAX)
        return mp_fail(MP_EINTERNAL, "host copies of %d tensors: at most %d", n,
                       MP_HOST_SWAP_MAX);
    mp_status st = MP_OK;
    for (int i = 0; i < n && st == MP_OK; i++) {
        mp_tensor *t = ts[i];
        if (!t || !t->data || listed(s, t))
            continue;
        int j = shared_with(s, t->data);
        if (j >= 0 && mp_tensor_bytes(s->t[j]) != mp_tensor_bytes(t)) {
            st = mp_fail(MP_EINTERNAL, "host copies: two tensors share storage but not size");
            break;
        }
        s->t[s->n] = t;
        s->dev[s->n] = t->data;
        s->n++;
        if (j >= 0) {
            t->data = s->t[j]->data;
            continue;
        }
        size_t bytes = (size_t)mp_tensor_bytes(t);
        void *host = mp_alloc(bytes + 1, MP_MEM_WORKSPACE);
        if (download)
            st = ops->copy_out(host, s->dev[s->n - 1], bytes);
        t->data = host;
    }
    if (st != MP_OK)
        mp_host_end(s, false);
    return st;
}

mp_status mp_host_end(mp_host_swap *s, bool upload)
{
    mp_status st = MP_OK;
    for (int i = 0; i < s->n; i++) {
        mp_tensor *t = s->t[i];
        bool owner = shared_with(s, s->dev[i]) == i;
        if (owner && upload && st == MP_OK)
            st = s->ops->copy_in(s->dev[i], t->data, (size_t)mp_tensor_bytes(t));
        if (owner && upload && st == MP_OK)
            st = s->ops->sync(); /* the host copy is freed next */
        if (owner)
            mp_free(t->data);
        t->data = s->dev[i];
    }
    s->n = 0;
    return st;
}
