// A block kind as data: everything the case format, the generators, the model builder and the tools need to know
// about one kind, in one record. Each kind is one file in cases/kinds/; cases/kinds/table.cpp lists them. The
// code that used to switch on the kind (parsing, printing, generators, coverage, the resource guard, `plan
// --kind`, verify's and validate's case texts, adapter capabilities) asks the table instead.
//
// A kind names the ops it is built from (its program, OpNode) by their kind() string; reference/op_table.h turns
// each node into an Op and knows each op's parameter count, so this layer needs nothing from reference/.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "cases/case_spec.h"
#include "cases/coverage.h"
#include "cases/gen_limits.h"
#include "cases/op_node.h"

namespace rc {
template <typename T>
class Gen;
}  // namespace rc

namespace ckpt {

// Sets one drawn field of a BlockSpec.
using BlockSetter = std::function<void(BlockSpec&)>;

// A block field besides "kind" and "repeat", owned by one kind.
struct BlockField {
  const char* name;    // the JSON key: "heads"
  const char* phrase;  // how the "only <kind> blocks take ..." error names it: "heads", "an activation"
  // Reads the field from block object `b` (its default when absent) into `s`; `path` is "blocks[i].<name>". Throws
  // InputError naming `path`.
  void (*parse)(const nlohmann::json& b, const std::string& path, const CaseSpec& c, BlockSpec& s);
  // A random value of the field for a generated block; `shrinks` as GenLimits::shrinkChoices. Null for a field
  // that a case-level draw sets instead (drop_path, cases/stochastic_layers.h), appended after the older draws so
  // the cases a seed drew before the field existed stay as they were.
  rc::Gen<BlockSetter> (*draw)(bool shrinks);
};

// A kind's identity is the address of its record (BlockKind, cases/case_spec.h).
struct BlockKindDef {
  const char* name;  // the case's "kind", an adapter capability, `plan --kind`
  std::vector<BlockField> fields;
  // Checks that need the whole case (batch statistics need two rows); `where` is "blocks[i]". May be null.
  void (*validate)(const BlockSpec& s, const CaseSpec& c, const std::string& where);
  // Writes the fields this kind takes (parse's inverse).
  void (*print)(const BlockSpec& s, nlohmann::json& b);
  // The spec with the fields this kind ignores at their defaults, so equal blocks compare equal.
  BlockSpec (*canonical)(const BlockSpec& s);
  // The smallest change that makes a drawn block valid in case `c` (a field or the case's batch).
  void (*makeValid)(BlockSpec& s, CaseSpec& c);
  std::string (*describe)(const BlockSpec& s);  // after the name in a case's summary (case_summary.h): "/relu", "/2h"
  // Adapter capabilities the block needs besides its kind: {"activation", "relu"}.
  std::vector<std::pair<std::string, std::string>> (*needs)(const BlockSpec& s);
  // The ops of block `s` in case `c`, in forward order; the block output is the last node's.
  std::vector<OpNode> (*program)(const BlockSpec& s, const CaseSpec& c);
  // Coverage lines: the first is "a block of this kind"; the others are its fields' values.
  std::vector<CoverageFeature> coverage;
  // How validate's first run (the smoke case) sets up a block of this kind; null: the defaults.
  BlockSetter smoke;
  // The one-step simplifications of a block of this kind that validate's shrinker tries (RapidCheck does not
  // shrink the choices of a drawn block): {activation relu}, {one head}.
  std::vector<BlockSetter> simpler;
  // The blocks of this kind tried in place of a block of another kind, when this is the simplest kind the
  // adapter runs (the first in the table); none: blocks of other kinds are not replaced.
  std::vector<BlockSetter> standIns;
  // The generators' kind choice skips it: a case-level draw appended after the older ones places it (moe), so the
  // cases a seed drew before the kind existed stay as they were.
  bool drawnByCase = false;
};

// The registered kinds, in table order (which is also the generators' choice order; the first is the simplest).
const std::vector<const BlockKindDef*>& blockKinds();
// The kind named `name`, or nullptr.
const BlockKindDef* findBlockKind(const std::string& name);
// The kind named `name`; std::logic_error when none is (for code and tests that name a kind they know).
BlockKind blockKind(const std::string& name);
// A block of kind `k` at its defaults, then `set` (when not null) applied.
BlockSpec blockOf(BlockKind k, const BlockSetter& set = {});
// "mlp, residual-bn, transformer"
std::string blockKindNames();

bool hasBlockKind(const CaseSpec& c, BlockKind k);
// Whether kind `d` takes the block field named `field` (a field several kinds share, drop_path, is in each).
bool takesField(const BlockKindDef& d, const std::string& field);

}  // namespace ckpt
