// Stochastic layers whose draws decide what is computed: drop-path (stochastic depth) and RReLU, the one home
// of their case fields (cases/SCHEMA.md), of the "randomness off" twin of a case, and of the generators' draw.
//
// Drop-path ("drop_path": p on residual-bn and transformer blocks; timm's DropPath): each residual branch is
// dropped for a whole sample (a sequence: `seq` consecutive rows) with probability p and scaled by 1/(1 - p)
// otherwise, one uniform per sample, so a recompute must drop the same samples. p = 0 leaves the block's program
// as it was (no node, no draws).
//
// RReLU (mlp "activation": "rrelu", the case's "rrelu_range": [lower, upper]; PyTorch's nn.RReLU in training):
// a slope uniform in [lower, upper] per element, applied where x <= 0 and saved for backward.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "cases/block_kind.h"
#include "cases/case_spec.h"

namespace ckpt {

// The "drop_path" field of the kinds that have a residual branch (its draw is the case-level one below).
const BlockField& dropPathField();
// Whether block `s` drops its residual branches (and the case therefore draws per sample).
inline bool dropsPath(const BlockSpec& s) { return s.dropPath > 0; }
bool anyDropPath(const CaseSpec& c);
// Appends a DropPath node named `name` over value `branch` to a kind's program; returns its value id.
int addDropPath(std::vector<OpNode>& program, const char* name, int branch, const BlockSpec& s, const CaseSpec& c);
// A kind's describe and needs for the field: "/dp0.25" (empty when off); {"drop_path", "on"}.
std::string dropPathText(const BlockSpec& s);
std::vector<std::pair<std::string, std::string>> dropPathNeeds(const BlockSpec& s);
bool anyRrelu(const CaseSpec& c);

// "rrelu_range": parsed from a case object (throws InputError naming the field), printed only when it is not
// PyTorch's default, so older cases print as they did.
void parseRreluRange(const nlohmann::json& j, CaseSpec& c);
void printRreluRange(const CaseSpec& c, nlohmann::json& j);

// The case with every random draw made irrelevant, for what cannot compare two generators' draws (validate's
// check 2 against the reference) or asks whether a difference came from the draws (the rng-desync diagnosis):
// dropout 0, every drop_path and router jitter 0, RReLU's range collapsed to its midpoint (its evaluation slope; with
// lower == upper training-mode RReLU is deterministic, in PyTorch as here). The compute precision stays: a recompute in
// another precision is not a difference of draws (check 2 sets exact compute itself, cases/compute_precision.h).
CaseSpec randomnessOff(const CaseSpec& c);
// Whether any op of the case draws random numbers that matter: dropout, drop-path, RReLU with a spread, an moe
// router's jitter.
bool drawsRandomNumbers(const CaseSpec& c);

// What a case text adds: ", drop-path 0.25" (the largest), ", rrelu" (empty when neither).
std::string stochasticText(const CaseSpec& c);

// Random cases, from one permille draw, monotone so that shrinking ends with neither layer: below 300 neither;
// [300, 500) RReLU in every mlp block; [500, 750) drop-path; from 750 both. Drop-path rises linearly with depth as
// timm's stochastic-depth rule does (block i of n gets rate (i + 1) / n), the rate growing from 0.1 to 0.6
// within each range.
void applyStochasticDraw(CaseSpec& c, int draw, bool dropPath, bool rrelu);

}  // namespace ckpt
