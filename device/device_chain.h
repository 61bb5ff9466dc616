// A chain on a device, as the executor drives it: the block runtime's primitives (forward with a tape and an
// op-level keep mask, recompute of dropped contexts, backward), the loss, zeroing gradients, downloading the
// results, SGD, and the few element accesses engine variants use. There is no schedule here: the one schedule
// interpreter is harness/engine/executor.h, whose device backend calls this interface.
//
// Why a virtual interface: the executor is g++-compiled harness code (Eigen, the schedule IR, the mutant hooks)
// and CudaExec exists only under nvcc. This header needs neither (plain C++, no CUDA or Eigen headers), so the
// CUDA implementation lives in a .cu file (gpu_trainer.cu, reached through gpu.h's makeGpuChain) and nvcc never
// compiles harness code; the host emulator's implementation is the same template on HostExec (exec_chain.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "device/device_pool.h"
#include "device/dmodel.h"
#include "device/dtape.h"

namespace ckpt::gpu {

template <class T>
class DeviceChain {
 public:
  virtual ~DeviceChain() = default;
  virtual int layers() const = 0;
  virtual Rng& rng() = 0;
  // Micro-batch m's x_0 (cases/micro_batches.h; the whole input without micro-batches) as a fresh activation
  // (charged to the current meter). A token case's stem runs here, its FLOPs counted into the meter's phase.
  virtual DTensor<T> input(int m) = 0;
  virtual void zeroGrads() = 0;
  virtual DTensor<T> forward(int block, const DTensor<T>& x, DBlockTape<T>* tape, const KeepMask& keep,
                             const BlockEnv& env) = 0;
  virtual void recomputeDropped(int block, DBlockTape<T>& tape, const BlockEnv& env) = 0;
  virtual DTensor<T> backward(int block, DBlockTape<T>&& tape, DTensor<T>&& dy) = 0;
  // The loss forward (FLOPs counted in the forward phase) and its backward (in the backward phase); returns
  // dL/dx_L and keeps the loss value on the device for values(). Micro-batch m's loss: its rows, divided by M.
  virtual DTensor<T> loss(const DTensor<T>& x, ActivationMeter& meter, int m) = 0;
  // After micro-batch m's backward and shared-gradient sums: its loss, trained gradients and dx go into the
  // step's sums (reference/step.h's MicroBatchSums; dx is released into a host copy with micro-batches).
  virtual void endMicroBatch(int m, DTensor<T>& dx) = 0;
  // The sums so far of block `block`'s trained parameters become zero (mutant micro-batch-grads-zeroed's).
  virtual void zeroAccumulated(int block) = 0;
  // The case (its sharing and freezing rules, cases/param_sharing.h).
  virtual const CaseSpec& spec() const = 0;
  // Adds the gradient copies of blocks `users` in that order (cases/param_sharing.h), the sum into `owner`'s.
  virtual void reduceSharedGrads(const std::vector<int>& users, int owner) = 0;
  // A token case (cases/lm_case.h), after micro-batch m's backward: the stem takes dL/dx_0 into the embeddings'
  // gradients when they train, and says whether it did (dx_0 is then consumed); false for a dense case.
  virtual bool stemBackward(int m, const DTensor<T>& dx) = 0;
  // A tied head whose embedding trains: the embedding's gradient becomes g_head + g_emb (reference/step.h's
  // reduceTiedGrads); without `headContribution` nothing changes (the head's part is lost, as a mutant loses it).
  virtual void reduceTiedGrads(bool headContribution) = 0;
  // The step's loss, trained parameters' gradients, dx (when defined and the input requires a gradient) and
  // module buffers, downloaded.
  virtual DeviceValues<T> values(const DTensor<T>& dx) = 0;
  // SGD on the trained parameters (frozen ones too with `frozenToo`), then sharing blocks take their owner's
  // values and a tied head's weight the embedding's.
  virtual void sgd(bool frozenToo) = 0;

  // Element access for engine variants (tests only: each call synchronises).
  virtual std::vector<T> download(const DTensor<T>& t) = 0;
  virtual void upload(DTensor<T>& t, const std::vector<T>& host) = 0;
  virtual void copy(DTensor<T>& dst, const DTensor<T>& src) = 0;
  virtual std::string nodeKind(int block, int node) const = 0;
  virtual std::vector<DParam<T>*> blockParams(int block) = 0;

  // The pool under every tensor of the chain, and a step timer (CUDA events on the GPU, the wall clock after
  // a synchronise on the host).
  virtual PoolStats memory() const = 0;
  virtual void resetPeakMemory() = 0;
  virtual void startTimer() = 0;
  virtual double stopTimerMs() = 0;
};

}  // namespace ckpt::gpu
