// The device op of reference/ops/moe.h: one line in deviceOps() (device/dops.h).
#pragma once
#include <stdexcept>
#include <string>
#include <vector>

#include "device/dop.h"
#include "device/dops/linear.h"
#include "device/kernels/moe.cuh"
#include "reference/saved_contexts.h"

namespace ckpt::gpu {

// Mixture of experts on x (R, W) (reference/ops/moe.h, which defines it): router jitter (a random op, one draw per
// element when eps > 0), the router (a Linear W -> E), softmax, top-k and the capacity-bounded dispatch
// (kernels/moe.cuh), every expert's fc1 -> GELU -> fc2 over all C slots of its buffer (Linear's products,
// dops/linear.h, so bf16 compute rounds their operands as a Linear does), and the gated combine. Each training
// forward moves the module state: expert_counts (tokens dispatched) and the loss tracker aux_loss (+= coef aux),
// which the device chain zeroes at each pass start and adds into the pass's loss (exec_chain.h), as the CPU chain.
// Saves the reference's context, in its order: x, probs, token, gate, frac, z1, act, z2 and, when jittered, the
// multipliers; everything else (logits, the experts' inputs, the routing scratch) is workspace.
template <class T, class X>
class DMoe final : public DOp<T, X> {
 public:
  DMoe(X& x, const DNodeDesc<T>& d)
      : DOp<T, X>(x),
        experts_(d.node.experts()),
        topK_(d.node.topK()),
        width_(d.node.moeWidth()),
        hidden_(d.node.hidden()),
        capacityFactor_(d.node.capacityFactor),
        jitter_(d.node.jitter()),
        auxCoef_(d.node.auxCoef) {
    if (experts_ < 1 || topK_ < 1 || topK_ > 2 || topK_ > experts_ || width_ < 1 || hidden_ < 1)
      throw std::invalid_argument("moe: experts " + std::to_string(experts_) + ", top_k " + std::to_string(topK_) +
                                  ", width " + std::to_string(width_) + ", hidden " + std::to_string(hidden_));
    if (static_cast<int64_t>(d.params.size()) != 2 + 4 * experts_ || d.buffers.size() != 2)
      throw std::invalid_argument("moe: " + std::to_string(d.params.size()) + " parameters and " +
                                  std::to_string(d.buffers.size()) + " buffers for " + std::to_string(experts_) +
                                  " experts");
    routerW_ = this->param(d.params[0]);
    routerB_ = this->param(d.params[1]);
    for (int64_t e = 0; e < experts_; ++e) {
      const size_t at = static_cast<size_t>(2 + 4 * e);
      fc1W_.push_back(this->param(d.params[at]));
      fc1B_.push_back(this->param(d.params[at + 1]));
      fc2W_.push_back(this->param(d.params[at + 2]));
      fc2B_.push_back(this->param(d.params[at + 3]));
    }
    counts_ = DBuffer<T>{d.buffers[0].name, uploadMatrix(x, d.buffers[0])};
    aux_ = DBuffer<T>{d.buffers[1].name, uploadMatrix(x, d.buffers[1])};
  }

  DTensor<T> forward(std::span<const DTensor<T>> in, DContext<T>* ctx, const DEnv& env) override {
    const DTensor<T>& xin = in[0];
    if (xin.cols() != width_)
      throw std::invalid_argument("moe: input width " + std::to_string(xin.cols()) + ", op width " +
                                  std::to_string(width_));
    const int64_t r = xin.rows(), w = width_, ne = experts_, h = hidden_, k = topK_;
    const int64_t c = moeSlotsPerExpert(r, ne, k, capacityFactor_);
    X& x = this->x();
    auto y = this->activation(r, w);
    auto kept = [&](int64_t rows, int64_t cols) {
      return ctx ? this->activation(rows, cols) : this->workspace(rows, cols);
    };
    DTensor<T> probs = kept(r, ne), token = kept(ne, c), gate = kept(ne, c), frac = kept(1, ne);
    DTensor<T> z1 = kept(ne * c, h), act = kept(ne * c, h), z2 = kept(ne * c, w), mult;
    // 1. jitter: a = x * m, the multipliers from the op's own draw.
    RngDraw d{};
    const T* a = xin.data();
    DTensor<T> jittered;
    if (jitter_ > 0) {
      d = env.draw(r * w);
      mult = kept(r, w);
      x.launch(philoxBlocksFor(d.offset, r * w), MoeJitter<T>{mult.data(), r * w, drawPos(d), jitter_});
      jittered = this->workspace(r, w);
      x.launch(r * w, Multiply<T>{jittered.data(), xin.data(), mult.data()});
      a = jittered.data();
    }
    // 2-3. the router, softmax, top-k and the dispatch.
    DTensor<T> logits = this->workspace(r, ne);
    linearForwardRows(x, a, r, routerW_, routerB_, logits.data(), env.bf16Inputs, env.bf16Matmul);
    x.launch(r, MoeSoftmaxRow<T>{probs.data(), logits.data(), ne});
    auto choice = DTensor<int>::untracked(this->pool(), r, k), slotsOf = DTensor<int>::untracked(this->pool(), r, k);
    auto counts = DTensor<int>::untracked(this->pool(), 2, ne);
    x.launch(r, MoeTopK<T>{choice.data(), probs.data(), ne, k});
    x.launch(1, MoeDispatch<T>{token.data(), gate.data(), frac.data(), counts.data(), choice.data(), probs.data(), r,
                               ne, k, c});
    x.launch(1, MoeTokenSlots<T>{slotsOf.data(), token.data(), r, ne, k, c});
    // 4. the experts over their buffers (the un-jittered rows), then the gated combine.
    DTensor<T> xe = this->workspace(ne * c, w);
    x.launch(xe.size(), MoeGather<T>{xe.data(), xin.data(), token.data(), w});
    for (int64_t e = 0; e < ne; ++e)
      linearForwardRows(x, xe.data() + e * c * w, c, fc1W_[at(e)], fc1B_[at(e)], z1.data() + e * c * h, env.bf16Inputs,
                        env.bf16Matmul);
    GeluForward<T> gelu{act.data(), z1.data()};
    gelu.erfForm = env.erfGelu;
    x.launch(act.size(), gelu);
    for (int64_t e = 0; e < ne; ++e)
      linearForwardRows(x, act.data() + e * c * h, c, fc2W_[at(e)], fc2B_[at(e)], z2.data() + e * c * w, env.bf16Inputs,
                        env.bf16Matmul);
    x.launch(y.size(), MoeCombine<T>{y.data(), z2.data(), gate.data(), slotsOf.data(), w, k});
    // 5. the module state.
    x.launch(1, MoeStateUpdate<T>{counts_.value.data(), aux_.value.data(), probs.data(), frac.data(), counts.data(), r,
                                  ne, static_cast<T>(auxCoef_)});
    if (ctx) {
      saveFields(*ctx, Saved{xin, probs, token, gate, frac, z1, act, z2, mult});
      ctx->draw = d;
      ctx->bf16Inputs = env.bf16Inputs;
    }
    return y;
  }

  void backward(const DContext<T>& ctx, const DTensor<T>& dout, std::span<DTensor<T>> din) override {
    const Saved s = loadFields<Saved>(ctx);
    const int64_t r = s.x.rows(), w = width_, ne = experts_, h = hidden_, k = topK_, c = s.token.cols();
    const bool bf16 = ctx.bf16Inputs;
    X& x = this->x();
    din[0] = this->activation(r, w);
    auto slotsOf = DTensor<int>::untracked(this->pool(), r, k);
    x.launch(1, MoeTokenSlots<T>{slotsOf.data(), s.token.data(), r, ne, k, c});
    // The combine's two products: dL/dz2 per slot, and dL/dlogits through dL/dp (the aux term included).
    DTensor<T> dz2 = this->workspace(ne * c, w), dp = this->workspace(r, ne), dl = this->workspace(r, ne);
    x.launch(dz2.size(), MoeSlotGrad<T>{dz2.data(), dout.data(), s.token.data(), s.gate.data(), w});
    x.launch(r, MoeLogitGradRow<T>{dl.data(), dp.data(), dout.data(), s.z2.data(), s.probs.data(), s.frac.data(),
                                   slotsOf.data(), w, ne, k, c, r, static_cast<T>(auxCoef_)});
    // The experts, each over all C slots, then their input gradients scattered to their tokens, experts in order.
    DTensor<T> dact = this->workspace(ne * c, h), dz1 = this->workspace(ne * c, h);
    for (int64_t e = 0; e < ne; ++e)
      linearBackwardRows(x, s.act.data() + e * c * h, c, fc2W_[at(e)], fc2B_[at(e)], dz2.data() + e * c * w,
                         dact.data() + e * c * h, bf16);
    x.launch(dz1.size(), GeluBackward<T>{dz1.data(), s.z1.data(), dact.data()});
    DTensor<T> xe = this->workspace(ne * c, w), dxe = this->workspace(ne * c, w);
    x.launch(xe.size(), MoeGather<T>{xe.data(), s.x.data(), s.token.data(), w});
    for (int64_t e = 0; e < ne; ++e)
      linearBackwardRows(x, xe.data() + e * c * w, c, fc1W_[at(e)], fc1B_[at(e)], dz1.data() + e * c * h,
                         dxe.data() + e * c * w, bf16);
    x.launch(din[0].size(), MoeCombine<T>{din[0].data(), dxe.data(), nullptr, slotsOf.data(), w, k});
    // The router, on the (jittered) input it saw; its input gradient through the multipliers.
    const T* a = s.x.data();
    DTensor<T> jittered, da = this->workspace(r, w);
    if (s.jitter.defined()) {
      jittered = this->workspace(r, w);
      x.launch(r * w, Multiply<T>{jittered.data(), s.x.data(), s.jitter.data()});
      a = jittered.data();
    }
    linearBackwardRows(x, a, r, routerW_, routerB_, dl.data(), da.data(), bf16);
    x.launch(din[0].size(),
             MoeAddRouterGrad<T>{din[0].data(), da.data(), s.jitter.defined() ? s.jitter.data() : nullptr});
  }

  std::vector<DParam<T>*> params() override {
    std::vector<DParam<T>*> ps{&routerW_, &routerB_};
    for (size_t e = 0; e < fc1W_.size(); ++e) {
      ps.push_back(&fc1W_[e]);
      ps.push_back(&fc1B_[e]);
      ps.push_back(&fc2W_[e]);
      ps.push_back(&fc2B_[e]);
    }
    return ps;
  }
  std::vector<DBuffer<T>*> buffers() override { return {&counts_, &aux_}; }

 private:
  using Saved = ckpt::MoeSaved<DTensor<T>>;
  static size_t at(int64_t e) { return static_cast<size_t>(e); }
  int64_t experts_, topK_, width_, hidden_;
  double capacityFactor_, jitter_, auxCoef_;
  DParam<T> routerW_, routerB_;
  std::vector<DParam<T>> fc1W_, fc1B_, fc2W_, fc2B_;
  DBuffer<T> counts_, aux_;
};

}  // namespace ckpt::gpu
