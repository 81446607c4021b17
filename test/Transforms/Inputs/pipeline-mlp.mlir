module attributes {loom.run_config = #loom.run_config<optimizer = #loom.adamw<>>} {
  func.func @step(%arg0: tensor<64x32xf32> {loom.name = "fc1.weight", loom.role = #loom.role<parameter>}, %arg1: tensor<64xf32> {loom.name = "fc1.bias", loom.role = #loom.role<parameter>}, %arg2: tensor<64x64xf32> {loom.name = "fc2.weight", loom.role = #loom.role<parameter>}, %arg3: tensor<64xf32> {loom.name = "fc2.bias", loom.role = #loom.role<parameter>}, %arg4: tensor<10x64xf32> {loom.name = "fc3.weight", loom.role = #loom.role<parameter>}, %arg5: tensor<10xf32> {loom.name = "fc3.bias", loom.role = #loom.role<parameter>}, %arg6: tensor<8x32xf32> {loom.name = "x", loom.role = #loom.role<input>}, %arg7: tensor<8xi64> {loom.name = "y", loom.role = #loom.role<input>}) -> (tensor<f32> {loom.role = #loom.role<loss>}, tensor<64x32xf32> {loom.role = #loom.role<grad>, loom.target = "fc1.weight"}, tensor<64xf32> {loom.role = #loom.role<grad>, loom.target = "fc1.bias"}, tensor<64x64xf32> {loom.role = #loom.role<grad>, loom.target = "fc2.weight"}, tensor<64xf32> {loom.role = #loom.role<grad>, loom.target = "fc2.bias"}, tensor<10x64xf32> {loom.role = #loom.role<grad>, loom.target = "fc3.weight"}, tensor<10xf32> {loom.role = #loom.role<grad>, loom.target = "fc3.bias"}) attributes {loom.step} {
    %0 = loom.aten "aten::t.default"(%arg0) {args = [#loom.arg<0>], loom.module = "fc1", loom.phase = #loom.phase<forward>} : (tensor<64x32xf32>) -> tensor<32x64xf32>
    %1 = loom.aten "aten::addmm.default"(%arg1, %arg6, %0) {args = [#loom.arg<0>, #loom.arg<1>, #loom.arg<2>], loom.module = "fc1", loom.phase = #loom.phase<forward>} : (tensor<64xf32>, tensor<8x32xf32>, tensor<32x64xf32>) -> tensor<8x64xf32>
    %2 = loom.aten "aten::relu.default"(%1) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<8x64xf32>) -> tensor<8x64xf32>
    %3 = loom.aten "aten::detach.default"(%2) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<8x64xf32>) -> tensor<8x64xf32>
    %4 = loom.aten "aten::t.default"(%arg2) {args = [#loom.arg<0>], loom.module = "fc2", loom.phase = #loom.phase<forward>} : (tensor<64x64xf32>) -> tensor<64x64xf32>
    %5 = loom.aten "aten::addmm.default"(%arg3, %2, %4) {args = [#loom.arg<0>, #loom.arg<1>, #loom.arg<2>], loom.module = "fc2", loom.phase = #loom.phase<forward>} : (tensor<64xf32>, tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
    %6 = loom.aten "aten::relu.default"(%5) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<8x64xf32>) -> tensor<8x64xf32>
    %7 = loom.aten "aten::detach.default"(%6) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<8x64xf32>) -> tensor<8x64xf32>
    %8 = loom.aten "aten::t.default"(%arg4) {args = [#loom.arg<0>], loom.module = "fc3", loom.phase = #loom.phase<forward>} : (tensor<10x64xf32>) -> tensor<64x10xf32>
    %9 = loom.aten "aten::addmm.default"(%arg5, %6, %8) {args = [#loom.arg<0>, #loom.arg<1>, #loom.arg<2>], loom.module = "fc3", loom.phase = #loom.phase<forward>} : (tensor<10xf32>, tensor<8x64xf32>, tensor<64x10xf32>) -> tensor<8x10xf32>
    %10 = loom.aten "aten::_log_softmax.default"(%9) {args = [#loom.arg<0>, 1, false], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<8x10xf32>) -> tensor<8x10xf32>
    %11 = loom.aten "aten::detach.default"(%10) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<8x10xf32>) -> tensor<8x10xf32>
    %12:2 = loom.aten "aten::nll_loss_forward.default"(%10, %arg7) {args = [#loom.arg<0>, #loom.arg<1>, unit, 1, -100], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<8x10xf32>, tensor<8xi64>) -> (tensor<f32>, tensor<f32>)
    %13 = loom.aten "aten::ones_like.default"(%12#0) {args = [#loom.arg<0>], kwargs = {memory_format = "torch.preserve_format", pin_memory = false}, loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<f32>
    %14 = loom.aten "aten::nll_loss_backward.default"(%13, %10, %arg7, %12#1) {args = [#loom.arg<0>, #loom.arg<1>, #loom.arg<2>, unit, 1, -100, #loom.arg<3>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>, tensor<8x10xf32>, tensor<8xi64>, tensor<f32>) -> tensor<8x10xf32>
    %15 = loom.aten "aten::_log_softmax_backward_data.default"(%14, %11) {args = [#loom.arg<0>, #loom.arg<1>, 1, f32], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<8x10xf32>, tensor<8x10xf32>) -> tensor<8x10xf32>
    %16 = loom.aten "aten::t.default"(%8) {args = [#loom.arg<0>], loom.module = "fc3", loom.phase = #loom.phase<backward>} : (tensor<64x10xf32>) -> tensor<10x64xf32>
    %17 = loom.aten "aten::mm.default"(%15, %16) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "fc3", loom.phase = #loom.phase<backward>} : (tensor<8x10xf32>, tensor<10x64xf32>) -> tensor<8x64xf32>
    %18 = loom.aten "aten::t.default"(%15) {args = [#loom.arg<0>], loom.module = "fc3", loom.phase = #loom.phase<backward>} : (tensor<8x10xf32>) -> tensor<10x8xf32>
    %19 = loom.aten "aten::mm.default"(%18, %6) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "fc3", loom.phase = #loom.phase<backward>} : (tensor<10x8xf32>, tensor<8x64xf32>) -> tensor<10x64xf32>
    %20 = loom.aten "aten::t.default"(%19) {args = [#loom.arg<0>], loom.module = "fc3", loom.phase = #loom.phase<backward>} : (tensor<10x64xf32>) -> tensor<64x10xf32>
    %21 = loom.aten "aten::sum.dim_IntList"(%15) {args = [#loom.arg<0>, [0], true], loom.module = "fc3", loom.phase = #loom.phase<backward>} : (tensor<8x10xf32>) -> tensor<1x10xf32>
    %22 = loom.aten "aten::view.default"(%21) {args = [#loom.arg<0>, [10]], loom.module = "fc3", loom.phase = #loom.phase<backward>} : (tensor<1x10xf32>) -> tensor<10xf32>
    %23 = loom.aten "aten::t.default"(%20) {args = [#loom.arg<0>], loom.module = "fc3", loom.phase = #loom.phase<backward>} : (tensor<64x10xf32>) -> tensor<10x64xf32>
    %24 = loom.aten "aten::threshold_backward.default"(%17, %7) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<8x64xf32>, tensor<8x64xf32>) -> tensor<8x64xf32>
    %25 = loom.aten "aten::t.default"(%4) {args = [#loom.arg<0>], loom.module = "fc2", loom.phase = #loom.phase<backward>} : (tensor<64x64xf32>) -> tensor<64x64xf32>
    %26 = loom.aten "aten::mm.default"(%24, %25) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "fc2", loom.phase = #loom.phase<backward>} : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
    %27 = loom.aten "aten::t.default"(%24) {args = [#loom.arg<0>], loom.module = "fc2", loom.phase = #loom.phase<backward>} : (tensor<8x64xf32>) -> tensor<64x8xf32>
    %28 = loom.aten "aten::mm.default"(%27, %2) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "fc2", loom.phase = #loom.phase<backward>} : (tensor<64x8xf32>, tensor<8x64xf32>) -> tensor<64x64xf32>
    %29 = loom.aten "aten::t.default"(%28) {args = [#loom.arg<0>], loom.module = "fc2", loom.phase = #loom.phase<backward>} : (tensor<64x64xf32>) -> tensor<64x64xf32>
    %30 = loom.aten "aten::sum.dim_IntList"(%24) {args = [#loom.arg<0>, [0], true], loom.module = "fc2", loom.phase = #loom.phase<backward>} : (tensor<8x64xf32>) -> tensor<1x64xf32>
    %31 = loom.aten "aten::view.default"(%30) {args = [#loom.arg<0>, [64]], loom.module = "fc2", loom.phase = #loom.phase<backward>} : (tensor<1x64xf32>) -> tensor<64xf32>
    %32 = loom.aten "aten::t.default"(%29) {args = [#loom.arg<0>], loom.module = "fc2", loom.phase = #loom.phase<backward>} : (tensor<64x64xf32>) -> tensor<64x64xf32>
    %33 = loom.aten "aten::threshold_backward.default"(%26, %3) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<8x64xf32>, tensor<8x64xf32>) -> tensor<8x64xf32>
    %34 = loom.aten "aten::t.default"(%33) {args = [#loom.arg<0>], loom.module = "fc1", loom.phase = #loom.phase<backward>} : (tensor<8x64xf32>) -> tensor<64x8xf32>
    %35 = loom.aten "aten::mm.default"(%34, %arg6) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "fc1", loom.phase = #loom.phase<backward>} : (tensor<64x8xf32>, tensor<8x32xf32>) -> tensor<64x32xf32>
    %36 = loom.aten "aten::t.default"(%35) {args = [#loom.arg<0>], loom.module = "fc1", loom.phase = #loom.phase<backward>} : (tensor<64x32xf32>) -> tensor<32x64xf32>
    %37 = loom.aten "aten::sum.dim_IntList"(%33) {args = [#loom.arg<0>, [0], true], loom.module = "fc1", loom.phase = #loom.phase<backward>} : (tensor<8x64xf32>) -> tensor<1x64xf32>
    %38 = loom.aten "aten::view.default"(%37) {args = [#loom.arg<0>, [64]], loom.module = "fc1", loom.phase = #loom.phase<backward>} : (tensor<1x64xf32>) -> tensor<64xf32>
    %39 = loom.aten "aten::t.default"(%36) {args = [#loom.arg<0>], loom.module = "fc1", loom.phase = #loom.phase<backward>} : (tensor<32x64xf32>) -> tensor<64x32xf32>
    return %12#0, %39, %38, %32, %31, %23, %22 : tensor<f32>, tensor<64x32xf32>, tensor<64xf32>, tensor<64x64xf32>, tensor<64xf32>, tensor<10x64xf32>, tensor<10xf32>
  }
}

