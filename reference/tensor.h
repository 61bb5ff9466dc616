// Activation tensors: 2-D, row-major, reference-counted storage charged to the current ActivationMeter.
// Sharing is explicit and cheap (a saved context that needs an op's input holds the same storage), so the
// bytes counted are the bytes a real framework would hold.
#pragma once
#include <Eigen/Dense>
#include <cstdint>
#include <memory>
#include <string>

#include "reference/meter.h"

namespace ckpt {

template <class T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

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
  void reset() { storage_.reset(); rows_ = cols_ = 0; }
  // Storage identity: two tensors sharing storage are one activation, counted once.
  const void* storageId() const { return storage_.get(); }

 private:
  struct Storage {
    std::unique_ptr<T[]> data;
    int64_t bytes;
    ActivationMeter* meter;
    Storage(int64_t n, ActivationMeter* m)
        : data(new T[static_cast<size_t>(n)]), bytes(n * static_cast<int64_t>(sizeof(T))), meter(m) {
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
