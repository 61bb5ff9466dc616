// The block kinds: one line each; the first is the simplest (BlockSpec's default, validate's stand-in). A new kind
// is a file in this folder and a line here.
#include "cases/block_kind.h"

namespace ckpt {

const BlockKindDef& mlpKind();
const BlockKindDef& residualBnKind();
const BlockKindDef& transformerKind();
const BlockKindDef& moeKindDef();

const std::vector<const BlockKindDef*>& blockKinds() {
  static const std::vector<const BlockKindDef*> table = [] {
    return std::vector<const BlockKindDef*>{
        &mlpKind(),
        &residualBnKind(),
        &transformerKind(),
        &moeKindDef(),
    };
  }();
  return table;
}

}  // namespace ckpt
