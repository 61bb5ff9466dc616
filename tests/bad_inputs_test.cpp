// The bad-input corpus (tests/bad-inputs/MANIFEST) through the real ckptcheck binary: every command exits 2,
// prints nothing on stdout and exactly one line on stderr, and that line names the field or argument and the
// problem. A line whose expected text starts "[exit 3]" is input that runs but cannot be judged (a diverging
// case): exit 3, the same one line on stderr, its result on stdout. One test per manifest line, named after its
// line number.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <set>

#include "tests/cli_process.h"

namespace ckpt::test {
namespace {

namespace fs = std::filesystem;

struct Entry {
  int line = 0;
  std::string text;  // the manifest line, for messages
  std::map<std::string, std::string> env;
  std::vector<std::string> args;
  std::string expected;
  int exitCode = 2;
};

fs::path corpusDir() { return fs::path(sourceDir()) / "tests" / "bad-inputs"; }

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t\r");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// Blank-separated words; '...' quotes (so '' is an empty word).
std::vector<std::string> words(const std::string& s, int line) {
  std::vector<std::string> out;
  std::string cur;
  bool in = false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\'') {
      const size_t end = s.find('\'', i + 1);
      if (end == std::string::npos)
        throw std::runtime_error("MANIFEST line " + std::to_string(line) + ": unterminated quote");
      cur += s.substr(i + 1, end - i - 1);
      i = end;
      in = true;
    } else if (s[i] == ' ' || s[i] == '\t') {
      if (in) out.push_back(cur);
      cur.clear();
      in = false;
    } else {
      cur += s[i];
      in = true;
    }
  }
  if (in) out.push_back(cur);
  return out;
}

std::string substitute(std::string w, const std::string& tmp) {
  const std::pair<std::string, std::string> vars[] = {
      {"{bad}", (corpusDir() / "cases").string()},
      {"{catalog}", (fs::path(sourceDir()) / "cases" / "catalog").string()},
      {"{tmp}", tmp},
      {"{nl}", "\n"}};  // a line break inside an argument (a path): the message must still be one line
  for (const auto& [k, v] : vars)
    for (size_t at; (at = w.find(k)) != std::string::npos;) w.replace(at, k.size(), v);
  return w;
}

std::vector<Entry> loadManifest() {
  std::ifstream in(corpusDir() / "MANIFEST");
  if (!in) throw std::runtime_error("cannot read " + (corpusDir() / "MANIFEST").string());
  std::vector<Entry> entries;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (trim(line).empty() || trim(line)[0] == '#') continue;
    const size_t arrow = line.find("=>");
    if (arrow == std::string::npos) throw std::runtime_error("MANIFEST line " + std::to_string(n) + ": no '=>'");
    Entry e;
    e.line = n;
    e.text = trim(line);
    e.expected = trim(line.substr(arrow + 2));
    if (e.expected.rfind("[exit 3]", 0) == 0) {
      e.exitCode = 3;
      e.expected = trim(e.expected.substr(8));
    }
    bool leading = true;
    for (const auto& w : words(line.substr(0, arrow), n)) {
      const size_t eq = w.find('=');
      if (leading && eq != std::string::npos && eq > 0 &&
          std::all_of(w.begin(), w.begin() + static_cast<long>(eq), [](char c) {
            return std::isupper(static_cast<unsigned char>(c)) || c == '_' ||
                   std::isdigit(static_cast<unsigned char>(c));
          })) {
        e.env[w.substr(0, eq)] = w.substr(eq + 1);
        continue;
      }
      leading = false;
      e.args.push_back(w);
    }
    entries.push_back(e);
  }
  return entries;
}

const std::vector<Entry>& manifest() {
  static const std::vector<Entry> m = loadManifest();
  return m;
}

// gtest prints a failing parameter: the manifest line, not its bytes.
void PrintTo(const Entry& e, std::ostream* os) { *os << "MANIFEST line " << e.line << ": " << e.text; }

class BadInput : public ::testing::TestWithParam<Entry> {};

TEST_P(BadInput, exitsTwoWithOneLineNamingTheProblem) {
  const Entry& e = GetParam();
  ScratchDir tmp("bad-input");
  std::vector<std::string> args;
  for (const auto& a : e.args) args.push_back(substitute(a, tmp.path().string()));
  // In a scratch folder: nothing a refused command writes may land in the source tree.
  const CliResult r = runCkptcheck(args, e.env, tmp.path(), 120);
  SCOPED_TRACE("MANIFEST line " + std::to_string(e.line) + ": " + e.text);
  ASSERT_TRUE(r.process.started) << r.process.describe();
  EXPECT_EQ(r.exitCode(), e.exitCode) << r.process.describe() << "\nstderr: " << r.err << "\nstdout: " << r.out;
  if (e.exitCode == 2) {
    EXPECT_EQ(r.out, "") << "a refused command prints nothing on stdout";
  }
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "stderr must be exactly one line:\n" << r.err;
  EXPECT_EQ(r.err.back(), '\n');
  EXPECT_EQ(r.err.rfind("ckptcheck: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(substitute(e.expected, tmp.path().string())), std::string::npos)
      << "expected '" << e.expected << "' in: " << r.err;
  EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
}

std::string entryName(const ::testing::TestParamInfo<Entry>& info) {
  std::string n = "line" + std::to_string(info.param.line);
  for (const auto& a : info.param.args) {
    if (a.rfind("--", 0) == 0 || n.size() > 40) continue;
    std::string w = fs::path(a).stem().string();
    for (char& c : w)
      if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    n += "_" + w;
  }
  return n;
}

INSTANTIATE_TEST_SUITE_P(Corpus, BadInput, ::testing::ValuesIn(manifest()), entryName);

TEST(BadInputCorpus, everyCaseFileIsInTheManifestAndTheCorpusIsLargeEnough) {
  std::string all;
  for (const auto& e : manifest())
    for (const auto& a : e.args) all += a + "\n";
  int files = 0;
  for (const auto& f : fs::directory_iterator(corpusDir() / "cases")) {
    ++files;
    const std::string name = f.path().filename().string();
    EXPECT_NE(all.find("{bad}/" + name + "\n"), std::string::npos) << name << " is in no MANIFEST line";
  }
  EXPECT_GE(files, 50);
  EXPECT_GE(manifest().size(), 100u);
}

}  // namespace
}  // namespace ckpt::test
