// RUN: loom-opt %s --loom-fsdp="mesh-shape=2 param-dtype=bf16 reduce-dtype=f32" | FileCheck %s
// RUN: loom-opt %s --loom-fsdp="mesh-shape=2" | FileCheck %s --check-prefix=F32

// A model that runs under torch.autocast(bf16) is traced with f32
// parameters: autocast writes a cast to bf16 before each matmul (of the
// activation and of the weight), and autograd casts each of their
// gradients back to f32 (ToCopyBackward, `loom.cast` pairing the two).
// Under FSDP2's MixedPrecisionPolicy(param_dtype=bf16) the activation and
// the gathered weight are already bf16, so eager's casts are no-ops: the
// residual stream's gradient stays bf16 and is summed in bf16. Loom kept
// the backward casts, summed that gradient in f32 and differed from
// fully_shard by 1e-5 after one SGD step (test_fsdp_parity.py,
// test_fsdp_bf16_autocast_model_matches_fully_shard). Now the backward cast
// goes where the forward cast's input runs in bf16 (casts 0 and 1), and
// stays where it is still f32 (cast 3 reads the model's `.float()`);
// casts left converting bf16 to bf16 go too.

// CHECK-LABEL: func.func @step(
// CHECK: %[[X:.*]] = loom.aten "aten::mul.Tensor"{{.*}} -> tensor<4x8xbf16>
// CHECK-NOT: loom.cast = 0
// CHECK-NOT: loom.cast = 1
// CHECK: %[[H:.*]] = loom.aten "aten::mm.default"(%[[X]], %{{.*}}) {{.*}} -> tensor<4x8xbf16>
// CHECK: %[[HF:.*]] = loom.aten "aten::_to_copy.default"(%[[H]]) {{.*}}kwargs = {dtype = f32}, loom.cast = 2 : i64{{.*}} -> tensor<4x8xf32>
// CHECK: loom.aten "aten::_to_copy.default"(%[[HF]]) {{.*}}kwargs = {dtype = bf16}, loom.cast = 3 : i64
// CHECK: %[[GO:.*]] = loom.aten "aten::expand.default"{{.*}} -> tensor<4x8xbf16>
// CHECK: %[[GHF:.*]] = loom.aten "aten::_to_copy.default"(%[[GO]]) {{.*}}kwargs = {dtype = f32}, loom.cast = 3 : i64{{.*}} -> tensor<4x8xf32>
// CHECK: %[[GH:.*]] = loom.aten "aten::_to_copy.default"(%[[GHF]]) {{.*}}kwargs = {dtype = bf16}, loom.cast = 2 : i64{{.*}} -> tensor<4x8xbf16>
// CHECK: %[[GW:.*]] = loom.aten "aten::mm.default"(%{{.*}}, %[[GH]]) {{.*}} -> tensor<8x8xbf16>
// CHECK: %[[GWT:.*]] = loom.aten "aten::t.default"(%[[GW]])
// CHECK: loom.aten "aten::_to_copy.default"(%[[GWT]]) {{.*}}kwargs = {dtype = f32}, loom.module = "layers.0"
// CHECK: loom.reduce_scatter_start %{{.*}} : tensor<64xf32>
// CHECK: %[[GX:.*]] = loom.aten "aten::mm.default"(%[[GH]], %{{.*}}) {{.*}} -> tensor<4x8xbf16>
// CHECK: loom.aten "aten::add.Tensor"(%[[GO]], %[[GX]]) {{.*}} : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
// CHECK-NOT: loom.cast = 0
// CHECK: return

// In f32 nothing changes: every cast stays, the pairs included.
// F32-LABEL: func.func @step(
// F32-COUNT-2: loom.cast = 0
// F32-NOT: loom.cast = 0
// F32: return

func.func @step(%w: tensor<8x8xf32> {loom.name = "layers.0.fc.weight", loom.role = #loom.role<parameter>},
                %s: tensor<8xf32> {loom.name = "scale", loom.role = #loom.role<parameter>},
                %x0: tensor<4x8xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<8x8xf32> {loom.role = #loom.role<grad>, loom.target = "layers.0.fc.weight"},
        tensor<8xf32> {loom.role = #loom.role<grad>, loom.target = "scale"})
    attributes {loom.step} {
  %x = loom.aten "aten::mul.Tensor"(%x0, %s) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %xb = loom.aten "aten::_to_copy.default"(%x) {args = [#loom.arg<0>], kwargs = {dtype = bf16}, loom.cast = 0 : i64, loom.module = "layers.0.fc", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<4x8xbf16>
  %wb = loom.aten "aten::_to_copy.default"(%w) {args = [#loom.arg<0>], kwargs = {dtype = bf16}, loom.cast = 1 : i64, loom.module = "layers.0.fc", loom.phase = #loom.phase<forward>} : (tensor<8x8xf32>) -> tensor<8x8xbf16>
  %wt = loom.aten "aten::t.default"(%wb) {args = [#loom.arg<0>], loom.module = "layers.0.fc", loom.phase = #loom.phase<forward>} : (tensor<8x8xbf16>) -> tensor<8x8xbf16>
  %h = loom.aten "aten::mm.default"(%xb, %wt) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0.fc", loom.phase = #loom.phase<forward>} : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
  %hf = loom.aten "aten::_to_copy.default"(%h) {args = [#loom.arg<0>], kwargs = {dtype = f32}, loom.cast = 2 : i64, loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<4x8xbf16>) -> tensor<4x8xf32>
  %hb = loom.aten "aten::_to_copy.default"(%hf) {args = [#loom.arg<0>], kwargs = {dtype = bf16}, loom.cast = 3 : i64, loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<4x8xbf16>
  %r = loom.aten "aten::add.Tensor"(%x, %hb) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>, tensor<4x8xbf16>) -> tensor<4x8xf32>
  %l = loom.aten "aten::sum.default"(%r) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<f32>
  %one = loom.aten "aten::ones_like.default"(%l) {args = [#loom.arg<0>], kwargs = {memory_format = "torch.preserve_format", pin_memory = false}, loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<f32>
  %go = loom.aten "aten::expand.default"(%one) {args = [#loom.arg<0>, [4, 8]], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<4x8xf32>
  %ghb = loom.aten "aten::_to_copy.default"(%go) {args = [#loom.arg<0>], kwargs = {dtype = bf16}, loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>) -> tensor<4x8xbf16>
  %ghf = loom.aten "aten::_to_copy.default"(%ghb) {args = [#loom.arg<0>], kwargs = {dtype = f32}, loom.cast = 3 : i64, loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<4x8xbf16>) -> tensor<4x8xf32>
  %gh = loom.aten "aten::_to_copy.default"(%ghf) {args = [#loom.arg<0>], kwargs = {dtype = bf16}, loom.cast = 2 : i64, loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>) -> tensor<4x8xbf16>
  %xbt = loom.aten "aten::t.default"(%xb) {args = [#loom.arg<0>], loom.module = "layers.0.fc", loom.phase = #loom.phase<backward>} : (tensor<4x8xbf16>) -> tensor<8x4xbf16>
  %gwt = loom.aten "aten::mm.default"(%xbt, %gh) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0.fc", loom.phase = #loom.phase<backward>} : (tensor<8x4xbf16>, tensor<4x8xbf16>) -> tensor<8x8xbf16>
  %gwb = loom.aten "aten::t.default"(%gwt) {args = [#loom.arg<0>], loom.module = "layers.0.fc", loom.phase = #loom.phase<backward>} : (tensor<8x8xbf16>) -> tensor<8x8xbf16>
  %gw = loom.aten "aten::_to_copy.default"(%gwb) {args = [#loom.arg<0>], kwargs = {dtype = f32, layout = "torch.strided", device = "cpu"}, loom.cast = 1 : i64, loom.module = "layers.0.fc", loom.phase = #loom.phase<backward>} : (tensor<8x8xbf16>) -> tensor<8x8xf32>
  %gxb = loom.aten "aten::mm.default"(%gh, %wb) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0.fc", loom.phase = #loom.phase<backward>} : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
  %gx1 = loom.aten "aten::_to_copy.default"(%gxb) {args = [#loom.arg<0>], kwargs = {dtype = f32, layout = "torch.strided", device = "cpu"}, loom.cast = 0 : i64, loom.module = "layers.0.fc", loom.phase = #loom.phase<backward>} : (tensor<4x8xbf16>) -> tensor<4x8xf32>
  %gx = loom.aten "aten::add.Tensor"(%go, %gx1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %gs0 = loom.aten "aten::mul.Tensor"(%gx, %x0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %gs = loom.aten "aten::sum.dim_IntList"(%gs0) {args = [#loom.arg<0>, [0], false], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>) -> tensor<8xf32>
  return %l, %gw, %gs : tensor<f32>, tensor<8x8xf32>, tensor<8xf32>
}
