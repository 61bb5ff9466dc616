// Mixture of experts (Switch Transformer's layer; the case's "moe" block, cases/kinds/moe.cpp), on x (R, W):
//  1. router jitter (eps > 0): a = x * m, m = (1 - eps) + 2 eps u in double, rounded to T, one uniform u per element
//     (a random op: a recompute must draw the same multipliers); eps = 0: a = x and no draws;
//  2. probabilities p = softmax(a Wr^T + br) over E experts (the router is a Linear);
//  3. top-k (k = 1 or 2) per token, ties to the lower expert; capacity C = clamp(ceil(cf * R * k / E), 1, R);
//     assignments fill the experts' buffers first choices first, tokens in order; one over capacity is dropped;
//  4. expert e, a GELU mlp of width H, runs on all C slots of its buffer (empty slots are zero rows, so FLOPs are
//     static and the planner's bytes are the executor's); out[t] += p[t, e] * expert_e(x[t]) for each slot, experts
//     in order;
//  5. the load-balancing loss aux = E sum_e f_e P_e (f_e the share of assignments to e before capacity, P_e the mean
//     probability) joins the training loss with coefficient `coef`: the backward adds coef E f_e / R to dL/dp.
// State, updated on every training forward as BatchNorm's statistics are (a recompute's update is undone by the
// runtime, reference/block.h): the tokens each expert took (expert_counts) and the loss tracker aux_loss, which
// starts each pass at zero (zeroGrads, reference/step.h) and which the step adds to its loss (Chain::auxLoss), as
// Megatron-LM's aux-loss tracker; a recompute that records it again counts the loss twice (issues 1478 / 1514).
// Saves its input, the probabilities, the routing and each expert's activations; the experts' inputs are gathered
// again in backward. Its arithmetic is workspace: only the output and the saved tensors are activations.
#pragma once
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "reference/meter.h"
#include "reference/op.h"
#include "reference/ops/gelu.h"
#include "reference/ops/linear.h"
#include "reference/saved_fields.h"
#include "reference/saved_contexts.h"

namespace ckpt {

// Each expert's buffer: ceil(cf * R * k / E) slots, in double left to right, at least one and at most R.
inline int64_t moeCapacity(int64_t rows, int64_t experts, int64_t topK, double capacityFactor) {
  const double c =
      std::ceil(capacityFactor * static_cast<double>(rows) * static_cast<double>(topK) / static_cast<double>(experts));
  return std::clamp<int64_t>(static_cast<int64_t>(c), 1, rows);
}

template <class T>
class Moe final : public Op<T> {
 public:
  Moe(const std::string& name, int64_t width, int experts, int topK, int64_t hidden, double capacityFactor,
      double jitter, double auxCoef)
      : router_(name + ".router", width, experts),
        experts_(experts),
        topK_(topK),
        width_(width),
        hidden_(hidden),
        capacityFactor_(capacityFactor),
        jitter_(jitter),
        auxCoef_(auxCoef),
        counts_{name + ".expert_counts", Mat<T>::Zero(1, experts)},
        aux_{name + std::string(kAuxLossSuffix), Mat<T>::Zero(1, 1)} {
    for (int e = 0; e < experts; ++e) {
      const std::string p = name + ".expert" + std::to_string(e);
      fc1_.push_back(std::make_unique<Linear<T>>(p + ".fc1", width, hidden));
      fc2_.push_back(std::make_unique<Linear<T>>(p + ".fc2", hidden, width));
    }
  }
  std::string kind() const override { return "moe"; }
  int experts() const { return experts_; }
  int topK() const { return topK_; }
  int64_t width() const { return width_; }
  int64_t hidden() const { return hidden_; }
  double capacityFactor() const { return capacityFactor_; }
  double jitter() const { return jitter_; }
  double auxCoef() const { return auxCoef_; }

  OpMeta meta(std::span<const Shape> in) const override {
    const int64_t r = in[0].rows, w = in[0].cols, e = experts_, h = hidden_;
    const int64_t c = moeCapacity(r, e, topK_, capacityFactor_), j = jitter_ > 0 ? r * w : 0;
    OpMeta m;
    m.out = in[0];
    // jitter, router, softmax, each expert's fc1 + GELU + fc2 over its C slots, the weighted combine, the aux loss
    m.forwardFlops = j + (2 * r * w * e + r * e) + 5 * r * e +
                     e * ((2 * c * w * h + c * h) + 9 * c * h + (2 * c * h * w + c * w)) + 2 * e * c * w + 3 * e;
    // the combine's two products, the experts, the scatter of their input gradients, the aux term, softmax, router,
    // jitter
    m.backwardFlops = 4 * e * c * w + e * ((4 * c * h * w + c * w) + 19 * c * h + (4 * c * w * h + c * h)) + e * c * w +
                      r * e + 4 * r * e + (4 * r * w * e + r * e) + 2 * j;
    m.savesInputs = true;
    m.contextExtraBytes = static_cast<int64_t>(sizeof(T)) * (r * e + 2 * e * c + e + 2 * e * c * h + e * c * w + j);
    m.randomDraws = j;
    m.mutatesState = true;
    m.isMatmul = true;
    return m;
  }

  Tensor<T> forward(std::span<const Tensor<T>> in, Context<T>* ctx, const OpEnv& env) override {
    const Tensor<T>& x = in[0];
    const int64_t r = x.rows(), w = x.cols(), ne = experts_, c = moeCapacity(r, ne, topK_, capacityFactor_);
    ActivationMeter* meter = currentMeter();
    Routing route;
    Mat<T> mult, z1(ne * c, hidden_), act(ne * c, hidden_), z2(ne * c, w);
    RngDraw d{};
    {
      const MeterScope workspace(nullptr);
      Tensor<T> a = x;
      if (jitter_ > 0) {
        d = env.draw(r * w);
        mult = jitterOf(d, r, w);
        a = Tensor<T>::from(x.map().cwiseProduct(mult));
      }
      route = routeTokens(router_.forward(std::span(&a, 1), nullptr, env), r, c);
      for (int e = 0; e < ne; ++e) {
        const Tensor<T> xe = Tensor<T>::from(gather(x.map(), route, e, c));
        Tensor<T> h1 = fc1_[e]->forward(std::span(&xe, 1), nullptr, env);
        Tensor<T> h2 = gelu_.forward(std::span<const Tensor<T>>(&h1, 1), nullptr, env);
        const Tensor<T> out = fc2_[e]->forward(std::span<const Tensor<T>>(&h2, 1), nullptr, env);
        z1.middleRows(e * c, c) = h1.map();
        act.middleRows(e * c, c) = h2.map();
        z2.middleRows(e * c, c) = out.map();
      }
    }
    auto y = Tensor<T>::zeros(r, w);
    for (int e = 0; e < ne; ++e)
      for (int64_t s = 0; s < route.filled[e]; ++s)
        y.map().row(route.token(e, s)) += route.gate(e, s) * z2.row(e * c + s);
    // The load-balancing loss and the token counts: state, moved by every training forward.
    T aux = 0;
    for (int e = 0; e < ne; ++e) {
      T colSum = 0;
      for (int64_t t = 0; t < r; ++t) colSum += route.probs(t, e);
      aux += route.frac(0, e) * (colSum / static_cast<T>(r));
      counts_.value(0, e) += static_cast<T>(route.filled[e]);
    }
    aux_.value(0, 0) += static_cast<T>(auxCoef_) * (static_cast<T>(ne) * aux);
    if (ctx) {
      const MeterScope saved(meter);
      Saved s{x,
              Tensor<T>::from(route.probs),
              Tensor<T>::from(route.token.template cast<T>()),
              Tensor<T>::from(route.gate),
              Tensor<T>::from(route.frac),
              Tensor<T>::from(z1),
              Tensor<T>::from(act),
              Tensor<T>::from(z2),
              jitter_ > 0 ? Tensor<T>::from(mult) : Tensor<T>()};
      saveFields(*ctx, s);
      ctx->draw = d;
    }
    return y;
  }

  void backward(const Context<T>& ctx, const Tensor<T>& dout, std::span<Tensor<T>> din) override {
    const Saved s = loadFields<Saved>(ctx);
    const int64_t r = s.x.rows(), w = s.x.cols(), ne = experts_, c = s.token.cols();
    ActivationMeter* meter = currentMeter();
    Mat<T> dx = Mat<T>::Zero(r, w), dp = Mat<T>::Zero(r, ne);
    {
      const MeterScope workspace(nullptr);
      const auto dy = dout.map();
      for (int e = 0; e < ne; ++e) {
        Mat<T> dz2 = Mat<T>::Zero(c, w);
        int64_t filled = 0;
        for (int64_t slot = 0; slot < c && s.token.map()(e, slot) >= 0; ++slot, ++filled) {
          const int64_t t = static_cast<int64_t>(s.token.map()(e, slot));
          dz2.row(slot) = s.gate.map()(e, slot) * dy.row(t);
          dp(t, e) += dy.row(t).dot(s.z2.map().row(e * c + slot));
        }
        Tensor<T> grad = Tensor<T>::from(dz2);
        grad = subBackward(*fc2_[e], ctx, Tensor<T>::from(s.act.map().middleRows(e * c, c)), grad);
        grad = subBackward(gelu_, ctx, Tensor<T>::from(s.z1.map().middleRows(e * c, c)), grad);
        Routing route;
        route.token = s.token.map().template cast<int64_t>();
        grad = subBackward(*fc1_[e], ctx, Tensor<T>::from(gather(s.x.map(), route, e, c)), grad);
        for (int64_t slot = 0; slot < filled; ++slot)
          dx.row(static_cast<int64_t>(s.token.map()(e, slot))) += grad.map().row(slot);
      }
      // d(coef * aux) / dp[t, e] = coef E f_e / R: f_e counts assignments, which no infinitesimal change moves.
      for (int e = 0; e < ne; ++e) {
        const T g = static_cast<T>(auxCoef_) * static_cast<T>(ne) * s.frac.map()(0, e) / static_cast<T>(r);
        dp.col(e).array() += g;
      }
      const auto p = s.probs.map();
      const Mat<T> dl = p.cwiseProduct((dp - (dp.cwiseProduct(p)).rowwise().sum().replicate(1, ne)));
      Tensor<T> a = s.x;
      if (jitter_ > 0) a = Tensor<T>::from(s.x.map().cwiseProduct(s.jitter.map()));
      Tensor<T> da = subBackward(router_, ctx, a, Tensor<T>::from(dl));
      if (jitter_ > 0) dx += da.map().cwiseProduct(s.jitter.map());
      else dx += da.map();
    }
    const MeterScope grads(meter);
    din[0] = Tensor<T>::from(dx);
  }

  std::vector<Param<T>*> params() override {
    std::vector<Param<T>*> ps = router_.params();
    for (int e = 0; e < experts_; ++e) {
      for (auto* p : fc1_[e]->params()) ps.push_back(p);
      for (auto* p : fc2_[e]->params()) ps.push_back(p);
    }
    return ps;
  }
  std::vector<Buffer<T>*> buffers() override { return {&counts_, &aux_}; }

 private:
  struct Routing {
    Mat<T> probs;                                                                   // (R, E)
    Eigen::Matrix<int64_t, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> token;  // (E, C): -1 empty
    Mat<T> gate;                                                                    // (E, C): p[token, e]
    Mat<T> frac;                                                                    // (1, E): f_e
    std::vector<int64_t> filled;
  };
  using Saved = MoeSaved<Tensor<T>>;

  Mat<T> jitterOf(const RngDraw& d, int64_t r, int64_t w) const {
    Mat<T> m(r, w);
    constexpr int64_t kChunk = 1024;  // the uniforms a chunk at a time, as dropout draws them
    float u[kChunk];
    for (int64_t start = 0; start < r * w; start += kChunk) {
      const int64_t len = std::min(kChunk, r * w - start);
      d.uniforms(start, len, u);
      for (int64_t j = 0; j < len; ++j)
        m.data()[start + j] = static_cast<T>((1.0 - jitter_) + 2.0 * jitter_ * static_cast<double>(u[j]));
    }
    return m;
  }

  // Softmax, top-k and the capacity-bounded dispatch of one forward.
  Routing routeTokens(const Tensor<T>& logitsT, int64_t r, int64_t c) const {
    const int ne = experts_;
    const auto logits = logitsT.map();
    Routing route;
    route.probs.resize(r, ne);
    for (int64_t t = 0; t < r; ++t) {
      T mx = logits(t, 0);
      for (int e = 1; e < ne; ++e) mx = std::max(mx, logits(t, e));
      T sum = 0;
      for (int e = 0; e < ne; ++e) sum += (route.probs(t, e) = std::exp(logits(t, e) - mx));
      for (int e = 0; e < ne; ++e) route.probs(t, e) /= sum;
    }
    std::vector<int> choice(static_cast<size_t>(r * topK_));
    for (int64_t t = 0; t < r; ++t)
      for (int k = 0; k < topK_; ++k) {
        int best = -1;
        for (int e = 0; e < ne; ++e) {
          if (k == 1 && e == choice[static_cast<size_t>(t * topK_)]) continue;
          if (best < 0 || route.probs(t, e) > route.probs(t, best)) best = e;  // ties keep the lower expert
        }
        choice[static_cast<size_t>(t * topK_ + k)] = best;
      }
    route.token.setConstant(ne, c, -1);
    route.gate.setZero(ne, c);
    route.frac.setZero(1, ne);
    route.filled.assign(static_cast<size_t>(ne), 0);
    std::vector<int64_t> assigned(static_cast<size_t>(ne), 0);
    for (int k = 0; k < topK_; ++k)
      for (int64_t t = 0; t < r; ++t) {
        const int e = choice[static_cast<size_t>(t * topK_ + k)];
        ++assigned[static_cast<size_t>(e)];
        int64_t& f = route.filled[static_cast<size_t>(e)];
        if (f == c) continue;  // over capacity: dropped
        route.token(e, f) = t;
        route.gate(e, f) = route.probs(t, e);
        ++f;
      }
    for (int e = 0; e < ne; ++e)
      route.frac(0, e) = static_cast<T>(assigned[static_cast<size_t>(e)]) / static_cast<T>(r * topK_);
    return route;
  }

  // Expert e's buffer: the rows of its tokens in slot order, zero rows after them.
  static Mat<T> gather(const typename Tensor<T>::ConstMap& x, const Routing& route, int e, int64_t c) {
    Mat<T> xe = Mat<T>::Zero(c, x.cols());
    for (int64_t s = 0; s < c && route.token(e, s) >= 0; ++s) xe.row(s) = x.row(route.token(e, s));
    return xe;
  }

  // A sub-op's backward from a context holding `saved`, under the forward's numerics; returns its input gradient.
  static Tensor<T> subBackward(Op<T>& op, const Context<T>& ctx, const Tensor<T>& saved, const Tensor<T>& dout) {
    Context<T> sub;
    sub.tensors = {saved};
    sub.numerics = ctx.numerics;
    Tensor<T> din;
    op.backward(sub, dout, std::span(&din, 1));
    return din;
  }

  Linear<T> router_;
  std::vector<std::unique_ptr<Linear<T>>> fc1_, fc2_;
  Gelu<T> gelu_;
  int experts_, topK_;
  int64_t width_, hidden_;
  double capacityFactor_, jitter_, auxCoef_;
  Buffer<T> counts_, aux_;
};

}  // namespace ckpt
