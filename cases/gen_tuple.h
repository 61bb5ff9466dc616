// rc::gen::tuple with a length known only at run time: element i is drawn from its own split of the random
// source, in order, and shrinks one element at a time, first to last, exactly as RapidCheck's TupleGen does. The
// block generator draws "kind, then every registered field" this way, so a table of kinds draws the same values
// from the same seed as the fixed rc::gen::build it replaced.
#pragma once
#include <memory>
#include <rapidcheck.h>
#include <vector>

namespace ckpt {
namespace detail {

template <class T>
class DynTupleShrinkable {
 public:
  explicit DynTupleShrinkable(std::vector<rc::Shrinkable<T>> parts) : parts_(std::move(parts)) {}
  std::vector<T> value() const {
    std::vector<T> v;
    v.reserve(parts_.size());
    for (const auto& p : parts_) v.push_back(p.value());
    return v;
  }
  rc::Seq<rc::Shrinkable<std::vector<T>>> shrinks() const;

 private:
  std::vector<rc::Shrinkable<T>> parts_;
};

// The shrinks of element i, then of element i + 1, ...: RapidCheck's TupleShrinkSeq, concatenated.
template <class T>
class DynTupleShrinkSeq {
 public:
  explicit DynTupleShrinkSeq(std::vector<rc::Shrinkable<T>> parts) : parts_(std::move(parts)) {
    if (!parts_.empty()) shrinks_ = parts_[0].shrinks();
  }
  rc::Maybe<rc::Shrinkable<std::vector<T>>> operator()() {
    while (i_ < parts_.size()) {
      auto next = shrinks_.next();
      if (next) {
        auto shrunk = parts_;
        shrunk[i_] = std::move(*next);
        return rc::makeShrinkable<DynTupleShrinkable<T>>(std::move(shrunk));
      }
      if (++i_ < parts_.size()) shrinks_ = parts_[i_].shrinks();
    }
    return rc::Nothing;
  }

 private:
  std::vector<rc::Shrinkable<T>> parts_;
  size_t i_ = 0;
  rc::Seq<rc::Shrinkable<T>> shrinks_;
};

template <class T>
rc::Seq<rc::Shrinkable<std::vector<T>>> DynTupleShrinkable<T>::shrinks() const {
  return rc::makeSeq<DynTupleShrinkSeq<T>>(parts_);
}

}  // namespace detail

template <class T>
rc::Gen<std::vector<T>> dynamicTuple(std::vector<rc::Gen<T>> gens) {
  return rc::Gen<std::vector<T>>([gens = std::move(gens)](const rc::Random& random, int size) {
    rc::Random r = random;
    std::vector<rc::Random> randoms;
    for (size_t i = 0; i < gens.size(); ++i) randoms.push_back(r.split());
    std::vector<rc::Shrinkable<T>> parts;
    for (size_t i = 0; i < gens.size(); ++i) parts.push_back(gens[i](randoms[i], size));
    return rc::makeShrinkable<detail::DynTupleShrinkable<T>>(std::move(parts));
  });
}

}  // namespace ckpt
