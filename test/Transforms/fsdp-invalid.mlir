// RUN: not loom-opt %s --split-input-file --loom-fsdp 2>&1 | FileCheck %s --check-prefix=NOMESH
// RUN: not loom-opt %s --split-input-file --loom-fsdp="mesh-shape=0" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not loom-opt %s --split-input-file --loom-fsdp="mesh-shape=2,2,2" 2>&1 | FileCheck %s --check-prefix=RANK3
// RUN: not loom-opt %s --split-input-file --loom-fsdp="mesh-shape=4 units=nope" 2>&1 | FileCheck %s --check-prefix=UNIT
// RUN: not loom-opt %s --split-input-file --loom-fsdp="mesh-shape=4 reshard-after-forward=3" 2>&1 | FileCheck %s --check-prefix=RAF3
// RUN: not loom-opt %s --split-input-file --loom-fsdp="mesh-shape=4 reshard-after-forward=0" 2>&1 | FileCheck %s --check-prefix=RAF0
// RUN: not loom-opt %s --split-input-file --loom-fsdp="mesh-shape=2,2 reshard-after-forward=4" 2>&1 | FileCheck %s --check-prefix=RAFHSDP
// RUN: not loom-opt %s --split-input-file --loom-fsdp="mesh-shape=4 reshard-after-forward=maybe" 2>&1 | FileCheck %s --check-prefix=RAFTEXT
// RUN: not loom-opt %s --split-input-file --loom-fsdp="mesh-shape=4 param-dtype=f64" 2>&1 | FileCheck %s --check-prefix=DTYPE
// RUN: not loom-opt %s --split-input-file --loom-fsdp="mesh-shape=4 gradient-divide-factor=-1" 2>&1 | FileCheck %s --check-prefix=FACTOR
// RUN: loom-opt %s --split-input-file --loom-fsdp="mesh-shape=4" -verify-diagnostics

// Option errors point at the step they could not be applied to.
// NOMESH: fsdp-invalid.mlir:[[# @LINE + 11]]:1: error: 'func.func' op --loom-fsdp: needs 'mesh-shape': {N} for FSDP or {R, S} for HSDP
// ZERO: fsdp-invalid.mlir:[[# @LINE + 10]]:1: error: 'func.func' op --loom-fsdp: mesh-shape has a group of size 0; every axis needs at least one rank
// RANK3: error: 'func.func' op --loom-fsdp: mesh-shape has 3 dimensions; FSDP takes a 1-D mesh and HSDP a 2-D (replicate, shard) mesh
// UNIT: error: 'func.func' op --loom-fsdp: unit 'nope' matches no parameter (none is owned or used by a module under it)
// RAF3: error: 'func.func' op --loom-fsdp: reshard-after-forward=3 must divide the shard size 4 (1 <= k <= 4)
// RAF0: fsdp-invalid.mlir:[[# @LINE + 6]]:1: error: 'func.func' op --loom-fsdp: reshard-after-forward=0 must divide the shard size 4 (1 <= k <= 4)
// RAFHSDP: error: 'func.func' op --loom-fsdp: reshard-after-forward=4 must divide the shard size 2 (1 <= k <= 2){{$}}
// RAFTEXT: error: 'func.func' op --loom-fsdp: reshard-after-forward 'maybe' is not auto, true, false or an integer
// DTYPE: error: 'func.func' op --loom-fsdp: param-dtype 'f64' is not one of bf16, f16, f32
// FACTOR: error: 'func.func' op --loom-fsdp: gradient-divide-factor -1.0 is negative

func.func @step(%w: tensor<3x4xf32> {loom.name = "layers.0.weight", loom.role = #loom.role<parameter>},
                %x: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<3x4xf32> {loom.role = #loom.role<grad>, loom.target = "layers.0.weight"})
    attributes {loom.step} {
  %t = loom.aten "aten::t.default"(%w) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<3x4xf32>) -> tensor<4x3xf32>
  %h = loom.aten "aten::mm.default"(%x, %t) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  %l = loom.aten "aten::sum.default"(%h) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<2x3xf32>) -> tensor<f32>
  %g = loom.aten "aten::zeros_like.default"(%w) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<3x4xf32>) -> tensor<3x4xf32>
  return %l, %g : tensor<f32>, tensor<3x4xf32>
}

// -----

// FSDP shards dim 0; a scalar parameter has none (FSDP2 rejects it too).
// expected-error@+1 {{--loom-fsdp: parameter 'scale' is a scalar; FSDP shards dim 0 and cannot shard it}}
func.func @scalar(%s: tensor<f32> {loom.name = "scale", loom.role = #loom.role<parameter>})
    -> (tensor<f32> {loom.role = #loom.role<loss>}) attributes {loom.step} {
  %l = loom.aten "aten::mul.Tensor"(%s, %s) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// One all-gather buffer per unit needs one dtype.
// expected-error@+1 {{--loom-fsdp: unit '<root>' mixes parameter dtypes 'f32' and 'bf16' ('b'); FSDP needs one dtype per unit}}
func.func @mixed(%a: tensor<4xf32> {loom.name = "a", loom.role = #loom.role<parameter>},
                 %b: tensor<4xbf16> {loom.name = "b", loom.role = #loom.role<parameter>})
    -> (tensor<4xf32> {loom.role = #loom.role<loss>}) attributes {loom.step} {
  %l = loom.aten "aten::add.Tensor"(%a, %b) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<4xf32>, tensor<4xbf16>) -> tensor<4xf32>
  return %l : tensor<4xf32>
}

// -----

// The pass makes the mesh; one of that name must already agree with it.
// expected-error@+1 {{--loom-fsdp: mesh @dp exists with another shape or axes}}
loom.mesh @dp shape [2] axes ["shard"]
func.func @other_mesh(%w: tensor<4xf32> {loom.name = "w", loom.role = #loom.role<parameter>})
    -> (tensor<4xf32> {loom.role = #loom.role<loss>}) attributes {loom.step} {
  %l = loom.aten "aten::relu.default"(%w) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<4xf32>) -> tensor<4xf32>
  return %l : tensor<4xf32>
}

// -----

// A step is sharded once.
loom.mesh @dp shape [4] axes ["shard"]
// expected-error@+1 {{--loom-fsdp: argument #0 is already sharded}}
func.func @twice(%w: tensor<1xf32> {loom.name = "w", loom.role = #loom.role<parameter>, loom.shard = #loom.shard<@dp, axes = ["shard"], dim = 0, global = [4]>})
    -> (tensor<1xf32> {loom.role = #loom.role<loss>}) attributes {loom.step} {
  %l = loom.aten "aten::relu.default"(%w) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<1xf32>) -> tensor<1xf32>
  return %l : tensor<1xf32>
}
