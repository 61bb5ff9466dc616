// The device backend of the executor (executor.h): a gpu::DeviceChain (device/device_chain.h), on the
// GPU or on the host emulator, driven through its virtual interface so this g++-compiled header never sees
// CudaExec. Tensors are device tensors charged to the current ActivationMeter as CPU tensors are. The StepView
// accesses engine variants use download, change and upload (test-only paths; each synchronises).
#pragma once
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "device/device_chain.h"
#include "harness/engine/device_bridge.h"
#include "harness/engine/engine_variant.h"

namespace ckpt {

template <class T>
class DeviceBackend {
 public:
  using Scalar = T;
  using Act = gpu::DTensor<T>;
  using Tape = gpu::DBlockTape<T>;

  explicit DeviceBackend(gpu::DeviceChain<T>& c) : c_(c) {}

  int layers() const { return c_.layers(); }
  Rng& rng() { return c_.rng(); }
  Act input(int m) { return c_.input(m); }
  void zeroGrads() { c_.zeroGrads(); }
  // The env goes through as it is: the device runs the same block runtime (reference/block_runtime.h).
  Act forward(int i, const Act& x, Tape* tape, const KeepMask& keep, const BlockEnv& env) {
    return c_.forward(i, x, tape, keep, env);
  }
  void recomputeDropped(int i, Tape& tape, const BlockEnv& env) { c_.recomputeDropped(i, tape, env); }
  Act backward(int i, Tape&& tape, Act&& dy) { return c_.backward(i, std::move(tape), std::move(dy)); }
  Act loss(const Act& x, ActivationMeter& meter, int m) { return c_.loss(x, meter, m); }
  void endMicroBatch(int m, Act& dx) { c_.endMicroBatch(m, dx); }
  void zeroAccumulated(int block) { c_.zeroAccumulated(block); }
  const CaseSpec& spec() const { return c_.spec(); }
  void reduceSharedGrads(const std::vector<int>& users, int owner) { c_.reduceSharedGrads(users, owner); }
  // A token case's stem backward after micro-batch m's (true: it took dx; its FLOPs go to the meter's current,
  // backward, phase); a tied head's gradient sum.
  bool stemBackward(int m, const Act& dx) { return c_.stemBackward(m, dx); }
  void reduceTiedGrads(bool headContribution) { c_.reduceTiedGrads(headContribution); }
  StepResult<T> collect(const Act& dx) { return gpu::toStepResult(c_.values(dx)); }
  void sgd(bool frozenToo) { c_.sgd(frozenToo); }

  void copy(Act& dst, const Act& src) { c_.copy(dst, src); }
  void mapInPlace(Act& t, const ElementFn& f) {
    std::vector<T> h = c_.download(t);
    for (T& v : h) v = static_cast<T>(f(static_cast<double>(v)));
    c_.upload(t, h);
  }
  std::string nodeKind(int b, int node) const { return c_.nodeKind(b, node); }
  void mapParamGrads(int b, const ElementFn& f) {
    for (auto* p : c_.blockParams(b)) mapInPlace(p->grad, f);
  }

 private:
  gpu::DeviceChain<T>& c_;
};

}  // namespace ckpt
