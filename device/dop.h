// The reference ops (reference/ops/*.h) on a device executor X (HostExec or CudaExec): the same contract as
// reference/op.h — forward returns a fresh output and, given a context, fills it with exactly the tensors the
// reference saves, allocated in the reference's order (so activation bytes match); backward assigns input
// gradients and accumulates parameter gradients. Arithmetic is in the kernel bodies (kernels/*.cuh), GEMMs are
// Gemm descriptions (gemm.h), workspace is untracked device memory (the reference's Eigen temporaries).
// This file holds what every device op shares (DEnv, DOp); each op is a file in device/dops/, listed by
// device/dops.h.
#pragma once
#include <cmath>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "device/dmodel.h"
#include "device/dtensor.h"
#include "device/kernels/dropout.cuh"
#include "device/kernels/elementwise.cuh"
#include "reference/saved_fields.h"

namespace ckpt::gpu {

// reference/op.h's OpEnv: where random numbers come from, and the ambient numerics.
struct DEnv {
  DrawSource* draws = nullptr;
  bool erfGelu = false;
  bool bf16Matmul = false;
  bool bf16Inputs = false;  // Numerics::bf16Inputs: matrix products take bfloat16-rounded operands

  RngDraw draw(int64_t n) const {
    if (!draws) throw std::logic_error("a random device op ran without a DrawSource in its DEnv");
    return draws->draw(n);
  }
};

inline DrawPos drawPos(const RngDraw& d) { return DrawPos{d.seed, d.subsequence, d.offset}; }

template <class T, class X>
DTensor<T> uploadMatrix(X& x, const HostMatrix<T>& m) {
  auto t = DTensor<T>::untracked(x.pool(), m.rows, m.cols);
  x.upload(t.data(), m.data.data(), t.size());
  return t;
}

template <class T, class X>
HostMatrix<T> downloadMatrix(X& x, const DTensor<T>& t, std::string name = {}) {
  HostMatrix<T> m{std::move(name), t.rows(), t.cols(), std::vector<T>(static_cast<size_t>(t.size()))};
  x.download(m.data.data(), t.data(), t.size());
  return m;
}

// A parameter on the device: its value uploaded, its gradient zero (both untracked: not activations).
template <class T, class X>
DParam<T> uploadParam(X& x, const HostMatrix<T>& m) {
  DParam<T> p{m.name, uploadMatrix(x, m), DTensor<T>::untracked(x.pool(), m.rows, m.cols)};
  x.launch(p.grad.size(), Fill<T>{p.grad.data(), T(0)});
  return p;
}

template <class T, class X>
DTensor<T> cloneActivation(X& x, const DTensor<T>& t) {
  auto c = DTensor<T>::empty(x.pool(), t.rows(), t.cols());
  x.copy(c.data(), t.data(), t.size());
  return c;
}

template <class T, class X>
class DOp {
 public:
  explicit DOp(X& x) : x_(&x) {}
  virtual ~DOp() = default;
  virtual DTensor<T> forward(std::span<const DTensor<T>> in, DContext<T>* ctx, const DEnv& env) = 0;
  virtual void backward(const DContext<T>& ctx, const DTensor<T>& dout, std::span<DTensor<T>> din) = 0;
  virtual std::vector<DParam<T>*> params() { return {}; }
  virtual std::vector<DBuffer<T>*> buffers() { return {}; }

 protected:
  X& x() { return *x_; }
  DevicePool& pool() { return x_->pool(); }
  DTensor<T> activation(int64_t rows, int64_t cols) { return DTensor<T>::empty(pool(), rows, cols); }
  DTensor<T> workspace(int64_t rows, int64_t cols) { return DTensor<T>::untracked(pool(), rows, cols); }
  DParam<T> param(const HostMatrix<T>& m) { return uploadParam(*x_, m); }

 private:
  X* x_;
};

}  // namespace ckpt::gpu
