// The stem of a language-model case (cases/lm_case.h): x_0[r] = E[id_r] + P[r mod seq], a token embedding E
// (vocab, width) and a learned position embedding P (seq, width), as GPT-2's wte and wpe. It is not a chain op:
// its input is token ids, its output is x_0 (charged to the meter as the chain input is), and it saves nothing
// (the ids are data, not activations). Backward scatter-adds g_0's rows into dE and dP in row order 0..R-1, so
// a token used twice sums its rows in a fixed order.
#pragma once
#include <cstdint>
#include <vector>

#include "reference/op.h"

namespace ckpt {

template <class T>
class TokenStem {
 public:
  TokenStem(int64_t vocab, int64_t seq, int64_t width)
      : emb_{"emb.weight", Mat<T>::Zero(vocab, width), Mat<T>::Zero(vocab, width), true},
        pos_{"pos.weight", Mat<T>::Zero(seq, width), Mat<T>::Zero(seq, width), true} {}

  // Forward adds the position row to each gathered row (one FLOP per element); backward adds each g_0 row into
  // dE and into dP (two per element).
  static int64_t forwardFlops(Shape x) { return x.size(); }
  static int64_t backwardFlops(Shape x) { return 2 * x.size(); }

  // x_0 of rows [firstRow, firstRow + rows) of the batch; `ids` are those rows' tokens.
  Tensor<T> forward(const int* ids, int64_t firstRow, int64_t rows) const {
    const int64_t seq = pos_.value.rows();
    auto x = Tensor<T>::empty(rows, emb_.value.cols());
    auto xm = x.map();
    for (int64_t r = 0; r < rows; ++r) xm.row(r) = emb_.value.row(ids[r]) + pos_.value.row((firstRow + r) % seq);
    if (ActivationMeter* m = currentMeter()) m->countFlops(forwardFlops({rows, x.cols()}));
    return x;
  }

  // Adds dL/dx_0 (rows [firstRow, firstRow + g.rows())) into the embeddings' gradients, row by row in order.
  void backward(const int* ids, int64_t firstRow, const Tensor<T>& g) {
    const int64_t seq = pos_.value.rows();
    const auto gm = g.map();
    for (int64_t r = 0; r < gm.rows(); ++r) emb_.grad.row(ids[r]) += gm.row(r);
    for (int64_t r = 0; r < gm.rows(); ++r) pos_.grad.row((firstRow + r) % seq) += gm.row(r);
    if (ActivationMeter* m = currentMeter()) m->countFlops(backwardFlops({gm.rows(), gm.cols()}));
  }

  Param<T>& embedding() { return emb_; }
  std::vector<Param<T>*> params() { return {&emb_, &pos_}; }

 private:
  Param<T> emb_, pos_;
};

}  // namespace ckpt
