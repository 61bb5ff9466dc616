// A model: a chain of blocks, a loss, the step's input and targets, and the generator. Everything is derived
// deterministically from the CaseSpec (weights and data from Philox streams of their own, apart from dropout's).
#pragma once
#include <cmath>
#include <memory>
#include <vector>

#include "cases/case_spec.h"
#include "cases/compute_precision.h"
#include "cases/lm_case.h"
#include "cases/micro_batches.h"
#include "cases/param_sharing.h"
#include "reference/block_sim.h"
#include "reference/blocks.h"
#include "reference/gemm.h"
#include "reference/loss.h"
#include "reference/ops/cross_entropy.h"
#include "reference/ops/lm_head.h"
#include "reference/ops/mse.h"
#include "reference/ops/token_stem.h"
#include "reference/param_steps.h"

namespace ckpt {

// The numerics every forward and recompute of the case's blocks runs under: its compute precision
// (cases/compute_precision.h). The stem and the loss (an LM head included) are outside the chain and stay exact.
inline Numerics caseNumerics(const CaseSpec& c) {
  Numerics n;
  n.bf16Inputs = bf16Compute(c);
  return n;
}

// Streams for initialisation, apart from every stream dropout can reach (those use subsequences < 2^60).
inline constexpr uint64_t kInitSubsequence = uint64_t{1} << 62;

template <class T>
struct Chain {
  CaseSpec spec;
  std::vector<Block<T>> blocks;
  std::unique_ptr<Loss<T>> loss;  // over the whole batch (the targets an adapter is handed)
  // With micro-batches (cases/micro_batches.h), micro-batch m's loss: its rows' targets, divided by M.
  std::vector<std::unique_ptr<Loss<T>>> microLosses;
  Mat<T> input;  // (rows, width); empty for a token case
  Rng rng{RngModel::kStateful, 0};
  // Token cases (cases/lm_case.h): the ids (rows), the embedding stem before x_0, and the LM head's parameters
  // (the head itself is `loss`).
  std::vector<int> tokens;
  std::unique_ptr<TokenStem<T>> stem;
  std::shared_ptr<LmHeadParams<T>> head;

  int size() const { return static_cast<int>(blocks.size()); }
  int microBatches() const { return static_cast<int>(spec.microBatches); }
  // Every activation is a micro-batch's: (microRows, width); the whole batch's without micro-batches.
  Shape boundaryShape() const { return {spec.microRows(), spec.width}; }
  Loss<T>& lossOf(int m) const { return microLosses.empty() ? *loss : *microLosses.at(static_cast<size_t>(m)); }
  // x_0 of micro-batch m, charged to the current meter (a token case's stem runs here, its FLOPs counted into
  // the meter's phase).
  Tensor<T> inputOf(int m) const {
    const int64_t first = microBatchFirstRow(spec, m);
    if (stem) return stem->forward(tokens.data() + first, first, spec.microRows());
    return Tensor<T>::from(input.middleRows(first, spec.microRows()));
  }
  // After micro-batch m's backward: a token case whose embedding trains takes dL/dx_0 into the embeddings'
  // gradients. Returns whether it did (dx_0 is then consumed).
  bool stemBackward(int m, const Tensor<T>& g0) {
    if (!stem || !embeddingTrains(spec)) return false;
    const int64_t first = microBatchFirstRow(spec, m);
    stem->backward(tokens.data() + first, first, g0);
    return true;
  }

  // Every parameter copy, model order: the stem's, every block's, the head's. A block that shares another's
  // parameters holds its own copy, equal to the owner's at every step start (cases/param_sharing.h; the owner's
  // gradient is the sum of the copies', reduceSharedGrads in step.h); so does a tied head (cases/lm_case.h).
  std::vector<Param<T>*> params() {
    std::vector<Param<T>*> ps = stemParams();
    for (int i = 0; i < size(); ++i)
      for (auto* p : blockParams(i)) ps.push_back(p);
    for (auto* p : headParams()) ps.push_back(p);
    return ps;
  }
  std::vector<Param<T>*> stemParams() { return stem ? stem->params() : std::vector<Param<T>*>{}; }
  std::vector<Param<T>*> headParams() { return loss ? loss->params() : std::vector<Param<T>*>{}; }
  std::vector<Param<T>*> blockParams(int i) {
    std::vector<Param<T>*> ps;
    for (auto& n : blocks.at(static_cast<size_t>(i)).nodes)
      for (auto* p : n.op->params()) ps.push_back(p);
    return ps;
  }
  // The parameters that train, model order (reference/param_steps.h).
  std::vector<Param<T>*> trainedParams();
  std::vector<Buffer<T>*> buffers() {
    std::vector<Buffer<T>*> bs;
    for (auto& b : blocks)
      for (auto& n : b.nodes)
        for (auto* p : n.op->buffers()) bs.push_back(p);
    return bs;
  }
  // The loss trackers (reference/aux_loss.h: an moe block's auxiliary loss), model order; they
  // join each pass's loss (MicroBatchSums::add) and start each pass at zero (zeroGrads).
  std::vector<Buffer<T>*> auxLossBuffers() {
    std::vector<Buffer<T>*> bs;
    for (auto* b : buffers())
      if (isAuxLossBuffer(b->name)) bs.push_back(b);
    return bs;
  }
  // `loss` plus every tracker, added in model order (as it is without any).
  T withAuxLoss(T loss) {
    for (auto* b : auxLossBuffers()) loss = loss + b->value(0, 0);
    return loss;
  }
  std::vector<BlockProgram> programs() const {
    std::vector<BlockProgram> ps;
    for (const auto& b : blocks) ps.push_back(blockProgram(b, boundaryShape()));
    return ps;
  }
};

// reference/param_steps.h's parameter set on a CPU chain: Eigen matrices, the chain's parameter lists.
template <class T>
struct CpuParamSet {
  using Param = ckpt::Param<T>;
  Chain<T>& c;

  const CaseSpec& spec() const { return c.spec; }
  std::vector<Param*> stemParams() { return c.stemParams(); }
  std::vector<Param*> blockParams(int i) { return c.blockParams(i); }
  std::vector<Param*> headParams() { return c.headParams(); }
  Param* tiedWeight() { return tiedHead(c.spec) ? &c.head->weight : nullptr; }
  Param* embedding() { return c.stem ? &c.stem->embedding() : nullptr; }
  void add(Mat<T>& dst, const Mat<T>& src) { dst += src; }
  void copy(Mat<T>& dst, const Mat<T>& src) { dst = src; }
  void zero(Mat<T>& dst) { dst.setZero(); }
  void update(Param& p) { p.value -= static_cast<T>(c.spec.lr) * p.grad; }
};

template <class T>
std::vector<Param<T>*> Chain<T>::trainedParams() {
  CpuParamSet<T> s{*this};
  return param_steps::trainedParams(s);
}

// Every sharing block's parameter copies take their owner's values (cases/param_sharing.h), and a tied head's
// weight the token embedding's (cases/lm_case.h).
template <class T>
void syncSharedValues(Chain<T>& c) {
  CpuParamSet<T> s{c};
  param_steps::syncSharedValues(s);
}

// Uniform in [-bound, bound] from stream `stream` of the init generator.
template <class T>
void fillUniform(Mat<T>& m, uint64_t seed, uint64_t stream, double bound, double center = 0.0) {
  std::vector<float> u(static_cast<size_t>(m.size()));
  philoxUniforms(seed, kInitSubsequence + stream, 0, m.size(), u.data());
  for (int64_t i = 0; i < m.size(); ++i)
    m.data()[i] = static_cast<T>(center + bound * (2.0 * static_cast<double>(u[static_cast<size_t>(i)]) - 1.0));
}

template <class T>
Chain<T> buildChain(const CaseSpec& spec) {
  useOneGemmThread();  // every model's products on the thread that runs it (reference/gemm.h)
  Chain<T> c;
  c.spec = spec;
  for (size_t i = 0; i < spec.blocks.size(); ++i)
    c.blocks.push_back(makeBlock<T>(spec.blocks[i], spec, static_cast<int>(i)));
  const bool lm = isLanguageModel(spec);
  if (lm) {
    c.stem = std::make_unique<TokenStem<T>>(spec.vocab, spec.seq, spec.width);
    c.head = std::make_shared<LmHeadParams<T>>(spec.vocab, spec.width);
  }
  std::vector<int> labels(static_cast<size_t>(spec.rows()));
  for (int64_t i = 0; i < spec.rows(); ++i)
    labels[static_cast<size_t>(i)] = static_cast<int>(philoxBits(spec.seed, kInitSubsequence + 1000001, i) %
                                                      static_cast<uint32_t>(lossClasses(spec)));
  // The head is the loss; it is built before the parameters are drawn so they are drawn with the others.
  if (lm) c.loss = std::make_unique<LmHeadLoss<T>>(c.head, labels, headWeightTrains(spec));
  uint64_t stream = 0;
  // PyTorch's Linear bound 1/sqrt(fan_in); norms start near (1, 0) but not at it, so their gradients are
  // exercised in full.
  for (auto* p : c.params()) {
    const bool norm = p->name.find("ln") != std::string::npos || p->name.find(".bn.") != std::string::npos;
    const bool bias = p->name.size() > 5 && p->name.compare(p->name.size() - 5, 5, ".bias") == 0;
    if (norm) fillUniform(p->value, spec.seed, stream++, 0.1, bias ? 0.0 : 1.0);
    else fillUniform(p->value, spec.seed, stream++, 1.0 / std::sqrt(static_cast<double>(p->value.cols())));
    p->grad.setZero();
  }
  // Sharing blocks start from their owner's values (their own draws above are discarded, so the streams of
  // every other parameter stay those of the case without sharing); so does a tied head.
  syncSharedValues(c);
  if (lm) {
    c.tokens = spec.tokens;
    if (c.tokens.empty())
      for (int64_t i = 0; i < spec.rows(); ++i)
        c.tokens.push_back(
            static_cast<int>(philoxBits(spec.seed, kInitSubsequence + 1000003, i) % static_cast<uint32_t>(spec.vocab)));
  } else {
    c.input = Mat<T>(spec.rows(), spec.width);
    fillUniform(c.input, spec.seed, 1000000, 1.0);
  }
  if (!lm && spec.loss == LossKind::kCrossEntropy) {
    c.loss = std::make_unique<CrossEntropyLoss<T>>(labels);
  } else if (!lm) {
    Mat<T> target(spec.rows(), spec.width);
    fillUniform(target, spec.seed, 1000002, 1.0);
    c.loss = std::make_unique<MseLoss<T>>(target);
  }
  if (spec.microBatches > 1)
    for (int m = 0; m < c.microBatches(); ++m)
      c.microLosses.push_back(c.loss->microBatch(microBatchFirstRow(spec, m), spec.microRows(), spec.microBatches));
  c.rng = Rng(spec.rng, spec.seed);
  return c;
}

// Compiled once, in reference/instantiate.cpp: building a chain instantiates every op for both scalars, which
// cost each including translation unit most of a minute.
extern template Chain<float> buildChain<float>(const CaseSpec&);
extern template Chain<double> buildChain<double>(const CaseSpec&);

}  // namespace ckpt
