/* Communication library facts for `mpdist info`. */
#include "comm/comm_info.h"

#include <mpi.h>
#include <string.h>

#ifdef MPDIST_HAVE_CUDA
#include <nccl.h>
#endif

void mp_comm_info(FILE *out)
{
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(version, &len);
    char *nl = strchr(version, '\n');
    if (nl)
        *nl = '\0';
    char *comma = strchr(version, ',');
    if (comma)
        *comma = '\0';
    fprintf(out, "mpi: %s\n", version);
#ifdef MPDIST_HAVE_CUDA
    int v = 0;
    ncclGetVersion(&v);
    fprintf(out, "nccl: %d.%d.%d\n", v / 10000, (v % 10000) / 100, v % 100);
#else
    fprintf(out, "nccl: not built\n");
#endif
}
