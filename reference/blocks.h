// The block kinds a case can chain (cases/SCHEMA.md):
//   mlp          x -> Linear(W,W) -> activation -> Dropout
//   residual-bn  x + ReLU(BatchNorm(Linear(W,W) x))
//   transformer  pre-LN GPT-2 block: h = x + Dropout(Proj(Attn(QKV(LN1 x))));  y = h + Dropout(FC2(GELU(FC1(LN2 h))))
#pragma once
#include <string>

#include "cases/case_spec.h"
#include "reference/block.h"
#include "reference/ops/add.h"
#include "reference/ops/attention.h"
#include "reference/ops/batchnorm.h"
#include "reference/ops/dropout.h"
#include "reference/ops/gelu.h"
#include "reference/ops/layernorm.h"
#include "reference/ops/linear.h"
#include "reference/ops/relu.h"
#include "reference/ops/tanh.h"

namespace ckpt {

template <class T>
class BlockBuilder {
 public:
  explicit BlockBuilder(std::string kind, std::string prefix) : prefix_(std::move(prefix)) { b_.kind = std::move(kind); }
  // Appends a node reading `inputs` (value ids; -1 = block input) and returns its value id.
  int add(std::string name, std::unique_ptr<Op<T>> op, std::vector<int> inputs) {
    b_.nodes.push_back(Node<T>{prefix_ + name, std::move(op), std::move(inputs)});
    return b_.size() - 1;
  }
  const std::string& prefix() const { return prefix_; }
  Block<T> take() { return std::move(b_); }

 private:
  std::string prefix_;
  Block<T> b_;
};

template <class T>
std::unique_ptr<Op<T>> makeActivation(Activation a) {
  switch (a) {
    case Activation::kRelu: return std::make_unique<Relu<T>>();
    case Activation::kGelu: return std::make_unique<Gelu<T>>();
    case Activation::kTanh: return std::make_unique<Tanh<T>>();
  }
  return nullptr;
}

// Builds block `index` of a case; parameter names are prefixed "b<index>.".
template <class T>
Block<T> makeBlock(const BlockSpec& s, const CaseSpec& c, int index) {
  const int64_t w = c.width;
  const std::string p = "b" + std::to_string(index) + ".";
  switch (s.kind) {
    case BlockKind::kMlp: {
      BlockBuilder<T> b("mlp", p);
      int v = b.add("fc", std::make_unique<Linear<T>>(p + "fc", w, w), {-1});
      v = b.add(activationName(s.activation), makeActivation<T>(s.activation), {v});
      b.add("dropout", std::make_unique<Dropout<T>>(c.dropout), {v});
      return b.take();
    }
    case BlockKind::kResidualBn: {
      BlockBuilder<T> b("residual-bn", p);
      int v = b.add("fc", std::make_unique<Linear<T>>(p + "fc", w, w), {-1});
      v = b.add("bn", std::make_unique<BatchNorm<T>>(p + "bn", w), {v});
      v = b.add("relu", std::make_unique<Relu<T>>(), {v});
      b.add("add", std::make_unique<Add<T>>(), {-1, v});
      return b.take();
    }
    case BlockKind::kTransformer: {
      BlockBuilder<T> b("transformer", p);
      int v = b.add("ln1", std::make_unique<LayerNorm<T>>(p + "ln1", w), {-1});
      v = b.add("qkv", std::make_unique<Linear<T>>(p + "qkv", w, 3 * w), {v});
      v = b.add("attn", std::make_unique<CausalSelfAttention<T>>(s.heads, c.seq, c.dropout), {v});
      v = b.add("proj", std::make_unique<Linear<T>>(p + "proj", w, w), {v});
      v = b.add("drop1", std::make_unique<Dropout<T>>(c.dropout), {v});
      const int h = b.add("res1", std::make_unique<Add<T>>(), {-1, v});
      v = b.add("ln2", std::make_unique<LayerNorm<T>>(p + "ln2", w), {h});
      v = b.add("fc1", std::make_unique<Linear<T>>(p + "fc1", w, 4 * w), {v});
      v = b.add("gelu", std::make_unique<Gelu<T>>(), {v});
      v = b.add("fc2", std::make_unique<Linear<T>>(p + "fc2", 4 * w, w), {v});
      v = b.add("drop2", std::make_unique<Dropout<T>>(c.dropout), {v});
      b.add("res2", std::make_unique<Add<T>>(), {h, v});
      return b.take();
    }
  }
  throw std::logic_error("unknown block kind");
}

}  // namespace ckpt
