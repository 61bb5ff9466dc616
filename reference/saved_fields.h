// Saved contexts with named fields (llm.c's activation struct: `s.mean`, not `ctx.tensors[1]`).
//
// An op declares what its forward saves for backward as a small struct of tensors with a `fields()` tie, e.g.
//
//   struct Saved {
//     Tensor<T> x, mean, rstd;
//     auto fields() { return std::tie(x, mean, rstd); }
//   };
//   if (ctx) saveFields(*ctx, Saved{x, meanT, rstdT});          // forward
//   const auto s = loadFields<Saved>(ctx);  s.mean ...           // backward
//
// The context itself stays a flat list of tensors, in field order, because the runtime needs nothing more: it
// counts the context's bytes, releases it after backward, and engine variants reach its tensors by position.
// Loading copies handles (shared storage, no allocation), so it changes no byte the meter counts.
//
// Both the CPU Context and the device DContext are such lists, so one helper serves both; it needs only that
// the tensor type has defined(). A field left undefined (an optional tensor, e.g. attention's dropout mask when
// p = 0) is not saved; optional fields therefore come last, which saveFields checks.
#pragma once
#include <stdexcept>
#include <tuple>
#include <vector>

namespace ckpt {

template <class Ctx, class Saved>
void saveFields(Ctx& ctx, Saved saved) {
  ctx.tensors.clear();
  bool ended = false;
  std::apply(
      [&](auto&... t) {
        (
            [&](auto& one) {
              if (!one.defined()) {
                ended = true;
                return;
              }
              if (ended) throw std::logic_error("saveFields: a defined field after an undefined one");
              ctx.tensors.push_back(one);
            }(t),
            ...);
      },
      saved.fields());
}

template <class Saved, class Ctx>
Saved loadFields(const Ctx& ctx) {
  Saved saved;
  size_t i = 0;
  std::apply([&](auto&... t) { ((i < ctx.tensors.size() ? (void)(t = ctx.tensors[i++]) : (void)0), ...); },
             saved.fields());
  if (i != ctx.tensors.size()) throw std::logic_error("loadFields: the context holds more tensors than fields");
  return saved;
}

}  // namespace ckpt
