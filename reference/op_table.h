// The ops a block program may name (cases/op_node.h), one line each: the op's kind(), how to build it from a node,
// and what the resource guard needs to size a case without building it (parameter count, largest output,
// FLOPs beyond the matmuls'). `selective`'s op kinds and the random draws over them come from this list.
#pragma once
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cases/op_node.h"
#include "reference/op.h"
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
struct OpKindEntry {
  const char* kind;  // the op's kind()
  // Builds the node's op; `name` prefixes its parameters.
  std::unique_ptr<Op<T>> (*make)(const OpNode& n, const std::string& name);
  int64_t (*params)(const OpNode& n);  // parameter elements (weights and biases; not buffers)
  // Elements of the largest tensor the op allocates on `rows` = batch * seq rows (0: no larger than its input).
  long double (*largest)(const OpNode& n, long double batch, long double rows);
  // Forward FLOPs beyond 2 * rows * params + 16 * rows * width, the resource guard's estimate of the rest.
  long double (*extraFlops)(const OpNode& n, long double batch, long double width);
};

template <class T>
const std::vector<OpKindEntry<T>>& opKinds() {
  using N = const OpNode&;
  using R = long double;
  auto none = [](N) -> int64_t { return 0; };
  auto small = [](N, R, R) -> R { return 0; };
  static const std::vector<OpKindEntry<T>> table = {
      {"linear", [](N n, const std::string& name) -> std::unique_ptr<Op<T>> {
         return std::make_unique<Linear<T>>(name, n.dims.at(0), n.dims.at(1));
       },
       [](N n) { return n.dims.at(0) * n.dims.at(1) + n.dims.at(1); },
       [](N n, R, R rows) { return rows * static_cast<R>(n.dims.at(1)); }, small},
      {"gelu", [](N, const std::string&) -> std::unique_ptr<Op<T>> { return std::make_unique<Gelu<T>>(); }, none,
       small, small},
      {"relu", [](N, const std::string&) -> std::unique_ptr<Op<T>> { return std::make_unique<Relu<T>>(); }, none,
       small, small},
      {"tanh", [](N, const std::string&) -> std::unique_ptr<Op<T>> { return std::make_unique<Tanh<T>>(); }, none,
       small, small},
      {"dropout", [](N n, const std::string&) -> std::unique_ptr<Op<T>> { return std::make_unique<Dropout<T>>(n.p); },
       none, small, small},
      {"batchnorm", [](N n, const std::string& name) -> std::unique_ptr<Op<T>> {
         return std::make_unique<BatchNorm<T>>(name, n.dims.at(0));
       },
       [](N n) { return 2 * n.dims.at(0); }, small, small},
      {"layernorm", [](N n, const std::string& name) -> std::unique_ptr<Op<T>> {
         return std::make_unique<LayerNorm<T>>(name, n.dims.at(0));
       },
       [](N n) { return 2 * n.dims.at(0); }, small, small},
      // The score matrix is batch * heads * seq * seq; each score costs a dot product of width / heads each way.
      {"attention", [](N n, const std::string&) -> std::unique_ptr<Op<T>> {
         return std::make_unique<CausalSelfAttention<T>>(n.dims.at(0), n.dims.at(1), n.p);
       },
       none,
       [](N n, R batch, R) {
         return batch * static_cast<R>(n.dims.at(0)) * static_cast<R>(n.dims.at(1)) * static_cast<R>(n.dims.at(1));
       },
       [](N n, R batch, R width) {
         const R heads = static_cast<R>(n.dims.at(0)), seq = static_cast<R>(n.dims.at(1));
         return batch * heads * seq * seq * (4 * width / heads + 7);
       }},
      {"add", [](N, const std::string&) -> std::unique_ptr<Op<T>> { return std::make_unique<Add<T>>(); }, none,
       small, small},
  };
  return table;
}

// The entry of op kind `kind`; throws std::logic_error for a kind no table line names (a block kind's bug).
template <class T>
const OpKindEntry<T>& opKindEntry(const std::string& kind) {
  for (const auto& e : opKinds<T>())
    if (kind == e.kind) return e;
  throw std::logic_error("block program names an unknown op '" + kind + "'");
}

template <class T>
std::unique_ptr<Op<T>> makeOp(const OpNode& n, const std::string& name) {
  return opKindEntry<T>(n.op).make(n, name);
}

// The kind() of every op a block can hold, in table order.
inline std::vector<std::string> opKindNames() {
  std::vector<std::string> names;
  for (const auto& e : opKinds<double>()) names.push_back(e.kind);
  return names;
}

}  // namespace ckpt
