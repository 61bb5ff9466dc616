// A case: the model, data and training settings one verification runs. cases/SCHEMA.md documents the JSON.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/rng_model.h"

namespace ckpt {

// A block kind is its record (cases/block_kind.h): one file in cases/kinds/, one line in cases/kinds/table.cpp.
// Code outside those files never names a kind; it asks the record.
struct BlockKindDef;
using BlockKind = const BlockKindDef*;
// The first registered kind (mlp), the simplest: what a BlockSpec is until a kind is set.
BlockKind firstBlockKind();

enum class Activation { kRelu, kGelu, kTanh, kRrelu };
enum class LossKind { kCrossEntropy, kMse };
enum class DType { kFloat, kDouble };
// What feeds x_0 (cases/lm_case.h): a dense random matrix, or token ids through an embedding stem.
enum class InputKind { kDense, kTokens };
// The precision of the matrix products (cases/compute_precision.h): the dtype's own, or bfloat16 operands with
// float accumulation (autocast).
enum class Compute { kExact, kBf16 };

// A block's fields, of every kind; each kind parses, prints and draws its own (cases/kinds/) and leaves the
// others at their defaults.
struct BlockSpec {
  BlockKind kind = firstBlockKind();
  Activation activation = Activation::kGelu;  // mlp only
  int heads = 1;                              // transformer only
  // Stochastic depth (cases/stochastic_layers.h): the block's residual branch is dropped per sample with this
  // probability; residual-bn and transformer only.
  double dropPath = 0;
  // Mixture of experts (moe only, cases/kinds/moe.cpp): experts, how many each token goes to, each expert's buffer
  // size as a multiple of its fair share, the router's multiplicative input jitter and the load-balancing loss's
  // coefficient.
  int experts = 4;
  int topK = 1;
  double capacityFactor = 1.25;
  double routerJitter = 0;
  double auxLossCoef = 0.01;
  // Fields of every kind (cases/param_sharing.h): the block's parameters take no gradient and no update (its
  // input gradient still flows); the block uses block `share`'s parameters (an earlier block of its kind that
  // shares none itself; -1: its own), so their gradients add up over every block that uses them.
  bool frozen = false;
  int share = -1;
  bool operator==(const BlockSpec&) const = default;
};

struct CaseSpec {
  std::string name = "case";
  int64_t batch = 2;
  int64_t seq = 1;  // tokens per sequence; activations are (batch * seq, width)
  int64_t width = 8;
  std::vector<BlockSpec> blocks;
  LossKind loss = LossKind::kCrossEntropy;
  uint64_t seed = 1;
  RngModel rng = RngModel::kStateful;
  double dropout = 0.0;  // every Dropout op, attention-probability dropout included
  double lr = 0.01;
  int steps = 1;
  DType dtype = DType::kDouble;
  // Whether the chain input requires a gradient. false: the input is data (pixels, frozen embeddings), dL/dx_0
  // is neither computed into the results nor compared, and a block before which nothing trains has an input
  // that requires no gradient (the setting of reentrant checkpoint's missing-gradient bug).
  bool inputGrad = true;
  // Gradient accumulation (cases/micro_batches.h): the step runs M micro-batches of batch / M whole sequences
  // each, each loss divided by M, and adds their gradients before the one SGD update. Every activation shape is a
  // micro-batch's, microRows() rows.
  int64_t microBatches = 1;
  // Language-model cases (cases/lm_case.h): token ids in [0, vocab) embedded (plus a learned position embedding)
  // into x_0, and after the chain a final LayerNorm and an LM head over the vocabulary, optionally tied to the
  // token embedding. With tokens, inputGrad says whether the embeddings train (not "frozen_embedding"), and
  // `tokens` holds the case's inline ids (empty: drawn from the case's own stream).
  InputKind input = InputKind::kDense;
  int64_t vocab = 0;
  bool tieEmbeddings = false;
  std::vector<int> tokens;
  // RReLU's slope range (cases/stochastic_layers.h): each element's negative slope is uniform in [lower, upper]
  // in training, PyTorch's nn.RReLU defaults.
  double rreluLower = 0.125;
  double rreluUpper = 1.0 / 3.0;
  Compute compute = Compute::kExact;

  int64_t rows() const { return batch * seq; }
  int64_t microRows() const { return rows() / microBatches; }
  bool operator==(const CaseSpec&) const = default;
};

const char* blockKindName(BlockKind k);
const char* activationName(Activation a);
const char* lossKindName(LossKind k);
const char* dtypeName(DType d);

}  // namespace ckpt
