//===- ArtifactWriter.cpp - Write loomrt programs as a .loomx artifact ----===//

#include "loom/Target/Artifact/ArtifactWriter.h"

#include "Weights.h"
#include "loom/Analysis/StepStats.h"
#include "loom/Dialect/LoomRT/IR/LoomRTOps.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"

#include <cmath>

using namespace mlir;
using namespace loom;

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

void writeAxes(OStream &j, ArrayAttr axes) {
  j.attributeArray("axes", [&] {
    for (Attribute a : axes)
      j.value(cast<StringAttr>(a).getValue());
  });
}

void writeShard(OStream &j, ShardAttr shard) {
  j.attributeObject("shard", [&] {
    writeAxes(j, shard.getAxes());
    j.attribute("dim", shard.getDim());
    j.attributeArray("global_shape", [&] {
      for (int64_t d : shard.getGlobal())
        j.value(d);
    });
  });
}

class ArtifactWriter {
public:
  ArtifactWriter(ModuleOp module, const ArtifactOptions &options)
      : module(module), options(options) {}

  LogicalResult collect();
  std::string buildProgram();
  LogicalResult buildWeights(std::string &out);
  /// The format version the programs need: 2 for a distributed step.
  uint32_t getVersion() const {
    return mesh ? kArtifactVersionDistributed : kArtifactVersion;
  }

private:
  LogicalResult checkProgram(rt::ProgramOp program);
  /// The binding tables of one program: inputs, state, outputs.
  std::array<SmallVector<std::string>, 3> buildTables(rt::ProgramOp program);
  std::string buildInstruction(Operation *op);
  void writeArg(OStream &j, Attribute arg, Operation *op);

  ModuleOp module;
  const ArtifactOptions &options;
  SmallVector<rt::ProgramOp> programs;
  /// The mesh of a distributed step's SPMD program (version 2), or null.
  MeshOp mesh;
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
  llvm::stable_sort(programs, [](rt::ProgramOp a, rt::ProgramOp b) {
    return a.getRank() < b.getRank();
  });
  // A distributed step is one SPMD program that runs on every rank of its
  // mesh (version 2); one rank's mesh is a single-rank step (version 1).
  if (FlatSymbolRefAttr meshRef = programs.front().getMeshAttr();
      meshRef && programs.front().getWorldSize() > 1) {
    if (programs.size() != 1)
      return programs[1].emitOpError("is a second program of a distributed "
                                     "step; artifact format v2 writes one "
                                     "SPMD program for every rank");
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
  // Artifact format v1 has one binding table for all ranks.
  auto tables = buildTables(programs.front());
  for (rt::ProgramOp program : llvm::drop_begin(programs))
    if (buildTables(program) != tables)
      return program.emitOpError("binds the step's inputs, state or outputs "
                                 "differently from rank 0; artifact format "
                                 "v1 has one binding table for all ranks");
  return success();
}

LogicalResult ArtifactWriter::checkProgram(rt::ProgramOp program) {
  if (!program.getNumSlots())
    return program.emitOpError("has no slots assigned; run "
                               "loomrt-assign-slots before writing it");
  // Version 1 has no cross-stream events, so a second stream could not be
  // ordered against the first.
  if (!mesh && program.getStreams().size() != 1)
    return program.emitOpError("has ")
           << program.getStreams().size()
           << " streams; artifact format v1 has one stream per program";
  // (Events order two streams, so a one-stream program has none.)
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
        j.attribute("name", input.getBindingName());
        j.attribute("role", stringifyRole(input.getRole()));
        if (std::optional<uint64_t> b = input.getBatchIndex())
          j.attribute("batch_index", int64_t(*b));
        j.attribute("slot", rt::getSlot(input));
        j.attribute("dtype", getDtype(input.getType()));
        j.attributeBegin("shape");
        writeShape(j, input.getType());
        j.attributeEnd();
        if (mesh && input.getShard())
          writeShard(j, *input.getShard());
        if (SplitAttr split = input.getSplitAttr(); mesh && split)
          j.attributeObject("split", [&] {
            writeAxes(j, split.getAxes());
            j.attribute("dim", split.getDim());
          });
      }));
    } else if (auto state = dyn_cast<rt::StateOp>(op)) {
      tables[1].push_back(compactObject([&](OStream &j) {
        j.attribute("name", state.getBindingName());
        j.attribute("param", state.getParam());
        j.attribute("slot", rt::getSlot(state));
        j.attribute("dtype", getDtype(state.getType()));
        j.attributeBegin("shape");
        writeShape(j, state.getType());
        j.attributeEnd();
        j.attribute("init", rt::stringifyStateInit(state.getInit()));
        if (mesh && state.getShard())
          writeShard(j, *state.getShard());
      }));
    } else if (auto output = dyn_cast<rt::OutputOp>(op)) {
      tables[2].push_back(compactObject([&](OStream &j) {
        j.attribute("role", stringifyRole(output.getRole()));
        if (std::optional<StringRef> target = output.getTarget())
          j.attribute("target", *target);
        j.attribute("slot", rt::getSlot(output.getValue()));
        if (PartialAttr partial = output.getPartialAttr(); mesh && partial)
          j.attributeObject("reduce", [&] {
            writeAxes(j, partial.getAxes());
            j.attribute("op", stringifyReduceKind(partial.getReduction()));
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
      return j.attribute("tensor", slot(arg));
    if (isa<UnitAttr>(arg))
      return j.attribute("none", true);
    if (auto b = dyn_cast<BoolAttr>(arg))
      return j.attribute("bool", b.getValue());
    if (auto i = dyn_cast<IntegerAttr>(arg))
      return j.attribute("int", i.getInt());
    if (auto f = dyn_cast<FloatAttr>(arg)) {
      j.attributeBegin("float");
      writeDouble(j, f.getValueAsDouble());
      return j.attributeEnd();
    }
    if (auto s = dyn_cast<StringAttr>(arg))
      return j.attribute("string", s.getValue());
    if (auto t = dyn_cast<TypeAttr>(arg))
      return j.attribute("dtype", rt::getDtypeName(t.getValue()));
    if (auto d = dyn_cast<rt::DeviceAttr>(arg))
      return j.attribute("device", d.getName());
    if (auto l = dyn_cast<rt::LayoutAttr>(arg))
      return j.attribute("layout", rt::stringifyLayout(l.getValue()));
    if (auto m = dyn_cast<rt::MemoryFormatAttr>(arg))
      return j.attribute("memory_format",
                         rt::stringifyMemoryFormat(m.getValue()));
    auto list = cast<ArrayAttr>(arg);
    // The imported graph does not tell Tensor[] from Tensor?[] unless an
    // element is None, nor the element type of an empty list; the runtime
    // fills either from these (docs/artifact.md).
    if (list.empty()) {
      j.attributeBegin("ints");
      j.array([] {});
      return j.attributeEnd();
    }
    Attribute first = list[0];
    bool anyNone =
        llvm::any_of(list, [](Attribute a) { return isa<UnitAttr>(a); });
    if (isa<OperandRefAttr, UnitAttr>(first)) {
      j.attributeArray(anyNone ? "optional_tensors" : "tensors", [&] {
        for (Attribute a : list) {
          if (isa<UnitAttr>(a))
            j.value(nullptr);
          else
            j.value(slot(a));
        }
      });
    } else if (isa<BoolAttr>(first)) {
      j.attributeArray("bools", [&] {
        for (Attribute a : list)
          j.value(cast<BoolAttr>(a).getValue());
      });
    } else if (isa<IntegerAttr>(first)) {
      j.attributeArray("ints", [&] {
        for (Attribute a : list)
          j.value(cast<IntegerAttr>(a).getInt());
      });
    } else if (isa<FloatAttr>(first)) {
      j.attributeArray("floats", [&] {
        for (Attribute a : list)
          writeDouble(j, cast<FloatAttr>(a).getValueAsDouble());
      });
    } else {
      j.attributeArray("strings", [&] {
        for (Attribute a : list)
          j.value(cast<StringAttr>(a).getValue());
      });
    }
  });
}

/// Trace fields every instruction may carry: the graph node (when the
/// location still names it), module and phase.
static void writeTraceFields(OStream &j, Operation *op) {
  j.attribute("stream", *rt::getStream(op));
  if (auto name = dyn_cast<NameLoc>(op->getLoc()))
    j.attribute("name", name.getName().getValue());
  if (op->hasAttr(LoomDialect::kModuleAttrName))
    j.attribute("module", getModulePath(op));
  if (std::optional<Phase> phase = getPhase(op))
    j.attribute("phase", stringifyPhase(*phase));
}

std::string ArtifactWriter::buildInstruction(Operation *op) {
  return compactObject([&](OStream &j) {
    if (auto aten = dyn_cast<rt::AtenOp>(op)) {
      j.attribute("op", "aten");
      j.attribute("kernel", aten.getOpName());
      j.attribute("overload", aten.getOverload());
      j.attributeArray("args", [&] {
        for (Attribute arg : aten.getArgs())
          writeArg(j, arg, op);
      });
      if (!aten.getKwargs().empty())
        j.attributeObject("kwargs", [&] {
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
      j.attributeArray("results", [&] {
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
    } else if (auto free = dyn_cast<rt::FreeOp>(op)) {
      j.attribute("op", "free");
      j.attributeArray("slots", [&] {
        for (Value v : free.getValues())
          j.value(rt::getSlot(v));
      });
    } else if (auto start = dyn_cast<rt::CollectiveStartOp>(op)) {
      j.attribute("op", (rt::stringifyCollectiveKind(start.getKind()) +
                         "_start")
                            .str());
      j.attribute("input", rt::getSlot(start.getInput()));
      j.attribute("future", rt::getSlot(start.getFuture()));
      writeAxes(j, start.getAxes());
      if (IntegerAttr dim = start.getDimAttr())
        j.attribute("dim", dim.getInt());
      if (std::optional<ReduceKind> reduce = start.getReduction())
        j.attribute("reduce", stringifyReduceKind(*reduce));
      if (IntegerAttr root = start.getRootAttr())
        j.attribute("root", root.getInt());
    } else if (auto wait = dyn_cast<rt::WaitOp>(op)) {
      j.attribute("op", "wait");
      j.attribute("future", rt::getSlot(wait.getFuture()));
      j.attribute("result", rt::getSlot(wait.getResult()));
    } else if (auto record = dyn_cast<rt::RecordEventOp>(op)) {
      j.attribute("op", "record_event");
      j.attribute("event", eventIds.lookup(record.getEvent()));
    } else if (auto waitEvent = dyn_cast<rt::WaitEventOp>(op)) {
      j.attribute("op", "wait_event");
      j.attribute("event", eventIds.lookup(waitEvent.getEvent()));
    } else {
      auto update = cast<rt::OptimizerOp>(op);
      j.attribute("op", "optimizer");
      j.attribute(
          "param",
          update.getParam().getDefiningOp<rt::InputOp>().getBindingName());
      j.attribute("param_slot", rt::getSlot(update.getParam()));
      j.attribute("grad", rt::getSlot(update.getGrad()));
      j.attributeArray("state", [&] {
        for (Value s : update.getState())
          j.value(rt::getSlot(s));
      });
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
  j.object([&] {
    j.attribute("format", "loomx");
    j.attribute("version", int64_t(getVersion()));
    j.attribute("producer", kArtifactProducer);
    j.attribute("source", options.source);
    j.attribute("pipeline", options.pipeline);
    if (mesh) {
      j.attribute("world_size", mesh.getNumRanks());
      j.attributeObject("mesh", [&] {
        j.attributeArray("shape", [&] {
          for (int64_t d : mesh.getShape())
            j.value(d);
        });
        writeAxes(j, mesh.getAxes());
      });
    } else {
      j.attribute("world_size", int64_t(programs.size()));
    }
    j.attribute("num_slots", numSlots);
    j.attributeBegin("optimizer");
    if (std::optional<OptimizerConfig> config =
            first.getOptimizer() ? getOptimizerConfig(*first.getOptimizer())
                                 : std::nullopt) {
      j.object([&] {
        j.attribute("name", config->name);
        auto number = [&](StringRef key, double value) {
          j.attributeBegin(key);
          writeDouble(j, value);
          j.attributeEnd();
        };
        number("lr", config->lr);
        j.attributeArray("betas", [&] {
          writeDouble(j, config->beta1);
          writeDouble(j, config->beta2);
        });
        number("eps", config->eps);
        number("weight_decay", config->weightDecay);
        number("momentum", config->momentum);
        number("dampening", config->dampening);
        j.attribute("nesterov", config->nesterov);
        j.attribute("maximize", config->maximize);
      });
    } else {
      j.value(nullptr);
    }
    j.attributeEnd();
    writeLines(j, "inputs", tables[0]);
    writeLines(j, "state", tables[1]);
    writeLines(j, "outputs", tables[2]);
    j.attributeArray("programs", [&] {
      for (rt::ProgramOp program : programs) {
        j.object([&] {
          if (mesh)
            j.attributeArray("ranks", [&] {
              for (int64_t r = 0, e = mesh.getNumRanks(); r < e; ++r)
                j.value(r);
            });
          else
            j.attribute("rank", int64_t(program.getRank()));
          j.attributeArray("streams", [&] {
            for (Attribute s : program.getStreams())
              j.value(cast<StringAttr>(s).getValue());
          });
          SmallVector<std::string> instructions;
          eventIds.clear();
          for (Operation &op : program.getBody().front()) {
            if (auto record = dyn_cast<rt::RecordEventOp>(op))
              eventIds.try_emplace(record.getEvent(), eventIds.size());
            if (isa<rt::AtenOp, rt::FreeOp, rt::OptimizerOp,
                    rt::CollectiveStartOp, rt::WaitOp, rt::RecordEventOp,
                    rt::WaitEventOp>(op))
              instructions.push_back(buildInstruction(&op));
          }
          writeLines(j, "instructions", instructions);
        });
      }
    });
  });
  text.push_back('\n');
  return text;
}

LogicalResult ArtifactWriter::buildWeights(std::string &out) {
  SmallVector<loom::detail::WeightRequest> requests;
  for (auto input : programs.front().getBody().front().getOps<rt::InputOp>()) {
    if (!input.isRuntimeOwned())
      continue;
    RankedTensorType type = input.getType();
    // A sharded parameter's weights are the full tensor; every rank takes
    // its chunk at load time (docs/distributed.md).
    if (ShardAttr shard = input.getShardAttr(); mesh && shard)
      type = RankedTensorType::get(shard.getGlobal(), type.getElementType());
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
  os.write("LOOMX\r\n\x1a", 8);
  writeLE(writer.getVersion(), 4);
  writeLE(/*flags=*/0, 4);
  writeLE(program.size(), 8);
  writeLE(weights.size(), 8);
  os << program << weights;
  return success();
}
