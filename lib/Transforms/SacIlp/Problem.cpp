//===- Problem.cpp - loom-sac-ilp's choices: the nodes of each block ------===//

#include "SacIlp.h"

#include "loom/Dialect/Loom/IR/OpClassification.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace loom;
using namespace loom::sacilp;

/// The value whose storage `v` is: the base through any chain of aliases,
/// by the rule the peak-memory sweep uses.
static Value getStorage(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    Value base = getAliasedOperand(def);
    if (!base)
      break;
    v = base;
  }
  return v;
}

/// Who outside forward reads `v` or an alias of it: backward ops of
/// `module` (`inBlock`) or of any other module (`outside`).
static void findBackwardReaders(Value v, StringRef module, bool &inBlock,
                                bool &outside) {
  for (Operation *user : v.getUsers()) {
    // The step's results live to its end whatever is decided (a batch norm's
    // updated running statistics): returning one is no backward read.
    if (isa<func::ReturnOp>(user))
      continue;
    if (!isForwardOp(user)) {
      bool own = isInModule(getModulePath(user), module);
      inBlock |= own;
      outside |= !own;
    }
    if (getAliasedOperand(user) == v)
      for (Value r : user->getResults())
        findBackwardReaders(r, module, inBlock, outside);
  }
}

/// What makes two blocks the same computation: each node's kernel,
/// arguments, types and inputs by position in the block.
static std::string describeBlock(const Problem &problem, const BlockChoice &block) {
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::DenseMap<unsigned, unsigned> local;
  for (auto [i, n] : llvm::enumerate(block.nodes))
    local[n] = i;
  for (unsigned n : block.nodes) {
    const Node &node = problem.nodes[n];
    auto aten = cast<AtenOp>(node.op);
    os << aten.getKernel() << aten.getArgs() << aten.getKwargs();
    for (Type t : aten->getOperandTypes())
      os << t;
    os << "->";
    for (Type t : aten->getResultTypes())
      os << t;
    os << "[";
    for (unsigned in : node.inputs)
      os << local[in] << ",";
    os << "]" << node.backwardUsed << node.mustSave << ";";
  }
  return text;
}

FailureOr<Problem> sacilp::buildProblem(func::FuncOp step,
                                        ArrayRef<std::string> modules) {
  Problem problem;
  llvm::DenseMap<Operation *, unsigned> nodeOf;
  for (const std::string &module : modules) {
    BlockChoice block;
    block.module = module;
    unsigned index = problem.blocks.size();
    for (auto [position, op] : llvm::enumerate(step.getBody().front())) {
      auto aten = dyn_cast<AtenOp>(op);
      if (!aten || !isForwardOp(aten) ||
          !isInModule(getModulePath(aten), module) || nodeOf.count(aten))
        continue;
      // An alias allocates nothing: it is taken again where the value it
      // aliases is recomputed, and read from forward where that is saved.
      if (getAliasedOperand(aten)) {
        block.views.push_back(position);
        continue;
      }
      Node node;
      node.op = aten;
      node.block = index;
      // (An nn.SyncBatchNorm's statistics come from a collective.)
      node.mustSave = isRandomAtenOp(aten.getKernel()) ||
                      isInPlaceAtenOp(aten.getKernel()) ||
                      aten->hasAttr(LoomDialect::kSyncBatchNormAttrName);
      bool inBlock = false, outside = false;
      for (Value r : aten.getResults())
        findBackwardReaders(r, module, inBlock, outside);
      node.backwardUsed = inBlock || outside;
      // What another module's backward reads (the block's output, read by
      // the next block's weight gradient) is saved, as checkpoint_wrapper
      // keeps a module's output: recomputing it would run the region in the
      // other module's backward and move that module's FSDP events.
      node.mustSave |= outside;
      for (Value operand : aten.getOperands()) {
        auto it = nodeOf.find(getStorage(operand).getDefiningOp());
        if (it != nodeOf.end() && problem.nodes[it->second].block == index &&
            !llvm::is_contained(node.inputs, it->second))
          node.inputs.push_back(it->second);
      }
      nodeOf[aten] = problem.nodes.size();
      block.nodes.push_back(problem.nodes.size());
      problem.nodes.push_back(std::move(node));
    }
    if (block.nodes.empty())
      return mlir::emitError(step.getLoc(), "--loom-sac-ilp: module '")
             << module << "' has no forward ops to save or recompute";
    problem.blocks.push_back(std::move(block));
  }

  // Identical blocks are one distinct block: their nodes take the
  // decisions of its first block's, position by position.
  llvm::StringMap<unsigned> distinctWithText;
  for (auto [b, block] : llvm::enumerate(problem.blocks)) {
    std::string computation = describeBlock(problem, block);
    auto [it, inserted] =
        distinctWithText.try_emplace(computation, problem.distinct.size());
    if (inserted) {
      DistinctBlock &d = problem.distinct.emplace_back();
      d.computation = std::move(computation);
      d.representative = b;
      d.firstDecision = problem.numDecisions;
      problem.numDecisions += block.nodes.size();
    }
    DistinctBlock &d = problem.distinct[it->second];
    d.blocks.push_back(b);
    block.distinct = it->second;
    for (auto [i, n] : llvm::enumerate(block.nodes))
      problem.nodes[n].decision = d.firstDecision + i;
  }
  return problem;
}
