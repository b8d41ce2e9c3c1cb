/* `mpdist info`: what this binary was built with. */
#ifndef MP_INFO_H
#define MP_INFO_H

#include <stdio.h>

/* Prints the version and one "key: value" line per backend and library (needs no MPI_Init). */
void mp_info_print(FILE *out);

#endif
