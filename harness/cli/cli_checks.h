// The checks every subcommand's numeric and path options share, so bad input is refused the same way everywhere
// (exit 2, one line naming the option): CLI11's own Range and PositiveNumber let NaN through (every comparison with
// NaN is false) and its unsigned conversion takes "-1" and 2^64 for the largest value; a file given where a
// directory is read or written was an "internal error".
#pragma once
#include <CLI/CLI.hpp>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>

#include "common/input_error.h"
#include "harness/text_format.h"

namespace ckpt::cli {

// A decimal integer in [0, max]: digits only (no sign, no "0x", no exponent), no overflow.
inline CLI::Validator unsignedAtMost(uint64_t max) {
  return CLI::Validator(
      [max](std::string& s) -> std::string {
        const std::string want = "must be an integer in [0, " + std::to_string(max) + "]";
        if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos)
          return want + " (got '" + escapeControl(s) + "')";
        errno = 0;
        const unsigned long long v = std::strtoull(s.c_str(), nullptr, 10);
        if (errno == ERANGE || v > max) return want + " (got '" + s + "')";
        return "";
      },
      "UINT<=" + std::to_string(max));
}

// The longest --adapter-timeout: eleven days (a longer one would overflow nothing, but is no timeout).
inline constexpr double kMaxTimeoutSeconds = 1e6;

// A finite number in [lo, hi] (or (lo, hi] with loOpen): NaN and the infinities are refused, as is anything
// strtod does not read whole.
inline CLI::Validator finiteIn(double lo, double hi, bool loOpen = false) {
  return CLI::Validator(
      [=](std::string& s) -> std::string {
        std::ostringstream range;
        range << (loOpen ? "(" : "[") << lo << ", " << hi << "]";
        const std::string want = "must be a finite number in " + range.str();
        char* end = nullptr;
        errno = 0;
        const double v = s.empty() ? NAN : std::strtod(s.c_str(), &end);
        const bool whole = !s.empty() && end && *end == '\0';
        if (!whole || errno == ERANGE || !std::isfinite(v) || v < lo || v > hi || (loOpen && v == lo))
          return want + " (got '" + escapeControl(s) + "')";
        return "";
      },
      "FINITE");
}

// A directory an option names: `mustExist`, an existing directory (one that is read); otherwise a directory or a
// path not there yet (one that is made). Throws InputError naming the option, before anything is run.
inline void requireDirectory(const std::string& option, const std::string& path, bool mustExist) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  const std::string quoted = option + " '" + path + "'";
  if (!std::filesystem::exists(st)) {
    if (mustExist) throw InputError(quoted + ": no such directory");
    return;
  }
  if (!std::filesystem::is_directory(st)) throw InputError(quoted + ": exists and is not a directory");
}

}  // namespace ckpt::cli
