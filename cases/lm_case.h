// Language-model cases: the one home of the rules of a case's "input": "tokens", "vocab", "tie_embeddings",
// "frozen_embedding" and inline "tokens" (cases/SCHEMA.md). The reference chain, both executor backends, the
// planner, the case directory handed to adapters and the generators follow these.
//
// A token case feeds x_0 from token ids: x_0[r] = E[id_r] + P[r mod seq] (a token embedding E (vocab, width) and
// a learned position embedding P (seq, width), GPT-2's wte and wpe), computed per micro-batch before block 0 and
// outside the chain, so every policy and the planner's chain are those of a dense case. After the chain comes
// the LM head, which is the case's loss: a final LayerNorm, logits = LN(x_L) W^T with W (vocab, width) and no
// bias, and cross-entropy over the vocabulary against labels in [0, vocab).
//
// Tied (GPT-2's default): W is E. The head keeps its own copy of W, like a block that shares parameters
// (cases/param_sharing.h); after each micro-batch's backward the embedding's gradient becomes g_head + g_emb
// (backward reaches the head first, and autograd adds a tensor's contributions in arrival order), and after the
// update the copy takes E's value. The embedding backward is a scatter-add of g_0's rows into dE in row order
// 0..R-1 (and into dP, rows in order), so it is deterministic.
//
// Frozen embedding: E and P neither take a gradient nor move (with a tied head, W neither), x_0 requires no
// gradient (CaseSpec::inputGrad is false: the setting of reentrant checkpoint's missing-gradient bug), and the
// stem's backward does not run. Token cases report no input gradient: what would be one is consumed by the stem.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "cases/case_spec.h"

namespace ckpt {

bool isLanguageModel(const CaseSpec& c);
// The LM head's weight is the token embedding.
bool tiedHead(const CaseSpec& c);
// The token and position embeddings train (a token case whose embedding is not frozen).
bool embeddingTrains(const CaseSpec& c);
// Whether the LM head's weight takes a gradient: untied, or tied to an embedding that trains (a tied weight over a
// frozen embedding requires no gradient, and PyTorch computes none).
bool headWeightTrains(const CaseSpec& c);
// Whether a step reports dL/dx_0: a dense input that requires a gradient.
bool inputGradReported(const CaseSpec& c);
// The number of classes cross-entropy runs over: the vocabulary with tokens, the width otherwise.
int64_t lossClasses(const CaseSpec& c);

// Parses the fields above from a case object whose loss, batch and seq are already read (throws InputError
// naming the field), and prints them (nothing for a dense case, so older cases print as they did).
void parseLmFields(const nlohmann::json& j, CaseSpec& c);
void printLmFields(const CaseSpec& c, nlohmann::json& j);
// The keys parseLmFields reads.
const char* const* lmFieldKeys();

// What a case text adds: ", tokens V=16, tied head" / ", frozen embedding" (empty for a dense case).
std::string lmText(const CaseSpec& c);

// The smallest changes that keep the fields consistent after a simplification: inline tokens whose count no
// longer matches the rows are dropped (the case draws its ids), and a token case computes cross-entropy.
void fixLmFields(CaseSpec& c);

// Random cases: from a permille draw, 25% of the cases are language-model cases with a vocabulary of 4..16,
// half of them tied. The map is monotone in the vocabulary within each half and turns tokens off below 750, so
// shrinking ends at a dense case.
void applyLmDraw(CaseSpec& c, int draw, bool enabled);

}  // namespace ckpt
