//===- Stats.cpp - The loom-stats report pass -----------------------------===//

#include "loom/Analysis/StepStats.h"
#include "loom/Transforms/Passes.h"

#include "llvm/Support/raw_ostream.h"

namespace loom {
#define GEN_PASS_DEF_LOOMSTATS
#include "loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {
struct LoomStatsPass : public loom::impl::LoomStatsBase<LoomStatsPass> {
  using LoomStatsBase::LoomStatsBase;

  void runOnOperation() override {
    bool any = false;
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (!func->hasAttr(LoomDialect::kStepAttrName))
        continue;
      any = true;
      StepStats stats(func);
      if (json)
        llvm::errs() << llvm::formatv("{0:2}", stats.toJSON()) << "\n";
      else
        stats.print(llvm::errs());
    }
    if (!any) {
      getOperation().emitError("no step function (func.func with '")
          << LoomDialect::kStepAttrName << "') to report on";
      return signalPassFailure();
    }
    markAllAnalysesPreserved();
  }
};
} // namespace
