//===- SacIlpPass.cpp - The loom-sac-ilp pass -----------------------------===//

#include "SacIlp.h"

#include "loom/Analysis/PeakMemory.h"
#include "loom/Dialect/LoomRT/IR/LoomRTOps.h"
#include "loom/Support/ByteSize.h"
#include "loom/Transforms/Passes.h"
#include "loom/Transforms/Remat.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <set>
#include <tuple>

namespace loom {
#define GEN_PASS_DEF_LOOMSACILP
#include "loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;
using namespace loom::sacilp;

/// How many bounds the pass solves under (each solve is measured on a copy).
static constexpr int kMaxRounds = 6;

namespace {
/// The peak of a module once the rest of the pipeline has run on a copy.
struct Measured {
  int64_t peakBytes = 0;
  std::string peakOp, peakModule;

  /// "'op' in module 'm'", or "'op' in the root module" for an op of no
  /// submodule (a loss, an optimizer update).
  std::string where() const {
    return "'" + peakOp + "' in " +
           (peakModule.empty() ? std::string("the root module")
                               : "module '" + peakModule + "'");
  }
};

/// What the pass decided for the blocks of one program: per node of
/// `problem`, saved (true) or recomputed where backward needs it.
struct ProgramChoice {
  Problem problem;
  SmallVector<bool> save;
};

/// One program of a pipelined step: its name, the blocks it runs, and for
/// a program without blocks, its peak (the copy that found them measured
/// it: no decision changes it).
struct ProgramBlocks {
  std::string label;
  SmallVector<std::string> blocks;
  Measured asItStands;
};

/// The peak of a finished program (getPrograms) and where it is reached.
static Measured measureProgram(Operation *program) {
  PeakMemory peak = getProgramPeak(program);
  return {peak.peakBytes, peak.peakOpName(),
          peak.peakOp ? getModulePath(peak.peakOp).str() : ""};
}

/// One program's search for its decision. The model is an estimate of the
/// measured peak (a region's working room, where it runs), so the bound it
/// is solved under is searched: the largest bound whose decision measures
/// within the budget recomputes least. The first bound is the budget; after
/// each solve the model's error on that decision (measured - modelled peak)
/// corrects the next bound, and where that repeats a bound already tried,
/// the search bisects between the bounds known too tight (infeasible, or
/// within the budget) and too loose.
struct Search {
  /// The program's name in reports and errors ("" for an unpipelined step)
  /// and number (getPrograms).
  std::string label;
  unsigned program = 0;
  Problem problem;
  Liveness liveness;
  std::unique_ptr<Solver> solver;
  /// The peak with nothing recomputed (the profile's).
  int64_t baseline = 0;
  int64_t tight = 0, loose = 0, bound = 0;
  /// This round's decision, and the best one measured within the budget.
  std::optional<Decision> trial, best;
  std::optional<Measured> bestMeasured;
  bool searching = true;

  /// "program 'step_pp0': " in reports and errors of a pipelined step.
  std::string in() const {
    return label.empty() ? std::string() : "program '" + label + "': ";
  }
  ProgramChoice choose(ArrayRef<bool> save) const {
    return ProgramChoice{problem, SmallVector<bool>(save)};
  }
  /// What a copy measured for this round's decision moves the search to.
  void update(const Measured &measured, int64_t budget);
};

/// A decision the pass falls back to when no decision of the model measured
/// within the budget: what it is, per node saved and recomputed, its
/// recompute seconds and measured peak.
struct Fallback {
  std::string what;
  SmallVector<bool> save, recompute;
  double seconds = 0;
  Measured measured;
};

/// Recomputing all the blocks can: every node backward reads and what those
/// read in turn, back to the nodes that must be saved (nodes come in
/// forward order, so one backward sweep finds them all).
static Fallback recomputeAll(const Problem &problem) {
  Fallback all{"every block recomputed", {}, {}, 0, {}};
  for (const Node &node : problem.nodes) {
    all.save.push_back(node.mustSave);
    all.recompute.push_back(!node.mustSave && node.backwardUsed);
  }
  for (size_t n = problem.nodes.size(); n-- > 0;)
    if (all.recompute[n])
      for (unsigned in : problem.nodes[n].inputs)
        all.recompute[in] = all.recompute[in] || !all.save[in];
  for (auto [node, recomputed] : llvm::zip(problem.nodes, all.recompute))
    all.seconds += recomputed ? node.seconds : 0;
  return all;
}

struct LoomSacIlpPass : public loom::impl::LoomSacIlpBase<LoomSacIlpPass> {
  using LoomSacIlpBase::LoomSacIlpBase;
  LoomSacIlpPass(const LoomSacIlpOptions &options,
                 std::function<void(OpPassManager &)> downstream)
      : LoomSacIlpBase(options), downstreamBuilder(std::move(downstream)) {}

  void runOnOperation() override;

private:
  /// An error at `op`'s location (without printing the op: it is the whole
  /// module or step).
  InFlightDiagnostic emitPassError(Operation *op) {
    return mlir::emitError(op->getLoc(), "--loom-sac-ilp: ");
  }
  /// Adds the rest of the pipeline to `pm`; errors are located at `at`.
  LogicalResult buildDownstream(OpPassManager &pm, Operation *at);
  /// Runs the rest of the pipeline on `copy`, calling `afterPass` (when
  /// given) after each of its passes.
  LogicalResult
  runDownstream(ModuleOp copy,
                const std::function<void(Operation *)> &afterPass = {});
  /// The peak of every program (getPrograms) of `finished`, a copy the rest
  /// of the pipeline has run on.
  FailureOr<SmallVector<Measured>> measurePrograms(ModuleOp finished,
                                                   func::FuncOp step);
  /// The peak of every program of a copy of `module` with `choices` applied.
  FailureOr<SmallVector<Measured>>
  measureChoices(ModuleOp module, func::FuncOp step,
                 ArrayRef<ProgramChoice> choices);
  /// Builds the regions of `choices` in `target`: the step or a copy of it.
  LogicalResult apply(func::FuncOp target, ArrayRef<ProgramChoice> choices);
  /// Starts a search per program that has blocks: its problem, and its
  /// profile measured with every program's blocks in regions that save
  /// everything, on one copy.
  LogicalResult startSearches(ModuleOp module, func::FuncOp step,
                              std::vector<std::unique_ptr<Search>> &searches);
  /// Runs the searches' rounds in step: each round solves every program
  /// still searching and measures all their decisions on one copy.
  LogicalResult runRounds(ModuleOp module, func::FuncOp step,
                          ArrayRef<std::unique_ptr<Search>> searches);
  /// The search's decision (reported with `report`), or, when no decision
  /// of the model measured within the budget, the cheapest fallback that
  /// does (the model's least-peak decision, recomputing all it can), or the
  /// error naming the smallest feasible budget and where its peak is.
  FailureOr<ProgramChoice> finish(ModuleOp module, func::FuncOp step,
                                  Search &search);
  /// Prints the decision `save`/`recompute` (`seconds` recomputed,
  /// `measured` peak) and each distinct block's curve to stderr.
  void report(const Search &search, ArrayRef<bool> save,
              ArrayRef<bool> recompute, double seconds,
              const Measured &measured);
  /// Saving everything, recomputing all the blocks can and the model's
  /// least-peak decision, each measured on a copy of the step.
  FailureOr<SmallVector<Fallback, 3>>
  measureFallbacks(ModuleOp module, func::FuncOp step, Search &search);
  /// With pipelining: each program of the pipelined step (empty: the step
  /// is one program), after pinning the stage cut on `module` so that every
  /// copy and the step itself are cut alike.
  FailureOr<SmallVector<ProgramBlocks>>
  splitByProgram(ModuleOp module, func::FuncOp step,
                 ArrayRef<std::string> blocks);

  std::function<void(OpPassManager &)> downstreamBuilder;
  /// Per op of the step's body, its position: a copy's ops are found there.
  DenseMap<Operation *, size_t> position;
  int64_t budgetBytes = 0;
  std::optional<CostModel> costs;
  /// The curves traced in this run, shared by its programs' Solvers.
  CurveCache curveCache;
};
} // namespace

namespace {
/// Calls a function after every pass, with the op the pass ran on.
struct AfterEachPass : public PassInstrumentation {
  explicit AfterEachPass(std::function<void(Operation *)> callback)
      : callback(std::move(callback)) {}
  void runAfterPass(Pass *, Operation *op) override { callback(op); }
  std::function<void(Operation *)> callback;
};
} // namespace

LogicalResult LoomSacIlpPass::buildDownstream(OpPassManager &pm,
                                              Operation *at) {
  if (downstreamBuilder)
    downstreamBuilder(pm);
  else if (!sacPipeline.empty() &&
           failed(parsePassPipeline(sacPipeline, pm, llvm::errs())))
    return emitPassError(at)
           << "cannot parse pipeline '" << sacPipeline << "'";
  return success();
}

LogicalResult LoomSacIlpPass::runDownstream(
    ModuleOp copy, const std::function<void(Operation *)> &afterPass) {
  PassManager pm(copy.getContext(), ModuleOp::getOperationName());
  // The copy is measured and dropped; the pipeline's own run on the step
  // verifies what these passes build.
  pm.enableVerifier(false);
  if (afterPass)
    pm.addInstrumentation(std::make_unique<AfterEachPass>(afterPass));
  if (failed(buildDownstream(pm, copy)))
    return failure();
  if (pm.empty())
    return success();
  return pm.run(copy);
}

/// Whether `pm` runs the pass `argument`, at any nesting.
static bool runsPass(OpPassManager &pm, StringRef argument) {
  std::string text;
  llvm::raw_string_ostream os(text);
  pm.printAsTextualPipeline(os);
  // Pass names are separated by `,` and `(` and followed by `{`, `,` or `)`.
  for (size_t at = text.find(argument); at != std::string::npos;
       at = text.find(argument, at + 1)) {
    char before = at ? text[at - 1] : ',';
    size_t end = at + argument.size();
    char after = end < text.size() ? text[end] : ')';
    if (StringRef(",( ").contains(before) && StringRef("{,) ").contains(after))
      return true;
  }
  return false;
}

/// The fully-qualified names of the step's parameters, in argument order.
static SmallVector<StringRef> getParameterNames(func::FuncOp step) {
  SmallVector<StringRef> names;
  for (unsigned i = 0, e = step.getNumArguments(); i < e; ++i) {
    auto role = step.getArgAttrOfType<RoleAttr>(i, LoomDialect::kRoleAttrName);
    auto name = step.getArgAttrOfType<StringAttr>(i, LoomDialect::kNameAttrName);
    if (role && role.getValue() == Role::parameter && name)
      names.push_back(name.getValue());
  }
  return names;
}

/// The rest of the step as blocks beside `layers`: for each forward op that
/// allocates (not a view) in a module outside every layer block, the
/// shortest prefix of its module path that holds no layer block (a
/// top-level module such as the final norm, or `model.norm` where the layers
/// are `model.layers.N`), in order of first appearance. Ops of the root
/// module, and of a module that holds layer blocks itself, stay saved.
static SmallVector<std::string> getOutsideBlocks(func::FuncOp step,
                                                 ArrayRef<std::string> layers) {
  auto holdsLayer = [&](StringRef prefix) {
    return llvm::any_of(layers, [&](const std::string &layer) {
      return isInModule(layer, prefix);
    });
  };
  SmallVector<std::string> out;
  llvm::StringSet<> seen;
  step.walk([&](AtenOp op) {
    StringRef path = getModulePath(op);
    if (path.empty() || !isForwardOp(op) || getAliasedOperand(op) ||
        op->getParentOfType<RecomputeOp>() ||
        llvm::any_of(layers, [&](const std::string &layer) {
          return isInModule(path, layer);
        }))
      return;
    for (size_t dot = path.find('.');; dot = path.find('.', dot + 1)) {
      StringRef prefix = path.take_front(dot);
      if (!holdsLayer(prefix)) {
        if (seen.insert(prefix).second)
          out.push_back(prefix.str());
        return;
      }
      if (dot == StringRef::npos)
        return;
    }
  });
  return out;
}

/// The ops of `step`'s body in order, so that a copy's ops are found by
/// position.
static SmallVector<Operation *> bodyOps(func::FuncOp step) {
  SmallVector<Operation *> ops;
  for (Operation &op : step.getBody().front())
    ops.push_back(&op);
  return ops;
}

static func::FuncOp findStep(ModuleOp module, StringRef name) {
  for (auto func : module.getOps<func::FuncOp>())
    if (func.getSymName() == name)
      return func;
  return {};
}

FailureOr<SmallVector<Measured>>
LoomSacIlpPass::measurePrograms(ModuleOp finished, func::FuncOp step) {
  SmallVector<Measured> out;
  for (Operation *program : getPrograms(finished))
    out.push_back(measureProgram(program));
  if (out.empty())
    return emitPassError(step) << "the pipeline after it left no step";
  return out;
}

FailureOr<SmallVector<Measured>>
LoomSacIlpPass::measureChoices(ModuleOp module, func::FuncOp step,
                               ArrayRef<ProgramChoice> choices) {
  OwningOpRef<ModuleOp> trial(cast<ModuleOp>(module->clone()));
  if (failed(apply(findStep(*trial, step.getSymName()), choices)) ||
      failed(runDownstream(*trial)))
    return failure();
  return measurePrograms(*trial, step);
}

LogicalResult LoomSacIlpPass::apply(func::FuncOp target,
                                    ArrayRef<ProgramChoice> choices) {
  SmallVector<Operation *> ops = bodyOps(target);
  SmallVector<RecomputeGroup> groups;
  for (const ProgramChoice &choice : choices) {
    for (const BlockChoice &block : choice.problem.blocks) {
      RecomputeGroup &group = groups.emplace_back();
      group.module = block.module;
      for (unsigned n : block.nodes) {
        Operation *op = ops[position.lookup(choice.problem.nodes[n].op)];
        group.ops.push_back(op);
        if (choice.save[n])
          group.saved.insert(op);
      }
      for (size_t at : block.views)
        group.ops.push_back(ops[at]);
    }
  }
  return applyRecompute(target, groups);
}

/// Prints a distinct block's trade-off curve: its corners, from keeping
/// most to keeping least, as bytes kept from forward to backward and
/// milliseconds recomputed.
static void reportCurve(StringRef module, size_t alike,
                        ArrayRef<CurveCorner> curve) {
  llvm::errs() << llvm::formatv(
      "loom-sac-ilp: block '{0}' ({1} alike): {2} corner{3} (bytes kept, ms "
      "recomputed):",
      module, alike, curve.size(), curve.size() == 1 ? "" : "s");
  for (const CurveCorner &corner : curve)
    llvm::errs() << llvm::formatv(" ({0}, {1:f4})",
                                  std::llround(corner.keptMiB * 1024 * 1024),
                                  corner.recomputeMs);
  llvm::errs() << "\n";
}

/// Prints where the blocks of `distinct` sit: how many take each policy of
/// the decision, as (bytes kept from forward to backward, ms recomputed), in
/// the curve's units, so the decision can be read against the curve.
static void reportChoices(StringRef module, const Problem &problem,
                          const Liveness &liveness,
                          const DistinctBlock &distinct, ArrayRef<bool> save,
                          ArrayRef<bool> recompute) {
  SmallVector<int64_t> bytes = getKeptBytes(problem, liveness);
  // Per policy (what the block saves and recomputes), in order of first
  // appearance: its blocks, bytes kept and milliseconds.
  llvm::MapVector<SmallVector<bool>, std::tuple<unsigned, int64_t, double>>
      choices;
  for (unsigned b : distinct.blocks) {
    SmallVector<bool> policy;
    int64_t kept = 0;
    double ms = 0;
    for (unsigned n : problem.blocks[b].nodes) {
      policy.push_back(save[n]);
      policy.push_back(recompute[n]);
      kept += save[n] ? bytes[n] : 0;
      ms += recompute[n] ? problem.nodes[n].seconds * 1e3 : 0;
    }
    auto [it, inserted] = choices.try_emplace(policy, 0, kept, ms);
    ++std::get<0>(it->second);
  }
  llvm::errs() << llvm::formatv("loom-sac-ilp: block '{0}': blocks x (bytes "
                                "kept, ms recomputed):",
                                module);
  for (auto &[policy, choice] : choices)
    llvm::errs() << llvm::formatv(" {0} x ({1}, {2:f4})", std::get<0>(choice),
                                  std::get<1>(choice), std::get<2>(choice));
  llvm::errs() << "\n";
}

void LoomSacIlpPass::runOnOperation() {
  ModuleOp module = getOperation();
  SmallVector<func::FuncOp> steps = getStepFunctions(module);
  if (steps.size() != 1) {
    emitPassError(module) << "expected one step function, found "
        << steps.size();
    return signalPassFailure();
  }
  func::FuncOp step = steps.front();
  budgetBytes = parseByteSize(sacBudget);
  if (sacBudget.empty() || budgetBytes <= 0) {
    emitPassError(step) << "budget '" << sacBudget
                        << "' is not a byte count such as 1073741824, 512MiB "
                           "or 1.6GiB";
    return signalPassFailure();
  }
  // CBC would take a negative or NaN limit or gap without a word and stop
  // at once or never.
  if (!(sacTimeLimit > 0)) {
    emitPassError(step)
        << "time-limit must be a positive number of seconds "
           "(inf: none), got "
        << llvm::formatv("{0}", llvm::format("%g", double(sacTimeLimit))).str();
    return signalPassFailure();
  }
  if (!(sacGap >= 0 && sacGap < 1)) {
    emitPassError(step)
        << "gap must be a relative optimality gap in [0, 1) "
           "(0: optimal), got "
        << llvm::formatv("{0}", llvm::format("%g", double(sacGap))).str();
    return signalPassFailure();
  }
  CostModelConfig config{device,         deviceDir, algorithm, nodes,
                         devicesPerNode, tf32,      opTimes};
  FailureOr<CostModel> built = buildCostModel(config, step, "loom-sac-ilp");
  if (failed(built))
    return signalPassFailure();
  costs.emplace(std::move(*built));
  SmallVector<std::string> blocks(sacModules.begin(), sacModules.end());
  // By default the whole step: the layer blocks and the modules around
  // them.
  if (blocks.empty()) {
    blocks = getLayerBlocks(getParameterNames(step));
    SmallVector<std::string> outside = getOutsideBlocks(step, blocks);
    blocks.append(outside.begin(), outside.end());
  }
  if (blocks.empty()) {
    emitPassError(step) << "the step has no module to recompute: none of "
                           "its forward ops is in a module other than the "
                           "root (loom.module)";
    return signalPassFailure();
  }
  position.clear();
  for (auto [i, op] : llvm::enumerate(bodyOps(step)))
    position[op] = i;

  auto byProgram = splitByProgram(module, step, blocks);
  if (failed(byProgram))
    return signalPassFailure();
  // One search per program with blocks (an unpipelined step is one program
  // with every block); programs without blocks (the stages of the
  // embedding and the head, say) must fit as they stand.
  std::vector<std::unique_ptr<Search>> searches;
  auto addSearch = [&](ArrayRef<std::string> searchBlocks, StringRef label,
                       unsigned program) {
    FailureOr<Problem> problem = buildProblem(step, searchBlocks);
    if (failed(problem))
      return failure();
    auto &search = searches.emplace_back(std::make_unique<Search>());
    search->label = label.str();
    search->program = program;
    search->problem = std::move(*problem);
    return success();
  };
  if (byProgram->empty() && failed(addSearch(blocks, "", 0)))
    return signalPassFailure();
  for (auto [program, entry] : llvm::enumerate(*byProgram))
    if (!entry.blocks.empty() &&
        failed(addSearch(entry.blocks, entry.label, program)))
      return signalPassFailure();
  if (failed(startSearches(module, step, searches)) ||
      failed(runRounds(module, step, searches)))
    return signalPassFailure();

  // Every program is decided, so that an infeasible budget names the
  // smallest feasible one of each program that misses it; in program order.
  bool infeasible = false;
  std::vector<ProgramChoice> choices;
  auto next = searches.begin();
  auto finishNext = [&] {
    FailureOr<ProgramChoice> choice = finish(module, step, **next++);
    if (failed(choice))
      infeasible = true;
    else
      choices.push_back(std::move(*choice));
  };
  if (byProgram->empty())
    finishNext();
  for (const ProgramBlocks &entry : *byProgram) {
    if (!entry.blocks.empty()) {
      finishNext();
      continue;
    }
    const Measured &measured = entry.asItStands;
    if (measured.peakBytes > budgetBytes) {
      emitPassError(step)
          << "program '" << entry.label << "': budget "
          << formatByteSize(budgetBytes)
          << " is infeasible: the smallest feasible budget is "
          << formatByteSize(measured.peakBytes)
          << " (the program runs no recompute block), with the peak at "
          << measured.where();
      infeasible = true;
    }
  }
  if (infeasible || failed(apply(step, choices)))
    return signalPassFailure();
  recordMemoryBudget(module, budgetBytes);
}

FailureOr<SmallVector<ProgramBlocks>>
LoomSacIlpPass::splitByProgram(ModuleOp module, func::FuncOp step,
                               ArrayRef<std::string> blocks) {
  SmallVector<ProgramBlocks> out;
  // Only a pipelined step has several programs: no copy needed otherwise.
  OpPassManager planned(ModuleOp::getOperationName());
  if (failed(buildDownstream(planned, step)))
    return failure();
  if (!runsPass(planned, "loom-pipeline-split"))
    return out;
  OwningOpRef<ModuleOp> copy(cast<ModuleOp>(module->clone()));
  if (failed(runDownstream(*copy)))
    return failure();
  SmallVector<Operation *> programs = getPrograms(*copy);
  if (programs.size() <= 1)
    return out;

  // The cut the split made without recompute: every copy the decision is
  // measured on, and the step itself, are cut there, whatever the regions
  // add to the stages' FLOPs (loom-pipeline-split balances them).
  if (Attribute cut =
          (*copy)->getAttr(LoomDialect::kPipelineBoundariesAttrName))
    module->setAttr(LoomDialect::kPipelineBoundariesAttrName, cut);
  DenseMap<StringRef, unsigned> programOf;
  for (auto [index, program] : llvm::enumerate(programs)) {
    auto name = program->getAttrOfType<StringAttr>(
        SymbolTable::getSymbolAttrName());
    StringRef label = name ? name.getValue()
                           : cast<rt::ProgramOp>(program).getStepName();
    ProgramBlocks &entry = out.emplace_back();
    entry.label = label.str();

    program->walk([&](Operation *op) {
      if (!isa<AtenOp, rt::AtenOp>(op) || !isForwardOp(op))
        return;
      StringRef path = getModulePath(op);
      for (const std::string &block : blocks) {
        if (!isInModule(path, block))
          continue;
        auto [it, inserted] = programOf.try_emplace(block, index);
        if (inserted)
          entry.blocks.push_back(block);
        else if (it->second != index && it->second != ~0u) {
          emitPassError(step)
              << "block '" << block << "' runs in two pipeline programs ('"
              << out[it->second].label << "' and '" << label
              << "'); cut the stages at block boundaries (--pp-boundaries) "
                 "or name smaller blocks (--remat-modules)";
          programOf[block] = ~0u;
        }
      }
    });
    if (entry.blocks.empty())
      entry.asItStands = measureProgram(program);
  }
  if (llvm::is_contained(llvm::make_second_range(programOf), ~0u))
    return failure();
  return out;
}

LogicalResult LoomSacIlpPass::startSearches(
    ModuleOp module, func::FuncOp step,
    std::vector<std::unique_ptr<Search>> &searches) {
  if (searches.empty())
    return success();
  // The profile is measured with the regions every decision has: saving
  // every node still takes the views of what the blocks read from outside
  // (inputs, parameters) again in backward, which moves what they keep
  // alive.
  std::vector<ProgramChoice> saveAll;
  SmallVector<ProgramProblem> problems;
  for (const std::unique_ptr<Search> &search : searches) {
    saveAll.push_back(search->choose(
        SmallVector<bool>(search->problem.nodes.size(), true)));
    problems.push_back({&search->problem, search->program});
  }
  auto downstream = [&](ModuleOp copy,
                        const std::function<void(Operation *)> &afterPass) {
    if (failed(apply(findStep(copy, step.getSymName()), saveAll)))
      return failure();
    return runDownstream(copy, afterPass);
  };
  FailureOr<SmallVector<Liveness>> livenesses =
      measureLiveness(module, step, problems, *costs, downstream);
  if (failed(livenesses))
    return failure();
  SolveOptions solveOptions{sacTimeLimit, sacGap};
  for (auto [search, liveness] : llvm::zip(searches, *livenesses)) {
    search->liveness = std::move(liveness);
    priceNodes(search->problem, search->liveness, *costs);
    search->solver = std::make_unique<Solver>(search->problem, search->liveness,
                                              solveOptions, curveCache);
    search->baseline = search->liveness.persistentBytes;
    for (int64_t bytes : search->liveness.activationBytesAt)
      search->baseline = std::max(search->baseline,
                                  search->liveness.persistentBytes + bytes);
    search->loose = std::max(search->baseline, budgetBytes) + 1;
    search->bound = budgetBytes;
  }
  return success();
}

void Search::update(const Measured &measured, int64_t budget) {
  int64_t corrected = budget - (measured.peakBytes - trial->modelPeakBytes);
  if (measured.peakBytes <= budget) {
    if (!best || trial->recomputeSeconds < best->recomputeSeconds) {
      best = *trial;
      bestMeasured = measured;
    }
    // Close enough to the budget: nothing worth another solve.
    if (budget - measured.peakBytes <= budget / 100) {
      searching = false;
      return;
    }
    tight = std::max(tight, bound);
  } else {
    loose = std::min(loose, bound);
  }
  int64_t next = corrected;
  if (next <= tight || next >= loose || next == bound)
    next = tight + (loose - tight) / 2;
  if (next <= tight || next >= loose || next == bound)
    searching = false;
  else
    bound = next;
}

LogicalResult
LoomSacIlpPass::runRounds(ModuleOp module, func::FuncOp step,
                          ArrayRef<std::unique_ptr<Search>> searches) {
  for (int round = 0; round < kMaxRounds; ++round) {
    // The programs are independent once the cut is pinned, so one copy
    // measures every program's decision of this round; a program done
    // searching keeps its best decision there (or none).
    std::vector<ProgramChoice> choices;
    bool any = false;
    for (const std::unique_ptr<Search> &search : searches) {
      if (search->searching) {
        std::string error;
        FailureOr<Decision> decision =
            search->solver->solve(search->bound, error);
        if (failed(decision)) {
          search->searching = false; // A lower bound is infeasible too.
        } else {
          search->trial = std::move(*decision);
          any = true;
          choices.push_back(search->choose(search->trial->save));
          continue;
        }
      }
      if (search->best)
        choices.push_back(search->choose(search->best->save));
    }
    if (!any)
      return success();
    FailureOr<SmallVector<Measured>> measured =
        measureChoices(module, step, choices);
    if (failed(measured))
      return failure();
    for (const std::unique_ptr<Search> &search : searches) {
      if (!search->searching)
        continue;
      if (search->program >= measured->size())
        return emitPassError(step) << "the pipeline after it left no program "
                                   << search->program;
      search->update((*measured)[search->program], budgetBytes);
    }
  }
  return success();
}

void LoomSacIlpPass::report(const Search &search, ArrayRef<bool> save,
                            ArrayRef<bool> recompute, double seconds,
                            const Measured &measured) {
  const Problem &problem = search.problem;
  // How many different things the blocks recompute: identical blocks may
  // sit at different points of their curve.
  std::set<std::pair<unsigned, SmallVector<bool>>> policies;
  for (const BlockChoice &block : problem.blocks) {
    SmallVector<bool> recomputed;
    for (unsigned n : block.nodes)
      recomputed.push_back(recompute[n]);
    policies.insert({block.distinct, recomputed});
  }
  // The times are the roofline's unless a trace measured them.
  std::string device = costs->getSpec().name;
  if (const MeasuredOpTimes *times = costs->getMeasuredOpTimes())
    device += ", op times of " + times->getPath().str();
  llvm::errs() << llvm::formatv(
      "loom-sac-ilp: {11}budget {0}: predicted peak {1}; recompute {2} of "
      "{3} "
      "forward ops ({4:f4} ms on {5}; {6} must be saved); {7} distinct of "
      "{8} blocks; {9} block policies; peak at {10}\n",
      formatByteSize(budgetBytes), formatByteSize(measured.peakBytes),
      llvm::count(recompute, true), problem.nodes.size(), seconds * 1e3, device,
      llvm::count_if(problem.nodes, [](const Node &n) { return n.mustSave; }),
      problem.distinct.size(), problem.blocks.size(), policies.size(),
      measured.where(), search.in());
  for (auto [distinct, curve] :
       llvm::zip(problem.distinct, search.solver->getCurves())) {
    StringRef module = problem.blocks[distinct.representative].module;
    reportCurve(module, distinct.blocks.size(), curve);
    reportChoices(module, problem, search.liveness, distinct, save, recompute);
  }
}

FailureOr<SmallVector<Fallback, 3>>
LoomSacIlpPass::measureFallbacks(ModuleOp module, func::FuncOp step,
                                 Search &search) {
  const Problem &problem = search.problem;
  SmallVector<Fallback, 3> fallbacks;
  fallbacks.push_back({"nothing recomputed",
                       SmallVector<bool>(problem.nodes.size(), true),
                       SmallVector<bool>(problem.nodes.size(), false),
                       0,
                       {}});
  fallbacks.push_back(recomputeAll(problem));
  std::string error;
  if (FailureOr<Decision> least = search.solver->solveLeastPeak(error);
      succeeded(least))
    fallbacks.push_back(
        {"recomputing " + std::to_string(llvm::count(least->recompute, true)) +
             " of " + std::to_string(problem.nodes.size()) + " forward ops",
         least->save,
         least->recompute,
         least->recomputeSeconds,
         {}});
  for (Fallback &fallback : fallbacks) {
    FailureOr<SmallVector<Measured>> measured =
        measureChoices(module, step, {search.choose(fallback.save)});
    if (failed(measured))
      return failure();
    if (search.program >= measured->size())
      return emitPassError(step)
             << "the pipeline after it left no program " << search.program;
    fallback.measured = (*measured)[search.program];
  }
  return fallbacks;
}

FailureOr<ProgramChoice>
LoomSacIlpPass::finish(ModuleOp module, func::FuncOp step, Search &search) {
  auto accept = [&](ArrayRef<bool> save, ArrayRef<bool> recompute,
                    double seconds, const Measured &measured) {
    if (sacReport)
      report(search, save, recompute, seconds, measured);
    return search.choose(save);
  };
  if (search.best)
    return accept(search.best->save, search.best->recompute,
                  search.best->recomputeSeconds, *search.bestMeasured);

  // No decision of the model met the budget. The least memory the blocks
  // can take is that of the model's least-peak decision or of recomputing
  // all they can (the model's room for a region's working set is an
  // estimate); the cheapest of those that fits is the decision, else the
  // least of them and of saving everything is the smallest feasible budget.
  FailureOr<SmallVector<Fallback, 3>> fallbacks =
      measureFallbacks(module, step, search);
  if (failed(fallbacks))
    return failure();
  const Fallback *fits = nullptr, *least = nullptr;
  for (const Fallback &fallback : *fallbacks) {
    if (fallback.measured.peakBytes <= budgetBytes &&
        (!fits || fallback.seconds < fits->seconds))
      fits = &fallback;
    if (!least || fallback.measured.peakBytes < least->measured.peakBytes)
      least = &fallback;
  }
  if (fits)
    return accept(fits->save, fits->recompute, fits->seconds, fits->measured);
  emitPassError(step) << search.in() << "budget " << formatByteSize(budgetBytes)
                      << " is infeasible: the smallest feasible budget is "
                      << formatByteSize(least->measured.peakBytes) << " ("
                      << least->what << "), with the peak at "
                      << least->measured.where();
  return failure();
}

std::unique_ptr<Pass>
loom::createLoomSacIlp(const LoomSacIlpOptions &options,
                       std::function<void(OpPassManager &)> downstream) {
  return std::make_unique<LoomSacIlpPass>(options, std::move(downstream));
}
