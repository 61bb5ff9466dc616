#include "device/device_pool.h"

#include <cstdlib>
#include <stdexcept>

namespace ckpt::gpu {

DevicePool::DevicePool(RawAlloc alloc, RawFree free, std::string name)
    : alloc_(alloc), free_(free), name_(std::move(name)) {}

DevicePool::~DevicePool() { emptyCache(); }

void* DevicePool::allocate(int64_t bytes) {
  const int64_t size = rounded(bytes);
  ++stats_.allocations;
  void* p = nullptr;
  auto it = cache_.find(size);
  if (it != cache_.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
  } else {
    p = alloc_(static_cast<size_t>(size));
    if (!p && !cache_.empty()) {
      emptyCache();
      p = alloc_(static_cast<size_t>(size));
    }
    if (!p)
      throw std::runtime_error(name_ + ": out of memory allocating " + std::to_string(bytes) + " bytes (live " +
                               std::to_string(stats_.liveBytes) + ", reserved " + std::to_string(stats_.reservedBytes) +
                               ")");
    ++stats_.rawAllocations;
    stats_.reservedBytes += size;
    if (stats_.reservedBytes > stats_.peakReservedBytes) stats_.peakReservedBytes = stats_.reservedBytes;
  }
  stats_.liveBytes += bytes;
  if (stats_.liveBytes > stats_.peakLiveBytes) stats_.peakLiveBytes = stats_.liveBytes;
  return p;
}

void DevicePool::release(void* ptr, int64_t bytes) {
  if (!ptr) return;
  stats_.liveBytes -= bytes;
  cache_[rounded(bytes)].push_back(ptr);
}

void DevicePool::emptyCache() {
  for (auto& [size, blocks] : cache_) {
    for (void* p : blocks) {
      free_(p);
      stats_.reservedBytes -= size;
    }
  }
  cache_.clear();
}

void DevicePool::resetPeak() {
  stats_.peakLiveBytes = stats_.liveBytes;
  stats_.peakReservedBytes = stats_.reservedBytes;
}

void* hostRawAlloc(size_t bytes) { return std::aligned_alloc(static_cast<size_t>(DevicePool::kGranule), bytes); }
void hostRawFree(void* ptr) { std::free(ptr); }

}  // namespace ckpt::gpu
