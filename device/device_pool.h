// A counting pool over a raw allocator: cudaMalloc/cudaFree for the GPU (never managed memory), aligned host
// memory for the host emulator. Freed blocks are cached by rounded size and reused, as a framework's caching
// allocator does, so a step's steady state makes no raw allocations. It counts what it hands out:
//   live / peak live   bytes requested by callers and not yet released (activations, workspace, parameters);
//   reserved / peak    bytes obtained from the raw allocator (cached blocks included): the real footprint.
// Activation bytes in the sense of reference/meter.h are counted separately, by the ActivationMeter each DTensor
// charges (reference/meter.h), exactly as the CPU Tensor does.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ckpt::gpu {

struct PoolStats {
  int64_t liveBytes = 0;
  int64_t peakLiveBytes = 0;
  int64_t reservedBytes = 0;
  int64_t peakReservedBytes = 0;
  int64_t rawAllocations = 0;  // calls to the raw allocator
  int64_t allocations = 0;     // calls to allocate()
};

class DevicePool {
 public:
  using RawAlloc = void* (*)(size_t bytes);  // returns nullptr on failure
  using RawFree = void (*)(void* ptr);
  static constexpr int64_t kGranule = 512;  // rounding and alignment of every block

  DevicePool(RawAlloc alloc, RawFree free, std::string name);
  ~DevicePool();
  DevicePool(const DevicePool&) = delete;
  DevicePool& operator=(const DevicePool&) = delete;

  // Throws std::runtime_error naming the pool, the request and the live/reserved bytes when the raw allocator
  // fails even after the cache was emptied.
  void* allocate(int64_t bytes);
  void release(void* ptr, int64_t bytes);
  // Returns every cached block to the raw allocator.
  void emptyCache();
  void resetPeak();
  PoolStats stats() const { return stats_; }
  const std::string& name() const { return name_; }

  static int64_t rounded(int64_t bytes) { return bytes <= 0 ? kGranule : (bytes + kGranule - 1) / kGranule * kGranule; }

 private:
  RawAlloc alloc_;
  RawFree free_;
  std::string name_;
  std::map<int64_t, std::vector<void*>> cache_;  // rounded size -> free blocks
  PoolStats stats_;
};

// Aligned host memory (the host emulator's "device").
void* hostRawAlloc(size_t bytes);
void hostRawFree(void* ptr);

}  // namespace ckpt::gpu
