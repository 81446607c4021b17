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

def LoomAttachOptimizer
    : Pass<"loom-attach-optimizer", "::mlir::func::FuncOp"> {
  let summary = "Make a step update its parameters with SGD, Adam or AdamW";
  let description = [{
    Turns a step that returns gradients into one that applies the optimizer
    itself, as `optimizer.step()` after `loss.backward()` does in PyTorch.
    For every `grad` result of a step function (`func.func` with
    `loom.step`), in result order, the pass

    - adds the parameter's optimizer state as arguments of role
      `optimizer_state`, named `<param>.<state>` with `loom.target` = the
      parameter (`exp_avg`, `exp_avg_sq` for Adam/AdamW; `momentum_buffer`
      for SGD with momentum; none for plain SGD), after the existing
      arguments;
    - inserts a `loom.optimizer_update` before the return, in phase
      `optimizer` and in the module that owns the parameter (`fc1` for
      `fc1.weight`);
    - replaces the `grad` result with the updated parameter (role
      `param_update`, same `loom.target`) and appends the updated state as
      results of role `state_update` (`loom.target` = the state argument).

    The function also records the optimizer as `loom.optimizer`, for the
    artifact. Parameters without a gradient (frozen) get no update and no
    state, as in PyTorch. The hyperparameters and their defaults are
    PyTorch's (`torch.optim.SGD/Adam/AdamW`); the step count Adam needs is
    kept by the runtime.

    Before:

    ```mlir
    func.func @step(%w: tensor<8x4xf32> {loom.name = "fc1.weight", loom.role = #loom.role<parameter>}, ...)
        -> (tensor<f32> {loom.role = #loom.role<loss>},
            tensor<8x4xf32> {loom.role = #loom.role<grad>, loom.target = "fc1.weight"})
        attributes {loom.step} {
      ...
      return %loss, %g : tensor<f32>, tensor<8x4xf32>
    }
    ```

    After `--loom-attach-optimizer="optimizer=adamw lr=0.01"`:

    ```mlir
    func.func @step(%w: tensor<8x4xf32> {loom.name = "fc1.weight", loom.role = #loom.role<parameter>}, ...,
                    %m: tensor<8x4xf32> {loom.name = "fc1.weight.exp_avg", loom.role = #loom.role<optimizer_state>, loom.target = "fc1.weight"},
                    %v: tensor<8x4xf32> {loom.name = "fc1.weight.exp_avg_sq", loom.role = #loom.role<optimizer_state>, loom.target = "fc1.weight"})
        -> (tensor<f32> {loom.role = #loom.role<loss>},
            tensor<8x4xf32> {loom.role = #loom.role<param_update>, loom.target = "fc1.weight"},
            tensor<8x4xf32> {loom.role = #loom.role<state_update>, loom.target = "fc1.weight.exp_avg"},
            tensor<8x4xf32> {loom.role = #loom.role<state_update>, loom.target = "fc1.weight.exp_avg_sq"})
        attributes {loom.optimizer = #loom.adamw<lr = 0.01>, loom.step} {
      ...
      %w1, %s:2 = loom.optimizer_update #loom.adamw<lr = 0.01> param %w grad %g state [%m, %v]
          {loom.module = "fc1", loom.phase = #loom.phase<optimizer>} : tensor<8x4xf32>
      return %loss, %w1, %s#0, %s#1 : ...
    }
    ```

    Fails on a step that already has an optimizer attached, and on
    hyperparameters PyTorch would reject (negative learning rate, betas
    outside [0, 1), Nesterov without momentum, ...).
  }];
  let options = [
    Option<"optimizer", "optimizer", "std::string", /*default=*/"\"adamw\"",
           "The algorithm: sgd, adam or adamw">,
    Option<"lr", "lr", "double", /*default=*/"1.0e-3", "Learning rate">,
    Option<"momentum", "momentum", "double", /*default=*/"0.0",
           "SGD momentum factor">,
    Option<"dampening", "dampening", "double", /*default=*/"0.0",
           "SGD dampening of the momentum">,
    Option<"nesterov", "nesterov", "bool", /*default=*/"false",
           "SGD: use Nesterov momentum">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"-1.0",
           "Weight decay; negative means PyTorch's default for the "
           "algorithm (0.01 for adamw, 0 for sgd and adam)">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9",
           "Adam/AdamW betas[0]">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999",
           "Adam/AdamW betas[1]">,
    Option<"eps", "eps", "double", /*default=*/"1.0e-8",
           "Adam/AdamW term added to the denominator">,
    Option<"maximize", "maximize", "bool", /*default=*/"false",
           "Maximize the objective instead of minimizing it">,
  ];
  let dependentDialects = ["::loom::LoomDialect"];
}

#endif // LOOM_TRANSFORMS_PASSES_TD
