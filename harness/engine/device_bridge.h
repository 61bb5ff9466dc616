// Between the CPU reference (Eigen) and the Eigen-free device runtime, for host code only (g++): a reference
// Chain becomes a DeviceModel (its ops' attributes and kinds, initial parameters and buffers, and meta() FLOPs
// for the chain's shapes), and a device step's downloaded DeviceValues a reference StepResult, so every
// comparison the engine has applies to device runs unchanged. Here in harness/ rather than in reference/cuda/
// so that the device backend depends on the reference only, never on the harness.
#pragma once
#include <stdexcept>
#include <string>
#include <vector>

#include "reference/chain.h"
#include "reference/cuda/dmodel.h"
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
  d.opKind = node.op->kind();
  d.inputs = node.inputs;
  Op<T>* op = node.op.get();
  const OpMeta m = op->meta(in);
  d.forwardFlops = m.forwardFlops;
  d.backwardFlops = m.backwardFlops;
  for (auto* p : op->params()) d.params.push_back(toHostMatrix(p->name, p->value));
  for (auto* b : op->buffers()) d.buffers.push_back(toHostMatrix(b->name, b->value));
  // The op table line that built the op says which attributes its device op takes; the device op of that kind()
  // (reference/cuda/dops.h) is made from them.
  if (const auto device = opKindEntry<T>(d.opKind).device) device(*op, d);
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
  if (auto* ce = dynamic_cast<const CrossEntropyLoss<T>*>(&loss)) {
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
