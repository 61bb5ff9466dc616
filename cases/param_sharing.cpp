#include "cases/param_sharing.h"

#include <algorithm>
#include <string>

#include "cases/block_kind.h"
#include "cases/json_fields.h"

namespace ckpt {
namespace {
size_t at(int i) { return static_cast<size_t>(i); }
}  // namespace

int paramOwner(const CaseSpec& c, int block) {
  const int s = c.blocks.at(at(block)).share;
  return s >= 0 ? s : block;
}

bool blockTrains(const CaseSpec& c, int block) { return !c.blocks.at(at(paramOwner(c, block))).frozen; }

std::vector<ShareGroup> shareGroups(const CaseSpec& c) {
  std::vector<ShareGroup> groups;
  const int n = static_cast<int>(c.blocks.size());
  for (int owner = 0; owner < n; ++owner) {
    ShareGroup g{owner, {}};
    for (int i = n - 1; i >= owner; --i)
      if (paramOwner(c, i) == owner) g.users.push_back(i);
    if (g.users.size() > 1) groups.push_back(std::move(g));
  }
  return groups;
}

bool boundaryRequiresGrad(const CaseSpec& c, int boundary) {
  if (c.inputGrad) return true;
  for (int i = 0; i < boundary; ++i)
    if (blockTrains(c, i)) return true;
  return false;
}

std::string blockParamText(const BlockSpec& b) {
  std::string t;
  if (b.share >= 0) t += " =b" + std::to_string(b.share);
  if (b.frozen) t += " frozen";
  return t;
}

// A token case's input without gradient is its frozen embedding, which lmText (cases/lm_case.h) says.
std::string caseParamText(const CaseSpec& c) {
  return c.inputGrad || c.input == InputKind::kTokens ? "" : ", input without gradient";
}

bool anyBlockTrains(const CaseSpec& c) {
  for (int i = 0; i < static_cast<int>(c.blocks.size()); ++i)
    if (blockTrains(c, i)) return true;
  return false;
}

bool hasFrozenBlock(const CaseSpec& c) {
  return std::any_of(c.blocks.begin(), c.blocks.end(), [](const BlockSpec& b) { return b.frozen; });
}

bool hasSharedBlock(const CaseSpec& c) {
  return std::any_of(c.blocks.begin(), c.blocks.end(), [](const BlockSpec& b) { return b.share >= 0; });
}

void checkParamFields(const CaseSpec& c, int i, const std::string& where, bool frozenGiven) {
  const BlockSpec& b = c.blocks.at(at(i));
  if (b.share < 0) return;
  const std::string path = where + ".share";
  if (b.share >= i)
    json_fields::fail(path, "names b" + std::to_string(b.share) + ", which is not an earlier block (this is b" +
                                std::to_string(i) + "; blocks are numbered from b0 after \"repeat\")");
  const BlockSpec& owner = c.blocks.at(at(b.share));
  if (owner.share >= 0)
    json_fields::fail(path, "b" + std::to_string(b.share) + " shares b" + std::to_string(owner.share) +
                                "'s parameters itself; name b" + std::to_string(owner.share));
  if (owner.kind != b.kind)
    json_fields::fail(path, "b" + std::to_string(b.share) + " is of kind " + owner.kind->name +
                                " and this block of kind " + b.kind->name +
                                "; a block shares the parameters of a block of its own kind");
  if (frozenGiven && b.frozen != owner.frozen)
    json_fields::fail(where + ".frozen", "a block that shares b" + std::to_string(b.share) +
                                             "'s parameters is frozen exactly when b" + std::to_string(b.share) +
                                             " is; set \"frozen\" there");
}

void eraseBlock(CaseSpec& c, size_t i) {
  const int gone = static_cast<int>(i);
  int heir = -1;  // the first block after i that shared its parameters
  for (size_t k = i + 1; k < c.blocks.size(); ++k) {
    BlockSpec& b = c.blocks[k];
    if (b.share == gone) {
      if (heir < 0) {
        heir = static_cast<int>(k);
        b.share = -1;
        b.frozen = c.blocks[i].frozen;
      } else {
        b.share = heir - 1;
      }
    } else if (b.share > gone) {
      --b.share;
    }
  }
  c.blocks.erase(c.blocks.begin() + static_cast<std::ptrdiff_t>(i));
}

std::vector<int> trainedOwners(const CaseSpec& c) {
  std::vector<int> out;
  for (int i = 0; i < static_cast<int>(c.blocks.size()); ++i)
    if (paramOwner(c, i) == i && blockTrains(c, i)) out.push_back(i);
  return out;
}

void fixParamFields(CaseSpec& c) {
  const int n = static_cast<int>(c.blocks.size());
  for (int i = 0; i < n; ++i) {
    BlockSpec& b = c.blocks[at(i)];
    if (b.share < 0) continue;
    if (b.share >= i || c.blocks[at(b.share)].share >= 0 || c.blocks[at(b.share)].kind != b.kind) b.share = -1;
    else b.frozen = c.blocks[at(b.share)].frozen;
  }
  if (!anyBlockTrains(c)) c.inputGrad = true;
}

void applyParamDraws(CaseSpec& c, int frozenDraw, int shareDraw, int inputGradDraw, bool frozen, bool share,
                     bool noInputGrad) {
  const int n = static_cast<int>(c.blocks.size());
  c.inputGrad = !(noInputGrad && inputGradDraw < 250);
  // Sharing: blocks 1..k of block 0's kind use its parameters, k growing with the draw up to every block
  // (ALBERT) from 825 on.
  if (share && shareDraw >= 650 && n > 1) {
    const int k = 1 + (shareDraw - 650) * (n - 1) / 175;
    for (int i = 1; i <= std::min(k, n - 1); ++i)
      if (c.blocks[at(i)].kind == c.blocks[0].kind) c.blocks[at(i)].share = 0;
  }
  // A frozen prefix leaves at least the last block training, so some gradient always flows. It is likelier
  // with an input without gradient (frozen embeddings feeding a fine-tuned stack, where reentrant checkpoint loses
  // gradients): 60% of those cases, 30% of the others.
  const int frozenFrom = c.inputGrad ? 700 : 400;
  if (frozen && frozenDraw >= frozenFrom && n > 1) {
    const int k = std::min(n - 1, 1 + (frozenDraw - frozenFrom) * n / (1000 - frozenFrom));
    for (int i = 0; i < k; ++i) c.blocks[at(i)].frozen = true;
  }
  fixParamFields(c);
}

}  // namespace ckpt
