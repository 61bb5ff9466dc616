// frozen-params-updated: the optimiser steps every parameter that has a gradient buffer, frozen ones included.
// The engine computes gradients of frozen blocks' parameters anyway (their input gradient needs the same
// backward), so the update moves weights the user froze; the first step is unchanged and the second sees it.
// Real world: optimisers built over model.parameters() instead of the trainable ones with stale .grad buffers
// (PyTorch forum reports; DeepSpeed issue 2615: frozen parameters updated under ZeRO).
#include "harness/mutants/catalog.h"

namespace ckpt::mutants {
namespace {

class FrozenParamsUpdated final : public EngineVariant {
 public:
  std::string name() const override { return "frozen-params-updated"; }
  bool updatesFrozen() const override { return true; }
};

}  // namespace

Mutant frozenParamsUpdated() {
  return {"frozen-params-updated", "SGD also moves frozen parameters (their gradients are computed anyway)",
          "optimisers over every parameter with a gradient buffer (DeepSpeed issue 2615)",
          "a frozen block and two or more steps",
          // Class semantic: frozen weights moved by the first step: the second step computes another function.
          "bitwise-equal", FindingClass::kSemantic, [] { return std::make_unique<FrozenParamsUpdated>(); }};
}

}  // namespace ckpt::mutants
