// The chain on the GPU: exec_chain.h's ExecChain on CudaExec, behind gpu.h's plain-C++ makeGpuChain. Its step
// timer is a pair of CUDA events on the executor's stream, so a timed step measures GPU time, not launch time.
#include "device/exec_chain.h"
#include "device/exec_cuda.cuh"
#include "device/gpu.h"

namespace ckpt::gpu {

namespace {

template <class T>
class GpuChain final : public OwningExecChain<T, CudaExec> {
 public:
  explicit GpuChain(const DeviceModel<T>& m) : OwningExecChain<T, CudaExec>(m) {
    CKPT_CUDA_CHECK(cudaEventCreate(&start_));
    CKPT_CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~GpuChain() override {
    if (start_) CKPT_CUDA_CHECK_PRINT(cudaEventDestroy(start_));
    if (stop_) CKPT_CUDA_CHECK_PRINT(cudaEventDestroy(stop_));
  }
  GpuChain(const GpuChain&) = delete;
  GpuChain& operator=(const GpuChain&) = delete;

  void startTimer() override { CKPT_CUDA_CHECK(cudaEventRecord(start_, this->exec().stream())); }
  double stopTimerMs() override {
    CKPT_CUDA_CHECK(cudaEventRecord(stop_, this->exec().stream()));
    CKPT_CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0;
    CKPT_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return static_cast<double>(ms);
  }

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

}  // namespace

template <class T>
std::unique_ptr<DeviceChain<T>> makeGpuChain(const DeviceModel<T>& model) {
  return std::make_unique<GpuChain<T>>(model);
}

template std::unique_ptr<DeviceChain<float>> makeGpuChain<float>(const DeviceModel<float>&);
template std::unique_ptr<DeviceChain<double>> makeGpuChain<double>(const DeviceModel<double>&);

}  // namespace ckpt::gpu
