/* Stop requests: SIGTERM (what Slurm sends at a time limit, and scancel) and SIGUSR1 (sbatch
 * --signal=USR1@60) only set a flag; the step loop agrees on it over all ranks and stops at the
 * next step boundary with a checkpoint. A SIGTERM after a first stop signal ends the process at
 * once; SIGINT keeps its default. */
#ifndef MP_SIGNALS_H
#define MP_SIGNALS_H

/* Installs the handlers (idempotent). */
void mp_signals_install(void);

/* The first stop signal received since start (SIGTERM or SIGUSR1), or 0. */
int mp_signal_pending(void);

/* "SIGTERM", "SIGUSR1", or "signal N". */
const char *mp_signal_name(int sig);

#endif
