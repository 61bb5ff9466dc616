#include "harness/text_format.h"

#include <sstream>

namespace ckpt {

std::string shellQuote(const std::string& w) {
  if (!w.empty() && w.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%") ==
                        std::string::npos)
    return w;
  std::string q = "'";
  for (char c : w) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string shellJoin(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + shellQuote(a);
  return s;
}

std::string escapeControl(const std::string& s) {
  static const char* const kHex = "0123456789abcdef";
  std::string o;
  o.reserve(s.size());
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') o += "\\n";
    else if (c == '\r') o += "\\r";
    else if (c == '\t') o += "\\t";
    else if (u < 0x20 || u == 0x7f) o += std::string("\\x") + kHex[u >> 4] + kHex[u & 15];
    else o += c;
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

std::string xmlEscape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      case '\'':
        o += "&apos;";
        break;
      default:
        // XML 1.0 forbids most control characters; a tab or newline is fine.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t' && c != '\r') o += '?';
        else o += c;
    }
  }
  return o;
}

std::string junitXml(const JunitSuite& suite) {
  using S = JunitCase::Status;
  int failures = 0, errors = 0, skipped = 0;
  for (const auto& c : suite.cases) {
    failures += c.status == S::kFailure;
    errors += c.status == S::kError;
    skipped += c.status == S::kSkipped;
  }
  const std::string name = xmlEscape(suite.name), time = fixed(suite.seconds, 3);
  const std::string counts = "tests=\"" + std::to_string(suite.cases.size()) + "\" failures=\"" +
                             std::to_string(failures) + "\" errors=\"" + std::to_string(errors) + "\"";
  std::ostringstream s;
  s << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  s << "<testsuites name=\"" << name << "\" " << counts << " time=\"" << time << "\">\n";
  s << "  <testsuite name=\"" << name << "\" " << counts << " skipped=\"" << skipped << "\" time=\"" << time << "\">\n";
  if (!suite.properties.empty()) {
    s << "    <properties>\n";
    for (const auto& [k, v] : suite.properties)
      s << "      <property name=\"" << xmlEscape(k) << "\" value=\"" << xmlEscape(v) << "\"/>\n";
    s << "    </properties>\n";
  }
  for (const auto& c : suite.cases) {
    s << "    <testcase classname=\"" << xmlEscape(c.classname) << "\" name=\"" << xmlEscape(c.name)
      << "\" time=\"0\">\n";
    const std::string msg = "message=\"" + xmlEscape(c.message) + "\"";
    const std::string type = c.type.empty() ? "" : " type=\"" + xmlEscape(c.type) + "\"";
    const std::string body = xmlEscape(c.body);
    switch (c.status) {
      case S::kPassed:
        break;
      case S::kFailure:
        s << "      <failure " << msg << type << ">" << body << "</failure>\n";
        break;
      case S::kError:
        s << "      <error " << msg << type << ">" << body << "</error>\n";
        break;
      case S::kSkipped:
        s << "      <skipped " << msg << "/>\n";
        break;
    }
    if (!c.systemOut.empty()) s << "      <system-out>" << xmlEscape(c.systemOut) << "</system-out>\n";
    s << "    </testcase>\n";
  }
  s << "  </testsuite>\n</testsuites>\n";
  return s.str();
}

}  // namespace ckpt
