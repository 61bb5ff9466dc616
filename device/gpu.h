// The CUDA backend as host code sees it (plain C++, no CUDA headers): the chain on the GPU, the device probes the
// tests and benchmarks use, and device information for `ckptcheck info`. Link ckpt_cuda (which defines
// CKPT_HAVE_CUDA_BACKEND). Everything here that needs a device throws std::runtime_error without one; check
// cudaDeviceCount() first.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "device/device_chain.h"
#include "device/device_pool.h"
#include "device/dmodel.h"

namespace ckpt::gpu {

// CUDA devices visible to this process; 0 when there is no device or no (new enough) driver. Never throws.
int cudaDeviceCount();

// {"devices": N, "driver_version": ..., "runtime_version": ..., "curand_version": ..., "cublas_version": ...,
//  "gpus": [{"index", "name", "compute_capability", "total_memory_bytes", "multiprocessors", ...}],
//  "error": "..." (only when the runtime reported one, e.g. no driver)}. Versions are CUDA's integers
// (12080 = 12.8); null when unavailable.
nlohmann::json cudaDeviceInfo();

// A chain on the GPU (exec_chain.h on CudaExec, device 0), for the executor in harness/engine/executor.h to
// drive (harness/engine/device_steps.h's DeviceRunner wraps it).
template <class T>
std::unique_ptr<DeviceChain<T>> makeGpuChain(const DeviceModel<T>& model);

extern template std::unique_ptr<DeviceChain<float>> makeGpuChain<float>(const DeviceModel<float>&);
extern template std::unique_ptr<DeviceChain<double>> makeGpuChain<double>(const DeviceModel<double>&);

// Raw Philox draws as the dropout kernel sees them (kernels/dropout.cuh's philoxBlock: curand_init(seed,
// subsequence, 4 * block) + curand4), element i at stream offset `offset + i`.
std::vector<uint32_t> gpuPhiloxDraws(uint64_t seed, uint64_t subsequence, uint64_t offset, int64_t n);
// cuRAND's device API as reference/philox.h documents the kernel contract: thread i calls
// curand_init(seed, subsequence, offset + i, &state) and returns curand(&state).
std::vector<uint32_t> gpuCurandThreadDraws(uint64_t seed, uint64_t subsequence, uint64_t offset, int64_t n);
// The dropout kernel's output and mask for input x and a draw.
template <class T>
void gpuDropout(const std::vector<T>& x, uint64_t seed, uint64_t subsequence, uint64_t offset, double p,
                std::vector<T>& out, std::vector<T>& mask);

// Device timing for the bandwidth benchmark, on float buffers of n elements: milliseconds per call of the
// dropout forward kernel (reads x, writes y and the mask: 12 bytes an element; each call draws from a fresh
// stream position, as in training) and of cudaMemcpy device-to-device (8 bytes an element), each the mean over
// `reps` back-to-back calls after one warm-up call, timed with CUDA events on the probe's stream.
class GpuBandwidthProbe {
 public:
  explicit GpuBandwidthProbe(int64_t n);
  ~GpuBandwidthProbe();
  GpuBandwidthProbe(const GpuBandwidthProbe&) = delete;
  GpuBandwidthProbe& operator=(const GpuBandwidthProbe&) = delete;
  double dropoutMs(double p, int reps);
  double copyMs(int reps);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ckpt::gpu
