//===- InsertFrees.cpp - Free values right after their last use -----------===//

#include "loom/Dialect/LoomRT/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"

namespace loom::rt {
#define GEN_PASS_DEF_LOOMRTINSERTFREES
#include "loom/Dialect/LoomRT/Transforms/Passes.h.inc"
} // namespace loom::rt

using namespace mlir;
using namespace loom;
using namespace loom::rt;

/// Whether the program may drop `value` after its last use: not what the
/// runtime keeps across steps, not an output, not already freed.
static bool isFreeable(Value value) {
  if (auto input = value.getDefiningOp<InputOp>();
      input && input.isRuntimeOwned())
    return false;
  if (value.getDefiningOp<StateOp>() || value.use_empty())
    return false;
  return llvm::none_of(value.getUsers(), [](Operation *user) {
    return isa<OutputOp, FreeOp>(user);
  });
}

namespace {
struct LoomRTInsertFreesPass
    : public loom::rt::impl::LoomRTInsertFreesBase<LoomRTInsertFreesPass> {
  using LoomRTInsertFreesBase::LoomRTInsertFreesBase;

  void runOnOperation() override {
    Block &block = getOperation().getBody().front();
    // The values each instruction is the last use of, in definition order
    // (values are visited in program order), so the frees are
    // deterministic.
    llvm::MapVector<Operation *, SmallVector<Value>> lastUses;
    for (Operation &op : block)
      for (Value value : op.getResults()) {
        if (!isa<RankedTensorType>(value.getType()) || !isFreeable(value))
          continue;
        Operation *last = nullptr;
        for (Operation *user : value.getUsers()) {
          // A collective reads its input until its wait.
          if (auto start = dyn_cast<CollectiveStartOp>(user))
            if (rt::WaitOp wait = start.getWait())
              user = wait;
          if (!last || last->isBeforeInBlock(user))
            last = user;
        }
        lastUses[last].push_back(value);
      }
    for (auto &[last, values] : lastUses) {
      OpBuilder builder(last->getContext());
      builder.setInsertionPointAfter(last);
      // Free on the stream that last read the values, so the free is
      // ordered after that read.
      int64_t stream = getStream(last).value_or(0);
      FreeOp::create(builder, last->getLoc(), values,
                     builder.getI64IntegerAttr(stream));
    }
  }
};
} // namespace
