// The GPU executor (nvcc only): the interface of exec_host.h on one CUDA stream.
//   launch(n, body)  a grid-stride kernel calling body(i) for i < n (256 threads a block);
//   gemm(g)          cuBLAS, deterministic: pedantic math (no TF32, no reduced-precision reductions), atomics
//                    not allowed, a fixed workspace set with cublasSetWorkspace after cublasSetStream (so no
//                    CUBLAS_WORKSPACE_CONFIG is needed), one stream, CUBLAS_GEMM_DEFAULT; cuBLAS then gives the
//                    same bits for the same call on the same GPU model and library version;
//   memory           a counting DevicePool over cudaMalloc (never managed memory). Blocks freed by the host are
//                    reused by later work on the same stream only, so stream order makes reuse safe.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "device/cuda_check.h"
#include "device/device_pool.h"
#include "device/gemm.h"

namespace ckpt::gpu {

template <class F>
__global__ void __launch_bounds__(256) gridKernel(int64_t n, F body) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) body(i);
}

void* cudaRawAlloc(size_t bytes);
void cudaRawFree(void* ptr);

class CudaExec {
 public:
  static constexpr const char* kName = "cuda";
  static constexpr int kThreads = 256;
  static constexpr int64_t kCublasWorkspaceBytes = int64_t{32} << 20;

  CudaExec();
  ~CudaExec();
  CudaExec(const CudaExec&) = delete;
  CudaExec& operator=(const CudaExec&) = delete;

  DevicePool& pool() { return pool_; }
  cudaStream_t stream() const { return stream_; }

  template <class F>
  void launch(int64_t n, const F& body) {
    if (n <= 0) return;
    const int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, maxBlocks_);
    gridKernel<F><<<static_cast<unsigned>(blocks), kThreads, 0, stream_>>>(n, body);
    CKPT_CUDA_CHECK(cudaGetLastError());
  }

  template <class T>
  void gemm(const Gemm<T>& g) {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
    if (g.m == 0 || g.n == 0 || g.batch == 0) return;
    constexpr cudaDataType_t type = std::is_same_v<T, float> ? CUDA_R_32F : CUDA_R_64F;
    constexpr cublasComputeType_t compute =
        std::is_same_v<T, float> ? CUBLAS_COMPUTE_32F_PEDANTIC : CUBLAS_COMPUTE_64F_PEDANTIC;
    const ColumnMajorGemm<T> c = toColumnMajor(g);
    const cublasOperation_t opA = c.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t opB = c.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (c.batch == 1) {
      CKPT_CUBLAS_CHECK(cublasGemmEx(handle_, opA, opB, static_cast<int>(c.m), static_cast<int>(c.n),
                                     static_cast<int>(c.k), &c.alpha, c.a, type, static_cast<int>(c.lda), c.b, type,
                                     static_cast<int>(c.ldb), &c.beta, c.c, type, static_cast<int>(c.ldc), compute,
                                     CUBLAS_GEMM_DEFAULT));
    } else {
      CKPT_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
          handle_, opA, opB, static_cast<int>(c.m), static_cast<int>(c.n), static_cast<int>(c.k), &c.alpha, c.a, type,
          static_cast<int>(c.lda), c.strideA, c.b, type, static_cast<int>(c.ldb), c.strideB, &c.beta, c.c, type,
          static_cast<int>(c.ldc), c.strideC, static_cast<int>(c.batch), compute, CUBLAS_GEMM_DEFAULT));
    }
  }

  template <class T>
  void upload(T* dst, const T* src, int64_t n) {
    if (n <= 0) return;
    CKPT_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * sizeof(T), cudaMemcpyHostToDevice, stream_));
    synchronize();
  }
  template <class T>
  void download(T* dst, const T* src, int64_t n) {
    if (n <= 0) return;
    CKPT_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * sizeof(T), cudaMemcpyDeviceToHost, stream_));
    synchronize();
  }
  template <class T>
  void copy(T* dst, const T* src, int64_t n) {
    if (n <= 0) return;
    CKPT_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * sizeof(T), cudaMemcpyDeviceToDevice, stream_));
  }
  void synchronize() { CKPT_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

 private:
  DevicePool pool_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  int64_t maxBlocks_ = 65535;
};

}  // namespace ckpt::gpu
