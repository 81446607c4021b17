//===- Microbatches.cpp - loom-fsdp's unshard/reshard per microbatch ------===//
//
// Each microbatch in order, as FSDP2's hooks run: a unit is all-gathered
// before its first forward use unless it is still unsharded, resharded
// after forward when it reshards after forward, gathered again before its
// backward if so, and resharded after backward unless
// reshard-after-backward=false keeps it unsharded for the next microbatch
// (the last microbatch always reshards).
//
//===----------------------------------------------------------------------===//

#include "Fsdp.h"

using namespace mlir;
using namespace loom;
using namespace loom::fsdp;

Microbatches Microbatches::find(Block &body) {
  Microbatches found;
  for (Operation &op : body)
    if (std::optional<int64_t> mb = getMicrobatch(&op)) {
      found.tagged = true;
      found.count = std::max(found.count, *mb + 1);
    }
  return found;
}

std::optional<int64_t> Microbatches::of(Operation *op) const {
  if (!tagged)
    return 0;
  return getMicrobatch(op);
}

LogicalResult fsdp::unshardPerMicrobatch(ShardingState &s) {
  Unsharded unsharded;
  unsharded.params.resize(s.units.size());
  unsharded.flat.resize(s.units.size());
  findPostBackwardCalls(s);
  // Each microbatch's ops, in order, taken once before any gather: what the
  // pass adds before a microbatch's backward reads them (its forward's
  // gathers, other microbatches' recomputed values) is neither computed
  // from that microbatch's gathered parameters nor its backward.
  std::vector<SmallVector<Operation *>> opsOf(s.microbatches.count);
  for (Operation &op : s.body())
    if (std::optional<int64_t> mb = s.microbatches.of(&op))
      opsOf[*mb].push_back(&op);
  for (int64_t mb = 0; mb < s.microbatches.count; ++mb) {
    ForwardGathers forward = gatherForForward(s, mb, unsharded);
    FailureOr<BackwardGathers> backward =
        gatherForBackward(s, mb, opsOf[mb], forward);
    if (failed(backward))
      return failure();
    reshardAfterBackward(s, mb, *backward, unsharded);
  }
  return success();
}
