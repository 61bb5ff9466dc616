#include "cases/block_kind.h"

#include <algorithm>
#include <stdexcept>

namespace ckpt {

BlockKind firstBlockKind() { return blockKinds().front(); }

const BlockKindDef* findBlockKind(const std::string& name) {
  for (const BlockKindDef* d : blockKinds())
    if (name == d->name) return d;
  return nullptr;
}

BlockKind blockKind(const std::string& name) {
  if (const BlockKindDef* d = findBlockKind(name)) return d;
  throw std::logic_error("no registered block kind '" + name + "'");
}

BlockSpec blockOf(BlockKind k, const BlockSetter& set) {
  BlockSpec s;
  s.kind = k;
  if (set) set(s);
  return s;
}

std::string blockKindNames() {
  std::string s;
  for (const BlockKindDef* d : blockKinds()) s += (s.empty() ? "" : ", ") + std::string(d->name);
  return s;
}

bool takesField(const BlockKindDef& d, const std::string& field) {
  for (const BlockField& f : d.fields)
    if (field == f.name) return true;
  return false;
}

bool hasBlockKind(const CaseSpec& c, BlockKind k) {
  return std::any_of(c.blocks.begin(), c.blocks.end(), [&](const BlockSpec& b) { return b.kind == k; });
}

}  // namespace ckpt
