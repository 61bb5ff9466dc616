#include "harness/verify/report.h"

#include <filesystem>
#include <sstream>

#include "cases/block_kind.h"
#include "cases/case_json.h"
#include "common/input_error.h"
#include "harness/atomic_file.h"

namespace ckpt {
namespace {

// Quotes an argument for a POSIX shell when it needs it.
std::string shellQuote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=+,@%") ==
                        std::string::npos)
    return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string xmlEscape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&apos;"; break;
      default:
        // XML 1.0 forbids most control characters; a tab or newline is fine.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t' && c != '\r') o += '?';
        else o += c;
    }
  }
  return o;
}

std::string fixed(double v, int digits) {
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(digits);
  s << v;
  return s.str();
}

std::string engineName(const VerifyReport& r) {
  return (r.mutant.empty() ? "correct engine" : "mutant " + r.mutant) + (r.device == "cpu" ? "" : " on " + r.device);
}

std::string findingName(const VerifyReport& r) {
  const Finding& f = *r.finding;
  std::string name = "finding-" + std::to_string(propertyNumber(f.violation.property)) + "-" +
                     propertyId(f.violation.property) + (r.mutant.empty() ? "" : "-" + r.mutant);
  if (!f.reproduce.empty()) {
    std::string token = f.reproduce;
    for (char& c : token)
      if (c == ':') c = '_';
    name += "-" + token;
  }
  return name;
}

}  // namespace

std::string describeCase(const CaseSpec& c) {
  std::string kinds;
  for (size_t i = 0; i < c.blocks.size() && i < 6; ++i) {
    const BlockSpec& b = c.blocks[i];
    const BlockKindDef& d = blockKindDef(b.kind);
    kinds += (i ? ", " : "") + std::string(d.name) + d.describe(b);
  }
  if (c.blocks.size() > 6) kinds += ", ...";
  std::ostringstream d;
  d << c.dropout;
  return std::to_string(c.blocks.size()) + (c.blocks.size() == 1 ? " block (" : " blocks (") + kinds + "), width " +
         std::to_string(c.width) + ", batch " + std::to_string(c.batch) + ", seq " + std::to_string(c.seq) + ", " +
         std::to_string(c.steps) + (c.steps == 1 ? " step, " : " steps, ") + dtypeName(c.dtype) + ", " +
         rngModelName(c.rng) + " rng, dropout " + d.str();
}

FindingReplay writeFinding(const VerifyReport& r, const VerifyOptions& o, const std::string& dir) {
  FindingReplay out;
  if (!r.finding) return out;
  const Finding& f = *r.finding;
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot create the findings directory '" + dir + "': " + ec.message());
  const fs::path file = fs::path(dir) / (findingName(r) + ".json");
  CaseSpec shrunk = f.shrunk.spec;
  shrunk.name = "shrunk-" + findingName(r);
  nlohmann::json j = caseToJson(shrunk);
  writeFileAtomic(file, j.dump(2) + "\n");
  out.caseFile = fs::absolute(file).string();
  const std::string mutant = (r.mutant.empty() ? "" : " --mutant " + shellQuote(r.mutant)) +
                             (r.device == "cpu" ? "" : " --device " + r.device);
  out.run = "ckptcheck run --case " + shellQuote(out.caseFile) + " --policy " + shellQuote(f.violation.policy) + mutant;
  if (!f.reproduce.empty()) {
    std::string policies;
    for (const auto& p : o.policies) policies += (policies.empty() ? "" : ",") + p;
    out.verify = "ckptcheck verify --reproduce " + f.reproduce + mutant +
                 (policies.empty() ? "" : " --policies " + shellQuote(policies));
  }
  return out;
}

std::string toText(const VerifyReport& r, const FindingReplay* replay) {
  std::ostringstream s;
  s << "ckptcheck verify: " << engineName(r) << ", seed " << r.seed << ", " << r.randomCases << " random case(s)";
  if (r.catalogueCases) s << " + " << r.catalogueCases << " catalogue case(s)";
  s << ", " << r.policyRuns << " policy runs";
  if (r.randomCases > 0 && r.searchSeconds > 0)
    s << "; " << fixed(r.casesPerMinute, 0) << " random cases/min on " << r.threads << " thread(s)";
  s << "\n";
  for (Property p : kProperties) {
    const PropertyCount& c = r.perProperty[static_cast<size_t>(propertyNumber(p) - 1)];
    s << "  " << propertyNumber(p) << " " << propertyId(p) << ": " << (c.violated ? "VIOLATED" : "holds") << " ("
      << c.checked << " case(s))\n";
  }
  s << r.coverage.toText();
  if (!r.finding) {
    s << "all properties hold\n";
    return s.str();
  }
  const Finding& f = *r.finding;
  const Violation& v = f.violation;
  s << "\nFINDING: property " << propertyNumber(v.property) << " (" << propertyId(v.property) << ") violated: "
    << propertyTitle(v.property) << "\n";
  s << "  policy      " << v.policy << "\n";
  s << "  violation   " << v.message << "\n";
  if (v.difference) {
    const Difference& d = *v.difference;
    s << "  first differing tensor: step " << d.step << " " << d.tensor;
    if (!d.shape.empty()) s << " (" << d.shape << ")\n";
    else
      s << "[" << d.firstIndex << "]: expected " << d.expected << ", got " << d.actual << ", " << d.ulpDistance
        << " ulp apart; " << d.count << " element(s) differ\n";
  }
  s << "  found in    " << f.origin << ": " << describeCase(f.original.spec) << "\n";
  s << "  shrunk to   " << describeCase(f.shrunk.spec) << " (" << f.shrinkSteps << " shrink step(s), "
    << f.shrinkTrials << " case(s) tried)\n";
  s << "  policies    ";
  for (size_t i = 0; i < f.policies.size(); ++i) s << (i ? ", " : "") << f.policies[i];
  s << "\n";
  if (replay && !replay->caseFile.empty()) {
    s << "  case file   " << replay->caseFile << "\n";
    s << "  replay      " << replay->run << "\n";
  }
  if (!f.reproduce.empty()) {
    s << "  reproduce   " << f.reproduce;
    if (replay && !replay->verify.empty()) s << "   (" << replay->verify << ")";
    s << "\n";
  }
  s << "  case JSON   " << caseToJson(f.shrunk.spec).dump() << "\n";
  return s.str();
}

nlohmann::json toJson(const VerifyReport& r, const FindingReplay* replay) {
  nlohmann::json j;
  j["seed"] = r.seed;
  j["engine"] = r.mutant.empty() ? "correct" : r.mutant;
  j["mutant"] = r.mutant.empty() ? nlohmann::json() : nlohmann::json(r.mutant);
  j["device"] = r.device;
  j["threads"] = r.threads;
  if (r.shardCount > 1) j["shard"] = std::to_string(r.shardIndex) + "/" + std::to_string(r.shardCount);
  j["cases_run"] = r.randomCases + r.catalogueCases;
  j["random_cases"] = r.randomCases;
  j["catalogue_cases"] = r.catalogueCases;
  j["policy_runs"] = r.policyRuns;
  j["search_seconds"] = r.searchSeconds;
  j["cases_per_minute"] = r.casesPerMinute;
  j["total_seconds"] = r.totalSeconds;
  j["properties"] = nlohmann::json::array();
  for (Property p : kProperties) {
    const PropertyCount& c = r.perProperty[static_cast<size_t>(propertyNumber(p) - 1)];
    j["properties"].push_back({{"number", propertyNumber(p)},
                               {"id", propertyId(p)},
                               {"title", propertyTitle(p)},
                               {"checked", c.checked},
                               {"violated", c.violated},
                               {"holds", c.violated == 0}});
  }
  j["coverage"] = r.coverage.toJson();
  j["findings"] = nlohmann::json::array();
  if (r.finding) {
    const Finding& f = *r.finding;
    nlohmann::json fj;
    fj["property"] = propertyNumber(f.violation.property);
    fj["property_id"] = propertyId(f.violation.property);
    fj["policy"] = f.violation.policy;
    fj["message"] = f.violation.message;
    fj["difference"] = f.violation.difference ? toJson(*f.violation.difference) : nlohmann::json();
    fj["origin"] = f.origin;
    fj["case"] = caseToJson(f.shrunk.spec);
    fj["original_case"] = caseToJson(f.original.spec);
    fj["policies"] = f.policies;
    fj["shrink_steps"] = f.shrinkSteps;
    fj["shrink_trials"] = f.shrinkTrials;
    fj["reproduce"] = f.reproduce.empty() ? nlohmann::json() : nlohmann::json(f.reproduce);
    if (replay) {
      fj["case_file"] = replay->caseFile;
      fj["replay"] = replay->run;
      fj["reproduce_command"] = replay->verify.empty() ? nlohmann::json() : nlohmann::json(replay->verify);
    }
    j["findings"].push_back(fj);
  }
  j["ok"] = !r.finding.has_value();
  return j;
}

std::string toJUnit(const VerifyReport& r, const FindingReplay* replay) {
  const int failures = r.finding ? 1 : 0;
  std::ostringstream s;
  const std::string time = fixed(r.totalSeconds, 3);
  const size_t tests = kProperties.size();  // one test case per property
  s << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  s << "<testsuites name=\"ckptcheck verify\" tests=\"" << tests << "\" failures=\"" << failures
    << "\" errors=\"0\" time=\"" << time << "\">\n";
  s << "  <testsuite name=\"ckptcheck.verify\" tests=\"" << tests << "\" failures=\"" << failures
    << "\" errors=\"0\" skipped=\"0\" time=\"" << time << "\">\n";
  s << "    <properties>\n";
  s << "      <property name=\"engine\" value=\"" << xmlEscape(r.mutant.empty() ? "correct" : r.mutant) << "\"/>\n";
  s << "      <property name=\"seed\" value=\"" << r.seed << "\"/>\n";
  s << "      <property name=\"random_cases\" value=\"" << r.randomCases << "\"/>\n";
  s << "      <property name=\"catalogue_cases\" value=\"" << r.catalogueCases << "\"/>\n";
  s << "      <property name=\"cases_per_minute\" value=\"" << fixed(r.casesPerMinute, 0) << "\"/>\n";
  s << "    </properties>\n";
  for (Property p : kProperties) {
    const PropertyCount& c = r.perProperty[static_cast<size_t>(propertyNumber(p) - 1)];
    s << "    <testcase classname=\"ckptcheck.verify\" name=\"" << propertyNumber(p) << " " << propertyId(p) << ": "
      << xmlEscape(propertyTitle(p)) << "\" time=\"0\">\n";
    const bool failed = r.finding && r.finding->violation.property == p;
    if (failed) {
      const Finding& f = *r.finding;
      s << "      <failure message=\"" << xmlEscape(f.violation.policy + ": " + f.violation.message) << "\" type=\""
        << propertyId(p) << "\">" << xmlEscape(toText(r, replay)) << "</failure>\n";
    }
    s << "      <system-out>" << c.checked << " case(s) checked</system-out>\n";
    s << "    </testcase>\n";
  }
  s << "  </testsuite>\n</testsuites>\n";
  return s.str();
}

}  // namespace ckpt
