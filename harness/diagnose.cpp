#include "harness/diagnose.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

namespace ckpt {

const char* findingClassName(FindingClass c) {
  switch (c) {
    case FindingClass::kMissingGradient:
      return "missing-gradient";
    case FindingClass::kRngDesync:
      return "rng-desync";
    case FindingClass::kStateUpdatedTwice:
      return "state-updated-twice";
    case FindingClass::kRoundingLevel:
      return "rounding-level";
    case FindingClass::kSemantic:
      return "semantic";
  }
  return "semantic";
}

nlohmann::json toJson(const Diagnosis& d) { return {{"class", findingClassName(d.cls)}, {"why", d.why}}; }

namespace {

bool allZero(const std::vector<double>& v) {
  return std::all_of(v.begin(), v.end(), [](double x) { return x == 0.0; });
}

double maxAbs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

// A gradient that is zero in exact arithmetic (a Linear bias before BatchNorm) comes out as rounding noise in one
// run and exactly zero, or other noise, in the other. Noise: within roundingUlp ULPs of the largest magnitude of
// the step's differing gradients, when some other gradient is larger (the tensor's own scale says nothing then).
struct GradientNoise {
  double scale = 0, noise = 0;
  bool is(const TensorEvidence& t) const {
    return t.kind == TensorKind::kGradient && t.plainPresent && t.otherPresent && maxAbs(t.plain) <= noise &&
           maxAbs(t.other) <= noise && maxAbs(t.plain) < scale;
  }
};
GradientNoise gradientNoise(const std::vector<TensorEvidence>& ts, uint64_t roundingUlp) {
  GradientNoise g;
  int digits = 53;
  for (const auto& t : ts)
    if (t.kind == TensorKind::kGradient && t.plainPresent && t.floating) {
      g.scale = std::max(g.scale, maxAbs(t.plain));
      digits = std::min(digits, t.digits);
    }
  int e = 0;
  std::frexp(g.scale, &e);
  g.noise = static_cast<double>(roundingUlp) * std::ldexp(1.0, e - digits);
  return g;
}

std::optional<std::string> missingGradient(const std::vector<TensorEvidence>& ts, const GradientNoise& noise) {
  for (const auto& t : ts) {
    if (t.kind != TensorKind::kGradient || !t.plainPresent) continue;
    // Absent where the plain run has one, even one that is zero (a ReLU that let nothing through): the
    // checkpointed run never wrote it, whatever its value would have been.
    if (!t.otherPresent) return "gradient of " + t.name + " is absent in the checkpointed run";
    if (allZero(t.plain) || noise.is(t)) continue;
    if (allZero(t.other)) return "gradient of " + t.name + " is all zero in the checkpointed run";
  }
  return std::nullopt;
}

std::optional<std::string> rngDesync(const std::vector<TensorEvidence>& ts) {
  for (const auto& t : ts) {
    if (t.kind != TensorKind::kMask || t.plain.size() != t.other.size()) continue;
    int64_t n = 0;
    for (size_t i = 0; i < t.plain.size(); ++i) n += t.plain[i] != t.other[i];
    if (n > 0) return "the zero pattern of " + t.name + "'s output differs in " + std::to_string(n) + " element(s)";
  }
  for (const auto& t : ts)
    if (t.kind == TensorKind::kRng) return "the generator state " + t.name + " differs after the step";
  return std::nullopt;
}

// Relative agreement for recomputed statistics: the second update's batch statistic is recomputed with the same
// kernels, but the update itself rounds, so allow a few float32 ULPs of the values involved.
bool near(double a, double b, double scale) { return std::fabs(a - b) <= 1e-5 * scale + 1e-30; }

}  // namespace

double scaledUlp(const TensorEvidence& t) {
  if (!t.plainPresent || !t.otherPresent || t.plain.size() != t.other.size())
    return std::numeric_limits<double>::infinity();
  double scale = 0, diff = 0;
  for (size_t i = 0; i < t.plain.size(); ++i) {
    const double d = std::fabs(t.plain[i] - t.other[i]);
    if (std::isnan(d) && !(std::isnan(t.plain[i]) && std::isnan(t.other[i])))
      return std::numeric_limits<double>::infinity();
    scale = std::max(scale, std::fabs(t.plain[i]));
    if (!std::isnan(d)) diff = std::max(diff, d);
  }
  if (diff == 0) return 0;
  if (scale == 0 || std::isinf(scale)) return std::numeric_limits<double>::infinity();
  int e = 0;
  std::frexp(scale, &e);  // scale in [2^(e-1), 2^e): its ULP is 2^(e - digits)
  return diff / std::ldexp(1.0, e - t.digits);
}

namespace {

// A buffer the forward adds into, per element (an MoE block's tokens-per-expert count, a histogram): the step added
// d_i = plain_i - before_i, and a recompute that runs the forward again adds each d_i u more times, exactly
// (counts are whole numbers, exact in float32 up to 2^24). One step, one pass: with micro-batches each pass adds
// its own counts, which the values cannot separate.
int addedAgain(const TensorEvidence& t) {
  if (t.passes > 1) return 0;
  size_t ref = 0;
  for (size_t i = 1; i < t.plain.size(); ++i)
    if (std::fabs(t.plain[i] - t.before[i]) > std::fabs(t.plain[ref] - t.before[ref])) ref = i;
  const double dref = t.plain[ref] - t.before[ref];
  if (dref == 0.0 || std::fmod(t.other[ref] - t.plain[ref], dref) != 0.0) return 0;
  const double u = (t.other[ref] - t.plain[ref]) / dref;
  if (u < 1 || u > kMaxFurtherUpdates) return 0;
  for (size_t i = 0; i < t.plain.size(); ++i)
    if (t.other[i] - t.plain[i] != u * (t.plain[i] - t.before[i])) return 0;
  return static_cast<int>(u);
}

}  // namespace

int furtherUpdates(const TensorEvidence& t) {
  const size_t n = t.plain.size();
  if (t.kind != TensorKind::kState || !t.plainPresent || !t.otherPresent || t.before.size() != n ||
      t.other.size() != n || n == 0)
    return 0;
  if (!t.floating) {  // a counter: incremented u more times by one update's increment (the step's / passes)
    const double step = (t.plain[0] - t.before[0]) / static_cast<double>(t.passes);
    bool uniform = step != 0.0 && std::fmod(t.other[0] - t.plain[0], step) == 0.0;
    const double u = uniform ? (t.other[0] - t.plain[0]) / step : 0.0;
    for (size_t i = 0; i < n && uniform; ++i)
      uniform = t.plain[i] - t.before[i] == step * static_cast<double>(t.passes) && t.other[i] - t.plain[i] == u * step;
    if (uniform) return u >= 1 && u <= kMaxFurtherUpdates ? static_cast<int>(u) : 0;
  }
  if (const int u = addedAgain(t); u > 0) return u;
  if (!t.floating) return 0;
  // With micro-batches the statistic moves once per micro-batch, each time toward another batch value, so an
  // extra update cannot be told from the values alone (diagnose asks the module's counter instead).
  if (t.passes > 1) return 0;
  // r1 = (1-m) r0 + m x and r2 = (1-m) r1 + m x give r2 - r1 = (1-m)(r1 - r0): the same ratio k = 1-m for every
  // element that moved; u further updates give r(1+u) - r1 = (k + k^2 + ... + k^u)(r1 - r0). With the momentum
  // known, u is the one that fits; else k is estimated from the largest move, and only u = 1 can be told.
  size_t ref = 0;
  for (size_t i = 1; i < n; ++i)
    if (std::fabs(t.plain[i] - t.before[i]) > std::fabs(t.plain[ref] - t.before[ref])) ref = i;
  const double d1ref = t.plain[ref] - t.before[ref];
  if (d1ref == 0.0) return 0;
  const double k = t.momentum ? 1.0 - *t.momentum : (t.other[ref] - t.plain[ref]) / d1ref;
  if (!(k > 0.0 && k < 1.0)) return 0;
  double ratio = 0, power = 1;
  for (int u = 1; u <= (t.momentum ? kMaxFurtherUpdates : 1); ++u) {
    power *= k;
    ratio += power;
    bool fits = true;
    for (size_t i = 0; i < n && fits; ++i) {
      const double d1 = t.plain[i] - t.before[i];
      const double scale = std::max({std::fabs(t.plain[i]), std::fabs(t.before[i]), std::fabs(ratio * d1)});
      fits = near(t.other[i], t.plain[i] + ratio * d1, scale);
    }
    if (fits) return u;
  }
  return 0;
}

bool worthDropoutOffRerun(const Diagnosis& d, bool caseDraws) { return d.cls == FindingClass::kSemantic && caseDraws; }

Diagnosis dropoutOffDiagnosis() {
  return {FindingClass::kRngDesync,
          "with the random draws off (dropout, drop-path, RReLU's spread, router jitter) the checkpointed run equals "
          "the plain run "
          "bit for bit: the recompute drew other random numbers"};
}

Diagnosis drawsReplayedDiagnosis() {
  return {FindingClass::kRngDesync,
          "with every recompute's draws replayed (the generator restored before it and put back after, no side stream; "
          "the same model, masks and routing) the checkpointed run equals the plain run bit for bit: the recompute "
          "drew other random numbers"};
}

Diagnosis diagnose(const std::vector<TensorEvidence>& differing, uint64_t roundingUlp) {
  const GradientNoise noise = gradientNoise(differing, roundingUlp);
  if (auto why = missingGradient(differing, noise)) return {FindingClass::kMissingGradient, *why};
  if (auto why = rngDesync(differing)) return {FindingClass::kRngDesync, *why};
  std::vector<const TensorEvidence*> compared;  // masks are evidence, never a difference of their own
  for (const auto& t : differing)
    if (t.kind != TensorKind::kMask) compared.push_back(&t);
  if (compared.empty()) return {FindingClass::kSemantic, "no compared tensor differs"};
  const bool onlyState = std::all_of(compared.begin(), compared.end(),
                                     [](const TensorEvidence* t) { return t->kind == TensorKind::kState; });
  // A running statistic fits by its own values; with micro-batches (where they cannot tell) by its module's
  // counter, which moved exactly as many increments more.
  const auto moduleOf = [](const std::string& n) { return n.substr(0, n.rfind('.')); };
  const auto updates = [&](const TensorEvidence* t) {
    if (const int u = furtherUpdates(*t); u > 0 || t->passes <= 1 || !t->floating) return u;
    for (const auto* c : compared)
      if (!c->floating && moduleOf(c->name) == moduleOf(t->name)) return furtherUpdates(*c);
    return 0;
  };
  if (onlyState &&
      std::all_of(compared.begin(), compared.end(), [&](const TensorEvidence* t) { return updates(t) > 0; })) {
    const int u = updates(compared.front());
    return {FindingClass::kStateUpdatedTwice,
            compared.front()->name + " (and every other differing buffer) equals " +
                (u == 1 ? std::string("one more update") : std::to_string(u) + " more updates") +
                " of its plain value"};
  }
  double worst = 0;
  bool allFloat = true;
  for (const auto* t : compared) {
    allFloat = allFloat && t->floating && t->plainPresent && t->otherPresent;
    const double u = scaledUlp(*t);
    worst = std::max(worst, noise.is(*t) ? std::min(u, static_cast<double>(roundingUlp)) : u);
  }
  std::ostringstream w;
  w.precision(3);
  w << worst;
  if (allFloat && worst <= static_cast<double>(roundingUlp))
    return {FindingClass::kRoundingLevel,
            "every difference is within " + w.str() + " ULP of its tensor's largest magnitude", worst};
  // Only buffers differ, and not as further updates (a count the step clears after the forward, which the
  // recompute adds into again): the computation is right and its state is not. Said, since the ULP means nothing
  // to a buffer the plain step leaves at zero.
  if (onlyState)
    return {FindingClass::kSemantic,
            "only buffers differ (the loss, gradients and parameters are equal); " + compared.front()->name +
                " is not its plain value updated again",
            worst};
  return {FindingClass::kSemantic,
          "no narrower class explains the differences (largest " + w.str() + " ULP of the tensor's scale)", worst};
}

}  // namespace ckpt
