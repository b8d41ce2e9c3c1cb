/* `mpdist info`: the version, backends and library versions compiled into the binary. */
#include "src/info.h"

#include <libconfig.h>

#include "comm/comm_info.h"
#include "engine/backends.h"
#include "io/io_info.h"

void mp_info_print(FILE *out)
{
    fprintf(out, "mpdist: %s\n", MPDIST_VERSION);
    mp_backends_info(out);
    mp_comm_info(out);
    mp_io_info(out);
    fprintf(out, "libconfig: %d.%d.%d\n", LIBCONFIG_VER_MAJOR, LIBCONFIG_VER_MINOR,
            LIBCONFIG_VER_REVISION);
#if defined(__SANITIZE_ADDRESS__)
    fprintf(out, "sanitizers: address, undefined\n");
#endif
}
