// The mutant catalogue: one line per mutant. A new mutant is a file in this folder (its EngineVariant and its
// factory) and a line here; harness/CMakeLists.txt picks the file up by itself.
#include "harness/mutants/catalog.h"

namespace ckpt {

// The factories, one per file.
namespace mutants {
Mutant rngNotRestored();
Mutant rngLeftAdvanced();
Mutant stateUpdatedTwice();
Mutant segmentInputFed();
Mutant segmentBoundaryOffByOne();
Mutant staleCheckpointBuffer();
Mutant inplaceOverwritesCheckpoint();
Mutant recomputeNumerics();
Mutant recomputeLowPrecision();
Mutant gradsAccumulatedTwice();
Mutant contextBeforeFilled();
Mutant inputGradDropped();
Mutant sharedGradsForwardOrder();
Mutant frozenParamsUpdated();
Mutant microBatchGradsZeroed();
Mutant noGradInputSegment();
Mutant tiedHeadGradDropped();
Mutant dropPathRedrawn();
Mutant rreluSlopesRegenerated();
Mutant bf16RecomputeInFloat();
Mutant moeJitterRedrawn();
Mutant moeAuxLossRecordedTwice();
}  // namespace mutants

const std::vector<Mutant>& mutantCatalog() {
  static const std::vector<Mutant> all = {
      mutants::rngNotRestored(),
      mutants::rngLeftAdvanced(),
      mutants::stateUpdatedTwice(),
      mutants::segmentInputFed(),
      mutants::segmentBoundaryOffByOne(),
      mutants::staleCheckpointBuffer(),
      mutants::inplaceOverwritesCheckpoint(),
      mutants::recomputeNumerics(),
      mutants::recomputeLowPrecision(),
      mutants::gradsAccumulatedTwice(),
      mutants::contextBeforeFilled(),
      mutants::inputGradDropped(),
      mutants::sharedGradsForwardOrder(),
      mutants::frozenParamsUpdated(),
      mutants::noGradInputSegment(),
      mutants::microBatchGradsZeroed(),
      mutants::tiedHeadGradDropped(),
      mutants::dropPathRedrawn(),
      mutants::rreluSlopesRegenerated(),
      mutants::bf16RecomputeInFloat(),
      mutants::moeJitterRedrawn(),
      mutants::moeAuxLossRecordedTwice(),
  };
  return all;
}

const Mutant* findMutant(std::string_view name) {
  for (const auto& m : mutantCatalog())
    if (m.name == name) return &m;
  return nullptr;
}

std::string mutantNames() {
  std::string s;
  for (const auto& m : mutantCatalog()) s += (s.empty() ? "" : ", ") + m.name;
  return s;
}

}  // namespace ckpt
