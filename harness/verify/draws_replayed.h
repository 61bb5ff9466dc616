// The rerun that decides whether a difference came from the random draws (rng-desync, harness/diagnose.h): the
// same case, the same schedule, the same engine, with only its handling of the generator in recomputes made the
// correct one: the generator put where the block's first forward found it before a recompute and back after it,
// no op handed a side stream (BlockEnv::redrawOp), op keys of the block that runs. Every other hook is the
// engine's own, so the model keeps its structure and every non-random computation: a drop-path node with its
// probability and the same per-sample decisions, a router with its jitter and the same routing. A run that then
// equals the reference differed by its draws only; a wrong computation that merely sits in a stochastic block
// (which samples' rows a decision applies to, an expert's capacity) still differs and keeps its class.
// (Turning the draws off instead, cases/stochastic_layers.h's randomnessOff, removes drop-path nodes and changes
// routing, so such a bug vanished with them and read as rng-desync; validate keeps that rerun, having no engine
// of its own to correct.)
// A new EngineVariant hook is forwarded here too, or this rerun would correct it as if it were a draw.
#pragma once
#include <string>
#include <vector>

#include "harness/engine/engine_variant.h"

namespace ckpt {

class DrawsReplayed final : public EngineVariant {
 public:
  explicit DrawsReplayed(const EngineVariant& engine) : e_(engine) {}
  std::string name() const override { return e_.name() + " with its draws replayed"; }
  void rngForRecompute(Rng& rng, const RngState& atFirstForward) const override { rng.setState(atFirstForward); }
  void rngAfterRecompute(Rng& rng, const RngState& live) const override { rng.setState(live); }
  BlockEnv recomputeEnv(BlockEnv env) const override {
    BlockEnv e = e_.recomputeEnv(env);
    e.rng = env.rng;
    e.step = env.step;
    e.block = env.block;
    e.redrawOp.clear();
    return e;
  }
  int forwardInput(int block, bool recompute, const StepView& v) const override {
    return e_.forwardInput(block, recompute, v);
  }
  void beforeForward(int block, bool recompute, StepView& v) const override { e_.beforeForward(block, recompute, v); }
  void afterForward(int block, bool recompute, StepView& v) const override { e_.afterForward(block, recompute, v); }
  void afterBackward(int block, bool recomputed, StepView& v) const override { e_.afterBackward(block, recomputed, v); }
  bool reportInputGradient() const override { return e_.reportInputGradient(); }
  std::vector<int> sharedGradOrder(std::vector<int> users) const override {
    return e_.sharedGradOrder(std::move(users));
  }
  bool tiedHeadGradKept(bool firstBlockRecomputed) const override { return e_.tiedHeadGradKept(firstBlockRecomputed); }
  bool updatesFrozen() const override { return e_.updatesFrozen(); }

 private:
  const EngineVariant& e_;
};

}  // namespace ckpt
