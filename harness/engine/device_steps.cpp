#include "harness/engine/device_steps.h"

#include "cases/input_error.h"
#include "device/exec_chain.h"
#include "device/exec_host.h"
#include "harness/engine/device_backend.h"
#include "harness/engine/device_bridge.h"
#include "harness/engine/executor.h"
#include "harness/engine/plan.h"
#ifdef CKPT_HAVE_CUDA_BACKEND
#include "device/gpu.h"
#endif

namespace ckpt {

Device parseDevice(const std::string& text) {
  if (text == "cpu") return Device::kCpu;
  if (text == "cuda") return Device::kCuda;
  if (text == "cuda-emulated") return Device::kCudaEmulated;
  throw InputError("--device '" + text + "': expected cpu, cuda or cuda-emulated");
}

const char* deviceName(Device d) {
  switch (d) {
    case Device::kCpu:
      return "cpu";
    case Device::kCuda:
      return "cuda";
    case Device::kCudaEmulated:
      return "cuda-emulated";
  }
  return "?";
}

void requireDevice(Device d) {
  if (d != Device::kCuda) return;
#ifdef CKPT_HAVE_CUDA_BACKEND
  if (gpu::cudaDeviceCount() == 0)
    throw DeviceUnavailable(
        "--device cuda: no CUDA device visible to this process (`ckptcheck info` says why); "
        "--device cuda-emulated runs the same device code on the CPU");
#else
  throw DeviceUnavailable(
      "--device cuda: this ckptcheck was built without the CUDA backend (nvcc was not found at configure time); "
      "--device cuda-emulated runs the device code on the CPU");
#endif
}

namespace {

// The executor on each device: the host emulator's chain is the same template as the GPU's, compiled here by
// g++; the GPU's comes from ckpt_cuda (nvcc) through gpu.h, so no harness header reaches nvcc.
template <class T>
std::unique_ptr<gpu::DeviceChain<T>> makeChain(Device d, const gpu::DeviceModel<T>& model) {
  if (d == Device::kCudaEmulated) return std::make_unique<gpu::OwningExecChain<T, gpu::HostExec>>(model);
  if (d == Device::kCuda) {
    requireDevice(d);
#ifdef CKPT_HAVE_CUDA_BACKEND
    return gpu::makeGpuChain<T>(model);
#endif
  }
  throw std::invalid_argument("DeviceRunner: the CPU engine is harness/engine/executor.h's executeSteps");
}

}  // namespace

template <class T>
DeviceRunner<T>::DeviceRunner(Device d, const CaseSpec& spec) : chain_(makeChain<T>(d, gpu::describeCase<T>(spec))) {}
template <class T>
DeviceRunner<T>::~DeviceRunner() = default;
template <class T>
int DeviceRunner<T>::layers() const {
  return chain_->layers();
}
template <class T>
StepResult<T> DeviceRunner<T>::run(const Schedule& s, int step, const EngineVariant& variant, bool collect) {
  if (s.layers != layers())
    throw std::invalid_argument("schedule '" + s.policy + "' is for " + std::to_string(s.layers) +
                                " layers, the chain has " + std::to_string(layers()));
  ActivationMeter meter;  // declared before the runner: its tensors are released into it
  DeviceBackend<T> backend(*chain_);
  detail::StepRunner<DeviceBackend<T>> runner(backend, s, step, variant, nullptr);
  return runner.run(meter, collect);
}
template <class T>
StepResult<T> DeviceRunner<T>::step(const Schedule& s, int step, const EngineVariant& variant) {
  return run(s, step, variant, true);
}
template <class T>
double DeviceRunner<T>::timedStep(const Schedule& s, int step, StepResult<T>* measured) {
  chain_->startTimer();
  StepResult<T> r = run(s, step, EngineVariant(), false);
  const double ms = chain_->stopTimerMs();
  if (measured) *measured = std::move(r);
  return ms;
}
template <class T>
gpu::PoolStats DeviceRunner<T>::memory() const {
  return chain_->memory();
}
template <class T>
void DeviceRunner<T>::resetPeakMemory() {
  chain_->resetPeakMemory();
}

template class DeviceRunner<float>;
template class DeviceRunner<double>;

// Every step must hand all of its activation memory back to the pool: a leak would make the next step's peak
// differ from the plan for a reason the comparison would not name.
template <class T>
std::vector<StepResult<T>> deviceSteps(Device d, const CaseSpec& spec, const Schedule& schedule, int steps,
                                       const EngineVariant& variant) {
  validateSchedule(schedule, caseChainCost(spec));
  DeviceRunner<T> runner(d, spec);
  std::vector<StepResult<T>> rs;
  for (int s = 0; s < steps; ++s) {
    const int64_t before = runner.memory().liveBytes;
    rs.push_back(runner.step(schedule, s, variant));
    if (runner.memory().liveBytes != before)
      throw std::invalid_argument("device executor: step " + std::to_string(s) + " of '" + schedule.policy + "' left " +
                                  std::to_string(runner.memory().liveBytes - before) + " activation bytes allocated");
  }
  return rs;
}

template std::vector<StepResult<float>> deviceSteps<float>(Device, const CaseSpec&, const Schedule&, int,
                                                           const EngineVariant&);
template std::vector<StepResult<double>> deviceSteps<double>(Device, const CaseSpec&, const Schedule&, int,
                                                             const EngineVariant&);

}  // namespace ckpt
