// The planner's tensor-free block simulator must predict, byte for byte, what the runtime allocates: after the
// forward (with and without a tape, under any keep mask), after an op-level recompute, and after the backward,
// both the live bytes and the high-water mark.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "reference/block_sim.h"
#include "reference/chain.h"

namespace ckpt {
namespace {

struct Bytes {
  int64_t live, peak;
  bool operator==(const Bytes&) const = default;
};
std::ostream& operator<<(std::ostream& os, const Bytes& b) {
  return os << "{live " << b.live << ", peak " << b.peak << "}";
}

template <class T>
std::vector<Bytes> runReal(Chain<T>& c, int blockIndex, const KeepMask& keep, bool tapeMode) {
  std::vector<Bytes> out;
  ActivationMeter meter;
  MeterScope scope(&meter);
  Block<T>& b = c.blocks[blockIndex];
  BlockEnv env{&c.rng, 0, blockIndex, true, {}, {}};
  Tensor<T> x = Tensor<T>::from(c.input);
  BlockTape<T> tape;
  Tensor<T> y = blockForward(b, x, tapeMode ? &tape : nullptr, keep, env);
  out.push_back({meter.live(), meter.peak()});
  if (!tapeMode) return out;
  recomputeDropped(b, tape, env);
  out.push_back({meter.live(), meter.peak()});
  Tensor<T> dy = Tensor<T>::from(Mat<T>::Ones(y.rows(), y.cols()));
  y.reset();
  Tensor<T> dx = blockBackward(b, std::move(tape), std::move(dy));
  out.push_back({meter.live(), meter.peak()});
  return out;
}

std::vector<Bytes> runSim(const BlockProgram& p, const KeepMask& keep, bool tapeMode) {
  std::vector<Bytes> out;
  BytePool pool;
  const int x = pool.allocate(p.inBytes);
  SimTape tape;
  const int y = simForward(pool, p, x, tapeMode ? &tape : nullptr, keep);
  out.push_back({pool.live(), pool.peak()});
  if (!tapeMode) return out;
  simRecomputeDropped(pool, p, tape);
  out.push_back({pool.live(), pool.peak()});
  const int dy = pool.allocate(p.outBytes);
  pool.release(y);
  simBackward(pool, p, std::move(tape), dy);
  out.push_back({pool.live(), pool.peak()});
  return out;
}

CaseSpec caseWith(BlockKind kind, DType dtype, double dropout) {
  CaseSpec c;
  c.batch = 3;
  c.seq = 4;
  c.width = 8;
  c.dtype = dtype;
  c.dropout = dropout;
  BlockSpec s;
  s.kind = kind;
  s.heads = 2;
  c.blocks = {s};
  return c;
}

template <class T>
void checkAgreement(const CaseSpec& spec, const std::vector<bool>& maskBits, bool tapeMode) {
  Chain<T> c = buildChain<T>(spec);
  const BlockProgram p = blockProgram(c.blocks[0], c.boundaryShape());
  KeepMask keep(maskBits.begin(), maskBits.begin() + std::min<size_t>(maskBits.size(), p.nodes.size()));
  keep.resize(p.nodes.size(), true);
  const auto real = runReal(c, 0, keep, tapeMode);
  const auto sim = runSim(p, keep, tapeMode);
  RC_ASSERT(real == sim);
}

RC_GTEST_PROP(BlockSim, predictsRuntimeBytesExactly, ()) {
  const auto kind = *rc::gen::element(blockKind("mlp"), blockKind("residual-bn"), blockKind("transformer"));
  const auto dtype = *rc::gen::element(DType::kFloat, DType::kDouble);
  const double dropout = *rc::gen::element(0.0, 0.25);
  const auto mask = *rc::gen::container<std::vector<bool>>(12, rc::gen::arbitrary<bool>());
  const bool tapeMode = *rc::gen::arbitrary<bool>();
  RC_TAG(blockKindName(kind));
  const CaseSpec spec = caseWith(kind, dtype, dropout);
  if (dtype == DType::kFloat) checkAgreement<float>(spec, mask, tapeMode);
  else checkAgreement<double>(spec, mask, tapeMode);
}

TEST(BlockSim, droppedFlopsAreTheDroppedNodesForwardFlops) {
  Chain<double> c = buildChain<double>(caseWith(blockKind("transformer"), DType::kDouble, 0.1));
  const BlockProgram p = blockProgram(c.blocks[0], c.boundaryShape());
  EXPECT_EQ(droppedForwardFlops(p, {}), 0);
  KeepMask none(p.nodes.size(), false);
  EXPECT_EQ(droppedForwardFlops(p, none), p.forwardFlops);
}

}  // namespace
}  // namespace ckpt
