/* The one generator behind every library check macro (MPI_CHECK, H5_CHECK, CUDA_CHECK, ...).
 * A failed check records "[rank R @ host] file:line: STATEMENT failed: library message" with
 * mp_fail() and returns the given status from the enclosing function. */
#ifndef MP_CHECK_H
#define MP_CHECK_H

#include "engine/status.h"

/* Sets the rank and host name that check messages print. Called once by comm/ at start-up;
 * before that messages say rank -1. `host` is copied. */
void mp_identity_set(int rank, const char *host);

/* Records a check failure (see the file comment) and returns `code`. */
mp_status mp_check_fail(mp_status code, const char *lib, const char *stmt, const char *file,
                        int line, const char *lib_message);

/* MP_LIB_CHECK(library name, status on failure, result type, statement, ok-predicate macro,
 * message function): evaluates `stmt` once; when OK(result) is false, fails with ERRSTR(result). */
#define MP_LIB_CHECK(LIB, CODE, T, STMT, OK, ERRSTR)                                   \
    do {                                                                             \
        T mp_check_rc_ = (STMT);                                                     \
        if (!(OK(mp_check_rc_)))                                                     \
            return mp_check_fail((CODE), (LIB), #STMT, __FILE__, __LINE__,           \
                                 ERRSTR(mp_check_rc_));                              \
    } while (0)

#endif
