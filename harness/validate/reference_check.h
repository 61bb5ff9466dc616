// Check 2's comparison (tolerance.h has the numbers): the adapter's plain run against ckptcheck's reference,
// tensor by tensor and step by step, with the scale each tensor is judged on and why, so a fault names absolute
// values a person can check rather than a bare ratio.
#pragma once
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "harness/validate/tolerance.h"
#include "reference/trainer.h"

namespace ckpt {

// The worst tensor of a comparison: how far over its allowance (ratio > 1 is a fault), and the figures.
struct RefError {
  double ratio = 0;  // max |adapter - reference| / allowed
  std::string tensor;
  int step = 0;
  double diff = 0;     // max |adapter - reference| over the tensor
  double allowed = 0;  // what the tolerance allowed for it
  std::string basis;   // the scale `allowed` came from, for people

  std::string describe(double tol) const {
    std::ostringstream s;
    s.precision(3);
    s << "step " << step << " " << tensor << ": max |adapter - reference| = " << diff << ", allowed " << allowed << " ("
      << basis << ", tolerance " << tol << ")";
    return s.str();
  }
};

inline std::string refNum(double v) {
  std::ostringstream s;
  s.precision(3);
  s << v;
  return s.str();
}

template <class T>
double maxAbsOf(const Mat<T>& m) {
  double x = 0;
  for (int64_t i = 0; i < m.size(); ++i) x = std::max(x, std::abs(static_cast<double>(m.data()[i])));
  return x;
}

// max |got - ref| over a tensor; infinity for a shape mismatch or a NaN on one side only.
template <class T, class U>
double maxAbsDiff(const Mat<T>& ref, const Mat<U>& got) {
  if (ref.rows() != got.rows() || ref.cols() != got.cols()) return std::numeric_limits<double>::infinity();
  double d = 0;
  for (int64_t i = 0; i < ref.size(); ++i) {
    const double a = static_cast<double>(ref.data()[i]), b = static_cast<double>(got.data()[i]);
    if (std::isnan(a) != std::isnan(b)) return std::numeric_limits<double>::infinity();
    if (!std::isnan(a)) d = std::max(d, std::abs(a - b));
  }
  return d;
}

// What float arithmetic can resolve of a case, from its first step in double (check 2 in double uses `around` only):
//   around[i]       the largest |gradient| at block boundary i (g_i = dL/dx_i, i = 0..L); the gradient flowing
//                   around block i is max(around[i], around[i+1]) and can dwarf every parameter gradient;
//   degenerateBlock the last block holding a normalisation over values that are all equal (-1: none). There the
//                   exact output is the bias, and float rounding decides which side of a following ReLU it falls
//                   on and how far from the bias it lands (1/sqrt(eps) times an ULP): the gradients of every
//                   block before it, and the activations of every block after it, are decided by rounding, not
//                   by the model. Check 2 in float does not compare such a case at all.
//   rounding        per block group ("grad b4", "state b4", "loss", "input_grad"), how far the float reference's
//                   first step is from the double one: where a block cancels large terms, another float
//                   implementation rounds differently by up to kRoundingFactor times that.
struct FloatConditioning {
  std::vector<double> around;
  int degenerateBlock = -1;
  std::map<std::string, double> rounding;
};

// "grad b4.fc.bias" -> "grad b4"; names without a block ("loss", "input_grad") are their own group.
inline std::string blockGroup(const std::string& name) {
  const size_t dot = name.find('.');
  return dot == std::string::npos ? name : name.substr(0, dot);
}

template <class T>
void addFloatRounding(FloatConditioning& c, const std::vector<StepResult<T>>& f,
                      const std::vector<StepResult<double>>& d) {
  if (f.empty() || d.empty()) return;
  auto see = [&](const std::string& name, double v) {
    double& g = c.rounding[blockGroup(name)];
    g = std::max(g, v);
  };
  see("loss", std::abs(static_cast<double>(f[0].loss) - d[0].loss));
  for (size_t k = 0; k < f[0].grads.size(); ++k)
    see("grad " + f[0].grads[k].name, maxAbsDiff(d[0].grads[k].value, f[0].grads[k].value));
  see("input_grad", maxAbsDiff(d[0].inputGrad, f[0].inputGrad));
  for (size_t k = 0; k < f[0].state.size(); ++k)
    see("state " + f[0].state[k].name, maxAbsDiff(d[0].state[k].value, f[0].state[k].value));
}
FloatConditioning floatConditioning(const CaseSpec& spec);

// Each tensor is judged against tol x its scale, the scale being, in order:
//   its own largest magnitude, when that is at least `floor` x the largest tensor of its kind in the step
//     (every parameter gradient with the input gradient; every state buffer);
//   else `floor` x that largest one: a tensor that is zero up to rounding (a Linear bias feeding
//     BatchNorm has an exactly-zero gradient in exact arithmetic) is judged by the gradients around it, not by
//     its own rounding noise. With `around` (check 2 in float, blockBoundaryScales below), a block's parameter
//     gradients are judged by the gradients flowing into and out of that block too, which can be far larger
//     than any parameter gradient;
//   else, when every tensor of its kind is exactly zero (a dead ReLU chain), the loss's magnitude.
template <class T>
RefError compareWithReference(const std::vector<StepResult<T>>& ref, const std::vector<StepResult<T>>& got, double tol,
                              double floor = kReferenceFloor, const FloatConditioning* cond = nullptr) {
  RefError e;
  // The block a "bK.…" parameter belongs to; -1 for other names.
  auto blockOf = [](const std::string& name) {
    const size_t dot = name.find('.');
    if (name.rfind("b", 0) != 0 || dot == std::string::npos || dot < 2) return -1;
    size_t used = 0;
    try {
      const int k = std::stoi(name.substr(1, dot - 1), &used);
      return used == dot - 1 ? k : -1;
    } catch (const std::exception&) {
      return -1;
    }
  };
  auto aroundOf = [&](int k) {
    if (!cond || k < 0 || static_cast<size_t>(k) + 1 >= cond->around.size()) return 0.0;
    return std::max(cond->around[static_cast<size_t>(k)], cond->around[static_cast<size_t>(k) + 1]);
  };
  for (size_t s = 0; s < ref.size() && s < got.size(); ++s) {
    const auto& r = ref[s];
    const auto& g = got[s];
    const int step = static_cast<int>(s);
    const double lossScale = std::abs(static_cast<double>(r.loss));
    auto see = [&](double diff, double own, double kindScale, const std::string& kind, const std::string& name,
                   double flowing = 0.0) {
      double scale;
      std::string basis;
      if (own > 0 && own >= floor * std::max(kindScale, flowing)) {
        scale = own;
        basis = "relative to its own largest magnitude " + refNum(own);
      } else if (flowing > kindScale) {
        scale = floor * flowing;
        basis = "it is near zero (largest magnitude " + refNum(own) + "), so relative to " + refNum(floor) +
                " x the largest gradient flowing through its block, " + refNum(flowing);
      } else if (kindScale > 0) {
        scale = floor * kindScale;
        basis = "it is near zero (largest magnitude " + refNum(own) + "), so relative to " + refNum(floor) +
                " x the largest " + kind + " of the step, " + refNum(kindScale);
      } else {
        scale = lossScale;
        basis =
            "every reference " + kind + " of the step is exactly zero, so relative to the loss " + refNum(lossScale);
      }
      double allowed = tol * scale;
      if (cond && s == 0) {
        const auto it = cond->rounding.find(blockGroup(name));
        if (it != cond->rounding.end() && kRoundingFactor * it->second > allowed) {
          allowed = kRoundingFactor * it->second;
          basis = "float rounding: the float reference is " + refNum(it->second) +
                  " from the double one in this block (allowed " + refNum(kRoundingFactor) + " x that)";
        }
      }
      const double ratio = diff == 0 ? 0.0 : allowed > 0 ? diff / allowed : std::numeric_limits<double>::infinity();
      if (ratio > e.ratio || (std::isnan(ratio) && !std::isnan(e.ratio))) e = {ratio, name, step, diff, allowed, basis};
    };
    const double rl = static_cast<double>(r.loss), gl = static_cast<double>(g.loss);
    see(std::isnan(rl) != std::isnan(gl) ? std::numeric_limits<double>::infinity() : std::abs(rl - gl), lossScale,
        lossScale, "loss", "loss");
    double gradScale = maxAbsOf(r.inputGrad), stateScale = 0;
    for (const auto& t : r.grads) gradScale = std::max(gradScale, maxAbsOf(t.value));
    for (const auto& t : r.state) stateScale = std::max(stateScale, maxAbsOf(t.value));
    for (size_t k = 0; k < r.grads.size(); ++k)
      see(maxAbsDiff(r.grads[k].value, g.grads[k].value), maxAbsOf(r.grads[k].value), gradScale, "gradient",
          "grad " + r.grads[k].name, aroundOf(blockOf(r.grads[k].name)));
    see(maxAbsDiff(r.inputGrad, g.inputGrad), maxAbsOf(r.inputGrad), gradScale, "gradient", "input_grad");
    // The adapter's state holds the reference's buffers in order, then possibly its generator (not comparable).
    for (size_t k = 0; k < r.state.size(); ++k)
      see(maxAbsDiff(r.state[k].value, g.state[k].value), maxAbsOf(r.state[k].value), stateScale, "state buffer",
          "state " + r.state[k].name);
  }
  return e;
}

// The largest |gradient| at each block boundary of the case's first step in double (g_i = dL/dx_i, i = 0..L):
// the gradient flowing around block i is max(|g_i|, |g_{i+1}|). Inside a block it can dwarf every parameter
// gradient the adapter reports: BatchNorm over two nearly equal rows scales its input gradient by up to
// 1/sqrt(eps) ~ 316, and the Linear bias before it, zero in exact arithmetic, is a float sum of such values.

// Whether every parameter and input gradient of the reference's first step is exactly zero (a dead ReLU chain):
// such a case says nothing about a translation, so shrinking a translation fault avoids it.
template <class T>
bool gradientsAllZero(const std::vector<StepResult<T>>& ref) {
  if (ref.empty()) return false;
  double m = maxAbsOf(ref[0].inputGrad);
  for (const auto& t : ref[0].grads) m = std::max(m, maxAbsOf(t.value));
  return m == 0;
}

}  // namespace ckpt
