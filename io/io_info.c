/* Library versions of the io layer. */
#include "io/io_info.h"

#include <cjson/cJSON.h>
#include <hdf5.h>
#include <zlib.h>

void mp_io_info(FILE *out)
{
    unsigned maj = 0, min = 0, rel = 0;
    H5get_libversion(&maj, &min, &rel);
    fprintf(out, "hdf5: %u.%u.%u (serial)\n", maj, min, rel);
    fprintf(out, "zlib: %s\n", zlibVersion());
    fprintf(out, "cjson: %s\n", cJSON_Version());
}
