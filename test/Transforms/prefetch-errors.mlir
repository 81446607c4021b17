// RUN: not loom-opt %s --split-input-file --loom-prefetch="backward-prefetch=early" 2>&1 | FileCheck %s --check-prefix=MODE
// RUN: not loom-opt %s --split-input-file --loom-prefetch="forward-prefetch=-1" 2>&1 | FileCheck %s --check-prefix=NEG
// RUN: not loom-opt %s --split-input-file --loom-prefetch="forward-targets=a" 2>&1 | FileCheck %s --check-prefix=SYNTAX
// RUN: not loom-opt %s --split-input-file --loom-prefetch="backward-targets=b:" 2>&1 | FileCheck %s --check-prefix=SYNTAX2
// RUN: not loom-opt %s --split-input-file --loom-prefetch="forward-targets=a:b+" 2>&1 | FileCheck %s --check-prefix=EMPTY
// RUN: not loom-opt %s --split-input-file --loom-prefetch="forward-targets=a:c" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not loom-opt %s --split-input-file --loom-prefetch="backward-targets=<root>:a" 2>&1 | FileCheck %s --check-prefix=ROOT
// RUN: not loom-opt %s --split-input-file --loom-prefetch="forward-targets=a:a" 2>&1 | FileCheck %s --check-prefix=SELF
// RUN: not loom-opt %s --split-input-file --loom-prefetch="forward-targets=a:b,a:b" 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: loom-opt %s --split-input-file --loom-prefetch="forward-prefetch=1" -verify-diagnostics

// An unknown mode fails when the options are parsed, naming the known ones;
// the other option errors point at the step.
// MODE: for the --backward-prefetch option: 'early' is not one of bounded, pre, post, none
// NEG: error: 'func.func' op --loom-prefetch: forward-prefetch -1 is negative
// SYNTAX: error: 'func.func' op --loom-prefetch: forward-targets entry 'a' is not 'UNIT:T1+T2'
// SYNTAX2: error: 'func.func' op --loom-prefetch: backward-targets entry 'b:' is not 'UNIT:T1+T2'
// EMPTY: error: 'func.func' op --loom-prefetch: forward-targets entry 'a:b+' has an empty target
// UNKNOWN: error: 'func.func' op --loom-prefetch: unit 'c' has no collective in this step (units: a, b)
// ROOT: error: 'func.func' op --loom-prefetch: unit '<root>' has no collective in this step (units: a, b)
// SELF: error: 'func.func' op --loom-prefetch: forward-targets entry 'a:a' makes unit 'a' prefetch itself
// TWICE: error: 'func.func' op --loom-prefetch: forward-targets lists unit 'a' twice
loom.mesh @dp shape [2] axes ["shard"]
func.func @step(%wa: tensor<2x4xf32> {loom.name = "a.weight", loom.role = #loom.role<parameter>},
                %wb: tensor<2x4xf32> {loom.name = "b.weight", loom.role = #loom.role<parameter>},
                %x: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>}) attributes {loom.step} {
  %fa = loom.aten "aten::view.default"(%wa) {args = [#loom.arg<0>, [8]], loom.module = "a", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<8xf32>
  %sa = loom.all_gather_start %fa on @dp axes ["shard"] dim 0 {loom.module = "a", loom.phase = #loom.phase<forward>} : tensor<8xf32> -> !loom.future<tensor<16xf32>>
  %ga = loom.wait %sa {loom.module = "a", loom.phase = #loom.phase<forward>} : !loom.future<tensor<16xf32>> -> tensor<16xf32>
  %va = loom.aten "aten::view.default"(%ga) {args = [#loom.arg<0>, [4, 4]], loom.module = "a", loom.phase = #loom.phase<forward>} : (tensor<16xf32>) -> tensor<4x4xf32>
  %ha = loom.aten "aten::mm.default"(%x, %va) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "a", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  // b's gathered input is computed from a random op after a's pre-forward
  // point: random ops never move, so the start stays where it is.
  // expected-note@+1 {{this op}}
  %nb = loom.aten "aten::rand_like.default"(%wb) {args = [#loom.arg<0>], loom.module = "b", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %fb = loom.aten "aten::view.default"(%nb) {args = [#loom.arg<0>, [8]], loom.module = "b", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<8xf32>
  // expected-warning@+1 {{--loom-prefetch: cannot issue the all-gather of unit 'b' at unit 'a''s prefetch point: its input depends on an op computed later}}
  %sb = loom.all_gather_start %fb on @dp axes ["shard"] dim 0 {loom.module = "b", loom.phase = #loom.phase<forward>} : tensor<8xf32> -> !loom.future<tensor<16xf32>>
  %gb = loom.wait %sb {loom.module = "b", loom.phase = #loom.phase<forward>} : !loom.future<tensor<16xf32>> -> tensor<16xf32>
  %vb = loom.aten "aten::view.default"(%gb) {args = [#loom.arg<0>, [4, 4]], loom.module = "b", loom.phase = #loom.phase<forward>} : (tensor<16xf32>) -> tensor<4x4xf32>
  %hb = loom.aten "aten::mm.default"(%ha, %vb) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "b", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %l = loom.aten "aten::sum.default"(%hb) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A start without a phase cannot be placed relative to the hooks.
loom.mesh @dp shape [2] axes ["shard"]
func.func @step(%wa: tensor<2x4xf32> {loom.name = "a.weight", loom.role = #loom.role<parameter>})
    -> (tensor<16xf32> {loom.role = #loom.role<loss>}) attributes {loom.step} {
  %fa = loom.aten "aten::view.default"(%wa) {args = [#loom.arg<0>, [8]], loom.module = "a", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<8xf32>
  // expected-error@+1 {{--loom-prefetch: an all-gather needs a 'loom.phase' and exactly one loom.wait}}
  %sa = loom.all_gather_start %fa on @dp axes ["shard"] dim 0 {loom.module = "a"} : tensor<8xf32> -> !loom.future<tensor<16xf32>>
  %ga = loom.wait %sa : !loom.future<tensor<16xf32>> -> tensor<16xf32>
  return %ga : tensor<16xf32>
}
