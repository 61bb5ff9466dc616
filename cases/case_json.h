// The case JSON format (cases/SCHEMA.md): parsing with validation of every field, and printing back, so that a
// generated case prints as exactly what `ckptcheck run --case` accepts.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "cases/case_spec.h"
#include "common/input_error.h"

namespace ckpt {

// Throws InputError("case field 'blocks[2].heads': must divide width 12 (got 5)") and the like.
CaseSpec parseCase(const nlohmann::json& j);
CaseSpec parseCaseText(const std::string& text, const std::string& origin = "case");
CaseSpec loadCase(const std::string& path);
nlohmann::json caseToJson(const CaseSpec& c);

}  // namespace ckpt
