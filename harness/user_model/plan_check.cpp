#include "harness/user_model/plan_check.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "cases/user_file.h"
#include "common/input_error.h"
#include "common/quantile.h"
#include "harness/engine/costs_file.h"
#include "harness/engine/placement.h"

namespace ckpt {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& path, const std::string& field, const std::string& what) {
  throw InputError("placement file '" + path + "': " + field + ": " + what);
}

// A non-negative integer of at most `most` (the costs format's bound: every count is a sum over a costs file).
int64_t bounded(const std::string& path, const json& v, const std::string& field, int64_t most = kMaxCostsCount) {
  if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<int64_t>() < 0))
    bad(path, field, "must be a non-negative integer");
  if (v.get<uint64_t>() > static_cast<uint64_t>(most)) bad(path, field, "must be at most " + std::to_string(most));
  return v.get<int64_t>();
}

int64_t count(const std::string& path, const json& o, const std::string& key, const std::string& field) {
  if (!o.contains(key)) bad(path, field, "missing");
  return bounded(path, o[key], field);
}

std::vector<int64_t> counts(const std::string& path, const json& o, const std::string& key, const std::string& field,
                            size_t n) {
  if (!o.contains(key) || !o[key].is_array()) bad(path, field, "must be an array");
  if (o[key].size() != n) bad(path, field, "must hold " + std::to_string(n) + " numbers, one per block");
  std::vector<int64_t> v;
  for (size_t i = 0; i < n; ++i) v.push_back(bounded(path, o[key][i], field + "[" + std::to_string(i) + "]"));
  return v;
}

// A number >= 0 (`null` too when `orNull`); nullopt for null.
std::optional<double> ratio(const std::string& path, const json& o, const std::string& key, const std::string& field,
                            bool orNull) {
  if (!o.contains(key)) bad(path, field, "missing");
  const json& v = o[key];
  if (orNull && v.is_null()) return std::nullopt;
  if (!v.is_number() || !(v.get<double>() >= 0) || !std::isfinite(v.get<double>()))
    bad(path, field, orNull ? "must be a non-negative number or null" : "must be a non-negative number");
  return v.get<double>();
}

// predicted: each field as COSTS.md has it, the total the sum of its parts, each block run once (stored) or twice
// (recomputed) as its segment says.
void readPredicted(const std::string& path, const json& j, const std::vector<bool>& recomputed, PlacementFile& p) {
  if (!j.contains("predicted") || !j["predicted"].is_object()) bad(path, "predicted", "must be an object");
  const json& q = j["predicted"];
  p.savedBytes = count(path, q, "saved_bytes", "predicted.saved_bytes");
  p.savedBefore = count(path, q, "saved_bytes_before", "predicted.saved_bytes_before");
  p.savedAfter = count(path, q, "saved_bytes_after", "predicted.saved_bytes_after");
  p.savedByBlock = counts(path, q, "saved_bytes_by_block", "predicted.saved_bytes_by_block", p.blocks.size());
  p.forwardCalls = counts(path, q, "forward_calls", "predicted.forward_calls", p.blocks.size());
  for (size_t i = 0; i < p.blocks.size(); ++i)
    if (p.forwardCalls[i] != (recomputed[i] ? 2 : 1))
      bad(path, "predicted.forward_calls[" + std::to_string(i) + "]",
          std::string("must be ") + (recomputed[i] ? "2: block " : "1: block ") + std::to_string(i) + " is " +
              (recomputed[i] ? "recomputed" : "stored"));
  int64_t sum = p.savedBefore;  // each part at most 2^53: stop once past it, before anything can wrap
  for (size_t i = 0; i <= p.blocks.size() && sum <= kMaxCostsCount; ++i)
    sum += i < p.blocks.size() ? p.savedByBlock[i] : p.savedAfter;
  if (sum != p.savedBytes)
    bad(path, "predicted.saved_bytes", "must be saved_bytes_before + saved_bytes_by_block + saved_bytes_after");
  p.peakBytes = count(path, q, "peak_activation_bytes", "predicted.peak_activation_bytes");
  ratio(path, q, "flop_overhead", "predicted.flop_overhead", false);
  p.timeOverhead = ratio(path, q, "time_overhead", "predicted.time_overhead", true);
}

std::string text(const std::string& path, const json& o, const std::string& key) {
  if (!o.contains(key) || !o[key].is_string()) bad(path, key, "must be a string");
  return o[key].get<std::string>();
}

}  // namespace

PlacementFile loadPlacementFile(const std::string& path) {
  return parsePlacementFile(readUserJson(path, "placement file"), path);
}

PlacementFile parsePlacementFile(const json& j, const std::string& path) {
  if (!j.is_object()) throw InputError("placement file '" + path + "': must be a JSON object (COSTS.md)");
  PlacementFile p;
  p.path = path;
  if (text(path, j, "format") != kPlacementFormat)
    bad(path, "format", std::string("must be \"") + kPlacementFormat + "\" (written by `ckptcheck plan --placement`)");
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int64_t>() != kPlacementVersion)
    bad(path, "version", "this ckptcheck reads version " + std::to_string(kPlacementVersion) + "; plan it again");
  p.model = text(path, j, "model");
  p.policy = text(path, j, "policy");
  if (!j.contains("batch_size")) bad(path, "batch_size", "missing");
  p.batchSize = bounded(path, j["batch_size"], "batch_size", kMaxCostsBatch);
  if (p.batchSize < 1) bad(path, "batch_size", "must be at least 1");
  if (!j.contains("blocks") || !j["blocks"].is_array() || j["blocks"].empty())
    bad(path, "blocks", "must be a non-empty array of block names");
  if (j["blocks"].size() > static_cast<size_t>(kMaxCostsBlocks))
    bad(path, "blocks", "must hold at most " + std::to_string(kMaxCostsBlocks) + " blocks, as a costs file");
  for (size_t i = 0; i < j["blocks"].size(); ++i) {
    if (!j["blocks"][i].is_string() || j["blocks"][i].get<std::string>().empty())
      bad(path, "blocks[" + std::to_string(i) + "]", "must be a non-empty string");
    p.blocks.push_back(j["blocks"][i].get<std::string>());
  }
  if (!j.contains("segments") || !j["segments"].is_array()) bad(path, "segments", "must be an array");
  std::vector<bool> recomputed;
  int next = 0;
  for (size_t i = 0; i < j["segments"].size(); ++i) {
    const json& g = j["segments"][i];
    const std::string f = "segments[" + std::to_string(i) + "]";
    if (!g.is_object()) bad(path, f, "must be an object");
    const int64_t first = count(path, g, "first", f + ".first"), last = count(path, g, "last", f + ".last");
    if (first != next || last < first || last >= static_cast<int64_t>(p.blocks.size()))
      bad(path, f,
          "must start at block " + std::to_string(next) + " and end within the " + std::to_string(p.blocks.size()) +
              " blocks (segments cover the chain in order)");
    if (!g.contains("recompute") || !g["recompute"].is_boolean()) bad(path, f + ".recompute", "must be true or false");
    recomputed.resize(static_cast<size_t>(last) + 1, g["recompute"].get<bool>());
    next = static_cast<int>(last) + 1;
  }
  if (next != static_cast<int>(p.blocks.size())) bad(path, "segments", "do not cover every block");
  readPredicted(path, j, recomputed, p);
  return p;
}

PlanOutcome checkPlan(const PlacementFile& p, const json& m, double secondsPlain, double secondsPlan,
                      std::optional<int64_t> measuredPeak) {
  PlanOutcome o;
  o.predictedPeak = p.peakBytes + p.savedBefore;  // each at most 2^53
  o.measuredPeak = measuredPeak;
  o.predictedBytes = p.savedBytes;
  o.measuredBytes = m.at("saved_bytes").get<int64_t>();
  o.predictedTime = p.timeOverhead;
  if (m.contains("timing") && m["timing"].is_object()) {
    const std::vector<double> plain = m["timing"].at("plain").get<std::vector<double>>();
    const std::vector<double> ckpt = m["timing"].at("checkpoint").get<std::vector<double>>();
    std::vector<double> ratios;
    for (size_t i = 0; i < plain.size() && i < ckpt.size(); ++i)
      if (plain[i] > 0) ratios.push_back(ckpt[i] / plain[i] - 1.0);
    if (!ratios.empty()) {
      o.measuredTime = quantile(ratios, 0.5);
      o.measuredTimeMiddleHalf = std::make_pair(quantile(ratios, 0.25), quantile(ratios, 0.75));
      o.timedPairs = static_cast<int>(ratios.size());
    }
  } else if (secondsPlain > 0 && secondsPlan > 0) {
    o.measuredTime = secondsPlan / secondsPlain - 1.0;
  }
  const std::vector<int64_t> byBlock = m.at("saved_bytes_by_block").get<std::vector<int64_t>>();
  const std::vector<int64_t> calls = m.at("forward_calls").get<std::vector<int64_t>>();
  if (byBlock.size() != p.blocks.size() || calls.size() != p.blocks.size())
    throw std::runtime_error("the driver's plan record has " + std::to_string(byBlock.size()) +
                             " blocks, the placement " + std::to_string(p.blocks.size()));
  auto diverge = [&](const std::string& where, int64_t predicted, int64_t measured) {
    o.finding = true;
    o.why = "saved activation bytes differ from the plan first at " + where + ": predicted " +
            std::to_string(predicted) + ", PyTorch saved " + std::to_string(measured) + " (total predicted " +
            std::to_string(o.predictedBytes) + ", measured " + std::to_string(o.measuredBytes) + ")";
  };
  const int64_t before = m.at("saved_bytes_before").get<int64_t>(), after = m.at("saved_bytes_after").get<int64_t>();
  if (before != p.savedBefore) {
    diverge("the part before the chain", p.savedBefore, before);
    return o;
  }
  for (size_t i = 0; i < p.blocks.size(); ++i) {
    if (calls[i] != p.forwardCalls[i]) {
      o.finding = true;
      o.why = "block " + p.blocks[i] + " ran " + std::to_string(calls[i]) + " time(s) in the step, the plan says " +
              std::to_string(p.forwardCalls[i]);
      return o;
    }
    if (byBlock[i] != p.savedByBlock[i]) {
      diverge("block " + std::to_string(i) + " (" + p.blocks[i] + ")", p.savedByBlock[i], byBlock[i]);
      return o;
    }
  }
  if (after != p.savedAfter) diverge("the part after the chain", p.savedAfter, after);
  else if (o.measuredBytes != o.predictedBytes) diverge("the total", o.predictedBytes, o.measuredBytes);
  else if (measuredPeak && *measuredPeak > static_cast<double>(o.predictedPeak) * (1.0 + kPeakTolerance)) {
    o.finding = true;
    o.why = "the step's peak exceeds the plan: predicted " + std::to_string(o.predictedPeak) + " B (planned " +
            std::to_string(p.peakBytes) + " + " + std::to_string(p.savedBefore) +
            " saved before the chain), torch.profiler measured " + std::to_string(*measuredPeak) + " B, more than " +
            std::to_string(static_cast<int>(100 * kPeakTolerance)) +
            "% above: the placement holds tensors the plan does not (one kept past its block's backward, "
            "recomputes that overlap), while the saved bytes are as planned";
  }
  return o;
}

}  // namespace ckpt
