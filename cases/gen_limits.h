// What a consumer of random cases can run (an adapter's capabilities restrict these); cases/generators.h draws
// within them. Each block kind names its switch (BlockKindDef::allowed).
#pragma once

namespace ckpt {

struct GenLimits {
  int maxBlocks = 40;
  int maxSteps = 3;
  bool mlp = true;
  bool residualBn = true;
  bool transformer = true;
  bool dropout = true;
  bool floatType = true;
  bool doubleType = true;
  bool counterRng = true;
  bool statefulRng = true;
  // Every choice (block kind, activation, heads, dropout, generator model, dtype, loss) also shrinks, toward its
  // first option: mlp, relu, one head, dropout off, stateful, double, cross-entropy. Off, a choice never shrinks
  // (RapidCheck's elementOf); the cases a seed generates differ between the two settings.
  bool shrinkChoices = false;
};

}  // namespace ckpt
