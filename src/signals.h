/* Stop requests: SIGTERM (what Slurm sends at a time limit, and scancel) and SIGUSR1 (sbatch
 * --signal=USR1@60) only set a flag (engine/stop.h, which a data set's load polls too); the step
 * loop agrees on it over all ranks and stops at the next step boundary with a checkpoint, and a
 * set-up still loading data ends early (MP_ESTOPPED). A SIGTERM after a first stop signal, SIGINT
 * and SIGHUP end the process at once, as without a handler, after removing the temporaries it was
 * writing (io/temp_guard.h); a SIGTERM within half a second of the first request is that request
 * sent twice (GNU timeout signals its child and then the child's process group) and changes
 * nothing. */
#ifndef MP_SIGNALS_H
#define MP_SIGNALS_H

/* Installs the handlers for training: SIGTERM and SIGUSR1 request a stop, SIGINT and SIGHUP
 * end the process, SIGPIPE is ignored (a run whose stdout reader went away, `| head`, trains on
 * and saves, then exits 1 saying stdout could not be written), and so is SIGXFSZ (a save past a
 * file size limit fails with EFBIG, a checkpoint error, instead of a core dump) (idempotent). */
void mp_signals_install(void);

/* For commands that write a file and have no stop to agree on (export): SIGTERM, SIGUSR1,
 * SIGINT and SIGHUP remove the temporaries being written and end the process as without a
 * handler, so no full-size hidden file is left beside the target (idempotent). */
void mp_signals_install_ending(void);

/* Installs handlers for the fatal signals (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) that
 * write one line "mpdist: error: rank R on HOST: fatal signal NAME" with write(2) alone, then
 * restore the default action and re-raise, so the process dies of the signal and the launcher
 * ends the job. Replaces Open MPI's handlers (call it after MPI_Init), whose backtrace can
 * deadlock in malloc after heap damage and leave the job hanging. rank < 0 leaves out
 * "rank R on HOST". Not installed in AddressSanitizer builds, whose reports say more. */
void mp_signals_install_fatal(int rank, const char *host);

#endif
