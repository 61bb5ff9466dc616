// The op table (reference/op_table.h): one line per op kind. A new op is its file under reference/ops/ and a
// line here (and its device op, device/dops.h).
#include "reference/op_table.h"

#include "reference/ops/add.h"
#include "reference/ops/attention.h"
#include "reference/ops/batchnorm.h"
#include "reference/ops/drop_path.h"
#include "reference/ops/dropout.h"
#include "reference/ops/gelu.h"
#include "reference/ops/layernorm.h"
#include "reference/ops/linear.h"
#include "reference/ops/moe.h"
#include "reference/ops/relu.h"
#include "reference/ops/rrelu.h"
#include "reference/ops/tanh.h"

namespace ckpt {

template <class T>
const std::vector<OpKindEntry<T>>& opKinds() {
  using N = const OpNode&;
  using R = long double;
  auto none = [](N) -> int64_t { return 0; };
  auto small = [](N, R, R) -> R { return 0; };
  static const std::vector<OpKindEntry<T>> table = {
      {"linear",
       [](N n, const std::string& name) -> std::unique_ptr<Op<T>> {
         return std::make_unique<Linear<T>>(name, n.inFeatures(), n.outFeatures());
       },
       [](N n) { return n.inFeatures() * n.outFeatures() + n.outFeatures(); },
       [](N n, R, R rows) { return rows * static_cast<R>(n.outFeatures()); }, small},
      {"gelu", [](N, const std::string&) -> std::unique_ptr<Op<T>> { return std::make_unique<Gelu<T>>(); }, none, small,
       small},
      {"relu", [](N, const std::string&) -> std::unique_ptr<Op<T>> { return std::make_unique<Relu<T>>(); }, none, small,
       small},
      {"tanh", [](N, const std::string&) -> std::unique_ptr<Op<T>> { return std::make_unique<Tanh<T>>(); }, none, small,
       small},
      {"dropout", [](N n, const std::string&) -> std::unique_ptr<Op<T>> { return std::make_unique<Dropout<T>>(n.p); },
       none, small, small},
      {"batchnorm",
       [](N n, const std::string& name) -> std::unique_ptr<Op<T>> {
         return std::make_unique<BatchNorm<T>>(name, n.normWidth());
       },
       [](N n) { return 2 * n.normWidth(); }, small, small},
      {"layernorm",
       [](N n, const std::string& name) -> std::unique_ptr<Op<T>> {
         return std::make_unique<LayerNorm<T>>(name, n.normWidth());
       },
       [](N n) { return 2 * n.normWidth(); }, small, small},
      // The score matrix is batch * heads * seq * seq; each score costs a dot product of width / heads each way.
      {"attention",
       [](N n, const std::string&) -> std::unique_ptr<Op<T>> {
         return std::make_unique<CausalSelfAttention<T>>(n.heads(), n.attentionSeq(), n.p);
       },
       none,
       [](N n, R batch, R) {
         const R seq = static_cast<R>(n.attentionSeq());
         return batch * static_cast<R>(n.heads()) * seq * seq;
       },
       [](N n, R batch, R width) {
         const R heads = static_cast<R>(n.heads()), seq = static_cast<R>(n.attentionSeq());
         return batch * heads * seq * seq * (4 * width / heads + 7);
       }},
      {"add", [](N, const std::string&) -> std::unique_ptr<Op<T>> { return std::make_unique<Add<T>>(); }, none, small,
       small},
      {"drop_path",
       [](N n, const std::string&) -> std::unique_ptr<Op<T>> {
         return std::make_unique<DropPath<T>>(n.sampleRows(), n.p);
       },
       none, small, small},
      {"rrelu",
       [](N n, const std::string&) -> std::unique_ptr<Op<T>> { return std::make_unique<Rrelu<T>>(n.lower, n.upper); },
       none, small, small},
      // Router (W -> E) and E GELU mlps (W -> H -> W); the largest tensor is the saved hidden activations of every
      // expert's buffer, E * C * H with C <= cf * rows * k / E + 1.
      {"moe",
       [](N n, const std::string& name) -> std::unique_ptr<Op<T>> {
         return std::make_unique<Moe<T>>(name, n.moeWidth(), static_cast<int>(n.experts()), static_cast<int>(n.topK()),
                                         n.hidden(), n.capacityFactor, n.jitter(), n.auxCoef);
       },
       [](N n) {
         const int64_t e = n.experts(), w = n.moeWidth(), h = n.hidden();
         return w * e + e + e * (w * h + h + h * w + w);
       },
       [](N n, R, R rows) {
         const R e = static_cast<R>(n.experts()), k = static_cast<R>(n.topK());
         return (static_cast<R>(n.capacityFactor) * rows * k + e) * static_cast<R>(n.hidden());
       },
       small},
  };
  return table;
}

template const std::vector<OpKindEntry<float>>& opKinds<float>();
template const std::vector<OpKindEntry<double>>& opKinds<double>();

}  // namespace ckpt
