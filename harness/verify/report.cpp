#include "harness/verify/report.h"

#include <filesystem>
#include <sstream>

#include "cases/case_json.h"
#include "cases/case_summary.h"
#include "common/input_error.h"
#include "harness/atomic_file.h"
#include "harness/engine/policy.h"
#include "harness/engine/policy_rule.h"
#include "harness/text_format.h"
#include "harness/verify/policy_draw.h"

namespace ckpt {
namespace {

std::string engineName(const VerifyReport& r) {
  return (r.mutant.empty() ? "correct engine" : "mutant " + r.mutant) + (r.device == "cpu" ? "" : " on " + r.device);
}

std::string findingName(const VerifyReport& r) {
  const Finding& f = *r.finding;
  std::string name = "finding-" + std::to_string(propertyNumber(f.violation.property)) + "-" +
                     f.violation.property->id + (r.mutant.empty() ? "" : "-" + r.mutant);
  if (!f.reproduce.empty()) {
    std::string token = f.reproduce;
    for (char& c : token)
      if (c == ':') c = '_';
    name += "-" + token;
  }
  return name;
}

}  // namespace

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

namespace {

// "  policy families (cases that ran one): store-all 508, uniform 508, ...", in the records' order.
std::string familiesText(const VerifyReport& r) {
  std::string line;
  for (const std::string& f : runFamilies()) {
    const auto it = r.familyCases.find(f);
    if (it != r.familyCases.end()) line += (line.empty() ? "" : ", ") + f + " " + std::to_string(it->second);
  }
  return line.empty() ? "" : "  policy families (cases that ran one): " + line + "\n";
}

}  // namespace

std::string toText(const VerifyReport& r, const FindingReplay* replay) {
  std::ostringstream s;
  s << "ckptcheck verify: " << engineName(r) << ", seed " << r.seed << ", " << r.randomCases << " random case(s)";
  if (r.catalogueCases) s << " + " << r.catalogueCases << " catalogue case(s)";
  s << ", " << r.policyRuns << " policy runs";
  if (r.randomCases > 0 && r.searchSeconds > 0)
    s << "; " << fixed(r.casesPerMinute, 0) << " random cases/min on " << r.threads << " thread(s)";
  s << "\n";
  for (const PropertyDef& def : properties()) {
    const Property p = &def;
    const PropertyCount& c = r.perProperty[static_cast<size_t>(propertyNumber(p) - 1)];
    s << "  " << propertyNumber(p) << " " << p->id << ": " << (c.violated ? "VIOLATED" : "holds") << " (" << c.checked
      << " case(s))\n";
  }
  s << familiesText(r) << r.coverage.toText();
  if (!r.finding) {
    s << "all properties hold\n";
    return s.str();
  }
  const Finding& f = *r.finding;
  const Violation& v = f.violation;
  s << "\nFINDING: property " << propertyNumber(v.property) << " (" << v.property->id
    << ") violated: " << v.property->title << "\n";
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
  if (v.diagnosis) s << "  class       " << findingClassName(v.diagnosis->cls) << ": " << v.diagnosis->why << "\n";
  s << "  found in    " << f.origin << ": " << caseSummary(f.original.spec) << "\n";
  s << "  shrunk to   " << caseSummary(f.shrunk.spec) << " (" << f.shrinkSteps << " shrink step(s), " << f.shrinkTrials
    << " case(s) tried)\n";
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
  for (const PropertyDef& def : properties()) {
    const Property p = &def;
    const PropertyCount& c = r.perProperty[static_cast<size_t>(propertyNumber(p) - 1)];
    j["properties"].push_back({{"number", propertyNumber(p)},
                               {"id", p->id},
                               {"title", p->title},
                               {"checked", c.checked},
                               {"violated", c.violated},
                               {"holds", c.violated == 0}});
  }
  j["coverage"] = r.coverage.toJson();
  j["policy_families"] = nlohmann::json::object();
  for (const auto& [family, cases] : r.familyCases) j["policy_families"][family] = {{"cases", cases}};
  j["findings"] = nlohmann::json::array();
  if (r.finding) {
    const Finding& f = *r.finding;
    nlohmann::json fj;
    fj["property"] = propertyNumber(f.violation.property);
    fj["property_id"] = f.violation.property->id;
    fj["policy"] = f.violation.policy;
    // The report groups findings by family (reports/report_data.py) and reads no policy string itself.
    fj["policy_family"] = f.violation.policy.empty() ? "" : policyFamily(parsePolicy(f.violation.policy));
    fj["message"] = f.violation.message;
    fj["difference"] = f.violation.difference ? toJson(*f.violation.difference) : nlohmann::json();
    fj["diagnosis"] = f.violation.diagnosis ? toJson(*f.violation.diagnosis) : nlohmann::json();
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
  JunitSuite suite{"ckptcheck verify", r.totalSeconds, {}, {}};
  suite.properties = {{"engine", r.mutant.empty() ? "correct" : r.mutant},
                      {"seed", std::to_string(r.seed)},
                      {"random_cases", std::to_string(r.randomCases)},
                      {"catalogue_cases", std::to_string(r.catalogueCases)},
                      {"cases_per_minute", fixed(r.casesPerMinute, 0)}};
  for (const PropertyDef& def : properties()) {  // one test case per property
    const Property p = &def;
    const PropertyCount& c = r.perProperty[static_cast<size_t>(propertyNumber(p) - 1)];
    JunitCase jc{"ckptcheck.verify",
                 std::to_string(propertyNumber(p)) + " " + p->id + ": " + p->title,
                 JunitCase::Status::kPassed,
                 "",
                 "",
                 "",
                 std::to_string(c.checked) + " case(s) checked"};
    if (r.finding && r.finding->violation.property == p) {
      jc.status = JunitCase::Status::kFailure;
      const Violation& v = r.finding->violation;
      jc.message = v.policy + ": " + v.message +
                   (v.diagnosis ? std::string("; class ") + findingClassName(v.diagnosis->cls) : "");
      jc.type = p->id;
      jc.body = toText(r, replay);
    }
    suite.cases.push_back(std::move(jc));
  }
  return junitXml(suite);
}

}  // namespace ckpt
