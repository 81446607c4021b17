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
    - the predicted peak memory (the liveness sweep of
      `docs/simulator.md`), the op where it is reached, and what is live
      there: its bytes by the module and phase of the op that allocated
      them (`layers.3 (forward)` is what layers.3's forward keeps for
      backward, `layers.4 (collective)` a collective's buffer such as
      FSDP's gathered parameters, `<root>` the ops of no module), the four
      largest groups on the line, all of them and the ten largest tensors
      under `memory` in the JSON (`live_at_peak`, `largest_at_peak`): what
      a memory snapshot at the peak would show, and what recompute or
      another schedule could free.

    FLOPs of a module include its submodules only in the `inclusive` column.
    The ops of `loom.recompute` regions count in the region's phase
    (backward), and their FLOPs in a `recompute` column of their own, next
    to forward and backward, so checkpointing leaves those two unchanged.

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

// The cost-model options loom-simulate, loom-schedule and loom-sac-ilp
// share: the device, the topology, the collective algorithm and measured op
// times.
defvar Loom_CostModelOptions = [
  Option<"device", "device", "std::string", /*default=*/"\"h100\"",
         "Device spec: a name in device-dir or a path to a .json file">,
  Option<"deviceDir", "device-dir", "std::string", /*default=*/"\"\"",
         "Folder of named device specs (default: Loom's data/devices, "
         "or $LOOM_DEVICE_DIR)">,
  Option<"nodes", "nodes", "int64_t", /*default=*/"1", "Number of nodes">,
  Option<"devicesPerNode", "devices-per-node", "int64_t", /*default=*/"0",
         "Ranks per node (0: the device spec's devices_per_node)">,
  Option<"commStreams", "comm-streams", "unsigned", /*default=*/"2",
         "Communication streams: 1 (one for all), 2 (all-gather and "
         "reduce-scatter apart, as FSDP2), 3 (all-reduce apart too)">,
  Option<"algorithm", "algorithm", "std::string", /*default=*/"\"auto\"",
         "Collective algorithm: ring, tree or auto (the faster)">,
  Option<"tf32", "tf32", "bool", /*default=*/"false",
         "Run fp32 matmuls at the tf32 peak (allow_tf32)">,
  Option<"opTimes", "op-times", "std::string", /*default=*/"\"\"",
         "A loom-run --trace of this step: its median time per ATen kernel "
         "signature replaces the roofline of those ops">,
];

def LoomSimulate : Pass<"loom-simulate", "::mlir::ModuleOp"> {
  let summary = "Predict the step time on a device from a cost model";
  let description = [{
    An analysis pass that leaves the IR unchanged and replays every step
    function (`func.func` with `loom.step`) on a simulated device: one
    compute stream runs the ops in block order, each taking its roofline
    time (FLOPs as `--loom-stats` counts them at the peak of the op's
    precision, bytes of operands plus results at the memory bandwidth, the
    larger of the two plus a per-op overhead; views cost only
    `view_overhead`); each `loom.*_start` runs on a communication stream
    for its alpha-beta time (NCCL's ring or tree over the intra-node link,
    or the inter-node link when its group spans nodes); a `loom.wait`
    blocks the compute stream until its collective is done. It prints, to
    stderr, the step time, compute and communication time, the exposed
    communication (the time compute waits) and the predicted peak memory
    per rank, with what is live at the peak (grouped as `--loom-stats`
    groups it). The model and the device files are described in
    `docs/simulator.md`.

    Run it on the step the distribution passes produced (`loom-fsdp`,
    `loom-replicate`, ...), after or before `loom-attach-optimizer`; a step
    with no collectives simulates one device. Ranks fill nodes in order
    (`nodes` x `devices-per-node` must hold the mesh).

    A pipelined module (steps with `loom.program_ranks`, from
    `loom-pipeline-schedule`) is one step: its programs are replayed
    together, each transfer starting once both its send and its recv are
    posted, and the report gives each pipeline rank's step, busy and idle
    time, the step time and the bubble fraction
    (`1 - busy / (ranks x step time)`); the timeline has one process per
    rank. A send or recv without its match, or a deadlock, is an error
    naming both programs.

    ```
    loom-opt step.mlir --loom-fsdp="mesh-shape=8" \
      --loom-simulate="device=h100 nodes=1 timeline=step.trace.json" -o /dev/null
    ```

    `device` is a name (a file `<name>.json` in `device-dir`, by default
    Loom's `data/devices`: `h100`, `a100`, `cpu`) or the path of a spec
    file. `timeline` writes a Chrome/Perfetto trace with one track per
    stream (open it in https://ui.perfetto.dev).

    Errors: an unknown device, a spec file that does not parse or misses a
    field (reported at its line and field), more devices per node than the
    device has, a mesh larger than the nodes hold, a bad `algorithm` or
    `comm-streams`.
  }];
  let options = !listconcat(Loom_CostModelOptions, [
    Option<"json", "json", "bool", /*default=*/"false",
           "Print the report as JSON instead of a table">,
    Option<"timeline", "timeline", "std::string", /*default=*/"\"\"",
           "Write a Chrome/Perfetto trace of the simulated streams here">,
  ]);
  let dependentDialects = ["::loom::LoomDialect"];
}

def LoomSchedule : Pass<"loom-schedule", "::mlir::ModuleOp"> {
  let summary = "Reorder each step to hide communication under a memory limit";
  let description = [{
    A latency-hiding list scheduler. For every step function (`func.func`
    with `loom.step`) it reorders the ops of the body so that collectives
    run while the compute stream works, using the cost model and stream
    model of `loom-simulate`:

    - a `loom.*_start` is issued as soon as its input is ready, while fewer
      than `max-in-flight` collectives are started and not yet waited
      (lowest program position first): all-gathers are prefetched and
      reduce-scatters leave as soon as their gradients exist;
    - a `loom.wait` goes right before the first op that needs it, or
      earlier when the model says its collective is already done or the
      in-flight bound needs the slot;
    - compute ops run in program order, except that a ready op runs ahead
      of one that would block on an unfinished collective.

    Dependences are the SSA edges plus: an optimizer update runs after
    every other reader of the parameter and state it overwrites (through
    views, and collectives reading them until their wait); ops drawing
    random numbers keep their order; ops the scheduler does not model are
    barriers; a pipeline rank's sends and receives (`loom.send_start`,
    `loom.recv_start`) and their waits keep their place among the rank's
    collectives and transfers (each rank is scheduled alone, and a receive
    waited for before a send its peer needs would deadlock the ranks;
    compute still moves across them). A `loom.recompute` region is one node, never split: it takes
    its body's time, and the memory limit counts its body's transient peak.

    `memory-limit` bounds the predicted peak per rank (the liveness of
    `loom-stats`, with a collective's input held until its wait as the
    runtime does). Every choice that departs from program order is taken
    only if finishing the rest in program order stays within the limit, so
    the result never exceeds it. The check is exact but mostly cheap: an
    upper and a lower bound of that peak, kept in range-max trees over the
    last exact sweep, decide most choices, and only the others sweep the
    whole completion again (`report=true` counts both;
    `sweep-every-check=true` sweeps every time, for comparison). A limit
    below the peak of program order is an error; a kept limit is recorded
    on the module (`loom.memory_budget`, the tightest recorded; the
    artifact carries it and loom-run warns on a rank that measures more).
    The new order is kept
    only if the simulator predicts a shorter step; with `report=true` the
    pass prints both predictions to stderr. The order depends only on the IR and the options, so every
    rank computes the same one.

    ```
    loom-opt step.mlir --loom-fsdp="mesh-shape=4" \
      --loom-schedule="device=cpu memory-limit=2GiB report=true"
    ```
  }];
  let options = !listconcat(Loom_CostModelOptions, [
    Option<"memoryLimit", "memory-limit", "std::string", /*default=*/"\"none\"",
           "Per-rank peak memory limit: bytes, or a number with KiB, MiB, "
           "GiB, KB, MB or GB; 'none' for no limit">,
    Option<"maxInFlight", "max-in-flight", "int64_t", /*default=*/"2",
           "Most collectives started and not yet waited at any time">,
    Option<"report", "report", "bool", /*default=*/"false",
           "Print the predicted step time, exposed communication and peak "
           "memory before and after to stderr">,
    Option<"sweepEveryCheck", "sweep-every-check", "bool",
           /*default=*/"false",
           "Decide every memory check by sweeping the whole completion "
           "instead of consulting the bounds first (slower; the order is "
           "the same)">,
  ]);
  let dependentDialects = ["::loom::LoomDialect"];
}

def LoomAttachOptimizer
    : Pass<"loom-attach-optimizer", "::mlir::func::FuncOp"> {
  let summary = "Make a step update its parameters with a torch.optim "
                "optimizer (SGD, Adam, AdamW, RMSprop, Adagrad, Adadelta, "
                "Adamax, RAdam, NAdam, Rprop or ASGD)";
  let description = [{
    Turns a step that returns gradients into one that applies the optimizer
    itself, as `optimizer.step()` after `loss.backward()` does in PyTorch.
    For every `grad` result of a step function (`func.func` with
    `loom.step`), in result order, the pass

    - adds the parameter's optimizer state as arguments of role
      `optimizer_state`, named `<param>.<state>` with `loom.target` = the
      parameter, in `torch.optim`'s state_dict order (`exp_avg`,
      `exp_avg_sq` for Adam/AdamW, and `max_exp_avg_sq` with `amsgrad`;
      `momentum_buffer` for SGD with momentum, none for plain SGD;
      `square_avg`, then `momentum_buffer` with momentum and `grad_avg` when
      `centered`, for RMSprop; `sum` for Adagrad; `exp_avg`, `exp_inf` for
      Adamax; `exp_avg`, `exp_avg_sq` for RAdam and NAdam; `square_avg`,
      `acc_delta` for Adadelta; `prev`, `step_size` for Rprop; `ax` for
      ASGD), after the
      existing arguments;
    - inserts a `loom.optimizer_update` before the return, in phase
      `optimizer` and in the module that owns the parameter (`fc1` for
      `fc1.weight`);
    - replaces the `grad` result with the updated parameter (role
      `param_update`, same `loom.target`) and appends the updated state as
      results of role `state_update` (`loom.target` = the state argument).

    The function also records the optimizer as `loom.optimizer`, for the
    artifact. Parameters without a gradient (frozen) get no update and no
    state, as in PyTorch. The hyperparameters and their defaults are
    PyTorch's (`torch.optim.SGD/Adam/AdamW/RMSprop/Adagrad/Adadelta/Adamax/
    RAdam/NAdam/Rprop/ASGD`; `lr`, `eps` and `alpha` left unset and a negative
    `weight-decay` take the algorithm's own default); the step count the
    algorithms need is kept by the runtime, which also creates Adagrad's
    `sum` filled with `initial-accumulator-value` and fills Rprop's
    `step_size` with the lr of the parameter's first step; NAdam's
    `mu_product` and ASGD's `eta` and `mu` are scalars the runtime keeps
    beside the step count. Giving a hyperparameter of another algorithm
    (`momentum` to Adam, `amsgrad` to SGD, `weight-decay` or `eps` to
    Rprop, `eps` to ASGD, ...) is an error.

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

    With `max-grad-norm` > 0 the gradients are first clipped as
    `torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type)` does: the
    total norm over every gradient of the step (`linalg_vector_norm` of
    each, then of their stack), the coefficient
    `min(max_norm / (total + 1e-6), 1)`, and every gradient multiplied by it
    (phase `optimizer`). A gradient of a sharded parameter (`loom.shard`,
    after loom-fsdp) is only this rank's shard, so the shards' contribution
    is completed by a `loom.all_reduce_start` over the shard axes (of the
    squared norm with `reduce <sum>` for norm 2, of the norm with
    `reduce <max>` for inf), as DTensor's partial norm is; after loom-replicate
    the gradients are already averaged and whole, so the norm is local and
    there is no collective. On a pipeline rank's step
    (`loom.pipeline_actions`) this rank's norm is completed over the
    pipeline ranks, the axes its sends and receives run over, the same way
    (torchtitan's `clip_grad_norm_` over its pp mesh); a gradient this rank
    only holds a copy of (`loom.pipeline_grad_from`: a parameter several
    ranks hold, whose REDUCE_GRAD ran on another) counts there, not here,
    and is scaled all the same.

    Parameter groups. `param-groups` gives some parameters their own
    learning rate and weight decay, as the dicts of `torch.optim.AdamW([{
    "params": ..., "weight_decay": 0.0}, ...])` do. It is a list of rules
    separated by `;`, each `MATCH:KEY=VALUE[:KEY=VALUE]`, tried in order: a
    parameter takes the settings of the first rule it matches, a parameter
    no rule matches takes the defaults (`lr`, `weight-decay`). MATCH is
    `ndim<N` or `ndim>=N` (the parameter's rank: `ndim<2` is the usual "no
    decay on biases and norm weights"), or a `|`-separated list of
    parameter names and globs (`*.bias|norm.weight`). KEY is `lr` or
    `weight-decay`. Each update then carries its group's hyperparameters in
    its optimizer attribute:

    ```mlir
    // --loom-attach-optimizer="optimizer=adamw lr=0.01 param-groups=ndim<2:weight-decay=0"
    %b1, %s:2 = loom.optimizer_update #loom.adamw<lr = 0.01, weight_decay = 0.0> param %b grad %gb state [...]
    %w1, %t:2 = loom.optimizer_update #loom.adamw<lr = 0.01> param %w grad %gw state [...]
    ```

    A rule that matches no parameter, a name listed by two rules, an
    unknown key or a value PyTorch would reject is an error that names the
    rule. (Capture writes the groups of a real `torch.optim` optimizer as
    one rule per group listing its parameters' names.)

    Learning-rate schedule. `lr-warmup-steps` = W > 0 warms up as
    `LinearLR(start_factor=lr-warmup-start-factor, total_iters=W)`;
    `lr-decay` = `cosine` or `linear` then decays over `lr-decay-steps` = T
    as `CosineAnnealingLR(T_max=T, eta_min=lr-eta-min)` or
    `LinearLR(1, lr-end-factor, total_iters=T)`; `step` multiplies the rate
    by `lr-gamma` every T steps (`StepLR(step_size=T, gamma)`, gamma 0.1
    unless given) and `exponential` every step (`ExponentialLR(gamma)`,
    which needs `lr-gamma`); `multistep` multiplies it by `lr-gamma` at
    each step of `lr-milestones` (`MultiStepLR(milestones, gamma)`, gamma
    0.1 unless given; steps counted from the end of the warm-up, as
    SequentialLR hands them over) and `polynomial` decays it to 0 over T
    steps (`PolynomialLR(total_iters=T, power=lr-power)`, power 1 unless
    given); `cosine-restarts` follows the cosine to `lr-eta-min` over T
    steps, then starts again over T * `lr-t-mult` steps, and so on
    (`CosineAnnealingWarmRestarts(T_0=T, T_mult, eta_min)`, T_mult 1 unless
    given); each is chained after the warm-up
    by `SequentialLR(milestones=[W])` (alone without a warm-up). The step
    function records the schedule as `loom.lr_schedule` (a dictionary of
    those values); the runtime computes every group's learning rate from
    its own per-parameter step count with `lr_scheduler`'s recursive
    formulas in float64, so the rate of step k equals
    `scheduler.get_last_lr()` after k `scheduler.step()` calls, bit for bit.

    Implementation. `impl=fused` records `loom.optimizer_impl = "fused"` on
    the step function; the runtime then updates each parameter with ATen's
    fused kernel (`_fused_sgd_`, `_fused_adam_`, `_fused_adamw_`,
    `_fused_adagrad_`), as `torch.optim`'s `fused=True` does, instead of the
    single-tensor loop (`impl=forloop`, the default, records nothing). The
    state tensors are the same either way, so checkpoints move between the
    two. Fused refuses complex parameters, as PyTorch's fused optimizers do,
    and RMSprop, Adadelta, Adamax, RAdam, NAdam and Rprop, which have no
    fused implementation in PyTorch.

    Fails on a step that already has an optimizer attached, and on
    hyperparameters PyTorch would reject (negative learning rate, betas
    outside [0, 1), Nesterov without momentum, a negative max-grad-norm, a
    norm other than 2 or inf, ...), and clipping a pipeline stage function
    (the pipeline ranks' steps clip).
  }];
  let options = [
    Option<"optimizer", "optimizer", "::loom::OptimizerKind",
           /*default=*/"::loom::OptimizerKind::AdamW",
           "The algorithm: sgd, adam, adamw, rmsprop, adagrad, adadelta, "
           "adamax, radam, nadam, rprop or asgd (none attaches nothing)",
           "LOOM_OPTIMIZER_KIND_VALUES">,
    Option<"impl", "impl", "::loom::OptimizerImpl",
           /*default=*/"::loom::OptimizerImpl::Forloop",
           "How the runtime updates: forloop (torch.optim's single-tensor "
           "algorithm) or fused (torch.optim's fused=True kernels)",
           "LOOM_OPTIMIZER_IMPL_VALUES">,
    Option<"lr", "lr", "double",
           /*default=*/"std::numeric_limits<double>::quiet_NaN()",
           "Learning rate (unset: PyTorch's default for the algorithm, "
           "1e-3 for sgd, adam and adamw, 1e-2 for rmsprop, adagrad, rprop "
           "and asgd, 2e-3 for adamax and nadam, 1.0 for adadelta)">,
    Option<"momentum", "momentum", "double", /*default=*/"0.0",
           "SGD and RMSprop momentum factor">,
    Option<"dampening", "dampening", "double", /*default=*/"0.0",
           "SGD dampening of the momentum">,
    Option<"nesterov", "nesterov", "bool", /*default=*/"false",
           "SGD: use Nesterov momentum">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"-1.0",
           "Weight decay; negative means PyTorch's default for the "
           "algorithm (0.01 for adamw, 0 for sgd and adam)">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9",
           "Adam/AdamW/Adamax/RAdam/NAdam betas[0]">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999",
           "Adam/AdamW/Adamax/RAdam/NAdam betas[1]">,
    Option<"eps", "eps", "double",
           /*default=*/"std::numeric_limits<double>::quiet_NaN()",
           "Adam/AdamW/RMSprop/Adagrad/Adadelta/Adamax term added to the "
           "denominator (unset: PyTorch's default, 1e-8, Adagrad's 1e-10, "
           "Adadelta's 1e-6)">,
    Option<"amsgrad", "amsgrad", "bool", /*default=*/"false",
           "Adam/AdamW: the AMSGrad variant">,
    Option<"alpha", "alpha", "double",
           /*default=*/"std::numeric_limits<double>::quiet_NaN()",
           "RMSprop smoothing constant (unset: 0.99); ASGD: power of the eta "
           "update (unset: 0.75)">,
    Option<"centered", "centered", "bool", /*default=*/"false",
           "RMSprop: normalise by the estimated variance of the gradient">,
    Option<"adagradLrDecay", "adagrad-lr-decay", "double", /*default=*/"0.0",
           "Adagrad learning-rate decay (its lr_decay)">,
    Option<"initialAccumulatorValue", "initial-accumulator-value", "double",
           /*default=*/"0.0", "Adagrad: the value its sum starts from">,
    Option<"decoupledWeightDecay", "decoupled-weight-decay", "bool",
           /*default=*/"false",
           "RAdam/NAdam: decoupled weight decay (AdamW's, on the parameter)">,
    Option<"rho", "rho", "double", /*default=*/"0.9",
           "Adadelta: decay of its running averages">,
    Option<"momentumDecay", "momentum-decay", "double", /*default=*/"4.0e-3",
           "NAdam: momentum decay (its momentum_decay)">,
    Option<"etaminus", "etaminus", "double", /*default=*/"0.5",
           "Rprop: step-size factor where the gradient changes sign "
           "(etas[0])">,
    Option<"etaplus", "etaplus", "double", /*default=*/"1.2",
           "Rprop: step-size factor where it keeps its sign (etas[1])">,
    Option<"lambd", "lambd", "double", /*default=*/"1.0e-4",
           "ASGD: decay term (its lambd)">,
    Option<"t0", "t0", "double", /*default=*/"1.0e6",
           "ASGD: the step at which averaging starts">,
    Option<"stepSizeMin", "step-size-min", "double", /*default=*/"1.0e-6",
           "Rprop: smallest step size (step_sizes[0])">,
    Option<"stepSizeMax", "step-size-max", "double", /*default=*/"50.0",
           "Rprop: largest step size (step_sizes[1])">,
    Option<"maximize", "maximize", "bool", /*default=*/"false",
           "Maximize the objective instead of minimizing it">,
    Option<"maxGradNorm", "max-grad-norm", "double", /*default=*/"0.0",
           "Clip the gradients to this total norm before the update, as "
           "torch.nn.utils.clip_grad_norm_(max_norm) (0: no clipping)">,
    Option<"gradNormType", "grad-norm-type", "std::string",
           /*default=*/"\"2\"",
           "With max-grad-norm: the norm, 2 or inf (clip_grad_norm_'s "
           "norm_type)">,
    Option<"paramGroups", "param-groups", "std::string", /*default=*/"\"\"",
           "Parameter groups: rules MATCH:KEY=VALUE[:KEY=VALUE] separated "
           "by ';', first match wins; MATCH is ndim<N, ndim>=N or "
           "names/globs separated by '|'; KEY is lr or weight-decay">,
    Option<"lrWarmupSteps", "lr-warmup-steps", "int64_t", /*default=*/"0",
           "Linear warm-up steps (LinearLR total_iters; 0: none)">,
    Option<"lrWarmupStartFactor", "lr-warmup-start-factor", "double",
           /*default=*/"1.0 / 3",
           "The warm-up's first learning rate as a fraction of lr "
           "(LinearLR start_factor, in (0, 1])">,
    Option<"lrDecay", "lr-decay", "::loom::LrDecay",
           /*default=*/"::loom::LrDecay::Constant",
           "After the warm-up: constant, cosine (CosineAnnealingLR), "
           "linear (LinearLR), step (StepLR), exponential (ExponentialLR), "
           "multistep (MultiStepLR), polynomial (PolynomialLR) or "
           "cosine-restarts (CosineAnnealingWarmRestarts)",
           "LOOM_LR_DECAY_VALUES">,
    Option<"lrDecaySteps", "lr-decay-steps", "int64_t", /*default=*/"0",
           "Steps of the decay (T_max or total_iters; needs lr-decay)">,
    Option<"lrEtaMin", "lr-eta-min", "double", /*default=*/"0.0",
           "lr-decay=cosine or cosine-restarts: the final learning rate "
           "(eta_min)">,
    Option<"lrEndFactor", "lr-end-factor", "double", /*default=*/"0.0",
           "lr-decay=linear: the final learning rate as a fraction of lr "
           "(end_factor, in [0, 1])">,
    Option<"lrGamma", "lr-gamma", "double", /*default=*/"0.0",
           "lr-decay=step, exponential or multistep: the factor (gamma, > "
           "0; 0: StepLR's and MultiStepLR's 0.1, ExponentialLR has none)">,
    ListOption<"lrMilestones", "lr-milestones", "int64_t",
               "lr-decay=multistep: the steps after the warm-up at which the "
               "rate is multiplied by lr-gamma (milestones, increasing, "
               ">= 1)">,
    Option<"lrPower", "lr-power", "double", /*default=*/"1.0",
           "lr-decay=polynomial: the exponent (power, >= 0)">,
    Option<"lrTMult", "lr-t-mult", "int64_t", /*default=*/"1",
           "lr-decay=cosine-restarts: each period's length over the last "
           "(T_mult, >= 1)">,
  ];
  let dependentDialects = ["::loom::LoomDialect"];
}

def LoomReplicate : Pass<"loom-replicate", "::mlir::ModuleOp"> {
  let summary = "Data parallelism as DDP or FSDP2's replicate: all-reduce the "
                "gradients in buckets or per unit";
  let description = [{
    Turns a single-rank step (captured with the per-rank batch,
    `loom.capture --split N`) into the step every rank of a data-parallel
    group runs, as `DistributedDataParallel` / `replicate` do: parameters
    stay whole on every rank, each rank computes the gradients of its slice
    of the batch, and the gradients are averaged over the ranks before
    anyone uses them. For every step function (`func.func` with
    `loom.step`) the pass

    - declares the mesh `loom.mesh @<mesh> shape <mesh-shape> axes <axes>`
      unless the module already has it (an existing mesh must have the
      shape and axes the options give, when they give one);
    - marks every batch input with `loom.split = #loom.split<@mesh, axes =
      <axes>, dim = 0>` and the loss with `loom.partial = #loom.partial<@mesh,
      axes = <axes>, avg>` (the mean of the ranks' mean losses is the
      single-device loss);
    - groups the `grad` results into buckets exactly as DDP does after its
      first iteration (the Reducer rebuilds its buckets from the order the
      gradients became ready, with `compute_bucket_assignment_by_size` and
      the limits `[first_bucket_bytes_cap, bucket_bytes_cap]`): gradients in
      the order backward produces them (the position of their producers in
      the step); one open bucket per element type; a bucket closes once it
      holds at least its limit, which is `first-bucket-cap-mb` MiB for the
      first bucket of each element type and `bucket-cap-mb` MiB after it
      (`dist._DEFAULT_FIRST_BUCKET_BYTES` is 1 MiB; `DDP(bucket_cap_mb=X)`
      uses X for both, so pass `first-bucket-cap-mb=X` too to mirror it; 0:
      one bucket per gradient). Buckets still open at the end follow in the
      order of their first gradient (DDP's order there is its hash map's);

    - reduces each bucket with one `loom.all_reduce_start ... reduce <avg>`
      over all mesh axes and one `loom.wait`. A bucket of several gradients
      is flattened (`aten::view`) and concatenated (`aten::cat`) into one
      buffer, right after its last gradient is produced, so communication
      can overlap the rest of backward; after the wait it is split back
      (`aten::split_with_sizes`, `aten::view`) right before the first use
      of a reduced gradient (the return, or the optimizer update when one
      is attached). Only the step's results take the reduced gradients;
      other uses inside the step keep the local ones.

    The inserted ops are in phase `backward` and in the module that owns
    the bucket's parameters (their longest common module prefix). With one
    rank the pass only declares the mesh and the attributes: DDP on one
    rank issues no collectives. Buffer mutations (BatchNorm running
    statistics) stay per rank, as DDP with `broadcast_buffers=False`;
    `comm-hook=fp16-compress|bf16-compress` reduces each bucket as
    DDP with PyTorch's `fp16_compress_hook` / `bf16_compress_hook`
    registered: the flat bucket is cast to float16 / bfloat16
    (`aten::_to_copy`), divided by the group size, summed
    (`loom.all_reduce_start ... reduce <sum>`) and cast back before it is
    split, so gradients cross at half the bytes.
    `broadcast-buffers=true` is DDP's default, `broadcast_buffers=True`:
    before forward every buffer takes the value of rank 0 of the group
    (`loom.broadcast_start ... root 0`), the buffers coalesced as DDP's
    `_broadcast_coalesced` does (one flat buffer per element type, closed
    at 250 MiB, its `broadcast_bucket_size`, in the order of the buffers),
    once per step (DDP syncs before the first microbatch's forward only:
    its `no_sync` forwards skip the sync, and so does the synced last one,
    whose flag the `no_sync` forward before it cleared).

    Runs before `loom-attach-optimizer`, which then consumes the reduced
    gradients; fails on a step that already has an optimizer, a collective,
    or a `loom.split`/`loom.partial`. The sends and receives of a pipelined
    (MPMD) step are not data parallelism: each of its steps is distributed
    over `reduce-axes` (`"dp"` of the `[pp, dp]` mesh of
    `loom-pipeline-schedule{dp=D}`), its gradients reduced once, after the
    stage's `REDUCE_GRAD`, as DDP under `no_sync` on every microbatch but
    the last.

    `grouping=units` reduces as FSDP2-based `replicate` (PyTorch's
    `torch.distributed._composable.replicate_with_fsdp`, applied to each
    block and then the root) does instead of in buckets: each unit is one
    parameter group whose gradients are flattened, concatenated and
    all-reduced (`avg`) with one collective right after the last of them is
    produced (the group's post-backward hook), in the order backward
    completes the units. The units are loom-fsdp's, formed by the same code:
    `units` lists module-path prefixes, by default the model's repeated
    blocks, and the root owns the rest (a tied weight belongs to the first
    unit whose forward uses it). There is no all-gather and no
    reduce-scatter: parameters are never sharded. The mesh must be 1-D
    (PyTorch's replicate raises `ValueError` for any other), so a 2-D
    `mesh-shape` or mesh, or a pipelined step, is an error; so are
    `bucket-cap-mb`/`first-bucket-cap-mb` other than their defaults.
    With microbatches (loom-accumulate-gradients first), a unit reduces
    once, on the accumulated mean, as under `set_requires_gradient_sync(
    is_last)`; `unit-settings` takes loom-fsdp's `UNIT:gradient-sync=every`
    for units that all-reduce every microbatch (their reduced microbatch
    gradients are summed, then divided by the microbatch count), and
    refuses the keys that mean nothing without sharding
    (`reshard-after-forward`, `reshard-after-backward`, `all-reduce`,
    `unshard-in-backward`).

    Before (a step of two gradients):

    ```mlir
    func.func @step(..., %x: tensor<2x4xf32> {loom.role = #loom.role<input>})
        -> (tensor<f32> {loom.role = #loom.role<loss>},
            tensor<8xf32> {loom.role = #loom.role<grad>, loom.target = "fc.bias"},
            tensor<8x4xf32> {loom.role = #loom.role<grad>, loom.target = "fc.weight"})
    ```

    After `--loom-replicate="mesh-shape=4"` (one bucket):

    ```mlir
    loom.mesh @dp shape [4] axes ["dp"]
    func.func @step(..., %x: tensor<2x4xf32> {loom.role = #loom.role<input>,
                                             loom.split = #loom.split<@dp, axes = ["dp"], dim = 0>})
        -> (tensor<f32> {loom.partial = #loom.partial<@dp, axes = ["dp"], avg>, ...}, ...) {
      ...
      %f0 = loom.aten "aten::view.default"(%gw) ... -> tensor<32xf32>
      %f1 = loom.aten "aten::view.default"(%gb) ... -> tensor<8xf32>
      %flat = loom.aten "aten::cat.default"(%f0, %f1) ... -> tensor<40xf32>
      %fut = loom.all_reduce_start %flat on @dp axes ["dp"] reduce <avg>
          : tensor<40xf32> -> !loom.future<tensor<40xf32>>
      ...
      %r = loom.wait %fut : !loom.future<tensor<40xf32>> -> tensor<40xf32>
      %p:2 = loom.aten "aten::split_with_sizes.default"(%r) ...
      %rw = loom.aten "aten::view.default"(%p#0) ... -> tensor<8x4xf32>
      %rb = loom.aten "aten::view.default"(%p#1) ... -> tensor<8xf32>
      return %l, %rb, %rw : ...
    }
    ```
  }];
  let options = [
    Option<"meshName", "mesh", "std::string", /*default=*/"\"dp\"",
           "Symbol name of the data-parallel mesh">,
    ListOption<"meshShape", "mesh-shape", "int64_t",
               "Ranks along each mesh axis (required unless the module "
               "already declares the mesh)">,
    ListOption<"axes", "axes", "std::string",
               "Names of the mesh axes (default: one axis \"dp\"); the "
               "gradients are averaged over all of them unless reduce-axes "
               "says otherwise">,
    ListOption<"reduceAxes", "reduce-axes", "std::string",
               "The mesh axes data parallelism runs over (default: all); "
               "a pipelined step's mesh [pp, dp] reduces over \"dp\" only">,
    Option<"bucketCapMb", "bucket-cap-mb", "double", /*default=*/"25.0",
           "Bucket size in MiB, as DDP's bucket_cap_mb; 0 reduces every "
           "gradient on its own">,
    Option<"firstBucketCapMb", "first-bucket-cap-mb", "double",
           /*default=*/"1.0",
           "Size in MiB of the first bucket of each element type, as DDP's "
           "first_bucket_bytes_cap (1 MiB unless bucket_cap_mb is given, "
           "then bucket_cap_mb)">,
    Option<"grouping", "grouping", "::loom::ReplicateGrouping",
           /*default=*/"::loom::ReplicateGrouping::Buckets",
           "buckets (DDP: size-capped buckets) or units (FSDP2's replicate: "
           "one all-reduce per unit)", "LOOM_REPLICATE_GROUPING_VALUES">,
    ListOption<"units", "units", "std::string",
               "With grouping=units: module-path prefixes of the units "
               "(default: the model's repeated blocks), as loom-fsdp; the "
               "root is always one">,
    ListOption<"unitSettings", "unit-settings", "std::string",
               "With grouping=units: UNIT:gradient-sync=last|every entries "
               "(loom-fsdp's syntax; UNIT a glob over the units, <root> the "
               "root)">,
    Option<"commHook", "comm-hook", "::loom::CommHook",
           /*default=*/"::loom::CommHook::Allreduce",
           "The DDP communication hook each bucket is reduced with: "
           "allreduce (DDP's default), fp16-compress or bf16-compress "
           "(PyTorch's fp16_compress_hook, bf16_compress_hook)",
           "LOOM_COMM_HOOK_VALUES">,
    Option<"broadcastBuffers", "broadcast-buffers", "bool",
           /*default=*/"false",
           "As DDP's broadcast_buffers=True: every buffer takes rank 0's "
           "value before each step's forward; false keeps each rank's own, "
           "as broadcast_buffers=False">,
  ];
  let dependentDialects = ["::loom::LoomDialect"];
}

def LoomFsdp : Pass<"loom-fsdp", "::mlir::ModuleOp"> {
  let summary = "Shard parameters and gradients over a mesh as FSDP2 fully_shard does";
  let description = [{
    Turns a single-device step (`func.func` with `loom.step`) into the SPMD
    step of PyTorch's FSDP2 (`fully_shard`) on a 1-D mesh, or of HSDP on a
    2-D `(replicate, shard)` mesh. Every rank runs the same program; nothing
    depends on the rank.

    Units. `units` lists module-path prefixes, as `fully_shard` is applied
    to `model.layers[i]`. A unit owns the parameters whose owner module
    (`layers.0.attn.wq` for `layers.0.attn.wq.weight`) is under its prefix
    and under no more specific unit; the root unit owns the rest. A
    parameter used directly by the forward ops of several units (a tied
    weight) belongs to the first of them in program order and is gathered
    and reduced once. The default units are found from the model's
    structure: the blocks of the container with the most numbered children
    (`layers.N`, `stack.N`, a root `Sequential`'s `N`, whatever the name),
    plus the root; with no numbered children, the root alone.

    Sharding. Each parameter argument becomes its local shard: dim 0 is
    zero-padded to a multiple of the shard group size G and rank i holds
    chunk i of `ceil(rows / G)` rows, recorded as `loom.shard` (global shape,
    mesh, axes `["shard"]`). Scalar parameters are rejected, as FSDP2 does.

    Forward. Before the first forward op that uses a unit's parameters,
    one `loom.all_gather_start`/`loom.wait` gathers the whole unit: the
    shards are flattened (`aten::view`), concatenated (`aten::cat`), gathered
    over `"shard"`, split per parameter (`aten::split_with_sizes` on the
    `[G, N]` view, then `aten::reshape`) and the padding is sliced off
    (`aten::slice`). Uses of the parameter read the gathered tensor.

    Backward. A unit that reshards after forward (`reshard-after-forward`)
    gets a second all-gather before its first backward use, and backward
    ops read from it: forward values computed only from the unit's gathered
    parameters (`t(w)`, views, casts) are recomputed from the backward
    gather, as FSDP2's re-all-gather refills the storage those views share.
    After the last gradient of a unit is computed, one reduce-scatter over
    `"shard"` reduces all its gradients (each padded on dim 0, laid out per
    rank chunk like the all-gather buffer), and the step returns the local
    shard gradients. Under HSDP an all-reduce over `"replicate"` follows.

    Modules called more than once per forward. Ops carry the call of each
    enclosing module they ran in (`loom.calls`, from capture), and the unit
    is unsharded per call as FSDP2's hooks are: a unit that reshards after
    forward is gathered again before each later call's first forward use
    (from its post-forward shard under `reshard-after-forward=k`); in
    backward, when one call's backward gives way to another's, the unit is
    gathered again if the previous call's post-backward hook resharded it,
    which FSDP2 runs only when that call's forward inputs require
    gradients (and the unit reshards after backward). The reduce-scatter
    stays one per unit, after the gradient's last term. Gathers made for
    a call carry its `loom.calls`.

    Resharding to k ranks. `reshard-after-forward=k` with 1 < k < S (S the
    shard group size, k dividing S) is FSDP2's post-forward mesh
    `mesh.view(-1, k)`: the mesh factors the shard axis into
    `("shard_outer", "shard_inner")` of sizes (S/k, k), so
    `[S] axes ["shard"]` becomes `[S/k, k] axes ["shard_outer",
    "shard_inner"]` (HSDP: `[R, S/k, k]` with `"replicate"` first). The
    shard group is both axes (the same S ranks in the same order: shards,
    the forward all-gather and the reduce-scatter are unchanged); a group
    over `"shard_inner"` is k consecutive ranks. After the forward
    all-gather each rank keeps its 1/k of the gathered `[S, N]` buffer
    (`loom.all_slice_start` over `"shard_inner"`: rows `[j*S/k,
    (j+1)*S/k)` on rank j of its group, 1/k of every parameter's padded
    rows, as FSDP2's `_sharded_post_forward_param_data`), and the
    backward all-gather runs over `"shard_inner"` from those slices. Every
    unit reshards, the root too (an integer is not `auto`).

    Microbatches. On a step of `loom-accumulate-gradients` (ops tagged
    `loom.microbatch`) every microbatch is unsharded and resharded as
    FSDP2's hooks do on each forward and backward: a unit is all-gathered
    before its first forward use in a microbatch unless it is still
    unsharded, a second time before its backward when it reshards after
    forward, and is resharded after the microbatch's backward. The
    reductions run once, on the accumulated gradients of the last
    microbatch (FSDP2's `set_requires_gradient_sync(is_last)`). With
    `reshard-after-backward=false` (FSDP2's
    `set_reshard_after_backward(is_last)`) a unit stays unsharded from one
    microbatch's backward into the next microbatch's forward; the last
    always reshards. Per step, G units and M microbatches gather
    `(G + G) * M` times with `reshard-after-forward=true`, `G * M` with
    `false` and `G` with `false` and `reshard-after-backward=false`, and
    reduce-scatter G times (the counts PyTorch's
    `test_fully_shard_training.py::TestFullyShardGradientAccumulation`
    expects).

    Shard dims. `shard-dims` shards chosen parameters on another dim, as
    FSDP2's `shard_placement_fn` returns `Shard(d)`: `PARAM:DIM` with PARAM
    a parameter name or glob (`*`) and DIM an integer or `largest` (the
    first dim of the largest size, as PyTorch's tests pick
    `param.shape.index(max(param.shape))`). The argument's `loom.shard`
    names that dim. A dim other than 0 must divide evenly by the shard size
    (FSDP2 pads dim 0 only). The all-gather and reduce-scatter buffers keep
    their layout, one contiguous local shard per rank: after the gather the
    `[G, local...]` view of a parameter is moved to `[..., G, local_d,
    ...]` (`aten::movedim`) and reshaped to the full shape; before the
    reduce-scatter a gradient takes the inverse path.

    Per-unit settings. `unit-settings` gives single units what FSDP2's
    per-module setters give a `fully_shard` module; each entry is
    `UNIT:KEY=VALUE`, UNIT a unit prefix or a glob over the unit names
    (`layers.*`, `*`; the root is `<root>`), applied in order so a later
    entry overrides an earlier one, over the defaults of the global
    options:

    - `reshard-after-forward=auto|true|false`: the unit's own
      `reshard_after_forward` (auto: true but for the root). Integers
      stay global (they factor the mesh).
    - `reshard-after-backward=true|false`: `set_reshard_after_backward(
      is_last)` on this unit only (false keeps it unsharded between
      microbatches).
    - `gradient-sync=last|every`: `last` (the default) reduces the unit's
      accumulated gradients once, as `set_requires_gradient_sync(is_last)`;
      `every` reduces each microbatch's gradients after that microbatch's
      backward and sums the local shards, as a module FSDP2's flag was not
      set on.
    - `all-reduce=last|every` (HSDP): with `gradient-sync=every`, `last`
      reduce-scatters every microbatch but all-reduces over `"replicate"`
      once, the sum of the reduce-scatter outputs, as
      `set_requires_all_reduce(is_last)`; it defaults to the unit's
      gradient-sync, and `every` with `gradient-sync=last` is refused.
    - `unshard-in-backward=true|false`: false skips the pre-backward
      all-gather of a unit whose backward needs none of its parameters
      (`set_unshard_in_backward(False)`, meant for embeddings); a
      backward op that reads one is an error located at that op.

    PyTorch's `TestFullyShardGradientAccumulation` (3 microbatches of
    `Sequential(Linear, MLP, MLP, MLP)`, `fully_shard` on each MLP and the
    root: units `1`, `2`, `3` and the root, G = 4) sets the flags on some
    modules only and counts per step: `some_mlps`, the flags on `1` and
    `2` (`unit-settings=*:gradient-sync=every,1:gradient-sync=last,2:gradient-sync=last`),
    reduce-scatters 4 + 2 * 2 = 8 times; `root_only`
    (`*:gradient-sync=every,<root>:gradient-sync=last`) 4 + 3 * 2 = 10;
    both all-reduce as often under HSDP; `reduce_scatter_only`
    (`*:gradient-sync=every,*:all-reduce=last`) reduce-scatters
    4 * 3 = 12 times and all-reduces 4. With `reshard-after-forward=false`
    and only the root kept unsharded after backward
    (`reshard-after-backward=false unit-settings=...,*:reshard-after-backward=true,<root>:reshard-after-backward=false`)
    the root gathers once and the MLPs every microbatch: 4 + 3 * 2 = 10
    all-gathers.

    Pipelined steps. On the MPMD steps of `loom-pipeline-schedule` (one
    `loom.step` per pipeline rank, with `loom.program_ranks`) the pass
    shards each rank's parameters over one axis of the pipeline's mesh:
    `mesh=pp shard-axes=dp` (the mesh must exist; `mesh-shape` is then not
    needed). Units are formed per step from that rank's parameters (a listed
    unit only on the steps that hold it; one that matches no step's
    parameters is an error). As PyTorch's pipeline schedule drives FSDP2
    (UNSHARD before a stage's first forward, per-microbatch backwards that
    neither reshard nor reduce, REDUCE_GRAD once per step), a unit is
    all-gathered once per step before its first forward use and stays
    unsharded through every microbatch's forward and backward, and its
    gradients are reduce-scattered once, after the schedule's REDUCE_GRAD
    (the sum over microbatches divided by their count): G all-gathers and G
    reduce-scatters per step for G units, whatever the microbatch count.
    `reshard-after-forward` must be `auto` or `false` there (torchtitan's
    setting under pipelining); other values are refused. With
    `param-dtype`, a value traced in the parameters' dtype crosses between
    stages in the compute dtype (PyTorch's stages send bf16 activations and
    gradients): every program retypes its receives so and casts a send
    whose lowered value is in another dtype, one rule on both ends.

    Division. By default the reductions average (`reduce <avg>`, factor =
    data-parallel size). With `gradient-divide-factor` f != that size the
    gradient is divided by f before a summing reduce-scatter (PyTorch's
    pre-multiplied sum); with `reduce-dtype=f16` the factor is split into a
    pre- and post-division as FSDP2 does for fp16.

    Mixed precision. With `param-dtype` the shards are cast
    (`aten::_to_copy`) before the all-gather, so the gather and the forward
    and backward compute run in that dtype; floating batch inputs are cast
    too and the loss is cast back to its type. With `reduce-dtype` the
    gradients are cast to it before the reduce-scatter and back to the
    parameter's dtype afterwards.

    Batch inputs get `loom.split` over every data-parallel axis and the loss
    `loom.partial<avg>`, as for DDP. Run `loom-attach-optimizer` afterwards:
    it updates the local shards.

    Example:

    ```
    loom-opt step.mlir --loom-fsdp="mesh-shape=4 units=layers.0,layers.1"
    ```

    Before (one unit, one parameter of 15 rows):

    ```mlir
    func.func @step(%w: tensor<15x8xf32> {loom.name = "fc.weight", loom.role = #loom.role<parameter>}, ...)
    ```

    After, on 4 ranks:

    ```mlir
    loom.mesh @dp shape [4] axes ["shard"]
    func.func @step(%w: tensor<4x8xf32> {..., loom.shard = #loom.shard<@dp, axes = ["shard"], dim = 0, global = [15, 8]>}, ...) {
      %flat = loom.aten "aten::view.default"(%w) ... -> tensor<32xf32>
      %f = loom.all_gather_start %flat on @dp axes ["shard"] dim 0 : tensor<32xf32> -> !loom.future<tensor<128xf32>>
      %g = loom.wait %f : !loom.future<tensor<128xf32>> -> tensor<128xf32>
      ...
      %r = loom.reduce_scatter_start %buf on @dp axes ["shard"] dim 0 reduce <avg> : tensor<128xf32> -> !loom.future<tensor<32xf32>>
    ```

    Errors (located at the step): `mesh` naming no mesh, `shard-axes` not
    one of its axes, a pipelined step without `mesh`, a mesh that is not 1-D or 2-D or has an
    axis of size 0, a unit prefix that matches no parameter, a
    `reshard-after-forward` integer k that is not a divisor of the shard
    size with 1 <= k <= S (as FSDP2's ValueError),
    scalar parameters, units mixing parameter dtypes, an existing
    `loom.mesh` of the same name with another shape, and a `unit-settings`
    entry that is malformed, matches no unit, has an unknown key or value,
    sets `all-reduce` without HSDP or `every` without gradient sync, sets a
    unit's `reshard-after-forward` under a global integer, or is given on a
    pipelined step; a `shard-dims` entry that is malformed, matches no
    parameter, or names a dim out of range or one that does not divide
    evenly.
  }];
  let options = [
    ListOption<"units", "units", "std::string",
               "Module-path prefixes of the fully_shard units (default: "
               "the blocks of the container with the most numbered "
               "children, plus the root)">,
    ListOption<"meshShape", "mesh-shape", "int64_t",
               "Mesh shape: {N} for FSDP or {R, S} for HSDP with axes "
               "'replicate' and 'shard' (required unless 'mesh' is given)">,
    Option<"meshName", "mesh", "std::string", /*default=*/"\"\"",
           "Shard over one axis of this existing mesh (the [pp, dp] mesh "
           "of loom-pipeline-schedule) instead of declaring one">,
    ListOption<"shardAxes", "shard-axes", "std::string",
               "With 'mesh': the axis of that mesh to shard over">,
    ListOption<"replicateAxes", "replicate-axes", "std::string",
               "With 'mesh': HSDP's replicate axis of that mesh (none: "
               "FSDP over shard-axes)">,
    Option<"reshardAfterForward", "reshard-after-forward", "std::string",
           /*default=*/"\"auto\"",
           "auto (true for every unit but the root), true, false, or an "
           "integer k dividing the shard size: 1 means false, the shard size "
           "true, and any other k reshards to groups of k consecutive "
           "ranks after forward">,
    Option<"reshardAfterBackward", "reshard-after-backward", "bool",
           /*default=*/"true",
           "Reshard every unit after the backward of each microbatch "
           "(false: keep the parameters unsharded from one microbatch of a "
           "loom-accumulate-gradients step to the next; the last always "
           "reshards)">,
    ListOption<"shardDims", "shard-dims", "std::string",
               "The dim each parameter is sharded on, 'PARAM:DIM' with PARAM "
               "a parameter name or glob and DIM an integer or 'largest' "
               "(FSDP2's shard_placement_fn; later entries win; default 0)">,
    ListOption<"unitSettings", "unit-settings", "std::string",
               "Per-unit settings, each 'UNIT:KEY=VALUE' with UNIT a unit "
               "prefix or glob ('<root>' for the root, '*' for all; later "
               "entries win): reshard-after-forward (auto, true, false), "
               "reshard-after-backward (true, false), gradient-sync (last, "
               "every), all-reduce (last, every; HSDP), unshard-in-backward "
               "(true, false)">,
    Option<"paramDtype", "param-dtype", "std::string", /*default=*/"\"\"",
           "Dtype of the all-gather and compute (bf16, f16, f32; empty: "
           "the parameter's)">,
    Option<"reduceDtype", "reduce-dtype", "std::string", /*default=*/"\"\"",
           "Dtype of the gradient reduction (bf16, f16, f32; empty: the "
           "gradient's)">,
    Option<"gradientDivideFactor", "gradient-divide-factor", "double",
           /*default=*/"0.0",
           "Divide gradients by this factor instead of the data-parallel "
           "size (0: the data-parallel size, reduced with avg)">,
  ];
  let dependentDialects = ["::loom::LoomDialect"];
}

def LoomPrefetch : Pass<"loom-prefetch", "::mlir::ModuleOp"> {
  let summary = "Issue FSDP all-gathers early: forward and backward prefetch";
  let description = [{
    Moves the `loom.all_gather_start` of FSDP units earlier, as FSDP2's
    `set_modules_to_forward_prefetch` / `set_modules_to_backward_prefetch`
    and its default one-unit backward prefetch (FSDP1's
    `BackwardPrefetch.BACKWARD_PRE` / `BACKWARD_POST`) do. Run it after
    `loom-fsdp`. Only starts move (with the pure ops that compute their
    input from the sharded parameters: casts, views, the concatenation);
    every `loom.wait` stays right before the first use of the gathered
    parameters, so the collective overlaps the compute in between. The
    runtime issues collectives asynchronously and blocks only at the wait.

    Units are read from the collectives: the `loom.module` of an
    all-gather or reduce-scatter start names its unit (`""` is the root,
    spelled `<root>` in options). An op belongs to the unit with the longest
    prefix of its module path. Each unit has, as FSDP2's hooks,

    - a *pre-forward* point: right after the wait of its forward all-gather;
    - a *pre-backward* point: right after the wait of its backward
      all-gather, or, when it has none (not resharded after forward), right
      before its first backward op;
    - a *post-backward* point: right before its reduce-scatter start.

    At each point the unit prefetches its targets: for a target unit T the
    pass takes T's next all-gather whose wait comes after the point and, if
    its start is later, moves the start to the point (several targets of
    one point are issued in list order). A target already gathered or in
    flight there is left alone, as FSDP2's `unshard()` is a no-op then.

    Forward targets of a unit: its `forward-targets` entry, else the next
    `forward-prefetch` units in forward order (the order of their forward
    all-gathers). Backward targets: its `backward-targets` entry (issued at
    the pre-backward point), else with `backward-prefetch=pre` (FSDP2's
    default) the unit before it in post-forward order (the order in which
    units finish their forward ops, one entry per call of a module called
    more than once, as `loom.calls` tells them apart) issued at its
    pre-backward point (per call: after the unit's gather for that call's
    backward, or before its first backward op), with
    `post` the same unit issued at its post-backward point, and none with
    `none`.

    `bounded` (the default) prefetches what `pre` does, but no earlier than
    the step's memory allows: a prefetched all-gather holds its input and
    its gathered buffer from its start to its wait, so issued at the
    pre-backward point it adds the next unit's parameters to the current
    unit's backward, where the step usually peaks. With `bounded` each start
    (in program order) goes to the earliest op between the pre-backward
    point and its own place at which the bytes it holds early, added to what
    is live there (PeakMemory), stay within the predicted peak of the step
    before any backward prefetch; where none does, it stays. So the default
    never raises the predicted peak and keeps as much overlap as fits under
    it; `pre` is FSDP2's placement whatever it costs.

    Example (`layers.1`'s backward all-gather is issued before `layers.2`
    computes its gradients, instead of after):

    ```
    loom-opt step.mlir --loom-fsdp="mesh-shape=4" --loom-prefetch="forward-prefetch=1"
    loom-opt step.mlir --loom-fsdp="mesh-shape=4" \
      --loom-prefetch="forward-targets=layers.0:layers.1+layers.2 backward-prefetch=post"
    ```

    Errors: an unknown `backward-prefetch` mode, a negative
    `forward-prefetch`, a malformed list entry (`UNIT:T1+T2`), a unit that
    has no collective, a unit listed twice or naming itself. A start whose
    input depends on an op after the point that cannot move (a random op)
    stays where it is, with a warning.
  }];
  let options = [
    Option<"forwardPrefetch", "forward-prefetch", "int64_t", /*default=*/"0",
           "Every unit prefetches the all-gathers of the next N units in "
           "forward order (FSDP2 default: 0)">,
    ListOption<"forwardTargets", "forward-targets", "std::string",
               "Explicit forward prefetch lists 'UNIT:T1+T2' (the root is "
               "'<root>'); a listed unit ignores forward-prefetch">,
    Option<"backwardPrefetch", "backward-prefetch", "::loom::BackwardPrefetch",
           /*default=*/"::loom::BackwardPrefetch::Bounded",
           "bounded (pre within the step's peak, the default), pre (FSDP2's "
           "default, FSDP1 BACKWARD_PRE), post (FSDP1 BACKWARD_POST) or "
           "none", "LOOM_BACKWARD_PREFETCH_VALUES">,
    ListOption<"backwardTargets", "backward-targets", "std::string",
               "Explicit backward prefetch lists 'UNIT:T1+T2', issued at "
               "the unit's pre-backward point; a listed unit does no "
               "default prefetch">,
  ];
  let dependentDialects = ["::loom::LoomDialect"];
}

def LoomBucket : Pass<"loom-bucket", "::mlir::ModuleOp"> {
  let summary = "Coalesce consecutive small FSDP all-gathers and reduce-scatters";
  let description = [{
    Merges runs of consecutive `loom.all_gather_start`s (and, separately,
    of `loom.reduce_scatter_start`s) into one collective each, as
    bucketing passes of SimpleFSDP/Inductor and grouping several modules
    in one `fully_shard` call do: fewer, larger collectives pay the
    per-collective latency once. Run it after `loom-fsdp` (and
    `loom-prefetch`).

    Collectives are consecutive when no other collective of their kind lies
    between them in program order; a bucket takes them while they run on
    the same mesh and axes, on dim 0, in the same phase and element type
    (and reduction), and while the bucket's unsharded bytes (all-gather
    output, reduce-scatter input) stay within `bucket-bytes`. A collective
    larger than the limit stays alone.

    - All-gathers: the inputs are flattened and concatenated; the merged
      start takes the place of the first start (the later inputs, pure ops
      of the sharded parameters, move up with it) and the merged wait the
      place of the first wait. The result is viewed as `[G, N]`, split per
      member (`aten::split_with_sizes` on dim 1) and reshaped to each
      member's result, so every rank's chunk lands where the member's own
      gather put it.
    - Reduce-scatters: each input is viewed as `[G, n]` and the blocks are
      concatenated on dim 1, so rank r's chunk holds its chunk of every
      member; the merged start and wait take the place of the last start
      (when every gradient is ready) and its wait; the result is split per
      member. Uses of an earlier member's result move after the merged
      wait.

    ```
    loom-opt step.mlir --loom-fsdp="mesh-shape=4" --loom-bucket="bucket-bytes=4096"
    ```

    `bucket-bytes=0` (the default) leaves the step unchanged. A negative
    limit is an error. Under HSDP the reduce-scatters merge and each unit's
    all-reduce over `"replicate"` follows the merged wait. The merged
    collective's `loom.module` is the members' longest common module path
    and its location is named `loom.bucket:<units>`.
  }];
  let options = [
    Option<"bucketBytes", "bucket-bytes", "int64_t", /*default=*/"0",
           "Largest unsharded size in bytes of a merged collective (0: no "
           "bucketing)">,
  ];
  let dependentDialects = ["::loom::LoomDialect"];
}

def LoomRemat : Pass<"loom-remat", "::mlir::func::FuncOp"> {
  let summary = "Recompute forward ops in backward instead of saving them";
  let description = [{
    Activation checkpointing as structure. For every step function
    (`func.func` with `loom.step`) the pass splits the forward ops of the
    chosen groups into *saved* ops, whose outputs live from forward to
    backward as before, and *recomputed* ops, which run a second time in
    backward: one `loom.recompute` region per group, placed right before the
    first backward op that needs one of its values, re-executes the
    recomputed ops that backward needs (and the recomputed ops those need),
    and backward reads the region's results instead of the forward values.
    Those forward values then die after their last forward use. Forward uses
    are untouched, so the forward computes exactly what it computed before.

    Groups and what they save, by `mode`:

    - `full`: `checkpoint_wrapper` on every module of `modules` (default:
      the `layers.N` blocks, as `loom-fsdp` picks its units). An op belongs
      to the longest listed prefix of its `loom.module`. Everything the
      block computes is recomputed from what it reads from outside (its
      input, the parameters, buffers).
    - `selective`: the same blocks, saving the outputs of the ops whose cost
      is FLOPs, as torchtitan's op-level SAC policy: `mm`, `addmm`, `bmm`,
      `baddbmm`, `matmul`, `linear`, every scaled-dot-product attention
      kernel and every convolution; the rest (pointwise, normalisation,
      views, softmax) is recomputed.
    - `captured`: one group per `loom.ac_region` id that capture put on the
      forward ops of a `torch.utils.checkpoint` region, saving the ops whose
      `loom.ac_policy` is `must_save` or `prefer_save` and recomputing the
      rest (an untagged op of a region is recomputed, as checkpoint without
      a policy does).
    - `none` (default): nothing.

    In every mode the ops named in `save-ops` (ATen names, with or without
    the overload) are saved, and so are:

    - random ops (`native_dropout`, `rand_like`, ...): a second draw would
      give another mask, so their outputs are saved and backward sees the
      forward's numbers;
    - in-place ops and the values they write to (through views), which a
      second run would not reproduce;
    - a block's outputs that backward ops of other modules read, or that
      another block's region recomputes from: they stay alive for backward
      anyway (PyTorch's next block saved its input), and recomputing them
      would move the whole block's recompute ahead of the consumer's
      backward.

    Views are recomputed like any other op: a view of a saved value costs no
    memory and no time, so the region reads the saved base and views it
    again. A saved op whose operands are recomputed is simply a region input.

    Before (a block of two ops, `--loom-remat="mode=full modules=layers.0"`):

    ```mlir
    %h = loom.aten "aten::mm.default"(%x, %w) {loom.module = "layers.0", loom.phase = #loom.phase<forward>} ...
    %y = loom.aten "aten::relu.default"(%h) {loom.module = "layers.0", loom.phase = #loom.phase<forward>} ...
    ...
    %d = loom.aten "aten::threshold_backward.default"(%g, %y) {loom.module = "layers.0", loom.phase = #loom.phase<backward>} ...
    ```

    After:

    ```mlir
    %h = loom.aten "aten::mm.default"(%x, %w) ...
    %y = loom.aten "aten::relu.default"(%h) ...
    ...
    %r = loom.recompute "layers.0" (%x, %w) : (...) -> tensor<4x8xf32> {
    ^bb0(%a: tensor<4x8xf32>, %b: tensor<8x8xf32>):
      %0 = loom.aten "aten::mm.default"(%a, %b) ...
      %1 = loom.aten "aten::relu.default"(%0) ...
      loom.yield %1 : tensor<4x8xf32>
    } {loom.module = "layers.0", loom.phase = #loom.phase<backward>}
    %d = loom.aten "aten::threshold_backward.default"(%g, %r) ...
    ```

    The body's ops are copies of the forward ops with their attributes
    (`loom.module`, `loom.phase<forward>`); the region runs in backward.
    Forward ops left without uses (a `detach` only backward read) are
    erased. A group with nothing to recompute gets no region. The result
    depends only on the IR and the options.

    Run it first: before `loom-accumulate-gradients` (which copies the
    regions into every microbatch), `loom-replicate` and `loom-fsdp` (whose
    backward all-gather feeds the regions' parameter inputs), as PyTorch
    applies `checkpoint_wrapper` before `fully_shard`. On a step already
    split into microbatches each microbatch's ops form their own group.

    Errors (located at the step): `modules` with a mode other than `full`
    or `selective`, `save-ops` with mode `none`, a module prefix that is
    empty or has no forward op, a `save-ops` name that is not `aten::...`,
    `full`/`selective` on a step with no `layers.N` blocks and no
    `modules`, `captured` on a step without `loom.ac_region` tags. A
    `save-ops` entry that names no forward op of the recomputed modules is
    a warning: it saves nothing.
  }];
  let options = [
    Option<"rematMode", "mode", "::loom::RematMode",
           /*default=*/"::loom::RematMode::None",
           "none, full (checkpoint every block), selective (save matmul, "
           "attention and convolution outputs) or captured (the checkpoint "
           "regions capture recorded)", "LOOM_REMAT_MODE_VALUES">,
    ListOption<"rematModules", "modules", "std::string",
               "Module-path prefixes of the checkpointed blocks (full and "
               "selective; default: every 'layers.N')">,
    ListOption<"rematSaveOps", "save-ops", "std::string",
               "ATen ops whose outputs are always saved (e.g. "
               "aten::gelu)">,
  ];
  let dependentDialects = ["::loom::LoomDialect"];
}

def LoomPipelineSplit : Pass<"loom-pipeline-split", "::mlir::ModuleOp"> {
  let summary = "Cut a step into pipeline stages: one forward and one backward function per stage";
  let description = [{
    Cuts the captured step (one microbatch's forward, loss and backward) into
    `stages` stage programs at module boundaries, as
    `torch.distributed.pipelining` runs one submodule per stage. Stage `s`
    becomes two functions, `@<step>_s<s>_forward` and `@<step>_s<s>_backward`
    (attributes `loom.pipeline_stage = s` and `loom.phase`), whose arguments
    are the parameters, buffers, constants and batch inputs they read and
    the values other parts of the step make, and whose results are the
    values other parts read, the loss and the parameter gradients. A value
    that crosses functions is named by `loom.pipeline_value = "KEY"` on the
    result that makes it and on every argument that reads it, so the
    functions connect by name (`loom-pipeline-schedule` turns a crossing
    between stages on different ranks into a send and a receive).

    Stages follow forward order. `boundaries` names the module where each
    stage after the first starts (`boundaries=layers.2` cuts a 4-layer model
    into layers 0-1 and layers 2-3 plus what follows); by default the
    repeated blocks (`layers.N`) are cut into contiguous groups whose
    forward and backward FLOPs are as even as possible, what precedes the
    first block joins stage 0 and what follows the last joins the last
    stage. Without `boundaries`, a cut pinned on the module
    (`loom.pipeline_boundaries`, which `loom-sac-ilp` sets so that the
    regions it adds do not move the cut it decided on) is taken instead;
    either way the pass records the cut it made there. Without
    `layers.N` blocks the units are the root's children, or, under a module
    that is the root's only child (a wrapper that holds the model and adds
    the loss), that module's children, and so on down. An op of a module
    whose forward lies within one stage takes that stage. An op of the root
    module (the loss, activations between blocks), or of a module the cut
    spans (the model under such a wrapper, a module called again after the
    cut), takes, in forward, the latest stage of its operands (or, reading
    only parameters and inputs, the stage where it stands in forward
    order), and in backward the stage of the forward values it reads, so
    each stage's backward differentiates its own forward and only gradients
    of stage inputs cross back; a parameter such ops read in two stages is
    shared between them. A parameter or buffer no op reads goes to the
    forward of its module's stage (or the nearest enclosing module's, else
    stage 0), so that its ranks keep and checkpoint it. With
    `split-backward`, each backward is cut in two, as zero-bubble schedules
    need: `@<step>_s<s>_backward_input` (`loom.pipeline_part = "input"`: the
    ops the gradients sent to other stages depend on) and
    `@<step>_s<s>_backward_weight` (`"weight"`: the rest, which only makes
    parameter gradients). Forward values
    only flow to the same or later stages and gradients to the same or
    earlier ones; a step that needs otherwise is refused, naming both ops.

    Recompute. Run `loom-remat` before the split: a `loom.recompute`
    region goes to the stage of the forward ops it re-runs (one that spans
    two stages is refused, naming both ops), into the input-gradient part
    under `split-backward` (the weight-gradient part reads what it
    recomputed), and the default cut counts the FLOPs inside regions.

    ```mlir
    // loom-opt --loom-pipeline-split="stages=2"
    func.func @step_s0_forward(%w0: ... {loom.name = "fc1.weight", ...}, %x: ...)
        -> (tensor<8x64xf32> {loom.pipeline_value = "relu"})
        attributes {loom.pipeline_stage = 0 : i64, loom.phase = #loom.phase<forward>}
    func.func @step_s1_forward(%h: tensor<8x64xf32> {loom.pipeline_value = "relu"}, ...)
        -> (tensor<f32> {loom.role = #loom.role<loss>}, ...)
    ```
  }];
  let options = [
    Option<"ppStages", "stages", "int64_t", /*default=*/"2",
           "Number of pipeline stages">,
    ListOption<"ppBoundaries", "boundaries", "std::string",
               "Module paths where stages 1..S-1 start (default: balanced by FLOPs)">,
    Option<"ppSplitBackward", "split-backward", "bool", /*default=*/"false",
           "Cut each stage's backward into its input-gradient and "
           "weight-gradient parts (for zero-bubble schedules)">,
  ];
}

def LoomPipelineSchedule
    : Pass<"loom-pipeline-schedule", "::mlir::ModuleOp"> {
  let summary = "One step per pipeline rank: run a pipeline schedule over the stage functions";
  let description = [{
    Instantiates a schedule of `torch.distributed.pipelining` (`GPipe`,
    `1F1B`, `Interleaved1F1B`, `LoopedBFS`, `InterleavedZeroBubble`,
    `ZBVZeroBubble`, `DualPipeV`) over the stage functions of
    `loom-pipeline-split`: the per-rank action lists (PyTorch's schedule IR,
    lowered with its sends, receives and `REDUCE_GRAD`; the list is kept on
    the step as `loom.pipeline_actions`) become, for each rank `r` of the
    mesh `@pp` (axis `"pp"`, created here), one `loom.step` function
    `@<step>_pp<r>` with `loom.program_ranks = array<i64: r>`:

    - `F`/`B` of stage `s` on microbatch `k`: a copy of the stage's forward
      or backward function, every op tagged `loom.microbatch = k`; batch
      inputs take M times the rows and each microbatch reads its slice;
    - a value a stage on another rank reads: a `loom.send_start` right after
      it is made; its `loom.recv_start` is posted where the schedule has the
      `RECV_F`/`RECV_B` of that microbatch (or, for a value that skips
      stages, right before it is read) and waited for right before its first
      use. Each transfer has a `tag` unique in the step. A forward send is
      waited for right before the backward of its stage and microbatch,
      once a gradient from its receiver arrived (the receiver computed with
      it, so the wait cannot block), which frees the activation; gradient
      sends are waited for at the end of the step, as PyTorch's runtime
      waits for all its sends;
    - gradients of each microbatch's backward are summed; at `REDUCE_GRAD`
      of a stage they are divided by M (PyTorch's `scale_grads`), and a
      parameter two stages share (tied weights) has its gradient sent to the
      other ranks that hold it, so every copy takes the same update;
    - the loss (on the rank of the last stage) is the mean of the
      microbatch losses.

    With `dp=D > 1` (data parallelism inside each stage) the mesh is
    `@pp shape [P, D] axes ["pp", "dp"]`, ranks row-major (rank = pp index
    * D + dp index), and the step of pipeline rank `r` runs on the D ranks
    of row `r` (`loom.program_ranks`); sends and receives stay over
    `["pp"]`, so each dp rank talks to the same dp index of the next stage.
    `loom-replicate` / `loom-fsdp` then reduce over `"dp"`. With
    `replicate=R > 1` as well (HSDP inside each stage) the data-parallel
    axis is HSDP's: `@pp shape [P, R, D/R] axes ["pp", "replicate",
    "shard"]`, the same ranks in the same order, for `loom-fsdp{mesh=pp
    shard-axes=shard replicate-axes=replicate}`.

    `pp` defaults to the number of stages over the stages per rank the
    schedule runs (1 for GPipe and 1F1B, 2 otherwise), `microbatches` to the
    module's `#loom.run_config`. The zero-bubble schedules' `I` and `W` run
    the input- and weight-gradient parts that `loom-pipeline-split
    {split-backward=true}` makes (a `B` runs both); without them those
    schedules are refused. DualPipeV's overlapped forward-backward pairs run
    one after the other, as PyTorch 2.9's runtime runs them.
  }];
  let options = [
    Option<"ppSchedule", "schedule", "std::string", /*default=*/"\"1F1B\"",
           "GPipe, 1F1B, Interleaved1F1B, LoopedBFS, InterleavedZeroBubble, "
           "ZBVZeroBubble or DualPipeV">,
    Option<"ppRanks", "pp", "int64_t", /*default=*/"0",
           "Pipeline ranks (default: stages / stages per rank)">,
    Option<"microbatches", "microbatches", "int64_t", /*default=*/"0",
           "Microbatches per step (default: the run configuration's)">,
    Option<"dpRanks", "dp", "int64_t", /*default=*/"1",
           "Data-parallel ranks per pipeline rank: the mesh becomes "
           "[pp, dp] with axes [\"pp\", \"dp\"]">,
    Option<"replicas", "replicate", "int64_t", /*default=*/"1",
           "With dp=D: HSDP's replicas R inside each stage; the mesh "
           "becomes [pp, R, D/R] with axes [\"pp\", \"replicate\", "
           "\"shard\"]">,
  ];
}

def LoomAccumulateGradients
    : Pass<"loom-accumulate-gradients", "::mlir::func::FuncOp"> {
  let summary = "Gradient accumulation: run the step on M microbatches, average";
  let description = [{
    Turns a step captured for one microbatch (`loom.capture --microbatches
    M`) into a step over M microbatches, as a training loop that calls
    `backward()` M times before `optimizer.step()` (with
    `set_requires_gradient_sync(False)` on all but the last): every batch
    input gets M times the rows on dim 0, the step body is repeated once
    per microbatch on rows `[k*b, (k+1)*b)` (`aten::slice`), and the loss
    and every gradient are the mean over the microbatches (summed with
    `aten::add`, divided by M), which is the gradient of the whole batch's
    mean loss. The microbatches run one after the other, so only one
    microbatch's activations are live at a time.

    Run it before `loom-replicate` or `loom-fsdp`: the data-parallel
    reduction then happens once, on the accumulated gradients, as DDP's
    or FSDP2's last microbatch does. Every op of microbatch k's copy
    (slices included) carries `loom.microbatch = k`, which `loom-fsdp`
    uses to gather and reshard per microbatch; the accumulation ops carry
    none. Buffer mutations (BatchNorm's running statistics) chain:
    microbatch k reads the buffers microbatch k - 1 wrote, as the module
    run M times updates them M times, and the step returns the last
    microbatch's. Fails on steps with user outputs, and on a step that
    already has an optimizer or collectives.

    ```mlir
    // --loom-accumulate-gradients="microbatches=2": x: tensor<2x4xf32> -> tensor<4x4xf32>
    %x0 = loom.aten "aten::slice.Tensor"(%x) {args = [#loom.arg<0>, 0, 0, 2, 1]} ...
    ... the step on %x0 ...
    %x1 = loom.aten "aten::slice.Tensor"(%x) {args = [#loom.arg<0>, 0, 2, 4, 1]} ...
    ... the step on %x1 ...
    %s = loom.aten "aten::add.Tensor"(%g0, %g1) ...
    %g = loom.aten "aten::div.Tensor"(%s) {args = [#loom.arg<0>, 2.0]} ...
    ```
  }];
  let options = [
    Option<"microbatches", "microbatches", "int64_t", /*default=*/"1",
           "Microbatches per step (1: leave the step as it is)">,
  ];
  let dependentDialects = ["::loom::LoomDialect"];
}

def LoomSyncBatchNorm : Pass<"loom-sync-batch-norm", "::mlir::ModuleOp"> {
  let summary = "nn.SyncBatchNorm: batch statistics over every data-parallel rank";
  let description = [{
    A model converted with `nn.SyncBatchNorm.convert_sync_batchnorm` traces
    on one process as plain batch norm (SyncBatchNorm falls back to
    `F.batch_norm` when no process group runs), so capture marks the
    training-mode forward of each such module with `loom.sync_batch_norm`.
    On a data-parallel step (its batch inputs carry `loom.split`) this pass
    makes every marked op and its backward compute what SyncBatchNorm's
    autograd function computes over the ranks the batch is split over:

    - forward: each rank's per-channel mean and biased variance
      (`aten::var_mean`) are all-gathered (`loom.all_gather_start`) and
      merged into the statistics of all ranks' rows (the mean of the means;
      the mean of the variances plus the variance of the means, as
      `batch_norm_gather_stats_with_counts` merges equal counts); the
      output is `aten::_native_batch_norm_legit_no_training` with them, and
      the running statistics move toward them with the global count's
      unbiased variance;
    - backward: the per-channel sums of `dy` and `dy * (x - mean)` are
      summed over the ranks (`loom.all_reduce_start ... reduce <sum>`) and
      the input gradient is `batch_norm_backward_elemt`'s
      `(dy - sum_dy / N - (x - mean) * invstd^2 * sum_dy_xmu / N) * invstd
      * weight` with N the rows of all ranks; the weight and bias gradients
      stay this rank's sums, which data parallelism then averages.

    On one rank, or on a step no data-parallel pass split, it changes
    nothing (SyncBatchNorm on a group of one is batch norm). Run it after
    `loom-replicate` or `loom-fsdp` (and their prefetch and bucketing),
    before `loom-attach-optimizer`. `loom-remat` and `loom-sac-ilp` never
    recompute a marked op (its statistics come from a collective), so its
    outputs are saved. Fails, naming the module, on a marked op inside a
    `loom.recompute` region all the same, on a pipelined step, and on
    inputs that are not f32 or f64 (FSDP's mixed precision).

    ```mlir
    // before (a rank's 4 of 8 rows, split over @dp axes ["dp"] of 2 ranks)
    %r:5 = loom.aten "aten::_native_batch_norm_legit_functional.default"(%x, %w, %b, %rm, %rv)
        {args = [..., true, 0.1, 1.0e-05], loom.sync_batch_norm} ...
    // after
    %v:2 = loom.aten "aten::var_mean.correction"(%x) ...
    %s = loom.aten "aten::cat.default"(%v#1, %v#0) ...
    %f = loom.all_gather_start %s on @dp axes ["dp"] dim 0 : tensor<16xf32> -> ...
    ...
    %y:3 = loom.aten "aten::_native_batch_norm_legit_no_training.default"(%x, %w, %b, %mean, %var) ...
    ```
  }];
  let dependentDialects = ["::loom::LoomDialect"];
}

def LoomKernelWorkspace : Pass<"loom-kernel-workspace", "::mlir::ModuleOp"> {
  let summary = "Attach a measured kernel workspace profile to the module";
  let description = [{
    Reads the profile `loom-run --kernel-workspace FILE` wrote (on the
    machine and with the threads the step will run with) and attaches it to
    the module as `loom.kernel_workspace`: a dictionary from kernel
    signature (the qualified ATen kernel, its tensor inputs and results as
    dtype and sizes, each list sorted, e.g.
    `aten::mm.default(bf16[16,8],bf16[8,4])->(bf16[16,4])`) to the bytes a
    run of that kernel held beyond its results. The peak-memory analysis
    then counts those bytes while each such op runs, in place of its own
    rules (`getKernelScratchBytes`), so `loom-sac-ilp`, `loom-schedule`,
    the bounded prefetch and the compile summary see the oneDNN reorders,
    im2col columns and bf16 packing buffers no formula predicts
    (docs/recompute.md, "Kernel workspace"). Ops whose signature the
    profile lacks keep the analysis' rules.

    A file that is not such a profile, or that was measured on another
    device than the CPU, is an error naming the file and the key.

    ```
    loom-run step.loomx --batches batches.safetensors --steps 2 \
        --kernel-workspace ws.json
    loom-opt step.mlir --loom-kernel-workspace=file=ws.json ...
    ```
  }];
  let options = [
    Option<"kernelWorkspaceFile", "file", "std::string", /*default=*/"\"\"",
           "The profile loom-run --kernel-workspace wrote">,
  ];
  let dependentDialects = ["::loom::LoomDialect"];
}

def LoomSacIlp : Pass<"loom-sac-ilp", "::mlir::ModuleOp"> {
  let summary = "Choose what to save and what to recompute under a memory budget";
  let description = [{
    Selective activation checkpointing for the whole step, as a mixed
    integer program solved with CBC. For every forward op of the recompute
    blocks (`modules`) it decides whether its outputs are saved for
    backward or recomputed there, so that the per-rank peak memory stays
    within `budget` at the least recompute time on the cost model's device,
    and then builds the `loom.recompute` regions as `loom-remat` does.

    By default the blocks are the whole step's: the repeated blocks
    (`layers.N`, as `loom-fsdp` picks its units) and, as blocks of their
    own, the modules around them (for each op outside them, the shortest
    prefix of its module path that holds no layer: `tok_embeddings`,
    `norm`, `output`, or `model.norm` where the layers are
    `model.layers.N`). A model without repeated blocks is decided on its
    top-level modules. Only the root module's own ops (a loss computed in
    the step) stay saved.

    The peak it bounds is that of the program the runtime will run: the
    pass runs the rest of the pipeline (`pipeline`, e.g. the FSDP sharding,
    optimizer and lowering that follow it; loom-compile passes its own) on a
    copy of the module and reads the liveness of every value there, FSDP's
    gathered parameters, gradients, optimizer state and collective buffers
    included; recompute is priced on that copy too, as `loom-simulate`
    prices it. Random and in-place ops are always saved. Each distinct
    block's trade-off curve (recompute time against the bytes it keeps) is
    traced once; then one MILP over the whole step picks a point of it per
    block, so identical blocks may decide differently where their place in
    the step makes one's saved values cost more. After applying the
    decision the pass measures the result again on a copy; if the
    profile's peak exceeds the budget (the model's estimate of a region's
    working room was short) it tightens the bound by the excess and solves
    again.

    A pipelined step (the `pipeline` splits and schedules it) is one
    program per pipeline rank, each with its own peak: the pass decides
    each program's blocks against that program's profile, and pins the
    stage cut it planned under on the module (`loom.pipeline_boundaries`).
    With the cut pinned the programs are independent, so one copy gives
    every program's profile and one copy per round checks every program's
    decision.

    The module records the budget (`loom.memory_budget`, the tightest
    recorded); the artifact carries it, and loom-run warns on every rank
    whose measured peak is above it.

    A budget no decision meets is an error that names the smallest peak the
    step reaches with every block recomputed, and the op where that peak
    occurs. A `time-limit` that is not positive or a `gap` outside [0, 1)
    is an error before any solve. The decision depends only on the IR and
    the options (CBC runs deterministically on one thread), so every rank
    makes the same one.

    ```
    loom-opt step.mlir --loom-sac-ilp="budget=1.6GiB device=h100 \
        pipeline=loom-fsdp{mesh-shape=4},loom-lower-to-rt"
    ```
  }];
  let options = !listconcat(Loom_CostModelOptions, [
    Option<"sacBudget", "budget", "std::string", /*default=*/"\"\"",
           "Per-rank peak memory budget: bytes, or a number with KiB, MiB, "
           "GiB, KB, MB or GB (required)">,
    ListOption<"sacModules", "modules", "std::string",
               "Module-path prefixes of the recompute blocks (default: the "
               "layers.N blocks and the modules around them)">,
    Option<"sacPipeline", "pipeline", "std::string", /*default=*/"\"\"",
           "The passes that run after this one, run on a copy to measure "
           "liveness (textual pipeline on builtin.module; empty: measure the "
           "step as it is)">,
    Option<"sacTimeLimit", "time-limit", "double", /*default=*/"10",
           "CBC's time limit in seconds">,
    Option<"sacGap", "gap", "double", /*default=*/"0",
           "CBC's relative optimality gap (0: optimal)">,
    Option<"sacReport", "report", "bool", /*default=*/"false",
           "Print the decision, predicted peak and recompute time, and each "
           "distinct block's trade-off curve, to stderr">,
  ]);
  let dependentDialects = ["::loom::LoomDialect"];
}

#endif // LOOM_TRANSFORMS_PASSES_TD
