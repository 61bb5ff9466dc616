// Between the CPU reference (Eigen) and the Eigen-free device runtime, for host code only (g++): a reference
// Chain becomes a DeviceModel (its ops' attributes and kinds, initial parameters and buffers, and meta() FLOPs
// for the chain's shapes), and a device step's downloaded DeviceValues a reference StepResult, so every
// comparison the engine has applies to device runs unchanged. Here in harness/ rather than in device/
// so that the device backend depends on the reference only, never on the harness.
#pragma once
#include <stdexcept>
#include <string>
#include <vector>

#include "device/dmodel.h"
#include "reference/chain.h"
#include "reference/op_table.h"
#include "reference/step.h"

namespace ckpt::gpu {

template <class T>
HostMatrix<T> toHostMatrix(const std::string& name, const Mat<T>& m) {
  return HostMatrix<T>{name, m.rows(), m.cols(), std::vector<T>(m.data(), m.data() + m.size())};
}

template <class T>
Mat<T> toMat(const HostMatrix<T>& m) {
  Mat<T> r(m.rows, m.cols);
  if (m.rows * m.cols > 0) std::copy(m.data.begin(), m.data.end(), r.data());
  return r;
}

template <class T>
DNodeDesc<T> describeNode(Node<T>& node, std::span<const Shape> in) {
  DNodeDesc<T> d;
  d.name = node.name;
  d.node = node.spec;  // the device op reads its attributes from it, as the op table's line does
  Op<T>* op = node.op.get();
  if (d.node.op != op->kind())
    throw std::logic_error("device backend: node '" + node.name + "' was built as '" + op->kind() +
                           "' but its OpNode names '" + d.node.op + "'");
  const OpMeta m = op->meta(in);
  d.forwardFlops = m.forwardFlops;
  d.backwardFlops = m.backwardFlops;
  for (auto* p : op->params()) d.params.push_back(toHostMatrix(p->name, p->value));
  for (auto* b : op->buffers()) d.buffers.push_back(toHostMatrix(b->name, b->value));
  return d;
}

// One micro-batch's loss (cases/micro_batches.h): its targets, divisor and FLOPs.
template <class T>
DLossDesc<T> describeLoss(const Loss<T>& loss, Shape x, int64_t divisor) {
  DLossDesc<T> d;
  const OpMeta lm = loss.meta(x);
  d.forwardFlops = lm.forwardFlops;
  d.backwardFlops = lm.backwardFlops;
  d.divisor = divisor;
  if (auto* lm = dynamic_cast<const LmHeadLoss<T>*>(&loss)) {
    d.kind = DLossKind::kLmHead;  // its parameters are the model's DHeadDesc
    d.labels = lm->labels();
  } else if (auto* ce = dynamic_cast<const CrossEntropyLoss<T>*>(&loss)) {
    d.kind = DLossKind::kCrossEntropy;
    d.labels = ce->labels();
  } else if (auto* mse = dynamic_cast<const MseLoss<T>*>(&loss)) {
    d.kind = DLossKind::kMse;
    d.target = toHostMatrix("target", mse->target());
  } else {
    throw std::invalid_argument("device backend: no device loss for '" + loss.kind() + "'");
  }
  return d;
}

// A token case's stem and head (cases/lm_case.h's rules decided here, handed to the device as flags), with the
// stem's FLOPs for one micro-batch's x_0 from TokenStem itself.
template <class T>
void describeLanguageModel(Chain<T>& c, DeviceModel<T>& m) {
  m.tokens = true;
  TokenStem<T>& stem = *c.stem;
  m.stem.emb = toHostMatrix(stem.embedding().name, stem.embedding().value);
  Param<T>* pos = stem.params().at(1);
  m.stem.pos = toHostMatrix(pos->name, pos->value);
  m.stem.tokens = c.tokens;
  m.stem.trains = embeddingTrains(c.spec);
  m.stem.forwardFlops = TokenStem<T>::forwardFlops(c.boundaryShape());
  m.stem.backwardFlops = TokenStem<T>::backwardFlops(c.boundaryShape());
  const LmHeadParams<T>& h = *c.head;
  m.head.lnWeight = toHostMatrix(h.lnWeight.name, h.lnWeight.value);
  m.head.lnBias = toHostMatrix(h.lnBias.name, h.lnBias.value);
  m.head.weight = toHostMatrix(h.weight.name, h.weight.value);
  m.head.tied = tiedHead(c.spec);
  m.head.trainsWeight = headWeightTrains(c.spec);
}

// The chain as it is now (its current weights, buffers and generator).
template <class T>
DeviceModel<T> describeChain(Chain<T>& c) {
  DeviceModel<T> m;
  m.spec = c.spec;
  const Shape x = c.boundaryShape();
  for (auto& b : c.blocks) {
    DBlockDesc<T> bd;
    bd.kind = b.kind;
    std::vector<Shape> values;
    for (auto& node : b.nodes) {
      const std::vector<Shape> in = inputShapes(node, values, x);
      bd.nodes.push_back(describeNode(node, in));
      values.push_back(node.op->meta(in).out);
    }
    m.blocks.push_back(std::move(bd));
  }
  for (int mb = 0; mb < c.microBatches(); ++mb) m.losses.push_back(describeLoss(c.lossOf(mb), x, c.spec.microBatches));
  m.input = toHostMatrix("input", c.input);
  m.reportsInputGrad = inputGradReported(c.spec);
  if (isLanguageModel(c.spec)) describeLanguageModel(c, m);
  m.rngModel = c.rng.model();
  m.rng = c.rng.state();
  return m;
}

template <class T>
DeviceModel<T> describeCase(const CaseSpec& spec) {
  Chain<T> c = buildChain<T>(spec);
  return describeChain(c);
}

// The generator and the measurements are the executor's; they are not downloaded.
template <class T>
StepResult<T> toStepResult(const DeviceValues<T>& d) {
  StepResult<T> r;
  r.loss = d.loss;
  for (const auto& g : d.grads) r.grads.push_back({g.name, toMat(g)});
  if (!d.inputGrad.data.empty()) r.inputGrad = toMat(d.inputGrad);
  for (const auto& s : d.state) r.state.push_back({s.name, toMat(s)});
  return r;
}

}  // namespace ckpt::gpu
