// An op that wraps another and hands every call to it. The benchmarks' instrumented ops (recompute_profile.h's
// TimedOp, time_model.h's NodeTimedOp) derive from it and override forward only, so what they add is all they
// write.
#pragma once
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "reference/op.h"

namespace ckpt {

template <class T>
class ForwardingOp : public Op<T> {
 public:
  explicit ForwardingOp(std::unique_ptr<Op<T>> inner) : inner_(std::move(inner)) {}
  std::string kind() const override { return inner_->kind(); }
  OpMeta meta(std::span<const Shape> in) const override { return inner_->meta(in); }
  Tensor<T> forward(std::span<const Tensor<T>> in, Context<T>* ctx, const OpEnv& env) override {
    return inner_->forward(in, ctx, env);
  }
  void backward(const Context<T>& ctx, const Tensor<T>& dout, std::span<Tensor<T>> din) override {
    inner_->backward(ctx, dout, din);
  }
  std::vector<Param<T>*> params() override { return inner_->params(); }
  std::vector<Buffer<T>*> buffers() override { return inner_->buffers(); }

 protected:
  Op<T>& inner() { return *inner_; }

 private:
  std::unique_ptr<Op<T>> inner_;
};

}  // namespace ckpt
