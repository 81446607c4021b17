// RUN: loom-opt %s --loom-replicate="mesh-shape=4 comm-hook=fp16-compress" | FileCheck %s
// RUN: loom-opt %s --loom-replicate="mesh-shape=4 comm-hook=bf16-compress" | FileCheck %s --check-prefix=BF16
// RUN: loom-opt %s --loom-replicate="mesh-shape=4" | FileCheck %s --check-prefix=PLAIN
// RUN: not loom-opt %s --loom-replicate="mesh-shape=4 grouping=units comm-hook=fp16-compress" 2>&1 | FileCheck %s --check-prefix=UNITS
// RUN: not loom-compile %s --dp=fsdp --world-size=4 --comm-hook=fp16-compress -o %t.loomx 2>&1 | FileCheck %s --check-prefix=COMPILE

// Two gradients in one bucket.
func.func @step(%w: tensor<4x3xf32> {loom.name = "fc.weight", loom.role = #loom.role<parameter>},
                %b: tensor<4xf32> {loom.name = "fc.bias", loom.role = #loom.role<parameter>},
                %x: tensor<2x3xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<4x3xf32> {loom.role = #loom.role<grad>, loom.target = "fc.weight"},
        tensor<4xf32> {loom.role = #loom.role<grad>, loom.target = "fc.bias"})
    attributes {loom.step} {
  %l = loom.aten "aten::sum.default"(%x) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<2x3xf32>) -> tensor<f32>
  %gw = loom.aten "aten::ones_like.default"(%w) {args = [#loom.arg<0>], loom.module = "fc", loom.phase = #loom.phase<backward>} : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %gb = loom.aten "aten::ones_like.default"(%b) {args = [#loom.arg<0>], loom.module = "fc", loom.phase = #loom.phase<backward>} : (tensor<4xf32>) -> tensor<4xf32>
  return %l, %gw, %gb : tensor<f32>, tensor<4x3xf32>, tensor<4xf32>
}

// fp16_compress_hook: buffer.to(float16).div_(world_size), summed, copied
// back into the f32 bucket.
// CHECK-LABEL: func.func @step
// CHECK: %[[CAT:.*]] = loom.aten "aten::cat.default"{{.*}} -> tensor<16xf32>
// CHECK-NEXT: %[[H:.*]] = loom.aten "aten::_to_copy.default"(%[[CAT]]) {args = [#loom.arg<0>], kwargs = {dtype = f16}, loom.module = "fc", loom.phase = #loom.phase<backward>} : (tensor<16xf32>) -> tensor<16xf16>
// CHECK-NEXT: %[[D:.*]] = loom.aten "aten::div.Tensor"(%[[H]]) {args = [#loom.arg<0>, 4.000000e+00]{{.*}} -> tensor<16xf16>
// CHECK-NEXT: %[[F:.*]] = loom.all_reduce_start %[[D]] on @dp axes ["dp"] reduce <sum> {{.*}} : tensor<16xf16> -> !loom.future<tensor<16xf16>>
// CHECK: %[[R:.*]] = loom.wait %[[F]]
// CHECK-NEXT: %[[BACK:.*]] = loom.aten "aten::_to_copy.default"(%[[R]]) {args = [#loom.arg<0>], kwargs = {dtype = f32}{{.*}} -> tensor<16xf32>
// CHECK-NEXT: loom.aten "aten::split_with_sizes.default"(%[[BACK]])

// BF16: loom.aten "aten::_to_copy.default"{{.*}}kwargs = {dtype = bf16}
// BF16: loom.all_reduce_start {{.*}} reduce <sum> {{.*}} : tensor<16xbf16>
// BF16: loom.aten "aten::_to_copy.default"{{.*}}kwargs = {dtype = f32}

// PLAIN-NOT: _to_copy
// PLAIN: loom.all_reduce_start {{.*}} reduce <sum> {{.*}} : tensor<16xf32>

// UNITS: error: --loom-replicate: comm-hook is a DDP communication hook; FSDP2's replicate (grouping=units) has none
// COMPILE: comm-hook is a DDP communication hook: it needs dp=replicate with grouping=buckets
