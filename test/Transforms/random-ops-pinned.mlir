// RUN: loom-opt %s --split-input-file --loom-prefetch="forward-prefetch=1" -verify-diagnostics | FileCheck %s --check-prefix=PREFETCH
// RUN: loom-opt %s --split-input-file --loom-bucket="bucket-bytes=1000" | FileCheck %s --check-prefix=BUCKET

// Ops that draw random numbers never move: loom-schedule keeps them in
// program order, and loom-prefetch and loom-bucket, which move the ops that
// compute a collective's input, must not move them either (all three ask
// isRandomAtenOp). In each case unit b's all-gather input is computed by a
// random op after unit a's pre-forward prefetch point, so the prefetch is
// refused and the two all-gathers are not bucketed. The last case is the
// control: a deterministic op there moves, and the two all-gathers merge.
// PREFETCH-LABEL: func.func @native_dropout(
// PREFETCH: loom.all_gather_start {{.*}}loom.module = "a"
// PREFETCH: loom.aten "aten::mm.default"
// PREFETCH: loom.all_gather_start {{.*}}loom.module = "b"
// BUCKET-LABEL: func.func @native_dropout(
// BUCKET-COUNT-2: loom.all_gather_start {{.*}} : tensor<8xf32> -> !loom.future<tensor<16xf32>>
// BUCKET-NOT: loom.all_gather_start
loom.mesh @dp shape [2] axes ["shard"]
func.func @native_dropout(%wa: tensor<2x4xf32> {loom.name = "a.weight", loom.role = #loom.role<parameter>},
                %wb: tensor<2x4xf32> {loom.name = "b.weight", loom.role = #loom.role<parameter>},
                %x: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>}) attributes {loom.step} {
  %fa = loom.aten "aten::view.default"(%wa) {args = [#loom.arg<0>, [8]], loom.module = "a", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<8xf32>
  %sa = loom.all_gather_start %fa on @dp axes ["shard"] dim 0 {loom.module = "a", loom.phase = #loom.phase<forward>} : tensor<8xf32> -> !loom.future<tensor<16xf32>>
  %ga = loom.wait %sa {loom.module = "a", loom.phase = #loom.phase<forward>} : !loom.future<tensor<16xf32>> -> tensor<16xf32>
  %va = loom.aten "aten::view.default"(%ga) {args = [#loom.arg<0>, [4, 4]], loom.module = "a", loom.phase = #loom.phase<forward>} : (tensor<16xf32>) -> tensor<4x4xf32>
  %ha = loom.aten "aten::mm.default"(%x, %va) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "a", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  // expected-note@+1 {{this op}}
  %nb, %mb = loom.aten "aten::native_dropout.default"(%wb) {args = [#loom.arg<0>, 5.000000e-01, true], loom.module = "b", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xi1>)
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

// PREFETCH-LABEL: func.func @normal(
// PREFETCH: loom.all_gather_start {{.*}}loom.module = "a"
// PREFETCH: loom.aten "aten::mm.default"
// PREFETCH: loom.all_gather_start {{.*}}loom.module = "b"
// BUCKET-LABEL: func.func @normal(
// BUCKET-COUNT-2: loom.all_gather_start {{.*}} : tensor<8xf32> -> !loom.future<tensor<16xf32>>
// BUCKET-NOT: loom.all_gather_start
loom.mesh @dp shape [2] axes ["shard"]
func.func @normal(%wa: tensor<2x4xf32> {loom.name = "a.weight", loom.role = #loom.role<parameter>},
                %wb: tensor<2x4xf32> {loom.name = "b.weight", loom.role = #loom.role<parameter>},
                %x: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>}) attributes {loom.step} {
  %fa = loom.aten "aten::view.default"(%wa) {args = [#loom.arg<0>, [8]], loom.module = "a", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<8xf32>
  %sa = loom.all_gather_start %fa on @dp axes ["shard"] dim 0 {loom.module = "a", loom.phase = #loom.phase<forward>} : tensor<8xf32> -> !loom.future<tensor<16xf32>>
  %ga = loom.wait %sa {loom.module = "a", loom.phase = #loom.phase<forward>} : !loom.future<tensor<16xf32>> -> tensor<16xf32>
  %va = loom.aten "aten::view.default"(%ga) {args = [#loom.arg<0>, [4, 4]], loom.module = "a", loom.phase = #loom.phase<forward>} : (tensor<16xf32>) -> tensor<4x4xf32>
  %ha = loom.aten "aten::mm.default"(%x, %va) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "a", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  // expected-note@+1 {{this op}}
  %nb = loom.aten "aten::normal.Tensor_float"(%wb) {args = [#loom.arg<0>, 1.000000e+00], loom.module = "b", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
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

// PREFETCH-LABEL: func.func @uniform(
// PREFETCH: loom.all_gather_start {{.*}}loom.module = "a"
// PREFETCH: loom.aten "aten::mm.default"
// PREFETCH: loom.all_gather_start {{.*}}loom.module = "b"
// BUCKET-LABEL: func.func @uniform(
// BUCKET-COUNT-2: loom.all_gather_start {{.*}} : tensor<8xf32> -> !loom.future<tensor<16xf32>>
// BUCKET-NOT: loom.all_gather_start
loom.mesh @dp shape [2] axes ["shard"]
func.func @uniform(%wa: tensor<2x4xf32> {loom.name = "a.weight", loom.role = #loom.role<parameter>},
                %wb: tensor<2x4xf32> {loom.name = "b.weight", loom.role = #loom.role<parameter>},
                %x: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>}) attributes {loom.step} {
  %fa = loom.aten "aten::view.default"(%wa) {args = [#loom.arg<0>, [8]], loom.module = "a", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<8xf32>
  %sa = loom.all_gather_start %fa on @dp axes ["shard"] dim 0 {loom.module = "a", loom.phase = #loom.phase<forward>} : tensor<8xf32> -> !loom.future<tensor<16xf32>>
  %ga = loom.wait %sa {loom.module = "a", loom.phase = #loom.phase<forward>} : !loom.future<tensor<16xf32>> -> tensor<16xf32>
  %va = loom.aten "aten::view.default"(%ga) {args = [#loom.arg<0>, [4, 4]], loom.module = "a", loom.phase = #loom.phase<forward>} : (tensor<16xf32>) -> tensor<4x4xf32>
  %ha = loom.aten "aten::mm.default"(%x, %va) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "a", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  // expected-note@+1 {{this op}}
  %nb = loom.aten "aten::uniform.default"(%wb) {args = [#loom.arg<0>, 0.000000e+00, 1.000000e+00], loom.module = "b", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
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

// PREFETCH-LABEL: func.func @exponential(
// PREFETCH: loom.all_gather_start {{.*}}loom.module = "a"
// PREFETCH: loom.aten "aten::mm.default"
// PREFETCH: loom.all_gather_start {{.*}}loom.module = "b"
// BUCKET-LABEL: func.func @exponential(
// BUCKET-COUNT-2: loom.all_gather_start {{.*}} : tensor<8xf32> -> !loom.future<tensor<16xf32>>
// BUCKET-NOT: loom.all_gather_start
loom.mesh @dp shape [2] axes ["shard"]
func.func @exponential(%wa: tensor<2x4xf32> {loom.name = "a.weight", loom.role = #loom.role<parameter>},
                %wb: tensor<2x4xf32> {loom.name = "b.weight", loom.role = #loom.role<parameter>},
                %x: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>}) attributes {loom.step} {
  %fa = loom.aten "aten::view.default"(%wa) {args = [#loom.arg<0>, [8]], loom.module = "a", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<8xf32>
  %sa = loom.all_gather_start %fa on @dp axes ["shard"] dim 0 {loom.module = "a", loom.phase = #loom.phase<forward>} : tensor<8xf32> -> !loom.future<tensor<16xf32>>
  %ga = loom.wait %sa {loom.module = "a", loom.phase = #loom.phase<forward>} : !loom.future<tensor<16xf32>> -> tensor<16xf32>
  %va = loom.aten "aten::view.default"(%ga) {args = [#loom.arg<0>, [4, 4]], loom.module = "a", loom.phase = #loom.phase<forward>} : (tensor<16xf32>) -> tensor<4x4xf32>
  %ha = loom.aten "aten::mm.default"(%x, %va) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "a", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  // expected-note@+1 {{this op}}
  %nb = loom.aten "aten::exponential.default"(%wb) {args = [#loom.arg<0>, 1.000000e+00], loom.module = "b", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
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

// PREFETCH-LABEL: func.func @poisson(
// PREFETCH: loom.all_gather_start {{.*}}loom.module = "a"
// PREFETCH: loom.aten "aten::mm.default"
// PREFETCH: loom.all_gather_start {{.*}}loom.module = "b"
// BUCKET-LABEL: func.func @poisson(
// BUCKET-COUNT-2: loom.all_gather_start {{.*}} : tensor<8xf32> -> !loom.future<tensor<16xf32>>
// BUCKET-NOT: loom.all_gather_start
loom.mesh @dp shape [2] axes ["shard"]
func.func @poisson(%wa: tensor<2x4xf32> {loom.name = "a.weight", loom.role = #loom.role<parameter>},
                %wb: tensor<2x4xf32> {loom.name = "b.weight", loom.role = #loom.role<parameter>},
                %x: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>}) attributes {loom.step} {
  %fa = loom.aten "aten::view.default"(%wa) {args = [#loom.arg<0>, [8]], loom.module = "a", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<8xf32>
  %sa = loom.all_gather_start %fa on @dp axes ["shard"] dim 0 {loom.module = "a", loom.phase = #loom.phase<forward>} : tensor<8xf32> -> !loom.future<tensor<16xf32>>
  %ga = loom.wait %sa {loom.module = "a", loom.phase = #loom.phase<forward>} : !loom.future<tensor<16xf32>> -> tensor<16xf32>
  %va = loom.aten "aten::view.default"(%ga) {args = [#loom.arg<0>, [4, 4]], loom.module = "a", loom.phase = #loom.phase<forward>} : (tensor<16xf32>) -> tensor<4x4xf32>
  %ha = loom.aten "aten::mm.default"(%x, %va) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "a", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  // expected-note@+1 {{this op}}
  %nb = loom.aten "aten::poisson.default"(%wb) {args = [#loom.arg<0>], loom.module = "b", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
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

// The control: the backward of dropout replays its mask and draws nothing
// (a substring test for "dropout" took it for random), so b's gather input
// moves to a's prefetch point, and the two gathers merge into one.
// PREFETCH-LABEL: func.func @control(
// PREFETCH: loom.all_gather_start {{.*}}loom.module = "a"
// PREFETCH: loom.aten "aten::native_dropout_backward.default"
// PREFETCH: loom.all_gather_start {{.*}}loom.module = "b"
// PREFETCH: loom.aten "aten::mm.default"
// BUCKET-LABEL: func.func @control(
// BUCKET: loom.all_gather_start {{.*}} : tensor<16xf32> -> !loom.future<tensor<32xf32>>
// BUCKET-NOT: loom.all_gather_start
loom.mesh @dp shape [2] axes ["shard"]
func.func @control(%wa: tensor<2x4xf32> {loom.name = "a.weight", loom.role = #loom.role<parameter>},
                %wb: tensor<2x4xf32> {loom.name = "b.weight", loom.role = #loom.role<parameter>},
                %x: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>},
                %m: tensor<2x4xi1> {loom.name = "m", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>}) attributes {loom.step} {
  %fa = loom.aten "aten::view.default"(%wa) {args = [#loom.arg<0>, [8]], loom.module = "a", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<8xf32>
  %sa = loom.all_gather_start %fa on @dp axes ["shard"] dim 0 {loom.module = "a", loom.phase = #loom.phase<forward>} : tensor<8xf32> -> !loom.future<tensor<16xf32>>
  %ga = loom.wait %sa {loom.module = "a", loom.phase = #loom.phase<forward>} : !loom.future<tensor<16xf32>> -> tensor<16xf32>
  %va = loom.aten "aten::view.default"(%ga) {args = [#loom.arg<0>, [4, 4]], loom.module = "a", loom.phase = #loom.phase<forward>} : (tensor<16xf32>) -> tensor<4x4xf32>
  %ha = loom.aten "aten::mm.default"(%x, %va) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "a", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %nb = loom.aten "aten::native_dropout_backward.default"(%wb, %m) {args = [#loom.arg<0>, #loom.arg<1>, 2.000000e+00], loom.module = "b", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<2x4xi1>) -> tensor<2x4xf32>
  %fb = loom.aten "aten::view.default"(%nb) {args = [#loom.arg<0>, [8]], loom.module = "b", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<8xf32>
  %sb = loom.all_gather_start %fb on @dp axes ["shard"] dim 0 {loom.module = "b", loom.phase = #loom.phase<forward>} : tensor<8xf32> -> !loom.future<tensor<16xf32>>
  %gb = loom.wait %sb {loom.module = "b", loom.phase = #loom.phase<forward>} : !loom.future<tensor<16xf32>> -> tensor<16xf32>
  %vb = loom.aten "aten::view.default"(%gb) {args = [#loom.arg<0>, [4, 4]], loom.module = "b", loom.phase = #loom.phase<forward>} : (tensor<16xf32>) -> tensor<4x4xf32>
  %hb = loom.aten "aten::mm.default"(%ha, %vb) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "b", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %l = loom.aten "aten::sum.default"(%hb) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
