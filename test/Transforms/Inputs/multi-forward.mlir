// The step of PyTorch's multi-forward test model, `outer(inner(x) + inner(x))`
// (python/tests/multi_forward.py, inner = Linear(4, 4), outer = Linear(4, 5),
// loss = sum), captured for 2 ranks (16 of the test's 32 rows each) and
// imported: ops of inner's second call carry `loom.calls = {inner = 1}`.
// Regenerate: python -m loom.capture python/tests/multi_forward.py --out D
// --split 2; loom-import D/step.pt2 --no-weights | loom-opt (loom.source
// dropped).
module attributes {loom.run_config = #loom.run_config<world_size = 2, optimizer = #loom.adamw<>>} {
  func.func @step(%arg0: tensor<4x4xf32> {loom.name = "inner.weight", loom.role = #loom.role<parameter>}, %arg1: tensor<4xf32> {loom.name = "inner.bias", loom.role = #loom.role<parameter>}, %arg2: tensor<5x4xf32> {loom.name = "outer.weight", loom.role = #loom.role<parameter>}, %arg3: tensor<5xf32> {loom.name = "outer.bias", loom.role = #loom.role<parameter>}, %arg4: tensor<16x4xf32> {loom.name = "x", loom.role = #loom.role<input>}) -> (tensor<f32> {loom.role = #loom.role<loss>}, tensor<4x4xf32> {loom.role = #loom.role<grad>, loom.target = "inner.weight"}, tensor<4xf32> {loom.role = #loom.role<grad>, loom.target = "inner.bias"}, tensor<5x4xf32> {loom.role = #loom.role<grad>, loom.target = "outer.weight"}, tensor<5xf32> {loom.role = #loom.role<grad>, loom.target = "outer.bias"}) attributes {loom.step} {
    %0 = loom.aten "aten::t.default"(%arg0) {args = [#loom.arg<0>], loom.module = "inner", loom.phase = #loom.phase<forward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %1 = loom.aten "aten::addmm.default"(%arg1, %arg4, %0) {args = [#loom.arg<0>, #loom.arg<1>, #loom.arg<2>], loom.module = "inner", loom.phase = #loom.phase<forward>} : (tensor<4xf32>, tensor<16x4xf32>, tensor<4x4xf32>) -> tensor<16x4xf32>
    %2 = loom.aten "aten::t.default"(%arg0) {args = [#loom.arg<0>], loom.calls = {inner = 1 : i64}, loom.module = "inner", loom.phase = #loom.phase<forward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %3 = loom.aten "aten::addmm.default"(%arg1, %arg4, %2) {args = [#loom.arg<0>, #loom.arg<1>, #loom.arg<2>], loom.calls = {inner = 1 : i64}, loom.module = "inner", loom.phase = #loom.phase<forward>} : (tensor<4xf32>, tensor<16x4xf32>, tensor<4x4xf32>) -> tensor<16x4xf32>
    %4 = loom.aten "aten::add.Tensor"(%1, %3) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<16x4xf32>, tensor<16x4xf32>) -> tensor<16x4xf32>
    %5 = loom.aten "aten::t.default"(%arg2) {args = [#loom.arg<0>], loom.module = "outer", loom.phase = #loom.phase<forward>} : (tensor<5x4xf32>) -> tensor<4x5xf32>
    %6 = loom.aten "aten::addmm.default"(%arg3, %4, %5) {args = [#loom.arg<0>, #loom.arg<1>, #loom.arg<2>], loom.module = "outer", loom.phase = #loom.phase<forward>} : (tensor<5xf32>, tensor<16x4xf32>, tensor<4x5xf32>) -> tensor<16x5xf32>
    %7 = loom.aten "aten::sum.default"(%6) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<16x5xf32>) -> tensor<f32>
    %8 = loom.aten "aten::ones_like.default"(%7) {args = [#loom.arg<0>], kwargs = {memory_format = "torch.preserve_format", pin_memory = false}, loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<f32>
    %9 = loom.aten "aten::expand.default"(%8) {args = [#loom.arg<0>, [16, 5]], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<16x5xf32>
    %10 = loom.aten "aten::t.default"(%5) {args = [#loom.arg<0>], loom.module = "outer", loom.phase = #loom.phase<backward>} : (tensor<4x5xf32>) -> tensor<5x4xf32>
    %11 = loom.aten "aten::mm.default"(%9, %10) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "outer", loom.phase = #loom.phase<backward>} : (tensor<16x5xf32>, tensor<5x4xf32>) -> tensor<16x4xf32>
    %12 = loom.aten "aten::t.default"(%9) {args = [#loom.arg<0>], loom.module = "outer", loom.phase = #loom.phase<backward>} : (tensor<16x5xf32>) -> tensor<5x16xf32>
    %13 = loom.aten "aten::mm.default"(%12, %4) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "outer", loom.phase = #loom.phase<backward>} : (tensor<5x16xf32>, tensor<16x4xf32>) -> tensor<5x4xf32>
    %14 = loom.aten "aten::t.default"(%13) {args = [#loom.arg<0>], loom.module = "outer", loom.phase = #loom.phase<backward>} : (tensor<5x4xf32>) -> tensor<4x5xf32>
    %15 = loom.aten "aten::sum.dim_IntList"(%9) {args = [#loom.arg<0>, [0], true], loom.module = "outer", loom.phase = #loom.phase<backward>} : (tensor<16x5xf32>) -> tensor<1x5xf32>
    %16 = loom.aten "aten::view.default"(%15) {args = [#loom.arg<0>, [5]], loom.module = "outer", loom.phase = #loom.phase<backward>} : (tensor<1x5xf32>) -> tensor<5xf32>
    %17 = loom.aten "aten::t.default"(%14) {args = [#loom.arg<0>], loom.module = "outer", loom.phase = #loom.phase<backward>} : (tensor<4x5xf32>) -> tensor<5x4xf32>
    %18 = loom.aten "aten::t.default"(%11) {args = [#loom.arg<0>], loom.calls = {inner = 1 : i64}, loom.module = "inner", loom.phase = #loom.phase<backward>} : (tensor<16x4xf32>) -> tensor<4x16xf32>
    %19 = loom.aten "aten::mm.default"(%18, %arg4) {args = [#loom.arg<0>, #loom.arg<1>], loom.calls = {inner = 1 : i64}, loom.module = "inner", loom.phase = #loom.phase<backward>} : (tensor<4x16xf32>, tensor<16x4xf32>) -> tensor<4x4xf32>
    %20 = loom.aten "aten::t.default"(%19) {args = [#loom.arg<0>], loom.calls = {inner = 1 : i64}, loom.module = "inner", loom.phase = #loom.phase<backward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %21 = loom.aten "aten::sum.dim_IntList"(%11) {args = [#loom.arg<0>, [0], true], loom.calls = {inner = 1 : i64}, loom.module = "inner", loom.phase = #loom.phase<backward>} : (tensor<16x4xf32>) -> tensor<1x4xf32>
    %22 = loom.aten "aten::view.default"(%21) {args = [#loom.arg<0>, [4]], loom.calls = {inner = 1 : i64}, loom.module = "inner", loom.phase = #loom.phase<backward>} : (tensor<1x4xf32>) -> tensor<4xf32>
    %23 = loom.aten "aten::t.default"(%20) {args = [#loom.arg<0>], loom.calls = {inner = 1 : i64}, loom.module = "inner", loom.phase = #loom.phase<backward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %24 = loom.aten "aten::t.default"(%11) {args = [#loom.arg<0>], loom.module = "inner", loom.phase = #loom.phase<backward>} : (tensor<16x4xf32>) -> tensor<4x16xf32>
    %25 = loom.aten "aten::mm.default"(%24, %arg4) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "inner", loom.phase = #loom.phase<backward>} : (tensor<4x16xf32>, tensor<16x4xf32>) -> tensor<4x4xf32>
    %26 = loom.aten "aten::t.default"(%25) {args = [#loom.arg<0>], loom.module = "inner", loom.phase = #loom.phase<backward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %27 = loom.aten "aten::sum.dim_IntList"(%11) {args = [#loom.arg<0>, [0], true], loom.module = "inner", loom.phase = #loom.phase<backward>} : (tensor<16x4xf32>) -> tensor<1x4xf32>
    %28 = loom.aten "aten::view.default"(%27) {args = [#loom.arg<0>, [4]], loom.module = "inner", loom.phase = #loom.phase<backward>} : (tensor<1x4xf32>) -> tensor<4xf32>
    %29 = loom.aten "aten::add.Tensor"(%22, %28) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %30 = loom.aten "aten::t.default"(%26) {args = [#loom.arg<0>], loom.module = "inner", loom.phase = #loom.phase<backward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %31 = loom.aten "aten::add.Tensor"(%23, %30) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    return %7, %31, %29, %17, %16 : tensor<f32>, tensor<4x4xf32>, tensor<4xf32>, tensor<5x4xf32>, tensor<5xf32>
  }
}

