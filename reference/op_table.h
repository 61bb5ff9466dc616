// The ops a block program may name (cases/op_node.h), one line each in reference/op_table.cpp: the op's kind(), how
// to build it from a node, what the resource guard needs to size a case without building it (parameter count,
// largest output, FLOPs beyond the matmuls'). `selective`'s op kinds and the random draws over them come from
// this list. The device op of the same kind() (device/dops.h) reads its attributes from the same OpNode.
#pragma once
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cases/op_node.h"
#include "reference/op.h"

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

// The table, defined in reference/op_table.cpp and compiled there once for float and double: its lines build
// every op, which instantiates every op's forward and backward, and that instantiation cost ten seconds in each
// file that included this header.
template <class T>
const std::vector<OpKindEntry<T>>& opKinds();
extern template const std::vector<OpKindEntry<float>>& opKinds<float>();
extern template const std::vector<OpKindEntry<double>>& opKinds<double>();

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
