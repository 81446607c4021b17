// RUN: loom-opt %s | FileCheck %s
// RUN: loom-opt %s | loom-opt | FileCheck %s
// RUN: loom-opt %s --mlir-print-op-generic | loom-opt | FileCheck %s

// A recompute region prints as structure: its module, the saved values it
// reads, a body of forward ops and the values it yields.

// CHECK-LABEL: func.func @block
// CHECK: %[[H:.*]] = loom.recompute "layers.0" (%arg0, %arg1) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<8x8xf32>):
// CHECK-NEXT:   %[[M:.*]] = loom.aten "aten::mm.default"(%[[A]], %[[B]])
// CHECK-NEXT:   %[[R:.*]] = loom.aten "aten::relu.default"(%[[M]])
// CHECK-NEXT:   loom.yield %[[R]] : tensor<4x8xf32>
// CHECK-NEXT: } {loom.module = "layers.0", loom.phase = #loom.phase<backward>}
// CHECK: loom.aten "aten::threshold_backward.default"(%{{.*}}, %[[H]])
// Forward ops may carry the checkpoint region and policy capture recorded.
// CHECK: loom.ac_policy = #loom.ac_policy<prefer_recompute>, loom.ac_region = 0 : i64
func.func @block(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %g: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %h = loom.recompute "layers.0" (%x, %w) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<8x8xf32>):
    %0 = loom.aten "aten::mm.default"(%a, %b) {args = [#loom.arg<0>, #loom.arg<1>]} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %1 = loom.aten "aten::relu.default"(%0) {args = [#loom.arg<0>]} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    loom.yield %1 : tensor<4x8xf32>
  } {loom.module = "layers.0", loom.phase = #loom.phase<backward>}
  %d = loom.aten "aten::threshold_backward.default"(%g, %h) {args = [#loom.arg<0>, #loom.arg<1>, 0]} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %t = loom.aten "aten::relu.default"(%x) {args = [#loom.arg<0>], loom.ac_region = 0 : i64, loom.ac_policy = #loom.ac_policy<prefer_recompute>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %d : tensor<4x8xf32>
}

// A region that recomputes nothing but passes values through is valid.
// CHECK-LABEL: func.func @empty
// CHECK: loom.recompute "" () : () -> () {
// CHECK-NEXT: loom.yield
// CHECK-NEXT: }
func.func @empty() {
  loom.recompute "" () : () -> () {
    loom.yield
  }
  return
}
