module attributes {loom.weights = "tiny.weights.safetensors"} {
  func.func @step(%w: tensor<8x4xf32> {loom.name = "fc1.weight", loom.role = #loom.role<parameter>})
      -> (tensor<8x4xf32> {loom.role = #loom.role<grad>, loom.target = "fc1.weight"})
      attributes {loom.step} {
    return %w : tensor<8x4xf32>
  }
}
