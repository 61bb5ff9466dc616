#include "harness/engine/schedule.h"

namespace ckpt {
namespace {

const char* kindName(InstrKind k) {
  switch (k) {
    case InstrKind::kForward:
      return "forward";
    case InstrKind::kFree:
      return "free";
    case InstrKind::kLoss:
      return "loss";
    case InstrKind::kBackward:
      return "backward";
  }
  return "?";
}

std::string maskText(const KeepMask& m) {
  std::string s;
  for (bool b : m) s += b ? '1' : '0';
  return s;
}

}  // namespace

std::string toText(const Instr& i) {
  switch (i.kind) {
    case InstrKind::kForward:
      return "forward " + std::to_string(i.block) + (i.tape ? " tape" : "");
    case InstrKind::kFree:
      return "free x " + std::to_string(i.block);
    case InstrKind::kLoss:
      return "loss";
    case InstrKind::kBackward:
      return "backward " + std::to_string(i.block);
  }
  return "?";
}

// One instruction a line, after a '#' header; op-level keep masks (one digit per node, 1 = context kept) follow
// the header when the schedule has them.
std::string toText(const Schedule& s) {
  std::string out = "# policy " + s.policy + ", " + std::to_string(s.layers) + " layers, " +
                    std::to_string(s.instrs.size()) + " instructions\n";
  for (size_t b = 0; b < s.keep.size(); ++b) out += "# keep " + std::to_string(b) + " " + maskText(s.keep[b]) + "\n";
  for (const Instr& i : s.instrs) {
    out += toText(i);
    out += '\n';
  }
  return out;
}

nlohmann::json toJson(const Schedule& s) {
  nlohmann::json j;
  j["policy"] = s.policy;
  j["layers"] = s.layers;
  nlohmann::json instrs = nlohmann::json::array();
  for (const Instr& i : s.instrs) {
    nlohmann::json ji;
    ji["op"] = kindName(i.kind);
    if (i.kind != InstrKind::kLoss) ji["index"] = i.block;
    if (i.kind == InstrKind::kForward) ji["tape"] = i.tape;
    instrs.push_back(std::move(ji));
  }
  j["instructions"] = std::move(instrs);
  if (!s.keep.empty()) {
    nlohmann::json keep = nlohmann::json::array();
    for (const KeepMask& m : s.keep) keep.push_back(maskText(m));
    j["keep"] = std::move(keep);
  }
  return j;
}

}  // namespace ckpt
