// What a policy and the planner know of a chain: per block, its BlockProgram (reference/block_sim.h), plus the
// boundary and loss sizes. Distinct programs are stored once, so a homogeneous chain of 10^6 blocks is cheap.
#pragma once
#include <cstdint>
#include <vector>

#include "reference/block_sim.h"
#include "reference/chain.h"

namespace ckpt {

struct LossCost {
  int64_t inBytes = 0;  // x_L and g_L
  OpMeta meta;          // savesInputs, contextExtraBytes, FLOPs
};

struct ChainCost {
  std::vector<BlockProgram> programs;  // distinct block programs
  std::vector<int> programOf;          // per block: index into programs
  int64_t inputBytes = 0;              // x_0
  LossCost loss;
  // A token case's stem (cases/lm_case.h): its forward before block 0, its backward after block 0's. It
  // allocates only x_0, already inputBytes.
  int64_t stemForwardFlops = 0, stemBackwardFlops = 0;
  // The passes of one step (cases/micro_batches.h): every size above is one micro-batch's, and each runs the
  // schedule once.
  int64_t microBatches = 1;

  int layers() const { return static_cast<int>(programOf.size()); }
  const BlockProgram& block(int i) const { return programs[static_cast<size_t>(programOf[static_cast<size_t>(i)])]; }
};

// The stem's FLOPs of a token case (zero for a dense one; no backward when the embedding is frozen).
void setStemFlops(ChainCost& cc, const CaseSpec& spec);

template <class T>
ChainCost chainCost(const Chain<T>& c) {
  ChainCost cc;
  for (const auto& b : c.blocks) {
    cc.programs.push_back(blockProgram(b, c.boundaryShape()));
    cc.programOf.push_back(static_cast<int>(cc.programs.size()) - 1);
  }
  cc.inputBytes = c.boundaryShape().size() * static_cast<int64_t>(sizeof(T));
  cc.loss.inBytes = cc.inputBytes;
  cc.loss.meta = c.lossOf(0).meta(c.boundaryShape());
  setStemFlops(cc, c.spec);
  cc.microBatches = c.spec.microBatches;
  return cc;
}

// The cost model of a case without building its chain: one block is built per distinct BlockSpec to read its
// program (equal to chainCost(buildChain(spec)) block for block).
ChainCost caseChainCost(const CaseSpec& spec);

// A homogeneous chain of `layers` identical blocks of `spec.blocks[0]`'s kind, planned only: one block is built
// to read its program, never the chain.
ChainCost homogeneousChainCost(const CaseSpec& spec, int64_t layers);

}  // namespace ckpt
