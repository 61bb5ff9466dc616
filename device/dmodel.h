// What the device runtime is given: a chain described without Eigen, so nvcc never compiles the CPU reference's
// headers (harness/engine/device_bridge.h builds a DeviceModel from a reference Chain and turns results back
// into StepResults).
// Every number an op needs is here: its attributes, its parameters' and buffers' initial values, and its FLOP
// counts, computed by the reference op's meta() for the chain's fixed shapes (so device FLOP counts are the
// reference's by construction).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "cases/case_spec.h"
#include "cases/op_node.h"
#include "reference/meter.h"
#include "reference/rng.h"

namespace ckpt::gpu {

template <class T>
struct HostMatrix {
  std::string name;
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<T> data;  // row-major
};

template <class T>
struct DNodeDesc {
  std::string name;  // with the block's prefix, as the reference node's
  // The node as its block kind stated it (cases/op_node.h): node.op is the reference op's kind(), which names the
  // device op (device/dops.h); node.inputs are value ids as reference/block.h's; the device op reads its
  // attributes through node's named accessors, as the reference op table's line does.
  OpNode node;
  int64_t forwardFlops = 0;
  int64_t backwardFlops = 0;
  std::vector<HostMatrix<T>> params;   // reference op's params() order
  std::vector<HostMatrix<T>> buffers;  // reference op's buffers() order
};

template <class T>
struct DBlockDesc {
  std::string kind;
  std::vector<DNodeDesc<T>> nodes;
};

// kLmHead: a language-model case's head (reference/ops/lm_head.h), whose parameters are the model's DHeadDesc.
enum class DLossKind { kCrossEntropy, kMse, kLmHead };

template <class T>
struct DLossDesc {
  DLossKind kind = DLossKind::kCrossEntropy;
  std::vector<int> labels;  // cross-entropy, LM head
  HostMatrix<T> target;     // mse
  int64_t divisor = 1;      // micro-batches: the value divided by it, the gradient scaled by its inverse
  int64_t forwardFlops = 0;
  int64_t backwardFlops = 0;
};

// A language-model case's stem (reference/ops/token_stem.h, cases/lm_case.h): what feeds x_0 instead of a
// dense input. The rules (which parameters train, whether the head is tied) are read by the bridge from
// cases/lm_case.h and handed over as flags, so nothing here needs the case parser.
template <class T>
struct DStemDesc {
  HostMatrix<T> emb, pos;   // the token embedding (vocab, width) and the position embedding (seq, width)
  std::vector<int> tokens;  // every row's id, the whole batch
  bool trains = false;      // embeddingTrains: backward runs, E and P take gradients and move
  // Per micro-batch, TokenStem's own counts for the micro-batch's x_0 (the backward's only when it trains).
  int64_t forwardFlops = 0, backwardFlops = 0;
};

// The LM head's parameters, shared by every micro-batch's kLmHead loss.
template <class T>
struct DHeadDesc {
  HostMatrix<T> lnWeight, lnBias, weight;  // weight (vocab, width): a tied head's own copy of E
  bool tied = false;         // weight is the token embedding (its gradient goes into E's, E's value into it)
  bool trainsWeight = true;  // the head computes dW (not for a tied head whose embedding is frozen)
  double eps = 1e-5;         // the final LayerNorm's (reference/ops/lm_head.h's constant)
};

template <class T>
struct DeviceModel {
  CaseSpec spec;
  std::vector<DBlockDesc<T>> blocks;
  std::vector<DLossDesc<T>> losses;  // one per micro-batch (cases/micro_batches.h), its rows' targets
  HostMatrix<T> input;               // x_0 (rows, width): every micro-batch's rows; empty for a token case
  bool tokens = false;               // a language-model case: `stem` feeds x_0 and the losses are kLmHead over `head`
  DStemDesc<T> stem;
  DHeadDesc<T> head;
  bool reportsInputGrad = false;  // cases/lm_case.h's inputGradReported: a dense input that requires a gradient
  RngModel rngModel = RngModel::kStateful;
  RngState rng;  // the generator at the start of training
};

// What a device step downloads for comparison (reference/step.h's StepResult without Eigen; the generator and
// the measurements are the executor's, which runs in harness/engine/executor.h).
template <class T>
struct DeviceValues {
  T loss = 0;
  std::vector<HostMatrix<T>> grads;
  HostMatrix<T> inputGrad;
  std::vector<HostMatrix<T>> state;
};

}  // namespace ckpt::gpu
