# Locates cuDNN and NCCL: beside the CUDA toolkit, under CUDNN_ROOT / NCCL_ROOT (CMake or
# environment variables; CUDNN_HOME / NCCL_HOME too), or from Python wheels, which ship only
# versioned names such as libcudnn.so.9 and libnccl.so.2.
foreach(lib CUDNN NCCL)
  set(_mp_${lib}_roots ${${lib}_ROOT} $ENV{${lib}_ROOT} $ENV{${lib}_HOME})
  set(_mp_${lib}_lib_hints ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib64)
  set(_mp_${lib}_inc_hints ${CUDAToolkit_INCLUDE_DIRS})
  foreach(root ${_mp_${lib}_roots})
    list(PREPEND _mp_${lib}_lib_hints ${root}/lib ${root}/lib64)
    list(PREPEND _mp_${lib}_inc_hints ${root}/include)
  endforeach()
endforeach()
find_library(MP_CUDNN_LIBRARY NAMES cudnn libcudnn.so.9 HINTS ${_mp_CUDNN_lib_hints})
find_library(MP_NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${_mp_NCCL_lib_hints})
find_path(MP_CUDNN_INCLUDE cudnn.h HINTS ${_mp_CUDNN_inc_hints})
find_path(MP_NCCL_INCLUDE nccl.h HINTS ${_mp_NCCL_inc_hints})
foreach(v MP_CUDNN_LIBRARY MP_NCCL_LIBRARY MP_CUDNN_INCLUDE MP_NCCL_INCLUDE)
  if(NOT ${v})
    message(FATAL_ERROR "mpdist: nvcc was found but ${v} was not; set CUDNN_ROOT/NCCL_ROOT, "
                        "or configure with -DMPDIST_CUDA=OFF")
  endif()
endforeach()
message(STATUS "mpdist: cuDNN ${MP_CUDNN_LIBRARY}, NCCL ${MP_NCCL_LIBRARY}")
