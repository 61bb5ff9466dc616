# The matrix products (GEMM) of every op, chosen deliberately as the instruction set is (CKPT_ARCH):
#   openblas  Eigen's own BLAS binding (EIGEN_USE_BLAS) hands each dense product to OpenBLAS: Debian's pthread
#             build (libopenblas-pthread-dev), pinned to one thread (reference/gemm.cpp). OpenBLAS picks its
#             kernels at run time for the processor it runs on, whatever CKPT_ARCH compiled our own code for.
#   eigen     Eigen's own kernels, compiled for CKPT_ARCH.
# Why OpenBLAS by default: on the wide cases most of a step is GEMM, and on this project's AMD EPYC (Zen 4)
# machines Eigen 3.4's 48x4 AVX-512 kernel reaches 78-86 GFLOP/s on the 256 x 1024 x 1024 products of mlp-wide,
# OpenBLAS 92-103 and PyTorch's MKL 94-103, single-threaded (docs/reports.md). The pthread build, not
# the serial one: a single-threaded OpenBLAS locks its buffer pool only if it was compiled with USE_LOCKING, which
# 0.3.21's build line does not report, while the pthread build always locks; and `ckptcheck verify --threads N`
# runs products on several threads at once.
# Every bitwise property compares runs of one binary; OpenBLAS's sums do not depend on where the operands lie in
# memory or on other threads (tests/gemm_placement_test.cpp), as Eigen's do not.
set(CKPT_GEMM "openblas" CACHE STRING "Matrix products: openblas (OpenBLAS through Eigen's BLAS binding) or eigen (Eigen's own kernels)")
set_property(CACHE CKPT_GEMM PROPERTY STRINGS openblas eigen)

add_library(ckpt_eigen INTERFACE)
target_link_libraries(ckpt_eigen INTERFACE Eigen3::Eigen)
if(CKPT_GEMM STREQUAL "openblas")
  find_library(CKPT_OPENBLAS_LIBRARY NAMES openblas
               PATHS /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-pthread NO_DEFAULT_PATH)
  if(NOT CKPT_OPENBLAS_LIBRARY)
    message(FATAL_ERROR "CKPT_GEMM=openblas: OpenBLAS's pthread build is not installed "
                        "(apt-get install libopenblas-pthread-dev, or configure with -DCKPT_GEMM=eigen)")
  endif()
  # Every file that instantiates an Eigen product must see the same definition (one binary, one build of each
  # inline product), so it is global, for the host side of .cu files too, as CKPT_ARCH's flags are.
  add_compile_definitions(EIGEN_USE_BLAS CKPT_GEMM_OPENBLAS)
  # By full path: the build tree's RUNPATH then names the pthread build's folder, ahead of the libopenblas.so.0
  # that Debian's alternatives choose (which may be the serial build).
  target_link_libraries(ckpt_eigen INTERFACE ${CKPT_OPENBLAS_LIBRARY})
elseif(NOT CKPT_GEMM STREQUAL "eigen")
  message(FATAL_ERROR "CKPT_GEMM=${CKPT_GEMM}: use openblas or eigen")
endif()
message(STATUS "ckptcheck: CKPT_GEMM ${CKPT_GEMM} ${CKPT_OPENBLAS_LIBRARY}")
