#include "cases/block_kind.h"

#include <algorithm>
#include <stdexcept>

namespace ckpt {

const BlockKindDef& blockKindDef(BlockKind k) {
  const auto& t = blockKinds();
  const size_t i = static_cast<size_t>(k);
  if (i >= t.size()) throw std::logic_error("unregistered block kind");
  return *t[i];
}

const BlockKindDef* findBlockKind(const std::string& name) {
  for (const BlockKindDef* d : blockKinds())
    if (name == d->name) return d;
  return nullptr;
}

std::string blockKindNames() {
  std::string s;
  for (const BlockKindDef* d : blockKinds()) s += (s.empty() ? "" : ", ") + std::string(d->name);
  return s;
}

bool hasBlockKind(const CaseSpec& c, BlockKind k) {
  return std::any_of(c.blocks.begin(), c.blocks.end(), [&](const BlockSpec& b) { return b.kind == k; });
}

}  // namespace ckpt
