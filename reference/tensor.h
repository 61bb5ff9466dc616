// Activation tensors: 2-D, row-major, reference-counted storage charged to the current ActivationMeter.
// Sharing is explicit and cheap (a saved context that needs an op's input holds the same storage), so the
// bytes counted are the bytes a real framework would hold.
#pragma once
#include <Eigen/Dense>
#include <cstdint>
#include <cstddef>
#include <memory>
#include <new>
#include <string>

#include "reference/meter.h"

namespace ckpt {

template <class T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Tensor storage starts on a 64-byte boundary, the widest vector (AVX-512) and a cache line. Eigen's vectorised
// reductions (sum, rowwise sum, dot) over a Map start with scalar steps up to the first vector-aligned element,
// so where they start summing in packets depends on the address: with storage only malloc-aligned (16 bytes) the
// same sum over two tensors could round differently under AVX/AVX-512, and a checkpointed step differ from the
// reference. A fixed alignment makes the order a function of shapes alone, whatever the instruction set.
inline constexpr std::size_t kTensorAlignBytes = 64;

template <class T>
class Tensor {
 public:
  using Map = Eigen::Map<Mat<T>>;
  using ConstMap = Eigen::Map<const Mat<T>>;

  Tensor() = default;
  // Uninitialised storage of rows x cols, charged to the current meter.
  static Tensor empty(int64_t rows, int64_t cols) { return Tensor(rows, cols); }
  static Tensor zeros(int64_t rows, int64_t cols) {
    Tensor t(rows, cols);
    t.map().setZero();
    return t;
  }
  template <class Derived>
  static Tensor from(const Eigen::MatrixBase<Derived>& m) {
    Tensor t(m.rows(), m.cols());
    t.map() = m;
    return t;
  }

  bool defined() const { return static_cast<bool>(storage_); }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int64_t size() const { return rows_ * cols_; }
  int64_t bytes() const { return size() * static_cast<int64_t>(sizeof(T)); }
  T* data() { return storage_->data.get(); }
  const T* data() const { return storage_->data.get(); }
  Map map() { return Map(data(), rows_, cols_); }
  ConstMap map() const { return ConstMap(data(), rows_, cols_); }
  // A deep copy (new storage, charged again).
  Tensor clone() const { return from(map()); }
  void reset() {
    storage_.reset();
    rows_ = cols_ = 0;
  }
  // Storage identity: two tensors sharing storage are one activation, counted once.
  const void* storageId() const { return storage_.get(); }

 private:
  struct AlignedDelete {
    void operator()(T* p) const { ::operator delete[](p, std::align_val_t{kTensorAlignBytes}); }
  };
  struct Storage {
    std::unique_ptr<T[], AlignedDelete> data;
    int64_t bytes;
    ActivationMeter* meter;
    Storage(int64_t n, ActivationMeter* m)
        : data(static_cast<T*>(
              ::operator new[](static_cast<size_t>(n) * sizeof(T), std::align_val_t{kTensorAlignBytes}))),
          bytes(n * static_cast<int64_t>(sizeof(T))),
          meter(m) {
      if (meter) meter->allocate(bytes);
    }
    ~Storage() {
      if (meter) meter->release(bytes);
    }
    Storage(const Storage&) = delete;
    Storage& operator=(const Storage&) = delete;
  };
  Tensor(int64_t rows, int64_t cols)
      : storage_(std::make_shared<Storage>(rows * cols, currentMeter())), rows_(rows), cols_(cols) {}

  std::shared_ptr<Storage> storage_;
  int64_t rows_ = 0;
  int64_t cols_ = 0;
};

}  // namespace ckpt
