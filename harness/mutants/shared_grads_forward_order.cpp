// shared-grads-forward-order: the gradient of a parameter several blocks use is summed in block (forward) order,
// (g_owner + g_next) + ..., instead of the order backward reaches the blocks, as an engine does that accumulates
// each recomputed segment's contributions in its own buffer and adds the buffers up afterwards. Floating-point
// addition is not associative, so with three or more users the sum differs in its last bits from the one the
// store-everything run (and autograd) computes.
// Real world: ALBERT-style cross-layer sharing under checkpointing; a recompute must not change the
// accumulation order (the shared-weight requirement of ckptcheck's issue "Model zoo I"; PyTorch's reentrant
// checkpoint accumulates a region's contributions inside the region's own backward before adding them to .grad).
#include <algorithm>

#include "harness/mutants/catalog.h"

namespace ckpt::mutants {
namespace {

class SharedGradsForwardOrder final : public EngineVariant {
 public:
  std::string name() const override { return "shared-grads-forward-order"; }
  std::vector<int> sharedGradOrder(std::vector<int> users) const override {
    std::reverse(users.begin(), users.end());
    return users;
  }
};

}  // namespace

Mutant sharedGradsForwardOrder() {
  return {"shared-grads-forward-order",
          "a shared parameter's gradient is summed in block order, not in the order backward reaches its users",
          "gradient accumulation order of shared (ALBERT-style) weights changed by per-segment accumulation",
          "parameters shared by three or more blocks",
          // Class rounding-level: a shared parameter's uses added in another order: the sums differ by an ULP or two
          // of their scale, which is what a summation order does and all it does.
          "bitwise-equal", FindingClass::kRoundingLevel, [] { return std::make_unique<SharedGradsForwardOrder>(); }};
}

}  // namespace ckpt::mutants
