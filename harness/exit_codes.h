// Exit codes, the same for every subcommand (README.md, docs/ci.md, ARCHITECTURE.md): CI scripts branch on them.
#pragma once

namespace ckpt {
enum ExitCode : int {
  kExitOk = 0,        // every property holds
  kExitFinding = 1,   // a mismatch or a violated property
  kExitBadInput = 2,  // bad usage, bad case, bad policy string
  kExitInfra = 3,     // adapter fault or infrastructure error
};
}  // namespace ckpt
