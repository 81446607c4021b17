// RUN: loom-opt %s --loom-stats -o /dev/null 2>&1 | FileCheck %s
// RUN: loom-compile %s --optimizer=none --emit=mlir --summary -o /dev/null 2>&1 | FileCheck %s --check-prefix=RT
// The pass replaces the attribute with a profile file's:
// RUN: loom-opt %s --loom-kernel-workspace=file=%S/Inputs/kernel-workspace.json --loom-stats -o /dev/null 2>&1 | FileCheck %s --check-prefix=FILE
// RUN: loom-compile %s --optimizer=none --emit=mlir --summary --kernel-workspace=%S/Inputs/kernel-workspace.json -o /dev/null 2>&1 | FileCheck %s --check-prefix=FILE-RT
// RUN: loom-opt %s --loom-kernel-workspace=file=%S/Inputs/kernel-workspace.json | FileCheck %s --check-prefix=ATTR

// A measured kernel workspace profile (`loom.kernel_workspace`, what
// loom-run --kernel-workspace writes) replaces the analysis' own rules for
// the kernel signatures it lists, and only those. The step is
// peak-memory-kernels.mlir's, whose peak without a profile is 4160 B at the
// batch norm backward, 512 B of it that kernel's temporary
// (getKernelScratchBytes' rule). Persistent: 1408 B.
//
// The attribute below measured the batch norm backward at 0 B and the
// forward mm at 2000 B; the relu entry's shape is not the step's, so it
// counts nothing. Live activations at op 1 (the mm): h 512 + 2000 = 2512;
// at op 7: 2688 (unchanged); at op 8 (the batch norm backward): 2752 - 512
// = 2240. The peak is 1408 + 2688 = 4096 at op 7, threshold_backward.
// CHECK: predicted peak memory: 4096 bytes (persistent 1408 + activations 2688, at 'aten::threshold_backward.default' in 'layers.0')
// RT: predicted peak memory 4096 bytes (persistent 1408 + activations 2688)
//
// Inputs/kernel-workspace.json measured the forward mm at 3000 B and the
// batch norm backward at 0 B: at op 1, 512 + 3000 = 3512 is the peak, 1408
// + 3512 = 4920. The backward mm's signature (f32[16,8] and f32[8,16] into
// f32[8,8]) is listed at 100000 B but the profile's key spells its inputs
// unsorted, so it does not match and counts nothing.
// FILE: predicted peak memory: 4920 bytes (persistent 1408 + activations 3512, at 'aten::mm.default' in 'layers.0.fc')
// FILE-RT: predicted peak memory 4920 bytes (persistent 1408 + activations 3512)
// ATTR: module attributes {loom.kernel_workspace = {
// ATTR-SAME: "aten::mm.default(f32[16,8],f32[8,8])->(f32[16,8])" = 3000 : i64
// ATTR-SAME: "aten::native_batch_norm_backward.default(f32[16,8],f32[16,8],f32[8],f32[8],f32[8],f32[8],f32[8])->(f32[16,8],f32[8],f32[8])" = 0 : i64
// ATTR-NOT: "aten::relu
// ATTR-SAME: loom.kernel_workspace_threads = 2 : i64
// ATTR: func.func @step
// The artifact records the profile's threads (loom-run warns when it runs
// with others):
// RUN: loom-compile %s --optimizer=none --emit=program --kernel-workspace=%S/Inputs/kernel-workspace.json -o - | FileCheck %s --check-prefix=PROGRAM
// RUN: loom-compile %s --optimizer=none --emit=program -o - | FileCheck %s --check-prefix=NO-PROFILE
// PROGRAM: "kernel_workspace_threads":2
// NO-PROFILE-NOT: kernel_workspace_threads

!a = tensor<16x8xf32>
!c = tensor<8xf32>
!w = tensor<8x8xf32>
module attributes {loom.kernel_workspace = {
  "aten::mm.default(f32[16,8],f32[8,8])->(f32[16,8])" = 2000 : i64,
  "aten::native_batch_norm_backward.default(f32[16,8],f32[16,8],f32[8],f32[8],f32[8],f32[8],f32[8])->(f32[16,8],f32[8],f32[8])" = 0 : i64,
  "aten::relu.default(f32[4,4])->(f32[4,4])" = 100000 : i64}} {
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
}
