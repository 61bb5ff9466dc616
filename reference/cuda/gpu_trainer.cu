// The GPU trainer: the device executor (dtrainer.h) instantiated on CudaExec, behind gpu.h's plain-C++ API.
#include "reference/cuda/dtrainer.h"
#include "reference/cuda/exec_cuda.cuh"
#include "reference/cuda/gpu.h"

namespace ckpt::gpu {

template <class T>
struct GpuTrainer<T>::Impl {
  CudaExec exec;  // declared first: destroyed last, after every tensor the trainer holds
  DeviceTrainer<T, CudaExec> trainer;
  cudaEvent_t start = nullptr, stop = nullptr;
  explicit Impl(const DeviceModel<T>& m) : trainer(exec, m) {
    CKPT_CUDA_CHECK(cudaEventCreate(&start));
    CKPT_CUDA_CHECK(cudaEventCreate(&stop));
  }
  ~Impl() {
    if (start) CKPT_CUDA_CHECK_PRINT(cudaEventDestroy(start));
    if (stop) CKPT_CUDA_CHECK_PRINT(cudaEventDestroy(stop));
  }
};

template <class T>
GpuTrainer<T>::GpuTrainer(const DeviceModel<T>& model) : impl_(std::make_unique<Impl>(model)) {}
template <class T>
GpuTrainer<T>::~GpuTrainer() = default;
template <class T>
int GpuTrainer<T>::layers() const {
  return impl_->trainer.layers();
}
template <class T>
DeviceStepResult<T> GpuTrainer<T>::step(const DeviceSchedule& s, int step) {
  DeviceStepResult<T> r = impl_->trainer.step(s, step, true);
  impl_->exec.synchronize();
  return r;
}
template <class T>
double GpuTrainer<T>::timedStep(const DeviceSchedule& s, int step, DeviceStepResult<T>* measured) {
  CKPT_CUDA_CHECK(cudaEventRecord(impl_->start, impl_->exec.stream()));
  DeviceStepResult<T> r = impl_->trainer.step(s, step, false);
  CKPT_CUDA_CHECK(cudaEventRecord(impl_->stop, impl_->exec.stream()));
  CKPT_CUDA_CHECK(cudaEventSynchronize(impl_->stop));
  float ms = 0;
  CKPT_CUDA_CHECK(cudaEventElapsedTime(&ms, impl_->start, impl_->stop));
  if (measured) *measured = std::move(r);
  return static_cast<double>(ms);
}
template <class T>
PoolStats GpuTrainer<T>::memory() const {
  return impl_->exec.pool().stats();
}
template <class T>
void GpuTrainer<T>::resetPeakMemory() {
  impl_->exec.pool().resetPeak();
}

template class GpuTrainer<float>;
template class GpuTrainer<double>;

}  // namespace ckpt::gpu
