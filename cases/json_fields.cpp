#include "cases/json_fields.h"

#include <cmath>
#include <cstdio>

namespace ckpt::json_fields {

using nlohmann::json;

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

void fail(const std::string& field, const std::string& what) {
  throw InputError("case field '" + field + "': " + what);
}

int64_t getInt(const json& obj, const std::string& key, const std::string& field, int64_t lo, int64_t hi,
               std::optional<int64_t> def) {
  if (!obj.contains(key)) {
    if (def) return *def;
    fail(field, "missing (required)");
  }
  const json& v = obj.at(key);
  if (!v.is_number_integer()) fail(field, "must be an integer (got " + std::string(v.type_name()) + ")");
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi))
    fail(field, "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + " (got " + v.dump() + ")");
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi)
    fail(field, "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + " (got " + v.dump() + ")");
  return x;
}

double getNumber(const json& obj, const std::string& key, const std::string& field, std::optional<double> def) {
  if (!obj.contains(key)) {
    if (def) return *def;
    fail(field, "missing (required)");
  }
  const json& v = obj.at(key);
  if (!v.is_number()) fail(field, "must be a number (got " + std::string(v.type_name()) + ")");
  const double x = v.get<double>();
  if (!std::isfinite(x)) fail(field, "must be finite");
  return x;
}

std::string getString(const json& obj, const std::string& key, const std::string& field,
                      std::optional<std::string> def) {
  if (!obj.contains(key)) {
    if (def) return *def;
    fail(field, "missing (required)");
  }
  const json& v = obj.at(key);
  if (!v.is_string()) fail(field, "must be a string (got " + std::string(v.type_name()) + ")");
  return v.get<std::string>();
}

}  // namespace ckpt::json_fields
