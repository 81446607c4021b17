// RUN: loom-opt %s --loom-fsdp="mesh-shape=2 param-dtype=bf16 reduce-dtype=f32" | FileCheck %s
// RUN: loom-opt %s --loom-fsdp="mesh-shape=2" | FileCheck %s --check-prefix=F32
// RUN: loom-opt %s --loom-fsdp="mesh-shape=2" --loom-lower-to-rt | FileCheck %s --check-prefix=RT

// Meta's RMSNorm, `self._norm(x.float()).type_as(x) * self.weight`, traced in
// f32: `.float()` and `.type_as(x)` convert x to the dtype it has and leave
// no op. Capture traced the step again with bf16 parameters and wrote the
// casts it found there as `_to_copy`s of a value to its own dtype, marked
// `loom.policy_cast`: false for `.float()` (to f32, the dtype it names),
// true for `.type_as(x)` (to the compute dtype). Under the bf16 policy the
// first converts the bf16 activation up, the second the f32 norm back down,
// and the product with the weight runs in bf16 as in eager; by type
// promotion alone it ran in f32 (f32 norm times bf16 weight), and the
// loss differed from fully_shard's at the first step
// (test_fsdp_parity.py::test_fsdp_bf16_casts_the_model_makes_match_fully_shard).
// A policy cast whose input has its dtype already goes: the `.float()` of
// the f32 buffer, and the `.type_as` of the product that is bf16 already.

// CHECK-LABEL: func.func @step(
// CHECK: %[[X:.*]] = loom.aten "aten::mul.Tensor"{{.*}} -> tensor<4x8xbf16>
// CHECK: %[[UP:.*]] = loom.aten "aten::_to_copy.default"(%[[X]]) {{.*}}kwargs = {dtype = f32}
// CHECK-NOT: loom.policy_cast
// CHECK-SAME: -> tensor<4x8xf32>
// CHECK: %[[SQ:.*]] = loom.aten "aten::mul.Tensor"(%[[UP]], %[[UP]]) {{.*}} -> tensor<4x8xf32>
// CHECK: %[[N:.*]] = loom.aten "aten::add.Tensor"(%[[SQ]], %{{[^)]*}}) {{.*}} -> tensor<4x8xf32>
// CHECK: %[[DOWN:.*]] = loom.aten "aten::_to_copy.default"(%[[N]]) {{.*}}kwargs = {dtype = bf16}
// CHECK-NOT: loom.policy_cast
// CHECK-SAME: -> tensor<4x8xbf16>
// CHECK: %[[Y:.*]] = loom.aten "aten::mul.Tensor"(%[[DOWN]], %{{.*}}) {{.*}} : (tensor<4x8xbf16>, tensor<8xbf16>) -> tensor<4x8xbf16>
// CHECK-NEXT: loom.aten "aten::sum.default"(%[[Y]])
// CHECK-NOT: loom.policy_cast
// CHECK: return

// In f32 the casts stay as they were traced, marked; lowering to the
// runtime makes each the value itself.
// F32-LABEL: func.func @step(
// F32-COUNT-4: loom.policy_cast
// F32-NOT: loom.policy_cast
// F32: return
// RT-LABEL: loomrt.program "step"
// RT-NOT: aten::_to_copy
// RT: loomrt.return

func.func @step(%w: tensor<8xf32> {loom.name = "layers.0.norm.weight", loom.role = #loom.role<parameter>},
                %buf: tensor<4x8xf32> {loom.name = "layers.0.bias", loom.role = #loom.role<buffer>},
                %x0: tensor<4x8xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<8xf32> {loom.role = #loom.role<grad>, loom.target = "layers.0.norm.weight"})
    attributes {loom.step} {
  %x = loom.aten "aten::mul.Tensor"(%x0, %x0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %up = loom.aten "aten::_to_copy.default"(%x) {args = [#loom.arg<0>], kwargs = {dtype = f32}, loom.module = "layers.0.norm", loom.phase = #loom.phase<forward>, loom.policy_cast = false} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %bufup = loom.aten "aten::_to_copy.default"(%buf) {args = [#loom.arg<0>], kwargs = {dtype = f32}, loom.module = "layers.0.norm", loom.phase = #loom.phase<forward>, loom.policy_cast = false} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %sq = loom.aten "aten::mul.Tensor"(%up, %up) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0.norm", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %n = loom.aten "aten::add.Tensor"(%sq, %bufup) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0.norm", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %down = loom.aten "aten::_to_copy.default"(%n) {args = [#loom.arg<0>], kwargs = {dtype = f32}, loom.module = "layers.0.norm", loom.phase = #loom.phase<forward>, loom.policy_cast = true} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %y0 = loom.aten "aten::mul.Tensor"(%down, %w) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0.norm", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %y = loom.aten "aten::_to_copy.default"(%y0) {args = [#loom.arg<0>], kwargs = {dtype = f32}, loom.module = "", loom.phase = #loom.phase<forward>, loom.policy_cast = true} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %l = loom.aten "aten::sum.default"(%y) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<4x8xf32>) -> tensor<f32>
  %gw0 = loom.aten "aten::sum.dim_IntList"(%down) {args = [#loom.arg<0>, [0], false], loom.module = "layers.0.norm", loom.phase = #loom.phase<backward>} : (tensor<4x8xf32>) -> tensor<8xf32>
  return %l, %gw0 : tensor<f32>, tensor<8xf32>
}
