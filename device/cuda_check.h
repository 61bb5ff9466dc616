// Error checks that throw with file and line (tiny-cuda-nn's CUDA_CHECK_THROW), and a printing variant for
// destructors, which must not throw.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <stdexcept>
#include <string>

namespace ckpt::gpu {

[[noreturn]] inline void throwCudaError(const char* expr, const char* file, int line, const std::string& what) {
  throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + expr + " failed: " + what);
}

}  // namespace ckpt::gpu

#define CKPT_CUDA_CHECK(expr)                                                                   \
  do {                                                                                          \
    const cudaError_t ckptErr_ = (expr);                                                        \
    if (ckptErr_ != cudaSuccess)                                                                \
      ::ckpt::gpu::throwCudaError(                                                              \
          #expr, __FILE__, __LINE__,                                                            \
          std::string(cudaGetErrorName(ckptErr_)) + " (" + cudaGetErrorString(ckptErr_) + ")"); \
  } while (0)

#define CKPT_CUBLAS_CHECK(expr)                                                                   \
  do {                                                                                            \
    const cublasStatus_t ckptStatus_ = (expr);                                                    \
    if (ckptStatus_ != CUBLAS_STATUS_SUCCESS)                                                     \
      ::ckpt::gpu::throwCudaError(#expr, __FILE__, __LINE__, cublasGetStatusString(ckptStatus_)); \
  } while (0)

#define CKPT_CUDA_CHECK_PRINT(expr)                                                                            \
  do {                                                                                                         \
    const cudaError_t ckptErr_ = (expr);                                                                       \
    if (ckptErr_ != cudaSuccess)                                                                               \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(ckptErr_)); \
  } while (0)
