// The op table (reference/op_table.h): one line per op kind. A new op is its file under reference/ops/ and a
// line here.
#include "reference/op_table.h"

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

template const std::vector<OpKindEntry<float>>& opKinds<float>();
template const std::vector<OpKindEntry<double>>& opKinds<double>();

}  // namespace ckpt
