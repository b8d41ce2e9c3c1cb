/* Facts about the file-format libraries in the binary, for `mpdist info`. */
#ifndef MP_IO_INFO_H
#define MP_IO_INFO_H

#include <stdio.h>

/* Prints "hdf5: x.y.z", "zlib: ..." and "cjson: ..." lines. */
void mp_io_info(FILE *out);

#endif
