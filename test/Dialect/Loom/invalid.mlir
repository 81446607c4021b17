// RUN: loom-opt %s --split-input-file --verify-diagnostics

// expected-error@+1 {{mesh has 2 dimensions but 1 axis names}}
loom.mesh @m shape [2, 2] axes ["dp"]

// -----

// expected-error@+1 {{axis 'dp' has size 0, expected a positive size}}
loom.mesh @m shape [0] axes ["dp"]

// -----

// expected-error@+1 {{axis name 'dp' is used twice}}
loom.mesh @m shape [2, 2] axes ["dp", "dp"]

// -----

// expected-error@+1 {{mesh must have at least one axis}}
loom.mesh @m shape [] axes []

// -----

func.func @f() {
  // expected-error@+1 {{expects parent op 'builtin.module'}}
  loom.mesh @m shape [2] axes ["dp"]
  return
}

// -----

func.func @f(%a: tensor<2x4xf32>) {
  // expected-error@+1 {{kernel 'mm' is not a schema name like 'aten::mm.default'}}
  %0 = loom.aten "mm"(%a) {args = [#loom.arg<0>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @f(%a: tensor<2x4xf32>) {
  // expected-error@+1 {{argument refers to operand #1 but the op has 1 operands}}
  %0 = loom.aten "aten::relu.default"(%a) {args = [#loom.arg<1>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @f(%a: tensor<2x4xf32>) {
  // expected-error@+1 {{operand #0 is referenced 2 times by the argument list, expected exactly once}}
  %0 = loom.aten "aten::mul.Tensor"(%a) {args = [#loom.arg<0>, #loom.arg<0>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @f(%a: tensor<2x4xf32>) {
  // expected-error@+1 {{operand #0 is referenced 0 times by the argument list, expected exactly once}}
  %0 = loom.aten "aten::relu.default"(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @f(%a: tensor<2x4xf32>) {
  // expected-error@+1 {{is not a valid ATen argument value}}
  %0 = loom.aten "aten::relu.default"(%a) {args = [#loom.arg<0>, dense<1> : tensor<2xi32>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @f(%a: tensor<2x4xf32>, %b: tensor<5x8xf32>) {
  // expected-error@+1 {{contracting dimensions differ}}
  %0 = loom.aten "aten::mm.default"(%a, %b) {args = [#loom.arg<0>, #loom.arg<1>]} : (tensor<2x4xf32>, tensor<5x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @f(%a: tensor<2x4xf32>, %b: tensor<4x8xf32>) {
  // expected-error@+1 {{result #0 has shape 'tensor<2x9xf32>' but 'aten::mm.default' gives shape [2, 8] for these operands}}
  %0 = loom.aten "aten::mm.default"(%a, %b) {args = [#loom.arg<0>, #loom.arg<1>]} : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x9xf32>
  return
}

// -----

func.func @f(%a: tensor<2x4xf32>, %b: tensor<4x8xf32>) {
  // expected-error@+1 {{result #0 has element type 'bf16' but 'aten::mm.default' gives 'f32'}}
  %0 = loom.aten "aten::mm.default"(%a, %b) {args = [#loom.arg<0>, #loom.arg<1>]} : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xbf16>
  return
}

// -----

func.func @f(%a: tensor<2x4xf32>, %b: tensor<4x8xbf16>) {
  // expected-error@+1 {{operand element types differ: 'f32' vs 'bf16'}}
  %0 = loom.aten "aten::mm.default"(%a, %b) {args = [#loom.arg<0>, #loom.arg<1>]} : (tensor<2x4xf32>, tensor<4x8xbf16>) -> tensor<2x8xf32>
  return
}

// -----

func.func @f(%a: tensor<2x4xf32>, %b: tensor<3x4xf32>) {
  // expected-error@+1 {{operand shapes are not broadcastable: [2, 4] vs [3, 4]}}
  %0 = loom.aten "aten::add.Tensor"(%a, %b) {args = [#loom.arg<0>, #loom.arg<1>]} : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @f(%a: tensor<2x4xf32>) {
  // expected-error@+1 {{cannot view a tensor of 8 elements with 9 elements}}
  %0 = loom.aten "aten::view.default"(%a) {args = [#loom.arg<0>, [3, 3]]} : (tensor<2x4xf32>) -> tensor<3x3xf32>
  return
}

// -----

func.func @f(%a: tensor<2x4xf32>) {
  // expected-error@+1 {{dimension 3 is out of range for a rank-3 tensor}}
  %0 = loom.aten "aten::unsqueeze.default"(%a) {args = [#loom.arg<0>, 3]} : (tensor<2x4xf32>) -> tensor<2x4x1xf32>
  return
}

// -----

func.func @f(%a: tensor<2x4xf32>) {
  // expected-error@+1 {{result #0 has shape 'tensor<2x4xi1>'}}
  %0 = loom.aten "aten::sum.dim_IntList"(%a) {args = [#loom.arg<0>, [1], true]} : (tensor<2x4xf32>) -> tensor<2x4xi1>
  return
}

// -----

func.func @f(%a: tensor<2x4xf32>) {
  // expected-error@+1 {{'returns' entry 2 : i64 is not the index of one of the 2 results}}
  %0:2 = loom.aten "aten::native_dropout.default"(%a) {args = [#loom.arg<0>, 0.5, true], returns = [0, 2]} : (tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xi1>)
  return
}

// -----

func.func @f(%a: tensor<2x4xf32>) {
  // expected-error@+1 {{result #1 appears 0 times in 'returns'}}
  %0:2 = loom.aten "aten::native_dropout.default"(%a) {args = [#loom.arg<0>, 0.5, true], returns = [0, unit]} : (tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xi1>)
  return
}

// -----

func.func @f(%img: tensor<1x3x8x8xf32>, %k: tensor<6x4x3x3xf32>) {
  // expected-error@+1 {{convolution input has 3 channels but weight expects 4}}
  %0 = loom.aten "aten::convolution.default"(%img, %k) {args = [#loom.arg<0>, #loom.arg<1>, unit, [1, 1], [0, 0], [1, 1], false, [0, 0], 1]} : (tensor<1x3x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x6x6xf32>
  return
}

// -----

loom.mesh @dp shape [4] axes ["shard"]
func.func @f(%s: tensor<2x8xf32>) {
  // expected-error@+1 {{gathering dim 0 of size 2 over a group of 4 ranks gives 8, but the result has 6}}
  %f = loom.all_gather_start %s on @dp axes ["shard"] dim 0 : tensor<2x8xf32> -> !loom.future<tensor<6x8xf32>>
  %x = loom.wait %f : !loom.future<tensor<6x8xf32>> -> tensor<6x8xf32>
  return
}

// -----

loom.mesh @dp shape [4] axes ["shard"]
func.func @f(%s: tensor<2x8xf32>) {
  // expected-error@+1 {{result dimension 1 is 4 but input's is 8}}
  %f = loom.all_gather_start %s on @dp axes ["shard"] dim 0 : tensor<2x8xf32> -> !loom.future<tensor<8x4xf32>>
  %x = loom.wait %f : !loom.future<tensor<8x4xf32>> -> tensor<8x4xf32>
  return
}

// -----

loom.mesh @dp shape [4] axes ["shard"]
func.func @f(%s: tensor<2x8xf32>) {
  // expected-error@+1 {{result element type 'bf16' differs from input element type 'f32'}}
  %f = loom.all_gather_start %s on @dp axes ["shard"] dim 0 : tensor<2x8xf32> -> !loom.future<tensor<8x8xbf16>>
  %x = loom.wait %f : !loom.future<tensor<8x8xbf16>> -> tensor<8x8xbf16>
  return
}

// -----

loom.mesh @dp shape [4] axes ["shard"]
func.func @f(%s: tensor<2x8xf32>) {
  // expected-error@+1 {{dim 2 is out of range for a rank-2 tensor}}
  %f = loom.all_gather_start %s on @dp axes ["shard"] dim 2 : tensor<2x8xf32> -> !loom.future<tensor<2x8xf32>>
  %x = loom.wait %f : !loom.future<tensor<2x8xf32>> -> tensor<2x8xf32>
  return
}

// -----

loom.mesh @dp shape [4] axes ["shard"]
func.func @f(%s: tensor<2x8xf32>) {
  // expected-error@+1 {{mesh @dp has no axis 'tp' (axes: 'shard')}}
  %f = loom.all_gather_start %s on @dp axes ["tp"] dim 0 : tensor<2x8xf32> -> !loom.future<tensor<8x8xf32>>
  %x = loom.wait %f : !loom.future<tensor<8x8xf32>> -> tensor<8x8xf32>
  return
}

// -----

func.func @f(%s: tensor<2x8xf32>) {
  // expected-error@+1 {{'nomesh' does not name a loom.mesh}}
  %f = loom.all_gather_start %s on @nomesh axes ["shard"] dim 0 : tensor<2x8xf32> -> !loom.future<tensor<8x8xf32>>
  %x = loom.wait %f : !loom.future<tensor<8x8xf32>> -> tensor<8x8xf32>
  return
}

// -----

loom.mesh @hsdp shape [2, 2] axes ["replicate", "shard"]
func.func @f(%s: tensor<2x8xf32>) {
  // expected-error@+1 {{mesh axis 'shard' is named twice}}
  %f = loom.all_reduce_start %s on @hsdp axes ["shard", "shard"] reduce <sum> : tensor<2x8xf32> -> !loom.future<tensor<2x8xf32>>
  %x = loom.wait %f : !loom.future<tensor<2x8xf32>> -> tensor<2x8xf32>
  return
}

// -----

loom.mesh @dp shape [4] axes ["shard"]
func.func @f(%s: tensor<2x8xf32>) {
  // expected-error@+1 {{collective must name at least one mesh axis}}
  %f = loom.all_reduce_start %s on @dp axes [] reduce <sum> : tensor<2x8xf32> -> !loom.future<tensor<2x8xf32>>
  %x = loom.wait %f : !loom.future<tensor<2x8xf32>> -> tensor<2x8xf32>
  return
}

// -----

loom.mesh @dp shape [4] axes ["shard"]
func.func @f(%g: tensor<6x8xf32>) {
  // expected-error@+1 {{scatter dim 0 of size 6 is not divisible by the group size 4 (pad the input first)}}
  %f = loom.reduce_scatter_start %g on @dp axes ["shard"] dim 0 reduce <sum> : tensor<6x8xf32> -> !loom.future<tensor<1x8xf32>>
  %x = loom.wait %f : !loom.future<tensor<1x8xf32>> -> tensor<1x8xf32>
  return
}

// -----

loom.mesh @dp shape [4] axes ["shard"]
func.func @f(%g: tensor<6x8xf32>) {
  // expected-error@+1 {{slice dim 0 of size 6 is not divisible by the group size 4}}
  %f = loom.all_slice_start %g on @dp axes ["shard"] dim 0 : tensor<6x8xf32> -> !loom.future<tensor<1x8xf32>>
  %x = loom.wait %f : !loom.future<tensor<1x8xf32>> -> tensor<1x8xf32>
  return
}

// -----

loom.mesh @dp shape [2, 2] axes ["outer", "inner"]
func.func @f(%g: tensor<8x8xf32>) {
  // expected-error@+1 {{slicing dim 0 of size 8 over 2 ranks gives 4, but the result has 2}}
  %f = loom.all_slice_start %g on @dp axes ["inner"] dim 0 : tensor<8x8xf32> -> !loom.future<tensor<2x8xf32>>
  %x = loom.wait %f : !loom.future<tensor<2x8xf32>> -> tensor<2x8xf32>
  return
}

// -----

loom.mesh @dp shape [4] axes ["shard"]
func.func @f(%g: tensor<8x8xf32>) {
  // expected-error@+1 {{result dimension 1 is 4 but input's is 8}}
  %f = loom.all_slice_start %g on @dp axes ["shard"] dim 0 : tensor<8x8xf32> -> !loom.future<tensor<2x4xf32>>
  %x = loom.wait %f : !loom.future<tensor<2x4xf32>> -> tensor<2x4xf32>
  return
}

// -----

loom.mesh @dp shape [4] axes ["shard"]
func.func @f(%g: tensor<8x8xf32>) {
  // expected-error@+1 {{scattering dim 0 of size 8 over 4 ranks gives 2, but the result has 4}}
  %f = loom.reduce_scatter_start %g on @dp axes ["shard"] dim 0 reduce <sum> : tensor<8x8xf32> -> !loom.future<tensor<4x8xf32>>
  %x = loom.wait %f : !loom.future<tensor<4x8xf32>> -> tensor<4x8xf32>
  return
}

// -----

loom.mesh @dp shape [4] axes ["shard"]
func.func @f(%g: tensor<8x8xf32>) {
  // expected-error@+1 {{result dimension 0 is 4 but input's is 8}}
  %f = loom.all_reduce_start %g on @dp axes ["shard"] reduce <max> : tensor<8x8xf32> -> !loom.future<tensor<4x8xf32>>
  %x = loom.wait %f : !loom.future<tensor<4x8xf32>> -> tensor<4x8xf32>
  return
}

// -----

loom.mesh @dp shape [4] axes ["shard"]
func.func @f(%g: tensor<8x8xf32>) {
  // expected-error@+1 {{root 4 is out of range for a group of 4 ranks}}
  %f = loom.broadcast_start %g on @dp axes ["shard"] root 4 : tensor<8x8xf32> -> !loom.future<tensor<8x8xf32>>
  %x = loom.wait %f : !loom.future<tensor<8x8xf32>> -> tensor<8x8xf32>
  return
}

// -----

loom.mesh @pp shape [2] axes ["pp"]
func.func @f(%g: tensor<8x8xf32>) {
  // expected-error@+1 {{peer 2 is out of range for a group of 2 ranks}}
  %f = loom.send_start %g on @pp axes ["pp"] peer 2 tag 0 : tensor<8x8xf32> -> !loom.future<none>
  loom.wait %f : !loom.future<none>
  return
}

// -----

loom.mesh @pp shape [2] axes ["pp"]
func.func @f(%g: tensor<8x8xf32>) {
  // expected-error@+1 {{a send completes as !loom.future<none>}}
  %f = loom.send_start %g on @pp axes ["pp"] peer 1 tag 0 : tensor<8x8xf32> -> !loom.future<tensor<8x8xf32>>
  %x = loom.wait %f : !loom.future<tensor<8x8xf32>> -> tensor<8x8xf32>
  return
}

// -----

loom.mesh @pp shape [2] axes ["pp"]
func.func @f() {
  // expected-error@+1 {{peer must be non-negative, got -1}}
  %f = loom.recv_start on @pp axes ["pp"] peer -1 tag 0 : !loom.future<tensor<8x8xf32>>
  %x = loom.wait %f : !loom.future<tensor<8x8xf32>> -> tensor<8x8xf32>
  return
}

// -----

loom.mesh @pp shape [2] axes ["pp"]
func.func @f() {
  // expected-error@+1 {{tag must be in [0, 2^31), got -3}}
  %f = loom.recv_start on @pp axes ["pp"] peer 0 tag -3 : !loom.future<tensor<8x8xf32>>
  %x = loom.wait %f : !loom.future<tensor<8x8xf32>> -> tensor<8x8xf32>
  return
}

// -----

loom.mesh @pp shape [2] axes ["pp"]
func.func @f(%g: tensor<8x8xf32>) {
  // expected-error@+1 {{tag must be in [0, 2^31), got 2147483648}}
  %f = loom.send_start %g on @pp axes ["pp"] peer 1 tag 2147483648 : tensor<8x8xf32> -> !loom.future<none>
  loom.wait %f : !loom.future<none>
  return
}

// -----

// The group of a send is the ranks that share this rank's place on the
// axes it does not name: 2 on a 2x4 mesh over "pp".
loom.mesh @ppdp shape [2, 4] axes ["pp", "dp"]
func.func @f(%g: tensor<8x8xf32>) {
  // expected-error@+1 {{peer 2 is out of range for a group of 2 ranks}}
  %f = loom.send_start %g on @ppdp axes ["pp"] peer 2 tag 0 : tensor<8x8xf32> -> !loom.future<none>
  loom.wait %f : !loom.future<none>
  return
}

// -----

loom.mesh @pp shape [2] axes ["pp"]
// expected-error@+1 {{'loom.program_ranks' lists rank 2, outside the mesh's 2 ranks}}
func.func @f() attributes {loom.step, loom.program_ranks = array<i64: 1, 2>} {
  return
}

// -----

loom.mesh @pp shape [4] axes ["pp"]
// expected-error@+1 {{'loom.program_ranks' must be strictly increasing, got 2 before 1}}
func.func @f() attributes {loom.step, loom.program_ranks = array<i64: 2, 1>} {
  return
}

// -----

loom.mesh @pp shape [2] axes ["pp"]
// expected-error@+1 {{'loom.program_ranks' lists no rank}}
func.func @f() attributes {loom.step, loom.program_ranks = array<i64>} {
  return
}

// -----

loom.mesh @pp shape [2] axes ["pp"]
// expected-error@+1 {{'loom.program_ranks' marks an MPMD step; the function has no 'loom.step'}}
func.func @f() attributes {loom.program_ranks = array<i64: 0>} {
  return
}

// -----

// expected-error@+1 {{'loom.program_ranks' names ranks of a mesh, but the module declares no loom.mesh}}
func.func @f() attributes {loom.step, loom.program_ranks = array<i64: 0>} {
  return
}

// -----

loom.mesh @pp shape [2] axes ["pp"]
// expected-error@+1 {{'loom.program_ranks' must be an array<i64: ...> of ranks on a func.func}}
func.func @f() attributes {loom.step, loom.program_ranks = [0, 1]} {
  return
}

// -----

loom.mesh @dp shape [4] axes ["shard"]
func.func @f(%s: tensor<2x8xf32>) {
  // expected-error@+1 {{future must be consumed by exactly one loom.wait}}
  %f = loom.all_gather_start %s on @dp axes ["shard"] dim 0 : tensor<2x8xf32> -> !loom.future<tensor<8x8xf32>>
  return
}

// -----

loom.mesh @dp shape [4] axes ["shard"]
func.func @f(%s: tensor<2x8xf32>) {
  %f = loom.all_gather_start %s on @dp axes ["shard"] dim 0 : tensor<2x8xf32> -> !loom.future<tensor<8x8xf32>>
  // expected-error@+1 {{result type 'tensor<8x4xf32>' does not match the future's value 'tensor<8x8xf32>'}}
  %x = loom.wait %f : !loom.future<tensor<8x8xf32>> -> tensor<8x4xf32>
  return
}

// -----

loom.mesh @pp shape [2] axes ["pp"]
func.func @f(%g: tensor<8x8xf32>) {
  %f = loom.send_start %g on @pp axes ["pp"] peer 1 tag 0 : tensor<8x8xf32> -> !loom.future<none>
  // expected-error@+1 {{waiting on !loom.future<none> yields no value}}
  %x = loom.wait %f : !loom.future<none> -> tensor<8x8xf32>
  return
}

// -----

// expected-error@+1 {{'loom.phase' must be a #loom.phase}}
func.func @f() attributes {loom.phase = "forward"} {
  return
}

// -----

// expected-error@+1 {{unknown loom attribute 'loom.bogus'}}
func.func @f() attributes {loom.bogus} {
  return
}

// -----

func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error@+1 {{'loom.microbatch' must be a non-negative i64 microbatch index}}
  %y = loom.aten "aten::neg.default"(%x) {args = [#loom.arg<0>], loom.microbatch = -1 : i64} : (tensor<2xf32>) -> tensor<2xf32>
  return %y : tensor<2xf32>
}

// -----

// expected-error@+1 {{argument #0 role must be one of parameter, buffer, constant, input}}
func.func @f(%a: tensor<2xf32> {loom.role = #loom.role<loss>}) {
  return
}

// -----

// expected-error@+1 {{result #0 role must be one of loss, grad, buffer_mutation, output, input_mutation}}
func.func @f(%a: tensor<2xf32>) -> (tensor<2xf32> {loom.role = #loom.role<parameter>}) {
  return %a : tensor<2xf32>
}

// -----

// expected-error@+1 {{step argument #0 (parameter) has no 'loom.name'}}
func.func @f(%a: tensor<2xf32> {loom.role = #loom.role<parameter>}) attributes {loom.step} {
  return
}

// -----

// expected-error@+1 {{step result #0 targets 'v', which is not a step argument}}
func.func @f(%w: tensor<2xf32> {loom.name = "w", loom.role = #loom.role<parameter>})
    -> (tensor<2xf32> {loom.role = #loom.role<grad>, loom.target = "v"}) attributes {loom.step} {
  return %w : tensor<2xf32>
}

// -----

// expected-error@+1 {{step result #0 (grad) targets 'b', a buffer, expected a parameter}}
func.func @f(%b: tensor<2xf32> {loom.name = "b", loom.role = #loom.role<buffer>})
    -> (tensor<2xf32> {loom.role = #loom.role<grad>, loom.target = "b"}) attributes {loom.step} {
  return %b : tensor<2xf32>
}

// -----

// expected-error@+1 {{step result #0 has type 'tensor<3xf32>' but 'w' has type 'tensor<2xf32>'}}
func.func @f(%w: tensor<2xf32> {loom.name = "w", loom.role = #loom.role<parameter>}, %g: tensor<3xf32>  {loom.role = #loom.role<input>})
    -> (tensor<3xf32> {loom.role = #loom.role<grad>, loom.target = "w"}) attributes {loom.step} {
  return %g : tensor<3xf32>
}

// -----

// expected-error@+1 {{a step has at most one loss result, found 2}}
func.func @f(%x: tensor<f32> {loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>}, tensor<f32> {loom.role = #loom.role<loss>}) attributes {loom.step} {
  return %x, %x : tensor<f32>, tensor<f32>
}

// -----

// expected-error@+1 {{step argument name 'w' is used twice}}
func.func @f(%a: tensor<2xf32> {loom.name = "w", loom.role = #loom.role<parameter>}, %b: tensor<2xf32> {loom.name = "w", loom.role = #loom.role<parameter>}) attributes {loom.step} {
  return
}

// -----

// expected-error@+1 {{step argument #1 (optimizer_state) has no 'loom.target' naming its parameter}}
func.func @f(%w: tensor<2xf32> {loom.name = "w", loom.role = #loom.role<parameter>},
             %m: tensor<2xf32> {loom.name = "w.exp_avg", loom.role = #loom.role<optimizer_state>}) attributes {loom.step} {
  return
}

// -----

// expected-error@+1 {{step argument #1 (optimizer_state) targets 'b', which is not a parameter argument}}
func.func @f(%b: tensor<2xf32> {loom.name = "b", loom.role = #loom.role<buffer>},
             %m: tensor<2xf32> {loom.name = "b.exp_avg", loom.role = #loom.role<optimizer_state>, loom.target = "b"}) attributes {loom.step} {
  return
}

// -----

// expected-error@+1 {{step argument #1 has type 'tensor<3xf32>' but its parameter 'w' has type 'tensor<2xf32>'}}
func.func @f(%w: tensor<2xf32> {loom.name = "w", loom.role = #loom.role<parameter>},
             %m: tensor<3xf32> {loom.name = "w.exp_avg", loom.role = #loom.role<optimizer_state>, loom.target = "w"}) attributes {loom.step} {
  return
}

// -----

// expected-error@+1 {{step argument #0 (parameter) has a 'loom.target'; only optimizer_state arguments name a parameter}}
func.func @f(%w: tensor<2xf32> {loom.name = "w", loom.role = #loom.role<parameter>, loom.target = "w"}) attributes {loom.step} {
  return
}

// -----

// expected-error@+1 {{step result #0 (state_update) targets 'w', a parameter, expected a optimizer_state}}
func.func @f(%w: tensor<2xf32> {loom.name = "w", loom.role = #loom.role<parameter>})
    -> (tensor<2xf32> {loom.role = #loom.role<state_update>, loom.target = "w"}) attributes {loom.step} {
  return %w : tensor<2xf32>
}

// -----

// expected-error@+1 {{step results #0 and #1 both target 'w'}}
func.func @f(%w: tensor<2xf32> {loom.name = "w", loom.role = #loom.role<parameter>})
    -> (tensor<2xf32> {loom.role = #loom.role<grad>, loom.target = "w"},
        tensor<2xf32> {loom.role = #loom.role<param_update>, loom.target = "w"}) attributes {loom.step} {
  return %w, %w : tensor<2xf32>, tensor<2xf32>
}

// -----

// expected-error@+1 {{'loom.optimizer' must be an optimizer attribute (#loom.sgd, #loom.adam or #loom.adamw) on a func.func}}
func.func @f() attributes {loom.optimizer = "adamw"} {
  return
}

// -----

// expected-error@+1 {{'loom.lr_schedule' must be a dictionary of warmup_steps, decay_steps (integers), warmup_start_factor, eta_min, end_factor, optionally gamma and power (floats), optionally t_mult (an integer) and milestones (a list of integers), and decay (a string)}}
func.func @f() attributes {loom.lr_schedule = {warmup_steps = 5 : i64, decay = "cosine"}} {
  return
}

// -----

// expected-error@+1 {{'loom.lr_schedule' must be a dictionary of warmup_steps, decay_steps (integers), warmup_start_factor, eta_min, end_factor, optionally gamma and power (floats), optionally t_mult (an integer) and milestones (a list of integers), and decay (a string)}}
func.func @f() attributes {loom.lr_schedule = {warmup_steps = 0 : i64, warmup_start_factor = 0.5 : f64, decay = "step", decay_steps = 2 : i64, eta_min = 0.0 : f64, end_factor = 0.0 : f64, gamma = 1 : i64}} {
  return
}

// -----

// expected-error@+1 {{'loom.lr_schedule' must be a dictionary of warmup_steps, decay_steps (integers), warmup_start_factor, eta_min, end_factor, optionally gamma and power (floats), optionally t_mult (an integer) and milestones (a list of integers), and decay (a string)}}
func.func @f() attributes {loom.lr_schedule = {warmup_steps = 0 : i64, warmup_start_factor = 0.5 : f64, decay = "multistep", decay_steps = 0 : i64, eta_min = 0.0 : f64, end_factor = 0.0 : f64, gamma = 0.1 : f64, milestones = [2, 4.0]}} {
  return
}

// -----

// expected-error@+1 {{'loom.lr_schedule' must be a dictionary of warmup_steps, decay_steps (integers), warmup_start_factor, eta_min, end_factor, optionally gamma and power (floats), optionally t_mult (an integer) and milestones (a list of integers), and decay (a string)}}
func.func @f() attributes {loom.lr_schedule = {warmup_steps = 0 : i64, warmup_start_factor = 0.5 : f64, decay = "polynomial", decay_steps = 4 : i64, eta_min = 0.0 : f64, end_factor = 0.0 : f64, power = 2 : i64}} {
  return
}

// -----

// expected-error@+1 {{'lr' is -0.5, expected a finite value >= 0.0}}
func.func @f() attributes {loom.optimizer = #loom.sgd<lr = -0.5>} {
  return
}

// -----

// expected-error@+1 {{'momentum' is -1.0, expected a finite value >= 0.0}}
func.func @f() attributes {loom.optimizer = #loom.sgd<momentum = -1>} {
  return
}

// -----

// expected-error@+1 {{'weight_decay' is -0.1, expected a finite value >= 0.0}}
func.func @f() attributes {loom.optimizer = #loom.sgd<weight_decay = -0.1>} {
  return
}

// -----

// expected-error@+1 {{Nesterov momentum requires a momentum > 0 and zero dampening}}
func.func @f() attributes {loom.optimizer = #loom.sgd<momentum = 0.9, dampening = 0.1, nesterov = true>} {
  return
}

// -----

// expected-error@+1 {{'alpha' is -0.5, expected a finite value >= 0.0}}
func.func @f() attributes {loom.optimizer = #loom.rmsprop<alpha = -0.5>} {
  return
}

// -----

// expected-error@+1 {{'momentum' is -1.0, expected a finite value >= 0.0}}
func.func @f() attributes {loom.optimizer = #loom.rmsprop<momentum = -1.0>} {
  return
}

// -----

// expected-error@+1 {{'beta2' is 1.0, expected a finite value >= 0.0 and < 1.0}}
func.func @f() attributes {loom.optimizer = #loom.adamax<beta2 = 1.0>} {
  return
}

// -----

// expected-error@+1 {{'etas' are (1.0, 1.2), expected 0 < etaminus < 1 < etaplus}}
func.func @f() attributes {loom.optimizer = #loom.rprop<etaminus = 1.0>} {
  return
}

// -----

// expected-error@+1 {{'weight_decay' is -1.0, expected a finite value >= 0.0}}
func.func @f() attributes {loom.optimizer = #loom.asgd<t0 = 0.0, weight_decay = -1.0>} {
  return
}

// -----

// expected-error@+1 {{'step_size_min' is -1.0, expected a finite value >= 0.0}}
func.func @f() attributes {loom.optimizer = #loom.rprop<step_size_min = -1.0>} {
  return
}

// -----

// expected-error@+1 {{'momentum_decay' is -1.0, expected a finite value >= 0.0}}
func.func @f() attributes {loom.optimizer = #loom.nadam<momentum_decay = -1.0>} {
  return
}

// -----

// expected-error@+1 {{'beta1' is 1.0, expected a finite value >= 0.0 and < 1.0}}
func.func @f() attributes {loom.optimizer = #loom.nadam<beta1 = 1.0>} {
  return
}

// -----

// torch.optim.Adadelta takes 0 <= rho <= 1.
// expected-error@+1 {{'rho' is 1.5, expected a value in [0, 1]}}
func.func @f() attributes {loom.optimizer = #loom.adadelta<rho = 1.5>} {
  return
}

// -----

// expected-error@+1 {{'eps' is -1.0e-06, expected a finite value >= 0.0}}
func.func @f() attributes {loom.optimizer = #loom.adadelta<eps = -1.0e-6>} {
  return
}

// -----

func.func @g(%w: tensor<4xf32>, %g: tensor<4xf32>) {
  // expected-error@+1 {{#loom.adadelta keeps 2 state tensors per parameter (square_avg, acc_delta), got 1}}
  %0:2 = loom.optimizer_update #loom.adadelta<> param %w grad %g state [%w] : tensor<4xf32>
  return
}

// -----

// expected-error@+1 {{'lr_decay' is -0.1, expected a finite value >= 0.0}}
func.func @f() attributes {loom.optimizer = #loom.adagrad<lr_decay = -0.1>} {
  return
}

// -----

// expected-error@+1 {{'initial_accumulator_value' is -1.0, expected a finite value >= 0.0}}
func.func @f() attributes {loom.optimizer = #loom.adagrad<initial_accumulator_value = -1.0>} {
  return
}

// -----

func.func @f(%w: tensor<4xf32>, %g: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<4xf32>) {
  // expected-error@+1 {{#loom.adam keeps 3 state tensors per parameter (exp_avg, exp_avg_sq, max_exp_avg_sq), got 2}}
  %0:3 = loom.optimizer_update #loom.adam<amsgrad = true> param %w grad %g state [%m, %v] : tensor<4xf32>
  return
}

// -----

func.func @f(%w: tensor<4xf32>, %g: tensor<4xf32>, %m: tensor<4xf32>) {
  // expected-error@+1 {{#loom.rmsprop keeps 2 state tensors per parameter (square_avg, grad_avg), got 1}}
  %0:2 = loom.optimizer_update #loom.rmsprop<centered = true> param %w grad %g state [%m] : tensor<4xf32>
  return
}

// -----

func.func @f(%w: tensor<4xf32>, %g: tensor<4xf32>) {
  // expected-error@+1 {{#loom.adagrad keeps 1 state tensors per parameter (sum), got 0}}
  %0 = loom.optimizer_update #loom.adagrad<> param %w grad %g : tensor<4xf32>
  return
}

// -----

// expected-error@+1 {{'beta1' is 1.0, expected a finite value >= 0.0 and < 1.0}}
func.func @f() attributes {loom.optimizer = #loom.adam<beta1 = 1.0>} {
  return
}

// -----

// expected-error@+1 {{'beta2' is -0.9, expected a finite value >= 0.0 and < 1.0}}
func.func @f() attributes {loom.optimizer = #loom.adamw<beta2 = -0.9>} {
  return
}

// -----

// expected-error@+1 {{'eps' is -1.0e-08, expected a finite value >= 0.0}}
func.func @f() attributes {loom.optimizer = #loom.adamw<eps = -1.0e-8>} {
  return
}

// -----

// expected-error@+1 {{'weight_decay' is -0.01, expected a finite value >= 0.0}}
func.func @f() attributes {loom.optimizer = #loom.adam<weight_decay = -0.01>} {
  return
}

// -----

// expected-error@+2 {{expected 'true' or 'false'}}
// expected-error@+1 {{failed to parse Loom_SGDAttr parameter 'maximize'}}
func.func @f() attributes {loom.optimizer = #loom.sgd<maximize = 1>} {
  return
}

// -----

func.func @f(%w: tensor<4xf32>, %g: tensor<4xf32>, %m: tensor<4xf32>) {
  // expected-error@+1 {{#loom.adamw keeps 2 state tensors per parameter (exp_avg, exp_avg_sq), got 1}}
  %0:2 = loom.optimizer_update #loom.adamw<> param %w grad %g state [%m] : tensor<4xf32>
  return
}

// -----

func.func @f(%w: tensor<4xf32>, %g: tensor<4xf32>, %m: tensor<4xf32>) {
  // expected-error@+1 {{#loom.sgd keeps 0 state tensors per parameter, got 1}}
  %0:2 = loom.optimizer_update #loom.sgd<> param %w grad %g state [%m] : tensor<4xf32>
  return
}

// -----

func.func @f(%w: tensor<4xf32>, %g: tensor<4xf32>) {
  // expected-error@+1 {{#loom.sgd keeps 1 state tensors per parameter (momentum_buffer), got 0}}
  %0 = loom.optimizer_update #loom.sgd<momentum = 0.9> param %w grad %g : tensor<4xf32>
  return
}

// -----

func.func @f(%w: tensor<4xi64>, %g: tensor<4xi64>) {
  // expected-error@+1 {{parameter type 'tensor<4xi64>' is not a floating-point tensor}}
  %0 = loom.optimizer_update #loom.sgd<> param %w grad %g : tensor<4xi64>
  return
}

// -----

func.func @f(%w: tensor<4xf32>, %g: tensor<4xf16>) {
  // expected-error@+1 {{gradient type 'tensor<4xf16>' differs from parameter type 'tensor<4xf32>'}}
  %0 = "loom.optimizer_update"(%w, %g) {optimizer = #loom.sgd<>} : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return
}

// -----

func.func @f(%w: tensor<4xf32>, %g: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<2xf32>) {
  // expected-error@+1 {{state #1 (exp_avg_sq) has type 'tensor<2xf32>', expected the parameter type 'tensor<4xf32>'}}
  %0:3 = "loom.optimizer_update"(%w, %g, %m, %v) {optimizer = #loom.adam<>} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @f(%w: tensor<4xf32>, %g: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<4xf32>) {
  // expected-error@+1 {{has 2 state operands but 1 state results}}
  %0:2 = "loom.optimizer_update"(%w, %g, %m, %v) {optimizer = #loom.adam<>} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @f(%w: tensor<4xf32>, %g: tensor<4xf32>) {
  // expected-error@+1 {{result type 'tensor<4xf16>' differs from parameter type 'tensor<4xf32>'}}
  %0 = "loom.optimizer_update"(%w, %g) {optimizer = #loom.sgd<>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf16>
  return
}

// -----

func.func @f(%w: tensor<4xf32>, %g: tensor<4xf32>) {
  // expected-error@+1 {{attribute 'optimizer' failed to satisfy constraint: optimizer hyperparameters (#loom.sgd, #loom.adam, #loom.adamw, #loom.rmsprop, #loom.adagrad, #loom.adadelta, #loom.adamax, #loom.radam, #loom.nadam, #loom.rprop or #loom.asgd)}}
  %0 = "loom.optimizer_update"(%w, %g) {optimizer = 1.0 : f32} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

loom.mesh @dp shape [4] axes ["shard"]
// expected-error@+1 {{argument #0: a shard of 2-d tensor [10, 4] over 4 ranks has size 3 in dimension 0, but the argument has 2}}
func.func @f(%w: tensor<2x4xf32> {loom.name = "w", loom.role = #loom.role<parameter>, loom.shard = #loom.shard<@dp, axes = ["shard"], dim = 0, global = [10, 4]>}) attributes {loom.step} {
  return
}

// -----

loom.mesh @dp shape [4] axes ["shard"]
// expected-error@+1 {{argument #0: mesh @dp has no axis "tp"}}
func.func @f(%w: tensor<3x4xf32> {loom.name = "w", loom.role = #loom.role<parameter>, loom.shard = #loom.shard<@dp, axes = ["tp"], dim = 0, global = [10, 4]>}) attributes {loom.step} {
  return
}

// -----

// expected-error@+1 {{argument #0: 'nomesh' does not name a loom.mesh}}
func.func @f(%x: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>, loom.split = #loom.split<@nomesh, axes = ["shard"], dim = 0>}) attributes {loom.step} {
  return
}

// -----

loom.mesh @dp shape [4] axes ["shard"]
// expected-error@+1 {{argument #0: loom.split dim 2 is out of range for 'tensor<2x4xf32>'}}
func.func @f(%x: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>, loom.split = #loom.split<@dp, axes = ["shard"], dim = 2>}) attributes {loom.step} {
  return
}

// -----

// expected-error@+1 {{'loom.shard' of argument #0 must be a #loom.shard}}
func.func @f(%x: tensor<2x4xf32> {loom.shard = 3}) {
  return
}

// -----

// expected-error@+1 {{result #0: 'nomesh' does not name a loom.mesh}}
func.func @f(%x: tensor<f32> {loom.name = "x", loom.role = #loom.role<input>}) -> (tensor<f32> {loom.role = #loom.role<loss>, loom.partial = #loom.partial<@nomesh, axes = ["shard"], avg>}) attributes {loom.step} {
  return %x : tensor<f32>
}

// -----

// expected-error@+1 {{world_size must be at least 1, got 0}}
module attributes {loom.run_config = #loom.run_config<world_size = 0>} {}

// -----

// expected-error@+1 {{optimizer must be #loom.sgd, #loom.adam, #loom.adamw, #loom.rmsprop, #loom.adagrad, #loom.adadelta, #loom.adamax, #loom.radam, #loom.nadam, #loom.rprop or #loom.asgd, got "sgd"}}
module attributes {loom.run_config = #loom.run_config<world_size = 2, optimizer = "sgd">} {}

// -----

// expected-error@+1 {{optimizer_impl must be "fused" (the single-tensor loop is the default), got "foreach"}}
module attributes {loom.run_config = #loom.run_config<optimizer = #loom.adam<>, optimizer_impl = "foreach">} {}

// -----

// expected-error@+1 {{param_groups, lr_schedule, optimizer_impl and clip_grad_norm need an optimizer}}
module attributes {loom.run_config = #loom.run_config<optimizer_impl = "fused">} {}

// -----

// expected-error@+1 {{clip_grad_norm.max_norm must be a finite number > 0, got 0.000000e+00 : f64}}
module attributes {loom.run_config = #loom.run_config<optimizer = #loom.sgd<lr = 0.1>, clip_grad_norm = {max_norm = 0.0 : f64, norm_type = "2"}>} {}

// -----

// expected-error@+1 {{clip_grad_norm.norm_type must be "2" or "inf", got "1"}}
module attributes {loom.run_config = #loom.run_config<optimizer = #loom.sgd<lr = 0.1>, clip_grad_norm = {max_norm = 1.0 : f64, norm_type = "1"}>} {}

// -----

// expected-error@+1 {{'loom.run_config' must be a #loom.run_config on a module}}
func.func @f() attributes {loom.run_config = #loom.run_config<world_size = 2>} {
  return
}

// -----

// expected-error@+1 {{step argument #0 (parameter) has a 'loom.batch_index'; only inputs are elements of the batch}}
func.func @f(%w: tensor<4xf32> {loom.name = "w", loom.role = #loom.role<parameter>, loom.batch_index = 1 : i64}) attributes {loom.step} {
  return
}

// -----

// expected-error@+1 {{'loom.batch_index' of argument #0 must be a non-negative i64 batch element index}}
func.func @f(%x: tensor<4xf32> {loom.name = "x", loom.role = #loom.role<input>, loom.batch_index = -1 : i64}) attributes {loom.step} {
  return
}

// -----

// expected-error@+1 {{step argument #0 (parameter) has a 'loom.batch_dim'; only inputs have a batch dim}}
func.func @f(%w: tensor<4x2xf32> {loom.name = "w", loom.role = #loom.role<parameter>, loom.batch_dim = 1 : i64}) attributes {loom.step} {
  return
}

// -----

// expected-error@+1 {{'loom.batch_dim' of step argument #0 must be a dim of its tensor (an i64 in [0, 2))}}
func.func @f(%x: tensor<4x2xf32> {loom.role = #loom.role<input>, loom.batch_dim = 2 : i64}) attributes {loom.step} {
  return
}

// -----

// expected-error@+1 {{'loom.batch_dim' of argument #0 must be a non-negative i64 dim}}
func.func @f(%x: tensor<4x2xf32> {loom.role = #loom.role<input>, loom.batch_dim = -1 : i64}) {
  return
}

// -----

// expected-error@+1 {{'loom.unbatched' of argument #0 must be a unit attribute}}
func.func @f(%x: tensor<4x2xf32> {loom.role = #loom.role<input>, loom.unbatched = 1 : i64}) {
  return
}

// -----

// expected-error@+1 {{step argument #0 (parameter) is 'loom.unbatched'; only inputs are elements of the batch}}
func.func @f(%w: tensor<4x2xf32> {loom.name = "w", loom.role = #loom.role<parameter>, loom.unbatched}) attributes {loom.step} {
  return
}

// -----

// expected-error@+1 {{step argument #0 is 'loom.unbatched' and has a 'loom.batch_dim'; an unbatched input is taken whole}}
func.func @f(%x: tensor<4x2xf32> {loom.role = #loom.role<input>, loom.unbatched, loom.batch_dim = 1 : i64}) attributes {loom.step} {
  return
}

// -----

func.func @f(%x: tensor<2xf32>) {
  // expected-error@+1 {{'loom.calls' gives module 'inner' call 0 : i64; expected a positive i64 (call 0 is left out)}}
  %y = loom.aten "aten::neg.default"(%x) {args = [#loom.arg<0>], loom.module = "inner", loom.calls = {inner = 0 : i64}} : (tensor<2xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @f(%x: tensor<2xf32>) {
  // expected-error@+1 {{'loom.calls' names module 'inner', which does not enclose the op's module 'outer'}}
  %y = loom.aten "aten::neg.default"(%x) {args = [#loom.arg<0>], loom.module = "outer", loom.calls = {inner = 1 : i64}} : (tensor<2xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @f(%x: tensor<2xf32>) {
  // expected-error@+1 {{'loom.calls' must be a non-empty dictionary from module path to call index}}
  %y = loom.aten "aten::neg.default"(%x) {args = [#loom.arg<0>], loom.module = "inner", loom.calls = [1]} : (tensor<2xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @f(%x: tensor<2xf32>) {
  // expected-error@+1 {{'loom.cast' is only on an aten::_to_copy}}
  %y = loom.aten "aten::neg.default"(%x) {args = [#loom.arg<0>], loom.cast = 0 : i64} : (tensor<2xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @f(%x: tensor<2xf32>) {
  // expected-error@+1 {{'loom.cast' must be a non-negative i64 cast id}}
  %y = loom.aten "aten::_to_copy.default"(%x) {args = [#loom.arg<0>], kwargs = {dtype = bf16}, loom.cast = -2 : i64} : (tensor<2xf32>) -> tensor<2xbf16>
  return
}

// -----

func.func @f(%x: tensor<2x3xf32>) {
  // expected-error@+1 {{'loom.sync_batch_norm' is only on a training-mode batch norm forward (aten::_native_batch_norm_legit_functional.default or aten::_native_batch_norm_legit.no_stats)}}
  %y = loom.aten "aten::neg.default"(%x) {args = [#loom.arg<0>], loom.sync_batch_norm} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3xf32>) {
  // expected-error@+1 {{'loom.sync_batch_norm' must be a unit attribute}}
  %y:3 = loom.aten "aten::_native_batch_norm_legit.no_stats"(%x) {args = [#loom.arg<0>, unit, unit, true, 1.000000e-01, 1.000000e-05], loom.sync_batch_norm = 1 : i64} : (tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>)
  return
}

// -----

// expected-error@+1 {{'loom.device' must be "cpu" or "cuda" on a module}}
module attributes {loom.device = "tpu"} {
}

// -----

// expected-error@+1 {{'loom.device' must be "cpu" or "cuda" on a module}}
func.func @f() attributes {loom.device = "cuda"} {
  return
}

// -----

// expected-error@+1 {{'loom.kernel_workspace' must be a dictionary from kernel signature to non-negative i64 bytes, on a module}}
module attributes {loom.kernel_workspace = {"aten::mm.default(f32[2,2],f32[2,2])->(f32[2,2])" = -1 : i64}} {
}

// -----

// expected-error@+1 {{'loom.kernel_workspace' must be a dictionary from kernel signature to non-negative i64 bytes, on a module}}
module attributes {loom.kernel_workspace = {"aten::mm.default(f32[2,2],f32[2,2])->(f32[2,2])" = "big"}} {
}

// -----

// expected-error@+1 {{'loom.kernel_workspace' must be a dictionary from kernel signature to non-negative i64 bytes, on a module}}
func.func @f() attributes {loom.kernel_workspace = {}} {
  return
}

// -----

// expected-error@+1 {{'loom.kernel_workspace_threads' must be a positive i64 thread count on a module}}
module attributes {loom.kernel_workspace_threads = 0 : i64} {
}

// -----

// expected-error@+1 {{'loom.memory_budget' must be positive i64 bytes on a module}}
module attributes {loom.memory_budget = 0 : i64} {
}

// -----

// expected-error@+1 {{'loom.memory_budget' must be positive i64 bytes on a module}}
func.func @f() attributes {loom.memory_budget = 1024 : i64} {
  return
}

// -----

// expected-error@+1 {{'loom.pipeline_grad_from' of result #0 must be a non-negative i64 rank}}
func.func @f(%g: tensor<2xf32>) -> (tensor<2xf32> {loom.pipeline_grad_from = -1 : i64}) {
  return %g : tensor<2xf32>
}

// -----

// expected-error@+1 {{unknown loom result attribute 'loom.grad_from'}}
func.func @f(%g: tensor<2xf32>) -> (tensor<2xf32> {loom.grad_from = 1 : i64}) {
  return %g : tensor<2xf32>
}

// -----

func.func @policy_cast_converts(%x: tensor<4xf32>) -> tensor<4xbf16> {
  // expected-error @+1 {{'loom.policy_cast' is on a cast to the dtype it was traced in, but 'tensor<4xf32>' becomes 'tensor<4xbf16>'}}
  %y = loom.aten "aten::_to_copy.default"(%x) {args = [#loom.arg<0>], kwargs = {dtype = bf16}, loom.policy_cast = true} : (tensor<4xf32>) -> tensor<4xbf16>
  return %y : tensor<4xbf16>
}

// -----

func.func @policy_cast_not_a_cast(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'loom.policy_cast' is only on an aten::_to_copy of one tensor}}
  %y = loom.aten "aten::neg.default"(%x) {args = [#loom.arg<0>], loom.policy_cast = true} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @policy_cast_not_bool(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'loom.policy_cast' must be a bool}}
  %y = loom.aten "aten::_to_copy.default"(%x) {args = [#loom.arg<0>], kwargs = {dtype = f32}, loom.policy_cast = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
