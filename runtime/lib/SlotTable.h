//===- SlotTable.h - The values of a running step ---------------*- C++ -*-===//
//
// A slot holds one tensor between the instruction that writes it and the
// `free` that drops it. "Holds a value" and "holds a defined tensor" differ:
// an operator may return None for a result (e.g. a masked-out gradient), and
// that is stored as an undefined tensor in a live slot.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_LIB_SLOTTABLE_H
#define LOOMRT_LIB_SLOTTABLE_H

#include "loomrt/Error.h"

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

namespace loomrt {

class SlotTable {
public:
  void resize(size_t n) {
    values_.assign(n, at::Tensor());
    live_.assign(n, 0);
  }
  size_t size() const { return values_.size(); }

  bool live(int64_t slot) const { return live_[size_t(slot)] != 0; }
  /// The value in `slot`; load-time dataflow checks make a dead slot here a
  /// runtime bug, but the check is cheap and the message is clear.
  const at::Tensor &get(int64_t slot) const {
    if (!live_[size_t(slot)])
      throw Error("slot " + std::to_string(slot) + " holds no value");
    return values_[size_t(slot)];
  }
  void set(int64_t slot, at::Tensor value) {
    values_[size_t(slot)] = std::move(value);
    live_[size_t(slot)] = 1;
  }
  void free(int64_t slot) {
    values_[size_t(slot)] = at::Tensor();
    live_[size_t(slot)] = 0;
  }
  void clear() {
    for (size_t i = 0; i < values_.size(); ++i) {
      values_[i] = at::Tensor();
      live_[i] = 0;
    }
  }

private:
  std::vector<at::Tensor> values_;
  std::vector<char> live_;
};

} // namespace loomrt

#endif // LOOMRT_LIB_SLOTTABLE_H
