// The report files of `ckptcheck validate` from its JSON report: Markdown, JUnit and the summary it prints.
#include "harness/validate/validate_report.h"

#include <sstream>

#include "cases/coverage.h"
#include "harness/text_format.h"

namespace ckpt {
namespace {

using nlohmann::json;

std::string fmt(double v) {
  std::ostringstream s;
  s.precision(3);
  s << v;
  return s.str();
}

// The coverage table from the report's "coverage" object.
std::string coverageText(const json& r) {
  return r.contains("coverage") && r["coverage"].is_object() ? Coverage::fromJson(r["coverage"]).toText() : "";
}

// The adapter's measuring passes that changed their run (validate_case.h InstrumentsChanged), or "".
std::string instrumentsChangedText(const json& r) {
  if (!r.contains("instruments_changed") || r["instruments_changed"].value("runs", 0) == 0) return "";
  const json& c = r["instruments_changed"];
  return std::to_string(c["runs"].get<int>()) +
         " run(s) whose measuring pass changed what it computes: its figures are dropped, the verdict is the "
         "compared runs'. First: " +
         c["first"].get<std::string>();
}

}  // namespace

std::string validateJunit(const json& r) {
  JunitSuite suite{"ckptcheck validate " + r["adapter"]["label"].get<std::string>(), 0, {}, {}};
  for (const auto& c : r["checks"]) {  // one test case per check
    const std::string st = c["status"];
    using S = JunitCase::Status;
    const S status = st == "holds"           ? S::kPassed
                     : st == "finding"       ? S::kFailure
                     : st == "adapter-fault" ? S::kError
                                             : S::kSkipped;
    suite.cases.push_back({"validate", c["name"].get<std::string>(), status,
                           status == S::kPassed ? "" : c["detail"].get<std::string>(), "", "", ""});
  }
  return junitXml(suite);
}

std::string validateMarkdown(const json& r) {
  std::ostringstream md;
  md << "# ckptcheck validate: " << r["adapter"]["label"].get<std::string>() << "\n\n";
  md << "- framework: " << r["adapter"]["framework"].get<std::string>() << " "
     << r["adapter"]["version"].get<std::string>() << "\n";
  md << "- result: **" << r["result"].get<std::string>() << "**: " << r["cases_passed"] << " passing case(s) of "
     << r["cases_requested"] << " requested, " << r["evaluations"] << " evaluations, " << r["adapter_runs"]
     << " adapter runs\n";
  if (r.contains("seed") && !r["seed"].is_null()) md << "- seed: " << r["seed"] << "\n";
  md << "\n| check | status | detail |\n|---|---|---|\n";
  for (const auto& c : r["checks"])
    md << "| " << c["name"].get<std::string>() << " | " << c["status"].get<std::string>() << " | "
       << c["detail"].get<std::string>() << " |\n";
  if (const std::string changed = instrumentsChangedText(r); !changed.empty())
    md << "\n## Measuring passes that changed their run\n\n" << changed << "\n";
  if (!r["findings"].empty()) {
    md << "\n## Findings\n";
    for (const auto& f : r["findings"]) {
      md << "\n### " << f["check"].get<std::string>() << ": " << f["summary"].get<std::string>() << "\n\n";
      md << f["message"].get<std::string>() << "\n\n";
      md << "- found in: " << f.value("found_in", std::string("?")) << ", by check " << f["check"].get<std::string>()
         << "\n";
      md << "- shrunk case: `" << f["case_file"].get<std::string>() << "` (" << f["case_summary"].get<std::string>()
         << ")\n";
      md << "- replay: `" << f["replay"].get<std::string>() << "`\n";
      if (f.contains("first_difference")) {
        const auto& d = f["first_difference"];
        md << "- first differing tensor: step " << d["step"] << " `" << d["tensor"].get<std::string>() << "`";
        if (d.contains("ulp_distance"))
          md << " at index " << d["first_index"] << ": plain " << d["expected"].get<std::string>() << ", checkpoint "
             << d["actual"].get<std::string>() << ", " << d["ulp_distance"] << " ULP; " << d["count"]
             << " element(s) differ";
        md << "\n";
      }
      if (f.contains("diagnosis"))
        md << "- class: **" << f["diagnosis"]["class"].get<std::string>()
           << "**: " << f["diagnosis"]["why"].get<std::string>() << "\n";
      if (f.contains("differences") && f["differences"].size() > 1) {
        md << "\n| step | tensor | elements differ | first index | ULP |\n|---|---|---|---|---|\n";
        for (const auto& d : f["differences"])
          md << "| " << d["step"] << " | " << d["tensor"].get<std::string>() << " | " << d.value("count", 0) << " | "
             << d.value("first_index", -1) << " | " << d.value("ulp_distance", uint64_t{0}) << " |\n";
      }
      md << "\n```json\n" << f["case"].dump(2) << "\n```\n";
    }
  }
  if (r.contains("fault") && !r["fault"].is_null()) {
    md << "\n## Adapter fault\n\n" << r["fault"]["message"].get<std::string>() << "\n";
    if (r["fault"].contains("case_file")) md << "\n- case: `" << r["fault"]["case_file"].get<std::string>() << "`\n";
  }
  if (r.contains("timing") && !r["timing"].empty()) {
    md << "\n## Step-time overhead of checkpointing\n\n| case | blocks | segments | "
       << r["adapter"]["framework"].get<std::string>()
       << " plain ms | checkpoint ms | overhead | ckptcheck plain ms | uniform ms | overhead "
          "|\n|---|---|---|---|---|---|---|---|---|\n";
    for (const auto& t : r["timing"]) {
      auto pct = [](double x) { return fmt(100 * x) + " %"; };
      md << "| " << t["case"].get<std::string>() << " | " << t["blocks"] << " | " << t["segments"] << " | "
         << fmt(t["framework"]["plain_step_ms"].get<double>()) << " | "
         << fmt(t["framework"]["checkpoint_step_ms"].get<double>()) << " | "
         << pct(t["framework"]["overhead"].get<double>()) << " | " << fmt(t["ckptcheck"]["plain_step_ms"].get<double>())
         << " | " << fmt(t["ckptcheck"]["checkpoint_step_ms"].get<double>()) << " | "
         << pct(t["ckptcheck"]["overhead"].get<double>()) << " |\n";
    }
  }
  md << "\nReference tolerance (check 2): relative " << r["tolerance"]["float"] << " (float), "
     << r["tolerance"]["double"] << " (double); worst seen: " << r["reference_error"].dump() << "\n";
  md << "\n## Coverage\n\n```\n" << coverageText(r) << "```\n";
  return md.str();
}

std::string validateSummaryText(const json& r, const std::string& markdownPath) {
  std::ostringstream out;
  out << "validate " << r["adapter"]["label"].get<std::string>() << " (" << r["adapter"]["framework"].get<std::string>()
      << " " << r["adapter"]["version"].get<std::string>() << "): " << r["result"].get<std::string>() << "\n";
  for (const auto& c : r["checks"])
    out << "  " << c["name"].get<std::string>() << ": " << c["status"].get<std::string>() << " - "
        << c["detail"].get<std::string>() << "\n";
  for (const auto& f : r["findings"]) {
    out << "finding (" << f["check"].get<std::string>() << "): " << f["message"].get<std::string>() << "\n"
        << "  shrunk case: " << f["case_file"].get<std::string>() << " (" << f["case_summary"].get<std::string>()
        << ")\n"
        << "  found in: " << f.value("found_in", std::string("?")) << "\n"
        << "  replay: " << f["replay"].get<std::string>() << "\n";
  }
  if (!r["fault"].is_null()) out << "adapter fault: " << r["fault"]["message"].get<std::string>() << "\n";
  if (const std::string changed = instrumentsChangedText(r); !changed.empty())
    out << "instruments: " << changed << "\n";
  for (const auto& t : r["timing"])
    out << "timing " << t["case"].get<std::string>() << " (" << t["blocks"] << " blocks, " << t["segments"]
        << " segments): " << t["framework"]["name"].get<std::string>() << " plain "
        << fmt(t["framework"]["plain_step_ms"].get<double>()) << " ms, checkpoint "
        << fmt(t["framework"]["checkpoint_step_ms"].get<double>()) << " ms (+"
        << fmt(100 * t["framework"]["overhead"].get<double>()) << " %); ckptcheck store-all "
        << fmt(t["ckptcheck"]["plain_step_ms"].get<double>()) << " ms, " << t["ckptcheck"]["policy"].get<std::string>()
        << " " << fmt(t["ckptcheck"]["checkpoint_step_ms"].get<double>()) << " ms (+"
        << fmt(100 * t["ckptcheck"]["overhead"].get<double>()) << " %)\n";
  out << coverageText(r);
  out << "report: " << markdownPath << "\n";
  return out.str();
}

}  // namespace ckpt
