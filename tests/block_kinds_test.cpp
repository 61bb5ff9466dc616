// The block-kind table (cases/kinds/) and the op table (reference/op_table.h): what a kind states about itself
// (its name, its fields, its program, its coverage line) agrees with what the parser, the model builder and the
// ops do, for every registered kind and op, so a new one is checked without a new test.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cases/block_kind.h"
#include "cases/case_json.h"
#include "cases/generators.h"
#include "reference/blocks.h"
#include "reference/op_table.h"

namespace ckpt {
namespace {

// Random cases of the verify generators, drawn outside a property from fixed seeds.
std::vector<CaseSpec> someCases(int n) {
  GenLimits lim;
  lim.maxBlocks = 6;
  std::vector<CaseSpec> cs;
  const auto gen = genCase(lim);
  for (int seed = 0; seed < n; ++seed) cs.push_back(gen(rc::Random(static_cast<uint64_t>(seed)), 50).value());
  return cs;
}

TEST(BlockKinds, tableNamesEachKindOnce) {
  const auto& t = blockKinds();
  ASSERT_FALSE(t.empty());
  for (size_t i = 0; i < t.size(); ++i) {
    EXPECT_EQ(findBlockKind(t[i]->name), t[i]);
    EXPECT_STREQ(blockKindName(t[i]), t[i]->name);
    EXPECT_EQ(blockKind(t[i]->name), t[i]);
    ASSERT_FALSE(t[i]->coverage.empty()) << t[i]->name << " has no 'a block of this kind' coverage line";
  }
  EXPECT_EQ(findBlockKind("no-such-kind"), nullptr);
  EXPECT_THROW(blockKind("no-such-kind"), std::logic_error);
  EXPECT_EQ(BlockSpec().kind, t.front());  // the simplest kind is the default
}

TEST(BlockKinds, opTableNamesEachOpByItsKindAndCountsItsParameters) {
  // dims {2, 4, 3, 5}: linear 2 -> 4, norms over 2 columns, attention with 2 heads over sequences of 4, moe with 2
  // experts of width 3 and hidden width 5 (its top_k, 4, is only stored: nothing runs here).
  const OpNode node{"x", "", {2, 4, 3, 5}, 0.25, {-1}};
  for (const auto& e : opKinds<double>()) {
    const auto op = e.make(node, "x");
    EXPECT_EQ(op->kind(), e.kind);
    int64_t n = 0;
    for (auto* p : op->params()) n += p->value.size();
    EXPECT_EQ(e.params(node), n) << e.kind;
  }
}

TEST(BlockKinds, blocksAreBuiltFromTheirKindsPrograms) {
  for (const CaseSpec& c : someCases(60))
    for (size_t i = 0; i < c.blocks.size(); ++i) {
      const BlockKindDef& d = *c.blocks[i].kind;
      const auto program = d.program(c.blocks[i], c);
      const Block<double> b = makeBlock<double>(c.blocks[i], c, static_cast<int>(i));
      EXPECT_EQ(b.kind, d.name);
      ASSERT_EQ(b.size(), static_cast<int>(program.size())) << d.name;
      for (size_t k = 0; k < program.size(); ++k) {
        EXPECT_EQ(b.nodes[k].op->kind(), program[k].op) << d.name;
        EXPECT_EQ(b.nodes[k].name, "b" + std::to_string(i) + "." + program[k].name);
        EXPECT_EQ(b.nodes[k].inputs, program[k].inputs);
        for (int j : program[k].inputs) EXPECT_TRUE(j >= -1 && j < static_cast<int>(k)) << d.name << " node " << k;
      }
    }
}

// A field on a block of a kind that does not take it is refused, naming the field and the kinds that take it (a
// field several kinds share, drop_path, names them all); a kind that takes it parses it.
TEST(BlockKinds, aFieldOfOneKindIsRefusedOnAnother) {
  int shared = 0;
  for (const BlockKindDef* owner : blockKinds())
    for (const BlockField& f : owner->fields) {
      std::vector<std::string> owners;
      for (const BlockKindDef* d : blockKinds())
        if (takesField(*d, f.name)) owners.push_back(d->name);
      std::string names = owners[0];
      for (size_t k = 1; k < owners.size(); ++k) names += (k + 1 == owners.size() ? " and " : ", ") + owners[k];
      shared += owners.size() > 1;
      for (const BlockKindDef* other : blockKinds()) {
        if (takesField(*other, f.name)) continue;
        nlohmann::json j = {{"batch", 2}, {"width", 8}, {"blocks", {{{"kind", other->name}, {f.name, 1}}}}};
        try {
          parseCase(j);
          ADD_FAILURE() << f.name << " accepted on " << other->name;
        } catch (const InputError& e) {
          EXPECT_EQ(std::string(e.what()),
                    "case field 'blocks[0]." + std::string(f.name) + "': only " + names + " blocks take " + f.phrase);
        }
      }
    }
  EXPECT_GT(shared, 0) << "no field is shared by two kinds, so the shared path went untested";
}

TEST(BlockKinds, eachKindsCoverageLineSaysWhetherTheCaseHasSuchABlock) {
  for (const CaseSpec& c : someCases(60))
    for (const BlockKindDef* d : blockKinds()) EXPECT_EQ(d->coverage[0].has(c), hasBlockKind(c, d)) << d->name;
}

// Validate's smoke block, its simplifications and its stand-ins are blocks of the kind, with no field the kind
// ignores set (canonical leaves them as they are), that survive a round trip through the case format.
TEST(BlockKinds, smokeSimplerAndStandInBlocksAreCanonicalBlocksOfTheKind) {
  for (const BlockKindDef* d : blockKinds()) {
    std::vector<BlockSpec> blocks = {blockOf(d, d->smoke)};
    for (const BlockSetter& set : d->simpler) blocks.push_back(blockOf(d, set));
    for (const BlockSetter& set : d->standIns) blocks.push_back(blockOf(d, set));
    for (const BlockSpec& b : blocks) {
      EXPECT_EQ(b.kind, d) << d->name;
      EXPECT_EQ(canonical(b), b) << d->name << ": a setter sets a field the kind ignores";
      CaseSpec c;
      c.batch = 2;
      c.seq = 2;
      c.width = 8;
      c.blocks = {b};
      EXPECT_EQ(parseCase(caseToJson(c)), c) << d->name;
    }
  }
  // The first kind stands in for the others.
  EXPECT_FALSE(blockKinds().front()->standIns.empty());
}

}  // namespace
}  // namespace ckpt
