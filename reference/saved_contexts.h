#pragma once
// What an op's forward keeps for its backward, one record per op family, over the tensor type: the reference op
// (reference/ops/, Tensor<T>) and its device twin (device/dops/, DTensor<T>) name the same record, so the two
// backends save the same tensors under the same names. saveFields/loadFields and the saved-bytes accounting read
// a record through fields(), in that order.
#include <tuple>

namespace ckpt {

template <class Tn>
struct AttentionSaved {
  Tn qkv;
  Tn probs;  // P, (batch heads seq, seq)
  Tn mask;   // the dropout mask over P, scaled; only when p > 0
  auto fields() { return std::tie(qkv, probs, mask); }
};

template <class Tn>
struct NormSaved {  // batchnorm: mean and rstd (1, C); layernorm: (N, 1)
  Tn x, mean, rstd;
  auto fields() { return std::tie(x, mean, rstd); }
};

template <class Tn>
struct InputSaved {  // an op whose backward needs only its input (linear, gelu, mse)
  Tn x;
  auto fields() { return std::tie(x); }
};

template <class Tn>
struct OutputSaved {  // an op whose backward needs only its output (relu, tanh)
  Tn y;
  auto fields() { return std::tie(y); }
};

template <class Tn>
struct DropoutSaved {
  Tn mask;  // m / (1 - p)
  auto fields() { return std::tie(mask); }
};

template <class Tn>
struct DropPathSaved {
  Tn scales;  // per sample: 1 / (1 - p) kept, 0 dropped
  auto fields() { return std::tie(scales); }
};

template <class Tn>
struct RReluSaved {
  Tn noise;  // the slope where x <= 0, 1 elsewhere
  auto fields() { return std::tie(noise); }
};

template <class Tn>
struct MoeSaved {
  Tn x, probs, token, gate, frac, z1, act, z2, jitter;  // jitter only when eps > 0
  auto fields() { return std::tie(x, probs, token, gate, frac, z1, act, z2, jitter); }
};

}  // namespace ckpt
