// `ckptcheck validate`'s report files, made from its JSON report (validate.json, whose fields validate.cpp fills
// from the start): the Markdown report, a JUnit file, and the summary the command prints. Each returns the text;
// the caller writes it atomically.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace ckpt {

std::string validateMarkdown(const nlohmann::json& report);
std::string validateJunit(const nlohmann::json& report);
std::string validateSummaryText(const nlohmann::json& report, const std::string& markdownPath);

}  // namespace ckpt
