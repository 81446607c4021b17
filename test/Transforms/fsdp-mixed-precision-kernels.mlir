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

// -----

// Rotary embeddings as complex numbers (Meta's and torchtitan's Llama):
// ATen has no bf16 complex, so view_as_complex reads f32 in eager mixed
// precision. In forward the model casts up itself (`x.float()`, traced as a
// no-op on f32); in backward autograd casts the bf16 gradient of the next
// matmul up to the f32 of view_as_real's output before view_as_complex
// takes it. Loom lowered that gradient to bf16 and view_as_complex failed at
// run time ("view_as_complex is only supported for half, float and double
// tensors", rope_llama_model.py under FSDP bf16); it now reads it cast up.

// CHECK-LABEL: func.func @rotary(
// CHECK: %[[H:.*]] = loom.aten "aten::view.default"{{.*}} -> tensor<4x4x2xbf16>
// CHECK-NEXT: %[[HF:.*]] = loom.aten "aten::_to_copy.default"(%[[H]]) {{.*}}kwargs = {dtype = f32}{{.*}} -> tensor<4x4x2xf32>
// CHECK-NEXT: loom.aten "aten::view_as_complex.default"(%[[HF]]) {{.*}}phase<forward>} : (tensor<4x4x2xf32>) -> tensor<4x4xcomplex<f32>>
// CHECK: %[[G:.*]] = loom.aten "aten::view.default"{{.*}}phase<backward>} : (tensor<4x8xbf16>) -> tensor<4x4x2xbf16>
// CHECK-NEXT: %[[GF:.*]] = loom.aten "aten::_to_copy.default"(%[[G]]) {{.*}}kwargs = {dtype = f32}{{.*}} -> tensor<4x4x2xf32>
// CHECK-NEXT: loom.aten "aten::view_as_complex.default"(%[[GF]]) {{.*}}phase<backward>} : (tensor<4x4x2xf32>) -> tensor<4x4xcomplex<f32>>

// REMAT-LABEL: func.func @rotary(

!c = tensor<4x4xcomplex<f32>>
func.func @rotary(%w1: tensor<8x8xf32> {loom.name = "layers.0.q.weight", loom.role = #loom.role<parameter>},
                  %w2: tensor<8x8xf32> {loom.name = "layers.0.o.weight", loom.role = #loom.role<parameter>},
                  %freqs: tensor<4xcomplex<f32>> {loom.name = "freqs", loom.role = #loom.role<buffer>},
                  %x: tensor<4x8xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<8x8xf32> {loom.role = #loom.role<grad>, loom.target = "layers.0.q.weight"},
        tensor<8x8xf32> {loom.role = #loom.role<grad>, loom.target = "layers.0.o.weight"})
    attributes {loom.step} {
  %w1t = loom.aten "aten::t.default"(%w1) {args = [#loom.arg<0>], loom.module = "layers.0.q", loom.phase = #loom.phase<forward>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %h = loom.aten "aten::mm.default"(%x, %w1t) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0.q", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %hv = loom.aten "aten::view.default"(%h) {args = [#loom.arg<0>, [4, 4, 2]], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<4x4x2xf32>
  %c = loom.aten "aten::view_as_complex.default"(%hv) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<4x4x2xf32>) -> !c
  %r = loom.aten "aten::mul.Tensor"(%c, %freqs) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (!c, tensor<4xcomplex<f32>>) -> !c
  %rr = loom.aten "aten::view_as_real.default"(%r) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (!c) -> tensor<4x4x2xf32>
  %rf = loom.aten "aten::view.default"(%rr) {args = [#loom.arg<0>, [4, 8]], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<4x4x2xf32>) -> tensor<4x8xf32>
  %w2t = loom.aten "aten::t.default"(%w2) {args = [#loom.arg<0>], loom.module = "layers.0.o", loom.phase = #loom.phase<forward>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %o = loom.aten "aten::mm.default"(%rf, %w2t) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0.o", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %l = loom.aten "aten::sum.default"(%o) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<f32>
  %one = loom.aten "aten::ones_like.default"(%l) {args = [#loom.arg<0>], kwargs = {memory_format = "torch.preserve_format", pin_memory = false}, loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<f32>
  %go = loom.aten "aten::expand.default"(%one) {args = [#loom.arg<0>, [4, 8]], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<4x8xf32>
  %rft = loom.aten "aten::t.default"(%rf) {args = [#loom.arg<0>], loom.module = "layers.0.o", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %gw2t = loom.aten "aten::mm.default"(%rft, %go) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0.o", loom.phase = #loom.phase<backward>} : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %gw2 = loom.aten "aten::t.default"(%gw2t) {args = [#loom.arg<0>], loom.module = "layers.0.o", loom.phase = #loom.phase<backward>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %grf = loom.aten "aten::mm.default"(%go, %w2) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0.o", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %grr = loom.aten "aten::view.default"(%grf) {args = [#loom.arg<0>, [4, 4, 2]], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>) -> tensor<4x4x2xf32>
  %gr = loom.aten "aten::view_as_complex.default"(%grr) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<4x4x2xf32>) -> !c
  %gc = loom.aten "aten::mul.Tensor"(%gr, %freqs) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (!c, tensor<4xcomplex<f32>>) -> !c
  %ghv = loom.aten "aten::view_as_real.default"(%gc) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (!c) -> tensor<4x4x2xf32>
  %gh = loom.aten "aten::view.default"(%ghv) {args = [#loom.arg<0>, [4, 8]], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<4x4x2xf32>) -> tensor<4x8xf32>
  %xt = loom.aten "aten::t.default"(%x) {args = [#loom.arg<0>], loom.module = "layers.0.q", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %gw1t = loom.aten "aten::mm.default"(%xt, %gh) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0.q", loom.phase = #loom.phase<backward>} : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %gw1 = loom.aten "aten::t.default"(%gw1t) {args = [#loom.arg<0>], loom.module = "layers.0.q", loom.phase = #loom.phase<backward>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return %l, %gw1, %gw2 : tensor<f32>, tensor<8x8xf32>, tensor<8x8xf32>
}
