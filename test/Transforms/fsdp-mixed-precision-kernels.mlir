// RUN: loom-opt %s --split-input-file --loom-fsdp="mesh-shape=2 param-dtype=bf16" | FileCheck %s
// RUN: loom-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(loom-remat{mode=full}),loom-fsdp{mesh-shape=2 param-dtype=bf16})" | FileCheck %s --check-prefix=REMAT

// Under bf16 mixed precision the attention kernel runs in bf16, but its
// logsumexp stays float32: ATen returns it so (a bf16
// _scaled_dot_product_flash_attention_for_cpu returns (bf16, f32)), and the
// backward kernel reads it so ("expected scalar type Float" otherwise). The
// step's types must say what the runtime holds: the peak-memory prediction
// sizes the statistic from them (it was 2 bytes an element short, 256 B per
// layer on a small GPT with FSDP on 4 ranks).

// CHECK-LABEL: func.func @step(
// CHECK: %{{.*}}:2 = loom.aten "aten::_scaled_dot_product_flash_attention_for_cpu.default"{{.*}} -> (tensor<1x1x4x8xbf16>, tensor<1x1x4xf32>)
// CHECK-NOT: kwargs = {dtype = bf16}{{.*}}(tensor<1x1x4xf32>) -> tensor<1x1x4xbf16>
// CHECK: loom.aten "aten::_scaled_dot_product_flash_attention_for_cpu_backward.default"{{.*}} : (tensor<1x1x4x8xbf16>, tensor<1x1x4x8xbf16>, tensor<1x1x4x8xbf16>, tensor<1x1x4x8xbf16>, tensor<1x1x4x8xbf16>, tensor<1x1x4xf32>) ->

// With the block recomputed, the region's copy and its result stay float32
// too, and the backward reads the region's result uncast.
// REMAT-LABEL: func.func @step(
// REMAT: loom.recompute "layers.0"
// REMAT: loom.aten "aten::_scaled_dot_product_flash_attention_for_cpu.default"{{.*}} -> (tensor<1x1x4x8xbf16>, tensor<1x1x4xf32>)
// REMAT: } {loom.module = "layers.0", loom.phase = #loom.phase<backward>}
// REMAT-NOT: kwargs = {dtype = bf16}{{.*}}(tensor<1x1x4xf32>) -> tensor<1x1x4xbf16>
// REMAT: loom.aten "aten::_scaled_dot_product_flash_attention_for_cpu_backward.default"{{.*}}, tensor<1x1x4xf32>) ->

!q = tensor<1x1x4x8xf32>
func.func @step(%w: tensor<8x8xf32> {loom.name = "layers.0.q.weight", loom.role = #loom.role<parameter>},
                %x: tensor<4x8xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<8x8xf32> {loom.role = #loom.role<grad>, loom.target = "layers.0.q.weight"})
    attributes {loom.step} {
  %wt = loom.aten "aten::t.default"(%w) {args = [#loom.arg<0>], loom.module = "layers.0.q", loom.phase = #loom.phase<forward>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %h = loom.aten "aten::mm.default"(%x, %wt) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0.q", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %q = loom.aten "aten::view.default"(%h) {args = [#loom.arg<0>, [1, 1, 4, 8]], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> !q
  %s:2 = loom.aten "aten::_scaled_dot_product_flash_attention_for_cpu.default"(%q, %q, %q) {args = [#loom.arg<0>, #loom.arg<1>, #loom.arg<2>, 0.0, true], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (!q, !q, !q) -> (!q, tensor<1x1x4xf32>)
  %l = loom.aten "aten::sum.default"(%s#0) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (!q) -> tensor<f32>
  %one = loom.aten "aten::ones_like.default"(%l) {args = [#loom.arg<0>], kwargs = {memory_format = "torch.preserve_format", pin_memory = false}, loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<f32>
  %go = loom.aten "aten::expand.default"(%one) {args = [#loom.arg<0>, [1, 1, 4, 8]], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> !q
  %g:3 = loom.aten "aten::_scaled_dot_product_flash_attention_for_cpu_backward.default"(%go, %q, %q, %q, %s#0, %s#1) {args = [#loom.arg<0>, #loom.arg<1>, #loom.arg<2>, #loom.arg<3>, #loom.arg<4>, #loom.arg<5>, 0.0, true], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (!q, !q, !q, !q, !q, tensor<1x1x4xf32>) -> (!q, !q, !q)
  %a = loom.aten "aten::add.Tensor"(%g#0, %g#1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (!q, !q) -> !q
  %b = loom.aten "aten::add.Tensor"(%a, %g#2) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (!q, !q) -> !q
  %gh = loom.aten "aten::view.default"(%b) {args = [#loom.arg<0>, [4, 8]], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (!q) -> tensor<4x8xf32>
  %xt = loom.aten "aten::t.default"(%x) {args = [#loom.arg<0>], loom.module = "layers.0.q", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %gw0 = loom.aten "aten::mm.default"(%xt, %gh) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0.q", loom.phase = #loom.phase<backward>} : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %gw = loom.aten "aten::t.default"(%gw0) {args = [#loom.arg<0>], loom.module = "layers.0.q", loom.phase = #loom.phase<backward>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return %l, %gw : tensor<f32>, tensor<8x8xf32>
}

// -----

// A `.float()` of a tensor already f32 at trace time: export writes no copy,
// only `_assert_tensor_metadata(h, dtype=f32)`, and the loss reads h itself.
// Under bf16 mixed precision h is bf16 and the model's `.float()` converts
// again, as in eager under FSDP2: the check states bf16 (it stated f32 and
// failed at run time) and what follows it reads h cast to f32, so the loss
// is summed in f32 as FSDP2 sums it (PyTorch's test Transformer ends so;
// test_fsdp_parity.py::test_fsdp_bf16_on_pytorchs_test_transformer).

// CHECK-LABEL: func.func @float_check(
// CHECK: %[[H:.*]] = loom.aten "aten::mm.default"{{.*}} -> tensor<4x8xbf16>
// CHECK-NEXT: loom.aten "aten::_assert_tensor_metadata.default"(%[[H]]) {args = [#loom.arg<0>, unit, unit, bf16]
// CHECK-NEXT: %[[F:.*]] = loom.aten "aten::_to_copy.default"(%[[H]]) {{.*}}kwargs = {dtype = f32}{{.*}} -> tensor<4x8xf32>
// CHECK-NEXT: loom.aten "aten::sum.default"(%[[F]]) {{.*}} -> tensor<f32>

// REMAT-LABEL: func.func @float_check(

func.func @float_check(%w: tensor<8x8xf32> {loom.name = "layers.0.q.weight", loom.role = #loom.role<parameter>},
                       %x: tensor<4x8xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<8x8xf32> {loom.role = #loom.role<grad>, loom.target = "layers.0.q.weight"})
    attributes {loom.step} {
  %wt = loom.aten "aten::t.default"(%w) {args = [#loom.arg<0>], loom.module = "layers.0.q", loom.phase = #loom.phase<forward>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %h = loom.aten "aten::mm.default"(%x, %wt) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0.q", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  loom.aten "aten::_assert_tensor_metadata.default"(%h) {args = [#loom.arg<0>, unit, unit, f32], kwargs = {device = "cpu", layout = "torch.strided"}, loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> ()
  %l = loom.aten "aten::sum.default"(%h) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<f32>
  %one = loom.aten "aten::ones_like.default"(%l) {args = [#loom.arg<0>], kwargs = {memory_format = "torch.preserve_format", pin_memory = false}, loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<f32>
  %go = loom.aten "aten::expand.default"(%one) {args = [#loom.arg<0>, [4, 8]], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<4x8xf32>
  %got = loom.aten "aten::t.default"(%go) {args = [#loom.arg<0>], loom.module = "layers.0.q", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %gw = loom.aten "aten::mm.default"(%got, %x) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0.q", loom.phase = #loom.phase<backward>} : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  return %l, %gw : tensor<f32>, tensor<8x8xf32>
}
