#include "harness/diagnose_steps.h"

#include <cstring>
#include <string>

namespace ckpt {
namespace {

template <class T>
std::vector<double> flat(const Mat<T>& m) {
  return std::vector<double>(m.data(), m.data() + m.size());
}

template <class T>
bool sameBits(const Mat<T>& a, const Mat<T>& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         (a.size() == 0 || std::memcmp(a.data(), b.data(), sizeof(T) * static_cast<size_t>(a.size())) == 0);
}

bool endsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

template <class T>
TensorEvidence evidence(const std::string& name, TensorKind kind, const Mat<T>& a, const Mat<T>& b) {
  TensorEvidence e;
  e.name = name;
  e.kind = kind;
  e.plain = flat(a);
  e.other = flat(b);
  e.digits = sizeof(T) == 4 ? 24 : 53;
  // An empty side is a tensor that run never wrote (an input gradient dropped): absent. Two other shapes are
  // both present, and no class but semantic compares them.
  if (e.plain.size() != e.other.size()) {
    if (e.other.empty()) e.otherPresent = false;
    else if (e.plain.empty()) e.plainPresent = false;
  }
  return e;
}

// Every differing tensor of step s.
template <class T>
std::vector<TensorEvidence> stepEvidence(const std::vector<StepResult<T>>& plain,
                                         const std::vector<StepResult<T>>& other,
                                         const std::vector<NamedMat<T>>& initialState, size_t s, int64_t passes,
                                         double momentum) {
  const StepResult<T>& a = plain[s];
  const StepResult<T>& b = other[s];
  std::vector<TensorEvidence> ev;
  if (std::memcmp(&a.loss, &b.loss, sizeof(T)) != 0) {
    TensorEvidence e;
    e.name = "loss";
    e.kind = TensorKind::kLoss;
    e.plain = {static_cast<double>(a.loss)};
    e.other = {static_cast<double>(b.loss)};
    e.digits = sizeof(T) == 4 ? 24 : 53;
    ev.push_back(e);
  }
  for (size_t k = 0; k < a.grads.size() && k < b.grads.size(); ++k)
    if (!sameBits(a.grads[k].value, b.grads[k].value))
      ev.push_back(evidence(a.grads[k].name, TensorKind::kGradient, a.grads[k].value, b.grads[k].value));
  if (!sameBits(a.inputGrad, b.inputGrad))
    ev.push_back(evidence<T>("input_grad", TensorKind::kGradient, a.inputGrad, b.inputGrad));
  const std::vector<NamedMat<T>>& before = s > 0 ? plain[s - 1].state : initialState;
  for (size_t k = 0; k < a.state.size() && k < b.state.size(); ++k) {
    if (sameBits(a.state[k].value, b.state[k].value)) continue;
    if (a.state[k].name == kAdapterRngStateName) {  // an adapter's generator state, one element per byte
      TensorEvidence e = evidence(a.state[k].name, TensorKind::kRng, a.state[k].value, b.state[k].value);
      e.floating = false;
      ev.push_back(e);
      continue;
    }
    TensorEvidence e = evidence(a.state[k].name, TensorKind::kState, a.state[k].value, b.state[k].value);
    if (k < before.size() && before[k].name == a.state[k].name) e.before = flat(before[k].value);
    e.passes = passes;
    if (endsWith(e.name, "num_batches_tracked")) e.floating = false;
    else e.momentum = momentum;
    ev.push_back(e);
  }
  if (a.rng.seed != b.rng.seed || a.rng.offset != b.rng.offset) {
    TensorEvidence e;
    e.name = "rng";
    e.kind = TensorKind::kRng;
    e.floating = false;
    e.plain = {static_cast<double>(a.rng.seed), static_cast<double>(a.rng.offset)};
    e.other = {static_cast<double>(b.rng.seed), static_cast<double>(b.rng.offset)};
    ev.push_back(e);
  }
  return ev;
}

}  // namespace

template <class T>
std::optional<Diagnosis> diagnoseSteps(const std::vector<StepResult<T>>& plain, const std::vector<StepResult<T>>& other,
                                       const std::vector<NamedMat<T>>& initialState, uint64_t roundingUlp,
                                       int64_t passes, double momentum) {
  for (size_t s = 0; s < plain.size() && s < other.size(); ++s) {
    const std::vector<TensorEvidence> ev = stepEvidence(plain, other, initialState, s, passes, momentum);
    if (!ev.empty()) return diagnose(ev, roundingUlp);
  }
  return std::nullopt;
}

template std::optional<Diagnosis> diagnoseSteps(const std::vector<StepResult<float>>&,
                                                const std::vector<StepResult<float>>&,
                                                const std::vector<NamedMat<float>>&, uint64_t, int64_t, double);
template std::optional<Diagnosis> diagnoseSteps(const std::vector<StepResult<double>>&,
                                                const std::vector<StepResult<double>>&,
                                                const std::vector<NamedMat<double>>&, uint64_t, int64_t, double);

}  // namespace ckpt
