//===- Artifact.h - The .loomx step artifact in memory ----------*- C++ -*-===//
//
// The in-memory form of a compiled training step, read from the file that
// `loom-compile` writes (ArtifactSchema.def declares its keys and versions,
// docs/artifact.md is the contract). Artifact::load
// checks everything that can be checked without LibTorch's operator
// registry: the container, every field of the program JSON, slot ranges,
// references between sections, that every slot is written before it is read,
// and that the embedded weights match the declared inputs. Resolving kernels
// against their schemas happens when a Session binds the program.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_ARTIFACT_H
#define LOOMRT_ARTIFACT_H

#include "loomrt/ArtifactSchema.h"

#include <c10/core/Layout.h>
#include <c10/core/MemoryFormat.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace loomrt {

/// The container's magic, "LOOMX\r\n\x1a" (ArtifactSchema.def).
inline constexpr const char (&kArtifactMagic)[schema::kMagicBytes + 1] =
    schema::kMagic;
/// The newest format version this runtime reads and the oldest; it reads
/// every version between them (ArtifactSchema.def).
inline constexpr uint32_t kArtifactVersion = schema::kCurrentVersion;
inline constexpr uint32_t kArtifactOldestVersion = schema::kOldestVersion;
/// Size of the fixed container header before the program JSON.
inline constexpr uint64_t kArtifactHeaderBytes = schema::kHeaderBytes;
/// Bound on `num_slots` so a corrupt file cannot make us allocate without
/// limit.
inline constexpr int64_t kMaxSlots = int64_t(1) << 24;

/// The device mesh of a version 2 artifact: ranks are laid out row-major
/// over `axes` (rank = sum of coordinate * stride).
struct Mesh {
  std::vector<int64_t> shape;
  std::vector<std::string> axes;

  /// Index of `axis` in `axes`, or -1.
  int64_t axisIndex(const std::string &axis) const;
  /// The ranks sharing `rank`'s coordinates on every axis not in `axes`,
  /// ordered by their coordinates on `axes` (row-major): the group a
  /// collective over `axes` runs in. `axes` must name axes of the mesh.
  std::vector<int64_t> group(const std::vector<std::string> &axes,
                             int64_t rank) const;
  /// Every group over `axes`, each as group() orders it, ordered by its
  /// smallest rank: the partition of the ranks the collectives use.
  std::vector<std::vector<int64_t>>
  groups(const std::vector<std::string> &axes) const;
  /// Product of the sizes of `axes`.
  int64_t groupSize(const std::vector<std::string> &axes) const;
  int64_t numRanks() const;
};

/// How a parameter (or its optimizer state) is split over a mesh group: the
/// zero-padded full tensor's chunk `index in group` along `dim`.
struct ShardSpec {
  std::vector<std::string> axes;
  int64_t dim = 0;
  std::vector<int64_t> globalShape;
};

/// How a batch input is split: the global batch's rows along `dim`, one
/// equal slice per rank of the group.
struct SplitSpec {
  std::vector<std::string> axes;
  int64_t dim = 0;
};

enum class ReduceOp { Sum, Avg, Max, Min, Product };
const char *toString(ReduceOp op);

/// How the loss output is reduced over a group before it is reported.
struct ReduceSpec {
  std::vector<std::string> axes;
  ReduceOp op = ReduceOp::Avg;
};

enum class InputRole { Parameter, Buffer, Constant, Input };
const char *toString(InputRole role);

/// One entry of `inputs`: a step argument bound to a slot before the first
/// instruction.
struct InputSpec {
  std::string name;
  InputRole role = InputRole::Input;
  int64_t slot = 0;
  /// Element of the step's batch tuple; only for InputRole::Input.
  int64_t batchIndex = -1;
  c10::ScalarType dtype = c10::ScalarType::Float;
  /// The local shape (this rank's chunk when sharded).
  std::vector<int64_t> shape;
  std::optional<ShardSpec> shard;
  std::optional<SplitSpec> split;
};

/// One entry of `state`: optimizer state owned by the runtime (init zeros).
/// How a state tensor starts: zeros, or filled with the optimizer's
/// initial_accumulator_value (Adagrad's `sum`).
enum class StateInit { Zeros, InitialAccumulatorValue };

struct StateSpec {
  std::string name;
  std::string param;
  int64_t slot = 0;
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::vector<int64_t> shape;
  StateInit init = StateInit::Zeros;
  std::optional<ShardSpec> shard;
};

enum class OutputRole { Loss, BufferMutation, Grad };
const char *toString(OutputRole role);

struct OutputSpec {
  OutputRole role = OutputRole::Loss;
  /// The buffer (BufferMutation) or parameter (Grad); empty for Loss.
  std::string target;
  int64_t slot = 0;
  /// Loss only: the reduction reported to the user.
  std::optional<ReduceSpec> reduce;
};

enum class OptimizerKind {
  SGD,
  Adam,
  AdamW,
  RMSprop,
  Adagrad,
  Adadelta,
  Adamax,
  RAdam,
  NAdam,
  Rprop,
  ASGD
};
const char *toString(OptimizerKind kind);
/// The OptimizerKind `name` spells ("adamw"), nullopt for any other.
std::optional<OptimizerKind> parseOptimizerKind(const std::string &name);

/// How an update is computed: torch.optim's single-tensor loop op for op,
/// or ATen's fused kernel (torch.optim's `fused=True`).
enum class OptimizerImpl { Forloop, Fused };

/// Where the step runs: the artifact's top-level `device` (absent: cpu),
/// which `loom-run --device` overrides.
enum class DeviceKind { Cpu, Cuda };
const char *toString(DeviceKind device);
/// The DeviceKind `name` spells ("cpu", "cuda"), nullopt for any other.
std::optional<DeviceKind> parseDeviceKind(const std::string &name);

/// The `optimizer` object: torch.optim hyperparameters, all of them present.
struct OptimizerSpec {
  OptimizerKind kind = OptimizerKind::SGD;
  double lr = 0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weightDecay = 0;
  double momentum = 0;
  double dampening = 0;
  bool nesterov = false;
  bool maximize = false;
  /// Version 4's keys; absent: the values that leave the algorithm as
  /// version 3 had it.
  bool amsgrad = false;
  double alpha = 0.99;
  bool centered = false;
  double lrDecay = 0;
  double initialAccumulatorValue = 0;
  bool decoupledWeightDecay = false;
  double rho = 0.9;
  double momentumDecay = 4e-3;
  /// Version 6's Rprop keys: `etas` and `step_sizes`.
  double etaminus = 0.5;
  double etaplus = 1.2;
  double stepSizeMin = 1e-6;
  double stepSizeMax = 50;
  /// Version 7's ASGD keys (its `alpha` is the key above, absent: 0.75).
  double lambd = 1e-4;
  double t0 = 1e6;
  /// `impl`, absent in artifacts older than the key: forloop.
  OptimizerImpl impl = OptimizerImpl::Forloop;

  /// The state tensors an optimizer instruction of this kind takes, in
  /// order (ArtifactSchema.def's LOOMX_OPTIMIZER_STATE): SGD with momentum
  /// [momentum_buffer]; Adam/AdamW [exp_avg, exp_avg_sq(, max_exp_avg_sq)];
  /// RMSprop [square_avg(, momentum_buffer)(, grad_avg)]; Adagrad [sum];
  /// Adadelta [square_avg, acc_delta]; NAdam [exp_avg, exp_avg_sq];
  /// Adamax [exp_avg, exp_inf]; RAdam [exp_avg, exp_avg_sq]; Rprop [prev,
  /// step_size]; ASGD [ax].
  std::vector<std::string> stateNames() const;
  /// stateNames().size(), without building the names (the interpreter
  /// checks it on every update).
  size_t numStateSlots() const;
  /// Whether torch.optim has a fused=True kernel for this algorithm (not
  /// for RMSprop, Adadelta, Adamax, RAdam, NAdam, Rprop).
  bool hasFusedKernel() const;
};

/// What follows the warm-up of an `lr_schedule`.
enum class LrDecay {
  Constant,
  Cosine,
  Linear,
  Step,
  Exponential,
  MultiStep,
  Polynomial,
  CosineRestarts
};

/// The `lr_schedule` object: torch.optim.lr_scheduler's LinearLR warm-up
/// chained (SequentialLR) with CosineAnnealingLR, LinearLR, StepLR,
/// ExponentialLR, MultiStepLR, PolynomialLR or CosineAnnealingWarmRestarts
/// decay.
struct LrScheduleSpec {
  int64_t warmupSteps = 0;
  double warmupStartFactor = 1.0 / 3;
  LrDecay decay = LrDecay::Constant;
  int64_t decaySteps = 0;
  double etaMin = 0;
  double endFactor = 0;
  double gamma = 0;                // step, exponential and multistep
  std::vector<int64_t> milestones; // multistep, increasing, each >= 1
  double power = 0;                // polynomial
  int64_t tMult = 0;               // cosine-restarts (T_0 is decaySteps)
};

/// One ARG of an `aten` instruction, as written in the artifact. Its meaning
/// (the IValue it becomes) depends on the schema argument it fills, so the
/// conversion happens when the kernel is bound (see lib/Kernel.h).
struct ArgValue {
  enum class Kind {
    Tensor,          // {"tensor": SLOT}
    Tensors,         // {"tensors": [SLOT, ...]}
    OptionalTensors, // {"optional_tensors": [SLOT or null, ...]}
    None,            // {"none": true}
    Int,             // {"int": N}
    Ints,            // {"ints": [N, ...]}
    Float,           // {"float": X}
    Floats,          // {"floats": [X, ...]}
    Bool,            // {"bool": B}
    Bools,           // {"bools": [B, ...]}
    String,          // {"string": S}
    Strings,         // {"strings": [S, ...]}
    Dtype,           // {"dtype": NAME}
    Device,          // {"device": "cpu"}
    Layout,          // {"layout": "strided"}
    MemoryFormat,    // {"memory_format": NAME}
  };
  Kind kind = Kind::None;
  /// Tensor (one), Tensors, OptionalTensors (-1 stands for null).
  std::vector<int64_t> slots;
  /// Int (one), Ints, Bool (one), Bools (0 or 1).
  std::vector<int64_t> ints;
  /// Float (one), Floats.
  std::vector<double> floats;
  /// String (one), Strings, Device (one: its name as written).
  std::vector<std::string> strings;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  c10::Layout layout = c10::Layout::Strided;
  c10::MemoryFormat memoryFormat = c10::MemoryFormat::Contiguous;

  static const char *kindName(Kind kind);
};

/// One entry of an aten instruction's `results`.
struct ResultSpec {
  enum class Kind { None, Slot, List };
  Kind kind = Kind::None;
  int64_t slot = -1;
  /// For List: one per element of a Tensor[] return (-1 for null).
  std::vector<int64_t> slots;
};

enum class OpKind {
  Aten,
  Free,
  Optimizer,
  // Version 2: collectives (start + wait) and cross-stream events.
  AllGatherStart,
  ReduceScatterStart,
  AllReduceStart,
  BroadcastStart,
  /// This rank's slice of a tensor every rank holds (no data moves).
  AllSliceStart,
  Wait,
  RecordEvent,
  WaitEvent,
  // Version 3: point-to-point transfers (start + wait), for pipeline stages.
  SendStart,
  RecvStart,
};
/// The instruction's `op` name ("all_gather_start", ...).
const char *toString(OpKind op);
/// The collective's kind for counts and messages ("all_gather", ...,
/// "send", "recv"), or nullptr when `op` is not a collective or
/// point-to-point start.
const char *collectiveName(OpKind op);
/// Whether `op` is send_start or recv_start.
bool isPointToPoint(OpKind op);

struct Instruction {
  OpKind op = OpKind::Aten;
  /// Optional metadata for traces and errors (empty when absent).
  std::string name;
  std::string module;
  std::string phase;
  int64_t stream = 0;

  // op == Aten
  std::string kernel;   // "aten::addmm"
  std::string overload; // "default" or an overload name
  std::vector<ArgValue> args;
  std::vector<std::pair<std::string, ArgValue>> kwargs;
  std::vector<ResultSpec> results;
  /// Trace metadata: the call's kernel signature, as the compiler spelled
  /// it (loomrt/KernelSignature.h; empty when absent).
  std::string signature;

  // op == Free
  std::vector<int64_t> slots;

  // op == Optimizer
  std::string param;
  int64_t paramSlot = -1;
  int64_t grad = -1;
  std::vector<int64_t> state;
  /// A parameter group's own rates (absent: the program optimizer's).
  std::optional<double> lr;
  std::optional<double> weightDecay;

  // Collective starts: `input` slot, `future` slot, group `axes`, `dim`
  // (all_gather, reduce_scatter), `reduce` (reduce_scatter, all_reduce),
  // `root` (broadcast, an index in the group). Wait: `future`, `result`
  // (-1 for the wait of a send, which has none).
  // send_start: `input`, `future`, `axes`, `peer`, `tag`; recv_start:
  // `future`, `axes`, `peer`, `tag`, `recvDtype`, `recvShape`.
  int64_t input = -1;
  int64_t future = -1;
  int64_t result = -1;
  std::vector<std::string> axes;
  int64_t dim = 0;
  ReduceOp reduce = ReduceOp::Sum;
  int64_t root = 0;
  /// Point-to-point: the other rank's index in this rank's group over
  /// `axes`, and the tag the matching send and recv share.
  int64_t peer = -1;
  int64_t tag = 0;
  c10::ScalarType recvDtype = c10::ScalarType::Undefined;
  std::vector<int64_t> recvShape;
  // record_event / wait_event
  int64_t event = -1;

  /// "aten::addmm.default"
  std::string qualifiedKernel() const;
};

/// One entry of `programs`: the instructions some ranks run, with the
/// binding tables they run them with. An SPMD artifact (the top level holds
/// the tables) gives every program a copy of the top level's tables; an
/// MPMD one (version 3, pipeline stages) reads each program's own. Either
/// way a rank runs one Program and reads only its tables.
struct Program {
  /// The ranks that run this program (v1: {rank}).
  std::vector<int64_t> ranks;
  std::vector<std::string> streams;
  std::vector<Instruction> instructions;
  int64_t numSlots = 0;
  std::vector<InputSpec> inputs;
  std::vector<StateSpec> state;
  std::vector<OutputSpec> outputs;

  /// Index into `inputs` by name, or -1.
  int64_t findInput(const std::string &name) const;
  /// Whether one of `outputs` is the loss.
  bool hasLoss() const;
};

class Artifact {
public:
  /// Reads and validates the artifact at `path`. Throws loomrt::Error whose
  /// message starts with the path and names the offending field.
  static Artifact load(const std::string &path);

  /// Parses and validates a program JSON text alone (no weights). `what`
  /// names it in errors. load() uses this for the program section.
  static Artifact parseProgram(const std::string &jsonText,
                               const std::string &what);

  /// "programs[0].instructions[17]", plus " (in 'addmm')" when the instruction
  /// has a name: the prefix of every message about that instruction.
  std::string instructionPath(size_t program, size_t index) const;
  /// The name errors use for this artifact (its path).
  const std::string &what() const { return what_; }

  std::string producer;
  std::string source;
  std::string pipeline;
  int64_t version = 1;
  int64_t worldSize = 1;
  /// The device the step was compiled for.
  DeviceKind device = DeviceKind::Cpu;
  /// The ATen threads of the kernel workspace profile the compiler counted,
  /// if it counted one.
  std::optional<int64_t> kernelWorkspaceThreads;
  /// The per-rank peak memory the compiler planned the step to stay within,
  /// if it was given one.
  std::optional<int64_t> memoryBudget;
  /// Required when worldSize > 1.
  std::optional<Mesh> mesh;
  std::optional<OptimizerSpec> optimizer;
  /// Absent: every step uses the optimizer's (or its group's) lr.
  std::optional<LrScheduleSpec> lrSchedule;
  /// Each with its binding tables (see Program).
  std::vector<Program> programs;
  /// Whether the tables were per program (MPMD, version 3) rather than at
  /// the top level; errors name them "programs[i].inputs[k]" then.
  bool mpmd = false;

  /// Where the weights safetensors lies inside the file (load() only).
  std::string weightsPath;
  uint64_t weightsOffset = 0;
  uint64_t weightsLength = 0;

  /// The JSON path of program `i`'s `table` ("inputs", "outputs", ...):
  /// "programs[1].inputs" for MPMD, "inputs" for SPMD.
  std::string tablePath(size_t program, const std::string &table) const;
  /// Index of the program that has the loss output (the one whose loss the
  /// step reports); every artifact has exactly one.
  size_t lossProgram() const;
  /// Index of the program `rank` runs, or -1.
  int64_t programOf(int64_t rank) const;
  /// Every distinct axes list the programs use (collectives, point-to-point
  /// transfers, shards, splits, the loss reduction), over every program in
  /// order, in first-use order: the process groups a rank creates, in the
  /// order every rank creates them. An MPMD artifact on several ranks adds
  /// every mesh axis at the end: the group the runtime hands the loss and
  /// saved parameters around in.
  std::vector<std::vector<std::string>> groupAxes() const;

private:
  std::string what_;
};

} // namespace loomrt

#endif // LOOMRT_ARTIFACT_H
