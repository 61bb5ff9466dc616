// The device stem of a language-model case (reference/ops/token_stem.h): the token and position embeddings and
// the batch's token ids on the device. Like the reference stem it is not a chain op: it makes x_0 for the
// executor (charged to the current meter as the chain input is) and, after a micro-batch's backward, takes
// dL/dx_0 into the embeddings' gradients. It saves nothing: the ids are data, not activations.
#pragma once
#include <cstdint>
#include <vector>

#include "device/dop.h"
#include "device/kernels/token_stem.cuh"

namespace ckpt::gpu {

template <class T, class X>
class DTokenStem {
 public:
  DTokenStem(X& x, const DStemDesc<T>& d)
      : x_(&x),
        emb_(uploadParam(x, d.emb)),
        pos_(uploadParam(x, d.pos)),
        trains_(d.trains),
        forwardFlops_(d.forwardFlops),
        backwardFlops_(d.backwardFlops),
        ids_(DTensor<int>::untracked(x.pool(), 1, static_cast<int64_t>(d.tokens.size()))) {
    x.upload(ids_.data(), d.tokens.data(), ids_.size());
  }

  // x_0 of the batch's rows [firstRow, firstRow + rows), a fresh activation; its FLOPs go to the current meter's
  // phase (the executor's forward phase), as TokenStem::forward counts them.
  DTensor<T> forward(int64_t firstRow, int64_t rows) {
    const int64_t cols = emb_.value.cols();
    auto out = DTensor<T>::empty(x_->pool(), rows, cols);
    x_->launch(out.size(), TokenStemForward<T>{out.data(), emb_.value.data(), pos_.value.data(), ids_.data() + firstRow,
                                               firstRow, pos_.value.rows(), cols});
    if (ActivationMeter* m = currentMeter()) m->countFlops(forwardFlops_);
    return out;
  }

  // Adds dL/dx_0 of rows [firstRow, firstRow + g.rows()) into dE and dP when the embeddings train; returns
  // whether it did (Chain::stemBackward's contract: true means dx_0 is consumed).
  bool backward(int64_t firstRow, const DTensor<T>& g) {
    if (!trains_) return false;
    x_->launch(g.cols(), TokenStemBackward<T>{emb_.grad.data(), pos_.grad.data(), g.data(), ids_.data() + firstRow,
                                              firstRow, pos_.value.rows(), g.rows(), g.cols()});
    if (ActivationMeter* m = currentMeter()) m->countFlops(backwardFlops_);
    return true;
  }

  bool trains() const { return trains_; }
  DParam<T>& embedding() { return emb_; }
  // Model order: emb.weight, pos.weight.
  std::vector<DParam<T>*> params() { return {&emb_, &pos_}; }

 private:
  X* x_;
  DParam<T> emb_, pos_;
  bool trains_;
  int64_t forwardFlops_, backwardFlops_;
  DTensor<int> ids_;  // the whole batch's ids; a micro-batch reads its rows
};

}  // namespace ckpt::gpu
