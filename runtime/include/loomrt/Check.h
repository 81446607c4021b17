//===- Check.h - Compare a run with PyTorch eager's reference -*- C++ -*-===//
//
// A capture writes `reference.json` (losses per step, tied-parameter
// aliases) and `reference.safetensors` (parameters and buffers after the
// eager run). These helpers implement loom-run --check's comparisons so that
// tests and other drivers apply the same tolerances.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_CHECK_H
#define LOOMRT_CHECK_H

#include "loomrt/Session.h"

#include <map>
#include <string>
#include <vector>

namespace loomrt {

struct Reference {
  std::string jsonPath;
  /// reference.safetensors in the same directory.
  std::string tensorsPath;
  std::vector<double> losses;
  /// alias -> canonical name (reference.json "tied_parameters"); the
  /// reference tensors hold only the canonical name.
  std::map<std::string, std::string> tiedParameters;

  static Reference load(const std::string &jsonPath);
};

struct LossComparison {
  double got = 0;
  double want = 0;
  double relError = 0; // |got - want| / |want|
  bool ok = false;
};

/// ok iff |got - want| <= max(atol, rtol * |want|) (NaN never matches).
LossComparison compareLoss(double got, double want, double rtol = 1e-5,
                           double atol = 0);

struct TensorComparison {
  std::string name;          // the session's name
  std::string referenceName; // the name in reference.safetensors
  std::string role;          // "parameter", "buffer", "constant"
  /// max over elements of |a - b| / max(1, |b|). Elements equal (including
  /// equal infinities and NaN in both) score 0; a NaN in only one scores
  /// infinity.
  double score = 0;
  double maxAbsDiff = 0;
  /// The share of the tolerance used: max over elements of |a - b| /
  /// max(atol, rtol * |b|) (0 for equal elements, infinity for a difference
  /// where the allowance is 0). ok iff this is <= 1.
  double toleranceUsed = 0;
  /// Elements with |a - b| > max(atol, rtol * |b|), of `numel`.
  int64_t failing = 0;
  int64_t numel = 0;
  /// The element that used the most of its tolerance: |a - b| and |b|.
  double worstDiff = 0;
  double worstRef = 0;
  bool ok = false;
  /// Why the tensors could not be compared (missing, dtype or shape), or
  /// empty.
  std::string problem;
  /// For a rank's shard: which part of the reference tensor it was compared
  /// with ("rows 2 to 4 of dim 0"); empty for a whole tensor.
  std::string slice;
};

/// Compares every parameter and buffer of `session` with the reference
/// tensors (resolving tied aliases), plus constants the reference holds,
/// and reports reference tensors that match nothing. An element passes when
/// |a - b| <= max(atol, rtol * |b|); the defaults give loom-run's
/// 1e-5 * max(1, |b|).
std::vector<TensorComparison> compareTensors(const Session &session,
                                             const Reference &reference,
                                             double rtol = 1e-5,
                                             double atol = 1e-5);
/// The same on given tensors, e.g. a multi-rank session's fullParameters()
/// (which every rank must gather together before rank 0 compares).
std::vector<TensorComparison>
compareTensors(const NamedTensors &parameters, const NamedTensors &buffers,
               const NamedTensors &constants, const Reference &reference,
               double rtol = 1e-5, double atol = 1e-5);

/// What one rank of a multi-rank session holds, compared with the
/// reference without any collective: replicated parameters, buffers and
/// constants whole, and each sharded parameter's shard (padding dropped)
/// against the matching slice of the reference tensor. Every rank calls it
/// on its own; on one rank it is compareTensors(session, ...).
std::vector<TensorComparison> compareRankTensors(const Session &session,
                                                 const Reference &reference,
                                                 double rtol = 1e-5,
                                                 double atol = 1e-5);

} // namespace loomrt

#endif // LOOMRT_CHECK_H
