// RUN: loom-opt %s --split-input-file --verify-diagnostics --loom-remat="mode=full"
// RUN: not loom-opt %s --split-input-file --loom-remat="mode=captured" 2>&1 | FileCheck %s --check-prefix=CAPTURED
// RUN: not loom-opt %s --split-input-file --loom-remat="mode=full modules=layers.0,head" 2>&1 | FileCheck %s --check-prefix=MODULES
// RUN: not loom-opt %s --split-input-file --loom-remat="mode=full modules=layers.0,layers.0" 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not loom-opt %s --split-input-file --loom-remat="mode=captured modules=layers.0" 2>&1 | FileCheck %s --check-prefix=MODE
// RUN: not loom-opt %s --split-input-file --loom-remat="save-ops=aten::relu" 2>&1 | FileCheck %s --check-prefix=NONE
// RUN: not loom-opt %s --split-input-file --loom-remat="mode=selective save-ops=relu" 2>&1 | FileCheck %s --check-prefix=NAME
// RUN: not loom-opt %s --split-input-file --loom-remat="mode=sometimes" 2>&1 | FileCheck %s --check-prefix=ENUM
// RUN: not loom-compile %s --remat-modules=layers.0 -o /dev/null 2>&1 | FileCheck %s --check-prefix=COMPILE
// RUN: not loom-compile %s --remat-save-ops=aten::mm -o /dev/null 2>&1 | FileCheck %s --check-prefix=COMPILE-SAVE

// CAPTURED: error: 'func.func' op --loom-remat: mode captured needs forward ops tagged with 'loom.ac_region' (capture records them for torch.utils.checkpoint regions); none is
// MODULES: error: 'func.func' op --loom-remat: module 'head' has no forward ops
// TWICE: error: 'func.func' op --loom-remat: module 'layers.0' is listed twice
// MODE: error: 'func.func' op --loom-remat: modules applies to mode full and selective only
// NONE: error: 'func.func' op --loom-remat: save-ops needs a mode other than none
// NAME: error: 'func.func' op --loom-remat: save-ops entry 'relu' is not an ATen op name (aten::NAME or aten::NAME.OVERLOAD)
// ENUM: 'sometimes' is not one of none, full, selective, captured
// COMPILE: remat-modules needs remat=full, remat=selective or recompute-budget
// COMPILE-SAVE: remat-save-ops needs remat=full, selective or captured

func.func @block(%w: tensor<4xf32> {loom.name = "layers.0.w", loom.role = #loom.role<parameter>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<4xf32> {loom.role = #loom.role<grad>, loom.target = "layers.0.w"})
    attributes {loom.step} {
  %e = loom.aten "aten::exp.default"(%w) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<4xf32>) -> tensor<4xf32>
  %l = loom.aten "aten::sum.default"(%e) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<4xf32>) -> tensor<f32>
  %g = loom.aten "aten::mul.Tensor"(%e, %e) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %l, %g : tensor<f32>, tensor<4xf32>
}

// -----

// A model without layers.N blocks needs the modules named.
// expected-error@+1 {{--loom-remat: the step has no repeated blocks (such as 'layers.N') to checkpoint; name the modules with modules=... (loom-compile: --remat-modules=...)}}
func.func @no_blocks(%w: tensor<4xf32> {loom.name = "fc.w", loom.role = #loom.role<parameter>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<4xf32> {loom.role = #loom.role<grad>, loom.target = "fc.w"})
    attributes {loom.step} {
  %e = loom.aten "aten::exp.default"(%w) {args = [#loom.arg<0>], loom.module = "fc", loom.phase = #loom.phase<forward>} : (tensor<4xf32>) -> tensor<4xf32>
  %l = loom.aten "aten::sum.default"(%e) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<4xf32>) -> tensor<f32>
  %g = loom.aten "aten::mul.Tensor"(%e, %e) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "fc", loom.phase = #loom.phase<backward>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %l, %g : tensor<f32>, tensor<4xf32>
}
