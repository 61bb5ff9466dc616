#include "harness/engine/chain_costs_of.h"

#include <algorithm>
#include <string>

#include "reference/block_sim.h"

namespace ckpt {
namespace {

bool references(const SimTape& tape, int buffer) {
  if (tape.input == buffer) return true;
  if (std::find(tape.kept.begin(), tape.kept.end(), buffer) != tape.kept.end()) return true;
  return std::any_of(tape.contexts.begin(), tape.contexts.end(),
                     [&](const SimContext& ctx) { return std::find(ctx.begin(), ctx.end(), buffer) != ctx.end(); });
}

// One program's block: its tape walked over a pool of its own; node k is op k with its FLOPs, and the bytes the
// tape holds besides the boundaries go to the first op (a profile attributes them per producing op; the sum is
// what a placement's prediction reads).
ProfiledBlock profiledBlock(const BlockProgram& p) {
  BytePool pool;
  const int x = pool.allocate(p.inBytes);
  SimTape tape;
  const int y = simForward(pool, p, x, &tape, {});
  ProfiledBlock b;
  b.savesInput = references(tape, x);
  b.savesOutput = references(tape, y);
  pool.release(x);
  pool.release(y);
  const int64_t other = pool.live() - (b.savesInput ? p.inBytes : 0) - (b.savesOutput ? p.outBytes : 0);
  for (size_t k = 0; k < p.nodes.size(); ++k) {
    const NodeCost& n = p.nodes[k];
    b.ops.push_back({n.kind, k == 0 ? other : 0, n.meta.forwardFlops, n.meta.backwardFlops, n.meta.isMatmul});
  }
  b.forwardFlops = p.forwardFlops;
  b.backwardFlops = p.backwardFlops;
  return b;
}

}  // namespace

ChainCosts chainCostsOf(const ChainCost& c) {
  ChainCosts out;
  out.model = "ckptcheck chain";
  out.framework = "ckptcheck";
  std::vector<ProfiledBlock> byProgram;
  for (const BlockProgram& p : c.programs) byProgram.push_back(profiledBlock(p));
  out.boundaryBytes.push_back(c.inputBytes);
  for (int i = 0; i < c.layers(); ++i) {
    ProfiledBlock b = byProgram[static_cast<size_t>(c.programOf[static_cast<size_t>(i)])];
    b.name = "block" + std::to_string(i);
    out.blocks.push_back(std::move(b));
    out.boundaryBytes.push_back(c.block(i).outBytes);
  }
  out.after.savesBoundary = true;
  return out;
}

}  // namespace ckpt
