// Where `ckptcheck run` and `verify` train: the CPU engine (harness/engine/executor.h), the CUDA backend on a GPU
// (device/, cuBLAS and cuRAND), or the same device code on the CPU through its host launcher
// ("cuda-emulated": every kernel body, the device pool and block runtime, with host GEMMs). Every device runs
// executor.h's StepRunner with the engine variant given, so mutants run on a device too. On a device the
// reference is that device's own store-all run: GPU results are not bitwise equal to the CPU's (libm and cuBLAS
// round differently), but checkpointed and store-all on one device must be.
#pragma once
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cases/case_spec.h"
#include "device/device_pool.h"
#include "harness/engine/engine_variant.h"
#include "harness/engine/schedule.h"
#include "reference/step.h"

namespace ckpt {

enum class Device { kCpu, kCuda, kCudaEmulated };

// "cpu", "cuda", "cuda-emulated"; anything else is an InputError naming the choices.
Device parseDevice(const std::string& text);
const char* deviceName(Device d);

// The device cannot be used here (no GPU, or a build without the CUDA backend): the CLI exits 3 with this
// one-line message, since the input was fine and the machine is not.
class DeviceUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws DeviceUnavailable when `d` cannot run on this machine; a no-op for kCpu and kCudaEmulated.
void requireDevice(Device d);

namespace gpu {
template <class T>
class DeviceChain;
}

// A chain built from `spec` on device `d` (not kCpu), stepped by executor.h's StepRunner.
template <class T>
class DeviceRunner {
 public:
  DeviceRunner(Device d, const CaseSpec& spec);
  ~DeviceRunner();
  DeviceRunner(const DeviceRunner&) = delete;
  DeviceRunner& operator=(const DeviceRunner&) = delete;

  int layers() const;
  // One training step under `schedule` (validated by the caller), results downloaded. Throws
  // std::invalid_argument when the schedule is for another number of layers.
  StepResult<T> step(const Schedule& schedule, int step, const EngineVariant& variant = EngineVariant());
  // One correct-engine step without downloads; returns its device time in milliseconds and fills `measured`
  // (FLOPs, activation peak, forward evaluations, generator) when given.
  double timedStep(const Schedule& schedule, int step, StepResult<T>* measured = nullptr);
  gpu::PoolStats memory() const;
  void resetPeakMemory();

 private:
  StepResult<T> run(const Schedule& schedule, int step, const EngineVariant& variant, bool collect);
  std::unique_ptr<gpu::DeviceChain<T>> chain_;
};

extern template class DeviceRunner<float>;
extern template class DeviceRunner<double>;

// Trains a fresh chain built from `spec` for `steps` steps under `schedule` on device `d` (not kCpu: the CPU
// engine has executor.h's executeSteps), with `variant` (the correct engine by default). Measured peak
// activation bytes, FLOPs and forward evaluations are the device run's, comparable with planSchedule(). Throws
// InputError when the schedule does not validate, std::invalid_argument when the engine refuses a step (e.g.
// device memory leaked between steps); a variant's own failures propagate as it throws them.
template <class T>
std::vector<StepResult<T>> deviceSteps(Device d, const CaseSpec& spec, const Schedule& schedule, int steps,
                                       const EngineVariant& variant = EngineVariant());

extern template std::vector<StepResult<float>> deviceSteps<float>(Device, const CaseSpec&, const Schedule&, int,
                                                                  const EngineVariant&);
extern template std::vector<StepResult<double>> deviceSteps<double>(Device, const CaseSpec&, const Schedule&, int,
                                                                    const EngineVariant&);

}  // namespace ckpt
