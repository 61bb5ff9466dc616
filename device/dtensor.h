// Device tensors: 2-D, row-major, reference-counted storage from a DevicePool. The mirror of
// reference/tensor.h: an activation (DTensor::empty) is charged to the thread's current ActivationMeter at
// allocation and credited back when its storage dies, so a device step measures activation bytes exactly as the
// CPU engine does (and as the planner predicts). Parameters, module buffers and op workspace are allocated
// untracked: they come from the same pool (its own live/peak counts them) but are not activations.
//
// The data pointer is a device pointer under CudaExec and a host pointer under HostExec; only an executor reads
// or writes it (launch, gemm, upload/download).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "device/device_pool.h"
#include "reference/meter.h"
#include "reference/rng.h"

namespace ckpt::gpu {

template <class T>
class DTensor {
 public:
  DTensor() = default;
  // An activation: charged to currentMeter().
  static DTensor empty(DevicePool& pool, int64_t rows, int64_t cols) {
    return DTensor(pool, rows, cols, currentMeter());
  }
  // Parameters, buffers, workspace: pool-counted only.
  static DTensor untracked(DevicePool& pool, int64_t rows, int64_t cols) { return DTensor(pool, rows, cols, nullptr); }

  bool defined() const { return static_cast<bool>(storage_); }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int64_t size() const { return rows_ * cols_; }
  int64_t bytes() const { return size() * static_cast<int64_t>(sizeof(T)); }
  T* data() const { return storage_ ? storage_->data : nullptr; }
  void reset() {
    storage_.reset();
    rows_ = cols_ = 0;
  }
  const void* storageId() const { return storage_.get(); }

 private:
  struct Storage {
    T* data;
    int64_t bytes;
    DevicePool* pool;
    ActivationMeter* meter;
    Storage(DevicePool& p, int64_t n, ActivationMeter* m)
        : data(static_cast<T*>(p.allocate(n * static_cast<int64_t>(sizeof(T))))),
          bytes(n * static_cast<int64_t>(sizeof(T))),
          pool(&p),
          meter(m) {
      if (meter) meter->allocate(bytes);
    }
    ~Storage() {
      if (meter) meter->release(bytes);
      pool->release(data, bytes);
    }
    Storage(const Storage&) = delete;
    Storage& operator=(const Storage&) = delete;
  };
  DTensor(DevicePool& pool, int64_t rows, int64_t cols, ActivationMeter* meter)
      : storage_(std::make_shared<Storage>(pool, rows * cols, meter)), rows_(rows), cols_(cols) {}

  std::shared_ptr<Storage> storage_;
  int64_t rows_ = 0;
  int64_t cols_ = 0;
};

// What a device op's backward needs (reference/op.h's Context).
template <class T>
struct DContext {
  std::vector<DTensor<T>> tensors;
  RngDraw draw;
  // The numerics the forward ran under that its backward depends on (reference/op.h's Context::numerics): the
  // backward differentiates the function the forward computed, whatever env a later call runs in.
  bool bf16Inputs = false;
};

template <class T>
struct DParam {
  std::string name;
  DTensor<T> value;
  DTensor<T> grad;
};

template <class T>
struct DBuffer {
  std::string name;
  DTensor<T> value;
};

}  // namespace ckpt::gpu
