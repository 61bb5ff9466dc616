#include "harness/adapters/plan_check.h"

#include <algorithm>
#include <stdexcept>

#include "common/input_error.h"
#include "harness/engine/costs_file.h"
#include "harness/engine/placement.h"

namespace ckpt {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& path, const std::string& field, const std::string& what) {
  throw InputError("placement file '" + path + "': " + field + ": " + what);
}

int64_t count(const std::string& path, const json& o, const std::string& key, const std::string& field) {
  if (!o.contains(key)) bad(path, field, "missing");
  if (!o[key].is_number_integer() || o[key].get<int64_t>() < 0) bad(path, field, "must be a non-negative integer");
  return o[key].get<int64_t>();
}

std::vector<int64_t> counts(const std::string& path, const json& o, const std::string& key, const std::string& field,
                            size_t n) {
  if (!o.contains(key) || !o[key].is_array()) bad(path, field, "must be an array");
  if (o[key].size() != n) bad(path, field, "must hold " + std::to_string(n) + " numbers, one per block");
  std::vector<int64_t> v;
  for (size_t i = 0; i < n; ++i) {
    const json& e = o[key][i];
    if (!e.is_number_integer() || e.get<int64_t>() < 0)
      bad(path, field + "[" + std::to_string(i) + "]", "must be a non-negative integer");
    v.push_back(e.get<int64_t>());
  }
  return v;
}

std::string text(const std::string& path, const json& o, const std::string& key) {
  if (!o.contains(key) || !o[key].is_string()) bad(path, key, "must be a string");
  return o[key].get<std::string>();
}

}  // namespace

PlacementFile loadPlacementFile(const std::string& path) {
  const json j = readJsonFile(path, "placement file");
  if (!j.is_object()) throw InputError("placement file '" + path + "': must be a JSON object (COSTS.md)");
  PlacementFile p;
  p.path = path;
  if (text(path, j, "format") != kPlacementFormat)
    bad(path, "format", std::string("must be \"") + kPlacementFormat + "\" (written by `ckptcheck plan --placement`)");
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int64_t>() != kPlacementVersion)
    bad(path, "version", "this ckptcheck reads version " + std::to_string(kPlacementVersion) + "; plan it again");
  p.model = text(path, j, "model");
  p.policy = text(path, j, "policy");
  p.batchSize = count(path, j, "batch_size", "batch_size");
  if (!j.contains("blocks") || !j["blocks"].is_array() || j["blocks"].empty())
    bad(path, "blocks", "must be a non-empty array of block names");
  for (size_t i = 0; i < j["blocks"].size(); ++i) {
    if (!j["blocks"][i].is_string()) bad(path, "blocks[" + std::to_string(i) + "]", "must be a string");
    p.blocks.push_back(j["blocks"][i].get<std::string>());
  }
  if (!j.contains("segments") || !j["segments"].is_array()) bad(path, "segments", "must be an array");
  int next = 0;
  for (size_t i = 0; i < j["segments"].size(); ++i) {
    const json& g = j["segments"][i];
    const std::string f = "segments[" + std::to_string(i) + "]";
    if (!g.is_object()) bad(path, f, "must be an object");
    const int64_t first = count(path, g, "first", f + ".first"), last = count(path, g, "last", f + ".last");
    if (first != next || last < first || last >= static_cast<int64_t>(p.blocks.size()))
      bad(path, f, "must start at block " + std::to_string(next) + " and end within the " +
                       std::to_string(p.blocks.size()) + " blocks (segments cover the chain in order)");
    if (!g.contains("recompute") || !g["recompute"].is_boolean()) bad(path, f + ".recompute", "must be true or false");
    next = static_cast<int>(last) + 1;
  }
  if (next != static_cast<int>(p.blocks.size())) bad(path, "segments", "do not cover every block");
  if (!j.contains("predicted") || !j["predicted"].is_object()) bad(path, "predicted", "must be an object");
  const json& q = j["predicted"];
  p.savedBytes = count(path, q, "saved_bytes", "predicted.saved_bytes");
  p.savedBefore = count(path, q, "saved_bytes_before", "predicted.saved_bytes_before");
  p.savedAfter = count(path, q, "saved_bytes_after", "predicted.saved_bytes_after");
  p.savedByBlock = counts(path, q, "saved_bytes_by_block", "predicted.saved_bytes_by_block", p.blocks.size());
  p.forwardCalls = counts(path, q, "forward_calls", "predicted.forward_calls", p.blocks.size());
  if (q.contains("time_overhead") && q["time_overhead"].is_number()) p.timeOverhead = q["time_overhead"].get<double>();
  return p;
}

PlanOutcome checkPlan(const PlacementFile& p, const json& m, double secondsPlain, double secondsPlan) {
  PlanOutcome o;
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
      std::sort(ratios.begin(), ratios.end());
      const size_t n = ratios.size();
      o.measuredTime = n % 2 ? ratios[n / 2] : (ratios[n / 2 - 1] + ratios[n / 2]) / 2;
      o.timedPairs = static_cast<int>(n);
    }
  } else if (secondsPlain > 0 && secondsPlan > 0) {
    o.measuredTime = secondsPlan / secondsPlain - 1.0;
  }
  const std::vector<int64_t> byBlock = m.at("saved_bytes_by_block").get<std::vector<int64_t>>();
  const std::vector<int64_t> calls = m.at("forward_calls").get<std::vector<int64_t>>();
  if (byBlock.size() != p.blocks.size() || calls.size() != p.blocks.size())
    throw std::runtime_error("the driver's plan record has " + std::to_string(byBlock.size()) + " blocks, the placement " +
                             std::to_string(p.blocks.size()));
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
  return o;
}

}  // namespace ckpt
