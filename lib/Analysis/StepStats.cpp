//===- StepStats.cpp - Op counts, bytes and FLOPs of a training step ------===//

#include "loom/Analysis/StepStats.h"

#include "llvm/Support/Format.h"

using namespace mlir;
using namespace loom;

int64_t loom::getElementBytes(Type type) {
  if (auto complex = dyn_cast<ComplexType>(type))
    return 2 * getElementBytes(complex.getElementType());
  unsigned bits = type.getIntOrFloatBitWidth();
  return std::max<int64_t>(1, (bits + 7) / 8);
}

int64_t loom::getTensorBytes(RankedTensorType type) {
  return type.getNumElements() * getElementBytes(type.getElementType());
}

namespace {
int64_t product(ArrayRef<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

RankedTensorType operandType(AtenOp op, unsigned pos) {
  ArrayAttr args = op.getArgs();
  if (pos >= args.size())
    return {};
  if (auto ref = dyn_cast<OperandRefAttr>(args[pos]))
    return cast<RankedTensorType>(op->getOperand(ref.getIndex()).getType());
  return {};
}

bool maskBit(AtenOp op, unsigned pos, unsigned bit) {
  ArrayAttr args = op.getArgs();
  if (pos >= args.size())
    return true;
  auto mask = dyn_cast<ArrayAttr>(args[pos]);
  if (!mask || bit >= mask.size())
    return true;
  auto b = dyn_cast<BoolAttr>(mask[bit]);
  return !b || b.getValue();
}

/// 2 * N * Cout * Cin/groups * prod(kernel) * prod(output spatial), as
/// flop_counter's conv_flop_count.
int64_t convFlops(RankedTensorType weight, RankedTensorType out,
                  bool transposed, RankedTensorType input) {
  if (!weight || !out || out.getRank() < 3)
    return 0;
  // For a transposed convolution the work is that of the convolution whose
  // output is the transposed one's input.
  RankedTensorType spatialFrom = transposed && input ? input : out;
  int64_t spatial = product(spatialFrom.getShape().drop_front(2));
  return 2 * out.getDimSize(0) * product(weight.getShape()) * spatial;
}

/// Attention FLOPs for q [B, H, S, D] and k [B, H, Skv, D]: two batched
/// matmuls forward, four backward (flop_counter's sdpa rules).
int64_t attentionFlops(RankedTensorType q, RankedTensorType k,
                       RankedTensorType v) {
  if (!q || !k || !v || q.getRank() < 2)
    return 0;
  int64_t batch = product(q.getShape().drop_back(2));
  int64_t s = q.getDimSize(q.getRank() - 2), d = q.getDimSize(q.getRank() - 1);
  int64_t skv = k.getDimSize(k.getRank() - 2);
  int64_t dv = v.getDimSize(v.getRank() - 1);
  return 2 * batch * s * skv * d + 2 * batch * s * skv * dv;
}
} // namespace

int64_t loom::countFlops(AtenOp op) {
  StringRef name = op.getOpName();
  auto resultType = [&](unsigned i) {
    return i < op->getNumResults()
               ? cast<RankedTensorType>(op->getResult(i).getType())
               : RankedTensorType();
  };
  if (name == "aten::mm" || name == "aten::addmm" || name == "aten::bmm" ||
      name == "aten::baddbmm") {
    unsigned first = name == "aten::mm" || name == "aten::bmm" ? 0 : 1;
    RankedTensorType a = operandType(op, first);
    RankedTensorType out = resultType(0);
    if (!a || !out || a.getRank() < 2)
      return 0;
    return 2 * product(out.getShape()) * a.getDimSize(a.getRank() - 1);
  }
  if (name == "aten::convolution") {
    auto transposed = op.getArgs().size() > 6
                          ? dyn_cast<BoolAttr>(op.getArgs()[6])
                          : BoolAttr();
    return convFlops(operandType(op, 1), resultType(0),
                     transposed && transposed.getValue(), operandType(op, 0));
  }
  if (name == "aten::convolution_backward") {
    // (grad_output, input, weight, bias_sizes, stride, padding, dilation,
    //  transposed, output_padding, groups, output_mask): each requested
    // gradient costs one convolution.
    RankedTensorType gradOut = operandType(op, 0), input = operandType(op, 1),
                     weight = operandType(op, 2);
    auto transposed = op.getArgs().size() > 7
                          ? dyn_cast<BoolAttr>(op.getArgs()[7])
                          : BoolAttr();
    bool t = transposed && transposed.getValue();
    int64_t one = convFlops(weight, t ? input : gradOut, t, gradOut);
    return one * (maskBit(op, 10, 0) + maskBit(op, 10, 1));
  }
  if (name.starts_with("aten::_scaled_dot_product_") &&
      name.contains("attention")) {
    int64_t fwd =
        attentionFlops(operandType(op, 0), operandType(op, 1),
                       operandType(op, 2));
    if (name.ends_with("_backward")) {
      // Backward ops take grad_out first: q, k, v follow it.
      return 2 * attentionFlops(operandType(op, 1), operandType(op, 2),
                                operandType(op, 3));
    }
    return fwd;
  }
  return 0;
}

StepStats::StepStats(func::FuncOp step) : name(step.getSymName().str()) {
  for (unsigned i = 0, e = step.getNumArguments(); i < e; ++i) {
    auto role = step.getArgAttrOfType<RoleAttr>(i, LoomDialect::kRoleAttrName);
    StringRef roleName = role ? stringifyRole(role.getValue()) : "untagged";
    Group &g = argsByRole[roleName];
    g.count++;
    if (auto t = dyn_cast<RankedTensorType>(step.getArgument(i).getType())) {
      g.elements += t.getNumElements();
      g.bytes += getTensorBytes(t);
    }
  }
  step.walk([&](Operation *op) {
    if (op == step.getOperation())
      return;
    std::optional<Phase> phase = getPhase(op);
    StringRef phaseName = phase ? stringifyPhase(*phase) : "untagged";
    if (!isa<func::ReturnOp>(op))
      opsByPhase[phaseName]++;
    if (isa<AllGatherStartOp, ReduceScatterStartOp, AllReduceStartOp,
            BroadcastStartOp, SendStartOp, RecvStartOp>(op))
      collectives[op->getName().getStringRef()]++;
    auto aten = dyn_cast<AtenOp>(op);
    if (!aten)
      return;
    opsByKernel[aten.getKernel()]++;
    int64_t flops = countFlops(aten);
    if (!flops)
      return;
    ModuleFlops &m = flopsByModule[getModulePath(op)];
    int64_t *slot = !phase                     ? &m.other
                    : *phase == Phase::forward  ? &m.forward
                    : *phase == Phase::backward ? &m.backward
                                                : &m.other;
    *slot += flops;
    (!phase ? totalFlops.other
     : *phase == Phase::forward  ? totalFlops.forward
     : *phase == Phase::backward ? totalFlops.backward
                                 : totalFlops.other) += flops;
  });
}

StepStats::ModuleFlops StepStats::inclusiveFlops(StringRef path) const {
  ModuleFlops sum;
  for (const auto &[module, f] : flopsByModule) {
    bool inside = path.empty() || module == path ||
                  (module.starts_with(path) && module.size() > path.size() &&
                   module[path.size()] == '.');
    if (!inside)
      continue;
    sum.forward += f.forward;
    sum.backward += f.backward;
    sum.other += f.other;
  }
  return sum;
}

static std::string humanCount(int64_t n) {
  const char *units[] = {"", "K", "M", "G", "T", "P"};
  double v = n;
  int u = 0;
  while (v >= 1000 && u < 5) {
    v /= 1000;
    ++u;
  }
  std::string s;
  llvm::raw_string_ostream os(s);
  if (u == 0)
    os << n;
  else
    os << llvm::format("%.2f%s", v, units[u]);
  return s;
}

void StepStats::print(raw_ostream &os) const {
  os << "=== loom-stats @" << name << " ===\n";
  os << "ops by phase:\n";
  int64_t total = 0;
  for (const auto &[phase, n] : opsByPhase) {
    os << llvm::format("  %-12s %8lld\n", phase.str().c_str(), (long long)n);
    total += n;
  }
  os << llvm::format("  %-12s %8lld\n", "total", (long long)total);
  os << "arguments by role:\n";
  for (const auto &[role, g] : argsByRole)
    os << llvm::format("  %-12s %5lld tensors %12lld elements %14lld bytes\n",
                       role.str().c_str(), (long long)g.count,
                       (long long)g.elements, (long long)g.bytes);
  if (!collectives.empty()) {
    os << "collectives:\n";
    SmallVector<StringRef> names;
    for (const auto &entry : collectives)
      names.push_back(entry.getKey());
    llvm::sort(names);
    for (StringRef n : names)
      os << llvm::format("  %-26s %6lld\n", n.str().c_str(),
                         (long long)collectives.lookup(n));
  }
  os << "FLOPs by module (exact path; forward / backward / inclusive):\n";
  SmallVector<StringRef> modules;
  for (const auto &entry : flopsByModule)
    modules.push_back(entry.first);
  llvm::sort(modules);
  for (StringRef m : modules) {
    const ModuleFlops &f = flopsByModule.lookup(m);
    os << llvm::format("  %-32s %14lld %14lld %14lld\n",
                       (m.empty() ? "<root>" : m.str()).c_str(),
                       (long long)f.forward, (long long)f.backward,
                       (long long)inclusiveFlops(m).total());
  }
  os << llvm::format("  %-32s %14lld %14lld %14lld", "total",
                     (long long)totalFlops.forward,
                     (long long)totalFlops.backward,
                     (long long)totalFlops.total())
     << "  (" << humanCount(totalFlops.total()) << "FLOP)\n";
}

llvm::json::Value StepStats::toJSON() const {
  llvm::json::Object phases, roles, modules, colls;
  for (const auto &[phase, n] : opsByPhase)
    phases[phase] = n;
  for (const auto &[role, g] : argsByRole)
    roles[role] = llvm::json::Object{
        {"count", g.count}, {"elements", g.elements}, {"bytes", g.bytes}};
  for (const auto &[m, f] : flopsByModule)
    modules[m] = llvm::json::Object{{"forward", f.forward},
                                    {"backward", f.backward},
                                    {"other", f.other},
                                    {"inclusive", inclusiveFlops(m).total()}};
  for (const auto &entry : collectives)
    colls[entry.getKey()] = entry.getValue();
  return llvm::json::Object{
      {"function", name},
      {"ops_by_phase", std::move(phases)},
      {"arguments", std::move(roles)},
      {"collectives", std::move(colls)},
      {"flops_by_module", std::move(modules)},
      {"flops", llvm::json::Object{{"forward", totalFlops.forward},
                                   {"backward", totalFlops.backward},
                                   {"other", totalFlops.other},
                                   {"total", totalFlops.total()}}}};
}
