// Reading one field of a case's JSON with validation: each failure is an InputError of one line naming the field
// ("case field 'blocks[2].heads': must divide width 12 (got 5)"). Shared by the case parser and the kind files.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "cases/user_file.h"
#include "common/input_error.h"

namespace ckpt::json_fields {

// Limits that keep a case on one machine; the resource guard in the engine refuses bigger plans separately.
inline constexpr int64_t kMaxDim = 1 << 16;

[[noreturn]] void fail(const std::string& field, const std::string& what);
// A number as an error message or a case text shows it: "%g" (0.25, 1e-06).
std::string number(double v);

int64_t getInt(const nlohmann::json& obj, const std::string& key, const std::string& field, int64_t lo, int64_t hi,
               std::optional<int64_t> def);
double getNumber(const nlohmann::json& obj, const std::string& key, const std::string& field,
                 std::optional<double> def);
std::string getString(const nlohmann::json& obj, const std::string& key, const std::string& field,
                      std::optional<std::string> def);

template <class E>
E getEnum(const nlohmann::json& obj, const std::string& key, const std::string& field, std::optional<E> def,
          std::initializer_list<std::pair<const char*, E>> names) {
  if (!obj.contains(key) && def) return *def;
  const std::string s = getString(obj, key, field, std::nullopt);
  std::string allowed;
  for (const auto& [n, e] : names) {
    if (s == n) return e;
    allowed += (allowed.empty() ? "" : ", ") + std::string(n);
  }
  fail(field, "unknown value '" + clipped(s) + "' (expected one of: " + allowed + ")");
}

}  // namespace ckpt::json_fields
