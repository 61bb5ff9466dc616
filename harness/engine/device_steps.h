// Where `ckptcheck run` and `verify` train: the CPU engine (harness/engine/executor.h), the CUDA backend on a GPU
// (reference/cuda/, cuBLAS and cuRAND), or the same device code on the CPU through its host launcher
// ("cuda-emulated": every kernel body, the device pool, the device executor, with host GEMMs). On a device the
// reference is that device's own store-all run: GPU results are not bitwise equal to the CPU's (libm and cuBLAS
// round differently), but checkpointed and store-all on one device must be.
#pragma once
#include <stdexcept>
#include <string>
#include <vector>

#include "cases/case_spec.h"
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

// Trains a fresh chain built from `spec` for `steps` steps under `schedule` on device `d` (not kCpu: the CPU
// engine has executor.h), with the correct engine. Measured peak activation bytes, FLOPs and forward evaluations
// are the device executor's, comparable with planSchedule(). Throws std::invalid_argument when the engine refuses
// a step (e.g. device memory leaked between steps).
template <class T>
std::vector<StepResult<T>> deviceSteps(Device d, const CaseSpec& spec, const Schedule& schedule, int steps);

extern template std::vector<StepResult<float>> deviceSteps<float>(Device, const CaseSpec&, const Schedule&, int);
extern template std::vector<StepResult<double>> deviceSteps<double>(Device, const CaseSpec&, const Schedule&, int);

}  // namespace ckpt
