// RUN: loom-opt %s --split-input-file --verify-diagnostics

// expected-error@+1 {{world_size must be at least 1, got 0}}
loomrt.program "step" rank 0 world_size 0 streams ["compute"] {
  loomrt.return
}

// -----

// expected-error@+1 {{rank 2 is out of range for world_size 2}}
loomrt.program "step" rank 2 world_size 2 streams ["compute"] {
  loomrt.return
}

// -----

// expected-error@+1 {{must name at least one stream}}
loomrt.program "step" rank 0 world_size 1 streams [] {
  loomrt.return
}

// -----

// expected-error@+1 {{stream names must not be empty}}
loomrt.program "step" rank 0 world_size 1 streams [""] {
  loomrt.return
}

// -----

// expected-error@+1 {{stream 'compute' is named twice}}
loomrt.program "step" rank 0 world_size 1 streams ["compute", "compute"] {
  loomrt.return
}

// -----

// expected-error@+1 {{slots must not be negative, got -1}}
loomrt.program "step" rank 0 world_size 1 streams ["compute"] slots -1 {
  loomrt.return
}

// -----

// expected-error@+1 {{the program's block takes no arguments}}
"loomrt.program"() <{step_name = "step", rank = 0 : i64, world_size = 1 : i64, streams = ["compute"]}> ({
^bb0(%a: tensor<f32>):
  loomrt.return
}) : () -> ()

// -----

func.func @f() {
  // expected-error@+1 {{expects parent op 'builtin.module'}}
  loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
    loomrt.return
  }
  return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<4xf32>
  %a = loomrt.aten "aten::neg.default"(%x) stream 0 {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<4xf32>
  // expected-error@+1 {{bindings must come before the program's first instruction}}
  %y = loomrt.input "y" role <input> batch_index 1 : tensor<4xf32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<f32>
  loomrt.output %x role <loss> : tensor<f32>
  // expected-error@+1 {{instructions must come before the program's outputs}}
  %a = loomrt.aten "aten::neg.default"(%x) stream 0 {args = [#loom.arg<0>]} : (tensor<f32>) -> tensor<f32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<f32>
  // expected-error@+1 {{is not a loomrt instruction; a program holds only loomrt bindings, instructions and outputs}}
  %a = loom.aten "aten::neg.default"(%x) {args = [#loom.arg<0>]} : (tensor<f32>) -> tensor<f32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<f32>
  // expected-error@+1 {{batch_index 0 is bound twice (also by 'x')}}
  %y = loomrt.input "y" role <input> batch_index 0 : tensor<f32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
  %x = loomrt.input "x" role <parameter> : tensor<f32>
  // expected-error@+1 {{binding name 'x' is used twice}}
  %y = loomrt.input "x" role <buffer> : tensor<f32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] optimizer #loom.adam<> {
  %b = loomrt.input "b" role <buffer> : tensor<4xf32>
  // expected-error@+1 {{belongs to 'b', which is not a parameter binding}}
  %m = loomrt.state "b.exp_avg" param "b" init <zeros> : tensor<4xf32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] optimizer #loom.adam<> {
  %w = loomrt.input "w" role <parameter> : tensor<4xf32>
  // expected-error@+1 {{init initial_accumulator_value needs the program's optimizer to be #loom.adagrad}}
  %m = loomrt.state "w.exp_avg" param "w" init <initial_accumulator_value> : tensor<4xf32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] optimizer #loom.adam<> {
  %w = loomrt.input "w" role <parameter> : tensor<4xf32>
  // expected-error@+1 {{has type 'tensor<2xf32>' but its parameter 'w' has type 'tensor<4xf32>'}}
  %m = loomrt.state "w.exp_avg" param "w" init <zeros> : tensor<2xf32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<f32>
  loomrt.output %x role <loss> : tensor<f32>
  // expected-error@+1 {{a program has at most one loss output}}
  loomrt.output %x role <loss> : tensor<f32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
  %w = loomrt.input "w" role <parameter> : tensor<4xf32>
  // expected-error@+1 {{targets 'w', which is not a buffer binding}}
  loomrt.output %w role <buffer_mutation> target "w" : tensor<4xf32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
  %w = loomrt.input "w" role <parameter> : tensor<4xf32>
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<2xf32>
  // expected-error@+1 {{has type 'tensor<2xf32>' but 'w' has type 'tensor<4xf32>'}}
  loomrt.output %x role <grad> target "w" : tensor<2xf32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
  %w = loomrt.input "w" role <parameter> : tensor<4xf32>
  loomrt.output %w role <grad> target "w" : tensor<4xf32>
  // expected-error@+1 {{a second grad output for 'w'}}
  loomrt.output %w role <grad> target "w" : tensor<4xf32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] optimizer #loom.sgd<> {
  %w = loomrt.input "w" role <parameter> : tensor<4xf32>
  %g = loomrt.input "g" role <input> batch_index 0 : tensor<4xf32>
  %h = loomrt.input "h" role <input> batch_index 1 : tensor<4xf32>
  // A second update of one parameter reads it after the first.
  // expected-error@+1 {{'loomrt.optimizer' op updates 'w' (parameter) in place, but 'loomrt.optimizer' reads it afterwards}}
  loomrt.optimizer %w grad %g stream 0 : tensor<4xf32>
  // expected-note@+1 {{the later use}}
  loomrt.optimizer %w grad %h stream 0 : tensor<4xf32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
  // expected-error@+1 {{has a slot, but the program's slots are not assigned (no 'slots' on loomrt.program)}}
  %w = loomrt.input "w" role <parameter> slot 0 : tensor<4xf32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] slots 1 {
  // expected-error@+1 {{slot 1 is out of range (the program has 1 slots)}}
  %w = loomrt.input "w" role <parameter> slot 1 : tensor<4xf32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] slots 2 {
  // expected-note@+1 {{the value in the slot is defined here}}
  %x = loomrt.input "x" role <input> batch_index 0 slot 0 : tensor<4xf32>
  // expected-error@+1 {{writes slot 0, which still holds 'x' (input); free it first}}
  %a = loomrt.aten "aten::neg.default"(%x) stream 0 slots [0] {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<4xf32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] slots 2 {
  // expected-error@+1 {{has no slot, but the program's slots are assigned}}
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<4xf32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] slots 2 {
  %x = loomrt.input "x" role <input> batch_index 0 slot 0 : tensor<4xf32>
  // expected-error@+1 {{has no 'slots', but the program's slots are assigned}}
  %a = loomrt.aten "aten::neg.default"(%x) stream 0 {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<4xf32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] slots 2 {
  %x = loomrt.input "x" role <input> batch_index 0 slot 0 : tensor<f32>
  // expected-error@+1 {{result #0 is read but has no slot}}
  %a = loomrt.aten "aten::neg.default"(%x) stream 0 slots [-1] {args = [#loom.arg<0>]} : (tensor<f32>) -> tensor<f32>
  loomrt.output %a role <loss> : tensor<f32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
  // expected-error@+1 {{role must be parameter, buffer, constant or input, got loss}}
  %x = loomrt.input "x" role <loss> : tensor<f32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
  // expected-error@+1 {{binding name must not be empty}}
  %x = loomrt.input "" role <parameter> : tensor<f32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
  // expected-error@+1 {{an input binding needs the 'batch_index' of its batch element}}
  %x = loomrt.input "x" role <input> : tensor<f32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
  // expected-error@+1 {{only bindings of role input take a 'batch_index'}}
  %x = loomrt.input "x" role <buffer> batch_index 0 : tensor<f32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
  // expected-error@+1 {{batch_index must not be negative, got -1}}
  %x = loomrt.input "x" role <input> batch_index -1 : tensor<f32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] slots 1 {
  // expected-error@+1 {{slot must not be negative, got -2}}
  %x = loomrt.input "x" role <parameter> slot -2 : tensor<f32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
  // expected-error@+1 {{element type 'f8E4M3FN' is not a dtype of artifact format v1}}
  %x = loomrt.input "x" role <parameter> : tensor<4xf8E4M3FN>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
  %w = loomrt.input "w" role <parameter> : tensor<4xf32>
  // expected-error@+1 {{state and parameter names must not be empty}}
  %m = loomrt.state "" param "w" init <zeros> : tensor<4xf32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
  %w = loomrt.input "w" role <parameter> : tensor<4xi64>
  // expected-error@+1 {{optimizer state must be a floating-point tensor, got 'tensor<4xi64>'}}
  %m = loomrt.state "w.m" param "w" init <zeros> : tensor<4xi64>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
  %w = loomrt.input "w" role <parameter> : tensor<4xf32>
  // expected-error@+1 {{role must be loss, grad or buffer_mutation, got output}}
  loomrt.output %w role <output> : tensor<4xf32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<f32>
  // expected-error@+1 {{a loss output has no target}}
  loomrt.output %x role <loss> target "x" : tensor<f32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<2xf32>
  // expected-error@+1 {{the loss must be a 0-d tensor, got 'tensor<2xf32>'}}
  loomrt.output %x role <loss> : tensor<2xf32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
  %w = loomrt.input "w" role <parameter> : tensor<4xf32>
  // expected-error@+1 {{a grad output needs the 'target' it updates}}
  loomrt.output %w role <grad> : tensor<4xf32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<4xf32>
  // expected-error@+1 {{kernel 'aten::neg' is not a schema name with an overload like 'aten::mm.default'}}
  %a = loomrt.aten "aten::neg"(%x) stream 0 {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<4xf32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<4xf32>
  // expected-error@+1 {{stream 1 is out of range: the program has 1 stream(s)}}
  %a = loomrt.aten "aten::neg.default"(%x) stream 1 {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<4xf32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<4xf32>
  // expected-error@+1 {{argument refers to operand #1 but the op has 1 operands}}
  %a = loomrt.aten "aten::neg.default"(%x) stream 0 {args = [#loom.arg<1>]} : (tensor<4xf32>) -> tensor<4xf32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<4xf32>
  // expected-error@+1 {{list argument mixes element kinds}}
  %a = loomrt.aten "aten::fake.default"(%x) stream 0 {args = [#loom.arg<0>, [1, 2.0]]} : (tensor<4xf32>) -> tensor<4xf32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<4xf32>
  // expected-error@+1 {{integer argument 1 : i32 must be an i64}}
  %a = loomrt.aten "aten::fake.default"(%x) stream 0 {args = [#loom.arg<0>, 1 : i32]} : (tensor<4xf32>) -> tensor<4xf32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<4xf32>
  // expected-error@+1 {{float argument 1.000000e+00 : f32 must be an f64}}
  %a = loomrt.aten "aten::fake.default"(%x) stream 0 {args = [#loom.arg<0>, 1.0 : f32]} : (tensor<4xf32>) -> tensor<4xf32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<4xf32>
  // expected-error@+1 {{dtype argument 'ui16' is not a dtype of artifact format v1}}
  %a = loomrt.aten "aten::fake.default"(%x) stream 0 {args = [#loom.arg<0>], kwargs = {dtype = ui16}} : (tensor<4xf32>) -> tensor<4xf32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<4xf32>
  // expected-error@+1 {{argument [1] is not an ATen argument loomrt can encode}}
  %a = loomrt.aten "aten::fake.default"(%x) stream 0 {args = [#loom.arg<0>, [[1]]]} : (tensor<4xf32>) -> tensor<4xf32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<4xf32>
  // expected-error@+1 {{operand #0 is referenced 2 times by the argument list, expected exactly once}}
  %a = loomrt.aten "aten::mul.Tensor"(%x) stream 0 {args = [#loom.arg<0>, #loom.arg<0>]} : (tensor<4xf32>) -> tensor<4xf32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<4xf32>
  // expected-error@+1 {{'returns' entry 2 : i64 is not the index of one of the 1 results}}
  %a = loomrt.aten "aten::fake.default"(%x) stream 0 {args = [#loom.arg<0>], returns = [2]} : (tensor<4xf32>) -> tensor<4xf32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<4xf32>
  // expected-error@+1 {{result #0 appears 2 times in 'returns'}}
  %a = loomrt.aten "aten::fake.default"(%x) stream 0 {args = [#loom.arg<0>], returns = [0, [0]]} : (tensor<4xf32>) -> tensor<4xf32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<4xf32>
  // expected-error@+1 {{result type 'tensor<4xui16>' has no dtype in artifact format v1}}
  %a = loomrt.aten "aten::fake.default"(%x) stream 0 {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<4xui16>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] slots 4 {
  %x = loomrt.input "x" role <input> batch_index 0 slot 0 : tensor<4xf32>
  // expected-error@+1 {{has 2 slots for 1 results}}
  %a = loomrt.aten "aten::neg.default"(%x) stream 0 slots [1, 2] {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<4xf32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] slots 4 {
  %x = loomrt.input "x" role <input> batch_index 0 slot 0 : tensor<4xf32>
  // expected-error@+1 {{slot -3 is invalid (a slot, or -1 for no slot)}}
  %a = loomrt.aten "aten::neg.default"(%x) stream 0 slots [-3] {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<4xf32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] slots 4 {
  %x = loomrt.input "x" role <input> batch_index 0 slot 0 : tensor<4xf32>
  // expected-error@+1 {{slot 1 receives two results}}
  %a:2 = loomrt.aten "aten::fake.default"(%x) stream 0 slots [1, 1] {args = [#loom.arg<0>]} : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<4xf32>
  // expected-error@+1 {{frees nothing}}
  "loomrt.free"() <{stream = 0 : i64}> : () -> ()
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<4xf32>
  // expected-error@+1 {{frees 'x' (input) twice}}
  loomrt.free %x, %x stream 0 : tensor<4xf32>, tensor<4xf32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
  %w = loomrt.input "w" role <parameter> : tensor<4xf32>
  // expected-error@+1 {{frees 'w' (parameter), which the runtime keeps across steps}}
  loomrt.free %w stream 0 : tensor<4xf32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] optimizer #loom.adam<> {
  %w = loomrt.input "w" role <parameter> : tensor<4xf32>
  %m = loomrt.state "w.exp_avg" param "w" init <zeros> : tensor<4xf32>
  // expected-error@+1 {{frees 'w.exp_avg' (optimizer state), which the runtime keeps across steps}}
  loomrt.free %m stream 0 : tensor<4xf32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<4xf32>
  // expected-error@+1 {{frees 'x' (input), which 'loomrt.aten' uses afterwards}}
  loomrt.free %x stream 0 : tensor<4xf32>
  // expected-note@+1 {{the later use}}
  %a = loomrt.aten "aten::neg.default"(%x) stream 0 {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<4xf32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<4xf32>
  // expected-error@+1 {{stream 3 is out of range: the program has 1 stream(s)}}
  loomrt.free %x stream 3 : tensor<4xf32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
  %w = loomrt.input "w" role <parameter> : tensor<4xf32>
  %g = loomrt.input "g" role <input> batch_index 0 : tensor<4xf32>
  // expected-error@+1 {{needs the program's 'optimizer' (the algorithm and hyperparameters it applies)}}
  loomrt.optimizer %w grad %g stream 0 : tensor<4xf32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] optimizer #loom.sgd<> {
  %w = loomrt.input "w" role <parameter> : tensor<4xf32>
  %g = loomrt.input "g" role <input> batch_index 0 : tensor<2xf32>
  // expected-error@+1 {{gradient type 'tensor<2xf32>' differs from parameter type 'tensor<4xf32>'}}
  "loomrt.optimizer"(%w, %g) <{stream = 0 : i64}> : (tensor<4xf32>, tensor<2xf32>) -> ()
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] optimizer #loom.sgd<> {
  %b = loomrt.input "b" role <buffer> : tensor<4xf32>
  %g = loomrt.input "g" role <input> batch_index 0 : tensor<4xf32>
  // expected-error@+1 {{updates 'b' (buffer); it must update a parameter binding (loomrt.input role <parameter>) in place}}
  loomrt.optimizer %b grad %g stream 0 : tensor<4xf32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] optimizer #loom.adamw<> {
  %w = loomrt.input "w" role <parameter> : tensor<4xf32>
  %g = loomrt.input "g" role <input> batch_index 0 : tensor<4xf32>
  %m = loomrt.state "w.exp_avg" param "w" init <zeros> : tensor<4xf32>
  // expected-error@+1 {{#loom.adamw keeps 2 state tensors per parameter (exp_avg, exp_avg_sq), got 1}}
  loomrt.optimizer %w grad %g state [%m] stream 0 : tensor<4xf32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] optimizer #loom.sgd<momentum = 0.9> {
  %w = loomrt.input "w" role <parameter> : tensor<4xf32>
  %v = loomrt.input "v" role <parameter> : tensor<4xf32>
  %g = loomrt.input "g" role <input> batch_index 0 : tensor<4xf32>
  %m = loomrt.state "v.momentum_buffer" param "v" init <zeros> : tensor<4xf32>
  // expected-error@+1 {{state #0 (momentum_buffer) must be optimizer state of 'w', got 'v.momentum_buffer' (optimizer state)}}
  loomrt.optimizer %w grad %g state [%m] stream 0 : tensor<4xf32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] optimizer #loom.sgd<momentum = 0.9> {
  %w = loomrt.input "w" role <parameter> : tensor<4xf32>
  %g = loomrt.input "g" role <input> batch_index 0 : tensor<4xf32>
  %m = loomrt.state "w.momentum_buffer" param "w" init <zeros> : tensor<2xf32>
  // expected-error@+1 {{state #0 has type 'tensor<2xf32>', expected the parameter type 'tensor<4xf32>'}}
  "loomrt.optimizer"(%w, %g, %m) <{stream = 0 : i64}> : (tensor<4xf32>, tensor<4xf32>, tensor<2xf32>) -> ()
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] optimizer #loom.sgd<> {
  %w = loomrt.input "w" role <parameter> : tensor<4xf32>
  %g = loomrt.input "g" role <input> batch_index 0 : tensor<4xf32>
  // expected-error@+1 {{updates 'w' (parameter) in place, but 'loomrt.aten' reads it afterwards}}
  loomrt.optimizer %w grad %g stream 0 : tensor<4xf32>
  // expected-note@+1 {{the later use}}
  %a = loomrt.aten "aten::neg.default"(%w) stream 0 {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<4xf32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute", "comm"] {
  // expected-error@+1 {{stream 2 is out of range: the program has 2 stream(s)}}
  %e = loomrt.record_event stream 2
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute", "comm"] {
  %e = loomrt.record_event stream 1
  // expected-error@+1 {{stream 1 waits for an event recorded on the same stream; an event orders work across streams}}
  loomrt.wait_event %e stream 1
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute", "comm"] {
  %e = loomrt.record_event stream 1
  // expected-error@+1 {{stream -1 is out of range: the program has 2 stream(s)}}
  loomrt.wait_event %e stream -1
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<4xf32>
  // expected-error@+1 {{unknown device 'tpu' (expected cpu, cuda or cuda:N)}}
  %a = loomrt.aten "aten::fake.default"(%x) stream 0 {args = [#loom.arg<0>], kwargs = {device = #loomrt.device<"tpu">}} : (tensor<4xf32>) -> tensor<4xf32>
  loomrt.return
}

// -----

func.func @f(%x: tensor<4xf32>) {
  // expected-error@+1 {{expects parent op 'loomrt.program'}}
  loomrt.free %x stream 0 : tensor<4xf32>
  return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute", "comm"] {
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<4xf32>
  // expected-error@+1 {{all_reduce needs 'reduce'}}
  %f = loomrt.collective_start <all_reduce> %x axes ["dp"] stream 1 : tensor<4xf32> -> !loomrt.future<tensor<4xf32>>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute", "comm"] {
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<4xf32>
  // expected-error@+1 {{all_gather takes no 'reduce'}}
  %f = loomrt.collective_start <all_gather> %x axes ["dp"] dim 0 reduce <sum> stream 1 : tensor<4xf32> -> !loomrt.future<tensor<8xf32>>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute", "comm"] {
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<4xf32>
  // expected-error@+1 {{broadcast needs 'root'}}
  %f = loomrt.collective_start <broadcast> %x axes ["dp"] stream 1 : tensor<4xf32> -> !loomrt.future<tensor<4xf32>>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute", "comm"] {
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<4xf32>
  // expected-error@+1 {{names no mesh axis}}
  %f = loomrt.collective_start <all_reduce> %x axes [] reduce <sum> stream 1 : tensor<4xf32> -> !loomrt.future<tensor<4xf32>>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute", "comm"] {
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<4xf32>
  // expected-error@+1 {{result 'tensor<8xf32>' differs from the input 'tensor<4xf32>' in dimension 0, which all_reduce does not change}}
  %f = loomrt.collective_start <all_reduce> %x axes ["dp"] reduce <sum> stream 1 : tensor<4xf32> -> !loomrt.future<tensor<8xf32>>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute", "comm"] {
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<2x4xf32>
  // expected-error@+1 {{dim 2 is out of range for 'tensor<2x4xf32>'}}
  %f = loomrt.collective_start <all_gather> %x axes ["dp"] dim 2 stream 1 : tensor<2x4xf32> -> !loomrt.future<tensor<2x4xf32>>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute"] {
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<4xf32>
  // expected-error@+1 {{stream 1 is out of range: the program has 1 stream(s)}}
  %f = loomrt.collective_start <all_reduce> %x axes ["dp"] reduce <sum> stream 1 : tensor<4xf32> -> !loomrt.future<tensor<4xf32>>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute", "comm"] {
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<4xf32>
  // expected-error@+1 {{future is waited 2 times; wait exactly once}}
  %f = loomrt.collective_start <all_reduce> %x axes ["dp"] reduce <sum> stream 1 : tensor<4xf32> -> !loomrt.future<tensor<4xf32>>
  %a = loomrt.wait %f stream 1 : !loomrt.future<tensor<4xf32>> -> tensor<4xf32>
  %b = loomrt.wait %f stream 1 : !loomrt.future<tensor<4xf32>> -> tensor<4xf32>
  loomrt.return
}

// -----

loomrt.program "step" rank 0 world_size 1 streams ["compute", "comm"] {
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<4xf32>
  %f = loomrt.collective_start <all_reduce> %x axes ["dp"] reduce <sum> stream 1 : tensor<4xf32> -> !loomrt.future<tensor<4xf32>>
  // expected-error@+1 {{result type 'tensor<4xf64>' is not the future's value type 'tensor<4xf32>'}}
  %a = loomrt.wait %f stream 1 : !loomrt.future<tensor<4xf32>> -> tensor<4xf64>
  loomrt.return
}

// -----

// A collective reads its input until its wait.
loomrt.program "step" rank 0 world_size 1 streams ["compute", "comm"] {
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<4xf32>
  %y = loomrt.aten "aten::neg.default"(%x) stream 0 {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<4xf32>
  %f = loomrt.collective_start <all_reduce> %y axes ["dp"] reduce <sum> stream 1 : tensor<4xf32> -> !loomrt.future<tensor<4xf32>>
  // expected-error@+1 {{frees a result of 'loomrt.aten' before the wait of the collective that reads it}}
  loomrt.free %y stream 1 : tensor<4xf32>
  // expected-note@+1 {{the wait}}
  %a = loomrt.wait %f stream 1 : !loomrt.future<tensor<4xf32>> -> tensor<4xf32>
  loomrt.return
}

// -----

// A future holds its slot until its wait.
loomrt.program "step" rank 0 world_size 1 streams ["compute", "comm"] slots 3 {
  %x = loomrt.input "x" role <input> batch_index 0 slot 0 : tensor<4xf32>
  // expected-note@+1 {{the value in the slot is defined here}}
  %f = loomrt.collective_start <all_reduce> %x axes ["dp"] reduce <sum> stream 1 slot 1 : tensor<4xf32> -> !loomrt.future<tensor<4xf32>>
  // expected-error@+1 {{writes slot 1, which still holds a result of 'loomrt.collective_start'; free it first}}
  %y = loomrt.aten "aten::neg.default"(%x) stream 0 slots [1] {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<4xf32>
  %a = loomrt.wait %f stream 1 slot 2 : !loomrt.future<tensor<4xf32>> -> tensor<4xf32>
  loomrt.return
}

// -----

loom.mesh @dp shape [4] axes ["dp"]
// expected-error@+1 {{world_size 2 differs from the 4 ranks of mesh @dp}}
loomrt.program "step" rank 0 world_size 2 mesh @dp streams ["compute"] {
  loomrt.return
}

// -----

// expected-error@+1 {{mesh @nope does not name a loom.mesh}}
loomrt.program "step" rank 0 world_size 2 mesh @nope streams ["compute"] {
  loomrt.return
}

// -----

loom.mesh @dp shape [2] axes ["dp"]
loomrt.program "step" rank 0 world_size 2 mesh @dp streams ["compute"] {
  // expected-error@+1 {{only bindings of role input are split over ranks}}
  %w = loomrt.input "w" role <parameter> split <@dp, axes = ["dp"], dim = 0> : tensor<4xf32>
  loomrt.return
}

// -----

loom.mesh @dp shape [2] axes ["dp"]
loomrt.program "step" rank 0 world_size 2 mesh @dp streams ["compute"] {
  %w = loomrt.input "w" role <parameter> : tensor<4xf32>
  %b = loomrt.input "b" role <buffer> : tensor<4xf32>
  // expected-error@+1 {{only the loss is partial over ranks}}
  loomrt.output %w role <buffer_mutation> target "b" partial <@dp, axes = ["dp"], avg> : tensor<4xf32>
  loomrt.return
}

// -----

loom.mesh @pp shape [2] axes ["pp"]
loomrt.program "stage1" rank 0 world_size 2 mesh @pp ranks [1] streams ["compute", "comm"] {
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<4xf32>
  // expected-error@+1 {{recv takes no input}}
  %f = loomrt.collective_start <recv> %x axes ["pp"] peer 0 tag 0 stream 1 : tensor<4xf32> -> !loomrt.future<tensor<4xf32>>
  %a = loomrt.wait %f stream 1 : !loomrt.future<tensor<4xf32>> -> tensor<4xf32>
  loomrt.return
}

// -----

loom.mesh @pp shape [2] axes ["pp"]
loomrt.program "stage1" rank 0 world_size 2 mesh @pp ranks [1] streams ["compute", "comm"] {
  // expected-error@+1 {{all_reduce needs an input}}
  %f = loomrt.collective_start <all_reduce> axes ["pp"] reduce <sum> stream 1 : !loomrt.future<tensor<4xf32>>
  %a = loomrt.wait %f stream 1 : !loomrt.future<tensor<4xf32>> -> tensor<4xf32>
  loomrt.return
}

// -----

loom.mesh @pp shape [2] axes ["pp"]
loomrt.program "stage0" rank 0 world_size 2 mesh @pp ranks [0] streams ["compute", "comm"] {
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<4xf32>
  // expected-error@+1 {{send needs 'tag'}}
  %f = loomrt.collective_start <send> %x axes ["pp"] peer 1 stream 1 : tensor<4xf32> -> !loomrt.future<none>
  loomrt.wait %f stream 1 : !loomrt.future<none>
  loomrt.return
}

// -----

loom.mesh @pp shape [2] axes ["pp"]
loomrt.program "stage0" rank 0 world_size 2 mesh @pp ranks [0] streams ["compute", "comm"] {
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<4xf32>
  // expected-error@+1 {{all_reduce takes no 'peer'}}
  %f = loomrt.collective_start <all_reduce> %x axes ["pp"] reduce <sum> peer 1 stream 1 : tensor<4xf32> -> !loomrt.future<tensor<4xf32>>
  %a = loomrt.wait %f stream 1 : !loomrt.future<tensor<4xf32>> -> tensor<4xf32>
  loomrt.return
}

// -----

loom.mesh @pp shape [2] axes ["pp"]
loomrt.program "stage0" rank 0 world_size 2 mesh @pp ranks [0] streams ["compute", "comm"] {
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<4xf32>
  // expected-error@+1 {{tag must be in [0, 2^31), got -1}}
  %f = loomrt.collective_start <send> %x axes ["pp"] peer 1 tag -1 stream 1 : tensor<4xf32> -> !loomrt.future<none>
  loomrt.wait %f stream 1 : !loomrt.future<none>
  loomrt.return
}

// -----

loom.mesh @pp shape [2] axes ["pp"]
loomrt.program "stage0" rank 0 world_size 2 mesh @pp ranks [0] streams ["compute", "comm"] {
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<4xf32>
  // expected-error@+1 {{send completes as !loomrt.future<none>, got '!loomrt.future<tensor<4xf32>>'}}
  %f = loomrt.collective_start <send> %x axes ["pp"] peer 1 tag 0 stream 1 : tensor<4xf32> -> !loomrt.future<tensor<4xf32>>
  %a = loomrt.wait %f stream 1 : !loomrt.future<tensor<4xf32>> -> tensor<4xf32>
  loomrt.return
}

// -----

loom.mesh @pp shape [2] axes ["pp"]
loomrt.program "stage0" rank 0 world_size 2 mesh @pp ranks [0] streams ["compute", "comm"] {
  %x = loomrt.input "x" role <input> batch_index 0 : tensor<4xf32>
  %f = loomrt.collective_start <send> %x axes ["pp"] peer 1 tag 0 stream 1 : tensor<4xf32> -> !loomrt.future<none>
  // expected-error@+1 {{waiting on !loomrt.future<none> (a send) yields no value}}
  %a = loomrt.wait %f stream 1 : !loomrt.future<none> -> tensor<4xf32>
  loomrt.return
}

// -----

loom.mesh @pp shape [2] axes ["pp"]
loomrt.program "stage0" rank 0 world_size 2 mesh @pp ranks [0] streams ["compute", "comm"] slots 2 {
  %x = loomrt.input "x" role <input> batch_index 0 slot 0 : tensor<4xf32>
  %f = loomrt.collective_start <send> %x axes ["pp"] peer 1 tag 0 stream 1 slot 1 : tensor<4xf32> -> !loomrt.future<none>
  // expected-error@+1 {{frees 'x' (input) before the wait of the collective that reads it}}
  loomrt.free %x stream 0 : tensor<4xf32>
  // expected-note@+1 {{the wait}}
  loomrt.wait %f stream 1 : !loomrt.future<none>
  loomrt.return
}

// -----

// expected-error@+1 {{lists 'ranks' but has no mesh}}
loomrt.program "stage0" rank 0 world_size 2 ranks [0] streams ["compute"] {
  loomrt.return
}

// -----

loom.mesh @pp shape [2] axes ["pp"]
// expected-error@+1 {{rank 2 in 'ranks' is out of range for world_size 2}}
loomrt.program "stage0" rank 0 world_size 2 mesh @pp ranks [0, 2] streams ["compute"] {
  loomrt.return
}

// -----

loom.mesh @pp shape [4] axes ["pp"]
// expected-error@+1 {{'ranks' must be strictly increasing, got 1 before 1}}
loomrt.program "stage0" rank 0 world_size 4 mesh @pp ranks [1, 1] streams ["compute"] {
  loomrt.return
}

// -----

// expected-error@+1 {{a future holds a ranked tensor or none (a send's completion), got 'i32'}}
func.func private @f() -> !loomrt.future<i32>
