// RUN: loom-opt %s --split-input-file --loom-schedule="device=%S/../Analysis/Inputs/round-device.json" | FileCheck %s
// RUN: loom-opt %s --split-input-file --loom-schedule="device=%S/../Analysis/Inputs/round-device.json" | FileCheck %s --check-prefix=ORDER
// RUN: loom-opt %s --split-input-file --loom-schedule="device=%S/../Analysis/Inputs/round-device.json report=true" -o /dev/null 2>&1 | FileCheck %s --check-prefix=REPORT
// RUN: loom-opt %s --split-input-file --loom-schedule="device=%S/../Analysis/Inputs/round-device.json memory-limit=344064" | FileCheck %s --check-prefix=LIMIT
// RUN: loom-opt %s --split-input-file --loom-schedule="device=%S/../Analysis/Inputs/round-device.json memory-limit=344064 report=true" -o /dev/null 2>&1 | FileCheck %s --check-prefix=LIMIT-REPORT
// RUN: loom-opt %s --split-input-file --loom-schedule="device=%S/../Analysis/Inputs/round-device.json memory-limit=344064" > %t.bounds
// RUN: loom-opt %s --split-input-file --loom-schedule="device=%S/../Analysis/Inputs/round-device.json memory-limit=344064 sweep-every-check=true" > %t.sweep
// RUN: diff %t.bounds %t.sweep

// loom-schedule treats a recompute region as one node: its body is never
// split or reordered, its time is its body's, and the memory limit counts
// the body's transient peak.
//
// In backward, a region recomputes s = add(m, relu(m)) with m = mm(x, a);
// then an all-gather brings the unit's weight for the mm that reads s. On
// Inputs/round-device.json (4 ranks in one node; [128, 128] f32 tensors of
// 65536 B):
//   region: mm 5.194304 + relu 2.31072 + add 2.96608 = 10.471104 us
//   all-gather of 65536 B over 4 ranks: 3 * 1 + 3/4 * 65536 / 1e10 s
//     = 7.9152 us
//   mm: 5.194304 us
// Program order: 10.471104 + 7.9152 (all exposed) + 5.194304 = 23.580608
// us. Scheduled, the gather starts first and hides behind the region:
// 10.471104 + 5.194304 = 15.665408 us, nothing exposed.
//
// Memory: the weight's shard (16384 B), x and a (65536 B each) are
// persistent, 147456 B. In program order the region's body peaks at its add
// with m, relu(m) and s live (196608 B); the final mm holds s, the gathered
// weight and its result (196608 B): 147456 + 196608 = 344064 B. Gathering
// before the region adds the gathered 65536 B to the body's transient:
// 147456 + 262144 = 409600 B. Counting the region as its result alone
// (65536 B) would miss that and let the gather move under the limit.

// REPORT-LABEL: === loom-schedule @step on round ===
// REPORT-NEXT:   program order:  step 23.581 us, exposed communication 7.915 us, peak 344064 B
// REPORT-NEXT:   scheduled:      step 15.665 us, exposed communication 0.000 us, peak 409600 B
// REPORT-NEXT:   kept:           scheduled (limit none, max-in-flight 2)

// CHECK-LABEL: func.func @step
// CHECK:      %[[F:.*]] = loom.all_gather_start %arg0
// CHECK-NEXT: %[[S:.*]] = loom.recompute "blk" (%arg1, %arg2)
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<128x128xf32>, %[[A:.*]]: tensor<128x128xf32>):
// CHECK-NEXT:   %[[M:.*]] = loom.aten "aten::mm.default"(%[[X]], %[[A]])
// CHECK-NEXT:   %[[R:.*]] = loom.aten "aten::relu.default"(%[[M]])
// CHECK-NEXT:   %[[SUM:.*]] = loom.aten "aten::add.Tensor"(%[[M]], %[[R]])
// CHECK-NEXT:   loom.yield %[[SUM]]
// CHECK-NEXT: }
// CHECK-NEXT: %[[G:.*]] = loom.wait %[[F]]
// CHECK-NEXT: loom.aten "aten::mm.default"(%[[S]], %[[G]])

// LIMIT-REPORT-LABEL: === loom-schedule @step on round ===
// LIMIT-REPORT-NEXT:   program order:  step 23.581 us, exposed communication 7.915 us, peak 344064 B
// LIMIT-REPORT-NEXT:   scheduled:      step 23.581 us, exposed communication 7.915 us, peak 344064 B
// LIMIT-REPORT-NEXT:   kept:           program order (limit 344064 B, max-in-flight 2)
// The lower bound refuses the prefetch without a sweep: the gathered buffer
// would be live from the start through the region, whose step already
// reaches the limit.
// LIMIT-REPORT-NEXT:   memory checks:  1 admitted and 1 refused by the bounds, 0 swept

// LIMIT-LABEL: func.func @step
// LIMIT:      %[[S:.*]] = loom.recompute "blk"
// LIMIT:      loom.yield
// LIMIT-NEXT: }
// LIMIT-NEXT: %[[F:.*]] = loom.all_gather_start %arg0
// LIMIT-NEXT: %[[G:.*]] = loom.wait %[[F]]

!t = tensor<128x128xf32>
loom.mesh @dp shape [4] axes ["shard"]
func.func @step(%w: tensor<32x128xf32> {loom.name = "blk.out.weight", loom.role = #loom.role<parameter>},
                %x: !t {loom.name = "x", loom.role = #loom.role<input>},
                %a: !t {loom.name = "blk.weight", loom.role = #loom.role<parameter>})
    -> (!t {loom.role = #loom.role<loss>})
    attributes {loom.step} {
  %s = loom.recompute "blk" (%x, %a) : (!t, !t) -> !t {
  ^bb0(%bx: !t, %ba: !t):
    %m = loom.aten "aten::mm.default"(%bx, %ba) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "blk", loom.phase = #loom.phase<forward>} : (!t, !t) -> !t
    %r = loom.aten "aten::relu.default"(%m) {args = [#loom.arg<0>], loom.module = "blk", loom.phase = #loom.phase<forward>} : (!t) -> !t
    %sum = loom.aten "aten::add.Tensor"(%m, %r) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "blk", loom.phase = #loom.phase<forward>} : (!t, !t) -> !t
    loom.yield %sum : !t
  } {loom.module = "blk", loom.phase = #loom.phase<backward>}
  %f = loom.all_gather_start %w on @dp axes ["shard"] dim 0 {loom.module = "blk", loom.phase = #loom.phase<backward>} : tensor<32x128xf32> -> !loom.future<!t>
  %g = loom.wait %f {loom.module = "blk", loom.phase = #loom.phase<backward>} : !loom.future<!t> -> !t
  %y = loom.aten "aten::mm.default"(%s, %g) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "blk", loom.phase = #loom.phase<backward>} : (!t, !t) -> !t
  return %y : !t
}

// -----

// A region may yield a view of its input (here the transposed weight). An
// optimizer update writes that weight in place, so every reader of the view
// runs before the update, as for a view made outside a region. Here the
// reader %y waits on a slow all-reduce while the update's gradient is
// ready early: without the edge through the region the scheduler would run
// the update first and %y would read the updated weight.

// ORDER-LABEL: func.func @update
// ORDER: %[[T:.*]] = loom.recompute "blk" (%arg0)
// ORDER: %[[Y:.*]] = loom.aten "aten::mm.default"(%{{.*}}, %[[T]])
// ORDER: loom.optimizer_update #loom.sgd<> param %arg0
// ORDER-NOT: %[[T]]

!t = tensor<128x128xf32>
loom.mesh @dp shape [4] axes ["dp"]
func.func @update(%w: !t {loom.name = "blk.weight", loom.role = #loom.role<parameter>},
                  %x: !t {loom.name = "x", loom.role = #loom.role<input>})
    -> (!t {loom.role = #loom.role<loss>}, !t {loom.role = #loom.role<param_update>, loom.target = "blk.weight"})
    attributes {loom.step, loom.optimizer = #loom.sgd<>} {
  %t = loom.recompute "blk" (%w) : (!t) -> !t {
  ^bb0(%bw: !t):
    %bt = loom.aten "aten::t.default"(%bw) {args = [#loom.arg<0>], loom.module = "blk", loom.phase = #loom.phase<forward>} : (!t) -> !t
    loom.yield %bt : !t
  } {loom.module = "blk", loom.phase = #loom.phase<backward>}
  %f = loom.all_reduce_start %x on @dp axes ["dp"] reduce <avg> {loom.module = "blk", loom.phase = #loom.phase<backward>} : !t -> !loom.future<!t>
  %r = loom.wait %f {loom.module = "blk", loom.phase = #loom.phase<backward>} : !loom.future<!t> -> !t
  %y = loom.aten "aten::mm.default"(%r, %t) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "blk", loom.phase = #loom.phase<backward>} : (!t, !t) -> !t
  %g = loom.aten "aten::mul.Tensor"(%x, %x) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "blk", loom.phase = #loom.phase<backward>} : (!t, !t) -> !t
  %w1 = loom.optimizer_update #loom.sgd<> param %w grad %g {loom.module = "blk", loom.phase = #loom.phase<optimizer>} : !t
  return %y, %w1 : !t, !t
}
