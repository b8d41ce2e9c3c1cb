/* MPI's error text (see mpi_check.h). */
#include "comm/mpi_check.h"

#include <stdio.h>

const char *mp_mpi_error_string(int rc)
{
    static _Thread_local char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
        snprintf(msg, sizeof msg, "MPI error %d", rc);
    return msg;
}
