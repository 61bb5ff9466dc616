// Which parameters each block uses and which of them train: the one home of the rules of a block's "frozen" and
// "share" and of the case's "input_grad" (cases/SCHEMA.md). The reference trainer, both executor backends, the
// case directory handed to adapters and the mutants that model sharing and freezing bugs all follow these.
#pragma once
#include <string>
#include <vector>

#include "cases/case_spec.h"

namespace ckpt {

// The block whose parameters block `block` uses: itself, or the block it shares.
int paramOwner(const CaseSpec& c, int block);

// Whether block `block`'s parameters train (take a gradient and an update): its owner is not frozen.
bool blockTrains(const CaseSpec& c, int block);

// The blocks that use one block's parameters, when more than one does. `users` is in backward order (highest
// index first, the owner last): the order in which backward reaches them and in which their contributions to
// the parameter's gradient add up, ((g_last + g_next) + ...) + g_owner, as autograd accumulates a tensor used
// several times.
struct ShareGroup {
  int owner = 0;
  std::vector<int> users;
};
std::vector<ShareGroup> shareGroups(const CaseSpec& c);

// Whether boundary x_b requires a gradient (x_0 is the chain input): the input requires one, or a block below b
// trains. A block whose input requires none still computes its parameters' gradients.
bool boundaryRequiresGrad(const CaseSpec& c, int boundary);

// What a case text adds for these fields: a block's " frozen" / " =b0" (empty when neither), a case's
// ", input without gradient" (empty when it requires one).
std::string blockParamText(const BlockSpec& b);
std::string caseParamText(const CaseSpec& c);

// The blocks whose parameters are reported and updated, in model order: owners (sharing none) that train.
std::vector<int> trainedOwners(const CaseSpec& c);

// Whether some block's parameters train.
bool anyBlockTrains(const CaseSpec& c);

bool hasFrozenBlock(const CaseSpec& c);
bool hasSharedBlock(const CaseSpec& c);

// Checks the sharing and freezing fields of block `i` (already parsed, with the blocks before it), throwing
// InputError naming `where` ("blocks[3]") and the field.
void checkParamFields(const CaseSpec& c, int i, const std::string& where, bool frozenGiven);

// Removes block i, keeping the others' sharing: a block that shared i's parameters shares the first of them that
// is left (which becomes their owner), and indices after i move down.
void eraseBlock(CaseSpec& c, size_t i);

// The smallest changes that make the fields consistent after a simplification: a share naming no earlier owner
// of the block's kind is dropped, a sharing block takes its owner's frozen, and an input without gradient before
// blocks none of which trains requires one again.
void fixParamFields(CaseSpec& c);

// Random cases: from three permille draws, a frozen prefix of blocks (the lower layers a fine-tune leaves
// alone), blocks that share the first block's parameters (ALBERT), and an input without gradient. Each draw's
// first 40-75% leaves the feature off, and every map is monotone, so shrinking turns the features off.
void applyParamDraws(CaseSpec& c, int frozenDraw, int shareDraw, int inputGradDraw, bool frozen, bool share,
                     bool noInputGrad);

}  // namespace ckpt
