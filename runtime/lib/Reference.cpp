//===- Reference.cpp - Compare a run with PyTorch eager's reference -------===//

#include "FileUtil.h"
#include "Json.h"
#include "loomrt/Check.h"
#include "loomrt/Dtype.h"
#include "loomrt/Error.h"
#include "loomrt/Safetensors.h"

#include <ATen/ops/view_as_real.h>
#include <c10/core/GradMode.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <set>

using nlohmann::json;

namespace loomrt {

Reference Reference::load(const std::string &jsonPath) {
  Reference r;
  r.jsonPath = jsonPath;
  r.tensorsPath =
      (std::filesystem::path(jsonPath).parent_path() / "reference.safetensors")
          .string();
  json root =
      parseUntrustedJson(readFile(jsonPath), jsonPath + ": not valid JSON: ");
  if (!root.is_object() || !root.contains("losses") ||
      !root["losses"].is_array())
    throw Error(jsonPath + ": expected an object with a 'losses' list");
  size_t i = 0;
  for (const json &l : root["losses"]) {
    if (!l.is_number())
      throw Error(jsonPath + ": losses[" + std::to_string(i) +
                  "] is not a number: " + l.dump());
    r.losses.push_back(l.get<double>());
    ++i;
  }
  if (root.contains("tied_parameters")) {
    const json &tied = root["tied_parameters"];
    if (!tied.is_object())
      throw Error(jsonPath + ": tied_parameters must be an object");
    for (const auto &[alias, canonical] : tied.items()) {
      if (!canonical.is_string())
        throw Error(jsonPath + ": tied_parameters['" + alias +
                    "'] must be a string");
      r.tiedParameters[alias] = canonical.get<std::string>();
    }
  }
  return r;
}

LossComparison compareLoss(double got, double want, double rtol, double atol) {
  LossComparison c;
  c.got = got;
  c.want = want;
  double diff = std::fabs(got - want);
  c.relError = want != 0
                   ? diff / std::fabs(want)
                   : (diff == 0 ? 0 : std::numeric_limits<double>::infinity());
  c.ok = std::isfinite(diff) && diff <= std::max(atol, rtol * std::fabs(want));
  return c;
}

namespace {

/// max |a - b| / max(1, |b|), max |a - b|, and the elements beyond
/// max(atol, rtol * |b|), in double.
void score(const at::Tensor &got, const at::Tensor &want, double rtol,
           double atol, TensorComparison &c) {
  // A session on a GPU compares from host memory, as the reference is.
  at::Tensor a = got.is_complex() ? at::view_as_real(got.cpu()) : got.cpu();
  at::Tensor b = want.is_complex() ? at::view_as_real(want) : want;
  a = a.to(at::kDouble);
  b = b.to(at::kDouble);
  c.numel = a.numel();
  if (a.numel() == 0) {
    c.score = c.maxAbsDiff = c.toleranceUsed = 0;
    c.failing = 0;
    return;
  }
  const double inf = std::numeric_limits<double>::infinity();
  at::Tensor same = a.eq(b).logical_or_(a.isnan().logical_and_(b.isnan()));
  at::Tensor diff = a.sub(b).abs_().masked_fill_(same, 0.0);
  at::Tensor ratio = diff.div(b.abs().clamp_min_(1.0)).nan_to_num_(inf);
  c.score = ratio.max().item<double>();
  c.maxAbsDiff = diff.nan_to_num(inf).max().item<double>();

  diff = diff.nan_to_num(inf);
  at::Tensor bAbs = b.abs().nan_to_num_(inf);
  at::Tensor allowed = bAbs.mul(rtol).clamp_min_(atol);
  c.failing = diff.gt(allowed).sum().item<int64_t>();
  // diff / allowed, with 0/0 (an equal element with no allowance) as 0.
  at::Tensor used = diff.div(allowed).masked_fill_(diff.eq(0), 0.0);
  int64_t worst = used.argmax().item<int64_t>();
  c.toleranceUsed = used.reshape({-1})[worst].item<double>();
  c.worstDiff = diff.reshape({-1})[worst].item<double>();
  c.worstRef = bAbs.reshape({-1})[worst].item<double>();
}

} // namespace

namespace {

/// The name of rank `rank`'s value of buffer `name` in a reference whose
/// ranks hold different values of it (python/loom/dp_reference.py).
std::string perRankName(const std::string &name, int64_t rank) {
  return name + "@rank" + std::to_string(rank);
}

/// The part of a reference tensor a rank's shard is compared with.
struct ReferenceSlice {
  int64_t dim = 0;
  int64_t start = 0;
  int64_t length = 0;
};

std::vector<TensorComparison>
compareWithSlices(const NamedTensors &parameters, const NamedTensors &buffers,
                  const NamedTensors &constants, const Reference &reference,
                  double rtol, double atol,
                  const std::map<std::string, ReferenceSlice> &slices,
                  const std::set<std::string> &elsewhere = {},
                  std::optional<int64_t> rank = std::nullopt) {
  c10::AutoGradMode noGrad(false);
  SafetensorsFile ref = SafetensorsFile::open(reference.tensorsPath);
  std::vector<TensorComparison> out;
  std::set<std::string> covered;

  auto compare = [&](const std::string &name, const at::Tensor &t,
                     const char *role, bool mustExist) {
    TensorComparison c;
    c.name = name;
    c.role = role;
    c.referenceName = name;
    const SafetensorsEntry *e = ref.find(name);
    // A buffer the ranks hold different values of (batch norm's running
    // statistics of each rank's rows): the reference has one per rank.
    if (!e && rank && std::string(role) == "buffer") {
      c.referenceName = perRankName(name, *rank);
      e = ref.find(c.referenceName);
    }
    auto alias = reference.tiedParameters.find(name);
    if (!e && alias != reference.tiedParameters.end()) {
      c.referenceName = alias->second;
      e = ref.find(alias->second);
    }
    if (!e) {
      if (!mustExist)
        return;
      c.problem = "not in " + reference.tensorsPath;
      c.score = c.toleranceUsed = std::numeric_limits<double>::infinity();
      out.push_back(std::move(c));
      return;
    }
    covered.insert(c.referenceName);
    auto slice = slices.find(name);
    std::vector<int64_t> want = t.sizes().vec();
    if (slice != slices.end()) {
      const ReferenceSlice &sl = slice->second;
      c.slice = "rows " + std::to_string(sl.start) + " to " +
                std::to_string(sl.start + sl.length) + " of dim " +
                std::to_string(sl.dim);
      // The reference holds the full tensor; the shard is one slice of it.
      if (size_t(sl.dim) < want.size() && size_t(sl.dim) < e->shape.size() &&
          e->shape[size_t(sl.dim)] >= sl.start + sl.length)
        want[size_t(sl.dim)] = e->shape[size_t(sl.dim)];
    }
    if (e->dtype != t.scalar_type() || e->shape != want) {
      c.problem = "the reference is " + artifactDtypeName(e->dtype) + " " +
                  formatShape(e->shape) + ", the run has " +
                  artifactDtypeName(t.scalar_type()) + " " +
                  formatShape(t.sizes());
      c.score = c.toleranceUsed = std::numeric_limits<double>::infinity();
      out.push_back(std::move(c));
      return;
    }
    at::Tensor expected = ref.read(*e);
    if (slice != slices.end())
      expected = expected.narrow(slice->second.dim, slice->second.start,
                                 slice->second.length);
    score(t, expected, rtol, atol, c);
    c.ok = c.failing == 0;
    out.push_back(std::move(c));
  };
  for (const auto &[name, t] : parameters)
    compare(name, t, "parameter", true);
  for (const auto &[name, t] : buffers)
    compare(name, t, "buffer", true);
  for (const auto &[name, t] : constants)
    compare(name, t, "constant", false);

  // Reference tensors nothing matched: a parameter or buffer the artifact
  // lost. Aliases of a covered canonical name are the same tensor.
  for (const SafetensorsEntry &e : ref.entries()) {
    // `elsewhere`: held by the ranks of another program (MPMD), which
    // compare it themselves.
    if (covered.count(e.name) || elsewhere.count(e.name))
      continue;
    // Another rank's value of a buffer: that rank compares it.
    if (size_t at = e.name.rfind("@rank");
        rank && at != std::string::npos &&
        covered.count(perRankName(e.name.substr(0, at), *rank)))
      continue;
    auto alias = reference.tiedParameters.find(e.name);
    if (alias != reference.tiedParameters.end() && covered.count(alias->second))
      continue;
    TensorComparison c;
    c.name = e.name;
    c.referenceName = e.name;
    c.role = "reference";
    c.problem = "in the reference, but the artifact has no parameter, "
                "buffer or constant of that name";
    c.score = c.toleranceUsed = std::numeric_limits<double>::infinity();
    out.push_back(std::move(c));
  }
  return out;
}

} // namespace

std::vector<TensorComparison> compareTensors(const Session &session,
                                             const Reference &reference,
                                             double rtol, double atol) {
  return compareTensors(session.parameters(), session.buffers(),
                        session.constants(), reference, rtol, atol);
}

std::vector<TensorComparison> compareTensors(const NamedTensors &parameters,
                                             const NamedTensors &buffers,
                                             const NamedTensors &constants,
                                             const Reference &reference,
                                             double rtol, double atol) {
  return compareWithSlices(parameters, buffers, constants, reference, rtol,
                           atol, {});
}

std::vector<TensorComparison> compareRankTensors(const Session &session,
                                                 const Reference &reference,
                                                 double rtol, double atol) {
  const Artifact &a = session.artifact();
  // This rank's program binds the parameters it holds (MPMD: its stage's).
  const Program &program = a.programs[size_t(a.programOf(session.rank()))];
  NamedTensors parameters;
  std::map<std::string, ReferenceSlice> slices;
  for (const auto &[name, t] : session.parameters()) {
    const InputSpec &in = program.inputs[size_t(program.findInput(name))];
    if (!in.shard || !a.mesh) {
      parameters.emplace_back(name, t);
      continue;
    }
    // This rank's chunk of the zero-padded full tensor (docs/distributed.md):
    // its rows that lie inside the unpadded tensor.
    std::vector<int64_t> group = a.mesh->group(in.shard->axes, session.rank());
    int64_t index =
        std::find(group.begin(), group.end(), session.rank()) - group.begin();
    int64_t dim = in.shard->dim;
    int64_t full = in.shard->globalShape[size_t(dim)];
    int64_t chunk = t.size(dim);
    int64_t start = std::min(index * chunk, full);
    int64_t length = std::min(chunk, full - start);
    parameters.emplace_back(name, t.narrow(dim, 0, length));
    slices[name] = {dim, start, length};
  }
  std::set<std::string> elsewhere;
  for (const Program &other : a.programs)
    if (&other != &program)
      for (const InputSpec &in : other.inputs)
        if (in.role != InputRole::Input && program.findInput(in.name) < 0)
          elsewhere.insert(in.name);
  return compareWithSlices(parameters, session.buffers(), session.constants(),
                           reference, rtol, atol, slices, elsewhere,
                           session.rank());
}

} // namespace loomrt
