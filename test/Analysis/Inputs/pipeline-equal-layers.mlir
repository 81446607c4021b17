// Four equal linear layers (no bias) and loss = sum of the output, as captured;
// layer 0's backward also makes the input's gradient (the %g0 a stage before
// it would need), so each layer forward costs one 8x64x64 matmul and
// backward two: stages of equal layer counts are equal. Used by
// simulate-pipeline-schedules.test.
module attributes {loom.run_config = #loom.run_config<optimizer = #loom.sgd<>>} {
  func.func @step(%w0: tensor<64x64xf32> {loom.name = "layers.0.weight", loom.role = #loom.role<parameter>}, %w1: tensor<64x64xf32> {loom.name = "layers.1.weight", loom.role = #loom.role<parameter>}, %w2: tensor<64x64xf32> {loom.name = "layers.2.weight", loom.role = #loom.role<parameter>}, %w3: tensor<64x64xf32> {loom.name = "layers.3.weight", loom.role = #loom.role<parameter>}, %x: tensor<8x64xf32> {loom.name = "x", loom.role = #loom.role<input>})
      -> (tensor<f32> {loom.role = #loom.role<loss>}, tensor<64x64xf32> {loom.role = #loom.role<grad>, loom.target = "layers.0.weight"}, tensor<64x64xf32> {loom.role = #loom.role<grad>, loom.target = "layers.1.weight"}, tensor<64x64xf32> {loom.role = #loom.role<grad>, loom.target = "layers.2.weight"}, tensor<64x64xf32> {loom.role = #loom.role<grad>, loom.target = "layers.3.weight"})
      attributes {loom.step} {
    %wt0 = loom.aten "aten::t.default"(%w0) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<64x64xf32>) -> tensor<64x64xf32>
    %h0 = loom.aten "aten::mm.default"(%x, %wt0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<forward>} : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
    %wt1 = loom.aten "aten::t.default"(%w1) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<forward>} : (tensor<64x64xf32>) -> tensor<64x64xf32>
    %h1 = loom.aten "aten::mm.default"(%h0, %wt1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<forward>} : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
    %wt2 = loom.aten "aten::t.default"(%w2) {args = [#loom.arg<0>], loom.module = "layers.2", loom.phase = #loom.phase<forward>} : (tensor<64x64xf32>) -> tensor<64x64xf32>
    %h2 = loom.aten "aten::mm.default"(%h1, %wt2) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.2", loom.phase = #loom.phase<forward>} : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
    %wt3 = loom.aten "aten::t.default"(%w3) {args = [#loom.arg<0>], loom.module = "layers.3", loom.phase = #loom.phase<forward>} : (tensor<64x64xf32>) -> tensor<64x64xf32>
    %h3 = loom.aten "aten::mm.default"(%h2, %wt3) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.3", loom.phase = #loom.phase<forward>} : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
    %loss = loom.aten "aten::sum.default"(%h3) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<8x64xf32>) -> tensor<f32>
    %one = loom.aten "aten::ones_like.default"(%loss) {args = [#loom.arg<0>], kwargs = {memory_format = "torch.preserve_format", pin_memory = false}, loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<f32>
    %g4 = loom.aten "aten::expand.default"(%one) {args = [#loom.arg<0>, [8, 64]], loom.module = "", loom.phase = #loom.phase<backward>} : (tensor<f32>) -> tensor<8x64xf32>
    %wtt3 = loom.aten "aten::t.default"(%wt3) {args = [#loom.arg<0>], loom.module = "layers.3", loom.phase = #loom.phase<backward>} : (tensor<64x64xf32>) -> tensor<64x64xf32>
    %g3 = loom.aten "aten::mm.default"(%g4, %wtt3) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.3", loom.phase = #loom.phase<backward>} : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
    %gt3 = loom.aten "aten::t.default"(%g4) {args = [#loom.arg<0>], loom.module = "layers.3", loom.phase = #loom.phase<backward>} : (tensor<8x64xf32>) -> tensor<64x8xf32>
    %gw3 = loom.aten "aten::mm.default"(%gt3, %h2) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.3", loom.phase = #loom.phase<backward>} : (tensor<64x8xf32>, tensor<8x64xf32>) -> tensor<64x64xf32>
    %wtt2 = loom.aten "aten::t.default"(%wt2) {args = [#loom.arg<0>], loom.module = "layers.2", loom.phase = #loom.phase<backward>} : (tensor<64x64xf32>) -> tensor<64x64xf32>
    %g2 = loom.aten "aten::mm.default"(%g3, %wtt2) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.2", loom.phase = #loom.phase<backward>} : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
    %gt2 = loom.aten "aten::t.default"(%g3) {args = [#loom.arg<0>], loom.module = "layers.2", loom.phase = #loom.phase<backward>} : (tensor<8x64xf32>) -> tensor<64x8xf32>
    %gw2 = loom.aten "aten::mm.default"(%gt2, %h1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.2", loom.phase = #loom.phase<backward>} : (tensor<64x8xf32>, tensor<8x64xf32>) -> tensor<64x64xf32>
    %wtt1 = loom.aten "aten::t.default"(%wt1) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<64x64xf32>) -> tensor<64x64xf32>
    %g1 = loom.aten "aten::mm.default"(%g2, %wtt1) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
    %gt1 = loom.aten "aten::t.default"(%g2) {args = [#loom.arg<0>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<8x64xf32>) -> tensor<64x8xf32>
    %gw1 = loom.aten "aten::mm.default"(%gt1, %h0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.1", loom.phase = #loom.phase<backward>} : (tensor<64x8xf32>, tensor<8x64xf32>) -> tensor<64x64xf32>
    %wtt0 = loom.aten "aten::t.default"(%wt0) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<64x64xf32>) -> tensor<64x64xf32>
    %g0 = loom.aten "aten::mm.default"(%g1, %wtt0) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
    %gt0 = loom.aten "aten::t.default"(%g1) {args = [#loom.arg<0>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<8x64xf32>) -> tensor<64x8xf32>
    %gw0 = loom.aten "aten::mm.default"(%gt0, %x) {args = [#loom.arg<0>, #loom.arg<1>], loom.module = "layers.0", loom.phase = #loom.phase<backward>} : (tensor<64x8xf32>, tensor<8x64xf32>) -> tensor<64x64xf32>
    return %loss, %gw0, %gw1, %gw2, %gw3 : tensor<f32>, tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>
  }
}
