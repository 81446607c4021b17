//===- ArtifactWriter.cpp - Write loomrt programs as a .loomx artifact ----===//

#include "loom/Target/Artifact/ArtifactWriter.h"

#include "Weights.h"
#include "loom/Analysis/PeakMemory.h"
#include "loom/Analysis/StepStats.h"
#include "loom/Dialect/LoomRT/IR/LoomRTOps.h"
#include "loomrt/ArtifactSchema.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"

#include <cmath>

using namespace mlir;
using namespace loom;
namespace schema = loomrt::schema;

namespace {
using llvm::json::OStream;

/// One JSON object written compactly with its keys in the order given, for
/// the one-entry-per-line arrays of the program.
template <typename Fill>
std::string compactObject(Fill fill) {
  std::string text;
  llvm::raw_string_ostream os(text);
  OStream j(os);
  j.object([&] { fill(j); });
  return text;
}

/// Writes a number with the fewest digits that read back exactly (0.001,
/// not 0.0010000000000000000208); JSON has no literal for non-finite
/// numbers, which the artifact writes as strings.
void writeDouble(OStream &j, double value) {
  if (std::isnan(value))
    return j.value("nan");
  if (std::isinf(value))
    return j.value(value > 0 ? "inf" : "-inf");
  j.rawValue([&](llvm::raw_ostream &os) {
    os << loom::detail::formatF64Parameter(value);
  });
}

/// The value of the optional numeric optimizer key `key` in `config`.
double getOptimizerNumber(const OptimizerConfig &config, StringRef key) {
  if (key == schema::kOptimizerAlpha)
    return config.alpha;
  if (key == schema::kOptimizerLrDecay)
    return config.lrDecay;
  if (key == schema::kOptimizerInitialAccumulatorValue)
    return config.initialAccumulatorValue;
  if (key == schema::kOptimizerRho)
    return config.rho;
  if (key == schema::kOptimizerMomentumDecay)
    return config.momentumDecay;
  if (key == schema::kOptimizerLambd)
    return config.lambd;
  if (key == schema::kOptimizerT0)
    return config.t0;
  llvm_unreachable("an optional optimizer key the writer does not know");
}

/// The artifact's `optimizer` object's fields for `config`: the keys every
/// optimizer carries, then the optional keys its algorithm takes
/// (LOOMX_OPTIMIZER_KEY), then `impl` when one is given.
void writeOptimizer(OStream &j, const OptimizerConfig &config, StringRef impl) {
  auto number = [&](StringRef key, double value) {
    j.attributeBegin(key);
    writeDouble(j, value);
    j.attributeEnd();
  };
  j.attribute(schema::kOptimizerName, config.name);
  number(schema::kOptimizerLr, config.lr);
  j.attributeArray(schema::kOptimizerBetas, [&] {
    writeDouble(j, config.beta1);
    writeDouble(j, config.beta2);
  });
  number(schema::kOptimizerEps, config.eps);
  number(schema::kOptimizerWeightDecay, config.weightDecay);
  number(schema::kOptimizerMomentum, config.momentum);
  number(schema::kOptimizerDampening, config.dampening);
  j.attribute(schema::kOptimizerNesterov, config.nesterov);
  j.attribute(schema::kOptimizerMaximize, config.maximize);
  // getOptimizerConfig sets the name from a string literal, NUL-terminated
  // as the schema's C strings need.
  schema::forEachOptimizerKey(config.name.data(), [&](StringRef key) {
    // amsgrad only when set (absent is false), so an Adam or AdamW
    // artifact without it is what version 3 wrote.
    if (key == schema::kOptimizerAmsgrad) {
      if (config.amsgrad)
        j.attribute(key, true);
    } else if (key == schema::kOptimizerCentered) {
      j.attribute(key, config.centered);
    } else if (key == schema::kOptimizerDecoupledWeightDecay) {
      j.attribute(key, config.decoupledWeightDecay);
    } else if (key == schema::kOptimizerEtas) {
      j.attributeArray(key, [&] {
        writeDouble(j, config.etaminus);
        writeDouble(j, config.etaplus);
      });
    } else if (key == schema::kOptimizerStepSizes) {
      j.attributeArray(key, [&] {
        writeDouble(j, config.stepSizeMin);
        writeDouble(j, config.stepSizeMax);
      });
    } else {
      number(key, getOptimizerNumber(config, key));
    }
  });
  if (!impl.empty())
    j.attribute(schema::kOptimizerImpl, impl);
}

void writeShape(OStream &j, RankedTensorType type) {
  j.array([&] {
    for (int64_t d : type.getShape())
      j.value(d);
  });
}

StringRef getDtype(Type type) {
  return rt::getDtypeName(cast<RankedTensorType>(type).getElementType());
}

/// Writes `entries` as a JSON array attribute with one entry per line.
void writeLines(OStream &j, StringRef key, ArrayRef<std::string> entries) {
  j.attributeArray(key, [&] {
    for (const std::string &entry : entries)
      j.rawValue([&](llvm::raw_ostream &os) { os << "\n  " << entry; });
  });
}

void writeAxes(OStream &j, StringRef key, ArrayAttr axes) {
  j.attributeArray(key, [&] {
    for (Attribute a : axes)
      j.value(cast<StringAttr>(a).getValue());
  });
}

void writeShard(OStream &j, ShardAttr shard) {
  j.attributeObject(schema::kInputShard, [&] {
    writeAxes(j, schema::kShardAxes, shard.getAxes());
    j.attribute(schema::kShardDim, shard.getDim());
    j.attributeArray(schema::kShardGlobalShape, [&] {
      for (int64_t d : shard.getGlobal())
        j.value(d);
    });
  });
}

/// The `op` of a collective's start instruction.
StringRef getStartOpName(rt::CollectiveKind kind) {
  switch (kind) {
  case rt::CollectiveKind::all_gather:
    return schema::kOpAllGatherStart;
  case rt::CollectiveKind::reduce_scatter:
    return schema::kOpReduceScatterStart;
  case rt::CollectiveKind::all_reduce:
    return schema::kOpAllReduceStart;
  case rt::CollectiveKind::broadcast:
    return schema::kOpBroadcastStart;
  case rt::CollectiveKind::all_slice:
    return schema::kOpAllSliceStart;
  case rt::CollectiveKind::send:
    return schema::kOpSendStart;
  case rt::CollectiveKind::recv:
    return schema::kOpRecvStart;
  }
  llvm_unreachable("unknown collective kind");
}

class ArtifactWriter {
public:
  ArtifactWriter(ModuleOp module, const ArtifactOptions &options)
      : module(module), options(options) {}

  LogicalResult collect();
  std::string buildProgram();
  LogicalResult buildWeights(std::string &out);

private:
  LogicalResult checkProgram(rt::ProgramOp program);
  /// The binding tables of one program: inputs, state, outputs.
  std::array<SmallVector<std::string>, 3> buildTables(rt::ProgramOp program);
  std::string buildInstruction(Operation *op);
  void writeArg(OStream &j, Attribute arg, Operation *op);

  ModuleOp module;
  const ArtifactOptions &options;
  LogicalResult collectMpmd();
  /// Writes `programs` entry of one program.
  void writeRankProgram(OStream &j, rt::ProgramOp program);

  SmallVector<rt::ProgramOp> programs;
  /// The mesh of a distributed step's SPMD program (version 2) or of its
  /// MPMD programs (version 3), or null.
  MeshOp mesh;
  /// Whether the programs are the MPMD programs of a pipelined step, each
  /// with its own binding tables (format version 3).
  bool mpmd = false;
  /// Event ids of the program being written, per record_event.
  llvm::DenseMap<Value, int64_t> eventIds;
};
} // namespace

LogicalResult ArtifactWriter::collect() {
  for (auto program : module.getOps<rt::ProgramOp>())
    programs.push_back(program);
  if (programs.empty())
    return module.emitError("no loomrt.program to write; lower the step "
                            "first (loom-compile-pipeline)");
  if (llvm::any_of(programs, [](rt::ProgramOp p) { return p.getRanks(); }))
    return collectMpmd();
  llvm::stable_sort(programs, [](rt::ProgramOp a, rt::ProgramOp b) {
    return a.getRank() < b.getRank();
  });
  // A distributed step is one SPMD program that runs on every rank of its
  // mesh; a mesh of one rank is a single-rank step.
  if (FlatSymbolRefAttr meshRef = programs.front().getMeshAttr();
      meshRef && programs.front().getWorldSize() > 1) {
    if (programs.size() != 1)
      return programs[1].emitOpError("is a second program of a distributed "
                                     "step; an artifact holds one SPMD "
                                     "program for every rank");
    mesh = SymbolTable::lookupNearestSymbolFrom<MeshOp>(programs.front(),
                                                        meshRef.getAttr());
    if (!mesh)
      return programs.front().emitOpError("mesh ")
             << meshRef << " does not name a loom.mesh";
    return checkProgram(programs.front());
  }
  for (auto [rank, program] : llvm::enumerate(programs)) {
    if (program.getWorldSize() != programs.size())
      return program.emitOpError("has world_size ")
             << program.getWorldSize() << " but the module holds "
             << programs.size() << " programs; an artifact has one per rank";
    if (program.getRank() != rank)
      return program.emitOpError("is a second program for rank ")
             << program.getRank();
    if (program.getStepName() != programs.front().getStepName() ||
        program.getOptimizerAttr() != programs.front().getOptimizerAttr())
      return program.emitOpError("compiles another step than rank 0 (its "
                                 "name or optimizer differ)");
    if (failed(checkProgram(program)))
      return failure();
  }
  // An artifact has one binding table for all ranks.
  auto tables = buildTables(programs.front());
  for (rt::ProgramOp program : llvm::drop_begin(programs))
    if (buildTables(program) != tables)
      return program.emitOpError("binds the step's inputs, state or outputs "
                                 "differently from rank 0; an artifact has "
                                 "one binding table for all ranks");
  // The runtime runs several ranks only as one program over a mesh (it
  // needs the mesh to form the process groups).
  if (programs.size() > 1)
    return programs[1].emitOpError("is a second program of a step without "
                                   "a mesh; a step of several ranks is one "
                                   "SPMD program over a loom.mesh");
  return success();
}

/// The MPMD programs of a pipelined step (docs/pipeline.md): each runs on
/// its `ranks` of one mesh; together they cover it once; exactly one returns
/// the loss; they share the optimizer, which the artifact states once.
LogicalResult ArtifactWriter::collectMpmd() {
  rt::ProgramOp first = programs.front();
  for (rt::ProgramOp program : programs) {
    if (!program.getRanks() || !program.getMeshAttr())
      return program.emitOpError("has no 'ranks' but the module's other "
                                 "programs are MPMD programs; an artifact "
                                 "is one SPMD program or MPMD programs only");
    if (program.getMeshAttr() != first.getMeshAttr())
      return program.emitOpError("runs on mesh ")
             << program.getMeshAttr() << " but '" << first.getStepName()
             << "' on " << first.getMeshAttr()
             << "; the programs of an artifact share one mesh";
    if (program.getOptimizerAttr() && first.getOptimizerAttr() &&
        program.getOptimizerAttr() != first.getOptimizerAttr())
      return program.emitOpError("uses optimizer ")
             << program.getOptimizerAttr() << " but '" << first.getStepName()
             << "' uses " << first.getOptimizerAttr()
             << "; the artifact has one optimizer configuration";
    if (!program.getNumSlots())
      return program.emitOpError("has no slots assigned; run "
                                 "loomrt-assign-slots before writing it");
  }
  mesh = SymbolTable::lookupNearestSymbolFrom<MeshOp>(
      first, first.getMeshAttr().getAttr());
  if (!mesh)
    return first.emitOpError("mesh ")
           << first.getMeshAttr() << " does not name a loom.mesh";
  mpmd = true;
  llvm::DenseMap<int64_t, rt::ProgramOp> owner;
  for (rt::ProgramOp program : programs)
    for (int64_t rank : program.getRanksAttr().asArrayRef()) {
      auto [it, inserted] = owner.try_emplace(rank, program);
      if (!inserted)
        return program.emitOpError("runs on rank ")
               << rank << ", which '" << it->second.getStepName()
               << "' runs too; each rank runs one program";
    }
  for (int64_t rank = 0, e = mesh.getNumRanks(); rank < e; ++rank)
    if (!owner.count(rank))
      return first.emitOpError("rank ")
             << rank << " of mesh " << first.getMeshAttr()
             << " runs no program";
  // The runtime reports the loss of the program that holds the last stage.
  rt::ProgramOp lossProgram;
  for (rt::ProgramOp program : programs)
    for (auto output : program.getBody().front().getOps<rt::OutputOp>())
      if (output.getRole() == Role::loss) {
        if (lossProgram)
          return program.emitOpError("returns a loss, as '")
                 << lossProgram.getStepName()
                 << "' does; only the program of the last pipeline stage "
                    "returns it";
        lossProgram = program;
      }
  if (!lossProgram)
    return first.emitOpError("no program of the step returns a loss; the "
                             "program of the last pipeline stage must");
  // Programs are written in the order of their first rank.
  llvm::stable_sort(programs, [](rt::ProgramOp a, rt::ProgramOp b) {
    return a.getRanks()->front() < b.getRanks()->front();
  });
  return success();
}

LogicalResult ArtifactWriter::checkProgram(rt::ProgramOp program) {
  if (!program.getNumSlots())
    return program.emitOpError("has no slots assigned; run "
                               "loomrt-assign-slots before writing it");
  unsigned numLosses = 0;
  for (auto output : program.getBody().front().getOps<rt::OutputOp>())
    numLosses += output.getRole() == Role::loss;
  if (numLosses != 1)
    return program.emitOpError("has no loss output; the runtime's step() "
                               "returns the loss");
  return success();
}

std::array<SmallVector<std::string>, 3>
ArtifactWriter::buildTables(rt::ProgramOp program) {
  std::array<SmallVector<std::string>, 3> tables;
  for (Operation &op : program.getBody().front()) {
    if (auto input = dyn_cast<rt::InputOp>(op)) {
      tables[0].push_back(compactObject([&](OStream &j) {
        j.attribute(schema::kInputName, input.getBindingName());
        j.attribute(schema::kInputRole, stringifyRole(input.getRole()));
        if (std::optional<uint64_t> b = input.getBatchIndex())
          j.attribute(schema::kInputBatchIndex, int64_t(*b));
        j.attribute(schema::kInputSlot, rt::getSlot(input));
        j.attribute(schema::kInputDtype, getDtype(input.getType()));
        j.attributeBegin(schema::kInputShape);
        writeShape(j, input.getType());
        j.attributeEnd();
        if (mesh && input.getShard())
          writeShard(j, *input.getShard());
        if (SplitAttr split = input.getSplitAttr(); mesh && split)
          j.attributeObject(schema::kInputSplit, [&] {
            writeAxes(j, schema::kSplitAxes, split.getAxes());
            j.attribute(schema::kSplitDim, split.getDim());
          });
      }));
    } else if (auto state = dyn_cast<rt::StateOp>(op)) {
      tables[1].push_back(compactObject([&](OStream &j) {
        j.attribute(schema::kStateName, state.getBindingName());
        j.attribute(schema::kStateParam, state.getParam());
        j.attribute(schema::kStateSlot, rt::getSlot(state));
        j.attribute(schema::kStateDtype, getDtype(state.getType()));
        j.attributeBegin(schema::kStateShape);
        writeShape(j, state.getType());
        j.attributeEnd();
        j.attribute(schema::kStateInit,
                    rt::stringifyStateInit(state.getInit()));
        if (mesh && state.getShard())
          writeShard(j, *state.getShard());
      }));
    } else if (auto output = dyn_cast<rt::OutputOp>(op)) {
      tables[2].push_back(compactObject([&](OStream &j) {
        j.attribute(schema::kOutputRole, stringifyRole(output.getRole()));
        if (std::optional<StringRef> target = output.getTarget())
          j.attribute(schema::kOutputTarget, *target);
        j.attribute(schema::kOutputSlot, rt::getSlot(output.getValue()));
        if (PartialAttr partial = output.getPartialAttr(); mesh && partial)
          j.attributeObject(schema::kOutputReduce, [&] {
            writeAxes(j, schema::kReduceAxes, partial.getAxes());
            j.attribute(schema::kReduceOp,
                        stringifyReduceKind(partial.getReduction()));
          });
      }));
    }
  }
  return tables;
}

void ArtifactWriter::writeArg(OStream &j, Attribute arg, Operation *op) {
  auto slot = [&](Attribute ref) {
    return rt::getSlot(op->getOperand(cast<OperandRefAttr>(ref).getIndex()));
  };
  // The loomrt.aten verifier admits exactly these kinds.
  j.object([&] {
    if (isa<OperandRefAttr>(arg))
      return j.attribute(schema::kArgKindTensor, slot(arg));
    if (isa<UnitAttr>(arg))
      return j.attribute(schema::kArgKindNone, true);
    if (auto b = dyn_cast<BoolAttr>(arg))
      return j.attribute(schema::kArgKindBool, b.getValue());
    if (auto i = dyn_cast<IntegerAttr>(arg))
      return j.attribute(schema::kArgKindInt, i.getInt());
    if (auto f = dyn_cast<FloatAttr>(arg)) {
      j.attributeBegin(schema::kArgKindFloat);
      writeDouble(j, f.getValueAsDouble());
      return j.attributeEnd();
    }
    if (auto s = dyn_cast<StringAttr>(arg))
      return j.attribute(schema::kArgKindString, s.getValue());
    if (auto t = dyn_cast<TypeAttr>(arg))
      return j.attribute(schema::kArgKindDtype, rt::getDtypeName(t.getValue()));
    if (auto d = dyn_cast<rt::DeviceAttr>(arg))
      return j.attribute(schema::kArgKindDevice, d.getName());
    if (auto l = dyn_cast<rt::LayoutAttr>(arg))
      return j.attribute(schema::kArgKindLayout,
                         rt::stringifyLayout(l.getValue()));
    if (auto m = dyn_cast<rt::MemoryFormatAttr>(arg))
      return j.attribute(schema::kArgKindMemoryFormat,
                         rt::stringifyMemoryFormat(m.getValue()));
    auto list = cast<ArrayAttr>(arg);
    // The imported graph does not tell Tensor[] from Tensor?[] unless an
    // element is None, nor the element type of an empty list; the runtime
    // fills either from these (docs/artifact.md).
    if (list.empty()) {
      j.attributeBegin(schema::kArgKindInts);
      j.array([] {});
      return j.attributeEnd();
    }
    Attribute first = list[0];
    bool anyNone =
        llvm::any_of(list, [](Attribute a) { return isa<UnitAttr>(a); });
    if (isa<OperandRefAttr, UnitAttr>(first)) {
      StringRef kind =
          anyNone ? schema::kArgKindOptionalTensors : schema::kArgKindTensors;
      j.attributeArray(kind, [&] {
        for (Attribute a : list) {
          if (isa<UnitAttr>(a))
            j.value(nullptr);
          else
            j.value(slot(a));
        }
      });
    } else if (isa<BoolAttr>(first)) {
      j.attributeArray(schema::kArgKindBools, [&] {
        for (Attribute a : list)
          j.value(cast<BoolAttr>(a).getValue());
      });
    } else if (isa<IntegerAttr>(first)) {
      j.attributeArray(schema::kArgKindInts, [&] {
        for (Attribute a : list)
          j.value(cast<IntegerAttr>(a).getInt());
      });
    } else if (isa<FloatAttr>(first)) {
      j.attributeArray(schema::kArgKindFloats, [&] {
        for (Attribute a : list)
          writeDouble(j, cast<FloatAttr>(a).getValueAsDouble());
      });
    } else {
      j.attributeArray(schema::kArgKindStrings, [&] {
        for (Attribute a : list)
          j.value(cast<StringAttr>(a).getValue());
      });
    }
  });
}

/// Trace fields every instruction may carry: the graph node (when the
/// location still names it), module and phase.
static void writeTraceFields(OStream &j, Operation *op) {
  j.attribute(schema::kInstStream, *rt::getStream(op));
  if (auto name = dyn_cast<NameLoc>(op->getLoc()))
    j.attribute(schema::kInstName, name.getName().getValue());
  if (op->hasAttr(LoomDialect::kModuleAttrName))
    j.attribute(schema::kInstModule, getModulePath(op));
  if (std::optional<Phase> phase = getPhase(op))
    j.attribute(schema::kInstPhase, stringifyPhase(*phase));
}

std::string ArtifactWriter::buildInstruction(Operation *op) {
  return compactObject([&](OStream &j) {
    if (auto aten = dyn_cast<rt::AtenOp>(op)) {
      j.attribute(schema::kInstOp, schema::kOpAten);
      j.attribute(schema::kInstKernel, aten.getOpName());
      j.attribute(schema::kInstOverload, aten.getOverload());
      j.attributeArray(schema::kInstArgs, [&] {
        for (Attribute arg : aten.getArgs())
          writeArg(j, arg, op);
      });
      if (!aten.getKwargs().empty())
        j.attributeObject(schema::kInstKwargs, [&] {
          for (NamedAttribute kwarg : aten.getKwargs()) {
            j.attributeBegin(kwarg.getName().getValue());
            writeArg(j, kwarg.getValue(), op);
            j.attributeEnd();
          }
        });
      auto result = [&](int64_t index) {
        int64_t slot = rt::getSlot(aten.getResult(index));
        if (slot < 0)
          j.value(nullptr);
        else
          j.value(slot);
      };
      j.attributeArray(schema::kInstResults, [&] {
        std::optional<ArrayAttr> returns = aten.getReturns();
        if (!returns) {
          for (unsigned i = 0, e = aten.getNumResults(); i < e; ++i)
            result(i);
          return;
        }
        for (Attribute entry : *returns) {
          if (isa<UnitAttr>(entry))
            j.value(nullptr);
          else if (auto list = dyn_cast<ArrayAttr>(entry))
            j.array([&] {
              for (Attribute index : list)
                result(cast<IntegerAttr>(index).getInt());
            });
          else
            result(cast<IntegerAttr>(entry).getInt());
        }
      });
      // What a trace matches measured times by (loom/Analysis/OpTimes.h).
      if (std::string signature = getKernelSignature(op); !signature.empty())
        j.attribute(schema::kInstSignature, signature);
    } else if (auto free = dyn_cast<rt::FreeOp>(op)) {
      j.attribute(schema::kInstOp, schema::kOpFree);
      j.attributeArray(schema::kInstSlots, [&] {
        for (Value v : free.getValues())
          j.value(rt::getSlot(v));
      });
    } else if (auto start = dyn_cast<rt::CollectiveStartOp>(op)) {
      j.attribute(schema::kInstOp, getStartOpName(start.getKind()));
      if (Value input = start.getInput())
        j.attribute(schema::kInstInput, rt::getSlot(input));
      j.attribute(schema::kInstFuture, rt::getSlot(start.getFuture()));
      writeAxes(j, schema::kInstAxes, start.getAxes());
      if (IntegerAttr dim = start.getDimAttr())
        j.attribute(schema::kInstDim, dim.getInt());
      if (std::optional<ReduceKind> reduce = start.getReduction())
        j.attribute(schema::kInstReduce, stringifyReduceKind(*reduce));
      if (IntegerAttr root = start.getRootAttr())
        j.attribute(schema::kInstRoot, root.getInt());
      if (IntegerAttr peer = start.getPeerAttr())
        j.attribute(schema::kInstPeer, peer.getInt());
      if (IntegerAttr tag = start.getTagAttr())
        j.attribute(schema::kInstTag, tag.getInt());
      // The receiver allocates what arrives.
      if (start.getKind() == rt::CollectiveKind::recv) {
        RankedTensorType type = start.getFuture().getType().getTensorType();
        j.attribute(schema::kInstDtype, getDtype(type));
        j.attributeBegin(schema::kInstShape);
        writeShape(j, type);
        j.attributeEnd();
      }
    } else if (auto wait = dyn_cast<rt::WaitOp>(op)) {
      j.attribute(schema::kInstOp, schema::kOpWait);
      j.attribute(schema::kInstFuture, rt::getSlot(wait.getFuture()));
      // A send's wait yields nothing.
      if (Value result = wait.getResult())
        j.attribute(schema::kInstResult, rt::getSlot(result));
    } else if (auto record = dyn_cast<rt::RecordEventOp>(op)) {
      j.attribute(schema::kInstOp, schema::kOpRecordEvent);
      j.attribute(schema::kInstEvent, eventIds.lookup(record.getEvent()));
    } else if (auto waitEvent = dyn_cast<rt::WaitEventOp>(op)) {
      j.attribute(schema::kInstOp, schema::kOpWaitEvent);
      j.attribute(schema::kInstEvent, eventIds.lookup(waitEvent.getEvent()));
    } else {
      auto update = cast<rt::OptimizerOp>(op);
      j.attribute(schema::kInstOp, schema::kOpOptimizer);
      j.attribute(
          schema::kInstParam,
          update.getParam().getDefiningOp<rt::InputOp>().getBindingName());
      j.attribute(schema::kInstParamSlot, rt::getSlot(update.getParam()));
      j.attribute(schema::kInstGrad, rt::getSlot(update.getGrad()));
      j.attributeArray(schema::kInstState, [&] {
        for (Value s : update.getState())
          j.value(rt::getSlot(s));
      });
      // A parameter group's rates; the rest is the program optimizer's.
      if (std::optional<OptimizerConfig> own =
              update.getOptimizer() ? getOptimizerConfig(*update.getOptimizer())
                                    : std::nullopt) {
        j.attributeBegin(schema::kInstLr);
        writeDouble(j, own->lr);
        j.attributeEnd();
        j.attributeBegin(schema::kInstWeightDecay);
        writeDouble(j, own->weightDecay);
        j.attributeEnd();
      }
    }
    writeTraceFields(j, op);
  });
}

std::string ArtifactWriter::buildProgram() {
  std::string text;
  llvm::raw_string_ostream os(text);
  OStream j(os);
  rt::ProgramOp first = programs.front();
  int64_t numSlots = 0;
  for (rt::ProgramOp program : programs)
    numSlots = std::max<int64_t>(numSlots, *program.getNumSlots());
  auto tables = buildTables(first);
  // The optimizer is stated once; an MPMD program without parameters to
  // update has none.
  for (rt::ProgramOp program : programs)
    if (program.getOptimizer()) {
      first = program;
      break;
    }
  j.object([&] {
    j.attribute(schema::kProgramFormat, schema::kFormatLoomx);
    j.attribute(schema::kProgramVersion, int64_t(schema::kCurrentVersion));
    j.attribute(schema::kProgramProducer, kArtifactProducer);
    j.attribute(schema::kProgramSource, options.source);
    j.attribute(schema::kProgramPipeline, options.pipeline);
    if (mesh) {
      j.attribute(schema::kProgramWorldSize, mesh.getNumRanks());
      j.attributeObject(schema::kProgramMesh, [&] {
        j.attributeArray(schema::kMeshShape, [&] {
          for (int64_t d : mesh.getShape())
            j.value(d);
        });
        writeAxes(j, schema::kMeshAxes, mesh.getAxes());
      });
    } else {
      j.attribute(schema::kProgramWorldSize, int64_t(programs.size()));
    }
    if (!mpmd)
      j.attribute(schema::kProgramNumSlots, numSlots);
    if (auto device =
            module->getAttrOfType<StringAttr>(LoomDialect::kDeviceAttrName))
      j.attribute(schema::kProgramDevice, device.getValue());
    if (auto threads = module->getAttrOfType<IntegerAttr>(
            LoomDialect::kKernelWorkspaceThreadsAttrName))
      j.attribute(schema::kProgramKernelWorkspaceThreads, threads.getInt());
    if (auto budget = module->getAttrOfType<IntegerAttr>(
            LoomDialect::kMemoryBudgetAttrName))
      j.attribute(schema::kProgramMemoryBudget, budget.getInt());
    j.attributeBegin(schema::kProgramOptimizer);
    if (std::optional<OptimizerConfig> config =
            first.getOptimizer() ? getOptimizerConfig(*first.getOptimizer())
                                 : std::nullopt) {
      j.object([&] {
        auto impl = first->getAttrOfType<StringAttr>(
            LoomDialect::kOptimizerImplAttrName);
        writeOptimizer(j, *config, impl ? impl.getValue() : StringRef());
      });
    } else {
      j.value(nullptr);
    }
    j.attributeEnd();
    if (auto schedule = first->getAttrOfType<DictionaryAttr>(
            LoomDialect::kLrScheduleAttrName))
      j.attributeObject(schema::kProgramLrSchedule, [&] {
        auto integer = [&](StringRef key) {
          j.attribute(key, cast<IntegerAttr>(schedule.get(key)).getInt());
        };
        auto number = [&](StringRef key) {
          j.attributeBegin(key);
          writeDouble(j, cast<FloatAttr>(schedule.get(key)).getValueAsDouble());
          j.attributeEnd();
        };
        integer(schema::kLrScheduleWarmupSteps);
        number(schema::kLrScheduleWarmupStartFactor);
        j.attribute(schema::kLrScheduleDecay,
                    cast<StringAttr>(schedule.get(schema::kLrScheduleDecay))
                        .getValue());
        integer(schema::kLrScheduleDecaySteps);
        number(schema::kLrScheduleEtaMin);
        number(schema::kLrScheduleEndFactor);
        if (schedule.get(schema::kLrScheduleGamma))
          number(schema::kLrScheduleGamma);
        if (auto milestones =
                schedule.getAs<ArrayAttr>(schema::kLrScheduleMilestones))
          j.attributeArray(schema::kLrScheduleMilestones, [&] {
            for (auto step : milestones.getAsRange<IntegerAttr>())
              j.value(step.getInt());
          });
        if (schedule.get(schema::kLrSchedulePower))
          number(schema::kLrSchedulePower);
        if (schedule.get(schema::kLrScheduleTMult))
          integer(schema::kLrScheduleTMult);
      });
    if (!mpmd) {
      writeLines(j, schema::kProgramInputs, tables[0]);
      writeLines(j, schema::kProgramState, tables[1]);
      writeLines(j, schema::kProgramOutputs, tables[2]);
    }
    j.attributeArray(schema::kProgramPrograms, [&] {
      for (rt::ProgramOp program : programs)
        j.object([&] { writeRankProgram(j, program); });
    });
  });
  text.push_back('\n');
  return text;
}

void ArtifactWriter::writeRankProgram(OStream &j, rt::ProgramOp program) {
  if (mpmd)
    j.attributeArray(schema::kRankProgramRanks, [&] {
      for (int64_t r : program.getRanksAttr().asArrayRef())
        j.value(r);
    });
  else if (mesh)
    j.attributeArray(schema::kRankProgramRanks, [&] {
      for (int64_t r = 0, e = mesh.getNumRanks(); r < e; ++r)
        j.value(r);
    });
  else
    j.attribute(schema::kRankProgramRank, int64_t(program.getRank()));
  j.attributeArray(schema::kRankProgramStreams, [&] {
    for (Attribute s : program.getStreams())
      j.value(cast<StringAttr>(s).getValue());
  });
  if (mpmd) {
    auto tables = buildTables(program);
    j.attribute(schema::kRankProgramNumSlots, *program.getNumSlots());
    writeLines(j, schema::kRankProgramInputs, tables[0]);
    writeLines(j, schema::kRankProgramState, tables[1]);
    writeLines(j, schema::kRankProgramOutputs, tables[2]);
  }
  SmallVector<std::string> instructions;
  eventIds.clear();
  for (Operation &op : program.getBody().front()) {
    if (auto record = dyn_cast<rt::RecordEventOp>(op))
      eventIds.try_emplace(record.getEvent(), eventIds.size());
    if (isa<rt::AtenOp, rt::FreeOp, rt::OptimizerOp, rt::CollectiveStartOp,
            rt::WaitOp, rt::RecordEventOp, rt::WaitEventOp>(op))
      instructions.push_back(buildInstruction(&op));
  }
  writeLines(j, schema::kRankProgramInstructions, instructions);
}

LogicalResult ArtifactWriter::buildWeights(std::string &out) {
  SmallVector<loom::detail::WeightRequest> requests;
  // Every parameter, buffer and constant any program binds, once: MPMD
  // programs that share one (tied weights) load the same tensor.
  llvm::StringMap<std::pair<RankedTensorType, rt::InputOp>> requested;
  for (rt::ProgramOp program : programs)
    for (auto input : program.getBody().front().getOps<rt::InputOp>()) {
      if (!input.isRuntimeOwned())
        continue;
      RankedTensorType type = input.getType();
      // A sharded parameter's weights are the full tensor; every rank takes
      // its chunk at load time (docs/distributed.md).
      if (ShardAttr shard = input.getShardAttr(); mesh && shard)
        type = RankedTensorType::get(shard.getGlobal(), type.getElementType());
      auto [it, inserted] =
          requested.try_emplace(input.getBindingName(), type, input);
      if (!inserted) {
        if (it->second.first == type)
          continue;
        InFlightDiagnostic diag = input.emitOpError("binds '")
                                  << input.getBindingName() << "' as " << type
                                  << " but another program binds it as "
                                  << it->second.first
                                  << "; the weights hold one tensor per name";
        diag.attachNote(it->second.second.getLoc()) << "the other binding";
        return diag;
      }
      requests.push_back({input, input.getBindingName().str(),
                          getDtype(type).upper(),
                          SmallVector<int64_t>(type.getShape()),
                          uint64_t(getTensorBytes(type))});
    }
  std::string path;
  if (!requests.empty()) {
    auto weights =
        module->getAttrOfType<StringAttr>(LoomDialect::kWeightsAttrName);
    // Reported at the program: an implicit module has no location.
    if (!weights)
      return programs.front().emitError("the module has no '")
             << LoomDialect::kWeightsAttrName
             << "' naming the weights of its parameters, buffers and "
                "constants (loom-import writes one)";
    SmallString<256> resolved(weights.getValue());
    if (!llvm::sys::path::is_absolute(resolved) && !options.weightsDir.empty())
      llvm::sys::path::make_preferred(
          resolved = (options.weightsDir + "/" + weights.getValue()).str());
    path = std::string(resolved);
  }
  return loom::detail::buildWeights(path, module, requests, out);
}

FailureOr<std::string> loom::buildProgramJSON(ModuleOp module,
                                              const ArtifactOptions &options) {
  ArtifactWriter writer(module, options);
  if (failed(writer.collect()))
    return failure();
  return writer.buildProgram();
}

LogicalResult loom::writeArtifact(ModuleOp module,
                                  const ArtifactOptions &options,
                                  llvm::raw_ostream &os) {
  ArtifactWriter writer(module, options);
  std::string weights;
  if (failed(writer.collect()) || failed(writer.buildWeights(weights)))
    return failure();
  std::string program = writer.buildProgram();

  auto writeLE = [&](uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i)
      os << static_cast<char>((value >> (8 * i)) & 0xff);
  };
  os.write(schema::kMagic, schema::kMagicBytes);
  writeLE(schema::kCurrentVersion, 4);
  writeLE(/*flags=*/0, 4);
  writeLE(program.size(), 8);
  writeLE(weights.size(), 8);
  os << program << weights;
  return success();
}
