/* See temp_guard.h. Each slot's state goes free -> filling (one thread owns it and writes the
 * path) -> live (a handler may unlink it) -> free, through atomics that are lock-free and so
 * safe in a signal handler. */
#include "io/temp_guard.h"

#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

enum { MP_GUARD_SLOTS = 8, MP_GUARD_PATH = 1100 };
enum { SLOT_FREE, SLOT_FILLING, SLOT_LIVE };

static _Atomic int slot_state[MP_GUARD_SLOTS];
static char slot_path[MP_GUARD_SLOTS][MP_GUARD_PATH];

int mp_temp_guard_add(const char *path)
{
    size_t len = strlen(path);
    if (len >= MP_GUARD_PATH)
        return -1;
    for (int k = 0; k < MP_GUARD_SLOTS; k++) {
        int expect = SLOT_FREE;
        if (!atomic_compare_exchange_strong(&slot_state[k], &expect, SLOT_FILLING))
            continue;
        memcpy(slot_path[k], path, len + 1);
        atomic_store(&slot_state[k], SLOT_LIVE);
        return k;
    }
    return -1;
}

void mp_temp_guard_drop(int slot)
{
    if (slot >= 0 && slot < MP_GUARD_SLOTS)
        atomic_store(&slot_state[slot], SLOT_FREE);
}

void mp_temp_guard_unlink_all(void)
{
    for (int k = 0; k < MP_GUARD_SLOTS; k++)
        if (atomic_load(&slot_state[k]) == SLOT_LIVE)
            unlink(slot_path[k]);
}
