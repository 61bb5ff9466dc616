// The executor's decision points, as a variant can override them. The defaults are the correct engine; a mutant
// (harness/mutants/) overrides one hook in a few lines to reproduce a real checkpointing bug, so the suite can
// show it catches it. Each hook names the bug classes it exists for.
//
// Hooks see the running step through StepView: which boundaries are held, and a few type-erased ways to touch
// tensors (element functions run through double, which is exact for float and double values).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "reference/block.h"

namespace ckpt {

using ElementFn = std::function<double(double)>;

// The executor's state as a variant may see and change it mid-step.
class StepView {
 public:
  virtual ~StepView() = default;
  virtual int layers() const = 0;
  virtual bool held(int boundary) const = 0;
  // Held and produced by a block's first forward in this step (or x_0): a checkpoint a recompute starts from.
  virtual bool isCheckpoint(int boundary) const = 0;
  // Overwrites x_dst's storage in place with x_src's values (both held, same shape).
  virtual void copyBoundary(int dst, int src) = 0;
  // Applies f in place to every element of x_i's storage (whatever else shares it sees the change).
  virtual void mapBoundary(int boundary, const ElementFn& f) = 0;
  // The live tape of a block: nodes, tensors per saved context (0 when absent), and in-place access.
  virtual bool hasTape(int block) const = 0;
  virtual int tapeNodes(int block) const = 0;
  virtual int contextTensors(int block, int node) const = 0;
  virtual void mapContextTensor(int block, int node, int tensor, const ElementFn& f) = 0;
  // The kind() of a block's node ("dropout", "batchnorm", ...), so a variant can single out the op its bug class
  // concerns (mutant context-before-filled: a random op's saved noise).
  virtual std::string nodeKind(int block, int node) const { return {}; }
  // Applies f in place to every parameter gradient of a block (its own copy, cases/param_sharing.h).
  virtual void mapParamGrads(int block, const ElementFn& f) = 0;
  // Whether x_boundary requires a gradient (boundaryRequiresGrad: the input does, or a block below trains).
  virtual bool requiresGrad(int boundary) const = 0;
  // The micro-batch this pass runs (cases/micro_batches.h; 0 without micro-batches), and, for a gradient
  // accumulation bug, zeroing the sums of the micro-batches before it of a block's trained parameters.
  virtual int microBatch() const { return 0; }
  virtual void zeroAccumulatedGrads(int block) {}
};

class EngineVariant {
 public:
  virtual ~EngineVariant() = default;
  virtual std::string name() const { return "correct"; }

  // Before a recompute forward of a block: put the generator where the block's first forward found it.
  // Mutant rng-not-restored: the generator is not restored, so dropout masks differ.
  virtual void rngForRecompute(Rng& rng, const RngState& atFirstForward) const { rng.setState(atFirstForward); }
  // After a recompute forward: put the generator back where the step had it.
  // Mutant rng-left-advanced: restored for the recompute but the live generator is left advanced after it.
  virtual void rngAfterRecompute(Rng& rng, const RngState& live) const { rng.setState(live); }
  // The environment of every recompute (block-level forwards and op-level recompute of dropped contexts).
  // Mutants: state-updated-twice (updateState left true, so BatchNorm statistics move twice),
  // segment-boundary-off-by-one (env.block off by one, so op keys of counter-based dropout come from the wrong
  // block), recompute-numerics (numerics.erfGelu), recompute-low-precision (numerics.bf16Matmul).
  virtual BlockEnv recomputeEnv(BlockEnv env) const {
    env.updateState = false;
    return env;
  }
  // Which held boundary a forward of `block` reads.
  // Mutants: segment-input-fed (recomputed blocks fed the segment input, the nearest isCheckpoint below,
  // instead of their predecessor's output), segment-boundary-off-by-one (block +- 1, where held).
  virtual int forwardInput(int block, bool recompute, const StepView& v) const { return block; }
  // Runs before a forward reads its input. tests/narrow_mutants_test.cpp: a fast path for "every block its own
  // segment" that reads its input one ULP off.
  virtual void beforeForward(int block, bool recompute, StepView& v) const {}
  // Runs after a forward stored x_{block+1} (and its tape, if any).
  // Mutants: stale-checkpoint-buffer (a freed buffer reused while still needed: a later checkpoint's data
  // written over an older held one, as a caching allocator would), context-before-filled (a saved context
  // captured before it is filled: zeroed extras).
  virtual void afterForward(int block, bool recompute, StepView& v) const {}
  // Runs after a block's backward; `recomputed` says its tape came from a recompute forward or had dropped
  // contexts rebuilt. Mutant grads-accumulated-twice: parameter gradients of recomputed blocks accumulated twice.
  virtual void afterBackward(int block, bool recomputed, StepView& v) const {}
  // Whether the step reports dL/dx_0. Mutant input-grad-dropped: the input gradient dropped because the input
  // does not require grad (reentrant checkpointing).
  virtual bool reportInputGradient() const { return true; }
  // The order in which the gradients of parameters several blocks use add up (shareGroups' users: backward
  // order, the owner last). Mutant shared-grads-forward-order: summed in block order.
  virtual std::vector<int> sharedGradOrder(std::vector<int> users) const { return users; }
  // Whether a tied LM head's contribution reaches the token embedding's gradient (cases/lm_case.h), given that
  // block 0 ran a recompute forward in this micro-batch. Mutant tied-head-grad-dropped: a recompute of the first
  // segment re-materialises the tied weight (as a parameter re-gathered for the recompute) and the gradient the
  // head had accumulated on the old one is lost.
  virtual bool tiedHeadGradKept(bool firstBlockRecomputed) const { return true; }
  // Whether SGD also moves frozen parameters. Mutant frozen-params-updated: an optimiser built over every
  // parameter that has a gradient buffer.
  virtual bool updatesFrozen() const { return false; }
};

}  // namespace ckpt
