/* A dataset's digest for checkpoints (io/dataset.h: mp_dataset_digest): FNV-1a, 64 bits. */
#include "io/dataset.h"

#include <stddef.h>
#include <string.h>

#include "io/folder.h"

/* FNV-1a over n bytes, continuing from h. */
static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

uint64_t mp_dataset_digest(const mp_dataset *d)
{
    const uint64_t basis = 0xcbf29ce484222325ull;
    uint64_t h;
    if (d->labels) {
        h = fnv1a(basis, d->labels,
                  (size_t)(d->count * mp_dataset_label_len(d)) * sizeof(int32_t));
        for (int64_t i = 0; d->folder && i < d->count; i++) /* labels in class order: names */
            h = fnv1a(h, mp_folder_name(d, i), strlen(mp_folder_name(d, i)) + 1);
    } else if (d->text)
        h = fnv1a(basis, d->text, (size_t)d->text_len);
    else
        return 0;
    return h ? h : 1; /* 0 stays "no digest" */
}
