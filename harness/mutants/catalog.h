// The mutant catalogue: deliberately broken checkpointing engines, each a small EngineVariant
// (harness/engine/engine_variant.h) that reproduces one bug class real frameworks shipped. One file per mutant
// under harness/mutants/ names the bug it models and where it was reported. The property suite
// (harness/verify/) must catch every one of them with its general properties, never with a check written for a
// particular mutant. Each record names the property that must catch it and the class its finding gets, with why
// in its file; tests/mutants_test.cpp (the kill matrix) and tests/verify_diagnosis_test.cpp hold verify to them.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "harness/diagnose.h"
#include "harness/engine/engine_variant.h"

namespace ckpt {

struct Mutant {
  std::string name;       // what `--mutant NAME` selects, e.g. "rng-not-restored"
  std::string bug;        // one line: what the broken engine does
  std::string reference;  // the real-world bug it models, e.g. "PyTorch checkpoint(preserve_rng_state=False)"
  std::string showsWhen;  // the conditions a case needs for the bug to change anything
  // The id of the property that must catch it first (harness/verify/properties.h: "bitwise-equal"), and the class
  // of that finding (harness/diagnose.h), as verify reports them with seed 1 and its default budget.
  std::string caughtBy;
  FindingClass diagnosis;
  std::function<std::unique_ptr<EngineVariant>()> make;
};

// Every mutant, in the order of harness/verify/README.md's kill matrix (harness/mutants/catalog.cpp).
const std::vector<Mutant>& mutantCatalog();
// nullptr when no mutant has that name.
const Mutant* findMutant(std::string_view name);
// "a, b, c": every name, for messages.
std::string mutantNames();

}  // namespace ckpt
