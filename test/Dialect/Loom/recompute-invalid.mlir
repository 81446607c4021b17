// RUN: loom-opt %s --split-input-file --verify-diagnostics

func.func @random(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = loom.recompute "drop" (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    // expected-error@+1 {{is random and cannot be recomputed: its output must be saved}}
    %0 = loom.aten "aten::rand_like.default"(%a) {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<4xf32>
    loom.yield %0 : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

func.func @collective(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = loom.recompute "m" (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    // expected-error@+1 {{cannot be recomputed: a recompute body holds only 'loom.aten' ops}}
    %f = loom.all_reduce_start %a on @dp axes ["dp"] reduce <sum> : tensor<4xf32> -> !loom.future<tensor<4xf32>>
    %0 = loom.wait %f : !loom.future<tensor<4xf32>> -> tensor<4xf32>
    loom.yield %0 : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

func.func @in_place(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = loom.recompute "m" (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    // expected-error@+1 {{mutates its input and cannot be recomputed}}
    %0 = loom.aten "aten::relu_.default"(%a) {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<4xf32>
    loom.yield %0 : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

func.func @nested(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = loom.recompute "m" (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    // expected-error@+1 {{cannot be recomputed: a recompute body holds only 'loom.aten' ops}}
    %0 = loom.recompute "m" (%a) : (tensor<4xf32>) -> tensor<4xf32> {
    ^bb0(%b: tensor<4xf32>):
      loom.yield %b : tensor<4xf32>
    }
    loom.yield %0 : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

func.func @yield_types(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = loom.recompute "m" (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %0 = loom.aten "aten::sum.default"(%a) {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<f32>
    // expected-error@+1 {{yields 1 values of types 'tensor<f32>', but the recompute has results 'tensor<4xf32>'}}
    loom.yield %0 : tensor<f32>
  }
  return %r : tensor<4xf32>
}

// -----

func.func @arguments(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{body argument #0 has type 'tensor<8xf32>', but input #0 is 'tensor<4xf32>'}}
  %r = loom.recompute "m" (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<8xf32>):
    %0 = loom.aten "aten::slice.Tensor"(%a) {args = [#loom.arg<0>, 0, 0, 4, 1]} : (tensor<8xf32>) -> tensor<4xf32>
    loom.yield %0 : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

func.func @isolated(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-note@+1 {{required by region isolation constraints}}
  %r = loom.recompute "m" () : () -> tensor<4xf32> {
    // expected-error@+1 {{using value defined outside the region}}
    %0 = loom.aten "aten::relu.default"(%x) {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<4xf32>
    loom.yield %0 : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

func.func @region_id(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'loom.ac_region' must be a non-negative i64 checkpoint region id}}
  %0 = loom.aten "aten::relu.default"(%x) {args = [#loom.arg<0>], loom.ac_region = -1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @policy(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'loom.ac_policy' must be a #loom.ac_policy}}
  %0 = loom.aten "aten::relu.default"(%x) {args = [#loom.arg<0>], loom.ac_policy = "save"} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
