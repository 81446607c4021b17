// Binds tiny.pt2's weights with one wrong shape and one name the file lacks.
module attributes {loom.weights = "tiny.weights.safetensors"} {
  func.func @step(%w: tensor<4x8xf32> {loom.name = "fc1.weight", loom.role = #loom.role<parameter>},
                  %b: tensor<8xf32> {loom.name = "fc1.bias", loom.role = #loom.role<parameter>},
                  %n: tensor<8xf32> {loom.name = "no.such.weight", loom.role = #loom.role<buffer>})
      -> (tensor<f32> {loom.role = #loom.role<loss>})
      attributes {loom.step} {
    %l = loom.aten "aten::sum.default"(%b) {args = [#loom.arg<0>]} : (tensor<8xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
