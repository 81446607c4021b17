//===- Passes.td - Loom pass definitions -------------------*- tablegen -*-===//

#ifndef LOOM_TRANSFORMS_PASSES_TD
#define LOOM_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def LoomStats : Pass<"loom-stats", "::mlir::ModuleOp"> {
  let summary = "Print op counts by phase, parameter bytes and FLOPs by module";
  let description = [{
    An analysis pass that leaves the IR unchanged and prints, for every step
    function (`func.func` with `loom.step`):

    - the number of ops in each phase (`loom.phase`: forward, backward,
      optimizer; untagged ops are counted as `untagged`),
    - the parameters, buffers and inputs: count, elements and bytes,
    - the FLOPs of each module path (`loom.module`), split into forward and
      backward, and the total. FLOPs follow `torch.utils.flop_counter`:
      matrix multiplies (`mm`, `addmm`, `bmm`, `baddbmm`), convolutions and
      their backward, and scaled-dot-product attention; other ops count 0,
      so the numbers can be compared with PyTorch's `FlopCounterMode`. Two
      deliberate differences: the weight gradient of a grouped convolution
      counts the real work (flop_counter multiplies it by `groups`), and
      attention kernels `FlopCounterMode` has no rule for on CPU
      (`_scaled_dot_product_flash_attention_for_cpu*`) are counted with the
      same formulas as the GPU ones.

    FLOPs of a module include its submodules only in the `inclusive` column.

    Example:

    ```
    loom-opt step.mlir --loom-stats -o /dev/null
    ```

    Output goes to stderr (as upstream `--print-op-stats`), so the IR on
    stdout stays a clean round trip. With `json=true` the report is one JSON
    object per step function.
  }];
  let options = [
    Option<"json", "json", "bool", /*default=*/"false",
           "Print the report as JSON instead of a table">,
  ];
  let dependentDialects = ["::loom::LoomDialect"];
}

#endif // LOOM_TRANSFORMS_PASSES_TD
