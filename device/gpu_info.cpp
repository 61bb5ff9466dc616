#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <curand.h>

#include "device/gpu.h"

namespace ckpt::gpu {

int cudaDeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

nlohmann::json cudaDeviceInfo() {
  nlohmann::json j;
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    j["error"] = std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
    (void)cudaGetLastError();
    n = 0;
  }
  j["devices"] = n;
  int v = 0;
  j["driver_version"] = cudaDriverGetVersion(&v) == cudaSuccess && v > 0 ? nlohmann::json(v) : nlohmann::json();
  j["runtime_version"] = cudaRuntimeGetVersion(&v) == cudaSuccess ? nlohmann::json(v) : nlohmann::json();
  j["curand_version"] = curandGetVersion(&v) == CURAND_STATUS_SUCCESS ? nlohmann::json(v) : nlohmann::json();
  int major = 0, minor = 0, patch = 0;
  if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS)
    j["cublas_version"] = major * 10000 + minor * 100 + patch;
  else j["cublas_version"] = nullptr;
  nlohmann::json gpus = nlohmann::json::array();
  for (int d = 0; d < n; ++d) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, d) != cudaSuccess) {
      (void)cudaGetLastError();
      continue;
    }
    gpus.push_back({{"index", d},
                    {"name", p.name},
                    {"compute_capability", std::to_string(p.major) + "." + std::to_string(p.minor)},
                    {"total_memory_bytes", static_cast<int64_t>(p.totalGlobalMem)},
                    {"multiprocessors", p.multiProcessorCount},
                    {"memory_bus_width_bits", p.memoryBusWidth},
                    {"l2_cache_bytes", p.l2CacheSize}});
  }
  j["gpus"] = gpus;
  return j;
}

}  // namespace ckpt::gpu
