/* HDF5 helpers for tests; see test_h5.h. */
#include "tests/util/test_h5.h"

#include "tests/util/test_util.h"

#include <hdf5.h>
#include <stdio.h>

/* The file address of object `name`'s header. */
static haddr_t header_addr(const char *path, const char *name)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    haddr_t addr = HADDR_UNDEF;
#if H5_VERSION_GE(1, 12, 0)
    H5O_info2_t info;
    assert_true(H5Oget_info_by_name3(f, name, &info, H5O_INFO_BASIC, H5P_DEFAULT) >= 0);
    assert_true(H5VLnative_token_to_addr(f, info.token, &addr) >= 0);
#else
    H5O_info_t info;
    assert_true(H5Oget_info_by_name2(f, name, &info, H5O_INFO_BASIC, H5P_DEFAULT) >= 0);
    addr = info.addr;
#endif
    H5Fclose(f);
    assert_true(addr != HADDR_UNDEF);
    return addr;
}

void mp_test_h5_damage_header(const char *path, const char *name)
{
    haddr_t at = header_addr(path, name);
    FILE *fh = fopen(path, "r+b");
    assert_non_null(fh);
    assert_int_equal(fseek(fh, (long)at, SEEK_SET), 0);
    assert_int_equal(fputc(7, fh), 7);
    assert_int_equal(fclose(fh), 0);
}
