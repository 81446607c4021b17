//===- AssignSlots.cpp - Number value slots, reusing freed ones -----------===//

#include "loom/Dialect/LoomRT/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

#include <set>

namespace loom::rt {
#define GEN_PASS_DEF_LOOMRTASSIGNSLOTS
#include "loom/Dialect/LoomRT/Transforms/Passes.h.inc"
} // namespace loom::rt

using namespace mlir;
using namespace loom;
using namespace loom::rt;

namespace {
struct LoomRTAssignSlotsPass
    : public loom::rt::impl::LoomRTAssignSlotsBase<LoomRTAssignSlotsPass> {
  using LoomRTAssignSlotsBase::LoomRTAssignSlotsBase;

  void runOnOperation() override {
    ProgramOp program = getOperation();
    Builder b(&getContext());
    int64_t numSlots = 0;
    // Released slots, lowest first: a deterministic choice that also keeps
    // the slot table small.
    std::set<int64_t> released;
    llvm::DenseMap<Value, int64_t> slotOf;
    auto take = [&]() -> int64_t {
      if (!reuse || released.empty())
        return numSlots++;
      int64_t slot = *released.begin();
      released.erase(released.begin());
      return slot;
    };
    for (Operation &op : program.getBody().front()) {
      if (auto input = dyn_cast<InputOp>(op)) {
        int64_t slot = take();
        input.setSlotAttr(b.getI64IntegerAttr(slot));
        slotOf[input] = slot;
      } else if (auto state = dyn_cast<StateOp>(op)) {
        int64_t slot = take();
        state.setSlotAttr(b.getI64IntegerAttr(slot));
        slotOf[state] = slot;
      } else if (auto aten = dyn_cast<rt::AtenOp>(op)) {
        SmallVector<int64_t> slots;
        for (Value result : aten.getResults()) {
          // Nothing reads it: the runtime drops it as the kernel returns.
          int64_t slot = result.use_empty() ? -1 : take();
          slots.push_back(slot);
          slotOf[result] = slot;
        }
        aten.setSlots(slots);
      } else if (auto start = dyn_cast<CollectiveStartOp>(op)) {
        // The future holds a slot until its wait.
        int64_t slot = take();
        start.setSlotAttr(b.getI64IntegerAttr(slot));
        slotOf[start.getFuture()] = slot;
      } else if (auto wait = dyn_cast<rt::WaitOp>(op)) {
        // The wait of a send yields nothing to hold.
        if (Value result = wait.getResult()) {
          int64_t slot = take();
          wait.setSlotAttr(b.getI64IntegerAttr(slot));
          slotOf[result] = slot;
        }
        released.insert(slotOf.lookup(wait.getFuture()));
      } else if (auto free = dyn_cast<FreeOp>(op)) {
        for (Value v : free.getValues())
          released.insert(slotOf.lookup(v));
      }
    }
    program.setNumSlotsAttr(b.getI64IntegerAttr(numSlots));
  }
};
} // namespace
