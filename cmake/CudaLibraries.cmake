# Locates cuDNN and NCCL beside the CUDA toolkit (or from Python wheels, which ship only
# versioned names such as libcudnn.so.9 and libnccl.so.2).
set(_mp_cuda_hints ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib64 $ENV{CUDNN_HOME}/lib $ENV{NCCL_HOME}/lib)
find_library(MP_CUDNN_LIBRARY NAMES cudnn libcudnn.so.9 HINTS ${_mp_cuda_hints})
find_library(MP_NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${_mp_cuda_hints})
find_path(MP_CUDNN_INCLUDE cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} $ENV{CUDNN_HOME}/include)
find_path(MP_NCCL_INCLUDE nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} $ENV{NCCL_HOME}/include)
foreach(v MP_CUDNN_LIBRARY MP_NCCL_LIBRARY MP_CUDNN_INCLUDE MP_NCCL_INCLUDE)
  if(NOT ${v})
    message(FATAL_ERROR "mpdist: nvcc was found but ${v} was not; set CUDNN_HOME/NCCL_HOME, "
                        "or configure with -DMPDIST_CUDA=OFF")
  endif()
endforeach()
