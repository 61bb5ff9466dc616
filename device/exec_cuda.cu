#include "device/exec_cuda.cuh"

namespace ckpt::gpu {

void* cudaRawAlloc(size_t bytes) {
  void* p = nullptr;
  if (cudaMalloc(&p, bytes) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky-free error so the pool can retry after emptying its cache
    return nullptr;
  }
  return p;
}

void cudaRawFree(void* ptr) { CKPT_CUDA_CHECK_PRINT(cudaFree(ptr)); }

CudaExec::CudaExec() : pool_(cudaRawAlloc, cudaRawFree, "cuda device pool") {
  int device = 0, sms = 0;
  CKPT_CUDA_CHECK(cudaGetDevice(&device));
  CKPT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  maxBlocks_ = std::max<int64_t>(1, int64_t{sms} * 32);
  CKPT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  CKPT_CUBLAS_CHECK(cublasCreate(&handle_));
  // cublasSetStream resets the workspace to cuBLAS's default pool, so the fixed workspace is set after it.
  CKPT_CUBLAS_CHECK(cublasSetStream(handle_, stream_));
  workspace_ = pool_.allocate(kCublasWorkspaceBytes);
  CKPT_CUBLAS_CHECK(cublasSetWorkspace(handle_, workspace_, static_cast<size_t>(kCublasWorkspaceBytes)));
  CKPT_CUBLAS_CHECK(cublasSetMathMode(handle_, CUBLAS_PEDANTIC_MATH));
  CKPT_CUBLAS_CHECK(cublasSetAtomicsMode(handle_, CUBLAS_ATOMICS_NOT_ALLOWED));
}

CudaExec::~CudaExec() {
  CKPT_CUDA_CHECK_PRINT(cudaStreamSynchronize(stream_));
  if (handle_) cublasDestroy(handle_);
  pool_.release(workspace_, kCublasWorkspaceBytes);
  if (stream_) CKPT_CUDA_CHECK_PRINT(cudaStreamDestroy(stream_));
}

}  // namespace ckpt::gpu
