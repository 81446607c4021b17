// RUN: not loom-opt %s --split-input-file --loom-replicate 2>&1 | FileCheck %s --check-prefix=NOSHAPE
// RUN: not loom-opt %s --split-input-file --loom-replicate="mesh-shape=0" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not loom-opt %s --split-input-file --loom-replicate="mesh-shape=4,-1 axes=a,b" 2>&1 | FileCheck %s --check-prefix=NEG
// RUN: not loom-opt %s --split-input-file --loom-replicate="mesh-shape=2,2" 2>&1 | FileCheck %s --check-prefix=NAMES
// RUN: not loom-opt %s --split-input-file --loom-replicate="mesh-shape=2 axes=a,b" 2>&1 | FileCheck %s --check-prefix=COUNT
// RUN: not loom-opt %s --split-input-file --loom-replicate="mesh-shape=4 bucket-cap-mb=-1" 2>&1 | FileCheck %s --check-prefix=CAP
// RUN: not loom-opt %s --split-input-file --loom-replicate="mesh-shape=4 first-bucket-cap-mb=-0.5" 2>&1 | FileCheck %s --check-prefix=FIRST
// RUN: not loom-opt %s --split-input-file --loom-replicate="mesh-shape=2,2 axes=a,a" 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: loom-opt %s --split-input-file --verify-diagnostics --loom-replicate="mesh-shape=2"

// NOSHAPE: error: --loom-replicate: the module has no mesh @dp; give its shape with mesh-shape (e.g. mesh-shape=4)
// ZERO: error: --loom-replicate: mesh axis 'dp' has 0 ranks; every axis needs at least one
// NEG: error: --loom-replicate: mesh axis 'b' has -1 ranks; every axis needs at least one
// NAMES: error: --loom-replicate: a 2-d mesh-shape needs one name per axis (axes=...)
// COUNT: error: --loom-replicate: mesh-shape has 1 sizes but axes has 2 names
// CAP: error: --loom-replicate: bucket-cap-mb must not be negative, got -1
// FIRST: error: --loom-replicate: first-bucket-cap-mb must not be negative, got -5.000000e-01
// TWICE: error: 'loom.mesh' op axis name 'a' is used twice

func.func @step(%w: tensor<4xf32> {loom.name = "w", loom.role = #loom.role<parameter>},
                %x: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<4xf32> {loom.role = #loom.role<grad>, loom.target = "w"})
    attributes {loom.step} {
  %l = loom.aten "aten::sum.default"(%x) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<f32>
  %g = loom.aten "aten::zeros_like.default"(%w) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<4xf32>) -> tensor<4xf32>
  return %l, %g : tensor<f32>, tensor<4xf32>
}

// -----

// An existing mesh must have the shape the options give.
// expected-error@+1 {{'loom.mesh' op --loom-replicate: mesh-shape [2] differs from the existing mesh's shape}}
loom.mesh @dp shape [4] axes ["dp"]
func.func @step(%x: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>}) attributes {loom.step} {
  %l = loom.aten "aten::sum.default"(%x) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// The optimizer must come after the reduction.
// expected-error@+1 {{already has an optimizer attached (#loom.sgd<>); run loom-replicate before loom-attach-optimizer so the optimizer consumes the reduced gradients}}
func.func @step(%x: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>})
    attributes {loom.step, loom.optimizer = #loom.sgd<>} {
  %l = loom.aten "aten::sum.default"(%x) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A step that is already distributed.
loom.mesh @dp shape [2] axes ["dp"]
// expected-error@+1 {{argument #0 is already split or sharded; loom-replicate distributes a single-rank step}}
func.func @step(%x: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>, loom.split = #loom.split<@dp, axes = ["dp"], dim = 0>})
    -> (tensor<f32> {loom.role = #loom.role<loss>})
    attributes {loom.step} {
  %l = loom.aten "aten::sum.default"(%x) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A 0-d batch input has no batch dim to split.
// expected-error@+1 {{batch input #0 is 0-d; data parallelism splits the batch dim of every batch input}}
func.func @step(%x: tensor<f32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>})
    attributes {loom.step} {
  %l = loom.aten "aten::neg.default"(%x) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<f32>) -> tensor<f32>
  return %l : tensor<f32>
}
