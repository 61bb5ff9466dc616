#include "harness/engine/device_steps.h"

#include "cases/input_error.h"
#include "reference/cuda/bridge.h"
#include "reference/cuda/dtrainer.h"
#include "reference/cuda/exec_host.h"
#ifdef CKPT_HAVE_CUDA_BACKEND
#include "reference/cuda/gpu.h"
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
    case Device::kCpu: return "cpu";
    case Device::kCuda: return "cuda";
    case Device::kCudaEmulated: return "cuda-emulated";
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

// Every step must hand all of its activation memory back to the pool: a leak would make the next step's peak
// differ from the plan for a reason the comparison would not name.
template <class T, class Trainer, class LiveBytes>
std::vector<StepResult<T>> stepAll(Trainer& trainer, const Schedule& schedule, int steps, LiveBytes live) {
  const gpu::DeviceSchedule ds = gpu::toDeviceSchedule(schedule);
  std::vector<StepResult<T>> rs;
  for (int s = 0; s < steps; ++s) {
    const int64_t before = live();
    rs.push_back(gpu::toStepResult(trainer.step(ds, s)));
    if (live() != before)
      throw std::invalid_argument("device executor: step " + std::to_string(s) + " of '" + schedule.policy +
                                  "' left " + std::to_string(live() - before) + " activation bytes allocated");
  }
  return rs;
}

}  // namespace

template <class T>
std::vector<StepResult<T>> deviceSteps(Device d, const CaseSpec& spec, const Schedule& schedule, int steps) {
  const gpu::DeviceModel<T> model = gpu::describeCase<T>(spec);
  if (d == Device::kCudaEmulated) {
    gpu::HostExec hx;
    gpu::DeviceTrainer<T, gpu::HostExec> trainer(hx, model);
    return stepAll<T>(trainer, schedule, steps, [&] { return hx.pool().stats().liveBytes; });
  }
  if (d == Device::kCuda) {
    requireDevice(d);
#ifdef CKPT_HAVE_CUDA_BACKEND
    gpu::GpuTrainer<T> trainer(model);
    return stepAll<T>(trainer, schedule, steps, [&] { return trainer.memory().liveBytes; });
#endif
  }
  throw std::invalid_argument("deviceSteps: the CPU engine is harness/engine/executor.h");
}

template std::vector<StepResult<float>> deviceSteps<float>(Device, const CaseSpec&, const Schedule&, int);
template std::vector<StepResult<double>> deviceSteps<double>(Device, const CaseSpec&, const Schedule&, int);

}  // namespace ckpt
