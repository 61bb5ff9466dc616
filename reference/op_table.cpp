// The op table (reference/op_table.h): one line per op kind. A new op is its file under reference/ops/ and a
// line here.
#include "reference/op_table.h"

#include "reference/cuda/dmodel.h"
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
  using D = gpu::DNodeDesc<T>&;
  void (*noAttributes)(const Op<T>&, D) = nullptr;
  static const std::vector<OpKindEntry<T>> table = {
      {"linear", [](N n, const std::string& name) -> std::unique_ptr<Op<T>> {
         return std::make_unique<Linear<T>>(name, n.dims.at(0), n.dims.at(1));
       },
       [](N n) { return n.dims.at(0) * n.dims.at(1) + n.dims.at(1); },
       [](N n, R, R rows) { return rows * static_cast<R>(n.dims.at(1)); }, small,
       [](const Op<T>& op, D d) {
         const auto& l = static_cast<const Linear<T>&>(op);
         d.inFeatures = l.inFeatures();
         d.outFeatures = l.outFeatures();
       }},
      {"gelu", [](N, const std::string&) -> std::unique_ptr<Op<T>> { return std::make_unique<Gelu<T>>(); }, none,
       small, small, noAttributes},
      {"relu", [](N, const std::string&) -> std::unique_ptr<Op<T>> { return std::make_unique<Relu<T>>(); }, none,
       small, small, noAttributes},
      {"tanh", [](N, const std::string&) -> std::unique_ptr<Op<T>> { return std::make_unique<Tanh<T>>(); }, none,
       small, small, noAttributes},
      {"dropout", [](N n, const std::string&) -> std::unique_ptr<Op<T>> { return std::make_unique<Dropout<T>>(n.p); },
       none, small, small, [](const Op<T>& op, D d) { d.p = static_cast<const Dropout<T>&>(op).p(); }},
      {"batchnorm", [](N n, const std::string& name) -> std::unique_ptr<Op<T>> {
         return std::make_unique<BatchNorm<T>>(name, n.dims.at(0));
       },
       [](N n) { return 2 * n.dims.at(0); }, small, small,
       [](const Op<T>& op, D d) {
         const auto& bn = static_cast<const BatchNorm<T>&>(op);
         d.eps = bn.eps();
         d.momentum = bn.momentum();
       }},
      {"layernorm", [](N n, const std::string& name) -> std::unique_ptr<Op<T>> {
         return std::make_unique<LayerNorm<T>>(name, n.dims.at(0));
       },
       [](N n) { return 2 * n.dims.at(0); }, small, small,
       [](const Op<T>& op, D d) { d.eps = static_cast<const LayerNorm<T>&>(op).eps(); }},
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
       },
       [](const Op<T>& op, D d) {
         const auto& at = static_cast<const CausalSelfAttention<T>&>(op);
         d.heads = at.heads();
         d.seq = at.seq();
         d.p = at.p();
       }},
      {"add", [](N, const std::string&) -> std::unique_ptr<Op<T>> { return std::make_unique<Add<T>>(); }, none,
       small, small, noAttributes},
      {"drop_path", [](N n, const std::string&) -> std::unique_ptr<Op<T>> {
         return std::make_unique<DropPath<T>>(n.dims.at(0), n.p);
       },
       none, small, small,
       [](const Op<T>& op, D d) {
         const auto& dp = static_cast<const DropPath<T>&>(op);
         d.seq = dp.seq();
         d.p = dp.p();
       }},
      {"rrelu", [](N n, const std::string&) -> std::unique_ptr<Op<T>> {
         return std::make_unique<Rrelu<T>>(n.lower, n.upper);
       },
       none, small, small,
       [](const Op<T>& op, D d) {
         const auto& r = static_cast<const Rrelu<T>&>(op);
         d.lower = r.lower();
         d.upper = r.upper();
       }},
      // Router (W -> E) and E GELU mlps (W -> H -> W); the largest tensor is the saved hidden activations of every
      // expert's buffer, E * C * H with C <= cf * rows * k / E + 1.
      {"moe", [](N n, const std::string& name) -> std::unique_ptr<Op<T>> {
         return std::make_unique<Moe<T>>(name, n.dims.at(2), static_cast<int>(n.dims.at(0)),
                                         static_cast<int>(n.dims.at(1)), n.dims.at(3), n.capacityFactor, n.p,
                                         n.auxCoef);
       },
       [](N n) {
         const int64_t e = n.dims.at(0), w = n.dims.at(2), h = n.dims.at(3);
         return w * e + e + e * (w * h + h + h * w + w);
       },
       [](N n, R, R rows) {
         const R e = static_cast<R>(n.dims.at(0)), k = static_cast<R>(n.dims.at(1));
         return (static_cast<R>(n.capacityFactor) * rows * k + e) * static_cast<R>(n.dims.at(3));
       },
       small,
       [](const Op<T>& op, D d) {
         const auto& m = static_cast<const Moe<T>&>(op);
         d.experts = m.experts();
         d.topK = m.topK();
         d.width = m.width();
         d.hidden = m.hidden();
         d.capacityFactor = m.capacityFactor();
         d.jitter = m.jitter();
         d.auxCoef = m.auxCoef();
       }},
  };
  return table;
}

template const std::vector<OpKindEntry<float>>& opKinds<float>();
template const std::vector<OpKindEntry<double>>& opKinds<double>();

}  // namespace ckpt
