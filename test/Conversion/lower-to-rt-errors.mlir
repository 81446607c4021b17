// RUN: loom-opt %s --split-input-file --verify-diagnostics --loom-lower-to-rt

// expected-error@+1 {{no step function (func.func with 'loom.step') to lower}}
module {
  func.func @f() {
    return
  }
}

// -----

// expected-error@+1 {{has no loss result; the runtime's step() returns the loss, so a compiled step needs one}}
func.func @step(%w: tensor<4xf32> {loom.name = "w", loom.role = #loom.role<parameter>})
    -> (tensor<4xf32> {loom.role = #loom.role<grad>, loom.target = "w"}) attributes {loom.step} {
  return %w : tensor<4xf32>
}

// -----

// expected-error@+1 {{the loss (result #0) must be a 0-d tensor, got 'tensor<4xf32>'}}
func.func @step(%w: tensor<4xf32> {loom.name = "w", loom.role = #loom.role<parameter>})
    -> (tensor<4xf32> {loom.role = #loom.role<loss>}) attributes {loom.step} {
  return %w : tensor<4xf32>
}

// -----

// expected-error@+1 {{step result #1 has role output, which artifact format v1 cannot return (it returns the loss, gradients and buffer mutations)}}
func.func @step(%x: tensor<f32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>}, tensor<f32> {loom.role = #loom.role<output>}) attributes {loom.step} {
  return %x, %x : tensor<f32>, tensor<f32>
}

// -----

// expected-error@+1 {{step argument 'x' has element type 'ui16', which artifact format v1 has no dtype for}}
func.func @step(%x: tensor<ui16> {loom.name = "x", loom.role = #loom.role<input>}, %l: tensor<f32> {loom.name = "l", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>}) attributes {loom.step} {
  return %l : tensor<f32>
}

// -----

func.func @step(%x: tensor<4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>}) attributes {loom.step} {
  // expected-error@+1 {{result #0 has element type 'f8E4M3FN', which artifact format v1 has no dtype for}}
  %c = loom.aten "aten::_to_copy.default"(%x) {args = [#loom.arg<0>], kwargs = {dtype = f8E4M3FN}} : (tensor<4xf32>) -> tensor<4xf8E4M3FN>
  %l = loom.aten "aten::sum.default"(%x) {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

func.func @step(%x: tensor<4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>}) attributes {loom.step} {
  // expected-error@+1 {{'loom.aten' op unknown device 'tpu' (expected cpu, cuda or cuda:N)}}
  %c = loom.aten "aten::_to_copy.default"(%x) {args = [#loom.arg<0>], kwargs = {device = "tpu"}} : (tensor<4xf32>) -> tensor<4xf32>
  %l = loom.aten "aten::sum.default"(%x) {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

func.func @step(%x: tensor<4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>}) attributes {loom.step} {
  // expected-error@+1 {{'loom.aten' op argument [[1, 2]] nests lists, which no ATen schema takes}}
  %c = loom.aten "aten::fake.default"(%x) {args = [#loom.arg<0>, [[1, 2]]]} : (tensor<4xf32>) -> tensor<4xf32>
  %l = loom.aten "aten::sum.default"(%x) {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

func.func @step(%x: tensor<4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>}) attributes {loom.step} {
  // expected-error@+1 {{kernel 'aten::sum' has no overload; the runtime looks operators up by name and overload}}
  %l = loom.aten "aten::sum"(%x) {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A pipeline's steps are MPMD programs: two may not run the same rank.
loom.mesh @pp shape [4] axes ["pp"]
// expected-note@+1 {{the other program}}
func.func @stage0(%x: tensor<4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    attributes {loom.step, loom.program_ranks = array<i64: 0, 1>} {
  %f = loom.send_start %x on @pp axes ["pp"] peer 2 tag 0 : tensor<4xf32> -> !loom.future<none>
  loom.wait %f : !loom.future<none>
  return
}
// expected-error@+1 {{runs on rank 1, which @stage0 runs too; each rank runs one program}}
func.func @stage1(%x: tensor<4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>})
    attributes {loom.step, loom.program_ranks = array<i64: 1, 2, 3>} {
  %f = loom.recv_start on @pp axes ["pp"] peer 0 tag 0 : !loom.future<tensor<4xf32>>
  %y = loom.wait %f : !loom.future<tensor<4xf32>> -> tensor<4xf32>
  %l = loom.aten "aten::sum.default"(%y) {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Every rank of the mesh runs one of the programs.
loom.mesh @pp shape [3] axes ["pp"]
// expected-error@+1 {{rank 2 of mesh @pp runs no program; the steps' 'loom.program_ranks' must cover every rank}}
func.func @stage0(%x: tensor<4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    attributes {loom.step, loom.program_ranks = array<i64: 0>} {
  %f = loom.send_start %x on @pp axes ["pp"] peer 1 tag 0 : tensor<4xf32> -> !loom.future<none>
  loom.wait %f : !loom.future<none>
  return
}
func.func @stage1(%x: tensor<4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>})
    attributes {loom.step, loom.program_ranks = array<i64: 1>} {
  %f = loom.recv_start on @pp axes ["pp"] peer 0 tag 0 : !loom.future<tensor<4xf32>>
  %y = loom.wait %f : !loom.future<tensor<4xf32>> -> tensor<4xf32>
  %l = loom.aten "aten::sum.default"(%y) {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// The programs of a step share one mesh.
loom.mesh @a shape [2] axes ["pp"]
loom.mesh @b shape [2] axes ["pp"]
func.func @stage0(%x: tensor<4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    attributes {loom.step, loom.program_ranks = array<i64: 0>} {
  %f = loom.send_start %x on @a axes ["pp"] peer 1 tag 0 : tensor<4xf32> -> !loom.future<none>
  loom.wait %f : !loom.future<none>
  return
}
// expected-error@+1 {{runs on mesh @b but @stage0 on @a; the programs of a step share one mesh}}
func.func @stage1(%x: tensor<4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>})
    attributes {loom.step, loom.program_ranks = array<i64: 1>} {
  %f = loom.recv_start on @b axes ["pp"] peer 0 tag 0 : !loom.future<tensor<4xf32>>
  %y = loom.wait %f : !loom.future<tensor<4xf32>> -> tensor<4xf32>
  %l = loom.aten "aten::sum.default"(%y) {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A module is one SPMD step or MPMD steps only.
loom.mesh @pp shape [2] axes ["pp"]
func.func @stage0(%x: tensor<4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    attributes {loom.step, loom.program_ranks = array<i64: 0, 1>} {
  return
}
// expected-error@+1 {{has no 'loom.program_ranks' but the module's other steps are MPMD programs; say which ranks run it}}
func.func @stage1(%x: tensor<4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>}) attributes {loom.step} {
  %l = loom.aten "aten::sum.default"(%x) {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// An artifact runs on one mesh.
loom.mesh @dp shape [2] axes ["dp"]
loom.mesh @other shape [2] axes ["dp"]
// expected-note@+1 {{the first use of @dp}}
func.func @step(%x: tensor<4xf32> {loom.name = "x", loom.role = #loom.role<input>, loom.split = #loom.split<@dp, axes = ["dp"], dim = 0>})
    -> (tensor<f32> {loom.role = #loom.role<loss>}) attributes {loom.step} {
  // expected-error@+1 {{uses mesh @other but the step already uses @dp; an artifact runs on one mesh}}
  %f = loom.all_reduce_start %x on @other axes ["dp"] reduce <sum> : tensor<4xf32> -> !loom.future<tensor<4xf32>>
  %y = loom.wait %f : !loom.future<tensor<4xf32>> -> tensor<4xf32>
  %l = loom.aten "aten::sum.default"(%y) {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

func.func @step(%w: tensor<4xf32> {loom.name = "w", loom.role = #loom.role<parameter>},
                %v: tensor<4xf32> {loom.name = "v", loom.role = #loom.role<parameter>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<4xf32> {loom.role = #loom.role<param_update>, loom.target = "w"},
        tensor<4xf32> {loom.role = #loom.role<param_update>, loom.target = "v"})
    attributes {loom.step} {
  %l = loom.aten "aten::sum.default"(%w) {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<f32>
  // expected-note@+1 {{the first update}}
  %w1 = loom.optimizer_update #loom.sgd<> param %w grad %w : tensor<4xf32>
  // expected-error@+1 {{uses #loom.sgd<dampening = 0.5> but the step uses #loom.sgd<>; the artifact has one optimizer configuration (a parameter group may change only lr and weight_decay)}}
  %v1 = loom.optimizer_update #loom.sgd<dampening = 0.5> param %v grad %v : tensor<4xf32>
  return %l, %w1, %v1 : tensor<f32>, tensor<4xf32>, tensor<4xf32>
}

// -----

func.func @step(%w: tensor<4xf32> {loom.name = "w", loom.role = #loom.role<parameter>})
    -> (tensor<f32> {loom.role = #loom.role<loss>})
    attributes {loom.step, loom.optimizer = #loom.adamw<>} {
  %l = loom.aten "aten::sum.default"(%w) {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<f32>
  // expected-error@+1 {{uses #loom.sgd<> but the step uses #loom.adamw<>; the artifact has one optimizer configuration (a parameter group may change only lr and weight_decay)}}
  %w1 = loom.optimizer_update #loom.sgd<> param %w grad %w : tensor<4xf32>
  return %l : tensor<f32>
}

// -----

func.func @step(%w: tensor<4xf32> {loom.name = "w", loom.role = #loom.role<parameter>})
    -> (tensor<f32> {loom.role = #loom.role<loss>}) attributes {loom.step} {
  %l = loom.aten "aten::sum.default"(%w) {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<f32>
  %c = loom.aten "aten::neg.default"(%w) {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<4xf32>
  // expected-error@+1 {{must update a parameter argument of the step, which the runtime updates in place}}
  %w1 = loom.optimizer_update #loom.sgd<> param %c grad %w : tensor<4xf32>
  return %l : tensor<f32>
}

// -----

func.func @step(%w: tensor<4xf32> {loom.name = "w", loom.role = #loom.role<parameter>},
                %v: tensor<4xf32> {loom.name = "v", loom.role = #loom.role<parameter>},
                %m: tensor<4xf32> {loom.name = "v.momentum_buffer", loom.role = #loom.role<optimizer_state>, loom.target = "v"})
    -> (tensor<f32> {loom.role = #loom.role<loss>}) attributes {loom.step} {
  %l = loom.aten "aten::sum.default"(%w) {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<f32>
  // expected-error@+1 {{state #0 must be an optimizer_state argument of 'w'}}
  %w1:2 = loom.optimizer_update #loom.sgd<momentum = 0.9> param %w grad %w state [%m] : tensor<4xf32>
  return %l : tensor<f32>
}

// -----

func.func @step(%w: tensor<4xf32> {loom.name = "w", loom.role = #loom.role<parameter>},
                %g: tensor<4xf32> {loom.name = "g", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>}) attributes {loom.step} {
  // expected-note@+1 {{the update}}
  %w1 = loom.optimizer_update #loom.sgd<> param %w grad %g : tensor<4xf32>
  // expected-error@+1 {{reads 'w' after its optimizer update, which writes it in place}}
  %l = loom.aten "aten::sum.default"(%w) {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

func.func @step(%w: tensor<4xf32> {loom.name = "w", loom.role = #loom.role<parameter>},
                %g: tensor<4xf32> {loom.name = "g", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>}) attributes {loom.step} {
  %w1 = loom.optimizer_update #loom.sgd<> param %w grad %g : tensor<4xf32>
  // expected-error@+1 {{uses an updated parameter or optimizer state, which after lowering exists only in place of the old one}}
  %l = loom.aten "aten::sum.default"(%w1) {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error@+1 {{step result #1 (param_update) must be what a loom.optimizer_update makes of 'w', because the runtime updates it in place}}
func.func @step(%w: tensor<4xf32> {loom.name = "w", loom.role = #loom.role<parameter>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<4xf32> {loom.role = #loom.role<param_update>, loom.target = "w"}) attributes {loom.step} {
  %l = loom.aten "aten::sum.default"(%w) {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<f32>
  %n = loom.aten "aten::neg.default"(%w) {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<4xf32>
  return %l, %n : tensor<f32>, tensor<4xf32>
}
