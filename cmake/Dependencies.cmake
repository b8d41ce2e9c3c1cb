# Finds every required library and stops with a message naming the Debian package to install.
find_package(PkgConfig QUIET)

function(mp_require found what package)
  if(NOT ${found})
    message(FATAL_ERROR "mpdist: ${what} not found: install the Debian package '${package}' "
                        "(tests/run.sh and launch/quickstart.sh install everything).")
  endif()
endfunction()

if(NOT PKG_CONFIG_FOUND)
  mp_require(PKG_CONFIG_FOUND "pkg-config" "pkg-config")
endif()

find_package(MPI COMPONENTS C QUIET)
mp_require(MPI_C_FOUND "MPI (Open MPI)" "libopenmpi-dev")

set(HDF5_PREFER_PARALLEL OFF)
find_package(HDF5 COMPONENTS C QUIET)
mp_require(HDF5_FOUND "HDF5 (serial)" "libhdf5-dev")

find_package(ZLIB QUIET)
mp_require(ZLIB_FOUND "zlib" "zlib1g-dev")

# Image folders: libjpeg-turbo (through its libjpeg API) and libpng decode JPEG and PNG files.
find_package(JPEG QUIET)
mp_require(JPEG_FOUND "libjpeg-turbo" "libjpeg62-turbo-dev")
find_package(PNG QUIET)
mp_require(PNG_FOUND "libpng" "libpng-dev")

pkg_check_modules(LIBCONFIG QUIET IMPORTED_TARGET libconfig)
mp_require(LIBCONFIG_FOUND "libconfig" "libconfig-dev")

pkg_check_modules(OPENBLAS QUIET IMPORTED_TARGET openblas)
mp_require(OPENBLAS_FOUND "OpenBLAS" "libopenblas-dev")

find_package(cJSON QUIET)
if(NOT cJSON_FOUND)
  pkg_check_modules(CJSON QUIET IMPORTED_TARGET libcjson)
  mp_require(CJSON_FOUND "cJSON" "libcjson-dev")
  add_library(mp_cjson INTERFACE)
  target_link_libraries(mp_cjson INTERFACE PkgConfig::CJSON)
else()
  add_library(mp_cjson INTERFACE)
  target_link_libraries(mp_cjson INTERFACE cjson)
  target_include_directories(mp_cjson INTERFACE ${CJSON_INCLUDE_DIRS})
endif()

if(MPDIST_TESTS)
  pkg_check_modules(CMOCKA QUIET IMPORTED_TARGET cmocka)
  mp_require(CMOCKA_FOUND "cmocka" "libcmocka-dev")
endif()

find_library(MATH_LIBRARY m)
find_package(Threads REQUIRED)

# oneDNN (Debian's libdnnl-dev and ocl-icd-opencl-dev, with its OpenMP runtime) runs the CPU
# backend's FP32 and bf16 convolutions; without it (not installed, or MPDIST_DNNL=OFF) they run as im2col + OpenBLAS,
# which also stays the FP64 path of the gradient checks.
# OpenMP spreads the CPU backend's element-wise, pooling and BatchNorm loops over the rank's
# threads (engine/backend_cpu/parallel.h); without it they run on one thread.
find_package(OpenMP COMPONENTS C QUIET)
message(STATUS "mpdist: OpenMP for the CPU backend's loops ${OpenMP_C_FOUND}")

# OpenBLAS's OpenMP build (Debian's libopenblas0-openmp) runs its GEMMs on the same OpenMP
# threads as the backend's loops and oneDNN. The default pthread build keeps threads of its own:
# while they spin after a GEMM, OpenMP's threads wait for the next loop, and the other way round,
# so on 2 cores an MLP step took about twice as long. The OpenMP build is linked by its path, which
# leaves the system's libopenblas alternative as it is; without it, the pthread build serves.
option(MPDIST_OPENBLAS_OPENMP "Link OpenBLAS's OpenMP build when it is installed" ON)
set(MP_OPENBLAS PkgConfig::OPENBLAS)
if(MPDIST_OPENBLAS_OPENMP AND OpenMP_C_FOUND AND "gomp" IN_LIST OpenMP_C_LIB_NAMES)
  find_library(MP_OPENBLAS_OPENMP_LIB NAMES libopenblas.so.0 openblas
               PATHS /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-openmp NO_DEFAULT_PATH)
  if(MP_OPENBLAS_OPENMP_LIB)
    add_library(mp_openblas INTERFACE)
    target_include_directories(mp_openblas INTERFACE ${OPENBLAS_INCLUDE_DIRS})
    target_link_libraries(mp_openblas INTERFACE ${MP_OPENBLAS_OPENMP_LIB})
    set(MP_OPENBLAS mp_openblas)
  endif()
endif()
message(STATUS "mpdist: OpenBLAS ${MP_OPENBLAS} (libopenblas0-openmp: ${MP_OPENBLAS_OPENMP_LIB})")
option(MPDIST_DNNL "Use oneDNN for the CPU backend's FP32 convolutions when it is found" ON)
set(MPDIST_HAVE_DNNL OFF)
if(MPDIST_DNNL)
  # Debian's dnnl-config.cmake asks for OpenCL as REQUIRED (its GPU runtime): without
  # ocl-icd-opencl-dev it would stop the configuration, so oneDNN is looked for only with it.
  find_package(OpenCL QUIET)
  if(OpenCL_FOUND)
    find_package(dnnl CONFIG QUIET)
  endif()
  # Debian's libdnnl runs on GNU OpenMP: the thread count set through omp_set_num_threads
  # reaches it only when we link the same runtime (GCC's), not clang's libomp.
  if(dnnl_FOUND AND OpenMP_C_FOUND AND "gomp" IN_LIST OpenMP_C_LIB_NAMES)
    set(MPDIST_HAVE_DNNL ON)
  endif()
endif()
message(STATUS "mpdist: oneDNN convolutions ${MPDIST_HAVE_DNNL} (libdnnl-dev, ocl-icd-opencl-dev; else im2col + OpenBLAS)")
