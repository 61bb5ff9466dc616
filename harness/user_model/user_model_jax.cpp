#include "harness/user_model/user_model_jax.h"

#include <algorithm>
#include <sstream>

namespace ckpt {

std::optional<Diagnosis> gradientsWithinScale(const std::vector<TensorEvidence>& differing, uint64_t ulp) {
  const auto isGradient = [](const TensorEvidence& t) { return t.kind == TensorKind::kGradient; };
  if (std::none_of(differing.begin(), differing.end(), isGradient)) return std::nullopt;
  std::vector<TensorEvidence> judged;
  double paramUlp = 0;
  for (const auto& t : differing) {
    if (t.kind == TensorKind::kParameter) paramUlp = std::max(paramUlp, scaledUlp(t));
    else judged.push_back(t);
  }
  Diagnosis d = diagnose(judged, ulp);
  if (d.cls != FindingClass::kRoundingLevel) return std::nullopt;
  std::ostringstream w;
  w.precision(3);
  w << d.why << "; the parameters after the optimizer's update differ by up to " << paramUlp
    << " ULP of their scale, as the update amplifies the gradients' last bits";
  d.why = w.str();
  return d;
}

}  // namespace ckpt
