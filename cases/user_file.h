// Reading a file a user named (a case, a costs file, a placement, a schedule): the one home of the bounds every
// such reader keeps, so that no input can hang, exhaust memory or overflow the stack, and no error message can
// quote an unbounded value.
//   - size: a regular file larger than the reader's cap is refused before it is read; a pipe or a device
//     (`--costs /dev/stdin`) is read up to the cap and refused beyond it;
//   - depth: JSON nested deeper than kMaxJsonDepth levels is refused before it is parsed (a linear count of
//     brackets outside strings), so nothing recurses over it (printing a value, comparing two);
//   - messages: a value quoted in an error is clipped to a few dozen characters.
// Every refusal is an InputError of one line: "WHAT 'PATH': is a directory".
#pragma once
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "common/input_error.h"

namespace ckpt {

// No file the tools read nests deeper than six levels (a costs file's blocks[i].ops[k]).
inline constexpr int kMaxJsonDepth = 100;
// A case, a costs file, a placement (schedule files, which list every instruction, take more).
inline constexpr std::uintmax_t kMaxJsonFileBytes = std::uintmax_t{64} << 20;

// The whole content of PATH, at most `maxBytes`. Throws InputError "WHAT 'PATH': cannot be read: No such file
// or directory", "...: is a directory", "...: is N bytes, more than the M this reader takes".
std::string readUserFile(const std::string& path, const std::string& what, std::uintmax_t maxBytes);

// JSON text, nested at most kMaxJsonDepth levels. Throws InputError "ORIGIN: malformed JSON: <the parser's
// message, clipped>" or "ORIGIN: nested deeper than 100 levels".
nlohmann::json parseUserJson(const std::string& text, const std::string& origin);

// Both: "WHAT 'PATH'" is the origin of parse errors.
nlohmann::json readUserJson(const std::string& path, const std::string& what,
                            std::uintmax_t maxBytes = kMaxJsonFileBytes);

// A value quoted in an error message: at most `limit` characters, then "...(N bytes)".
std::string clipped(const std::string& s, size_t limit = 64);
std::string clipped(const nlohmann::json& v, size_t limit = 64);

}  // namespace ckpt
