// RUN: loom-opt %s --loom-fsdp="mesh-shape=2 reshard-after-forward=true" --loom-prefetch="forward-targets=layers.0:layers.1,layers.1:layers.2,layers.2:layers.3" | FileCheck %s --check-prefix=FWD1
// RUN: loom-opt %s --loom-fsdp="mesh-shape=2 reshard-after-forward=true" --loom-prefetch="forward-targets=layers.0:layers.1+layers.2,layers.1:layers.2+layers.3,layers.2:layers.3" | FileCheck %s --check-prefix=FWD2
// RUN: loom-opt %s --loom-fsdp="mesh-shape=2 reshard-after-forward=true" --loom-prefetch | FileCheck %s --check-prefix=DEFAULT
// RUN: loom-opt %s --loom-fsdp="mesh-shape=2 reshard-after-forward=true" --loom-prefetch="backward-targets=layers.1:layers.0,layers.2:layers.1,layers.3:layers.2" | FileCheck %s --check-prefix=DEFAULT
// RUN: loom-opt %s --loom-fsdp="mesh-shape=2 reshard-after-forward=true" --loom-prefetch="backward-targets=layers.3:layers.2+layers.1,layers.2:layers.1+layers.0" | FileCheck %s --check-prefix=BWD2
// RUN: loom-opt %s --loom-fsdp="mesh-shape=2 reshard-after-forward=true" --loom-prefetch="forward-targets=layers.3:layers.0 backward-prefetch=none" | FileCheck %s --check-prefix=MIS

// PyTorch's test_set_modules_to_forward_prefetch and
// test_set_modules_to_backward_prefetch
// (test_fully_shard_comm.py::TestFullyShardPrefetch): ModelArgs(n_layers=4) units (layers.0-3 and
// the root), reshard_after_forward=True. Events: "unshard" = all-gather
// start, "post_backward" = reduce-scatter start, and "reshard" of a unit
// in forward = its last forward op (its ReLU; the root's is the loss), after
// which nothing reads its gathered parameters. FileCheck pins the exact
// order (no other start in between). A backward "reshard" is always right
// before the unit's post_backward, so it is not listed.

// set_modules_to_forward_prefetch(layers.i -> [i+1]); PyTorch expects
//   unshard "", unshard l0, unshard l1, reshard l0, unshard l2, reshard l1,
//   unshard l3, reshard l2, reshard l3, reshard ""
// and the default backward below.
// FWD1-LABEL: func.func @step(
// FWD1: loom.all_gather_start {{.*}}loom.module = "", loom.phase = #loom.phase<forward>
// FWD1-NOT: _start
// FWD1: loom.all_gather_start {{.*}}loom.module = "layers.0", loom.phase = #loom.phase<forward>
// FWD1-NOT: _start
// FWD1: loom.all_gather_start {{.*}}loom.module = "layers.1", loom.phase = #loom.phase<forward>
// FWD1-NOT: _start
// FWD1: loom.aten "aten::relu.default"{{.*}}loom.module = "layers.0", loom.phase = #loom.phase<forward>
// FWD1-NOT: _start
// FWD1: loom.all_gather_start {{.*}}loom.module = "layers.2", loom.phase = #loom.phase<forward>
// FWD1-NOT: _start
// FWD1: loom.aten "aten::relu.default"{{.*}}loom.module = "layers.1", loom.phase = #loom.phase<forward>
// FWD1-NOT: _start
// FWD1: loom.all_gather_start {{.*}}loom.module = "layers.3", loom.phase = #loom.phase<forward>
// FWD1-NOT: _start
// FWD1: loom.aten "aten::relu.default"{{.*}}loom.module = "layers.2", loom.phase = #loom.phase<forward>
// FWD1-NOT: _start
// FWD1: loom.aten "aten::relu.default"{{.*}}loom.module = "layers.3", loom.phase = #loom.phase<forward>
// FWD1-NOT: _start
// FWD1: loom.aten "aten::sum.default"{{.*}}loom.module = "", loom.phase = #loom.phase<forward>
// FWD1-NOT: _start
// FWD1: loom.all_gather_start {{.*}}loom.module = "", loom.phase = #loom.phase<backward>
// FWD1-NOT: _start
// FWD1: loom.all_gather_start {{.*}}loom.module = "layers.3", loom.phase = #loom.phase<backward>
// FWD1-NOT: _start
// FWD1: loom.all_gather_start {{.*}}loom.module = "layers.2", loom.phase = #loom.phase<backward>
// FWD1-NOT: _start
// FWD1: loom.reduce_scatter_start {{.*}}loom.module = "layers.3", loom.phase = #loom.phase<backward>
// FWD1-NOT: _start
// FWD1: loom.all_gather_start {{.*}}loom.module = "layers.1", loom.phase = #loom.phase<backward>
// FWD1-NOT: _start
// FWD1: loom.reduce_scatter_start {{.*}}loom.module = "layers.2", loom.phase = #loom.phase<backward>
// FWD1-NOT: _start
// FWD1: loom.all_gather_start {{.*}}loom.module = "layers.0", loom.phase = #loom.phase<backward>
// FWD1-NOT: _start
// FWD1: loom.reduce_scatter_start {{.*}}loom.module = "layers.1", loom.phase = #loom.phase<backward>
// FWD1-NOT: _start
// FWD1: loom.reduce_scatter_start {{.*}}loom.module = "layers.0", loom.phase = #loom.phase<backward>
// FWD1-NOT: _start
// FWD1: loom.reduce_scatter_start {{.*}}loom.module = "", loom.phase = #loom.phase<backward>
// FWD1-NOT: _start

// layers.i -> [i+1, i+2]: unshard "", l0, l1, l2, reshard l0, unshard l3,
// reshard l1, reshard l2, reshard l3, reshard "".
// FWD2-LABEL: func.func @step(
// FWD2: loom.all_gather_start {{.*}}loom.module = "", loom.phase = #loom.phase<forward>
// FWD2-NOT: _start
// FWD2: loom.all_gather_start {{.*}}loom.module = "layers.0", loom.phase = #loom.phase<forward>
// FWD2-NOT: _start
// FWD2: loom.all_gather_start {{.*}}loom.module = "layers.1", loom.phase = #loom.phase<forward>
// FWD2-NOT: _start
// FWD2: loom.all_gather_start {{.*}}loom.module = "layers.2", loom.phase = #loom.phase<forward>
// FWD2-NOT: _start
// FWD2: loom.aten "aten::relu.default"{{.*}}loom.module = "layers.0", loom.phase = #loom.phase<forward>
// FWD2-NOT: _start
// FWD2: loom.all_gather_start {{.*}}loom.module = "layers.3", loom.phase = #loom.phase<forward>
// FWD2-NOT: _start
// FWD2: loom.aten "aten::relu.default"{{.*}}loom.module = "layers.1", loom.phase = #loom.phase<forward>
// FWD2-NOT: _start
// FWD2: loom.aten "aten::relu.default"{{.*}}loom.module = "layers.2", loom.phase = #loom.phase<forward>
// FWD2-NOT: _start
// FWD2: loom.aten "aten::relu.default"{{.*}}loom.module = "layers.3", loom.phase = #loom.phase<forward>
// FWD2-NOT: _start
// FWD2: loom.aten "aten::sum.default"{{.*}}loom.module = "", loom.phase = #loom.phase<forward>
// FWD2-NOT: _start
// FWD2: loom.all_gather_start {{.*}}loom.module = "", loom.phase = #loom.phase<backward>
// FWD2-NOT: _start
// FWD2: loom.all_gather_start {{.*}}loom.module = "layers.3", loom.phase = #loom.phase<backward>
// FWD2-NOT: _start
// FWD2: loom.all_gather_start {{.*}}loom.module = "layers.2", loom.phase = #loom.phase<backward>
// FWD2-NOT: _start
// FWD2: loom.reduce_scatter_start {{.*}}loom.module = "layers.3", loom.phase = #loom.phase<backward>
// FWD2-NOT: _start
// FWD2: loom.all_gather_start {{.*}}loom.module = "layers.1", loom.phase = #loom.phase<backward>
// FWD2-NOT: _start
// FWD2: loom.reduce_scatter_start {{.*}}loom.module = "layers.2", loom.phase = #loom.phase<backward>
// FWD2-NOT: _start
// FWD2: loom.all_gather_start {{.*}}loom.module = "layers.0", loom.phase = #loom.phase<backward>
// FWD2-NOT: _start
// FWD2: loom.reduce_scatter_start {{.*}}loom.module = "layers.1", loom.phase = #loom.phase<backward>
// FWD2-NOT: _start
// FWD2: loom.reduce_scatter_start {{.*}}loom.module = "layers.0", loom.phase = #loom.phase<backward>
// FWD2-NOT: _start
// FWD2: loom.reduce_scatter_start {{.*}}loom.module = "", loom.phase = #loom.phase<backward>
// FWD2-NOT: _start

// No forward prefetch; the default backward prefetch, or the explicit lists
// layers.i -> [i-1] that are the same thing:
//   unshard "" PB, unshard l3 PB, unshard l2 PB, post_backward l3,
//   unshard l1 PB, post_backward l2, unshard l0 PB, post_backward l1,
//   post_backward l0, post_backward ""
// DEFAULT-LABEL: func.func @step(
// DEFAULT: loom.all_gather_start {{.*}}loom.module = "", loom.phase = #loom.phase<forward>
// DEFAULT-NOT: _start
// DEFAULT: loom.all_gather_start {{.*}}loom.module = "layers.0", loom.phase = #loom.phase<forward>
// DEFAULT-NOT: _start
// DEFAULT: loom.aten "aten::relu.default"{{.*}}loom.module = "layers.0", loom.phase = #loom.phase<forward>
// DEFAULT-NOT: _start
// DEFAULT: loom.all_gather_start {{.*}}loom.module = "layers.1", loom.phase = #loom.phase<forward>
// DEFAULT-NOT: _start
// DEFAULT: loom.aten "aten::relu.default"{{.*}}loom.module = "layers.1", loom.phase = #loom.phase<forward>
// DEFAULT-NOT: _start
// DEFAULT: loom.all_gather_start {{.*}}loom.module = "layers.2", loom.phase = #loom.phase<forward>
// DEFAULT-NOT: _start
// DEFAULT: loom.aten "aten::relu.default"{{.*}}loom.module = "layers.2", loom.phase = #loom.phase<forward>
// DEFAULT-NOT: _start
// DEFAULT: loom.all_gather_start {{.*}}loom.module = "layers.3", loom.phase = #loom.phase<forward>
// DEFAULT-NOT: _start
// DEFAULT: loom.aten "aten::relu.default"{{.*}}loom.module = "layers.3", loom.phase = #loom.phase<forward>
// DEFAULT-NOT: _start
// DEFAULT: loom.aten "aten::sum.default"{{.*}}loom.module = "", loom.phase = #loom.phase<forward>
// DEFAULT-NOT: _start
// DEFAULT: loom.all_gather_start {{.*}}loom.module = "", loom.phase = #loom.phase<backward>
// DEFAULT-NOT: _start
// DEFAULT: loom.all_gather_start {{.*}}loom.module = "layers.3", loom.phase = #loom.phase<backward>
// DEFAULT-NOT: _start
// DEFAULT: loom.all_gather_start {{.*}}loom.module = "layers.2", loom.phase = #loom.phase<backward>
// DEFAULT-NOT: _start
// DEFAULT: loom.reduce_scatter_start {{.*}}loom.module = "layers.3", loom.phase = #loom.phase<backward>
// DEFAULT-NOT: _start
// DEFAULT: loom.all_gather_start {{.*}}loom.module = "layers.1", loom.phase = #loom.phase<backward>
// DEFAULT-NOT: _start
// DEFAULT: loom.reduce_scatter_start {{.*}}loom.module = "layers.2", loom.phase = #loom.phase<backward>
// DEFAULT-NOT: _start
// DEFAULT: loom.all_gather_start {{.*}}loom.module = "layers.0", loom.phase = #loom.phase<backward>
// DEFAULT-NOT: _start
// DEFAULT: loom.reduce_scatter_start {{.*}}loom.module = "layers.1", loom.phase = #loom.phase<backward>
// DEFAULT-NOT: _start
// DEFAULT: loom.reduce_scatter_start {{.*}}loom.module = "layers.0", loom.phase = #loom.phase<backward>
// DEFAULT-NOT: _start
// DEFAULT: loom.reduce_scatter_start {{.*}}loom.module = "", loom.phase = #loom.phase<backward>
// DEFAULT-NOT: _start

// set_modules_to_backward_prefetch(layers.i -> [i-1, i-2]) for i >= 2
// (layers.1 keeps the default): the root's default prefetch issues l3;
// l3 issues l2 and l1; l2 issues l0 (l1 is already in flight):
//   unshard "" PB, l3 PB, l2 PB, l1 PB, post_backward l3, unshard l0 PB,
//   post_backward l2, post_backward l1, post_backward l0, post_backward ""
// BWD2-LABEL: func.func @step(
// BWD2: loom.all_gather_start {{.*}}loom.module = "", loom.phase = #loom.phase<forward>
// BWD2-NOT: _start
// BWD2: loom.all_gather_start {{.*}}loom.module = "layers.0", loom.phase = #loom.phase<forward>
// BWD2-NOT: _start
// BWD2: loom.aten "aten::relu.default"{{.*}}loom.module = "layers.0", loom.phase = #loom.phase<forward>
// BWD2-NOT: _start
// BWD2: loom.all_gather_start {{.*}}loom.module = "layers.1", loom.phase = #loom.phase<forward>
// BWD2-NOT: _start
// BWD2: loom.aten "aten::relu.default"{{.*}}loom.module = "layers.1", loom.phase = #loom.phase<forward>
// BWD2-NOT: _start
// BWD2: loom.all_gather_start {{.*}}loom.module = "layers.2", loom.phase = #loom.phase<forward>
// BWD2-NOT: _start
// BWD2: loom.aten "aten::relu.default"{{.*}}loom.module = "layers.2", loom.phase = #loom.phase<forward>
// BWD2-NOT: _start
// BWD2: loom.all_gather_start {{.*}}loom.module = "layers.3", loom.phase = #loom.phase<forward>
// BWD2-NOT: _start
// BWD2: loom.aten "aten::relu.default"{{.*}}loom.module = "layers.3", loom.phase = #loom.phase<forward>
// BWD2-NOT: _start
// BWD2: loom.aten "aten::sum.default"{{.*}}loom.module = "", loom.phase = #loom.phase<forward>
// BWD2-NOT: _start
// BWD2: loom.all_gather_start {{.*}}loom.module = "", loom.phase = #loom.phase<backward>
// BWD2-NOT: _start
// BWD2: loom.all_gather_start {{.*}}loom.module = "layers.3", loom.phase = #loom.phase<backward>
// BWD2-NOT: _start
// BWD2: loom.all_gather_start {{.*}}loom.module = "layers.2", loom.phase = #loom.phase<backward>
// BWD2-NOT: _start
// BWD2: loom.all_gather_start {{.*}}loom.module = "layers.1", loom.phase = #loom.phase<backward>
// BWD2-NOT: _start
// BWD2: loom.reduce_scatter_start {{.*}}loom.module = "layers.3", loom.phase = #loom.phase<backward>
// BWD2-NOT: _start
// BWD2: loom.all_gather_start {{.*}}loom.module = "layers.0", loom.phase = #loom.phase<backward>
// BWD2-NOT: _start
// BWD2: loom.reduce_scatter_start {{.*}}loom.module = "layers.2", loom.phase = #loom.phase<backward>
// BWD2-NOT: _start
// BWD2: loom.reduce_scatter_start {{.*}}loom.module = "layers.1", loom.phase = #loom.phase<backward>
// BWD2-NOT: _start
// BWD2: loom.reduce_scatter_start {{.*}}loom.module = "layers.0", loom.phase = #loom.phase<backward>
// BWD2-NOT: _start
// BWD2: loom.reduce_scatter_start {{.*}}loom.module = "", loom.phase = #loom.phase<backward>
// BWD2-NOT: _start

// A "mistargeted" forward prefetch (layers.3 -> [layers.0]): in PyTorch it
// unshards layers.0 again in forward, where it then stays unsharded until
// its backward. Loom does the same thing explicitly: layers.0's next
// all-gather after layers.3's pre-forward point is its backward one, and its
// start moves into the forward (the gathered copy lives from there to its
// wait in backward, as PyTorch's unsharded parameters do).
// MIS-LABEL: func.func @step(
// MIS: loom.wait {{.*}}loom.module = "layers.3", loom.phase = #loom.phase<forward>
// MIS-NEXT: loom.aten "aten::view.default"(%arg1) {{.*}}loom.module = "layers.0", loom.phase = #loom.phase<backward>
// MIS-NEXT: loom.all_gather_start {{.*}}loom.module = "layers.0", loom.phase = #loom.phase<backward>
// MIS: loom.aten "aten::relu.default"{{.*}}loom.module = "layers.3", loom.phase = #loom.phase<forward>

func.func @step(%w0: tensor<4x4xf32> {loom.name = "tok_embeddings.weight", loom.role = #loom.role<parameter>},
    %w1: tensor<4x4xf32> {loom.name = "layers.0.ffn.weight", loom.role = #loom.role<parameter>},
    %w2: tensor<4x4xf32> {loom.name = "layers.1.ffn.weight", loom.role = #loom.role<parameter>},
    %w3: tensor<4x4xf32> {loom.name = "layers.2.ffn.weight", loom.role = #loom.role<parameter>},
    %w4: tensor<4x4xf32> {loom.name = "layers.3.ffn.weight", loom.role = #loom.role<parameter>},
    %w5: tensor<4x4xf32> {loom.name = "norm.weight", loom.role = #loom.role<parameter>},
    %w6: tensor<4x4xf32> {loom.name = "output.weight", loom.role = #loom.role<parameter>},
    %x: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<4x4xf32> {loom.role = #loom.role<grad>, loom.target = "tok_embeddings.weight"},
        tensor<4x4xf32> {loom.role = #loom.role<grad>, loom.target = "layers.0.ffn.weight"},
        tensor<4x4xf32> {loom.role = #loom.role<grad>, loom.target = "layers.1.ffn.weight"},
        tensor<4x4xf32> {loom.role = #loom.role<grad>, loom.target = "layers.2.ffn.weight"},
        tensor<4x4xf32> {loom.role = #loom.role<grad>, loom.target = "layers.3.ffn.weight"},
        tensor<4x4xf32> {loom.role = #loom.role<grad>, loom.target = "norm.weight"},
        tensor<4x4xf32> {loom.role = #loom.role<grad>, loom.target = "output.weight"})
    attributes {loom.step} {
  %t0 = loom.aten "aten::t.default"(%w0) {args = [#loom.arg<0>], loom.module = "tok_embeddings", loom.phase = #loom.phase<forward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %m0 = loom.aten "aten::mm.default"(%x, %t0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "tok_embeddings", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %t1 = loom.aten "aten::t.default"(%w1) {args = [#loom.arg<0>], loom.module = "layers.0.ffn", loom.phase = #loom.phase<forward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %m1 = loom.aten "aten::mm.default"(%m0, %t1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0.ffn", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %r1 = loom.aten "aten::relu.default"(%m1) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %t2 = loom.aten "aten::t.default"(%w2) {args = [#loom.arg<0>], loom.module = "layers.1.ffn", loom.phase = #loom.phase<forward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %m2 = loom.aten "aten::mm.default"(%r1, %t2) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1.ffn", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %r2 = loom.aten "aten::relu.default"(%m2) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %t3 = loom.aten "aten::t.default"(%w3) {args = [#loom.arg<0>], loom.module = "layers.2.ffn", loom.phase = #loom.phase<forward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %m3 = loom.aten "aten::mm.default"(%r2, %t3) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.2.ffn", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %r3 = loom.aten "aten::relu.default"(%m3) {args = [#loom.arg<0>], loom.module = "layers.2", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %t4 = loom.aten "aten::t.default"(%w4) {args = [#loom.arg<0>], loom.module = "layers.3.ffn", loom.phase = #loom.phase<forward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %m4 = loom.aten "aten::mm.default"(%r3, %t4) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.3.ffn", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %r4 = loom.aten "aten::relu.default"(%m4) {args = [#loom.arg<0>], loom.module = "layers.3", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %t5 = loom.aten "aten::t.default"(%w5) {args = [#loom.arg<0>], loom.module = "norm", loom.phase = #loom.phase<forward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %m5 = loom.aten "aten::mm.default"(%r4, %t5) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "norm", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %t6 = loom.aten "aten::t.default"(%w6) {args = [#loom.arg<0>], loom.module = "output", loom.phase = #loom.phase<forward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %m6 = loom.aten "aten::mm.default"(%m5, %t6) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "output", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %l = loom.aten "aten::sum.default"(%m6) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<f32>
  %one = loom.aten "aten::ones_like.default"(%l) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<f32>
  %g = loom.aten "aten::expand.default"(%one) {args = [#loom.arg<0>, [2, 4]], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<2x4xf32>
  %gt6 = loom.aten "aten::t.default"(%g) {args = [#loom.arg<0>], loom.module = "output", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %gw6 = loom.aten "aten::mm.default"(%gt6, %m5) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "output", loom.phase = #loom.phase<backward>} : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %tt6 = loom.aten "aten::t.default"(%t6) {args = [#loom.arg<0>], loom.module = "output", loom.phase = #loom.phase<backward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %gh6 = loom.aten "aten::mm.default"(%g, %tt6) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "output", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %gt5 = loom.aten "aten::t.default"(%gh6) {args = [#loom.arg<0>], loom.module = "norm", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %gw5 = loom.aten "aten::mm.default"(%gt5, %r4) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "norm", loom.phase = #loom.phase<backward>} : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %tt5 = loom.aten "aten::t.default"(%t5) {args = [#loom.arg<0>], loom.module = "norm", loom.phase = #loom.phase<backward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %gh5 = loom.aten "aten::mm.default"(%gh6, %tt5) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "norm", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %gr4 = loom.aten "aten::threshold_backward.default"(%gh5, %r4) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "layers.3", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %gt4 = loom.aten "aten::t.default"(%gr4) {args = [#loom.arg<0>], loom.module = "layers.3.ffn", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %gw4 = loom.aten "aten::mm.default"(%gt4, %r3) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.3.ffn", loom.phase = #loom.phase<backward>} : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %tt4 = loom.aten "aten::t.default"(%t4) {args = [#loom.arg<0>], loom.module = "layers.3.ffn", loom.phase = #loom.phase<backward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %gh4 = loom.aten "aten::mm.default"(%gr4, %tt4) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.3.ffn", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %gr3 = loom.aten "aten::threshold_backward.default"(%gh4, %r3) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "layers.2", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %gt3 = loom.aten "aten::t.default"(%gr3) {args = [#loom.arg<0>], loom.module = "layers.2.ffn", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %gw3 = loom.aten "aten::mm.default"(%gt3, %r2) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.2.ffn", loom.phase = #loom.phase<backward>} : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %tt3 = loom.aten "aten::t.default"(%t3) {args = [#loom.arg<0>], loom.module = "layers.2.ffn", loom.phase = #loom.phase<backward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %gh3 = loom.aten "aten::mm.default"(%gr3, %tt3) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.2.ffn", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %gr2 = loom.aten "aten::threshold_backward.default"(%gh3, %r2) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %gt2 = loom.aten "aten::t.default"(%gr2) {args = [#loom.arg<0>], loom.module = "layers.1.ffn", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %gw2 = loom.aten "aten::mm.default"(%gt2, %r1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1.ffn", loom.phase = #loom.phase<backward>} : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %tt2 = loom.aten "aten::t.default"(%t2) {args = [#loom.arg<0>], loom.module = "layers.1.ffn", loom.phase = #loom.phase<backward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %gh2 = loom.aten "aten::mm.default"(%gr2, %tt2) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1.ffn", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %gr1 = loom.aten "aten::threshold_backward.default"(%gh2, %r1) {args = [#loom.arg<0>, #loom.arg<1>, 0], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %gt1 = loom.aten "aten::t.default"(%gr1) {args = [#loom.arg<0>], loom.module = "layers.0.ffn", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %gw1 = loom.aten "aten::mm.default"(%gt1, %m0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0.ffn", loom.phase = #loom.phase<backward>} : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %tt1 = loom.aten "aten::t.default"(%t1) {args = [#loom.arg<0>], loom.module = "layers.0.ffn", loom.phase = #loom.phase<backward>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %gh1 = loom.aten "aten::mm.default"(%gr1, %tt1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0.ffn", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %gt0 = loom.aten "aten::t.default"(%gh1) {args = [#loom.arg<0>], loom.module = "tok_embeddings", loom.phase = #loom.phase<backward>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %gw0 = loom.aten "aten::mm.default"(%gt0, %x) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "tok_embeddings", loom.phase = #loom.phase<backward>} : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  return %l, %gw0, %gw1, %gw2, %gw3, %gw4, %gw5, %gw6 : tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}
