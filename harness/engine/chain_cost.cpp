#include "harness/engine/chain_cost.h"

#include "common/input_error.h"
#include "harness/dtype_dispatch.h"

namespace ckpt {
namespace {

// Boundary and loss costs of a case; the block programs are the caller's.
template <class T>
ChainCost withoutBlocks(const CaseSpec& spec) {
  const Shape x{spec.microRows(), spec.width};
  ChainCost cc;
  cc.inputBytes = x.size() * static_cast<int64_t>(sizeof(T));
  cc.loss.inBytes = cc.inputBytes;
  cc.microBatches = spec.microBatches;
  // A loss's metadata depends on shapes (and the micro-batch divisor) only, so empty labels/targets suffice.
  setStemFlops(cc, spec);
  if (isLanguageModel(spec))
    cc.loss.meta =
        LmHeadLoss<T>(std::make_shared<LmHeadParams<T>>(spec.vocab, 1), {}, headWeightTrains(spec), spec.microBatches)
            .meta(x);
  else if (spec.loss == LossKind::kCrossEntropy) cc.loss.meta = CrossEntropyLoss<T>({}, spec.microBatches).meta(x);
  else cc.loss.meta = MseLoss<T>(Mat<T>(), spec.microBatches).meta(x);
  return cc;
}

// The program of a block built alone: its parameters are allocated to read its op metadata, nothing else.
template <class T>
BlockProgram programOf(const BlockSpec& b, const CaseSpec& spec) {
  return blockProgram(makeBlock<T>(b, spec, 0), Shape{spec.microRows(), spec.width});
}

template <class T>
ChainCost fromCase(const CaseSpec& spec) {
  ChainCost cc = withoutBlocks<T>(spec);
  std::vector<BlockSpec> distinct;
  for (const BlockSpec& b : spec.blocks) {
    size_t k = 0;
    while (k < distinct.size() && !(distinct[k] == b)) ++k;
    if (k == distinct.size()) {
      distinct.push_back(b);
      cc.programs.push_back(programOf<T>(b, spec));
    }
    cc.programOf.push_back(static_cast<int>(k));
  }
  return cc;
}

template <class T>
ChainCost homogeneous(const CaseSpec& spec, int64_t layers) {
  ChainCost cc = withoutBlocks<T>(spec);
  cc.programs.push_back(programOf<T>(spec.blocks[0], spec));
  cc.programOf.assign(static_cast<size_t>(layers), 0);
  return cc;
}

}  // namespace

void setStemFlops(ChainCost& cc, const CaseSpec& spec) {
  if (!isLanguageModel(spec)) return;
  const Shape x{spec.microRows(), spec.width};
  cc.stemForwardFlops = TokenStem<double>::forwardFlops(x);
  cc.stemBackwardFlops = embeddingTrains(spec) ? TokenStem<double>::backwardFlops(x) : 0;
}

ChainCost caseChainCost(const CaseSpec& spec) {
  if (spec.blocks.empty()) throw InputError("case '" + spec.name + "': no blocks");
  return withScalar(spec.dtype, [&](auto t) { return fromCase<decltype(t)>(spec); });
}

ChainCost homogeneousChainCost(const CaseSpec& spec, int64_t layers) {
  if (spec.blocks.empty()) throw InputError("homogeneous chain: the spec has no block to repeat");
  if (layers < 1 || layers > (int64_t{1} << 30))
    throw InputError("homogeneous chain: layers must be in [1, 2^30], got " + std::to_string(layers));
  return withScalar(spec.dtype, [&](auto t) { return homogeneous<decltype(t)>(spec, layers); });
}

}  // namespace ckpt
