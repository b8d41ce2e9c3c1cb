/* --resume auto (checkpoint.resume = "auto"): the newest checkpoint of checkpoint.dir that
 * loads, with what refused the newer ones. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/ckpt_dir.h"
#include "src/checkpoint.h"

/* A refused checkpoint's message without its file name: what makes it fail. */
static const char *reason(const char *msg)
{
    const char *r = strstr(msg, ".h5: ");
    return r ? r + 5 : msg;
}

/* The warnings of the first k checkpoints that --resume auto passed over. */
static void warn_refused(char (*why)[512], int k)
{
    for (int i = 0; i < k; i++)
        fprintf(stderr, "mpdist: warning: %s; trying an older checkpoint\n", why[i]);
}

mp_status mp_checkpoint_load_auto(mp_train_state *t, char *path, size_t size)
{
    const char *dir = t->cfg->checkpoint.dir;
    path[0] = '\0';
    if (!dir[0])
        return mp_fail(MP_EUSAGE, "%s: resume \"auto\" needs checkpoint.dir", t->cfg->path);
    int64_t steps[64];
    int n = mp_ckpt_list(dir, steps, 64);
    if (n < 0)
        return MP_ECKPT;
    /* each refused file's message, said as a warning once an older file loads or the reasons
     * differ; when every file is refused for the newest's reason (a config that is not the
     * run's: every file of a run has it), that reason once */
    char(*why)[512] = n > 0 ? calloc((size_t)n, sizeof *why) : NULL;
    if (n > 0 && !why)
        return mp_fail(MP_EINTERNAL, "%s: out of memory", dir);
    int same = 0;
    mp_status st = MP_OK;
    for (int i = 0; i < n && st == MP_OK; i++) {
        mp_ckpt_path(dir, steps[i], path, size);
        st = mp_checkpoint_load(t, path);
        if (st == MP_OK) {
            warn_refused(why, i);
            break;
        }
        snprintf(why[i], sizeof why[i], "%s", mp_error_message());
        same += strcmp(reason(why[i]), reason(why[0])) == 0;
        if (st == MP_ECKPT)
            st = i + 1 < n ? MP_OK : MP_ECKPT;
        else
            warn_refused(why, i);
    }
    if (st == MP_ECKPT) {
        path[0] = '\0';
        if (same == n)
            st = mp_fail(MP_ECKPT, "%s: none of its %d checkpoint file%s loads%s: %s", dir, n,
                         n > 1 ? "s" : "", n > 1 ? ", each for the newest's reason" : "", why[0]);
        else {
            warn_refused(why, n);
            st = mp_fail(MP_ECKPT, "%s: none of its %d checkpoint files loads (newest: %s)", dir,
                         n, why[0]);
        }
    }
    free(why);
    return st;
}
