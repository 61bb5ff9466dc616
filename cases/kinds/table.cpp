// The block kinds: one line each, in BlockKind order. A new kind is a file in this folder and a line here.
#include <stdexcept>

#include "cases/block_kind.h"

namespace ckpt {

const BlockKindDef& mlpKind();
const BlockKindDef& residualBnKind();
const BlockKindDef& transformerKind();

const std::vector<const BlockKindDef*>& blockKinds() {
  static const std::vector<const BlockKindDef*> table = [] {
    std::vector<const BlockKindDef*> t = {
        &mlpKind(),
        &residualBnKind(),
        &transformerKind(),
    };
    for (size_t i = 0; i < t.size(); ++i)
      if (static_cast<size_t>(t[i]->kind) != i) throw std::logic_error("block kind table out of BlockKind order");
    return t;
  }();
  return table;
}

}  // namespace ckpt
