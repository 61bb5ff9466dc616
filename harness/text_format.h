// Small text helpers every report writer shares: shell quoting for replay commands, fixed-point numbers, XML
// escaping, and the one JUnit writer (verify's and validate's --junit files).
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace ckpt {

// Quotes a word for a POSIX shell when it needs it; shellJoin quotes and joins a whole command line.
std::string shellQuote(const std::string& word);
std::string shellJoin(const std::vector<std::string>& argv);

// `v` with exactly `digits` digits after the point.
std::string fixed(double v, int digits);

// A user's path or value as one line of a message: \n, \r, \t and the other control characters written as
// escapes (\n, \r, \t, \xNN), so an error that quotes a path holding a line break stays one line. Every
// one-line error goes through it (harness/cli/main.cpp, the messages validate prints itself).
std::string escapeControl(const std::string& s);

// Escapes XML's five special characters; control characters XML 1.0 forbids become '?'.
std::string xmlEscape(const std::string& s);

// One JUnit test case: a property of verify, a check of validate.
struct JunitCase {
  enum class Status { kPassed, kFailure, kError, kSkipped };
  std::string classname;
  std::string name;
  Status status = Status::kPassed;
  std::string message;    // the failure/error/skipped message attribute
  std::string type;       // the failure's type attribute (may be empty)
  std::string body;       // the failure's text (may be empty)
  std::string systemOut;  // <system-out>, when not empty
};

struct JunitSuite {
  std::string name;
  double seconds = 0;
  std::vector<std::pair<std::string, std::string>> properties;
  std::vector<JunitCase> cases;
};

// The report CI systems read: <testsuites> with one <testsuite>; counts of failures, errors and skips derived
// from the cases.
std::string junitXml(const JunitSuite& suite);

}  // namespace ckpt
