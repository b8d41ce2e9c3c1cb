/* Progress reporting on rank 0. BAR redraws one line with '\r' (cleared to its end with ESC[K);
 * PLAIN prints a full line every `every` steps and at the last step; NONE prints nothing, not
 * even mp_progress_line's lines. Rate limit without extra state: while a bar is on screen,
 * p->dirty holds 1 + the tenth of a second (counted from t0) in which it was drawn, so it is
 * nonzero exactly when a newline is owed, and a redraw happens only in a later tenth. */
#include "io/progress.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define MP_BAR_WIDTH 30

int mp_progress_mode_parse(const char *s, mp_progress_mode *mode)
{
    static const char *const names[] = {"auto", "bar", "plain", "none"};
    for (int i = 0; s && i < 4; i++)
        if (strcmp(s, names[i]) == 0) {
            *mode = (mp_progress_mode)i;
            return 0;
        }
    return -1;
}

/* Whether `out` reaches a person's terminal. Open MPI gives every local rank a pseudo-terminal
 * even when mpirun's own output goes to a file or pipe, so under mpirun the question is asked
 * of the parent's (mpirun's) stdout instead. A rank started by orted on another host sees a
 * parent whose stdout is no terminal, and srun gives no pty unless asked (--pty). */
static bool reaches_terminal(FILE *out)
{
    if (!out || !isatty(fileno(out)))
        return false;
    if (!getenv("OMPI_COMM_WORLD_SIZE"))
        return true;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/1", (int)getppid());
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return false;
    bool tty = isatty(fd);
    close(fd);
    return tty;
}

void mp_progress_init(mp_progress *p, mp_progress_mode mode, FILE *out, int64_t total_steps,
                      int64_t every)
{
    if (mode == MP_PROGRESS_AUTO)
        mode = reaches_terminal(out) ? MP_PROGRESS_BAR : MP_PROGRESS_PLAIN;
    p->mode = out ? mode : MP_PROGRESS_NONE;
    p->out = out;
    p->total_steps = total_steps;
    p->every = every < 1 ? 1 : every;
    p->t0 = mp_now();
    p->dirty = 0;
}

/* "M:SS", or "H:MM:SS" from an hour on; "?" when unknown. */
static void format_duration(char *buf, size_t cap, double s)
{
    if (!(s >= 0) || s > 1e8) {
        snprintf(buf, cap, "?");
        return;
    }
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, cap, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, cap, "%ld:%02ld", t / 60, t % 60);
}

static void draw_bar(mp_progress *p, int64_t step, int64_t epoch, double loss, double lr,
                     double ips, double elapsed)
{
    char bar[MP_BAR_WIDTH + 1], eta[32] = "?";
    int64_t total = p->total_steps;
    int fill = 0;
    if (total > 0) {
        int64_t s = step < total ? step : total;
        fill = (int)(s * MP_BAR_WIDTH / total);
        format_duration(eta, sizeof eta, step > 0 ? elapsed * (double)(total - s) / (double)step
                                                  : -1.0);
    }
    for (int i = 0; i < MP_BAR_WIDTH; i++)
        bar[i] = i < fill ? '=' : i == fill ? '>' : ' ';
    if (fill >= MP_BAR_WIDTH)
        bar[MP_BAR_WIDTH - 1] = '=';
    bar[MP_BAR_WIDTH] = '\0';
    fprintf(p->out, "\repoch %lld [%s] %lld/%lld loss %.4f lr %.4g %.0f img/s ETA %s\033[K",
            (long long)epoch, bar, (long long)step, (long long)total, loss, lr, ips, eta);
    fflush(p->out);
}

void mp_progress_step(mp_progress *p, int64_t step, int64_t epoch, double loss, double lr,
                      double images_per_s)
{
    if (p->mode != MP_PROGRESS_BAR && p->mode != MP_PROGRESS_PLAIN)
        return;
    double now = mp_now(), elapsed = now - p->t0;
    bool last = p->total_steps > 0 && step >= p->total_steps;
    if (p->mode == MP_PROGRESS_BAR) {
        int tenth = (int)((int64_t)(elapsed * 10.0) % 2000000000) + 1;
        if (!last && p->dirty == tenth)
            return;
        draw_bar(p, step, epoch, loss, lr, images_per_s, elapsed);
        p->dirty = tenth;
        return;
    }
    if (step % p->every != 0 && !last)
        return;
    char el[32], eta[32] = "?";
    snprintf(el, sizeof el, "%.1fs", elapsed);
    if (p->total_steps > 0 && step > 0)
        format_duration(eta, sizeof eta,
                        elapsed * (double)(p->total_steps - step) / (double)step);
    fprintf(p->out, "step %lld/%lld epoch %lld loss %.4f lr %.4g %.0f img/s elapsed %s ETA %s\n",
            (long long)step, (long long)p->total_steps, (long long)epoch, loss, lr, images_per_s,
            el, eta);
    fflush(p->out);
}

void mp_progress_line(mp_progress *p, const char *fmt, ...)
{
    if (p->mode == MP_PROGRESS_NONE || !p->out)
        return;
    mp_progress_finish(p);
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    size_t len = strlen(line);
    fprintf(p->out, "%s%s", line, len && line[len - 1] == '\n' ? "" : "\n");
    fflush(p->out);
}

void mp_progress_finish(mp_progress *p)
{
    if (p->dirty && p->out) {
        fputc('\n', p->out);
        fflush(p->out);
    }
    p->dirty = 0;
}
