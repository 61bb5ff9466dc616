// selective[:recompute=KIND,...] — op-level checkpointing inside every tape: a node whose context is dropped is
// rebuilt just before its block's backward (reference/block.h recomputeDropped). By default every node that is
// not a matrix product is dropped, as JAX's dots_saveable keeps only dot outputs; with recompute=... only the
// listed op kinds are dropped, as Megatron-LM's selective recompute (recompute=attention drops the attention
// scores, softmax and attention dropout, which are fused in the attention op here).
#include <algorithm>

#include "harness/engine/policy.h"
#include "harness/engine/policy_rule.h"
#include "reference/op_table.h"

namespace ckpt {
namespace {

KeepMask maskFor(const BlockProgram& p, const std::vector<std::string>& kinds) {
  KeepMask keep(static_cast<size_t>(p.size()), true);
  for (int k = 0; k < p.size(); ++k) {
    const NodeCost& node = p.nodes[static_cast<size_t>(k)];
    const bool drop =
        kinds.empty() ? !node.meta.isMatmul : std::find(kinds.begin(), kinds.end(), node.kind) != kinds.end();
    keep[static_cast<size_t>(k)] = !drop;
  }
  return keep;
}

}  // namespace

const std::vector<std::string>& selectableOpKinds() {
  // The kind() of every op a block can hold: the op table's.
  static const std::vector<std::string> kinds = opKindNames();
  return kinds;
}

std::vector<KeepMask> selectiveMasks(const ChainCost& c, const std::vector<std::string>& recomputeKinds) {
  std::vector<KeepMask> perProgram;
  perProgram.reserve(c.programs.size());
  for (const BlockProgram& p : c.programs) perProgram.push_back(maskFor(p, recomputeKinds));
  std::vector<KeepMask> masks;
  masks.reserve(static_cast<size_t>(c.layers()));
  for (int i = 0; i < c.layers(); ++i)
    masks.push_back(perProgram[static_cast<size_t>(c.programOf[static_cast<size_t>(i)])]);
  return masks;
}

// Not a block policy: it composes with one (or, alone, with store-all). verify draws its masks itself
// (harness/verify/policy_draw.cpp), alone and composed.
PolicyRule selectiveRule() {
  PolicyRule r;
  r.name = "selective";
  r.params = {{"recompute", false, "recompute=KIND,KIND... (op kinds)"}};
  r.byDefault = [](const ChainCost&) { return std::vector<std::string>{"selective", "uniform+selective"}; };
  return r;
}

}  // namespace ckpt
