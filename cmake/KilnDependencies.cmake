# Third-party dependencies. LLVM and CUDA are private to codegen/ and runtime/:
# their headers never reach a public Kiln header (DESIGN.md, "Layers").
find_package(Threads REQUIRED)

# LLVM 19: find_package(LLVM 19) does not match 19.1, so pin the directory.
if(NOT LLVM_DIR AND EXISTS /usr/lib/llvm-19/lib/cmake/llvm)
  set(LLVM_DIR /usr/lib/llvm-19/lib/cmake/llvm)
endif()
find_package(LLVM REQUIRED CONFIG)
if(NOT LLVM_VERSION_MAJOR EQUAL 19)
  message(FATAL_ERROR "Kiln needs LLVM 19, found ${LLVM_PACKAGE_VERSION} at ${LLVM_DIR}")
endif()
message(STATUS "Kiln: LLVM ${LLVM_PACKAGE_VERSION} from ${LLVM_DIR}")

# CUDA toolkit: NVRTC is linked; the driver and cuBLAS are dlopen'ed at run time.
if(NOT CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
  set(CUDAToolkit_ROOT /usr/local/cuda)
endif()
find_package(CUDAToolkit)
set(KILN_HAVE_CUDA_TOOLKIT ${CUDAToolkit_FOUND})
if(NOT CUDAToolkit_FOUND)
  message(STATUS "Kiln: no CUDA toolkit found; building without the CUDA backend (kCUDA is an error)")
endif()
if(TARGET CUDA::nvrtc)
  # The imported target links the driver stub (libcuda.so); Kiln loads the real
  # driver with dlopen so binaries start on machines without one.
  get_target_property(_kiln_nvrtc_deps CUDA::nvrtc INTERFACE_LINK_LIBRARIES)
  if(_kiln_nvrtc_deps)
    list(FILTER _kiln_nvrtc_deps EXCLUDE REGEX "cuda_driver|libcuda")
    set_target_properties(CUDA::nvrtc PROPERTIES INTERFACE_LINK_LIBRARIES "${_kiln_nvrtc_deps}")
  endif()
endif()
if(CUDAToolkit_FOUND)
  message(STATUS "Kiln: CUDA toolkit ${CUDAToolkit_VERSION} at ${CUDAToolkit_LIBRARY_DIR}")
endif()

# OpenBLAS for CPU matmul.
find_path(KILN_OPENBLAS_INCLUDE cblas.h PATH_SUFFIXES openblas openblas-pthread)
find_library(KILN_OPENBLAS_LIB NAMES openblas)
if(NOT KILN_OPENBLAS_INCLUDE OR NOT KILN_OPENBLAS_LIB)
  message(FATAL_ERROR "Kiln needs OpenBLAS (apt-get install libopenblas-dev)")
endif()

# libxsmm for small CPU matmuls (runtime/small_gemm.cpp): JIT kernels for the
# products OpenBLAS's per-call overhead dominates. Debian ships it as a static
# library built with -fPIC; its fallback calls BLAS's sgemm_/dgemm_, which
# OpenBLAS provides.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(KILN_XSMM QUIET IMPORTED_TARGET libxsmm)
endif()
if(NOT KILN_XSMM_FOUND)
  message(FATAL_ERROR "Kiln needs libxsmm for small matrix products, found by pkg-config as "
                      "libxsmm (apt-get install libxsmm-dev pkg-config)")
endif()
message(STATUS "Kiln: libxsmm ${KILN_XSMM_VERSION} for small CPU matmuls")

# nlohmann-json (header only) writes the profile's trace-event files (runtime/profile.cpp).
find_package(nlohmann_json 3 REQUIRED CONFIG)
