// RUN: loom-opt %s --loom-stats -o /dev/null 2>&1 | FileCheck %s
// The loomrt program predicts the same peak:
// RUN: loom-compile %s --optimizer=none --emit=mlir --summary -o /dev/null 2>&1 | FileCheck %s --check-prefix=RT

// Two things the CPU kernels hold beyond their results, computed by hand
// (PeakMemory.cpp, getResultStorageBytes and getKernelScratchBytes):
// - a reduced mse_loss returns a 0-dim tensor over the input-sized buffer
//   it computed the squared errors in, so the loss holds 16x8xf32 (512 B)
//   until the step returns it, not 4 B;
// - native_batch_norm_backward holds one gradient-sized temporary (512 B)
//   while it runs.
//
// Persistent: x and target 512 B each, w 256 B, the batch norm's weight,
// bias, running mean and running variance 32 B each: 1408 B.
// Activations (op index: storage [first, last op]); views (t) allocate
// nothing:
//    1 h 512 [1,8]   2 n#0 512 [2,3], n#1 n#2 32 each [2,8], n#3 n#4 32 each
//    [2,end] (returned)   3 r 512 [3,7]   4 l 512 [4,end]   5 one 4 [5,6]
//    6 gr 512 [6,7]   7 gb 512 [7,8]   8 g#0 512 [8,10], g#1 g#2 32 each
//    [8,end]   10 gw 256 [10,end]
// Live at op 7: h 512 + n#1..4 128 + r 512 + l 512 + gr 512 + gb 512 =
// 2688. At op 8: h 512 + n#1..4 128 + l 512 + gb 512 + g 576 + the
// kernel's 512 = 2752, the peak: 1408 + 2752 = 4160. (With a 4-byte loss:
// 2244 at op 8, and the peak 2180 at op 7; without the temporary, 2688 at
// op 7.)

// CHECK: predicted peak memory: 4160 bytes (persistent 1408 + activations 2752, at 'aten::native_batch_norm_backward.default' in 'layers.0.bn')
// RT: predicted peak memory 4160 bytes (persistent 1408 + activations 2752)

!a = tensor<16x8xf32>
!c = tensor<8xf32>
!w = tensor<8x8xf32>
func.func @step(%x: !a {loom.name = "x", loom.role = #loom.role<input>},
                %target: !a {loom.name = "target", loom.role = #loom.role<input>},
                %w: !w {loom.name = "layers.0.fc.weight", loom.role = #loom.role<parameter>},
                %bw: !c {loom.name = "layers.0.bn.weight", loom.role = #loom.role<parameter>},
                %bb: !c {loom.name = "layers.0.bn.bias", loom.role = #loom.role<parameter>},
                %rm: !c {loom.name = "layers.0.bn.running_mean", loom.role = #loom.role<buffer>},
                %rv: !c {loom.name = "layers.0.bn.running_var", loom.role = #loom.role<buffer>})
    -> (!c {loom.role = #loom.role<buffer_mutation>, loom.target = "layers.0.bn.running_mean"},
        !c {loom.role = #loom.role<buffer_mutation>, loom.target = "layers.0.bn.running_var"},
        tensor<f32> {loom.role = #loom.role<loss>},
        !w {loom.role = #loom.role<grad>, loom.target = "layers.0.fc.weight"},
        !c {loom.role = #loom.role<grad>, loom.target = "layers.0.bn.weight"},
        !c {loom.role = #loom.role<grad>, loom.target = "layers.0.bn.bias"})
    attributes {loom.step} {
  %wt = loom.aten "aten::t.default"(%w) {args = [#loom.arg<0>], loom.module = "layers.0.fc", loom.phase = #loom.phase<forward>} : (!w) -> !w
  %h = loom.aten "aten::mm.default"(%x, %wt) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0.fc", loom.phase = #loom.phase<forward>} : (!a, !w) -> !a
  %n:5 = loom.aten "aten::_native_batch_norm_legit_functional.default"(%h, %bw, %bb, %rm, %rv) {args = [#loom.arg<0>, #loom.arg<1>, #loom.arg<2>, #loom.arg<3>, #loom.arg<4>, true, 1.000000e-01, 1.000000e-05], loom.module = "layers.0.bn", loom.phase = #loom.phase<forward>} : (!a, !c, !c, !c, !c) -> (!a, !c, !c, !c, !c)
  %r = loom.aten "aten::relu.default"(%n#0) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (!a) -> !a
  %l = loom.aten "aten::mse_loss.default"(%r, %target) {args = [#loom.arg<0>, #loom.arg<1>, 1], loom.module = "", loom.phase = #loom.phase<forward>} : (!a, !a) -> tensor<f32>
  %one = loom.aten "aten::ones_like.default"(%l) {args = [#loom.arg<0>], kwargs = {memory_format = "torch.preserve_format", pin_memory = false}, loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<f32>
  %gr = loom.aten "aten::mse_loss_backward.default"(%one, %r, %target) {args = [#loom.arg<0>, #loom.arg<1>, #loom.arg<2>, 1], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>, !a, !a) -> !a
  %gb = loom.aten "aten::threshold_backward.default"(%gr, %r) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (!a, !a) -> !a
  %g:3 = loom.aten "aten::native_batch_norm_backward.default"(%gb, %h, %bw, %n#3, %n#4, %n#1, %n#2) {args = [#loom.arg<0>, #loom.arg<1>, #loom.arg<2>, #loom.arg<3>, #loom.arg<4>, #loom.arg<5>, #loom.arg<6>, true, 1.000000e-05, [true, true, true]], loom.module = "layers.0.bn", loom.phase = #loom.phase<backward>} : (!a, !a, !c, !c, !c, !c, !c) -> (!a, !c, !c)
  %xt = loom.aten "aten::t.default"(%x) {args = [#loom.arg<0>], loom.module = "layers.0.fc", loom.phase = #loom.phase<backward>} : (!a) -> tensor<8x16xf32>
  %gw0 = loom.aten "aten::mm.default"(%xt, %g#0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0.fc", loom.phase = #loom.phase<backward>} : (tensor<8x16xf32>, !a) -> !w
  %gw = loom.aten "aten::t.default"(%gw0) {args = [#loom.arg<0>], loom.module = "layers.0.fc", loom.phase = #loom.phase<backward>} : (!w) -> !w
  return %n#3, %n#4, %l, %gw, %g#1, %g#2 : !c, !c, tensor<f32>, !w, !c, !c
}
