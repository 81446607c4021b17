//===- StepStats.cpp - Op counts, bytes and FLOPs of a training step ------===//

#include "loom/Analysis/StepStats.h"

#include "loom/Dialect/Loom/IR/OpClassification.h"

#include "llvm/Support/Format.h"

using namespace mlir;
using namespace loom;

namespace {
int64_t product(ArrayRef<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

RankedTensorType operandType(AtenOp op, unsigned pos) {
  Value v = op.getArgOperand(pos);
  return v ? cast<RankedTensorType>(v.getType()) : RankedTensorType();
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

/// flop_counter's conv_flop_count: 2 * batch * Cout * Cin * prod(filter) *
/// prod(spatial), where spatial is the output's (the input's when
/// `transposed`).
int64_t convFlopCount(ArrayRef<int64_t> x, ArrayRef<int64_t> w,
                      ArrayRef<int64_t> out, bool transposed) {
  if (x.size() < 3 || w.size() != x.size() || out.size() != x.size())
    return 0;
  ArrayRef<int64_t> spatial = (transposed ? x : out).drop_front(2);
  return 2 * x[0] * w[0] * w[1] * product(w.drop_front(2)) * product(spatial);
}

/// Swaps the first two dimensions, as flop_counter's `t`.
SmallVector<int64_t> swap01(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> out(shape);
  if (out.size() >= 2)
    std::swap(out[0], out[1]);
  return out;
}

/// Attention FLOPs for q [B, H, S, D], k [B, H, Skv, D], v [B, H, Skv, Dv]:
/// two batched matmuls forward; backward recomputes the scores and runs four
/// more (flop_counter's sdpa_flop_count / sdpa_backward_flop_count).
int64_t attentionFlops(RankedTensorType q, RankedTensorType k,
                       RankedTensorType v, bool backward) {
  if (!q || !k || !v || q.getRank() < 2)
    return 0;
  int64_t batch = product(q.getShape().drop_back(2));
  int64_t s = q.getDimSize(q.getRank() - 2), d = q.getDimSize(q.getRank() - 1);
  int64_t skv = k.getDimSize(k.getRank() - 2);
  int64_t dv = v.getDimSize(v.getRank() - 1);
  if (backward)
    return 2 * batch * s * skv * (3 * d + 2 * dv);
  return 2 * batch * s * skv * (d + dv);
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
  auto boolArg = [&](unsigned pos) {
    auto b = pos < op.getArgs().size() ? dyn_cast<BoolAttr>(op.getArgs()[pos])
                                       : BoolAttr();
    return b && b.getValue();
  };
  auto intArg = [&](unsigned pos, int64_t dflt) {
    auto i = pos < op.getArgs().size()
                 ? dyn_cast<IntegerAttr>(op.getArgs()[pos])
                 : IntegerAttr();
    return i ? i.getInt() : dflt;
  };
  if (name == "aten::convolution") {
    RankedTensorType x = operandType(op, 0), w = operandType(op, 1);
    RankedTensorType out = resultType(0);
    if (!x || !w || !out)
      return 0;
    return convFlopCount(x.getShape(), w.getShape(), out.getShape(),
                         boolArg(6));
  }
  if (name == "aten::convolution_backward") {
    // (grad_output, input, weight, bias_sizes, stride, padding, dilation,
    //  transposed, output_padding, groups, output_mask), as flop_counter's
    // conv_backward_flop, except that the weight gradient of a grouped
    // convolution is counted once, not `groups` times (flop_counter ignores
    // groups there and over-counts depthwise convolutions).
    RankedTensorType gradOut = operandType(op, 0), x = operandType(op, 1),
                     w = operandType(op, 2);
    if (!gradOut || !x || !w)
      return 0;
    bool transposed = boolArg(7);
    int64_t groups = std::max<int64_t>(1, intArg(9, 1));
    int64_t flops = 0;
    if (maskBit(op, 10, 0))
      flops += convFlopCount(gradOut.getShape(), w.getShape(), x.getShape(),
                             !transposed);
    if (maskBit(op, 10, 1)) {
      SmallVector<int64_t> tx = swap01(x.getShape()),
                           tg = swap01(gradOut.getShape()),
                           tw = swap01(w.getShape());
      flops += (transposed ? convFlopCount(tg, tx, tw, false)
                           : convFlopCount(tx, tg, tw, false)) /
               groups;
    }
    return flops;
  }
  if (name.starts_with("aten::_scaled_dot_product_") &&
      name.contains("attention")) {
    // Backward ops take grad_out first: q, k, v follow it.
    bool backward = name.ends_with("_backward");
    unsigned q = backward ? 1 : 0;
    return attentionFlops(operandType(op, q), operandType(op, q + 1),
                          operandType(op, q + 2), backward);
  }
  return 0;
}

StepStats::StepStats(func::FuncOp step)
    : name(step.getSymName().str()), memory(step) {
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
    if (op == step.getOperation() || isa<func::ReturnOp, YieldOp>(op))
      return;
    if (isa<RecomputeOp>(op)) {
      recomputeRegions++;
      return;
    }
    // A recomputed op runs in the region's phase (backward), whatever the
    // forward op it was cloned from says.
    auto region = op->getParentOfType<RecomputeOp>();
    if (region)
      recomputeOps++;
    std::optional<Phase> phase = getPhase(region ? region : op);
    StringRef phaseName = phase ? stringifyPhase(*phase) : "untagged";
    opsByPhase[phaseName]++;
    if (getCollectiveKind(op))
      collectives[op->getName().getStringRef()]++;
    auto aten = dyn_cast<AtenOp>(op);
    if (!aten)
      return;
    opsByKernel[aten.getKernel()]++;
    int64_t flops = countFlops(aten);
    if (!flops)
      return;
    auto slot = [&](ModuleFlops &m) -> int64_t & {
      if (region)
        return m.recompute;
      if (phase == Phase::forward)
        return m.forward;
      if (phase == Phase::backward)
        return m.backward;
      return m.other;
    };
    slot(flopsByModule[getModulePath(op)]) += flops;
    slot(totalFlops) += flops;
  });
}

StepStats::ModuleFlops StepStats::inclusiveFlops(StringRef path) const {
  ModuleFlops sum;
  for (const auto &[module, f] : flopsByModule) {
    if (!isInModule(module, path))
      continue;
    sum.forward += f.forward;
    sum.backward += f.backward;
    sum.other += f.other;
    sum.recompute += f.recompute;
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
  if (recomputeRegions)
    os << "recompute: " << recomputeRegions << " region(s), " << recomputeOps
       << " op(s), " << totalFlops.recompute << " FLOPs in backward\n";
  // The recompute column only for steps that recompute, so the usual
  // report keeps its shape.
  bool recomputes = recomputeRegions > 0;
  os << "FLOPs by module (exact path; forward / backward / "
     << (recomputes ? "recompute / " : "") << "inclusive):\n";
  auto row = [&](StringRef label, const ModuleFlops &f, int64_t inclusive) {
    os << llvm::format("  %-32s %14lld %14lld", label.str().c_str(),
                       (long long)f.forward, (long long)f.backward);
    if (recomputes)
      os << llvm::format(" %14lld", (long long)f.recompute);
    os << llvm::format(" %14lld", (long long)inclusive);
  };
  SmallVector<StringRef> modules;
  for (const auto &entry : flopsByModule)
    modules.push_back(entry.first);
  llvm::sort(modules);
  for (StringRef m : modules) {
    row(m.empty() ? "<root>" : m, flopsByModule.lookup(m),
        inclusiveFlops(m).total());
    os << "\n";
  }
  row("total", totalFlops, totalFlops.total());
  os << "  (" << humanCount(totalFlops.total()) << "FLOP)\n";
  os << "predicted peak memory: " << memory.peakBytes << " bytes (persistent "
     << memory.persistentBytes << " + activations "
     << memory.peakActivationBytes;
  if (memory.peakOp) {
    os << ", at '" << memory.peakOpName() << "'";
    if (memory.peakOp->hasAttr(LoomDialect::kModuleAttrName))
      os << " in '" << getModulePath(memory.peakOp) << "'";
    if (memory.peakOp->getParentOfType<RecomputeOp>())
      os << ", recomputed";
  }
  os << ")\n";
  if (memory.peakOp)
    memory.printLiveAtPeak(os);
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
                                    {"recompute", f.recompute},
                                    {"inclusive", inclusiveFlops(m).total()}};
  for (const auto &entry : collectives)
    colls[entry.getKey()] = entry.getValue();
  return llvm::json::Object{
      {"function", name},
      {"ops_by_phase", std::move(phases)},
      {"arguments", std::move(roles)},
      {"collectives", std::move(colls)},
      {"flops_by_module", std::move(modules)},
      {"memory", memory.toJSON()},
      {"recompute", llvm::json::Object{{"regions", recomputeRegions},
                                       {"ops", recomputeOps},
                                       {"flops", totalFlops.recompute}}},
      {"flops", llvm::json::Object{{"forward", totalFlops.forward},
                                   {"backward", totalFlops.backward},
                                   {"other", totalFlops.other},
                                   {"recompute", totalFlops.recompute},
                                   {"total", totalFlops.total()}}}};
}
