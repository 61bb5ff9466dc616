// Small device probes for the tests (Philox / cuRAND device-API bits, dropout masks) and the bandwidth benchmark.
#include <curand_kernel.h>

#include "device/exec_cuda.cuh"
#include "device/gpu.h"
#include "device/kernels/dropout.cuh"
#include "device/kernels/elementwise.cuh"

namespace ckpt::gpu {
namespace {

// Thread i: curand_init(seed, subsequence, offset + i) and one curand(), the documented device contract.
__global__ void curandThreadDraws(uint32_t* out, int64_t n, uint64_t seed, uint64_t subsequence, uint64_t offset) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  curandStatePhilox4_32_10_t state;
  curand_init(seed, subsequence, offset + static_cast<uint64_t>(i), &state);
  out[i] = curand(&state);
}

// A device buffer of n T's from `exec`'s pool, released on scope exit.
template <class T>
struct DeviceBuffer {
  CudaExec& exec;
  int64_t n;
  T* ptr;
  DeviceBuffer(CudaExec& e, int64_t count)
      : exec(e), n(count), ptr(static_cast<T*>(e.pool().allocate(count * static_cast<int64_t>(sizeof(T))))) {}
  ~DeviceBuffer() { exec.pool().release(ptr, n * static_cast<int64_t>(sizeof(T))); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

// Mean milliseconds of `reps` calls of f on exec's stream, after one warm-up call.
template <class F>
double timeOnStream(CudaExec& exec, int reps, F&& f) {
  f();
  exec.synchronize();
  cudaEvent_t start, stop;
  CKPT_CUDA_CHECK(cudaEventCreate(&start));
  CKPT_CUDA_CHECK(cudaEventCreate(&stop));
  CKPT_CUDA_CHECK(cudaEventRecord(start, exec.stream()));
  for (int r = 0; r < reps; ++r) f();
  CKPT_CUDA_CHECK(cudaEventRecord(stop, exec.stream()));
  CKPT_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  CKPT_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  CKPT_CUDA_CHECK(cudaEventDestroy(start));
  CKPT_CUDA_CHECK(cudaEventDestroy(stop));
  return static_cast<double>(ms) / std::max(1, reps);
}

}  // namespace

std::vector<uint32_t> gpuPhiloxDraws(uint64_t seed, uint64_t subsequence, uint64_t offset, int64_t n) {
  CudaExec exec;
  DeviceBuffer<uint32_t> buf(exec, n);
  exec.launch(philoxBlocksFor(offset, n), PhiloxDraws{buf.ptr, n, DrawPos{seed, subsequence, offset}});
  std::vector<uint32_t> out(static_cast<size_t>(n));
  exec.download(out.data(), buf.ptr, n);
  return out;
}

std::vector<uint32_t> gpuCurandThreadDraws(uint64_t seed, uint64_t subsequence, uint64_t offset, int64_t n) {
  CudaExec exec;
  DeviceBuffer<uint32_t> buf(exec, n);
  if (n > 0) {
    curandThreadDraws<<<static_cast<unsigned>((n + 255) / 256), 256, 0, exec.stream()>>>(buf.ptr, n, seed, subsequence,
                                                                                         offset);
    CKPT_CUDA_CHECK(cudaGetLastError());
  }
  std::vector<uint32_t> out(static_cast<size_t>(n));
  exec.download(out.data(), buf.ptr, n);
  return out;
}

template <class T>
void gpuDropout(const std::vector<T>& x, uint64_t seed, uint64_t subsequence, uint64_t offset, double p,
                std::vector<T>& out, std::vector<T>& mask) {
  const int64_t n = static_cast<int64_t>(x.size());
  CudaExec exec;
  DeviceBuffer<T> dx(exec, n), dy(exec, n), dm(exec, n);
  exec.upload(dx.ptr, x.data(), n);
  const T scale = T(1) / (T(1) - static_cast<T>(p));
  exec.launch(philoxBlocksFor(offset, n),
              DropoutForward<T>{dy.ptr, dm.ptr, dx.ptr, n, DrawPos{seed, subsequence, offset}, p, scale});
  out.resize(x.size());
  mask.resize(x.size());
  exec.download(out.data(), dy.ptr, n);
  exec.download(mask.data(), dm.ptr, n);
}
template void gpuDropout<float>(const std::vector<float>&, uint64_t, uint64_t, uint64_t, double, std::vector<float>&,
                                std::vector<float>&);
template void gpuDropout<double>(const std::vector<double>&, uint64_t, uint64_t, uint64_t, double, std::vector<double>&,
                                 std::vector<double>&);

struct GpuBandwidthProbe::Impl {
  CudaExec exec;
  int64_t n;
  DeviceBuffer<float> x, y, mask;
  uint64_t offset = 0;
  explicit Impl(int64_t count) : n(count), x(exec, count), y(exec, count), mask(exec, count) {
    exec.launch(n, Fill<float>{x.ptr, 1.0f});
  }
};

GpuBandwidthProbe::GpuBandwidthProbe(int64_t n) : impl_(std::make_unique<Impl>(n)) {}
GpuBandwidthProbe::~GpuBandwidthProbe() = default;

double GpuBandwidthProbe::dropoutMs(double p, int reps) {
  Impl& m = *impl_;
  const float scale = 1.0f / (1.0f - static_cast<float>(p));
  return timeOnStream(m.exec, reps, [&] {
    m.exec.launch(philoxBlocksFor(m.offset, m.n),
                  DropoutForward<float>{m.y.ptr, m.mask.ptr, m.x.ptr, m.n, DrawPos{1, 0, m.offset}, p, scale});
    m.offset += (static_cast<uint64_t>(m.n) + 3) & ~uint64_t{3};
  });
}

double GpuBandwidthProbe::copyMs(int reps) {
  Impl& m = *impl_;
  return timeOnStream(m.exec, reps, [&] { m.exec.copy(m.y.ptr, m.x.ptr, m.n); });
}

}  // namespace ckpt::gpu
