#include "cases/stochastic_layers.h"

#include <algorithm>

#include "cases/json_fields.h"
#include "cases/moe_case.h"

namespace ckpt {

using json_fields::fail;
using json_fields::number;

const BlockField& dropPathField() {
  static const BlockField f{
      "drop_path", "drop_path",
      [](const nlohmann::json& b, const std::string& path, const CaseSpec&, BlockSpec& s) {
        s.dropPath = json_fields::getNumber(b, "drop_path", path, 0.0);
        if (s.dropPath < 0 || s.dropPath >= 1) fail(path, "must be in [0, 1) (got " + number(s.dropPath) + ")");
      },
      nullptr};  // drawn by applyStochasticDraw, after every per-block draw, so older seeds draw what they drew
  return f;
}

bool anyDropPath(const CaseSpec& c) {
  return std::any_of(c.blocks.begin(), c.blocks.end(), [](const BlockSpec& b) { return dropsPath(b); });
}

int addDropPath(std::vector<OpNode>& program, const char* name, int branch, const BlockSpec& s, const CaseSpec& c) {
  program.push_back({name, "drop_path", {c.seq}, s.dropPath, {branch}});
  return static_cast<int>(program.size()) - 1;
}

std::string dropPathText(const BlockSpec& s) { return dropsPath(s) ? "/dp" + number(s.dropPath) : ""; }

std::vector<std::pair<std::string, std::string>> dropPathNeeds(const BlockSpec& s) {
  if (!dropsPath(s)) return {};
  return {{"drop_path", "on"}};
}

bool anyRrelu(const CaseSpec& c) {
  return std::any_of(c.blocks.begin(), c.blocks.end(),
                     [](const BlockSpec& b) { return b.activation == Activation::kRrelu; });
}

void parseRreluRange(const nlohmann::json& j, CaseSpec& c) {
  if (!j.contains("rrelu_range")) return;
  const auto& r = j.at("rrelu_range");
  if (!r.is_array() || r.size() != 2 || !r[0].is_number() || !r[1].is_number())
    fail("rrelu_range", "must be [lower, upper], two numbers (got " + clipped(r, 40) + ")");
  const double lo = r[0].get<double>(), hi = r[1].get<double>();
  if (!(lo >= 0 && lo <= hi && hi < 1))
    fail("rrelu_range", "needs 0 <= lower <= upper < 1 (got [" + number(lo) + ", " + number(hi) + "])");
  c.rreluLower = lo;
  c.rreluUpper = hi;
}

void printRreluRange(const CaseSpec& c, nlohmann::json& j) {
  const CaseSpec d;
  if (c.rreluLower != d.rreluLower || c.rreluUpper != d.rreluUpper) j["rrelu_range"] = {c.rreluLower, c.rreluUpper};
}

CaseSpec randomnessOff(const CaseSpec& c) {
  CaseSpec off = c;
  off.dropout = 0;
  for (BlockSpec& b : off.blocks) {
    b.dropPath = 0;
    b.routerJitter = 0;
  }
  const double mid = (c.rreluLower + c.rreluUpper) / 2;
  off.rreluLower = off.rreluUpper = mid;
  return off;
}

bool drawsRandomNumbers(const CaseSpec& c) {
  return c.dropout > 0 || anyDropPath(c) || (anyRrelu(c) && c.rreluLower < c.rreluUpper) || anyRouterJitter(c);
}

std::string stochasticText(const CaseSpec& c) {
  double p = 0;
  for (const BlockSpec& b : c.blocks) p = std::max(p, b.dropPath);
  std::string s;
  if (p > 0) s += ", drop-path " + number(p);
  if (anyRrelu(c)) s += ", rrelu";
  return s;
}

void applyStochasticDraw(CaseSpec& c, int draw, bool dropPath, bool rrelu) {
  const bool wantsRrelu = rrelu && ((draw >= 300 && draw < 500) || draw >= 750);
  const bool wantsDropPath = dropPath && draw >= 500;
  const int n = static_cast<int>(c.blocks.size());
  const double rate = 0.1 + 0.5 * ((std::min(draw, 999) % 250) / 250.0);
  for (int i = 0; i < n; ++i) {
    BlockSpec& b = c.blocks[static_cast<size_t>(i)];
    b.dropPath = wantsDropPath && takesField(*b.kind, dropPathField().name) ? rate * (i + 1) / n : 0.0;
    // Kinds without an activation field put it back to their default (canonical, in makeValid).
    if (wantsRrelu) b.activation = Activation::kRrelu;
  }
}

}  // namespace ckpt
